#!/bin/bash
test_description='verify --read-data and catalog check read every record of every pack: a damaged snapshot part, journal record or unneeded data record is named with what a rebuild would lose'
. "$(dirname "$0")/../lib.sh"
require_coffer

# Parts of sixteen entries, so that the full's snapshot record is in
# parts beside its data; an incremental builds on it; the first backup and
# an export each leave a journal record (a key use, a bundle).
export COFFER_RECORD_PART_ENTRIES=16
FORGE=$BUILD/tests/forge-record
test -x "$FORGE" && test_set_prereq FORGE

test_expect_success FORGE 'setup: a full in parts, an incremental on it, a bundle' '
	coffer_init_keyfile pristine &&
	mkdir src && for f in $(seq 1 100); do
		echo "file $f" >src/f$f || return 1
	done &&
	coffer -r pristine backup --json ds src >b.json &&
	full=$(json_get b.json "\$j->{snapshot}") &&
	echo more >src/g &&
	coffer -r pristine backup --json --level incremental ds src >b.json &&
	incr=$(json_get b.json "\$j->{snapshot}") &&
	mkdir off && coffer -r pristine export --target off --to off --all &&
	coffer -r pristine verify --read-data &&
	cp -a "$XDG_STATE_HOME/coffer" catalog0 &&
	echo "$full $incr" >sids
'

# fresh: repo as pristine was, with the catalog pristine had (a catalog
# belongs to one place: cp_repo gives repo's place a copy of it).
fresh() {
	rm -rf repo "$XDG_STATE_HOME/coffer" &&
	cp -a catalog0 "$XDG_STATE_HOME/coffer" && cp_repo pristine repo &&
	read -r full incr <sids
}

# records PACK TYPE: "OFFSET ID" of each record of that type in PACK.
records() {
	"$FORGE" index repo "$COFFER_KEY_FILE" "$1" | awk -v t="$2" \
		'$2 == t { print $1, $4 }'
}

# damage PACK OFFSET: flip a byte inside the record's ciphertext.
damage() {
	flip_byte "$(pack_path "$1")" $(($2 + 40))
}

# both_name PATTERN: verify --read-data and catalog check exit 4 and
# print a line matching PATTERN.
both_name() {
	test_expect_code 4 coffer -r repo verify --read-data >out 2>err &&
	cat out err && grep -E -- "$1" out &&
	test_expect_code 4 coffer -r repo catalog check >out 2>err &&
	cat out && grep -E -- "$1" out
}

test_expect_success FORGE 'a damaged part of the full: both name it, the full and the incremental on it' '
	fresh &&
	sqlite3 -separator " " "$(catalog_db)" "SELECT p.pack, lower(hex(p.rid))
		FROM snapshot_part p JOIN snapshot s ON s.id = p.snapshot_id
		WHERE s.sid = '\''$full'\'' AND p.idx = 1" >part &&
	read -r pk rid <part && test -n "$rid" &&
	off=$(records "$pk" 2 | awk -v r="$rid" "\$2 == r { print \$1 }") &&
	test -n "$off" && damage "$pk" "$off" &&
	both_name "pack $pk: snapshot record at offset $off is damaged: a catalog rebuild would lose snapshot ${full:0:12} of .ds., snapshot ${incr:0:12} of .ds.$"
'

test_expect_success FORGE 'damaged journal records: both name them and the bundle and key use they held' '
	fresh &&
	n=0 &&
	for p in $(find repo/packs -type f -printf "%f\n"); do
		for off in $(records "$p" 3 | cut -d" " -f1); do
			damage "$p" "$off" && n=$((n + 1)) || return 1
		done
	done &&
	test "$n" -ge 2 &&
	both_name "journal record at offset [0-9]+ is damaged: a catalog rebuild would lose .*bundle export off #1" &&
	grep "key use key-file:full" out
'

# Nothing needs it (a chunk healed elsewhere, say, until prune): named as
# a warning, and the exit status stays 0.
test_expect_success FORGE 'a damaged data record no snapshot needs: verify --read-data names it' '
	fresh &&
	id=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d " \n") &&
	"$FORGE" repo "$COFFER_KEY_FILE" "$id" 100 >forged &&
	read -r pk off len size <forged &&
	coffer -r repo verify &&
	coffer -r repo verify --read-data >out 2>err &&
	cat out err &&
	grep "pack $pk: data record at offset $off is damaged; no chunk a complete snapshot needs" out &&
	grep "1 damaged record no snapshot needs" out &&
	grep "^warning: .*content does not match its id" err &&
	! grep "^error:" err
'

test_done
