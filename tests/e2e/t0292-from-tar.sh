#!/bin/bash
test_description='backup --from-tar: tar streams as snapshots, deduplicated, hostile ones refused'
. "$(dirname "$0")/../lib.sh"

command -v bsdtar >/dev/null && test_set_prereq BSDTAR

# What GNU tar itself extracts from an archive: the reference a snapshot
# of the archive must restore to.
untar() {
	mkdir -p "$2" &&
	tar -x -p --same-owner --xattrs --xattrs-include='*' --acls \
		--numeric-owner -C "$2" -f "$1"
}

# The state of the newest snapshot of dataset $1.
newest_state() {
	coffer -r repo snapshots --json "$1" >st.json &&
	json_get st.json "\$j->[-1]{state}"
}

test_expect_success 'setup: the hostile tree, a repository' '
	mktree src --small &&
	coffer_init_keyfile repo
'

test_expect_success 'GNU tar pax (sparse, xattrs, ACLs): restores as the source' '
	tar -C src --format=pax -S --xattrs --xattrs-include="*" --acls \
		-cf pax.tar . &&
	coffer -r repo backup --json --from-tar pax.tar pax >b.json 2>err &&
	cat err &&
	test_must_be_empty err &&
	json_check b.json "\$j->{level} eq q(full) && \$j->{files} > 10" &&
	coffer -r repo restore pax@latest out-pax &&
	treecmp --root src out-pax
'

test_expect_success 'the snapshot lists hardlinks as one file' '
	test "$(stat -c %i out-pax/hard/pair1)" = \
		"$(stat -c %i out-pax/hard/pair2)" &&
	test "$(stat -c %h out-pax/hard/triple1)" = 3
'

test_expect_success 'an incremental of the same stream: hardlinks stay one file' '
	coffer -r repo backup --json --level incremental --from-tar pax.tar \
		pax >i0.json &&
	json_check i0.json "\$j->{level} eq q(incremental) &&
		\$j->{unchanged} > 50 && \$j->{bytes_new} == 0" &&
	coffer -r repo restore pax@latest out-pax-i &&
	treecmp --root src out-pax-i
'

test_expect_success 'a zip archive, with an exclude' '
	python3 - <<-\PY &&
	import zipfile
	with zipfile.ZipFile("z.zip", "w", zipfile.ZIP_DEFLATED) as z:
	    z.write("src/big/mixed.bin", "big/mixed.bin")
	    z.write("src/big/neighbour.txt", "big/neighbour.txt")
	PY
	coffer -r repo backup --from-tar z.zip --exclude "*.txt" zip &&
	coffer -r repo restore zip@latest out-zip &&
	cmp src/big/mixed.bin out-zip/big/mixed.bin &&
	test_path_is_missing out-zip/big/neighbour.txt
'

test_expect_success 'audit of a tar snapshot: refused, there is no tree' '
	test_expect_code 2 coffer -r repo audit pax 2>err &&
	cat err &&
	grep "tar stream" err
'

test_expect_success 'dump of it gives the archive back (the two commands agree)' '
	coffer -r repo dump pax@latest >again.tar &&
	untar again.tar out-again &&
	treecmp --root src out-again
'

test_expect_success BSDTAR 'bsdtar (its pax, xattrs, ACLs, holes), lz4: restores as the source' '
	bsdtar -C src --format pax --lz4 -cf bsd.tar.lz4 . &&
	coffer -r repo backup --from-tar bsd.tar.lz4 bsd 2>err &&
	cat err &&
	test_must_be_empty err &&
	coffer -r repo restore bsd@latest out-bsd &&
	treecmp --root src out-bsd
'

test_expect_success 'GNU tar format, gzip, from standard input' '
	tar -C src --format=gnu -S -czf gnu.tgz . &&
	coffer -r repo backup --from-tar - gnu <gnu.tgz &&
	coffer -r repo restore gnu@latest out-gnu &&
	untar gnu.tgz ref-gnu &&
	treecmp --root ref-gnu out-gnu
'

test_expect_success 'python tarfile pax, xz: restores as tar extracts it' '
	python3 - <<-\PY &&
	import tarfile
	with tarfile.open("py.tar.xz", "w:xz", format=tarfile.PAX_FORMAT) as t:
	    t.add("src/big", arcname="big")
	    t.add("src/names", arcname="names")
	    t.add("src/links", arcname="links")
	PY
	coffer -r repo backup --from-tar py.tar.xz py &&
	coffer -r repo restore py@latest out-py &&
	untar py.tar.xz ref-py &&
	treecmp ref-py out-py
'

test_expect_success 'cpio (newc), bzip2: a format that is not tar' '
	python3 - <<-\PY &&
	import bz2
	def member(name, mode, data=b"", ino=1):
	    name = name.encode() + b"\0"
	    hdr = b"070701" + b"".join(b"%08X" % v for v in (
	        ino, mode, 0, 0, 1, 1700000000, len(data), 0, 0, 0, 0,
	        len(name), 0))
	    out = hdr + name
	    out += b"\0" * (-len(out) % 4)
	    out += data + b"\0" * (-len(data) % 4)
	    return out
	arc = (member("d", 0o040755, ino=1) +
	       member("d/one.txt", 0o100640, b"one\n", ino=2) +
	       member("d/two.txt", 0o100600, b"two two\n", ino=3) +
	       member("TRAILER!!!", 0, ino=0))
	open("a.cpio.bz2", "wb").write(bz2.compress(arc))
	PY
	coffer -r repo backup --from-tar a.cpio.bz2 cpio &&
	coffer -r repo restore cpio@latest out-cpio &&
	test "$(cat out-cpio/d/one.txt)" = one &&
	test "$(cat out-cpio/d/two.txt)" = "two two" &&
	test "$(stat -c %a out-cpio/d/one.txt)" = 640 &&
	test "$(stat -c %Y out-cpio/d/two.txt)" = 1700000000
'

test_expect_success 'setup: a data tree, backed up from the directory' '
	mkdir -p data/a data/b &&
	random_file data/a/one.bin 6 &&
	random_file data/b/two.bin 3 &&
	echo small >data/b/small.txt &&
	coffer -r repo backup --json walked "$TMP/data" >w.json &&
	json_check w.json "\$j->{bytes_new} > 9000000"
'

test_expect_success 'the same data as a tar stream stores no new chunk' '
	packs_before=$(find repo/packs -type f | wc -l) &&
	tar -C data --format=pax -cf - . | zstd -q |
		coffer -r repo backup --json --from-tar - streamed >s.json &&
	cat s.json &&
	json_check s.json "\$j->{bytes_new} == 0 && \$j->{bytes_read} >= 9437184" &&
	coffer -r repo restore streamed@latest out-data &&
	treecmp data out-data
'

test_expect_success 'an incremental from a later stream: only what changed' '
	echo changed >data/b/small.txt &&
	random_file data/a/new.bin 1 &&
	rm data/b/two.bin &&
	tar -C data --format=pax -cf data2.tar . &&
	coffer -r repo backup --json --level incremental --from-tar data2.tar \
		streamed >i.json &&
	cat i.json &&
	json_check i.json "\$j->{level} eq q(incremental) &&
		\$j->{unchanged} >= 2 && \$j->{deleted} == 1 &&
		\$j->{files} == 2" &&
	coffer -r repo restore streamed@latest out-incr &&
	treecmp data out-incr
'

test_expect_success 'a directory backup of a tar dataset needs --new-source' '
	test_expect_code 2 coffer -r repo backup streamed "$TMP/data" 2>err &&
	cat err && grep -e "--new-source" err
'

test_expect_success 'setup: hostile archives' '
	mkdir -p outside &&
	python3 - <<-\PY
	import io, tarfile
	def add(t, name, data=b"x", **kw):
	    i = tarfile.TarInfo(name)
	    for k, v in kw.items():
	        setattr(i, k, v)
	    if i.type == tarfile.REGTYPE:
	        i.size = len(data)
	        t.addfile(i, io.BytesIO(data))
	    else:
	        t.addfile(i)
	with tarfile.open("hostile.tar", "w", format=tarfile.PAX_FORMAT) as t:
	    add(t, "good.txt", b"good\n")
	    add(t, "../escape.txt", b"evil\n")
	    add(t, "/abs.txt", b"evil\n")
	    add(t, "a/../../up.txt", b"evil\n")
	    add(t, "lnk", type=tarfile.SYMTYPE, linkname="/etc")
	    add(t, "lnk/passwd", b"evil\n")
	    add(t, "out", type=tarfile.SYMTYPE, linkname="../outside")
	    add(t, "hl-abs", type=tarfile.LNKTYPE, linkname="/etc/passwd")
	    add(t, "hl-missing", type=tarfile.LNKTYPE, linkname="nosuch")
	    add(t, "hl-dotdot", type=tarfile.LNKTYPE, linkname="../good.txt")
	    add(t, "hl-good", type=tarfile.LNKTYPE, linkname="good.txt")
	    add(t, "good.txt", b"second\n")
	    add(t, "d/" + "n" * 300, b"long\n")
	    add(t, "./dot/./name//x.txt", b"clean\n")
	PY
'

test_expect_success 'hostile names: each refused and named, the rest stored, status 1' '
	test_expect_code 1 coffer -r repo backup --from-tar hostile.tar hostile \
		2>err &&
	cat err &&
	for n in ../escape.txt /abs.txt a/../../up.txt lnk/passwd hl-abs \
		hl-missing hl-dotdot "d/nnnn"; do
		grep -F "$n" err || return 1
	done &&
	grep -F "more than once" err &&
	test "$(newest_state hostile)" = complete
'

test_expect_success 'what was stored restores, inside the target only' '
	coffer -r repo restore hostile@latest out-hostile &&
	(cd out-hostile && find . | LC_ALL=C sort) >actual &&
	cat >expect <<-\EOF &&
	.
	./dot
	./dot/name
	./dot/name/x.txt
	./good.txt
	./hl-good
	./lnk
	./out
	EOF
	test_cmp expect actual &&
	test "$(cat out-hostile/good.txt)" = good &&
	test "$(stat -c %i out-hostile/good.txt)" = \
		"$(stat -c %i out-hostile/hl-good)" &&
	test "$(readlink out-hostile/lnk)" = /etc &&
	test_path_is_missing escape.txt &&
	test_path_is_missing up.txt &&
	test_dir_is_empty outside
'

test_expect_success 'extended attributes no file system takes: that member refused' '
	python3 - <<-\PY &&
	import io, tarfile
	with tarfile.open("bigx.tar", "w", format=tarfile.PAX_FORMAT) as t:
	    for name, hdr in (("x.txt", {"SCHILY.xattr.user.big": "y" * (200 << 10)}),
	                      ("b.txt", {})):
	        i = tarfile.TarInfo(name)
	        i.size = 2
	        i.pax_headers = hdr
	        t.addfile(i, io.BytesIO(b"x\n"))
	PY
	test_expect_code 1 coffer -r repo backup --from-tar bigx.tar bigx 2>err &&
	cat err &&
	grep -F "x.txt" err &&
	coffer -r repo restore bigx@latest out-bigx &&
	test "$(ls out-bigx)" = b.txt
'

test_expect_success 'a header libarchive refuses as too large: the snapshot fails' '
	python3 - <<-\PY &&
	import io, tarfile
	with tarfile.open("huge.tar", "w", format=tarfile.PAX_FORMAT) as t:
	    i = tarfile.TarInfo("a.txt")
	    i.size = 2
	    i.pax_headers = {"comment": "x" * (40 << 20)}
	    t.addfile(i, io.BytesIO(b"a\n"))
	PY
	test_expect_code 5 coffer -r repo backup --from-tar huge.tar huge 2>err &&
	cat err &&
	test "$(newest_state huge)" = failed
'

test_expect_success 'an empty stream is no snapshot of nothing' '
	test_expect_code 5 coffer -r repo backup --from-tar - streamed \
		</dev/null 2>err &&
	cat err &&
	grep "no entries" err &&
	test "$(newest_state streamed)" = failed &&
	coffer -r repo restore streamed@latest out-still &&
	treecmp data out-still
'

test_expect_success 'a stream cut short inside a member: the snapshot fails' '
	size=$(stat -c %s pax.tar) &&
	head -c $((size / 2)) pax.tar >cut.tar &&
	test_expect_code 5 coffer -r repo backup --from-tar cut.tar cut 2>err &&
	cat err &&
	grep -i "archive" err &&
	test "$(newest_state cut)" = failed
'

test_expect_success 'a stream cut short between members: the snapshot fails' '
	python3 - <<-\PY &&
	import io, tarfile
	ends = []
	with tarfile.open("four.tar", "w", format=tarfile.GNU_FORMAT) as t:
	    for n in "abcd":
	        i = tarfile.TarInfo(n)
	        i.size = 100
	        t.addfile(i, io.BytesIO(b"x" * 100))
	        ends.append(t.offset)
	data = open("four.tar", "rb").read()
	open("two.tar", "wb").write(data[:ends[1]])
	PY
	coffer -r repo backup --from-tar four.tar four &&
	test_expect_code 5 coffer -r repo backup --from-tar - four \
		<two.tar 2>err &&
	cat err &&
	grep "end of archive" err &&
	test "$(newest_state four)" = failed
'

test_expect_success 'a gzip stream cut short: the snapshot fails' '
	size=$(stat -c %s gnu.tgz) &&
	head -c $((size - 100)) gnu.tgz |
		test_expect_code 5 coffer -r repo backup --from-tar - cutgz 2>err &&
	cat err &&
	test "$(newest_state cutgz)" = failed
'

test_expect_success 'not an archive: the snapshot fails' '
	random_file noise.bin 1 &&
	test_expect_code 5 coffer -r repo backup --from-tar noise.bin noise \
		2>err &&
	cat err &&
	test "$(newest_state noise)" = failed
'

test_expect_success 'a missing archive file: refused before any snapshot' '
	test_expect_code 2 coffer -r repo backup --from-tar nosuch.tar nofile \
		2>err &&
	cat err &&
	coffer -r repo snapshots --json nofile >n.json &&
	json_check n.json "@\$j == 0"
'

test_expect_success 'standard input a terminal: refused before any snapshot' '
	if command -v script >/dev/null; then
		test_expect_code 2 script -qec \
			"$COFFER -r repo backup --from-tar - tty" /dev/null \
			>tty.out;
		cat tty.out &&
		grep "terminal" tty.out &&
		coffer -r repo snapshots --json tty >t.json &&
		json_check t.json "@\$j == 0"
	fi
'

test_expect_success '--from-tar with a PATH too: usage error' '
	test_expect_code 2 coffer -r repo backup --from-tar pax.tar pax src
'

test_done
