#!/bin/bash
test_description='a repository on object storage (Swift with s3api): every command over s3:, the two roles on one bucket, bundles in and out, keys rotated and rewrapped, a policy run, the proxy stalled and the object server killed mid-backup'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp
require_swift

# host NAME: the state directory (catalog) of host NAME.
host() { export XDG_STATE_HOME=$TMP/$1-state; mkdir -p "$XDG_STATE_HOME"; }

# ts ARGS / bh ARGS: the training server (write-only key) and the backup
# host (full key) on the bucket, each with its own catalog.
ts() { (host ts && coffer -r "$R" --key-file wo.key "$@"); }
bh() { (host bh && coffer -r "$R" --key-file full.key "$@"); }

# restored SID: the snapshot restored by the backup host is what was read.
restored() {
	rm -rf out && bh restore "$1" out && treecmp "expect/$1" out
}

# snap LEVEL: the training server backs src up at LEVEL; what it read is
# kept as expect/SID.
snap() {
	ts backup --json --level "$1" ds "$TMP/src" >b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") &&
	rm -rf "expect/$sid" && mkdir -p expect && cp -a src "expect/$sid" &&
	echo "$sid" >>sids
}

test_expect_success 'setup: a store, credentials in the environment, a tree' '
	swift_start &&
	swift_credentials &&
	R=s3:$SWIFT_S3_URL/fleet/repo &&
	mktree src --small &&
	random_file src/ckpt.bin 20
'

test_expect_success 'init makes the bucket; a second init into it is refused' '
	host bh && coffer init --key-file full.key "$R" >out 2>&1 &&
	grep "^created repository .s3:http://127.0.0.1:[0-9]*/fleet/repo." out &&
	test_expect_code 2 coffer init --key-file other.key "$R" 2>err &&
	grep "already holds objects" err &&
	test_path_is_missing other.key &&
	bh key export --write-only --to wo.key
'

test_expect_success 'a missing bucket is not a repository, on one line' '
	test_must_fail coffer -r s3:$SWIFT_S3_URL/nobucket --key-file full.key \
		snapshots 2>err &&
	test_line_count = 1 err && grep "404 NoSuchBucket" err
'

test_expect_success 'the write-only server backs up at every level; the backup host restores each' '
	snap full &&
	echo more >>src/ckpt.bin && snap incremental &&
	echo again >src/new-file && snap differential &&
	for s in $(cat sids); do restored $s || return 1; done
'

test_expect_success 'the write-only key cannot read what it wrote' '
	test_must_fail ts restore "$(head -n 1 sids)" nope 2>err &&
	grep "write-only" err && test_path_is_missing nope
'

test_expect_success 'ls, diff, snapshots --json, verify --read-data, audit, drill' '
	first=$(head -n 1 sids) last=$(tail -n 1 sids) &&
	bh ls "$last" >ls.out && grep " new-file$" ls.out &&
	bh diff "$first" "$last" >diff.out && grep "new-file" diff.out &&
	bh snapshots --json >s.json && json_check s.json "@\$j == 3" &&
	bh verify --read-data >v.out && grep "no errors" v.out &&
	bh audit ds >a.out && grep " 0 silently corrupted, 0 modified" a.out &&
	bh drill ds@latest >d.out && grep "verdict *pass" d.out
'

test_expect_success 'a new host rebuilds its catalog from the bucket alone' '
	(host new && coffer -r "$R" --key-file full.key snapshots --json) \
		>n.json &&
	json_check n.json "@\$j == 3" &&
	(host new && coffer -r "$R" --key-file full.key catalog check) >c.out &&
	grep "no errors" c.out
'

test_expect_success 'forget --prune keeps what it keeps restorable' '
	bh forget --keep-last 2 --prune >f.out &&
	bh snapshots --json >s.json && json_check s.json "@\$j == 2" &&
	for s in $(tail -n 2 sids); do restored $s || return 1; done &&
	bh verify --read-data >v.out && grep "no errors" v.out
'

test_expect_success 'keys: rotate, rewrap every pack anew, retire the old epoch' '
	bh key rotate &&
	bh key rotate --rewrap >r.out && grep "sealed to key epoch 2" r.out &&
	bh key retire 1 &&
	bh verify --read-data >v.out && grep "no errors" v.out &&
	echo rotated >>src/new-file && snap incremental &&
	restored $(tail -n 1 sids)
'

test_expect_success 'export to a directory, import --init into a bucket over https (--cacert)' '
	mkdir off &&
	bh export --target off --to off --all &&
	I=s3:$SWIFT_S3_HTTPS_URL/imported &&
	test_must_fail coffer -r "$I" --key-file full.key import --init off \
		2>err &&
	grep -i "certificate" err &&
	coffer -r "$I" --cacert "$SWIFT_CACERT" --key-file full.key \
		import --init off &&
	last=$(tail -n 1 sids) &&
	rm -rf out &&
	(host imp && COFFER_CACERT=$SWIFT_CACERT coffer -r "$I" \
		--key-file full.key restore "$last" out) &&
	treecmp "expect/$last" out
'

test_expect_success 'a policy names the bucket: coffer run backs up, quietly' '
	cat >p.policy <<-EOF &&
	[repository]
	path = $R
	key-file = $TMP/wo.key
	[dataset ds2]
	path = $TMP/src
	full = daily
	EOF
	(host ts && coffer run --policy p.policy) >run.out 2>run.err &&
	test_must_be_empty run.err &&
	bh snapshots --json ds2 >s.json &&
	json_check s.json "@\$j == 1 && \$j->[0]{level} eq q(full)"
'

# Forget and prune share the lock with backups; a key change does not.
# (Epoch 1 is retired already: when the lock is free, the retire is
# refused for that, and the loop tries again.)
test_expect_success 'another writer holds the lease: a key change with --no-wait fails at once (3)' '
	{ ts backup --level full ds "$TMP/src" >/dev/null 2>&1 & } &&
	pid=$! &&
	for i in $(seq 50); do
		bh --no-wait key retire 1 >/dev/null 2>err
		st=$?
		test $st = 3 && break
		sleep 0.1
	done &&
	wait $pid &&
	test $st = 3 && grep "locked by another writer" err
'

# The proxy stopped for longer than a request may stall (a quarter of
# COFFER_S3_RETRY_SECONDS): the requests under way time out, are retried,
# and the backup completes once the proxy runs again.
test_expect_success 'the proxy stopped for seconds mid-backup: ridden out' '
	random_file src/stall.bin 24 &&
	{ COFFER_S3_RETRY_SECONDS=30 ts backup --json ds "$TMP/src" \
		>stall.json 2>stall.err & } &&
	pid=$! &&
	sleep 0.5 &&
	kill -STOP $SWIFT_PROXY_PID &&
	sleep 9 &&
	kill -CONT $SWIFT_PROXY_PID &&
	wait $pid &&
	! grep "^error:" stall.err &&
	sid=$(json_get stall.json "\$j->{snapshot}") &&
	cp -a src "expect/$sid" && echo "$sid" >>sids &&
	restored "$sid"
'

# Killed once the first part of the new pack is stored (Swift's s3api
# keeps the parts of an upload in the bucket's +segments container).
parts() { grep -c '"PUT /[^ ]*/fleet%2Bsegments/' "$SWIFT_DIR/log/object.log" || :; }
test_expect_success 'the object server killed mid-backup: a clean failure within the bound' '
	random_file src/doomed.bin 24 &&
	before=$(parts) &&
	{ COFFER_S3_RETRY_SECONDS=6 COFFER_LEASE_SECONDS=10 \
		ts backup ds "$TMP/src" \
		>/dev/null 2>kill.err & } &&
	pid=$! &&
	for i in $(seq 300); do
		test $(parts) -gt $before && break
		sleep 0.05
	done &&
	test $(parts) -gt $before &&
	kill -9 $SWIFT_OBJECT_PID &&
	wait $pid
	test $? = 5 &&
	grep "^error: repository .s3:.*503" kill.err &&
	! grep -e "$SWIFT_SECRET_KEY" -e Segmentation kill.err
'

# Its lease is left behind (the server was down), for COFFER_LEASE_SECONDS.
test_expect_success 'the object server back: nothing complete lost; the next backup and verify pass' '
	eval "$("$SWIFT_SERVER" restart "$SWIFT_DIR" object)" &&
	for s in $(tail -n 3 sids); do restored $s || return 1; done &&
	snap full && restored $(tail -n 1 sids) &&
	bh verify --read-data >v.out && grep "no errors" v.out
'

test_expect_success 'no secret in the catalogs or the logs' '
	! grep -r -l -a -e "$AWS_SECRET_ACCESS_KEY" ts-state bh-state &&
	! grep -l -a -e "$AWS_SECRET_ACCESS_KEY" *.err
'

test_done
