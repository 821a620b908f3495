#!/bin/bash
test_description='forged key slots declaring huge Argon2id costs are refused before Argon2id runs'
. "$(dirname "$0")/../lib.sh"

# forge SLOT OUT PASSES MEMORY: a copy of SLOT declaring other Argon2id
# parameters (u64 LE at offsets 6 and 14; see include/coffer/crypto.h).
forge() {
	perl -e '
		local $/; open(my $in, "<", $ARGV[0]) or die; my $s = <$in>;
		substr($s, 6, 16) = pack("Q<Q<", $ARGV[2], $ARGV[3]);
		open(my $out, ">", $ARGV[1]) or die; print $out $s;
	' "$@"
}

# bounded CMD...: run CMD with at most 2 GiB of address space and 60 s, so
# that a coffer which runs a forged slot's Argon2id fails here (ENOMEM)
# instead of using 4 GiB and minutes; peak RSS (KiB) goes to ./rss.
# A binary built with AddressSanitizer (make asan) reserves terabytes of
# address space for its shadow and cannot start under ulimit -v: there
# ASan's allocator refuses any single allocation above 2 GiB instead.
bound_memory() {
	if [ -n "$asan_bound" ]; then
		ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}$asan_bound &&
		export ASAN_OPTIONS
	else
		ulimit -v 2097152
	fi
}
asan_bound=
(ulimit -v 2097152 && "$COFFER" help >/dev/null 2>&1) 2>/dev/null ||
	asan_bound=max_allocation_size=2147483648:allocator_may_return_null=1
bounded() {
	if [ -x /usr/bin/time ]; then
		(bound_memory && timeout 60 /usr/bin/time -f %M -o rss "$@")
	else
		echo 0 >rss
		(bound_memory && timeout 60 "$@")
	fi
}

test_expect_success 'setup: a passphrase repository, eight forged slots' '
	mkdir -p src &&
	printf "one\n" >src/one &&
	COFFER_PASSPHRASE=correct-horse coffer init repo &&
	COFFER_PASSPHRASE=correct-horse coffer -r repo backup ds src &&
	slot=$(cd repo/keys && ls) &&
	test $(echo "$slot" | wc -l) = 1 &&
	mv "repo/keys/$slot" real-slot &&
	# 4 GiB and 100 passes: the most the format allows, each within
	# it, so that only the local limits stand in the way.
	for i in 1 2 3 4 5 6 7 8; do
		forge real-slot repo/keys/000$i 100 4294967296 || return 1
	done
'

test_expect_success 'eight forged slots: each refused, quickly, in little memory' '
	test_expect_code 3 bounded env COFFER_PASSPHRASE=correct-horse \
		"$COFFER" -r repo restore ds@latest out 2>err &&
	cat err rss &&
	test $(grep -c "Argon2id memory 4096 MiB exceeds the local limit 1024 MiB (COFFER_KDF_MAX_MEMORY raises it)" err) = 8 &&
	! grep -i "cannot derive" err &&
	test "$(tail -1 rss)" -lt 200000 &&
	test_path_is_missing out
'

test_expect_success 'each refusal names its slot' '
	for i in 1 2 3 4 5 6 7 8; do
		grep -F "key slot '\''keys/000$i'\'': Argon2id memory" err ||
			return 1
	done
'

test_expect_success 'the real slot among the forged ones still opens' '
	cp real-slot "repo/keys/$slot" &&
	bounded env COFFER_PASSPHRASE=correct-horse \
		"$COFFER" -r repo restore ds@latest out 2>err &&
	cat err &&
	treecmp src out
'

test_expect_success 'more passes than the local limit (5 > 4) are refused' '
	rm -f repo/keys/000* "repo/keys/$slot" &&
	forge real-slot repo/keys/0001 5 67108864 &&
	test_expect_code 3 env COFFER_PASSPHRASE=correct-horse \
		"$COFFER" -r repo restore ds@latest out5 2>err &&
	cat err &&
	grep "Argon2id 5 passes exceed the local limit of 4" err &&
	test_path_is_missing out5
'

test_expect_success 'beyond the format (101 passes) is malformed, not refused' '
	forge real-slot repo/keys/0001 101 67108864 &&
	test_expect_code 3 env COFFER_PASSPHRASE=correct-horse \
		"$COFFER" -r repo restore ds@latest out101 2>err &&
	cat err &&
	grep "malformed key slot.*101 passes is out of range" err &&
	! grep "local limit" err
'

test_expect_success 'COFFER_KDF_MAX_MEMORY lowers the limit below a real slot' '
	rm -f repo/keys/0001 &&
	cp real-slot "repo/keys/$slot" &&
	test_expect_code 3 env COFFER_PASSPHRASE=correct-horse \
		COFFER_KDF_MAX_MEMORY=32 "$COFFER" -r repo restore ds@latest o32 \
		2>err &&
	cat err &&
	grep "Argon2id memory 64 MiB exceeds the local limit 32 MiB" err &&
	env COFFER_PASSPHRASE=correct-horse COFFER_KDF_MAX_MEMORY=64 \
		"$COFFER" -r repo restore ds@latest o64 &&
	treecmp src o64
'

test_expect_success 'a malformed COFFER_KDF_MAX_MEMORY is an error, not the default' '
	test_expect_code 3 env COFFER_PASSPHRASE=correct-horse \
		COFFER_KDF_MAX_MEMORY=1G "$COFFER" -r repo restore ds@latest o1g \
		2>err &&
	cat err &&
	grep "COFFER_KDF_MAX_MEMORY must be a number of MiB from 8 to 4096, not '\''1G'\''" err
'

test_expect_success 'init --kdf-memory above the local limit is refused, creating nothing' '
	test_must_fail env COFFER_PASSPHRASE=x "$COFFER" init --kdf-memory 2048 \
		big 2>err &&
	cat err &&
	grep "2048 MiB exceeds the local limit 1024 MiB" err &&
	test_path_is_missing big/coffer.conf
'

test_done
