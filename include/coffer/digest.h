#ifndef COFFER_DIGEST_H
#define COFFER_DIGEST_H

#include <stddef.h>
#include <stdint.h>

/*
 * Plain digests of public data, by OpenSSL (src/crypto/digest.c): what a
 * protocol asks for besides coffer's own cryptography, such as S3's
 * request signatures (AWS Signature V4) and upload checks (Content-MD5).
 * Pure functions over util: src/store may call them (doc/design.md,
 * "Module map").  Never for secrets kept by coffer itself: those use
 * coffer/crypto.h.
 */
#define DIGEST_SHA256_BYTES 32
#define DIGEST_MD5_BYTES 16

/* SHA-256 of the n bytes at p into out. */
void digest_sha256(const void *p, size_t n,
    uint8_t out[DIGEST_SHA256_BYTES]);

/* HMAC-SHA-256 of the n bytes at p under the keylen bytes of key. */
void digest_hmac_sha256(const void *key, size_t keylen, const void *p,
    size_t n, uint8_t out[DIGEST_SHA256_BYTES]);

/* MD5 of the n bytes at p (an integrity check of uploads, not security). */
void digest_md5(const void *p, size_t n, uint8_t out[DIGEST_MD5_BYTES]);

#endif
