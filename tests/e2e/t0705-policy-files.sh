#!/bin/bash
test_description='policy files: only regular files, at most 1 MiB, lines of at most 4 KiB, never a hang'
. "$(dirname "$0")/../lib.sh"
require_coffer

# A policy that is not a regular file (a FIFO no one writes, /dev/zero,
# a symlink to it), one larger than 1 MiB, or a line longer than 4 KiB:
# `run` and `cron` each say so on one line and exit 2, promptly.

test_expect_success 'setup' '
	coffer_init_keyfile repo &&
	mkdir data && echo one >data/a &&
	cat >p.policy <<-EOF &&
	[repository]
	path = $TMP/repo
	key-file = $TMP/key
	[dataset ds]
	path = $TMP/data
	full = weekly sunday 02:15
	EOF
	mkfifo fifo.policy &&
	ln -s /dev/zero zero.policy &&
	cp p.policy huge.policy &&
	# comments only: every line is fine, the file is not
	awk "BEGIN { for (i = 0; i < 20000; i++) print \"# padding line \" i \" of a policy far larger than any needs\" }" >>huge.policy &&
	test $(wc -c <huge.policy) -gt 1048576 &&
	cp p.policy long.policy &&
	printf "# %05000d\n" 0 >>long.policy &&
	mkdir dir.policy
'

# refused WHAT FILE PATTERN: coffer WHAT --policy FILE exits 2 within
# 10 s, with one line on stderr matching PATTERN, nothing on stdout.
refused() {
	timeout 10 "$COFFER" $1 --policy "$2" >out 2>err; echo $? >rc
	cat err rc
	test "$(cat rc)" = 2 &&
	test_line_count = 1 err &&
	grep "^error: .*$3" err &&
	test_must_be_empty out
}

for what in run cron; do
	test_expect_success "$what: a FIFO is refused, not waited on" "
		refused $what fifo.policy 'not a regular file'
	"
	test_expect_success "$what: /dev/zero is refused, not read" "
		refused $what /dev/zero 'not a regular file'
	"
	test_expect_success "$what: a symlink to /dev/zero is refused" "
		refused $what zero.policy 'not a regular file'
	"
	test_expect_success "$what: a directory is refused" "
		refused $what dir.policy 'not a regular file'
	"
	test_expect_success "$what: a file over 1 MiB is refused" "
		refused $what huge.policy 'larger than 1 MiB'
	"
done

test_expect_success 'a line over 4 KiB: named by its line, exit 2' '
	timeout 10 "$COFFER" cron --policy long.policy >out 2>err; echo $? >rc &&
	cat err rc &&
	test "$(cat rc)" = 2 &&
	grep "long.policy:7: .*line too long" err
'

test_expect_success 'the policy itself is read' '
	coffer cron --policy p.policy --unit crontab >line &&
	test_line_count = 1 line
'

test_done
