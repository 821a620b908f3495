#!/bin/bash
test_description='an "error:" line always comes with a failing exit status; the suite checks every run'
. "$(dirname "$0")/../lib.sh"

# Each run of coffer in a test script is recorded (COFFER_TEST_EXITS, set
# by lib.sh) and test_done fails the script if one printed "error:" and
# returned success.  Here the runs meant to do that record elsewhere.

test_expect_success 'an error with a command that succeeded: exit 5, said once' '
	COFFER_TEST_EXITS=$TMP/other COFFER_TEST_ERROR=1 \
		test_expect_code 5 coffer version >out 2>err &&
	cat err &&
	test -s out &&
	grep "^error: COFFER_TEST_ERROR is set" err &&
	grep "^error: .version. reported an error above: exit status 5, not 0\$" err &&
	test_line_count = 2 err
'

test_expect_success 'the record names it, and the suite check finds it' '
	cat other &&
	grep "^5 0 2 version\$" other &&
	test_exits_bad other >bad &&
	test_line_count = 1 bad
'

test_expect_success 'an error with a command that failed: its own status, no more said' '
	COFFER_TEST_EXITS=$TMP/other2 COFFER_TEST_ERROR=1 \
		test_expect_code 3 coffer -r nowhere snapshots 2>err &&
	cat err &&
	! grep "reported an error above" err &&
	test_exits_bad other2 >bad && test_must_be_empty bad
'

test_expect_success 'quiet changes nothing of it' '
	COFFER_TEST_EXITS=$TMP/other3 COFFER_TEST_ERROR=1 \
		test_expect_code 5 coffer -q version >out 2>err &&
	grep "exit status 5, not 0" err
'

# A FIFO among the key slots: a command that only passes by it (a key
# added) warns and succeeds; key list, whose output it is, fails (4).
test_expect_success 'warnings alone leave a success a success' '
	coffer_init_keyfile repo &&
	mkdir src && echo one >src/one &&
	coffer -r repo backup ds src &&
	mkfifo repo/keys/fifo &&
	echo s3cret-pass >pp && chmod 600 pp &&
	coffer -r repo key add --new-passphrase-file pp --kdf-memory 8 \
		>out 2>err &&
	cat err &&
	grep "^warning: .*keys/fifo" err && ! grep "^error:" err &&
	test_expect_code 4 coffer -r repo key list >list 2>err &&
	cat err &&
	grep "^warning: .*keys/fifo" err &&
	grep "^error: .*1 key slot cannot be read" err
'

test_done
