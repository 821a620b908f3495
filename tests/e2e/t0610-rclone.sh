#!/bin/bash
test_description='rclone: a location is never an rclone option; a signal stops coffer and its hung rclone, and frees the lock'
. "$(dirname "$0")/../lib.sh"

command -v rclone >/dev/null && test_set_prereq RCLONE

test_expect_success 'setup: a repository with a snapshot' '
	coffer_init_keyfile repo &&
	mkdir src && echo one >src/one && random_file src/big 2 &&
	coffer -r repo backup ds src &&
	export RCLONE_CONFIG_LOC_TYPE=local &&
	mkdir cloud
'

# A location that begins with "-" would reach rclone as an option: rclone
# --log-file=FILE creates FILE.  Every command that takes a location
# refuses it before running rclone.
test_expect_success RCLONE 'a location beginning with "-" is refused, rclone never sees it' '
	for loc in "rclone:--log-file=$TMP/made-%s:x" "rclone:-vv:x"; do
		test_expect_code 2 coffer -r repo bundles \
			--at "$(printf "$loc" bundles)" 2>err &&
		grep "cannot begin with .-." err &&
		test_expect_code 2 coffer -r repo export --target t --all \
			--to "$(printf "$loc" export)" 2>err &&
		grep "cannot begin with .-." err &&
		test_must_fail coffer -r repo import \
			"$(printf "$loc" import)" 2>err &&
		grep "cannot begin with .-." err || return 1
	done &&
	! ls made-* 2>/dev/null
'

# "--" ends rclone's options: the location goes as the path it is, through
# lsf, rcat and cat, even one whose path part looks like an option.
test_expect_success RCLONE 'real rclone takes the location after "--": export, bundles, import' '
	mkdir -p cloud/-dir &&
	coffer -r repo export --target c --all --to "rclone:loc:$TMP/cloud" &&
	test_path_is_file cloud/c-0001.cfb &&
	coffer -r repo bundles --json --target c --at "rclone:loc:$TMP/cloud" \
		>b.json &&
	json_check b.json "@\$j == 1" &&
	(export XDG_STATE_HOME=$TMP/bare &&
	 coffer -r copy import --init "rclone:loc:$TMP/cloud" &&
	 coffer -r copy restore ds@latest out) &&
	treecmp src out
'

# A fake rclone first on PATH that hangs: it records its pid, then sleeps
# in its place; with RCLONE_IGNORE_TERM it ignores SIGTERM too (only
# SIGKILL ends it).  With RCLONE_LIST, lsf lists that name and ends.
test_expect_success 'setup: a hanging rclone' '
	mkdir bin &&
	cat >bin/rclone <<-\EOF &&
	#!/bin/sh
	if [ "$1" = lsf ] && [ -n "$RCLONE_LIST" ]; then
		echo "$RCLONE_LIST"
		exit 0
	fi
	[ -n "$RCLONE_IGNORE_TERM" ] && trap "" TERM
	echo $$ >"$TMP/rclone.pid"
	exec sleep 300
	EOF
	chmod +x bin/rclone
'

# stop_hung LOG CMD...: run coffer CMD in the background with the fake
# rclone, SIGTERM it (or $SIG) once rclone runs; it must exit 143 (128 +
# the signal's number) within 3 s,
# leave no rclone behind (one killed as coffer ends goes within 2 s,
# once init reaps it) and free the writer lock.
stop_hung() {
	log=$1 && shift &&
	rm -f rclone.pid &&
	{ PATH=$TMP/bin:$PATH "$COFFER" "$@" >"$log.out" 2>"$log.err" & } &&
	pid=$! &&
	n=0 && while ! test -s rclone.pid && test $n -lt 500; do
		sleep 0.02; n=$((n + 1)); done &&
	test -s rclone.pid && rpid=$(cat rclone.pid) &&
	sleep 0.3 && kill -0 $pid &&
	t0=$(date +%s%N) && kill -${SIG:-TERM} $pid &&
	n=0 && while kill -0 $pid 2>/dev/null && test $n -lt 500; do
		sleep 0.02; n=$((n + 1)); done &&
	t1=$(date +%s%N) &&
	if kill -0 $pid 2>/dev/null; then
		echo "coffer still running 10 s after SIGTERM"
		kill -KILL $pid $rpid; wait $pid; return 1
	fi &&
	{ wait $pid; echo $? >"$log.status"; } &&
	n=0 && while kill -0 $rpid 2>/dev/null && test $n -lt 100; do
		sleep 0.02; n=$((n + 1)); done &&
	if kill -0 $rpid 2>/dev/null; then
		echo "rclone still running after coffer ended"
		kill -KILL $rpid; return 1
	fi &&
	cat "$log.err" &&
	echo "stopped in $(( (t1 - t0) / 1000000 )) ms" &&
	test $(( (t1 - t0) / 1000000 )) -lt 3000 &&
	test "$(cat "$log.status")" = $((128 + $(kill -l ${SIG:-TERM}))) &&
	coffer --no-wait -r repo backup ds src
}

for ignore in "" t; do
	what=${ignore:+, one that ignores SIGTERM}
	test_expect_success "SIGTERM stops export and its hung rclone rcat$what" '
		export RCLONE_IGNORE_TERM='"$ignore"' &&
		stop_hung ex -r repo export --target h --all --to rclone:loc:x &&
		coffer -r repo bundles --json --target h >h.json &&
		json_check h.json "@\$j == 0"
	'
	test_expect_success "SIGTERM stops import and its hung rclone cat$what" '
		export RCLONE_IGNORE_TERM='"$ignore"' &&
		RCLONE_LIST=c-0001.cfb stop_hung im -r repo import rclone:loc:x
	'
	test_expect_success "SIGTERM stops bundles --at and its hung rclone lsf$what" '
		export RCLONE_IGNORE_TERM='"$ignore"' &&
		stop_hung ls -r repo bundles --at rclone:loc:x
	'
done

test_expect_success 'SIGINT stops export and its hung rclone too (130)' '
	export RCLONE_IGNORE_TERM=t &&
	SIG=INT stop_hung ei -r repo export --target h --all --to rclone:loc:x
'

# drill --from-bundles does not stop cleanly on a signal (it ends by the
# signal's default action) but ends its rclone first.
test_expect_success 'SIGTERM ends drill --from-bundles and its hung rclone' '
	export RCLONE_IGNORE_TERM=t &&
	stop_hung dr -r repo drill --from-bundles rclone:loc:x ds@latest
'

test_expect_success 'the repository is whole after it all' '
	unset RCLONE_IGNORE_TERM &&
	coffer -r repo verify &&
	coffer -r repo backup ds src
'

test_done
