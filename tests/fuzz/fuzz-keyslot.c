/*
 * libFuzzer target for the key slot, key file, paper key and keyring
 * parsers, which read files an attacker with write access to the
 * repository may have forged (or a person typed).
 * Build and run: make fuzz (seeds: tests/fuzz/corpus/keyslot, written by
 * fuzz_seeds below through make fuzz-corpus).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/buf.h"
#include "coffer/crypto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Offsets in a format 1 slot of a full key (doc/format.md). */
#define OFF_VERSION 4
#define OFF_OPSLIMIT 6
#define OFF_MEMLIMIT 14
#define SLOT_BYTES 303

/* The passphrase and repository id every input is tried with. */
static const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES];
/* The master secret a keyring is opened with (the seeds' too). */
static const uint8_t fuzz_master[CCRYPTO_KEY_BYTES] = { 0x11, 0x22, 0x33 };
#define PASS "fuzz"

/*
 * A holder key over fuzz_master's material with a fixed recipient secret,
 * so that a keyring listing it (a seed) opens run after run.  NULL on
 * error.
 */
static struct ccrypto_keys *
fuzz_holder(void)
{
	uint8_t parts[CCRYPTO_HOLDER_BYTES];
	struct ccrypto_keys *m, *h = NULL, *f = NULL;

	if ((m = ccrypto_keys_from_master(fuzz_master)) != NULL &&
	    (h = ccrypto_keys_holder_new(m)) != NULL) {
		ccrypto_keys_holder_parts(h, parts);
		memset(parts + CCRYPTO_HOLDER_BYTES - CCRYPTO_KEY_BYTES, 0x44,
		    CCRYPTO_KEY_BYTES);
		f = ccrypto_keys_from_holder(parts);
	}
	ccrypto_keys_free(h);
	ccrypto_keys_free(m);
	return (f);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* The local limits as shipped (keyslot.c), whatever the host says. */
	unsetenv("COFFER_KDF_MAX_MEMORY");
	return (ccrypto_init());
}

/*
 * Parameters that unwrap accepts (up to 4 passes and 1 GiB, keyslot.c)
 * are legitimate, yet above 256 KiB each run would take from milliseconds
 * to seconds and trip libFuzzer's memory limit.  Skip those; bounds
 * checks stay covered, because everything beyond the local limits or the
 * format is refused before Argon2id and still fed through.
 */
static int
too_costly(const uint8_t *data, size_t size)
{
	uint64_t ops, mem;

	if (size < OFF_MEMLIMIT + 8)
		return (0);
	ops = get_u64(data + OFF_OPSLIMIT);
	mem = get_u64(data + OFF_MEMLIMIT);
	return (ops >= 1 && ops <= 4 && mem > (256 << 10) && mem <= (1 << 30));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t rid[CCRYPTO_REPO_ID_BYTES];
	struct ccrypto_keys *k;
	int why;

	if (!too_costly(data, size)) {
		k = ccrypto_slot_unwrap_named("keys/fuzz", data, size, repo_id,
		    PASS, strlen(PASS), &why);
		if (k != NULL && why != 0)
			abort();
		ccrypto_keys_free(k);
	}
	k = ccrypto_keyfile_decode(data, size, rid);
	ccrypto_keys_free(k);
	k = ccrypto_paper_decode(data, size, rid);
	ccrypto_keys_free(k);
	/* A keyring, into keys of their own (opening one adds epochs and
	 * recipients), as the master secret and as a holder key. */
	if ((k = ccrypto_keys_from_master(fuzz_master)) != NULL) {
		(void)ccrypto_keyring_open(k, repo_id, data, size, 0);
		ccrypto_keys_free(k);
	}
	if ((k = fuzz_holder()) != NULL) {
		(void)ccrypto_keyring_open(k, repo_id, data, size, 0);
		ccrypto_keys_free(k);
	}
	return (0);
}

#ifdef FUZZ_REPLAY
#include "replay.h"

/*
 * A slot that opens with PASS at 8 KiB (the cheapest Argon2id), one it
 * does not open, forged costs and broken ones; key files likewise.
 */
int
fuzz_seeds(const char *dir)
{
	struct buf s = BUF_INIT, w = BUF_INIT, kf = BUF_INIT;
	struct ccrypto_keys *k, *wo = NULL;
	uint8_t t[SLOT_BYTES + 1], *p;
	int rc = -1;

	if (ccrypto_init() || (k = fuzz_holder()) == NULL)
		return (-1);
	if (ccrypto_slot_wrap(k, repo_id, PASS, strlen(PASS), 8 << 10, &s) ||
	    ccrypto_slot_wrap(k, repo_id, "other", 5, 8 << 10, &w) ||
	    ccrypto_keyfile_encode(k, repo_id, &kf) || s.len != SLOT_BYTES)
		goto out;
	if (fuzz_write_seed(dir, "slot-opens", s.data, s.len) ||
	    fuzz_write_seed(dir, "slot-other-pass", w.data, w.len) ||
	    fuzz_write_seed(dir, "slot-truncated", s.data, 60) ||
	    fuzz_write_seed(dir, "keyfile", kf.data, kf.len) ||
	    fuzz_write_seed(dir, "keyfile-no-newline", kf.data, kf.len - 1))
		goto out;
	memcpy(t, s.data, SLOT_BYTES);
	put_u64(t + OFF_OPSLIMIT, 100);
	put_u64(t + OFF_MEMLIMIT, 4ULL << 30);
	if (fuzz_write_seed(dir, "slot-4gib-100-passes", t, SLOT_BYTES))
		goto out;
	put_u64(t + OFF_OPSLIMIT, 5);
	put_u64(t + OFF_MEMLIMIT, 8 << 10);
	if (fuzz_write_seed(dir, "slot-5-passes", t, SLOT_BYTES))
		goto out;
	put_u64(t + OFF_OPSLIMIT, 101);
	if (fuzz_write_seed(dir, "slot-101-passes", t, SLOT_BYTES))
		goto out;
	memcpy(t, s.data, SLOT_BYTES);
	t[OFF_VERSION] = 2;
	if (fuzz_write_seed(dir, "slot-version-2", t, SLOT_BYTES))
		goto out;
	memcpy(t, s.data, SLOT_BYTES);
	t[SLOT_BYTES] = '\n';
	if (fuzz_write_seed(dir, "slot-trailing", t, SLOT_BYTES + 1))
		goto out;
	kf.data[11] = '2';
	if (fuzz_write_seed(dir, "keyfile-version-2", kf.data, kf.len))
		goto out;
	kf.data[11] = '1';
	kf.data[kf.len - 2] = 'A';
	if (fuzz_write_seed(dir, "keyfile-uppercase", kf.data, kf.len))
		goto out;
	/* A keyring of two epochs that opens (listing the master secret's
	 * own pair), and one truncated. */
	{
		uint8_t pk[CCRYPTO_KEY_BYTES];
		struct buf ring = BUF_INIT;
		struct ccrypto_keys *e = ccrypto_keys_from_master(fuzz_master);

		if (e == NULL || ccrypto_epoch_generate(e, 2, pk) ||
		    ccrypto_epoch_generate(e, 5, pk) ||
		    ccrypto_recipient_add(e, "fedcba9876543210",
		    ccrypto_keys_recipient_pk(e)) ||
		    ccrypto_keyring_seal(e, repo_id, 1, &ring) ||
		    fuzz_write_seed(dir, "keyring-opens", ring.data,
		    ring.len) ||
		    fuzz_write_seed(dir, "keyring-truncated", ring.data,
		    ring.len - 20) || (ring.data[4] = 2, 0) ||
		    fuzz_write_seed(dir, "keyring-version-2", ring.data,
		    ring.len)) {
			ccrypto_keys_free(e);
			buf_release(&ring);
			goto out;
		}
		ccrypto_keys_free(e);
		buf_release(&ring);
	}
	/* A write-only slot and key file, a paper key and one typo in it. */
	buf_release(&w);
	buf_release(&kf);
	if ((wo = ccrypto_keys_writer(k)) == NULL ||
	    ccrypto_slot_wrap(wo, repo_id, PASS, strlen(PASS), 8 << 10, &w) ||
	    fuzz_write_seed(dir, "slot-write-only", w.data, w.len) ||
	    ccrypto_keyfile_encode(wo, repo_id, &kf) ||
	    fuzz_write_seed(dir, "keyfile-write-only", kf.data, kf.len))
		goto out;
	buf_release(&kf);
	if (ccrypto_paper_encode(k, repo_id, &kf) ||
	    fuzz_write_seed(dir, "paper", kf.data, kf.len) ||
	    (p = memmem(kf.data, kf.len, "\n03: ", 5)) == NULL)
		goto out;
	p[5] = p[5] == '0' ? '1' : '0';
	if (fuzz_write_seed(dir, "paper-typo", kf.data, kf.len))
		goto out;
	p[5] = p[5] == '0' ? '1' : '0';
	if ((p = memmem(kf.data, kf.len, "paper key 1\n", 12)) == NULL)
		goto out;
	p[10] = '2';
	if (fuzz_write_seed(dir, "paper-format-2", kf.data, kf.len))
		goto out;
	/* A keyring of two epochs that lists the holder key. */
	{
		uint8_t pk[CCRYPTO_KEY_BYTES];
		struct ccrypto_keys *h = fuzz_holder(), *e;
		struct buf ring = BUF_INIT;

		e = ccrypto_keys_from_master(fuzz_master);
		if (h == NULL || e == NULL ||
		    ccrypto_epoch_generate(e, 2, pk) ||
		    ccrypto_recipient_add(e, "0123456789abcdef",
		    ccrypto_keys_recipient_pk(h)) ||
		    ccrypto_keyring_seal(e, repo_id, 1, &ring) ||
		    fuzz_write_seed(dir, "keyring-holder", ring.data,
		    ring.len)) {
			buf_release(&ring);
			ccrypto_keys_free(h);
			ccrypto_keys_free(e);
			goto out;
		}
		buf_release(&ring);
		ccrypto_keys_free(h);
		ccrypto_keys_free(e);
	}
	rc = 0;
out:
	ccrypto_keys_free(wo);
	ccrypto_keys_free(k);
	buf_release(&s);
	buf_release(&w);
	buf_release(&kf);
	return (rc);
}
#endif
