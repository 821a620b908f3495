#!/bin/bash
test_description='verify, drill and audit over chains of full, differential and incremental snapshots'
. "$(dirname "$0")/../lib.sh"

# "pack offset stored_len" of the first chunk of PATH's content in
# snapshot SID (its own row).
chunk_in() {
	sqlite3 -separator ' ' "$(catalog_db)" "
		SELECT p.name, ch.pack_offset, ch.stored_len
		FROM snapshot s JOIN entry e ON e.snapshot_id = s.id
		JOIN path pa ON pa.id = e.path_id
		JOIN content_chunk cc ON cc.content_id = e.content_id
		JOIN chunk ch ON ch.id = cc.chunk_id
		JOIN pack p ON p.id = ch.pack_id
		WHERE s.sid = '$1' AND pa.name = CAST('$2' AS BLOB)
		AND cc.seq = 0"
}

test_expect_success 'setup: a full, then an incremental that replaces one file' '
	mkdir -p src/a src/b &&
	random_file src/a/weights.bin 2 &&
	random_file src/b/data.bin 2 &&
	printf "config v1\n" >src/a/config &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --level full --json ds src >full.json &&
	full=$(json_get full.json "\$j->{snapshot}") &&
	cp -p src/a/weights.bin weights.v1 &&
	random_file src/a/weights.bin 2 &&
	rm src/a/config &&
	coffer -r repo backup --level incremental --json ds src >inc.json &&
	inc=$(json_get inc.json "\$j->{snapshot}") &&
	json_check inc.json "\$j->{level} eq q(incremental)" &&
	cp -a repo pristine
'

test_expect_success 'a healthy chain: verify, drills of both, audit pass' '
	coffer -r repo verify --read-data &&
	coffer -r repo drill "$full" >/dev/null &&
	coffer -r repo drill --json "$inc" >d.json &&
	json_check d.json "\$j->{verdict} eq q(pass) && \$j->{failures} == 0" &&
	coffer -r repo audit ds >out &&
	grep ": 0 silently corrupted, 0 modified, 0 missing, 0 new$" out
'

test_expect_success 'the drill of the incremental restores its resolved view' '
	coffer -r repo drill --keep --json "$inc" >k.json &&
	kept=$(json_get k.json "\$j->{scratch}") &&
	treecmp src "$kept" &&
	rm -rf "$kept"
'

test_expect_success 'damage to a version the incremental replaced breaks only the full' '
	read -r pack off len <<-EOF &&
	$(chunk_in "$full" a/weights.bin)
	EOF
	test -n "$pack" &&
	flip_byte "repo/packs/$(echo $pack | cut -c1-2)/$pack" $((off + 34 + len / 2)) &&
	test_expect_code 4 coffer -r repo verify --read-data --json >v.json &&
	json_check v.json "
		my @b = @{\$j->{broken}};
		@b == 1 && \$b[0]{snapshot} eq q($full) &&
		join(q(,), @{\$b[0]{paths}}) eq q(a/weights.bin)" &&
	test_expect_code 4 coffer -r repo drill "$full" >/dev/null 2>&1 &&
	coffer -r repo drill "$inc" >/dev/null
'

test_expect_success 'damage to a file the incremental inherits breaks both' '
	rm -rf repo && cp -a pristine repo &&
	read -r pack off len <<-EOF &&
	$(chunk_in "$full" b/data.bin)
	EOF
	flip_byte "repo/packs/$(echo $pack | cut -c1-2)/$pack" $((off + 34 + len / 2)) &&
	test_expect_code 4 coffer -r repo verify --read-data >out &&
	cat out &&
	grep -F "snapshot $(echo $full | cut -c1-12) of '\''ds'\'' is damaged:" out &&
	grep -F "snapshot $(echo $inc | cut -c1-12) of '\''ds'\'' is damaged:" out &&
	test "$(grep -c "^  b/data.bin$" out)" = 2 &&
	test_expect_code 4 coffer -r repo drill --json "$inc" >d.json &&
	json_check d.json "\$j->{problems}[0]{path} eq q(b/data.bin)"
'

test_expect_success 'audit against the full sees the incremental changes as changes' '
	rm -rf repo && cp -a pristine repo &&
	coffer -r repo audit --json ds "$full" >a.json &&
	json_check a.json "
		my %c = map { \$_->{path} => \$_->{change} } @{\$j->{changes}};
		\$c{q(a/weights.bin)} eq q(modified) &&
		\$c{q(a/config)} eq q(missing) && \$j->{corrupt} == 0"
'

test_done
