#!/bin/bash
test_description='restore and verify: a record that authenticates but is not what its id hashes'
. "$(dirname "$0")/../lib.sh"

# Only a writer holding the keys can make a record that authenticates: a
# bug, or such a writer misbehaving.  After decrypting, the keyed hash of
# the content must still be its id.  Restore hashes a window's chunks in
# groups (eight side by side where the processor has AVX-512) before it
# writes any of the window's files; a chunk that is not its id loses its
# file and only its file, with the scalar code as with the vector code.
FORGE=$BUILD/tests/forge-record
test -x "$FORGE" && test_set_prereq FORGE

test_expect_success FORGE 'setup: small files and checkpoint-sized ones, backed up' '
	mkdir -p src/text src/ckpt &&
	for i in $(seq 1 40); do
		head -c $((1000 + i * 300)) /dev/urandom >src/text/f$i.txt
	done &&
	random_file src/ckpt/a.bin 6 &&
	random_file src/ckpt/b.bin 9 &&
	random_file src/ckpt/c.bin 3 &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b.json &&
	id=$(json_get b.json "\$j->{snapshot}") &&
	coffer -r repo restore "$id" out-0 &&
	treecmp src out-0
'

# forge PATH SEQ: that chunk's catalog row now points to a forged record
# of its length, sealed under its id (a new pack; forge-record).
forge() {
	set -- $(sqlite3 -separator " " "$(catalog_db)" "
		SELECT lower(hex(ch.cid)), ch.plain_len FROM entry e
		JOIN path pa ON pa.id = e.path_id
		JOIN content_chunk cc ON cc.content_id = e.content_id
		JOIN chunk ch ON ch.id = cc.chunk_id
		WHERE pa.name = CAST('$1' AS BLOB) AND cc.seq = $2
		LIMIT 1") &&
	test $# = 2 &&
	cid=$1 &&
	set -- $("$FORGE" repo "$COFFER_KEY_FILE" "$cid" "$2") &&
	test $# = 4 &&
	sqlite3 "$(catalog_db)" "
		INSERT INTO pack (name, size, hash, created_ns)
			VALUES ('$1', $4, zeroblob(32), 0);
		UPDATE chunk SET pack_id = (SELECT id FROM pack
			WHERE name = '$1'), pack_offset = $2,
			stored_len = $3, flags = 0
		WHERE cid = X'$cid'"
}

test_expect_success FORGE 'a forged chunk of a small file: that file alone lost' '
	forge text/f7.txt 0 &&
	test_expect_code 4 coffer -r repo restore "$id" out-1 2>err &&
	cat err &&
	grep -F "content does not match its id" err &&
	restored_or_named out-1 >lost &&
	cat lost &&
	test_line_count = 1 lost &&
	grep -F text/f7.txt lost
'

test_expect_success FORGE 'and one of a checkpoint: those two files lost' '
	forge ckpt/b.bin 1 &&
	test_expect_code 4 coffer -r repo restore "$id" out-2 2>err &&
	cat err &&
	test $(grep -c "content does not match its id" err) = 2 &&
	restored_or_named out-2 >lost &&
	cat lost &&
	test_line_count = 2 lost &&
	grep -F text/f7.txt lost && grep -F ckpt/b.bin lost
'

test_expect_success FORGE 'the same one chunk at a time (COFFER_BLAKE2B_X8=0)' '
	COFFER_BLAKE2B_X8=0 test_expect_code 4 \
		coffer -r repo restore "$id" out-3 2>err &&
	cat err &&
	restored_or_named out-3 >lost &&
	test_line_count = 2 lost &&
	grep -F text/f7.txt lost && grep -F ckpt/b.bin lost
'

test_expect_success FORGE 'restore on one thread: the same' '
	test_expect_code 4 coffer -r repo restore --threads 1 "$id" out-4 \
		2>err &&
	restored_or_named out-4 >lost &&
	test_line_count = 2 lost
'

test_expect_success FORGE 'verify --read-data finds both' '
	test_expect_code 4 coffer -r repo verify --read-data >out 2>err &&
	cat out err &&
	test $(grep -c "content does not match its id" err) = 2
'

test_done
