#!/bin/bash
test_description='many tiny files: packs closed by their number of records, every file restores, after a rebuild too'
. "$(dirname "$0")/../lib.sh"

MANYFILES=$BUILD/tests/manyfiles
test -x "$MANYFILES" && test_set_prereq MANYFILES

# 40,000 files of 16 bytes make 40,000 records of about 70 bytes: one
# pack if packs were closed by size alone (64 MiB).  Closed at 16,384
# records (PACK_TARGET_RECORDS), they make at least three; a pack is
# closed between batches of chunks (at most 4,096 of them, BATCH_JOBS),
# so it may hold up to one batch more.  Hard links whose names are ten
# batches apart.
test_expect_success MANYFILES 'setup: 40,000 files of 16 bytes, hard links' '
	"$MANYFILES" src 40000 1000 16 &&
	ln src/d000000/f000000 src/d000039/link-a &&
	ln src/d000039/f000999 src/d000000/link-b &&
	coffer_init_keyfile repo
'

test_expect_success MANYFILES 'backup: no pack holds more than a batch over 16,384 records' '
	coffer -r repo backup --json ds src >b.json &&
	json_check b.json "\$j->{files} == 40002 && \$j->{warnings} == 0" &&
	sqlite3 "$(catalog_db)" "SELECT count(*) FROM chunk
		WHERE pack_id IS NOT NULL GROUP BY pack_id" >per-pack &&
	cat per-pack && test_line_count -ge 3 per-pack &&
	test "$(sort -n per-pack | tail -n 1)" -le $((16384 + 4096)) &&
	test "$(awk "{ n += \$1 } END { print n }" per-pack)" = 40000
'

test_expect_success MANYFILES 'nothing changed: nothing stored' '
	coffer -r repo backup --json ds src >b2.json &&
	json_check b2.json "\$j->{unchanged} > 40000 && \$j->{bytes_new} == 0"
'

test_expect_success MANYFILES 'verify reads every chunk' '
	coffer -r repo verify --read-data
'

test_expect_success MANYFILES 'rebuilt from the repository, the snapshot restores whole' '
	rm -rf "$XDG_STATE_HOME/coffer" &&
	coffer -r repo snapshots --json >s.json &&
	json_check s.json "@\$j == 2 &&
	    (grep { \$_->{level} eq \"full\" && \$_->{files} == 40002 } @\$j)" &&
	coffer -r repo restore ds@latest out &&
	treecmp src out &&
	test "$(stat -c %i out/d000000/f000000)" = \
		"$(stat -c %i out/d000039/link-a)"
'

# A tree and a cp -al copy of it: 3,000 second names, handed to the
# recorder a thousand or so at a time (no data is read for them, so no
# step of the pipeline comes to do it).
test_expect_success MANYFILES 'a cp -al copy: every second name a link, the record spooled' '
	mkdir lt && "$MANYFILES" lt/a 3000 100 16 && cp -al lt/a lt/b &&
	coffer -v -r repo backup --json --level full lt lt >l.json 2>l.err &&
	grep "record: built from the rows spooled" l.err &&
	json_check l.json "\$j->{files} == 6000 && \$j->{warnings} == 0 &&
	    \$j->{bytes_read} == 3000 * 16" &&
	coffer -r repo restore lt@latest lout && treecmp lt lout &&
	test "$(stat -c %i lout/b/d000029/f000099)" = \
		"$(stat -c %i lout/a/d000029/f000099)" &&
	rm -rf "$XDG_STATE_HOME/coffer" lout &&
	coffer -r repo restore lt@latest lout && treecmp lt lout
'

test_done
