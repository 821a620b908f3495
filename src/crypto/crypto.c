#include <assert.h>
#include <string.h>

#include <sodium.h>

#include "coffer/crypto.h"
#include "blake2b.h"
#include "coffer/log.h"
#include "crypto-int.h"

/*
 * Subkey ids under the KDF context are part of the repository format:
 * renumbering one makes every existing repository unreadable.
 */
#define KDF_CONTEXT "coffer01"
enum {
	SUBKEY_ID = 1,
	SUBKEY_CHUNKER = 2,
	SUBKEY_META = 3,
	SUBKEY_BOX_SEED = 4,
	SUBKEY_SIGN_SEED = 5,
};

/*
 * The secrets that only a reader needs (master, box_sk) come first.  A
 * write-only key (tarsnap's model) would be this struct with write_only set
 * and those two left zero: it can still name chunks, chunk, check
 * coffer.conf, seal pack keys and sign, but it cannot open a pack.
 */
struct ccrypto_keys {
	uint8_t master[CCRYPTO_KEY_BYTES];
	uint8_t box_sk[crypto_box_SECRETKEYBYTES];
	uint8_t id[CCRYPTO_KEY_BYTES];
	uint8_t chunker[CCRYPTO_KEY_BYTES];
	uint8_t meta[CCRYPTO_KEY_BYTES];
	uint8_t box_pk[crypto_box_PUBLICKEYBYTES];
	uint8_t sign_pk[crypto_sign_PUBLICKEYBYTES];
	uint8_t sign_sk[crypto_sign_SECRETKEYBYTES];
	/* Key pair seeds pass through here, never through the stack. */
	uint8_t seed[CCRYPTO_KEY_BYTES];
	int write_only;
};

_Static_assert(sizeof(KDF_CONTEXT) - 1 == crypto_kdf_CONTEXTBYTES,
    "KDF context must be crypto_kdf_CONTEXTBYTES long");
_Static_assert(crypto_kdf_KEYBYTES == CCRYPTO_KEY_BYTES &&
    crypto_box_SEEDBYTES == CCRYPTO_KEY_BYTES &&
    crypto_sign_SEEDBYTES == CCRYPTO_KEY_BYTES,
    "master secret and seeds are CCRYPTO_KEY_BYTES");
_Static_assert(CCRYPTO_KEY_BYTES <= BLAKE2B_OUT_MAX &&
    CCRYPTO_ID_BYTES <= BLAKE2B_OUT_MAX && CCRYPTO_MAC_BYTES <= BLAKE2B_OUT_MAX,
    "subkeys must be usable as BLAKE2b keys, ids and MACs as outputs");
_Static_assert(CCRYPTO_SEALED_KEY_BYTES ==
    CCRYPTO_KEY_BYTES + crypto_box_SEALBYTES, "sealed pack key size");
_Static_assert(CCRYPTO_KEY_BYTES ==
    crypto_aead_xchacha20poly1305_ietf_KEYBYTES &&
    CCRYPTO_NONCE_BYTES == crypto_aead_xchacha20poly1305_ietf_NPUBBYTES &&
    CCRYPTO_TAG_BYTES == crypto_aead_xchacha20poly1305_ietf_ABYTES,
    "AEAD sizes");
_Static_assert(CCRYPTO_SIG_BYTES == crypto_sign_BYTES, "signature size");
_Static_assert(crypto_box_PUBLICKEYBYTES == CCRYPTO_KEY_BYTES &&
    CCRYPTO_WRITER_BYTES == 5 * CCRYPTO_KEY_BYTES,
    "write-only material is five 32-byte parts");
/* struct ccrypto_hash_state is public so callers can keep it on the stack. */
_Static_assert(sizeof(struct blake2b_state) <=
    sizeof(((struct ccrypto_hash_state *)0)->opaque),
    "ccrypto_hash_state too small for blake2b_state");
_Static_assert(_Alignof(struct ccrypto_hash_state) %
    _Alignof(struct blake2b_state) == 0,
    "ccrypto_hash_state under-aligned for blake2b_state");

int
ccrypto_init(void)
{
	if (sodium_init() < 0) {
		log_error("cannot initialize libsodium");
		return (-1);
	}
	return (0);
}

static struct ccrypto_keys *
keys_alloc(void)
{
	struct ccrypto_keys *k;

	/* sodium_malloc relies on sodium_init; repeat calls are cheap. */
	if (ccrypto_init())
		return (NULL);
	if ((k = sodium_malloc(sizeof(*k))) == NULL) {
		log_error("out of memory for key material");
		return (NULL);
	}
	memset(k, 0, sizeof(*k));
	return (k);
}

static int
keys_derive(struct ccrypto_keys *k)
{
	int rc = 0;

	if (crypto_kdf_derive_from_key(k->id, sizeof(k->id), SUBKEY_ID,
	    KDF_CONTEXT, k->master) ||
	    crypto_kdf_derive_from_key(k->chunker, sizeof(k->chunker),
	    SUBKEY_CHUNKER, KDF_CONTEXT, k->master) ||
	    crypto_kdf_derive_from_key(k->meta, sizeof(k->meta), SUBKEY_META,
	    KDF_CONTEXT, k->master) ||
	    crypto_kdf_derive_from_key(k->seed, sizeof(k->seed),
	    SUBKEY_BOX_SEED, KDF_CONTEXT, k->master) ||
	    crypto_box_seed_keypair(k->box_pk, k->box_sk, k->seed) ||
	    crypto_kdf_derive_from_key(k->seed, sizeof(k->seed),
	    SUBKEY_SIGN_SEED, KDF_CONTEXT, k->master) ||
	    crypto_sign_seed_keypair(k->sign_pk, k->sign_sk, k->seed)) {
		log_error("cannot derive subkeys");
		rc = -1;
	}
	sodium_memzero(k->seed, sizeof(k->seed));
	return (rc);
}

struct ccrypto_keys *
ccrypto_keys_generate(void)
{
	struct ccrypto_keys *k;

	if ((k = keys_alloc()) == NULL)
		goto err0;
	randombytes_buf(k->master, sizeof(k->master));
	if (keys_derive(k))
		goto err1;

	/* Success! */
	return (k);

err1:
	sodium_free(k);
err0:
	/* Failure! */
	return (NULL);
}

struct ccrypto_keys *
ccrypto_keys_from_master(const uint8_t *master)
{
	struct ccrypto_keys *k;

	if ((k = keys_alloc()) == NULL)
		goto err0;
	memcpy(k->master, master, sizeof(k->master));
	if (keys_derive(k))
		goto err1;

	/* Success! */
	return (k);

err1:
	sodium_free(k);
err0:
	/* Failure! */
	return (NULL);
}

void
ccrypto_keys_free(struct ccrypto_keys *k)
{
	/* sodium_free wipes before unmapping. */
	if (k != NULL)
		sodium_free(k);
}

const uint8_t *
ccrypto_keys_master(const struct ccrypto_keys *k)
{
	return (k->write_only ? NULL : k->master);
}

int
ccrypto_keys_write_only(const struct ccrypto_keys *k)
{
	return (k->write_only);
}

struct ccrypto_keys *
ccrypto_keys_writer(const struct ccrypto_keys *k)
{
	struct ccrypto_keys *w;

	if ((w = keys_alloc()) == NULL)
		return (NULL);
	/* What writing needs, and nothing that opens a pack key. */
	memcpy(w->id, k->id, sizeof(w->id));
	memcpy(w->chunker, k->chunker, sizeof(w->chunker));
	memcpy(w->meta, k->meta, sizeof(w->meta));
	memcpy(w->box_pk, k->box_pk, sizeof(w->box_pk));
	memcpy(w->sign_pk, k->sign_pk, sizeof(w->sign_pk));
	memcpy(w->sign_sk, k->sign_sk, sizeof(w->sign_sk));
	w->write_only = 1;
	return (w);
}

void
ccrypto_keys_writer_parts(const struct ccrypto_keys *k,
    uint8_t out[CCRYPTO_WRITER_BYTES])
{
	memcpy(out, k->id, CCRYPTO_KEY_BYTES);
	memcpy(out + 32, k->chunker, CCRYPTO_KEY_BYTES);
	memcpy(out + 64, k->meta, CCRYPTO_KEY_BYTES);
	memcpy(out + 96, k->box_pk, CCRYPTO_KEY_BYTES);
	/* libsodium's Ed25519 secret key is seed | public key. */
	crypto_sign_ed25519_sk_to_seed(out + 128, k->sign_sk);
}

struct ccrypto_keys *
ccrypto_keys_from_writer(const uint8_t in[CCRYPTO_WRITER_BYTES])
{
	struct ccrypto_keys *w;

	if ((w = keys_alloc()) == NULL)
		return (NULL);
	memcpy(w->id, in, CCRYPTO_KEY_BYTES);
	memcpy(w->chunker, in + 32, CCRYPTO_KEY_BYTES);
	memcpy(w->meta, in + 64, CCRYPTO_KEY_BYTES);
	memcpy(w->box_pk, in + 96, CCRYPTO_KEY_BYTES);
	memcpy(w->seed, in + 128, CCRYPTO_KEY_BYTES);
	if (crypto_sign_seed_keypair(w->sign_pk, w->sign_sk, w->seed)) {
		log_error("cannot derive the signing key");
		sodium_free(w);
		return (NULL);
	}
	sodium_memzero(w->seed, sizeof(w->seed));
	w->write_only = 1;
	return (w);
}

const uint8_t *
ccrypto_keys_chunker_key(const struct ccrypto_keys *k)
{
	return (k->chunker);
}

void
ccrypto_chunk_id(const struct ccrypto_keys *k, const void *data, size_t len,
    uint8_t out[CCRYPTO_ID_BYTES])
{
	blake2b(out, CCRYPTO_ID_BYTES, data, len, k->id, sizeof(k->id));
}

void
ccrypto_chunk_ids(const struct ccrypto_keys *k, size_t n,
    const uint8_t *const *data, const size_t *len,
    uint8_t (*out)[CCRYPTO_ID_BYTES])
{
	blake2b_many((uint8_t *)out, CCRYPTO_ID_BYTES, n, data, len, k->id,
	    sizeof(k->id));
}

static struct blake2b_state *
hash_state(struct ccrypto_hash_state *s)
{
	return ((struct blake2b_state *)(void *)s->opaque);
}

void
ccrypto_hash_init(const struct ccrypto_keys *k, struct ccrypto_hash_state *s)
{
	blake2b_init(hash_state(s), CCRYPTO_ID_BYTES, k->id, sizeof(k->id));
}

void
ccrypto_hash_update(struct ccrypto_hash_state *s, const void *p, size_t n)
{
	blake2b_update(hash_state(s), p, n);
}

void
ccrypto_hash_final(struct ccrypto_hash_state *s, uint8_t out[32])
{
	/* blake2b_final wipes the state, which may sit on the stack. */
	blake2b_final(hash_state(s), out);
}

void
ccrypto_plain_hash(const void *data, size_t len, uint8_t out[32])
{
	blake2b(out, 32, data, len, NULL, 0);
}

_Static_assert(sizeof(crypto_generichash_state) <=
    sizeof(((struct ccrypto_plain_state *)0)->opaque),
    "struct ccrypto_plain_state holds libsodium's state");

static crypto_generichash_state *
plain_state(struct ccrypto_plain_state *s)
{
	return ((crypto_generichash_state *)(void *)s->opaque);
}

void
ccrypto_plain_hash_init(struct ccrypto_plain_state *s, size_t outlen)
{
	s->outlen = outlen;
	crypto_generichash_init(plain_state(s), NULL, 0, outlen);
}

void
ccrypto_plain_hash_update(struct ccrypto_plain_state *s, const void *p,
    size_t n)
{
	crypto_generichash_update(plain_state(s), p, n);
}

void
ccrypto_plain_hash_final(struct ccrypto_plain_state *s, uint8_t *out)
{
	crypto_generichash_final(plain_state(s), out, s->outlen);
}

void
ccrypto_meta_mac(const struct ccrypto_keys *k, const void *data, size_t len,
    uint8_t out[CCRYPTO_MAC_BYTES])
{
	blake2b(out, CCRYPTO_MAC_BYTES, data, len, k->meta, sizeof(k->meta));
}

int
ccrypto_meta_mac_verify(const struct ccrypto_keys *k, const void *data,
    size_t len, const uint8_t mac[CCRYPTO_MAC_BYTES])
{
	uint8_t want[CCRYPTO_MAC_BYTES];

	ccrypto_meta_mac(k, data, len, want);
	return (sodium_memcmp(want, mac, sizeof(want)) == 0 ? 0 : -1);
}

void
ccrypto_random(void *buf, size_t n)
{
	randombytes_buf(buf, n);
}

uint8_t *
ccrypto_secret_new(size_t n)
{
	uint8_t *p;

	if (ccrypto_init())
		return (NULL);
	if ((p = sodium_malloc(n)) == NULL)
		log_error("out of memory for a secret (%zu bytes)", n);
	return (p);
}

void
ccrypto_secret_free(uint8_t *p)
{
	if (p != NULL)
		sodium_free(p);
}

void
ccrypto_pack_key_seal(const struct ccrypto_keys *k, const uint8_t *key,
    uint8_t out[CCRYPTO_SEALED_KEY_BYTES])
{
	int rc;

	/*
	 * Sealing fails only for a low-order public key, and ours comes
	 * from crypto_box_seed_keypair: a failure is a bug, not bad input.
	 */
	rc = crypto_box_seal(out, key, CCRYPTO_KEY_BYTES, k->box_pk);
	assert(rc == 0);
	(void)rc;
}

int
ccrypto_pack_key_unseal(const struct ccrypto_keys *k,
    const uint8_t in[CCRYPTO_SEALED_KEY_BYTES], uint8_t *key)
{
	if (k->write_only)
		return (-1);
	if (crypto_box_seal_open(key, in, CCRYPTO_SEALED_KEY_BYTES, k->box_pk,
	    k->box_sk) != 0)
		return (-1);
	return (0);
}

void
ccrypto_sign(const struct ccrypto_keys *k, const void *msg, size_t len,
    uint8_t sig[CCRYPTO_SIG_BYTES])
{
	crypto_sign_detached(sig, NULL, msg, len, k->sign_sk);
}

int
ccrypto_verify(const struct ccrypto_keys *k, const void *msg, size_t len,
    const uint8_t sig[CCRYPTO_SIG_BYTES])
{
	if (crypto_sign_verify_detached(sig, msg, len, k->sign_pk) != 0)
		return (-1);
	return (0);
}
