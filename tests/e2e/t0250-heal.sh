#!/bin/bash
test_description='a chunk found damaged is stored again by the next backup that meets it, and every snapshot heals'
. "$(dirname "$0")/../lib.sh"

# flip_chunk PATH SEQ: damage the SEQth chunk of PATH in its pack.
flip_chunk() {
	set -- $(chunk_loc "$1" "$2") &&
	test -n "$1" &&
	flip_byte "$(pack_path "$1")" $(( $2 + 40 ))
}

test_expect_success 'setup: two snapshots sharing a file' '
	mkdir src && random_file src/weights.bin 3 &&
	random_file src/gone.bin 1 &&
	printf "notes\n" >src/notes.txt &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b1.json &&
	old=$(json_get b1.json "\$j->{snapshot}") &&
	printf "more\n" >>src/notes.txt &&
	coffer -r repo backup --json ds src >b2.json &&
	cp -a src src.copy
'

test_expect_success 'a byte flipped in a chunk of the shared file: verify names it' '
	flip_chunk weights.bin 0 &&
	test_expect_code 4 coffer -r repo verify --read-data >v1 2>&1 &&
	cat v1 &&
	grep weights.bin v1
'

test_expect_success 'restore of the old snapshot fails on that file (exit 4)' '
	test_expect_code 4 coffer -r repo restore "$old" out1 2>err &&
	grep weights.bin err
'

test_expect_success 'a full backup stores the damaged chunk again' '
	coffer -r repo backup --json --level full ds src >b3.json &&
	json_check b3.json "\$j->{bytes_new} > 0"
'

test_expect_success 'verify --read-data passes: every snapshot is healed' '
	coffer -r repo verify --read-data
'

test_expect_success 'the old snapshot restores identically' '
	coffer -r repo restore "$old" out2 &&
	cmp src.copy/weights.bin out2/weights.bin &&
	cmp src.copy/gone.bin out2/gone.bin
'

test_expect_success 'content the source no longer has stays named by verify' '
	flip_chunk gone.bin 0 &&
	test_expect_code 4 coffer -r repo verify --read-data >v2 2>&1 &&
	grep gone.bin v2 &&
	rm src/gone.bin &&
	coffer -r repo backup --level full ds src &&
	test_expect_code 4 coffer -r repo verify --read-data >v3 2>&1 &&
	cat v3 &&
	grep gone.bin v3 &&
	! grep weights.bin v3
'

test_expect_success 'an unchanged file is healed by a full, not by an incremental' '
	flip_chunk weights.bin 1 &&
	test_expect_code 4 coffer -r repo verify --read-data >/dev/null 2>&1 &&
	coffer -r repo backup --json ds src >b4.json &&
	json_check b4.json "\$j->{bytes_new} < 1048576" &&
	test_expect_code 4 coffer -r repo verify --read-data >/dev/null 2>&1 &&
	coffer -r repo backup --level full ds src &&
	test_expect_code 4 coffer -r repo verify --read-data >v4 2>&1 &&
	cat v4 &&
	grep gone.bin v4 &&
	! grep weights.bin v4
'

test_expect_success 'damage found by a restore heals the same way' '
	printf "x\n" >src/new.txt &&
	random_file src/other.bin 2 &&
	coffer -r repo backup --json ds src >b5.json &&
	snap=$(json_get b5.json "\$j->{snapshot}") &&
	flip_chunk other.bin 0 &&
	test_expect_code 4 coffer -r repo restore "$snap" out5 2>err &&
	grep other.bin err &&
	coffer -r repo backup --json --level full ds src >b6.json &&
	json_check b6.json "\$j->{bytes_new} > 0" &&
	coffer -r repo restore "$snap" out6 &&
	cmp src/other.bin out6/other.bin
'

# A pack lost (deleted under the repository), found by a sync alone,
# before any verify: what snapshots still need of it counts as missing,
# not stored, so the next backup that meets it stores it again rather
# than build a new snapshot on data that is gone.  In a repository of
# its own: snapshot A's pack (its data and its record) goes; B, which
# deduplicated against it, heals.  (char(...) is "lost.bin", unquoted.)
test_expect_success 'a pack lost: the next backup stores its data again, and heals' '
	mkdir lsrc && random_file lsrc/lost.bin 2 &&
	coffer_init_keyfile repo2 key2 &&
	coffer -r repo2 backup --level full ds lsrc &&
	set -- $(sqlite3 "$(catalog_db repo2)" "SELECT p.name FROM pack p
		JOIN chunk ch ON ch.pack_id = p.id
		JOIN content_chunk cc ON cc.chunk_id = ch.id
		JOIN entry e ON e.content_id = cc.content_id
		JOIN path pa ON pa.id = e.path_id
		WHERE pa.name = CAST(char(108, 111, 115, 116, 46, 98, 105, 110)
		AS BLOB) LIMIT 1") &&
	echo more >lsrc/note &&
	coffer -r repo2 backup --json ds lsrc >l2.json &&
	json_check l2.json "\$j->{bytes_new} < 1048576" &&
	b=$(json_get l2.json "\$j->{snapshot}") &&
	rm "repo2/packs/$(echo "$1" | cut -c1-2)/$1" &&
	coffer -r repo2 backup --json --level full ds lsrc >l3.json &&
	json_check l3.json "\$j->{bytes_new} >= 2 * 1048576" &&
	coffer -r repo2 restore "$b" lout &&
	cmp lsrc/lost.bin lout/lost.bin
'

test_done
