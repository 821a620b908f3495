#!/bin/bash
test_description='a key file others can read is refused, as ssh refuses such a private key'
. "$(dirname "$0")/../lib.sh"

test_expect_success 'setup: a repository with a key file' '
	mktree src --small &&
	coffer_init_keyfile repo &&
	test "$(stat -c %a "$COFFER_KEY_FILE")" = 600 &&
	coffer -r repo backup ds src
'

for mode in 644 640 604 660 620; do
	test_expect_success "a key file of mode $mode is refused, named" '
		chmod '$mode' "$COFFER_KEY_FILE" &&
		test_expect_code 3 coffer -r repo restore ds@latest out 2>err &&
		cat err &&
		test_line_count = 1 err &&
		grep -F "key file '"'"'$COFFER_KEY_FILE'"'"'" err &&
		grep "chmod 600" err &&
		test_path_is_missing out
	'
done

test_expect_success 'mode 600 and 400 are accepted' '
	chmod 600 "$COFFER_KEY_FILE" &&
	coffer -r repo restore ds@latest out &&
	treecmp src out &&
	chmod 400 "$COFFER_KEY_FILE" &&
	coffer -r repo restore ds@latest out2 &&
	treecmp src out2
'

test_expect_success 'a FIFO given as the key file does not hang' '
	mkfifo fifo &&
	test_expect_code 3 timeout 20 "$COFFER" --key-file fifo -r repo \
		restore ds@latest out3 2>err &&
	grep "not a regular file" err
'

test_done
