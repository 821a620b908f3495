#!/bin/bash
test_description='coffer run over a simulated month and more, hour by hour with --now, against an independent model: levels, exports, retention, drills; kept snapshots restore'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

# From Wednesday 2026-11-25 00:00 to Monday 2027-01-04 00:00, hourly: two
# monthly fulls (the first Sundays are 2026-12-06 and 2027-01-03), a
# year's turn, five weekly drills; except that the host is down on
# 2026-12-01 from 00:00 to 09:00: the slots it misses are done once, at
# 09:00.
START=$(date -u -d 2026-11-25T00:00:00Z +%s)
HOURS=${COFFER_TEST_HOURS:-960}
DOWN_FROM=$(date -u -d 2026-12-01T00:00:00Z +%s)
DOWN_TO=$(date -u -d 2026-12-01T09:00:00Z +%s)

test_expect_success 'setup: a repository, a tree, a policy' '
	coffer_init_keyfile repo &&
	mkdir -p src/sub off expect &&
	echo start >src/sub/log.txt &&
	echo keep >src/constant.txt &&
	cat >p.policy <<-EOF
	[repository]
	path = $TMP/repo
	key-file = $TMP/key

	[dataset ds]
	path = $TMP/src
	full = monthly first sunday 02:00
	differential = weekly wednesday 02:00
	incremental = daily 02:00

	[retention]
	keep-daily = 4
	keep-weekly = 2
	schedule = daily 04:00

	[export off]
	to = $TMP/off
	full = weekly sunday 03:00
	incremental = daily 03:00

	[drill weekly]
	schedule = weekly monday 06:00
	EOF
'

# The tree changes every morning at 01:00 (before the 02:00 slot): a line
# appended, a file per day, one of them deleted now and then.
change_tree() {
	d=$1
	echo "day $d" >>src/sub/log.txt &&
	echo "$d" >"src/day-$d.txt" &&
	if [ $((d % 3)) = 2 ]; then rm -f "src/day-$((d - 2)).txt"; fi
}

test_expect_success "$HOURS hourly runs with --now (the tree copied at each backup)" '
	: >times &&
	i=0 &&
	while [ $i -lt $HOURS ]; do
		t=$((START + i * 3600)) &&
		i=$((i + 1)) &&
		if [ $t -ge $DOWN_FROM ] && [ $t -lt $DOWN_TO ]; then
			continue
		fi &&
		now=$(date -u -d @$t +%Y-%m-%dT%H:%M:%SZ) &&
		if [ "$(date -u -d @$t +%H)" = 01 ]; then
			change_tree $(( (t - START) / 86400 ))
		fi &&
		echo $t >>times &&
		coffer run --policy p.policy --now "$now" --json >run.json ||
			{ cat run.json; return 1; }
		sid=$(sed -n "s/.*\"action\":\"backup\".*\"detail\":\"snapshot \([0-9a-f]*\),.*/\1/p" run.json) &&
		if [ -n "$sid" ]; then cp -a src "expect/$sid"; fi &&
		if grep -q "\"action\"" run.json; then
			cat run.json >>runs.json
		fi || return 1
	done &&
	test -s runs.json
'

# The model: the same policy, evaluated from scratch in perl, prints the
# actions it expects, "TIME KIND SUBJECT LEVEL", and the times of the
# snapshots retention keeps at the end.
cat >model.pl <<'EOF'
use strict; use warnings; use POSIX qw(strftime floor);
my @times = map { chomp; $_ } `cat times`;
my %wd = (sunday => 0, monday => 1, tuesday => 2, wednesday => 3,
    thursday => 4, friday => 5, saturday => 6);
# The newest slot at or before $t of a schedule [kind, hh, mm, day, nth].
sub slot {
	my ($s, $t) = @_;
	my ($kind, $hh, $mm, $wday, $nth) = @$s;
	for (my $d = floor($t / 86400); $d > floor($t / 86400) - 800; $d--) {
		my $x = $d * 86400 + $hh * 3600 + $mm * 60;
		next if $x > $t;
		my @g = gmtime($d * 86400);
		next if $kind eq "weekly" && $g[6] != $wday;
		next if $kind eq "monthly" && ($g[6] != $wday ||
		    int(($g[3] - 1) / 7) != $nth - 1);
		return $x;
	}
	return -1;
}
my @full = ("monthly", 2, 0, $wd{sunday}, 1);
my @diff = ("weekly", 2, 0, $wd{wednesday});
my @incr = ("daily", 2, 0);
my @xfull = ("weekly", 3, 0, $wd{sunday});
my @xincr = ("daily", 3, 0);
my @ret = ("daily", 4, 0);
my @drill = ("weekly", 6, 0, $wd{monday});
my @snaps;	# [time, level, parent time] of the snapshots there are
my @bundles;	# [time, level]
my ($forgot, $pruned, $drilled) = (0, 0, 0);
sub done {	# newest time at this level or a higher one (0 full, 1, 2)
	my ($list, $lvl) = @_;
	my $best = 0;
	for (@$list) { $best = $_->[0] if $_->[1] <= $lvl && $_->[0] > $best }
	return $best;
}
sub due {	# the level due for schedules [f, d, i] and what was done
	my ($t, $sched, $list) = @_;
	my @done = map { done($list, $_) } 0 .. 2;
	for my $l (0 .. 2) {
		next unless $sched->[$l];
		my $s = slot($sched->[$l], $t);
		return $done[0] == 0 ? 0 : $l if $s > $done[$l];
	}
	return 0 if $done[0] == 0 && $done[2] == 0;
	return -1;
}
my @lv = ("full", "differential", "incremental");
sub keep {	# retention: keep-daily 4, keep-weekly 2; kept ones rebased
	my @s = sort { $b->[0] <=> $a->[0] } @snaps;
	my %k;
	for my $rule (["%Y-%m-%d", 4], ["%G-%V", 2]) {
		my ($fmt, $n) = @$rule; my $last;
		for my $x (@s) {
			last if $n == 0;
			my $b = strftime($fmt, gmtime($x->[0]));
			next if defined $last && $b eq $last;
			$k{$x->[0]} = 1; $last = $b; $n--;
		}
	}
	# A kept one whose parent goes stands on its nearest kept ancestor
	# (oldest first, so that an ancestor's new level is known): a
	# differential on a full, an incremental on another, or a full.
	my %by = map { $_->[0] => $_ } @snaps;
	for my $x (sort { $a->[0] <=> $b->[0] } grep { $k{$_->[0]} } @snaps) {
		my $p = $x->[2];
		next if !$p || $k{$p};
		$p = $by{$p}[2] while $p && !$k{$p};
		$x->[2] = $p;
		$x->[1] = !$p ? 0 : $by{$p}[1] == 0 ? 1 : 2;
	}
	@snaps = grep { $k{$_->[0]} } @snaps;
}
for my $t (@times) {
	my $when = strftime("%Y-%m-%dT%H:%M:%SZ", gmtime($t));
	my $l = due($t, [\@full, \@diff, \@incr], \@snaps);
	if ($l >= 0) {
		my $parent = $l == 0 ? 0 : $l == 1 ? done(\@snaps, 0) :
		    (sort { $b <=> $a } map { $_->[0] } @snaps)[0];
		push @snaps, [$t, $l, $parent];
		print "$when backup ds $lv[$l]\n";
	}
	$l = due($t, [\@xfull, undef, \@xincr], \@bundles);
	if ($l >= 0 && @snaps) {
		push @bundles, [$t, $l];
		print "$when export off $lv[$l]\n";
	}
	if (slot(\@ret, $t) > $forgot) {
		keep();
		$forgot = $t;
		print "$when forget ds -\n";
	}
	if (slot(\@ret, $t) > $pruned) {
		$pruned = $t;
		print "$when prune - -\n";
	}
	if (slot(\@drill, $t) > $drilled) {
		$drilled = $t;
		print "$when drill weekly/ds -\n";
	}
}
open(my $k, ">", "model-kept") or die;
print $k strftime("%Y-%m-%dT%H:%M:%SZ", gmtime($_->[0])), "\n"
    for sort { $a->[0] <=> $b->[0] } @snaps;
EOF

# What the runs did, from their JSON: "TIME KIND SUBJECT LEVEL", and any
# action that did not succeed.
cat >actual.pl <<'EOF'
use strict; use warnings; use JSON::PP;
local $/;
my $text = <STDIN>;
my $js = JSON::PP->new;
while ($text =~ /\S/) {
	my ($j, $n) = $js->decode_prefix($text);
	$text = substr($text, $n);
	for my $a (@{$j->{actions}}) {
		print "$j->{time} $a->{action} ", $a->{subject} eq "" ? "-" :
		    $a->{subject}, " ", $a->{level} // "-", "\n";
		print STDERR "FAILED: $j->{time} $a->{action}: $a->{detail}\n"
		    if $a->{status} != 0;
	}
}
EOF

test_expect_success 'every action at the expected time, at the expected level' '
	perl model.pl >expect.actions &&
	perl actual.pl <runs.json >actual.actions 2>failed &&
	test_must_be_empty failed &&
	test_cmp expect.actions actual.actions &&
	grep " backup ds full$" actual.actions >fulls &&
	test_line_count -ge 3 fulls &&
	grep " backup ds differential$" actual.actions >diffs &&
	test_line_count -ge 2 diffs &&
	grep " drill " expect.actions >drills &&
	test_line_count -ge 5 drills
'

test_expect_success 'the slots missed while the host was down ran once, at the next run' '
	grep "^2026-12-01T" actual.actions >missed &&
	cat >expect.missed <<-\EOF &&
	2026-12-01T09:00:00Z backup ds incremental
	2026-12-01T09:00:00Z export off incremental
	2026-12-01T09:00:00Z forget ds -
	2026-12-01T09:00:00Z prune - -
	EOF
	test_cmp expect.missed missed
'

test_expect_success 'retention kept exactly the snapshots the model keeps' '
	coffer -r repo snapshots --json >snaps.json &&
	json_get snaps.json "join qq(\n), sort map { \$_->{time} }
		grep { \$_->{state} eq q(complete) } @\$j" >kept &&
	test_cmp model-kept kept
'

test_expect_success 'every kept snapshot restores to the tree it was taken of' '
	json_get snaps.json "join qq(\n), map { \$_->{id} } @\$j" >ids &&
	for id in $(cat ids); do
		rm -rf out &&
		coffer -r repo restore "$id" out &&
		treecmp "expect/$(echo $id | cut -c1-12)" out || return 1
	done
'

test_expect_success 'the bundles and drills are recorded; a second run at the same time does nothing' '
	grep -c " export " actual.actions >n.exports &&
	coffer -r repo bundles --json >b.json &&
	json_check b.json "@{\$j} == $(cat n.exports)" &&
	coffer -r repo drill history --json >d.json &&
	n=$(grep -c " drill " actual.actions) &&
	json_check d.json "@{\$j} == $n && !grep { \$_->{verdict} ne q(pass) } @\$j" &&
	last=$(date -u -d @$((START + (HOURS - 1) * 3600)) +%Y-%m-%dT%H:%M:%SZ) &&
	coffer run --policy p.policy --now "$last" --dry-run >dry.out &&
	echo "nothing is due" >expect.dry &&
	test_cmp expect.dry dry.out
'

test_done
