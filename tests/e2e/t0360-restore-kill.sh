#!/bin/bash
test_description='restore killed with SIGKILL mid-way: no file looks whole that is not, a re-run makes the tree'
. "$(dirname "$0")/../lib.sh"

# A restore dies (kill -9, a crash, the machine stopping) between writing
# a file's data and giving it its path (COFFER_TEST_RAISE=restore-write,
# coffer(1)'s TEST HOOKS), with other files in flight on other threads.
# Every file at its own path must then be whole, no temporary name may be
# left for the next run to trip over, and a file that was there before
# (--force) must be the old one or the new one, whole; restoring again
# with --force must make the tree exactly.

require_treecmp

# Every regular file below $1 is the same as in $2 or in $3 (if given),
# and none has a temporary name.
whole_files() {
	(cd "$1" && find . -type f) >files &&
	while read -r f; do
		cmp -s "$2/$f" "$1/$f" ||
			{ test -n "$3" && cmp -s "$3/$f" "$1/$f"; } ||
			{ echo "torn: $f"; return 1; }
	done <files &&
	find "$1" -name ".coffer-*" >left &&
	test_must_be_empty left
}

test_expect_success 'setup: small files in a few directories, backed up' '
	for d in a b c d; do
		mkdir -p src/$d &&
		for i in $(seq 1 40); do
			head -c $((i * 97 + 1000)) /dev/urandom >src/$d/f$i || return 1
		done || return 1
	done &&
	chmod 0640 src/a/f1 && chmod 0750 src/b &&
	touch -d "2020-01-02 03:04:05" src/c/f7 src/d &&
	coffer_init_keyfile repo &&
	coffer -r repo backup ds src >/dev/null
'

test_expect_success 'killed after the 50th file is written: what is there is whole' '
	test_expect_code 137 env COFFER_TEST_RAISE=restore-write:50:KILL \
		"$COFFER" -r repo restore --threads 2 ds@latest rst &&
	n=$(find rst -type f | wc -l) &&
	test "$n" -ge 1 && test "$n" -lt 160 &&
	whole_files rst src
'

test_expect_success 'restored again with --force: the tree exactly' '
	coffer -r repo restore --force --root-metadata ds@latest rst &&
	treecmp src rst &&
	find rst -name ".coffer-*" >left &&
	test_must_be_empty left
'

test_expect_success 'over a live tree (--force), killed: each file the old one or the new one' '
	rm -rf live && cp -a src live &&
	for f in live/*/f*; do
		printf "live %s\n" "$f" >"$f" || return 1
	done &&
	rm -rf before && cp -a live before &&
	# Over an existing file a writer links its file under a temporary
	# name and renames it into place: with two writers, a kill may come
	# between the two on the other one and leave that name.
	test_expect_code 137 env COFFER_TEST_RAISE=restore-write:70:KILL \
		"$COFFER" -r repo restore --threads 2 --force ds@latest live &&
	(cd live && find . -type f ! -name ".coffer-*") >files &&
	while read -r f; do
		cmp -s "src/$f" "live/$f" || cmp -s "before/$f" "live/$f" ||
			{ echo "torn: $f"; return 1; }
	done <files &&
	test "$(wc -l <files)" = 160 &&
	coffer -r repo restore --force --root-metadata ds@latest live &&
	treecmp src live &&
	find live -name ".coffer-*" >left &&
	test_must_be_empty left
'

test_expect_success 'a temporary name an earlier run left is removed by the next one, nothing else' '
	rm -rf live && cp -a src live && mkdir live/e &&
	echo stale >live/.coffer-0123456789abcdef &&
	echo stale >live/a/.coffer-fedcba9876543210 &&
	ln -s /etc/passwd live/b/.coffer-00000000000000aa &&
	echo mine >live/a/.coffer-keep &&
	echo mine >live/a/.coffer-0123 &&
	echo mine >live/a/.coffer-0123456789ABCDEF &&
	mkdir live/c/.coffer-0123456789abcdef &&
	echo mine >live/e/.coffer-0123456789abcdef &&
	coffer -r repo restore --force ds@latest live &&
	test_path_is_missing live/.coffer-0123456789abcdef &&
	test_path_is_missing live/a/.coffer-fedcba9876543210 &&
	test -L live/b/.coffer-00000000000000aa &&
	test -f /etc/passwd &&
	test_path_is_file live/a/.coffer-keep &&
	test_path_is_file live/a/.coffer-0123 &&
	test_path_is_file live/a/.coffer-0123456789ABCDEF &&
	test_path_is_dir live/c/.coffer-0123456789abcdef &&
	test_path_is_file live/e/.coffer-0123456789abcdef
'

test_done
