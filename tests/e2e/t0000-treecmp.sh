#!/bin/bash
test_description='the test tools: lib.sh, mktree.sh and treecmp catch what they must'
TEST_NO_COFFER=1
. "$(dirname "$0")/../lib.sh"

# What this file system and user allow, probed the way mktree.sh makes its
# xattrs, ACLs and device nodes: where they work, mktree must have made
# them and treecmp must see them change.
: >probe
if setfattr -n user.probe -v 1 probe 2>/dev/null; then
	test_set_prereq XATTR
fi
if command -v setfacl >/dev/null && setfacl -m u:1234:r probe 2>/dev/null; then
	test_set_prereq ACL
fi
if test_have_prereq ROOT && mknod probe-dev c 1 3 2>/dev/null; then
	test_set_prereq DEVICES
fi
rm -f probe probe-dev

# A fresh copy of src as cmp/, for one tampering test.
fresh() {
	rm -rf cmp && cp -a src cmp
}

# treecmp src cmp must say "different" (status 1) with a line matching $1.
differs() {
	test_expect_code 1 treecmp src cmp >out &&
	cat out &&
	grep -e "$1" out
}

test_expect_success 'lib.sh: private HOME and state, no outside COFFER_*' '
	case $HOME in "$TMP"/*) ;; *) false ;; esac &&
	case $XDG_STATE_HOME in "$TMP"/*) ;; *) false ;; esac &&
	test -z "${COFFER_REPO}${COFFER_KEY_FILE}${COFFER_PASSPHRASE}${COFFER_CATALOG}" &&
	test "$(pwd -P)" = "$TMP"
'

test_expect_success 'lib.sh: test_must_fail and test_expect_code' '
	test_must_fail false &&
	test_must_fail sh -c "exit 5" &&
	! test_must_fail true 2>/dev/null &&
	! test_must_fail sh -c "kill -9 \$\$" 2>/dev/null &&
	! test_must_fail no-such-command-xyz 2>/dev/null &&
	test_expect_code 3 sh -c "exit 3" &&
	! test_expect_code 3 sh -c "exit 4" 2>/dev/null
'

test_expect_success 'lib.sh: a failing test says not ok, shows its output, fails the script' '
	mkdir -p self/e2e &&
	cp "$TOP/tests/lib.sh" self/lib.sh &&
	cat >self/e2e/t.sh <<-\EOF &&
	TEST_NO_COFFER=1
	. "$(dirname "$0")/../lib.sh"
	test_expect_success "passes" "true"
	test_expect_success "fails" "echo some output && false"
	test_expect_failure "known" "false"
	test_expect_success NOSUCHPREREQ "skipped" "false"
	test_done
	EOF
	test_expect_code 1 env TMPDIR="$TMP" bash self/e2e/t.sh >self/out &&
	cat self/out &&
	grep "^ok 1 - passes$" self/out &&
	grep "^not ok 2 - fails$" self/out &&
	grep "^# some output$" self/out &&
	grep "^not ok 3 - known # TODO known breakage$" self/out &&
	grep "^ok 4 # skip skipped (missing NOSUCHPREREQ)$" self/out &&
	grep "^1\.\.4$" self/out
'

test_expect_success 'lib.sh: test_cmp, json_check, flip_byte' '
	printf "a\nb\n" >x && printf "a\nb\n" >y && test_cmp x y &&
	printf "a\nc\n" >y && ! test_cmp x y >/dev/null &&
	echo "[{\"id\":\"ab\",\"n\":3,\"p\":null}]" >j.json &&
	json_check j.json "\$j->[0]{n} == 3 && !defined \$j->[0]{p}" &&
	! json_check j.json "\$j->[0]{n} == 4" 2>/dev/null &&
	test "$(json_get j.json "\$j->[0]{id}")" = ab &&
	printf "abc" >f && flip_byte f 1 && test "$(xxd -p f)" = 619d63
'

test_expect_success 'mktree --small builds the hostile tree' '
	mktree src --small 2>warnings &&
	cat warnings &&
	test_path_is_file src/big/mixed.bin &&
	test "$(stat -c %s src/big/mixed.bin)" = 20971520 &&
	test -h src/links/dangling && ! test -e src/links/dangling &&
	test "$(readlink src/links/absolute)" = /etc/hostname &&
	test "$(stat -c %h src/hard/triple1)" = 3 &&
	test "$(stat -c %a src/modes/m4755)" = 4755 &&
	test "$(stat -c %a src/modes/sticky)" = 1777 &&
	test "$(stat -c %a src/modes/m0000)" = 0 &&
	test -p src/special/fifo &&
	test_path_is_dir src/empty/a/b/c/d &&
	test_path_is_file "src/names/new
line" &&
	test_path_is_file "src/names/données/résumé.txt" &&
	test_path_is_file src/names/-rf &&
	test "$(stat -c %y src/big/mixed.bin)" = "2020-01-02 03:04:05.123456789 +0000" &&
	test "$(stat -c %s src/sparse/holes)" = 104857600 &&
	test "$(stat -c %b src/sparse/holes)" -lt 1024 &&
	test ! -e src/many
'

test_expect_success 'treecmp: a cp -a copy is identical, silently' '
	cp -a src copy &&
	treecmp src copy >out &&
	! test -s out
'

test_expect_success 'treecmp: a tree equals itself (root options too)' '
	treecmp --root --no-atime src src &&
	treecmp --ignore-root --symlink-times src src
'

test_expect_success 'treecmp: mode change' '
	fresh && chmod 0755 cmp/modes/m4755 &&
	differs "^mode differs: modes/m4755: 4755 vs 0755$"
'

test_expect_success 'treecmp: sticky bit lost on a directory' '
	fresh && chmod 0777 cmp/modes/sticky && touch -r src/modes/sticky cmp/modes/sticky &&
	differs "^mode differs: modes/sticky: 1777 vs 0777$"
'

test_expect_success 'treecmp: mtime change, to the nanosecond' '
	fresh && touch -d "2020-01-02 03:04:05.123456788" cmp/big/mixed.bin &&
	differs "^mtime differs: big/mixed.bin: 1577934245.123456789 vs 1577934245.123456788$"
'

test_expect_success 'treecmp: directory mtime, but not the root by default' '
	fresh && touch cmp/empty/a/b/c/d cmp &&
	differs "^mtime differs: empty/a/b/c/d:" &&
	! grep "differs: \.:" out &&
	fresh && touch cmp &&
	treecmp src cmp &&
	test_expect_code 1 treecmp --root src cmp >out &&
	grep "^mtime differs: \.:" out
'

test_expect_success 'treecmp: content change with the same size and mtime' '
	fresh && flip_byte cmp/big/mixed.bin 10000000 &&
	touch -r src/big/mixed.bin cmp/big/mixed.bin &&
	differs "^content differs: big/mixed.bin: first at byte 10000000$"
'

test_expect_success 'treecmp: size change' '
	fresh && echo more >>cmp/empty/zero && touch -r src/empty/zero cmp/empty/zero &&
	differs "^size differs: empty/zero: 0 vs 5$"
'

test_expect_success XATTR 'treecmp: xattr value changed, added, removed' '
	fresh && setfattr -n user.coffer -v other cmp/xattr/text &&
	differs "^xattr differs: xattr/text: user.coffer value$" &&
	fresh && setfattr -x user.bin cmp/xattr/binary &&
	differs "^xattr differs: xattr/binary: user.bin only in src$" &&
	fresh && setfattr -n user.new -v 1 cmp/xattr &&
	differs "^xattr differs: xattr: user.new only in cmp$"
'

test_expect_success ACL 'treecmp: ACL removed' '
	getfacl -c src/xattr/acl >acl &&
	grep "^user:1234:r--" acl &&
	fresh && setfacl -b cmp/xattr/acl && chmod --reference=src/xattr/acl cmp/xattr/acl &&
	differs "^xattr differs: xattr/acl: system.posix_acl_access only in src$"
'

test_expect_success 'treecmp: symlink target' '
	fresh && ln -sfn /etc/passwd cmp/links/absolute &&
	differs "^target differs: links/absolute: /etc/hostname vs /etc/passwd$"
'

test_expect_success 'treecmp: symlink replaced by a file' '
	fresh && rm cmp/links/dangling && : >cmp/links/dangling &&
	differs "^type differs: links/dangling: symlink vs file$"
'

test_expect_success 'treecmp: a hardlink broken into copies' '
	fresh && rm cmp/hard/triple2 && cp -p cmp/hard/triple1 cmp/hard/triple2 &&
	differs "^hardlink differs: hard/triple2: hard/sub/triple3 vs hard/triple2$"
'

test_expect_success 'treecmp: two files linked that were not' '
	fresh && rm cmp/modes/m0600 && ln cmp/hard/pair1 cmp/modes/m0600 &&
	differs "^hardlink differs: modes/m0600: modes/m0600 vs hard/pair1$"
'

test_expect_success 'treecmp: holes filled in a sparse file' '
	fresh && cp --sparse=never src/sparse/holes cmp/sparse/holes &&
	touch -r src/sparse/holes cmp/sparse/holes &&
	differs "^allocation differs: sparse/holes: "
'

test_expect_success 'treecmp: a file only on one side, reported once per subtree' '
	fresh && rm -r cmp/empty/a && : >cmp/extra &&
	differs "^only in src: empty/a$" &&
	differs "^only in cmp: extra$" &&
	! grep "empty/a/" out
'

test_expect_success 'treecmp: paths with a newline are escaped on one line' '
	fresh && chmod 0640 "cmp/names/new
line" &&
	differs "^mode differs: names/new\\\\nline: 0644 vs 0640$" &&
	test_line_count = 1 out
'

test_expect_success ROOT 'treecmp: owner change' '
	fresh && chown 1:1 cmp/names/-rf &&
	differs "^owner differs: names/-rf: 0:0 vs 1:1$"
'

test_expect_success DEVICES 'treecmp: device numbers' '
	test -c src/special/null &&
	fresh && rm cmp/special/null && mknod cmp/special/null c 1 5 &&
	touch -r src/special/null cmp/special/null &&
	differs "^device differs: special/null: 1,3 vs 1,5$"
'

test_expect_success 'treecmp: errors exit 2' '
	test_expect_code 2 treecmp src no-such-dir 2>err &&
	grep "^treecmp: " err &&
	test_expect_code 2 treecmp src 2>/dev/null &&
	test_expect_code 2 treecmp --bogus src src 2>/dev/null
'

test_expect_success 'mktree full tree: 10,000 small files, quickly' '
	start=$(date +%s) &&
	mktree full 2>/dev/null &&
	test "$(find full/many -type f | wc -l)" = 10000 &&
	test $(($(date +%s) - start)) -lt 30 &&
	treecmp full full
'

test_done
