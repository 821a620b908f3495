#!/bin/bash
test_description='a file that grows while it is backed up: read once more, then reported, status 1, never recorded torn'
. "$(dirname "$0")/../lib.sh"

# writer.pl STOP SECONDS FILE...: append 64 KiB blocks to each FILE in turn,
# with short sleeps, until the file STOP exists, SECONDS have passed or
# 512 MiB went into each file.  Each block is distinct (its number), so a
# torn copy would not pass for a consistent one.
cat >writer.pl <<\EOF
use strict;
use warnings;
use Time::HiRes qw(sleep time);
my ($stop, $secs, @files) = @ARGV;
my @fh;
for (@files) {
	open(my $fh, '>>', $_) or die "$_: $!\n";
	binmode $fh;
	push @fh, $fh;
}
my $end = time + $secs;
for (my $n = 0; $n < 8192 && !-e $stop && time < $end; $n++) {
	my $block = sprintf("block %012d\n", $n) x 3450;
	$block = substr($block, 0, 65536);
	for my $fh (@fh) {
		syswrite($fh, $block) == 65536 or die "write: $!\n";
	}
	sleep 0.01;
}
EOF

# size FILE
size() {
	stat -c %s "$1"
}

# grow.sh, run by COFFER_TEST_BEFORE_CHANGE_CHECK each time the walk has
# read a file to its end: appends a line to old.bin and new-*.bin (every
# time, or with GROW_ONCE the first time only) and logs each call.
cat >grow.sh <<\EOF
case $COFFER_TEST_PATH in
*/old.bin|*/new-*.bin) ;;
*) exit 0 ;;
esac
echo "$COFFER_TEST_PATH" >>"$TMP/hook.log"
if test -n "$GROW_ONCE" && grep -qxF "$COFFER_TEST_PATH" "$TMP/grown"; then
	exit 0
fi
echo "$COFFER_TEST_PATH" >>"$TMP/grown"
echo "appended while read" >>"$COFFER_TEST_PATH"
EOF

# grow_backup [--once] OUT: an incremental of src with grow.sh as the hook,
# JSON to OUT.json, stderr to OUT.err; its exit status in $status.
grow_backup() {
	once=
	if test "$1" = --once; then
		once=t
		shift
	fi
	rm -f hook.log && : >grown &&
	GROW_ONCE=$once COFFER_TEST_BEFORE_CHANGE_CHECK="sh '$TMP/grow.sh'" \
		"$COFFER" -r repo backup --level incremental --json ds src \
		>$1.json 2>$1.err
	status=$?
	cat $1.err
}

test_expect_success 'setup: an 8 MiB file and a small one, a full' '
	mkdir -p src/sub &&
	random_file src/old.bin 8 &&
	echo first >src/sub/other.txt &&
	sha256sum <src/old.bin >old.sha &&
	size src/old.bin >old.size &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --level full --json ds src >full.json
'

test_expect_success 'files written to during every read: read twice, status 1, the warning names them' '
	touch src/old.bin &&
	echo "change 1" >>src/sub/other.txt &&
	cp src/sub/other.txt other.expect &&
	random_file src/new-1.bin 1 &&
	grow_backup b1 &&
	test "$status" = 1 &&
	sort hook.log >calls &&
	printf "%s\n" src/new-1.bin src/new-1.bin src/old.bin src/old.bin \
		>calls.expect &&
	test_cmp calls.expect calls &&
	grep -E "^warning: .src/old\.bin. changed during the backup; kept its previous version" b1.err &&
	grep -E "^warning: .src/new-1\.bin. changed during the backup; not stored" b1.err &&
	test_line_count = 2 b1.err &&
	json_check b1.json "\$j->{warnings} == 2 &&
		\$j->{changed_during_backup} == 2 &&
		\$j->{level} eq q(incremental)"
'

test_expect_success 'the snapshot is complete' '
	id=$(json_get b1.json "\$j->{snapshot}") &&
	coffer -r repo snapshots --json ds >snaps.json &&
	json_check snaps.json "
		my (\$s) = grep { \$_->{id} eq q($id) } @\$j;
		\$s && \$s->{state} eq q(complete)"
'

test_expect_success 'restored: the earlier version of old.bin, byte for byte, no new file' '
	coffer -r repo restore "$id" out &&
	test "$(size out/old.bin)" = "$(cat old.size)" &&
	sha256sum <out/old.bin >restored.sha &&
	test_cmp old.sha restored.sha &&
	test_path_is_missing out/new-1.bin &&
	test_cmp other.expect out/sub/other.txt
'

test_expect_success 'ls agrees: the earlier size, the new file not listed' '
	coffer -r repo ls --json "$id" >ls.json &&
	json_check ls.json "
		my %e = map { \$_->{path} => \$_ } @\$j;
		\$e{q(old.bin)} && \$e{q(old.bin)}{size} == $(cat old.size) &&
		!\$e{q(new-1.bin)} && \$e{q(sub/other.txt)}"
'

test_expect_success 'written to during the first read only: read once more, stored as it is then' '
	grow_backup --once b2 &&
	test "$status" = 0 &&
	test_must_be_empty b2.err &&
	sort hook.log >calls &&
	test_cmp calls.expect calls &&
	json_check b2.json "\$j->{warnings} == 0 &&
		\$j->{changed_during_backup} == 0" &&
	rm -rf out && coffer -r repo restore ds@latest out &&
	treecmp src out &&
	sha256sum <src/old.bin >old.sha &&
	size src/old.bin >old.size
'

# A real writer racing the read: whichever way the race goes, what is
# recorded is a consistent version, never a torn one.
test_expect_success 'an incremental while a writer appends: never recorded torn' '
	rm -f stop &&
	{ perl writer.pl stop 120 src/old.bin & } &&
	wpid=$! &&
	n=0 &&
	while test "$(size src/old.bin)" = "$(cat old.size)"; do
		n=$((n + 1))
		test $n -lt 500 || { echo "the writer does not write"; kill $wpid; return 1; }
		sleep 0.01
	done &&
	{
		coffer -r repo backup --level incremental --json ds src \
			>b3.json 2>b3.err
		status=$?
		touch stop
		wait $wpid
	} &&
	echo "backup status $status" && cat b3.err &&
	rm -rf out && coffer -r repo restore ds@latest out old.bin &&
	case $status in
	0)
		test_must_be_empty b3.err &&
		test "$(size out/old.bin)" -gt "$(cat old.size)" &&
		cmp -n "$(size out/old.bin)" out/old.bin src/old.bin ;;
	1)
		grep -E "^warning: .src/old\.bin. changed during the backup; kept its previous version" b3.err &&
		sha256sum <out/old.bin >restored.sha &&
		test_cmp old.sha restored.sha ;;
	*)
		echo "backup exited $status"; false ;;
	esac
'

test_expect_success 'the writer stopped: the next incremental records the final versions' '
	coffer -r repo backup --level incremental --json ds src >after.json 2>err &&
	test_must_be_empty err &&
	json_check after.json "\$j->{warnings} == 0" &&
	rm -rf out && coffer -r repo restore ds@latest out &&
	treecmp src out
'

test_done
