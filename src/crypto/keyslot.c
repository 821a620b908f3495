#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "coffer/buf.h"
#include "coffer/crypto.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/tuning.h"
#include "crypto-int.h"

/*
 * Passphrase slot, format 1:
 *   "CFKS" | u8 version | u8 kind | u64 opslimit | u64 memlimit |
 *   salt[16] | nonce[24] | XChaCha20-Poly1305(payload) + tag
 * The AEAD's associated data is the header (magic..nonce) followed by the
 * repository id, so neither the KDF parameters nor the repository a slot
 * belongs to can be changed without the slot failing to open.
 */
#define SLOT_MAGIC "CFKS"
#define SLOT_VERSION 1
/*
 * Kind 2 (write-only): the payload is u8 2 | id | chunker | meta | box
 * public key | Ed25519 seed | authority public key.  Kind 3 (a full key
 * that reads through the keyring): u8 3 | kind 2's first 160 bytes | ring
 * key | recipient secret.  Another kind is refused ("unsupported kind 1")
 * and the next slot tried: it is never misread.
 */
#define SLOT_KIND_WRITE_ONLY CCRYPTO_SLOT_WRITE_ONLY
#define SLOT_KIND_HOLDER CCRYPTO_SLOT_HOLDER

enum {
	OFF_MAGIC = 0,
	OFF_VERSION = 4,
	OFF_KIND = 5,
	OFF_OPSLIMIT = 6,
	OFF_MEMLIMIT = 14,
	OFF_SALT = 22,
	OFF_NONCE = OFF_SALT + crypto_pwhash_SALTBYTES,
	SLOT_HEADER_BYTES = OFF_NONCE + CCRYPTO_NONCE_BYTES,
	SLOT_AD_BYTES = SLOT_HEADER_BYTES + CCRYPTO_REPO_ID_BYTES,
	WO_PAYLOAD_BYTES = 1 + CCRYPTO_WO_BYTES,
	HOLDER_PAYLOAD_BYTES = 1 + CCRYPTO_HOLDER_BYTES,
};

/* The payload and whole lengths of a slot of kind. */
static size_t
payload_bytes(int kind)
{
	return (kind == SLOT_KIND_HOLDER ? HOLDER_PAYLOAD_BYTES :
	    WO_PAYLOAD_BYTES);
}

static int
kind_known(int kind)
{
	return (kind == SLOT_KIND_WRITE_ONLY || kind == SLOT_KIND_HOLDER);
}

static size_t
slot_bytes(int kind)
{
	return (SLOT_HEADER_BYTES + payload_bytes(kind) + CCRYPTO_TAG_BYTES);
}

_Static_assert(crypto_pwhash_SALTBYTES == 16, "slot salt is 16 bytes");
_Static_assert(SLOT_HEADER_BYTES == 62, "slot header layout");

#define SLOT_OPSLIMIT_DEFAULT 3
#define SLOT_MEMLIMIT_DEFAULT (64ULL << 20)

/*
 * The range of the format: a slot outside it is malformed.  Argon2id
 * itself would take up to 4 TiB and 2^32 passes.
 */
#define SLOT_OPSLIMIT_MIN 1
#define SLOT_OPSLIMIT_MAX 100
#define SLOT_MEMLIMIT_MIN (8ULL << 10)
#define SLOT_MEMLIMIT_MAX (4ULL << 30)

_Static_assert(SLOT_OPSLIMIT_MIN >= crypto_pwhash_argon2id_OPSLIMIT_MIN &&
    SLOT_MEMLIMIT_MIN >= crypto_pwhash_argon2id_MEMLIMIT_MIN,
    "slot bounds below what Argon2id accepts");

/*
 * What this host agrees to spend on one slot.  The parameters come from
 * the slot, read from a repository we do not trust, and Argon2id must run
 * before the tag can reject a forged slot: at the format's ceiling (4 GiB,
 * 100 passes) each forged slot would cost minutes.  coffer writes 3 passes
 * and 64 MiB unless --kdf-memory asks for more; libsodium's costliest
 * preset (SENSITIVE) is 4 passes of 1 GiB, a few seconds.  So 4 passes, and
 * 1 GiB of memory unless COFFER_KDF_MAX_MEMORY (MiB, up to the format's
 * 4096) raises it: a slot made with --kdf-memory above 1024 needs it on
 * every host that opens the repository, and wrap refuses to make a slot
 * that this host would refuse to open.
 */
#define SLOT_LOCAL_OPSLIMIT_MAX 4
#define SLOT_LOCAL_MEMLIMIT_MAX (1ULL << 30)
#define KDF_MAX_MEMORY_ENV "COFFER_KDF_MAX_MEMORY"

_Static_assert(SLOT_LOCAL_OPSLIMIT_MAX >= SLOT_OPSLIMIT_DEFAULT &&
    SLOT_LOCAL_MEMLIMIT_MAX >= SLOT_MEMLIMIT_DEFAULT,
    "the local limits refuse the slots coffer writes by default");

/*
 * Key files, format 1: a full (holder) key "coffer-key 1 <repo id hex>
 * <material hex>\n", a write-only key "coffer-key 1 write-only <repo id
 * hex> <material hex>\n".
 */
#define KF_PREFIX "coffer-key "
#define KF_FULL "1 "
#define KF_WO "1 write-only "
enum {
	KF_OFF_VERSION = sizeof(KF_PREFIX) - 1,
	KF_REPO_HEX = 2 * CCRYPTO_REPO_ID_BYTES,
	/* The longest line: a full key's (without its newline). */
	KF_MAX = KF_OFF_VERSION + sizeof(KF_FULL) - 1 + KF_REPO_HEX + 1 +
	    2 * CCRYPTO_HOLDER_BYTES,
};

static uint64_t
memlimit_max(void)
{
	/* Argon2id's own ceiling is lower on 32-bit hosts. */
	if ((uint64_t)crypto_pwhash_argon2id_MEMLIMIT_MAX < SLOT_MEMLIMIT_MAX)
		return ((uint64_t)crypto_pwhash_argon2id_MEMLIMIT_MAX);
	return (SLOT_MEMLIMIT_MAX);
}

/*
 * The memory this host lets Argon2id use: COFFER_KDF_MAX_MEMORY MiB, else
 * SLOT_LOCAL_MEMLIMIT_MAX.  0 when the variable is malformed (reported).
 */
static uint64_t
local_memlimit(void)
{
	const char *env = tuning_get()->kdf_max_memory;
	unsigned long long mib;
	char *end;

	if (env == NULL)
		return (SLOT_LOCAL_MEMLIMIT_MAX);
	errno = 0;
	mib = strtoull(env, &end, 10);
	if (errno || end == env || *end != '\0' || env[0] == '-' ||
	    mib < 8 || mib > memlimit_max() >> 20) {
		log_error(KDF_MAX_MEMORY_ENV " must be a number of MiB from 8 "
		    "to %llu, not '%s'", (unsigned long long)(memlimit_max() >>
		    20), env);
		return (0);
	}
	return ((uint64_t)mib << 20);
}

static int
slot_kdf(uint8_t *key, const char *pass, size_t passlen, const uint8_t *salt,
    uint64_t opslimit, uint64_t memlimit)
{
	if (pass == NULL)
		pass = "";
	if (crypto_pwhash(key, CCRYPTO_KEY_BYTES, pass, passlen, salt,
	    (unsigned long long)opslimit, (size_t)memlimit,
	    crypto_pwhash_ALG_ARGON2ID13) != 0) {
		log_errno("cannot derive a key from the passphrase "
		    "(argon2id, %llu KiB)", (unsigned long long)memlimit >> 10);
		return (-1);
	}
	return (0);
}

int
ccrypto_slot_wrap(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const char *pass,
    size_t passlen, uint64_t memlimit, struct buf *out)
{
	const uint64_t opslimit = SLOT_OPSLIMIT_DEFAULT;
	uint64_t local;
	uint8_t ad[SLOT_AD_BYTES];
	uint8_t *wkey, *payload;
	const int kind = ccrypto_keys_kind(k) == CCRYPTO_KEY_HOLDER ?
	    SLOT_KIND_HOLDER : SLOT_KIND_WRITE_ONLY;
	const size_t plen = payload_bytes(kind), slen = slot_bytes(kind);

	/* The master secret is kept nowhere (doc/format.md). */
	if (ccrypto_keys_kind(k) == CCRYPTO_KEY_MASTER) {
		log_error("internal error: a slot for the master secret");
		goto err0;
	}
	if (memlimit == 0)
		memlimit = SLOT_MEMLIMIT_DEFAULT;
	if (memlimit < SLOT_MEMLIMIT_MIN || memlimit > memlimit_max()) {
		log_error("key slot memory limit %llu out of range "
		    "(%llu..%llu bytes)", (unsigned long long)memlimit,
		    SLOT_MEMLIMIT_MIN, (unsigned long long)memlimit_max());
		goto err0;
	}
	/* A slot this host would refuse to open is no use. */
	if ((local = local_memlimit()) == 0)
		goto err0;
	if (memlimit > local) {
		log_error("key slot: Argon2id memory %llu MiB exceeds the local "
		    "limit %llu MiB (" KDF_MAX_MEMORY_ENV " raises it)",
		    (unsigned long long)(memlimit >> 20),
		    (unsigned long long)(local >> 20));
		goto err0;
	}
	if ((wkey = ccrypto_secret_new(CCRYPTO_KEY_BYTES)) == NULL)
		goto err0;
	if ((payload = ccrypto_secret_new(plen)) == NULL)
		goto err1;

	memcpy(ad + OFF_MAGIC, SLOT_MAGIC, 4);
	ad[OFF_VERSION] = SLOT_VERSION;
	ad[OFF_KIND] = (uint8_t)kind;
	put_u64(ad + OFF_OPSLIMIT, opslimit);
	put_u64(ad + OFF_MEMLIMIT, memlimit);
	randombytes_buf(ad + OFF_SALT, crypto_pwhash_SALTBYTES);
	randombytes_buf(ad + OFF_NONCE, CCRYPTO_NONCE_BYTES);
	memcpy(ad + SLOT_HEADER_BYTES, repo_id, CCRYPTO_REPO_ID_BYTES);

	if (slot_kdf(wkey, pass, passlen, ad + OFF_SALT, opslimit, memlimit))
		goto err2;
	payload[0] = (uint8_t)kind;
	if (kind == SLOT_KIND_HOLDER)
		ccrypto_keys_holder_parts(k, payload + 1);
	else
		ccrypto_keys_wo_parts(k, payload + 1);
	if (buf_reserve(out, slen))
		goto err2;
	memcpy(out->data + out->len, ad, SLOT_HEADER_BYTES);
	crypto_aead_xchacha20poly1305_ietf_encrypt(
	    out->data + out->len + SLOT_HEADER_BYTES, NULL, payload,
	    plen, ad, sizeof(ad), NULL, ad + OFF_NONCE, wkey);
	out->len += slen;
	ccrypto_secret_free(payload);
	ccrypto_secret_free(wkey);

	/* Success! */
	return (0);

err2:
	ccrypto_secret_free(payload);
err1:
	ccrypto_secret_free(wkey);
err0:
	/* Failure! */
	return (-1);
}

/* "key slot 'keys/ab12'" or "key slot", for messages. */
static void
slot_label(char *out, size_t n, const char *name)
{
	if (name != NULL)
		snprintf(out, n, "key slot '%s'", name);
	else
		snprintf(out, n, "key slot");
}

/*
 * Check everything that can be checked without the passphrase: the format
 * (*why = CCRYPTO_SLOT_DAMAGED) and this host's limits (CCRYPTO_SLOT_REFUSED).
 * 0 when the slot may go to Argon2id, else -1 (reported).
 */
static int
slot_check(const char *name, const uint8_t *slot, size_t len, int *why)
{
	uint64_t opslimit, memlimit, local;
	char what[300];

	slot_label(what, sizeof(what), name);
	if (len < 4 || memcmp(slot + OFF_MAGIC, SLOT_MAGIC, 4) != 0) {
		log_error("malformed %s: not a coffer key slot", what);
		goto damaged;
	}
	if (len < OFF_OPSLIMIT) {
		log_error("malformed %s: truncated (%zu bytes)", what, len);
		goto damaged;
	}
	if (slot[OFF_VERSION] != SLOT_VERSION) {
		log_error("%s has format %u; this coffer reads format %d "
		    "(upgrade coffer)", what, slot[OFF_VERSION], SLOT_VERSION);
		goto damaged;
	}
	if (!kind_known(slot[OFF_KIND])) {
		log_error("%s: unsupported kind %u", what,
		    slot[OFF_KIND]);
		goto damaged;
	}
	if (len != slot_bytes(slot[OFF_KIND])) {
		log_error("malformed %s: %s (%zu bytes, expected %zu)", what,
		    len < slot_bytes(slot[OFF_KIND]) ? "truncated" :
		    "trailing garbage", len, slot_bytes(slot[OFF_KIND]));
		goto damaged;
	}
	opslimit = get_u64(slot + OFF_OPSLIMIT);
	memlimit = get_u64(slot + OFF_MEMLIMIT);
	if (opslimit < SLOT_OPSLIMIT_MIN || opslimit > SLOT_OPSLIMIT_MAX) {
		log_error("malformed %s: %llu passes is out of range (%d..%d)",
		    what, (unsigned long long)opslimit, SLOT_OPSLIMIT_MIN,
		    SLOT_OPSLIMIT_MAX);
		goto damaged;
	}
	if (memlimit < SLOT_MEMLIMIT_MIN || memlimit > memlimit_max()) {
		log_error("malformed %s: memory limit %llu is out of range "
		    "(%llu..%llu bytes)", what, (unsigned long long)memlimit,
		    SLOT_MEMLIMIT_MIN, (unsigned long long)memlimit_max());
		goto damaged;
	}
	if ((local = local_memlimit()) == 0)
		goto refused;
	if (memlimit > local) {
		log_warn("%s: Argon2id memory %llu MiB exceeds the local limit "
		    "%llu MiB (" KDF_MAX_MEMORY_ENV " raises it)", what,
		    (unsigned long long)((memlimit + (1 << 20) - 1) >> 20),
		    (unsigned long long)(local >> 20));
		goto refused;
	}
	if (opslimit > SLOT_LOCAL_OPSLIMIT_MAX) {
		log_warn("%s: Argon2id %llu passes exceed the local limit of "
		    "%d", what, (unsigned long long)opslimit,
		    SLOT_LOCAL_OPSLIMIT_MAX);
		goto refused;
	}
	return (0);
damaged:
	*why = CCRYPTO_SLOT_DAMAGED;
	return (-1);
refused:
	*why = CCRYPTO_SLOT_REFUSED;
	return (-1);
}

struct ccrypto_keys *
ccrypto_slot_unwrap_named(const char *name, const uint8_t *slot, size_t len,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const char *pass,
    size_t passlen, int *why)
{
	struct ccrypto_keys *k;
	uint8_t ad[SLOT_AD_BYTES];
	uint8_t *wkey, *payload;
	char what[300];
	size_t plen;

	*why = CCRYPTO_SLOT_DAMAGED;
	if (slot_check(name, slot, len, why))
		goto err0;
	plen = payload_bytes(slot[OFF_KIND]);
	memcpy(ad, slot, SLOT_HEADER_BYTES);
	memcpy(ad + SLOT_HEADER_BYTES, repo_id, CCRYPTO_REPO_ID_BYTES);

	if ((wkey = ccrypto_secret_new(CCRYPTO_KEY_BYTES)) == NULL)
		goto err0;
	if ((payload = ccrypto_secret_new(plen)) == NULL)
		goto err1;
	if (slot_kdf(wkey, pass, passlen, slot + OFF_SALT,
	    get_u64(slot + OFF_OPSLIMIT), get_u64(slot + OFF_MEMLIMIT)))
		goto err2;

	/*
	 * A wrong passphrase, a damaged salt, nonce or ciphertext, and a
	 * slot from another repository all look alike here, by design: the
	 * tag is all we have.  None of them is reported; the caller decides
	 * whether to try another slot or ask again.
	 */
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(payload, NULL, NULL,
	    slot + SLOT_HEADER_BYTES, len - SLOT_HEADER_BYTES, ad,
	    sizeof(ad), slot + OFF_NONCE, wkey) != 0) {
		*why = CCRYPTO_SLOT_WRONG;
		goto err2;
	}
	if (payload[0] != slot[OFF_KIND]) {
		slot_label(what, sizeof(what), name);
		log_error("%s: unsupported payload kind %u", what,
		    payload[0]);
		goto err2;
	}
	k = payload[0] == SLOT_KIND_HOLDER ?
	    ccrypto_keys_from_holder(payload + 1) :
	    ccrypto_keys_from_wo(payload + 1);
	if (k == NULL)
		goto err2;
	ccrypto_secret_free(payload);
	ccrypto_secret_free(wkey);

	/* Success! */
	*why = 0;
	return (k);

err2:
	ccrypto_secret_free(payload);
err1:
	ccrypto_secret_free(wkey);
err0:
	/* Failure! */
	return (NULL);
}

struct ccrypto_keys *
ccrypto_slot_unwrap(const uint8_t *slot, size_t len,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], const char *pass,
    size_t passlen, int *wrong)
{
	return (ccrypto_slot_unwrap_named(NULL, slot, len, repo_id, pass,
	    passlen, wrong));
}

int
ccrypto_slot_info(const char *name, const uint8_t *slot, size_t len,
    struct ccrypto_slot_info *info)
{
	int why;

	/* The format only: this host's limits are the caller's to show. */
	if (len >= SLOT_HEADER_BYTES && memcmp(slot, SLOT_MAGIC, 4) == 0 &&
	    slot[OFF_VERSION] == SLOT_VERSION && kind_known(slot[OFF_KIND]) &&
	    len == slot_bytes(slot[OFF_KIND])) {
		info->kind = slot[OFF_KIND];
		info->opslimit = get_u64(slot + OFF_OPSLIMIT);
		info->memlimit = get_u64(slot + OFF_MEMLIMIT);
		return (0);
	}
	(void)slot_check(name, slot, len, &why);
	return (-1);
}

int
ccrypto_keyfile_encode(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], struct buf *out)
{
	const int holder = ccrypto_keys_kind(k) == CCRYPTO_KEY_HOLDER;
	const char *head = holder ? KF_PREFIX KF_FULL : KF_PREFIX KF_WO;
	const size_t plen = holder ? CCRYPTO_HOLDER_BYTES :
	    CCRYPTO_WO_BYTES;
	uint8_t *parts = NULL;
	char *line;
	size_t n = strlen(head);

	if (ccrypto_keys_kind(k) == CCRYPTO_KEY_MASTER) {
		log_error("internal error: a key file for the master secret");
		goto err0;
	}
	/* Room for the longest line, its newline and hex_encode's NUL. */
	if ((line = (char *)ccrypto_secret_new(KF_MAX + 2)) == NULL)
		goto err0;
	memcpy(line, head, n);
	hex_encode(line + n, repo_id, CCRYPTO_REPO_ID_BYTES);
	n += KF_REPO_HEX;
	line[n++] = ' ';
	if ((parts = ccrypto_secret_new(plen)) == NULL)
		goto err1;
	if (holder)
		ccrypto_keys_holder_parts(k, parts);
	else
		ccrypto_keys_wo_parts(k, parts);
	hex_encode(line + n, parts, plen);
	n += 2 * plen;
	ccrypto_secret_free(parts);
	line[n++] = '\n';
	if (buf_append(out, line, n))
		goto err1;
	ccrypto_secret_free((uint8_t *)line);

	/* Success! */
	return (0);

err1:
	ccrypto_secret_free((uint8_t *)line);
err0:
	/* Failure! */
	return (-1);
}

/* Only what keyfile_encode writes: hex_decode alone would take uppercase. */
static int
is_lower_hex(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((p[i] >= '0' && p[i] <= '9') ||
		    (p[i] >= 'a' && p[i] <= 'f')))
			return (0);
	return (1);
}

struct ccrypto_keys *
ccrypto_keyfile_decode(const uint8_t *data, size_t len,
    uint8_t repo_id[CCRYPTO_REPO_ID_BYTES])
{
	const char *text = (const char *)data;
	uint8_t rid[CCRYPTO_REPO_ID_BYTES];
	struct ccrypto_keys *k;
	uint8_t *secret;
	size_t off, slen, vlen;
	int wo;

	/* "coffer-key N ": another format than 1 is named as such. */
	vlen = strspn(text + (len > KF_OFF_VERSION ? KF_OFF_VERSION : len),
	    "0123456789");
	if (len > KF_OFF_VERSION + vlen && vlen > 0 &&
	    memcmp(data, KF_PREFIX, KF_OFF_VERSION) == 0 &&
	    data[KF_OFF_VERSION + vlen] == ' ' &&
	    (vlen != 1 || data[KF_OFF_VERSION] != '1')) {
		log_error("key file has format %.*s; this coffer reads format "
		    "1 (upgrade coffer)", (int)(vlen > 9 ? 9 : vlen),
		    text + KF_OFF_VERSION);
		goto err0;
	}
	if (len > 0 && data[len - 1] == '\n')
		len--;
	wo = len >= KF_OFF_VERSION + sizeof(KF_WO) - 1 &&
	    memcmp(data + KF_OFF_VERSION, KF_WO, sizeof(KF_WO) - 1) == 0;
	off = KF_OFF_VERSION + (wo ? sizeof(KF_WO) : sizeof(KF_FULL)) - 1;
	slen = wo ? CCRYPTO_WO_BYTES : CCRYPTO_HOLDER_BYTES;
	if (len != off + KF_REPO_HEX + 1 + 2 * slen ||
	    memcmp(data, KF_PREFIX KF_FULL, sizeof(KF_PREFIX KF_FULL) - 1) ||
	    !is_lower_hex(data + off, KF_REPO_HEX) ||
	    data[off + KF_REPO_HEX] != ' ' ||
	    !is_lower_hex(data + off + KF_REPO_HEX + 1, 2 * slen)) {
		log_error("malformed key file (expected "
		    "'" KF_PREFIX KF_FULL "<repo id> <key>' or "
		    "'" KF_PREFIX KF_WO "<repo id> <key>')");
		goto err0;
	}
	if ((secret = ccrypto_secret_new(slen)) == NULL)
		goto err0;
	if (hex_decode(rid, sizeof(rid), text + off) ||
	    hex_decode(secret, slen, text + off + KF_REPO_HEX + 1)) {
		log_error("malformed key file");
		goto err1;
	}
	k = wo ? ccrypto_keys_from_wo(secret) :
	    ccrypto_keys_from_holder(secret);
	if (k == NULL)
		goto err1;
	ccrypto_secret_free(secret);
	memcpy(repo_id, rid, sizeof(rid));

	/* Success! */
	return (k);

err1:
	ccrypto_secret_free(secret);
err0:
	/* Failure! */
	return (NULL);
}
