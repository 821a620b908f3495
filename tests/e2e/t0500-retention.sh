#!/bin/bash
test_description='forget by retention rules over a simulated year, kept snapshots rebased, then prune: what is kept restores'
. "$(dirname "$0")/../lib.sh"

# A year of daily snapshots (--time): a full on the 1st of each month, a
# differential on Sundays, an incremental on other days.  The tree of each
# snapshot is kept in expect/SID.  An independent model (perl, below)
# computes which snapshots the rules keep.

DAYS=${COFFER_TEST_DAYS:-365}

test_expect_success "setup: $DAYS daily snapshots of a changing tree" '
	coffer_init_keyfile repo &&
	mkdir src expect &&
	: >list &&
	for d in $(seq 0 $((DAYS - 1))); do
		t=$(date -u -d "2026-01-01 02:15:00 UTC + $d days" +%Y-%m-%dT%H:%M:%SZ) &&
		dom=$(date -u -d "$t" +%d) && dow=$(date -u -d "$t" +%u) &&
		if test "$dom" = 01; then lvl=full
		elif test "$dow" = 7; then lvl=differential
		else lvl=incremental; fi &&
		printf "day %s\n" $d >src/day-$d.txt &&
		printf "rolling %s\n" $d >src/rolling.txt &&
		if test $((d % 10)) = 9; then rm -f src/day-$((d - 5)).txt; fi &&
		coffer -r repo backup --json --level $lvl --time "$t" ds src >b.json &&
		sid=$(json_get b.json "\$j->{snapshot}") &&
		cp -a src "expect/$sid" &&
		echo "$sid" >>list || return 1
	done &&
	test_line_count = $DAYS list
'

# model RULES... < snapshots.json: the ids the rules keep (a kept snapshot
# whose parent goes is rebased: only what the rules keep stays).
model() {
	perl -MJSON::PP -MPOSIX=strftime -e '
		my %r = @ARGV;
		local $/; my $j = JSON::PP->new->decode(<STDIN>);
		my @s = sort { $b->{t} <=> $a->{t} }
		    map { my $x = $_;
			my ($Y,$m,$d,$H,$M,$S) = $x->{time} =~
			    /^(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)/;
			$x->{t} = POSIX::mktime($S,$M,$H,$d,$m-1,$Y-1900);
			$x } grep { $_->{state} eq "complete" } @$j;
		my %keep;
		for my $i (0 .. ($r{last} // 0) - 1) {
			$keep{$s[$i]{id}} = 1 if $i < @s;
		}
		my %fmt = (daily => "%Y-%m-%d", weekly => "%G-%V",
		    monthly => "%Y-%m", yearly => "%Y");
		for my $rule (keys %fmt) {
			my $n = $r{$rule} or next;
			my $last;
			for my $x (@s) {
				last if $n == 0;
				my $k = strftime($fmt{$rule}, gmtime($x->{t}));
				next if defined $last && $k eq $last;
				$keep{$x->{id}} = 1; $last = $k; $n--;
			}
		}
		print "$_\n" for sort keys %keep;
	' "$@"
}

RULES="--keep-last 3 --keep-daily 7 --keep-weekly 5 --keep-monthly 12 --keep-yearly 3"

test_expect_success 'forget --dry-run: the model'"'"'s plan, nothing removed' '
	coffer -r repo snapshots --json >all.json &&
	model last 3 daily 7 weekly 5 monthly 12 yearly 3 <all.json >expected &&
	cat expected | wc -l &&
	coffer -r repo forget $RULES --dry-run --json >plan.json &&
	json_get plan.json "join(qq(\n), sort map { \$_->{id} } grep { \$_->{keep} } @{\$j->{snapshots}})" >planned &&
	test_cmp expected planned &&
	coffer -r repo snapshots --json >still.json &&
	json_check still.json "@\$j == $DAYS"
'

test_expect_success 'every kept snapshot names the rule that keeps it; those whose parent goes, their rebase' '
	json_check plan.json "!grep { \$_->{keep} && \$_->{reasons} eq q() } @{\$j->{snapshots}}" &&
	json_check plan.json "!grep { \$_->{reasons} =~ /chain/ } @{\$j->{snapshots}}" &&
	json_check plan.json "my %k = map { \$_->{id} => 1 } grep { \$_->{keep} } @{\$j->{snapshots}};
		my @r = grep { \$_->{keep} && \$_->{level} ne q(full) && !\$k{\$_->{parent}} } @{\$j->{snapshots}};
		@r > 0 && !grep { !defined \$_->{rebase} } @r"
'

test_expect_success 'forget --prune: exactly the model'"'"'s snapshots remain, the repository shrinks' '
	before=$(dir_bytes repo) &&
	coffer -r repo forget $RULES --prune --json >done.json &&
	coffer -r repo snapshots --json >after.json &&
	json_get after.json "join(qq(\n), sort map { \$_->{id} } @\$j)" >kept &&
	test_cmp expected kept &&
	after=$(dir_bytes repo) &&
	echo "repository: $before -> $after bytes" &&
	test "$after" -lt "$before"
'

test_expect_success 'every kept snapshot restores identical to its day' '
	coffer -r repo verify --read-data &&
	while read -r sid; do
		rm -rf out && coffer -r repo restore "$sid" out &&
		treecmp "expect/$sid" out || return 1
	done <kept
'

test_expect_success 'a rebuilt catalog does not bring forgotten snapshots back' '
	rm -rf "$XDG_STATE_HOME/coffer" &&
	coffer -r repo snapshots --json >rebuilt.json &&
	json_get rebuilt.json "join(qq(\n), sort map { \$_->{id} } @\$j)" >kept2 &&
	test_cmp kept kept2
'

test_expect_success 'a second prune finds nothing more to do' '
	coffer -r repo prune --json >p2.json &&
	json_check p2.json "\$j->{packs_deleted} == 0 && \$j->{packs_repacked} == 0"
'

test_done
