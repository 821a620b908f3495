#!/bin/bash
test_description='on a terminal, backup shows its progress with an ETA from the dataset'\''s previous snapshot; under cron, nothing'
. "$(dirname "$0")/../lib.sh"

# script(1) gives the run a terminal; the hook slows each file down so
# that the line (redrawn at most four times a second) is drawn.
command -v script >/dev/null && test_set_prereq SCRIPT

on_tty() {
	COFFER_TEST_BEFORE_CHANGE_CHECK="sleep 0.3" \
		script -qec "$*" /dev/null | tr "\r" "\n" >tty.out
}

test_expect_success 'setup: four files, a first full' '
	mkdir src && for i in 1 2 3 4; do random_file src/f$i 1 || return 1; done &&
	coffer_init_keyfile repo &&
	coffer -r repo backup ds "$TMP/src" 2>err && test_must_be_empty err
'

test_expect_success SCRIPT 'a full after a full: progress with an ETA' '
	on_tty "$COFFER" -r repo backup --level full ds "$TMP/src" &&
	cat tty.out &&
	grep -a "backup: [0-9]* files, .*/s, ETA [0-9]*:[0-9][0-9]" tty.out
'

test_expect_success SCRIPT 'the first incremental has nothing to go by: progress, no ETA' '
	random_file src/f5 1 &&
	on_tty "$COFFER" -r repo backup --level incremental ds "$TMP/src" &&
	cat tty.out &&
	grep -a "backup: [0-9]* files" tty.out && ! grep -a ETA tty.out
'

test_expect_success 'without a terminal: not a line' '
	random_file src/f6 1 &&
	COFFER_TEST_BEFORE_CHANGE_CHECK="sleep 0.3" \
		coffer -r repo backup --level full ds "$TMP/src" >out 2>err &&
	test_must_be_empty err
'

test_done
