/*
 * Unit tests for src/crypto: key derivation, hashes, AEAD, pack key
 * sealing, signatures, passphrase slots and key files.  Every "must fail"
 * case is damage as it happens in the field: a flipped bit, a cut-off file,
 * a slot or pack from another repository.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "coffer/buf.h"
#include "coffer/crypto.h"
#include "coffer/tuning.h"
#include "tap.h"

/* Small enough to keep the suite fast; real slots use 64 MiB. */
#define TEST_MEMLIMIT (8ULL << 20)

/*
 * Capture what the code under test writes to stderr: an error must be
 * reported exactly when the contract says so, and the expected errors
 * should not bury the TAP output.  Set TEST_VERBOSE to see them anyway.
 */
static int saved_fd = -1;
static FILE *captured;
static char errbuf[8192];

static void
capture_begin(void)
{
	if (getenv("TEST_VERBOSE") != NULL)
		return;
	fflush(stderr);
	if ((captured = tmpfile()) == NULL)
		return;
	saved_fd = dup(STDERR_FILENO);
	dup2(fileno(captured), STDERR_FILENO);
}

/* Stop capturing; errbuf holds (the start of) what was written. */
static const char *
capture_end(void)
{
	size_t n = 0;

	errbuf[0] = '\0';
	if (saved_fd == -1)
		return (errbuf);
	fflush(stderr);
	dup2(saved_fd, STDERR_FILENO);
	close(saved_fd);
	saved_fd = -1;
	rewind(captured);
	n = fread(errbuf, 1, sizeof(errbuf) - 1, captured);
	errbuf[n] = '\0';
	fclose(captured);
	captured = NULL;
	return (errbuf);
}

/* Whether captured output says "error: ..." (always true when verbose). */
static int
reported(const char *out)
{
	return (getenv("TEST_VERBOSE") != NULL ||
	    strncmp(out, "error: ", 7) == 0 ||
	    strncmp(out, "warning: ", 9) == 0);
}

static int
silent(const char *out)
{
	return (out[0] == '\0');
}

static const uint8_t repo_a[CCRYPTO_REPO_ID_BYTES] = { 0xa0, 1, 2, 3 };
static const uint8_t repo_b[CCRYPTO_REPO_ID_BYTES] = { 0xb0, 1, 2, 3 };

static void
test_derivation(void)
{
	uint8_t m1[CCRYPTO_KEY_BYTES], m2[CCRYPTO_KEY_BYTES];
	uint8_t id1[CCRYPTO_ID_BYTES], id2[CCRYPTO_ID_BYTES];
	uint8_t id3[CCRYPTO_ID_BYTES], plain[32];
	struct ccrypto_keys *a, *b, *c, *g1, *g2;
	struct ccrypto_hash_state hs;
	static const char data[] = "the quick brown fox";

	memset(m1, 0x11, sizeof(m1));
	memset(m2, 0x11, sizeof(m2));
	m2[31] ^= 1;
	a = ccrypto_keys_from_master(m1);
	b = ccrypto_keys_from_master(m1);
	c = ccrypto_keys_from_master(m2);
	ok(a && b && c, "keys from master");
	if (!a || !b || !c)
		goto out;

	ccrypto_chunk_id(a, data, sizeof(data) - 1, id1);
	ccrypto_chunk_id(b, data, sizeof(data) - 1, id2);
	ccrypto_chunk_id(c, data, sizeof(data) - 1, id3);
	ok(memcmp(id1, id2, sizeof(id1)) == 0,
	    "same master gives the same chunk id");
	ok(memcmp(id1, id3, sizeof(id1)) != 0,
	    "different master gives a different chunk id");
	ok(memcmp(ccrypto_keys_chunker_key(a), ccrypto_keys_chunker_key(b),
	    CCRYPTO_KEY_BYTES) == 0, "same master gives the same chunker key");
	ok(memcmp(ccrypto_keys_chunker_key(a), ccrypto_keys_chunker_key(c),
	    CCRYPTO_KEY_BYTES) != 0,
	    "different master gives a different chunker key");
	ok(memcmp(ccrypto_keys_chunker_key(a), m1, CCRYPTO_KEY_BYTES) != 0,
	    "chunker key is not the master");

	ccrypto_plain_hash(data, sizeof(data) - 1, plain);
	ok(memcmp(plain, id1, sizeof(plain)) != 0,
	    "chunk id is keyed (differs from the plain hash)");

	ccrypto_hash_init(a, &hs);
	ccrypto_hash_update(&hs, data, 4);
	ccrypto_hash_update(&hs, data + 4, sizeof(data) - 5);
	ccrypto_hash_final(&hs, id2);
	ok(memcmp(id1, id2, sizeof(id1)) == 0,
	    "incremental keyed hash equals the chunk id");

	g1 = ccrypto_keys_generate();
	g2 = ccrypto_keys_generate();
	ok(g1 && g2, "generate keys");
	if (g1 && g2) {
		ccrypto_chunk_id(g1, data, sizeof(data) - 1, id1);
		ccrypto_chunk_id(g2, data, sizeof(data) - 1, id2);
		ok(memcmp(id1, id2, sizeof(id1)) != 0,
		    "generated keys differ");
	}
	ccrypto_keys_free(g1);
	ccrypto_keys_free(g2);
out:
	ccrypto_keys_free(a);
	ccrypto_keys_free(b);
	ccrypto_keys_free(c);
	ccrypto_keys_free(NULL);
}

/*
 * The hashes are coffer's own BLAKE2b code (src/crypto/blake2b.c), and
 * their outputs are part of the repository format: DESIGN.md defines a
 * chunk id as libsodium's crypto_generichash under the "id" subkey.  Here
 * the expected values are computed from the master secret with libsodium
 * alone, for lengths around every block boundary and for large inputs,
 * in one piece and in pieces split at random.
 */
/*
 * Keys from a random master secret, and their id subkey derived as
 * DESIGN.md numbers it under the "coffer01" context (to check ids against
 * libsodium's crypto_generichash).  NULL when out of memory.
 */
static struct ccrypto_keys *
random_keys(uint8_t master[CCRYPTO_KEY_BYTES], uint8_t idkey[32])
{
	randombytes_buf(master, CCRYPTO_KEY_BYTES);
	crypto_kdf_derive_from_key(idkey, 32, 1, "coffer01", master);
	return (ccrypto_keys_from_master(master));
}

/* len random bytes, malloc'd; NULL when out of memory. */
static uint8_t *
random_data(size_t len)
{
	uint8_t *p = malloc(len);

	if (p != NULL)
		randombytes_buf(p, len);
	return (p);
}

static void
test_hash_format(void)
{
	static const size_t fixed[] = { 0, 1, 63, 64, 127, 128, 129, 255, 256,
	    257, 383, 384, 385, 1000, 4096, 65535, 65536, 1048577 };
	uint8_t master[CCRYPTO_KEY_BYTES], idkey[32], metakey[32];
	uint8_t want[32], got[32], wmac[32], gmac[32], wplain[32], gplain[32];
	uint8_t wfile[32], gfile[32];
	struct ccrypto_hash_state hs;
	crypto_generichash_state ref;
	struct ccrypto_keys *k;
	size_t i, len, off, maxlen = 1048577 + 64;
	int nbad = 0, nsplit = 0, ncase = 0;
	uint8_t *data;

	k = random_keys(master, idkey);
	data = random_data(maxlen);
	ok(k != NULL && data != NULL, "keys for the hash format test");
	if (k == NULL || data == NULL)
		goto out;
	crypto_kdf_derive_from_key(metakey, sizeof(metakey), 3, "coffer01",
	    master);

	crypto_generichash_init(&ref, idkey, sizeof(idkey), 32);
	ccrypto_hash_init(k, &hs);
	for (i = 0; i < 2000; i++) {
		len = i < sizeof(fixed) / sizeof(fixed[0]) ? fixed[i] :
		    randombytes_uniform(i % 10 == 0 ? 300000 : 1200);
		off = randombytes_uniform(64);
		ncase++;

		crypto_generichash(want, 32, data + off, len, idkey,
		    sizeof(idkey));
		ccrypto_chunk_id(k, data + off, len, got);
		nbad += memcmp(want, got, 32) != 0;

		crypto_generichash(wmac, 32, data + off, len, metakey,
		    sizeof(metakey));
		ccrypto_meta_mac(k, data + off, len, gmac);
		nbad += memcmp(wmac, gmac, 32) != 0;

		crypto_generichash(wplain, 32, data + off, len, NULL, 0);
		ccrypto_plain_hash(data + off, len, gplain);
		nbad += memcmp(wplain, gplain, 32) != 0;

		/* The same input fed to a running hash in random pieces. */
		crypto_generichash_update(&ref, data + off, len);
		while (len > 0) {
			size_t piece = 1 + randombytes_uniform(
			    (uint32_t)(len < 700 ? len : 700));

			ccrypto_hash_update(&hs, data + off, piece);
			off += piece;
			len -= piece;
			nsplit++;
		}
	}
	crypto_generichash_final(&ref, wfile, 32);
	ccrypto_hash_final(&hs, gfile);
	ok(nbad == 0, "chunk ids, meta MACs and plain hashes equal "
	    "crypto_generichash (%d cases, %d differ)", ncase, nbad);
	ok(memcmp(wfile, gfile, 32) == 0, "a running hash fed in %d pieces "
	    "equals crypto_generichash's", nsplit);

out:
	free(data);
	ccrypto_keys_free(k);
}

/*
 * ccrypto_chunk_ids hashes eight chunks at once where it can (AVX-512):
 * every id must still be crypto_generichash's, whatever the mix of
 * lengths (equal, around block boundaries, empty, one long among short
 * ones, so that lanes finish apart and the last ones end in the scalar
 * code) and however many chunks there are.
 */
static void
test_hash_many(void)
{
	static const size_t edges[] = { 0, 1, 127, 128, 129, 255, 256, 257 };
	enum { MAXN = 40, DATA = 700000 };
	uint8_t master[CCRYPTO_KEY_BYTES], idkey[32], want[32];
	uint8_t got[MAXN][CCRYPTO_ID_BYTES];
	const uint8_t *in[MAXN];
	size_t len[MAXN], n, i;
	struct ccrypto_keys *k;
	uint8_t *data;
	int set, nbad = 0, nids = 0;

	k = random_keys(master, idkey);
	data = random_data(DATA);
	ok(k != NULL && data != NULL, "keys for the many-ids test");
	if (k == NULL || data == NULL)
		goto out;
	for (set = 0; set < 400; set++) {
		n = 1 + randombytes_uniform(set % 7 == 0 ? MAXN : 20);
		for (i = 0; i < n; i++) {
			switch (set % 5) {
			case 0:
				len[i] = randombytes_uniform(1200);
				break;
			case 1:
				len[i] = i == 0 ? 1 + randombytes_uniform(5000) :
				    len[0];
				break;
			case 2:
				len[i] = i == n / 2 ? 600000 :
				    randombytes_uniform(3000);
				break;
			case 3:
				len[i] = edges[randombytes_uniform(
				    sizeof(edges) / sizeof(edges[0]))];
				break;
			default:
				len[i] = randombytes_uniform(90000);
				break;
			}
			in[i] = data + randombytes_uniform(64);
		}
		memset(got, 0, sizeof(got));
		ccrypto_chunk_ids(k, n, in, len, got);
		for (i = 0; i < n; i++) {
			crypto_generichash(want, 32, in[i], len[i], idkey,
			    sizeof(idkey));
			nbad += memcmp(want, got[i], 32) != 0;
			nids++;
		}
	}
	ok(nbad == 0, "ids of chunks hashed together equal "
	    "crypto_generichash (%d ids in 400 sets, %d differ)", nids, nbad);
out:
	free(data);
	ccrypto_keys_free(k);
}

static void
test_meta_mac(struct ccrypto_keys *a, struct ccrypto_keys *b)
{
	char conf[] = "chunker.avg = 1048576\n";
	uint8_t mac[CCRYPTO_MAC_BYTES];

	ccrypto_meta_mac(a, conf, sizeof(conf) - 1, mac);
	ok(ccrypto_meta_mac_verify(a, conf, sizeof(conf) - 1, mac) == 0,
	    "meta mac verifies");
	ok(ccrypto_meta_mac_verify(b, conf, sizeof(conf) - 1, mac) == -1,
	    "meta mac rejected under another repository's keys");
	conf[20] = '7';
	ok(ccrypto_meta_mac_verify(a, conf, sizeof(conf) - 1, mac) == -1,
	    "meta mac rejects a changed config");
}

static void
test_aead(void)
{
	uint8_t key[CCRYPTO_KEY_BYTES], nonce[CCRYPTO_NONCE_BYTES];
	uint8_t nonce2[CCRYPTO_NONCE_BYTES], ad[40];
	uint8_t plain[300], ct[sizeof(plain) + CCRYPTO_TAG_BYTES];
	uint8_t out[sizeof(plain)];
	size_t i, bad;

	ccrypto_random(key, sizeof(key));
	ccrypto_random(plain, sizeof(plain));
	memset(ad, 'a', sizeof(ad));

	ccrypto_aead_encrypt(key, nonce, ad, sizeof(ad), plain, sizeof(plain),
	    ct);
	ok(ccrypto_aead_decrypt(key, nonce, ad, sizeof(ad), ct, sizeof(ct),
	    out) == 0 && memcmp(out, plain, sizeof(plain)) == 0,
	    "aead round trip");

	ccrypto_aead_encrypt(key, nonce2, ad, sizeof(ad), plain, sizeof(plain),
	    ct);
	ok(memcmp(nonce, nonce2, sizeof(nonce)) != 0,
	    "aead nonces are fresh");

	capture_begin();
	for (bad = i = 0; i < sizeof(ct); i++) {
		ct[i] ^= 0x10;
		if (ccrypto_aead_decrypt(key, nonce2, ad, sizeof(ad), ct,
		    sizeof(ct), out) != -1)
			bad++;
		ct[i] ^= 0x10;
	}
	ok(bad == 0, "aead rejects a flipped bit at every ciphertext offset");

	ad[7] ^= 1;
	ok(ccrypto_aead_decrypt(key, nonce2, ad, sizeof(ad), ct, sizeof(ct),
	    out) == -1, "aead rejects a changed ad byte");
	ad[7] ^= 1;
	ok(ccrypto_aead_decrypt(key, nonce2, ad, sizeof(ad) - 1, ct,
	    sizeof(ct), out) == -1, "aead rejects a shortened ad");
	ok(ccrypto_aead_decrypt(key, nonce2, ad, sizeof(ad), ct,
	    sizeof(ct) - 1, out) == -1, "aead rejects a truncated ciphertext");
	ok(ccrypto_aead_decrypt(key, nonce2, ad, sizeof(ad), ct,
	    CCRYPTO_TAG_BYTES - 1, out) == -1,
	    "aead rejects a ciphertext shorter than the tag");
	nonce2[0] ^= 1;
	ok(ccrypto_aead_decrypt(key, nonce2, ad, sizeof(ad), ct, sizeof(ct),
	    out) == -1, "aead rejects a changed nonce");
	nonce2[0] ^= 1;
	key[0] ^= 1;
	ok(ccrypto_aead_decrypt(key, nonce2, ad, sizeof(ad), ct, sizeof(ct),
	    out) == -1, "aead rejects another key");
	key[0] ^= 1;
	ok(silent(capture_end()), "aead failures print nothing");
	ok(ccrypto_aead_decrypt(key, nonce2, ad, sizeof(ad), ct, sizeof(ct),
	    out) == 0, "aead still opens after the damage is undone");

	ccrypto_aead_encrypt(key, nonce, NULL, 0, plain, 0, ct);
	ok(ccrypto_aead_decrypt(key, nonce, NULL, 0, ct, CCRYPTO_TAG_BYTES,
	    out) == 0, "aead round trip of an empty message");
}

/*
 * The records' format is libsodium's XChaCha20-Poly1305-IETF, whoever
 * computes it (aead.c): what either seals, the other opens, at lengths
 * around ChaCha20's 64-byte blocks and Poly1305's 16, sealed and opened
 * in place as pack.c does; and a record that fails leaves no plaintext.
 */
static void
test_aead_format(void)
{
	static const size_t lens[] = { 0, 1, 15, 16, 17, 63, 64, 65, 255,
	    256, 4000, 65536, 1000003 };
	enum { MAXLEN = 1000003 };
	uint8_t key[CCRYPTO_KEY_BYTES], nonce[CCRYPTO_NONCE_BYTES], ad[57];
	uint8_t *plain, *ct, *ct2, *out;
	size_t i, n;
	unsigned long long clen;
	int ours = 0, theirs = 0, inplace = 0, wiped = 0;
	const char *env = getenv("COFFER_AEAD");

	ok(strcmp(ccrypto_aead_impl(), env != NULL &&
	    strcmp(env, "libsodium") == 0 ? "libsodium" : "openssl") == 0,
	    "aead computed by %s", ccrypto_aead_impl());
	plain = malloc(MAXLEN);
	ct = malloc(MAXLEN + CCRYPTO_TAG_BYTES);
	ct2 = malloc(MAXLEN + CCRYPTO_TAG_BYTES);
	out = malloc(MAXLEN);
	if (plain == NULL || ct == NULL || ct2 == NULL || out == NULL) {
		ok(0, "memory for the aead format test");
		goto out;
	}
	ccrypto_random(key, sizeof(key));
	ccrypto_random(ad, sizeof(ad));
	ccrypto_random(plain, MAXLEN);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		n = lens[i];
		/* Ours sealed, libsodium's opens; and the same bytes. */
		ccrypto_aead_encrypt(key, nonce, ad, sizeof(ad), plain, n, ct);
		ours += crypto_aead_xchacha20poly1305_ietf_decrypt(out, NULL,
		    NULL, ct, n + CCRYPTO_TAG_BYTES, ad, sizeof(ad), nonce,
		    key) == 0 && memcmp(out, plain, n) == 0;
		crypto_aead_xchacha20poly1305_ietf_encrypt(ct2, &clen, plain,
		    n, ad, sizeof(ad), NULL, nonce, key);
		ours += memcmp(ct, ct2, n + CCRYPTO_TAG_BYTES) == 0;
		/* libsodium's sealed (another nonce), ours opens, in
		 * place. */
		ccrypto_random(nonce, sizeof(nonce));
		crypto_aead_xchacha20poly1305_ietf_encrypt(ct, &clen, plain,
		    n, NULL, 0, NULL, nonce, key);
		theirs += ccrypto_aead_decrypt(key, nonce, NULL, 0, ct,
		    n + CCRYPTO_TAG_BYTES, ct) == 0 &&
		    memcmp(ct, plain, n) == 0;
		/* Sealed in place, opened in place. */
		memcpy(ct, plain, n);
		ccrypto_aead_encrypt(key, nonce, ad, sizeof(ad), ct, n, ct);
		inplace += ccrypto_aead_decrypt(key, nonce, ad, sizeof(ad), ct,
		    n + CCRYPTO_TAG_BYTES, ct) == 0 &&
		    memcmp(ct, plain, n) == 0;
		/* The tag's last byte changed: nothing of the plaintext. */
		ccrypto_aead_encrypt(key, nonce, ad, sizeof(ad), plain, n, ct);
		ct[n + CCRYPTO_TAG_BYTES - 1] ^= 0x80;
		wiped += ccrypto_aead_decrypt(key, nonce, ad, sizeof(ad), ct,
		    n + CCRYPTO_TAG_BYTES, out) == -1 &&
		    (n == 0 || memcmp(out, plain, n) != 0);
	}
	n = sizeof(lens) / sizeof(lens[0]);
	ok(ours == (int)(2 * n), "aead: libsodium opens what we seal, and "
	    "we seal the same bytes (%d of %zu)", ours, 2 * n);
	ok(theirs == (int)n, "aead: we open what libsodium seals, in place "
	    "(%d of %zu)", theirs, n);
	ok(inplace == (int)n, "aead: sealed and opened in place (%d of %zu)",
	    inplace, n);
	ok(wiped == (int)n, "aead: a record that fails leaves no plaintext "
	    "(%d of %zu)", wiped, n);
out:
	free(plain);
	free(ct);
	free(ct2);
	free(out);
}

static void
test_seal(struct ccrypto_keys *a, struct ccrypto_keys *b)
{
	uint8_t sealed[CCRYPTO_SEALED_KEY_BYTES];
	uint8_t *key, *got;

	key = ccrypto_secret_new(CCRYPTO_KEY_BYTES);
	got = ccrypto_secret_new(CCRYPTO_KEY_BYTES);
	ok(key && got, "secret_new");
	if (!key || !got)
		goto out;
	ccrypto_random(key, CCRYPTO_KEY_BYTES);
	ccrypto_pack_key_seal(a, key, sealed);
	ok(ccrypto_pack_key_unseal(a, sealed, got) == 0 &&
	    memcmp(key, got, CCRYPTO_KEY_BYTES) == 0, "seal/unseal round trip");
	capture_begin();
	ok(ccrypto_pack_key_unseal(b, sealed, got) == -1,
	    "sealed pack key does not open under another repository's keys");
	sealed[CCRYPTO_SEALED_KEY_BYTES / 2] ^= 4;
	ok(ccrypto_pack_key_unseal(a, sealed, got) == -1,
	    "damaged sealed pack key does not open");
	ok(silent(capture_end()), "unseal failures print nothing");
out:
	ccrypto_secret_free(key);
	ccrypto_secret_free(got);
	ccrypto_secret_free(NULL);
}

static void
test_sign(struct ccrypto_keys *a, struct ccrypto_keys *b)
{
	char msg[] = "snapshot 2024-01-01 root=abcdef";
	uint8_t sig[CCRYPTO_SIG_BYTES];

	ccrypto_sign(a, msg, sizeof(msg) - 1, sig);
	ok(ccrypto_verify(a, msg, sizeof(msg) - 1, sig) == 0,
	    "signature verifies");
	capture_begin();
	ok(ccrypto_verify(b, msg, sizeof(msg) - 1, sig) == -1,
	    "signature rejected under another repository's keys");
	msg[3] ^= 1;
	ok(ccrypto_verify(a, msg, sizeof(msg) - 1, sig) == -1,
	    "signature rejects a modified message");
	msg[3] ^= 1;
	ok(ccrypto_verify(a, msg, sizeof(msg) - 2, sig) == -1,
	    "signature rejects a truncated message");
	sig[10] ^= 1;
	ok(ccrypto_verify(a, msg, sizeof(msg) - 1, sig) == -1,
	    "signature rejects a modified signature");
	ok(silent(capture_end()), "verify failures print nothing");
}

/* Does k name data the same way as ref, i.e. is it the same key? */
static int
same_keys(const struct ccrypto_keys *k, const struct ccrypto_keys *ref)
{
	uint8_t x[CCRYPTO_ID_BYTES], y[CCRYPTO_ID_BYTES];

	if (k == NULL)
		return (0);
	ccrypto_chunk_id(k, "x", 1, x);
	ccrypto_chunk_id(ref, "x", 1, y);
	return (memcmp(x, y, sizeof(x)) == 0);
}

/*
 * Unwrap and classify: 0 opened, 1 wrong passphrase (and silent), 2 malformed
 * (and reported), 3 refused by the local limits (and reported), -1 anything
 * else, such as a silent malformed slot.
 */
static int
try_unwrap(const uint8_t *slot, size_t len, const uint8_t *repo_id,
    const char *pass, const struct ccrypto_keys *want, const char **msg)
{
	struct ccrypto_keys *k;
	const char *out;
	int wrong = -1, rc = -1;

	capture_begin();
	k = ccrypto_slot_unwrap(slot, len, repo_id, pass, strlen(pass), &wrong);
	out = capture_end();
	if (msg != NULL)
		*msg = out;
	if (k != NULL)
		rc = same_keys(k, want) && wrong == 0 && silent(out) ? 0 : -1;
	else if (wrong == 1)
		rc = silent(out) ? 1 : -1;
	else if (wrong == CCRYPTO_SLOT_DAMAGED)
		rc = reported(out) ? 2 : -1;
	else if (wrong == CCRYPTO_SLOT_REFUSED)
		rc = reported(out) ? 3 : -1;
	ccrypto_keys_free(k);
	return (rc);
}

static int says(const char *msg, ...);

static void
test_slot(struct ccrypto_keys *a)
{
	static const char pass[] = "correct horse battery staple";
	struct buf s = BUF_INIT, h = BUF_INIT;
	size_t i, bad;
	const char *msg;
	int rc;

	ok(ccrypto_slot_wrap(a, repo_a, pass, strlen(pass), TEST_MEMLIMIT,
	    &s) == 0, "slot wrap");
	ok(s.len == 303 && memcmp(s.data, "CFKS", 4) == 0 && s.data[4] == 1 &&
	    s.data[5] == CCRYPTO_SLOT_HOLDER && get_u64(s.data + 6) == 3 &&
	    get_u64(s.data + 14) == TEST_MEMLIMIT,
	    "slot layout: magic, version, kind, opslimit, memlimit");
	if (s.len != 303)
		goto out;

	ok(try_unwrap(s.data, s.len, repo_a, pass, a, NULL) == 0,
	    "slot unwrap round trip");
	ok(try_unwrap(s.data, s.len, repo_a, "correct horse battery stapler",
	    a, NULL) == 1, "wrong passphrase gives wrong=1, silently");
	ok(try_unwrap(s.data, s.len, repo_a, "", a, NULL) == 1,
	    "empty passphrase gives wrong=1");
	ok(try_unwrap(s.data, s.len, repo_b, pass, a, NULL) == 1,
	    "slot bound to another repo id does not open");

	/* Every header byte is either checked or bound into the AD. */
	for (bad = i = 0; i < 62; i++) {
		s.data[i] ^= 1;
		if (try_unwrap(s.data, s.len, repo_a, pass, a, NULL) < 1)
			bad++;
		s.data[i] ^= 1;
	}
	ok(bad == 0, "a flipped bit anywhere in the slot header is rejected");

	s.data[1] ^= 1;
	ok(try_unwrap(s.data, s.len, repo_a, pass, a, NULL) == 2,
	    "flipped magic is malformed");
	s.data[1] ^= 1;
	s.data[4] = 2;
	ok(try_unwrap(s.data, s.len, repo_a, pass, a, &msg) == 2 &&
	    says(msg, "key slot has format 2; this coffer reads format 1 "
	    "(upgrade coffer)", NULL), "a slot of format 2 is refused, naming "
	    "its format");
	s.data[4] = 1;
	s.data[5] = 1;
	ok(try_unwrap(s.data, s.len, repo_a, pass, a, NULL) == 2,
	    "unknown kind is malformed");
	s.data[5] = CCRYPTO_SLOT_HOLDER;
	s.data[30] ^= 0x80;
	ok(try_unwrap(s.data, s.len, repo_a, pass, a, NULL) == 1,
	    "flipped salt byte does not open");
	s.data[30] ^= 0x80;
	s.data[14] ^= 1;
	ok(try_unwrap(s.data, s.len, repo_a, pass, a, NULL) == 1,
	    "memlimit changed within bounds does not open (bound in AD)");
	s.data[14] ^= 1;

	for (bad = i = 62; i < s.len; i++) {
		s.data[i] ^= 0x40;
		if (try_unwrap(s.data, s.len, repo_a, pass, a, NULL) != 1)
			bad++;
		s.data[i] ^= 0x40;
	}
	ok(bad == 62, "a flipped bit in the ciphertext does not open");
	ok(try_unwrap(s.data, s.len, repo_a, pass, a, NULL) == 0,
	    "slot opens again once repaired");

	for (bad = i = 0; i < s.len; i++)
		if (try_unwrap(s.data, i, repo_a, pass, a, NULL) != 2)
			bad++;
	ok(bad == 0, "a truncated slot (every length) is malformed");
	ok(try_unwrap(NULL, 0, repo_a, pass, a, NULL) == 2,
	    "an empty slot is malformed");

	buf_append(&h, s.data, s.len);
	buf_put_u8(&h, '\n');
	ok(try_unwrap(h.data, h.len, repo_a, pass, a, NULL) == 2,
	    "a slot with trailing bytes is malformed");

	/* Hostile parameters must be refused before Argon2 runs. */
	h.len = s.len;
	put_u64(h.data + 14, 1ULL << 40);
	rc = try_unwrap(h.data, h.len, repo_a, pass, a, &msg);
	ok(rc == 2 && (getenv("TEST_VERBOSE") != NULL ||
	    strstr(msg, "out of range") != NULL),
	    "a 1 TiB memlimit is malformed, refused up front");
	put_u64(h.data + 14, (4ULL << 30) + 1024);
	ok(try_unwrap(h.data, h.len, repo_a, pass, a, NULL) == 2,
	    "a memlimit above 4 GiB is malformed");
	put_u64(h.data + 14, 4ULL << 10);
	ok(try_unwrap(h.data, h.len, repo_a, pass, a, NULL) == 2,
	    "a 4 KiB memlimit is malformed");
	put_u64(h.data + 14, TEST_MEMLIMIT);
	put_u64(h.data + 6, 0);
	ok(try_unwrap(h.data, h.len, repo_a, pass, a, NULL) == 2,
	    "opslimit 0 is malformed");
	put_u64(h.data + 6, 101);
	ok(try_unwrap(h.data, h.len, repo_a, pass, a, NULL) == 2,
	    "opslimit 101 is malformed");
	put_u64(h.data + 6, UINT64_MAX);
	ok(try_unwrap(h.data, h.len, repo_a, pass, a, NULL) == 2,
	    "opslimit 2^64-1 is malformed");

	buf_reset(&h);
	capture_begin();
	rc = ccrypto_slot_wrap(a, repo_a, pass, strlen(pass), 4096, &h);
	ok(rc == -1 && h.len == 0 && reported(capture_end()),
	    "wrap refuses a memlimit below 8 KiB");
	capture_begin();
	rc = ccrypto_slot_wrap(a, repo_a, pass, strlen(pass), 1ULL << 40, &h);
	ok(rc == -1 && h.len == 0 && reported(capture_end()),
	    "wrap refuses a 1 TiB memlimit");

	/* Default parameters, and appending after existing content. */
	buf_puts(&h, "xy");
	ok(ccrypto_slot_wrap(a, repo_a, "", 0, 0, &h) == 0 &&
	    h.len == 2 + 303 && get_u64(h.data + 2 + 6) == 3 &&
	    get_u64(h.data + 2 + 14) == 64ULL << 20,
	    "memlimit 0 means 64 MiB and 3 passes; the slot is appended");
	ok(h.len == 2 + 303 &&
	    try_unwrap(h.data + 2, 303, repo_a, "", a, NULL) == 0,
	    "empty passphrase round trip at 64 MiB");
out:
	buf_release(&s);
	buf_release(&h);
}

/* Whether msg holds each of the NULL-terminated strings (verbose: yes). */
static int
says(const char *msg, ...)
{
	const char *want;
	va_list ap;
	int rc = 1;

	if (getenv("TEST_VERBOSE") != NULL)
		return (1);
	va_start(ap, msg);
	while ((want = va_arg(ap, const char *)) != NULL)
		if (strstr(msg, want) == NULL)
			rc = 0;
	va_end(ap);
	return (rc);
}

/*
 * The local limits: a slot the format allows but this host will not pay
 * for is refused before Argon2id runs, distinctly from a malformed one.
 */
static void
test_slot_limits(struct ccrypto_keys *a)
{
	static const char pass[] = "pass";
	struct buf s = BUF_INIT, h = BUF_INIT;
	struct ccrypto_keys *k;
	const char *msg;
	int why, rc;

	unsetenv("COFFER_KDF_MAX_MEMORY");
	tuning_reload();
	if (ccrypto_slot_wrap(a, repo_a, pass, strlen(pass), 16ULL << 20, &s) ||
	    s.len != 303) {
		ok(0, "a slot at 16 MiB");
		goto out;
	}
	buf_append(&h, s.data, s.len);

	/* 4 GiB and 100 passes: the format's ceiling, 1 GB per slot before. */
	put_u64(h.data + 14, 4ULL << 30);
	put_u64(h.data + 6, 100);
	capture_begin();
	k = ccrypto_slot_unwrap_named("keys/ab12", h.data, h.len, repo_a, pass,
	    strlen(pass), &why);
	msg = capture_end();
	ok(k == NULL && why == CCRYPTO_SLOT_REFUSED && reported(msg) &&
	    says(msg, "key slot 'keys/ab12'", "4096 MiB", "local limit 1024 MiB",
	    "COFFER_KDF_MAX_MEMORY", NULL),
	    "4 GiB, 100 passes: refused, naming the slot, the cost and the limit");
	put_u64(h.data + 6, 3);
	put_u64(h.data + 14, (1ULL << 30) + 1024);
	ok(try_unwrap(h.data, h.len, repo_a, pass, a, &msg) == 3 &&
	    says(msg, "key slot:", "1025 MiB", "1024 MiB", NULL),
	    "just above 1 GiB is refused (unnamed: 'key slot')");
	put_u64(h.data + 14, 16ULL << 20);
	put_u64(h.data + 6, 5);
	ok(try_unwrap(h.data, h.len, repo_a, pass, a, &msg) == 3 &&
	    says(msg, "5 passes", "limit of 4", NULL),
	    "5 passes are refused");
	put_u64(h.data + 6, 4);
	ok(try_unwrap(h.data, h.len, repo_a, pass, a, NULL) == 1,
	    "4 passes are tried (and fail the tag: the AD binds them)");
	put_u64(h.data + 6, 101);
	ok(try_unwrap(h.data, h.len, repo_a, pass, a, NULL) == 2,
	    "101 passes are still malformed, not refused");

	/* The variable moves the memory limit both ways. */
	setenv("COFFER_KDF_MAX_MEMORY", "8", 1);
	tuning_reload();
	ok(try_unwrap(s.data, s.len, repo_a, pass, a, &msg) == 3 &&
	    says(msg, "16 MiB", "local limit 8 MiB", NULL),
	    "COFFER_KDF_MAX_MEMORY=8 refuses a 16 MiB slot");
	buf_reset(&h);
	capture_begin();
	rc = ccrypto_slot_wrap(a, repo_a, pass, strlen(pass), 16ULL << 20, &h);
	msg = capture_end();
	ok(rc == -1 && h.len == 0 && reported(msg) &&
	    says(msg, "local limit 8 MiB", NULL),
	    "wrap refuses to make a slot this host would refuse");
	setenv("COFFER_KDF_MAX_MEMORY", "16", 1);
	tuning_reload();
	ok(try_unwrap(s.data, s.len, repo_a, pass, a, NULL) == 0,
	    "COFFER_KDF_MAX_MEMORY=16 opens it");
	{
		static const char *const bad[] = { "", "x", "7", "4097", "-1",
			"16M", "99999999999999999999" };
		size_t i, n = 0;

		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			setenv("COFFER_KDF_MAX_MEMORY", bad[i], 1);
			tuning_reload();
			rc = try_unwrap(s.data, s.len, repo_a, pass, a, &msg);
			if (bad[i][0] == '\0' ? rc == 0 : rc == 3 &&
			    says(msg, "COFFER_KDF_MAX_MEMORY must be", NULL))
				n++;
		}
		ok(n == i, "a malformed COFFER_KDF_MAX_MEMORY refuses, "
		    "an empty one is the default");
	}
	unsetenv("COFFER_KDF_MAX_MEMORY");
	tuning_reload();
out:
	buf_release(&s);
	buf_release(&h);
}

/* The parts of a valid key file for repo_a, and one hex digit short:
 * a holder key of 224 bytes. */
#define KF_RID "a0010203000000000000000000000000"
#define KF_M16 "1111111111111111"
#define KF_Q64 KF_M16 KF_M16 KF_M16 KF_M16
#define KF_SHORT KF_Q64 KF_Q64 KF_Q64 KF_Q64 KF_Q64 KF_Q64 KF_M16 KF_M16 \
	KF_M16 "111111111111111"
#define KF_KEY KF_SHORT "1"

static void
test_keyfile(struct ccrypto_keys *a)
{
	/* Those of length 494 or 495 test the checks beyond the length. */
	static const char *bad[] = {
		"",
		"coffer-key 1",
		"coffer-key 1 \n",
		"coffer-key 1 " KF_RID " " KF_SHORT,
		"coffer-key 1 " KF_RID " " KF_KEY "\n\n",
		"coffer-key 1 " KF_RID " " KF_KEY "\r\n",
		"coffer-key 1 " KF_RID " " KF_KEY " ",
		"coffer-key 1 " KF_RID "  " KF_SHORT "\n",
		"coffer-key 1 A0010203000000000000000000000000 " KF_KEY "\n",
		"coffer-key 1 a001020300000000000000000000000g " KF_KEY "\n",
		"coffer-key 1 " KF_RID " " KF_SHORT "x\n",
		"coffer-key 1 " KF_RID "\t" KF_KEY "\n",
		"coffer-key 2 " KF_RID " " KF_KEY "\n",
		"coffer-key 2 write-only " KF_RID " " KF_KEY "\n",
		"coffer-key 1  " KF_RID " " KF_SHORT "\n",
		" coffer-key 1 " KF_RID " " KF_SHORT "\n",
		"coffer-kez 1 " KF_RID " " KF_KEY "\n",
		"coffer-key 1 " KF_RID " " KF_KEY "\nx",
	};
	uint8_t rid[CCRYPTO_REPO_ID_BYTES], sentinel[CCRYPTO_REPO_ID_BYTES];
	struct buf t = BUF_INIT;
	struct ccrypto_keys *k;
	const char *good;
	size_t i, nbad, n;
	int shape;

	ok(ccrypto_keyfile_encode(a, repo_a, &t) == 0, "keyfile encode");
	shape = t.len == 495 && memcmp(t.data, "coffer-key 1 ", 13) == 0 &&
	    t.data[45] == ' ' && t.data[494] == '\n';
	for (i = 13; shape && i < 494; i++)
		if (i != 45 && !strchr("0123456789abcdef", t.data[i]))
			shape = 0;
	ok(shape, "keyfile text has the documented shape");
	ok(shape && memcmp(t.data + 13, "a0010203000000000000000000000000",
	    32) == 0, "keyfile carries the repo id");

	memset(rid, 0, sizeof(rid));
	k = ccrypto_keyfile_decode(t.data, t.len, rid);
	ok(same_keys(k, a) && memcmp(rid, repo_a, sizeof(rid)) == 0,
	    "keyfile round trip");
	ccrypto_keys_free(k);

	memset(rid, 0, sizeof(rid));
	k = ccrypto_keyfile_decode(t.data, t.len - 1, rid);
	ok(same_keys(k, a) && memcmp(rid, repo_a, sizeof(rid)) == 0,
	    "keyfile without the trailing newline");
	ccrypto_keys_free(k);

	memset(rid, 0, sizeof(rid));
	good = "coffer-key 1 " KF_RID " " KF_KEY "\n";
	k = ccrypto_keyfile_decode((const uint8_t *)good, strlen(good), rid);
	ok(k != NULL && memcmp(rid, repo_a, sizeof(rid)) == 0,
	    "hand-written key file decodes");
	ccrypto_keys_free(k);

	memset(sentinel, 0x5a, sizeof(sentinel));
	for (nbad = i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(rid, sentinel, sizeof(rid));
		capture_begin();
		k = ccrypto_keyfile_decode((const uint8_t *)bad[i],
		    strlen(bad[i]), rid);
		if (k != NULL || memcmp(rid, sentinel, sizeof(rid)) != 0 ||
		    !reported(capture_end())) {
			diag("accepted bad key file #%zu", i);
			nbad++;
		}
		ccrypto_keys_free(k);
	}
	ok(nbad == 0, "malformed key files are rejected (%zu cases)",
	    sizeof(bad) / sizeof(bad[0]));

	/* Another format is named. */
	capture_begin();
	k = ccrypto_keyfile_decode((const uint8_t *)"coffer-key 3 " KF_RID " "
	    KF_KEY "\n", strlen("coffer-key 3 " KF_RID " " KF_KEY "\n"), rid);
	ok(k == NULL && says(capture_end(), "key file has format 3; this "
	    "coffer reads format 1 (upgrade coffer)", NULL),
	    "a key file of format 3 is refused, naming its format");
	ccrypto_keys_free(k);

	/* A NUL in the middle must not end the parse early. */
	t.data[50] = '\0';
	capture_begin();
	k = ccrypto_keyfile_decode(t.data, t.len, rid);
	ok(k == NULL && reported(capture_end()),
	    "keyfile with an embedded NUL is rejected");
	ccrypto_keys_free(k);

	for (nbad = 0, n = 0; n < 494; n++) {
		capture_begin();
		k = ccrypto_keyfile_decode(t.data, n, rid);
		if (k != NULL || !reported(capture_end()))
			nbad++;
		ccrypto_keys_free(k);
	}
	ok(nbad == 0, "truncated key files are rejected");
	buf_release(&t);
}

/*
 * Write-only keys: the same chunk ids, chunker key, coffer.conf MAC and
 * signatures as the full key; no pack key opens; through a kind 2 slot
 * and a write-only key file and back, still write-only.
 */
static void
test_write_only(struct ccrypto_keys *a)
{
	uint8_t key[CCRYPTO_KEY_BYTES], sealed[CCRYPTO_SEALED_KEY_BYTES];
	uint8_t sig[CCRYPTO_SIG_BYTES], m1[32], m2[32];
	uint8_t rid[CCRYPTO_REPO_ID_BYTES];
	struct ccrypto_slot_info info;
	struct ccrypto_keys *w, *k;
	struct buf s = BUF_INIT, t = BUF_INIT;
	int why;

	w = ccrypto_keys_writer(a);
	ok(w != NULL && ccrypto_keys_write_only(w) &&
	    !ccrypto_keys_write_only(a), "a write-only copy says so");
	if (w == NULL)
		return;
	ok(same_keys(w, a) && memcmp(ccrypto_keys_chunker_key(w),
	    ccrypto_keys_chunker_key(a), CCRYPTO_KEY_BYTES) == 0,
	    "write-only: same chunk ids and chunker key");
	ccrypto_meta_mac(w, "conf", 4, m1);
	ccrypto_meta_mac(a, "conf", 4, m2);
	ok(memcmp(m1, m2, sizeof(m1)) == 0, "write-only: same conf MAC");
	ccrypto_sign(w, "rec", 3, sig);
	ok(ccrypto_verify(a, "rec", 3, sig) == 0, "write-only signs as the "
	    "full key does");
	memset(key, 7, sizeof(key));
	ccrypto_pack_key_seal(w, key, sealed);
	memset(key, 0, sizeof(key));
	ok(ccrypto_pack_key_unseal(a, sealed, key) == 0 && key[0] == 7,
	    "the full key opens what a write-only key sealed");
	ok(ccrypto_pack_key_unseal(w, sealed, key) == -1,
	    "a write-only key opens no pack key");

	ok(ccrypto_slot_wrap(w, repo_a, "wo", 2, TEST_MEMLIMIT, &s) == 0 &&
	    s.len == 271, "write-only slot: 271 bytes");
	ok(ccrypto_slot_info(NULL, s.data, s.len, &info) == 0 &&
	    info.kind == CCRYPTO_SLOT_WRITE_ONLY, "slot info: write-only");
	k = ccrypto_slot_unwrap(s.data, s.len, repo_a, "wo", 2, &why);
	ok(k != NULL && ccrypto_keys_write_only(k) && same_keys(k, a),
	    "write-only slot round trip");
	ccrypto_keys_free(k);
	s.data[5] = CCRYPTO_SLOT_HOLDER;	/* the kind is authenticated */
	k = ccrypto_slot_unwrap(s.data, s.len, repo_a, "wo", 2, &why);
	ok(k == NULL, "a write-only slot relabelled full does not open");
	ccrypto_keys_free(k);

	ok(ccrypto_keyfile_encode(w, repo_a, &t) == 0 &&
	    memcmp(t.data, "coffer-key 1 write-only ", 24) == 0,
	    "write-only key file: format 1, write-only");
	k = ccrypto_keyfile_decode(t.data, t.len, rid);
	ok(k != NULL && ccrypto_keys_write_only(k) && same_keys(k, a) &&
	    memcmp(rid, repo_a, sizeof(rid)) == 0,
	    "write-only key file round trip");
	ok(k != NULL && ccrypto_pack_key_unseal(k, sealed, key) == -1,
	    "a decoded write-only key opens no pack key");
	ccrypto_keys_free(k);
	buf_release(&t);
	ok(ccrypto_paper_encode(w, repo_a, &t) == -1,
	    "a write-only key has no paper form");
	buf_release(&t);
	buf_release(&s);
	ccrypto_keys_free(w);
}

/*
 * A typo at column col of each of the first lines lines of paper key t
 * (NUL-terminated), one at a time: how many the decoder refused.
 */
static int
paper_typos_caught(struct buf *t, int lines, int col)
{
	uint8_t rid[CCRYPTO_REPO_ID_BYTES];
	struct ccrypto_keys *k;
	char tag[16], c, *line;
	int i, caught = 0;

	for (i = 1; i <= lines; i++) {
		snprintf(tag, sizeof(tag), "\n%02d: ", i);
		if ((line = strstr((char *)t->data, tag)) == NULL)
			break;
		c = line[col];
		line[col] = c == '0' ? '1' : '0';
		k = ccrypto_paper_decode(t->data, t->len, rid);	/* reported */
		caught += k == NULL;
		ccrypto_keys_free(k);
		line[col] = c;
	}
	return (caught);
}

/* The paper key: round trip, then a typo in each line caught by it. */
static void
test_paper(struct ccrypto_keys *a)
{
	uint8_t rid[CCRYPTO_REPO_ID_BYTES];
	struct ccrypto_keys *k;
	struct buf t = BUF_INIT;

	ok(ccrypto_paper_encode(a, repo_a, &t) == 0 && buf_printf(&t, "%s",
	    "") == 0, "paper encode");
	ok(ccrypto_paper_is(t.data, t.len), "paper_is");
	k = ccrypto_paper_decode(t.data, t.len, rid);
	ok(same_keys(k, a) && memcmp(rid, repo_a, sizeof(rid)) == 0,
	    "paper round trip");
	ccrypto_keys_free(k);
	ok(paper_typos_caught(&t, 15, 5) == 15,
	    "a typo in any line is caught");
	{
		char *v = strstr((char *)t.data, "paper key 1\n");

		if (v != NULL)
			v[10] = '2';
		capture_begin();
		k = v != NULL ? ccrypto_paper_decode(t.data, t.len, rid) : NULL;
		ok(v != NULL && k == NULL && says(capture_end(), "paper key "
		    "has format 2; this coffer reads format 1 (upgrade "
		    "coffer)", NULL), "a paper key of format 2 is refused, "
		    "naming its format");
		ccrypto_keys_free(k);
	}
	buf_release(&t);
}

/*
 * Key epochs: a pack key sealed to a rotated pair opens only with the
 * keyring's secret; the keyring is bound to the master secret and the
 * repository id, and must match coffer.conf's public keys.
 */
static void
test_epochs(const uint8_t *master)
{
	uint8_t pk2[CCRYPTO_KEY_BYTES], pk3[CCRYPTO_KEY_BYTES];
	uint8_t key[CCRYPTO_KEY_BYTES], sealed[CCRYPTO_SEALED_KEY_BYTES];
	struct ccrypto_keys *k, *r, *w;
	struct buf ring = BUF_INIT;

	k = ccrypto_keys_from_master(master);
	r = ccrypto_keys_from_master(master);
	if (k == NULL || r == NULL)
		goto out;
	ok(ccrypto_keys_seal_epoch(k) == 1 && ccrypto_keys_has_epoch(k, 1),
	    "epochs: 1 before any rotation");
	ok(ccrypto_epoch_generate(k, 2, pk2) == 0 &&
	    ccrypto_epoch_generate(k, 3, pk3) == 0 &&
	    ccrypto_epoch_generate(k, 3, pk3) == -1, "epochs 2 and 3, once");
	ok(ccrypto_keys_seal_epoch(k) == 1 && ccrypto_keys_max_epoch(k) == 3,
	    "a generated epoch is not sealed to until coffer.conf lists it");
	ok(ccrypto_keys_set_epoch(k, 2, pk2) == 0 &&
	    ccrypto_keys_seal_epoch(k) == 2, "sealed to epoch 2 once listed");
	/* One recipient (the master secret's own pair, under a key's
	 * name), three secrets (epoch 1's too). */
	ok(ccrypto_recipient_add(k, "0123456789abcdef",
	    ccrypto_keys_recipient_pk(k)) == 0 &&
	    ccrypto_keyring_seal(k, repo_a, 1, &ring) == 0 &&
	    ring.len == 20 + 128 + 24 + 4 + 3 * 36 + 16 + 32,
	    "keyring: three secrets, one recipient");
	memset(key, 9, sizeof(key));
	ok(ccrypto_pack_key_seal(k, key, sealed) == 2, "sealed to epoch 2");
	memset(key, 0, sizeof(key));
	ok(ccrypto_pack_key_unseal_epoch(r, 2, sealed, key) ==
	    CCRYPTO_NO_EPOCH, "without the keyring: epoch 2 is not held");
	ok(ccrypto_keyring_open(r, repo_b, ring.data, ring.len, 0) == -1,
	    "a keyring does not open for another repository id");
	ring.data[ring.len - 50] ^= 1;
	ok(ccrypto_keyring_open(r, repo_a, ring.data, ring.len, 0) == -1,
	    "a damaged keyring does not open");
	ring.data[ring.len - 50] ^= 1;
	ring.data[40] ^= 1;
	ok(ccrypto_keyring_open(r, repo_a, ring.data, ring.len, 0) == -1,
	    "a keyring whose recipients changed fails authentication");
	ring.data[40] ^= 1;
	ring.data[4] = 2;
	capture_begin();
	ok(ccrypto_keyring_open(r, repo_a, ring.data, ring.len, 0) == -1 &&
	    says(capture_end(), "the keyring has format 2; this coffer reads "
	    "format 1 (upgrade coffer)", NULL),
	    "a keyring of format 2 is refused, naming its format");
	ring.data[4] = 1;
	ok(ccrypto_keys_set_epoch(r, 2, pk3) == 0 &&
	    ccrypto_keyring_open(r, repo_a, ring.data, ring.len, 0) == -1,
	    "a keyring whose secret is not coffer.conf's key is refused");
	ccrypto_keys_free(r);
	r = ccrypto_keys_from_master(master);
	ok(r != NULL && ccrypto_keys_set_epoch(r, 2, pk2) == 0 &&
	    ccrypto_keyring_open(r, repo_a, ring.data, ring.len, 0) == 0 &&
	    ccrypto_keys_has_epoch(r, 2) && ccrypto_keys_has_epoch(r, 3),
	    "the keyring opens under the same master secret");
	ok(r != NULL && ccrypto_pack_key_unseal_epoch(r, 2, sealed, key) ==
	    0 && key[0] == 9, "the keyring's secret opens epoch 2's pack key");
	ok(r != NULL && ccrypto_pack_key_unseal_epoch(r, 1, sealed, key) ==
	    -1 && ccrypto_pack_key_unseal_epoch(r, 3, sealed, key) == -1,
	    "another epoch's secret does not");
	w = r != NULL ? ccrypto_keys_writer(r) : NULL;
	ok(w != NULL && ccrypto_keys_seal_epoch(w) == 2 &&
	    !ccrypto_keys_has_epoch(w, 2) &&
	    ccrypto_pack_key_unseal_epoch(w, 2, sealed, key) != 0,
	    "a write-only copy seals to epoch 2 and opens nothing");
	if (w != NULL) {
		memset(key, 5, sizeof(key));
		ok(ccrypto_pack_key_seal(w, key, sealed) == 2 &&
		    ccrypto_pack_key_unseal_epoch(r, 2, sealed, key) == 0 &&
		    key[0] == 5, "what it seals, the full key opens");
	}
	ccrypto_keys_free(w);
	if (r != NULL) {
		ccrypto_epoch_forget(r, 2);
		ok(ccrypto_pack_key_unseal_epoch(r, 2, sealed, key) ==
		    CCRYPTO_NO_EPOCH, "a forgotten epoch is not held");
		buf_reset(&ring);
		ok(ccrypto_keyring_seal(r, repo_a, 1, &ring) == 0 &&
		    ring.len == 20 + 128 + 24 + 4 + 2 * 36 + 16 + 32,
		    "a forgotten secret leaves the keyring");
	}
out:
	buf_release(&ring);
	ccrypto_keys_free(k);
	ccrypto_keys_free(r);
}

/*
 * Holder keys: a full key with a recipient of its own reads through the
 * keyring alone (epoch 1 too), travels as a key file and a paper key,
 * and is shut out once removed from the keyring.
 */
static void
test_holder(const uint8_t *master)
{
	uint8_t rid[CCRYPTO_REPO_ID_BYTES], key[CCRYPTO_KEY_BYTES];
	uint8_t sealed[CCRYPTO_SEALED_KEY_BYTES];
	struct ccrypto_keys *m, *h, *h2 = NULL, *d = NULL;
	struct buf ring = BUF_INIT, t = BUF_INIT;
	struct ccrypto_keys *a = ccrypto_keys_from_master(master);

	m = ccrypto_keys_from_master(master);
	h = m != NULL && a != NULL ? ccrypto_keys_holder_new(m) : NULL;
	if (h == NULL) {
		ok(0, "a holder key");
		goto out;
	}
	ok(ccrypto_keys_kind(h) == CCRYPTO_KEY_HOLDER && same_keys(h, a) &&
	    !ccrypto_keys_has_epoch(h, 1),
	    "a holder key: the same ids, no master secret, no epoch 1 yet");
	memset(key, 7, sizeof(key));
	(void)ccrypto_pack_key_seal(a, key, sealed);
	ok(ccrypto_pack_key_unseal_epoch(h, 1, sealed, key) ==
	    CCRYPTO_NO_EPOCH, "without the keyring it opens nothing");
	/* A new repository's keyring: the holder listed, and only it. */
	ok(ccrypto_recipient_add(m, "0123456789abcdef",
	    ccrypto_keys_recipient_pk(h)) == 0 &&
	    ccrypto_recipient_name(m, 1) == NULL &&
	    ccrypto_keyring_seal(m, repo_a, 1, &ring) == 0,
	    "a keyring sealed to one holder");
	memset(key, 0, sizeof(key));
	ok(ccrypto_keyring_open(h, repo_a, ring.data, ring.len, 0) == 0 &&
	    ccrypto_pack_key_unseal_epoch(h, 1, sealed, key) == 0 &&
	    key[0] == 7, "through the keyring the holder opens epoch 1");
	ok(ccrypto_keyring_open(a, repo_a, ring.data, ring.len, 0) ==
	    CCRYPTO_NOT_LISTED, "the master secret is not listed: shut out");
	ok(ccrypto_keyfile_encode(h, repo_a, &t) == 0 &&
	    memcmp(t.data, "coffer-key 1 ", 13) == 0 &&
	    (d = ccrypto_keyfile_decode(t.data, t.len, rid)) != NULL &&
	    ccrypto_keys_kind(d) == CCRYPTO_KEY_HOLDER &&
	    memcmp(ccrypto_keys_recipient_pk(d), ccrypto_keys_recipient_pk(h),
	    CCRYPTO_KEY_BYTES) == 0, "full key file round trip");
	ccrypto_keys_free(d);
	buf_reset(&t);
	ok(ccrypto_paper_encode(h, repo_a, &t) == 0 &&
	    buf_printf(&t, "%s", "") == 0 && strstr((char *)t.data,
	    "coffer paper key 1\n") != NULL && strstr((char *)t.data,
	    "\n15: ") != NULL && ccrypto_paper_is(t.data, t.len),
	    "paper key: fifteen lines");
	d = ccrypto_paper_decode(t.data, t.len, rid);
	ok(d != NULL && memcmp(ccrypto_keys_recipient_pk(d),
	    ccrypto_keys_recipient_pk(h), CCRYPTO_KEY_BYTES) == 0 &&
	    same_keys(d, a), "paper key round trip");
	ccrypto_keys_free(d);
	ok(paper_typos_caught(&t, 15, 40) == 15,
	    "a typo in any of the 15 lines is caught");
	/* A second holder added, then the first removed. */
	h2 = ccrypto_keys_holder_new(h);
	buf_reset(&ring);
	ok(h2 != NULL && ccrypto_recipient_add(h, "second",
	    ccrypto_keys_recipient_pk(h2)) == 0 &&
	    ccrypto_recipient_remove(h, "0123456789abcdef") == 0 &&
	    ccrypto_keyring_seal(h, repo_a, 1, &ring) == 0 &&
	    ccrypto_keyring_open(h2, repo_a, ring.data, ring.len, 0) == 0 &&
	    ccrypto_keys_has_epoch(h2, 1), "a second holder reads");
	{
		uint8_t parts[CCRYPTO_HOLDER_BYTES];

		ccrypto_keys_holder_parts(h, parts);
		d = ccrypto_keys_from_holder(parts);
	}
	ok(d != NULL && ccrypto_keyring_open(d, repo_a, ring.data, ring.len, 0)
	    == CCRYPTO_NOT_LISTED, "a removed holder is shut out");
	ccrypto_keys_free(d);
out:
	buf_release(&t);
	buf_release(&ring);
	ccrypto_keys_free(h2);
	ccrypto_keys_free(h);
	ccrypto_keys_free(m);
	ccrypto_keys_free(a);
}

int
main(void)
{
	uint8_t ma[CCRYPTO_KEY_BYTES], mb[CCRYPTO_KEY_BYTES];
	struct ccrypto_keys *a, *b, *ha;

	ok(ccrypto_init() == 0 && ccrypto_init() == 0, "ccrypto_init twice");
	test_derivation();
	test_hash_format();
	test_hash_many();

	memset(ma, 0xaa, sizeof(ma));
	memset(mb, 0xbb, sizeof(mb));
	a = ccrypto_keys_from_master(ma);
	b = ccrypto_keys_from_master(mb);
	if (a == NULL || b == NULL) {
		ok(0, "keys for repositories a and b");
		return (tap_done());
	}
	test_meta_mac(a, b);
	test_aead();
	test_aead_format();
	test_seal(a, b);
	test_sign(a, b);
	/* Slots, key files and paper keys hold holder keys (a full key
	 * of its own), never the master secret. */
	if ((ha = ccrypto_keys_holder_new(a)) == NULL) {
		ok(0, "a holder key for repository a");
		return (tap_done());
	}
	test_slot(ha);
	test_slot_limits(ha);
	test_keyfile(ha);
	test_write_only(a);
	test_paper(ha);
	test_epochs(ma);
	test_holder(ma);
	ccrypto_keys_free(ha);
	ccrypto_keys_free(a);
	ccrypto_keys_free(b);
	return (tap_done());
}
