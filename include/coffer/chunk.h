#ifndef COFFER_CHUNK_H
#define COFFER_CHUNK_H

#include <stddef.h>
#include <stdint.h>

/*
 * Content-defined chunking (FastCDC: gear hash with normalized chunking)
 * with a keyed gear table, and zstd compression of chunks.
 */

struct chunker_params {
	uint32_t min;	/* no cut before min bytes */
	uint32_t avg;	/* a power of two: the normalized target */
	uint32_t max;	/* always cut at max */
};

/* Defaults chosen by measurement (see README "Design notes"). */
void chunker_params_default(struct chunker_params *p);
/* 0 if sane (min < avg < max, avg a power of two, within limits), else -1. */
int chunker_params_check(const struct chunker_params *p);

struct chunker;

/* Gear table derived from the 32-byte chunker key.  NULL on ENOMEM. */
struct chunker *chunker_new(const struct chunker_params *p,
    const uint8_t *key);
void chunker_free(struct chunker *c);

/*
 * Length of the chunk that starts at data[0].  The result depends only on
 * the bytes, the key and the parameters, never on how the caller buffers:
 *  - if a cut point lies within len, returns its length (1..max);
 *  - if len >= max, returns max;
 *  - if eof is set (data holds the rest of the stream), returns len;
 *  - otherwise returns 0: call again with more data (at least max bytes,
 *    or up to eof).
 * Thread-safe: the chunker is read-only after chunker_new.
 */
size_t chunker_next(const struct chunker *c, const uint8_t *data, size_t len,
    int eof);
/*
 * The same, for a caller that calls again with the same start and more
 * data after a 0: *scanned (0 for a new chunk) says how far the last call
 * looked, so only the new bytes are read.  It is 0 again after a cut.
 */
size_t chunker_next_resume(const struct chunker *c, const uint8_t *data,
    size_t len, int eof, size_t *scanned);

/*
 * Safetensors files (8-byte little-endian header length, a JSON header
 * whose tensors carry "data_offsets": [begin, end] relative to the end of
 * the header, then the tensor bytes).  Cutting chunks at tensor
 * boundaries lets two checkpoint steps that share a tensor byte for byte
 * share its chunks, whatever the tensors around it.  The header is hostile
 * input: anything malformed means "not safetensors" and plain CDC.
 *
 * safetensors_header_size: from the first len (>= 8) bytes of a file of
 * file_size bytes, the number of bytes the header takes (8 + its length),
 * or 0 when this cannot be a safetensors file.
 *
 * safetensors_cuts: parse the header (head holds at least the first
 * safetensors_header_size bytes) and return the sorted, distinct absolute
 * file offsets where tensor data begins or ends, strictly between 0 and
 * file_size, as a malloc'd array.  1 done, 0 not safetensors or malformed
 * (nothing printed), -1 out of memory (reported).
 */
uint64_t safetensors_header_size(const uint8_t *head, size_t len,
    uint64_t file_size);
/*
 * The size a safetensors file must have, by its header: the end of its
 * last tensor.  0 when head (the header, whole) is not one.  A file
 * shorter than that is still being written.
 */
uint64_t safetensors_declared_size(const uint8_t *head, size_t len,
    uint64_t file_size);
int safetensors_cuts(const uint8_t *head, size_t len, uint64_t file_size,
    uint64_t **cuts, size_t *n);

/* zstd.  One compressor per thread. */
struct compressor;

struct compressor *compressor_new(int level);
void compressor_free(struct compressor *z);

/* Upper bound of compressed output for n input bytes. */
size_t compressor_bound(size_t n);

/*
 * Compress src into dst (dstcap >= compressor_bound(n)).  Returns the
 * compressed length, or 0 when the data did not shrink enough to be worth
 * storing compressed (store it raw), or (size_t)-1 on error (reported).
 */
size_t compressor_compress(struct compressor *z, const void *src, size_t n,
    void *dst, size_t dstcap);

/*
 * Decompress src into dst, which must come out exactly expect bytes.
 * 0, or -1 (no message: the caller names the damaged record).
 */
int compressor_decompress(struct compressor *z, const void *src, size_t n,
    void *dst, size_t expect);
/*
 * The same, handing the output to sink in pieces of at most 128 KiB
 * instead of keeping it: memory does not grow with expect.  Stops with -1
 * as soon as more than expect bytes come out or sink returns non-zero.
 */
int compressor_decompress_stream(struct compressor *z, const void *src,
    size_t n, size_t expect, int (*sink)(void *arg, const void *p,
    size_t len), void *arg);

/*
 * A file's content cut into chunks exactly as backup cuts it: blocks come
 * in increasing offset order (a gap is a hole: chunks never span one), the
 * keyed chunker cuts with at most max bytes buffered, and a safetensors
 * file (its header found in the first bytes buffered) is also cut at its
 * tensor boundaries.  emit gets each chunk's bytes (valid during the call),
 * length and file offset; a non-zero return stops the stream and is
 * returned by feed / finish.  Otherwise they return 0, or -1 (reported).
 */
struct buf;
struct chunk_stream;
struct chunk_stream *chunk_stream_new(const struct chunker *c, uint32_t max,
    uint64_t file_size,
    int (*emit)(void *arg, const uint8_t *data, size_t len, int64_t off),
    void *arg);
int chunk_stream_feed(struct chunk_stream *s, const void *data, size_t len,
    int64_t off);
/* The end of the file: cut what is left. */
int chunk_stream_finish(struct chunk_stream *s);
/*
 * In place: the stream keeps its data at the end of the caller's buffer b
 * and leaves the chunks it cuts there (emit's data points into b), so the
 * caller can read a file straight into the memory its chunks are hashed
 * and sealed from.  The uncut tail moves from the buffer used before (its
 * len drops by as much).  The caller must not touch b's bytes from the
 * first uncut one on, nor switch buffers inside emit.  The stream lets go
 * of b at chunk_stream_finish, chunk_stream_abandon or chunk_stream_reset.
 * 0 or -1.
 */
int chunk_stream_use(struct chunk_stream *s, struct buf *b);
/* In place, a read given up: the uncut tail leaves the caller's buffer. */
void chunk_stream_abandon(struct chunk_stream *s);
/* 1 if the file is a safetensors file shorter than its header declares
 * (known once its header was fed): a checkpoint still being written. */
int chunk_stream_short(const struct chunk_stream *s);
/* In place: room for len bytes at the end of the buffer (NULL: out of
 * memory); chunk_stream_wrote then takes the n <= len bytes written there
 * as the block at file offset off, as chunk_stream_feed would. */
uint8_t *chunk_stream_space(struct chunk_stream *s, size_t len);
int chunk_stream_wrote(struct chunk_stream *s, size_t n, int64_t off);
/*
 * Start over with another file (or the same one, reread), keeping the
 * buffer: a stream per file made glibc serve its multi-MiB buffers from a
 * fragmenting heap (backup's peak RSS rose from 64 to 75 MiB).
 */
void chunk_stream_reset(struct chunk_stream *s, uint64_t file_size);
void chunk_stream_free(struct chunk_stream *s);

#endif
