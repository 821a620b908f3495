#!/bin/bash
# mktree.sh DIR [--small]
#
# Build the hostile tree that coffer's round-trip tests back up and restore:
# empty files, a file larger than the maximum chunk, 10,000 small files
# (skipped with --small), awkward names (spaces, a newline, a tab, a
# backslash, UTF-8, a leading dash, 255 bytes), symlinks (dangling, absolute,
# to a directory), hardlinks, nested empty directories, a sparse file,
# xattrs and an ACL, modes 0000/0600/4755/2755/1777/0555, a fifo, a device
# node (when mknod works), a deep path, other owners (when root), and mtimes
# with nanoseconds.  Features the file system lacks (xattrs, ACLs, device
# nodes) are left out with a warning on stderr, so callers stay portable.
set -eu

usage() {
	echo "usage: mktree.sh DIR [--small]" >&2
	exit 2
}

dir= small=
for arg; do
	case $arg in
	--small) small=1 ;;
	-*) usage ;;
	*) [ -z "$dir" ] || usage; dir=$arg ;;
	esac
done
[ -n "$dir" ] || usage
mkdir -p -- "$dir"
[ -z "$(ls -A -- "$dir")" ] || { echo "mktree.sh: '$dir' is not empty" >&2; exit 2; }
cd -- "$dir"
export TZ=UTC LC_ALL=C
umask 022

warn() { echo "mktree.sh: warning: $*" >&2; }

# Empty files and nested empty directories.
mkdir -p empty/a/b/c/d empty/other
: >empty/zero
: >empty/a/zero2

# Larger than any maximum chunk: incompressible and compressible stretches.
mkdir big
{
	head -c 6291456 /dev/urandom
	yes 'tensor: 0.0001 0.0002 0.0003 the quick brown fox jumps' | head -c 4194304
	head -c 6291456 /dev/urandom
	seq 1 1000000 | head -c 4194304
} >big/mixed.bin
printf 'small text\n' >big/neighbour.txt

# 10,000 small files of distinct content, one process.
if [ -z "$small" ]; then
	perl -e '
		for my $d (0 .. 9) {
			my $dir = sprintf("many/d%02d", $d);
			mkdir "many" ; mkdir $dir or die "$dir: $!";
			for my $i (0 .. 999) {
				my $n = $d * 1000 + $i;
				open(my $f, ">", sprintf("%s/f%04d.txt", $dir, $i))
				    or die "$dir/$i: $!";
				print $f "file $n\n", "x" x ($n % 700), "\n";
				close($f) or die "$dir/$i: $!";
			}
		}'
fi

# Awkward names.
mkdir -p 'names/dir with spaces' names/données 日本語
printf 'space\n' >'names/with space.txt'
printf 'inner\n' >'names/dir with spaces/file name'
printf 'newline\n' >'names/new
line'
printf 'tab\n' >"names/tab$(printf '\t')here"
printf 'backslash\n' >'names/back\slash'
printf 'quotes\n' >"names/quote'\"s"
printf 'résumé\n' >'names/données/résumé.txt'
printf 'nihongo\n' >'日本語/ファイル.txt'
printf 'dash\n' >names/-rf
printf 'help\n' >names/--help
printf 'long\n' >"names/$(printf '%0255d' 0 | tr 0 L)"

# Symlinks: relative, dangling, absolute, to a directory, to a symlink.
mkdir links
ln -s '../names/with space.txt' links/relative
ln -s ../does/not/exist links/dangling
ln -s /etc/hostname links/absolute
ln -s ../empty/a links/to-dir
ln -s relative links/to-link
ln -s "$(printf 'weird\nname')" links/newline-target

# Hardlinks: a pair and a triple across directories.
mkdir -p hard/sub
printf 'pair\n' >hard/pair1
ln hard/pair1 hard/pair2
head -c 100000 /dev/urandom >hard/triple1
ln hard/triple1 hard/triple2
ln hard/triple1 hard/sub/triple3

# Sparse: 100 MiB with 4 KiB of data at 50 MiB, and one that ends in data.
mkdir sparse
truncate -s 100M sparse/holes
head -c 4096 /dev/urandom |
	dd of=sparse/holes bs=4096 seek=12800 conv=notrunc status=none
printf 'start\n' >sparse/tail
truncate -s 8M sparse/tail
printf 'end\n' >>sparse/tail

# Extended attributes (text, binary, on a directory) and an ACL.
mkdir xattr
printf 'attrs\n' >xattr/text
printf 'binary\n' >xattr/binary
if setfattr -n user.coffer -v value xattr/text 2>/dev/null; then
	setfattr -n user.empty xattr/text
	setfattr -n user.bin -v 0x00ff0a0d7f80 xattr/binary
	setfattr -n user.dir -v on-a-directory xattr
else
	warn "user xattrs not supported here, left out"
fi
printf 'acl\n' >xattr/acl
if command -v setfacl >/dev/null && setfacl -m u:1234:r,g:5678:rw xattr/acl 2>/dev/null; then
	setfacl -d -m u:1234:rx xattr
else
	warn "ACLs not supported here, left out"
fi

# Modes.  Set after the content is written; 0555 dir holds a file.
mkdir -p modes/sticky modes/readonly modes/private
printf 'secret\n' >modes/m0000
printf 'mine\n' >modes/m0600
printf '#!/bin/sh\n' >modes/m4755
printf '#!/bin/sh\n' >modes/m2755
printf 'in a read-only dir\n' >modes/readonly/file
printf 'sticky\n' >modes/sticky/file
chmod 0000 modes/m0000
chmod 0600 modes/m0600
chmod 4755 modes/m4755
chmod 2755 modes/m2755
chmod 1777 modes/sticky
chmod 0700 modes/private
if [ "$(id -u)" = 0 ]; then
	printf 'owned\n' >modes/owned
	chown 1234:5678 modes/owned
	chown -h 4321:8765 links/relative
fi

# Special files.
mkdir special
mkfifo special/fifo
if [ "$(id -u)" = 0 ] && mknod special/null c 1 3 2>/dev/null &&
    mknod special/loop b 7 200 2>/dev/null; then
	:
else
	rm -f special/null special/loop
	warn "cannot make device nodes, left out"
fi

# A deep path: 40 levels, about 800 bytes.
d=deep
for i in $(seq -w 1 40); do
	d=$d/level-$i-abcdefghijklmn
done
mkdir -p "$d"
printf 'bottom\n' >"$d/file"

# Distinct mtimes with nanoseconds: files and symlinks first, then
# directories deepest first (creating entries changes a directory's mtime).
touch -d '2020-01-02 03:04:05.123456789' big/mixed.bin
touch -d '2001-09-09 01:46:40.000000001' empty/zero
touch -d '2040-02-29 23:59:59.999999999' 'names/données/résumé.txt'
touch -d '1999-12-31 23:59:59.5' 'names/new
line'
touch -d '2010-06-15 12:00:00.000000500' hard/triple1
touch -d '2015-05-05 05:05:05.050505050' sparse/holes
touch -d '2012-12-12 12:12:12.121212121' modes/m4755
touch -h -d '2011-11-11 11:11:11.111111111' links/dangling
touch -d '2018-01-01 00:00:00.5' "$d/file"
touch -d '2019-03-03 03:03:03.303030303' empty/a/b/c/d empty/a/b/c
touch -d '2021-04-04 04:04:04.404040404' 'names/dir with spaces' 日本語
touch -d '2022-07-07 07:07:07.707070707' modes/sticky
if [ -z "$small" ]; then
	touch -d '2023-08-08 08:08:08.808080808' many/d03
fi

# Last: a directory nobody may write into.
chmod 0555 modes/readonly
touch -d '2024-01-01 01:01:01.010101010' modes/readonly
