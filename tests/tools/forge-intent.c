/*
 * forge-intent REPO PACK...: a rewrap intent as whoever can write the
 * repository, with no key at all, can make it once the repository has
 * rotated (coffer.conf publishes the newest epoch's public key): for each
 * pack, its current header as the old one and, as the new one, a random
 * pack key sealed to that public key.  Written to REPO/rewrap.  A coffer
 * that finished such an intent would make every named pack unreadable.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#define HEADER 120
#define SEALED_OFF 40

static int
hexval(int c)
{
	if (c >= '0' && c <= '9')
		return (c - '0');
	if (c >= 'a' && c <= 'f')
		return (c - 'a' + 10);
	return (-1);
}

static int
unhex(uint8_t *out, size_t n, const char *s)
{
	size_t i;
	int hi, lo;

	for (i = 0; i < n; i++) {
		if ((hi = hexval(s[2 * i])) < 0 ||
		    (lo = hexval(s[2 * i + 1])) < 0)
			return (-1);
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return (0);
}

int
main(int argc, char **argv)
{
	uint8_t pk[crypto_box_PUBLICKEYBYTES], key[32];
	uint8_t (*ent)[16 + 2 * HEADER];
	char path[4096], line[512], pkhex[65];
	unsigned epoch = 0, e;
	uint32_t count;
	uint8_t c4[4];
	FILE *f;
	int i;

	if (argc < 3 || sodium_init() < 0) {
		fprintf(stderr, "usage: forge-intent REPO PACK...\n");
		return (2);
	}
	snprintf(path, sizeof(path), "%s/coffer.conf", argv[1]);
	if ((f = fopen(path, "r")) == NULL)
		return (1);
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "epoch %u %64s created", &e, pkhex) == 2 &&
		    strlen(pkhex) == 64 && unhex(pk, sizeof(pk), pkhex) == 0)
			epoch = e;
	fclose(f);
	if (epoch < 2) {
		fprintf(stderr, "forge-intent: no epoch published\n");
		return (1);
	}
	count = (uint32_t)(argc - 2);
	if ((ent = calloc(count, sizeof(*ent))) == NULL)
		return (1);
	for (i = 2; i < argc; i++) {
		uint8_t *p = ent[i - 2];
		const char *name = strrchr(argv[i], '/');

		name = name != NULL ? name + 1 : argv[i];
		if (strlen(name) != 32 || unhex(p, 16, name) ||
		    (f = fopen(argv[i], "rb")) == NULL ||
		    fread(p + 16, 1, HEADER, f) != HEADER)
			return (1);
		fclose(f);
		memcpy(p + 16 + HEADER, p + 16, HEADER);
		p[16 + HEADER + 5] = (uint8_t)epoch;
		p[16 + HEADER + 6] = (uint8_t)(epoch >> 8);
		p[16 + HEADER + 7] = (uint8_t)(epoch >> 16);
		randombytes_buf(key, sizeof(key));
		crypto_box_seal(p + 16 + HEADER + SEALED_OFF, key, sizeof(key),
		    pk);
	}
	snprintf(path, sizeof(path), "%s/rewrap", argv[1]);
	if ((f = fopen(path, "wb")) == NULL ||
	    fwrite("CFRW\001\000\000\000", 1, 8, f) != 8 ||
	    (c4[0] = (uint8_t)count, c4[1] = (uint8_t)(count >> 8),
	    c4[2] = (uint8_t)(count >> 16), c4[3] = (uint8_t)(count >> 24),
	    fwrite(c4, 1, 4, f) != 4) ||
	    fwrite(ent, sizeof(*ent), count, f) != count || fclose(f))
		return (1);
	free(ent);
	return (0);
}
