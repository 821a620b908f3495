/*
 * Plain digests by OpenSSL (coffer/digest.h).  The one-shot calls cannot
 * fail on these inputs short of OpenSSL being broken, which would fail
 * everything else first; an impossible failure leaves out zeroed, which
 * no check accepts.
 */
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "coffer/digest.h"

void
digest_sha256(const void *p, size_t n, uint8_t out[DIGEST_SHA256_BYTES])
{
	if (EVP_Digest(p, n, out, NULL, EVP_sha256(), NULL) != 1)
		memset(out, 0, DIGEST_SHA256_BYTES);
}

void
digest_hmac_sha256(const void *key, size_t keylen, const void *p, size_t n,
    uint8_t out[DIGEST_SHA256_BYTES])
{
	unsigned int len = DIGEST_SHA256_BYTES;

	if (HMAC(EVP_sha256(), key, (int)keylen, p, n, out, &len) == NULL)
		memset(out, 0, DIGEST_SHA256_BYTES);
}

void
digest_md5(const void *p, size_t n, uint8_t out[DIGEST_MD5_BYTES])
{
	if (EVP_Digest(p, n, out, NULL, EVP_md5(), NULL) != 1)
		memset(out, 0, DIGEST_MD5_BYTES);
}
