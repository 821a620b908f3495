#!/bin/bash
test_description='prune merges the packs of journal records (one per run) into one; run history, drills and forgets survive it, also a kill -9 on the way'
. "$(dirname "$0")/../lib.sh"
require_coffer

# runs FIRST LAST [DAYS]: coffer run at hours FIRST..LAST of 2026-12-01 (plus
# DAYS), a file added before each, so that each backs up and records a run.
runs() {
	for h in $(seq $1 $2); do
		echo "$h" >"data/f$h" &&
		now=$(date -u -d "2026-12-01T00:00:00Z + $h hours + ${3:-0} days" \
			+%Y-%m-%dT%H:%M:%SZ) &&
		coffer run --policy p.policy --now "$now" >out || return 1
	done
}

test_expect_success 'setup: 20 hourly runs, each with a backup (a journal pack each)' '
	coffer_init_keyfile repo &&
	mkdir -p data &&
	cat >p.policy <<-EOF &&
	[repository]
	path = $TMP/repo
	key-file = $TMP/key
	[dataset ds]
	path = $TMP/data
	full = weekly sunday 00:00
	incremental = hourly :00
	EOF
	runs 10 29 &&
	coffer -r repo log --json >log0.json &&
	json_check log0.json "@\$j == 20"
'

test_expect_success 'a drill and a forget go to the journal too' '
	coffer -r repo drill ds@latest >/dev/null &&
	coffer -r repo forget --keep-last 5 >/dev/null &&
	coffer -r repo snapshots --json >snaps0.json &&
	json_check snaps0.json "@\$j >= 5" &&
	coffer -r repo drill history --json >d0.json &&
	json_check d0.json "@\$j == 1"
'

test_expect_success 'prune: the journal packs become one; nothing of the history is lost' '
	ls repo/packs/*/* >before &&
	coffer -r repo prune >out &&
	cat out &&
	ls repo/packs/*/* >after &&
	test $(wc -l <after) -lt $(($(wc -l <before) - 15)) &&
	XDG_STATE_HOME=$TMP/host2 coffer -r repo log --json >log1.json &&
	json_check log1.json "@\$j == 20" &&
	XDG_STATE_HOME=$TMP/host2 coffer -r repo drill history --json >d1.json &&
	json_check d1.json "@\$j == 1" &&
	XDG_STATE_HOME=$TMP/host2 coffer -r repo snapshots --json >snaps1.json &&
	json_get snaps0.json "join qq(\n), sort map { \$_->{id} } @\$j" >ids0 &&
	json_get snaps1.json "join qq(\n), sort map { \$_->{id} } @\$j" >ids1 &&
	test_cmp ids0 ids1
'

test_expect_success 'fewer than 16 journal packs: left as they are' '
	runs 30 32 &&
	ls repo/packs/*/* >before &&
	coffer -r repo prune >out &&
	ls repo/packs/*/* >after &&
	test_cmp before after
'

day=2
for point in repacked committed removing; do
	day=$((day + 1))
	test_expect_success "kill -9 at '$point' of a merge: the next prune finishes, nothing lost" '
		runs 40 57 $day &&
		coffer -r repo log --json >logk.json &&
		n=$(json_get logk.json "scalar @\$j") &&
		test_expect_code 137 env COFFER_TEST_PRUNE_CRASH=$point \
			"$COFFER" -r repo prune >out 2>&1 &&
		coffer -r repo prune >out &&
		rm -rf "$TMP/host-$point" &&
		XDG_STATE_HOME=$TMP/host-$point coffer -r repo log --json >logk2.json &&
		json_check logk2.json "@\$j == $n" &&
		XDG_STATE_HOME=$TMP/host-$point coffer -r repo drill history --json >dk.json &&
		json_check dk.json "@\$j == 1" &&
		coffer -r repo prune >out &&
		ls repo/packs/*/* >before &&
		coffer -r repo prune >out &&
		ls repo/packs/*/* >after &&
		test_cmp before after
	'
done

test_expect_success 'every snapshot still restores' '
	coffer -r repo verify --read-data >out &&
	rm -rf r && coffer -r repo restore ds@latest r &&
	diff -r data r
'

test_done
