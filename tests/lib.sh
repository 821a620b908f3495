# tests/lib.sh: the library every end-to-end test sources, in the spirit of
# git's t/test-lib.sh.  A test script is
#
#	#!/bin/bash
#	test_description='what it checks'
#	. "$(dirname "$0")/../lib.sh"
#	test_expect_success 'backup works' '
#		mktree src --small &&
#		coffer_init_keyfile repo &&
#		coffer -r repo backup ds src
#	'
#	test_done
#
# and prints TAP for prove.  Each script runs in a fresh temporary directory
# (its own HOME, XDG_STATE_HOME and no COFFER_* or AWS_* from outside),
# removed at exit unless a test failed and -d / --debug or COFFER_TEST_KEEP
# asked to keep it.  Options: -v / --verbose shows every test's output, -i /
# --immediate stops at the first failure, -x traces the test code.
#
# Environment: COFFER (the binary, built with the test hooks; default
# <top>/build/test/coffer), COFFER_RELEASE (the binary make install
# installs, without them; default <top>/coffer), BUILD (the build
# directory holding tests/treecmp; default <top>/build), TMPDIR.

TEST_DIRECTORY=$(cd "$(dirname "$0")" && pwd)
TOP=$(cd "$TEST_DIRECTORY/../.." && pwd)
: "${BUILD:=$TOP/build}"
: "${COFFER:=$BUILD/test/coffer}"
: "${COFFER_RELEASE:=$TOP/coffer}"
: "${MKTREE:=$TOP/tests/tools/mktree.sh}"
: "${TREECMP:=$BUILD/tests/treecmp}"
: "${SWIFT_SERVER:=$TOP/tests/tools/swift-server}"
export COFFER COFFER_RELEASE BUILD MKTREE TREECMP SWIFT_SERVER TOP

test_count=0
test_failed=0
test_fixed=0
test_broken=0
test_skipped=0
test_debug=${COFFER_TEST_KEEP:+t}
test_verbose=${COFFER_TEST_VERBOSE:-}
test_immediate=
test_trace=
for arg; do
	case $arg in
	-d|--debug) test_debug=t ;;
	-v|--verbose) test_verbose=t ;;
	-i|--immediate) test_immediate=t ;;
	-x) test_trace=t ;;
	-h|--help)
		echo "usage: $0 [-d|--debug] [-v|--verbose] [-i|--immediate] [-x]"
		exit 0 ;;
	*) echo "Bail out! unknown option '$arg'"; exit 1 ;;
	esac
done

# Predictable output and no outside state: coffer sees only the temp dir.
export LC_ALL=C LANG=C TZ=UTC
umask 022
unset COFFER_REPO COFFER_KEY_FILE COFFER_PASSPHRASE COFFER_CATALOG
# Nor the host's object storage: credentials, endpoint, region, CA bundles
# (a host may set CURL_CA_BUNDLE or AWS_CA_BUNDLE for everything).
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE \
	AWS_REGION AWS_DEFAULT_REGION AWS_ENDPOINT_URL AWS_CA_BUNDLE \
	AWS_CONFIG_FILE AWS_SHARED_CREDENTIALS_FILE
unset COFFER_CACERT CURL_CA_BUNDLE
unset CDPATH GREP_OPTIONS

TMP=$(mktemp -d "${TMPDIR:-/tmp}/coffer-test.XXXXXX") ||
	{ echo "Bail out! cannot create a temporary directory"; exit 1; }
TMP=$(cd "$TMP" && pwd -P)
TEST_LOG=$TMP/.testlib
mkdir -p "$TEST_LOG" "$TMP/home" "$TMP/state" "$TMP/config" "$TMP/cache"
export TMP HOME=$TMP/home XDG_STATE_HOME=$TMP/state \
	XDG_CONFIG_HOME=$TMP/config XDG_CACHE_HOME=$TMP/cache
export TMPDIR=$TMP
# Each run of coffer appends "STATUS RETURNED ERRORS COMMAND..." here
# (coffer(1)'s test hooks); test_done checks it.
COFFER_TEST_EXITS=$TEST_LOG/exits
export COFFER_TEST_EXITS
# A prune's mark may go at once once no writer began before it (tests run
# on one clock; t0065 sets a margin of its own).
COFFER_PRUNE_MARGIN=0
export COFFER_PRUNE_MARGIN

test_cleanup_() {
	code=$?
	cd / || :
	# The object stores of swift_start, stopped by their recorded PIDs.
	if [ -s "$TEST_LOG/swift-dirs" ]; then
		while IFS= read -r d; do
			"$SWIFT_SERVER" stop "$d"
		done <"$TEST_LOG/swift-dirs"
	fi
	if [ "$test_failed" -gt 0 ] && [ -n "$test_debug" ]; then
		echo "# kept $TMP"
	else
		# Tests make unwritable directories; root would not care.
		chmod -R u+rwx "$TMP" 2>/dev/null
		rm -rf "$TMP"
	fi
	exit $code
}
trap test_cleanup_ EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
cd "$TMP" || exit 1

# Diagnostics of the test_* helpers go to fd 4: the test's log while a test
# runs, even when the command under test has its stderr redirected.
exec 4>&2

# Print stdin as TAP comment lines.
test_comment_() {
	sed -e 's/^/# /' -e 's/^# $/#/'
}

# Run test code in this shell (no subshell, so it may set variables for
# later tests), with output to a log; returns the code's status.  The code
# may "return 1" early.
test_eval_() {
	eval "$1"
}
test_run_() {
	if [ -n "$test_trace" ]; then
		set -x
	fi
	test_eval_ "$1" >"$TEST_LOG/out" 2>&1 4>&1 </dev/null
	test_status_=$?
	{ set +x; } 2>/dev/null
	cd "$TMP" || exit 1
	return $test_status_
}

# test_expect_success [PREREQ] 'description' 'code'
test_expect_success() {
	test_args_ "$@" || return 0
	if test_run_ "$test_code_"; then
		echo "ok $test_count - $test_desc_"
		[ -z "$test_verbose" ] || test_comment_ <"$TEST_LOG/out"
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - $test_desc_"
		printf '%s\n' "$test_code_" | test_comment_
		echo "# --- output (status $test_status_) ---"
		test_comment_ <"$TEST_LOG/out"
		if [ -n "$test_immediate" ]; then
			test_done
		fi
	fi
}

# test_expect_failure [PREREQ] 'description' 'code': a known breakage.
test_expect_failure() {
	test_args_ "$@" || return 0
	if test_run_ "$test_code_"; then
		test_fixed=$((test_fixed + 1))
		echo "ok $test_count - $test_desc_ # TODO known breakage vanished"
	else
		test_broken=$((test_broken + 1))
		echo "not ok $test_count - $test_desc_ # TODO known breakage"
	fi
	[ -z "$test_verbose" ] || test_comment_ <"$TEST_LOG/out"
}

# Parse [PREREQ] DESC CODE; number the test; 1 if skipped.
test_args_() {
	test_prereq_=
	if [ $# = 3 ]; then
		test_prereq_=$1
		shift
	fi
	[ $# = 2 ] || { echo "Bail out! bad test arguments: $*"; exit 1; }
	test_desc_=$1 test_code_=$2
	test_count=$((test_count + 1))
	if [ -n "$test_prereq_" ] && ! test_have_prereq "$test_prereq_"; then
		test_skipped=$((test_skipped + 1))
		echo "ok $test_count # skip $test_desc_ (missing $test_prereq_)"
		return 1
	fi
	return 0
}

# Prerequisites: test_set_prereq NAME; test_have_prereq A,B (all of them).
test_prereqs_=" "
test_set_prereq() {
	test_prereqs_="$test_prereqs_$1 "
}
test_have_prereq() {
	for p in $(echo "$1" | tr , ' '); do
		case $test_prereqs_ in
		*" $p "*) ;;
		*) return 1 ;;
		esac
	done
	return 0
}

# Skip the whole script (before any test) with a reason.
test_skip_all() {
	echo "1..0 # SKIP $*"
	test_done_=t
	exit 0
}

# An "error:" line must come with a failing status: a command that
# printed one and returned success (0, or 1 for warnings) is a bug even
# though main() then exits 5 (src/main.c), so every script ends with
# this check of what each run of coffer recorded.
# test_exits_bad FILE: the runs recorded in FILE that printed an error and
# returned success.
test_exits_bad() {
	awk '$3 > 0 && ($2 == 0 || $2 == 1)' "$1"
}
test_exits_check_() {
	[ -z "$test_exits_checked_" ] || return 0
	test_exits_checked_=t
	[ -s "$COFFER_TEST_EXITS" ] || return 0
	test_expect_success 'no command printed "error:" and returned success' '
		test_exits_bad "$COFFER_TEST_EXITS" >"$TEST_LOG/bad-exits" &&
		if test -s "$TEST_LOG/bad-exits"; then
			echo "error: lines with a successful return (status returned errors command):"
			cat "$TEST_LOG/bad-exits"
			false
		fi
	'
}

test_done() {
	test_exits_check_
	echo "1..$test_count"
	[ "$test_fixed" = 0 ] ||
		echo "# $test_fixed known breakage(s) vanished; mark them test_expect_success"
	[ "$test_broken" = 0 ] || echo "# still have $test_broken known breakage(s)"
	[ "$test_skipped" = 0 ] || echo "# skipped $test_skipped test(s)"
	if [ "$test_failed" -gt 0 ]; then
		echo "# failed $test_failed among $test_count test(s)"
		exit 1
	fi
	echo "# passed all $test_count test(s)"
	exit 0
}

# test_must_fail CMD...: CMD must exit non-zero, but not by a signal or a
# crash (status > 128) and not because it was not found (127).
test_must_fail() {
	"$@"
	test_exit_=$?
	if [ $test_exit_ = 0 ]; then
		echo "test_must_fail: command succeeded: $*" >&4
		return 1
	elif [ $test_exit_ -gt 128 ]; then
		echo "test_must_fail: died by signal $((test_exit_ - 128)): $*" >&4
		return 1
	elif [ $test_exit_ = 127 ]; then
		echo "test_must_fail: command not found: $*" >&4
		return 1
	fi
	return 0
}

# test_expect_code N CMD...: CMD must exit with status N.
test_expect_code() {
	test_want_=$1
	shift
	"$@"
	test_exit_=$?
	if [ "$test_exit_" = "$test_want_" ]; then
		return 0
	fi
	echo "test_expect_code: command exited with $test_exit_, we wanted $test_want_: $*" >&4
	return 1
}

# test_cmp EXPECTED ACTUAL
test_cmp() {
	diff -u -- "$@"
}

test_path_is_file() {
	[ -f "$1" ] || { echo "not a file: '$1'" >&2; return 1; }
}
test_path_is_dir() {
	[ -d "$1" ] || { echo "not a directory: '$1'" >&2; return 1; }
}
test_path_is_missing() {
	if [ -e "$1" ] || [ -L "$1" ]; then
		echo "path exists: '$1'" >&2
		ls -ld -- "$1" >&2
		return 1
	fi
}
test_must_be_empty() {
	if [ -s "$1" ]; then
		echo "'$1' is not empty, it contains:" >&2
		cat -- "$1" >&2
		return 1
	fi
}
test_dir_is_empty() {
	if [ -n "$(ls -A -- "$1")" ]; then
		echo "directory '$1' is not empty:" >&2
		ls -la -- "$1" >&2
		return 1
	fi
}
# test_line_count (=|-lt|-ge|...) N FILE
test_line_count() {
	test_n_=$(wc -l <"$3")
	if ! [ "$test_n_" "$1" "$2" ]; then
		echo "test_line_count: line count of '$3' is $test_n_, not $1 $2:" >&2
		cat -- "$3" >&2
		return 1
	fi
}

# The binary under test.  A script that needs it calls require_coffer;
# a missing binary is a failure (Bail out!), never a silent skip.
coffer() {
	"$COFFER" "$@"
}
require_coffer() {
	if ! [ -x "$COFFER" ]; then
		echo "Bail out! coffer binary '$COFFER' not built (run make)"
		exit 1
	fi
	# Without its hooks every script would pass blind to a command that
	# printed an error and exited 0 (test_done): refuse the release build.
	COFFER_TEST_EXITS=$TEST_LOG/probe "$COFFER" version >/dev/null 2>&1
	if ! [ -s "$TEST_LOG/probe" ]; then
		echo "Bail out! '$COFFER' has no test hooks: the tests run" \
			"the test build (make builds build/test/coffer)"
		exit 1
	fi
	rm -f "$TEST_LOG/probe"
}

# treecmp A B: compare two trees (tests/tools/treecmp.c).  Built by make;
# compiled here into the temp dir when a script is run by hand before make.
treecmp() {
	"$TREECMP" "$@"
}
require_treecmp() {
	[ -x "$TREECMP" ] && return 0
	TREECMP=$TMP/.testlib/treecmp
	${CC:-cc} -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -O2 \
		-o "$TREECMP" "$TOP/tests/tools/treecmp.c" ||
		{ echo "Bail out! cannot build treecmp"; exit 1; }
}

# require_swift: skip the script, loudly, where the test object store
# cannot run (python3-swift missing: make deps installs it); under CI=true
# that is a failure instead.
require_swift() {
	swift_why_=$("$SWIFT_SERVER" check 2>&1) && return 0
	if [ "${CI:-}" = true ]; then
		echo "Bail out! $swift_why_"
		exit 1
	fi
	echo "WARNING: $0 skipped: $swift_why_" >&2
	test_skip_all "no object store: $swift_why_"
}

# swift_prereq: the prerequisite SWIFT for the tests of a script that
# need the test object store, where it can run; under CI=true its absence
# is a failure instead.
swift_prereq() {
	if "$SWIFT_SERVER" check >/dev/null 2>&1; then
		test_set_prereq SWIFT
	elif [ "${CI:-}" = true ]; then
		echo "Bail out! no object store: $("$SWIFT_SERVER" check 2>&1)"
		exit 1
	fi
}

# require_promtool: skip the script, loudly, where Prometheus's promtool
# is missing (make deps installs it, from Debian's prometheus package);
# under CI=true that is a failure instead.
require_promtool() {
	command -v promtool >/dev/null && return 0
	if [ "${CI:-}" = true ]; then
		echo "Bail out! promtool not found (make deps)"
		exit 1
	fi
	echo "WARNING: $0 skipped: promtool not found (make deps)" >&2
	test_skip_all "no promtool (make deps installs it)"
}

# swift_start [DIR]: an OpenStack Swift object store with its S3 API on
# 127.0.0.1, in DIR (default $TMP/swift), by tests/tools/swift-server; sets
# the variables it prints (SWIFT_S3_URL, SWIFT_S3_HTTPS_URL, SWIFT_CACERT,
# SWIFT_ACCESS_KEY, SWIFT_SECRET_KEY, SWIFT_REGION, SWIFT_*_PID).  It is
# stopped when the script exits, and exits by itself if the script is
# killed.
swift_start() {
	swift_dir_=${1:-$TMP/swift}
	echo "$swift_dir_" >>"$TEST_LOG/swift-dirs"
	swift_env_=$("$SWIFT_SERVER" start "$swift_dir_" --owner $$) &&
	eval "$swift_env_"
}

# swift_credentials: the started store's S3 credentials in the
# environment, as a user's (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY).
swift_credentials() {
	AWS_ACCESS_KEY_ID=$SWIFT_ACCESS_KEY &&
	AWS_SECRET_ACCESS_KEY=$SWIFT_SECRET_KEY &&
	export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
}

# wait_stopped PID: wait (30 s at most) until process PID is stopped (a
# COFFER_TEST_RAISE=POINT:N:STOP reached its point).
wait_stopped() {
	wait_stopped_n_=0 &&
	until test "$(awk "{ print \$3 }" "/proc/$1/stat" 2>/dev/null)" = T
	do
		sleep 0.1
		wait_stopped_n_=$((wait_stopped_n_ + 1))
		test $wait_stopped_n_ -lt 300 || return 1
	done
}

# mktree DIR [--small]: the hostile tree (tests/tools/mktree.sh).
mktree() {
	"$MKTREE" "$@"
}

# coffer_init_keyfile REPO [KEYFILE]: a repository unlocked by a raw key
# file (no Argon2id, no passphrase), used by later commands through
# COFFER_KEY_FILE.
coffer_init_keyfile() {
	coffer_key_=${2:-$TMP/key}
	coffer init --key-file "$coffer_key_" "$1" &&
	COFFER_KEY_FILE=$coffer_key_ &&
	export COFFER_KEY_FILE
}

# json_check FILE 'perl expression': FILE must be JSON and the expression,
# with the document in $j, true.  Strings are left as bytes (no UTF-8
# decoding), so they compare with byte strings from the file system.
json_check() {
	perl -MJSON::PP -e '
		my ($file, $code) = @ARGV;
		open(my $fh, "<", $file) or die "$file: $!\n";
		local $/;
		my $text = <$fh>;
		our $j = eval { JSON::PP->new->decode($text) };
		die "$file: not JSON: $@" unless defined $j;
		my $ok = eval $code;
		die "json_check: $@" if $@;
		exit 0 if $ok;
		print STDERR "json_check: false: $code\n$text\n";
		exit 1;
	' "$@"
}

# json_get FILE 'perl expression': print the expression's value ($j as above).
json_get() {
	perl -MJSON::PP -e '
		my ($file, $code) = @ARGV;
		open(my $fh, "<", $file) or die "$file: $!\n";
		local $/;
		our $j = JSON::PP->new->decode(<$fh>);
		my $v = eval $code;
		die "json_get: $@" if $@;
		die "json_get: undefined: $code\n" unless defined $v;
		print "$v\n";
	' "$@"
}

# snapshot_id DATASET [STATE]: full id of the dataset's newest snapshot
# (in the given state, default complete), from snapshots --json.
snapshot_id() {
	coffer snapshots --json >"$TEST_LOG/snaps.json" &&
	json_get "$TEST_LOG/snaps.json" '
		my @s = grep { $_->{dataset} eq "'"$1"'" &&
		    $_->{state} eq "'"${2:-complete}"'" } @$j;
		@s = sort { $a->{time} cmp $b->{time} } @s;
		@s ? $s[-1]{id} : undef'
}

# repo_fingerprint DIR: every file's path and sha256 and every directory,
# sorted; equal before and after means nothing changed.
repo_fingerprint() {
	(cd "$1" && find . -print0 | sort -z | while IFS= read -r -d '' f; do
		if [ -f "$f" ] && ! [ -L "$f" ]; then
			printf '%s  %s\n' "$(sha256sum <"$f" | cut -d' ' -f1)" "$f"
		else
			printf '%s  %s\n' "$(stat -c %F "$f")" "$f"
		fi
	done)
}

# dir_bytes DIR: total apparent size of the files below DIR.
dir_bytes() {
	find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'
}

# random_file PATH MIB: incompressible data, fast (AES-CTR of zeros with a
# random key when openssl exists, else /dev/urandom).
random_file() {
	if command -v openssl >/dev/null; then
		openssl enc -aes-128-ctr -nosalt -pbkdf2 -pass \
			"pass:$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" \
			</dev/zero 2>/dev/null | head -c "$(($2 * 1048576))" >"$1"
	else
		head -c "$(($2 * 1048576))" /dev/urandom >"$1"
	fi
	[ "$(stat -c %s "$1")" = $(($2 * 1048576)) ]
}

# flip_byte FILE OFFSET: invert one byte in place.
flip_byte() {
	perl -e '
		my ($f, $o) = @ARGV;
		open(my $fh, "+<", $f) or die "$f: $!\n";
		binmode $fh;
		seek($fh, $o, 0) or die "seek: $!\n";
		read($fh, my $c, 1) == 1 or die "$f: no byte at $o\n";
		seek($fh, $o, 0) or die "seek: $!\n";
		print $fh chr(ord($c) ^ 0xff);
		close($fh) or die "$f: $!\n";
	' "$1" "$2"
}

# largest_pack REPO: path of the biggest file under REPO/packs.
largest_pack() {
	find "$1/packs" -type f -printf '%s %p\n' | sort -n | tail -n 1 |
		cut -d' ' -f2-
}

# The catalog of repository $1 (default repo), for locating records.
catalog_db() {
	"$COFFER" -r "${1:-repo}" catalog path
}

# cp_repo SRC DST: repository SRC copied to DST with a copy of its
# catalog, as if the repository this host knows were at DST (a catalog
# belongs to one repository at one place): for tests that damage a copy.
cp_repo() {
	cp -a "$1" "$2" &&
	cp_repo_from_=$(catalog_db "$1") && cp_repo_to_=$(catalog_db "$2") &&
	if [ -d "${cp_repo_from_%/*}" ] &&
		[ "$cp_repo_from_" != "$cp_repo_to_" ]; then
		rm -rf "${cp_repo_to_%/*}" &&
		cp -a "${cp_repo_from_%/*}" "${cp_repo_to_%/*}"
	fi
}

# chunk_loc PATH SEQ: "pack offset stored_len" of the SEQ-th chunk of the
# content of PATH (in any snapshot).
chunk_loc() {
	sqlite3 -separator ' ' "$(catalog_db)" "
		SELECT p.name, ch.pack_offset, ch.stored_len
		FROM entry e JOIN path pa ON pa.id = e.path_id
		JOIN content_chunk cc ON cc.content_id = e.content_id
		JOIN chunk ch ON ch.id = cc.chunk_id
		JOIN pack p ON p.id = ch.pack_id
		WHERE pa.name = CAST('$1' AS BLOB) AND cc.seq = $2 LIMIT 1"
}

# restored_or_named DIR: each file of src is in DIR exactly or named in
# err; prints a "lost: PATH" line for each one lost.
restored_or_named() {
	for f in $(cd src && find . -type f | sed "s|^\./||" | sort); do
		if test -e "$1/$f"; then
			cmp "src/$f" "$1/$f" || return 1
		else
			grep -F "'$f'" err >/dev/null || return 1
			echo "lost: $f"
		fi
	done
}

# pack_path NAME: where pack NAME is in repo.
pack_path() {
	echo "repo/packs/$(echo "$1" | cut -c1-2)/$1"
}

test_set_prereq POSIXPERM
[ "$(id -u)" = 0 ] && test_set_prereq ROOT
command -v setpriv >/dev/null && test_set_prereq SETPRIV
command -v flock >/dev/null && test_set_prereq FLOCK

if [ -z "${TEST_NO_COFFER:-}" ]; then
	require_coffer
fi
require_treecmp
