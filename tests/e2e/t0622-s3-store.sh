#!/bin/bash
test_description='the S3 store against a real object store (Swift with s3api): the storage contract over HTTP and HTTPS, errors on one line without secrets, stalls ridden out, a dead object server failing within the retry bound'
TEST_NO_COFFER=1
. "$(dirname "$0")/../lib.sh"

require_swift
T_STORAGE=$BUILD/tests/t-storage
S3OP=$BUILD/tests/s3-op
for b in "$T_STORAGE" "$S3OP"; do
	[ -x "$b" ] || { echo "Bail out! $b is not built (make unit)"; exit 1; }
done

# error_line FILE: FILE holds exactly one line, an error, and no secret.
error_line() {
	test_line_count = 1 "$1" &&
	grep "^error: repository 's3:" "$1" &&
	! grep -e "$SWIFT_SECRET_KEY" -e wrong-secret-1234 "$1"
}

test_expect_success 'setup: a store, its credentials in the environment' '
	swift_start &&
	swift_credentials &&
	http=s3:$SWIFT_S3_URL https=s3:$SWIFT_S3_HTTPS_URL
'

# The unit contract (round trips, ranges, atomicity, listings, leases),
# then what object storage adds: a bucket made, a missing one refused,
# a multipart upload read back in ranges, a listing over pages.
test_expect_success 'http: the storage contract, multipart, pages' '
	COFFER_TEST_S3_URL=$SWIFT_S3_URL "$T_STORAGE" >tap 2>err &&
	grep "^ok .* - s3: " tap >s3-oks &&
	test $(wc -l <s3-oks) -gt 50 &&
	! grep "^not ok" tap ||
	{ grep -A3 "^not ok" tap >&2; tail -n 5 err >&2; false; }
'

test_expect_success 'https: the same, verified by the self-signed certificate' '
	COFFER_TEST_S3_URL=$SWIFT_S3_HTTPS_URL COFFER_CACERT=$SWIFT_CACERT \
		"$T_STORAGE" >tap 2>err &&
	grep "^ok .* - s3: a listing over pages" tap &&
	! grep "^not ok" tap ||
	{ grep -A3 "^not ok" tap >&2; tail -n 5 err >&2; false; }
'

test_expect_success 'https: a certificate nobody vouches for is refused' '
	test_must_fail "$S3OP" $https/certless create 2>err &&
	error_line err && grep -i "certificate" err
'

test_expect_success 'the CA: COFFER_CACERT before CURL_CA_BUNDLE and AWS_CA_BUNDLE' '
	COFFER_CACERT=$SWIFT_CACERT CURL_CA_BUNDLE=/nonexistent \
		AWS_CA_BUNDLE=/nonexistent "$S3OP" $https/ca1 create &&
	CURL_CA_BUNDLE=$SWIFT_CACERT AWS_CA_BUNDLE=/nonexistent \
		"$S3OP" $https/ca1 list "" &&
	AWS_CA_BUNDLE=$SWIFT_CACERT "$S3OP" $https/ca1 list ""
'

test_expect_success 'create makes a bucket; without it a missing one is an error' '
	test_must_fail "$S3OP" $http/made/repo list "" 2>err &&
	error_line err && grep "404 NoSuchBucket" err &&
	"$S3OP" $http/made/repo create &&
	"$S3OP" $http/made/repo list "" >out && test_must_be_empty out &&
	echo hello >small && "$S3OP" $http/made/repo put keys/a small &&
	test_must_fail "$S3OP" $http/made/repo create 2>err &&
	error_line err && grep "the prefix already holds objects" err &&
	"$S3OP" $http/made/other create
'

test_expect_success 'a wrong secret: one clear line, no secret in it' '
	AWS_SECRET_ACCESS_KEY=wrong-secret-1234 \
		test_must_fail "$S3OP" $http/made/repo list "" >out 2>err &&
	error_line err &&
	grep "GET bucket .made.: 403 SignatureDoesNotMatch" err &&
	test_must_fail "$S3OP" "s3:http://test:pw-in-url-99@127.0.0.1/made" \
		list "" 2>err &&
	test_line_count = 1 err && grep "holds no credentials" err &&
	! grep pw-in-url-99 err
'

test_expect_success 'credentials from a profile of the shared credentials file' '
	printf "[default]\naws_access_key_id = x\naws_secret_access_key = y\n" >creds &&
	printf "[t]\naws_access_key_id = %s\naws_secret_access_key = %s\n" \
		"$SWIFT_ACCESS_KEY" "$SWIFT_SECRET_KEY" >>creds &&
	(
		unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY &&
		AWS_SHARED_CREDENTIALS_FILE=$PWD/creds AWS_PROFILE=t \
			"$S3OP" $http/made/repo list "" >out &&
		grep "^keys/a 6$" out &&
		test_must_fail env HOME=$TMP/nohome "$S3OP" $http/made/repo \
			list "" 2>err &&
		error_line err && grep "no credentials" err
	)
'

# The proxy stopped before the put begins and for longer than a stall
# may last (a quarter of COFFER_S3_RETRY_SECONDS, 5 s): the first try
# times out and is retried (-v shows it), and once the proxy runs again
# the put goes through, with no error.
test_expect_success 'the proxy stopped for seconds during a put: ridden out by retries' '
	random_file big 12 &&
	kill -STOP $SWIFT_PROXY_PID &&
	{ COFFER_S3_RETRY_SECONDS=20 "$S3OP" -v $http/made/repo put \
		packs/aa/big big 2>put.err & } &&
	pid=$! &&
	sleep 8 &&
	kill -CONT $SWIFT_PROXY_PID &&
	wait $pid &&
	grep "try 2 of 8" put.err &&
	! grep "^error:" put.err &&
	"$S3OP" $http/made/repo get packs/aa/big back &&
	cmp big back
'

test_expect_success 'the object server killed: the put fails within the bound, on one line' '
	kill -9 $SWIFT_OBJECT_PID &&
	COFFER_S3_RETRY_SECONDS=6 timeout 120 \
		"$S3OP" $http/made/repo put keys/b small 2>err
	test $? = 1 &&
	error_line err &&
	grep "PUT .keys/b.: 503 .*tries in" err
'

test_expect_success 'the object server back: nothing complete was lost' '
	eval "$("$SWIFT_SERVER" restart "$SWIFT_DIR" object)" &&
	"$S3OP" $http/made/repo get packs/aa/big back &&
	cmp big back &&
	"$S3OP" $http/made/repo put keys/b small
'

test_done
