#!/bin/bash
test_description='records sealed by libsodium and by OpenSSL open either way'
. "$(dirname "$0")/../lib.sh"

# Every record (data, pack index, snapshot record) is XChaCha20-Poly1305
# as libsodium builds it; OpenSSL computes it where it can, libsodium
# with COFFER_AEAD=libsodium, and where OpenSSL cannot be set up.  A
# repository written before OpenSSL came in, or on a host without it,
# must restore and verify on one with it, and the other way round.
test_expect_success 'setup: a tree backed up with libsodium sealing' '
	mktree src 2>/dev/null &&
	random_file src/big.bin 5 &&
	coffer_init_keyfile repo &&
	COFFER_AEAD=libsodium coffer -r repo backup --json ds src >a.json &&
	cp -a src src-a
'

test_expect_success 'then a change backed up with OpenSSL sealing' '
	random_file src/new.bin 3 &&
	echo more >>src/big.bin &&
	coffer -r repo backup --json ds src >b.json
'

test_expect_success 'OpenSSL opens what libsodium sealed' '
	id=$(json_get a.json "\$j->{snapshot}") &&
	coffer -r repo restore "$id" out-a &&
	treecmp src-a out-a
'

test_expect_success 'libsodium opens what OpenSSL sealed (and the rest)' '
	id=$(json_get b.json "\$j->{snapshot}") &&
	COFFER_AEAD=libsodium coffer -r repo restore "$id" out-b &&
	treecmp src out-b
'

test_expect_success 'verify --read-data finds every record sound, either way' '
	coffer -r repo verify --read-data >out 2>err &&
	test_must_be_empty err &&
	COFFER_AEAD=libsodium coffer -r repo verify --read-data >out 2>err &&
	test_must_be_empty err
'

test_expect_success 'a changed byte fails either way' '
	pack=$(largest_pack repo) &&
	flip_byte "$pack" 4000 &&
	test_expect_code 4 coffer -r repo verify --read-data >out 2>err &&
	grep "failed authentication" err &&
	test_expect_code 4 env COFFER_AEAD=libsodium "$COFFER" -r repo \
		verify --read-data >out 2>err &&
	grep "failed authentication" err
'

test_done
