#!/bin/bash
test_description='restore: content shared between files is read back from the first, exactly'
. "$(dirname "$0")/../lib.sh"

# Checkpoints of a training run: a later step shares part of a shard with
# the step before (a frozen layer) and another shard whole.  Restore
# fetches a shared chunk once and copies it from the file restored first,
# when that file was written directly (a local file system).
case $(stat -f -c %T .) in
ext2/ext3 | xfs | btrfs | tmpfs | f2fs | bcachefs) test_set_prereq DIRECT ;;
esac

# Only a file restored whole is copied from, and a file is done two
# windows (16 MiB) after it is taken: z.bin keeps the steps apart.
test_expect_success 'setup: three checkpoint steps sharing data, backed up' '
	mkdir -p src/ckpt/step_1 src/ckpt/step_2 src/ckpt/step_3 src/text &&
	random_file src/ckpt/step_1/a.bin 12 &&
	random_file src/ckpt/step_1/b.bin 12 &&
	random_file src/ckpt/step_1/z.bin 24 &&
	random_file new 6 &&
	{ head -c $((6 * 1048576)) src/ckpt/step_1/a.bin; cat new; } \
		>src/ckpt/step_2/a.bin &&
	cp src/ckpt/step_1/b.bin src/ckpt/step_2/b.bin &&
	cp src/ckpt/step_1/b.bin src/ckpt/step_3/b.bin &&
	for i in $(seq 1 30); do
		printf "line %s of a small file\n" $i >src/text/f$i.txt
	done &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b.json &&
	id=$(json_get b.json "\$j->{snapshot}")
'

# A record the page cache holds is fetched rather than read back (right
# after a backup, say).  Here the first copy's fetch puts it there, so
# most restores below read back always (COFFER_READ_BACK, for tests).
cache_packs() {
	find repo/packs -type f -exec cat {} + >/dev/null
}

test_expect_success 'restore: every file exact' '
	COFFER_READ_BACK=always coffer -v -r repo restore "$id" out >stdout &&
	cat stdout &&
	treecmp src out
'

test_expect_success DIRECT 'restore: the shared chunks were read back, not fetched' '
	# b.bin twice more, and a.bin'\''s first 6 MiB but the chunk that
	# straddles the change: about 29 MiB.
	grep -E "of it shared, read back" stdout &&
	shared=$(sed -n "s/.*(\([0-9.]*\) MiB of it shared.*/\1/p" stdout) &&
	echo "read back: $shared MiB" &&
	test "${shared%.*}" -ge 24
'

test_expect_success 'restore with the packs in memory: fetched, exact' '
	cache_packs &&
	coffer -v -r repo restore "$id" out-cached >stdout &&
	cat stdout &&
	! grep -F "read back" stdout &&
	treecmp src out-cached
'

test_expect_success 'restore on one thread: every file exact' '
	COFFER_READ_BACK=always coffer -r repo restore --threads 1 "$id" out-1 &&
	treecmp src out-1
'

test_expect_success 'restore under a low limit of open files: every file exact' '
	(ulimit -n 200 && export COFFER_READ_BACK=always &&
		coffer -r repo restore "$id" out-200) &&
	treecmp src out-200 &&
	(ulimit -n 300 && export COFFER_READ_BACK=always &&
		coffer -r repo restore "$id" out-300) &&
	treecmp src out-300
'

# Each file written directly may keep its descriptor until its window is
# done: not a file with nothing worth reading back (here, 1500 sparse
# 2 MiB files of one byte each, that share a window), or the restore ran
# out of descriptors.
test_expect_success 'many large sparse files under a low limit of open files' '
	mkdir -p sparse/s &&
	for i in $(seq 1 1500); do
		printf x >sparse/s/f$i && truncate -s 2M sparse/s/f$i || return 1
	done &&
	coffer -r repo backup --json sparse sparse >sb.json &&
	sid=$(json_get sb.json "\$j->{snapshot}") &&
	(ulimit -n 512 && export COFFER_READ_BACK=always &&
		coffer -r repo restore "$sid" out-sparse) &&
	treecmp sparse out-sparse
'

test_expect_success 'restore of one step alone: exact, nothing to copy from' '
	coffer -v -r repo restore "$id" out-step ckpt/step_2 >stdout &&
	! grep -F "read back" stdout &&
	treecmp src/ckpt/step_2 out-step/ckpt/step_2
'

# Damage in a chunk shared by the three b.bin: the first copy fails, so
# nothing is read back from it and every copy is named; everything else
# is exact.  Then damage in a.bin's last chunk, which step_2 does not
# share (it ends past the 6 MiB they have in common): only step_1/a.bin is
# lost.
# damage PATH SEQ: flip a byte in the middle of that chunk's record
# ("last": its last chunk).
damage() {
	seq=$2 &&
	if test "$seq" = last; then
		seq=$(sqlite3 "$(catalog_db)" "
			SELECT max(cc.seq) FROM entry e
			JOIN path pa ON pa.id = e.path_id
			JOIN content_chunk cc ON cc.content_id = e.content_id
			WHERE pa.name = CAST('$1' AS BLOB)")
	fi &&
	set -- $(chunk_loc "$1" "$seq") &&
	test $# = 3 &&
	flip_byte "$(pack_path "$1")" $(($2 + $3 / 2))
}

test_expect_success 'setup: a copy of the repository' '
	cp -a repo pristine
'

test_expect_success 'a damaged shared chunk: every copy named, the rest exact' '
	damage ckpt/step_1/b.bin 2 &&
	COFFER_READ_BACK=always test_expect_code 4 coffer -r repo restore "$id" out-b 2>err &&
	cat err &&
	restored_or_named out-b >lost &&
	cat lost &&
	test_line_count = 3 lost &&
	grep -F step_1/b.bin lost && grep -F step_2/b.bin lost &&
	grep -F step_3/b.bin lost
'

test_expect_success 'a damaged chunk of one file only: that file alone lost' '
	rm -rf repo && cp -a pristine repo &&
	damage ckpt/step_1/a.bin last &&
	COFFER_READ_BACK=always test_expect_code 4 coffer -r repo restore "$id" out-a 2>err &&
	cat err &&
	restored_or_named out-a >lost &&
	cat lost &&
	test_line_count = 1 lost &&
	grep -F step_1/a.bin lost
'

test_done
