#!/bin/bash
test_description='coffer init: passphrase and key-file repositories, layout, refusals'
. "$(dirname "$0")/../lib.sh"

# The layout DESIGN.md fixes.  A passphrase repository has a key slot in
# keys/; one made with --key-file may have none there.
check_layout() {
	test_path_is_file "$1/coffer.conf" &&
	test_path_is_dir "$1/keys" &&
	test_path_is_dir "$1/packs" &&
	test_path_is_dir "$1/tmp" &&
	test_path_is_dir "$1/locks"
}

# snapshots and ls read only the host-local catalog; backup and restore
# need the keys, so they are what proves that a key opens a repository.
test_expect_success 'init with COFFER_PASSPHRASE creates the layout' '
	COFFER_PASSPHRASE=correct-horse coffer init repo &&
	check_layout repo &&
	test -n "$(ls -A repo/keys)" &&
	mkdir data && printf "x\n" >data/x
'

test_expect_success 'the passphrase opens it again, COFFER_PASSPHRASE and -r' '
	COFFER_PASSPHRASE=correct-horse coffer -r repo backup ds data
'

test_expect_success 'COFFER_REPO names the repository too' '
	COFFER_REPO=repo COFFER_PASSPHRASE=correct-horse coffer restore ds@latest r1 &&
	cmp data/x r1/x
'

test_expect_success 'the key slot does not hold the passphrase in the clear' '
	! grep -r -F correct-horse repo
'

test_expect_success 'init with --passphrase-file' '
	printf "file passphrase\n" >pass &&
	chmod 600 pass &&
	coffer --passphrase-file pass init repo2 &&
	check_layout repo2 &&
	coffer --passphrase-file pass -r repo2 backup ds data
'

test_expect_success 'a passphrase file and the same passphrase by env are one key' '
	COFFER_PASSPHRASE="file passphrase" coffer -r repo2 restore ds@latest r2 &&
	cmp data/x r2/x
'

test_expect_success 'init with -r and an existing empty directory' '
	mkdir repo3 &&
	COFFER_PASSPHRASE=x3 coffer -r repo3 init &&
	check_layout repo3
'

test_expect_success 'init --key-file writes a 0600 key file and asks nothing' '
	(umask 0 && coffer init --key-file kf "$TMP/repo-k" </dev/null) &&
	check_layout repo-k &&
	test_path_is_file kf &&
	test "$(stat -c %a kf)" = 600 &&
	test "$(stat -c %s kf)" -gt 0
'

test_expect_success 'the key file opens it, as an option and by env' '
	coffer --key-file kf -r repo-k backup ds data </dev/null &&
	COFFER_KEY_FILE=kf coffer -r repo-k restore ds@latest r3 </dev/null &&
	cmp data/x r3/x
'

test_expect_success 'coffer_init_keyfile helper' '
	(
		coffer_init_keyfile repo-h &&
		test "$COFFER_KEY_FILE" = "$TMP/key" &&
		coffer -r repo-h backup ds data
	)
'

test_expect_success 'a new repository has no snapshots' '
	COFFER_PASSPHRASE=x3 coffer -r repo3 snapshots --json >snaps.json &&
	json_check snaps.json "ref \$j eq q(ARRAY) && @\$j == 0"
'

test_expect_success 'the catalog lives under XDG_STATE_HOME, not in HOME or the repo' '
	ls "$XDG_STATE_HOME"/coffer/*/catalog.db &&
	! find repo-h -name "*.db" | grep . &&
	test -z "$(find "$HOME" -mindepth 1 ! -type d)"
'

test_expect_success '--catalog and COFFER_CATALOG move the catalog' '
	coffer --catalog "$TMP/cat1/catalog.db" --key-file key -r repo-h snapshots &&
	test_path_is_file cat1/catalog.db &&
	COFFER_CATALOG="$TMP/cat2/catalog.db" coffer --key-file key -r repo-h snapshots &&
	test_path_is_file cat2/catalog.db
'

test_expect_success 'init refuses a non-empty directory and leaves it alone' '
	mkdir full && echo precious >full/file &&
	test_must_fail coffer init --key-file kf2 full 2>err &&
	cat err && test -s err &&
	test "$(ls -A full)" = file &&
	test "$(cat full/file)" = precious &&
	test_path_is_missing kf2
'

test_expect_success 'init refuses an existing repository and leaves it alone' '
	repo_fingerprint repo-k >before &&
	test_must_fail coffer init --key-file kf3 repo-k 2>err &&
	test -s err &&
	repo_fingerprint repo-k >after &&
	test_cmp before after
'

test_expect_success 'init does not overwrite an existing key file' '
	cp kf kf.orig &&
	test_must_fail coffer init --key-file kf repo-k2 &&
	cmp kf kf.orig
'

test_expect_success 'a directory that is not a repository: status 3' '
	mkdir plain &&
	test_expect_code 3 coffer -r plain snapshots 2>err &&
	test_line_count -ge 1 err &&
	test_expect_code 3 coffer -r plain ls plain@latest &&
	test_expect_code 3 coffer -r plain restore plain@latest out &&
	test_path_is_missing out &&
	test_expect_code 3 coffer -r plain backup ds data &&
	test -z "$(ls -A plain)"
'

test_expect_success 'a missing repository directory: status 3' '
	test_expect_code 3 coffer -r no-such-repo snapshots &&
	test_path_is_missing no-such-repo
'

test_expect_success 'a wrong key file: status 3, one line' '
	coffer init --key-file other-key repo-o &&
	repo_fingerprint repo-k >before &&
	test_expect_code 3 coffer --key-file other-key -r repo-k backup ds data 2>err &&
	test_line_count = 1 err &&
	test_expect_code 3 coffer --key-file other-key -r repo-k restore ds@latest r4 2>err &&
	test_line_count = 1 err &&
	test_path_is_missing r4 &&
	head -c 32 /dev/zero >zero-key &&
	test_expect_code 3 coffer --key-file zero-key -r repo-k backup ds data &&
	repo_fingerprint repo-k >after &&
	test_cmp before after
'

test_expect_success 'a key file of a repository used on a passphrase one: status 3' '
	test_expect_code 3 coffer --key-file kf -r repo restore ds@latest r5 &&
	test_path_is_missing r5
'

test_expect_success 'a missing key file: status 3' '
	test_expect_code 3 coffer --key-file no-such-key -r repo-k backup ds data
'

test_expect_success 'no passphrase and no terminal: fails at once' '
	test_must_fail timeout 60 setsid -w "$COFFER" -r repo backup ds data \
		</dev/null 2>err &&
	cat err && test -s err
'

test_expect_success 'usage errors: status 2' '
	test_expect_code 2 coffer -r repo-k no-such-command &&
	test_expect_code 2 coffer --no-such-option -r repo-k snapshots &&
	test_expect_code 2 coffer -r repo-k snapshots --no-such-option &&
	test_expect_code 2 coffer -r repo-k restore &&
	test_expect_code 2 coffer -r repo-k backup onlyonearg &&
	test_expect_code 2 coffer
'

test_expect_success 'no repository given: an error, not a crash' '
	test_must_fail coffer --key-file key snapshots 2>err &&
	test -s err
'

test_expect_success 'version and help' '
	coffer --version >v1 && test -s v1 &&
	coffer version >v2 && test_cmp v1 v2 &&
	coffer --help >h && grep backup h && grep restore h &&
	coffer help backup >hb && grep -e --exclude hb &&
	coffer help restore >hr && grep -e --force hr
'

test_done
