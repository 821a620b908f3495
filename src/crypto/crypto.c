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
	SUBKEY_KEYRING = 6,
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
	/* Epochs from 2 on, in increasing order; pack keys are sealed to
	 * seal_epoch (1: box_pk). */
	struct epoch epochs[CCRYPTO_EPOCHS_MAX];
	size_t nepochs;
	uint32_t seal_epoch;
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
	k->seal_epoch = 1;
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
	for (w->nepochs = 0; w->nepochs < k->nepochs; w->nepochs++) {
		w->epochs[w->nepochs] = k->epochs[w->nepochs];
		w->epochs[w->nepochs].flags &= ~(uint32_t)EPOCH_SK;
		sodium_memzero(w->epochs[w->nepochs].sk,
		    sizeof(w->epochs[w->nepochs].sk));
	}
	w->seal_epoch = k->seal_epoch;
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
		return (1);
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

	if ((e = epoch_find(k, n)) == NULL)
		return;
	sodium_memzero(e->sk, sizeof(e->sk));
	e->flags &= ~(uint32_t)EPOCH_SK;
}

/*
 * Keyring, version 1:
 *   "CFKR" | u8 version | u8[3] zero | nonce[24] |
 *   AEAD(u32 count | count x (u32 epoch | X25519 secret key[32])) + tag
 * under subkey 6 of the master secret; associated data = the 32 header
 * bytes | repository id[16].
 */
#define KR_MAGIC "CFKR"
#define KR_VERSION 1
enum {
	KR_HEADER = 8 + CCRYPTO_NONCE_BYTES,
	KR_ENTRY = 4 + CCRYPTO_KEY_BYTES,
};

static int
keyring_key(const struct ccrypto_keys *k, uint8_t *key)
{
	if (k->write_only || crypto_kdf_derive_from_key(key,
	    CCRYPTO_KEY_BYTES, SUBKEY_KEYRING, KDF_CONTEXT, k->master)) {
		log_error("cannot derive the keyring key");
		return (-1);
	}
	return (0);
}

int
ccrypto_keyring_seal(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], struct buf *out)
{
	uint8_t ad[KR_HEADER + CCRYPTO_REPO_ID_BYTES];
	uint8_t *key, *plain;
	size_t i, count = 0, plen;

	for (i = 0; i < k->nepochs; i++)
		if (k->epochs[i].flags & EPOCH_SK)
			count++;
	plen = 4 + count * KR_ENTRY;
	if ((key = ccrypto_secret_new(CCRYPTO_KEY_BYTES)) == NULL)
		return (-1);
	if ((plain = ccrypto_secret_new(plen)) == NULL) {
		ccrypto_secret_free(key);
		return (-1);
	}
	put_u32(plain, (uint32_t)count);
	for (i = 0, count = 0; i < k->nepochs; i++) {
		if (!(k->epochs[i].flags & EPOCH_SK))
			continue;
		put_u32(plain + 4 + count * KR_ENTRY, k->epochs[i].n);
		memcpy(plain + 4 + count * KR_ENTRY + 4, k->epochs[i].sk,
		    CCRYPTO_KEY_BYTES);
		count++;
	}
	memcpy(ad, KR_MAGIC, 4);
	ad[4] = KR_VERSION;
	ad[5] = ad[6] = ad[7] = 0;
	randombytes_buf(ad + 8, CCRYPTO_NONCE_BYTES);
	memcpy(ad + KR_HEADER, repo_id, CCRYPTO_REPO_ID_BYTES);
	if (keyring_key(k, key) || buf_reserve(out, KR_HEADER + plen +
	    CCRYPTO_TAG_BYTES)) {
		ccrypto_secret_free(plain);
		ccrypto_secret_free(key);
		return (-1);
	}
	memcpy(out->data + out->len, ad, KR_HEADER);
	crypto_aead_xchacha20poly1305_ietf_encrypt(out->data + out->len +
	    KR_HEADER, NULL, plain, plen, ad, sizeof(ad), NULL, ad + 8, key);
	out->len += KR_HEADER + plen + CCRYPTO_TAG_BYTES;
	ccrypto_secret_free(plain);
	ccrypto_secret_free(key);
	return (0);
}

int
ccrypto_keyring_open(struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const uint8_t *data,
    size_t len)
{
	uint8_t ad[KR_HEADER + CCRYPTO_REPO_ID_BYTES];
	uint8_t pk[crypto_box_PUBLICKEYBYTES];
	uint8_t *key = NULL, *plain = NULL;
	struct epoch *e;
	size_t plen, i, count;
	uint32_t n, prev = 1;
	int rc = -1;

	if (len < 4 || memcmp(data, KR_MAGIC, 4) != 0 || len < 5) {
		log_error("the keyring is malformed");
		return (-1);
	}
	if (data[4] != KR_VERSION) {
		log_error("the keyring has version %u; this coffer reads "
		    "version %d (upgrade coffer)", data[4], KR_VERSION);
		return (-1);
	}
	if (len < KR_HEADER + 4 + CCRYPTO_TAG_BYTES ||
	    (len - KR_HEADER - 4 - CCRYPTO_TAG_BYTES) % KR_ENTRY != 0 ||
	    data[5] || data[6] || data[7]) {
		log_error("the keyring is malformed");
		return (-1);
	}
	plen = len - KR_HEADER - CCRYPTO_TAG_BYTES;
	memcpy(ad, data, KR_HEADER);
	memcpy(ad + KR_HEADER, repo_id, CCRYPTO_REPO_ID_BYTES);
	if ((key = ccrypto_secret_new(CCRYPTO_KEY_BYTES)) == NULL ||
	    (plain = ccrypto_secret_new(plen)) == NULL || keyring_key(k, key))
		goto out;
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(plain, NULL, NULL,
	    data + KR_HEADER, len - KR_HEADER, ad, sizeof(ad), data + 8,
	    key) != 0) {
		log_error("the keyring does not open with this key (damaged, "
		    "or another repository's)");
		goto out;
	}
	count = get_u32(plain);
	if (count != (plen - 4) / KR_ENTRY) {
		log_error("the keyring is malformed");
		goto out;
	}
	for (i = 0; i < count; i++) {
		const uint8_t *ent = plain + 4 + i * KR_ENTRY;

		n = get_u32(ent);
		if (n <= prev || n > CCRYPTO_EPOCH_MAX) {
			log_error("the keyring is malformed (epoch %u)",
			    (unsigned)n);
			goto out;
		}
		prev = n;
		crypto_scalarmult_base(pk, ent + 4);
		if ((e = epoch_find(k, n)) != NULL && (e->flags & EPOCH_PK) &&
		    sodium_memcmp(e->pk, pk, sizeof(pk)) != 0) {
			log_error("key epoch %u: the keyring's secret is not "
			    "the public key's in coffer.conf", (unsigned)n);
			goto out;
		}
		if (e == NULL && (e = epoch_slot(k, n)) == NULL)
			goto out;
		memcpy(e->pk, pk, sizeof(pk));
		memcpy(e->sk, ent + 4, CCRYPTO_KEY_BYTES);
		e->flags |= EPOCH_PK | EPOCH_SK;
	}
	rc = 0;
out:
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
