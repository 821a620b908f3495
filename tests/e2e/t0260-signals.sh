#!/bin/bash
test_description='SIGTERM, SIGINT and SIGHUP stop a backup or verify cleanly; a second signal stops it at once'
. "$(dirname "$0")/../lib.sh"

# start_backup: a backup of src in the background, once it is writing a
# pack ($pid).  Then the test signals it.
start_backup() {
	{ "$COFFER" -r repo backup ds src >bk.out 2>bk.err & } &&
	pid=$! &&
	n=0 &&
	while kill -0 $pid 2>/dev/null &&
	    test "$(find repo/tmp -type f | wc -l)" = 0 && test $n -lt 1500; do
		sleep 0.02; n=$((n + 1))
	done &&
	kill -0 $pid
}

test_expect_success 'setup: a complete snapshot, then 400 MiB of new data' '
	mkdir src && printf "first\n" >src/first &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b1.json &&
	id1=$(json_get b1.json "\$j->{snapshot}") &&
	cp -a src s1 &&
	for i in 1 2 3 4 5 6 7 8; do random_file src/shard-$i 50 || return 1; done
'

for sig in TERM INT HUP; do
	test_expect_success "SIG$sig stops the backup: one line, failed, tmp/ clean" '
		start_backup &&
		kill -'$sig' $pid &&
		{ wait $pid; echo $? >status; } &&
		cat bk.err &&
		case '$sig' in TERM) want=143 ;; INT) want=130 ;; HUP) want=129 ;; esac &&
		test "$(cat status)" = $want &&
		test_line_count = 1 bk.err &&
		grep "interrupted by SIG'$sig'.*marked failed" bk.err &&
		test_dir_is_empty repo/tmp &&
		coffer -r repo snapshots --json >s.json &&
		json_check s.json "!grep({ \$_->{state} eq q(running) } @\$j) &&
			grep({ \$_->{state} eq q(failed) } @\$j) >= 1" &&
		coffer -r repo restore "$id1" out-'$sig' && treecmp s1 out-'$sig'
	'
done

test_expect_success 'a second signal ends it at once; the next backup completes' '
	start_backup &&
	kill -TERM $pid && kill -TERM $pid &&
	{ wait $pid; test $? = 143; } &&
	coffer -r repo restore "$id1" out-twice && treecmp s1 out-twice &&
	coffer -r repo backup --json ds src >b2.json &&
	test_dir_is_empty repo/tmp &&
	coffer -r repo snapshots --json >s.json &&
	json_check s.json "!grep({ \$_->{state} eq q(running) } @\$j)"
'

# The signal arrives at a chosen point (COFFER_TEST_RAISE, coffer(1)'s
# TEST HOOKS), so the run is stopped mid-way whatever the machine's speed.
test_expect_success 'SIGINT stops verify --read-data after a pack; the next run resumes' '
	test "$(find repo/packs -type f | wc -l)" -ge 3 &&
	test_expect_code 130 env COFFER_TEST_RAISE=verify-pack:1:INT \
		"$COFFER" -r repo verify --read-data >v.out 2>v.err &&
	cat v.out v.err &&
	grep "interrupted by SIGINT" v.err &&
	coffer -r repo verify --read-data >v2.out &&
	cat v2.out &&
	grep "resumed the read-data pass" v2.out
'

test_expect_success 'SIGINT stops a restore between files: what is there is whole' '
	coffer -r repo backup ds src >/dev/null &&
	test_expect_code 130 env COFFER_TEST_RAISE=restore-file:2:INT \
		"$COFFER" -r repo restore ds@latest rst >r.out 2>r.err &&
	cat r.err &&
	grep "restore interrupted by SIGINT" r.err &&
	test "$(find rst -type f | wc -l)" -ge 2 &&
	test "$(find rst -type f | wc -l)" -lt "$(find src -type f | wc -l)" &&
	for f in $(cd rst && find . -type f ! -name ".coffer-*"); do
		cmp "src/$f" "rst/$f" || return 1
	done &&
	test -z "$(find rst -name ".coffer-*")"
'

test_done
