#!/bin/bash
test_description='restore as root: a directory swapped for a symlink before its metadata is set'
. "$(dirname "$0")/../lib.sh"

# A restore run as root gives directories their owners as it creates them,
# and their modes and times once everything in them is written.  A local
# user who owns a restored directory may meanwhile rename what is in it and
# put a symlink to a directory outside the target in its place: setting the
# metadata of the directories below it by name would then change the
# outside directory.  COFFER_TEST_BEFORE_DIR_METADATA (tests only) runs the
# user's move at that point, after every entry is written.

if test "$(id -u)" != 0; then
	test_skip_all "needs root (restored owners)"
fi
as_user() {
	setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"
}
if ! as_user true 2>/dev/null; then
	test_skip_all "cannot run a command as uid 65534 (no setpriv?)"
fi

# Paths, types, modes, owners and times below a directory, and the
# directory itself.
state() {
	(cd "$1" && find . -printf '%p %y %m %U:%G %T@\n' | sort)
}

test_expect_success 'setup: a directory owned by a user, deep directories below it' '
	chmod 0755 "$TMP" &&
	mkdir -p src/home/sub/deep/deeper &&
	printf "in deep\n" >src/home/sub/deep/f.txt &&
	printf "deeper\n" >src/home/sub/deep/deeper/g.txt &&
	chown 65534:65534 src/home src/home/sub &&
	chmod 0711 src/home/sub/deep &&
	chmod 0750 src/home/sub/deep/deeper &&
	touch -d "2001-01-01 00:00" src/home/sub/deep/deeper src/home/sub/deep \
		src/home/sub src/home &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b.json &&
	id=$(json_get b.json "\$j->{snapshot}") &&
	mkdir -p outside/deep/deeper &&
	chmod 0700 outside/deep outside/deep/deeper &&
	touch -d "2002-02-02 00:00" outside/deep/deeper outside/deep outside &&
	state outside >outside.before
'

# The user's move: sub, below home (theirs), becomes a symlink to outside.
swap() {
	echo "setpriv --reuid=65534 --regid=65534 --clear-groups -- sh -c \
		\"mv $TMP/$1/home/sub $TMP/$1/home/sub.moved &&
		ln -s $TMP/outside $TMP/$1/home/sub\""
}

test_expect_success 'a new target: the move is refused or harmless' '
	COFFER_TEST_BEFORE_DIR_METADATA=$(swap tgt) \
		coffer -r repo restore "$id" tgt 2>err; echo $? >rc &&
	cat err rc &&
	case $(cat rc) in 0|1) ;; *) false ;; esac &&
	state outside >outside.after &&
	test_cmp outside.before outside.after
'

test_expect_success 'over an earlier restore (--force), the user swaps a directory: nothing outside changes' '
	coffer -r repo restore "$id" tgt3 &&
	chmod 0700 tgt3/home/sub/deep tgt3/home/sub/deep/deeper &&
	COFFER_TEST_BEFORE_DIR_METADATA=$(swap tgt3) \
		coffer -r repo restore --force "$id" tgt3 2>err; echo $? >rc &&
	cat err rc &&
	test "$(cat rc)" = 1 &&
	test -L tgt3/home/sub &&
	state outside >outside.after &&
	test_cmp outside.before outside.after &&
	grep "home/sub/deep.*cannot open it" err &&
	test "$(stat -c "%a %u %Y" tgt3/home)" = \
		"$(stat -c "%a %u %Y" src/home)"
'

test_expect_success 'what was not moved has its metadata' '
	test "$(stat -c "%a %u %Y" tgt/home)" = \
		"$(stat -c "%a %u %Y" src/home)"
'

test_expect_success 'without the move, every directory has its metadata' '
	coffer -r repo restore "$id" tgt2 &&
	for d in home home/sub home/sub/deep home/sub/deep/deeper; do
		test "$(stat -c "%a %u:%g %Y" tgt2/$d)" = \
			"$(stat -c "%a %u:%g %Y" src/$d)" || return 1
	done
'

test_done
