#!/bin/bash
test_description='coffer run: the metrics file (parsed as Prometheus text, replaced atomically), coffer log from the journal, coffer cron, exit statuses'
. "$(dirname "$0")/../lib.sh"
require_coffer

test_expect_success 'setup' '
	coffer_init_keyfile repo &&
	mkdir -p data off prom &&
	echo one >data/a &&
	cat >p.policy <<-EOF
	[repository]
	path = $TMP/repo
	key-file = $TMP/key
	[dataset ds]
	path = $TMP/data
	full = weekly sunday 02:15
	incremental = daily 02:15
	[export off]
	to = $TMP/off
	incremental = daily 03:00
	[drill check]
	schedule = daily 06:30
	rpo = 26h
	[drill offsite]
	schedule = weekly wednesday 06:45
	from = off
	[monitoring]
	metrics-file = $TMP/prom/coffer.prom
	EOF
'

# promcheck FILE: the Prometheus text exposition format, as node_exporter's
# textfile collector reads it: HELP and TYPE once per family, before its
# samples, which are contiguous; names and labels well formed; values
# numbers; a newline at the end.  Prints "name{labels} value" lines.
promcheck() {
	perl -e '
		my ($f) = @ARGV; open(my $h, "<", $f) or die "$f: $!\n";
		local $/; my $t = <$h>;
		die "no newline at the end\n" unless $t =~ /\n\z/;
		my (%help, %type, %done, $cur);
		my $name = qr/[a-zA-Z_:][a-zA-Z0-9_:]*/;
		for my $l (split /\n/, $t) {
			if ($l =~ /^# HELP ($name) (.+)$/) {
				die "HELP twice: $1\n" if $help{$1}++;
				die "family $1 split\n" if $done{$1};
				$done{$cur} = 1 if defined $cur && $cur ne $1;
				$cur = $1;
			} elsif ($l =~ /^# TYPE ($name) (gauge|counter|untyped)$/) {
				die "TYPE twice: $1\n" if $type{$1}++;
				die "TYPE of $1 without HELP first\n" unless $cur eq $1;
			} elsif ($l =~ /^($name)(\{$name="(?:[^"\\\n]|\\.)*"(?:,$name="(?:[^"\\\n]|\\.)*")*\})? (-?[0-9.]+(?:e[-+]?[0-9]+)?|NaN|[+-]Inf)$/) {
				die "sample of $1 outside its family\n"
				    unless defined $cur && $cur eq $1 && $type{$1};
				print "$1", $2 // "", " $3\n";
			} else {
				die "bad line: $l\n";
			}
		}
	' "$1"
}

test_expect_success 'the first run: everything due; the metrics file parses' '
	coffer run --policy p.policy --now 2026-12-02T07:00:00Z >out &&
	test_must_be_empty out &&
	promcheck prom/coffer.prom >m1 &&
	cat m1 &&
	t=$(date -u -d 2026-12-02T07:00:00Z +%s) &&
	grep -x "coffer_run_exit_status 0" m1 &&
	grep -x "coffer_run_timestamp_seconds $t.000" m1 &&
	grep -x "coffer_backup_last_success_timestamp_seconds{dataset=\"ds\"} $t.000" m1 &&
	grep -x "coffer_backup_last_level{dataset=\"ds\"} 0" m1 &&
	grep -x "coffer_backup_last_bytes_read{dataset=\"ds\"} 4" m1 &&
	grep -x "coffer_rpo_age_seconds{dataset=\"ds\"} 0.000" m1 &&
	grep -x "coffer_rpo_objective_seconds{dataset=\"ds\"} 93600.000" m1 &&
	grep -x "coffer_rpo_ok{dataset=\"ds\"} 1" m1 &&
	grep -x "coffer_drill_success{dataset=\"ds\"} 1" m1 &&
	coffer -r repo drill history --json >dh.json &&
	json_check dh.json "@\$j == 2 &&
		grep { (\$_->{source} // q()) eq q(bundles:$TMP/off) } @\$j" &&
	grep -x "coffer_drill_last_timestamp_seconds{dataset=\"ds\"} $t.000" m1 &&
	grep -x "coffer_export_last_timestamp_seconds{target=\"off\"} $t.000" m1
'

test_expect_success 'a run with nothing due replaces the file too (a new inode, nothing left beside it)' '
	ino=$(stat -c %i prom/coffer.prom) &&
	coffer run --policy p.policy --now 2026-12-02T08:00:00Z >out &&
	test_must_be_empty out &&
	test "$(stat -c %i prom/coffer.prom)" != "$ino" &&
	ls prom >files && echo coffer.prom >expect && test_cmp expect files &&
	promcheck prom/coffer.prom >m2 &&
	grep -x "coffer_rpo_age_seconds{dataset=\"ds\"} 3600.000" m2 &&
	grep -x "coffer_rpo_ok{dataset=\"ds\"} 1" m2
'

test_expect_success 'past its objective the RPO is missed; --metrics-file overrides the policy' '
	sed "s/^rpo = 26h/rpo = 1h/" p.policy >r.policy &&
	ino=$(stat -c %i prom/coffer.prom) &&
	coffer run --policy r.policy --now 2026-12-02T09:00:00Z \
		--metrics-file prom/other.prom >out &&
	test_must_be_empty out &&
	test "$(stat -c %i prom/coffer.prom)" = "$ino" &&
	promcheck prom/other.prom >m3 &&
	grep -x "coffer_rpo_age_seconds{dataset=\"ds\"} 7200.000" m3 &&
	grep -x "coffer_rpo_ok{dataset=\"ds\"} 0" m3
'

test_expect_success 'a drill that misses its objective: the line is printed under cron, exit 6' '
	random_file data/big 4 &&
	sed "s/^rpo = 26h/rto = 1ms/" p.policy >q.policy &&
	test_expect_code 6 coffer run --policy q.policy \
		--now 2026-12-03T07:00:00Z >out 2>err &&
	cat out err &&
	grep "^drill  *check/ds  *-  *FAILED .*missed-objective" out &&
	test_line_count = 1 out &&
	promcheck prom/coffer.prom >m4 &&
	grep -x "coffer_run_exit_status 6" m4 &&
	grep -x "coffer_drill_success{dataset=\"ds\"} 0" m4
'

test_expect_success 'coffer log lists the runs that did something, with their actions' '
	coffer -r repo log >log &&
	cat log &&
	grep -c " run " log >n && echo 2 >expect && test_cmp expect n &&
	coffer -r repo log --json >log.json &&
	json_check log.json "@\$j == 2 &&
		\$j->[0]{time} eq q(2026-12-02T07:00:00Z) &&
		join(q( ), map { \$_->{action} } @{\$j->[0]{actions}}) eq
		    q(backup export drill drill) &&
		\$j->[0]{actions}[3]{detail} =~ /pass, .*from bundles/ &&
		\$j->[0]{actions}[0]{level} eq q(full) &&
		\$j->[1]{status} == 6 && \$j->[0]{policy} =~ m{/p\\.policy\$}" &&
	coffer -r repo log --json --since 2026-12-03T00:00:00Z >since.json &&
	json_check since.json "@\$j == 1" &&
	coffer -r repo log --json --since 2026-12-04T00:00:00Z >none.json &&
	json_check none.json "@\$j == 0" &&
	test_expect_code 2 coffer -r repo log --since yesterday
'

test_expect_success 'the runs are in the repository: a new host lists them' '
	XDG_STATE_HOME=$TMP/other-host coffer -r repo log --json >other.json &&
	json_check other.json "@\$j == 2 && \$j->[1]{status} == 6"
'

test_expect_success 'coffer cron: a crontab line at the minutes of the slots, and systemd units' '
	coffer cron --policy p.policy >cron.out &&
	cat cron.out &&
	coffer cron --policy p.policy --unit crontab >line &&
	test_line_count = 1 line &&
	read -r min hour dom mon dow cmd <line &&
	test "$min $hour $dom $mon $dow" = "0,15,30,45 * * * *" &&
	test "$cmd" = "'"'$COFFER'"' -q run --policy '"'$TMP/p.policy'"'" &&
	grep -x "0,15,30,45 \* \* \* \* .*" cron.out &&
	coffer cron --policy p.policy --unit timer >coffer-p.timer &&
	grep -x "OnCalendar=\*-\*-\* \*:0,15,30,45:00" coffer-p.timer &&
	coffer cron --policy p.policy --unit service >coffer-p.service &&
	grep -x "ExecStart=\"$COFFER\" run --policy \"$TMP/p.policy\"" coffer-p.service &&
	test_expect_code 2 coffer cron --policy nosuch.policy >out &&
	test_must_be_empty out
'

test_expect_success 'a run at a --now long past: a backup lasts as long as it ran' '
	coffer init --key-file "$TMP/key2" repo2 &&
	cat >past.policy <<-EOF &&
	[repository]
	path = $TMP/repo2
	key-file = $TMP/key2
	[dataset ds]
	path = $TMP/data
	full = weekly sunday 02:15
	EOF
	coffer run --policy past.policy --now 2026-01-04T03:00:00Z \
		--metrics-file prom/past.prom >out &&
	test_must_be_empty out &&
	promcheck prom/past.prom >m5 &&
	sed -n "s/^coffer_backup_last_duration_seconds{dataset=\"ds\"} //p" m5 >d &&
	test_line_count = 1 d &&
	awk "{ exit !(\$1 >= 0 && \$1 < 3600) }" d &&
	COFFER_KEY_FILE=$TMP/key2 coffer -r repo2 snapshots --json >past.json &&
	json_check past.json "@\$j == 1 && \$j->[0]{time} eq q(2026-01-04T03:00:00Z)"
'

command -v systemd-analyze >/dev/null && test_set_prereq SYSTEMD
# Its only complaint allowed: the manual pages of Documentation= are not
# installed here.
test_expect_success SYSTEMD 'systemd-analyze verify takes the units' '
	{ systemd-analyze verify coffer-p.service coffer-p.timer >verify 2>&1 ||
		:; } &&
	cat verify &&
	! grep -v "Command .man coffer-" verify
'

test_done
