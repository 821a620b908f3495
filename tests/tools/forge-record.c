/*
 * forge-record REPO KEYFILE ID LEN: write a new pack into REPO holding one
 * raw data record of LEN bytes (0xa5) sealed under chunk id ID (64 hex
 * digits), and print "NAME OFFSET LEN SIZE" (the pack, the record's
 * offset and length, the pack's size).  The record authenticates, as only
 * a holder of the keys can make one, but its content is not what ID
 * hashes: what a bug or a misbehaving writer with the keys would leave,
 * and what the keyed hash, checked after decrypting, must catch.  Links
 * libcoffer (a rule of its own in the Makefile).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/crypto.h"
#include "coffer/hex.h"
#include "coffer/repo.h"

int
main(int argc, char **argv)
{
	uint8_t id[CRYPTO_ID_BYTES];
	struct pack_writer *w;
	struct pack_entry e;
	struct pack_info info;
	struct repo *r;
	uint8_t *data;
	long len;

	if (argc != 5 || strlen(argv[3]) != 2 * CRYPTO_ID_BYTES ||
	    hex_decode(id, CRYPTO_ID_BYTES, argv[3]) ||
	    (len = atol(argv[4])) <= 0) {
		fprintf(stderr, "usage: forge-record REPO KEYFILE ID LEN\n");
		return (2);
	}
	if (crypto_init() || (r = repo_open(argv[1])) == NULL ||
	    repo_unlock(r, argv[2], NULL, 0))
		return (1);
	if ((data = malloc((size_t)len)) == NULL)
		return (1);
	memset(data, 0xa5, (size_t)len);
	if ((w = pack_writer_new(r)) == NULL ||
	    pack_writer_add(w, PACK_REC_DATA, 0, id, data, (size_t)len,
	    (uint32_t)len, &e) || pack_writer_finish(w, &info))
		return (1);
	printf("%s %llu %ld %llu\n", info.name, (unsigned long long)e.offset,
	    len, (unsigned long long)info.size);
	pack_writer_free(w);
	repo_close(r);
	free(data);
	return (0);
}
