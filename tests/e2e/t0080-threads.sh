#!/bin/bash
test_description='the pipeline stores the same snapshot on any number of threads'
. "$(dirname "$0")/../lib.sh"

# One thread runs every pool loop on the calling thread; two is the
# default here; five is more threads than cores, so batches, loops and
# packs overlap in orders the others never see.  Whatever the count, the
# cut points and chunk ids must be the same (a later backup finds every
# chunk stored), the entries the same, and the snapshot must restore.
# The 72 MiB file makes every run cross a pack boundary (64 MiB).
test_expect_success 'setup: the hostile tree, 10,000 small files, 72 MiB more' '
	mktree src 2>/dev/null &&
	mkdir src/shards &&
	random_file src/shards/big 72 &&
	coffer_init_keyfile repo
'

test_expect_success 'backup with --threads 1 stores everything' '
	coffer -r repo backup --level full --threads 1 --json ds src >b1.json &&
	json_check b1.json "\$j->{bytes_new} > 90 * 1048576 &&
		\$j->{packs} >= 2 && \$j->{warnings} == 0" &&
	id1=$(json_get b1.json "\$j->{snapshot}") &&
	coffer -r repo ls "$id1" >ls1
'

for t in 2 5; do
	test_expect_success "backup with --threads $t: the same chunks and entries" '
		coffer -r repo backup --level full --threads '$t' --json ds src \
			>b'$t'.json &&
		json_check b'$t'.json "\$j->{bytes_new} == 0 &&
			\$j->{bytes_read} == $(json_get b1.json "\$j->{bytes_read}") &&
			\$j->{files} == $(json_get b1.json "\$j->{files}")" &&
		id=$(json_get b'$t'.json "\$j->{snapshot}") &&
		coffer -r repo ls "$id" >ls'$t' &&
		test_cmp ls1 ls'$t'
	'
done

test_expect_success 'a fresh repository with --threads 5 stores what 1 thread stored' '
	coffer init --key-file key5 repo5 &&
	COFFER_KEY_FILE=$TMP/key5 coffer -r repo5 backup --threads 5 --json \
		ds src >f5.json &&
	json_check f5.json "\$j->{bytes_new} ==
		$(json_get b1.json "\$j->{bytes_new}")"
'

for t in 1 2 5; do
	test_expect_success "the snapshot taken with --threads $t restores identically" '
		id=$(json_get b'$t'.json "\$j->{snapshot}") &&
		coffer -r repo restore "$id" out'$t' &&
		treecmp src out'$t'
	'
done

# The hook runs under coffer's own sh -c, whose parent is coffer: it
# lists the threads alive while the walk reads a file.  With 300 files the
# walker is still going when the first is read: it runs at most 64
# entries ahead.  A thread may end between the shell's glob and cat's
# open (the walker, once the walk is over, while the last files are
# read): the hook must not fail then, as a failed hook is a warning and
# the backup's status 1.
test_expect_success 'threads are named after their jobs (top -H, perf)' '
	mkdir names &&
	for i in $(seq 300); do echo $i >names/$i || return 1; done &&
	COFFER_TEST_BEFORE_CHANGE_CHECK="cat /proc/\$PPID/task/*/comm \
		>>$TMP/comm 2>/dev/null; :" \
		coffer -r repo backup --threads 2 names names &&
	sort -u comm >comm.u && cat comm.u &&
	grep -qx "coffer/walk" comm.u &&
	grep -qx "coffer/record" comm.u &&
	grep -qx "coffer/pool" comm.u
'

# Restore writers on several threads each get their own working
# directory and umask (unshare(CLONE_FS)); where that is refused, as by
# some containers' seccomp filters, they take turns instead.
NOUNSHARE=$BUILD/tests/nounshare
if [ -x "$NOUNSHARE" ] && "$NOUNSHARE" true 2>/dev/null &&
    ! "$NOUNSHARE" unshare --user true 2>/dev/null; then
	test_set_prereq NOUNSHARE
fi

test_expect_success NOUNSHARE 'with unshare refused, 3 threads restore identically' '
	id=$(json_get b1.json "\$j->{snapshot}") &&
	"$NOUNSHARE" "$COFFER" -r repo restore --threads 3 "$id" out-shared \
		>out 2>err &&
	test_must_be_empty err &&
	treecmp src out-shared
'

test_expect_success 'verify --read-data finds every chunk sound' '
	coffer -r repo verify --read-data >out 2>err &&
	test_must_be_empty err
'

test_done
