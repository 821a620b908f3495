/*
 * The read cache of a store where a request costs a round trip (S3,
 * rclone): a read smaller than a block fetches the whole aligned block
 * it falls in, kept for every thread's later reads.  Restore and verify
 * read a pack's records one at a time, from several threads, in an order
 * that is only roughly the pack's: one ranged request a record would
 * cost a round trip per chunk (thousands a pack).  Blocks are aligned so
 * that threads reading near one another share them, and few, so that
 * memory stays at nblocks * block however many objects are open.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store-int.h"

enum { EMPTY, FILLING, READY };

/* Blocks after the one a thread waits for that it fetches meanwhile. */
#define AHEAD 3

struct block {
	char name[STORAGE_NAME_MAX + 1];
	uint64_t size;			/* the object's, as opened */
	uint64_t k;			/* which block of it */
	size_t len;			/* bytes in buf */
	unsigned char *buf;		/* block bytes, made on first use */
	int state;
	unsigned pins;			/* readers copying out of it */
	uint64_t used;			/* for the least recently used */
};

struct storage_blocks {
	pthread_mutex_t mu;
	pthread_cond_t cv;		/* a fill ended, or a pin went */
	size_t block;
	unsigned n;
	uint64_t tick;
	struct block *v;
};

struct storage_blocks *
storage_blocks_new(size_t block, unsigned n)
{
	struct storage_blocks *b;

	if ((b = calloc(1, sizeof(*b))) == NULL ||
	    (b->v = calloc(n, sizeof(*b->v))) == NULL) {
		free(b);
		return (NULL);
	}
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->cv, NULL);
	b->block = block;
	b->n = n;
	return (b);
}

void
storage_blocks_free(struct storage_blocks *b)
{
	unsigned i;

	if (b == NULL)
		return;
	for (i = 0; i < b->n; i++)
		free(b->v[i].buf);
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->cv);
	free(b->v);
	free(b);
}

size_t
storage_blocks_size(const struct storage_blocks *b)
{
	return (b->block);
}

void
storage_blocks_forget(struct storage_blocks *b, const char *name)
{
	unsigned i;

	if (b == NULL)
		return;
	pthread_mutex_lock(&b->mu);
	/* A block being filled is marked to go once it is done (its
	 * filler finds its name changed and leaves it empty). */
	for (i = 0; i < b->n; i++)
		if (b->v[i].state != EMPTY && strcmp(b->v[i].name, name) == 0)
			b->v[i].name[0] = '\0';
	pthread_mutex_unlock(&b->mu);
}

/* The block k of o, when it is cached or being filled, else NULL. */
static struct block *
find(struct storage_blocks *b, const struct storage_obj *o, uint64_t k)
{
	unsigned i;

	for (i = 0; i < b->n; i++) {
		struct block *e = &b->v[i];

		if (e->state != EMPTY && e->k == k && e->size == o->size &&
		    strcmp(e->name, o->name) == 0)
			return (&b->v[i]);
	}
	return (NULL);
}

/* A block to fill: an empty one, else the least recently used that no
 * one uses and that is not one of blocks lo..hi of o; NULL if none. */
static struct block *
victim(struct storage_blocks *b, const struct storage_obj *o, uint64_t lo,
    uint64_t hi)
{
	struct block *v = NULL;
	unsigned i;

	for (i = 0; i < b->n; i++) {
		struct block *e = &b->v[i];

		if (e->state == FILLING || e->pins > 0 || (e->state == READY &&
		    e->k >= lo && e->k <= hi && e->size == o->size &&
		    strcmp(e->name, o->name) == 0))
			continue;
		if (v == NULL || e->state < v->state ||
		    (e->state == v->state && e->used < v->used))
			v = e;
	}
	return (v);
}

/* Block e filled with block k of o, unlocked meanwhile: READY, or EMPTY
 * when the read failed (-1, storage_fail said why) or o was forgotten
 * while it was read (0, good for the caller's read only). */
static int
fill(struct storage_blocks *b, struct storage_obj *o, struct block *e,
    uint64_t k)
{
	size_t want;
	int rc;

	snprintf(e->name, sizeof(e->name), "%s", o->name);
	e->size = o->size;
	e->k = k;
	e->state = FILLING;
	pthread_mutex_unlock(&b->mu);
	want = o->size - k * b->block < b->block ?
	    (size_t)(o->size - k * b->block) : b->block;
	if (e->buf == NULL && (e->buf = malloc(b->block)) == NULL)
		rc = storage_fail(ENOMEM, "out of memory");
	else
		rc = storage_read_on(o, k * b->block, e->buf, want, &e->len);
	pthread_mutex_lock(&b->mu);
	pthread_cond_broadcast(&b->cv);
	e->state = rc == 0 && strcmp(e->name, o->name) == 0 ? READY : EMPTY;
	e->used = ++b->tick;
	return (rc);
}

/*
 * While another thread fills block k of o, one of the next AHEAD blocks
 * that is neither cached nor being filled is filled by this one: the
 * threads of a restore reading near one another keep several requests
 * in flight rather than waiting in turn on one.  1 if it filled one.
 */
static int
fill_ahead(struct storage_blocks *b, struct storage_obj *o, uint64_t k)
{
	struct block *e;
	uint64_t j;

	for (j = k + 1; j <= k + AHEAD && j * b->block < o->size; j++) {
		if (find(b, o, j) != NULL)
			continue;
		if ((e = victim(b, o, k, k + AHEAD)) == NULL)
			return (0);
		(void)fill(b, o, e, j);	/* a failure is the reader's */
		return (1);
	}
	return (0);
}

/* The block k of o, ready and pinned; NULL when it cannot be read
 * (storage_fail said why).  Called and returns with b->mu held. */
static struct block *
take(struct storage_blocks *b, struct storage_obj *o, uint64_t k)
{
	struct block *e;

	for (;;) {
		if ((e = find(b, o, k)) != NULL && e->state == READY)
			break;
		if (e == NULL && (e = victim(b, o, k, k + AHEAD)) != NULL) {
			if (fill(b, o, e, k))
				return (NULL);
			break;
		}
		/* Being filled by another thread, or every block in use:
		 * wait for a change, fetching ahead meanwhile. */
		if (e == NULL || !fill_ahead(b, o, k))
			pthread_cond_wait(&b->cv, &b->mu);
	}
	e->pins++;
	e->used = ++b->tick;
	return (e);
}

int
storage_blocks_read(struct storage_blocks *b, struct storage_obj *o,
    uint64_t off, void *buf, size_t len, size_t *got)
{
	struct block *e;
	uint64_t at;
	size_t in, n;

	*got = 0;
	if (off >= o->size)
		return (0);
	if (len > o->size - off)
		len = (size_t)(o->size - off);
	pthread_mutex_lock(&b->mu);
	while (*got < len) {
		at = off + *got;
		if ((e = take(b, o, at / b->block)) == NULL) {
			pthread_mutex_unlock(&b->mu);
			return (-1);
		}
		in = (size_t)(at % b->block);
		n = in < e->len ? e->len - in : 0;
		if (n > len - *got)
			n = len - *got;
		/* Copied unlocked: a pinned block is neither refilled nor
		 * freed. */
		pthread_mutex_unlock(&b->mu);
		memcpy((char *)buf + *got, e->buf + in, n);
		pthread_mutex_lock(&b->mu);
		if (--e->pins == 0)
			pthread_cond_broadcast(&b->cv);
		if (n == 0)
			break;		/* the object ended before its size */
		*got += n;
	}
	pthread_mutex_unlock(&b->mu);
	return (0);
}
