#!/bin/bash
test_description='key rotate --rewrap puts each pack anew, whole: a kill before a put is committed leaves the old pack whole and a leftover in tmp/, which the next writer removes as it finishes the rewrap; another name of a pack is never written'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

# header_epochs: "EPOCH COUNT" of the pack headers, sorted.
header_epochs() {
	find repo/packs -type f | while read -r p; do
		od -An -tu1 -j5 -N3 "$p" |
			awk "{ print \$1 + 256 * \$2 + 65536 * \$3 }"
	done | sort | uniq -c | awk "{ print \$2, \$1 }"
}

test_expect_success 'setup: a snapshot in several packs, then a rotation' '
	coffer_init_keyfile repo &&
	mkdir src && for i in $(seq 12); do
		head -c 20000 /dev/urandom >src/f$i || return 1
	done &&
	COFFER_PACK_SIZE=60000 coffer -r repo backup --json ds src >b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") && cp -a src src0 &&
	test "$(find repo/packs -type f | wc -l)" -ge 3 &&
	coffer -r repo key rotate &&
	header_epochs >h && cat h && test "$(cut -d" " -f1 h)" = 1
'

test_expect_success 'kill -9 with a pack written anew but not committed: the old one is whole' '
	rm -rf packs0 && cp -a repo/packs packs0 &&
	test_expect_code 137 env COFFER_TEST_RAISE=rewrap-put:2:KILL \
		"$COFFER" -r repo key rotate --rewrap &&
	test_path_is_file repo/rewrap &&
	test "$(ls repo/tmp | wc -l)" = 1 &&
	header_epochs >h && cat h && grep "^1 " h && grep "^2 1\$" h &&
	# Every pack is whole: its records and index as they were, with
	# its old header or its new one.
	(cd packs0 && find . -type f) | while read -r p; do
		cmp -i 120 "packs0/$p" "repo/packs/$p" || return 1
	done &&
	coffer -r repo verify --read-data &&
	rm -rf out && coffer -r repo restore "$sid" out && treecmp src0 out
'

test_expect_success 'the next writer finishes the rewrap and removes the leftover' '
	head -c 20000 /dev/urandom >src/g &&
	coffer -r repo backup ds src 2>err && cat err &&
	grep "key rewrap was cut short: finished it" err &&
	test_path_is_missing repo/rewrap &&
	test_dir_is_empty repo/tmp &&
	coffer -r repo key rotate --rewrap &&
	header_epochs >h && cat h && test "$(cut -d" " -f1 h)" = 2 &&
	coffer -r repo verify --read-data &&
	rm -rf out && coffer -r repo restore "$sid" out && treecmp src0 out
'

test_expect_success 'a pack with another name: the put replaces the pack, the other name keeps its bytes' '
	coffer -r repo key rotate &&
	p=$(find repo/packs -type f | head -1) &&
	ln "$p" other-name && cp "$p" other-name.before &&
	coffer -r repo key rotate --rewrap &&
	cmp other-name other-name.before &&
	! cmp -s "$p" other-name &&
	cmp -i 120 "$p" other-name &&
	header_epochs >h && cat h && test "$(cut -d" " -f1 h)" = 3 &&
	coffer -r repo verify --read-data
'

test_done
