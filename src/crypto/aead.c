/*
 * XChaCha20-Poly1305-IETF, the AEAD of every record (doc/format.md), computed
 * by OpenSSL's ChaCha20-Poly1305 (RFC 8439) under the subkey that
 * libsodium's HChaCha20 derives from the key and the nonce's first 16
 * bytes, with the nonce's last 8 bytes after four zero bytes as its
 * nonce.  That is the construction of libsodium's
 * crypto_aead_xchacha20poly1305_ietf_*, byte for byte (t-crypto checks
 * it both ways, and that a changed byte fails).
 *
 * Why not libsodium's own: 1.0.18 (Debian 12) stops at AVX2 for ChaCha20
 * and SSE2 for Poly1305, and OpenSSL's code goes on to AVX-512, where it
 * is about three times as fast on a 1 MiB record and twice on a 4 KiB
 * one; every byte a backup stores, a restore writes or a verify reads
 * passes here.
 *
 * libsodium does the work itself where OpenSSL cannot be set up, with
 * COFFER_AEAD=libsodium in the environment (for comparisons), and for a
 * call OpenSSL fails for want of memory.  OpenSSL reads no configuration
 * file: what the system's openssl.cnf says is for TLS, not for this.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <sodium.h>

#include "coffer/crypto.h"
#include "coffer/log.h"
#include "coffer/tuning.h"

/* crypto.c checks the key, nonce and tag against libsodium's AEAD. */
_Static_assert(crypto_core_hchacha20_INPUTBYTES == 16 &&
    crypto_core_hchacha20_KEYBYTES == CCRYPTO_KEY_BYTES &&
    crypto_core_hchacha20_OUTPUTBYTES == CCRYPTO_KEY_BYTES,
    "HChaCha20 sizes");

#define IETF_NONCE_BYTES 12

/* ChaCha20-Poly1305 of OpenSSL's default provider; NULL: libsodium's. */
static EVP_CIPHER *chacha;
static pthread_once_t chacha_once = PTHREAD_ONCE_INIT;

static void
chacha_free(void)
{
	EVP_CIPHER_free(chacha);
	chacha = NULL;
}

static void
chacha_setup(void)
{
	if (tuning_get()->aead_libsodium)
		return;
	if (OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL) == 1 &&
	    (chacha = EVP_CIPHER_fetch(NULL, "ChaCha20-Poly1305", NULL)) !=
	    NULL)
		atexit(chacha_free);	/* before OpenSSL's own cleanup */
	ERR_clear_error();
}

static const EVP_CIPHER *
openssl_chacha(void)
{
	pthread_once(&chacha_once, chacha_setup);
	return (chacha);
}

const char *
ccrypto_aead_impl(void)
{
	return (openssl_chacha() != NULL ? "openssl" : "libsodium");
}

/* The ChaCha20-Poly1305 key and nonce of an XChaCha20-Poly1305 one. */
static void
ietf_key(const uint8_t *key, const uint8_t nonce[CCRYPTO_NONCE_BYTES],
    uint8_t sub[CCRYPTO_KEY_BYTES], uint8_t iv[IETF_NONCE_BYTES])
{
	crypto_core_hchacha20(sub, nonce, key, NULL);
	memset(iv, 0, 4);
	memcpy(iv + 4, nonce + 16, 8);
}

/*
 * A context keyed for one record, its associated data taken in (and for
 * decrypt its tag), before a byte of out is written: 0, or -1 (out of
 * memory, say) and *c is NULL.
 */
static int
openssl_begin(EVP_CIPHER_CTX **c, const EVP_CIPHER *ch, int enc,
    const uint8_t *key, const uint8_t nonce[CCRYPTO_NONCE_BYTES],
    const void *ad, size_t adlen, size_t plen, const uint8_t *tag)
{
	uint8_t sub[CCRYPTO_KEY_BYTES], iv[IETF_NONCE_BYTES];
	int n, ok;

	if (plen > INT_MAX || adlen > INT_MAX ||
	    (*c = EVP_CIPHER_CTX_new()) == NULL)
		return (-1);
	ietf_key(key, nonce, sub, iv);
	ok = EVP_CipherInit_ex2(*c, ch, sub, iv, enc, NULL) == 1 &&
	    (tag == NULL || EVP_CIPHER_CTX_ctrl(*c, EVP_CTRL_AEAD_SET_TAG,
	    CCRYPTO_TAG_BYTES, (void *)tag) == 1) &&
	    (adlen == 0 ||
	    EVP_CipherUpdate(*c, NULL, &n, ad, (int)adlen) == 1);
	sodium_memzero(sub, sizeof(sub));
	if (!ok) {
		EVP_CIPHER_CTX_free(*c);
		*c = NULL;
		ERR_clear_error();
		return (-1);
	}
	return (0);
}

/*
 * A fresh random nonce.  Drawn from a buffer of the system's random bytes
 * per thread, refilled 42 nonces at a time: a backup of small files seals
 * a record per file, and a getrandom call per record was a system call
 * per file.  The buffer is the thread's own, so no two records share
 * bytes; a child process never seals (coffer forks only to exec).
 */
#define NONCE_POOL (42 * CCRYPTO_NONCE_BYTES)
static _Thread_local uint8_t nonce_pool[NONCE_POOL];
static _Thread_local size_t nonce_left;

static void
fresh_nonce(uint8_t nonce[CCRYPTO_NONCE_BYTES])
{
	if (nonce_left < CCRYPTO_NONCE_BYTES) {
		randombytes_buf(nonce_pool, sizeof(nonce_pool));
		nonce_left = sizeof(nonce_pool);
	}
	nonce_left -= CCRYPTO_NONCE_BYTES;
	memcpy(nonce, nonce_pool + nonce_left, CCRYPTO_NONCE_BYTES);
	sodium_memzero(nonce_pool + nonce_left, CCRYPTO_NONCE_BYTES);
}

void
ccrypto_aead_encrypt(const uint8_t *key, uint8_t nonce[CCRYPTO_NONCE_BYTES],
    const void *ad, size_t adlen, const void *plain, size_t plen,
    uint8_t *out)
{
	const EVP_CIPHER *ch = openssl_chacha();
	EVP_CIPHER_CTX *c;
	int n;

	/* 192-bit nonces: random ones never collide in practice. */
	fresh_nonce(nonce);
	if (ch == NULL || openssl_begin(&c, ch, 1, key, nonce, ad, adlen,
	    plen, NULL)) {
		crypto_aead_xchacha20poly1305_ietf_encrypt(out, NULL, plain,
		    plen, ad, adlen, NULL, nonce, key);
		return;
	}
	/* plain may be out (sealed in place), and is lost from here on: a
	 * failure now is a broken library, and no record goes out wrong. */
	if ((plen > 0 && EVP_EncryptUpdate(c, out, &n, plain,
	    (int)plen) != 1) || EVP_EncryptFinal_ex(c, out + plen, &n) != 1 ||
	    EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_AEAD_GET_TAG, CCRYPTO_TAG_BYTES,
	    out + plen) != 1) {
		log_error("internal error: OpenSSL failed to encrypt");
		abort();
	}
	EVP_CIPHER_CTX_free(c);
}

int
ccrypto_aead_decrypt(const uint8_t *key,
    const uint8_t nonce[CCRYPTO_NONCE_BYTES], const void *ad, size_t adlen,
    const uint8_t *ct, size_t ctlen, uint8_t *out)
{
	const EVP_CIPHER *ch = openssl_chacha();
	EVP_CIPHER_CTX *c;
	size_t plen;
	int n, ok;

	if (ctlen < CCRYPTO_TAG_BYTES)
		return (-1);
	plen = ctlen - CCRYPTO_TAG_BYTES;
	if (ch == NULL || openssl_begin(&c, ch, 0, key, nonce, ad, adlen,
	    plen, ct + plen)) {
		if (crypto_aead_xchacha20poly1305_ietf_decrypt(out, NULL, NULL,
		    ct, ctlen, ad, adlen, nonce, key) != 0)
			return (-1);
		return (0);
	}
	/* OpenSSL writes the plaintext before it checks the tag: what it
	 * wrote of a record that fails is wiped. */
	ok = (plen == 0 || EVP_DecryptUpdate(c, out, &n, ct,
	    (int)plen) == 1) && EVP_DecryptFinal_ex(c, out + plen, &n) == 1;
	EVP_CIPHER_CTX_free(c);
	if (!ok) {
		sodium_memzero(out, plen);
		ERR_clear_error();
		return (-1);
	}
	return (0);
}
