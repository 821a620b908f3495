#!/bin/bash
test_description='restore as root: a hard link'"'"'s first name swapped before the second is linked'
. "$(dirname "$0")/../lib.sh"

# A file with two names, one in a directory a local user owns, the other
# in a directory only root may write.  Restore writes the first name, then
# links the second to it.  The user may meanwhile put a file of their own
# at the first name: linking the second name by the first's path would
# give them a file of theirs (their bytes, their mode) in the root-only
# directory.  COFFER_TEST_BEFORE_HARDLINK (tests only) runs the user's
# swap at that point.

if test "$(id -u)" != 0; then
	test_skip_all "needs root (restored owners)"
fi
as_user() {
	setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"
}
if ! as_user true 2>/dev/null; then
	test_skip_all "cannot run a command as uid 65534 (no setpriv?)"
fi

test_expect_success 'setup: a file with a name in the user'"'"'s directory and one in root'"'"'s' '
	chmod 0755 "$TMP" &&
	mkdir -p src/a-home src/b-root &&
	printf "root'"'"'s secret config\n" >src/a-home/f &&
	chmod 0600 src/a-home/f &&
	ln src/a-home/f src/b-root/g &&
	printf "setgid, so written through libarchive\n" >src/a-home/s &&
	chmod 02640 src/a-home/s &&
	ln src/a-home/s src/b-root/t &&
	chown 65534:65534 src/a-home &&
	chmod 0700 src/b-root &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b.json &&
	id=$(json_get b.json "\$j->{snapshot}")
'

# The user's swap: the first name (COFFER_TEST_PATH, below target $1)
# becomes their own file, mode 0666.
swap() {
	echo "cd $TMP/$1 && setpriv --reuid=65534 --regid=65534 \
		--clear-groups -- sh -c 'rm -f \"\$COFFER_TEST_PATH\" &&
		echo the user >\"\$COFFER_TEST_PATH\" &&
		chmod 0666 \"\$COFFER_TEST_PATH\"'"
}

# The second names are either the files restore made, or not there.
second_is_safe() {
	if test -e "$1/b-root/g"; then
		test "$(stat -c "%u %a" "$1/b-root/g")" = "0 600" &&
		test "$(cat "$1/b-root/g")" = "root's secret config" ||
		{ stat "$1/b-root/g"; cat "$1/b-root/g"; return 1; }
	fi &&
	if test -e "$1/b-root/t"; then
		test "$(stat -c "%u %a" "$1/b-root/t")" = "0 2640" &&
		cmp src/a-home/s "$1/b-root/t" ||
		{ stat "$1/b-root/t"; cat "$1/b-root/t"; return 1; }
	fi
}

test_expect_success 'without a swap, both names are one file' '
	coffer -r repo restore "$id" tgt0 &&
	test "$(stat -c %i tgt0/a-home/f)" = "$(stat -c %i tgt0/b-root/g)" &&
	treecmp src tgt0
'

# In a new target the user's directory is theirs only once everything in
# it is written: the swap fails (or, if it did not, must not matter).
test_expect_success 'a new target: the second name never becomes the user'"'"'s file' '
	COFFER_TEST_BEFORE_HARDLINK=$(swap tgt1) \
		coffer -r repo restore "$id" tgt1 2>err; echo $? >rc &&
	cat err rc &&
	case $(cat rc) in 0|1) ;; *) false ;; esac &&
	second_is_safe tgt1
'

test_expect_success 'restore --force over an earlier restore: the same' '
	coffer -r repo restore "$id" tgt2 &&
	COFFER_TEST_BEFORE_HARDLINK=$(swap tgt2) \
		coffer -r repo restore --force "$id" tgt2 2>err; echo $? >rc &&
	cat err rc &&
	second_is_safe tgt2 &&
	! test "$(cat rc)" = 0 &&
	grep "cannot link .b-root/g. to .a-home/f.: .a-home/f. is no longer" err &&
	grep "cannot link .b-root/t. to .a-home/s.: .a-home/s. is no longer" err
'

test_done
