#!/bin/bash
test_description='a wrong passphrase: one line, status 3, nothing changed'
. "$(dirname "$0")/../lib.sh"

# wrong_pass CMD...: run coffer with a wrong passphrase; it must exit 3 with
# exactly one non-empty line on stderr that says what is wrong.
wrong_pass() {
	test_expect_code 3 env COFFER_PASSPHRASE=Tr0ub4dor "$COFFER" -r repo "$@" \
		>stdout 2>err &&
	cat err &&
	test_line_count = 1 err &&
	grep -i -E "passphrase|key" err
}

test_expect_success 'setup: a passphrase repository with one snapshot' '
	mkdir -p src/sub &&
	printf "one\n" >src/one &&
	printf "two\n" >src/sub/two &&
	COFFER_PASSPHRASE=correct-horse coffer init repo &&
	COFFER_PASSPHRASE=correct-horse coffer -r repo backup --json ds src >b.json &&
	id=$(json_get b.json "\$j->{snapshot}") &&
	repo_fingerprint repo >before
'

# snapshots and ls read only the host-local catalog and need no key; the
# commands that unlock the keys are restore and backup.
test_expect_success 'restore with a wrong passphrase writes nothing' '
	wrong_pass restore "$id" out &&
	test_path_is_missing out
'

test_expect_success 'backup with a wrong passphrase' '
	printf "three\n" >src/three &&
	wrong_pass backup ds src
'

test_expect_success 'a wrong passphrase from --passphrase-file' '
	printf "not it\n" >wrong-pass &&
	chmod 600 wrong-pass &&
	test_expect_code 3 coffer --passphrase-file wrong-pass -r repo \
		restore "$id" out2 2>err &&
	test_line_count = 1 err &&
	grep -F "wrong passphrase" err &&
	test_path_is_missing out2
'

test_expect_success 'a passphrase that differs only by a trailing space' '
	test_expect_code 3 env COFFER_PASSPHRASE="correct-horse " \
		"$COFFER" -r repo restore "$id" out3 2>err &&
	test_line_count = 1 err &&
	test_path_is_missing out3
'

test_expect_success 'a missing passphrase file: one line, an error' '
	test_must_fail coffer --passphrase-file no-such-file -r repo restore "$id" out4 2>err &&
	test_path_is_missing out4 &&
	test_line_count = 1 err &&
	grep -F no-such-file err
'

test_expect_success 'the repository is unchanged, byte for byte' '
	repo_fingerprint repo >after &&
	test_cmp before after
'

test_expect_success 'the right passphrase still works; no snapshot was added' '
	COFFER_PASSPHRASE=correct-horse coffer -r repo snapshots --json >snaps.json &&
	json_check snaps.json "@\$j == 1 && \$j->[0]{state} eq q(complete)" &&
	rm src/three &&
	COFFER_PASSPHRASE=correct-horse coffer -r repo restore "$id" ok &&
	treecmp src ok
'

test_done
