#!/bin/bash
test_description='a coffer run names in its lock the datasets its policy backs up: a forget beside it keeps what a backup of those may build on, and only in those; coffer locks shows them; a policy that backs up nothing holds nothing back; a dataset name too long for the line holds every dataset'
. "$(dirname "$0")/../lib.sh"
require_coffer

# host N: the state (catalog) of simulated host N.
host() { export XDG_STATE_HOME=$TMP/host$1-state; mkdir -p "$XDG_STATE_HOME"; }

# sid DATASET: the id of DATASET's newest snapshot.
sid() {
	coffer -r repo snapshots --json "$1" >s.json &&
	perl -MJSON::PP -e 'local $/; my $j = decode_json(<STDIN>);
		@$j or die "no snapshot\n"; print $j->[-1]{id}' <s.json
}

# stopped_run POLICY: coffer run of POLICY on host 2, stopped with the
# repository open (its lock held); its pid in rpid.
stopped_run() {
	host 2 &&
	{ COFFER_TEST_RAISE=opened:1:STOP "$COFFER" run --policy "$1" \
		>run.out 2>run.err & } &&
	rpid=$! &&
	wait_stopped $rpid
}

# run_lock 'perl expression': coffer locks lists one run, and of its
# holder ($_) the expression is true.
run_lock() {
	coffer -r repo locks --json >locks.json &&
	cat locks.json &&
	json_check locks.json "(grep { \$_->{command} eq q(run) && $1 } @\$j) == 1"
}

# ended_run: the stopped run goes on and ends well.
ended_run() {
	kill -CONT $rpid &&
	wait $rpid &&
	cat run.out run.err
}

test_expect_success 'setup: datasets a, b and c with a full each' '
	coffer_init_keyfile repo &&
	for d in a b c
	do
		mkdir "src-$d" && echo "$d" >"src-$d/f" || return 1
	done &&
	host 1 &&
	for d in a b c
	do
		coffer -r repo backup --level full "$d" "src-$d" || return 1
	done &&
	A=$(sid a) && B=$(sid b) && C=$(sid c) &&
	cat >ab.policy <<-EOF &&
	[repository]
	path = $TMP/repo
	key-file = $TMP/key
	[dataset a]
	path = $TMP/src-a
	full = daily 00:00
	[dataset b]
	path = $TMP/src-b
	full = daily 00:00
	EOF
	cat >none.policy <<-EOF
	[repository]
	path = $TMP/repo
	key-file = $TMP/key
	[retention]
	schedule = daily 03:00
	keep-last = 5
	EOF
'

test_expect_success 'a run of a policy that backs up a and b names both in its lock' '
	stopped_run ab.policy &&
	run_lock "!defined \$_->{dataset} &&
		join(q(,), @{\$_->{datasets}}) eq q(a,b)" &&
	coffer -r repo locks >locks.out &&
	grep " run .* a/b\$" locks.out
'

test_expect_success 'beside it, a forget refuses to forget what a backup of a or b may build on' '
	host 1 &&
	test_expect_code 2 coffer -r repo forget --dry-run "$A" 2>err &&
	grep "may be the base of a backup running now" err &&
	test_expect_code 2 coffer -r repo forget --dry-run "$B" 2>err &&
	grep "may be the base of a backup running now" err
'

test_expect_success 'but forgets a snapshot of c, which the run does not back up' '
	coffer -r repo forget "$C" &&
	coffer -r repo snapshots --json c >c.json &&
	json_check c.json "@\$j == 0" &&
	ended_run
'

test_expect_success 'a run of a policy that backs up nothing says so, and holds nothing back' '
	stopped_run none.policy &&
	run_lock "ref \$_->{datasets} eq q(ARRAY) && !@{\$_->{datasets}}" &&
	host 1 &&
	coffer -r repo forget --dry-run "$(sid a)" >plan.out &&
	cat plan.out &&
	ended_run
'

# A name the line cannot hold whole (300 bytes) is left out of it, not
# cut short into another name: the backup then holds every dataset.
test_expect_success 'a backup of a dataset whose name is too long for its lock line holds it still' '
	L=$(printf "%0300d" 0) &&
	host 1 &&
	coffer -r repo backup --level full "$L" src-c &&
	host 2 &&
	{ COFFER_TEST_RAISE=opened:1:STOP "$COFFER" -r repo backup \
		--level incremental "$L" src-c >b.out 2>b.err & } &&
	bpid=$! &&
	wait_stopped $bpid &&
	coffer -r repo locks --json >locks.json &&
	cat locks.json &&
	json_check locks.json "(grep { \$_->{command} eq q(backup) &&
		!defined \$_->{dataset} } @\$j) == 1" &&
	host 1 &&
	test_expect_code 2 coffer -r repo forget --dry-run "$(sid "$L")" \
		2>err &&
	grep "may be the base of a backup running now" err &&
	kill -CONT $bpid &&
	wait $bpid &&
	cat b.out b.err
'

test_done
