#!/bin/bash
test_description='a write-only key: backs up and deduplicates, holds no secret that opens a pack, and every command that reads refuses it'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

PROBE=$BUILD/tests/wo-probe

pass() {
	printf '%s\n' "$2" >"$1" && chmod 600 "$1"
}

packs_fingerprint() {
	repo_fingerprint repo/packs
}

test_expect_success 'setup: a repository with a snapshot, its key and a write-only key file' '
	pass p3 full-passphrase && pass pw write-only-passphrase &&
	pass p1 another-passphrase &&
	mkdir -p src/sub &&
	random_file src/big 3 &&
	printf "one\n" >src/one && printf "two\n" >src/sub/two &&
	coffer init --kdf-memory 8 --passphrase-file p3 repo &&
	coffer -r repo --passphrase-file p3 backup --json ds src >b1.json &&
	json_get b1.json "\$j->{snapshot}" >sid1 &&
	coffer -r repo --passphrase-file p3 key export --to full.key &&
	test "$(stat -c %a full.key)" = 600
'

test_expect_success 'write-only key file: the probe opens no pack with it, every pack with the full key' '
	coffer -r repo --passphrase-file p3 key export --write-only \
		--to wo.key &&
	test "$(stat -c %a wo.key)" = 600 &&
	grep "^coffer-key 1 write-only " wo.key &&
	! grep -F "$(cut -d" " -f4 full.key)" wo.key &&
	"$PROBE" repo full.key >probe.full && cat probe.full &&
	n=$(sed -n "s/^packs \([0-9]*\) .*/\1/p" probe.full) &&
	test "$n" -gt 0 &&
	echo "packs $n opened $n" >expect && test_cmp expect probe.full &&
	"$PROBE" repo wo.key >probe.wo &&
	echo "packs $n opened 0" >expect && test_cmp expect probe.wo &&
	test_expect_code 2 coffer -r repo --key-file wo.key key export \
		--paper 2>err && grep "write-only" err
'

test_expect_success 'a write-only key backs up, incremental and full, deduplicated' '
	printf "three\n" >src/three &&
	coffer -r repo --key-file wo.key backup --json ds src >b2.json &&
	json_check b2.json "\$j->{level} eq \"incremental\" &&
		\$j->{bytes_new} < 100" &&
	coffer -r repo --key-file wo.key backup --json --level full ds src \
		>b3.json &&
	json_check b3.json "\$j->{level} eq \"full\" && \$j->{bytes_new} == 0" &&
	json_get b3.json "\$j->{snapshot}" >sid3 &&
	"$PROBE" repo wo.key >probe.wo &&
	grep "opened 0\$" probe.wo
'

test_expect_success 'every command that reads refuses a write-only key, naming why' '
	sid=$(cat sid3) &&
	packs_fingerprint >before &&
	for cmd in "restore $sid wo-out" "verify" "verify --read-data" \
		"drill $sid" "prune" "forget --keep-last 1"; do
		test_expect_code 2 coffer -r repo --key-file wo.key $cmd \
			>out 2>err || return 1
		grep "write-only" err || return 1
	done &&
	test_path_is_missing wo-out && test_path_is_missing bundles &&
	packs_fingerprint >after && test_cmp before after &&
	coffer -r repo --key-file wo.key snapshots >snaps &&
	grep "${sid:0:12}" snaps
'

test_expect_success 'what the write-only key wrote restores and verifies with the full key' '
	coffer -r repo --key-file full.key verify --read-data &&
	coffer -r repo --key-file full.key restore "$(cat sid3)" r6 &&
	treecmp src r6
'

test_expect_success 'a write-only slot: its passphrase backs up and cannot read' '
	coffer -r repo --passphrase-file p3 key add --write-only \
		--kdf-memory 8 --new-passphrase-file pw >out &&
	grep "(write-only)" out &&
	coffer -r repo key list --json >list.json &&
	json_check list.json "grep { \$_->{capability} eq \"write-only\" }
		@{\$j->{slots}}" &&
	printf "four\n" >src/four &&
	coffer -r repo --passphrase-file pw backup ds src &&
	test_expect_code 2 coffer -r repo --passphrase-file pw \
		restore "$(cat sid1)" r7 2>err && grep "write-only" err &&
	test_expect_code 2 coffer -r repo --passphrase-file pw \
		key add --new-passphrase-file p1 2>err &&
	grep "write-only" err &&
	test_expect_code 2 coffer -r repo --passphrase-file pw \
		key remove "$(ls repo/keys | head -1)" 2>err &&
	grep "write-only" err
'

test_expect_success 'the write-only slot cannot be the last that can read' '
	cp -a repo r7 &&
	coffer -r r7 key list --json >l7.json &&
	full=$(perl -MJSON::PP -e "print map { \$_->{id} } grep {
		\$_->{capability} eq q(full) } @{decode_json(join q(), <>)->{slots}}" <l7.json) &&
	file=$(perl -MJSON::PP -e "print map { \$_->{id} } grep {
		\$_->{holder} eq q(key file) } @{decode_json(join q(), <>)->{keyring}}" <l7.json) &&
	test -n "$full" && test -n "$file" &&
	coffer -r r7 --passphrase-file p3 key remove "$file" &&
	test_expect_code 3 coffer -r r7 --passphrase-file p3 \
		key remove "$full" 2>err &&
	grep "last one that can read" err
'

test_expect_success 'a write-only host with its own catalog backs up beside the others, deduplicated against them' '
	(
		export COFFER_CATALOG=$TMP/wo-host.db &&
		printf "five\n" >src/five &&
		coffer -v -r repo --key-file wo.key backup --json ds src \
			>b4.json 2>err &&
		cat err && ! grep "not read" err &&
		json_check b4.json "\$j->{level} eq \"full\" &&
			\$j->{bytes_new} < 100"
	) &&
	coffer -r repo --key-file full.key snapshots >snaps &&
	sid4=$(json_get b4.json "\$j->{snapshot}") &&
	grep "${sid4:0:12}" snaps &&
	coffer -r repo --key-file full.key restore "$sid4" r8 &&
	treecmp src r8
'

test_expect_success 'a write-only host whose catalog is of another format rebuilds it with a warning and backs up' '
	(
		export COFFER_CATALOG=$TMP/wo-host.db &&
		sqlite3 "$COFFER_CATALOG" "PRAGMA user_version = 11" &&
		printf "six\n" >src/six &&
		coffer -r repo --key-file wo.key backup --json ds src \
			>b5.json 2>err &&
		cat err &&
		test_line_count = 1 err &&
		grep "^warning: catalog .* has format 11, not this coffer.s [0-9]*: moved aside" err &&
		ls "$COFFER_CATALOG".v11-* &&
		json_check b5.json "\$j->{level} eq \"full\" &&
			\$j->{bytes_new} < 100"
	)
'

test_done
