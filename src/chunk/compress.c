/*
 * zstd compression of chunks.  A chunk is stored compressed only when that
 * saves at least ~3%; anything less is not worth the decompression cost on
 * restore, and most of what fails the test (media, already compressed or
 * encrypted files) is detected from a small sample: always for a large
 * chunk, and for a small one while the compressor's recent chunks did not
 * compress (a dataset of JPEGs or audio clips).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>
#include <zstd_errors.h>

#include "coffer/chunk.h"
#include "coffer/log.h"

/* Inputs at least this large are sampled before being compressed whole. */
#define SAMPLE_MIN_INPUT (64 * 1024)
#define SAMPLE_SLICE 4096
#define SAMPLE_SLICES 3
/*
 * A smaller input is judged by its head alone, and only while the recent
 * inputs were incompressible: zstd's cost for a chunk of a few KiB is
 * mostly its fixed cost per frame, which a sample pays again, so sampling
 * every small chunk would make compressible ones dearer.  The score (as
 * the catalog's, cat_known) counts up for a chunk stored raw and down for
 * one compressed, within [-RAW_SCORE_MAX, RAW_SCORE_MAX]; above 0, heads
 * are sampled.
 */
#define HEAD_SAMPLE 1024
#define RAW_SCORE_MAX 8

struct compressor {
	ZSTD_CCtx *cctx;
	ZSTD_DCtx *dctx;
	int level;
	int raw_score;
	uint8_t sample[SAMPLE_SLICES * SAMPLE_SLICE];
};

/*
 * (Re)arm the context for one frame at level.  The frame checksum (XXH64,
 * far faster than zstd itself) costs 4 bytes per chunk; records are
 * authenticated anyway, but with it a damaged frame is reported as damaged
 * here instead of decompressing to wrong bytes that only the id check
 * further up would catch.  The session reset matters after a call that
 * stopped with dstSize_tooSmall: zstd then refuses most parameter changes
 * until the unfinished frame is dropped.
 */
static size_t
cctx_setup(ZSTD_CCtx *cctx, int level)
{
	size_t r;

	r = ZSTD_CCtx_reset(cctx, ZSTD_reset_session_only);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	return (r);
}

struct compressor *
compressor_new(int level)
{
	struct compressor *z;
	size_t r;

	if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()) {
		log_error("invalid zstd level %d (valid: %d..%d)", level,
		    ZSTD_minCLevel(), ZSTD_maxCLevel());
		goto err0;
	}
	if ((z = malloc(sizeof(*z))) == NULL) {
		log_error("out of memory (%zu bytes)", sizeof(*z));
		goto err0;
	}
	z->level = level;
	z->raw_score = 0;
	if ((z->cctx = ZSTD_createCCtx()) == NULL) {
		log_error("cannot create zstd compression context");
		goto err1;
	}
	if ((z->dctx = ZSTD_createDCtx()) == NULL) {
		log_error("cannot create zstd decompression context");
		goto err2;
	}
	/* Fail here, not on the first chunk, if the level is refused. */
	if (ZSTD_isError(r = cctx_setup(z->cctx, level))) {
		log_error("cannot set zstd parameters: %s",
		    ZSTD_getErrorName(r));
		goto err3;
	}
	/* Success! */
	return (z);
err3:
	ZSTD_freeDCtx(z->dctx);
err2:
	ZSTD_freeCCtx(z->cctx);
err1:
	free(z);
err0:
	/* Failure! */
	return (NULL);
}

void
compressor_free(struct compressor *z)
{
	if (z == NULL)
		return;
	ZSTD_freeCCtx(z->cctx);
	ZSTD_freeDCtx(z->dctx);
	free(z);
}

size_t
compressor_bound(size_t n)
{
	return (ZSTD_compressBound(n));
}

/* The largest compressed size still worth storing for n input bytes. */
static size_t
worth_limit(size_t n)
{
	return (n - n / 32);
}

/*
 * Does p (n bytes, a sample) compress at level 1 by at least 1/64?  The
 * sample is judged leniently (1/64 rather than the final 1/32): it is
 * small and compressed fast, so the whole chunk usually does better.  dst
 * is only scratch here.
 */
static int
sample_compresses(struct compressor *z, const void *p, size_t n, void *dst,
    size_t dstcap)
{
	size_t cap = n - n / 64, r;

	if (cap > dstcap)
		cap = dstcap;
	r = cctx_setup(z->cctx, 1);
	if (!ZSTD_isError(r))
		r = ZSTD_compress2(z->cctx, dst, cap, p, n);
	if (!ZSTD_isError(r))
		return (1);
	if (ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall)
		return (0);
	/* Any other error: let the real attempt report it. */
	return (1);
}

/*
 * Do three slices of src (head, middle, tail) compress?  At level 1 they
 * cost about 1% of compressing a 1 MiB chunk, and skip the full attempt
 * on incompressible data, which is most of the bytes of a training
 * server.
 */
static int
slices_compress(struct compressor *z, const uint8_t *src, size_t n,
    void *dst, size_t dstcap)
{
	size_t off[SAMPLE_SLICES] = {
		0, n / 2 - SAMPLE_SLICE / 2, n - SAMPLE_SLICE
	};
	int i;

	for (i = 0; i < SAMPLE_SLICES; i++)
		memcpy(z->sample + i * SAMPLE_SLICE, src + off[i],
		    SAMPLE_SLICE);
	return (sample_compresses(z, z->sample, sizeof(z->sample), dst,
	    dstcap));
}

/*
 * Does src (n bytes) look worth compressing whole?  A large one if its
 * slices compress; a small one if the recent small ones did, or else if
 * its head compresses.
 */
static int
looks_compressible(struct compressor *z, const uint8_t *src, size_t n,
    void *dst, size_t dstcap)
{
	if (n >= SAMPLE_MIN_INPUT)
		return (slices_compress(z, src, n, dst, dstcap));
	if (n <= HEAD_SAMPLE || z->raw_score <= 0)
		return (1);
	return (sample_compresses(z, src, HEAD_SAMPLE, dst, dstcap));
}

/* A small chunk of n bytes was stored raw (raw) or compressed. */
static void
note_small(struct compressor *z, size_t n, int raw)
{
	if (n >= SAMPLE_MIN_INPUT)
		return;
	if (raw && z->raw_score < RAW_SCORE_MAX)
		z->raw_score++;
	else if (!raw && z->raw_score > -RAW_SCORE_MAX)
		z->raw_score--;
}

size_t
compressor_compress(struct compressor *z, const void *src, size_t n,
    void *dst, size_t dstcap)
{
	size_t cap, r;

	if (n == 0)
		return (0);
	if (!looks_compressible(z, src, n, dst, dstcap)) {
		note_small(z, n, 1);
		return (0);
	}
	/*
	 * Give zstd only as much room as a worthwhile result needs: when the
	 * output would not fit, it stops with dstSize_tooSmall, which is the
	 * "store raw" answer rather than an error.
	 */
	cap = worth_limit(n);
	if (cap > dstcap)
		cap = dstcap;
	r = cctx_setup(z->cctx, z->level);
	if (!ZSTD_isError(r))
		r = ZSTD_compress2(z->cctx, dst, cap, src, n);
	if (ZSTD_isError(r)) {
		if (ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall) {
			note_small(z, n, 1);
			return (0);
		}
		log_error("cannot compress %zu bytes: %s", n,
		    ZSTD_getErrorName(r));
		return ((size_t)-1);
	}
	note_small(z, n, 0);
	return (r);
}

/*
 * src comes from the repository, which is not trusted: it may claim any
 * size, hold several frames, or be cut short.  Exactly one frame is
 * accepted, its declared size (if any) must be expect, and zstd is never
 * given more room than expect, so nothing is written past dst + expect.
 * Only the current frame format is accepted (we never write another): the
 * magic check keeps skippable frames and, where libzstd was built with
 * them, the old legacy decoders away from hostile input.
 */
int
compressor_decompress(struct compressor *z, const void *src, size_t n,
    void *dst, size_t expect)
{
	const uint8_t *p = src;
	unsigned long long fcs;
	size_t r;

	if (n < 4 || p[0] != 0x28 || p[1] != 0xb5 || p[2] != 0x2f ||
	    p[3] != 0xfd)
		return (-1);
	if (ZSTD_findFrameCompressedSize(src, n) != n)
		return (-1);
	fcs = ZSTD_getFrameContentSize(src, n);
	if (fcs == ZSTD_CONTENTSIZE_ERROR)
		return (-1);
	if (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != expect)
		return (-1);
	r = ZSTD_decompressDCtx(z->dctx, dst, expect, src, n);
	if (ZSTD_isError(r) || r != expect)
		return (-1);
	return (0);
}

int
compressor_decompress_stream(struct compressor *z, const void *src,
    size_t n, size_t expect, int (*sink)(void *arg, const void *p,
    size_t len), void *arg)
{
	const uint8_t *p = src;
	unsigned long long fcs;
	ZSTD_inBuffer in = { src, n, 0 };
	uint8_t *win;
	size_t r = 1, total = 0;
	int rc = -1;

	if (n < 4 || p[0] != 0x28 || p[1] != 0xb5 || p[2] != 0x2f ||
	    p[3] != 0xfd || ZSTD_findFrameCompressedSize(src, n) != n)
		return (-1);
	fcs = ZSTD_getFrameContentSize(src, n);
	if (fcs == ZSTD_CONTENTSIZE_ERROR ||
	    (fcs != ZSTD_CONTENTSIZE_UNKNOWN && fcs != expect))
		return (-1);
	if ((win = malloc(ZSTD_DStreamOutSize())) == NULL)
		return (-1);
	if (ZSTD_isError(ZSTD_DCtx_reset(z->dctx, ZSTD_reset_session_only)))
		goto out;
	while (r != 0) {
		ZSTD_outBuffer o = { win, ZSTD_DStreamOutSize(), 0 };

		r = ZSTD_decompressStream(z->dctx, &o, &in);
		if (ZSTD_isError(r) || o.pos > expect - total)
			goto out;
		total += o.pos;
		if (o.pos && sink(arg, win, o.pos))
			goto out;
		/* Input used up, nothing more out, frame not done: cut. */
		if (r != 0 && in.pos == in.size && o.pos < o.size)
			goto out;
	}
	rc = total == expect && in.pos == in.size ? 0 : -1;
out:
	(void)ZSTD_DCtx_reset(z->dctx, ZSTD_reset_session_only);
	free(win);
	return (rc);
}
