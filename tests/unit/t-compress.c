/*
 * zstd wrapper: round trips, the store-raw decision, and decompression of
 * hostile frames (corrupted, truncated, wrong size, size bombs).  Every
 * output buffer is exactly sized so that ASan sees any overrun.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zstd.h>

#include "coffer/chunk.h"
#include "tap.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)

static uint64_t
splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (z ^ (z >> 31));
}

static void *
xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL) {
		fprintf(stderr, "out of memory (%zu bytes)\n", n);
		exit(2);
	}
	return (p);
}

static uint8_t *
random_bytes(size_t n, uint64_t seed)
{
	uint8_t *p = xmalloc(n);
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)splitmix(&seed);
	return (p);
}

/* Log-like text from a small vocabulary: compresses, but not trivially. */
static uint8_t *
text_bytes(size_t n, uint64_t seed)
{
	static const char *const words[] = {
		"epoch", "step", "loss", "checkpoint", "shard", "tensor",
		"gradient", "learning", "rate", "warmup", "saved", "to",
		"/ckpt/llama", "rank", "node", "the", "of", "and", "batch",
	};
	uint8_t *p = xmalloc(n);
	size_t i = 0, w;
	char num[32];

	while (i < n) {
		uint64_t r = splitmix(&seed);
		const char *s;

		if (r % 5 == 0) {
			snprintf(num, sizeof(num), "%u",
			    (unsigned int)(r >> 40) % 100000);
			s = num;
		} else {
			s = words[(r >> 8) % (sizeof(words) / sizeof(*words))];
		}
		for (w = 0; s[w] && i < n; w++)
			p[i++] = (uint8_t)s[w];
		if (i < n)
			p[i++] = (r >> 20) % 11 == 0 ? '\n' : ' ';
	}
	return (p);
}

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec + t.tv_nsec / 1e9);
}

/* Compress src; the result is an exactly sized heap copy of the frame. */
static uint8_t *
frame_of(struct compressor *z, const uint8_t *src, size_t n, size_t *len)
{
	size_t cap = compressor_bound(n), r;
	uint8_t *dst = xmalloc(cap), *f;

	r = compressor_compress(z, src, n, dst, cap);
	if (r == 0 || r == (size_t)-1) {
		free(dst);
		*len = 0;
		return (NULL);
	}
	f = xmalloc(r);
	memcpy(f, dst, r);
	free(dst);
	*len = r;
	return (f);
}

static void
test_roundtrip(struct compressor *z, size_t n)
{
	uint8_t *text = text_bytes(n, 1), *out = xmalloc(n), *f;
	size_t flen;

	f = frame_of(z, text, n, &flen);
	ok(f != NULL && flen < n / 2, "text: %zu bytes compress to %zu", n,
	    flen);
	ok(f && compressor_decompress(z, f, flen, out, n) == 0 &&
	    memcmp(out, text, n) == 0, "text: %zu bytes round trip", n);
	free(f);
	free(out);
	free(text);
}

static void
test_small(struct compressor *z)
{
	static const char s[] = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
	uint8_t dst[256], out[sizeof(s)];
	size_t r;

	ok(compressor_compress(z, s, 0, dst, sizeof(dst)) == 0,
	    "empty input is stored raw");
	ok(compressor_compress(z, s, 5, dst, sizeof(dst)) == 0,
	    "5 bytes are stored raw (frame overhead)");
	r = compressor_compress(z, s, sizeof(s), dst, sizeof(dst));
	ok(r > 0 && r < sizeof(s) &&
	    compressor_decompress(z, dst, r, out, sizeof(s)) == 0 &&
	    memcmp(out, s, sizeof(s)) == 0,
	    "%zu repeated bytes below the sampling size round trip",
	    sizeof(s));
	ok(compressor_decompress(z, dst, r, out, 0) == -1,
	    "decompress into 0 bytes refused");
}

static void
test_random(struct compressor *z, size_t n)
{
	uint8_t *rnd = random_bytes(n, 2), *dst;
	size_t cap = compressor_bound(n);

	dst = xmalloc(cap);
	ok(compressor_compress(z, rnd, n, dst, cap) == 0,
	    "random: %zu bytes are stored raw", n);
	ok(compressor_compress(z, rnd, 10000, dst, cap) == 0,
	    "random: 10000 bytes (no sampling) are stored raw");
	/*
	 * Compressible only outside the sampled slices: the sample says no,
	 * so it is stored raw.  This is the documented price of sampling.
	 */
	memset(rnd + 8 * KiB, 'x', n / 2 - 16 * KiB);
	ok(compressor_compress(z, rnd, n, dst, cap) == 0,
	    "random with a hole between the samples: stored raw");
	/* Now make the sampled head compressible too: compressed whole. */
	memset(rnd, 'x', 8 * KiB);
	ok(compressor_compress(z, rnd, n, dst, cap) > 0,
	    "compressible head and middle: compressed");
	free(dst);
	free(rnd);
}

/*
 * Small chunks are sampled (their head) only while the recent ones were
 * stored raw.  The probe: 4 KiB whose first KiB is random and the rest
 * one byte repeated.  Whole, it compresses; its head does not.
 */
static void
test_small_stream(void)
{
	struct compressor *z = compressor_new(3);
	uint8_t *probe = random_bytes(4 * KiB, 3), *text = text_bytes(4 * KiB,
	    4), *dst;
	size_t cap = compressor_bound(4 * KiB);
	int i, raw = 0, packed = 0;

	dst = xmalloc(cap);
	if (z == NULL) {
		ok(0, "compressor_new");
		goto out;
	}
	memset(probe + KiB, 'x', 3 * KiB);
	ok(compressor_compress(z, probe, 4 * KiB, dst, cap) > 0,
	    "a fresh compressor compresses the probe whole");
	for (i = 0; i < 20; i++) {
		uint8_t *r = random_bytes(4 * KiB, 100 + i);

		raw += compressor_compress(z, r, 4 * KiB, dst, cap) == 0;
		free(r);
	}
	ok(raw == 20, "20 random chunks of 4 KiB are stored raw");
	ok(compressor_compress(z, probe, 4 * KiB, dst, cap) == 0,
	    "after them, the probe's head is sampled: stored raw");
	for (i = 0; i < 20; i++)
		packed += compressor_compress(z, text, 4 * KiB, dst, cap) > 0;
	ok(packed == 20, "20 text chunks of 4 KiB are compressed");
	ok(compressor_compress(z, probe, 4 * KiB, dst, cap) > 0,
	    "after them, the probe is compressed whole again");
out:
	compressor_free(z);
	free(dst);
	free(text);
	free(probe);
}

/* A frame without a content size, as the streaming API writes it. */
static uint8_t *
frame_unknown_size(const uint8_t *src, size_t n, size_t *len)
{
	ZSTD_CCtx *cc = ZSTD_createCCtx();
	ZSTD_inBuffer in = { src, n, 0 };
	size_t cap = ZSTD_compressBound(n), r;
	ZSTD_outBuffer out = { xmalloc(cap), cap, 0 };

	/* Given all input with e_end, zstd would otherwise record the size. */
	ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
	do {
		r = ZSTD_compressStream2(cc, &out, &in, ZSTD_e_end);
	} while (!ZSTD_isError(r) && r != 0);
	ZSTD_freeCCtx(cc);
	*len = out.pos;
	return (out.dst);
}

static void
test_hostile(struct compressor *z, size_t n)
{
	uint8_t *text = text_bytes(n, 3), *out = xmalloc(n), *f, *g, *big;
	size_t flen, glen, i, bad = 0, benign = 0, silent = 0, nb, tries;
	uint8_t *tmp;
	int r;

	f = frame_of(z, text, n, &flen);
	if (f == NULL) {
		ok(0, "hostile: cannot make a frame");
		return;
	}

	/* Wrong expected sizes, both ways. */
	tmp = xmalloc(n + 1);
	ok(compressor_decompress(z, f, flen, tmp, n + 1) == -1,
	    "expect one byte too many refused");
	free(tmp);
	tmp = xmalloc(n - 1);
	ok(compressor_decompress(z, f, flen, tmp, n - 1) == -1,
	    "expect one byte too few refused");
	free(tmp);

	/*
	 * Corrupt bytes one at a time: every header byte, then a spread over
	 * the blocks (each try decompresses the whole frame, so not all).
	 * With the frame checksum, a flip either fails or (in header bits
	 * zstd does not need, such as a larger window) still yields the
	 * original bytes: never wrong data.
	 */
	g = xmalloc(flen);
	for (i = 0, tries = 0; i < flen; i += i < 256 ? 1 : 1 + flen / 2048) {
		tries++;
		memcpy(g, f, flen);
		g[i] ^= (uint8_t)(1u << (i % 8)) | 0x10;
		memset(out, 0, n);
		r = compressor_decompress(z, g, flen, out, n);
		if (r == -1)
			bad++;
		else if (memcmp(out, text, n) == 0)
			benign++;
		else
			silent++;
	}
	ok(silent == 0, "corrupting %zu of %zu bytes: %zu refused, "
	    "%zu harmless, %zu wrong output", tries, flen, bad, benign,
	    silent);
	memcpy(g, f, flen);
	g[flen / 2] ^= 0xff;
	ok(compressor_decompress(z, g, flen, out, n) == -1,
	    "a corrupted byte mid-frame is refused");
	free(g);

	/* Every truncation, in an exactly sized buffer. */
	for (i = 0, bad = 0; i < flen; i++) {
		g = xmalloc(i);
		memcpy(g, f, i);
		if (compressor_decompress(z, g, i, out, n) == -1)
			bad++;
		free(g);
	}
	ok(bad == flen, "all %zu truncations refused", flen);
	ok(compressor_decompress(z, NULL, 0, out, n) == -1,
	    "empty input refused");
	{
		/* A skippable frame (magic 0x184d2a50) with no content. */
		static const uint8_t skip[8] = { 0x50, 0x2a, 0x4d, 0x18 };

		ok(compressor_decompress(z, skip, sizeof(skip), out, 0) == -1,
		    "a skippable frame is refused");
	}

	/* Trailing garbage and a second frame. */
	g = xmalloc(2 * flen);
	memcpy(g, f, flen);
	memcpy(g + flen, f, flen);
	ok(compressor_decompress(z, g, flen + 1, out, n) == -1,
	    "trailing byte refused");
	ok(compressor_decompress(z, g, 2 * flen, out, n) == -1,
	    "two concatenated frames refused");
	free(g);

	/*
	 * Size bombs.  A frame of 64 MiB of zeros is a few KiB; it must be
	 * rejected against expect from its header, and a frame without a
	 * declared size must stop at expect instead of writing past it.
	 */
	nb = 64 * MiB;
	big = xmalloc(nb);
	memset(big, 0, nb);
	g = frame_of(z, big, nb, &glen);
	ok(g != NULL && glen < 64 * KiB &&
	    compressor_decompress(z, g, glen, out, n) == -1,
	    "a %zu-byte frame declaring 64 MiB is refused for %zu", glen, n);
	free(g);
	g = frame_unknown_size(big, nb, &glen);
	ok(ZSTD_getFrameContentSize(g, glen) == ZSTD_CONTENTSIZE_UNKNOWN &&
	    compressor_decompress(z, g, glen, out, n) == -1,
	    "a 64 MiB frame without declared size is stopped at %zu", n);
	free(g);
	free(big);

	/* The same without a declared size, correct size: accepted. */
	g = frame_unknown_size(text, n, &glen);
	ok(compressor_decompress(z, g, glen, out, n) == 0 &&
	    memcmp(out, text, n) == 0,
	    "a frame without declared size and the right length is accepted");
	ok(compressor_decompress(z, g, glen, out, n - 1) == -1,
	    "... and refused one byte short");
	free(g);

	/*
	 * Rewrite the declared size to 2^40 by hand: the frame header
	 * descriptor's top two bits select an 8-byte size field.
	 */
	g = frame_of(z, text, 1000, &glen);
	if (g != NULL && glen > 6) {
		/* magic(4) | descriptor | [window] | size */
		uint8_t *h, d = g[4];
		size_t szpos = 5 + !(d & 0x20), szlen;
		static const size_t fcs_len[4] = { 0, 2, 4, 8 };

		szlen = fcs_len[d >> 6];
		if ((d >> 6) == 0 && (d & 0x20))
			szlen = 1;
		h = xmalloc(glen - szlen + 8);
		memcpy(h, g, szpos);
		h[4] = (uint8_t)(d | 0xc0);
		memset(h + szpos, 0, 8);
		h[szpos + 5] = 1;	/* 2^40, little-endian */
		memcpy(h + szpos + 8, g + szpos + szlen, glen - szpos - szlen);
		ok(ZSTD_getFrameContentSize(h, glen - szlen + 8) ==
		    (1ULL << 40) && compressor_decompress(z, h,
		    glen - szlen + 8, out, 1000) == -1,
		    "a frame declaring 1 TiB is refused");
		free(h);
	} else {
		ok(0, "a frame declaring 1 TiB is refused (no frame)");
	}
	free(g);
	free(f);
	free(out);
	free(text);
}

static void
test_speed(struct compressor *z, size_t n)
{
	uint8_t *text = text_bytes(n, 4), *rnd = random_bytes(n, 5);
	size_t cap = compressor_bound(n), chunk = 1 * MiB, off, r, total;
	uint8_t *dst = xmalloc(cap), *out = xmalloc(chunk);
	uint8_t **frames;
	size_t *flen, nf = n / chunk, i;
	double t0, tc, td, tr;

	frames = xmalloc(nf * sizeof(*frames));
	flen = xmalloc(nf * sizeof(*flen));
	t0 = now();
	for (i = 0, off = 0, total = 0; i < nf; i++, off += chunk) {
		r = compressor_compress(z, text + off, chunk, dst, cap);
		frames[i] = xmalloc(r ? r : 1);
		memcpy(frames[i], dst, r);
		flen[i] = r;
		total += r;
	}
	tc = now() - t0;
	t0 = now();
	for (i = 0, r = 0; i < nf; i++)
		r += compressor_decompress(z, frames[i], flen[i], out, chunk)
		    != 0;
	td = now() - t0;
	t0 = now();
	for (i = 0, off = 0; i < nf; i++, off += chunk)
		(void)compressor_compress(z, rnd + off, chunk, dst, cap);
	tr = now() - t0;
	ok(r == 0, "speed: %zu MiB of text in 1 MiB chunks round trip",
	    n / MiB);
	diag("zstd level 3 text: ratio %.2f, compress %.0f MB/s, "
	    "decompress %.0f MB/s", (double)n / total, n / tc / 1e6,
	    n / td / 1e6);
	diag("random data (sampled, stored raw): %.0f MB/s", n / tr / 1e6);
	for (i = 0; i < nf; i++)
		free(frames[i]);
	free(frames);
	free(flen);
	free(dst);
	free(out);
	free(rnd);
	free(text);
}

int
main(void)
{
	struct compressor *z;
	const char *e = getenv("COFFER_TEST_SMALL");
	int small = e && *e && strcmp(e, "0") != 0;

	ok(compressor_new(ZSTD_maxCLevel() + 1) == NULL,
	    "an out-of-range level is refused");
	if ((z = compressor_new(3)) == NULL) {
		ok(0, "compressor_new");
		return (tap_done());
	}
	ok(compressor_bound(MiB) >= MiB, "bound covers the input");
	test_small(z);
	test_roundtrip(z, 1000);
	test_roundtrip(z, 1 * MiB);
	test_roundtrip(z, 8 * MiB);
	test_random(z, 1 * MiB);
	test_small_stream();
	test_hostile(z, 64 * KiB);
	test_speed(z, small ? 16 * MiB : 64 * MiB);
	compressor_free(z);
	compressor_free(NULL);
	return (tap_done());
}
