#!/bin/bash
test_description='a record that would rewrite a snapshot needs the authority: forged revisions are refused'
. "$(dirname "$0")/../lib.sh"

# A write-only key signs snapshot records with the signing key every key
# shares, so a record's ordinary signature says only that some key of the
# repository made it.  Forget's rebase writes a record of the same
# snapshot with a higher revision, signed by the authority as well (full
# keys only).  A record of a higher revision signed only the ordinary
# way, or with a bad authority signature, must be named and left out,
# and the snapshot stay as it was: on this host, in a rebuild, on another.
FORGE=$BUILD/tests/forge-record
test -x "$FORGE" && test_set_prereq FORGE

test_expect_success FORGE 'setup: a full and two incrementals' '
	coffer_init_keyfile repo &&
	mkdir src &&
	for i in 1 2 3 4 5; do printf "%s\n" $i >src/f$i; done &&
	coffer -r repo backup --level full ds src &&
	printf "six\n" >src/f6 && rm src/f1 &&
	coffer -r repo backup --level incremental ds src &&
	printf "seven\n" >src/f7 &&
	coffer -r repo backup --json --level incremental ds src >b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") &&
	cp -a src expect &&
	pack=$(sqlite3 "$(catalog_db)" "SELECT record_pack FROM snapshot WHERE sid = '\''$sid'\''") &&
	test -n "$pack" && echo "$sid $pack" >which
'

check_intact() {
	read -r sid pack <which &&
	coffer -r repo snapshots --json >s.json &&
	json_check s.json "my (\$s) = grep { \$_->{id} eq q($sid) } @\$j; \$s && \$s->{revision} == 0 && \$s->{level} eq q(incremental)" &&
	rm -rf out && coffer -r repo restore "$sid" out &&
	treecmp expect out
}

test_expect_success FORGE 'a higher revision signed only the ordinary way is refused' '
	read -r sid pack <which &&
	"$FORGE" revise repo "$COFFER_KEY_FILE" "$pack" 7 >forged &&
	test_must_fail coffer -r repo snapshots 2>err &&
	cat err &&
	grep -F "snapshot record $sid: revision 7 without the authority" err &&
	check_intact 2>err2 && cat err2
'

test_expect_success FORGE 'one with a bad authority signature is refused' '
	read -r sid pack <which &&
	"$FORGE" revise repo "$COFFER_KEY_FILE" "$pack" 8 bad-authority >forged2 &&
	test_must_fail coffer -r repo snapshots 2>err &&
	cat err &&
	grep -F "$(cat forged2)" err | grep -F "bad authority signature" &&
	check_intact
'

test_expect_success FORGE 'a rebuilt catalog and another host refuse them too' '
	read -r sid pack <which &&
	test_must_fail coffer -r repo catalog rebuild 2>err &&
	cat err &&
	grep -F "revision 7 without the authority" err &&
	grep -F "bad authority signature" err &&
	check_intact &&
	test_must_fail env XDG_STATE_HOME=$PWD/host2 $COFFER -r repo snapshots --json >h.json 2>err &&
	json_check h.json "my (\$s) = grep { \$_->{id} eq q($sid) } @\$j; \$s && \$s->{revision} == 0"
'

test_expect_success FORGE 'a real rebase is taken, and outranks nothing forged' '
	read -r sid pack <which &&
	coffer -r repo forget --keep-last 1 &&
	coffer -r repo snapshots --json >s.json &&
	json_check s.json "@\$j == 1 && \$j->[0]{revision} == 1 && \$j->[0]{level} eq q(full)" &&
	XDG_STATE_HOME=$PWD/host3 coffer -r repo snapshots --json >h.json 2>err ;
	cat err &&
	json_check h.json "@\$j == 1 && \$j->[0]{revision} == 1 && \$j->[0]{level} eq q(full)" &&
	rm -rf out && XDG_STATE_HOME=$PWD/host3 coffer -r repo restore "$sid" out &&
	treecmp expect out
'

test_done
