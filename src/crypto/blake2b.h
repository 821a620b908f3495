#ifndef COFFER_BLAKE2B_H
#define COFFER_BLAKE2B_H

#include <stddef.h>
#include <stdint.h>

/*
 * Private to src/crypto: BLAKE2b (RFC 7693), equal in output to libsodium's
 * crypto_generichash for the same key, input and output length.
 * outlen is 1..64 and keylen 0..64; the callers pass constants.
 */
#define BLAKE2B_BLOCK 128
#define BLAKE2B_OUT_MAX 64

struct blake2b_state {
	uint64_t h[8];
	uint64_t t[2];
	uint8_t buf[BLAKE2B_BLOCK];
	size_t buflen;
	size_t outlen;
};

void blake2b_init(struct blake2b_state *s, size_t outlen, const void *key,
    size_t keylen);
void blake2b_update(struct blake2b_state *s, const void *in, size_t n);
/* Writes outlen bytes to out and wipes the state. */
void blake2b_final(struct blake2b_state *s, uint8_t *out);
void blake2b(uint8_t *out, size_t outlen, const void *in, size_t n,
    const void *key, size_t keylen);

#endif
