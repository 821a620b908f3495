#!/bin/bash
test_description='damaged packs: restore names what it lost, restores the rest, exits 4'
. "$(dirname "$0")/../lib.sh"

# A fresh copy of the undamaged repository (same repo id, so the catalog
# under XDG_STATE_HOME describes it too).
fresh_repo() {
	rm -rf repo && cp -a pristine repo
}

test_expect_success 'setup: one large file and small ones, backed up' '
	mkdir -p src/big src/small/deeper &&
	random_file src/big/large.bin 16 &&
	for f in a b c d e; do
		printf "small file %s\n" $f >src/small/$f.txt
	done &&
	printf "deeper\n" >src/small/deeper/f.txt &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b.json &&
	id=$(json_get b.json "\$j->{snapshot}") &&
	coffer -r repo restore "$id" check &&
	treecmp src check &&
	cp -a repo pristine &&
	find repo/packs -type f -exec ls -l {} + &&
	pack=$(largest_pack repo) &&
	test "$(stat -c %s "$pack")" -gt $((16 * 1048576))
'

test_expect_success 'a flipped byte in the middle of the pack: status 4' '
	size=$(stat -c %s "$pack") &&
	flip_byte "$pack" $((size / 2)) &&
	test_expect_code 4 coffer -r repo restore "$id" out 2>err &&
	cat err
'

test_expect_success 'stderr names the damaged file and only it' '
	grep -F big/large.bin err &&
	! grep -F small/ err
'

test_expect_success 'the small files are restored identically' '
	treecmp src/small out/small
'

test_expect_success 'the damaged file is not left torn' '
	test_path_is_missing out/big/large.bin
'

test_expect_success 'a restore of the undamaged files alone succeeds' '
	coffer -r repo restore "$id" out-small small &&
	treecmp src/small out-small/small
'

test_expect_success 'a deleted pack: status 4, the lost files named' '
	fresh_repo &&
	rm "$pack" &&
	test_expect_code 4 coffer -r repo restore "$id" out-deleted 2>err &&
	cat err &&
	grep -F big/large.bin err &&
	test_path_is_missing out-deleted/big/large.bin
'

test_expect_success 'files stored in other packs, if any, still restore' '
	for f in a b c d e; do
		if test -e out-deleted/small/$f.txt; then
			cmp src/small/$f.txt out-deleted/small/$f.txt || return 1
		else
			grep -F small/$f.txt err || return 1
		fi
	done
'

test_expect_success 'a truncated pack: status 4, the lost file named, not torn' '
	fresh_repo &&
	truncate -s $(($(stat -c %s "$pack") / 2)) "$pack" &&
	test_expect_code 4 coffer -r repo restore "$id" out-truncated 2>err &&
	cat err &&
	grep -F big/large.bin err &&
	test_path_is_missing out-truncated/big/large.bin
'

test_expect_success 'a pack replaced by another one of the same size: status 4' '
	fresh_repo &&
	random_file "$pack.new" 1 &&
	truncate -s "$(stat -c %s "$pack")" "$pack.new" &&
	mv "$pack.new" "$pack" &&
	test_expect_code 4 coffer -r repo restore "$id" out-replaced 2>err &&
	cat err &&
	grep -F big/large.bin err &&
	test_path_is_missing out-replaced/big/large.bin
'

test_expect_success 'the undamaged repository still restores everything' '
	fresh_repo &&
	coffer -r repo restore "$id" out-ok &&
	treecmp src out-ok
'

test_expect_success 'hard links and neighbours of a damaged file, 1 and 3 threads' '
	rm -rf src2 repo2 &&
	mkdir -p src2/a src2/z &&
	random_file src2/a/big.bin 20 &&
	ln src2/a/big.bin src2/z/big-link &&
	random_file src2/a/other.bin 12 &&
	ln src2/a/other.bin src2/z/other-link &&
	for i in 1 2 3 4 5 6 7 8 9; do
		printf "small %s\n" $i >src2/a/s$i.txt &&
		printf "small %s\n" $i >src2/z/s$i.txt || return 1
	done &&
	coffer_init_keyfile repo2 "$TMP/key2" &&
	coffer -r repo2 backup ds2 src2 &&
	p2=$(largest_pack repo2) &&
	flip_byte "$p2" $(($(stat -c %s "$p2") / 2)) &&
	for t in 1 3; do
		test_expect_code 4 coffer -r repo2 restore --threads $t \
			ds2@latest out2-$t 2>err2-$t || return 1
	done &&
	cat err2-1 &&
	lost=0 &&
	for f in big other; do
		if test -e out2-1/a/$f.bin; then
			cmp src2/a/$f.bin out2-1/a/$f.bin &&
			cmp src2/a/$f.bin out2-1/z/$f-link &&
			test "$(stat -c %i out2-1/a/$f.bin)" = \
			    "$(stat -c %i out2-1/z/$f-link)" || return 1
		else
			lost=$((lost + 1)) &&
			grep -F a/$f.bin err2-1 &&
			grep -F z/$f-link err2-1 &&
			test_path_is_missing out2-1/z/$f-link || return 1
		fi
	done &&
	test $lost = 1 &&
	(cd out2-1 && find . | sort) >list-1 &&
	(cd out2-3 && find . | sort) >list-3 &&
	test_cmp list-1 list-3 &&
	for d in a z; do
		for i in 1 2 3 4 5 6 7 8 9; do
			cmp src2/$d/s$i.txt out2-3/$d/s$i.txt || return 1
		done
	done
'

test_done
