#!/bin/bash
test_description='full file systems: a restore target (what fits is whole, the rest named), a repository (the run fails and says so, nothing complete is lost)'
. "$(dirname "$0")/../lib.sh"

# Small tmpfs targets: root, and a kernel that lets root mount one here.
# tmpfs takes O_DIRECT (Linux 6.6 and later), so large files fill it
# through the direct writes and small ones through the page cache.
mounts=
small_fs() {
	mkdir -p "$1" &&
	mount -t tmpfs -o "size=$2" coffer-test "$1" 2>/dev/null &&
	mounts="$mounts $1"
}
trap 'for m in $mounts; do umount "$m" 2>/dev/null; done; test_cleanup_' EXIT
if test_have_prereq ROOT && small_fs "$TMP/probe" 1m; then
	test_set_prereq TMPFS
fi

# every_file_whole SRC DST: each regular file under DST is identical to
# the one of the same name under SRC; prints how many there are.
every_file_whole() {
	(cd "$2" && find . -type f) >present || return 1
	while read -r f; do
		cmp -s "$1/$f" "$2/$f" || { echo "torn: $f" >&4; return 1; }
	done <present
	wc -l <present | tr -d " "
}

test_expect_success TMPFS 'setup: large and small files, one snapshot' '
	mkdir -p src/small src/late &&
	random_file src/a.bin 3 &&
	random_file src/b.bin 24 &&
	for i in $(seq 1 40); do
		head -c 204800 /dev/urandom >src/small/f$i || return 1
	done &&
	random_file src/late/z.bin 2 &&
	coffer_init_keyfile repo &&
	coffer -r repo backup ds src
'

test_expect_success TMPFS 'a large file that does not fit: named, left out, status 5' '
	small_fs "$TMP/t16" 16m &&
	test_expect_code 5 coffer -r repo restore ds@latest t16 2>err &&
	cat err &&
	grep -q "^error: cannot write .b\.bin.: No space left on device$" err &&
	! grep -q "damaged" err &&
	grep -q "^error: 1 file could not be restored$" err &&
	test_path_is_missing t16/b.bin &&
	n=$(every_file_whole src t16) &&
	test "$n" = 42 &&
	cmp src/late/z.bin t16/late/z.bin
'

test_expect_success TMPFS 'small files that do not fit: each named, the others whole' '
	small_fs "$TMP/t4" 4m &&
	test_expect_code 5 coffer -r repo restore ds@latest t4 small 2>err &&
	cat err &&
	nfail=$(grep -c "^error: cannot write .small/f[0-9]*.: No space left on device$" err) &&
	test "$nfail" -gt 0 &&
	! grep -q "damaged" err &&
	n=$(every_file_whole src t4) &&
	echo "$n whole, $nfail named" &&
	test $((n + nfail)) = 40
'

# Status 5, not 4: the scratch space was short, the backup is not damaged.
test_expect_success TMPFS 'a drill whose scratch space fills up fails, naming the file, status 5' '
	small_fs "$TMP/t8" 8m &&
	test_expect_code 5 coffer -r repo drill --scratch t8 ds@latest >drill.out 2>err &&
	cat drill.out err &&
	grep -q "^error: cannot write .b\.bin.: No space left on device$" err &&
	grep -q "FAILED *b\.bin: missing: it was not restored" drill.out &&
	grep -q "verdict *fail" drill.out
'

# The repository's disk fills up in the middle of a backup.
rk() {
	COFFER_KEY_FILE=$TMP/rk coffer -r "$TMP/rfs/repo" "$@"
}
test_expect_success TMPFS 'a backup into a full repository disk: status 5, recorded as failed' '
	small_fs "$TMP/rfs" 24m &&
	mkdir src2 && random_file src2/a 3 &&
	coffer init --key-file "$TMP/rk" "$TMP/rfs/repo" &&
	rk backup --json ds2 src2 >b1.json &&
	id1=$(json_get b1.json "\$j->{snapshot}") &&
	cp -a src2 s2.copy &&
	random_file src2/b 40 &&
	test_expect_code 5 rk backup ds2 src2 2>err &&
	cat err &&
	grep -q "No space left on device" err &&
	rk snapshots --json >snaps.json &&
	json_check snaps.json "
		@\$j == 2 or die qq(not two snapshots\n);
		my (\$ok) = grep { \$_->{id} eq q($id1) } @\$j;
		my (\$bad) = grep { \$_->{id} ne q($id1) } @\$j;
		\$ok->{state} eq q(complete) or die qq(first: \$ok->{state}\n);
		\$bad->{state} eq q(failed) or die qq(second: \$bad->{state}\n)" &&
	test_dir_is_empty "$TMP/rfs/repo/tmp"
'

test_expect_success TMPFS 'after it the complete snapshot restores, and with room the next backup completes' '
	rk restore "$id1" r1 &&
	treecmp s2.copy r1 &&
	rk verify --read-data &&
	rm src2/b &&
	rk backup ds2 src2 &&
	rk restore ds2@latest r2 &&
	treecmp src2 r2
'

test_expect_success TMPFS 'with room, the same snapshot restores whole; the repository is sound' '
	coffer -r repo restore ds@latest out &&
	treecmp src out &&
	coffer -r repo verify --read-data
'

test_expect_success TMPFS 'an export to a full or a read-only file system: one line, the cause' '
	small_fs "$TMP/xfull" 1m &&
	mkdir -p "$TMP/xro" && mount -t tmpfs -o ro,size=1m coffer-test "$TMP/xro" &&
	mounts="$mounts $TMP/xro" &&
	test_expect_code 5 coffer -r repo export --target f --to "$TMP/xfull" --all 2>err &&
	cat err && test_line_count = 1 err &&
	grep "No space left on device" err &&
	test_expect_code 5 coffer -r repo export --target r --to "$TMP/xro" --all 2>err &&
	cat err && test_line_count = 1 err &&
	grep "cannot create .*Read-only file system" err &&
	coffer -r repo bundles --json >b.json && json_check b.json "@\$j == 0"
'

test_done
