#!/bin/bash
test_description='hourly incrementals thinned by retention: kept snapshots rebased, records only'
. "$(dirname "$0")/../lib.sh"

# Three simulated weeks of hourly incrementals of a small tree that
# changes every hour (files added, changed and deleted, a directory made
# and one removed, a symbolic link turned), forgotten daily with
# keep-last 12, keep-daily 7, keep-weekly 4.  Every kept snapshot whose
# parent goes is rebased (made a full, or put on its nearest kept
# ancestor): at most about 25 snapshots stay, and each restores to the
# tree it captured (kept in expect/SID).  The forget's record packs are
# noted (rebase-packs) for a second host that never reads them.
DAYS=${COFFER_TEST_SIM_DAYS:-21}
RULES="--keep-last 12 --keep-daily 7 --keep-weekly 4"
FORGE=$BUILD/tests/forge-record
test -x "$FORGE" && test_set_prereq FORGE

# change H: the tree of hour H.
change() {
	h=$1
	mkdir -p src/d$((h % 5)) &&
	printf "hour %s\n" "$h" >src/d$((h % 5))/f$h.txt &&
	printf "rolling %s\n" "$h" >src/rolling.txt &&
	if test $h -ge 6 && test $((h % 3)) = 0; then
		rm -f src/d$(((h - 6) % 5))/f$((h - 6)).txt
	fi &&
	if test $((h % 7)) = 0; then
		mkdir -p src/sub$h && printf "%s\n" $h >src/sub$h/x &&
		rm -rf src/sub$((h - 35))
	fi &&
	ln -sfn "target-$((h % 4))" src/link &&
	chmod $((h % 2 ? 600 : 644)) src/rolling.txt
}

# list_packs: every pack's name, sorted.
list_packs() {
	(cd repo/packs && ls */* 2>/dev/null | sed "s|.*/||" | sort)
}

test_expect_success FORGE "setup: $DAYS days of hourly incrementals, forgotten daily" '
	coffer_init_keyfile repo &&
	mkdir src expect &&
	: >rebase-packs &&
	: >depths &&
	for h in $(seq 0 $((DAYS * 24 - 1))); do
		t=$(date -u -d "2026-03-02 00:20:00 UTC + $h hours" +%Y-%m-%dT%H:%M:%SZ) &&
		change $h &&
		lvl=incremental && if test $h = 0; then lvl=full; fi &&
		coffer -r repo backup --json --level $lvl --time "$t" ds src >b.json &&
		sid=$(json_get b.json "\$j->{snapshot}") &&
		cp -a src "expect/$sid" || return 1
		if test $((h % 24)) = 23; then
			list_packs >before &&
			coffer -r repo forget $RULES --json >f.json &&
			list_packs >after &&
			for p in $(comm -13 before after); do
				"$FORGE" index repo "$COFFER_KEY_FILE" $p >idx &&
				if ! grep -q "^[0-9]* 3 " idx; then
					echo $p >>rebase-packs
				fi || return 1
			done &&
			coffer -r repo snapshots --json >s.json &&
			json_get s.json "scalar(@\$j) . q( ) . (sort { \$b <=> \$a } map { \$_->{depth} } @\$j)[0]" >>depths || return 1
		fi
	done &&
	echo "snapshots and chain depth after each day:" && cat depths
'

test_expect_success FORGE 'at most 25 snapshots stay; the chains are short' '
	coffer -r repo snapshots --json >kept.json &&
	json_get kept.json "join(qq(\n), sort map { \$_->{id} } @\$j)" >kept &&
	n=$(wc -l <kept) && depth=$(tail -n 1 depths | cut -d" " -f2) &&
	echo "after $DAYS days: $n snapshots, chain depth $depth" &&
	test $n -le 25 && test $depth -le 25 &&
	json_check kept.json "grep { \$_->{revision} > 0 } @\$j" &&
	test -s rebase-packs
'

test_expect_success FORGE 'the plan names each rebase and what it is onto' '
	coffer -r repo forget --keep-last 3 --dry-run --json >plan.json &&
	json_check plan.json "\$j->{rebase} == 1 && \$j->{rebased} == 0" &&
	json_check plan.json "my (\$r) = grep { defined \$_->{rebase} } @{\$j->{snapshots}};
		\$r->{keep} && \$r->{rebase} eq q(full) && !defined \$r->{onto}" &&
	coffer -r repo forget --keep-last 3 --keep-daily 2 --dry-run >plan.txt &&
	cat plan.txt &&
	grep -E "^keep .* rebase (incremental|differential) on [0-9a-f]{12}$" plan.txt &&
	grep -E "^would rebase [0-9]+ snapshots? onto the links that stay$" plan.txt &&
	! grep -F "(for " plan.txt
'

test_expect_success FORGE 'every kept snapshot restores identical to what it captured; verify' '
	while read -r sid; do
		rm -rf out && coffer -r repo restore "$sid" out &&
		treecmp "expect/$sid" out || return 1
	done <kept &&
	coffer -r repo verify
'

# A host that did not run the forgets, whose catalog is made from the
# repository without the rebased records (as a host that cannot read
# them): it learns the forgets from the journal and rebases the
# snapshots that stay itself (catalog_forget_apply).  The same snapshots
# on the same parents, with the same trees; a level may differ (an
# incremental on an ancestor that a later forget made a full, where this
# host, rebasing once, makes a differential on it: the same rows).
test_expect_success FORGE 'a second catalog without the new records ends with the same trees' '
	cp -a repo repoB &&
	while read -r p; do
		rm -f repoB/packs/*/$p || return 1
	done <rebase-packs &&
	COFFER_CATALOG=$PWD/hostB.db coffer -r repoB snapshots --json >b.json &&
	json_get b.json "join(qq(\n), sort map { \"\$_->{id} \" . (\$_->{parent} // q(-)) } @\$j)" >b-levels &&
	json_get kept.json "join(qq(\n), sort map { \"\$_->{id} \" . (\$_->{parent} // q(-)) } @\$j)" >a-levels &&
	test_cmp a-levels b-levels &&
	json_check b.json "!grep { \$_->{revision} > 0 } @\$j" &&
	while read -r sid; do
		rm -rf out && COFFER_CATALOG=$PWD/hostB.db coffer -r repoB restore "$sid" out &&
		treecmp "expect/$sid" out || return 1
	done <kept
'

test_expect_success FORGE 'after prune, the rebased snapshots still restore' '
	coffer -r repo prune &&
	coffer -r repo verify --read-data &&
	while read -r sid; do
		rm -rf out && coffer -r repo restore "$sid" out &&
		treecmp "expect/$sid" out || return 1
	done <kept
'

test_expect_success FORGE 'a rebuilt catalog, and another host'"'"'s, see the same snapshots and levels' '
	coffer -r repo catalog rebuild &&
	coffer -r repo snapshots --json >r.json &&
	json_get r.json "join(qq(\n), sort map { \"\$_->{id} \$_->{level} \" . (\$_->{parent} // q(-)) . \" \$_->{depth} \$_->{revision}\" } @\$j)" >r-levels &&
	json_get kept.json "join(qq(\n), sort map { \"\$_->{id} \$_->{level} \" . (\$_->{parent} // q(-)) . \" \$_->{depth} \$_->{revision}\" } @\$j)" >k-levels &&
	test_cmp k-levels r-levels &&
	XDG_STATE_HOME=$PWD/host2 coffer -r repo snapshots --json >h.json &&
	json_get h.json "join(qq(\n), sort map { \"\$_->{id} \$_->{level} \" . (\$_->{parent} // q(-)) . \" \$_->{depth} \$_->{revision}\" } @\$j)" >h-levels &&
	test_cmp k-levels h-levels &&
	sid=$(tail -n 1 kept) &&
	rm -rf out && XDG_STATE_HOME=$PWD/host2 coffer -r repo restore "$sid" out &&
	treecmp "expect/$sid" out
'

test_done
