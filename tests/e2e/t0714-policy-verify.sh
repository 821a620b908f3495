#!/bin/bash
test_description='[verify] in a policy: read-data = 1/3 run three times reads every pack once; verify results are journaled and seen from another catalog; coffer log shows the runs'
. "$(dirname "$0")/../lib.sh"
require_coffer

test_expect_success 'setup: a repository with a dozen packs, a policy that verifies a third each night' '
	coffer_init_keyfile repo &&
	mkdir src &&
	for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
		random_file src/f$i 1 && coffer -r repo backup ds src >/dev/null ||
			return 1
	done &&
	cat >v.policy <<-EOF
	[repository]
	path = $TMP/repo
	key-file = $TMP/key

	[verify nightly]
	schedule = daily 07:00
	read-data = 1/3
	EOF
'

# How a test knows which packs a run read: coffer -v names each pack whose
# data it reads ("verify: read pack NAME: N chunks"), once per pack.
test_expect_success 'three runs read every pack that was there before the first one exactly once, whatever packs the runs add' '
	(cd repo/packs && ls */ | grep -v : | grep . | sort) >packs0 &&
	test "$(wc -l <packs0)" -ge 12 &&
	: >read &&
	for d in 07 08 09; do
		coffer -v run --policy v.policy --now 2026-12-${d}T07:30:00Z \
			>out.$d 2>err.$d || return 1
		grep "^verify  nightly .* ok .*read-data=" out.$d || return 1
		sed -n "s/^verify: read pack \([0-9a-f]*\): .*/\1/p" err.$d \
			>>read || return 1
	done &&
	grep "read-data=1/3" out.07 && grep "read-data=2/3" out.08 &&
	grep "read-data=3/3" out.09 &&
	sort read | uniq -d >twice && test_must_be_empty twice &&
	sort -u read >read.sorted &&
	comm -23 packs0 read.sorted >missed && test_must_be_empty missed &&
	test "$(wc -l <packs0)" -lt "$(ls repo/packs/*/ | grep -c "^[0-9a-f]")"
'

test_expect_success 'the fourth run starts the rotation again' '
	coffer -v run --policy v.policy --now 2026-12-10T07:30:00Z >out.10 &&
	grep "read-data=1/3" out.10
'

test_expect_success 'verify history: every run, with the slice and what it read' '
	coffer -r repo verify history --json >h.json &&
	json_check h.json "@\$j == 4 &&
		join(q(,), map { \$_->{slice} . q(/) . \$_->{slices} } @\$j) eq
		q(1/3,2/3,3/3,1/3) &&
		!grep { \$_->{verdict} ne q(pass) || !\$_->{complete} } @\$j" &&
	coffer -r repo verify history >h.txt &&
	grep "^2026-12-08T07:30:00Z  read-data=2/3 .* pass " h.txt
'

test_expect_success 'coffer verify is journaled too; another catalog, after its sync, sees every result, and coffer log the runs' '
	coffer -r repo verify --json >v.json &&
	json_check v.json "\$j->{mode} eq q(structure)" &&
	XDG_STATE_HOME=$TMP/other coffer -r repo verify history --json \
		>other.json &&
	json_check other.json "@\$j == 5 &&
		1 == (grep { \$_->{mode} eq q(structure) } @\$j) &&
		2 == (grep { \$_->{mode} eq q(read-data=1/3) } @\$j) &&
		!grep { \$_->{mode} =~ /^read-data/ && !\$_->{packs_read} } @\$j" &&
	XDG_STATE_HOME=$TMP/other coffer -r repo log --json >log.json &&
	json_check log.json "4 == grep { \$_->{action} eq q(verify) }
		map { @{\$_->{actions}} } @\$j" &&
	rm -rf "$XDG_STATE_HOME/coffer" &&
	coffer -r repo catalog rebuild &&
	coffer -r repo verify history --json >rebuilt.json &&
	json_check rebuilt.json "@\$j == 5"
'

test_expect_success 'the rotation continues from what another host verified' '
	cat v.policy >other.policy &&
	XDG_STATE_HOME=$TMP/other coffer -v run --policy other.policy \
		--now 2026-12-11T07:30:00Z >out.11 &&
	grep "read-data=2/3" out.11
'

test_expect_success 'a bad read-data is refused at its line' '
	sed "s|^read-data = 1/3|read-data = 2/3|" v.policy >bad.policy &&
	test_expect_code 2 coffer run --policy bad.policy 2>err &&
	grep "^error: bad.policy:7: read-data is no, all, P% or 1/M" err
'

test_done
