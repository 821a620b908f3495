#!/bin/bash
test_description='unreadable source files are warnings: listed, status 1, snapshot complete'
. "$(dirname "$0")/../lib.sh"

# Root reads any file.  Run coffer as root without CAP_DAC_OVERRIDE and
# CAP_DAC_READ_SEARCH instead (dropped from the inheritable and bounding
# sets, so the exec'd program never gets them): a mode 0000 file is then
# unreadable while the root-owned repository stays usable.
unprivileged() {
	if test "$(id -u)" = 0; then
		setpriv --inh-caps=-dac_override,-dac_read_search \
			--bounding-set=-dac_override,-dac_read_search -- "$@"
	else
		"$@"
	fi
}

printf 'secret\n' >probe && chmod 0000 probe
if unprivileged cat probe >/dev/null 2>&1; then
	test_skip_all "cannot make a file unreadable here (root without setpriv?)"
fi
rm -f probe

test_expect_success 'setup: a tree with an unreadable file and directory' '
	mkdir -p src/ok/sub src/closed &&
	printf "fine\n" >src/ok/a &&
	printf "fine too\n" >src/ok/sub/b &&
	printf "secret\n" >src/secret.bin &&
	printf "hidden\n" >src/closed/inner &&
	chmod 0000 src/secret.bin src/closed &&
	coffer_init_keyfile repo
'

test_expect_success 'backup: status 1, the unreadable paths on stderr' '
	test_expect_code 1 unprivileged "$COFFER" -r repo backup ds src >out 2>err &&
	cat err &&
	test_must_be_empty out &&
	grep -F secret.bin err &&
	grep -F closed err &&
	! grep -F ok/a err
'

test_expect_success 'the snapshot is complete' '
	coffer -r repo snapshots --json >snaps.json &&
	json_check snaps.json "@\$j == 1 && \$j->[0]{state} eq q(complete)"
'

test_expect_success 'backup --json counts the warnings, status 1' '
	test_expect_code 1 unprivileged "$COFFER" -r repo backup --json ds src \
		>b.json 2>err &&
	json_check b.json "\$j->{warnings} >= 2" &&
	grep -F secret.bin err
'

test_expect_success 'the readable files restore identically, status 0' '
	coffer -r repo restore ds@latest restored &&
	treecmp src/ok restored/ok
'

test_expect_success 'readable again: the next backup has no warnings' '
	chmod 0644 src/secret.bin && chmod 0755 src/closed &&
	unprivileged "$COFFER" -r repo backup --json ds src >b2.json 2>err &&
	test_must_be_empty err &&
	json_check b2.json "\$j->{warnings} == 0" &&
	coffer -r repo restore ds@latest again &&
	treecmp src again
'

test_done
