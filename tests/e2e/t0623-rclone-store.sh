#!/bin/bash
test_description='the rclone store: coffer commands on rclone:REMOTE:PATH over the local backend; an unknown remote, rclone killed mid-backup and coffer killed are clean failures; the storage contract over rclone S3 backend pointed at Swift'
. "$(dirname "$0")/../lib.sh"
require_treecmp

if ! command -v rclone >/dev/null; then
	[ "${CI:-}" != true ] || { echo "Bail out! no rclone (make deps)"; exit 1; }
	test_skip_all "no rclone (make deps)"
fi
T_STORAGE=$BUILD/tests/t-storage
S3OP=$BUILD/tests/s3-op

# A wrapper first on PATH records the pid of each rclone rcd (exec keeps
# it), so that the test can kill it and see that it ends with coffer.
# no_lease_left: no lease object under the remote's locks/ (a shared
# holder's directory, locks/writer.shared/, may stay behind empty: rclone's
# local backend keeps the directories of deleted objects).
no_lease_left() {
	test -z "$(find cloud/repo/locks -type f)" || {
		find cloud/repo/locks -type f; false; }
}

test_expect_success 'setup: a remote by environment, a tree, rclone wrapped' '
	export RCLONE_CONFIG_LOC_TYPE=local &&
	mkdir bin cloud &&
	cat >bin/rclone <<-EOF &&
	#!/bin/sh
	[ "\$1" = rcd ] && echo \$\$ >>"$TMP/rclone.pids"
	exec $(command -v rclone) "\$@"
	EOF
	chmod +x bin/rclone &&
	export PATH=$TMP/bin:$PATH &&
	mkdir spool && export TMPDIR=$TMP/spool &&
	mkdir -p src/d && echo one >src/one && random_file src/d/big 3 &&
	R=rclone:loc:$TMP/cloud/repo
'

# none_left: every rclone that coffer started has ended.
none_left() {
	for p in $(cat rclone.pids); do
		n=0 && while kill -0 $p 2>/dev/null && test $n -lt 250; do
			sleep 0.02; n=$((n + 1)); done
		if kill -0 $p 2>/dev/null; then
			echo "rclone $p is still running"; return 1
		fi
	done
}

test_expect_success 'init, backup, restore: the tree back as it was' '
	coffer_init_keyfile $R &&
	test_path_is_file cloud/repo/coffer.conf &&
	coffer -r $R backup ds src &&
	ls cloud/repo/packs/*/* >packs && test -s packs &&
	coffer -r $R restore ds@latest out &&
	treecmp src out &&
	none_left
'

test_expect_success 'nothing is left in the remote tmp/ nor a lease in locks/, nor a spool' '
	test_dir_is_empty cloud/repo/tmp &&
	no_lease_left &&
	test_dir_is_empty spool
'

test_expect_success 'verify --read-data reads every chunk back' '
	echo two >src/two && coffer -r $R backup ds src &&
	coffer -r $R verify --read-data >v.out &&
	grep "no errors" v.out
'

test_expect_success 'key rotate, then rotate --rewrap: old snapshots still restore' '
	coffer -r $R key rotate &&
	echo three >src/three && coffer -r $R backup ds src &&
	coffer -r $R key rotate --rewrap &&
	coffer -r $R snapshots --json >s.json &&
	first=$(json_get s.json "(sort { \$a->{time} cmp \$b->{time} } @\$j)[0]{id}") &&
	rm -rf out && coffer -r $R restore $first out &&
	test_path_is_file out/one && ! test -e out/two &&
	coffer -r $R verify --read-data
'

test_expect_success 'forget --prune: the newest kept, whole' '
	coffer -r $R forget --keep-last=1 --prune &&
	coffer -r $R snapshots --json >s.json &&
	json_check s.json "@\$j == 1" &&
	rm -rf out && coffer -r $R restore ds@latest out &&
	treecmp src out &&
	coffer -r $R verify --read-data &&
	none_left
'

# rclone answers an unknown remote as it answers a backend that fails
# (500, its error): a store that cannot be reached, status 5, at open as
# at init.
test_expect_success 'an unknown remote: one error line, at open' '
	test_expect_code 5 coffer -r rclone:coffer-no-such-remote:x snapshots \
		2>err &&
	test_line_count = 1 err &&
	grep "^error: repository .rclone:coffer-no-such-remote:x.: .*didn.t find section in config file" err &&
	test_expect_code 5 coffer init --key-file k2 rclone:coffer-no-such-remote:y 2>err &&
	test_line_count = 1 err && grep "didn.t find section" err &&
	none_left
'

test_expect_success 'init refuses a location that holds objects, as a directory that is not empty (exit 2)' '
	test_expect_code 2 coffer init --key-file k3 $R 2>err &&
	grep "^error: .*already holds objects" err
'

# rclone killed while a pack is on its way (slowed by --bwlimit, from
# its environment): the backup fails cleanly, the complete snapshots
# stay, and its lease, which it could not give back, does not stop the
# next backup on this host.
test_expect_success 'rclone killed mid-backup: a clean failure, nothing complete lost' '
	mkdir src2 && random_file src2/a 4 && random_file src2/b 4 &&
	: >rclone.pids &&
	{ RCLONE_BWLIMIT=1M coffer -r $R backup ds2 src2 >kb.out 2>kb.err & } &&
	pid=$! &&
	n=0 && while test -z "$(find cloud/repo/tmp -type f)" &&
		test $n -lt 1500; do sleep 0.02; n=$((n + 1)); done &&
	test -n "$(find cloud/repo/tmp -type f)" &&
	kill -9 $(cat rclone.pids) &&
	{ wait $pid; echo $? >kb.status; } &&
	test "$(cat kb.status)" = 5 &&
	grep "^error: repository .*rclone was killed (signal 9)" kb.err &&
	test $(grep -c "^error:" kb.err) -le 2 &&
	coffer -r $R snapshots --json >s.json &&
	json_check s.json "(grep { \$_->{state} eq q(complete) } @\$j) == 1" &&
	rm -rf out && coffer -r $R restore ds@latest out && treecmp src out &&
	coffer --no-wait -r $R backup ds2 src2 &&
	coffer -r $R verify --read-data &&
	rm -rf out && coffer -r $R restore ds2@latest out && treecmp src2 out
'

test_expect_success 'coffer killed: its rclone ends with it, its lease is not held' '
	random_file src2/c 4 &&
	: >rclone.pids &&
	{ RCLONE_BWLIMIT=1M coffer -r $R backup ds2 src2 >/dev/null 2>&1 & } &&
	pid=$! &&
	n=0 && while ! test -s rclone.pids && test $n -lt 1500; do
		sleep 0.02; n=$((n + 1)); done &&
	test -s rclone.pids &&
	kill -9 $pid && { wait $pid || :; } &&
	none_left &&
	coffer --no-wait -r $R backup ds2 src2 &&
	# Its shared lease names a process of this host that is gone: not
	# listed, and removed by whoever lists.
	coffer -r $R locks --json >locks.json &&
	json_check locks.json "@\$j == 0" &&
	no_lease_left
'

# Containers on one machine often share its host name (host networking,
# as training jobs use) but not its PID namespace: a lease that names
# this host and a pid this process cannot see may be held by a live
# process of another namespace.  It must count (and stay) until it
# expires, or a prune would take that writer for gone.
unshare --pid --fork --mount-proc true 2>/dev/null && test_set_prereq PIDNS

test_expect_success PIDNS 'a writer of this host in another PID namespace: its lease counts' '
	random_file src2/d 8 &&
	: >rclone.pids &&
	p=20000 && while kill -0 $p 2>/dev/null; do p=$((p + 1)); done &&
	{ RCLONE_BWLIMIT=1M unshare --pid --fork --mount-proc sh -c \
		"echo $((p - 1)) >/proc/sys/kernel/ns_last_pid &&
		\"$COFFER\" -r $R backup ds2 src2" >ns.out 2>&1 & } &&
	upid=$! &&
	n=0 && while ! find cloud/repo/locks -type f | grep -q . &&
		test $n -lt 1500; do sleep 0.02; n=$((n + 1)); done &&
	find cloud/repo/locks -type f | grep -q . &&
	coffer -r $R locks --json >locks.json &&
	cat locks.json &&
	json_check locks.json "@\$j == 1 && \$j->[0]{pid} == $p" &&
	{ wait $upid || { cat ns.out; false; }; } &&
	: >rclone.pids &&
	coffer -r $R locks --json >locks.json &&
	json_check locks.json "@\$j == 0" &&
	no_lease_left
'

# The contract again over rclone's S3 backend, configured by environment
# alone (t-storage), pointed at a real object store.
# A terminal's ^C goes to coffer's whole process group.  rclone runs in
# a group of its own, so coffer finishes or stops cleanly through it
# (0, or 143 with the snapshot marked failed), gives its lease back and
# then ends it; rclone is never killed under it.
test_expect_success 'a signal to coffer'"'"'s process group: rclone is not killed under it' '
	mkdir src3 && random_file src3/a 3 && random_file src3/b 3 &&
	: >rclone.pids &&
	{ RCLONE_BWLIMIT=1M setsid "$COFFER" -r $R backup ds3 src3 \
		>sg.out 2>sg.err & } &&
	pid=$! &&
	n=0 && while ! test -s rclone.pids && test $n -lt 1500; do
		sleep 0.02; n=$((n + 1)); done &&
	sleep 0.5 &&
	kill -TERM -- -$pid &&
	{ wait $pid; echo $? >sg.status; } &&
	case $(cat sg.status) in 0|143) ;; *) cat sg.err; false ;; esac &&
	! grep "rclone was killed" sg.err &&
	none_left &&
	no_lease_left
'

swift_prereq

test_expect_success SWIFT 'the storage contract over rclone S3 backend on Swift' '
	swift_start &&
	AWS_ACCESS_KEY_ID=$SWIFT_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$SWIFT_SECRET_KEY \
	COFFER_TEST_RCLONE_S3_URL=$SWIFT_S3_URL "$T_STORAGE" >tap 2>err &&
	grep "^ok .* - rclone-s3: " tap >oks &&
	test $(wc -l <oks) -gt 40 &&
	! grep "^not ok" tap ||
	{ grep -A3 "^not ok" tap >&2; tail -n 5 err >&2; false; }
'

# rclone 1.60's S3 backend cannot use AWS_CA_BUNDLE (LoadCustomCABundleError:
# unsupported transport): a remote of HTTPS with a private CA wants
# RCLONE_CA_CERT instead.
test_expect_success SWIFT 'setup: a remote on Swift, by environment alone' '
	unset AWS_CA_BUNDLE &&
	export RCLONE_CONFIG_SW_TYPE=s3 RCLONE_CONFIG_SW_PROVIDER=Other \
		RCLONE_CONFIG_SW_ENDPOINT=$SWIFT_S3_URL \
		RCLONE_CONFIG_SW_ACCESS_KEY_ID=$SWIFT_ACCESS_KEY \
		RCLONE_CONFIG_SW_SECRET_ACCESS_KEY=$SWIFT_SECRET_KEY \
		RCLONE_CONFIG_SW_REGION=us-east-1 \
		RCLONE_CONFIG_SW_FORCE_PATH_STYLE=true &&
	"$S3OP" rclone:sw:faults/repo create
'

# The proxy stopped for seconds before a put: rclone waits (its --timeout
# is 60 s), the put goes through once the proxy runs again.
test_expect_success SWIFT 'the proxy stopped for seconds during a put: ridden out' '
	random_file big 12 &&
	kill -STOP $SWIFT_PROXY_PID &&
	{ "$S3OP" rclone:sw:faults/repo put packs/aa/big big 2>put.err & } &&
	pid=$! &&
	sleep 8 &&
	kill -CONT $SWIFT_PROXY_PID &&
	wait $pid &&
	! grep "^error:" put.err &&
	"$S3OP" rclone:sw:faults/repo get packs/aa/big back &&
	cmp big back
'

# The object server killed: rclone gives up after its own few retries,
# coffer retries within COFFER_RCLONE_RETRY_SECONDS, then fails on one
# line (no bound on its time asserted: timeout only stops a hang).
test_expect_success SWIFT 'the object server killed: the put fails, on one line' '
	kill -9 $SWIFT_OBJECT_PID &&
	echo small >small &&
	COFFER_RCLONE_RETRY_SECONDS=6 timeout 300 \
		"$S3OP" -v rclone:sw:faults/repo put keys/b small 2>err
	test $? = 1 &&
	grep "try 2 of 8" err &&
	grep "^error:" err >errs && test_line_count = 1 errs &&
	grep "^error: repository .rclone:sw:faults/repo.: upload of .keys/b.: .*503.* tries in" errs &&
	! grep "$SWIFT_SECRET_KEY" err
'

test_expect_success SWIFT 'the object server back: nothing complete was lost' '
	eval "$("$SWIFT_SERVER" restart "$SWIFT_DIR" object)" &&
	"$S3OP" rclone:sw:faults/repo get packs/aa/big back &&
	cmp big back &&
	"$S3OP" rclone:sw:faults/repo put keys/b small
'

test_done
