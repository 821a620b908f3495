#!/bin/bash
test_description='everyday mistakes: a moved source, a typo, options after the command, a held lock, init on a full directory'
. "$(dirname "$0")/../lib.sh"

test_expect_success 'setup: a dataset backed up from data/' '
	mkdir data ckpt && printf "a\n" >data/a && printf "w\n" >ckpt/w &&
	coffer_init_keyfile repo &&
	coffer -r repo backup ds data
'

test_expect_success 'a backup of the dataset from another path is refused, naming both' '
	test_expect_code 2 coffer -r repo backup ds ckpt 2>err &&
	cat err &&
	test_line_count = 1 err &&
	grep -F "$TMP/data" err && grep -F "$TMP/ckpt" err &&
	grep -e "--new-source" err &&
	coffer -r repo snapshots --json >s.json &&
	json_check s.json "@\$j == 1"
'

test_expect_success 'a file, a symlink or nothing as the source: status 2, no snapshot left' '
	ln -s data dlink &&
	test_expect_code 2 coffer -r repo backup ds2 data/a 2>err &&
	test_line_count = 1 err && grep "is not a directory" err &&
	test_expect_code 2 coffer -r repo backup ds2 dlink 2>err &&
	test_line_count = 1 err && grep "symbolic link" err &&
	test_expect_code 2 coffer -r repo backup ds2 nothere 2>err &&
	test_line_count = 1 err && grep "No such file" err &&
	coffer -r repo snapshots --json >s.json &&
	json_check s.json "@\$j == 1"
'

test_expect_success '--new-source takes it, as a new full' '
	coffer -r repo backup --json --new-source ds ckpt >b.json &&
	json_check b.json "\$j->{level} eq q(full)" &&
	coffer -r repo backup --json ds ckpt >b2.json &&
	json_check b2.json "\$j->{level} eq q(incremental)"
'

test_expect_success 'snapshots shows the chain depth and the source' '
	coffer -r repo snapshots >table &&
	cat table &&
	head -1 table | grep "DEPTH" &&
	head -1 table | grep "SOURCE" &&
	grep "incremental *1 .*$TMP/ckpt" table
'

test_expect_success 'global options after the command' '
	printf "b\n" >ckpt/b &&
	coffer backup -q -r repo ds ckpt >out 2>err &&
	test_must_be_empty out && test_must_be_empty err &&
	coffer snapshots --repo=repo --json >s.json &&
	json_check s.json "@\$j == 4"
'

test_expect_success 'a mistyped command gets a suggestion' '
	test_expect_code 2 coffer -r repo snapshot 2>err &&
	grep "did you mean .snapshots.?" err &&
	test_expect_code 2 coffer bakup 2>err &&
	grep "did you mean .backup.?" err
'

test_expect_success 'init on a directory that holds something: status 2' '
	mkdir full && printf x >full/x &&
	test_expect_code 2 coffer init --key-file k2 full 2>err &&
	grep "not empty" err &&
	test_path_is_missing k2
'

test_expect_success 'a held lock: --no-wait fails at once, --wait gives up in time' '
	{ flock repo/locks/writer sleep 30 & } && holder=$! &&
	sleep 0.5 &&
	test_expect_code 3 coffer --no-wait -r repo backup ds ckpt 2>err1;
	r1=$?;
	start=$(date +%s) &&
	test_expect_code 3 coffer -r repo backup --wait 2s ds ckpt 2>err2;
	r2=$?; end=$(date +%s);
	kill $holder; wait $holder 2>/dev/null;
	test $r1 = 0 && test $r2 = 0 &&
	cat err1 err2 &&
	grep "locked by another writer" err1 &&
	grep "still locked by another writer after 2 s" err2 &&
	test $((end - start)) -ge 2 && test $((end - start)) -lt 20
'

test_expect_success 'with the lock free again, a backup goes through' '
	coffer -r repo backup ds ckpt
'

test_done
