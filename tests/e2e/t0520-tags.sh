#!/bin/bash
test_description='tags and keep marks: backup --tag and --keep, forget --keep-tag, marks survive rules, names and rebuilds'
. "$(dirname "$0")/../lib.sh"
require_treecmp

# ids TAG < snapshots.json: the ids of the snapshots tagged TAG, sorted.
tagged() {
	json_get "$1" "join(qq(\n), sort map { \$_->{id} }
	    grep { grep { \$_ eq q($2) } @{\$_->{tags}} } @\$j)"
}
ids() { json_get "$1" 'join(qq(\n), sort map { $_->{id} } @$j)'; }

test_expect_success 'setup: twelve days, a release tagged, a checkpoint marked kept' '
	coffer_init_keyfile repo && mkdir src expect &&
	for d in $(seq 1 12); do
		t=$(printf "2026-03-%02dT02:00:00Z" $d) &&
		echo "day $d" >src/day-$d &&
		case $d in
		1) extra="--level full" ;;
		4) extra="--tag release --tag v1.0" ;;
		6) extra="--keep" ;;
		8) extra="--level full --tag release" ;;
		*) extra= ;;
		esac &&
		coffer -r repo backup --json $extra --time "$t" ds src >b.json &&
		sid=$(json_get b.json "\$j->{snapshot}") &&
		cp -a src "expect/$sid" || return 1
	done &&
	coffer -r repo snapshots --json >all.json &&
	tagged all.json release >release && test_line_count = 2 release &&
	tagged all.json keep >kept-mark && test_line_count = 1 kept-mark &&
	tagged all.json v1.0 >v1 && test_line_count = 1 v1 &&
	coffer -r repo snapshots >table &&
	grep "keep " table && grep "release,v1.0" table
'

test_expect_success 'bad tags are refused, nothing stored' '
	for bad in "" "a,b" "a b" "../x" \
	    "$(printf %065d 0)"; do
		test_expect_code 2 coffer -r repo backup --tag "$bad" ds src \
			2>err && grep "bad tag" err || return 1
	done &&
	coffer -r repo snapshots --json >again.json &&
	json_check again.json "@\$j == 12"
'

test_expect_success 'forget --keep-last 1 keeps the mark (a tag is no rule of its own)' '
	coffer -r repo forget --keep-last 1 --dry-run --json >plan.json &&
	mark=$(cat kept-mark) &&
	json_check plan.json "grep { \$_->{id} eq q($mark) && \$_->{keep} &&
	    \$_->{reasons} =~ /\\bkeep\\b/ } @{\$j->{snapshots}}" &&
	for id in $(cat release); do
		json_check plan.json "grep { \$_->{id} eq q($id) &&
		    \$_->{reasons} !~ /\\btag\\b/ } @{\$j->{snapshots}}" ||
			return 1
	done
'

test_expect_success 'forget --keep-tag release --keep-last 1: tagged, marked, newest and their chains stay' '
	coffer -r repo forget --keep-tag release --keep-last 1 --json >done.json &&
	coffer -r repo snapshots --json >after.json &&
	for id in $(cat release kept-mark); do
		json_check after.json "grep { \$_->{id} eq q($id) } @\$j" ||
			return 1
	done &&
	json_check after.json "@\$j < 12" &&
	ids after.json >remaining &&
	while read -r sid; do
		rm -rf out && coffer -r repo restore "$sid" out &&
		treecmp "expect/$sid" out || return 1
	done <remaining
'

test_expect_success 'a marked snapshot is not forgotten by name without --force' '
	mark=$(cat kept-mark) &&
	test_expect_code 2 coffer -r repo forget "$mark" 2>err &&
	grep "marked kept" err &&
	coffer -r repo snapshots --json >s.json &&
	json_check s.json "grep { \$_->{id} eq q($mark) } @\$j"
'

test_expect_success 'tags survive a rebuilt catalog' '
	coffer -r repo snapshots --json >before.json &&
	rm -rf "$XDG_STATE_HOME/coffer" &&
	coffer -r repo snapshots --json >rebuilt.json &&
	tagged before.json release >r1 && tagged rebuilt.json release >r2 &&
	test_cmp r1 r2 &&
	tagged rebuilt.json keep >k2 && test_cmp kept-mark k2 &&
	coffer -r repo forget --keep-last 1 --dry-run --json >plan2.json &&
	json_check plan2.json "grep { \$_->{id} eq q($(cat kept-mark)) &&
	    \$_->{keep} } @{\$j->{snapshots}}"
'

test_expect_success 'forget --force forgets a marked snapshot (children first)' '
	mark=$(cat kept-mark) &&
	coffer -r repo snapshots --json >s.json &&
	kids=$(json_get s.json "join(q( ), map { \$_->{id} }
	    grep { (\$_->{parent} // q()) eq q($mark) } @\$j)") &&
	coffer -r repo forget --force $kids "$mark" &&
	coffer -r repo snapshots --json >s2.json &&
	json_check s2.json "!grep { \$_->{id} eq q($mark) } @\$j"
'

test_done
