#!/bin/bash
test_description='help: every command lists the options its manual page documents, and parses them'
. "$(dirname "$0")/../lib.sh"
require_coffer

MAN=$TOP/man

# The long options a manual page documents in its OPTIONS (or GLOBAL
# OPTIONS) section, one per line, sorted: the "Fl \-name" of its ".It"
# lines, continuation lines joined first.
man_options() {
	sed -e ':a' -e '/\\$/{N;s/\\\n//;ba' -e '}' "$1" |
	sed -n '/^\.Sh \(GLOBAL \)\{0,1\}OPTIONS/,/^\.Sh /p' |
	grep '^\.It' | grep -o 'Fl \\-[a-z0-9-]*' | sed 's/^Fl \\-/--/' |
	sort -u
}

# The long options a help lists: the first column of its "options"
# section ("  -x, --name", "      --name=VALUE"), sorted.
help_options() {
	sed -n '/^options/,/^$/p' "$1" |
	grep -o '^ \{2,6\}\(-[a-zA-Z], \)\{0,1\}--[a-z0-9-]*' |
	grep -o -- '--[a-z0-9-]*' | sort -u
}

test_expect_success 'coffer help, --help and -h print the commands, exit 0' '
	coffer help >help 2>err && test_must_be_empty err &&
	coffer --help >h1 && test_cmp help h1 &&
	coffer -h >h2 && test_cmp help h2 &&
	sed -n "/^commands:/,/^\$/p" help | sed -n "s/^  \([a-z]*\).*/\1/p" |
		sort -u >commands &&
	cat commands &&
	for c in init backup snapshots ls diff consolidate restore verify \
		audit drill forget prune catalog help version; do
		grep -x "$c" commands || return 1
	done &&
	grep "^  drill history " help &&
	grep "^  catalog rebuild " help &&
	grep "^  catalog check " help
'

test_expect_success 'every command has a manual page, every page a command' '
	grep -v -x -e help -e version commands >paged &&
	for c in $(cat paged); do
		test_path_is_file "$MAN/coffer-$c.1" || return 1
	done &&
	for m in "$MAN"/coffer-*.1; do
		c=${m##*/coffer-} && c=${c%.1} &&
		grep -x "$c" paged || return 1
	done
'

test_expect_success 'help COMMAND, COMMAND --help and COMMAND -h print the same, exit 0' '
	for c in $(cat commands); do
		coffer help "$c" >"help-$c" 2>err && test_must_be_empty err &&
		coffer "$c" --help >h1 && test_cmp "help-$c" h1 &&
		coffer "$c" -h >h2 && test_cmp "help-$c" h2 &&
		head -1 "help-$c" | grep "^usage: coffer $c" || return 1
	done
'

test_expect_success 'each help names its manual page last' '
	for c in $(cat paged); do
		tail -1 "help-$c" >last &&
		echo "See coffer-$c(1)." >expect &&
		test_cmp expect last || return 1
	done &&
	echo "See coffer(1)." >expect &&
	tail -1 help-help >last && test_cmp expect last &&
	tail -1 help-version >last && test_cmp expect last
'

test_expect_success 'help lists the options the manual page documents, and no other' '
	for c in $(cat paged); do
		echo "# $c" &&
		man_options "$MAN/coffer-$c.1" >"man-$c" &&
		help_options "help-$c" >"opt-$c" &&
		test -s "opt-$c" &&
		test_cmp "man-$c" "opt-$c" || return 1
	done
'

test_expect_success 'the overview lists the global options coffer(1) documents' '
	man_options "$MAN/coffer.1" >man-global &&
	help_options help >opt-global &&
	test_cmp man-global opt-global
'

test_expect_success 'subcommands have their own usage and help' '
	for s in "drill history" "catalog rebuild" "catalog check"; do
		coffer help $s >h1 && coffer $s --help >h2 &&
		coffer $s -h >h3 && test_cmp h1 h2 && test_cmp h1 h3 &&
		grep "^usage: \|^   or: " h1 >usage &&
		test_line_count = 1 usage &&
		grep "^usage: coffer $s" usage &&
		grep "^\(usage\|   or\): coffer $s" "help-${s%% *}" || return 1
	done &&
	grep "^usage: coffer drill \[OPTIONS\] SNAPSHOT" help-drill &&
	grep "^usage: coffer catalog rebuild" help-catalog &&
	grep "^   or: coffer catalog check" help-catalog &&
	test_expect_code 2 coffer catalog 2>err && grep "catalog check" err &&
	test_expect_code 2 coffer catalog nosuch 2>err &&
	grep "nosuch" err && grep "catalog rebuild" err
'

test_expect_success 'every option in a help is one the command parses' '
	mkdir empty && cd empty &&
	for c in $(cat ../paged); do
		sed -n "/^options/,/^\$/p" "../help-$c" |
		grep -o "^ \{2,6\}\(-[a-zA-Z], \)\{0,1\}--[a-z0-9=[-]*" |
		sed "s/.*--/--/" >../opts &&
		while read -r o; do
			case $o in
			*"["*) o=${o%%[*} ;;
			*=*) o=${o%%=*}=1 ;;
			esac
			sub= &&
			case $c in catalog) sub=check ;; esac &&
			coffer $c $sub "$o" </dev/null >/dev/null 2>../err
			if grep "unrecognized option" ../err; then
				echo "coffer $c $sub $o: not parsed" && return 1
			fi
		done <../opts || return 1
	done &&
	cd .. && test_dir_is_empty empty
'

test_expect_success 'the environment variables in a help are those of coffer(1)' '
	for c in $(cat commands); do
		sed -n "/^environment:/,/^\$/p" "help-$c" |
		sed -n "s/^  \([A-Z_]*\) .*/\1/p" || return 1
	done | sort -u >envs &&
	cat envs &&
	grep -x COFFER_REPO envs && grep -x COFFER_PASSPHRASE envs &&
	for e in $(cat envs); do
		grep "^\.It Ev $e\$" "$MAN/coffer.1" || return 1
	done &&
	grep -x "  TMPDIR .*" help-drill &&
	! grep "COFFER_CATALOG" help-init &&
	! grep "^environment" help-help
'

test_expect_success 'help of an unknown command: status 2, with a guess' '
	test_expect_code 2 coffer help nosuch >out 2>err &&
	test_must_be_empty out && grep "nosuch" err &&
	test_expect_code 2 coffer help bakcup 2>err &&
	grep "did you mean .backup.?" err
'

test_expect_success 'a usage error shows the usage and the options on stderr' '
	test_expect_code 2 coffer -r nowhere backup onlyonearg >out 2>err &&
	test_must_be_empty out &&
	grep "^usage: coffer backup" err && grep -e "--exclude=GLOB" err &&
	test_expect_code 2 coffer -r nowhere snapshots --nosuch 2>err &&
	grep "nosuch" err && grep "^usage: coffer snapshots" err
'

test_expect_success '--help after "--" or as an option value is not help' '
	test_expect_code 3 coffer -r nowhere restore snap dest -- --help \
		>out 2>err &&
	test_must_be_empty out && grep "nowhere" err &&
	test_expect_code 3 coffer -r nowhere backup --exclude --help ds . \
		>out 2>err &&
	test_must_be_empty out && grep "nowhere" err
'

test_expect_success 'global options after the command still work with --help' '
	coffer backup -q --help -r nowhere >h && test_cmp help-backup h
'

test_expect_success 'a subcommand typo is a usage error that names the subcommand, not a missing snapshot' '
	test_expect_code 2 coffer -r nowhere drill histroy 2>err &&
	test_line_count = 1 err &&
	grep "did you mean .coffer drill history.?" err &&
	test_expect_code 2 coffer -r nowhere verify histry 2>err &&
	grep "did you mean .coffer verify history.?" err &&
	test_expect_code 3 coffer -r nowhere drill abcd 2>err &&
	! grep "did you mean" err
'

test_expect_success 'log --since names the forms it takes' '
	test_expect_code 2 coffer -r nowhere log --since 7days 2>err &&
	test_line_count = 1 err &&
	grep "7d, 12h" err && grep "2026-12-01T00:00:00Z" err
'

test_expect_success 'a usage line names an option its arguments require once' '
	for c in cron run export; do
		coffer "$c" --help | head -1 >u &&
		for o in policy target to; do
			n=$(grep -o -e "--$o\b" u | wc -l) &&
			test "$n" -le 1 || { cat u; return 1; }
		done || return 1
	done &&
	coffer cron --help | head -1 >u &&
	grep "^usage: coffer cron \[--unit=WHAT\] --policy FILE\$" u
'

test_done
