#!/bin/bash
test_description='dump: a snapshot as a tar stream that tar extracts as restore would, or one file raw'
. "$(dirname "$0")/../lib.sh"

[ -x /usr/bin/time ] && test_set_prereq TIME
command -v bsdtar >/dev/null && test_set_prereq BSDTAR

# GNU tar as a user would run it to get everything back.
untar() {
	mkdir -p "$1" &&
	tar -x -p --same-owner --xattrs --xattrs-include='*' --acls \
		--numeric-owner -C "$1"
}

test_expect_success 'setup: the hostile tree, small, backed up' '
	mktree src --small &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds "$TMP/src" >b.json &&
	id=$(json_get b.json "\$j->{snapshot}")
'

test_expect_success 'dump | tar -x: the tree, metadata included' '
	coffer -r repo dump ds@latest >all.tar 2>err &&
	test_must_be_empty err &&
	untar out <all.tar &&
	treecmp --root src out
'

# bsdtar leaves the directory it extracts into as it was (the root's
# metadata is GNU tar's and restore's to set), and converts names from
# UTF-8 only in a UTF-8 locale.
test_expect_success BSDTAR 'dump | bsdtar -x -p: the tree, metadata included' '
	mkdir out-bsd &&
	LC_ALL=C.UTF-8 bsdtar -x -p --numeric-owner -C out-bsd -f all.tar &&
	treecmp src out-bsd
'

test_expect_success 'the stream is pax, with nanoseconds and xattrs' '
	tar -t -v --full-time -f all.tar >list &&
	grep "big/mixed.bin" list &&
	grep -a "mtime=[0-9]*\.[0-9]" all.tar >/dev/null &&
	if getfattr -d src/xattr 2>/dev/null | grep -q user.; then
		grep -a "SCHILY.xattr.user.dir=on-a-directory" all.tar >/dev/null
	fi &&
	if getfacl -c src/xattr/acl 2>/dev/null | grep -q "user:1234"; then
		grep -a "SCHILY.acl.access=.*user:[a-z0-9]*:r--:1234" all.tar
	fi
'

test_expect_success 'hardlinks are hardlink entries, their data written once' '
	tar -t -v -f all.tar >list &&
	grep " link to " list &&
	test "$(stat -c %i out/hard/pair1)" = "$(stat -c %i out/hard/pair2)"
'

test_expect_success 'a sparse file keeps its holes' '
	sparse=sparse/holes &&
	cmp "src/$sparse" "out/$sparse" &&
	test "$(stat -c %b "out/$sparse")" -le \
		$(( $(stat -c %b "src/$sparse") + 128 ))
'

test_expect_success 'a path subset: only what is below, by id prefix' '
	prefix=$(echo "$id" | cut -c1-8) &&
	coffer -r repo dump -o sub.tar "$prefix" hard names/données &&
	tar -t -f sub.tar | LC_ALL=C sort >actual &&
	cat actual &&
	! grep -v -e "^hard" -e "^names/donn" actual &&
	untar sub <sub.tar &&
	treecmp src/hard sub/hard &&
	treecmp src/names/données sub/names/données &&
	test "$(stat -c %a sub.tar)" = 600
'

test_expect_success 'a path not in the snapshot: status 2, -o file removed' '
	test_expect_code 2 coffer -r repo dump -o none.tar ds@latest nosuch 2>err &&
	cat err &&
	grep -F "nosuch" err &&
	test_path_is_missing none.tar
'

test_expect_success '-o refuses a file that exists' '
	echo mine >exists.tar &&
	test_expect_code 2 coffer -r repo dump -o exists.tar ds@latest 2>err &&
	cat err &&
	test "$(cat exists.tar)" = mine
'

test_expect_success 'a single regular file is written raw' '
	coffer -r repo dump ds@latest big/mixed.bin >raw.bin &&
	cmp src/big/mixed.bin raw.bin
'

test_expect_success 'a single file with --tar is a one-member archive' '
	coffer -r repo dump --tar ds@latest big/mixed.bin >one.tar &&
	test "$(tar -t -f one.tar)" = big/mixed.bin &&
	untar one <one.tar &&
	cmp src/big/mixed.bin one/big/mixed.bin
'

test_expect_success 'a single directory is an archive' '
	coffer -r repo dump ds@latest empty >dir.tar &&
	tar -t -f dir.tar | grep "^empty/a/b/c/d/$"
'

test_expect_success 'a sparse file raw: holes as zeros' '
	coffer -r repo dump ds@latest "$sparse" >sparse.raw &&
	cmp "src/$sparse" sparse.raw
'

test_expect_success 'an incremental dumps its resolved chain' '
	echo changed >src/big/neighbour.txt &&
	rm -rf src/empty/other &&
	coffer -r repo backup --level incremental ds "$TMP/src" &&
	coffer -r repo dump ds@latest >incr.tar &&
	untar incr <incr.tar &&
	treecmp --root src incr
'

test_expect_success 'standard output a terminal: refused' '
	if command -v script >/dev/null; then
		test_expect_code 2 script -qec \
			"$COFFER -r repo dump ds@latest" /dev/null >tty.out;
		cat tty.out &&
		grep "terminal" tty.out
	fi
'

# dump reads a file's chunk list 4,096 at a time: 5,000 data blocks
# between holes are 5,000 chunks, and as many regions of its sparse map.
test_expect_success 'a file of more chunks than a page of the catalog' '
	mkdir -p pages &&
	python3 -c "
import os
with open(\"pages/sp\", \"wb\") as f:
    for i in range(5000):
        f.seek(i * 8192)
        f.write(os.urandom(4096))
    f.truncate(5000 * 8192)
" &&
	coffer -r repo backup pages "$TMP/pages" &&
	test "$(sqlite3 "$(catalog_db)" "SELECT count(*) FROM content_chunk cc
		JOIN content c ON c.id = cc.content_id
		WHERE c.size = 40960000")" -gt 4096 &&
	coffer -r repo dump pages@latest >pages.tar &&
	untar out-pages <pages.tar &&
	treecmp pages out-pages &&
	coffer -r repo dump pages@latest sp >sp.raw &&
	cmp pages/sp sp.raw &&
	truncate -s 1G pages/allhole &&
	coffer -r repo backup pages "$TMP/pages" &&
	coffer -r repo dump --tar pages@latest allhole >allhole.tar &&
	test "$(stat -c %s allhole.tar)" -lt 65536 &&
	untar out-hole <allhole.tar &&
	cmp pages/allhole out-hole/allhole
'

# Against a dump of a 1 MiB file by the same binary, so that a build
# with sanitizers has its own baseline: at most 32 MiB more for 64.
test_expect_success TIME 'memory does not grow with the size of a file' '
	mkdir -p huge small &&
	random_file huge/big.bin 64 &&
	random_file small/one.bin 1 &&
	coffer -r repo backup huge "$TMP/huge" &&
	coffer -r repo backup small "$TMP/small" &&
	/usr/bin/time -f %M -o rss.base "$COFFER" -r repo dump small@latest \
		>small.tar &&
	/usr/bin/time -f %M -o rss.raw "$COFFER" -r repo dump huge@latest \
		big.bin >big.raw &&
	/usr/bin/time -f %M -o rss.tar "$COFFER" -r repo dump huge@latest \
		>big.tar &&
	cmp huge/big.bin big.raw &&
	base=$(tail -n 1 rss.base) &&
	cat rss.base rss.raw rss.tar &&
	test "$(tail -n 1 rss.raw)" -lt $((base + 32768)) &&
	test "$(tail -n 1 rss.tar)" -lt $((base + 32768)) &&
	rm -f big.raw big.tar small.tar
'

test_expect_success 'setup: a large file spread over chunks, a small one' '
	mkdir -p dmg/d &&
	random_file dmg/d/large.bin 12 &&
	echo small >dmg/d/small.txt &&
	coffer -r repo backup dmg "$TMP/dmg" &&
	cp_repo repo pristine
'

test_expect_success 'a damaged chunk: the file named, status 4, the stream cut' '
	loc=$(chunk_loc d/large.bin 1) &&
	set -- $loc &&
	flip_byte "$(pack_path "$1")" $(( $2 + $3 / 2 )) &&
	test_expect_code 4 coffer -r repo dump dmg@latest >cut.tar 2>err &&
	cat err &&
	grep -F "d/large.bin" err &&
	test_must_fail tar -t -f cut.tar >/dev/null 2>tar.err &&
	cat tar.err
'

test_expect_success 'raw: the same damage fails the same way' '
	test_expect_code 4 coffer -r repo dump dmg@latest d/large.bin \
		>cut.bin 2>err &&
	grep -F "d/large.bin" err &&
	test "$(stat -c %s cut.bin)" -lt $((12 * 1048576))
'

test_expect_success 'with -o, the file of a damaged dump is removed' '
	test_expect_code 4 coffer -r repo dump -o cut2.tar dmg@latest 2>err &&
	test_path_is_missing cut2.tar
'

test_expect_success 'what is undamaged still dumps' '
	coffer -r repo dump dmg@latest d/small.txt >small.txt &&
	cmp dmg/d/small.txt small.txt
'

test_done
