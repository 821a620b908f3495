#!/bin/bash
test_description='policy files: every error reported as FILE:LINE, nothing run; schedules as coffer-policy(5) says'
. "$(dirname "$0")/../lib.sh"
require_coffer

test_expect_success 'setup: a repository and a dataset' '
	coffer_init_keyfile repo &&
	mkdir -p data/ckpt off &&
	echo hello >data/a.txt &&
	repo_fingerprint repo >fp.before
'

# A policy with one error per marked line: "# ERR" at the end of a line
# says that line must be reported (the marker is a comment to libinih
# only after " ;", so it is stripped before use).
cat >bad.in <<EOF
# every kind of error, one per marked line
[repository]
path = repo                                   ERR not absolute
key-file = $TMP/key
colour = blue                                 ERR unknown key

[dataset imagenet]                            ERR no schedule
path = /nonexistent/imagenet                  ERR not a directory
exclude = *.tmp
settle = soon                                 ERR bad duration
one-file-system = maybe                       ERR not a boolean

[dataset data]
path = $TMP/data
path = $TMP/data                              ERR given twice
full = weekly someday 02:00                   ERR bad day
differential = monthly 32                     ERR bad day of month
incremental = daily 25:00                     ERR bad time
keep-daily = 0                                ERR bad count
require = COMPLETE                            ERR require without checkpoints

[dataset data]                                ERR defined twice
path = $TMP/data

[datasets x]                                  ERR unknown section
this line has no equals sign                  ERR not key = value
[export]                                      ERR needs a name

[export off]                                  ERR no to
full = hourly 02:00                           ERR hourly takes :MM
datasets = data nosuch                        ERR unknown dataset

[drill weekly]                                ERR no schedule
from = nowhere                                ERR unknown target
sample = 0                                    ERR bad percentage
[retention                                    ERR no ]
[retention]                                   ERR no schedule
keep-weekly = 4
max-unused = 200%                             ERR bad percentage
EOF

test_expect_success 'a policy with every kind of error: each reported with its line, nothing run' '
	sed "s/ *ERR.*//" bad.in >bad.policy &&
	grep -n "ERR" bad.in | cut -d: -f1 | sort -n >expect &&
	test_expect_code 2 coffer -r repo run --policy bad.policy >out 2>err &&
	test_must_be_empty out &&
	cat err &&
	sed -n "s/^error: bad\.policy:\([0-9]*\): .*/\1/p" err | sort -n -u >actual &&
	test_cmp expect actual &&
	grep "^error: bad\.policy:[0-9]*: \[retention\] has no schedule, which the keep- rules need (line [0-9]*)" err &&
	grep "^error: bad\.policy: [0-9]* errors; nothing was run" err &&
	repo_fingerprint repo >fp.after &&
	test_cmp fp.before fp.after &&
	coffer -r repo snapshots >snaps && test_must_be_empty snaps
'

test_expect_success 'errors come in line order, each once' '
	sed -n "s/^error: bad\.policy:\([0-9]*\): .*/\1/p" err >order &&
	sort -n order >sorted && test_cmp sorted order
'

test_expect_success 'a relative to: one error at its line; keep- rules and no [retention]: said without a wrong line' '
	cat >rel.policy <<-EOF &&
	[dataset data]
	path = $TMP/data
	full = daily 02:00
	keep-daily = 7

	[export off]
	to = relative/dir
	full = daily 03:00
	EOF
	test_expect_code 2 coffer -r repo run --policy rel.policy 2>err &&
	cat err &&
	test_line_count = 3 err &&
	grep "^error: rel\.policy:7: to .relative/dir. is not an absolute path" err &&
	grep "^error: rel\.policy: the keep- rules (line 4) need a \[retention\] section" err &&
	! grep "has no .to." err
'

test_expect_success 'a missing policy, an empty one (nothing to do), no policy' '
	test_expect_code 2 coffer -r repo run --policy nosuch.policy 2>err &&
	grep "cannot open policy .nosuch.policy." err &&
	: >empty.policy &&
	test_expect_code 2 coffer -r repo run --policy empty.policy 2>err &&
	grep "empty.policy: nothing to do" err &&
	test_expect_code 2 coffer -r repo run 2>err &&
	grep "usage: coffer run" err
'

test_expect_success 'a line too long and a NUL byte are reported' '
	{
		echo "[dataset data]" &&
		echo "path = $TMP/data" &&
		printf "exclude = %05000d\n" 0 &&
		printf "exclude = a\0b\n" &&
		echo "incremental = daily"
	} >long.policy &&
	test_expect_code 2 coffer -r repo run --policy long.policy 2>err &&
	grep "long.policy:3: line too long" err &&
	grep "long.policy:4: NUL byte" err
'

cat >good.policy <<EOF
; comments with ';' and '#', sections in any case, names quoted or not
[Repository]
path = $TMP/repo
key-file = $TMP/key
[dataset "data"]
path = $TMP/data
exclude = *.tmp ; an inline comment
full = monthly first sunday 02:00
differential = weekly Sunday 02:00
incremental = daily 02:00
checkpoints = ckpt/step_*
require = COMPLETE
settle = 10m
[retention]
keep-daily = 7
schedule = daily 04:30
[export off]
to = $TMP/off
full = monthly last saturday 03:00
incremental = daily 03:00
[drill weekly]
schedule = weekly sun 06:00
sample = 10%
rto = 2h
rpo = 26h
from = off
[monitoring]
metrics-file = $TMP/coffer.prom
EOF

test_expect_success 'a good policy: the first dry run does a full at once, and all the rest' '
	coffer run --policy good.policy --dry-run --now 2026-12-02T10:00:00Z >out &&
	cat out &&
	cat >expect <<-\EOF &&
	would backup  data                     full          slot 2026-11-01T02:00:00Z, never done
	would export  off                      full          slot 2026-11-28T03:00:00Z, never done
	would forget  data                     -             slot 2026-12-02T04:30:00Z, never done
	would prune   -                        -             slot 2026-12-02T04:30:00Z, never done
	would drill   weekly/data              -             slot 2026-11-29T06:00:00Z, never done
	EOF
	test_cmp expect out &&
	repo_fingerprint repo >fp.after &&
	test_cmp fp.before fp.after
'

test_expect_success 'dry-run --json says the same' '
	coffer run --policy good.policy --dry-run --json \
		--now 2026-12-02T10:00:00Z >out.json &&
	json_check out.json "\$j->{dry_run} && @{\$j->{actions}} == 5 &&
		\$j->{actions}[0]{action} eq q(backup) &&
		\$j->{actions}[0]{level} eq q(full) &&
		\$j->{actions}[4]{subject} eq q(weekly/data) &&
		!defined \$j->{actions}[3]{level}"
'

# The slots of each kind of schedule, through --dry-run of a dataset
# whose only full is at a known time: "due" flips exactly at the slot.
sched_due() {
	cat >s.policy <<-EOF &&
	[dataset data]
	path = $TMP/data
	full = $1
	EOF
	coffer -r repo run --policy s.policy --dry-run --now "$2" >s.out &&
	if grep -q "would backup" s.out; then echo due; else echo no; fi
}

test_expect_success 'schedules: slots in UTC, day names, ordinals, months without the day' '
	coffer -r repo backup --level full --time 2026-11-01T03:00:00Z data data &&
	{
		sched_due "hourly :15" 2026-11-01T03:14:59Z &&
		sched_due "hourly :15" 2026-11-01T03:15:00Z &&
		sched_due "daily 02:00" 2026-11-02T01:59:00Z &&
		sched_due "daily 02:00" 2026-11-02T02:00:00Z &&
		sched_due "weekly monday 00:30" 2026-11-01T23:59:00Z &&
		sched_due "weekly monday 00:30" 2026-11-02T00:30:00Z &&
		sched_due "monthly first sunday 02:00" 2026-11-30T23:00:00Z &&
		sched_due "monthly first sunday 02:00" 2026-12-06T01:59:00Z &&
		sched_due "monthly first sunday 02:00" 2026-12-06T02:00:00Z &&
		sched_due "monthly last friday" 2026-11-27T00:00:00Z &&
		sched_due "monthly 31 12:00" 2026-11-30T23:00:00Z &&
		sched_due "monthly 31 12:00" 2026-12-31T12:00:00Z
	} >actual &&
	cat >expect <<-\EOF &&
	no
	due
	no
	due
	no
	due
	no
	no
	due
	due
	no
	due
	EOF
	test_cmp expect actual
'

test_expect_success 'dry-run -v: also what is not due, with its last run and next slot' '
	cat >s.policy <<-EOF &&
	[dataset data]
	path = $TMP/data
	full = monthly first sunday 02:00
	incremental = daily 02:00
	EOF
	coffer -v -r repo run --policy s.policy --dry-run \
		--now 2026-11-01T23:00:00Z >out 2>/dev/null &&
	cat >expect <<-\EOF &&
	nothing is due
	not   backup  data                     -             full: last done 2026-11-01T03:00:00Z, next slot 2026-12-06T02:00:00Z (monthly first sunday 02:00); incremental: last done 2026-11-01T03:00:00Z, next slot 2026-11-02T02:00:00Z (daily 02:00)
	EOF
	test_cmp expect out &&
	coffer -r repo run --policy s.policy --dry-run \
		--now 2026-11-01T23:00:00Z >out &&
	echo "nothing is due" >expect &&
	test_cmp expect out
'

test_done
