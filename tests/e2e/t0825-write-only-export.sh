#!/bin/bash
test_description='a write-only host exports what it backed up, without reading a record; a bare machine with the full key imports and restores it'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

PROBE=$BUILD/tests/wo-probe

# bare NAME: a new host: its own state directory (no catalog).
bare() {
	export XDG_STATE_HOME=$TMP/$1-state
	rm -rf "$XDG_STATE_HOME" && mkdir -p "$XDG_STATE_HOME"
}
home() { export XDG_STATE_HOME=$TMP/state; }

# snap KEY DATASET SRC [LEVEL]: back up with KEY, keep the tree in expect/.
snap() {
	coffer -r repo --key-file "$1" backup --json ${4:+--level $4} "$2" \
		"$3" >b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") &&
	mkdir -p expect && rm -rf "expect/$sid" && cp -a "$3" "expect/$sid"
}

# restores_all REPO SID...: each snapshot restores from REPO as it was.
restores_all() {
	r=$1 && shift &&
	for sid in "$@"; do
		rm -rf out && coffer -r "$r" --key-file full.key restore \
			"$sid" out &&
		treecmp "expect/$sid" out ||
			{ echo "snapshot $sid differs"; return 1; }
	done
}

test_expect_success 'setup: a full-key host backs up; a write-only key file' '
	home &&
	coffer init --key-file full.key repo &&
	mkdir -p src/sub &&
	random_file src/big 2 && echo one >src/sub/one &&
	snap full.key ds src full && echo $sid >sid-fullhost &&
	coffer -r repo --key-file full.key key export --write-only --to wo.key &&
	grep "^coffer-key 1 write-only " wo.key
'

test_expect_success 'the write-only host backs up, full and incremental, deduplicated against the full-key host' '
	snap wo.key ds src full && echo $sid >sid-wo1 &&
	json_check b.json "\$j->{level} eq \"full\" && \$j->{bytes_new} == 0" &&
	echo two >src/two &&
	snap wo.key ds src incremental && echo $sid >sid-wo2 &&
	json_check b.json "\$j->{bytes_new} < 100" &&
	"$PROBE" repo wo.key >probe && grep "opened 0\$" probe
'

test_expect_success 'an incremental whose record is in parts over several packs' '
	mkdir -p src/many &&
	for f in $(seq 1 120); do echo "file $f" >src/many/f$f || return 1; done &&
	COFFER_RECORD_PART_ENTRIES=16 COFFER_PACK_SIZE=1 \
		snap wo.key ds src incremental && echo $sid >sid-wo3 &&
	sqlite3 "$(catalog_db)" "SELECT s.parts, count(DISTINCT sp.pack)
		FROM snapshot s JOIN snapshot_part sp ON sp.snapshot_id = s.id
		WHERE s.sid = '\''$sid'\''" >parts &&
	IFS="|" read -r nparts npacks <parts &&
	test "$nparts" -gt 2 && test "$npacks" -gt 1
'

test_expect_success 'the write-only host exports a full bundle of its chain' '
	mkdir off &&
	coffer -r repo --key-file wo.key export --json --target off --to off \
		ds@latest >e1.json 2>err &&
	json_check e1.json "\$j->{level} eq \"full\" && \$j->{snapshots} == 3" &&
	! grep -i "write-only" err &&
	"$PROBE" repo wo.key >probe && grep "opened 0\$" probe
'

test_expect_success 'and an incremental bundle after another backup' '
	echo three >src/sub/three && rm src/sub/one &&
	snap wo.key ds src incremental && echo $sid >sid-wo4 &&
	coffer -r repo --key-file wo.key export --json --target off --to off \
		ds@latest >e2.json &&
	json_check e2.json "\$j->{level} eq \"incremental\" &&
		\$j->{sequence} == 2" &&
	ls off/off-0001.cfb off/off-0002.cfb
'

# The full-key host's snapshot comes too: its record is in the pack that
# holds the chunks the write-only full deduplicated against.
test_expect_success 'a bare machine with the full key imports the bundles and restores every snapshot' '
	bare b1 &&
	coffer -r new --key-file full.key import --init --json off >i.json &&
	json_check i.json "\$j->{bundles} == 2" &&
	coffer -r new --key-file full.key snapshots --json >s.json &&
	json_check s.json "@\$j == 5" &&
	restores_all new $(cat sid-fullhost sid-wo1 sid-wo2 sid-wo3 sid-wo4) &&
	coffer -r new --key-file full.key verify --read-data &&
	home
'

test_expect_success 'a catalog from before it kept the parts: the write-only key says what to run; a reading key exports, and fills it in' '
	sqlite3 "$(catalog_db)" "UPDATE snapshot SET parts = NULL;
		DELETE FROM snapshot_part" &&
	mkdir off2 off3 &&
	test_expect_code 2 coffer -r repo --key-file wo.key export \
		--target off2 --to off2 ds@latest 2>err &&
	grep "write-only" err && grep "catalog rebuild" err &&
	test_dir_is_empty off2 &&
	coffer -r repo --key-file full.key export --target off3 --to off3 \
		ds@latest &&
	coffer -r repo --key-file wo.key export --target off2 --to off2 \
		ds@latest &&
	bare b2 &&
	coffer -r new2 --key-file full.key import --init off2 &&
	restores_all new2 $(cat sid-wo1 sid-wo2 sid-wo3 sid-wo4) &&
	home
'

test_expect_success 'catalog rebuild with the full key brings the parts back' '
	sqlite3 "$(catalog_db)" "UPDATE snapshot SET parts = NULL;
		DELETE FROM snapshot_part" &&
	coffer -r repo --key-file full.key catalog rebuild &&
	sqlite3 "$(catalog_db)" "SELECT count(*) FROM snapshot
		WHERE state = 1 AND parts IS NULL" >n &&
	echo 0 >expect-n && test_cmp expect-n n &&
	sid=$(cat sid-wo3) &&
	sqlite3 "$(catalog_db)" "SELECT parts FROM snapshot
		WHERE sid = '\''$sid'\''" >n3 && test "$(cat n3)" -gt 2
'

test_expect_success 'a write-only host with a catalog of its own exports its own backups' '
	bare wo-own &&
	echo own >src/own &&
	snap wo.key ds src && echo $sid >sid-own &&
	mkdir off5 &&
	coffer -r repo --key-file wo.key export --json --target own --to off5 \
		ds@latest >e5.json &&
	json_check e5.json "\$j->{snapshots} == 1" &&
	bare b3 &&
	coffer -r new3 --key-file full.key import --init off5 &&
	restores_all new3 $(cat sid-own) &&
	home
'

test_done
