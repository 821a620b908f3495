#!/bin/bash
test_description='key list: when each slot and key file last unlocked a run that wrote, from the journal, through a lost catalog'
. "$(dirname "$0")/../lib.sh"
require_coffer

pass() {
	printf '%s\n' "$2" >"$1" && chmod 600 "$1"
}

# used KEY: the last_used of slot KEY (or key file "full"/"write-only")
# from key list --json, "null" when never.
used() {
	coffer -r repo key list --json >list.json &&
	json_get list.json '
		my ($s) = grep { ($_->{id} // "") eq "'"$1"'" } @{$j->{slots}};
		($s) = grep { $_->{capability} eq "'"$1"'" } @{$j->{key_files}}
			unless $s;
		die "no key '"$1"'\n" unless $s;
		$s->{last_used} // "null"'
}

now() { date -u +%Y-%m-%dT%H:%M:%SZ; }
npacks() { find repo/packs -type f | wc -l; }

test_expect_success 'setup: a repository, a backup with its first slot, a second slot' '
	pass p1 first-passphrase && pass p2 second-passphrase &&
	mkdir src && echo one >src/one &&
	coffer init --kdf-memory 8 --passphrase-file p1 repo &&
	A=$(ls repo/keys) && echo $A >A &&
	test "$(used $A)" = null &&
	t0=$(now) &&
	coffer -r repo --passphrase-file p1 backup ds src &&
	used $A >a1 && ! test "$(cat a1)" \< "$t0" &&
	coffer -r repo --passphrase-file p1 key add --kdf-memory 8 \
		--new-passphrase-file p2 &&
	B=$(ls repo/keys | grep -v $A) && echo $B >B &&
	test "$(used $B)" = null && used $A >a && test_cmp a1 a
'

test_expect_success 'a backup with the second slot: its last use is the backup, the first slot unchanged' '
	A=$(cat A) && B=$(cat B) && sleep 1 &&
	t1=$(now) && echo two >src/two &&
	coffer -r repo --passphrase-file p2 backup ds src &&
	used $B >b1 && ! test "$(cat b1)" \< "$t1" &&
	used $A >a && test_cmp a1 a &&
	coffer -r repo --passphrase-file p2 key list >list &&
	grep "^$B .* $(cat b1)  <- this key\$" list &&
	grep "^$A .* $(cat a1)\$" list
'

test_expect_success 'a drill writes its result to the repository: its key is used then' '
	B=$(cat B) && used $B >b1 && sleep 1 && t2=$(now) &&
	coffer -r repo --passphrase-file p2 drill ds@latest &&
	used $B >b2 && ! test "$(cat b2)" \< "$t2" &&
	cat b2 >b1
'

test_expect_success 'a run that only reads records no use and writes nothing' '
	A=$(cat A) && repo_fingerprint repo >before &&
	coffer -r repo --passphrase-file p1 restore ds@latest out &&
	coffer -r repo --passphrase-file p1 snapshots >/dev/null &&
	repo_fingerprint repo | grep -v " ./locks/writer$" >after &&
	grep -v " ./locks/writer$" before >before.nolock &&
	test_cmp before.nolock after &&
	used $A >a && test_cmp a1 a
'

test_expect_success 'a verify writes its result to the repository, as a drill: its key is used then' '
	A=$(cat A) && sleep 1 && t3=$(now) &&
	coffer -r repo --passphrase-file p1 verify &&
	used $A >a && ! test "$(cat a)" \< "$t3" &&
	cat a >a1
'

test_expect_success 'a lost catalog: rebuilt from the repository, the same last uses' '
	A=$(cat A) && B=$(cat B) &&
	rm -rf "$XDG_STATE_HOME/coffer" &&
	test "$(used $A)" = null &&
	coffer -r repo --passphrase-file p1 catalog rebuild &&
	used $A >a && test_cmp a1 a && used $B >b && test_cmp b1 b
'

test_expect_success 'with a key, key list reads the repository first: a new host sees the uses' '
	A=$(cat A) && B=$(cat B) &&
	XDG_STATE_HOME=$TMP/other coffer -r repo --passphrase-file p2 key list \
		--json >other.json &&
	json_check other.json "
		my %u = map { \$_->{id} => \$_->{last_used} } @{\$j->{slots}};
		\$u{q($A)} eq q($(cat a1)) && \$u{q($B)} eq q($(cat b1))"
'

test_expect_success 'key files: a full and a write-only one, each by its kind' '
	test "$(used full)" = null && test "$(used write-only)" = null &&
	coffer -r repo --passphrase-file p1 key export --to full.key &&
	coffer -r repo --passphrase-file p1 key export --write-only --to wo.key &&
	t2=$(now) && echo three >src/three &&
	coffer -r repo --key-file wo.key backup ds src &&
	used write-only >w && ! test "$(cat w)" \< "$t2" &&
	test "$(used full)" = null &&
	coffer -r repo --key-file full.key backup ds src &&
	! test "$(used full)" \< "$t2" &&
	used $(cat B) >b && test_cmp b1 b
'

test_expect_success 'another use within a day adds no journal pack of its own; a rebuild keeps it from the old catalog, the next journal record carries it' '
	B=$(cat B) && sleep 1 && n0=$(npacks) &&
	t3=$(now) && echo four >src/four &&
	coffer -r repo --passphrase-file p2 backup ds src &&
	used $B >b3 && ! test "$(cat b3)" \< "$t3" &&
	test "$(npacks)" = $((n0 + 1)) &&
	coffer -r repo --passphrase-file p1 catalog rebuild &&
	used $B >b && test_cmp b3 b &&
	rm -rf "$XDG_STATE_HOME/coffer" &&
	coffer -r repo --passphrase-file p1 catalog rebuild &&
	used $B >b && test_cmp b1 b &&
	echo five >src/five &&
	coffer -r repo --passphrase-file p2 backup --json ds src >b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") &&
	coffer -r repo --passphrase-file p2 forget "$sid" &&
	used $B >b4 && test "$(cat b4)" \> "$(cat b1)" &&
	rm -rf "$XDG_STATE_HOME/coffer" &&
	coffer -r repo --passphrase-file p1 catalog rebuild &&
	used $B >b && test_cmp b4 b
'

test_expect_success 'a refused command is no use: prune and forget --prune with the write-only key, refused, leave its last use and the repository as they were' '
	used write-only >w0 && test "$(cat w0)" != null && sleep 1 &&
	repo_fingerprint repo | grep -v " ./locks/writer$" >before &&
	test_expect_code 2 coffer -r repo --key-file wo.key prune 2>err &&
	grep "write-only" err &&
	test_expect_code 2 coffer -r repo --key-file wo.key forget \
		--keep-last 1 --prune 2>err &&
	grep "write-only" err &&
	used write-only >w && test_cmp w0 w &&
	repo_fingerprint repo | grep -v " ./locks/writer$" >after &&
	test_cmp before after
'

test_expect_success 'key list without a key, a catalog of another format: moved aside with a warning, rebuilt by the next run with a key' '
	A=$(cat A) && used $A >a0 &&
	cat=$(coffer -r repo catalog path) &&
	sqlite3 "$cat" "PRAGMA user_version = 7" &&
	coffer -r repo key list >list 2>err &&
	cat err &&
	grep "^warning: catalog .* has format 7, not this coffer.s [0-9]*: moved aside to .*\.v7-.*" err &&
	! grep "^error:" err &&
	ls "$cat".v7-* &&
	grep "^$A " list &&
	coffer -r repo --passphrase-file p1 snapshots >/dev/null &&
	used $A >a && test_cmp a0 a
'

test_done
