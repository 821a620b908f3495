#!/bin/bash
test_description='keys: slots added, changed and removed without touching a pack; the paper key typed back, a typo named by its line'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

# Slots cost 8 MiB of Argon2id here, not 64: the tests are about slots.
pass() {
	printf '%s\n' "$2" >"$1" && chmod 600 "$1"
}

# packs_fingerprint: every pack's name and hash; slots never change it.
packs_fingerprint() {
	repo_fingerprint repo/packs
}

test_expect_success 'setup: a passphrase repository with a snapshot' '
	pass p1 first-passphrase && pass p2 second-passphrase &&
	pass p3 third-passphrase &&
	mkdir -p src/sub &&
	random_file src/big 3 &&
	printf "one\n" >src/one && printf "two\n" >src/sub/two &&
	coffer init --kdf-memory 8 --passphrase-file p1 repo &&
	coffer -r repo --passphrase-file p1 backup --json ds src >b1.json &&
	sid1=$(json_get b1.json "\$j->{snapshot}") && echo "$sid1" >sid1 &&
	packs_fingerprint >packs.before
'

test_expect_success 'key list: one full slot, in text and JSON, without a key' '
	coffer -r repo key list >list &&
	sed "/^\$/q" list >slots && test_line_count = 3 slots &&
	grep " full " slots && grep "^1  *[1-9][0-9]* .*(new packs)\$" list &&
	coffer -r repo key list --json >list.json &&
	json_check list.json "@{\$j->{slots}} == 1 &&
		\$j->{slots}[0]{capability} eq \"full\" &&
		\$j->{slots}[0]{kdf_memory_mib} == 8 &&
		\$j->{slots}[0]{id} =~ /^[0-9a-f]{16}\$/ &&
		\$j->{epochs}[0]{epoch} == 1 && !\$j->{epochs}[0]{retired}" &&
	json_get list.json "\$j->{slots}[0]{id}" >slot1
'

test_expect_success 'key add: a second slot opens the same repository' '
	coffer -r repo --passphrase-file p1 key add --kdf-memory 8 \
		--new-passphrase-file p2 >out &&
	grep "^added key slot [0-9a-f]\{16\} (full)\$" out &&
	coffer -r repo key list --json >list.json &&
	json_check list.json "@{\$j->{slots}} == 2" &&
	for f in repo/keys/*; do
		test "$(stat -c %a "$f")" = 600 || return 1
	done &&
	test "$(ls -A repo/keys | wc -l)" = 2 &&
	coffer -r repo --passphrase-file p2 restore "$sid1" r2 &&
	treecmp src r2
'

test_expect_success 'remove the original slot: the new one still opens, the old passphrase no longer' '
	coffer -r repo --passphrase-file p2 key remove "$(cat slot1)" >out &&
	grep "removed key $(cat slot1)" out &&
	test_path_is_missing "repo/keys/$(cat slot1)" &&
	test_expect_code 3 coffer -r repo --passphrase-file p1 \
		restore "$(cat sid1)" r1 2>err &&
	grep "wrong passphrase" err && test_path_is_missing r1 &&
	coffer -r repo --passphrase-file p2 restore "$(cat sid1)" r3 &&
	treecmp src r3
'

test_expect_success 'the last slot that can read cannot be removed' '
	slot=$(ls repo/keys) &&
	test_expect_code 3 coffer -r repo --passphrase-file p2 \
		key remove "$slot" 2>err &&
	grep "last one that can read" err &&
	test_path_is_file "repo/keys/$slot" &&
	test_expect_code 3 coffer -r repo --passphrase-file p2 \
		key remove 0123456789abcdef 2>err &&
	grep "no key slot" err
'

test_expect_success 'key passwd: the slot that opened takes the new passphrase and cost' '
	slot=$(ls repo/keys) &&
	coffer -r repo --passphrase-file p2 key passwd --kdf-memory 16 \
		--new-passphrase-file p3 >out &&
	grep "changed key slot $slot" out &&
	test "$(ls repo/keys)" = "$slot" &&
	coffer -r repo key list --json >list.json &&
	json_check list.json "\$j->{slots}[0]{kdf_memory_mib} == 16" &&
	test_expect_code 3 coffer -r repo --passphrase-file p2 \
		restore "$(cat sid1)" r4 2>err &&
	coffer -r repo --passphrase-file p3 restore "$(cat sid1)" r5 &&
	treecmp src r5 &&
	test -z "$(ls -A repo/keys | grep "^\.")"
'

test_expect_success 'no slot change touched a pack' '
	packs_fingerprint >packs.after &&
	test_cmp packs.before packs.after
'

test_expect_success 'a link in keys/ is neither followed nor changed' '
	printf "precious\n" >outside &&
	ln -s ../../outside repo/keys/00000000000000aa &&
	test_must_fail coffer -r repo --passphrase-file p3 \
		key passwd 00000000000000aa --new-passphrase-file p2 2>err &&
	cat err && test "$(cat outside)" = precious &&
	test -L repo/keys/00000000000000aa &&
	coffer -r repo --passphrase-file p3 key remove 00000000000000aa &&
	test_path_is_missing repo/keys/00000000000000aa &&
	test "$(cat outside)" = precious
'

test_expect_success 'key export --paper: numbered lines with a checksum each' '
	coffer -r repo --passphrase-file p3 key export --paper >paper &&
	chmod 600 paper && cat paper &&
	grep -x "coffer paper key 1" paper &&
	test "$(grep -c "^[01][0-9]: \([0-9a-f]\{4\} \)\{8\} [0-9a-f]\{4\}\$" paper)" = 15 &&
	grep "^check: [0-9a-f]\{4\} [0-9a-f]\{4\}\$" paper
'

# A line checksum is 2 bytes: one typo in 65536 leaves it whole, and the
# check line catches it instead.  So each line is tried with a typo in
# its second digit, then in its third: both missed is one in 2^32.
test_expect_success 'one typo in the paper key: import names its line, writes nothing' '
	for line in 01 04 06; do
		named=0 &&
		for skip in 1 2; do
			perl -pe "s/^($line: .{$skip})(.)/\$1 . (\$2 eq \"0\" ? \"1\" : \"0\")/e" \
				paper >typo && chmod 600 typo &&
			! cmp -s paper typo &&
			test_expect_code 2 coffer key import --to typo.key typo 2>err &&
			cat err && test_path_is_missing typo.key || return 1
			if grep "paper key, line $line: its checksum does not match" err
			then
				named=1 && break
			fi
			grep "the check line does not match" err || return 1
		done &&
		test $named = 1 || return 1
	done &&
	sed "s/^02:/03:/" paper >swapped && chmod 600 swapped &&
	test_expect_code 2 coffer key import --to typo.key swapped 2>err &&
	grep "line 03" err && test_path_is_missing typo.key &&
	grep -v "^05:" paper >short && chmod 600 short &&
	test_expect_code 2 coffer key import --to typo.key short 2>err &&
	grep "line 05: missing" err &&
	perl -pe "tr/a-f/A-F/ if /^0/" paper >upper &&
	chmod 600 upper &&
	coffer key import --to upper.key upper && test_path_is_file upper.key
'

test_expect_success 'a key file or paper key open to others is refused' '
	cp paper open && chmod 644 open &&
	test_expect_code 2 coffer key import --to open.key open 2>err &&
	grep "chmod 600" err && test_path_is_missing open.key
'

test_expect_success 'a bare machine: the paper key alone restores a copy of the repository' '
	mkdir bare && cp -a repo/coffer.conf repo/keyring repo/packs bare/ &&
	mkdir bare/keys bare/tmp bare/locks &&
	(
		export XDG_STATE_HOME=$TMP/bare-state &&
		coffer key import --to bare.key paper 2>err &&
		test "$(stat -c %a bare.key)" = 600 &&
		grep "^coffer-key 1 " bare.key &&
		test_expect_code 3 coffer -r bare --passphrase-file p3 snapshots &&
		coffer -r bare --key-file bare.key restore "$(cat sid1)" rb &&
		treecmp src rb &&
		coffer -r bare key import --new-passphrase-file p1 paper >out &&
		grep "added key slot" out &&
		coffer -r bare --passphrase-file p1 restore "$(cat sid1)" rb2 &&
		treecmp src rb2
	)
'

test_expect_success 'a paper key of another repository is refused by this one' '
	coffer init --kdf-memory 8 --passphrase-file p1 other &&
	coffer -r other --passphrase-file p1 key export --paper >other.paper &&
	chmod 600 other.paper &&
	test_expect_code 3 coffer -r repo key import \
		--new-passphrase-file p1 other.paper 2>err &&
	grep "another repository" err
'

test_expect_success 'key export --to FILE: a key file, mode 0600, never over an existing file' '
	coffer -r repo --passphrase-file p3 key export --to full.key &&
	test "$(stat -c %a full.key)" = 600 &&
	grep "^coffer-key 1 " full.key &&
	test_must_fail coffer -r repo --passphrase-file p3 key export \
		--to full.key 2>err && grep "already exists" err &&
	coffer -r repo --key-file full.key snapshots
'

test_done
