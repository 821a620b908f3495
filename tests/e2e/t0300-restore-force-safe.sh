#!/bin/bash
test_description='restore --force over live files: damaged data never costs what was there'
. "$(dirname "$0")/../lib.sh"

# A restore over production is --force into the live tree.  A file whose
# backed-up content turns out damaged must leave the live file as it was,
# whichever window of the restore finds the damage (windows hold 8 MiB of
# chunks: a 20 MiB file spans three).

fresh_repo() {
	rm -rf repo && cp -a pristine repo
}

# damage PATH SEQ: flip a byte in the middle of the record of that chunk
# ("last": its last chunk).
damage() {
	seq=$2 &&
	if test "$seq" = last; then
		seq=$(sqlite3 "$(catalog_db)" "
			SELECT max(cc.seq) FROM entry e
			JOIN path pa ON pa.id = e.path_id
			JOIN content_chunk cc ON cc.content_id = e.content_id
			WHERE pa.name = CAST('$1' AS BLOB)")
	fi &&
	set -- $(chunk_loc "$1" "$seq") &&
	test $# = 3 &&
	flip_byte "$(pack_path "$1")" $(($2 + $3 / 2))
}

# The live tree: the backed-up one, then changed by production since.
make_live() {
	rm -rf live && cp -a src live &&
	printf "live small, changed since\n" >live/d/small.txt &&
	random_file live/d/big.bin 20 &&
	printf "live link, changed since\n" >live/d/h1 &&
	rm live/d/h2 && printf "live second name\n" >live/d/h2 &&
	rm -rf before && cp -a live before
}

# Nothing but the restored files changed, and no temporary left.
no_leftovers() {
	find "$1" -name ".coffer-*" >left &&
	test_must_be_empty left
}

test_expect_success 'setup: small and multi-window files, hard links, backed up' '
	mkdir -p src/d src/e &&
	printf "small file, as backed up\n" >src/d/small.txt &&
	printf "neighbour\n" >src/d/other.txt &&
	random_file src/d/big.bin 20 &&
	printf "linked, as backed up\n" >src/d/h1 &&
	ln src/d/h1 src/d/h2 &&
	printf "elsewhere\n" >src/e/f.txt &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b.json &&
	id=$(json_get b.json "\$j->{snapshot}") &&
	cp -a repo pristine
'

test_expect_success 'restore --force of undamaged data replaces live files' '
	make_live &&
	coffer -r repo restore --force "$id" live &&
	treecmp src live &&
	no_leftovers live
'

test_expect_success 'a damaged small file: exit 4, the live file as it was' '
	make_live &&
	damage d/small.txt 0 &&
	test_expect_code 4 coffer -r repo restore --force "$id" live 2>err &&
	cat err &&
	grep -F d/small.txt err &&
	cmp before/d/small.txt live/d/small.txt &&
	cmp src/d/other.txt live/d/other.txt &&
	cmp src/d/big.bin live/d/big.bin &&
	no_leftovers live
'

test_expect_success 'a damaged first window of a large file: the live file as it was' '
	fresh_repo && make_live &&
	damage d/big.bin 0 &&
	test_expect_code 4 coffer -r repo restore --force "$id" live 2>err &&
	cat err &&
	grep -F d/big.bin err &&
	cmp before/d/big.bin live/d/big.bin &&
	cmp src/d/small.txt live/d/small.txt &&
	no_leftovers live
'

test_expect_success 'a damaged later window of a large file: the live file as it was' '
	fresh_repo && make_live &&
	damage d/big.bin last &&
	test_expect_code 4 coffer -r repo restore --force "$id" live 2>err &&
	cat err &&
	grep -F d/big.bin err &&
	cmp before/d/big.bin live/d/big.bin &&
	cmp src/d/small.txt live/d/small.txt &&
	no_leftovers live
'

test_expect_success 'the same on one thread' '
	make_live &&
	test_expect_code 4 coffer -r repo restore --threads 1 --force "$id" \
		live 2>err &&
	cat err &&
	cmp before/d/big.bin live/d/big.bin &&
	cmp src/d/small.txt live/d/small.txt &&
	no_leftovers live
'

test_expect_success 'a damaged hard-linked file: both live names as they were' '
	fresh_repo && make_live &&
	damage d/h1 0 &&
	test_expect_code 4 coffer -r repo restore --force "$id" live 2>err &&
	cat err &&
	cmp before/d/h1 live/d/h1 &&
	cmp before/d/h2 live/d/h2 &&
	cmp src/d/small.txt live/d/small.txt &&
	no_leftovers live
'

test_expect_success 'into a new target, a damaged file is left out, not torn' '
	fresh_repo &&
	damage d/big.bin last &&
	test_expect_code 4 coffer -r repo restore "$id" new 2>err &&
	test_path_is_missing new/d/big.bin &&
	cmp src/d/small.txt new/d/small.txt &&
	no_leftovers new
'

test_expect_success 'a directory where a file goes: an empty one is replaced' '
	fresh_repo &&
	rm -rf dirs && mkdir -p dirs/d/small.txt dirs/d/other.txt/full &&
	test_expect_code 5 coffer -r repo restore --force "$id" dirs 2>err &&
	cat err &&
	cmp src/d/small.txt dirs/d/small.txt &&
	test_path_is_dir dirs/d/other.txt/full &&
	grep -F d/other.txt err &&
	no_leftovers dirs
'

# A catalog row is not authenticated as a record is: a length of 4 GiB
# would be believed, and reserved, before the record's own check (under
# a limit of 3 GB of address space, where the binary runs in one: not
# under ASan).
test_expect_success 'a chunk length out of bounds in the catalog: that file only' '
	limit=3000000 &&
	(ulimit -v $limit && coffer help >/dev/null 2>&1) || limit=unlimited &&
	fresh_repo && make_live &&
	cp "$(catalog_db)" catalog.saved &&
	sqlite3 "$(catalog_db)" "
		UPDATE chunk SET plain_len = 4294967040 WHERE id = (
			SELECT cc.chunk_id FROM entry e
			JOIN path pa ON pa.id = e.path_id
			JOIN content_chunk cc ON cc.content_id = e.content_id
			WHERE pa.name = CAST(\"d/big.bin\" AS BLOB)
			AND cc.seq = 1)" &&
	(ulimit -v $limit &&
		test_expect_code 4 coffer -r repo restore --force "$id" live \
			2>err) &&
	cat err &&
	grep "d/big.bin" err | grep -F "$id" &&
	! grep -F "out of memory" err &&
	cmp before/d/big.bin live/d/big.bin &&
	cmp src/d/small.txt live/d/small.txt &&
	cp catalog.saved "$(catalog_db)"
'

test_done
