#!/bin/bash
test_description='a write-only host follows the backup host: prunes, repacks and forgets it cannot read the records of; its exports carry the packs that exist now; its catalog rebuilds and checks; the source check holds on a new host'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

# host NAME: the state directory (catalog) of host NAME.
host() { export XDG_STATE_HOME=$TMP/$1-state; mkdir -p "$XDG_STATE_HOME"; }

# ts ARGS / bh ARGS: the training server (write-only key) and the backup
# host (full key), each with its own catalog.
ts() { (host ts && coffer -r repo --key-file wo.key "$@"); }
bh() { (host bh && coffer -r repo --key-file full.key "$@"); }

# step N [LEVEL]: the training server's checkpoint directory at step N
# (a new shard, the oldest gone), backed up.
step() {
	mkdir -p ckpt && random_file "ckpt/shard-$1" 1 &&
	echo "step $1" >ckpt/latest &&
	rm -f "ckpt/shard-$(($1 - 3))" &&
	ts backup --json ${2:+--level $2} ckpt "$TMP/ckpt" >b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") &&
	rm -rf "expect/$sid" && mkdir -p expect && cp -a ckpt "expect/$sid" &&
	echo "$sid" >>sids
}

# restores REPO KEY SID...: each restores as the training server read it.
restores() {
	r=$1 k=$2 && shift 2 &&
	for sid in "$@"; do
		rm -rf out && coffer -r "$r" --key-file "$k" restore "$sid" out &&
		treecmp "expect/$sid" out || { echo "$sid differs"; return 1; }
	done
}

test_expect_success 'setup: a full key on the backup host, a write-only key on the training server' '
	host bh && coffer init --key-file full.key repo &&
	coffer -r repo --key-file full.key key export --write-only --to wo.key &&
	step 1 full && step 2 && step 3 && step 4 full && step 5 && step 6 &&
	test_line_count = 6 sids
'

test_expect_success 'the backup host forgets (rebasing what it keeps) and prunes (repacking what is left)' '
	bh forget --keep-last 2 >out && cat out &&
	bh snapshots --json >s.json && json_check s.json "@\$j == 2" &&
	find repo/packs -type f | sort >packs.before &&
	bh prune --max-unused 1% --json >p.json && cat p.json &&
	json_check p.json "\$j->{packs_deleted} + \$j->{packs_repacked} > 0" &&
	find repo/packs -type f | sort >packs.after &&
	comm -23 packs.before packs.after >gone && test -s gone
'

test_expect_success 'the training server follows: a full export to a new target carries the packs that exist now' '
	mkdir off1 &&
	ts export --json --target off1 --to off1 --all >e.json 2>err &&
	cat err e.json && ! grep "cannot open" err &&
	json_check e.json "\$j->{snapshots} == 2" &&
	mkdir off2 && ts export --target off2 --to off2 ckpt@latest &&
	(
		host bare1 &&
		coffer -r new1 --key-file full.key import --init off1 &&
		coffer -r new1 --key-file full.key snapshots --json >n.json &&
		json_check n.json "@\$j == 2" &&
		restores new1 full.key $(tail -2 "$TMP/sids")
	) &&
	(
		host bare2 &&
		coffer -r new2 --key-file full.key import --init off2 &&
		restores new2 full.key $(tail -1 "$TMP/sids")
	)
'

test_expect_success 'the training server dropped what the backup host forgot, and goes on incrementally' '
	ts snapshots --json >t.json &&
	json_check t.json "@\$j == 2" &&
	for sid in $(head -4 sids); do
		! grep "$sid" t.json || return 1
	done &&
	step 7 && json_check b.json "\$j->{level} eq \"incremental\"" &&
	bh verify --read-data &&
	restores repo full.key $(tail -3 sids)
'

test_expect_success 'a write-only host deduplicates against the backup host'"'"'s chunks' '
	mkdir corpus && random_file corpus/data 2 &&
	bh backup corpus "$TMP/corpus" &&
	mkdir corpus2 && cp corpus/data corpus2/copy &&
	ts backup --json copy "$TMP/corpus2" >c.json &&
	json_check c.json "\$j->{bytes_new} < 1000"
'

test_expect_success 'a forget needs the full key; a write-only key is refused and nothing changes' '
	ts snapshots >before &&
	test_expect_code 2 ts forget --keep-last 1 2>err && cat err &&
	grep "needs a full key" err &&
	ts snapshots >after && test_cmp before after &&
	bh snapshots --json >s.json && json_check s.json "@\$j == 5"
'

FORGE=$BUILD/tests/forge-record
test -x "$FORGE" && test_set_prereq FORGE

test_expect_success FORGE 'a journal record of forgets signed with the write-only key forgets nothing, on either host' '
	victim=$(tail -1 sids) &&
	p=$("$FORGE" forget repo wo.key scratch.db "$victim") && test -n "$p" &&
	bh snapshots --json >s2.json 2>err && cat err &&
	grep "not signed by a full key" err &&
	grep "$victim" s2.json &&
	ts snapshots --json >t2.json 2>err && cat err &&
	grep "$victim" t2.json &&
	(
		host bh2 &&
		coffer -r repo --key-file full.key snapshots --json >r.json &&
		grep "$victim" r.json
	) &&
	bh prune &&
	restores repo full.key "$victim" &&
	rm -f "$(find repo/packs -name "$p")"
'

test_expect_success FORGE 'a drill that passed, journaled with the write-only key, is no drill on any host' '
	sid=$(tail -1 sids) &&
	p=$("$FORGE" drill repo wo.key scratch2.db ckpt "$sid") && test -n "$p" &&
	bh drill history --json >d.json 2>err && cat err d.json &&
	grep "not signed by a full key" err &&
	json_check d.json "@\$j == 0" &&
	(
		host bh3 &&
		coffer -r repo --key-file full.key drill history --json >d3.json &&
		json_check d3.json "@\$j == 0"
	) &&
	rm -f "$(find repo/packs -name "$p")"
'

test_expect_success 'a new training server (new catalog, write-only key): the source check holds' '
	(
		host ts2 &&
		mkdir -p "$TMP/elsewhere" && echo x >"$TMP/elsewhere/f" &&
		test_expect_code 2 coffer -r repo --key-file "$TMP/wo.key" \
			backup ckpt "$TMP/elsewhere" 2>err && cat err &&
		grep -F "is backed up from '"'"'$TMP/ckpt'"'"'" err &&
		grep -e "--new-source" err &&
		coffer -r repo --key-file "$TMP/wo.key" backup --json ckpt \
			"$TMP/ckpt" >b.json &&
		json_check b.json "\$j->{level} eq \"full\" &&
			\$j->{bytes_new} < 1000"
	)
'

test_expect_success 'catalog rebuild and check with the write-only key say what it cannot know' '
	ts catalog rebuild >o.txt 2>err && cat o.txt err &&
	grep "write-only" o.txt && grep "by their views" o.txt &&
	ts catalog check --json >c.json && cat c.json &&
	json_check c.json "\$j->{snapshots_known_total} >= 3 &&
		\$j->{snapshots_broken} == 0" &&
	ts catalog check >o.txt && cat o.txt && grep "known by their views" o.txt
'

test_expect_success 'catalog check with the write-only key names a lost pack its snapshots need' '
	step 8 &&
	newest=$(ls -t $(find repo/packs -type f) | head -1) &&
	mv "$newest" lost.pack &&
	test_expect_code 4 ts catalog check >o.txt 2>err && cat o.txt err &&
	grep "missing from the repository" o.txt &&
	mv lost.pack "$newest" && ts catalog check
'

test_done
