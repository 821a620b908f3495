#!/bin/bash
test_description='deduplication: the same data is stored once'
. "$(dirname "$0")/../lib.sh"

# Enough unique data that the second backup's own records (snapshot rows,
# pack headers) must be small against it: about 52 MiB of unique content,
# mostly incompressible, and one 8 MiB file twice.
test_expect_success 'setup: a tree with duplicate and unique data' '
	mktree src --small 2>/dev/null &&
	mkdir src/data &&
	random_file src/data/shard-a 8 &&
	cp -p src/data/shard-a src/data/shard-a-copy &&
	random_file src/data/shard-b 24 &&
	coffer_init_keyfile repo
'

test_expect_success 'first backup stores each duplicate once' '
	coffer -r repo backup --json ds src >b1.json &&
	size1=$(dir_bytes repo) &&
	echo "repository: $size1 bytes" &&
	# Unique content: 32 MiB under data/, 20 MiB big/mixed.bin, under
	# 1 MiB elsewhere; a second copy of shard-a would add 8 MiB.
	test "$size1" -lt $((55 * 1048576)) &&
	id1=$(json_get b1.json "\$j->{snapshot}")
'

test_expect_success 'second full backup of the same tree: silent, repository grows < 1%' '
	coffer -r repo backup --level full ds src >stdout 2>err &&
	test_must_be_empty stdout &&
	test_must_be_empty err &&
	size2=$(dir_bytes repo) &&
	echo "repository: $size1 -> $size2 bytes" &&
	test $(((size2 - size1) * 100)) -lt "$size1"
'

test_expect_success 'backup --json of the same tree reports almost nothing new' '
	coffer -r repo backup --level full --json ds src >b3.json &&
	json_check b3.json "
		my \$read = \$j->{bytes_read};
		\$read >= 40 * 1048576 &&
		\$j->{bytes_new} * 100 < \$read &&
		\$j->{bytes_stored} * 100 < \$read" &&
	id3=$(json_get b3.json "\$j->{snapshot}") &&
	test "$id3" != "$id1"
'

test_expect_success 'three complete snapshots, distinct ids' '
	coffer -r repo snapshots --json >snaps.json &&
	json_check snaps.json "
		my %ids = map { \$_->{id} => 1 } @\$j;
		@\$j == 3 && keys(%ids) == 3 &&
		!grep { \$_->{state} ne q(complete) } @\$j"
'

test_expect_success 'the newest and the first snapshot both restore identically' '
	coffer -r repo restore ds@latest out-latest &&
	treecmp src out-latest &&
	coffer -r repo restore "$id1" out-first &&
	treecmp src out-first
'

test_expect_success 'an insertion near the start of a file costs little' '
	size3=$(dir_bytes repo) &&
	{ printf "inserted bytes\n"; cat src/data/shard-b; } >shard &&
	mv shard src/data/shard-b &&
	coffer -r repo backup ds src &&
	size4=$(dir_bytes repo) &&
	echo "repository: $size3 -> $size4 bytes" &&
	test $((size4 - size3)) -lt $((12 * 1048576)) &&
	coffer -r repo restore ds@latest out-changed &&
	treecmp src out-changed
'

test_done
