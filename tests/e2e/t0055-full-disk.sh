#!/bin/bash
test_description='restore into a file system that fills up: what fits is whole, the rest is named and left out, status 5'
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

test_expect_success TMPFS 'with room, the same snapshot restores whole; the repository is sound' '
	coffer -r repo restore ds@latest out &&
	treecmp src out &&
	coffer -r repo verify --read-data
'

test_done
