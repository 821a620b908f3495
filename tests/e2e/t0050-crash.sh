#!/bin/bash
test_description='kill -9 in the middle of a backup: complete snapshots survive, the next run cleans up'
. "$(dirname "$0")/../lib.sh"

test_expect_success 'setup: a first complete snapshot, kept as a copy' '
	mktree src --small 2>/dev/null &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b1.json &&
	id1=$(json_get b1.json "\$j->{snapshot}") &&
	cp -a src s1.copy
'

test_expect_success 'setup: 400 MiB of new data' '
	mkdir src/bulk &&
	for i in 1 2 3 4 5 6 7 8; do
		random_file src/bulk/shard-$i 50 || return 1
	done
'

# Kill the backup once a pack is being written in tmp/ and, if it gets
# that far, after at least one pack was committed to packs/.
test_expect_success 'kill -9 a backup while it writes packs' '
	packs0=$(find repo/packs -type f | wc -l) &&
	{ "$COFFER" -r repo backup ds src >crash.out 2>crash.err & } &&
	pid=$! &&
	n=0 &&
	while kill -0 $pid 2>/dev/null; do
		ntmp=$(find repo/tmp -type f | wc -l)
		npacks=$(find repo/packs -type f | wc -l)
		if test "$ntmp" -gt 0 &&
		    { test "$npacks" -gt "$packs0" || test $n -ge 150; }; then
			break
		fi
		sleep 0.02
		n=$((n + 1))
		test $n -lt 2000 || break
	done &&
	echo "killing after $n polls: tmp $ntmp, packs $packs0 -> $npacks" &&
	echo $((npacks - packs0)) >durable &&
	kill -9 $pid &&
	{ wait $pid; status=$?; } &&
	test "$status" = 137 &&
	find repo/tmp repo/packs -type f | sort
'

test_expect_success 'right after the crash the complete snapshot restores' '
	coffer -r repo restore "$id1" early &&
	treecmp s1.copy early
'

test_expect_success 'right after the crash @latest is still the complete one' '
	coffer -r repo restore ds@latest early-latest hard &&
	treecmp s1.copy/hard early-latest/hard &&
	test_path_is_missing early-latest/bulk &&
	coffer -r repo snapshots --json >crashed.json &&
	json_check crashed.json "
		!grep { \$_->{state} eq q(complete) && \$_->{id} ne q($id1) } @\$j"
'

test_expect_success 'the next backup succeeds without waiting and cleans tmp/' '
	timeout 120 "$COFFER" --no-wait -r repo backup --json ds src >b3.json &&
	id3=$(json_get b3.json "\$j->{snapshot}") &&
	test_dir_is_empty repo/tmp
'

# The killed run committed none of its packs (a run commits every 16
# packs' worth): the next command's sync reads back those that were
# durable, so the next backup does not store their chunks again.  Each
# holds at least 48 MiB of shard data.
test_expect_success 'the next backup stores again nothing the killed run made durable' '
	d=$(cat durable) &&
	if test "$d" -gt 0; then
		json_check b3.json "\$j->{bytes_new} <= (400 - 48 * $d) * 1048576"
	else
		echo "no pack was durable when the run was killed"
	fi
'

test_expect_success 'snapshots: the interrupted one is failed, the others complete' '
	coffer -r repo snapshots --json >snaps.json &&
	cat snaps.json &&
	json_check snaps.json "
		my %s = map { \$_->{id} => \$_->{state} } @\$j;
		my @failed = grep { \$s{\$_} eq q(failed) } keys %s;
		\$s{q($id1)} eq q(complete) && \$s{q($id3)} eq q(complete) &&
		@\$j == 3 && @failed == 1"
'

test_expect_success 'snapshots: the table shows the failed state' '
	coffer -r repo snapshots >table &&
	grep failed table
'

test_expect_success 'the earlier complete snapshot restores identically' '
	coffer -r repo restore "$id1" out1 &&
	treecmp s1.copy out1
'

test_expect_success 'the new snapshot restores identically' '
	coffer -r repo restore "$id3" out3 &&
	treecmp src out3 &&
	coffer -r repo restore ds@latest out-latest bulk/shard-8 &&
	cmp src/bulk/shard-8 out-latest/bulk/shard-8
'

command -v gdb >/dev/null && test_set_prereq GDB

# How many of repo's snapshots are complete.
complete_snapshots() {
	coffer -r repo snapshots --json | perl -MJSON::PP -0e \
	    "print scalar grep { \$_->{state} eq q(complete) } \
	    @{decode_json(<STDIN>)}"
}

# The last packs are made durable at the end of the run, in the background
# while the snapshot record is written: stop the process right there, as
# the last pack starts finishing, and it must not have committed the
# snapshot as complete (that state commits only once every pack is in
# packs/).
test_expect_success GDB 'killed as its last pack is finishing: not complete' '
	rm -rf src/late && mkdir src/late &&
	random_file src/late/a 6 && random_file src/late/b 3 &&
	n0=$(complete_snapshots) &&
	COFFER_PACK_SIZE=4000000 gdb -q -batch -nx \
	    -ex "set breakpoint pending on" \
	    -ex "break packer_flush" -ex run \
	    -ex "break pack_writer_finish_start" -ex continue \
	    -ex kill \
	    --args "$COFFER" -r repo backup ds src >gdb.out 2>&1 &&
	cat gdb.out &&
	grep -q "Breakpoint 2, pack_writer_finish_start" gdb.out &&
	n1=$(complete_snapshots) &&
	echo "complete snapshots: $n0 -> $n1" &&
	test "$n1" = "$n0" &&
	coffer -r repo backup ds src &&
	coffer -r repo restore ds@latest out-late late &&
	treecmp src/late out-late/late
'

# A pack that cannot be created (a full disk, say) mid-run: the run must
# fail and record nothing complete.  Once, such a failure while a batch
# moved on was taken for "the file changed while read": the file was read
# again, its chunks were taken as stored, and the run went on to record a
# complete snapshot whose chunks were in no pack.
# LeakSanitizer cannot run under ptrace: a binary built by make asan
# ends in a fatal LSan error at exit under gdb, so leaks are not looked
# for there (the same run without gdb is checked by the rest of the suite).
gdb_asan_options=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0

test_expect_success GDB 'a pack that cannot be created fails the run' '
	rm -rf src/nospace && mkdir src/nospace &&
	for i in 1 2 3 4 5 6 7 8; do
		random_file src/nospace/f$i 4 || return 1
	done &&
	n0=$(complete_snapshots) &&
	ASAN_OPTIONS=$gdb_asan_options COFFER_PACK_SIZE=2000000 \
	    gdb -q -batch -nx \
	    -ex "set breakpoint pending on" -ex "set confirm off" \
	    -ex "break pack_writer_new" -ex "ignore 1 1" -ex run \
	    -ex "return (struct pack_writer *) 0" -ex delete -ex continue \
	    --args "$COFFER" -r repo backup ds src >nospace.out 2>&1 &&
	cat nospace.out &&
	grep -q "Breakpoint 1, pack_writer_new" nospace.out &&
	! grep -q "exited normally" nospace.out &&
	grep -q "exited with code" nospace.out &&
	n1=$(complete_snapshots) &&
	echo "complete snapshots: $n0 -> $n1" &&
	test "$n1" = "$n0" &&
	coffer -r repo verify --read-data &&
	coffer -r repo backup ds src &&
	coffer -r repo restore ds@latest out-nospace nospace &&
	treecmp src/nospace out-nospace/nospace
'

test_done
