#!/bin/bash
test_description='coffer.conf and the keyring put back from before a rotation and a retirement (by someone without a key): no writer seals to the epoch the rotation left or the retirement removed; what was written restores'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

# snap [coffer options]: a backup of src, its tree kept in expect/.
snap() {
	coffer -r repo "$@" backup --json ds src >b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") &&
	mkdir -p expect && cp -a src "expect/$sid"
}

more() {
	for i in $(seq "$1"); do
		head -c 20000 /dev/urandom >"src/f$RANDOM$i"
	done
}

# restores: every snapshot in expect/ restores with the full key.
restores() {
	for d in expect/*; do
		sid=${d#expect/} &&
		rm -rf rst && coffer -r repo restore "$sid" rst &&
		treecmp "$d" rst || { echo "snapshot $sid differs"; return 1; }
	done
}

npacks() { find repo/packs -type f | wc -l; }

# wo CMD...: the training server: a write-only key, a catalog of its own.
wo() {
	XDG_STATE_HOME=$TMP/wo-state coffer -r repo --key-file wo.key "$@"
}

test_expect_success 'setup: a backup host and a write-only training server; rotate, rewrap, retire epoch 1' '
	coffer_init_keyfile repo &&
	mkdir src && more 4 && snap &&
	coffer -r repo key export --write-only --to wo.key &&
	more 1 && wo backup ds src &&
	cp repo/coffer.conf conf.0 && cp repo/keyring keyring.0 &&
	coffer -r repo key rotate &&
	coffer -r repo key rotate --rewrap &&
	coffer -r repo key retire 1 &&
	more 1 && snap && more 1 && wo backup ds src &&
	cp repo/coffer.conf conf.1 && cp repo/keyring keyring.1 &&
	grep "^epoch 1 retired" conf.1
'

test_expect_success 'coffer.conf put back from before the rotation: every writer refuses, nothing is sealed' '
	cp conf.0 repo/coffer.conf && n0=$(npacks) && more 1 &&
	test_expect_code 3 coffer -r repo backup ds src 2>err && cat err &&
	grep "lists key epoch 1, whose secret the keyring does not hold" err &&
	test_expect_code 3 wo backup ds src 2>err && cat err &&
	grep "older than this host has seen (keyring generation [0-9]*, not [0-9]*)" err &&
	test "$(npacks)" = "$n0"
'

test_expect_success 'coffer.conf and the keyring both put back: every writer refuses' '
	cp conf.0 repo/coffer.conf && cp keyring.0 repo/keyring && n0=$(npacks) &&
	test_expect_code 3 coffer -r repo backup ds src 2>err && cat err &&
	grep "older than this host has seen" err &&
	test_expect_code 3 wo backup ds src 2>err && cat err &&
	grep "older than this host has seen" err &&
	test "$(npacks)" = "$n0"
'

test_expect_success 'a reader says so and reads on; the newer files put back, everything restores' '
	cp conf.0 repo/coffer.conf && cp keyring.1 repo/keyring &&
	coffer -r repo snapshots 2>err >/dev/null; cat err &&
	grep "older than this host has seen" err &&
	cp conf.1 repo/coffer.conf &&
	more 1 && snap && more 1 && wo backup ds src &&
	restores && coffer -r repo verify --read-data
'

test_expect_success 'a rotation cut short between its two writes: writers stop, the next rotation goes on past it' '
	cp repo/coffer.conf conf.2 &&
	coffer -r repo key rotate &&
	cp conf.2 repo/coffer.conf && n0=$(npacks) &&
	test_expect_code 3 coffer -r repo backup ds src 2>err && cat err &&
	grep "keyring holds key epoch 3, which coffer.conf does not list" err &&
	test "$(npacks)" = "$n0" &&
	coffer -r repo key rotate >out && cat out && grep "key epoch 4" out &&
	more 1 && snap && more 1 && wo backup ds src && restores
'

test_expect_success 'a removed key, coffer.conf and keyring put back from before the removal: a new host learns from the journal' '
	coffer -r repo key export --to kx 2>err &&
	name=$(sed -n "s/.*coffer key remove \([0-9a-f]*\).*/\1/p" err) &&
	cp repo/coffer.conf conf.4 && cp repo/keyring keyring.4 &&
	coffer -r repo key remove "$name" &&
	more 1 && snap && coffer -r repo drill "$sid" >d.out &&
	cp repo/coffer.conf conf.5 && cp repo/keyring keyring.5 &&
	cp conf.4 repo/coffer.conf && cp keyring.4 repo/keyring && n0=$(npacks) &&
	(
		export XDG_STATE_HOME=$TMP/new-host-state &&
		test_expect_code 3 coffer -r repo --key-file kx backup ds src \
			2>err && cat err &&
		grep "older than this host has seen" err
	) &&
	test "$(npacks)" = "$n0" &&
	cp conf.5 repo/coffer.conf && cp keyring.5 repo/keyring
'

test_expect_success 'a keyless forged rewrap intent (a new pack key sealed to the published epoch key) is refused; no pack changes' '
	test -x "$BUILD/tests/forge-intent" &&
	grep "^epoch [0-9]* [0-9a-f]\{64\} created" repo/coffer.conf &&
	packs=$(find repo/packs -type f | head -3) &&
	"$BUILD/tests/forge-intent" repo $packs &&
	repo_fingerprint repo/packs >before &&
	more 1 &&
	test_must_fail coffer -r repo backup ds src 2>err && cat err &&
	grep "another pack key than its own (forged?): left alone" err &&
	test_must_fail coffer -r repo key rotate --rewrap 2>err &&
	grep "another pack key than its own" err &&
	repo_fingerprint repo/packs >after && test_cmp before after &&
	rm repo/rewrap && coffer -r repo verify --read-data && restores
'

test_done
