#!/bin/bash
test_description='contrib/monitoring: promtool checks the alerting rules and runs their unit tests; the rules fire on the metrics files coffer writes as they should; promtool check metrics accepts every one; the Grafana dashboard is JSON whose queries parse and name metrics coffer writes'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_promtool

MON=$TOP/contrib/monitoring

test_expect_success 'setup: a policy that backs up, exports, drills and verifies' '
	coffer_init_keyfile repo &&
	mkdir -p data off prom &&
	random_file data/big 1 &&
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
	rto = 1h
	[verify nightly]
	schedule = daily 05:00
	read-data = all
	[monitoring]
	metrics-file = $TMP/prom/coffer.prom
	EOF
'

test_expect_success 'promtool: the rules check, and their unit tests pass' '
	promtool check rules "$MON/coffer-alerts.yml" &&
	(cd "$MON" && promtool test rules coffer-alerts.test.yml)
'

# promcheck FILE: promtool's parser and linter accept FILE, silently.
promcheck() {
	promtool check metrics <"$1" >lint 2>&1
	rc=$?
	cat lint
	test $rc = 0 && test_must_be_empty lint
}

# alerts_at FILE TIME EXPECT: the rules, without their annotations,
# evaluated by promtool at TIME (on the hour) over the samples of the
# metrics file FILE as host h exports them: exactly the alerts of EXPECT
# fire, one "ALERT SEVERITY [LABEL=VALUE]" a line.
alerts_at() {
	h=$(( $(date -u -d "$2" +%s) / 3600 )) &&
	test $((h * 3600)) = "$(date -u -d "$2" +%s)" &&
	perl -ne '
		$skip = 0 if /^\s*(- |[a-z_]+:)/ && !/^\s{10}/;
		$skip = 1 if /^\s*annotations:/;
		print unless $skip' "$MON/coffer-alerts.yml" >rules.yml &&
	! grep -q "summary:" rules.yml &&
	promtool check rules rules.yml >/dev/null &&
	sed -n "s/^ *- alert: //p" rules.yml >names &&
	test "$(wc -l <names)" -ge 10 &&
	perl -e '
		my ($file, $h, $expect, $names) = @ARGV;
		print "rule_files: [rules.yml]\nevaluation_interval: ${h}h\n";
		print "tests:\n  - interval: ${h}h\n    input_series:\n";
		open(my $m, "<", $file) or die "$file: $!\n";
		while (<$m>) {
			next if /^#/;
			/^(\w+)(?:\{(.*)\})? (\S+)$/ or die "bad line: $_";
			my ($name, $v) = ($1, $3);
			my $l = join(",", grep { length } $2 // "",
			    "instance=\"h\",job=\"node\"");
			print "      - series: '\''$name\{$l}'\''\n";
			print "        values: '\''$v $v'\''\n";
		}
		my %e;
		open(my $x, "<", $expect) or die "$expect: $!\n";
		while (<$x>) { my ($a, @l) = split; push @{$e{$a}}, [@l]; }
		print "    alert_rule_test:\n";
		open(my $n, "<", $names) or die "$names: $!\n";
		while (my $a = <$n>) {
			chomp $a;
			print "      - eval_time: ${h}h\n        alertname: $a\n";
			my $list = delete $e{$a};
			unless ($list) { print "        exp_alerts: []\n"; next; }
			print "        exp_alerts:\n";
			for my $l (@$list) {
				my ($sev, @kv) = @$l;
				print "          - exp_labels:\n";
				print "              severity: $sev\n";
				print "              instance: h\n              job: node\n";
				for (@kv) {
					my ($k, $v) = split /=/;
					print "              $k: $v\n";
				}
			}
		}
		die "no such alert: @{[keys %e]}\n" if %e;
	' "$1" "$h" "$3" names >alerts.test.yml &&
	promtool test rules alerts.test.yml
}

test_expect_success 'the first run: its metrics file passes promtool, with the objectives and when the next drill and export are due' '
	coffer run --policy p.policy --now 2026-12-02T07:00:00Z >out &&
	test_must_be_empty out &&
	cp prom/coffer.prom m1.prom &&
	promcheck m1.prom &&
	cat m1.prom &&
	t=$(date -u -d 2026-12-02T07:00:00Z +%s) &&
	drill=$(date -u -d 2026-12-03T06:30:00Z +%s) &&
	export=$(date -u -d 2026-12-03T03:00:00Z +%s) &&
	grep -x "coffer_rpo_objective_seconds{dataset=\"ds\"} 93600.000" m1.prom &&
	grep -x "coffer_rto_objective_seconds{dataset=\"ds\"} 3600.000" m1.prom &&
	grep -x "coffer_drill_due_timestamp_seconds{dataset=\"ds\"} $drill.000" m1.prom &&
	grep -x "coffer_drill_success{dataset=\"ds\"} 1" m1.prom &&
	grep "^coffer_drill_duration_seconds{dataset=\"ds\"} [0-9.]*$" m1.prom &&
	grep -x "coffer_export_due_timestamp_seconds{target=\"off\"} $export.000" m1.prom &&
	grep -x "coffer_verify_last_timestamp_seconds $t.000" m1.prom &&
	grep -x "coffer_verify_last_damage 0" m1.prom &&
	grep -x "coffer_verify_last_success 1" m1.prom &&
	grep -x "coffer_verify_last_complete 1" m1.prom
'

test_expect_success 'the rules on it: nothing fires at the run; two days on, the RPO, the drill, the export and the file are late' '
	: >none &&
	alerts_at m1.prom 2026-12-02T07:00:00Z none &&
	cat >late <<-EOF &&
	CofferBackupPastRPO warning dataset=ds
	CofferDrillMissing warning dataset=ds
	CofferExportStale warning target=off
	CofferMetricsStale warning
	EOF
	alerts_at m1.prom 2026-12-04T07:00:00Z late &&
	cat >lost <<-EOF &&
	CofferBackupPastTwiceRPO critical dataset=ds
	CofferDrillMissing warning dataset=ds
	CofferExportStale warning target=off
	CofferMetricsStale warning
	EOF
	alerts_at m1.prom 2026-12-05T07:00:00Z lost
'

test_expect_success 'a policy that only drills (another host'"'"'s role): its file has the repository'"'"'s datasets' '
	cat >drills.policy <<-EOF &&
	[repository]
	path = $TMP/repo
	key-file = $TMP/key
	[drill weekly]
	schedule = weekly wednesday 06:45
	rpo = 2d
	EOF
	coffer run --policy drills.policy --now 2026-12-02T07:30:00Z \
		--metrics-file prom/drills.prom >out &&
	test_must_be_empty out &&
	promcheck prom/drills.prom &&
	due=$(date -u -d 2026-12-09T06:45:00Z +%s) &&
	grep -x "coffer_rpo_objective_seconds{dataset=\"ds\"} 172800.000" prom/drills.prom &&
	grep -x "coffer_drill_due_timestamp_seconds{dataset=\"ds\"} $due.000" prom/drills.prom &&
	grep -x "coffer_drill_success{dataset=\"ds\"} 1" prom/drills.prom &&
	alerts_at prom/drills.prom 2026-12-02T08:00:00Z none
'

test_expect_success 'a damaged pack: verify fails, the next run reports its damage' '
	pack=$(largest_pack repo) &&
	flip_byte "$pack" $(( $(stat -c %s "$pack") / 2 )) &&
	test_must_fail coffer -r repo verify --read-data >out 2>err &&
	coffer run --policy p.policy --now 2026-12-02T08:00:00Z >out &&
	test_must_be_empty out &&
	cp prom/coffer.prom m2.prom &&
	promcheck m2.prom &&
	grep -x "coffer_verify_last_success 0" m2.prom &&
	grep "^coffer_verify_last_damage [1-9][0-9]*$" m2.prom &&
	grep -x "coffer_run_exit_status 0" m2.prom &&
	echo "CofferVerifyDamage critical" >damage &&
	alerts_at m2.prom 2026-12-02T08:00:00Z damage
'

test_expect_success 'a run that fails on it: its exit status, the failed drill and verify fire' '
	test_must_fail coffer run --policy p.policy --now 2026-12-03T07:00:00Z \
		>out 2>err &&
	cat out err &&
	cp prom/coffer.prom m3.prom &&
	promcheck m3.prom &&
	! grep -x "coffer_run_exit_status [01]" m3.prom &&
	grep -x "coffer_drill_success{dataset=\"ds\"} 0" m3.prom &&
	grep -x "coffer_verify_last_success 0" m3.prom &&
	cat >failed <<-EOF &&
	CofferDrillFailed critical dataset=ds
	CofferRunFailed critical
	CofferVerifyDamage critical
	EOF
	alerts_at m3.prom 2026-12-03T07:00:00Z failed
'

# After the runs: a drill's record at the host's clock is newer than
# theirs at --now.
test_expect_success 'coffer drill --metrics-file on the damage: its file passes promtool too' '
	test_expect_code 4 coffer -r repo drill --metrics-file prom/drill.prom \
		ds@latest >out 2>err &&
	promcheck prom/drill.prom &&
	grep -x "coffer_drill_success{dataset=\"ds\"} 0" prom/drill.prom
'

test_expect_success 'the dashboard is JSON; each of its queries parses' '
	python3 -m json.tool "$MON/coffer-dashboard.json" >/dev/null &&
	jq -e ".panels | length > 10" "$MON/coffer-dashboard.json" &&
	jq -r ".panels[].targets[]?.expr" "$MON/coffer-dashboard.json" >exprs &&
	test "$(wc -l <exprs)" -ge 15 &&
	{
		echo "groups:" &&
		echo "  - name: dashboard" &&
		echo "    rules:" &&
		n=0 &&
		while read -r e; do
			n=$((n + 1)) &&
			echo "      - record: dashboard_query_$n" &&
			printf "        expr: %s\n" "$(printf %s "$e" | jq -R .)"
		done <exprs
	} >dash.yml &&
	promtool check rules dash.yml
'

test_expect_success 'every coffer metric the rules and the dashboard name is one coffer writes' '
	cat m1.prom m2.prom m3.prom prom/drills.prom prom/drill.prom |
		sed -n "s/^# TYPE \(coffer_[a-z_]*\) .*/\1/p" | sort -u >written &&
	cat "$MON/coffer-alerts.yml" "$MON/coffer-alerts.test.yml" \
		"$MON/coffer-dashboard.json" |
		grep -o "coffer_[a-z_]*" | sort -u >named &&
	comm -13 written named >unknown &&
	cat unknown &&
	test_must_be_empty unknown
'

test_done
