#!/bin/bash
test_description='bundles carry the journal: forgets, drills and runs of any host travel in the next bundle of every target; a bare machine imports exactly the snapshots the source held, with its history'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

# bare NAME: a new host: its own state directory (no catalog).
bare() {
	export XDG_STATE_HOME=$TMP/$1-state
	rm -rf "$XDG_STATE_HOME" && mkdir -p "$XDG_STATE_HOME"
}
host() { export XDG_STATE_HOME=$TMP/$1-state; }	# back to a host
home() { export XDG_STATE_HOME=$TMP/state; }

# newest REPO DATASET: the id of the dataset's newest complete snapshot
# (with the key in COFFER_KEY_FILE).
newest() {
	coffer -r "$1" snapshots --json >newest.json &&
	json_get newest.json '
		my @s = sort { $a->{time} cmp $b->{time} }
		    grep { $_->{dataset} eq "'"$2"'" &&
		    $_->{state} eq "complete" } @$j;
		@s ? $s[-1]{id} : undef'
}

# day POLICY REPO DATA N: coffer run of POLICY at 02:00 of day N of
# December, a file of DATA changed before; the new snapshot of dataset ds
# in $sid, its tree in expect/.
day() {
	echo "day $4" >"$3/day" && echo "$4" >"$3/f$4" &&
	now=$(date -u -d "2026-11-30T02:00:00Z + $4 days" +%Y-%m-%dT%H:%M:%SZ) &&
	coffer run --policy "$1" --now "$now" >run.out &&
	sid=$(newest "$2" ds) &&
	mkdir -p expect && rm -rf "expect/$sid" && cp -a "$3" "expect/$sid"
}

# ids REPO FILE: the ids of REPO's complete snapshots, sorted.
ids() {
	coffer -r "$1" snapshots --json >ids.json &&
	json_get ids.json 'join qq(\n), sort map { $_->{id} }
		grep { $_->{state} eq "complete" } @$j' >"$2"
}
# drills REPO FILE: the drill history as "time snapshot verdict", sorted.
drills() {
	coffer -r "$1" drill history --json >drills.json &&
	json_get drills.json 'join qq(\n), sort map {
		"$_->{time_ns} $_->{snapshot} $_->{verdict}" } @$j' >"$2"
}
# runs REPO FILE: the runs of coffer log as "run actions", sorted.
runs() {
	coffer -r "$1" log --json >runs.json &&
	json_get runs.json 'join qq(\n), sort map {
		"$_->{run} " . scalar @{$_->{actions}} } @$j' >"$2"
}

# same REPO TARGET: the target lists exactly the repository's complete
# snapshots, the same drills and the same runs.
same() {
	home && ids "$1" src-ids && drills "$1" src-drills && runs "$1" src-runs &&
	host tgt && ids "$2" tgt-ids && drills "$2" tgt-drills &&
	runs "$2" tgt-runs && home &&
	test_cmp src-ids tgt-ids && test_cmp src-drills tgt-drills &&
	test_cmp src-runs tgt-runs
}

# to_target FROM: the target host imports what FROM holds (init the first
# time).
to_target() {
	host tgt &&
	if test -d tgt; then
		coffer -r tgt import "$1" >import.out
	else
		coffer -r tgt import --init "$1" >import.out
	fi &&
	home
}

# restores_all REPO SID...: each snapshot restores from REPO as it was.
restores_all() {
	r=$1 && shift &&
	for sid in "$@"; do
		rm -rf out && coffer -r "$r" restore "$sid" out &&
		treecmp "expect/$sid" out ||
			{ echo "snapshot $sid differs"; return 1; }
	done
}

test_expect_success 'setup: a full-key host backs up daily; a scratch dataset' '
	home && bare tgt && home &&
	coffer_init_keyfile repo &&
	mkdir -p data/sub old off &&
	random_file data/big 1 && echo one >data/sub/one && echo old >old/x &&
	cat >p.policy <<-EOF &&
	[repository]
	path = $TMP/repo
	key-file = $TMP/key
	[dataset ds]
	path = $TMP/data
	full = weekly sunday 00:00
	incremental = daily 02:00
	EOF
	day p.policy repo data 1 && echo $sid >s1 &&
	coffer -r repo backup old old >/dev/null &&
	newest repo old >old-sid
'

test_expect_success 'day 1: a drill, then export --all: the target holds what the source holds' '
	coffer -r repo drill ds@latest >/dev/null &&
	coffer -r repo export --all --json --target off --to off >e1.json &&
	json_check e1.json "\$j->{level} eq \"full\" &&
		\$j->{journal_packs} > 0" &&
	to_target off && same repo tgt
'

test_expect_success 'day 2: a forget of a snapshot bundle 1 carried; a per-snapshot export brings it' '
	coffer -r repo forget $(cat old-sid) &&
	day p.policy repo data 2 && echo $sid >s2 &&
	coffer -r repo export --json --target off --to off ds@latest >e2.json &&
	json_check e2.json "\$j->{level} eq \"incremental\" &&
		\$j->{snapshots} == 2 && \$j->{journal_packs} > 0" &&
	to_target off && same repo tgt &&
	host tgt && ids tgt tgt-ids && home &&
	! grep $(cat old-sid) tgt-ids
'

test_expect_success 'day 3: a drill after the export travels in the next bundle, by --all' '
	coffer -r repo drill ds@latest >/dev/null &&
	day p.policy repo data 3 && echo $sid >s3 &&
	coffer -r repo export --all --json --target off --to off >e3.json &&
	to_target off && same repo tgt
'

test_expect_success 'day 4: the newest snapshot, which bundle 3 carried, forgotten; a drill; a per-snapshot export' '
	coffer -r repo forget $(cat s3) &&
	coffer -r repo drill ds@latest >/dev/null &&
	day p.policy repo data 4 && echo $sid >s4 &&
	coffer -r repo export --json --target off --to off ds@latest >e4.json &&
	json_check e4.json "\$j->{snapshots} == 3" &&
	host tgt && coffer -r tgt import --json off >i4.json && home &&
	json_check i4.json "\$j->{bundles} == 1 && \$j->{journal_rows} > 0" &&
	same repo tgt &&
	host tgt && ids tgt tgt-ids && home &&
	! grep $(cat s3) tgt-ids
'

test_expect_success 'an export with nothing new carries the journal of the export before' '
	coffer -r repo export --json --target off --to off ds@latest >e5.json &&
	json_check e5.json "\$j->{packs} == \$j->{journal_packs} &&
		\$j->{journal_packs} > 0" &&
	to_target off && same repo tgt
'

test_expect_success 'a differential carries the journal packs its full lacks' '
	coffer -r repo export --json --level differential --target off \
		--to off ds@latest >ed.json &&
	json_check ed.json "\$j->{level} eq \"differential\" &&
		\$j->{journal_packs} > 4" &&
	to_target off && same repo tgt
'

test_expect_success 'days 5 to 22 (a journal pack each), prune merges them: the merged pack brings their runs' '
	for d in $(seq 5 22); do
		day p.policy repo data $d || return 1
	done &&
	echo $sid >s22 &&
	ls repo/packs/*/* >before &&
	coffer -r repo prune >prune.out &&
	ls repo/packs/*/* >after &&
	test $(wc -l <after) -lt $(($(wc -l <before) - 15)) &&
	coffer -r repo export --json --target off --to off ds@latest >e6.json &&
	json_check e6.json "\$j->{journal_packs} > 0" &&
	to_target off && same repo tgt &&
	runs repo all-runs && test_line_count -ge 22 all-runs
'

test_expect_success 'a bare machine imports every bundle in order: the same snapshots, drills and runs; each restores' '
	bare b1 && coffer -r new import --init off >import.out && home &&
	ids repo src-ids && drills repo src-drills && runs repo src-runs &&
	host b1 && ids new new-ids && drills new new-drills &&
	runs new new-runs && home &&
	test_cmp src-ids new-ids && test_cmp src-drills new-drills &&
	test_cmp src-runs new-runs &&
	test_line_count = 3 src-drills &&
	! grep -e $(cat s3) -e $(cat old-sid) new-ids &&
	host b1 && restores_all new $(cat new-ids) && home
'

test_expect_success 'the bare machine rebuilds its catalog from what it imported: nothing forgotten comes back' '
	host b1 && coffer -r new catalog rebuild >/dev/null &&
	ids new new-ids2 && drills new new-drills2 && home &&
	test_cmp src-ids new-ids2 && test_cmp src-drills new-drills2
'

# The write-only host exports; the full-key host forgets and drills on the
# same repository.  The write-only host reads every pack's index, so the
# full-key host's journal packs travel in its bundles too.
test_expect_success 'two roles: a write-only training host runs and exports --all' '
	bare bk && rm -rf expect &&
	COFFER_KEY_FILE=$TMP/full2.key && export COFFER_KEY_FILE &&
	coffer init --key-file full2.key repo2 >/dev/null &&
	coffer -r repo2 key export --write-only \
		--to wo.key &&
	mkdir -p d2 off2 old2 && random_file d2/big 1 && echo old >old2/x &&
	cat >wo.policy <<-EOF &&
	[repository]
	path = $TMP/repo2
	key-file = $TMP/wo.key
	[dataset ds]
	path = $TMP/d2
	full = weekly sunday 00:00
	incremental = daily 02:00
	EOF
	bare train &&
	COFFER_KEY_FILE=$TMP/wo.key day wo.policy repo2 d2 1 && echo $sid >w1 &&
	coffer -r repo2 --key-file wo.key backup old old2 >/dev/null &&
	COFFER_KEY_FILE=$TMP/wo.key newest repo2 old >wold-sid &&
	coffer -r repo2 --key-file wo.key export --all --target off2 \
		--to off2 >/dev/null
'

test_expect_success 'the full-key host forgets the old snapshot and drills' '
	host bk &&
	coffer -r repo2 forget $(cat wold-sid) &&
	coffer -r repo2 drill ds@latest >/dev/null &&
	drills repo2 bk-drills && test_line_count = 1 bk-drills &&
	host train
'

test_expect_success 'the write-only host runs twice more, exporting --all after each' '
	host train &&
	COFFER_KEY_FILE=$TMP/wo.key day wo.policy repo2 d2 2 && echo $sid >w2 &&
	coffer -r repo2 --key-file wo.key export --all --target off2 \
		--to off2 >/dev/null &&
	COFFER_KEY_FILE=$TMP/wo.key day wo.policy repo2 d2 3 && echo $sid >w3 &&
	coffer -r repo2 --key-file wo.key export --all --json --target off2 \
		--to off2 >we3.json &&
	json_check we3.json "\$j->{journal_packs} > 0"
'

test_expect_success 'a bare machine imports them: what the write-only host wrote arrived' '
	bare b2 &&
	coffer -r new2 import --init off2 >import.out &&
	coffer -r new2 log --json >l.json &&
	json_check l.json "@\$j >= 2" &&
	coffer -r new2 bundles --json >b.json &&
	json_check b.json "grep { \$_->{sequence} == 2 } @\$j" &&
	restores_all new2 $(cat w1 w2 w3)
'

test_expect_success 'the full-key host'\''s forget and drill arrived through the write-only host'\''s bundles' '
	host b2 &&
	coffer -r new2 snapshots --json >s.json &&
	json_check s.json "!grep { \$_->{id} eq \"$(cat wold-sid)\" } @\$j" &&
	coffer -r new2 drill history --json >d.json &&
	json_check d.json "@\$j == 1"
'

test_done
