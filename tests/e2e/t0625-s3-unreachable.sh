#!/bin/bash
test_description='a repository whose store cannot be reached or read (nothing listening, no answer, no TLS, 5xx after the retries, an rclone remote that fails): every command that opens it, init, import --init and a policy run exit 5 with one line naming the endpoint; not a repository, a missing bucket and a wrong key stay exit 3'
. "$(dirname "$0")/../lib.sh"
require_coffer

# The retries of a store that does not answer are bounded by these (no
# time is asserted: timeout only stops a hang).
export COFFER_S3_RETRY_SECONDS=4 COFFER_RCLONE_RETRY_SECONDS=4

# A port on 127.0.0.1 that nothing listens on (it was free a moment ago).
free_port() {
	perl -MIO::Socket::INET -e '
		my $s = IO::Socket::INET->new(Listen => 1,
		    LocalAddr => "127.0.0.1:0") or die "no socket: $!\n";
		print $s->sockport, "\n";'
}

# fails STATUS WHAT COMMAND...: COMMAND exits STATUS with one line on
# stderr, an error that names WHAT.
fails() {
	fails_want_=$1 fails_what_=$2
	shift 2
	timeout 300 "$@" >fails.out 2>fails.err
	fails_st_=$?
	if [ $fails_st_ != "$fails_want_" ]; then
		echo "exit status $fails_st_, not $fails_want_: $*" >&4
		cat fails.err >&4
		return 1
	fi
	test_line_count = 1 fails.err &&
	grep "^error: .*$fails_what_" fails.err
}

test_expect_success 'setup: a repository with a snapshot, its bundles, an endpoint that nothing listens on' '
	mkdir -p src/d && echo one >src/one && random_file src/d/big 2 &&
	coffer init --key-file k local &&
	coffer -r local --key-file k backup ds src &&
	mkdir off && coffer -r local --key-file k export --target off \
		--to off --all &&
	port=$(free_port) && test -n "$port" &&
	D=s3:http://127.0.0.1:$port/unr/repo &&
	export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test-secret
'

test_expect_success 'nothing listening: snapshots, backup, restore, verify exit 5' '
	fails 5 "127.0.0.1:$port" "$COFFER" -r $D --key-file k snapshots &&
	fails 5 "127.0.0.1:$port" "$COFFER" -r $D --key-file k backup ds src &&
	fails 5 "127.0.0.1:$port" "$COFFER" -r $D --key-file k \
		restore ds@latest out &&
	test_path_is_missing out &&
	fails 5 "127.0.0.1:$port" "$COFFER" -r $D --key-file k verify
'

test_expect_success 'nothing listening: init and import --init exit 5, make nothing' '
	fails 5 "127.0.0.1:$port" "$COFFER" init --key-file k2 $D &&
	test_path_is_missing k2 &&
	fails 5 "127.0.0.1:$port" "$COFFER" -r $D --key-file k \
		import --init off
'

test_expect_success 'nothing listening: a policy run exits 5' '
	cat >p.policy <<-EOF &&
	[repository]
	path = $D
	key-file = $TMP/k
	[dataset ds]
	path = $TMP/src
	full = daily
	EOF
	fails 5 "127.0.0.1:$port" "$COFFER" run --policy p.policy
'

test_expect_success 'a local directory that is no repository is still exit 3' '
	mkdir empty &&
	fails 3 "not a coffer repository" "$COFFER" -r empty --key-file k \
		snapshots &&
	fails 3 "not a coffer repository" "$COFFER" -r nowhere --key-file k \
		backup ds src
'

if command -v rclone >/dev/null; then
	test_set_prereq RCLONE
fi

# rclone's S3 backend pointed at the endpoint: rclone gives up after its
# own retries, coffer after COFFER_RCLONE_RETRY_SECONDS.
test_expect_success RCLONE 'an rclone remote whose backend cannot be reached: exit 5' '
	export RCLONE_CONFIG_DEAD_TYPE=s3 RCLONE_CONFIG_DEAD_PROVIDER=Other \
		RCLONE_CONFIG_DEAD_ENDPOINT=http://127.0.0.1:$port \
		RCLONE_CONFIG_DEAD_ACCESS_KEY_ID=test \
		RCLONE_CONFIG_DEAD_SECRET_ACCESS_KEY=test-secret \
		RCLONE_CONFIG_DEAD_FORCE_PATH_STYLE=true &&
	fails 5 "rclone:dead:unr/repo.*127.0.0.1:$port" "$COFFER" \
		-r rclone:dead:unr/repo --key-file k snapshots &&
	fails 5 "rclone:dead:unr/repo" "$COFFER" \
		-r rclone:dead:unr/repo --key-file k backup ds src
'

swift_prereq

test_expect_success SWIFT 'setup: a repository on Swift' '
	swift_start &&
	AWS_ACCESS_KEY_ID=$SWIFT_ACCESS_KEY &&
	AWS_SECRET_ACCESS_KEY=$SWIFT_SECRET_KEY &&
	R=s3:$SWIFT_S3_URL/unr/repo &&
	coffer init --key-file sk $R &&
	coffer -r $R --key-file sk backup ds src
'

test_expect_success SWIFT 'a missing bucket, a prefix without a repository, a wrong key: exit 3' '
	fails 3 "404 NoSuchBucket" "$COFFER" -r s3:$SWIFT_S3_URL/nobucket \
		--key-file sk snapshots &&
	fails 3 "is not a coffer repository" "$COFFER" \
		-r s3:$SWIFT_S3_URL/unr/elsewhere --key-file sk snapshots &&
	fails 3 "key file" "$COFFER" -r $R --key-file k snapshots
'

test_expect_success SWIFT 'the proxy stopped (no answer): exit 5, then all is well' '
	kill -STOP $SWIFT_PROXY_PID &&
	fails 5 "$SWIFT_S3_URL/unr/repo" "$COFFER" -r $R --key-file sk \
		snapshots
	st=$?
	kill -CONT $SWIFT_PROXY_PID &&
	test $st = 0 &&
	coffer -r $R --key-file sk snapshots >s.out &&
	grep " ds " s.out
'

# after_open STATUS COMMAND...: COMMAND, stopped once its repository is
# open, finds the proxy stopped (no answer) when it goes on: it exits
# STATUS with one line on stderr.
after_open() {
	after_want_=$1
	shift
	{ COFFER_TEST_RAISE=opened:1:STOP "$@" >after.out 2>after.err & } &&
	after_pid_=$! &&
	wait_stopped $after_pid_ &&
	kill -STOP $SWIFT_PROXY_PID &&
	kill -CONT $after_pid_
	wait $after_pid_
	after_st_=$?
	kill -CONT $SWIFT_PROXY_PID
	cat after.err &&
	test $after_st_ = "$after_want_" &&
	test_line_count = 1 after.err &&
	grep "^error: .*$SWIFT_S3_URL/unr/repo" after.err
}

# Once the repository opened, a store that stops answering is the store's
# failure still, not the repository's: key and catalog commands too.
test_expect_success SWIFT 'the proxy stopped after the open: key and catalog commands exit 5' '
	after_open 5 "$COFFER" -r $R --key-file sk key list &&
	after_open 5 "$COFFER" -r $R --key-file sk key remove nosuchkey &&
	after_open 5 "$COFFER" -r $R --key-file sk catalog rebuild &&
	after_open 5 "$COFFER" -r $R --key-file sk catalog check &&
	coffer -r $R --key-file sk key list >keys.out &&
	coffer -r $R --key-file sk catalog check &&
	fails 3 "nosuchkey" "$COFFER" -r $R --key-file sk key remove nosuchkey
'

# A certificate that is not trusted is a setting to mend (--cacert), as
# a wrong key is.
test_expect_success SWIFT 'https to the plain HTTP port (no TLS handshake): exit 5' '
	H=s3:https://${SWIFT_S3_URL#http://}/unr/repo &&
	fails 5 "${SWIFT_S3_URL#http://}" "$COFFER" -r $H --key-file sk \
		--cacert "$SWIFT_CACERT" snapshots &&
	fails 3 "$SWIFT_S3_HTTPS_URL/nobucket.*certificate" "$COFFER" \
		-r s3:$SWIFT_S3_HTTPS_URL/nobucket --key-file sk snapshots
'

test_expect_success SWIFT 'the object server killed (503 after the retries): exit 5' '
	kill -9 $SWIFT_OBJECT_PID &&
	fails 5 "$SWIFT_S3_URL/unr/repo.*503" "$COFFER" -r $R --key-file sk \
		restore ds@latest out &&
	eval "$("$SWIFT_SERVER" restart "$SWIFT_DIR" object)" &&
	coffer -r $R --key-file sk restore ds@latest out &&
	cmp src/d/big out/d/big
'

test_done
