#!/bin/bash
test_description='the catalog is a cache of the repository: lost, damaged or behind, it is rebuilt'
. "$(dirname "$0")/../lib.sh"

# Two datasets, each with a full, a differential and two incrementals;
# the tree of every snapshot is kept in expect/SID to compare restores.
# The snapshot listing of the original host (the catalog that wrote them)
# is the reference for every rebuilt one.

snap() {	# snap DATASET SRC LEVEL: back up, keep the tree as expect/SID
	coffer -r repo backup --json --level "$3" "$1" "$2" >b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") &&
	mkdir -p expect && cp -a "$2" "expect/$sid" &&
	echo "$sid" >>sids
}

# listing FILE: the snapshots as "id dataset level parent state files",
# sorted, from snapshots --json.
listing() {
	coffer -r repo snapshots --json >"$TEST_LOG/l.json" &&
	json_get "$TEST_LOG/l.json" '
		join("\n", sort map { join(" ", $_->{id}, $_->{dataset},
		    $_->{level}, $_->{parent} // "-", $_->{state},
		    $_->{files}) } @$j)' >"$1"
}

# all_restore: every snapshot restores identical to its tree.
all_restore() {
	rm -rf out && mkdir out &&
	while read -r sid; do
		coffer -r repo restore "$sid" "out/$sid" &&
		treecmp "expect/$sid" "out/$sid" || return 1
	done <sids
}

CATDIR=

test_expect_success 'setup: two datasets, every level' '
	coffer_init_keyfile repo &&
	mktree a --small && mkdir b && random_file b/weights.bin 2 &&
	printf "config\n" >b/config.json &&
	snap ds-a a full &&
	printf "more\n" >a/added.txt && snap ds-a a differential &&
	rm -f a/added.txt && printf "x\n" >a/inc1 && snap ds-a a incremental &&
	printf "y\n" >a/inc2 && snap ds-a a incremental &&
	snap ds-b b full &&
	random_file b/step2.bin 1 && snap ds-b b differential &&
	printf "z\n" >>b/config.json && snap ds-b b incremental &&
	rm b/step2.bin && snap ds-b b incremental &&
	test_line_count = 8 sids &&
	listing reference &&
	cat reference &&
	test_line_count = 8 reference &&
	CATDIR=$(dirname "$(find "$XDG_STATE_HOME/coffer" -name catalog.db)") &&
	test -d "$CATDIR" &&
	cp -a "$CATDIR" catalog-old
'

test_expect_success 'the catalog lost: every snapshot is listed again' '
	rm -rf "$XDG_STATE_HOME/coffer" &&
	listing after &&
	test_cmp reference after
'

test_expect_success 'and every snapshot restores identically' '
	all_restore
'

test_expect_success 'drill results and interrupted runs outlive the catalog' '
	coffer -r repo drill --no-write ds-a@latest >/dev/null &&
	coffer -r repo drill history --json >h1.json &&
	json_check h1.json "@\$j == 1" &&
	mkdir big && for i in 1 2 3 4; do random_file big/s$i 50 || return 1; done &&
	{ "$COFFER" -r repo backup ds-big big >/dev/null 2>&1 & } && pid=$! &&
	n=0 &&
	while kill -0 $pid 2>/dev/null &&
	    test "$(find repo/tmp -type f | wc -l)" = 0 && test $n -lt 1000; do
		sleep 0.02; n=$((n + 1))
	done &&
	kill -9 $pid && { wait $pid; test $? = 137; } &&
	printf "after the crash\n" >b/after && snap ds-b b incremental &&
	coffer -r repo snapshots --json >s1.json &&
	json_check s1.json "grep({ \$_->{state} eq q(failed) &&
		\$_->{dataset} eq q(ds-big) } @\$j) == 1" &&
	rm -rf "$XDG_STATE_HOME/coffer" &&
	coffer -r repo drill history --json >h2.json &&
	test_cmp h1.json h2.json &&
	coffer -r repo snapshots --json >s2.json &&
	json_check s2.json "grep({ \$_->{state} eq q(failed) &&
		\$_->{dataset} eq q(ds-big) } @\$j) == 1" &&
	listing reference && test_line_count = 10 reference
'

test_expect_success 'a new host (another state directory) sees them all' '
	XDG_STATE_HOME=$TMP/host2 listing host2.list &&
	test_cmp reference host2.list &&
	XDG_STATE_HOME=$TMP/host2 coffer -r repo snapshots --json >h2.json &&
	json_check h2.json "!grep { \$_->{state} eq q(complete) &&
		\$_->{bytes_new} > 0 && !(\$_->{bytes_stored} > 0) } @\$j" &&
	XDG_STATE_HOME=$TMP/host2 coffer -r repo restore ds-b@latest out-h2 &&
	treecmp "expect/$(tail -1 sids)" out-h2
'

for damage in truncated zeroed junk; do
	test_expect_success "a catalog $damage: moved aside, rebuilt" '
		rm -rf "$CATDIR" && cp -a catalog-old "$CATDIR" &&
		rm -f "$CATDIR"/catalog.db-wal "$CATDIR"/catalog.db-shm &&
		case '$damage' in
		truncated) truncate -s 1000 "$CATDIR/catalog.db" ;;
		zeroed) size=$(stat -c %s "$CATDIR/catalog.db") &&
			head -c "$size" /dev/zero >"$CATDIR/catalog.db" ;;
		junk) printf "not a database at all\n" >"$CATDIR/catalog.db" ;;
		esac &&
		coffer -r repo snapshots --json >s.json 2>err &&
		cat err &&
		grep "^warning: .*moved aside" err && ! grep "^error:" err &&
		ls "$CATDIR"/catalog.db.damaged-* &&
		listing after &&
		test_cmp reference after
	'
done

# A catalog of another format (a development build's 11, an earlier
# coffer's, a later coffer's) is a cache like any: moved aside, rebuilt,
# one warning.
cur=$(sqlite3 "$TMP/catalog-old/catalog.db" "PRAGMA user_version")
for v in 11 $((cur - 1)) $((cur + 1)); do
	test_expect_success "a catalog of format $v: moved aside with one warning, rebuilt" '
		rm -rf "$CATDIR" && cp -a catalog-old "$CATDIR" &&
		sqlite3 "$CATDIR/catalog.db" "PRAGMA user_version = '$v'" &&
		coffer -r repo snapshots --json >s.json 2>err &&
		cat err &&
		test_line_count = 1 err &&
		grep "^warning: catalog .* has format '$v', not this coffer.s '$cur': moved aside to .*/catalog.db.v'$v'-.* and rebuilt from the repository" err &&
		ls "$CATDIR"/catalog.db.v'$v'-* &&
		listing after &&
		test_cmp reference after
	'
done

test_expect_success 'an older copy of the catalog catches up' '
	rm -rf "$XDG_STATE_HOME/coffer" && listing /dev/null &&
	cp -a "$CATDIR" catalog-2 &&
	printf "later\n" >a/later && snap ds-a a incremental &&
	listing reference2 &&
	test_line_count = 11 reference2 &&
	rm -rf "$CATDIR" && cp -a catalog-2 "$CATDIR" &&
	listing after &&
	test_cmp reference2 after &&
	all_restore
'

test_expect_success 'two hosts, one repository: each sees the other, no data twice' '
	H1=$TMP/h1 && H2=$TMP/h2 &&
	mkdir c && random_file c/shared.bin 3 &&
	XDG_STATE_HOME=$H1 coffer -r repo backup --json ds-c c >h1.json &&
	cp -a c c-copy &&
	XDG_STATE_HOME=$H2 coffer -r repo backup --json ds-c2 c-copy >h2.json &&
	json_check h1.json "\$j->{bytes_new} >= 3 * 1048576" &&
	json_check h2.json "\$j->{bytes_new} == 0" &&
	XDG_STATE_HOME=$H1 coffer -r repo snapshots --json >l1.json &&
	XDG_STATE_HOME=$H2 coffer -r repo snapshots --json >l2.json &&
	json_check l1.json "grep({ \$_->{dataset} eq q(ds-c2) } @\$j) == 1" &&
	json_check l2.json "grep({ \$_->{dataset} eq q(ds-c) } @\$j) == 1" &&
	XDG_STATE_HOME=$H1 coffer -r repo restore ds-c2@latest out-c2 &&
	treecmp c out-c2
'

test_expect_success 'kill -9 during rebuilds: the next command ends complete' '
	for delay in 0.01 0.03 0.05 0.1 0.2; do
		rm -rf "$XDG_STATE_HOME/coffer" &&
		{ "$COFFER" -r repo snapshots >/dev/null 2>&1 & pid=$!; } &&
		sleep $delay && kill -9 $pid 2>/dev/null; wait $pid;
		listing after &&
		test_cmp reference2 <(grep -v -e ds-c -e ds-c2 after) || return 1
	done
'

test_expect_success 'a rebuild reads indexes and records, not data' '
	rm -rf "$XDG_STATE_HOME/coffer" &&
	coffer -v -r repo snapshots >/dev/null 2>err &&
	cat err &&
	grep "snapshots added from the repository" err
'

test_expect_success 'catalog rebuild: a new catalog, the old kept, drill history carried' '
	coffer -r repo drill --no-write ds-a@latest >/dev/null &&
	coffer -r repo drill history --json >h-before.json &&
	json_check h-before.json "@\$j >= 1" &&
	coffer -r repo catalog rebuild --json >rb.json &&
	cat rb.json &&
	json_check rb.json "\$j->{action} eq q(rebuilt) &&
		\$j->{snapshots_added} >= 9 && \$j->{records_bad} == 0" &&
	prev=$(json_get rb.json "\$j->{previous}") &&
	test -f "$prev" &&
	coffer -r repo drill history --json >h-after.json &&
	test_cmp h-before.json h-after.json &&
	listing after &&
	grep -v -e ds-c after >after.main &&
	test_cmp reference2 after.main
'

test_expect_success 'catalog check: consistent, exit 0' '
	coffer -r repo catalog check >chk &&
	cat chk &&
	grep "verified .*: no errors" chk
'

test_expect_success 'a pack lost: catalog check and verify name the snapshots, exit 4' '
	cp -a repo repo-saved &&
	sid=$(sed -n 5p sids) &&
	pk=$(largest_pack repo) &&
	rm "$pk" &&
	test_expect_code 4 coffer -r repo catalog check >chk 2>err &&
	cat chk err &&
	grep "missing from the repository" chk &&
	grep "break" chk &&
	test_expect_code 4 coffer -r repo verify >v 2>verr &&
	cat v verr &&
	grep "break" v &&
	rm -rf repo && mv repo-saved repo
'

test_expect_success 'snapshots never lists an empty table over lost records' '
	rm -rf "$XDG_STATE_HOME/coffer" &&
	cp -a repo repo-saved &&
	for p in $(find repo/packs -type f); do
		flip_byte "$p" $(( $(stat -c %s "$p") - 20 )) || return 1
	done &&
	test_expect_code 4 coffer -r repo snapshots >out.txt 2>err;
	rc=$?; cat out.txt err;
	rm -rf repo && mv repo-saved repo && test $rc = 0 &&
	grep -E "index|failed authentication" err
'

test_done
