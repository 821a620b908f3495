/*
 * libFuzzer target for the safetensors header parser, which reads the
 * first bytes of any file being backed up.
 *
 * The first input byte is a control byte, the rest the start of a file:
 *   bit 0 set: the rest is the JSON header alone, and the 8-byte length
 *     prefix is made to match it (so that mutations reach the JSON
 *     scanner instead of dying on the prefix);
 *   bits 1-7 (k): how far the file extends past the bytes given:
 *     k < 64 bytes, else 2^(k - 64) bytes (saturating), so that offsets
 *     near the end of the data and sizes near 2^64 are both reached.
 * Each input is checked against the contract: a result of 1 gives
 * distinct ascending offsets from the data start to below the file size,
 * and no call reads past the bytes it was given (every buffer is
 * allocated at its exact size).
 *
 * Build and run: make fuzz (seeds: tests/fuzz/corpus/safetensors, written
 * by fuzz_seeds below through make fuzz-corpus).  A dictionary helps:
 *   -dict=<file of tokens such as "data_offsets" "__metadata__" "\\u"
 *   "[0," "{\"t\":{">
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/chunk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t *
copy(const uint8_t *p, size_t n)
{
	uint8_t *q = malloc(n ? n : 1);

	if (q == NULL)
		abort();
	memcpy(q, p, n);
	return (q);
}

/* Contract checks; a violation is a crash for libFuzzer to report. */
static void
check(const uint8_t *file, size_t len, uint64_t file_size)
{
	uint64_t hs, *cuts = NULL;
	uint8_t *short_head;
	size_t n = 0, i;
	int r;

	hs = safetensors_header_size(file, len, file_size);
	if (hs != 0 && (hs < 10 || hs > file_size))
		abort();
	/* Only the first 9 bytes may matter to the size. */
	if (len > 9) {
		short_head = copy(file, 9);
		if (safetensors_header_size(short_head, 9, file_size) != hs)
			abort();
		free(short_head);
	}

	r = safetensors_cuts(file, len, file_size, &cuts, &n);
	if (r == 0 || r == -1) {
		if (cuts != NULL || n != 0)
			abort();
		return;
	}
	if (r != 1 || hs == 0 || len < hs)
		abort();
	for (i = 0; i < n; i++)
		if (cuts[i] < hs || cuts[i] >= file_size ||
		    (i > 0 && cuts[i] <= cuts[i - 1]))
			abort();
	/* The data start is a cut unless the file ends there. */
	if ((hs < file_size) != (n > 0 && cuts[0] == hs))
		abort();
	free(cuts);

	/* One byte of the header missing: never parses. */
	short_head = copy(file, (size_t)hs - 1);
	r = safetensors_cuts(short_head, (size_t)hs - 1, file_size, &cuts, &n);
	if (r != 0 || cuts != NULL)
		abort();
	free(short_head);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t extra, file_size;
	unsigned int k;
	uint8_t *file;
	size_t len, i;

	if (size < 1)
		return (0);
	k = data[0] >> 1;
	extra = k < 64 ? k : UINT64_C(1) << (k - 64);
	data++;
	size--;

	if (data[-1] & 1) {
		len = size + 8;
		file = malloc(len);
		if (file == NULL)
			abort();
		for (i = 0; i < 8; i++)
			file[i] = (uint8_t)((uint64_t)size >> (8 * i));
		memcpy(file + 8, data, size);
	} else {
		len = size;
		file = copy(data, size);
	}
	file_size = (uint64_t)len + extra < (uint64_t)len ? UINT64_MAX :
	    (uint64_t)len + extra;
	check(file, len, file_size);
	/* The same bytes as the whole file, and as a file cut short. */
	check(file, len, len);
	if (len > 0)
		check(file, len, len - 1);
	free(file);
	return (0);
}

#ifdef FUZZ_REPLAY
#include <stdio.h>

#include "replay.h"

/* dir/name: control byte ctl, then text. */
static int
seed(const char *dir, const char *name, uint8_t ctl, const char *text)
{
	size_t n = strlen(text);
	uint8_t *p = malloc(n + 1);
	int rc;

	if (p == NULL)
		return (-1);
	p[0] = ctl;
	memcpy(p + 1, text, n);
	rc = fuzz_write_seed(dir, name, p, n + 1);
	free(p);
	return (rc);
}

/*
 * Headers alone (control bit 0, the length prefix made to match), the
 * data extending k bytes past them (bits 1-7); and a whole small file.
 */
int
fuzz_seeds(const char *dir)
{
	static const char two[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
	    "\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F16\",\"shape\":[2],"
	    "\"data_offsets\":[8,12]}}";
	char file[256];
	size_t n = sizeof(two) - 1, i;

	/* 8-byte little-endian header length, the header, 12 data bytes. */
	file[0] = 0;
	for (i = 0; i < 8; i++)
		file[1 + i] = (char)(uint8_t)((uint64_t)n >> (8 * i));
	memcpy(file + 9, two, n);
	memset(file + 9 + n, 'd', 12);
	return (seed(dir, "two-tensors", 12 << 1 | 1, two) ||
	    seed(dir, "metadata", 4 << 1 | 1, "{\"__metadata__\":{\"format\":"
	    "\"pt\"},\"w\":{\"dtype\":\"U8\",\"shape\":[4],"
	    "\"data_offsets\":[0,4]}}") ||
	    seed(dir, "escaped-name", 2 << 1 | 1, "{\"\\u0041\\\"b\":{\"dtype\":"
	    "\"U8\",\"shape\":[2],\"data_offsets\":[0,2]}}") ||
	    seed(dir, "empty-header", 1, "{}") ||
	    seed(dir, "overlapping", 16 << 1 | 1, "{\"a\":{\"dtype\":\"U8\","
	    "\"shape\":[8],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"U8\","
	    "\"shape\":[8],\"data_offsets\":[4,12]}}") ||
	    seed(dir, "huge-offsets", 127 << 1 | 1, "{\"a\":{\"dtype\":\"U8\","
	    "\"shape\":[1],\"data_offsets\":[0,18446744073709551615]}}") ||
	    seed(dir, "truncated-json", 1, "{\"a\":{\"dtype\":\"F32\",\"sha") ||
	    fuzz_write_seed(dir, "whole-file", file, 9 + n + 12) ? -1 : 0);
}
#endif
