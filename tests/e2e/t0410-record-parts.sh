#!/bin/bash
test_description='snapshot records in parts: rebuilt identically, a missing, damaged or swapped part leaves its snapshot out'
. "$(dirname "$0")/../lib.sh"

# Sixteen entries to a part: a few hundred files make many parts, spread
# over several packs (small packs), as millions of files do with the
# default of 32768.
export COFFER_RECORD_PART_ENTRIES=16
FORGE=$BUILD/tests/forge-record
test -x "$FORGE" && test_set_prereq FORGE

snap() {	# snap DATASET SRC LEVEL: back up, keep the tree as expect/SID
	coffer -r repo backup --json --level "$3" "$1" "$2" >b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") &&
	mkdir -p expect && cp -a "$2" "expect/$sid" &&
	echo "$sid" >>sids
}

listing() {	# listing FILE: "id dataset level parent state files", sorted
	coffer -r repo snapshots --json >"$TEST_LOG/l.json" &&
	json_get "$TEST_LOG/l.json" '
		join("\n", sort map { join(" ", $_->{id}, $_->{dataset},
		    $_->{level}, $_->{parent} // "-", $_->{state},
		    $_->{files}) } @$j)' >"$1"
}

# rows FILE: every complete snapshot's entries, contents and chunk lists
# as the catalog holds them, by name and hash (never by row id).
rows() {
	sqlite3 "$(catalog_db)" "
		SELECT s.sid, hex(p.name), e.kind, e.mode, e.uid, e.gid,
		    e.uname, e.gname, e.size, e.mtime_ns, e.ctime_ns, e.ino,
		    e.dev, e.nlink, e.rdev, hex(e.target), hex(e.xattrs),
		    e.acl, hex(c.hash), c.size, c.nchunks,
		    (SELECT group_concat(hex(ch.cid) || ':' || cc.file_offset
		        || ':' || cc.len, ',')
		     FROM content_chunk cc JOIN chunk ch ON ch.id = cc.chunk_id
		     WHERE cc.content_id = c.id ORDER BY cc.seq)
		FROM entry e JOIN snapshot s ON s.id = e.snapshot_id
		JOIN path p ON p.id = e.path_id
		LEFT JOIN content c ON c.id = e.content_id
		WHERE s.state = 1 ORDER BY s.sid, p.name" >"$1"
}

all_restore() {
	rm -rf out && mkdir out &&
	while read -r sid; do
		coffer -r repo restore "$sid" "out/$sid" &&
		treecmp "expect/$sid" "out/$sid" || return 1
	done <sids
}

packs() { find repo/packs -type f -printf '%f\n' | sort; }
head_pack() {	# head_pack SID: the pack of its record's head
	sqlite3 "$(catalog_db)" "SELECT record_pack FROM snapshot
		WHERE sid = '$1'"
}
rebuild() { rm -rf "$XDG_STATE_HOME/coffer"; }

test_expect_success 'setup: three levels in parts, a small full, two trees of empty files' '
	coffer_init_keyfile repo &&
	mkdir -p a && for d in 1 2 3 4 5 6; do
		mkdir a/d$d &&
		for f in $(seq 1 30); do
			echo "file $d $f" >a/d$d/f$f || return 1
		done
	done &&
	echo same >a/d1/s && echo same >a/d6/s &&
	random_file a/d3/big.bin 1 && ln -s d1/f1 a/link &&
	COFFER_PACK_SIZE=20000 snap ds-a a full &&
	echo changed >a/d2/f7 && rm a/d4/f9 &&
	COFFER_PACK_SIZE=20000 snap ds-a a differential &&
	mkdir a/d7 && echo new >a/d7/n &&
	COFFER_PACK_SIZE=20000 snap ds-a a incremental &&
	mkdir -p old && echo one >old/one && echo two >old/two &&
	snap ds-old old full &&
	mkdir -p x y && for f in $(seq 1 100); do
		: >x/e$f && : >y/e$f || return 1
	done &&
	packs >before-x &&
	COFFER_PACK_SIZE=1 snap ds-x x full && X=$sid && echo $X >X &&
	packs >after-x &&
	COFFER_PACK_SIZE=1 snap ds-y y full && Y=$sid && echo $Y >Y &&
	head_pack $X >x-head && head_pack $Y >y-head &&
	# The packs of the parts of X: one part to a pack.
	comm -13 before-x after-x | grep -v -x -f x-head >x-parts &&
	test_line_count -ge 6 x-parts &&
	listing reference && cat reference && test_line_count = 6 reference &&
	rows reference-rows && test_line_count -gt 400 reference-rows &&
	cp -a "$XDG_STATE_HOME/coffer" state-saved
'

test_expect_success 'verify reads every part and finds them good' '
	coffer -r repo verify --json >v.json &&
	json_check v.json "\$j->{records} >= 6 && \$j->{errors} == 0 &&
	    \$j->{broken_snapshots} == 0"
'

test_expect_success 'rebuilt, every snapshot is as it was: same rows, same restores' '
	rebuild &&
	listing after && test_cmp reference after &&
	rows after-rows && test_cmp reference-rows after-rows &&
	all_restore &&
	coffer -r repo verify >v 2>verr
'

test_expect_success 'a snapshot cut short while imported is imported again' '
	id=$(sqlite3 "$(catalog_db)" "SELECT id FROM snapshot
		WHERE sid = '\''$(cat X)'\''") &&
	sqlite3 "$(catalog_db)" "
		PRAGMA foreign_keys = ON;
		UPDATE snapshot SET state = 0, record_pack = NULL
			WHERE id = $id;
		DELETE FROM entry WHERE snapshot_id = $id
			AND path_id % 2 = 0;
		DELETE FROM pack WHERE name = '\''$(cat x-head)'\''" &&
	# Read straight from the catalog: any command would sync first.
	test "$(sqlite3 "$(catalog_db)" "SELECT state FROM snapshot
	    WHERE id = $id")" = 0 &&
	rm -f "$TEST_LOG/l.json" && coffer -r repo snapshots >/dev/null &&
	listing after && test_cmp reference after &&
	rows after-rows && test_cmp reference-rows after-rows
'

test_expect_success 'a part missing: its snapshot is reported and left out, the others stay' '
	rebuild && cp -a repo repo-saved &&
	p=$(sed -n 3p x-parts) && rm -f repo/packs/${p:0:2}/$p &&
	test_expect_code 4 coffer -r repo snapshots >out.txt 2>err;
	rc=$?; cat out.txt err; test $rc = 0 &&
	grep "snapshot $(cat X): its part .* is missing or damaged" err &&
	grep "snapshot $(cat X) is left out" err &&
	listing after && grep -v ds-x reference >expect-nox &&
	test_cmp expect-nox after &&
	! sqlite3 "$(catalog_db)" "SELECT sid FROM snapshot" | grep $(cat X) &&
	rm -rf "$XDG_STATE_HOME/coffer" && cp -a state-saved \
		"$XDG_STATE_HOME/coffer" &&
	test_expect_code 4 coffer -r repo verify >v 2>verr;
	rc=$?; cat v verr; test $rc = 0 &&
	grep "snapshot $(cat X) of .ds-x.: its signed record has a part" verr &&
	rm -rf repo && mv repo-saved repo
'

test_expect_success 'a part damaged: the same' '
	rebuild && cp -a repo repo-saved &&
	p=$(sed -n 2p x-parts) && f=repo/packs/${p:0:2}/$p &&
	flip_byte "$f" $(( $(stat -c %s "$f") / 3 )) &&
	test_expect_code 4 coffer -r repo snapshots >out.txt 2>err;
	rc=$?; cat out.txt err; test $rc = 0 &&
	grep "snapshot $(cat X) is left out" err &&
	listing after && test_cmp expect-nox after &&
	rm -rf repo && mv repo-saved repo
'

test_expect_success FORGE 'a head signed again, unchanged: its snapshot rebuilds (control)' '
	rebuild && cp -a repo repo-saved &&
	"$FORGE" swap-part repo "$COFFER_KEY_FILE" $(cat x-head) \
		$(cat x-head) 1 >forged &&
	test_line_count = 1 forged &&
	h=$(cat x-head) && rm -f repo/packs/${h:0:2}/$h &&
	coffer -r repo snapshots >out.txt 2>err &&
	listing after && test_cmp reference after &&
	rm -rf repo && mv repo-saved repo
'

test_expect_success FORGE 'a signed head naming a part of another snapshot: left out' '
	rebuild && cp -a repo repo-saved &&
	"$FORGE" swap-part repo "$COFFER_KEY_FILE" $(cat x-head) \
		$(cat y-head) 1 >forged &&
	h=$(cat x-head) && rm -f repo/packs/${h:0:2}/$h &&
	test_expect_code 4 coffer -r repo snapshots >out.txt 2>err;
	rc=$?; cat out.txt err; test $rc = 0 &&
	grep "snapshot $(cat X): its part 1 is another record (of snapshot $(cat Y), part 1)" err &&
	listing after && test_cmp expect-nox after &&
	rows after-rows && grep -v "^$(cat X)|" reference-rows >expect-rows &&
	test_cmp expect-rows after-rows &&
	rm -rf repo && mv repo-saved repo
'

# zrows SID FILE: the rows of one snapshot, without its id.
zrows() { grep "^$1|" "$2" | cut -d"|" -f2-; }
# hexname PATH: PATH as hex(path) prints it in the rows above.
hexname() { perl -e 'print uc unpack "H*", $ARGV[0]' "$1"; }
# zsnap DATASET SRC: a full, verbose (v.err), its id in $sid.
zsnap() {
	coffer -v -r repo backup --json --level full "$1" "$2" >b.json \
		2>v.err && sid=$(json_get b.json "\$j->{snapshot}")
}

test_expect_success 'a full record built from its spooled rows holds what the catalog holds' '
	mkdir -p z/sub z/deep/er && for f in $(seq 1 40); do
		echo "z $f" >z/sub/f$f || return 1
	done &&
	: >z/empty && echo same >z/deep/s1 && echo same >z/deep/er/s2 &&
	random_file z/deep/multi.bin 3 && ln -s sub/f1 z/link &&
	ln -s "" z/deep/dangling 2>/dev/null;
	mkfifo z/fifo && chmod 640 z/sub/f2 &&
	if setfattr -n user.coffer -v spooled z/sub/f3 2>/dev/null; then
		setfattr -n user.dir -v 1 z/deep
	fi &&
	zsnap ds-z1 z && grep "record: built from the rows spooled" v.err &&
	echo $sid >Z1 &&
	# Further names of a file are spooled with their content read back
	# from the catalog: 41 names in links/ (parts of 16 entries: most in
	# another part than their first), one of a file of many chunks.
	cp -a z zl && ln zl/sub/f4 zl/hard && mkdir zl/links &&
	for f in $(seq 1 40); do
		ln zl/sub/f$f zl/links/f$f || return 1
	done &&
	ln zl/deep/multi.bin zl/links/multi.bin &&
	zsnap ds-zl1 zl && grep "record: built from the rows spooled" v.err &&
	echo $sid >ZL1 &&
	# The rows the runs wrote, then the rows their records give back.
	rows z-written &&
	zrows $(cat Z1) z-written >z-w && zrows $(cat ZL1) z-written >zl-w &&
	rebuild && coffer -r repo snapshots >/dev/null &&
	rows z-rows &&
	zrows $(cat Z1) z-rows >z1 && zrows $(cat ZL1) z-rows >zl1 &&
	test_line_count -gt 45 z1 && test_cmp z-w z1 &&
	grep -q "|3|" z1 &&
	test_line_count -gt 85 zl1 && test_cmp zl-w zl1 &&
	test $(grep -c "^$(hexname links/multi.bin)|" zl1) = 1 &&
	rm -rf outz && coffer -r repo restore $(cat Z1) outz &&
	treecmp z outz &&
	rm -rf outz && coffer -r repo restore $(cat ZL1) outz &&
	treecmp zl outz
'

# Each part holds every content it names, with all of that content's
# chunks, whatever part holds the file's first name: the import takes
# parts in any order.
test_expect_success FORGE 'a spooled part holds the chunks of the further names of a file' '
	mkdir zl-parts &&
	"$FORGE" parts repo "$COFFER_KEY_FILE" $(head_pack $(cat ZL1)) \
		zl-parts &&
	ls zl-parts/part-*.db >parts && test_line_count -gt 4 parts &&
	for db in zl-parts/*.db; do
		bad=$(sqlite3 "$db" "SELECT count(*) FROM content c
			WHERE c.nchunks != (SELECT count(*) FROM content_chunk cc
			    WHERE cc.content = c.hash)") &&
		lost=$(sqlite3 "$db" "SELECT count(*) FROM entry e
			WHERE e.content IS NOT NULL AND NOT EXISTS
			(SELECT 1 FROM content c WHERE c.hash = e.content)") &&
		test "$bad $lost" = "0 0" || { echo "$db: $bad $lost"; return 1; }
	done &&
	# A content in several parts is the same in each.
	for db in zl-parts/*.db; do
		sqlite3 "$db" "SELECT hex(c.hash), c.size, c.nchunks,
			(SELECT group_concat(x, \",\") FROM
			    (SELECT hex(cid) || \":\" || file_offset || \":\" ||
			    len AS x FROM content_chunk cc
			    WHERE cc.content = c.hash ORDER BY seq))
			FROM content c" || return 1
	done | sort -u >contents &&
	cut -d"|" -f1 contents | uniq -d >twice &&
	test_line_count = 0 twice &&
	for db in zl-parts/*.db; do
		sqlite3 "$db" "SELECT hex(path) FROM entry" || return 1
	done >names && grep -qx "$(hexname links/multi.bin)" names
'

test_expect_success 'a part that outgrows the room it is first given is built again, the same' '
	mkdir -p big && for f in $(seq 1 300); do
		echo "b $f" >big/a-file-with-a-long-name-$f || return 1
	done &&
	COFFER_RECORD_PART_ENTRIES=100 zsnap ds-b1 big &&
	grep "record: built from the rows spooled" v.err && echo $sid >B1 &&
	COFFER_RECORD_PART_ENTRIES=100 COFFER_RECORD_IMAGE_BYTES=512 \
		zsnap ds-b2 big &&
	grep "record: built from the rows spooled" v.err && echo $sid >B2 &&
	rebuild && coffer -r repo snapshots >/dev/null &&
	rows b-rows &&
	zrows $(cat B1) b-rows >b1 && zrows $(cat B2) b-rows >b2 &&
	test_line_count = 301 b1 && test_cmp b1 b2 &&
	rm -rf outb && coffer -r repo restore $(cat B2) outb &&
	treecmp big outb
'

test_done
