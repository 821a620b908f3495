#ifndef COFFER_CRYPTO_H
#define COFFER_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/buf.h"

/*
 * All of coffer's cryptography; the only libsodium user.  See doc/design.md
 * ("Crypto").  Secrets live in sodium_malloc'd memory and are wiped on free.
 * Its names are ccrypto_* and CCRYPTO_*: crypto_* is libsodium's.
 */

#define CCRYPTO_ID_BYTES 32	/* chunk id: keyed BLAKE2b-256 */
#define CCRYPTO_REPO_ID_BYTES 16
#define CCRYPTO_KEY_BYTES 32	/* master secret, subkeys, pack keys */
#define CCRYPTO_NONCE_BYTES 24	/* XChaCha20-Poly1305-IETF */
#define CCRYPTO_TAG_BYTES 16
#define CCRYPTO_SEALED_KEY_BYTES (CCRYPTO_KEY_BYTES + 48) /* box_SEALBYTES */
#define CCRYPTO_SIG_BYTES 64
#define CCRYPTO_MAC_BYTES 32

/* Key material of one repository, derived from its master secret. */
struct ccrypto_keys;

/* sodium_init(); 0 or -1.  Safe to call more than once. */
int ccrypto_init(void);

/* A fresh random master secret and its subkeys; NULL on ENOMEM. */
struct ccrypto_keys *ccrypto_keys_generate(void);
/* Keys derived from a given master secret (32 bytes). */
struct ccrypto_keys *ccrypto_keys_from_master(const uint8_t *master);
/* Wipe and free; NULL is fine. */
void ccrypto_keys_free(struct ccrypto_keys *k);

/*
 * Write-only keys (tarsnap's model): the id, chunker and meta subkeys, the
 * X25519 public key and the Ed25519 signing key; no master secret and no
 * X25519 secret key, so nothing that opens a pack.  With one, a host can
 * name chunks (and deduplicate), cut them, check coffer.conf, seal pack
 * keys and sign records; ccrypto_pack_key_unseal fails.
 * keys_write_only: 1 for such a key, 0 for a full one.  keys_writer: a
 * write-only copy of k (NULL on ENOMEM).  writer_parts: its material,
 * id | chunker | meta | box public key | Ed25519 seed (CCRYPTO_WRITER_BYTES),
 * as slots and key files store it; keys_from_writer: back (NULL on error).
 */
#define CCRYPTO_WRITER_BYTES (5 * CCRYPTO_KEY_BYTES)
int ccrypto_keys_write_only(const struct ccrypto_keys *k);
struct ccrypto_keys *ccrypto_keys_writer(const struct ccrypto_keys *k);
void ccrypto_keys_writer_parts(const struct ccrypto_keys *k,
    uint8_t out[CCRYPTO_WRITER_BYTES]);
struct ccrypto_keys *ccrypto_keys_from_writer(
    const uint8_t in[CCRYPTO_WRITER_BYTES]);

/*
 * The authority key: an Ed25519 pair that signs coffer.conf, which says
 * whom pack keys are sealed to (the key epochs) and which keyring is
 * current.  Full keys derive it from the keyring MAC key; a write-only
 * key holds only its public half, so it can check coffer.conf but never
 * make one.  wo_parts: a write-only key as slots of kind 2 and
 * write-only key files store it, the write-only material | the authority's public
 * key (CCRYPTO_WO_BYTES); keys_from_wo: back (NULL on error).
 * keys_auth_known: whether k can check coffer.conf's signature (0 for a
 * write-only key made from the material alone).
 * conf_sign: sign "coffer-conf\0" | repo_id | body with a full key (0, or
 * -1 reported); conf_verify: 0 when sig is the authority's,
 * CCRYPTO_AUTH_UNKNOWN when k has no authority key to check with, -1
 * otherwise (not reported).
 */
#define CCRYPTO_WO_BYTES (CCRYPTO_WRITER_BYTES + CCRYPTO_KEY_BYTES)
#define CCRYPTO_AUTH_UNKNOWN (-2)
void ccrypto_keys_wo_parts(const struct ccrypto_keys *k,
    uint8_t out[CCRYPTO_WO_BYTES]);
struct ccrypto_keys *ccrypto_keys_from_wo(const uint8_t in[CCRYPTO_WO_BYTES]);
int ccrypto_keys_auth_known(const struct ccrypto_keys *k);
int ccrypto_conf_sign(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const void *body,
    size_t len, uint8_t sig[CCRYPTO_SIG_BYTES]);
int ccrypto_conf_verify(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const void *body,
    size_t len, const uint8_t sig[CCRYPTO_SIG_BYTES]);

/*
 * The same signature over other decisions only full keys make (which
 * snapshots are forgotten, a snapshot rebased to stand on its own): ctx
 * names the kind of object ("coffer-conf" for coffer.conf), so that a
 * signature on one never passes for another.  auth_sign and auth_verify
 * return as conf_sign and conf_verify do.
 */
#define CCRYPTO_AUTH_CONF "coffer-conf"
int ccrypto_auth_sign(const struct ccrypto_keys *k, const char *ctx,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const void *body,
    size_t len, uint8_t sig[CCRYPTO_SIG_BYTES]);
int ccrypto_auth_verify(const struct ccrypto_keys *k, const char *ctx,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const void *body,
    size_t len, const uint8_t sig[CCRYPTO_SIG_BYTES]);

/*
 * Full keys ("holder" keys: slots of kind 3, full key files, paper keys)
 * hold the write-only material and a recipient secret of their own (an
 * X25519 secret), not the master secret: what opens packs is in the
 * keyring, whose key is sealed to every recipient's public key
 * (doc/format.md, "Key epochs").  Removing a recipient from the keyring
 * shuts that key out.  The master secret itself exists only while init
 * makes the first holder key; no file holds it.
 * keys_kind: CCRYPTO_KEY_MASTER, _WRITE_ONLY or _HOLDER.
 * keys_holder_new: a holder key over k's material with a new random
 * recipient (NULL on error).  holder_parts: its material, the write-only
 * material | keyring MAC key | recipient secret (CCRYPTO_HOLDER_BYTES:
 * the MAC key, subkey 8 of the master secret, is what every full key
 * shares and a write-only key lacks); keys_from_holder:
 * back.  keys_recipient_pk: its recipient public key (also a master key's,
 * derived), NULL for a write-only key.
 */
enum {
	CCRYPTO_KEY_MASTER = 1,
	CCRYPTO_KEY_WRITE_ONLY = 2,
	CCRYPTO_KEY_HOLDER = 3
};
#define CCRYPTO_HOLDER_BYTES (CCRYPTO_WRITER_BYTES + 2 * CCRYPTO_KEY_BYTES)
int ccrypto_keys_kind(const struct ccrypto_keys *k);
struct ccrypto_keys *ccrypto_keys_holder_new(const struct ccrypto_keys *k);
void ccrypto_keys_holder_parts(const struct ccrypto_keys *k,
    uint8_t out[CCRYPTO_HOLDER_BYTES]);
struct ccrypto_keys *ccrypto_keys_from_holder(
    const uint8_t in[CCRYPTO_HOLDER_BYTES]);
const uint8_t *ccrypto_keys_recipient_pk(const struct ccrypto_keys *k);

/*
 * The keyring's recipients, as k knows them (from the keyring it opened;
 * none before).  Names are at most CCRYPTO_RECIPIENT_NAME_MAX bytes: a
 * slot's name for a slot's, 16 hex digits for a key file's.
 * recipient_add: a new one, or a new public key for a name already
 * listed (a name may be listed with two keys while a slot's passphrase
 * changes; -1 when the table is full, reported); recipient_remove: every
 * entry of name, 0, or 1 when none is listed; recipient_keep: those of
 * name whose key is not pk; recipient_forget: the one whose key is pk.
 * recipient_name: the i-th name (NULL past the
 * end).
 */
#define CCRYPTO_RECIPIENTS_MAX 64
#define CCRYPTO_RECIPIENT_NAME_MAX 16
int ccrypto_recipient_add(struct ccrypto_keys *k, const char *name,
    const uint8_t pk[CCRYPTO_KEY_BYTES]);
int ccrypto_recipient_remove(struct ccrypto_keys *k, const char *name);
int ccrypto_recipient_keep(struct ccrypto_keys *k, const char *name,
    const uint8_t pk[CCRYPTO_KEY_BYTES]);
int ccrypto_recipient_forget(struct ccrypto_keys *k, const char *name,
    const uint8_t pk[CCRYPTO_KEY_BYTES]);
const char *ccrypto_recipient_name(const struct ccrypto_keys *k, size_t i);
/* The name the keyring lists k's own key under (a full key's), or NULL. */
const char *ccrypto_recipient_self(const struct ccrypto_keys *k);
/*
 * The recipients' names in a keyring's bytes, read without a key (for
 * listing: they are authenticated only when the keyring opens) into
 * names[0..max); *n how many.  0, or -1 when malformed (not
 * reported).
 */
int ccrypto_keyring_names(const uint8_t *data, size_t len,
    char (*names)[CCRYPTO_RECIPIENT_NAME_MAX + 1], size_t max, size_t *n);

/* Subkeys, for the modules that need them (read-only, 32 bytes each). */
const uint8_t *ccrypto_keys_chunker_key(const struct ccrypto_keys *k);

/* Chunk id: keyed BLAKE2b-256 (key = the "id" subkey) of data. */
void ccrypto_chunk_id(const struct ccrypto_keys *k, const void *data,
    size_t len, uint8_t out[CCRYPTO_ID_BYTES]);
/*
 * The ids of n chunks (data[i], len[i]) into out[i]: the same as n calls,
 * about three times faster on a processor with AVX-512, which hashes
 * eight chunks at once; best with eight or more of similar lengths.
 */
void ccrypto_chunk_ids(const struct ccrypto_keys *k, size_t n,
    const uint8_t *const *data, const size_t *len,
    uint8_t (*out)[CCRYPTO_ID_BYTES]);

/*
 * The key (CCRYPTO_KEY_BYTES, into secret memory) that a pack's index and
 * view record are sealed under: every key, write-only ones too, derives
 * it from the id subkey, the repository id and the pack id.  0 or -1.
 */
int ccrypto_index_key(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const uint8_t pack_id[16],
    uint8_t *out);

/* Incremental keyed hash under the id subkey (content ids of files). */
struct ccrypto_hash_state {
	unsigned char opaque[384] __attribute__((aligned(64)));
};
void ccrypto_hash_init(const struct ccrypto_keys *k,
    struct ccrypto_hash_state *s);
void ccrypto_hash_update(struct ccrypto_hash_state *s, const void *p,
    size_t n);
void ccrypto_hash_final(struct ccrypto_hash_state *s, uint8_t out[32]);

/* 1 if the n bytes at a and b are equal, compared in constant time (MACs). */
int ccrypto_equal(const void *a, const void *b, size_t n);

/* Unkeyed BLAKE2b-256, for naming files by content (pack hashes). */
void ccrypto_plain_hash(const void *data, size_t len, uint8_t out[32]);
/*
 * Incremental unkeyed BLAKE2b of outlen bytes (16 to 64): whole-file
 * hashes that anyone can check without a key (b2sum's default length is
 * 64).  libsodium's, whose compression function uses the processor's
 * vector units: export hashes every byte it copies, twice.
 */
struct ccrypto_plain_state {
	unsigned char opaque[512] __attribute__((aligned(64)));
	size_t outlen;
};
void ccrypto_plain_hash_init(struct ccrypto_plain_state *s, size_t outlen);
void ccrypto_plain_hash_update(struct ccrypto_plain_state *s, const void *p,
    size_t n);
void ccrypto_plain_hash_final(struct ccrypto_plain_state *s, uint8_t *out);

/* MAC (keyed BLAKE2b-256 under the "meta" subkey) over coffer.conf. */
void ccrypto_meta_mac(const struct ccrypto_keys *k, const void *data,
    size_t len, uint8_t out[CCRYPTO_MAC_BYTES]);
/* 0 if mac matches (constant time), -1 if not. */
int ccrypto_meta_mac_verify(const struct ccrypto_keys *k, const void *data,
    size_t len, const uint8_t mac[CCRYPTO_MAC_BYTES]);

/* Fill buf with n random bytes. */
void ccrypto_random(void *buf, size_t n);

/*
 * Per-pack keys.  A pack key is random, lives in sodium_malloc'd memory
 * (ccrypto_secret_new / ccrypto_secret_free), and is stored in the pack header
 * sealed to the repository's X25519 public key of the seal epoch
 * (crypto_box_seal), so writing needs no secret that can read.
 */
uint8_t *ccrypto_secret_new(size_t n);	/* sodium_malloc; NULL on ENOMEM */
void ccrypto_secret_free(uint8_t *p);	/* sodium_free; NULL is fine */
uint32_t ccrypto_pack_key_seal(const struct ccrypto_keys *k,
    const uint8_t *key, uint8_t out[CCRYPTO_SEALED_KEY_BYTES]);
/* 0, or -1 when the sealed key does not open (damaged or foreign pack). */
int ccrypto_pack_key_unseal(const struct ccrypto_keys *k,
    const uint8_t in[CCRYPTO_SEALED_KEY_BYTES], uint8_t *key);

/*
 * Key epochs (coffer key rotate; doc/format.md, "Key epochs").  Only the
 * X25519 pair that pack keys are sealed to rotates: epoch 1 is the pair
 * derived from the master secret, each later epoch a random pair whose
 * public key coffer.conf lists and whose secret the keyring holds.  The
 * id, chunker, meta and signing keys stay for the repository's life.
 * ccrypto_pack_key_seal seals to the seal epoch (the highest that
 * coffer.conf lists; 1 before any) and returns its number.
 * pack_key_unseal_epoch: 0, -1 (does not open: damaged, or a write-only
 * key), or CCRYPTO_NO_EPOCH (this key holds no secret of that epoch).
 * set_epoch: epoch n's public key, from coffer.conf (n >= 2); -1 when the
 * keyring's secret for it does not match (reported).  has_epoch: whether
 * its secret is held.  max_epoch: the highest known, from coffer.conf or
 * the keyring.  epoch_generate: a new random pair for epoch n, its public
 * key to pk (0 or -1, reported).  epoch_forget: wipe epoch n's secret.
 * keyring_seal appends the keyring (every held secret, epoch 1's too,
 * under a new random key sealed to every recipient) of generation gen to
 * out; keyring_open reads one (untrusted) into k: its secrets and, unless
 * secrets_only, its recipients (in place of k's) and generation.  Both
 * need a full key; 0 or -1 (reported); keyring_open returns
 * CCRYPTO_NOT_LISTED (not reported) when k is not among its recipients.  Epoch 1's secret is derived from
 * the master secret and, for a holder key, read from the keyring; once
 * forgotten (retired) it is sealed no more.
 */
#define CCRYPTO_EPOCHS_MAX 64
#define CCRYPTO_EPOCH_MAX 0xffffff	/* a pack header holds a u24 */
#define CCRYPTO_NO_EPOCH (-2)
#define CCRYPTO_NOT_LISTED (-3)
int ccrypto_pack_key_unseal_epoch(const struct ccrypto_keys *k,
    uint32_t epoch, const uint8_t in[CCRYPTO_SEALED_KEY_BYTES],
    uint8_t *key);
int ccrypto_keys_set_epoch(struct ccrypto_keys *k, uint32_t n,
    const uint8_t pk[CCRYPTO_KEY_BYTES]);
uint32_t ccrypto_keys_seal_epoch(const struct ccrypto_keys *k);
int ccrypto_keys_has_epoch(const struct ccrypto_keys *k, uint32_t n);
uint32_t ccrypto_keys_max_epoch(const struct ccrypto_keys *k);
int ccrypto_epoch_generate(struct ccrypto_keys *k, uint32_t n,
    uint8_t pk[CCRYPTO_KEY_BYTES]);
void ccrypto_epoch_forget(struct ccrypto_keys *k, uint32_t n);
int ccrypto_keyring_seal(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], uint64_t gen,
    struct buf *out);
int ccrypto_keyring_open(struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const uint8_t *data,
    size_t len, int secrets_only);
/*
 * keys_ring_reset: forget what a keyring gave k (epochs, their secrets, a
 * holder's epoch 1, the recipients), before reading it again.
 * keys_ring_gen: the generation of the keyring k opened (0: none).
 */
void ccrypto_keys_ring_reset(struct ccrypto_keys *k);
uint64_t ccrypto_keys_ring_gen(const struct ccrypto_keys *k);
/*
 * keyring_line_mac: the MAC of coffer.conf's "keyring GEN" line (keyed
 * BLAKE2b-256 under the ring key, which write-only keys lack); -1 for a
 * write-only key.  keys_seal_held: a full key seals only to an epoch whose
 * secret it holds: the newest such (coffer.conf may list a later one that
 * a write-only key wrote, since it can make coffer.conf's MAC); returns
 * the epoch coffer.conf lists above it, or 0.  pk_ok: whether an X25519
 * public key is of full order (a low-order one would seal to nothing).
 */
int ccrypto_keyring_line_mac(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], uint64_t gen,
    uint8_t out[CCRYPTO_MAC_BYTES]);
/* 0 when mac is that line's (constant time), else -1 (not reported). */
int ccrypto_keyring_line_verify(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], uint64_t gen,
    const uint8_t mac[CCRYPTO_MAC_BYTES]);
uint32_t ccrypto_keys_seal_held(struct ccrypto_keys *k);
int ccrypto_pk_ok(const uint8_t pk[CCRYPTO_KEY_BYTES]);

/*
 * XChaCha20-Poly1305-IETF.  encrypt: a fresh random nonce is written to
 * nonce; out receives plen + CCRYPTO_TAG_BYTES bytes.  decrypt: out receives
 * ctlen - CCRYPTO_TAG_BYTES bytes; returns -1 if the tag does not verify
 * (no error is printed: the caller knows what was damaged).
 */
void ccrypto_aead_encrypt(const uint8_t *key,
    uint8_t nonce[CCRYPTO_NONCE_BYTES], const void *ad, size_t adlen,
    const void *plain, size_t plen, uint8_t *out);
int ccrypto_aead_decrypt(const uint8_t *key,
    const uint8_t nonce[CCRYPTO_NONCE_BYTES], const void *ad, size_t adlen,
    const uint8_t *ct, size_t ctlen, uint8_t *out);
/* Whose code computes it: "openssl" or "libsodium" (src/crypto/aead.c). */
const char *ccrypto_aead_impl(void);

/*
 * Ed25519 signatures with the repository's signing key.
 */
void ccrypto_sign(const struct ccrypto_keys *k, const void *msg, size_t len,
    uint8_t sig[CCRYPTO_SIG_BYTES]);
/* 0 if valid under the public key inside k, else -1 (no message). */
int ccrypto_verify(const struct ccrypto_keys *k, const void *msg, size_t len,
    const uint8_t sig[CCRYPTO_SIG_BYTES]);

/*
 * Key slots (files in REPO/keys/), format 1.  A passphrase slot is a
 * holder key (kind 3), or a write-only key's material when k is
 * write-only (kind 2; the master secret is refused), encrypted under an Argon2id key (crypto_pwhash), with its parameters,
 * salt and the repository id bound in:
 *   "CFKS" | version | kind | opslimit u64 | memlimit u64 | salt[16] |
 *   nonce[24] | ciphertext(payload) + tag
 * memlimit 0 means the default (64 MiB, 3 passes).  A memlimit above what
 * ccrypto_slot_unwrap accepts on this host is refused.
 * Returns 0 and appends the slot to out, or -1 (reported).
 */
int ccrypto_slot_wrap(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const char *pass,
    size_t passlen, uint64_t memlimit, struct buf *out);

/* Why ccrypto_slot_unwrap returned NULL (*wrong / *why). */
enum {
	CCRYPTO_SLOT_DAMAGED = 0,	/* malformed (reported) */
	CCRYPTO_SLOT_WRONG = 1,		/* the passphrase does not open it */
	CCRYPTO_SLOT_REFUSED = 2	/* costs more than this host allows */
};

/*
 * Open a passphrase slot read from the repository file name ("keys/ab12",
 * for messages; NULL says just "key slot").  Returns the keys, or NULL
 * with *why set:
 *   CCRYPTO_SLOT_WRONG: well-formed, but the passphrase does not open it
 *     (nor would a damaged salt, nonce or ciphertext, nor another
 *     repository's slot: the tag cannot tell them apart); not reported;
 *   CCRYPTO_SLOT_REFUSED: its Argon2id parameters exceed this host's
 *     limits (4 passes, and 1 GiB unless COFFER_KDF_MAX_MEMORY gives
 *     another number of MiB, up to 4096), so it was not tried; reported,
 *     naming the slot, the cost and the limit;
 *   CCRYPTO_SLOT_DAMAGED: malformed, or anything else (reported).
 * The limits are checked before Argon2id runs: a forged slot costs no
 * more than one the host accepts.
 */
struct ccrypto_keys *ccrypto_slot_unwrap_named(const char *name,
    const uint8_t *slot, size_t len,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const char *pass,
    size_t passlen, int *why);
/* The same with name NULL (*wrong is the *why above). */
struct ccrypto_keys *ccrypto_slot_unwrap(const uint8_t *slot, size_t len,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const char *pass,
    size_t passlen, int *wrong);

/* What a slot's header says, readable without its passphrase. */
enum {
	/* 1 is no kind: refused, as any other unknown one */
	CCRYPTO_SLOT_WRITE_ONLY = 2,	/* wraps a write-only key */
	CCRYPTO_SLOT_HOLDER = 3		/* wraps a holder key (full) */
};
struct ccrypto_slot_info {
	int kind;			/* CCRYPTO_SLOT_* */
	uint64_t opslimit, memlimit;	/* its Argon2id cost */
};
/*
 * The kind and cost of a slot (name as for ccrypto_slot_unwrap_named).
 * 0, or -1 when it is not a slot this coffer reads (reported).
 */
int ccrypto_slot_info(const char *name, const uint8_t *slot, size_t len,
    struct ccrypto_slot_info *info);

/*
 * A raw key file for unattended runs, format 1: a text line
 *   "coffer-key 1 <repo id hex> <holder material hex>\n", or for a
 *   write-only key "coffer-key 1 write-only <repo id hex> <material hex>\n"
 * (never the master secret: refused)
 * keyfile_encode appends it to out.  keyfile_decode parses untrusted text;
 * returns the keys and the repo id, or NULL (reported).
 */
int ccrypto_keyfile_encode(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], struct buf *out);
struct ccrypto_keys *ccrypto_keyfile_decode(const uint8_t *data, size_t len,
    uint8_t repo_id[CCRYPTO_REPO_ID_BYTES]);

/*
 * The paper key (doc/format.md), format 1: the repository id and a holder
 * key as numbered lines of hex in groups of four, each ending in a checksum of
 * its own, then a check of the whole.  paper_encode appends the text to out
 * (-1, reported, for a write-only key or the master secret).  paper_is: whether text looks like
 * one (its "coffer paper key" line).  paper_decode parses untrusted text,
 * blanks, dashes and either case allowed; the keys and the repository id,
 * or NULL with the line at fault named ("paper key, line 03: its checksum
 * does not match").
 */
int ccrypto_paper_encode(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], struct buf *out);
int ccrypto_paper_is(const uint8_t *text, size_t len);
struct ccrypto_keys *ccrypto_paper_decode(const uint8_t *text, size_t len,
    uint8_t repo_id[CCRYPTO_REPO_ID_BYTES]);

#endif
