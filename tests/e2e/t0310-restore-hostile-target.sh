#!/bin/bash
test_description='restore --force into a target prepared by a hostile local user'
. "$(dirname "$0")/../lib.sh"

# A local user who can write in the target plants symlinks where the
# restore will put directories and files, and hard links to files outside:
# nothing outside the target may change, nor anything in it that was not
# asked for.  And a file restored early may be changed by the user it is
# restored for before its chunks are copied to a later file.

case $(stat -f -c %T .) in
ext2/ext3 | xfs | btrfs | tmpfs | f2fs | bcachefs) test_set_prereq DIRECT ;;
esac

# Paths, types, modes, times and content hashes below a directory.
state() {
	(cd "$1" && find . -printf '%p %y %m %T@\n' | sort &&
		find . -type f -exec sha256sum {} + | sort)
}

plant() {
	rm -rf "$1" && mkdir -p "$1" &&
	ln -s "$TMP/outside" "$1/dir" &&
	ln -s "$TMP/outside/file" "$1/file.txt" &&
	mkdir "$1/hl" && ln outside/victim "$1/hl/v.txt" &&
	ln -s "$TMP/outside/victim" "$1/hl/w.txt" &&
	printf "not asked for\n" >"$1/unrelated.txt"
}

test_expect_success 'setup: a tree backed up, a directory outside the target' '
	mkdir -p src/dir/sub src/hl &&
	printf "in dir\n" >src/dir/f1.txt &&
	printf "in sub\n" >src/dir/sub/f2.txt &&
	random_file src/dir/sub/big.bin 2 &&
	printf "a file\n" >src/file.txt &&
	printf "restored over a hard link\n" >src/hl/v.txt &&
	ln src/hl/v.txt src/hl/w.txt &&
	chmod 0777 src/dir/sub &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b.json &&
	id=$(json_get b.json "\$j->{snapshot}") &&
	mkdir -p outside/sub &&
	printf "outside, must stay\n" >outside/file &&
	printf "outside f1\n" >outside/f1.txt &&
	printf "outside f2\n" >outside/sub/f2.txt &&
	printf "victim\n" >outside/victim &&
	chmod 0700 outside/sub &&
	touch -d "2001-01-01 00:00" outside/sub outside &&
	state outside >outside.before
'

test_expect_success 'symlinks planted for a directory and a file: nothing outside changes' '
	plant tgt &&
	coffer -r repo restore --force "$id" tgt 2>err || { cat err; false; } &&
	cat err &&
	state outside >outside.after &&
	test_cmp outside.before outside.after &&
	test "$(cat tgt/unrelated.txt)" = "not asked for" &&
	! test -L tgt/dir && ! test -L tgt/file.txt &&
	treecmp src/dir tgt/dir &&
	cmp src/file.txt tgt/file.txt &&
	cmp src/hl/v.txt tgt/hl/v.txt &&
	! test -L tgt/hl/w.txt &&
	test "$(stat -c %i tgt/hl/v.txt)" = "$(stat -c %i tgt/hl/w.txt)"
'

test_expect_success 'a symlink planted one level down' '
	rm -rf tgt && mkdir -p tgt/dir &&
	ln -s "$TMP/outside/sub" tgt/dir/sub &&
	coffer -r repo restore --force "$id" tgt 2>err || { cat err; false; } &&
	state outside >outside.after &&
	test_cmp outside.before outside.after &&
	treecmp src/dir tgt/dir
'

test_expect_success 'a subset restore through a planted symlink: nothing outside changes' '
	plant tgt2 &&
	{ coffer -r repo restore --force "$id" tgt2 dir/sub 2>err; echo $? >rc; } &&
	cat err rc &&
	state outside >outside.after &&
	test_cmp outside.before outside.after &&
	test "$(cat tgt2/unrelated.txt)" = "not asked for" &&
	if test "$(cat rc)" = 0; then
		! test -L tgt2/dir && treecmp src/dir/sub tgt2/dir/sub
	else
		test -L tgt2/dir
	fi &&
	plant tgt3 &&
	{ coffer -r repo restore --force "$id" tgt3 file.txt 2>err; echo $? >rc; } &&
	cat err rc &&
	test "$(cat rc)" = 0 &&
	state outside >outside.after &&
	test_cmp outside.before outside.after &&
	cmp src/file.txt tgt3/file.txt &&
	test -L tgt3/dir
'

test_expect_success 'no temporary name is left in the targets' '
	find tgt tgt2 tgt3 -name ".coffer-*" >left &&
	test_must_be_empty left
'

# Chunks of a file restored earlier are read back from it, not fetched
# again (t0025); here that file changes in between (a test hook: the
# first byte of the first file kept to read back from is flipped, the same
# moment each run), and the copy must still be what was backed up.
test_expect_success DIRECT 'setup: two copies of a file, apart by 24 MiB' '
	mkdir -p shared/a shared/b &&
	random_file shared/a/b.bin 12 &&
	random_file shared/a/z.bin 24 &&
	cp shared/a/b.bin shared/b/b.bin &&
	coffer -r repo backup --json shared shared >s.json &&
	sid=$(json_get s.json "\$j->{snapshot}")
'

test_expect_success DIRECT 'a file changed before it is read back: the copy is exact' '
	COFFER_READ_BACK=always COFFER_TEST_CHANGE_RESTORED=1 \
		coffer -v -r repo restore "$sid" rb >out 2>err &&
	cat out err &&
	cmp shared/b/b.bin rb/b/b.bin &&
	cmp shared/a/z.bin rb/a/z.bin &&
	{ cmp shared/a/b.bin rb/a/b.bin >cmp.out; test $? = 1; } &&
	grep -E "(char|byte) 1," cmp.out
'

test_done
