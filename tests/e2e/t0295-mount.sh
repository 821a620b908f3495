#!/bin/bash
test_description='mount: the snapshots as a read-only FUSE file system, compared with the source'
. "$(dirname "$0")/../lib.sh"

# A real mount needs /dev/fuse and fusermount3 (make deps installs
# fuse3); without them only the tests that need no mount run.
if [ -c /dev/fuse ] && command -v fusermount3 >/dev/null; then
	test_set_prereq FUSE
else
	echo "WARNING: $0: no /dev/fuse or fusermount3: the mount tests" \
		"are skipped (make deps installs fuse3)" >&2
	echo "# WARNING: no /dev/fuse or fusermount3: mount tests skipped"
fi

# Whatever a failed test left mounted is unmounted, and its server
# stopped, before the temporary directory goes.
mount_cleanup() {
	[ -s "$TEST_LOG/mounts" ] || return 0
	while read -r pid dir; do
		fusermount3 -u -z "$dir" 2>/dev/null
		kill "$pid" 2>/dev/null
	done <"$TEST_LOG/mounts"
	return 0
}
trap 'code_=$?; mount_cleanup; (exit $code_); test_cleanup_' EXIT

# mount_start DIR [OPTIONS]: coffer mount DIR in the background (its pid
# in mount_pid), back once the kernel lists the mount.  The wait is
# bounded only so that a server that never mounts fails the test.
# Under AddressSanitizer (make asan) freed memory waits in a quarantine
# of 256 MiB before it is reused, which the memory bounds below would
# count: the mount runs without it.
mount_asan_options=${ASAN_OPTIONS:+$ASAN_OPTIONS:quarantine_size_mb=0}
mount_start() {
	mount_dir=$TMP/$1 &&
	shift &&
	mkdir -p "$mount_dir" &&
	{ ASAN_OPTIONS=$mount_asan_options \
	  "$COFFER" -r repo mount "$@" "$mount_dir" >mount.out 2>mount.err &
	  mount_pid=$!; } &&
	echo "$mount_pid $mount_dir" >>"$TEST_LOG/mounts" &&
	for i in $(seq 600); do
		grep -q " $mount_dir fuse.coffer " /proc/mounts && return 0
		kill -0 "$mount_pid" 2>/dev/null || break
		sleep 0.05
	done
	echo "not mounted: $mount_dir" >&2
	cat mount.err >&2
	return 1
}

# mount_wait: the server's exit status, once it has ended.
mount_wait() {
	wait "$mount_pid"
	mount_status=$?
	! grep -q " $mount_dir fuse.coffer " /proc/mounts
}

test_expect_success 'setup: the hostile tree, a full and an incremental' '
	mktree src --small &&
	coffer_init_keyfile repo &&
	COFFER_REPO=$TMP/repo && export COFFER_REPO &&
	coffer -r repo backup ds "$TMP/src" &&
	full=$(snapshot_id ds) &&
	echo added >src/added &&
	coffer -r repo backup --level incremental ds "$TMP/src" &&
	latest=$(snapshot_id ds) &&
	test "$full" != "$latest"
'

test_expect_success 'a mountpoint that is not there: an error, no mount' '
	test_must_fail coffer -r repo mount "$TMP/nowhere" 2>err &&
	grep "error: cannot mount" err
'

test_expect_success FUSE 'mounted: datasets, snapshots, latest and full' '
	mount_start mnt &&
	ls "$mount_dir" >top &&
	echo ds >expect &&
	test_cmp expect top &&
	ls "$mount_dir/ds" >names &&
	printf "%s\n" "$full" "$latest" full latest | sort >expect &&
	test_cmp expect names &&
	test "$(readlink "$mount_dir/ds/latest")" = "$latest" &&
	test "$(readlink "$mount_dir/ds/full")" = "$full"
'

test_expect_success FUSE 'the latest snapshot is the source: modes, owners, times, links, xattrs' '
	treecmp --root src "$mount_dir/ds/latest" &&
	test "$(stat -c %i "$mount_dir/ds/latest/hard/pair1")" = \
		"$(stat -c %i "$mount_dir/ds/latest/hard/pair2")" &&
	test "$(stat -c %h "$mount_dir/ds/latest/hard/pair1")" = \
		"$(stat -c %h src/hard/pair1)" &&
	test "$(stat -c %i "$mount_dir/ds/latest/hard/pair1")" != \
		"$(stat -c %i "$mount_dir/ds/latest/big/neighbour.txt")"
'

test_expect_success FUSE 'xattrs and ACLs through getxattr and listxattr' '
	if getfattr -d src/xattr 2>/dev/null | grep -q user.; then
		(cd src && getfattr -d -m "^user\\." xattr) >expect &&
		(cd "$mount_dir/ds/latest" && getfattr -d -m "^user\\." xattr) \
			>actual &&
		test_cmp expect actual
	fi &&
	if getfacl -c src/xattr/acl 2>/dev/null | grep -q "user:1234"; then
		(cd src && getfacl -n xattr/acl xattr) >expect &&
		(cd "$mount_dir/ds/latest" && getfacl -n xattr/acl xattr) \
			>actual &&
		test_cmp expect actual
	fi
'

test_expect_success FUSE 'the full is the tree as it was, without what came later' '
	test -f "$mount_dir/ds/latest/added" &&
	test_path_is_missing "$mount_dir/ds/full/added" &&
	test_path_is_missing "$mount_dir/ds/$full/added" &&
	cmp src/big/mixed.bin "$mount_dir/ds/full/big/mixed.bin"
'

# The kernel keeps a link's target: latest must be a new link when it
# moves on, seen once the kernel asks again (within a second).
test_expect_success FUSE 'latest moves on to a snapshot taken while mounted' '
	cat "$mount_dir/ds/latest/added" &&
	echo more >src/more &&
	coffer -r repo backup --level incremental ds "$TMP/src" &&
	newest=$(snapshot_id ds) &&
	for i in $(seq 100); do
		test "$(readlink "$mount_dir/ds/latest")" = "$newest" && break
		sleep 0.1
	done &&
	test "$(readlink "$mount_dir/ds/latest")" = "$newest" &&
	test "$(cat "$mount_dir/ds/latest/more")" = more &&
	test "$(readlink "$mount_dir/ds/full")" = "$full" &&
	test_path_is_missing "$mount_dir/ds/$latest/more"
'

test_expect_success FUSE 'read-only: writes are refused' '
	test_must_fail sh -c "echo x >\"$mount_dir/ds/latest/added\"" &&
	test_must_fail touch "$mount_dir/ds/latest/new" &&
	test_must_fail mkdir "$mount_dir/ds/latest/newdir"
'

test_expect_success FUSE 'fusermount3 -u ends it with status 0' '
	fusermount3 -u "$mount_dir" &&
	mount_wait &&
	test "$mount_status" = 0
'

# A directory of far more names than a page of the kernel's readdir,
# with subdirectories whose contents the listing must skip; read a page
# at a time, its names are never all held (loaded whole, 200,000 entries
# would take tens of MiB).
test_expect_success FUSE 'a directory of 200,000 names lists whole, in bounded memory' '
	mkdir -p wide &&
	(cd wide && seq -f "f%06g" 1 200000 | xargs touch &&
	 mkdir sub0 sub9 && touch sub0/inner sub9/inner) &&
	coffer -r repo backup wide "$TMP/wide" &&
	mount_start mnt &&
	ls "$mount_dir/ds/latest" >/dev/null &&
	base=$(awk "/^VmHWM/ { print \$2 }" /proc/$mount_pid/status) &&
	(cd wide && ls -A) >expect &&
	(cd "$mount_dir/wide/latest" && ls -A) >actual &&
	test_cmp expect actual &&
	peak=$(awk "/^VmHWM/ { print \$2 }" /proc/$mount_pid/status) &&
	echo "VmHWM: $base kB before, $peak kB after" &&
	test "$peak" -lt $((base + 16 * 1024)) &&
	test "$(ls -A "$mount_dir/wide/latest/sub9")" = inner &&
	fusermount3 -u "$mount_dir" && mount_wait
'

# A checkpoint larger than the chunk cache, read as a safetensors loader
# reads one: the header, then tensors at random offsets, by read() and
# by mmap.
test_expect_success FUSE 'setup: a safetensors file larger than the cache' '
	mkdir -p model &&
	python3 - model/model.safetensors <<-\EOF &&
	import json, os, random, struct, sys
	random.seed(7)
	tensors, off = {}, 0
	for i in range(40):
	    n = 4 * 1024 * 1024 - random.randrange(0, 4096) * 4
	    tensors["layer.%d.weight" % i] = {"dtype": "F32",
	        "shape": [n // 4], "data_offsets": [off, off + n]}
	    off += n
	head = json.dumps(tensors).encode()
	head += b" " * (-len(head) % 8)
	with open(sys.argv[1], "wb") as f:
	    f.write(struct.pack("<Q", len(head)) + head)
	    left = off
	    while left > 0:
	        b = os.urandom(min(left, 1 << 20))
	        f.write(b)
	        left -= len(b)
	EOF
	test "$(stat -c %s model/model.safetensors)" -gt $((150 * 1048576)) &&
	coffer -r repo backup model "$TMP/model"
'

cat >load.py <<\EOF
import json, mmap, random, struct, sys
src, mnt = sys.argv[1], sys.argv[2]
random.seed(11)
with open(src, "rb") as a, open(mnt, "rb") as b:
    (n,) = struct.unpack("<Q", b.read(8))
    head = json.loads(b.read(n))
    base = 8 + n
    names = sorted(head)
    mm = mmap.mmap(b.fileno(), 0, prot=mmap.PROT_READ)
    for k in range(120):
        t = head[random.choice(names)]
        lo, hi = t["data_offsets"]
        # Parts of a tensor, and whole ones, across chunk boundaries.
        x = random.randrange(lo, hi)
        y = random.randrange(x, min(hi, x + 3 * 1024 * 1024)) + 1
        a.seek(base + x)
        want = a.read(y - x)
        if k % 2:
            b.seek(base + x)
            got = b.read(y - x)
        else:
            got = mm[base + x:base + y]
        if got != want:
            sys.exit("differs at %d+%d (%s)" % (base + x, y - x,
                     "read" if k % 2 else "mmap"))
    mm.close()
print("ok")
EOF

test_expect_success FUSE 'random reads of tensors match the source, memory bounded' '
	mount_start mnt &&
	cat "$mount_dir/ds/latest/big/neighbour.txt" >/dev/null &&
	base=$(awk "/^VmHWM/ { print \$2 }" /proc/$mount_pid/status) &&
	python3 load.py model/model.safetensors \
		"$mount_dir/model/latest/model.safetensors" &&
	cmp model/model.safetensors "$mount_dir/model/latest/model.safetensors" &&
	peak=$(awk "/^VmHWM/ { print \$2 }" /proc/$mount_pid/status) &&
	echo "VmHWM: $base kB before, $peak kB after" &&
	# The cache holds 64 MiB: the 160 MiB read through it must not be
	# kept (against a baseline of the same binary, which a sanitizer
	# build inflates).
	test "$peak" -lt $((base + 96 * 1024))
'

test_expect_success FUSE 'SIGTERM ends it with status 0 and unmounts' '
	kill -TERM "$mount_pid" &&
	mount_wait &&
	test "$mount_status" = 0
'

test_expect_success 'setup: a large file spread over chunks, a small one' '
	mkdir -p dmg/d &&
	random_file dmg/d/large.bin 12 &&
	echo small >dmg/d/small.txt &&
	coffer -r repo backup dmg "$TMP/dmg" &&
	set -- $(chunk_loc d/large.bin 1) &&
	flip_byte "$(pack_path "$1")" $(( $2 + $3 / 2 ))
'

# first_chunk_len PATH: the length of the first chunk of PATH's content.
first_chunk_len() {
	sqlite3 "$(catalog_db)" "SELECT cc.len FROM entry e
		JOIN path pa ON pa.id = e.path_id
		JOIN content_chunk cc ON cc.content_id = e.content_id
		WHERE pa.name = CAST('$1' AS BLOB) ORDER BY cc.seq LIMIT 1"
}

# Half of the first chunk, which is whole: the kernel's read-ahead may
# reach the damaged one, but what is asked for is read.
test_expect_success FUSE 'a damaged chunk: EIO for that file, the others read' '
	mount_start mnt &&
	test_must_fail cat "$mount_dir/dmg/latest/d/large.bin" >/dev/null \
		2>cat.err &&
	grep "Input/output error" cat.err &&
	echo small >expect &&
	test_cmp expect "$mount_dir/dmg/latest/d/small.txt" &&
	len0=$(first_chunk_len d/large.bin) &&
	head -c $((len0 / 2)) dmg/d/large.bin >expect &&
	head -c $((len0 / 2)) "$mount_dir/dmg/latest/d/large.bin" >actual &&
	cmp expect actual &&
	cmp src/big/mixed.bin "$mount_dir/ds/latest/big/mixed.bin" &&
	fusermount3 -u "$mount_dir" &&
	mount_wait &&
	test "$mount_status" = 4 &&
	grep "error: snapshot .*: .d/large.bin. is damaged at offset" \
		mount.err &&
	test "$(sqlite3 "$(catalog_db)" \
		"SELECT count(*) FROM chunk WHERE damaged = 1")" -ge 1
'

test_done
