#!/bin/bash
test_description='two hosts that back up the same data at once each store it, in a pack of their own: a prune that deletes one of the two packs (the other holds the data) leaves every host able to restore, the host whose catalog located the data in the pack that went included; and a prune on that host copies nothing out that the other pack holds'
. "$(dirname "$0")/../lib.sh"
require_coffer
FORGE=$BUILD/tests/forge-record
test -x "$FORGE" && test_set_prereq FORGE

# host N: the state (catalog) of simulated host N.
host() { export XDG_STATE_HOME=$TMP/host$1-state; mkdir -p "$XDG_STATE_HOME"; }

# twice TAG A B: hosts A and B back up the same 1 MiB file at once, in
# datasets TAG-a and TAG-b: B syncs first, then stops until A's backup is
# done, so B's catalog does not know A's pack and B stores the file
# again, beside 4 MiB of its own.  B then backs up without its own file
# (the shared one deduplicated against B's pack, where B's catalog
# locates it, A's pack a copy it learnt of) and forgets its first
# snapshot: most of B's first pack is garbage.
twice() {
	rm -rf "a-$1" "b-$1" && mkdir "a-$1" "b-$1" &&
	random_file "a-$1/shared" 1 && cp "a-$1/shared" "b-$1/shared" &&
	random_file "b-$1/own" 4 &&
	{ XDG_STATE_HOME=$TMP/host$3-state \
		COFFER_TEST_RAISE=backup-synced:1:STOP \
		"$COFFER" -r "$R" backup --json "$1-b" "b-$1" \
		>b1.json 2>b1.err & } &&
	bpid=$! &&
	wait_stopped $bpid &&
	host $2 &&
	coffer -r "$R" backup "$1-a" "a-$1" &&
	kill -CONT $bpid &&
	wait $bpid &&
	cat b1.err &&
	json_check b1.json "\$j->{bytes_new} == 5 * 1048576" &&
	host $3 &&
	rm "b-$1/own" &&
	coffer -r "$R" backup --json "$1-b" "b-$1" >b2.json &&
	json_check b2.json "\$j->{bytes_new} == 0" &&
	coffer -r "$R" forget --dataset "$1-b" --keep-last 1
}

# restores TAG: every host restores both datasets exactly.
restores() {
	for h in "$@"; do
		host $h &&
		rm -rf out &&
		coffer -r "$R" restore "$1-a@latest" out &&
		cmp "a-$1/shared" out/shared &&
		rm -rf out &&
		coffer -r "$R" restore "$1-b@latest" out &&
		cmp "b-$1/shared" out/shared &&
		test_path_is_missing out/own || return 1
	done
}

test_expect_success 'setup: a repository' '
	coffer_init_keyfile repo &&
	R=$TMP/repo
'

test_expect_success 'two hosts back up the same file at once: each stores it' '
	twice one 1 2
'

# Host 1's catalog locates the file in its own pack: B's pack holds
# nothing it needs, and goes whole.
test_expect_success 'a prune on the other host deletes the pack, copying nothing' '
	host 1 &&
	coffer -r "$R" prune --json >p.json &&
	json_check p.json "\$j->{packs_deleted} >= 1 &&
		\$j->{chunks_moved} == 0 && \$j->{packs_waiting} == 0"
'

test_expect_success 'the host whose catalog located the file in that pack restores it' '
	host 2 &&
	coffer -r "$R" snapshots >s.out 2>s.err &&
	cat s.err && test_must_be_empty s.err &&
	restores one 2 1 3
'

test_expect_success 'verify --read-data on that host finds nothing missing' '
	host 2 &&
	coffer -r "$R" verify --read-data
'

# Host 2's own prune: its catalog locates the file in the pack it
# condemns, and knows that host 1's pack holds it too.
test_expect_success 'a prune on the host whose pack goes copies nothing another pack holds' '
	twice two 1 2 &&
	host 2 &&
	coffer -r "$R" prune --json >p.json &&
	json_check p.json "\$j->{packs_deleted} >= 1 &&
		\$j->{chunks_moved} == 0 && \$j->{packs_waiting} == 0" &&
	restores two 2 1 4 &&
	coffer -r "$R" verify --read-data
'

# The same after a catalog is built anew: it learns both copies.
test_expect_success 'a catalog rebuilt from the repository knows both copies' '
	twice three 1 2 &&
	host 2 &&
	coffer -r "$R" catalog rebuild &&
	host 1 &&
	coffer -r "$R" prune --json >p.json &&
	json_check p.json "\$j->{packs_deleted} >= 1 &&
		\$j->{chunks_moved} == 0" &&
	restores three 2 1 5 &&
	host 2 &&
	coffer -r "$R" verify --read-data
'

# A write-only key holder (a training server, an attacker here) can write
# a pack whose index names a chunk it knows the id of, over content of its
# own (forge-record): a copy only by its word.  A catalog that reads the
# forged pack before the real one (packs are read in the order of their
# names) locates the chunk there.  Host 1 backs up 1 MiB (one chunk)
# beside 4 MiB it then forgets, so its pack holds nothing host 3 locates
# there but dead chunks: a prune on host 3 condemns it whole.  It must
# not delete the real chunk's last copy by trusting the forged one.
test_expect_success FORGE 'setup: a chunk forged by a write-only key, read first by host 3' '
	rm -rf f && mkdir f &&
	random_file f/shared 1 && random_file f/own 4 &&
	host 1 &&
	coffer -r "$R" backup forged f &&
	coffer -r "$R" key export --write-only --to wo.key &&
	set -- $(sqlite3 -separator " " "$(catalog_db "$R")" "
		SELECT lower(hex(ch.cid)), ch.plain_len, p.name FROM entry e
		JOIN path pa ON pa.id = e.path_id
		JOIN content_chunk cc ON cc.content_id = e.content_id
		JOIN chunk ch ON ch.id = cc.chunk_id
		JOIN pack p ON p.id = ch.pack_id
		JOIN snapshot s ON s.id = e.snapshot_id
		JOIN dataset d ON d.id = s.dataset_id
		WHERE d.name = '"'"'forged'"'"' AND cc.seq = 0
		AND pa.name = CAST('"'"'shared'"'"' AS BLOB)") &&
	test $# = 3 &&
	real=$3 &&
	for i in $(seq 1 40); do
		"$FORGE" "$R" wo.key "$1" "$2" >forged.out &&
		forged=$(cut -d" " -f1 forged.out) &&
		if test "$forged" \< "$real"; then
			break
		fi &&
		rm "$R/packs/$(printf %.2s "$forged")/$forged" || return 1
	done &&
	test "$forged" \< "$real" &&
	rm f/own &&
	coffer -r "$R" backup --json forged f >b.json &&
	json_check b.json "\$j->{bytes_new} == 0" &&
	coffer -r "$R" forget --dataset forged --keep-last 1 &&
	host 6 &&
	coffer -r "$R" snapshots >/dev/null &&
	test "$(sqlite3 "$(catalog_db "$R")" "SELECT p.name FROM chunk ch
		JOIN pack p ON p.id = ch.pack_id
		WHERE ch.cid = X'"'"'$1'"'"'")" = "$forged"
'

# Hosts 7 and 8 too read the forged pack first.  A restore there fails
# for the chunk, reads its copy, and takes it: restoring again restores
# the file.  verify --read-data, finding the chunk is not what its place
# holds, does the same.
test_expect_success FORGE 'a restore on a host that located the chunk in the forged pack takes the real copy for the next' '
	host 7 &&
	test_expect_code 4 coffer -r "$R" restore forged@latest out7 2>err &&
	cat err &&
	grep -F "content does not match its id" err &&
	grep "^warning: .*pack .*$real" err &&
	grep "^warning: 1 damaged chunk found whole in another pack" err &&
	rm -rf out7 &&
	coffer -r "$R" restore forged@latest out7 &&
	cmp f/shared out7/shared
'

test_expect_success FORGE 'and so does verify --read-data' '
	host 8 &&
	test_expect_code 4 coffer -r "$R" verify --read-data --json \
		>v.json 2>v.err &&
	cat v.err &&
	json_check v.json "\$j->{damaged_chunks} == 1 &&
		\$j->{chunks_from_copies} == 1 &&
		\$j->{broken_snapshots} == 0 &&
		\$j->{damaged}[0]{pack} eq \"$forged\" &&
		\$j->{damaged}[0]{copy} eq \"$real\"" &&
	grep "^warning: .*pack .*$real" v.err &&
	rm -rf out &&
	coffer -r "$R" restore forged@latest out &&
	cmp f/shared out/shared
'

test_expect_success FORGE 'a prune on that host reads the forged copy and keeps the real one' '
	host 6 &&
	coffer -r "$R" prune --json >p.json 2>p.err &&
	cat p.err &&
	test_path_is_missing "$R/packs/$(printf %.2s "$real")/$real" &&
	for h in 6 1 7 8; do
		host $h &&
		rm -rf out &&
		coffer -r "$R" restore forged@latest out &&
		cmp f/shared out/shared || return 1
	done &&
	json_check p.json "\$j->{chunks_checked} >= 1 &&
		\$j->{chunks_moved} >= 1" &&
	grep "^warning: pack .*$forged'"'"': .*content does not match its id" p.err
'

# Nothing the forged pack holds is located there now: a prune deletes it.
test_expect_success FORGE 'and the forged pack goes at the next prune' '
	host 6 &&
	coffer -r "$R" prune --json >p.json &&
	test_path_is_missing "$R/packs/$(printf %.2s "$forged")/$forged" &&
	for h in 6 1 2 7 8; do
		host $h &&
		coffer -r "$R" verify --read-data &&
		rm -rf out &&
		coffer -r "$R" restore forged@latest out &&
		cmp f/shared out/shared || return 1
	done
'

# A copy marked by one prune (beside a writer, so it waits) and the pack
# the chunk is located in, condemned by the next (host 2 forgets the 4 MiB
# beside the shared file in between): both go in one run, and the chunk
# is copied out of one of them first.
test_expect_success 'a copy marked earlier and the pack condemned now go together, the chunk copied out' '
	rm -rf a-four b-four && mkdir a-four b-four &&
	random_file a-four/shared 1 && cp a-four/shared b-four/shared &&
	random_file b-four/own 4 &&
	{ XDG_STATE_HOME=$TMP/host2-state \
		COFFER_TEST_RAISE=backup-synced:1:STOP \
		"$COFFER" -r "$R" backup four-b b-four >b1.out 2>&1 & } &&
	bpid=$! &&
	wait_stopped $bpid &&
	host 1 &&
	coffer -r "$R" backup four-a a-four &&
	kill -CONT $bpid &&
	wait $bpid &&
	host 1 &&
	coffer -r "$R" forget four-a@latest &&
	host 2 &&
	coffer -r "$R" snapshots >/dev/null &&
	mkdir -p w9 && echo x >w9/x &&
	{ XDG_STATE_HOME=$TMP/host9-state \
		COFFER_TEST_RAISE=backup-synced:1:STOP \
		"$COFFER" -r "$R" backup four-w w9 >w9.out 2>&1 & } &&
	wpid=$! &&
	wait_stopped $wpid &&
	host 2 &&
	coffer -r "$R" prune --json >p1.json &&
	kill -CONT $wpid &&
	wait $wpid &&
	json_check p1.json "\$j->{packs_waiting} >= 1" &&
	rm b-four/own &&
	coffer -r "$R" backup four-b b-four &&
	coffer -r "$R" forget --dataset four-b --keep-last 1 &&
	coffer -r "$R" prune --json >p2.json &&
	json_check p2.json "\$j->{chunks_moved} >= 1" &&
	for h in 2 1; do
		host $h &&
		rm -rf out &&
		coffer -r "$R" restore four-b@latest out &&
		cmp b-four/shared out/shared || return 1
	done &&
	host 2 &&
	coffer -r "$R" verify --read-data
'

test_done
