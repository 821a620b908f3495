#!/bin/bash
test_description='many small files: a catalog insert failing mid-run, or kill -9 while the record parts are stored, leaves complete snapshots only, each restorable, and a rebuild the same'
. "$(dirname "$0")/../lib.sh"

MANYFILES=$BUILD/tests/manyfiles
test -x "$MANYFILES" && test_set_prereq MANYFILES

# Small packs, so that the run commits several times before it fails (a
# commit per 16 packs' worth, 256 KiB here), and parts of 500 entries, so
# that the record of 3,000 files is stored in several.
export COFFER_PACK_SIZE=16384 COFFER_RECORD_PART_ENTRIES=500

complete() {	# complete FILE: "id dataset level files" of the complete ones
	coffer -r repo snapshots --json >"$TEST_LOG/l.json" &&
	json_get "$TEST_LOG/l.json" '
		join("\n", sort map { join(" ", $_->{id}, $_->{dataset},
		    $_->{level}, $_->{files}) }
		grep { $_->{state} eq "complete" } @$j)' >"$1"
}

# No content row without all of its chunk rows: a content is found by
# hash and then trusted to be whole.
contents_whole() {
	test "$(sqlite3 "$(catalog_db)" "SELECT count(*) FROM content c
		WHERE c.nchunks != (SELECT count(*) FROM content_chunk cc
		WHERE cc.content_id = c.id)")" = 0 &&
	test -z "$(sqlite3 "$(catalog_db)" "PRAGMA foreign_key_check")"
}

test_expect_success MANYFILES 'setup: a complete snapshot of 2,000 files' '
	"$MANYFILES" src 2000 100 3000 &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b1.json &&
	id1=$(json_get b1.json "\$j->{snapshot}") &&
	echo "$id1" >id1 &&
	cp -a src s1.copy
'

# The content row goes in, then its chunk list: the trigger fails the
# chunk list of the 1,001st new content, after the run has committed
# several times.
test_expect_success MANYFILES 'a content whose chunk list cannot be added fails the run, and nothing of it stays' '
	"$MANYFILES" src/more 2000 100 2500 &&
	n=$(sqlite3 "$(catalog_db)" "SELECT count(*) FROM content") &&
	sqlite3 "$(catalog_db)" "CREATE TRIGGER fail_list BEFORE INSERT
		ON content_chunk WHEN (SELECT count(*) FROM content) > $n + 1000
		BEGIN SELECT RAISE(ABORT, '\''injected failure'\''); END" &&
	test_must_fail coffer -r repo backup ds src 2>err &&
	grep "injected failure" err &&
	sqlite3 "$(catalog_db)" "DROP TRIGGER fail_list" &&
	contents_whole &&
	coffer -r repo snapshots --json >s.json &&
	json_check s.json "(grep { \$_->{state} eq q(failed) } @\$j) == 1 &&
	    (grep { \$_->{state} eq q(complete) } @\$j) == 1"
'

test_expect_success MANYFILES 'after it, the complete snapshot restores and the next run stores everything' '
	coffer -r repo restore "$(cat id1)" r1 &&
	treecmp s1.copy r1 &&
	coffer -r repo backup --json --level full ds src >b2.json &&
	json_check b2.json "\$j->{files} == 4000" &&
	contents_whole &&
	coffer -r repo restore ds@latest r2 &&
	treecmp src r2
'

test_expect_success MANYFILES 'kill -9 once the third part of a record is stored' '
	"$MANYFILES" src/third 1000 100 2000 &&
	complete before &&
	test_expect_code 137 env COFFER_TEST_RAISE=backup-part:3:KILL \
		"$COFFER" -r repo backup --level full ds src &&
	complete after &&
	test_cmp before after
'

test_expect_success MANYFILES 'after the kill every complete snapshot restores, and the next run completes' '
	coffer -r repo restore "$(cat id1)" r3 &&
	treecmp s1.copy r3 &&
	coffer -r repo backup --json --level full ds src >b3.json &&
	json_check b3.json "\$j->{files} == 5000" &&
	contents_whole &&
	coffer -r repo restore ds@latest r4 &&
	treecmp src r4
'

test_expect_success MANYFILES 'a catalog rebuilt from the repository lists the same snapshots and restores the same' '
	complete kept &&
	rm -rf "$XDG_STATE_HOME/coffer" &&
	complete rebuilt &&
	test_cmp kept rebuilt &&
	contents_whole &&
	coffer -r repo restore ds@latest r5 &&
	treecmp src r5 &&
	coffer -r repo restore "$(cat id1)" r6 &&
	treecmp s1.copy r6
'

test_done
