#!/bin/bash
test_description='the test object store: Swift with s3api on loopback answers S3 over HTTP and HTTPS, and is stopped by its PIDs'
TEST_NO_COFFER=1
. "$(dirname "$0")/../lib.sh"

require_swift
if ! command -v curl >/dev/null; then
	[ "${CI:-}" != true ] || { echo "Bail out! no curl (make deps)"; exit 1; }
	test_skip_all "no curl (make deps)"
fi

# s3 METHOD PATH [CURL-ARGS...]: one request to $url, signed with AWS
# Signature V4 by curl.  The access key "test:tester" comes from a netrc
# file ($S3_NETRC, default netrc): in --user its ":" would end the name.
# The body goes to "body", the headers to "head", the status to "status";
# the payload hash is $S3_SHA, UNSIGNED-PAYLOAD by default (Swift refuses
# a request without one).  curl 7.88 signs the query as written, not in
# canonical form, so the queries here are written canonical: parameters
# sorted, "?uploads=" (not "?uploads"), "prefix=dir%2F" (not "dir/").
s3() {
	s3_method_=$1 s3_path_=$2
	shift 2
	if [ "$s3_method_" = HEAD ]; then
		set -- --head "$@"
	else
		set -- -X "$s3_method_" "$@"
	fi
	curl -sS --aws-sigv4 "aws:amz:$SWIFT_REGION:s3" --netrc-file "${S3_NETRC:-$TMP/netrc}" \
		${cacert:+--cacert "$cacert"} \
		-H "x-amz-content-sha256: ${S3_SHA:-UNSIGNED-PAYLOAD}" \
		-D head -o body -w '%{http_code}\n' "$@" "$url$s3_path_" >status
}

# expect_status N: the last request's status was N.
expect_status() {
	[ "$(cat status)" = "$1" ] && return 0
	echo "status $(cat status), wanted $1; headers and body:" >&4
	cat head body >&4
	echo >&4
	return 1
}

# header NAME: the last response's header NAME (any case), value only.
header() {
	tr -d '\r' <head | sed -n "s/^$1: //Ip" | tail -n 1
}

# xml_values TAG: the values of <TAG> in the last body, one a line.
xml_values() {
	grep -o "<$1>[^<]*</$1>" body | sed "s|</*$1>||g"
}

# running PID: PID is a process and not a zombie (its parent, init, may
# not have reaped it yet).
running() {
	running_=$(sed "s/.*) //" /proc/$1/stat 2>/dev/null) || return 1
	case $running_ in
	[ZX]*) return 1 ;;
	esac
}

sha256() {
	sha256sum <"$1" | cut -d' ' -f1
}

test_expect_success 'setup: a store on 127.0.0.1, its servers running' '
	swift_start &&
	test -n "$SWIFT_S3_URL" && test -n "$SWIFT_S3_HTTPS_URL" &&
	test_path_is_file "$SWIFT_CACERT" &&
	test "$SWIFT_ACCESS_KEY" = test:tester &&
	test "$SWIFT_SECRET_KEY" = testing &&
	set -- $SWIFT_PIDS && test $# = 5 &&
	for p in $SWIFT_PIDS; do running $p || return 1; done &&
	printf "machine 127.0.0.1\nlogin %s\npassword %s\n" \
		"$SWIFT_ACCESS_KEY" "$SWIFT_SECRET_KEY" >netrc
'

# Every socket the servers listen on is on 127.0.0.1 (7F000001 in
# /proc/net/tcp), none on 0.0.0.0 or IPv6.
test_expect_success 'the servers listen on 127.0.0.1 only' '
	for p in $SWIFT_PIDS; do
		ls -l /proc/$p/fd | sed -n "s/.*socket:\[\([0-9]*\)\]$/\1/p"
	done | sort -u >inodes &&
	test -s inodes &&
	cat /proc/net/tcp /proc/net/tcp6 2>/dev/null |
		awk "\$4 == \"0A\" { print \$10, \$2 }" | sort >listening &&
	join inodes listening >ours &&
	test_line_count = 5 ours &&
	! grep -v " 0100007F:" ours
'

for scheme in http https; do
	if [ $scheme = http ]; then
		url=$SWIFT_S3_URL cacert=
	else
		url=$SWIFT_S3_HTTPS_URL cacert=$SWIFT_CACERT
	fi
	bucket=bucket-$scheme

	test_expect_success "$scheme: create a bucket, listed among the buckets" '
		s3 PUT /$bucket && expect_status 200 &&
		s3 GET / && expect_status 200 &&
		xml_values Name | grep -x "$bucket"
	'

	test_expect_success "$scheme: put an object, its ETag its MD5; get it back whole" '
		random_file obj 3 &&
		S3_SHA=$(sha256 obj) s3 PUT /$bucket/dir/obj -T obj &&
		expect_status 200 &&
		test "$(header etag)" = "\"$(md5sum <obj | cut -d" " -f1)\"" &&
		s3 GET /$bucket/dir/obj && expect_status 200 &&
		cmp obj body
	'

	test_expect_success "$scheme: a ranged GET is 206 with exactly those bytes" '
		s3 GET /$bucket/dir/obj -H "Range: bytes=1048570-2097159" &&
		expect_status 206 &&
		test "$(header content-range)" = "bytes 1048570-2097159/3145728" &&
		tail -c +1048571 obj | head -c 1048590 >want && cmp want body &&
		s3 GET /$bucket/dir/obj -H "Range: bytes=-100" &&
		expect_status 206 &&
		tail -c 100 obj >want && cmp want body
	'

	test_expect_success "$scheme: ListObjectsV2 with a prefix, in pages" '
		echo 1 >small &&
		for k in dir/a dir/b other/c; do
			s3 PUT /$bucket/$k -T small && expect_status 200 || return 1
		done &&
		s3 GET "/$bucket?list-type=2&prefix=dir%2F" && expect_status 200 &&
		xml_values Key >keys &&
		printf "dir/a\ndir/b\ndir/obj\n" >want && test_cmp want keys &&
		xml_values Size >sizes &&
		printf "2\n2\n3145728\n" >want && test_cmp want sizes &&
		s3 GET "/$bucket?list-type=2&max-keys=2" && expect_status 200 &&
		test "$(xml_values IsTruncated)" = true &&
		test "$(xml_values KeyCount)" = 2 &&
		token=$(xml_values NextContinuationToken) && test -n "$token" &&
		token=$(echo "$token" | sed "s/+/%2B/g; s|/|%2F|g; s/=/%3D/g") &&
		s3 GET "/$bucket?continuation-token=$token&list-type=2&max-keys=2" &&
		expect_status 200 &&
		test "$(xml_values IsTruncated)" = false &&
		xml_values Key >keys &&
		printf "dir/obj\nother/c\n" >want && test_cmp want keys
	'

	test_expect_success "$scheme: a wrong payload hash or Content-MD5 is refused, nothing stored" '
		S3_SHA=$(echo other | sha256sum | cut -d" " -f1) \
			s3 PUT /$bucket/bad -T small &&
		expect_status 400 && grep "<Code>BadDigest</Code>" body &&
		s3 PUT /$bucket/bad -T small \
			-H "Content-MD5: $(echo other | openssl md5 -binary | base64)" &&
		expect_status 400 && grep "<Code>BadDigest</Code>" body &&
		s3 HEAD /$bucket/bad && expect_status 404
	'

	test_expect_success "$scheme: delete; a missing key is 404 NoSuchKey" '
		s3 DELETE /$bucket/dir/a && expect_status 204 &&
		s3 GET /$bucket/dir/a && expect_status 404 &&
		grep "<Code>NoSuchKey</Code>" body &&
		s3 HEAD /$bucket/dir/a && expect_status 404 &&
		s3 GET /$bucket/never && expect_status 404 &&
		grep "<Code>NoSuchKey</Code>" body &&
		s3 DELETE /$bucket/never && expect_status 204
	'

	# Parts are at least 5 MiB, but for the last: S3's rule, and s3api's.
	test_expect_success "$scheme: a multipart upload, completed, reads back whole" '
		random_file part1 5 && echo tail >part2 &&
		s3 POST "/$bucket/mp?uploads=" && expect_status 200 &&
		id=$(xml_values UploadId) && test -n "$id" &&
		s3 PUT "/$bucket/mp?partNumber=1&uploadId=$id" -T part1 &&
		expect_status 200 && e1=$(header etag) &&
		s3 PUT "/$bucket/mp?partNumber=2&uploadId=$id" -T part2 &&
		expect_status 200 && e2=$(header etag) &&
		printf "<CompleteMultipartUpload>%s%s</CompleteMultipartUpload>" \
			"<Part><PartNumber>1</PartNumber><ETag>$e1</ETag></Part>" \
			"<Part><PartNumber>2</PartNumber><ETag>$e2</ETag></Part>" \
			>complete &&
		s3 POST "/$bucket/mp?uploadId=$id" --data-binary @complete &&
		expect_status 200 &&
		xml_values ETag | grep "^\"[0-9a-f]\{32\}-2\"$" &&
		s3 GET /$bucket/mp && expect_status 200 &&
		cat part1 part2 | cmp - body
	'

	test_expect_success "$scheme: an upload too small to be a part is EntityTooSmall" '
		s3 POST "/$bucket/mp2?uploads=" && expect_status 200 &&
		id=$(xml_values UploadId) &&
		s3 PUT "/$bucket/mp2?partNumber=1&uploadId=$id" -T small &&
		e1=$(header etag) &&
		s3 PUT "/$bucket/mp2?partNumber=2&uploadId=$id" -T small &&
		e2=$(header etag) &&
		printf "<CompleteMultipartUpload>%s%s</CompleteMultipartUpload>" \
			"<Part><PartNumber>1</PartNumber><ETag>$e1</ETag></Part>" \
			"<Part><PartNumber>2</PartNumber><ETag>$e2</ETag></Part>" \
			>complete &&
		s3 POST "/$bucket/mp2?uploadId=$id" --data-binary @complete &&
		expect_status 400 && grep "<Code>EntityTooSmall</Code>" body &&
		s3 DELETE "/$bucket/mp2?uploadId=$id" && expect_status 204 &&
		s3 HEAD /$bucket/mp2 && expect_status 404
	'

	test_expect_success "$scheme: DeleteObjects deletes several keys at once" '
		printf "<Delete><Object><Key>dir/b</Key></Object>%s</Delete>" \
			"<Object><Key>other/c</Key></Object>" >delete &&
		s3 POST "/$bucket?delete=" --data-binary @delete \
			-H "Content-MD5: $(openssl md5 -binary <delete | base64)" &&
		expect_status 200 &&
		xml_values Key | sort >keys &&
		printf "dir/b\nother/c\n" >want && test_cmp want keys &&
		s3 GET "/$bucket?list-type=2" && xml_values Key >keys &&
		printf "dir/obj\nmp\n" >want && test_cmp want keys
	'

	# Swift 2.30 answers any conditional PUT with 501, whether the key
	# exists or not, and stores nothing: no code may rely on one.
	test_expect_success "$scheme: If-None-Match: * on a PUT is 501 NotImplemented" '
		s3 PUT /$bucket/new -T small -H "If-None-Match: *" &&
		expect_status 501 && grep "<Code>NotImplemented</Code>" body &&
		s3 HEAD /$bucket/new && expect_status 404 &&
		s3 PUT /$bucket/dir/obj -T small -H "If-None-Match: *" &&
		expect_status 501 &&
		s3 HEAD /$bucket/dir/obj && expect_status 200 &&
		test "$(header content-length)" = 3145728
	'

	# A body of unknown length goes in HTTP chunks with an unsigned
	# payload; the aws-chunked encoding (each chunk signed, restic's over
	# plain HTTP) is 501.
	test_expect_success "$scheme: a chunked PUT is stored; aws-chunked is 501" '
		cat small | s3 PUT /$bucket/chunked -T - &&
		expect_status 200 &&
		s3 GET /$bucket/chunked && cmp small body &&
		S3_SHA=STREAMING-AWS4-HMAC-SHA256-PAYLOAD s3 PUT /$bucket/awsch \
			-T small -H "Content-Encoding: aws-chunked" \
			-H "x-amz-decoded-content-length: 2" &&
		expect_status 501 && grep "<Code>NotImplemented</Code>" body
	'
done

test_expect_success 'https: without the certificate, curl refuses the server' '
	test_expect_code 60 curl -sS -o /dev/null "$SWIFT_S3_HTTPS_URL/healthcheck"
'

# Swift says SignatureDoesNotMatch for an unknown access key too, where S3
# says InvalidAccessKeyId.
test_expect_success 'a wrong secret or an unknown access key is 403' '
	url=$SWIFT_S3_URL cacert= &&
	printf "machine 127.0.0.1\nlogin test:tester\npassword wrong\n" >bad &&
	S3_NETRC=bad s3 GET /bucket-http && expect_status 403 &&
	grep "<Code>SignatureDoesNotMatch</Code>" body &&
	printf "machine 127.0.0.1\nlogin nobody:x\npassword testing\n" >bad &&
	S3_NETRC=bad s3 GET /bucket-http && expect_status 403 &&
	grep "<Code>SignatureDoesNotMatch</Code>" body
'

test_expect_success 'the object server killed: 503, and after a restart the object is back' '
	url=$SWIFT_S3_URL cacert= &&
	kill -9 $SWIFT_OBJECT_PID &&
	s3 GET /bucket-http/dir/obj && expect_status 503 &&
	old=$SWIFT_OBJECT_PID &&
	eval "$("$SWIFT_SERVER" restart "$SWIFT_DIR" object)" &&
	test "$SWIFT_OBJECT_PID" != "$old" &&
	running $SWIFT_OBJECT_PID &&
	s3 GET /bucket-https/dir/obj && expect_status 200 && cmp obj body
'

# stop checks that each recorded PID is still its server before it signals
# it: a PID file naming another process (a reused PID) leaves it alone.
test_expect_success 'stop ends exactly its servers, a stopped one too' '
	kill -STOP $SWIFT_PROXY_PID &&
	"$SWIFT_SERVER" stop "$SWIFT_DIR" &&
	for p in $SWIFT_ACCOUNT_PID $SWIFT_CONTAINER_PID $SWIFT_OBJECT_PID \
		$SWIFT_PROXY_PID $SWIFT_PROXY_TLS_PID; do
		! running $p || return 1
	done &&
	test_must_fail curl -sS "$SWIFT_S3_URL/healthcheck" &&
	{ sleep 60 & } &&
	bystander=$! &&
	echo $bystander >"$SWIFT_DIR/run/object.pid" &&
	"$SWIFT_SERVER" stop "$SWIFT_DIR" &&
	running $bystander &&
	kill $bystander
'

# A script that dies in a test (exit) stops its store in the exit trap,
# which removes the PID files; one killed by SIGKILL runs no trap, and its
# store, PID files left behind, exits by itself.
test_expect_success 'a dying script leaves no server behind' '
	cat >t.sh <<-\EOF &&
	TEST_NO_COFFER=1
	. "$LIB"
	test_expect_success "start, then die" "
		swift_start \"\$STORE\" &&
		echo \$SWIFT_PIDS >\"\$STORE.pids\" &&
		if [ \$HOW = kill ]; then kill -9 \$\$; else exit 3; fi
	"
	EOF
	export LIB="$TOP/tests/lib.sh" &&
	{ STORE=$TMP/exit HOW=exit bash t.sh >exit.out 2>&1 & } &&
	p1=$! &&
	{ STORE=$TMP/kill HOW=kill bash t.sh >kill.out 2>&1 & } &&
	p2=$! &&
	{ wait $p1; wait $p2; true; } &&
	set -- $(cat exit.pids kill.pids) && test $# = 10 &&
	for i in $(seq 100); do
		alive= &&
		for p; do
			! running $p || alive="$alive $p"
		done &&
		test -z "$alive" && break
		sleep 0.1
	done &&
	test -z "$alive" &&
	test_dir_is_empty exit/run &&
	ls kill/run >pidfiles && test_line_count = 5 pidfiles
'

test_done
