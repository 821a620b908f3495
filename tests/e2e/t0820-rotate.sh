#!/bin/bash
test_description='key rotation: new packs sealed to a new epoch, old packs resealed in place (kill -9 at any point leaves every pack readable; the next writer finishes), old epochs retired, bundles from before still import'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

# restores_all REPO: every snapshot in expect/ restores from REPO as it was.
restores_all() {
	for d in expect/*; do
		sid=${d#expect/} &&
		rm -rf out && coffer -r "$1" restore "$sid" out &&
		treecmp "$d" out || { echo "snapshot $sid differs"; return 1; }
	done
}

# snap DATASET SRC [coffer options]: back up in small packs, keep the
# tree in expect/.
snap() {
	COFFER_PACK_SIZE=60000 coffer -r repo "${@:3}" backup --json "$1" \
		"$2" >b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") &&
	mkdir -p expect && cp -a "$2" "expect/$sid"
}

# more N: N new files of 20 KiB in src.
more() {
	for i in $(seq "$1"); do
		head -c 20000 /dev/urandom >"src/f$RANDOM$i"
	done
}

# header_epochs [REPO]: "VERSION EPOCH COUNT" of the pack headers, sorted.
header_epochs() { header_epochs_of repo; }
header_epochs_of() {
	find "$1/packs" -type f | while read -r p; do
		od -An -tu1 -j4 -N4 "$p" |
			awk "{ print \$1, \$2 + 256 * \$3 + 65536 * \$4 }"
	done | sort | uniq -c | awk "{ print \$2, \$3, \$1 }"
}

# epoch_packs N: packs key list counts for epoch N.
epoch_packs() {
	coffer -r repo key list --json >l.json &&
	json_get l.json "join q(,), map { \$_->{packs} }
		grep { \$_->{epoch} == $1 } @{\$j->{epochs}}"
}

test_expect_success 'setup: snapshots in several packs, a bundle and keys from before any rotation' '
	coffer_init_keyfile repo &&
	mkdir src && more 20 && snap ds src &&
	coffer -r repo key export --write-only --to wo.key &&
	mkdir old && coffer -r repo export --target old --to old --all &&
	grep -x "format 1" repo/coffer.conf &&
	grep "^keyring 1 [0-9a-f]\{64\}$" repo/coffer.conf &&
	test_path_is_file repo/keyring &&
	coffer -r repo key list --json >l.json &&
	json_check l.json "@{\$j->{epochs}} == 1 &&
		\$j->{epochs}[0]{epoch} == 1 && !\$j->{epochs}[0]{retired} &&
		\$j->{epochs}[0]{packs} >= 3" &&
	header_epochs >h && cat h && test "$(cut -d" " -f1-2 h)" = "1 1"
'

test_expect_success 'rotate: a new epoch in coffer.conf; new packs are sealed to it' '
	packs1=$(epoch_packs 1) &&
	coffer -r repo key rotate >msg && grep "key epoch 2" msg &&
	grep -x "format 1" repo/coffer.conf && grep "^keyring 2 [0-9a-f]\{64\}$" repo/coffer.conf &&
	grep "^epoch 2 [0-9a-f]\{64\} created [0-9]*\$" repo/coffer.conf &&
	test_path_is_file repo/keyring &&
	more 6 && snap ds src &&
	test "$(epoch_packs 1)" = "$packs1" && test "$(epoch_packs 2)" -ge 2 &&
	header_epochs >h && cat h && grep "^1 2 " h &&
	for p in $(find repo/packs -type f); do
		test "$(od -An -tu1 -j5 -N1 "$p")" -eq 2 && echo "$p"
	done >ep2.list; test -s ep2.list &&
	restores_all repo &&
	mkdir mid mid2 && coffer -r repo export --target mid --to mid --all &&
	coffer -r repo export --target mid2 --to mid2 --all &&
	coffer -r repo export --target old --to old --all
'

test_expect_success 'a write-only host after a second rotation seals to the newest epoch; the full key reads it' '
	coffer -r repo key rotate >msg && grep "key epoch 3" msg &&
	more 4 && snap ds src --key-file wo.key &&
	test "$(epoch_packs 3)" -ge 1 &&
	test_expect_code 2 coffer -r repo --key-file wo.key \
		key rotate --rewrap 2>err && grep "write-only" err &&
	restores_all repo
'

test_expect_success 'retire refuses epoch 1, the newest, and an epoch packs are still sealed to' '
	cp repo/coffer.conf conf.before &&
	test_expect_code 2 coffer -r repo key retire 1 2>err && cat err &&
	grep "key epoch 1 still seals $(epoch_packs 1) pack" err &&
	test_expect_code 2 coffer -r repo key retire 2 2>err && cat err &&
	grep "key epoch 2 still seals $(epoch_packs 2) pack" err &&
	grep "key rotate --rewrap" err &&
	test_must_fail coffer -r repo key retire 3 2>err &&
	grep "newest" err &&
	test_cmp conf.before repo/coffer.conf
'

test_expect_success 'kill -9 after the rewrap intent is written: every pack reads; torn headers read through the intent, the rerun mends them' '
	test_expect_code 137 env COFFER_TEST_RAISE=rewrap-intent:1:KILL \
		"$COFFER" -r repo key rotate --rewrap &&
	test_path_is_file repo/rewrap &&
	coffer -r repo verify --read-data && restores_all repo &&
	perl -e "read(STDIN, \$b, 1 << 20); my \$n = unpack(q(V), substr(\$b, 8, 4));
		print unpack(q(H*), substr(\$b, 12 + 256 * \$_, 16)), qq(\n)
		for 0 .. \$n - 1" <repo/rewrap >named &&
	test "$(wc -l <named)" -ge 4 &&
	for name in $(cat named); do
		p=repo/packs/${name:0:2}/$name && test_path_is_file "$p" &&
		flip_byte "$p" 60 && flip_byte "$p" 100 || return 1
	done &&
	coffer -r repo verify --read-data 2>err && cat err &&
	grep "header was torn by a key rewrap cut short" err |
		sed "s|.*/\([0-9a-f]*\).: its header.*|\1|" | sort -u >torn &&
	sort named >named.sorted && test_cmp named.sorted torn &&
	restores_all repo &&
	cp repo/rewrap rewrap.kept && rm repo/rewrap &&
	test_must_fail coffer -r repo verify --read-data 2>err &&
	grep "header is damaged" err && mv rewrap.kept repo/rewrap &&
	coffer -r repo key rotate --rewrap >msg && cat msg &&
	grep "all are sealed to key epoch 3" msg &&
	test_path_is_missing repo/rewrap &&
	coffer -r repo verify --read-data && restores_all repo &&
	header_epochs >h && cat h && test "$(cut -d" " -f1-2 h)" = "1 3"
'

test_expect_success 'kill -9 between header writes: old and new headers both read, the rerun finishes' '
	coffer -r repo key rotate >msg && grep "key epoch 4" msg &&
	test_expect_code 137 env COFFER_TEST_RAISE=rewrap-header:3:KILL \
		"$COFFER" -r repo key rotate --rewrap &&
	test_path_is_file repo/rewrap &&
	header_epochs >h && cat h && grep "^1 4 3\$" h && grep "^1 3 " h &&
	coffer -r repo verify --read-data && restores_all repo &&
	more 2 && snap ds src 2>err && cat err &&
	grep "key rewrap was cut short: finished it" err &&
	test_path_is_missing repo/rewrap &&
	coffer -r repo key rotate --rewrap >msg && cat msg &&
	header_epochs >h && test "$(cut -d" " -f1-2 h)" = "1 4" &&
	coffer -r repo verify --read-data && restores_all repo
'

test_expect_success 'rewrap rewrote headers only: every record and index byte is as it was' '
	for p in $(find repo/packs -type f); do
		echo "$(tail -c +121 "$p" | b2sum | cut -c1-32) $(stat -c %s "$p")"
	done | sort >after.tails &&
	coffer -r repo key rotate &&
	coffer -r repo key rotate --rewrap &&
	for p in $(find repo/packs -type f); do
		echo "$(tail -c +121 "$p" | b2sum | cut -c1-32) $(stat -c %s "$p")"
	done | sort >after2.tails &&
	test_cmp after.tails after2.tails
'

test_expect_success 'bundles from before the rewrap import into the same repository, with its catalog or a new one' '
	repo_fingerprint repo/packs >before &&
	coffer -r repo import old && coffer -r repo import mid &&
	(
		export XDG_STATE_HOME=$TMP/same-state &&
		coffer -r repo import old && coffer -r repo import mid &&
		coffer -r repo verify --read-data && restores_all repo
	) &&
	repo_fingerprint repo/packs >after &&
	sort before >b.sorted && sort after >a.sorted &&
	comm -23 b.sorted a.sorted >changed && test_must_be_empty changed
'

test_expect_success 'the old epochs retire; their secrets leave the keyring; everything restores' '
	kr=$(stat -c %s repo/keyring) &&
	for e in 2 3 4 1; do
		coffer -r repo key retire $e >msg && grep "retired" msg ||
			return 1
	done &&
	test $(stat -c %s repo/keyring) -eq $((kr - 4 * 36)) &&
	coffer -r repo key list --json >l.json &&
	json_check l.json "join(q( ), map { \$_->{retired} ? 1 : 0 }
		@{\$j->{epochs}}) eq q(1 1 1 1 0)" &&
	grep -x "format 1" repo/coffer.conf &&
	grep -c " retired [0-9]*\$" repo/coffer.conf >n && test "$(cat n)" = 4 &&
	coffer -r repo verify --read-data && restores_all repo &&
	coffer -r repo key retire 2 >msg && grep retired msg
'

test_expect_success 'a pack sealed to a retired epoch (from an old bundle) is refused naming its epoch' '
	p=$(head -1 ep2.list) &&
	test -n "$p" && cp "$p" kept.pack && rm "$p" &&
	(
		export XDG_STATE_HOME=$TMP/fresh-state &&
		test_expect_code 4 coffer -r repo import mid2 2>err && cat err &&
		grep "sealed to key epoch 2, which this key does not hold" err
	) &&
	od -An -tu1 -j4 -N2 "$p" >v && test "$(echo $(cat v))" = "1 2"
'

# The snapshots in expect/ that REPO has restore as they were.
restores_known() {
	coffer -r "$1" snapshots >snaps &&
	for d in expect/*; do
		sid=${d#expect/} &&
		grep -q "^${sid:0:12}" snaps || continue
		rm -rf out && coffer -r "$1" restore "$sid" out &&
		treecmp "$d" out || return 1
	done
}

test_expect_success 'bundles from before the rotation import on a bare machine with the key, and a chain across it' '
	(
		export XDG_STATE_HOME=$TMP/bare0-state &&
		coffer -r bare0 import --init - <old/old-0001.cfb &&
		grep -x "format 1" bare0/coffer.conf &&
		test_path_is_file bare0/keyring &&
		coffer -r bare0 verify --read-data && restores_known bare0
	) &&
	(
		export XDG_STATE_HOME=$TMP/bare1-state &&
		coffer -r bare1 import --init old &&
		grep -x "format 1" bare1/coffer.conf &&
		test_path_is_file bare1/keyring &&
		coffer -r bare1 snapshots >snaps && test_line_count = 3 snaps &&
		coffer -r bare1 verify --read-data && restores_known bare1
	) &&
	(
		export XDG_STATE_HOME=$TMP/bare2-state &&
		coffer -r bare2 import --init mid &&
		test_path_is_file bare2/keyring &&
		grep "^epoch 2 " bare2/coffer.conf &&
		coffer -r bare2 verify --read-data && restores_known bare2
	)
'

test_expect_success 'what this coffer cannot read it refuses, naming the format: coffer.conf, a pack, the keyring' '
	cp_repo repo newer &&
	sed -i "s/^format 1\$/format 2/" newer/coffer.conf &&
	test_must_fail coffer -r newer snapshots 2>err && cat err &&
	grep "has format 2; this coffer reads format 1 (upgrade coffer)" err &&
	sed -i "s/^format 2\$/format 2\nsomething new/" newer/coffer.conf &&
	test_must_fail coffer -r newer snapshots 2>err &&
	grep "has format 2; this coffer reads format 1 (upgrade coffer)" err &&
	cp_repo repo newer2 && p=$(find newer2/packs -type f | head -1) &&
	printf "\002" | dd of="$p" bs=1 seek=4 conv=notrunc 2>/dev/null &&
	test_must_fail coffer -r newer2 verify --read-data 2>err && cat err &&
	grep "has format 2; this coffer reads format 1 (upgrade coffer)" err &&
	cp_repo repo newer3 &&
	printf "\002" | dd of=newer3/keyring bs=1 seek=4 conv=notrunc 2>/dev/null &&
	test_must_fail coffer -r newer3 verify --read-data 2>err && cat err &&
	grep "keyring has format 2; this coffer reads format 1 (upgrade coffer)" err
'

test_expect_success 'hostile repository: a damaged or linked keyring, a malformed intent, a pack with two names' '
	cp_repo repo h1 && flip_byte h1/keyring 40 &&
	test_must_fail coffer -r h1 verify --read-data 2>err && cat err &&
	grep "keyring failed authentication" err &&
	grep "sealed to key epoch 5, which this key does not hold" err &&
	cp h1/keyring damaged.keyring &&
	test_must_fail coffer -r h1 key rotate 2>err &&
	grep "keyring did not open" err &&
	cmp h1/keyring damaged.keyring &&
	cp_repo repo h2 && mv h2/keyring kr.outside && ln -s ../kr.outside h2/keyring &&
	test_must_fail coffer -r h2 verify --read-data 2>err &&
	grep "symbolic link" err &&
	cp_repo repo h3 && coffer -r h3 key rotate &&
	printf "CFRW\001\000\000\000\001\000\000\000junk" >h3/rewrap &&
	repo_fingerprint h3/packs >before &&
	test_must_fail coffer -r h3 key rotate --rewrap 2>err &&
	grep "rewrap.* is malformed: left alone" err &&
	repo_fingerprint h3/packs >after && test_cmp before after &&
	rm h3/rewrap && p=$(find h3/packs -type f | head -1) &&
	ln "$p" second-name && cp "$p" second-name.before &&
	test_expect_code 4 coffer -r h3 key rotate --rewrap >msg 2>err &&
	cat msg err && grep "1 could not be opened" msg &&
	cmp second-name second-name.before && rm second-name &&
	grep "sealed to key epoch 2, which this key does not hold" err &&
	header_epochs_of h3 >h && cat h && grep "^1 2 1\$" h &&
	grep "^1 6 " h && ! grep "^1 5 " h
'

test_done
