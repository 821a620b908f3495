#ifndef COFFER_CRYPTO_INT_H
#define COFFER_CRYPTO_INT_H

#include <stdint.h>

#include "coffer/crypto.h"

/*
 * Private to src/crypto: what keyslot.c needs to see inside ccrypto_keys.
 */

/* The master secret (32 bytes), or NULL for a key that holds none. */
const uint8_t *ccrypto_keys_master(const struct ccrypto_keys *k);

#endif
