#ifndef COFFER_HMAP_H
#define COFFER_HMAP_H

#include <stddef.h>
#include <stdint.h>

/*
 * An open-addressing hash map from fixed-length byte keys (up to 32 bytes)
 * to an int64 value.  Keys are expected to be well distributed or short;
 * they are hashed with FNV-1a, so hostile keys only cost time.
 */
struct hmap {
	size_t keylen;
	size_t cap;		/* slots, a power of two */
	size_t count;
	uint8_t *keys;		/* cap * keylen */
	int64_t *vals;
	uint8_t *used;
};

void hmap_init(struct hmap *m, size_t keylen);
void hmap_release(struct hmap *m);
/* Remove every key; keep the memory. */
void hmap_clear(struct hmap *m);
/* 1 and *val if present, else 0. */
int hmap_get(const struct hmap *m, const void *key, int64_t *val);
/* Insert or replace.  0, or -1 on ENOMEM (reported). */
int hmap_put(struct hmap *m, const void *key, int64_t val);

#endif
