/*
 * FastCDC content-defined chunking (Xia et al., USENIX ATC 2016 and IEEE
 * TPDS 2020): a gear rolling hash, cut-point skipping below min and
 * normalized chunking at level 2.
 *
 * The gear table is derived from the secret chunker key, so the cut points
 * (and thus the chunk sizes an observer of the packs sees) depend on the key
 * and cannot be predicted from the plaintext alone.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/chunk.h"
#include "coffer/log.h"

#define KiB (1024u)
#define MiB (1024u * 1024u)

#define CHUNKER_MIN_LIMIT 64u
#define CHUNKER_MAX_LIMIT (64u * MiB)

/*
 * Level 2 normalization: two more mask bits than log2(avg) before avg, two
 * fewer after it.  The paper's measurements put the best trade-off between
 * dedup ratio and size spread at level 2 or 3.
 */
#define CHUNKER_NC_LEVEL 2

struct chunker {
	uint64_t gear[256];
	uint64_t mask_s;	/* stricter mask, used for [min, avg) */
	uint64_t mask_l;	/* looser mask, used for [avg, max) */
	size_t min;
	size_t avg;
	size_t max;
};

void
chunker_params_default(struct chunker_params *p)
{
	/*
	 * restic's sizes: with 1 MiB average a 1 TiB dataset is about a
	 * million chunks, which keeps the catalog and the pack indexes small
	 * while still deduplicating appended and shifted data well.
	 */
	p->min = 512 * KiB;
	p->avg = 1 * MiB;
	p->max = 8 * MiB;
}

int
chunker_params_check(const struct chunker_params *p)
{
	if (p->min < CHUNKER_MIN_LIMIT || p->max > CHUNKER_MAX_LIMIT)
		return (-1);
	if (!(p->min < p->avg && p->avg < p->max))
		return (-1);
	if ((p->avg & (p->avg - 1)) != 0)
		return (-1);
	return (0);
}

/* SplitMix64's finalizer: a bijection on 64 bits with full avalanche. */
static uint64_t
mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (z ^ (z >> 31));
}

static uint64_t
rotl64(uint64_t x, int k)
{
	return ((x << k) | (x >> (64 - k)));
}

/* xoshiro256** (Blackman and Vigna): 256 bits of state, the key's size. */
static uint64_t
xoshiro_next(uint64_t s[4])
{
	uint64_t r = rotl64(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;

	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl64(s[3], 45);
	return (r);
}

static uint64_t
load_le64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return (v);
}

/*
 * Expand the 32-byte key into the gear table.  This is not a cryptographic
 * PRF and need not be one: the key is a dedicated subkey used for nothing
 * else, and what must stay secret is the table itself.  What matters is
 * that all 256 key bits reach every entry (so distinct keys give unrelated
 * tables) and that entries look uniformly random (so cut points are
 * evenly spread).  Each key word is passed through the SplitMix64
 * finalizer (so zero or low-entropy keys still give a well-mixed state),
 * and the first outputs of xoshiro256** are discarded so that each
 * state word depends on all four key words before the table is drawn.
 */
static void
gear_init(uint64_t gear[256], const uint8_t *key)
{
	uint64_t s[4];
	int i;

	for (i = 0; i < 4; i++)
		s[i] = mix64(load_le64(key + 8 * i) +
		    (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL);
	/* xoshiro's one forbidden state; unreachable but cheap to rule out. */
	if ((s[0] | s[1] | s[2] | s[3]) == 0)
		s[0] = 0x9e3779b97f4a7c15ULL;
	for (i = 0; i < 32; i++)
		(void)xoshiro_next(s);
	for (i = 0; i < 256; i++)
		gear[i] = mix64(xoshiro_next(s));
}

/*
 * A mask of the top nbits bits.  The gear hash shifts left by one per byte,
 * so bit k of the hash depends on the last k + 1 bytes only: the top bits
 * are the ones that see the whole 64-byte window, and testing them (rather
 * than the low bits of the 2016 paper) makes a cut depend on a full window.
 * The looser mask is then a subset of the stricter one, so a point that
 * passes before avg would also pass after it.
 */
static uint64_t
top_mask(unsigned int nbits)
{
	return (~(uint64_t)0 << (64 - nbits));
}

struct chunker *
chunker_new(const struct chunker_params *p, const uint8_t *key)
{
	struct chunker *c;
	unsigned int bits;

	if (chunker_params_check(p)) {
		log_error("invalid chunker parameters min %u avg %u max %u",
		    p->min, p->avg, p->max);
		return (NULL);
	}
	if ((c = malloc(sizeof(*c))) == NULL) {
		log_error("out of memory (%zu bytes)", sizeof(*c));
		return (NULL);
	}
	for (bits = 0; (1u << bits) < p->avg; bits++)
		;
	gear_init(c->gear, key);
	c->mask_s = top_mask(bits + CHUNKER_NC_LEVEL);
	c->mask_l = top_mask(bits - CHUNKER_NC_LEVEL);
	c->min = p->min;
	c->avg = p->avg;
	c->max = p->max;
	return (c);
}

void
chunker_free(struct chunker *c)
{
	if (c == NULL)
		return;
	/* The table is secret-derived: do not leave it in freed memory. */
	explicit_bzero(c, sizeof(*c));
	free(c);
}

/*
 * The hash restarts at min with no warm-up, as in the paper: bytes before
 * min never influence the cut, so the first min bytes are not even read.
 * Every decision depends only on data[0..i], which is what makes the result
 * independent of how much the caller has buffered beyond the cut.
 */
size_t
chunker_next(const struct chunker *c, const uint8_t *data, size_t len,
    int eof)
{
	size_t scanned = 0;

	return (chunker_next_resume(c, data, len, eof, &scanned));
}

/*
 * The fingerprint is a 64-bit shift register: a byte's contribution is
 * shifted out 64 bytes later, so the state at any position is the hash of
 * the 64 bytes before it, and a scan resumes exactly where it stopped.
 */
size_t
chunker_next_resume(const struct chunker *c, const uint8_t *data,
    size_t len, int eof, size_t *scanned)
{
	const uint64_t *gear = c->gear;
	uint64_t fp = 0;
	uint64_t mask;
	size_t i, end, limit;

	if (len <= c->min)
		return (eof ? len : 0);
	limit = len < c->max ? len : c->max;

	i = *scanned > c->min ? *scanned : c->min;
	for (end = i > c->min + 64 ? i - 64 : c->min; end < i; end++)
		fp = (fp << 1) + gear[data[end]];
	end = limit < c->avg ? limit : c->avg;
	mask = c->mask_s;
	for (; i < end; i++) {
		fp = (fp << 1) + gear[data[i]];
		if (!(fp & mask))
			goto cut;
	}
	mask = c->mask_l;
	for (; i < limit; i++) {
		fp = (fp << 1) + gear[data[i]];
		if (!(fp & mask))
			goto cut;
	}
	if (limit == c->max || eof) {
		*scanned = 0;
		return (limit);
	}
	*scanned = limit;
	return (0);
cut:
	*scanned = 0;
	return (i + 1);
}
