#!/bin/bash
test_description='a backup that starts while a forget is under way (its plan made, nothing written yet) waits for it, then builds on what it kept: its snapshot keeps its parent in the forgetting host'"'"'s catalog and through a prune, on a local repository and on object storage; a pack a prune deletes while a sync reads is not damage'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

# host N: the state (catalog) of simulated host N.
host() { export XDG_STATE_HOME=$TMP/host$1-state; mkdir -p "$XDG_STATE_HOME"; }

# window TAG: in repository $R, dataset TAG has a full and a differential
# on it.  Host 1 runs forget --keep-last 1, which keeps the differential,
# rebases it onto nothing (a full) and forgets the full; it stops itself
# once its plan is made.  Host 2, whose catalog holds both snapshots,
# starts a differential backup then: on the full being forgotten, unless
# it waits for the forget and takes it in first.
window() {
	rm -rf "src-$1" && mkdir "src-$1" &&
	random_file "src-$1/big" 2 && echo one >"src-$1/note" &&
	host 1 &&
	coffer -r "$R" backup --level full "$1" "src-$1" &&
	echo two >"src-$1/note" &&
	coffer -r "$R" backup --level differential "$1" "src-$1" &&
	host 2 &&
	coffer -r "$R" snapshots >/dev/null &&
	{ XDG_STATE_HOME=$TMP/host1-state COFFER_TEST_RAISE=forget-planned:1:STOP \
		"$COFFER" -r "$R" forget --keep-last 1 >f.out 2>f.err & } &&
	fpid=$! &&
	wait_stopped $fpid &&
	echo three >"src-$1/note" && random_file "src-$1/new" 1 &&
	rm -rf "want-$1" && cp -a "src-$1" "want-$1" &&
	{ XDG_STATE_HOME=$TMP/host2-state "$COFFER" -v --no-wait -r "$R" \
		backup --level differential "$1" "src-$1" >b.out 2>b.err & } &&
	bpid=$! &&
	sleep 1 &&
	kill -CONT $fpid &&
	wait $fpid &&
	wait $bpid &&
	cat f.err b.err &&
	grep "waiting for the forget lock" b.err
}

# kept TAG: the forgetting host's catalog takes the new snapshot in, with
# no record left out, on the differential the forget made a full; after
# a prune, a new host restores it exactly and verify reads every byte.
kept() {
	host 1 &&
	coffer -r "$R" snapshots --json "$1" >s.json 2>s.err &&
	cat s.err && test_must_be_empty s.err &&
	json_check s.json "@\$j == 2 &&
		(grep { \$_->{state} eq q(complete) } @\$j) == 2 &&
		\$j->[0]{level} eq q(full) && \$j->[1]{parent} eq \$j->[0]{id}" &&
	coffer -r "$R" prune &&
	host 3 &&
	rm -rf out &&
	coffer -r "$R" restore "$1@latest" out &&
	treecmp "want-$1" out &&
	coffer -r "$R" verify --read-data
}

test_expect_success 'setup: a repository on three hosts' '
	coffer_init_keyfile repo &&
	R=$TMP/repo
'

test_expect_success 'a backup beside a forget in progress waits for it' '
	window local
'

test_expect_success 'its snapshot keeps its parent, through a prune' '
	kept local
'

# A prune beside deletes packs between a sync's listing and its reads:
# a pack gone since the listing is not damage, and nothing is reported.
test_expect_success 'a pack gone between a sync'"'"'s listing and its read is not damage' '
	host 4 &&
	mkdir -p gsrc && echo a >gsrc/a &&
	coffer -r "$R" backup gone gsrc &&
	touch stamp && sleep 1 &&
	echo b >gsrc/b &&
	coffer -r "$R" backup gone gsrc &&
	host 5 &&
	{ COFFER_TEST_RAISE=sync-listed:1:STOP "$COFFER" -r "$R" \
		snapshots --json gone >g.json 2>g.err & } &&
	gpid=$! &&
	wait_stopped $gpid &&
	find repo/packs -type f -newer stamp -print -delete >deleted &&
	test -s deleted &&
	kill -CONT $gpid &&
	wait $gpid &&
	cat g.err && test_must_be_empty g.err &&
	json_check g.json "@\$j == 1"
'

swift_prereq

test_expect_success SWIFT 'on object storage: a repository' '
	swift_start &&
	swift_credentials &&
	R=s3:$SWIFT_S3_URL/window/repo &&
	rm -rf "$TMP"/host*-state &&
	coffer_init_keyfile "$R" "$TMP/s3.key"
'

test_expect_success SWIFT 'on object storage: the backup waits for the forget' '
	window s3
'

test_expect_success SWIFT 'on object storage: its snapshot keeps its parent' '
	kept s3
'

test_done
