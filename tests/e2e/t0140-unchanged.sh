#!/bin/bash
test_description='nothing changed: an incremental stores and reads nothing; a full rereads everything and stores almost nothing'
. "$(dirname "$0")/../lib.sh"

# No hardlinks and no sparse files here, so that the tree's byte size is
# what a full must read, without a question of how those count.
test_expect_success 'setup: 300 small files, 24 MiB in three big ones, symlinks, a full' '
	for d in 0 1 2 3 4 5 6 7 8 9; do
		mkdir -p src/d$d/sub || return 1
	done &&
	perl -e "
		for my \$d (0 .. 9) {
			for my \$i (0 .. 29) {
				my \$p = sprintf(qq(src/d%d/%sf%02d), \$d,
				    \$i % 3 ? q() : q(sub/), \$i);
				open(my \$f, q(>), \$p) or die qq(\$p: \$!\n);
				print \$f qq(file \$d \$i\n) x ((\$d * 30 + \$i) % 50);
				close(\$f) or die qq(\$p: \$!\n);
			}
		}" &&
	mkdir -p src/big src/links src/empty/dir &&
	random_file src/big/a 8 &&
	random_file src/big/b 8 &&
	random_file src/big/c 8 &&
	ln -s ../big/a src/links/a &&
	ln -s /nowhere src/links/dangling &&
	test "$(find src -type f | wc -l)" = 303 &&
	find src -type f -empty | grep . &&
	tree_bytes=$(dir_bytes src) &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --level full --json ds src >full.json &&
	full=$(json_get full.json "\$j->{snapshot}") &&
	json_check full.json "\$j->{bytes_read} == $tree_bytes" &&
	size0=$(dir_bytes repo)
'

# no_growth: the repository grew by less than 1%.
no_growth() {
	size=$(dir_bytes repo) &&
	echo "repository: $size0 -> $size bytes" &&
	test $(((size - size0) * 100)) -lt "$size0"
}

test_expect_success 'incremental, nothing changed: no content read, nothing new, no files' '
	coffer -r repo backup --level incremental --json ds src >i1.json 2>err &&
	test_must_be_empty err &&
	cat i1.json &&
	json_check i1.json "
		\$j->{level} eq q(incremental) && \$j->{parent} eq q($full) &&
		\$j->{bytes_read} == 0 && \$j->{bytes_new} == 0 &&
		\$j->{files} == 0 && \$j->{warnings} == 0" &&
	i1=$(json_get i1.json "\$j->{snapshot}") &&
	no_growth
'

test_expect_success 'no --level, nothing changed: the same, as an incremental' '
	coffer -r repo backup --json ds src >i2.json 2>err &&
	test_must_be_empty err &&
	json_check i2.json "
		\$j->{level} eq q(incremental) && \$j->{parent} eq q($i1) &&
		\$j->{bytes_read} == 0 && \$j->{bytes_new} == 0 &&
		\$j->{files} == 0" &&
	i2=$(json_get i2.json "\$j->{snapshot}") &&
	no_growth
'

test_expect_success 'differential, nothing changed: the same, based on the full' '
	coffer -r repo backup --level differential --json ds src >d1.json 2>err &&
	test_must_be_empty err &&
	json_check d1.json "
		\$j->{level} eq q(differential) && \$j->{parent} eq q($full) &&
		\$j->{bytes_read} == 0 && \$j->{bytes_new} == 0 &&
		\$j->{files} == 0" &&
	d1=$(json_get d1.json "\$j->{snapshot}") &&
	no_growth
'

test_expect_success 'each of them restores identically' '
	for id in "$i1" "$i2" "$d1"; do
		coffer -r repo restore "$id" out-$id &&
		treecmp src out-$id &&
		rm -rf out-$id || return 1
	done
'

test_expect_success 'diff between the full and them is empty' '
	coffer -r repo diff "$full" "$i2" >d &&
	test_must_be_empty d &&
	coffer -r repo diff "$full" "$d1" >d &&
	test_must_be_empty d
'

test_expect_success 'a full right after rereads everything, stores < 1% more' '
	coffer -r repo backup --level full --json ds src >f2.json 2>err &&
	test_must_be_empty err &&
	json_check f2.json "
		\$j->{level} eq q(full) && !defined \$j->{parent} &&
		\$j->{bytes_read} == $tree_bytes &&
		\$j->{bytes_new} * 100 < $tree_bytes" &&
	no_growth &&
	coffer -r repo restore ds@latest out-f2 &&
	treecmp src out-f2
'

test_expect_success 'one small file changed: the incremental reads that file only' '
	echo one more line >>src/d3/f04 &&
	coffer -r repo backup --level incremental --json ds src >i3.json &&
	json_check i3.json "
		\$j->{bytes_read} == $(stat -c %s src/d3/f04) && \$j->{files} == 1" &&
	coffer -r repo restore ds@latest out-i3 &&
	treecmp src out-i3
'

test_done
