#!/bin/bash
test_description='audit: rehash the live data, find silent corruption, modified, missing and new files'
. "$(dirname "$0")/../lib.sh"

# change_of FILE PATH: the change audit --json reported for PATH, or "none".
change_of() {
	json_get "$1" '
		my @c = grep { $_->{path} eq "'"$2"'" } @{$j->{changes}};
		@c ? $c[0]{change} : "none"'
}

test_expect_success 'setup: the hostile tree (sparse, large, hardlinked files) and data' '
	mktree src --small 2>/dev/null &&
	mkdir src/data &&
	random_file src/data/shard-0 3 &&
	random_file src/data/shard-1 2 &&
	printf "labels\n" >src/data/labels.txt &&
	# A checkpoint: backup cuts it at its tensor boundaries too.
	perl -e '\''
		my ($off, @e) = (0);
		for (["embed", 3 * 1048576 + 5], ["attn", 1048576 + 7],
		    ["mlp", 2 * 1048576]) {
			push @e, sprintf("\"%s\":{\"dtype\":\"U8\",\"shape\":[%d],"
			    . "\"data_offsets\":[%d,%d]}", $_->[0], $_->[1],
			    $off, $off + $_->[1]);
			$off += $_->[1];
		}
		my $h = "{" . join(",", @e) . "}";
		$h .= " " x ((8 - length($h) % 8) % 8);
		open(my $r, "<", "/dev/urandom") or die;
		read($r, my $data, $off) == $off or die;
		print pack("Q<", length $h), $h, $data;
	'\'' >src/data/model.safetensors &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b.json &&
	id=$(json_get b.json "\$j->{snapshot}")
'

test_expect_success 'an untouched tree: no differences, status 0' '
	coffer -r repo audit ds >out 2>err &&
	cat out err &&
	test_must_be_empty err &&
	test_line_count = 1 out &&
	grep "^audit of '\''ds'\'' against .*: 0 silently corrupted, 0 modified, 0 missing, 0 new$" out &&
	coffer -r repo audit --json ds "$id" >clean.json &&
	json_check clean.json "
		!@{\$j->{changes}} && \$j->{snapshot} eq q($id) &&
		\$j->{dataset} eq q(ds) && \$j->{complete} &&
		\$j->{files} > 10 && \$j->{bytes} > 5 * 1048576 &&
		\$j->{corrupt} == 0 && \$j->{recut} == 0"
'

test_expect_success 'bytes changed in place, mtime put back: silent corruption, status 7' '
	cp -p src/data/shard-0 shard-0.orig &&
	flip_byte src/data/shard-0 2000000 &&
	touch -r shard-0.orig src/data/shard-0 &&
	test "$(stat -c %s.%y src/data/shard-0)" = "$(stat -c %s.%y shard-0.orig)" &&
	test_expect_code 7 coffer -r repo audit ds >out 2>err &&
	cat out err &&
	grep "^CORRUPT  *data/shard-0$" out &&
	grep "silent corruption: .*data/shard-0" err &&
	grep ": 1 silently corrupted, 0 modified, 0 missing, 0 new$" out
'

test_expect_success 'audit --json reports it with the offset of the bad chunk' '
	test_expect_code 7 coffer -r repo audit --json ds >c.json &&
	json_check c.json "
		my @c = @{\$j->{changes}};
		@c == 1 && \$c[0]{change} eq q(corrupt) &&
		\$c[0]{path} eq q(data/shard-0) && \$c[0]{type} eq q(file) &&
		\$c[0]{offset} <= 2000000 && \$c[0]{offset} + 8388608 > 2000000 &&
		\$j->{corrupt} == 1"
'

test_expect_success 'corruption in a hole of the sparse file is found too' '
	cp -p shard-0.orig src/data/shard-0 &&
	coffer -r repo audit ds &&
	sparse=$(cd src && find . -type f -size +1M -printf "%S %P\n" |
		awk "\$1 < 0.5 { print \$2; exit }") &&
	echo "sparse file: $sparse" &&
	test -n "$sparse" &&
	cp -p "src/$sparse" sparse.orig &&
	printf X | dd of="src/$sparse" bs=1 seek=12345 conv=notrunc 2>/dev/null &&
	touch -r sparse.orig "src/$sparse" &&
	test_expect_code 7 coffer -r repo audit ds >out &&
	grep "^CORRUPT  *$sparse$" out &&
	cp -p sparse.orig "src/$sparse" &&
	coffer -r repo audit ds
'

test_expect_success 'the same bytes with the holes filled in are not corruption' '
	cp --sparse=never -p sparse.orig "src/$sparse" &&
	test "$(stat -c %b "src/$sparse")" -gt "$(stat -c %b sparse.orig)" &&
	coffer -r repo audit ds >out &&
	grep ": 0 silently corrupted, 0 modified, 0 missing, 0 new$" out &&
	coffer -r repo audit --json ds >recut.json &&
	json_check recut.json "\$j->{recut} == 1" &&
	cp -p sparse.orig "src/$sparse"
'

test_expect_success 'a normal edit is modified, not corruption' '
	printf "more labels\n" >>src/data/labels.txt &&
	coffer -r repo audit --json ds >m.json &&
	test "$(change_of m.json data/labels.txt)" = modified
'

test_expect_success 'a same-size rewrite with a new mtime is modified' '
	dd if=/dev/zero of=src/data/shard-1 bs=4096 count=1 conv=notrunc 2>/dev/null &&
	touch -d "2001-01-01" src/data/shard-1 &&
	coffer -r repo audit --json ds >m2.json &&
	test "$(change_of m2.json data/shard-1)" = modified
'

test_expect_success 'deletions are missing, additions new, a type change modified' '
	rm src/big/neighbour.txt &&
	rm -r src/empty/a &&
	printf "new\n" >src/data/added.txt &&
	rm src/data/shard-1 && mkdir src/data/shard-1 &&
	coffer -r repo audit ds >out &&
	cat out &&
	grep "^missing  *big/neighbour.txt$" out &&
	grep "^missing  *empty/a$" out &&
	grep "^missing  *empty/a/b/c/d$" out &&
	grep "^new  *data/added.txt$" out &&
	grep "^modified  *data/shard-1$" out &&
	grep "^modified  *data/labels.txt$" out &&
	! grep CORRUPT out &&
	coffer -r repo audit --json ds >all.json &&
	json_check all.json "
		\$j->{corrupt} == 0 && \$j->{modified} == 2 &&
		\$j->{new} == 1 && \$j->{missing} >= 6 &&
		@{\$j->{changes}} == \$j->{modified} + \$j->{new} + \$j->{missing}"
'

test_expect_success 'the report is in path order' '
	grep -v "^audit of" out | cut -c12- >paths &&
	LC_ALL=C sort -c paths
'

test_expect_success 'audit takes the snapshot of its dataset only' '
	mkdir other && printf "x\n" >other/x &&
	coffer -r repo backup ds2 other &&
	test_expect_code 2 coffer -r repo audit ds ds2@latest 2>err &&
	grep "is of dataset '\''ds2'\''" err &&
	test_expect_code 2 coffer -r repo audit nosuch &&
	test_expect_code 2 coffer -r repo audit
'

test_expect_success 'paths excluded as at backup time are left out on both sides' '
	coffer -r repo audit --exclude "*.txt" --exclude /data ds >out &&
	cat out &&
	! grep "\.txt$" out &&
	! grep " data" out &&
	grep "^missing  *empty/a$" out
'

test_expect_success 'audit needs the key, and writes nothing to the repository' '
	repo_fingerprint repo >before &&
	coffer -r repo audit ds >/dev/null &&
	repo_fingerprint repo >after &&
	test_cmp before after &&
	test_expect_code 3 env -u COFFER_KEY_FILE COFFER_PASSPHRASE=wrong \
		"$COFFER" -r repo audit ds
'

test_done
