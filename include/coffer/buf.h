#ifndef COFFER_BUF_H
#define COFFER_BUF_H

#include <stddef.h>
#include <stdint.h>

/*
 * A growable byte buffer (caller-owned struct, heap data) and a bounds-checked
 * reader for untrusted input.  Integers are little-endian on the wire.
 */
struct buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

#define BUF_INIT { NULL, 0, 0 }

void buf_init(struct buf *b);
/* Free the data; the struct may be reused after buf_init. */
void buf_release(struct buf *b);
/* Make room for extra more bytes; 0, or -1 (overflow / ENOMEM, reported). */
int buf_reserve(struct buf *b, size_t extra);
int buf_append(struct buf *b, const void *p, size_t n);
int buf_put_u8(struct buf *b, uint8_t v);
int buf_put_u32(struct buf *b, uint32_t v);
int buf_put_u64(struct buf *b, uint64_t v);
/* Append a NUL-terminated string, without its NUL. */
int buf_puts(struct buf *b, const char *s);
/* Append printf output (no NUL counted in len, but data stays terminated). */
int buf_printf(struct buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void buf_reset(struct buf *b);
/* Empty b, and give back what its capacity holds beyond keep bytes (a
 * buffer that once held a rare large item need not keep its memory). */
void buf_trim(struct buf *b, size_t keep);

/*
 * Room for element n of the array *arrp (a pointer to a T * holding *cap
 * elements of size bytes each): when n >= *cap the capacity doubles (from
 * first if it was 0) until it holds n.  0, or -1 (out of memory,
 * reported; the array is unchanged).
 */
int array_grow(void *arrp, size_t *cap, size_t n, size_t size, size_t first);

void put_u32(uint8_t *p, uint32_t v);
void put_u64(uint8_t *p, uint64_t v);
uint32_t get_u32(const uint8_t *p);
uint64_t get_u64(const uint8_t *p);

/*
 * Reader over untrusted bytes.  Each getter returns 0, or -1 and sets
 * r->err once the input is too short; later calls keep failing, so a parser
 * may check r->err once at the end.
 */
struct reader {
	const uint8_t *p;
	size_t len;
	int err;
};

void reader_init(struct reader *r, const void *p, size_t len);
int reader_u8(struct reader *r, uint8_t *v);
int reader_u32(struct reader *r, uint32_t *v);
int reader_u64(struct reader *r, uint64_t *v);
/* Point *p at the next n bytes (no copy). */
int reader_bytes(struct reader *r, size_t n, const uint8_t **p);
int reader_copy(struct reader *r, void *dst, size_t n);

#endif
