#!/bin/bash
test_description='two coffer runs at once: the second waits, or with --no-wait refuses; nothing runs twice'
. "$(dirname "$0")/../lib.sh"
require_coffer

test_expect_success 'setup' '
	coffer_init_keyfile repo &&
	mkdir data &&
	echo some data >data/file &&
	cat >p.policy <<-EOF &&
	[repository]
	path = $TMP/repo
	key-file = $TMP/key
	[dataset ds]
	path = $TMP/data
	full = weekly sunday 02:00
	incremental = daily 02:00
	EOF
	# The first run stops in its backup, after reading the file, until
	# it is told to go on.
	cat >hold.sh <<-EOF
	touch "$TMP/holding"
	while ! [ -e "$TMP/go" ]; do sleep 0.05; done
	EOF
'

test_expect_success 'while one run holds the lock, --no-wait refuses (exit 3) and says who holds it' '
	COFFER_TEST_BEFORE_CHANGE_CHECK="sh $TMP/hold.sh" \
		"$COFFER" run -v --policy p.policy --now 2026-12-02T03:00:00Z \
		>first.out 2>first.err &
	echo $! >first.pid &&
	while ! [ -e holding ]; do sleep 0.05; done &&
	test_expect_code 3 coffer run --no-wait --policy p.policy \
		--now 2026-12-02T03:00:00Z >second.out 2>second.err &&
	cat second.err &&
	grep "lock" second.err &&
	grep "pid $(cat first.pid)" second.err &&
	test_must_be_empty second.out
'

test_expect_success 'a run that waits decides after the first is done: nothing twice' '
	"$COFFER" run --policy p.policy --now 2026-12-02T03:00:00Z --json \
		>third.out 2>third.err &
	third=$! &&
	touch go &&
	wait $(cat first.pid) &&
	wait $third &&
	cat first.out third.out &&
	grep "^backup  *ds  *full  *ok" first.out &&
	json_check third.out "@{\$j->{actions}} == 0 && \$j->{status} == 0" &&
	coffer -r repo snapshots --json >snaps.json &&
	json_check snaps.json "@\$j == 1 && \$j->[0]{state} eq q(complete)" &&
	coffer -r repo log --json >log.json &&
	json_check log.json "@\$j == 1"
'

test_done
