/*
 * wo-probe REPO KEYFILE: try every secret a key file could hold against
 * every pack of REPO, and print "packs N opened K".  Each 32-byte window
 * of the bytes the file's hex encodes is tried as a master secret (the
 * X25519 key pair it derives, through coffer's own unseal), as an X25519
 * secret key (libsodium's crypto_box_seal_open, directly) and as a pack
 * key (the index trailer's AEAD, directly); a pack counts as opened when
 * any of them opens its sealed key or its index.  Each window is also
 * tried as a keyring recipient's secret (REPO/keyring, version 1, read
 * here byte by byte): the secrets a keyring it opens holds are tried as
 * well.  With a full key file every pack opens (the control); with a
 * write-only one none may: the secret that reads is not in the file, nor
 * reachable from it, whatever code would use it.
 * Links libcoffer (a rule of its own in the Makefile).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "coffer/crypto.h"

#define HDR 120
#define SEALED_OFF 40

static int
nib(int c)
{
	if (c >= '0' && c <= '9')
		return (c - '0');
	if (c >= 'a' && c <= 'f')
		return (c - 'a' + 10);
	return (-1);
}

/* The bytes of every run of hex digits in the file, one after another. */
static size_t
key_bytes(const char *path, uint8_t *out, size_t max)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;
	int c, hi = -1, v;

	if (f == NULL)
		return (0);
	while ((c = getc(f)) != EOF && n < max) {
		if ((v = nib(c)) < 0) {
			hi = -1;
			continue;
		}
		if (hi < 0)
			hi = v;
		else {
			out[n++] = (uint8_t)(hi << 4 | v);
			hi = -1;
		}
	}
	fclose(f);
	return (n);
}

static uint8_t *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p;
	long n;

	if (f == NULL || fseek(f, 0, SEEK_END) || (n = ftell(f)) < HDR + 8 ||
	    fseek(f, 0, SEEK_SET) || (p = malloc((size_t)n)) == NULL) {
		if (f)
			fclose(f);
		return (NULL);
	}
	if (fread(p, 1, (size_t)n, f) != (size_t)n) {
		free(p);
		fclose(f);
		return (NULL);
	}
	fclose(f);
	*len = (size_t)n;
	return (p);
}

/* Whether key (32 bytes) opens the index trailer of pack p as its key. */
static int
opens_index(const uint8_t *p, size_t len, const uint8_t *key)
{
	uint8_t ad[4 + 32], *out;
	uint32_t l;
	size_t off;
	int ok;

	memcpy(&l, p + len - 8, 4);
	if (l < 24 + 16 || l > len - HDR - 8)
		return (0);
	off = len - 8 - l;
	memcpy(ad, "CFPI", 4);
	memcpy(ad + 4, p + 8, 32);	/* repo id | pack id */
	if ((out = malloc(l)) == NULL)
		return (0);
	ok = crypto_aead_xchacha20poly1305_ietf_decrypt(out, NULL, NULL,
	    p + off + 24, l - 24, ad, sizeof(ad), p + off, key) == 0;
	free(out);
	return (ok);
}

static int
opens(const uint8_t *p, size_t len, const uint8_t *w)
{
	struct ccrypto_keys *k;
	uint8_t pk[32], key[32];
	int ok = 0;

	if ((k = ccrypto_keys_from_master(w)) != NULL) {
		ok = ccrypto_pack_key_unseal(k, p + SEALED_OFF, key) == 0;
		ccrypto_keys_free(k);
	}
	crypto_scalarmult_base(pk, w);
	if (crypto_box_seal_open(key, p + SEALED_OFF, 80, pk, w) == 0)
		ok = 1;
	if (opens_index(p, len, w))
		ok = 1;
	return (ok);
}

/*
 * The epoch secrets of REPO/keyring (version 1) for a window w taken as a
 * recipient's secret, appended to out (up to max bytes); the new length.
 * The repository id for the associated data is read from pack p.
 */
static size_t
keyring_secrets(const uint8_t *kr, size_t krlen, const uint8_t *w,
    const uint8_t *repo_id, uint8_t *out, size_t n, size_t max)
{
	uint8_t pk[32], key[32], *ad, *plain;
	size_t nr, i, head, plen, j, count;

	if (kr == NULL || krlen < 12 || memcmp(kr, "CFKR", 4) != 0 ||
	    kr[4] != 1)
		return (n);
	nr = (size_t)kr[16] | (size_t)kr[17] << 8 | (size_t)kr[18] << 16 |
	    (size_t)kr[19] << 24;
	head = 20 + nr * 128 + 24;
	/* The keyring's MAC (32 bytes) ends it: it is left out. */
	if (nr == 0 || nr > 64 || krlen < head + 4 + 16 + 32)
		return (n);
	krlen -= 32;
	crypto_scalarmult_base(pk, w);
	for (i = 0; i < nr; i++)
		if (crypto_box_seal_open(key, kr + 20 + i * 128 + 48, 80, pk,
		    w) == 0)
			break;
	if (i == nr)
		return (n);
	plen = krlen - head - 16;
	if ((ad = malloc(head + 16)) == NULL || (plain = malloc(plen)) ==
	    NULL) {
		free(ad);
		return (n);
	}
	memcpy(ad, kr, head);
	memcpy(ad + head, repo_id, 16);
	if (crypto_aead_xchacha20poly1305_ietf_decrypt(plain, NULL, NULL,
	    kr + head, krlen - head, ad, head + 16, kr + head - 24, key) == 0) {
		count = (plen - 4) / 36;
		for (j = 0; j < count && n + 32 <= max; j++, n += 32)
			memcpy(out + n, plain + 4 + j * 36 + 4, 32);
	}
	free(plain);
	free(ad);
	return (n);
}

int
main(int argc, char **argv)
{
	uint8_t kb[4096], *p, *kr;
	size_t krlen = 0, base;
	char dir[4096], path[8192];
	struct dirent *fan, *de;
	DIR *d, *e;
	size_t nk, len, i, packs = 0, opened = 0;

	if (argc != 3 || sodium_init() < 0) {
		fprintf(stderr, "usage: wo-probe REPO KEYFILE\n");
		return (2);
	}
	if ((nk = key_bytes(argv[2], kb, sizeof(kb))) < 32) {
		fprintf(stderr, "wo-probe: no key material in '%s'\n", argv[2]);
		return (2);
	}
	snprintf(path, sizeof(path), "%s/keyring", argv[1]);
	kr = slurp(path, &krlen);
	base = nk;
	snprintf(dir, sizeof(dir), "%s/packs", argv[1]);
	if ((d = opendir(dir)) == NULL)
		return (2);
	while ((fan = readdir(d)) != NULL) {
		if (fan->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, fan->d_name);
		if ((e = opendir(path)) == NULL)
			continue;
		while ((de = readdir(e)) != NULL) {
			if (de->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s/%s", dir,
			    fan->d_name, de->d_name);
			if ((p = slurp(path, &len)) == NULL)
				continue;
			packs++;
			/* What the keyring yields to any window. */
			nk = base;
			for (i = 0; i + 32 <= base; i++)
				nk = keyring_secrets(kr, krlen, kb + i, p + 8,
				    kb, nk, sizeof(kb));
			for (i = 0; i + 32 <= nk; i++)
				if (opens(p, len, kb + i)) {
					opened++;
					break;
				}
			free(p);
		}
		closedir(e);
	}
	closedir(d);
	free(kr);
	printf("packs %zu opened %zu\n", packs, opened);
	return (0);
}
