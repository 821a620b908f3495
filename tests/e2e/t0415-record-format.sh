#!/bin/bash
test_description='records are format 1: a snapshot record of another format is refused in one line, never misread'
. "$(dirname "$0")/../lib.sh"

# Snapshot records carry their format in their image's meta rows
# (doc/format.md, "Snapshot record").  A record of another format, signed
# by the repository's key (a newer coffer's, say), is named and left out;
# the snapshots this coffer reads stay as they are, here and in a rebuild.
FORGE=$BUILD/tests/forge-record
test -x "$FORGE" && test_set_prereq FORGE

test_expect_success FORGE 'setup: a full' '
	coffer_init_keyfile repo &&
	mkdir src && printf "one\n" >src/one && printf "two\n" >src/two &&
	coffer -r repo backup --json --level full ds src >b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") &&
	pack=$(sqlite3 "$(catalog_db)" "SELECT record_pack FROM snapshot WHERE sid = '\''$sid'\''") &&
	test -n "$pack" && echo "$sid $pack" >which
'

test_expect_success FORGE 'a snapshot record of format 2 is refused with one line naming it' '
	read -r sid pack <which &&
	"$FORGE" format repo "$COFFER_KEY_FILE" "$pack" 2 >forged &&
	test_must_fail coffer -r repo snapshots 2>err &&
	cat err &&
	test "$(grep -c "format" err)" = 1 &&
	grep -F "snapshot record $sid: has format 2; this coffer reads format 1" err
'

test_expect_success FORGE 'the snapshot is as it was, and a rebuild reads it, refusing the other' '
	read -r sid pack <which &&
	rm -rf out && coffer -r repo restore "$sid" out 2>/dev/null &&
	treecmp src out &&
	test_expect_code 4 coffer -r repo catalog rebuild >rb 2>err &&
	cat err &&
	grep -F "has format 2; this coffer reads format 1" err &&
	coffer -r repo snapshots --json >s.json 2>/dev/null;
	json_check s.json "grep { \$_->{id} eq q($sid) && \$_->{state} eq q(complete) } @\$j"
'

test_done
