#!/bin/bash
test_description='a hostile repository: links, FIFOs and swapped types are refused, nothing outside is touched'
. "$(dirname "$0")/../lib.sh"

# Whoever can write the repository directory plants, in place of each
# thing coffer opens there, a symlink to a directory or file outside it, a
# FIFO, a directory where a file belongs or a file where a directory
# belongs.  Every command must end (no hang on a FIFO), fail with a line
# that names what it refused, and leave "outside" exactly as it was.

T=20	# seconds: a command still running by then hung

# pristine: a passphrase repository (key slots in keys/) with one
# snapshot, copied afresh for each case.
test_expect_success 'setup: a repository, a snapshot and an outside canary' '
	mktree src --small &&
	cp -a src src0 &&
	export COFFER_PASSPHRASE=correct-horse &&
	coffer init --kdf-memory 8 pristine &&
	coffer -r pristine backup --json ds src >b.json &&
	id=$(json_get b.json "\$j->{snapshot}") &&
	mkdir -p outside/dir &&
	printf "precious\n" >outside/dir/keep.txt &&
	printf "precious file\n" >outside/file &&
	repo_fingerprint outside >outside.before &&
	slot=$(cd pristine/keys && ls | head -1) &&
	pk=$(cd pristine && find packs -type f -printf "%s %p\n" | sort -n |
		tail -n 1 | cut -d" " -f2-) &&
	fan=${pk%/*} &&
	test -n "$slot" && test -n "$pk" &&
	cp -a "$XDG_STATE_HOME/coffer" catalog0
'

# A fresh copy of the repository and of its catalog (same repository id).
fresh() {
	rm -rf repo out "$XDG_STATE_HOME/coffer" &&
	cp -a pristine repo && cp -a catalog0 "$XDG_STATE_HOME/coffer"
}

# plant PATH KIND: replace repo/PATH by KIND (link-dir, link-file,
# dangling, fifo, dir, file).
plant() {
	rm -rf "repo/$1" &&
	case $2 in
	link-dir) ln -s "$TMP/outside/dir" "repo/$1" ;;
	link-file) ln -s "$TMP/outside/file" "repo/$1" ;;
	dangling) ln -s "$TMP/outside/new-file" "repo/$1" ;;
	fifo) mkfifo "repo/$1" ;;
	dir) mkdir "repo/$1" ;;
	file) printf "not what it seems\n" >"repo/$1" ;;
	esac
}

# refused PATTERN CMD...: CMD ends within T seconds, fails (not by the
# timeout), its stderr matches PATTERN, and outside is unchanged.
refused() {
	pattern=$1 && shift &&
	test_expect_code_in_ 1 2 3 4 5 -- timeout $T "$COFFER" -r repo "$@" \
		>out.stdout 2>err &&
	cat err &&
	grep -E -- "$pattern" err &&
	repo_fingerprint outside >outside.after &&
	test_cmp outside.before outside.after &&
	test_path_is_missing outside/new-file
}

# test_expect_code_in_ CODES... -- CMD: CMD's status is one of CODES.
test_expect_code_in_() {
	codes=
	while [ "$1" != -- ]; do codes="$codes $1"; shift; done
	shift
	"$@"
	code=$?
	for c in $codes; do
		[ "$code" = "$c" ] && return 0
	done
	echo "test_expect_code_in_: '$*' exited $code, wanted one of$codes" >&2
	return 1
}

# Directories: a link to a directory outside, a file in their place.
for d in tmp locks packs keys; do
	for kind in link-dir file dangling; do
		test_expect_success "'$d' is a $kind: backup refuses it" '
			fresh && plant '"$d $kind"' &&
			printf "new\n" >src/new-'"$d-$kind"' &&
			refused "'"'$d'"'.*(refused|Not a directory|No such)" \
				backup ds src
		'
	done
done

test_expect_success "a link in 'tmp' is removed, not what it names" '
	fresh &&
	ln -s "$TMP/outside/file" repo/tmp/0123456789abcdef0123456789abcdef &&
	ln -s "$TMP/outside/dir" repo/tmp/leftover-dir &&
	coffer -r repo backup ds src &&
	repo_fingerprint outside >outside.after &&
	test_cmp outside.before outside.after &&
	test_dir_is_empty repo/tmp
'

test_expect_success "a directory in 'tmp' is left alone with a warning" '
	fresh &&
	mkdir repo/tmp/not-coffers &&
	printf x >repo/tmp/not-coffers/f &&
	coffer -r repo backup ds src 2>err &&
	grep "tmp/not-coffers" err &&
	test_path_is_file repo/tmp/not-coffers/f
'

# coffer.conf, the lock and a key slot: links, FIFOs, directories.
for kind in link-file dangling fifo dir; do
	test_expect_success "coffer.conf is a $kind: refused" '
		fresh && plant coffer.conf '"$kind"' &&
		refused "coffer.conf" snapshots
	'
	test_expect_success "locks/writer is a $kind: backup refuses it" '
		fresh && plant locks/writer '"$kind"' &&
		printf "new\n" >src/new-lock-'"$kind"' &&
		refused "locks/writer.*refused" backup ds src
	'
	test_expect_success "the only key slot is a $kind: refused, named" '
		fresh && plant "keys/$slot" '"$kind"' &&
		refused "keys/$slot" restore "$id" out
	'
done

test_expect_success 'locks/writer hard-linked to a file outside: refused' '
	fresh && rm -f repo/locks/writer &&
	ln outside/file repo/locks/writer &&
	refused "locks/writer.*hard link" backup ds src
'

test_expect_success 'the lock holder text reaches the terminal without controls' '
	fresh &&
	printf "host \033]0;owned\007 pid 1\033[2J\n" >repo/locks/writer &&
	flock repo/locks/writer sleep 10 & holder=$! &&
	sleep 1 &&
	test_expect_code 3 coffer --no-wait -r repo backup ds src 2>err;
	rc=$?; kill $holder 2>/dev/null; wait $holder 2>/dev/null;
	test $rc = 0 &&
	cat err &&
	grep "locked by another writer (host ?]0;owned? pid 1?\[2J)" err &&
	! grep -q "$(printf "\033")" err
'

test_expect_success 'a key slot among links and FIFOs still opens' '
	fresh &&
	mkfifo repo/keys/0000fifo &&
	ln -s "$TMP/outside/file" repo/keys/0000link &&
	rm -f "$(catalog_db).slot" &&
	timeout $T "$COFFER" -r repo restore "$id" out 2>err &&
	treecmp src0 out &&
	grep "keys/0000fifo" err && grep "keys/0000link" err
'

test_expect_success 'more key slots than coffer tries: refused at once' '
	fresh &&
	for i in $(seq 1 40); do cp "repo/keys/$slot" "repo/keys/copy$i"; done &&
	refused "more than 32 files in .keys." restore "$id" out
'

# Packs: the pack, its fan-out directory, and every fan-out directory a
# new pack could go to.
for kind in link-file dangling fifo dir; do
	test_expect_success "a pack is a $kind: restore and verify refuse it" '
		fresh && plant "$pk" '"$kind"' &&
		refused "$pk" restore "$id" out &&
		refused "$pk" verify --read-data
	'
done

for kind in link-dir file; do
	test_expect_success "a pack's fan-out directory is a $kind: refused" '
		fresh && plant "$fan" '"$kind"' &&
		refused "$fan" restore "$id" out
	'
done

test_expect_success 'every fan-out directory a link outside: no pack leaves' '
	fresh &&
	for a in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do
		for b in 0 1 2 3 4 5 6 7 8 9 a b c d e f; do
			rm -rf "repo/packs/$a$b" &&
			ln -s "$TMP/outside/dir" "repo/packs/$a$b" || return 1
		done
	done &&
	random_file src/fresh-data 1 &&
	refused "packs/[0-9a-f]{2}. is a symbolic link where a directory belongs" \
		backup ds src &&
	test_dir_is_empty repo/tmp
'

test_expect_success 'the untouched repository still works after all that' '
	fresh &&
	coffer -r repo restore "$id" out && treecmp src0 out &&
	coffer -r repo verify --read-data
'

test_done
