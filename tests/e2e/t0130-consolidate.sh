#!/bin/bash
test_description='consolidate: a synthetic full from catalog rows alone restores as the chain it replaces'
. "$(dirname "$0")/../lib.sh"

probe=$TMP/xattr-probe
: >"$probe"
if setfattr -n user.probe -v 1 "$probe" 2>/dev/null; then
	test_set_prereq XATTR
fi
rm -f "$probe"

# backup_at LEVEL NAME: a snapshot of src at LEVEL (auto: no --level);
# its --json in NAME.json, its id in $NAME.
backup_at() {
	case $1 in
	auto) set -- "$2" ;;
	*) set -- "$2" --level "$1" ;;
	esac
	ba_name_=$1
	shift
	coffer -r repo backup "$@" --json ds src >$ba_name_.json &&
	eval "$ba_name_=\$(json_get $ba_name_.json '\$j->{snapshot}')"
}

test_expect_success 'setup: the hostile tree, a full' '
	mktree src --small 2>/dev/null &&
	coffer_init_keyfile repo &&
	backup_at full s0
'

test_expect_success 'setup: changes, then incremental, differential, incremental, no level' '
	echo more >>"src/names/with space.txt" &&
	rm src/hard/pair2 &&
	mkdir -p src/new/dir &&
	random_file src/new/blob 2 &&
	chmod 600 src/big/neighbour.txt &&
	ln -s ../new/blob src/links/new &&
	backup_at incremental s1 &&

	rm -r src/empty/a &&
	printf "rewritten\n" >"src/names/new
line" &&
	touch -d "2003-03-03 03:03:03.333333333" src/hard/triple1 &&
	mv src/names/-rf src/names/renamed &&
	if test_have_prereq XATTR; then
		setfattr -n user.added -v 1 src/xattr/binary
	fi &&
	backup_at differential s2 &&

	rm src/links/dangling &&
	rm src/big/neighbour.txt && mkdir src/big/neighbour.txt &&
	echo inside >src/big/neighbour.txt/f &&
	head -c 1048576 /dev/urandom >>src/big/mixed.bin &&
	backup_at incremental s3 &&

	rm -r src/new &&
	echo added >src/empty/other/late &&
	backup_at auto s4 &&
	json_check s4.json "\$j->{level} eq q(incremental) && \$j->{parent} eq q($s3)" &&
	cp -a src s4.copy
'

test_expect_success 'consolidate ds@latest with the source moved away' '
	size0=$(dir_bytes repo) &&
	mv src src.away &&
	coffer -r repo consolidate --json ds@latest >cons.json 2>err &&
	mv src.away src &&
	test_must_be_empty err &&
	json_check cons.json "
		\$j->{snapshot} =~ /^[0-9a-f]{32}\z/ &&
		\$j->{source} eq q($s4) && \$j->{level} eq q(full) &&
		\$j->{snapshot} ne q($s4)" &&
	cons=$(json_get cons.json "\$j->{snapshot}") &&
	size1=$(dir_bytes repo) &&
	echo "repository: $size0 -> $size1 bytes" &&
	test $(((size1 - size0) * 100)) -lt "$size0"
'

test_expect_success 'snapshots --json: the synthetic full has level full, depth 0, no parent' '
	coffer -r repo snapshots --json ds >snaps.json &&
	json_check snaps.json "
		my (\$c) = grep { \$_->{id} eq q($cons) } @\$j or die qq(not listed\n);
		\$c->{level} eq q(full) && \$c->{depth} == 0 &&
		!defined \$c->{parent} && \$c->{state} eq q(complete)" &&
	json_check snaps.json "
		my %d = map { \$_->{id} => \$_->{depth} } @\$j;
		\$d{q($s4)} == 3 && \$d{q($s2)} == 1 && \$d{q($s0)} == 0"
'

test_expect_success 'restoring the synthetic full equals restoring the original' '
	coffer -r repo restore "$s4" out-orig &&
	coffer -r repo restore "$cons" out-cons &&
	treecmp out-orig out-cons &&
	treecmp s4.copy out-cons
'

test_expect_success 'ls of both is identical, text and JSON' '
	coffer -r repo ls "$s4" >ls.orig &&
	coffer -r repo ls "$cons" >ls.cons &&
	test_cmp ls.orig ls.cons &&
	coffer -r repo ls --json "$s4" >ls.orig.json &&
	coffer -r repo ls --json "$cons" >ls.cons.json &&
	test_cmp ls.orig.json ls.cons.json
'

test_expect_success 'diff between the original and the synthetic full is empty' '
	coffer -r repo diff "$s4" "$cons" >d &&
	test_must_be_empty d
'

test_expect_success 'ds@full now names the synthetic full' '
	coffer -r repo ls --json ds@full >ls.full.json &&
	test_cmp ls.cons.json ls.full.json
'

test_expect_success 'a differential after it is based on the synthetic full' '
	echo "after the consolidation" >>src/big/neighbour.txt/f &&
	backup_at differential s5 &&
	json_check s5.json "
		\$j->{level} eq q(differential) && \$j->{parent} eq q($cons) &&
		\$j->{bytes_read} < 1048576" &&
	coffer -r repo snapshots --json ds >snaps2.json &&
	json_check snaps2.json "
		my (\$s) = grep { \$_->{id} eq q($s5) } @\$j;
		\$s->{parent} eq q($cons) && \$s->{depth} == 1" &&
	coffer -r repo restore ds@latest out5 &&
	treecmp src out5
'

test_expect_success 'consolidate a middle snapshot, text output: its id alone' '
	coffer -r repo consolidate "$s2" >cons2.out &&
	test_line_count = 1 cons2.out &&
	grep -E "^[0-9a-f]{32}\$" cons2.out &&
	cons2=$(cat cons2.out) &&
	coffer -r repo restore "$s2" out-s2 &&
	coffer -r repo restore "$cons2" out-cons2 &&
	treecmp out-s2 out-cons2
'

test_expect_success 'the originals still restore after consolidating' '
	coffer -r repo restore "$s4" again &&
	treecmp s4.copy again
'

test_expect_success 'consolidate of an unknown snapshot fails cleanly' '
	test_must_fail coffer -r repo consolidate nosuch@latest >out 2>err &&
	test_must_be_empty out &&
	grep nosuch err &&
	test_expect_code 2 coffer -r repo consolidate 2>err &&
	test -s err
'

test_done
