#include <stdlib.h>
#include <string.h>

#include "coffer/hmap.h"
#include "coffer/log.h"

void
hmap_init(struct hmap *m, size_t keylen)
{
	memset(m, 0, sizeof(*m));
	m->keylen = keylen;
}

void
hmap_release(struct hmap *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	hmap_init(m, m->keylen);
}

void
hmap_clear(struct hmap *m)
{
	if (m->used)
		memset(m->used, 0, m->cap);
	m->count = 0;
}

static uint64_t
hash(const uint8_t *k, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= k[i];
		h *= 0x100000001b3ull;
	}
	return (h ^ (h >> 29));
}

static size_t
find(const struct hmap *m, const void *key)
{
	size_t i = (size_t)hash(key, m->keylen) & (m->cap - 1);

	while (m->used[i] &&
	    memcmp(m->keys + i * m->keylen, key, m->keylen) != 0)
		i = (i + 1) & (m->cap - 1);
	return (i);
}

int
hmap_get(const struct hmap *m, const void *key, int64_t *val)
{
	size_t i;

	if (m->count == 0)
		return (0);
	i = find(m, key);
	if (!m->used[i])
		return (0);
	*val = m->vals[i];
	return (1);
}

static int
grow(struct hmap *m)
{
	struct hmap n;
	size_t i, j;

	hmap_init(&n, m->keylen);
	n.cap = m->cap ? m->cap * 2 : 1024;
	n.keys = calloc(n.cap, m->keylen);
	n.vals = calloc(n.cap, sizeof(*n.vals));
	n.used = calloc(n.cap, 1);
	if (n.keys == NULL || n.vals == NULL || n.used == NULL) {
		hmap_release(&n);
		log_error("out of memory");
		return (-1);
	}
	for (i = 0; i < m->cap; i++) {
		if (!m->used[i])
			continue;
		j = find(&n, m->keys + i * m->keylen);
		memcpy(n.keys + j * m->keylen, m->keys + i * m->keylen,
		    m->keylen);
		n.vals[j] = m->vals[i];
		n.used[j] = 1;
	}
	n.count = m->count;
	hmap_release(m);
	*m = n;
	return (0);
}

int
hmap_put(struct hmap *m, const void *key, int64_t val)
{
	size_t i;

	if ((m->count + 1) * 4 > m->cap * 3 && grow(m))
		return (-1);
	i = find(m, key);
	if (!m->used[i]) {
		memcpy(m->keys + i * m->keylen, key, m->keylen);
		m->used[i] = 1;
		m->count++;
	}
	m->vals[i] = val;
	return (0);
}
