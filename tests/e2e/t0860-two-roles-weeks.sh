#!/bin/bash
test_description='the recommended deployment through three simulated weeks: a write-only training server (hourly checkpoints, daily corpus, nightly bundles) and a full-key backup host (daily retention, weekly drills, nightly verify) on one repository, both from cron (coffer run --now); then a bare machine recovers from the bundles alone'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

# COFFER_TEST_SIM_DAYS shortens the simulation (the sanitizer run does).
DAYS=${COFFER_TEST_SIM_DAYS:-21}
# Saturday 2026-11-07 00:00 UTC: the first weekly full comes that night.
T0=1794441600

host() { export XDG_STATE_HOME=$TMP/$1-state; mkdir -p "$XDG_STATE_HOME"; }

# at HOUR: the clock of hour HOUR of the simulation, 25 minutes past.
at() { date -u -d @$((T0 + $1 * 3600 + 1500)) +%Y-%m-%dT%H:%M:%SZ; }

# hour H of training: step H appears whole (its shard, then its
# marker); the trainer keeps the six newest; the corpus grows daily.
train() {
	d=ckpt/step_$(printf %04d $1) &&
	mkdir -p "$d" && random_file "$d/model.bin" 1 &&
	echo "$1" >"$d/COMPLETE" &&
	old=ckpt/step_$(printf %04d $(($1 - 6))) && rm -rf "$old" &&
	if [ $(($1 % 24)) -eq 1 ]; then
		echo "day $(($1 / 24))" >"corpus/day-$(($1 / 24))" &&
		rm -f "corpus/day-$(($1 / 24 - 5))"
	fi
}

test_expect_success 'setup: one repository, a full key on the backup host, a write-only key on the training server, and their policies' '
	host bh && coffer init --key-file full.key repo &&
	coffer -r repo --key-file full.key key export --write-only --to wo.key &&
	mkdir -p ckpt corpus off && random_file corpus/base 2 &&
	cat >ts.policy <<-EOF &&
	[repository]
	path = $TMP/repo
	key-file = $TMP/wo.key
	[dataset corpus]
	path = $TMP/corpus
	full = weekly sunday 02:00
	incremental = daily 02:00
	[dataset ckpt]
	path = $TMP/ckpt
	checkpoints = step_*
	require = COMPLETE
	full = weekly saturday 22:00
	incremental = hourly :20
	[export nas]
	to = $TMP/off
	full = weekly sunday 03:00
	incremental = daily 03:00
	EOF
	cat >bh.policy <<-EOF &&
	[repository]
	path = $TMP/repo
	key-file = $TMP/full.key
	[retention]
	keep-last = 12
	keep-daily = 7
	keep-weekly = 4
	schedule = daily 05:00
	max-unused = 10%
	[drill weekly]
	datasets = corpus ckpt
	schedule = weekly sunday 06:00
	sample = 20%
	[verify nightly]
	schedule = daily 07:00
	read-data = 1/7
	EOF
	(host ts && coffer run --policy ts.policy --dry-run --now "$(at 0)") &&
	(host bh && coffer run --policy bh.policy --dry-run --now "$(at 0)")
'

# The last hour is the last day's retention (05:25): the count below is
# what retention leaves.
test_expect_success "$DAYS simulated days: both hosts run their policies every hour, quiet and successful" '
	h=0 && hours=$(((DAYS - 1) * 24 + 6)) &&
	while [ $h -lt $hours ]; do
		train $h &&
		(host ts && coffer -q run --policy ts.policy --now "$(at $h)") >ts.out 2>&1 &&
		(host bh && coffer -q run --policy bh.policy --now "$(at $h)") >bh.out 2>&1 ||
			{ echo "hour $h:"; cat ts.out bh.out; return 1; }
		test_must_be_empty ts.out && test_must_be_empty bh.out ||
			{ echo "hour $h"; return 1; }
		h=$((h + 1))
	done
'

test_expect_success 'retention thinned the hourly checkpoints; chains stay short' '
	host bh && coffer -r repo --key-file full.key snapshots --json >s.json &&
	perl -MJSON::PP -e "
		my \$j = decode_json(join q(), <STDIN>);
		my @c = grep { \$_->{dataset} eq q(ckpt) &&
			\$_->{state} eq q(complete) } @\$j;
		my \$d = 0; \$d < \$_->{depth} and \$d = \$_->{depth} for @c;
		printf qq(ckpt: %d snapshots, chain depth %d\n), scalar @c, \$d;
		exit(@c <= 25 ? 0 : 1)" <s.json
'

test_expect_success 'the drills and verifies ran on the backup host; the training server sees its forgets' '
	host bh &&
	coffer -r repo --key-file full.key drill history --json >dh.json &&
	json_check dh.json "@\$j >= $((DAYS / 7))" &&
	coffer -r repo --key-file full.key verify history --json >vh.json &&
	json_check vh.json "@\$j >= $((DAYS - 1))" &&
	(host ts && coffer -r repo --key-file wo.key snapshots --json) >t.json &&
	perl -MJSON::PP -e "
		my (\$a, \$b) = map { open my \$f, q(<), \$_ or die;
			decode_json(join q(), <\$f>) } @ARGV;
		my %full = map { \$_->{id} => 1 } @\$a;
		my @extra = grep { !\$full{\$_->{id}} } @\$b;
		exit(@extra ? 1 : 0)" s.json t.json
'

test_expect_success 'a last bundle; a bare machine recovers from the bundles alone: the same snapshots, the drill history, the same data' '
	(host ts && coffer -q -r repo --key-file wo.key export --target nas \
		--to "$TMP/off" --all) &&
	host bh &&
	coffer -r repo --key-file full.key snapshots --json >s.json &&
	coffer -r repo --key-file full.key drill history --json >dh.json &&
	(
		host bare &&
		coffer -r new --key-file "$TMP/full.key" import --init "$TMP/off" &&
		coffer -r new --key-file "$TMP/full.key" snapshots --json >n.json &&
		coffer -r new --key-file "$TMP/full.key" drill history --json \
			>nd.json &&
		perl -MJSON::PP -e "
			my (\$a, \$b) = map { open my \$f, q(<), \$_ or die;
				decode_json(join q(), <\$f>) } @ARGV;
			my \$ids = sub { join q( ), sort map { \$_->{id} }
				grep { \$_->{state} eq q(complete) } @{\$_[0]} };
			exit(\$ids->(\$a) eq \$ids->(\$b) ? 0 : 1)" \
			"$TMP/s.json" n.json &&
		perl -MJSON::PP -e "
			my (\$a, \$b) = map { open my \$f, q(<), \$_ or die;
				decode_json(join q(), <\$f>) } @ARGV;
			exit(@\$a == @\$b ? 0 : 1)" "$TMP/dh.json" nd.json &&
		coffer -r new --key-file "$TMP/full.key" verify --read-data &&
		coffer -r new --key-file "$TMP/full.key" restore ckpt@latest r1 &&
		coffer -r new --key-file "$TMP/full.key" restore corpus@latest r2 &&
		treecmp "$TMP/ckpt" r1 && treecmp "$TMP/corpus" r2
	)
'

test_done
