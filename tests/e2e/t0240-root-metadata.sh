#!/bin/bash
test_description='restore and drill: the dataset root'"'"'s own mode, owner, times, ACL and xattrs'
. "$(dirname "$0")/../lib.sh"

# A dataset root of mode 0750 that comes back 0755 makes what it kept from
# others readable by everyone.  The backup stores the root as the entry
# "."; restore gives its metadata to a target it makes or finds empty,
# after everything in it, to a target that was not empty only with
# --root-metadata; a subset restore gives the directories above the paths
# asked for their own; a drill checks the root as any other entry.

if test "$(id -u)" != 0; then
	test_skip_all "needs root (owners)"
fi
probe=$TMP/probe
mkdir "$probe"
if ! setfacl -m u:4321:rx "$probe" 2>/dev/null ||
	! setfattr -n user.probe -v 1 "$probe" 2>/dev/null; then
	test_skip_all "no POSIX ACLs or user xattrs here"
fi
rmdir "$probe"

# Mode, owner, mtime (ns), ACL (access and default), user xattrs.
meta() {
	stat -c '%a %u:%g %.9Y' "$1" &&
	getfacl -n --omit-header "$1" 2>/dev/null &&
	getfattr -d -m '^user\.' --absolute-names "$1" 2>/dev/null |
		sed 1d
}

test_expect_success 'setup: a root of unusual mode, owner, times, ACL and xattr' '
	mkdir -p src/a/b &&
	printf "inside\n" >src/a/b/f.txt &&
	chown 1234:5678 src src/a &&
	chmod 0750 src && chmod 0711 src/a && chmod 0705 src/a/b &&
	setfacl -m u:4321:rx src && setfacl -d -m u:4321:rx src &&
	setfattr -n user.tag -v dataset src &&
	setfacl -m u:4321:rwx,g:4322:x src/a && setfacl -d -m u:4321:r src/a &&
	setfattr -n user.sub -v 1 src/a &&
	touch -d "2003-03-03 03:03:03.123456789" src/a/b &&
	touch -d "2002-02-02 02:02:02" src/a &&
	touch -d "2020-01-01 00:00:00.5" src &&
	meta src >src.meta &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b.json &&
	id=$(json_get b.json "\$j->{snapshot}") &&
	coffer -r repo ls "$id" >ls.out &&
	cat ls.out
'

test_expect_success 'a subset: the directories above it have their own metadata' '
	coffer -r repo restore "$id" part a/b/f.txt &&
	for d in a a/b; do
		meta src/$d >want && meta part/$d >got &&
		test_cmp want got || return 1
	done &&
	cmp src/a/b/f.txt part/a/b/f.txt
'

test_expect_success 'the backup stores the root as "."' '
	grep " \.$" ls.out
'
test_set_prereq ROOT_STORED

test_expect_success ROOT_STORED 'a new target takes the root'"'"'s metadata' '
	coffer -r repo restore "$id" new &&
	meta new >new.meta &&
	test_cmp src.meta new.meta &&
	treecmp src/a new/a
'

test_expect_success ROOT_STORED 'so does an empty one' '
	mkdir empty &&
	coffer -r repo restore "$id" empty &&
	meta empty >empty.meta &&
	test_cmp src.meta empty.meta
'

# Its times move with what is written in it, as any directory's.
test_expect_success ROOT_STORED 'a target that was not empty keeps its own, unless --root-metadata' '
	mkdir full && printf "was there\n" >full/other.txt &&
	chmod 0755 full && meta full | sed "1s/ [^ ]*\$//" >full.before &&
	coffer -r repo restore --force "$id" full &&
	meta full | sed "1s/ [^ ]*\$//" >full.after &&
	test_cmp full.before full.after &&
	coffer -r repo restore --force --root-metadata "$id" full &&
	meta full >full.meta &&
	test_cmp src.meta full.meta &&
	test -f full/other.txt
'

test_expect_success ROOT_STORED 'a subset: the directories above it and the root have theirs' '
	coffer -r repo restore "$id" sub a/b/f.txt &&
	for d in "" /a /a/b; do
		meta src$d >want && meta sub$d >got &&
		test_cmp want got || return 1
	done
'

test_expect_success ROOT_STORED 'a drill checks the root and passes' '
	coffer -r repo drill "$id" >drill.out &&
	grep "verdict *pass" drill.out
'

test_expect_success ROOT_STORED 'a drill whose restored root has another mode fails' '
	COFFER_TEST_BEFORE_DRILL_CHECK="chmod 0755 \"\$COFFER_TEST_SCRATCH\"" \
		test_expect_code 4 coffer -r repo drill "$id" >drill.out 2>err &&
	cat drill.out err &&
	grep "\.: mode 0755, not 0750" drill.out
'

test_expect_success ROOT_STORED 'a snapshot without the root entry restores as before' '
	sqlite3 "$(catalog_db)" "DELETE FROM entry WHERE path_id IN
		(SELECT id FROM path WHERE name = CAST(\".\" AS BLOB))" &&
	coffer -r repo ls "$id" >ls2.out &&
	! grep -q " \.$" ls2.out &&
	coffer -r repo restore "$id" old &&
	test "$(stat -c %a old)" = 755 &&
	treecmp src/a old/a &&
	coffer -r repo drill "$id" >drill.out
'

test_done
