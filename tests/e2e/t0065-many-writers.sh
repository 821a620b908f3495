#!/bin/bash
test_description='many writers: four hosts back up at once with --no-wait while a fifth forgets and prunes, beside a backup that holds the lock, on a local repository and on object storage; a pack a running backup counts on outlives the prune that condemned it; every snapshot left restores what its host read'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

HOSTS="1 2 3 4"
ROUNDS=3

# host N: the state (catalog) of simulated host N.
host() { export XDG_STATE_HOME=$TMP/host$1-state; mkdir -p "$XDG_STATE_HOME"; }

# round R TAG: each host's source changes (a shared part every host
# holds, which dedups, and a part of its own), a copy of it is kept as
# what that round's snapshot must restore, and the four back up at once
# with --no-wait into repository $R while a fifth host runs forget
# --keep-last 1 --prune, --no-wait too; every one must succeed.
round() {
	for h in $HOSTS; do
		rm -f src$h/own-* &&
		random_file src$h/own-$1 1 &&
		echo "round $1 of host $h" >src$h/note &&
		rm -rf "want/$2-h$h-r$1" && mkdir -p want &&
		cp -a src$h "want/$2-h$h-r$1" || return 1
	done &&
	pids= &&
	for h in $HOSTS; do
		{ XDG_STATE_HOME=$TMP/host$h-state "$COFFER" --no-wait -r "$R" \
			backup node$h src$h >b-$h.out 2>b-$h.err & } &&
		pids="$pids $!" || return 1
	done &&
	{ XDG_STATE_HOME=$TMP/host5-state "$COFFER" --no-wait -r "$R" \
		forget --keep-last 1 --prune >b-5.out 2>b-5.err & } &&
	pids="$pids $!" &&
	rc=0 &&
	for p in $pids; do
		wait $p || rc=1
	done &&
	cat b-*.err &&
	test $rc = 0 &&
	! grep -q "error:" b-*.err
}

# check_all TAG: every host sees the snapshots of every host that the
# forgets left, the newest of each host's among them, and each one
# restores exactly what its host read in the round its note names.
check_all() {
	for h in $HOSTS; do
		host $h &&
		coffer -r "$R" snapshots --json >snaps-$h.json &&
		json_check snaps-$h.json "
			(grep { \$_->{state} eq q(complete) } @\$j) >= 4" ||
		return 1
	done &&
	host 1 &&
	for h in $HOSTS; do
		ids=$(json_get snaps-1.json "join q( ), map { \$_->{id} }
			grep { \$_->{dataset} eq q(node$h) &&
			\$_->{state} eq q(complete) } @\$j") &&
		test -n "$ids" &&
		for id in $ids; do
			rm -rf out &&
			coffer -r "$R" restore "$id" out &&
			r=$(sed -n "s/^round \([0-9]*\) of host $h\$/\1/p" \
				out/note) &&
			test -n "$r" &&
			treecmp "want/$1-h$h-r$r" out || return 1
		done &&
		rm -rf out &&
		coffer -r "$R" restore node$h@latest out &&
		treecmp "want/$1-h$h-r$ROUNDS" out || return 1
	done
}

# one_holder: wait (30 s at most) until coffer locks lists one holder of
# $R's writer lock, its line in locks.json.
one_holder() {
	n=0 &&
	until coffer -r "$R" locks --json >locks.json &&
		json_check locks.json "@\$j == 1" 2>/dev/null; do
		sleep 0.1
		n=$((n + 1))
		test $n -lt 300 || return 1
	done
}

test_expect_success 'setup: a repository and four hosts whose data overlaps' '
	coffer_init_keyfile repo &&
	R=$TMP/repo &&
	random_file shared.bin 4 &&
	for h in $HOSTS; do
		mkdir -p src$h && cp shared.bin src$h/shared.bin || return 1
	done &&
	mkdir -p held && echo "fed late" >held/file
'

test_expect_success 'a backup that holds the lock shared, fed from a FIFO' '
	mkfifo feed &&
	{ XDG_STATE_HOME=$TMP/host0-state "$COFFER" -r "$R" backup \
		--from-tar - held <feed >held.out 2>held.err & } &&
	held_pid=$! &&
	exec 7>feed &&
	one_holder &&
	json_check locks.json "
		\$j->[0]{mode} eq q(shared) && \$j->[0]{command} eq q(backup) &&
		\$j->[0]{pid} == $held_pid && defined \$j->[0]{since}" &&
	coffer -r "$R" locks >locks.txt &&
	grep "^MODE" locks.txt &&
	grep "^shared .* $held_pid .* backup " locks.txt
'

for r in $(seq 1 $ROUNDS); do
	test_expect_success "round $r: four hosts back up at once with --no-wait" "
		round $r local
	"
done

# Every pack the rounds wrote came after the held backup began: it may
# be the held one's, not yet in a snapshot, so none is condemned yet.
test_expect_success 'prune beside the held backup deletes nothing written since it began' '
	host 5 &&
	coffer --no-wait -r "$R" prune --json >p.json &&
	json_check p.json "\$j->{packs_deleted} == 0 &&
		\$j->{packs_repacked} == 0 && \$j->{packs_marked} == 0"
'

test_expect_success 'the held backup ends when its stream does' '
	tar -cf - held >&7 &&
	exec 7>&- &&
	wait $held_pid &&
	cat held.err &&
	coffer -r "$R" locks --json >locks.json &&
	json_check locks.json "@\$j == 0"
'

test_expect_success 'the writers gone, forget --prune deletes what no snapshot needs' '
	host 5 &&
	coffer --no-wait -r "$R" forget --keep-last 1 --prune --json >p.json &&
	json_check p.json "\$j->{packs_waiting} == 0 &&
		\$j->{packs_deleted} + \$j->{packs_repacked} > 0"
'

test_expect_success 'every host sees every snapshot left, and each restores what its host read' '
	check_all local
'

test_expect_success 'verify --read-data passes; nothing is left in tmp/' '
	host 2 &&
	coffer -r "$R" verify --read-data &&
	test_dir_is_empty repo/tmp
'

test_expect_success 'alone, forget --prune runs; what it keeps restores' '
	host 3 &&
	coffer -r "$R" forget --keep-last 1 --prune &&
	for h in $HOSTS; do
		rm -rf out &&
		coffer -r "$R" restore node$h@latest out &&
		treecmp src$h out || return 1
	done &&
	coffer -r "$R" verify --read-data
'

# A backup that began before a forget and a prune counts on a chunk of
# the snapshot they remove: the pack holding it is condemned, not
# deleted, while the backup runs; the prune after it copies the chunk
# out (the backup's snapshot uses it) before the pack goes.
test_expect_success 'a pack a running backup counts on outlives the prune that condemned it' '
	host 6 &&
	mkdir -p solo && random_file solo/data 2 &&
	coffer -r "$R" backup solo solo &&
	coffer -r "$R" snapshots --json >s.json &&
	solo=$(json_get s.json "(grep { \$_->{dataset} eq q(solo) } @\$j)[0]{id}") &&
	sleep 1 &&
	rm -f feed3 && mkfifo feed3 &&
	{ XDG_STATE_HOME=$TMP/host8-state "$COFFER" -r "$R" backup \
		--from-tar - again <feed3 >again.out 2>again.err & } &&
	again=$! &&
	exec 9>feed3 &&
	one_holder &&
	coffer --no-wait -r "$R" forget "$solo" &&
	coffer --no-wait -r "$R" prune --json >p.json &&
	json_check p.json "\$j->{packs_waiting} >= 1 &&
		\$j->{packs_deleted} == 0 && \$j->{packs_repacked} == 0" &&
	tar -cf - solo >&9 &&
	exec 9>&- &&
	wait $again &&
	cat again.err &&
	coffer --no-wait -r "$R" prune --json >p.json &&
	json_check p.json "\$j->{packs_waiting} == 0 &&
		\$j->{chunks_moved} >= 1" &&
	rm -rf out &&
	host 7 &&
	coffer -r "$R" restore again@latest out &&
	cmp solo/data out/solo/data &&
	coffer -r "$R" verify --read-data
'

# A backup that began after a mark does not count on the condemned pack:
# it stores the data again, and the pack goes without a copy.  It runs
# on a training server's write-only key, which reads the mark from the
# pack's view, as it cannot read records.
test_expect_success 'a backup that learnt a mark stores again what the condemned pack holds' '
	host 6 &&
	mkdir -p solo2 && random_file solo2/data 2 &&
	coffer -r "$R" backup solo2 solo2 &&
	coffer -r "$R" snapshots --json >s.json &&
	solo2=$(json_get s.json "(grep { \$_->{dataset} eq q(solo2) } @\$j)[0]{id}") &&
	sleep 1 &&
	rm -f feed4 && mkfifo feed4 &&
	{ XDG_STATE_HOME=$TMP/host8-state "$COFFER" -r "$R" backup \
		--from-tar - slow <feed4 >slow.out 2>slow.err & } &&
	slow=$! &&
	exec 9>feed4 &&
	one_holder &&
	coffer --no-wait -r "$R" forget "$solo2" &&
	coffer --no-wait -r "$R" prune --json >p.json &&
	json_check p.json "\$j->{packs_waiting} >= 1" &&
	host 9 &&
	coffer -r "$R" verify --read-data &&
	coffer -r "$R" key export --write-only --to wo.key &&
	host 11 &&
	COFFER_KEY_FILE=$TMP/wo.key coffer -r "$R" backup --json third \
		solo2 >third.json &&
	json_check third.json "\$j->{bytes_new} >= 2 * 1048576" &&
	mkdir -p empty && tar -cf - empty >&9 &&
	exec 9>&- &&
	wait $slow &&
	host 6 &&
	coffer --no-wait -r "$R" prune --json >p.json &&
	json_check p.json "\$j->{packs_waiting} == 0 &&
		\$j->{packs_deleted} >= 1 && \$j->{chunks_moved} == 0" &&
	rm -rf out &&
	host 10 &&
	coffer -r "$R" restore third@latest out &&
	cmp solo2/data out/data &&
	coffer -r "$R" verify --read-data
'

# The same over object storage, where the lock is a lease per holder.
if swift_why=$("$SWIFT_SERVER" check 2>&1); then
	test_set_prereq SWIFT
elif [ "${CI:-}" = true ]; then
	echo "Bail out! $swift_why"
	exit 1
else
	echo "WARNING: $0: the object storage part skipped: $swift_why" >&2
fi

test_expect_success SWIFT 'setup: the same on a bucket of a Swift object store' '
	swift_start &&
	swift_credentials &&
	R=s3:$SWIFT_S3_URL/fleet/repo &&
	for h in $HOSTS; do
		rm -rf "$TMP/host$h-state" src$h/own-* || return 1
	done &&
	coffer init --key-file s3.key "$R" &&
	COFFER_KEY_FILE=$TMP/s3.key
'

for r in $(seq 1 $ROUNDS); do
	test_expect_success SWIFT "object storage, round $r: four hosts back up at once with --no-wait" "
		round $r s3
	"
done

test_expect_success SWIFT 'object storage: every snapshot restores what its host read; verify --read-data' '
	check_all s3 &&
	coffer -r "$R" verify --read-data &&
	coffer -r "$R" locks --json >locks.json &&
	json_check locks.json "@\$j == 0"
'

test_expect_success SWIFT 'object storage: a writer whose lease lapsed (stopped past its length) does not complete its snapshot' '
	host 1 &&
	rm -f feed2 && mkfifo feed2 &&
	{ COFFER_LEASE_SECONDS=3 "$COFFER" -r "$R" backup --from-tar - late \
		<feed2 >late.out 2>late.err & } &&
	late=$! &&
	exec 8>feed2 &&
	one_holder &&
	kill -STOP $late &&
	sleep 5 &&
	host 2 &&
	coffer --no-wait -r "$R" prune &&
	kill -CONT $late &&
	tar -cf - held >&8 &&
	exec 8>&- &&
	test_expect_code 5 wait $late &&
	cat late.err &&
	grep "writer lock of this run was lost" late.err &&
	host 1 &&
	coffer -r "$R" snapshots --json >snaps.json &&
	json_check snaps.json "!grep { \$_->{dataset} eq q(late) &&
		\$_->{state} eq q(complete) } @\$j" &&
	tar -cf held.tar held &&
	coffer -r "$R" backup --from-tar - late <held.tar &&
	coffer -r "$R" verify --read-data
'

test_done
