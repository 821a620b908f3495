/*
 * FastCDC chunker: determinism across buffering, size bounds, boundary
 * resynchronization after an insertion, key dependence, end of stream.
 * COFFER_TEST_SMALL=1 shrinks the data sets (for sanitizer builds).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coffer/chunk.h"
#include "tap.h"
#include "testutil.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

static int small;

/* Boundaries (chunk lengths) of one chunking run. */
struct cuts {
	size_t *len;
	size_t n, cap;
};

static uint64_t
splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (z ^ (z >> 31));
}

static uint8_t *
random_bytes(size_t n, uint64_t seed)
{
	uint8_t *p = malloc(n ? n : 1);
	uint64_t v;
	size_t i;

	if (p == NULL) {
		fprintf(stderr, "out of memory (%zu bytes)\n", n);
		exit(2);
	}
	for (i = 0; i + 8 <= n; i += 8) {
		v = splitmix(&seed);
		memcpy(p + i, &v, 8);
	}
	for (v = splitmix(&seed); i < n; i++, v >>= 8)
		p[i] = (uint8_t)v;
	return (p);
}

static void
cuts_push(struct cuts *c, size_t len)
{
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 256;
		if ((c->len = realloc(c->len, c->cap * sizeof(*c->len))) ==
		    NULL) {
			fprintf(stderr, "out of memory\n");
			exit(2);
		}
	}
	c->len[c->n++] = len;
}

static void
cuts_free(struct cuts *c)
{
	free(c->len);
	memset(c, 0, sizeof(*c));
}

/* Chunk a buffer that is all in memory, eof set throughout. */
static void
chunk_all(const struct chunker *ch, const uint8_t *p, size_t n,
    struct cuts *out)
{
	size_t off = 0, k;

	while (off < n) {
		k = chunker_next(ch, p + off, n - off, 1);
		if (k == 0 || k > n - off) {
			fprintf(stderr, "chunker_next returned %zu\n", k);
			exit(2);
		}
		cuts_push(out, k);
		off += k;
	}
}

/*
 * Chunk as a reader would: a window that grows by refill bytes (or by a
 * random amount in [1, refill] when jitter is set) until the chunker can
 * decide, without eof until the source is exhausted; with resume, each
 * call goes on from where the last one stopped.  The window lives in
 * an exactly sized heap copy, so ASan catches any read beyond len.
 */
static void
chunk_stream(const struct chunker *ch, const uint8_t *src, size_t n,
    size_t refill, int jitter, int resume, struct cuts *out)
{
	uint64_t seed = refill;
	size_t start = 0, have = 0, k, add, scanned = 0;
	uint8_t *win = malloc(1), *cur = win;

	for (;;) {
		int eof = start + have == n;

		k = resume ? chunker_next_resume(ch, cur, have, eof, &scanned) :
		    chunker_next(ch, cur, have, eof);
		if (k == 0 && eof)
			break;
		if (k == 0) {
			add = jitter ? 1 + splitmix(&seed) % refill : refill;
			if (add > n - start - have)
				add = n - start - have;
			have += add;
			free(win);
			if ((win = malloc(have)) == NULL) {
				fprintf(stderr, "out of memory\n");
				exit(2);
			}
			memcpy(win, src + start, have);
			cur = win;
			continue;
		}
		cuts_push(out, k);
		start += k;
		have -= k;
		cur += k;
	}
	free(win);
}

static int
cuts_equal(const struct cuts *a, const struct cuts *b)
{
	return (a->n == b->n &&
	    memcmp(a->len, b->len, a->n * sizeof(*a->len)) == 0);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x < y ? -1 : x > y);
}

/* Fraction of a's chunks (by content hash) that also occur in b. */
static double
shared_fraction(const uint8_t *pa, const struct cuts *a, const uint8_t *pb,
    const struct cuts *b)
{
	uint64_t *hb = malloc((b->n ? b->n : 1) * sizeof(*hb));
	size_t i, off, found = 0;
	uint64_t h;

	for (i = 0, off = 0; i < b->n; off += b->len[i++])
		hb[i] = fnv1a(pb + off, b->len[i]);
	qsort(hb, b->n, sizeof(*hb), cmp_u64);
	for (i = 0, off = 0; i < a->n; off += a->len[i++]) {
		h = fnv1a(pa + off, a->len[i]);
		if (bsearch(&h, hb, b->n, sizeof(*hb), cmp_u64))
			found++;
	}
	free(hb);
	return (a->n ? (double)found / a->n : 0);
}

static int
bounds_ok(const struct chunker_params *p, const struct cuts *c)
{
	size_t i;

	for (i = 0; i < c->n; i++) {
		if (c->len[i] > p->max || c->len[i] == 0)
			return (0);
		/* Only the last chunk may end before min. */
		if (i + 1 < c->n && c->len[i] <= p->min)
			return (0);
	}
	return (1);
}

static void
test_params(void)
{
	struct chunker_params p, q;

	chunker_params_default(&p);
	ok(p.min == 512 * KiB && p.avg == 1 * MiB && p.max == 8 * MiB,
	    "defaults are 512 KiB / 1 MiB / 8 MiB");
	ok(chunker_params_check(&p) == 0, "defaults pass the check");
	q = p;
	q.avg = 1000 * 1000;
	ok(chunker_params_check(&q) == -1, "avg not a power of two refused");
	q = p;
	q.min = 63;
	q.avg = 128;
	ok(chunker_params_check(&q) == -1, "min below 64 refused");
	q.min = 64;
	ok(chunker_params_check(&q) == 0, "min 64 avg 128 accepted");
	q = p;
	q.max = 64 * MiB + 1;
	ok(chunker_params_check(&q) == -1, "max above 64 MiB refused");
	q.max = 64 * MiB;
	ok(chunker_params_check(&q) == 0, "max 64 MiB accepted");
	q = p;
	q.min = q.avg;
	ok(chunker_params_check(&q) == -1, "min == avg refused");
	q = p;
	q.max = q.avg;
	ok(chunker_params_check(&q) == -1, "avg == max refused");
	ok(chunker_new(&q, (const uint8_t *)"0123456789abcdef0123456789abcdef")
	    == NULL, "chunker_new refuses bad parameters");
}

static void
test_determinism(const struct chunker_params *p, const uint8_t *key,
    const char *what, size_t n)
{
	struct chunker *ch = chunker_new(p, key), *ch2 = chunker_new(p, key);
	struct cuts whole = { 0 }, again = { 0 }, s1 = { 0 }, s2 = { 0 },
	    s3 = { 0 }, s4 = { 0 }, s5 = { 0 }, s6 = { 0 };
	uint8_t *data = random_bytes(n, 1);

	chunk_all(ch, data, n, &whole);
	chunk_all(ch2, data, n, &again);
	ok(cuts_equal(&whole, &again),
	    "%s: same data and key give the same boundaries", what);
	chunk_stream(ch, data, n, 100 * KiB, 0, 0, &s1);
	chunk_stream(ch, data, n, 1 * MiB, 0, 0, &s2);
	chunk_stream(ch, data, n, n, 0, 0, &s3);
	chunk_stream(ch, data, n, p->avg / 3 + 1, 1, 0, &s4);
	chunk_stream(ch, data, n, 100 * KiB, 0, 1, &s5);
	chunk_stream(ch, data, n, p->avg / 7 + 1, 1, 1, &s6);
	ok(cuts_equal(&whole, &s1), "%s: 100 KiB refills match", what);
	ok(cuts_equal(&whole, &s2), "%s: 1 MiB refills match", what);
	ok(cuts_equal(&whole, &s3), "%s: whole-buffer read matches", what);
	ok(cuts_equal(&whole, &s4), "%s: random refill sizes match", what);
	ok(cuts_equal(&whole, &s5), "%s: resumed 100 KiB refills match",
	    what);
	ok(cuts_equal(&whole, &s6), "%s: resumed random refills match", what);
	ok(bounds_ok(p, &whole), "%s: %zu chunks within min/max", what,
	    whole.n);
	cuts_free(&whole);
	cuts_free(&again);
	cuts_free(&s1);
	cuts_free(&s2);
	cuts_free(&s3);
	cuts_free(&s4);
	cuts_free(&s5);
	cuts_free(&s6);
	free(data);
	chunker_free(ch);
	chunker_free(ch2);
}

static void
test_sizes(const struct chunker_params *p, const uint8_t *key,
    const char *what, size_t n)
{
	struct chunker *ch = chunker_new(p, key);
	struct cuts c = { 0 };
	uint8_t *data = random_bytes(n, 2);
	double mean;
	size_t i;

	chunk_all(ch, data, n, &c);
	ok(bounds_ok(p, &c), "%s: min/max respected on %zu chunks", what,
	    c.n);
	/* The last chunk is cut by eof, not by content: leave it out. */
	mean = c.n > 1 ? (double)(n - c.len[c.n - 1]) / (c.n - 1) : 0;
	diag("%s: %zu chunks, mean %.0f bytes (avg %u)", what, c.n, mean,
	    p->avg);
	ok(mean >= p->avg / 2.0 && mean <= p->avg * 2.0,
	    "%s: mean chunk size within a factor 2 of avg", what);
	cuts_free(&c);

	/*
	 * A run of zeros has no content to cut on: the chunks must still be
	 * bounded and, the hash being periodic there, all alike.
	 */
	memset(data, 0, n);
	chunk_all(ch, data, n, &c);
	for (i = 1; i + 1 < c.n && c.len[i] == c.len[0]; i++)
		;
	ok(bounds_ok(p, &c) && i + 1 >= c.n,
	    "%s: zeros give %zu equal chunks of %zu bytes", what, c.n,
	    c.n ? c.len[0] : 0);
	cuts_free(&c);
	free(data);
	chunker_free(ch);
}

static void
test_resync(const struct chunker_params *p, const uint8_t *key,
    const char *what, size_t n)
{
	struct chunker *ch = chunker_new(p, key);
	struct cuts a = { 0 }, b = { 0 };
	uint8_t *orig = random_bytes(n, 3);
	uint8_t *ins = random_bytes(100, 4);
	uint8_t *mod = malloc(n + 100);
	double f;

	memcpy(mod, orig, 1000);
	memcpy(mod + 1000, ins, 100);
	memcpy(mod + 1100, orig + 1000, n - 1000);
	chunk_all(ch, orig, n, &a);
	chunk_all(ch, mod, n + 100, &b);
	f = shared_fraction(orig, &a, mod, &b);
	ok(f >= 0.9, "%s: %.1f%% of %zu chunks survive a 100-byte insertion",
	    what, 100 * f, a.n);
	cuts_free(&a);
	cuts_free(&b);
	free(orig);
	free(ins);
	free(mod);
	chunker_free(ch);
}

static void
test_keys(const struct chunker_params *p, const uint8_t *key1,
    const uint8_t *key2, const char *what, size_t n)
{
	struct chunker *c1 = chunker_new(p, key1), *c2 = chunker_new(p, key2);
	struct cuts a = { 0 }, b = { 0 };
	uint8_t *data = random_bytes(n, 5);
	size_t i, j, oa, ob, same = 0;

	chunk_all(c1, data, n, &a);
	chunk_all(c2, data, n, &b);
	/* Count boundary offsets common to both runs (both lists sorted). */
	for (i = j = 0, oa = ob = 0; i < a.n && j < b.n;) {
		if (oa + a.len[i] == ob + b.len[j]) {
			same++;
			oa += a.len[i++];
			ob += b.len[j++];
		} else if (oa + a.len[i] < ob + b.len[j]) {
			oa += a.len[i++];
		} else {
			ob += b.len[j++];
		}
	}
	/* The final eof cut is shared by construction. */
	ok(a.len[0] != b.len[0] && same <= 1 + a.n / 20,
	    "%s: another key moves the boundaries (%zu of %zu shared)", what,
	    same, a.n);
	cuts_free(&a);
	cuts_free(&b);
	free(data);
	chunker_free(c1);
	chunker_free(c2);
}

static void
test_eof(const struct chunker_params *p, const uint8_t *key)
{
	struct chunker *ch = chunker_new(p, key);
	uint8_t *data = random_bytes(p->max + 1, 6);
	size_t k;

	ok(chunker_next(ch, data, 0, 1) == 0, "empty input at eof gives 0");
	ok(chunker_next(ch, data, 0, 0) == 0, "empty input asks for more");
	ok(chunker_next(ch, NULL, 0, 1) == 0, "NULL empty input gives 0");
	ok(chunker_next(ch, data, 1, 1) == 1, "one byte at eof is a chunk");
	ok(chunker_next(ch, data, p->min, 1) == p->min,
	    "a tail of exactly min bytes is one chunk at eof");
	ok(chunker_next(ch, data, p->min - 1, 1) == p->min - 1,
	    "a tail shorter than min is one chunk at eof");
	ok(chunker_next(ch, data, p->min - 1, 0) == 0,
	    "a short tail without eof asks for more");
	k = chunker_next(ch, data, p->max + 1, 0);
	ok(k > p->min && k <= p->max, "a full window cuts in (min, max]");
	ok(chunker_next(ch, data, k, 0) == k && chunker_next(ch, data, k, 1)
	    == k, "the cut does not depend on bytes after it");
	ok(chunker_next(ch, data, k - 1, 0) == 0 &&
	    chunker_next(ch, data, k - 1, 1) == k - 1,
	    "one byte short of the cut: more data, or all at eof");
	free(data);
	chunker_free(ch);
}

static void
test_throughput(const struct chunker_params *p, const uint8_t *key, size_t n)
{
	struct chunker *ch = chunker_new(p, key);
	uint8_t *data = random_bytes(n, 7);
	struct timespec t0, t1;
	size_t off = 0, chunks = 0, k, hashed = 0;
	double s;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (off < n) {
		k = chunker_next(ch, data + off, n - off, 1);
		off += k;
		chunks++;
		/* Bytes below min are skipped, not hashed. */
		hashed += k > p->min ? k - p->min : 0;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (s <= 0)
		s = 1e-9;
	diag("chunker_next: %zu MiB in %zu chunks, %.3f s, %.0f MB/s "
	    "(%.0f MB/s of hashed bytes)", n / MiB, chunks, s, n / s / 1e6,
	    hashed / s / 1e6);
	free(data);
	chunker_free(ch);
}

int
main(void)
{
	/* 33 bytes: room for the literal's NUL; the chunker reads 32. */
	static const uint8_t key1[33] = "coffer chunker test key number 1";
	static const uint8_t key2[33] = "coffer chunker test key number 2";
	static const uint8_t zero[32];
	struct chunker_params def, tiny;
	const char *e = getenv("COFFER_TEST_SMALL");
	size_t div;

	small = e && *e && strcmp(e, "0") != 0;
	div = small ? 8 : 1;
	chunker_params_default(&def);
	/* Small sizes give thousands of chunks: tighter statistics. */
	tiny.min = 2 * KiB;
	tiny.avg = 8 * KiB;
	tiny.max = 64 * KiB;

	test_params();
	test_determinism(&def, key1, "default", 32 * MiB / div);
	test_determinism(&tiny, key1, "8 KiB", 4 * MiB / div);
	test_sizes(&def, key1, "default", 64 * MiB / div);
	test_sizes(&tiny, key1, "8 KiB", 16 * MiB / div);
	test_sizes(&tiny, zero, "8 KiB zero key", 4 * MiB / div);
	test_resync(&def, key1, "default", 32 * MiB);
	test_resync(&tiny, key1, "8 KiB", 8 * MiB / div);
	test_keys(&def, key1, key2, "default", 32 * MiB / div);
	test_keys(&tiny, key1, key2, "8 KiB", 8 * MiB / div);
	test_keys(&tiny, zero, key1, "8 KiB zero key", 8 * MiB / div);
	test_eof(&def, key1);
	test_eof(&tiny, key1);
	test_throughput(&def, key1, 256 * MiB / div);
	return (tap_done());
}
