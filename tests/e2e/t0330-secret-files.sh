#!/bin/bash
test_description='passphrases: files closed to others, COFFER_PASSPHRASE out of the environment, no core dumps'
. "$(dirname "$0")/../lib.sh"

test_expect_success 'setup: a passphrase repository with one snapshot' '
	mkdir -p src &&
	printf "one\n" >src/one &&
	COFFER_PASSPHRASE=correct-horse coffer init repo &&
	COFFER_PASSPHRASE=correct-horse coffer -r repo backup ds src &&
	printf "correct-horse\nsecond line, ignored\n" >pass &&
	repo_fingerprint repo >before
'

# refused MODE: a passphrase file with MODE is refused in one line that
# names it and says what to do, before anything is read or written.
refused() {
	chmod "$1" pass &&
	test_expect_code 3 coffer --passphrase-file pass -r repo \
		restore ds@latest "out-$1" 2>err &&
	cat err &&
	test_line_count = 1 err &&
	grep -F "passphrase file 'pass'" err &&
	grep -F "chmod 600" err &&
	test_path_is_missing "out-$1"
}

test_expect_success 'a passphrase file readable by others (0644) is refused' '
	refused 644
'

test_expect_success 'readable by its group (0640): refused' '
	refused 640
'

test_expect_success 'writable by others (0602): refused' '
	refused 602
'

test_expect_success 'init refuses an open passphrase file too, creating nothing' '
	chmod 644 pass &&
	test_expect_code 3 coffer --passphrase-file pass init repo2 2>err &&
	test_line_count = 1 err &&
	grep -F "chmod 600" err &&
	test_path_is_missing repo2
'

test_expect_success 'mode 0600 works; only the first line counts' '
	chmod 600 pass &&
	coffer --passphrase-file pass -r repo restore ds@latest out600 &&
	treecmp src out600
'

test_expect_success 'mode 0400 works' '
	chmod 400 pass &&
	coffer --passphrase-file pass -r repo restore ds@latest out400 &&
	treecmp src out400 &&
	chmod 600 pass
'

test_expect_success 'a pipe works (--passphrase-file <(...))' '
	coffer --passphrase-file <(printf "correct-horse\n") -r repo \
		restore ds@latest outpipe &&
	treecmp src outpipe
'

test_expect_success 'a passphrase file over 1024 bytes: one line, refused' '
	{ printf "correct-horse\n"; head -c 2000 /dev/zero | tr "\0" x; } >big &&
	chmod 600 big &&
	test_expect_code 3 coffer --passphrase-file big -r repo \
		restore ds@latest outbig 2>err &&
	test_line_count = 1 err &&
	grep -F "too large" err
'

# wait_fifo_open PID: until PID sleeps opening a FIFO that has no writer
# (the kernel's wait_for_partner), or, where wchan is hidden, sleeps for a
# second.  Everything before that point of coffer runs without sleeping.
wait_fifo_open() {
	i=0 slept=0
	while [ $i -lt 200 ] && [ -d "/proc/$1" ]; do
		case $(cat "/proc/$1/wchan" 2>/dev/null) in
		*wait_for_partner*|*fifo*) return 0 ;;
		esac
		case $(cut -d" " -f3 "/proc/$1/stat" 2>/dev/null) in
		S) slept=$((slept + 1)); [ $slept -lt 20 ] || return 0 ;;
		*) slept=0 ;;
		esac
		sleep 0.05
		i=$((i + 1))
	done
	return 1
}

# A FIFO as --passphrase-file holds coffer after the start of main, where
# COFFER_PASSPHRASE is taken, and before any key is used: the moment to
# look at the process from outside.
test_expect_success 'COFFER_PASSPHRASE is wiped from /proc/PID/environ; no core dumps' '
	mkfifo -m 600 fifo || return 1
	env COFFER_PASSPHRASE=env-s3cret-Qz7 "$COFFER" --passphrase-file fifo \
		-r repo restore ds@latest outfifo 2>err &
	pid=$! &&
	wait_fifo_open $pid &&
	# Unreadable is fine too: PR_SET_DUMPABLE 0 shuts out all but root.
	if cat "/proc/$pid/environ" >environ 2>/dev/null
	then
		! grep -a -F s3cret-Qz7 environ
	fi &&
	grep -E "^Max core file size +0 +0 " "/proc/$pid/limits"
	rc=$? &&
	# Let it go whatever was found (a coffer gone early never opens).
	timeout 10 sh -c "printf \"correct-horse\\n\" >fifo" &&
	wait $pid &&
	treecmp src outfifo &&
	return $rc
'

test_expect_success 'COFFER_PASSPHRASE still unlocks (taken into coffer, not lost)' '
	COFFER_PASSPHRASE=correct-horse coffer -r repo restore ds@latest outenv &&
	treecmp src outenv
'

test_expect_success 'the repository is unchanged, byte for byte' '
	repo_fingerprint repo >after &&
	test_cmp before after
'

test_done
