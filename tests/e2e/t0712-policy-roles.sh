#!/bin/bash
test_description='coffer run in two roles on one repository: a write-only training server backs up, a full-key backup host with only [retention], [drill] and [verify] keeps, drills and verifies what it never backs up; what a write-only key cannot run is refused at its line, nothing run'
. "$(dirname "$0")/../lib.sh"
require_coffer

# Each host has a catalog of its own.
train() { XDG_STATE_HOME=$TMP/train coffer "$@"; }
backup() { XDG_STATE_HOME=$TMP/backup coffer "$@"; }

test_expect_success 'setup: a repository, its full key on the backup host, a write-only key on the training server' '
	coffer init --key-file full.key repo &&
	coffer -r repo --key-file full.key key export --write-only --to wo.key &&
	mkdir -p ckpt/step_1 corpus &&
	echo one >ckpt/step_1/w.bin && echo a >corpus/a.txt &&
	cat >train.policy <<-EOF &&
	[repository]
	path = $TMP/repo
	key-file = $TMP/wo.key

	[dataset ckpt]
	path = $TMP/ckpt
	full = hourly :20

	[dataset corpus]
	path = $TMP/corpus
	full = daily 02:00
	EOF
	cat >backup.policy <<-EOF
	[repository]
	path = $TMP/repo
	key-file = $TMP/full.key

	[retention]
	keep-last = 2
	schedule = daily 05:00

	[drill weekly]
	datasets = ckpt
	schedule = weekly sunday 06:00

	[verify nightly]
	schedule = daily 07:00
	EOF
'

# used KEY: last_used of the key file KEY ("full", "write-only"), or null.
used() {
	coffer -r repo --key-file full.key key list --json >list.json &&
	json_get list.json '
		my ($s) = grep { $_->{capability} eq "'"$1"'" } @{$j->{key_files}};
		$s->{last_used} // "null"'
}

test_expect_success 'a write-only policy with [drill], [retention], keep- rules and [verify]: refused at check time, each at its line, exit 2; nothing run, in --dry-run too' '
	cat train.policy >bad.policy &&
	cat >>bad.policy <<-EOF &&
	keep-last = 3

	[retention]
	keep-daily = 7
	schedule = daily 05:00

	[drill weekly]
	schedule = weekly sunday 06:00

	[verify nightly]
	schedule = daily 07:00
	read-data = 1/7
	EOF
	grep -n "keep-last = 3\|^\[retention\]\|^\[drill weekly\]\|^\[verify nightly\]" \
		bad.policy | cut -d: -f1 >lines &&
	test_line_count = 4 lines &&
	repo_fingerprint repo >before &&
	for dry in "" --dry-run; do
		test_expect_code 2 train run --policy bad.policy \
			--now 2026-12-06T12:00:00Z $dry >out 2>err || return 1
		test_must_be_empty out &&
		for l in $(cat lines); do
			grep "^error: bad.policy:$l: .*write-only" err || return 1
		done
		grep "^error: bad.policy:$(sed -n 4p lines): \[verify nightly\] needs the key that reads" err &&
		grep "nothing was run" err || return 1
	done &&
	repo_fingerprint repo >after &&
	test_cmp before after &&
	test "$(used write-only)" = null &&
	train -r repo --key-file wo.key snapshots >snaps && ! grep ckpt snaps &&
	! train -r repo --key-file wo.key log | grep .
'

test_expect_success 'the training server: backups with the write-only key' '
	train run --policy train.policy --now 2026-12-06T02:30:00Z &&
	echo two >ckpt/step_1/w2.bin &&
	train run --policy train.policy --now 2026-12-06T03:30:00Z &&
	echo three >ckpt/step_1/w3.bin &&
	train run --policy train.policy --now 2026-12-06T04:30:00Z &&
	train -r repo --key-file wo.key snapshots --json >s.json &&
	json_check s.json "3 == grep { \$_->{dataset} eq q(ckpt) } @\$j" &&
	test "$(used write-only)" != null
'

test_expect_success 'the backup host, with only [retention], [drill] and [verify]: forgets, prunes, drills and verifies the datasets the training server backs up' '
	backup -v run --policy backup.policy --now 2026-12-06T07:30:00Z \
		>run.out 2>run.err &&
	cat run.out &&
	grep "^forget  ckpt .* ok .*forgot 1 of 3 snapshots" run.out &&
	grep "^forget  corpus .* ok .*forgot 0 of 1 snapshots" run.out &&
	grep "^prune .* ok " run.out &&
	grep "^drill   weekly/ckpt .* ok .*pass" run.out &&
	! grep "weekly/corpus" run.out &&
	grep "^verify  nightly .* ok .*structure: .*no errors" run.out &&
	backup -r repo --key-file full.key snapshots --json >s.json &&
	json_check s.json "2 == grep { \$_->{dataset} eq q(ckpt) } @\$j" &&
	backup -r repo --key-file full.key drill history --json >d.json &&
	json_check d.json "@\$j == 1 && \$j->[0]{dataset} eq q(ckpt)" &&
	backup -r repo --key-file full.key verify history --json >v.json &&
	json_check v.json "@\$j == 1 && \$j->[0]{mode} eq q(structure) &&
		\$j->[0]{verdict} eq q(pass) &&
		\$j->[0]{time} eq q(2026-12-06T07:30:00Z)" &&
	backup -r repo --key-file full.key log --json >log.json &&
	json_check log.json "grep { \$_->{action} eq q(verify) &&
		\$_->{subject} eq q(nightly) } map { @{\$_->{actions}} } @\$j"
'

test_expect_success 'a dataset the repository lacks, named by [retention] or [drill]: a warning at its line, the rest runs' '
	cat >typo.policy <<-EOF &&
	[repository]
	path = $TMP/repo
	key-file = $TMP/full.key

	[retention]
	datasets = ckpt nosuch
	keep-last = 2
	schedule = daily 05:00

	[drill d]
	datasets = nosuch2
	schedule = daily 06:00
	EOF
	test_expect_code 1 backup -v run --policy typo.policy \
		--now 2026-12-07T09:00:00Z >out 2>err &&
	grep "^warning: typo.policy:6: no dataset .nosuch. in the repository" err &&
	grep "^warning: typo.policy:11: no dataset .nosuch2. in the repository" err &&
	grep "^forget  ckpt .* ok" out && ! grep "corpus\|nosuch" out
'

test_expect_success 'a policy may hold any subset of sections; one with nothing to do is refused' '
	printf "[repository]\npath = %s\nkey-file = %s\n" "$TMP/repo" \
		"$TMP/full.key" >nothing.policy &&
	test_expect_code 2 backup run --policy nothing.policy 2>err &&
	grep "nothing.policy: nothing to do" err &&
	printf "[drill only]\nschedule = daily 06:00\n" >>nothing.policy &&
	backup run --policy nothing.policy --dry-run \
		--now 2026-12-06T10:00:00Z >out &&
	grep "would drill   only/ckpt" out && grep "would drill   only/corpus" out
'

test_done
