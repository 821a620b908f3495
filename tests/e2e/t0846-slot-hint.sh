#!/bin/bash
test_description='a passphrase tries first the slot that opened last on this host: slots planted by whoever can write the repository (each an Argon2id run of their choosing) are not tried'
. "$(dirname "$0")/../lib.sh"
require_coffer

test_expect_success 'setup: a repository with a passphrase slot' '
	printf "%s\n" first >p1 && chmod 600 p1 &&
	coffer init --kdf-memory 8 --passphrase-file p1 repo &&
	mkdir src && echo data >src/a &&
	coffer -r repo --passphrase-file p1 backup ds src
'

test_expect_success 'planted slots that sort first are never read once a slot has opened here' '
	for n in 0000000000000000 0000000000000001; do
		printf "CFKS\001\002planted" >repo/keys/$n || return 1
	done &&
	coffer -r repo --passphrase-file p1 snapshots >out 2>err &&
	cat err && ! grep "keys/000000000000000" err &&
	grep "^[0-9a-f]\{12\} *ds" out
'

test_expect_success 'a host without the hint tries them (in name order), then opens' '
	(
		export XDG_STATE_HOME=$TMP/other-host &&
		coffer -r repo --passphrase-file p1 snapshots >out 2>err
		cat err && grep "keys/0000000000000000" err &&
		grep "^[0-9a-f]\{12\} *ds" out &&
		coffer -r repo --passphrase-file p1 snapshots >out 2>err &&
		! grep "keys/000000000000000" err
	)
'

test_expect_success 'a hint naming a slot that is gone, or garbage, is passed over' '
	cat=$(catalog_db) && test -f "$cat.slot" &&
	echo "../../etc/passwd" >"$cat.slot" &&
	coffer -r repo --passphrase-file p1 snapshots >out 2>err &&
	grep "^[0-9a-f]\{12\} *ds" out &&
	echo ffffffffffffffff >"$cat.slot" &&
	coffer -r repo --passphrase-file p1 snapshots >out 2>err &&
	grep "^[0-9a-f]\{12\} *ds" out
'

test_done
