#!/bin/bash
test_description='one writer at a time: --no-wait fails with status 3, otherwise wait'
. "$(dirname "$0")/../lib.sh"

# hold_lock FILE...: take an exclusive flock on each FILE in a background
# process (one process, so killing it releases them all); $holder is its
# pid.  Returns once the locks are held.
hold_lock() {
	release_lock &&
	rm -f held &&
	{ perl -e '
		use Fcntl qw(:flock);
		my @fh;
		for my $f (@ARGV) {
			open(my $fh, ">>", $f) or die "$f: $!\n";
			flock($fh, LOCK_EX) or die "flock $f: $!\n";
			push @fh, $fh;
		}
		open(my $r, ">", "held") or die; close($r);
		sleep 60;
	' "$@" & } &&
	holder=$! &&
	n=0 &&
	while ! test -e held; do
		sleep 0.05
		n=$((n + 1))
		test $n -lt 200 || return 1
	done
}

release_lock() {
	if test -n "$holder"; then
		kill $holder 2>/dev/null
		wait $holder 2>/dev/null
		holder=
	fi
	:
}

test_expect_success 'setup: a repository with one snapshot' '
	mkdir -p src && printf "data\n" >src/file &&
	coffer_init_keyfile repo &&
	coffer -r repo backup ds src &&
	catlock=$(ls -d "$XDG_STATE_HOME"/coffer/*/ | head -n 1)lock &&
	echo "catalog lock: $catlock"
'

test_expect_success 'the repository lock: --no-wait backup fails at once, status 3' '
	hold_lock repo/locks/writer &&
	start=$(date +%s) &&
	test_expect_code 3 timeout 30 "$COFFER" --no-wait -r repo backup ds src 2>err &&
	release_lock &&
	cat err &&
	grep -i locked err &&
	test $(($(date +%s) - start)) -lt 10
'

test_expect_success 'the catalog lock: --no-wait backup fails at once, status 3' '
	hold_lock "$catlock" &&
	test_expect_code 3 timeout 30 "$COFFER" --no-wait -r repo backup ds src 2>err &&
	release_lock &&
	cat err &&
	grep -i locked err
'

test_expect_success 'a failed --no-wait attempt left no snapshot behind' '
	coffer -r repo snapshots --json >snaps.json &&
	json_check snaps.json "@\$j == 1 && \$j->[0]{state} eq q(complete)"
'

test_expect_success 'without --no-wait a second writer waits for the lock' '
	hold_lock repo/locks/writer "$catlock" &&
	{ "$COFFER" -r repo backup ds src >waiter.out 2>waiter.err & } &&
	waiter=$! &&
	sleep 2 &&
	kill -0 $waiter &&
	coffer -r repo snapshots --json >during.json &&
	json_check during.json "@\$j == 1" &&
	release_lock &&
	n=0 &&
	while kill -0 $waiter 2>/dev/null; do
		sleep 0.1
		n=$((n + 1))
		test $n -lt 300 || { kill $waiter; return 1; }
	done &&
	wait $waiter &&
	coffer -r repo snapshots --json >after.json &&
	json_check after.json "@\$j == 2"
'

test_expect_success 'setup: enough data for a backup that takes a while' '
	mkdir src/bulk &&
	for i in 1 2 3 4 5 6; do
		random_file src/bulk/shard-$i 50 || return 1
	done
'

test_expect_success 'a real backup in progress: --no-wait fails, readers still read' '
	{ "$COFFER" -r repo backup ds src >first.out 2>first.err & } &&
	first=$! &&
	n=0 &&
	while test -z "$(ls -A repo/tmp)" && kill -0 $first 2>/dev/null; do
		sleep 0.02
		n=$((n + 1))
		test $n -lt 1500 || break
	done &&
	kill -0 $first &&
	test_expect_code 3 "$COFFER" --no-wait -r repo backup ds src 2>err &&
	grep -i locked err &&
	timeout 30 "$COFFER" -r repo snapshots --json >running.json &&
	wait $first &&
	json_check running.json "grep { \$_->{state} eq q(running) } @\$j"
'

test_expect_success 'the first backup finished normally' '
	coffer -r repo snapshots --json >snaps.json &&
	json_check snaps.json "
		@\$j == 3 && !grep { \$_->{state} ne q(complete) } @\$j" &&
	test_dir_is_empty repo/tmp &&
	coffer -r repo restore ds@latest out &&
	treecmp src out
'

release_lock
test_done
