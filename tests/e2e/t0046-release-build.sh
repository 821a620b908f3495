#!/bin/bash
test_description='the installed binary has no test hooks: they are only in the one the tests run'
. "$(dirname "$0")/../lib.sh"

# make install installs $COFFER_RELEASE; the suite runs $COFFER, the same
# code with src/util/tuning.c compiled with COFFER_TEST_HOOKS.  A hook
# that runs a shell command or damages what a restore reads back must do
# nothing in the release build, whatever the environment says.

if ! [ -x "$COFFER_RELEASE" ]; then
	echo "Bail out! release binary '$COFFER_RELEASE' not built (run make)"
	exit 1
fi
release() {
	"$COFFER_RELEASE" "$@"
}

test_expect_success 'setup: a repository, a snapshot' '
	mkdir src && echo data >src/f && echo more >src/g &&
	coffer_init_keyfile repo &&
	coffer -r repo backup ds "$TMP/src" >/dev/null
'

test_expect_success 'the test build takes COFFER_TEST_ERROR and COFFER_TEST_EXITS' '
	COFFER_TEST_EXITS=$TMP/test-exits COFFER_TEST_ERROR=1 \
		test_expect_code 5 coffer version >/dev/null 2>err &&
	grep COFFER_TEST_ERROR err &&
	test -s test-exits
'

test_expect_success 'the release build ignores both' '
	COFFER_TEST_EXITS=$TMP/rel-exits COFFER_TEST_ERROR=1 \
		release version >out 2>err &&
	test -s out && test_must_be_empty err &&
	! test -e rel-exits
'

test_expect_success 'the release build runs no hook command' '
	echo new >src/new1 &&
	COFFER_TEST_BEFORE_CHANGE_CHECK="touch \"$TMP/ran-backup\"" \
		release -r repo backup ds "$TMP/src" >/dev/null &&
	COFFER_TEST_BEFORE_DRILL_CHECK="touch \"$TMP/ran-drill\"" \
		release -r repo drill ds@latest >/dev/null &&
	COFFER_TEST_BEFORE_DIR_METADATA="touch \"$TMP/ran-restore\"" \
		release -r repo restore ds@latest out1 >/dev/null &&
	! test -e ran-backup && ! test -e ran-drill && ! test -e ran-restore
'

test_expect_success 'the test build runs them (the hooks above are real)' '
	echo new >src/new2 &&
	COFFER_TEST_BEFORE_CHANGE_CHECK="touch \"$TMP/ran-backup\"" \
		coffer -r repo backup ds "$TMP/src" >/dev/null &&
	COFFER_TEST_BEFORE_DIR_METADATA="touch \"$TMP/ran-restore\"" \
		coffer -r repo restore ds@latest out2 >/dev/null &&
	test -e ran-backup && test -e ran-restore
'

test_expect_success 'the release build raises no signal and damages no restore' '
	COFFER_TEST_RAISE=restore-file:1:KILL COFFER_TEST_CHANGE_RESTORED=1 \
		release -r repo restore ds@latest out3 >/dev/null &&
	treecmp src out3
'

test_expect_success 'no hook variable is read by the release build' '
	for v in COFFER_TEST_EXITS COFFER_TEST_RAISE COFFER_TEST_CHANGE_RESTORED \
		COFFER_TEST_PRUNE_CRASH; do
		! grep -a -q "$v" "$COFFER_RELEASE" || { echo "$v"; return 1; }
	done &&
	grep -a -q COFFER_TEST_RAISE "$COFFER"
'

test_done
