/*
 * libFuzzer target for the key slot and key file parsers, which read files
 * an attacker with write access to the repository may have forged.
 *   clang -fsanitize=fuzzer,address,undefined -Iinclude \
 *       tests/fuzz/fuzz-keyslot.c src/crypto/[*].c src/util/[*].c -lsodium
 */
#include <stddef.h>
#include <stdint.h>

#include "coffer/buf.h"
#include "coffer/crypto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Offsets in a version 1 slot (see crypto.h). */
#define OFF_OPSLIMIT 6
#define OFF_MEMLIMIT 14

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	return (crypto_init());
}

/*
 * Parameters within the bounds unwrap accepts are legitimate, yet up to
 * 4 GiB and 100 passes would make each run take seconds and trip
 * libFuzzer's memory limit.  Skip those; bounds checks stay covered,
 * because out-of-range values are still fed through.
 */
static int
too_costly(const uint8_t *data, size_t size)
{
	uint64_t ops, mem;

	if (size < OFF_MEMLIMIT + 8)
		return (0);
	ops = get_u64(data + OFF_OPSLIMIT);
	mem = get_u64(data + OFF_MEMLIMIT);
	return ((ops > 2 && ops <= 100) ||
	    (mem > (256 << 10) && mem <= (4ULL << 30)));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t repo_id[CRYPTO_REPO_ID_BYTES];
	uint8_t rid[CRYPTO_REPO_ID_BYTES];
	struct crypto_keys *k;
	int wrong;

	if (!too_costly(data, size)) {
		k = crypto_slot_unwrap(data, size, repo_id, "fuzz", 4, &wrong);
		crypto_keys_free(k);
	}
	k = crypto_keyfile_decode(data, size, rid);
	crypto_keys_free(k);
	return (0);
}
