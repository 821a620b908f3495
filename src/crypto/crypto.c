#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
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
	/* 6 keyed a keyring of development days: never reused. */
	SUBKEY_RECIPIENT_SEED = 7,
	SUBKEY_RING_MAC = 8,
};

/*
 * Key epochs (doc/format.md, "Key epochs"): epoch 1 is the box pair above,
 * derived from the master secret; epochs from 2 on are random X25519
 * pairs, their public keys from coffer.conf, their secrets from the
 * keyring.  flags: what is known of one.
 */
enum { EPOCH_PK = 1, EPOCH_SK = 2, EPOCH_CONF = 4 };
struct epoch {
	uint32_t n;
	uint32_t flags;
	uint8_t pk[crypto_box_PUBLICKEYBYTES];
	uint8_t sk[crypto_box_SECRETKEYBYTES];
};

/* A keyring recipient: its name and X25519 public key. */
struct recipient {
	char name[CCRYPTO_RECIPIENT_NAME_MAX + 1];
	uint8_t pk[crypto_box_PUBLICKEYBYTES];
};

/*
 * The secrets that only a reader needs (master, box_sk, recip_sk) come
 * first.  A write-only key (tarsnap's model) is this struct with
 * write_only set and those left zero: it can still name chunks, chunk,
 * check coffer.conf, seal pack keys and sign, but it cannot open a pack.
 * kind: CCRYPTO_KEY_*.  box_held: epoch 1's secret is in box_sk (derived
 * from the master secret, or read from the keyring).  recip_*: the
 * recipient this key opens the keyring as (a holder's own; a master key's
 * derived).
 */
struct ccrypto_keys {
	uint8_t master[CCRYPTO_KEY_BYTES];
	uint8_t box_sk[crypto_box_SECRETKEYBYTES];
	uint8_t recip_sk[crypto_box_SECRETKEYBYTES];
	uint8_t ring_mac[CCRYPTO_KEY_BYTES];
	uint8_t recip_pk[crypto_box_PUBLICKEYBYTES];
	int kind;
	int box_held;
	uint8_t id[CCRYPTO_KEY_BYTES];
	uint8_t chunker[CCRYPTO_KEY_BYTES];
	uint8_t meta[CCRYPTO_KEY_BYTES];
	uint8_t box_pk[crypto_box_PUBLICKEYBYTES];
	uint8_t sign_pk[crypto_sign_PUBLICKEYBYTES];
	uint8_t sign_sk[crypto_sign_SECRETKEYBYTES];
	/*
	 * The authority pair: signs coffer.conf (whom packs are sealed to).
	 * A full key derives it from ring_mac; a write-only key holds only
	 * its public half (auth_known), or nothing if it was exported
	 * before coffer.conf was signed.
	 */
	uint8_t auth_pk[crypto_sign_PUBLICKEYBYTES];
	uint8_t auth_sk[crypto_sign_SECRETKEYBYTES];
	int auth_known;
	/* Key pair seeds pass through here, never through the stack. */
	uint8_t seed[CCRYPTO_KEY_BYTES];
	int write_only;
	/* Epochs from 2 on, in increasing order; pack keys are sealed to
	 * seal_epoch (1: box_pk). */
	struct epoch epochs[CCRYPTO_EPOCHS_MAX];
	size_t nepochs;
	uint32_t seal_epoch;
	/* The keyring's recipients. */
	struct recipient recips[CCRYPTO_RECIPIENTS_MAX];
	size_t nrecips;
	uint64_t ring_gen;	/* the keyring's generation */
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
    crypto_sign_PUBLICKEYBYTES == CCRYPTO_KEY_BYTES &&
    CCRYPTO_WRITER_BYTES == 5 * CCRYPTO_KEY_BYTES &&
    CCRYPTO_WO_BYTES == 6 * CCRYPTO_KEY_BYTES &&
    CCRYPTO_HOLDER_BYTES == 7 * CCRYPTO_KEY_BYTES &&
    crypto_box_SECRETKEYBYTES == CCRYPTO_KEY_BYTES,
    "write-only material is five 32-byte parts, a holder's seven");
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
	k->seal_epoch = 1;
	return (k);
}

/*
 * The authority pair from ring_mac (every full key holds it, no write-only
 * key does): its own KDF context, so it shares nothing with the subkeys
 * above, and it needs no new secret in any key a full key is made of.
 */
#define AUTH_CONTEXT "cfauth01"
static int
auth_derive(struct ccrypto_keys *k)
{
	int rc = 0;

	if (crypto_kdf_derive_from_key(k->seed, sizeof(k->seed), 1,
	    AUTH_CONTEXT, k->ring_mac) ||
	    crypto_sign_seed_keypair(k->auth_pk, k->auth_sk, k->seed)) {
		log_error("cannot derive the authority key");
		rc = -1;
	}
	sodium_memzero(k->seed, sizeof(k->seed));
	k->auth_known = rc == 0;
	return (rc);
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
	    crypto_sign_seed_keypair(k->sign_pk, k->sign_sk, k->seed) ||
	    crypto_kdf_derive_from_key(k->ring_mac, sizeof(k->ring_mac),
	    SUBKEY_RING_MAC, KDF_CONTEXT, k->master) ||
	    crypto_kdf_derive_from_key(k->seed, sizeof(k->seed),
	    SUBKEY_RECIPIENT_SEED, KDF_CONTEXT, k->master) ||
	    crypto_box_seed_keypair(k->recip_pk, k->recip_sk, k->seed)) {
		log_error("cannot derive subkeys");
		rc = -1;
	}
	sodium_memzero(k->seed, sizeof(k->seed));
	if (rc == 0)
		rc = auth_derive(k);
	k->kind = CCRYPTO_KEY_MASTER;
	k->box_held = 1;
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
	return (k->kind == CCRYPTO_KEY_MASTER ? k->master : NULL);
}

int
ccrypto_keys_kind(const struct ccrypto_keys *k)
{
	return (k->kind);
}

const uint8_t *
ccrypto_keys_recipient_pk(const struct ccrypto_keys *k)
{
	return (k->write_only ? NULL : k->recip_pk);
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
	memcpy(w->auth_pk, k->auth_pk, sizeof(w->auth_pk));
	w->auth_known = k->auth_known;
	for (w->nepochs = 0; w->nepochs < k->nepochs; w->nepochs++) {
		w->epochs[w->nepochs] = k->epochs[w->nepochs];
		w->epochs[w->nepochs].flags &= ~(uint32_t)EPOCH_SK;
		sodium_memzero(w->epochs[w->nepochs].sk,
		    sizeof(w->epochs[w->nepochs].sk));
	}
	w->seal_epoch = k->seal_epoch;
	w->write_only = 1;
	w->kind = CCRYPTO_KEY_WRITE_ONLY;
	return (w);
}

struct ccrypto_keys *
ccrypto_keys_holder_new(const struct ccrypto_keys *k)
{
	struct ccrypto_keys *h;

	if (k->write_only || (h = ccrypto_keys_writer(k)) == NULL)
		return (NULL);
	crypto_box_keypair(h->recip_pk, h->recip_sk);
	memcpy(h->ring_mac, k->ring_mac, sizeof(h->ring_mac));
	if (auth_derive(h)) {
		sodium_free(h);
		return (NULL);
	}
	h->write_only = 0;
	h->kind = CCRYPTO_KEY_HOLDER;
	return (h);
}

void
ccrypto_keys_holder_parts(const struct ccrypto_keys *k,
    uint8_t out[CCRYPTO_HOLDER_BYTES])
{
	ccrypto_keys_writer_parts(k, out);
	memcpy(out + CCRYPTO_WRITER_BYTES, k->ring_mac, CCRYPTO_KEY_BYTES);
	memcpy(out + CCRYPTO_WRITER_BYTES + CCRYPTO_KEY_BYTES, k->recip_sk,
	    CCRYPTO_KEY_BYTES);
}

struct ccrypto_keys *
ccrypto_keys_from_holder(const uint8_t in[CCRYPTO_HOLDER_BYTES])
{
	struct ccrypto_keys *h;

	if ((h = ccrypto_keys_from_writer(in)) == NULL)
		return (NULL);
	memcpy(h->ring_mac, in + CCRYPTO_WRITER_BYTES, CCRYPTO_KEY_BYTES);
	memcpy(h->recip_sk, in + CCRYPTO_WRITER_BYTES + CCRYPTO_KEY_BYTES,
	    CCRYPTO_KEY_BYTES);
	crypto_scalarmult_base(h->recip_pk, h->recip_sk);
	if (auth_derive(h)) {
		sodium_free(h);
		return (NULL);
	}
	h->write_only = 0;
	h->kind = CCRYPTO_KEY_HOLDER;
	return (h);
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
	w->kind = CCRYPTO_KEY_WRITE_ONLY;
	return (w);
}

void
ccrypto_keys_wo_parts(const struct ccrypto_keys *k,
    uint8_t out[CCRYPTO_WO_BYTES])
{
	ccrypto_keys_writer_parts(k, out);
	memcpy(out + CCRYPTO_WRITER_BYTES, k->auth_pk, CCRYPTO_KEY_BYTES);
}

struct ccrypto_keys *
ccrypto_keys_from_wo(const uint8_t in[CCRYPTO_WO_BYTES])
{
	struct ccrypto_keys *w;

	if ((w = ccrypto_keys_from_writer(in)) == NULL)
		return (NULL);
	memcpy(w->auth_pk, in + CCRYPTO_WRITER_BYTES, CCRYPTO_KEY_BYTES);
	w->auth_known = 1;
	return (w);
}

int
ccrypto_keys_auth_known(const struct ccrypto_keys *k)
{
	return (k->auth_known);
}

/* ctx\0 | repository id | body: what the authority signs.  The context
 * keeps a signature on one kind of object from passing for another. */
static uint8_t *
auth_message(const char *ctx, const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES],
    const void *body, size_t len, size_t *mlen)
{
	size_t clen = strlen(ctx) + 1;
	uint8_t *m;

	*mlen = clen + CCRYPTO_REPO_ID_BYTES + len;
	if (len > SIZE_MAX / 2 || (m = malloc(*mlen)) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	memcpy(m, ctx, clen);
	memcpy(m + clen, repo_id, CCRYPTO_REPO_ID_BYTES);
	memcpy(m + clen + CCRYPTO_REPO_ID_BYTES, body, len);
	return (m);
}

int
ccrypto_auth_sign(const struct ccrypto_keys *k, const char *ctx,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const void *body,
    size_t len, uint8_t sig[CCRYPTO_SIG_BYTES])
{
	uint8_t *m;
	size_t mlen;

	if (k->write_only || !k->auth_known) {
		log_error("internal error: only a full key signs as the "
		    "authority (%s)", ctx);
		return (-1);
	}
	if ((m = auth_message(ctx, repo_id, body, len, &mlen)) == NULL)
		return (-1);
	crypto_sign_detached(sig, NULL, m, mlen, k->auth_sk);
	free(m);
	return (0);
}

int
ccrypto_auth_verify(const struct ccrypto_keys *k, const char *ctx,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const void *body,
    size_t len, const uint8_t sig[CCRYPTO_SIG_BYTES])
{
	uint8_t *m;
	size_t mlen;
	int rc;

	if (!k->auth_known)
		return (CCRYPTO_AUTH_UNKNOWN);
	if ((m = auth_message(ctx, repo_id, body, len, &mlen)) == NULL)
		return (-1);
	rc = crypto_sign_verify_detached(sig, m, mlen, k->auth_pk) == 0 ? 0 :
	    -1;
	free(m);
	return (rc);
}

int
ccrypto_conf_sign(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const void *body,
    size_t len, uint8_t sig[CCRYPTO_SIG_BYTES])
{
	return (ccrypto_auth_sign(k, CCRYPTO_AUTH_CONF, repo_id, body, len,
	    sig));
}

int
ccrypto_conf_verify(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const void *body,
    size_t len, const uint8_t sig[CCRYPTO_SIG_BYTES])
{
	return (ccrypto_auth_verify(k, CCRYPTO_AUTH_CONF, repo_id, body, len,
	    sig));
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

/*
 * The key of a pack's index and view record (doc/format.md, "Packs"):
 * keyed BLAKE2b-256 of repository id | pack id under a subkey derived
 * from the id key.  Every key holds the id key, write-only ones too, so
 * every key reads every pack's index (which chunks are where: what
 * deduplication and export need), and whoever only writes the storage
 * does not.  Derived apart from chunk ids, so no chunk id is ever a key.
 */
#define INDEX_CONTEXT "cfindex1"

int
ccrypto_index_key(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const uint8_t pack_id[16],
    uint8_t *out)
{
	uint8_t base[CCRYPTO_KEY_BYTES], msg[CCRYPTO_REPO_ID_BYTES + 16];
	int rc;

	rc = crypto_kdf_derive_from_key(base, sizeof(base), 1, INDEX_CONTEXT,
	    k->id);
	if (rc == 0) {
		memcpy(msg, repo_id, CCRYPTO_REPO_ID_BYTES);
		memcpy(msg + CCRYPTO_REPO_ID_BYTES, pack_id, 16);
		blake2b(out, CCRYPTO_KEY_BYTES, msg, sizeof(msg), base,
		    sizeof(base));
	}
	sodium_memzero(base, sizeof(base));
	if (rc)
		log_error("cannot derive a pack's index key");
	return (rc ? -1 : 0);
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

int
ccrypto_equal(const void *a, const void *b, size_t n)
{
	return (sodium_memcmp(a, b, n) == 0);
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

static struct epoch *
epoch_find(const struct ccrypto_keys *k, uint32_t n)
{
	size_t i;

	for (i = 0; i < k->nepochs; i++)
		if (k->epochs[i].n == n)
			return ((struct epoch *)&k->epochs[i]);
	return (NULL);
}

/* The slot for epoch n (>= 2), made if new; NULL when the table is full. */
static struct epoch *
epoch_slot(struct ccrypto_keys *k, uint32_t n)
{
	struct epoch *e;
	size_t i;

	if ((e = epoch_find(k, n)) != NULL)
		return (e);
	if (k->nepochs == CCRYPTO_EPOCHS_MAX) {
		log_error("more than %d key epochs", CCRYPTO_EPOCHS_MAX);
		return (NULL);
	}
	for (i = k->nepochs; i > 0 && k->epochs[i - 1].n > n; i--)
		k->epochs[i] = k->epochs[i - 1];
	e = &k->epochs[i];
	memset(e, 0, sizeof(*e));
	e->n = n;
	k->nepochs++;
	return (e);
}

int
ccrypto_keys_set_epoch(struct ccrypto_keys *k, uint32_t n,
    const uint8_t pk[CCRYPTO_KEY_BYTES])
{
	struct epoch *e;

	if (n < 2 || n > CCRYPTO_EPOCH_MAX)
		return (-1);
	if ((e = epoch_find(k, n)) != NULL && (e->flags & EPOCH_PK) &&
	    sodium_memcmp(e->pk, pk, sizeof(e->pk)) != 0) {
		log_error("key epoch %u: the keyring's secret is not the "
		    "public key's in coffer.conf", (unsigned)n);
		return (-1);
	}
	if (e == NULL && (e = epoch_slot(k, n)) == NULL)
		return (-1);
	memcpy(e->pk, pk, sizeof(e->pk));
	e->flags |= EPOCH_PK | EPOCH_CONF;
	if (n > k->seal_epoch)
		k->seal_epoch = n;
	return (0);
}

uint32_t
ccrypto_keys_seal_epoch(const struct ccrypto_keys *k)
{
	return (k->seal_epoch);
}

int
ccrypto_keys_has_epoch(const struct ccrypto_keys *k, uint32_t n)
{
	const struct epoch *e;

	if (k->write_only)
		return (0);
	if (n == 1)
		return (k->box_held);
	return ((e = epoch_find(k, n)) != NULL && (e->flags & EPOCH_SK));
}

uint32_t
ccrypto_keys_max_epoch(const struct ccrypto_keys *k)
{
	return (k->nepochs > 0 ? k->epochs[k->nepochs - 1].n : 1);
}

int
ccrypto_epoch_generate(struct ccrypto_keys *k, uint32_t n,
    uint8_t pk[CCRYPTO_KEY_BYTES])
{
	struct epoch *e;

	if (k->write_only || n < 2 || n > CCRYPTO_EPOCH_MAX ||
	    epoch_find(k, n) != NULL) {
		log_error("cannot make key epoch %u", (unsigned)n);
		return (-1);
	}
	if ((e = epoch_slot(k, n)) == NULL)
		return (-1);
	crypto_box_keypair(e->pk, e->sk);
	e->flags = EPOCH_PK | EPOCH_SK;
	memcpy(pk, e->pk, sizeof(e->pk));
	return (0);
}

void
ccrypto_epoch_forget(struct ccrypto_keys *k, uint32_t n)
{
	struct epoch *e;

	if (n == 1) {
		sodium_memzero(k->box_sk, sizeof(k->box_sk));
		k->box_held = 0;
		return;
	}
	if ((e = epoch_find(k, n)) == NULL)
		return;
	sodium_memzero(e->sk, sizeof(e->sk));
	e->flags &= ~(uint32_t)EPOCH_SK;
}

/*
 * Keyring (doc/format.md, "Key epochs").  Version 1:
 *   "CFKR" | u8 1 | u8[3] zero | u64 generation | u32 nrecip |
 *   nrecip x (name[16] | X25519 public key[32] | crypto_box_seal(K)[80]) |
 *   nonce[24] | AEAD_K(u32 count | count x (u32 epoch | secret[32])) + tag |
 *   mac[32]
 * K is random, new at every write; associated data = every byte before the
 * ciphertext | repository id[16], so the recipients cannot be changed
 * without K.  mac = keyed BLAKE2b-256 (subkey 8, which every full key
 * holds and no write-only key does) of every byte before it | repository
 * id: whoever can only write the repository cannot forge a keyring that
 * lists a key of theirs, which the next rotation would seal to.
 */
#define KR_MAGIC "CFKR"
#define KR_VERSION 1
enum {
	KR_ENTRY = 4 + CCRYPTO_KEY_BYTES,
	KR_RECIP = CCRYPTO_RECIPIENT_NAME_MAX + CCRYPTO_KEY_BYTES +
	    CCRYPTO_SEALED_KEY_BYTES,
	KR_FIXED = 8 + 8 + 4,
	KR_MAC = CCRYPTO_MAC_BYTES,
};

/* The keyring's MAC over data[0..len) | repo_id. */
static void
keyring_mac(const struct ccrypto_keys *k, const uint8_t *data, size_t len,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], uint8_t out[KR_MAC])
{
	struct blake2b_state st;

	blake2b_init(&st, KR_MAC, k->ring_mac, sizeof(k->ring_mac));
	blake2b_update(&st, data, len);
	blake2b_update(&st, repo_id, CCRYPTO_REPO_ID_BYTES);
	blake2b_final(&st, out);
}

/* A recipient's name: 1 to 16 of [0-9a-z], NUL-padded in the keyring. */
static int
recipient_name_ok(const char *name, size_t len)
{
	size_t i;

	if (len == 0 || len > CCRYPTO_RECIPIENT_NAME_MAX)
		return (0);
	for (i = 0; i < len; i++)
		if (!((name[i] >= '0' && name[i] <= '9') ||
		    (name[i] >= 'a' && name[i] <= 'z')))
			return (0);
	return (1);
}

int
ccrypto_recipient_add(struct ccrypto_keys *k, const char *name,
    const uint8_t pk[CCRYPTO_KEY_BYTES])
{
	struct recipient *rc;
	size_t i;

	if (!recipient_name_ok(name, strlen(name))) {
		log_error("bad keyring recipient name '%s'", name);
		return (-1);
	}
	for (i = 0; i < k->nrecips; i++)
		if (strcmp(k->recips[i].name, name) == 0 &&
		    sodium_memcmp(k->recips[i].pk, pk, CCRYPTO_KEY_BYTES) == 0)
			return (0);
	if (k->nrecips >= CCRYPTO_RECIPIENTS_MAX) {
		log_error("the keyring lists %d keys, the most it holds: "
		    "remove one first", CCRYPTO_RECIPIENTS_MAX);
		return (-1);
	}
	rc = &k->recips[k->nrecips++];
	snprintf(rc->name, sizeof(rc->name), "%s", name);
	memcpy(rc->pk, pk, sizeof(rc->pk));
	return (0);
}

/*
 * Remove name's entries: all of them (pk NULL), those whose key is not pk
 * (others), or the one whose key is pk.  0, or 1 when none went.
 */
static int
recipient_drop(struct ccrypto_keys *k, const char *name, const uint8_t *pk,
    int others)
{
	size_t i, j;
	int found = 0, same;

	for (i = j = 0; i < k->nrecips; i++) {
		same = pk != NULL && sodium_memcmp(k->recips[i].pk, pk,
		    CCRYPTO_KEY_BYTES) == 0;
		if (strcmp(k->recips[i].name, name) == 0 &&
		    (pk == NULL || same != others)) {
			found = 1;
			continue;
		}
		k->recips[j++] = k->recips[i];
	}
	k->nrecips = j;
	return (found ? 0 : 1);
}

int
ccrypto_recipient_remove(struct ccrypto_keys *k, const char *name)
{
	return (recipient_drop(k, name, NULL, 0));
}

int
ccrypto_recipient_keep(struct ccrypto_keys *k, const char *name,
    const uint8_t pk[CCRYPTO_KEY_BYTES])
{
	return (recipient_drop(k, name, pk, 1));
}

int
ccrypto_recipient_forget(struct ccrypto_keys *k, const char *name,
    const uint8_t pk[CCRYPTO_KEY_BYTES])
{
	return (recipient_drop(k, name, pk, 0));
}

const char *
ccrypto_recipient_name(const struct ccrypto_keys *k, size_t i)
{
	return (i < k->nrecips ? k->recips[i].name : NULL);
}

const char *
ccrypto_recipient_self(const struct ccrypto_keys *k)
{
	size_t i;

	if (k->write_only)
		return (NULL);
	for (i = 0; i < k->nrecips; i++)
		if (sodium_memcmp(k->recips[i].pk, k->recip_pk,
		    CCRYPTO_KEY_BYTES) == 0)
			return (k->recips[i].name);
	return (NULL);
}

int
ccrypto_keyring_seal(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], uint64_t gen,
    struct buf *out)
{
	const struct recipient *all[CCRYPTO_RECIPIENTS_MAX];
	uint8_t *key = NULL, *plain = NULL, *ad = NULL, *p, *nonce;
	size_t i, nall = 0, count = 0, plen, head, start;
	int rc = -1;

	if (k->write_only) {
		log_error("a write-only key cannot write the keyring");
		return (-1);
	}
	for (i = 0; i < k->nrecips; i++)
		all[nall++] = &k->recips[i];
	if (nall == 0) {
		log_error("internal error: a keyring with no recipient");
		return (-1);
	}
	if (k->box_held)
		count++;
	for (i = 0; i < k->nepochs; i++)
		if (k->epochs[i].flags & EPOCH_SK)
			count++;
	plen = 4 + count * KR_ENTRY;
	head = KR_FIXED + nall * KR_RECIP + CCRYPTO_NONCE_BYTES;
	if ((key = ccrypto_secret_new(CCRYPTO_KEY_BYTES)) == NULL ||
	    (plain = ccrypto_secret_new(plen)) == NULL ||
	    buf_reserve(out, head + plen + CCRYPTO_TAG_BYTES + KR_MAC))
		goto out;
	put_u32(plain, (uint32_t)count);
	p = plain + 4;
	if (k->box_held) {
		put_u32(p, 1);
		memcpy(p + 4, k->box_sk, CCRYPTO_KEY_BYTES);
		p += KR_ENTRY;
	}
	for (i = 0; i < k->nepochs; i++) {
		if (!(k->epochs[i].flags & EPOCH_SK))
			continue;
		put_u32(p, k->epochs[i].n);
		memcpy(p + 4, k->epochs[i].sk, CCRYPTO_KEY_BYTES);
		p += KR_ENTRY;
	}
	randombytes_buf(key, CCRYPTO_KEY_BYTES);
	start = out->len;
	p = out->data + start;
	memcpy(p, KR_MAGIC, 4);
	p[4] = KR_VERSION;
	p[5] = p[6] = p[7] = 0;
	put_u64(p + 8, gen);
	put_u32(p + 16, (uint32_t)nall);
	p += KR_FIXED;
	for (i = 0; i < nall; i++, p += KR_RECIP) {
		memset(p, 0, CCRYPTO_RECIPIENT_NAME_MAX);
		memcpy(p, all[i]->name, strlen(all[i]->name));
		memcpy(p + CCRYPTO_RECIPIENT_NAME_MAX, all[i]->pk,
		    CCRYPTO_KEY_BYTES);
		/* Fails only for a low-order public key: ours are made by
		 * crypto_box_keypair, or checked when read. */
		if (crypto_box_seal(p + CCRYPTO_RECIPIENT_NAME_MAX +
		    CCRYPTO_KEY_BYTES, key, CCRYPTO_KEY_BYTES,
		    all[i]->pk) != 0) {
			log_error("keyring recipient '%s': its public key "
			    "does not seal", all[i]->name);
			goto out;
		}
	}
	nonce = p;
	randombytes_buf(nonce, CCRYPTO_NONCE_BYTES);
	if ((ad = malloc(head + CCRYPTO_REPO_ID_BYTES)) == NULL) {
		log_error("out of memory");
		goto out;
	}
	memcpy(ad, out->data + start, head);
	memcpy(ad + head, repo_id, CCRYPTO_REPO_ID_BYTES);
	crypto_aead_xchacha20poly1305_ietf_encrypt(out->data + start + head,
	    NULL, plain, plen, ad, head + CCRYPTO_REPO_ID_BYTES, NULL, nonce,
	    key);
	keyring_mac(k, out->data + start, head + plen + CCRYPTO_TAG_BYTES,
	    repo_id, out->data + start + head + plen + CCRYPTO_TAG_BYTES);
	out->len = start + head + plen + CCRYPTO_TAG_BYTES + KR_MAC;
	rc = 0;
out:
	free(ad);
	ccrypto_secret_free(plain);
	ccrypto_secret_free(key);
	return (rc);
}

/* The epoch secrets of a keyring's plaintext into k; 0 or -1 (reported). */
static int
keyring_load(struct ccrypto_keys *k, const uint8_t *plain, size_t plen)
{
	uint8_t pk[crypto_box_PUBLICKEYBYTES];
	struct epoch *e;
	size_t i, count;
	uint32_t n, prev = 0;

	count = get_u32(plain);
	if (count != (plen - 4) / KR_ENTRY || (plen - 4) % KR_ENTRY != 0) {
		log_error("the keyring is malformed");
		return (-1);
	}
	for (i = 0; i < count; i++) {
		const uint8_t *ent = plain + 4 + i * KR_ENTRY;

		n = get_u32(ent);
		if (n <= prev || n > CCRYPTO_EPOCH_MAX) {
			log_error("the keyring is malformed (epoch %u)",
			    (unsigned)n);
			return (-1);
		}
		prev = n;
		crypto_scalarmult_base(pk, ent + 4);
		if (n == 1) {
			if (sodium_memcmp(pk, k->box_pk, sizeof(pk)) != 0) {
				log_error("key epoch 1: the keyring's secret "
				    "is not this key's");
				return (-1);
			}
			memcpy(k->box_sk, ent + 4, CCRYPTO_KEY_BYTES);
			k->box_held = 1;
			continue;
		}
		if ((e = epoch_find(k, n)) != NULL && (e->flags & EPOCH_PK) &&
		    sodium_memcmp(e->pk, pk, sizeof(pk)) != 0) {
			log_error("key epoch %u: the keyring's secret is not "
			    "the public key's in coffer.conf", (unsigned)n);
			return (-1);
		}
		if (e == NULL && (e = epoch_slot(k, n)) == NULL)
			return (-1);
		memcpy(e->pk, pk, sizeof(pk));
		memcpy(e->sk, ent + 4, CCRYPTO_KEY_BYTES);
		e->flags |= EPOCH_PK | EPOCH_SK;
	}
	return (0);
}

/*
 * The recipient table of a keyring (len bytes) into recips;
 * *head: where its nonce ends.  0, or -1 when malformed.
 */
static int
keyring_recipients(const uint8_t *data, size_t len, struct recipient *recips,
    size_t *nrecips, size_t *head)
{
	const uint8_t *p;
	size_t i, j, n, nl;

	if (len < KR_FIXED || data[5] || data[6] || data[7])
		return (-1);
	n = get_u32(data + 16);
	if (n == 0 || n > CCRYPTO_RECIPIENTS_MAX || len < KR_FIXED +
	    n * KR_RECIP + CCRYPTO_NONCE_BYTES + 4 + CCRYPTO_TAG_BYTES + KR_MAC)
		return (-1);
	for (i = 0, p = data + KR_FIXED; i < n; i++, p += KR_RECIP) {
		nl = strnlen((const char *)p, CCRYPTO_RECIPIENT_NAME_MAX);
		if (!recipient_name_ok((const char *)p, nl))
			return (-1);
		for (j = nl; j < CCRYPTO_RECIPIENT_NAME_MAX; j++)
			if (p[j] != 0)
				return (-1);
		memcpy(recips[i].name, p, nl);
		recips[i].name[nl] = '\0';
		memcpy(recips[i].pk, p + CCRYPTO_RECIPIENT_NAME_MAX,
		    CCRYPTO_KEY_BYTES);
		/* A low-order point would make every later seal fail. */
		if (!ccrypto_pk_ok(recips[i].pk))
			return (-1);
	}
	*nrecips = n;
	*head = KR_FIXED + n * KR_RECIP + CCRYPTO_NONCE_BYTES;
	return (0);
}

int
ccrypto_keyring_names(const uint8_t *data, size_t len,
    char (*names)[CCRYPTO_RECIPIENT_NAME_MAX + 1], size_t max, size_t *n)
{
	struct recipient *v;
	size_t i, nr, head;

	*n = 0;
	if (len < 5 || memcmp(data, KR_MAGIC, 4) != 0)
		return (-1);
	if (data[4] != KR_VERSION || (v = calloc(CCRYPTO_RECIPIENTS_MAX,
	    sizeof(*v))) == NULL)
		return (-1);
	if (keyring_recipients(data, len, v, &nr, &head)) {
		free(v);
		return (-1);
	}
	for (i = 0; i < nr && i < max; i++)
		memcpy(names[i], v[i].name, sizeof(names[i]));
	*n = i;
	free(v);
	return (0);
}

void
ccrypto_keys_ring_reset(struct ccrypto_keys *k)
{
	sodium_memzero(k->epochs, sizeof(k->epochs));
	k->nepochs = 0;
	k->seal_epoch = 1;
	k->nrecips = 0;
	k->ring_gen = 0;
	/* A holder's epoch 1 comes from the keyring; a master key's is its
	 * own (and never forgotten: retiring epoch 1 refuses it). */
	if (k->kind == CCRYPTO_KEY_HOLDER) {
		sodium_memzero(k->box_sk, sizeof(k->box_sk));
		k->box_held = 0;
	}
}

uint64_t
ccrypto_keys_ring_gen(const struct ccrypto_keys *k)
{
	return (k->ring_gen);
}

int
ccrypto_keyring_line_mac(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], uint64_t gen,
    uint8_t out[CCRYPTO_MAC_BYTES])
{
	static const char ctx[] = "coffer-keyring-line";
	struct blake2b_state st;
	uint8_t g[8];

	if (k->write_only)
		return (-1);
	put_u64(g, gen);
	blake2b_init(&st, CCRYPTO_MAC_BYTES, k->ring_mac, sizeof(k->ring_mac));
	blake2b_update(&st, ctx, sizeof(ctx));
	blake2b_update(&st, repo_id, CCRYPTO_REPO_ID_BYTES);
	blake2b_update(&st, g, sizeof(g));
	blake2b_final(&st, out);
	return (0);
}

int
ccrypto_keyring_line_verify(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], uint64_t gen,
    const uint8_t mac[CCRYPTO_MAC_BYTES])
{
	uint8_t want[CCRYPTO_MAC_BYTES];

	if (ccrypto_keyring_line_mac(k, repo_id, gen, want))
		return (-1);
	return (sodium_memcmp(want, mac, sizeof(want)) == 0 ? 0 : -1);
}

uint32_t
ccrypto_keys_seal_held(struct ccrypto_keys *k)
{
	uint32_t listed = k->seal_epoch;
	size_t i;

	if (k->write_only)
		return (0);
	k->seal_epoch = 1;
	for (i = 0; i < k->nepochs; i++)
		if ((k->epochs[i].flags & (EPOCH_CONF | EPOCH_SK)) ==
		    (EPOCH_CONF | EPOCH_SK))
			k->seal_epoch = k->epochs[i].n;
	return (listed > k->seal_epoch ? listed : 0);
}

int
ccrypto_pk_ok(const uint8_t pk[CCRYPTO_KEY_BYTES])
{
	static const uint8_t scalar[crypto_scalarmult_SCALARBYTES] = { 9 };
	uint8_t q[crypto_scalarmult_BYTES];

	return (crypto_scalarmult(q, scalar, pk) == 0);
}

int
ccrypto_keyring_open(struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const uint8_t *data,
    size_t len, int secrets_only)
{
	struct recipient *v = NULL;
	uint8_t *key = NULL, *plain = NULL, *ad = NULL;
	uint8_t mac[KR_MAC];
	const uint8_t *ent;
	size_t plen, i, nr = 0, head;
	int rc = -1;

	if (k->write_only)
		return (-1);
	if (len < 5 || memcmp(data, KR_MAGIC, 4) != 0) {
		log_error("the keyring is malformed");
		return (-1);
	}
	if (data[4] != KR_VERSION) {
		log_error("the keyring has format %u; this coffer reads "
		    "format %d (upgrade coffer)", data[4], KR_VERSION);
		return (-1);
	}
	if ((v = calloc(CCRYPTO_RECIPIENTS_MAX, sizeof(*v))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	if (keyring_recipients(data, len, v, &nr, &head)) {
		log_error("the keyring is malformed");
		goto out;
	}
	keyring_mac(k, data, len - KR_MAC, repo_id, mac);
	if (sodium_memcmp(mac, data + len - KR_MAC, KR_MAC) != 0) {
		log_error("the keyring failed authentication (altered, or "
		    "another repository's)");
		goto out;
	}
	len -= KR_MAC;
	plen = len - head - CCRYPTO_TAG_BYTES;
	if ((key = ccrypto_secret_new(CCRYPTO_KEY_BYTES)) == NULL ||
	    (plain = ccrypto_secret_new(plen)) == NULL ||
	    (ad = malloc(head + CCRYPTO_REPO_ID_BYTES)) == NULL)
		goto out;
	memcpy(ad, data, head);
	memcpy(ad + head, repo_id, CCRYPTO_REPO_ID_BYTES);
	for (i = 0; i < nr; i++)
		if (sodium_memcmp(v[i].pk, k->recip_pk, CCRYPTO_KEY_BYTES) == 0)
			break;
	if (i == nr) {
		rc = CCRYPTO_NOT_LISTED;
		goto out;
	}
	ent = data + KR_FIXED + i * KR_RECIP + CCRYPTO_RECIPIENT_NAME_MAX +
	    CCRYPTO_KEY_BYTES;
	if (crypto_box_seal_open(key, ent, CCRYPTO_SEALED_KEY_BYTES,
	    k->recip_pk, k->recip_sk) != 0) {
		log_error("the keyring does not open with this key (damaged)");
		goto out;
	}
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(plain, NULL, NULL,
	    data + head, len - head, ad, head + CCRYPTO_REPO_ID_BYTES,
	    data + head - CCRYPTO_NONCE_BYTES, key) != 0) {
		log_error("the keyring does not open with this key (damaged, "
		    "or another repository's)");
		goto out;
	}
	if (keyring_load(k, plain, plen))
		goto out;
	/* Its recipients become k's (a bundle's keyring gives its secrets
	 * only: which keys open a repository is the repository's own). */
	if (!secrets_only) {
		k->nrecips = 0;
		for (i = 0; i < nr; i++)
			if (ccrypto_recipient_add(k, v[i].name, v[i].pk))
				goto out;
		k->ring_gen = get_u64(data + 8);
	}
	rc = 0;
out:
	free(ad);
	free(v);
	ccrypto_secret_free(plain);
	ccrypto_secret_free(key);
	return (rc);
}

uint32_t
ccrypto_pack_key_seal(const struct ccrypto_keys *k, const uint8_t *key,
    uint8_t out[CCRYPTO_SEALED_KEY_BYTES])
{
	const struct epoch *e = NULL;
	int rc;

	if (k->seal_epoch != 1)
		e = epoch_find(k, k->seal_epoch);
	/*
	 * Sealing fails only for a low-order public key, and ours come
	 * from crypto_box_seed_keypair or coffer.conf's MAC'd lines of
	 * crypto_box_keypair's: a failure is a bug, not bad input.
	 */
	rc = crypto_box_seal(out, key, CCRYPTO_KEY_BYTES,
	    e != NULL ? e->pk : k->box_pk);
	assert(rc == 0);
	(void)rc;
	return (e != NULL ? e->n : 1);
}

int
ccrypto_pack_key_unseal_epoch(const struct ccrypto_keys *k, uint32_t epoch,
    const uint8_t in[CCRYPTO_SEALED_KEY_BYTES], uint8_t *key)
{
	const struct epoch *e = NULL;

	if (k->write_only)
		return (-1);
	if (epoch == 1 && !k->box_held)
		return (CCRYPTO_NO_EPOCH);
	if (epoch != 1 && ((e = epoch_find(k, epoch)) == NULL ||
	    !(e->flags & EPOCH_SK)))
		return (CCRYPTO_NO_EPOCH);
	if (crypto_box_seal_open(key, in, CCRYPTO_SEALED_KEY_BYTES,
	    e != NULL ? e->pk : k->box_pk, e != NULL ? e->sk : k->box_sk) != 0)
		return (-1);
	return (0);
}

int
ccrypto_pack_key_unseal(const struct ccrypto_keys *k,
    const uint8_t in[CCRYPTO_SEALED_KEY_BYTES], uint8_t *key)
{
	return (ccrypto_pack_key_unseal_epoch(k, 1, in, key) == 0 ? 0 : -1);
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
