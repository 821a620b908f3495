#!/bin/bash
test_description='text from records (sources, hosts, policy paths, names) reaches no terminal raw: every human output escapes control characters'
. "$(dirname "$0")/../lib.sh"
require_coffer

# A write-only key signs records with whatever text its holder likes (a
# source path, a host name), and every host that syncs the catalog prints
# it.  An escape sequence there (a title change, a colour, clearing the
# screen, OSC 52 writing the clipboard) must come out escaped, as ls
# prints file names, from every command's human output; --json is
# escaped by JSON itself.

E=$(printf '\033]0;owned\007\033[2J\033[31m\302\233\233')

# clean FILE...: no C0 control but newline, no DEL, no C1 control (UTF-8
# or raw) in them.
clean() {
	for f; do
		if LC_ALL=C grep -n -P "[\\x00-\\x09\\x0b-\\x1f\\x7f\\x9b]" "$f"; then
			echo "raw control bytes in $f:"; od -c "$f" | head -20
			return 1
		fi
	done
}

test_expect_success 'setup: a write-only key backs up a source named with escapes' '
	coffer_init_keyfile repo &&
	coffer -r repo key export --write-only --to wo.key &&
	SRC="$TMP/src$E" &&
	mkdir -p "$SRC/d$E" &&
	echo one >"$SRC/d$E/f$E" &&
	echo two >"$SRC/plain" &&
	if test "$(id -u)" = 0 && unshare --uts true 2>/dev/null; then
		unshare --uts -- sh -c "printf \"h%s\" \"\$1\" >/proc/sys/kernel/hostname &&
			exec \"\$COFFER\" -r repo --key-file wo.key backup --json ds \"\$2\"" \
			- "$(printf "\033[31m\033]0;t\007")" "$SRC" >b1.json
	else
		coffer -r repo --key-file wo.key backup --json ds "$SRC" >b1.json
	fi &&
	sid1=$(json_get b1.json "\$j->{snapshot}") &&
	echo three >"$SRC/plain" &&
	coffer -r repo --key-file wo.key backup --json ds "$SRC" >b2.json &&
	sid2=$(json_get b2.json "\$j->{snapshot}")
'

test_expect_success 'a policy under a directory named with escapes: run, with a drill' '
	mkdir -p "$TMP/pol$E" &&
	cat >"$TMP/pol$E/p.policy" <<-EOF &&
	[repository]
	path = $TMP/repo
	key-file = $TMP/key
	[dataset ds]
	path = $SRC
	full = daily 02:15
	[drill check]
	schedule = daily 02:20
	EOF
	coffer run -v --policy "$TMP/pol$E/p.policy" --now 2026-01-01T03:00:00Z \
		>run.out 2>run.err; echo $? >rc &&
	cat rc run.out run.err &&
	test "$(cat rc)" -le 1 &&
	clean run.out run.err
'

for cmd in "snapshots" "snapshots ds" "log" "drill history" "key list" \
	"bundles" "ls \$sid1" "diff \$sid1 \$sid2" "verify" \
	"drill \$sid1" "restore \$sid1 tgt" "audit ds \$sid2" \
	"forget --keep-last 1 --dry-run ds" "catalog check"
do
	test_expect_success "coffer $cmd: no raw control byte" "
		eval \"coffer -r repo -v $cmd\" >out 2>err; echo \$? >rc &&
		cat out err rc | od -c | grep -q . &&
		cat out | head -5 &&
		test \$(cat rc) -lt 64 &&
		clean out err
	"
done

test_expect_success 'the policy path is shown escaped by log' '
	coffer -r repo log >out &&
	cat out &&
	grep -F "$TMP/pol\\033]0;owned\\007\\033[2J\\033[31m\\302\\233\\233/p.policy\"" out
'

test_expect_success 'the source is shown escaped, and whole in --json' '
	coffer -r repo snapshots >out &&
	grep -F "\"$TMP/src\\033]0;owned\\007\\033[2J\\033[31m\\302\\233\\233\"" out &&
	coffer -r repo snapshots --json >out.json &&
	json_check out.json "\$j->[0]{source} eq \"$TMP/src\\e]0;owned\\a\\e[2J\\e[31m\\302\\233\\233\""
'

test_done
