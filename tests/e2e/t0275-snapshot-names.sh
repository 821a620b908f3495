#!/bin/bash
test_description='snapshot names: id prefixes, DATASET@latest, DATASET@full, DATASET@TIME'
. "$(dirname "$0")/../lib.sh"

# Three snapshots of one dataset, taken (--time) on three days; each
# holds a different v, so a restore says which one a name chose.
test_expect_success 'setup: snapshots on 2026-11-01, 11-03 (a full) and 11-05 (--time with an offset)' '
	mkdir src && coffer_init_keyfile repo &&
	echo one >src/v &&
	coffer -r repo backup --time 2026-11-01T02:00:00Z ds "$TMP/src" &&
	echo two >src/v &&
	coffer -r repo backup --level full --time 2026-11-03T02:00:00Z ds "$TMP/src" &&
	echo three >src/v &&
	coffer -r repo backup --time 2026-11-05T03:00:00+01:00 ds "$TMP/src"
'

picks() {
	rm -rf out && coffer -r repo restore "$1" out && test "$(cat out/v)" = "$2"
}

test_expect_success 'DATASET@TIME: the newest complete snapshot at or before TIME' '
	picks ds@2026-11-03T02:00:00Z two &&
	picks ds@2026-11-04T23:00:00Z two &&
	picks ds@2026-11-05T02:00:00Z three &&
	picks ds@2027-01-01T00:00:00Z three &&
	picks ds@2026-11-02T00:00Z one
'

test_expect_success 'an offset and a date alone (by the end of that day)' '
	picks ds@2026-11-03T03:30:00+01:00 two &&
	picks ds@2026-11-03T02:59:59+01:00 one &&
	picks ds@2026-11-01 one &&
	picks ds@2026-11-03 two &&
	picks ds@2026-11-04 two
'

test_expect_success 'before the first snapshot, or not a time: no snapshot, status 2' '
	test_expect_code 2 coffer -r repo restore ds@2026-10-31T23:59:59Z out 2>err &&
	grep "no snapshot" err &&
	test_expect_code 2 coffer -r repo restore ds@yesterday out 2>err &&
	grep "DATASET@TIME" err
'

test_expect_success 'every command that takes a snapshot takes the name' '
	coffer -r repo ls ds@2026-11-04 >ls.out && grep "^v\$\|/v\$\| v\$" ls.out &&
	coffer -r repo diff ds@2026-11-01 ds@2026-11-05 >diff.out && test -s diff.out &&
	coffer -r repo drill ds@2026-11-04 >/dev/null &&
	coffer -r repo audit ds ds@2026-11-05 >/dev/null
'

test_expect_success 'DATASET@latest and DATASET@full still work' '
	picks ds@latest three && picks ds@full two
'

test_done
