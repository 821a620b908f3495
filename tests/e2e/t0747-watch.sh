#!/bin/bash
test_description='coffer watch: each checkpoint step captured within seconds of its marker, never before it'
. "$(dirname "$0")/../lib.sh"
require_coffer

# settle is compared with the host's clock, as the file times are; the
# waits below poll for the snapshot with a generous timeout, and the only
# bound checked is the issue's: a step in a snapshot within 10 s of its
# marker (settle 2 s), measured loosely with the shell's clock.
SETTLE=2

test_expect_success 'setup: one step complete, one being written, a policy' '
	coffer_init_keyfile repo &&
	COFFER_REPO=$TMP/repo && export COFFER_REPO &&
	mkdir -p ck/step_001 ck/step_002 &&
	echo w1 >ck/step_001/w.bin && echo done >ck/step_001/COMPLETE &&
	echo w2-part >ck/step_002/w.bin &&
	cat >p.policy <<-EOF
	[repository]
	path = $TMP/repo
	key-file = $TMP/key
	[dataset ck]
	path = $TMP/ck
	full = weekly sunday 00:00
	incremental = hourly :00
	checkpoints = step_*
	require = COMPLETE
	settle = ${SETTLE}s
	EOF
'

now() {
	date +%s.%N
}

# step N: a step written as a trainer does, shards over a second, the
# marker last; its time into marked.N.
step() {
	mkdir -p ck/step_$1 &&
	for s in 1 2 3
	do
		head -c 50000 /dev/urandom >ck/step_$1/shard-$s.bin &&
		sleep 0.3 || return 1
	done &&
	echo done >ck/step_$1/COMPLETE &&
	now >marked.$1
}

# in_latest PATH: the newest snapshot of ck holds PATH (the newest by
# the host's clock: the runs below take one of their own, years ahead).
in_latest() {
	coffer ls "ck@$(date -u -d "+1 min" +%Y-%m-%dT%H:%M:%SZ)" >ls.out 2>/dev/null &&
	grep -q " $1\$" ls.out
}

# captured N: step N is in a snapshot, within a generous timeout; then
# within 10 s of its marker.
captured() {
	for i in $(seq 120)
	do
		if in_latest step_$1/COMPLETE
		then
			echo "step_$1 captured $(echo "$(now) - $(cat marked.$1)" | bc) s after its marker" &&
			test "$(echo "$(now) - $(cat marked.$1) <= 10" | bc)" = 1
			return
		fi
		sleep 0.25
	done
	echo "step_$1 not captured" && false
}

start_watch() {
	"$COFFER" watch --policy p.policy "$@" >>watch.out 2>>watch.err &
	echo $! >watch.pid
}

# stop_watch: SIGTERM, and it must be gone within 5 s, with status 0.
stop_watch() {
	pid=$(cat watch.pid) &&
	kill -TERM $pid &&
	for i in $(seq 50)
	do
		kill -0 $pid 2>/dev/null || break
		sleep 0.1
	done &&
	! kill -0 $pid 2>/dev/null &&
	wait $pid
}

test_expect_success 'at start: the complete step is caught up, the one being written waited for' '
	now >marked.001 &&
	start_watch &&
	captured 001 &&
	! in_latest step_002/w.bin &&
	echo w2 >ck/step_002/w.bin && echo done >ck/step_002/COMPLETE &&
	now >marked.002 &&
	captured 002
'

test_expect_success 'a trainer writing a step every few seconds: each captured, an unmarked one never' '
	mkdir ck/step_bad && echo torn >ck/step_bad/w.bin &&
	(for n in 003 004 005; do step $n && sleep 1 || exit 1; done) &
	trainer=$! &&
	captured 003 && captured 004 && captured 005 &&
	wait $trainer &&
	! in_latest step_bad/w.bin &&
	for sid in $(coffer snapshots --json | perl -MJSON::PP -e "
		print \"\$_->{id}\n\" for grep { \$_->{state} eq q(complete) }
		@{decode_json(join q(), <STDIN>)}")
	do
		coffer ls $sid >ls.all || return 1
		! grep step_bad ls.all || return 1
	done
'

test_expect_success 'SIGTERM stops it within seconds, exit 0; each capture is in coffer log' '
	stop_watch &&
	cat watch.out &&
	test_must_be_empty watch.err &&
	coffer log >log.out &&
	grep "backup  *ck  *incremental  *ok  *capture of .*step_005" log.out
'

test_expect_success 'a step completed while watch was down is caught up at start' '
	step 006 &&
	start_watch --metrics-file watch.prom &&
	captured 006 &&
	stop_watch &&
	grep "^coffer_watch_capture_delay_seconds{dataset=\"ck\"} [0-9]" watch.prom &&
	! grep coffer_run_ watch.prom
'

test_expect_success 'coffer run'"'"'s metrics file has the capture delay too' '
	coffer run --policy p.policy --metrics-file run.prom &&
	grep "^coffer_watch_capture_delay_seconds{dataset=\"ck\"} [0-9]" run.prom &&
	grep "^coffer_run_exit_status 0" run.prom
'

test_expect_success 'kill -9 mid-capture: no running snapshot after the next start' '
	cat >slow.sh <<-\EOF &&
	case $COFFER_TEST_PATH in
	*step_007/*) touch "$TMP/capturing"; sleep 30 ;;
	esac
	EOF
	COFFER_TEST_BEFORE_CHANGE_CHECK="sh $TMP/slow.sh" start_watch &&
	step 007 &&
	for i in $(seq 100); do test -e capturing && break; sleep 0.2; done &&
	test -e capturing &&
	kill -9 $(cat watch.pid) &&
	! wait $(cat watch.pid) &&
	coffer snapshots --json >snaps.json &&
	json_check snaps.json "grep({ \$_->{state} eq q(running) } @\$j) == 1" &&
	start_watch &&
	captured 007 &&
	stop_watch &&
	coffer snapshots --json >snaps.json &&
	json_check snaps.json "!grep({ \$_->{state} eq q(running) } @\$j) &&
		grep({ \$_->{state} eq q(failed) } @\$j) == 1"
'

test_expect_success 'COFFER_WATCH_INOTIFY=0: periodic scans, said once, still within seconds' '
	: >watch.out &&
	COFFER_WATCH_INOTIFY=0 start_watch &&
	step 008 &&
	captured 008 &&
	stop_watch &&
	grep "ck: scanning .* every 2 s: inotify is off (COFFER_WATCH_INOTIFY=0)" watch.out &&
	test $(grep -c scanning watch.out) = 1
'

# A coffer run that stops in its backup, holding the writer lock, until
# it is told to go on.
hold_run() {
	rm -f holding go &&
	cat >hold.sh <<-EOF &&
	case \$COFFER_TEST_PATH in
	*step_001/*) touch "$TMP/holding"
		while ! [ -e "$TMP/go" ]; do sleep 0.05; done ;;
	esac
	EOF
	COFFER_TEST_BEFORE_CHANGE_CHECK="sh $TMP/hold.sh" \
		"$COFFER" run --policy p.policy --now $1 >run.out 2>run.err &
	echo $! >run.pid &&
	for i in $(seq 100); do test -e holding && break; sleep 0.1; done &&
	test -e holding
}

test_expect_success 'watch waits while coffer run holds the lock, then captures' '
	: >watch.out && : >watch.err &&
	start_watch &&
	hold_run 2030-01-01T00:00:00Z &&
	step 009 &&
	sleep 3 &&
	touch go &&
	wait $(cat run.pid) &&
	captured 009 &&
	stop_watch &&
	test_must_be_empty watch.err
'

test_expect_success 'a stop while waiting for the lock is prompt: exit 0' '
	start_watch &&
	hold_run 2030-01-08T00:00:00Z &&
	step 010 &&
	sleep 3 &&
	stop_watch &&
	touch go &&
	wait $(cat run.pid) &&
	grep "stopped waiting for the lock (SIGTERM)" watch.err
'

test_expect_success 'coffer cron --unit watch: a service systemd restarts' '
	coffer cron --policy p.policy --unit watch >unit &&
	grep "^ExecStart=\".*\" watch --policy \"$TMP/p.policy\"\$" unit &&
	grep "^Restart=on-failure\$" unit &&
	coffer cron --policy p.policy >all &&
	grep "watch --policy" all
'

test_expect_success 'a policy without checkpoints: nothing to watch' '
	mkdir plain &&
	sed -e "/checkpoints/d" -e "/require/d" -e "/settle/d" \
		-e "s|$TMP/ck|$TMP/plain|" p.policy >plain.policy &&
	test_must_fail coffer watch --policy plain.policy 2>err &&
	grep "no dataset with checkpoints" err
'

test_done
