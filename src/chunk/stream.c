/*
 * A file's content cut into chunks the way backup cuts it (see chunk.h,
 * chunk_stream_new): holes end segments, a segment is cut by the keyed
 * chunker with at most max bytes looked at, and a safetensors file is
 * also cut at its tensor boundaries, found once, when its first segment
 * is cut.  Anything that compares a live file with what backup stored
 * must cut it exactly like this, or identical bytes would look different.
 */
#include <stdlib.h>
#include <string.h>

#include "coffer/buf.h"
#include "coffer/chunk.h"
#include "coffer/log.h"

struct chunk_stream {
	const struct chunker *chunker;
	uint32_t max;
	uint64_t size;			/* the file's size, for the header */
	int (*emit)(void *arg, const uint8_t *data, size_t len, int64_t off);
	void *arg;

	struct buf own;			/* the buffer when copying */
	struct buf *seg;		/* own, or the caller's (in place) */
	size_t start;			/* first uncut byte in seg */
	size_t scanned;			/* of it, looked at without a cut */
	int64_t seg_offset;		/* file offset of seg.data[start] */
	int64_t next;			/* where the next block should start */

	uint64_t *cuts;			/* tensor boundaries, sorted */
	size_t ncuts, cut;
	int cuts_checked;
	int short_file;			/* shorter than its header says */
};

/* Cutting in the caller's buffer (chunk_stream_use), not our own. */
static int
in_place(const struct chunk_stream *s)
{
	return (s->seg != &s->own);
}

struct chunk_stream *
chunk_stream_new(const struct chunker *c, uint32_t max, uint64_t file_size,
    int (*emit)(void *arg, const uint8_t *data, size_t len, int64_t off),
    void *arg)
{
	struct chunk_stream *s;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	s->chunker = c;
	s->max = max;
	s->size = file_size;
	s->emit = emit;
	s->arg = arg;
	buf_init(&s->own);
	s->seg = &s->own;
	return (s);
}

void
chunk_stream_free(struct chunk_stream *s)
{
	if (s == NULL)
		return;
	buf_release(&s->own);
	free(s->cuts);
	free(s);
}

/* The tensor boundaries, when the first bytes buffered are a whole
 * safetensors header. */
static int
check_safetensors(struct chunk_stream *s)
{
	const uint8_t *p = s->seg->data + s->start;
	size_t avail = s->seg->len - s->start;
	uint64_t need;

	s->cuts_checked = 1;
	if (s->seg_offset != 0 || avail < 8)
		return (0);
	/* A header longer than max is not one, however much happens to
	 * be buffered: otherwise the cut would depend on read sizes. */
	need = safetensors_header_size(p, avail, s->size);
	if (need == 0 || need > avail || need > s->max)
		return (0);	/* not one, or a header too big to buffer */
	s->short_file = safetensors_declared_size(p, avail, s->size) >
	    s->size;
	return (safetensors_cuts(p, avail, s->size, &s->cuts, &s->ncuts) < 0 ?
	    -1 : 0);
}

/* Cut what is buffered; with eof, all of it.  0, -1, or emit's value. */
static int
segment(struct chunk_stream *s, int eof)
{
	size_t avail, limit, n;
	int at_cut, rc = 0;

	if (!s->cuts_checked && check_safetensors(s))
		return (-1);
	for (;;) {
		avail = s->seg->len - s->start;
		if (avail == 0)
			break;
		while (s->cut < s->ncuts &&
		    s->cuts[s->cut] <= (uint64_t)s->seg_offset)
			s->cut++;
		limit = avail;
		at_cut = 0;
		if (s->cut < s->ncuts &&
		    s->cuts[s->cut] - (uint64_t)s->seg_offset <= avail) {
			limit = (size_t)(s->cuts[s->cut] -
			    (uint64_t)s->seg_offset);
			at_cut = 1;
		}
		n = chunker_next_resume(s->chunker, s->seg->data + s->start,
		    limit, eof || at_cut, &s->scanned);
		if (n == 0)
			break;
		rc = s->emit(s->arg, s->seg->data + s->start, n,
		    s->seg_offset);
		s->start += n;
		s->seg_offset += (int64_t)n;
		if (rc != 0)
			return (rc);
	}
	/* Keep the uncut tail at the front of our own buffer; in the
	 * caller's, the cut chunks stay where they are. */
	if (!in_place(s) && s->start > 0) {
		avail = s->seg->len - s->start;
		memmove(s->seg->data, s->seg->data + s->start, avail);
		s->seg->len = avail;
		s->start = 0;
	}
	return (0);
}

/*
 * May the first bytes be cut yet?  Only once a safetensors header, if
 * they start one, is whole (up to max bytes of it: a bigger one is looked
 * at with max bytes, and so is not one, as when everything was buffered).
 */
static int
header_ready(const struct chunk_stream *s)
{
	size_t avail = s->seg->len - s->start;
	uint64_t need;

	if (s->seg_offset != 0)
		return (1);
	if (avail < 9)
		return (0);
	need = safetensors_header_size(s->seg->data + s->start, avail,
	    s->size);
	return (need == 0 || avail >= need || avail >= s->max);
}

/*
 * A block at off follows what the stream holds: a gap is a hole, and what
 * came before it is a segment of its own.
 */
static int
before_block(struct chunk_stream *s, int64_t off)
{
	int rc;

	if (off != s->next) {
		if ((rc = segment(s, 1)) != 0)
			return (rc);
		s->seg_offset = off;
	}
	return (0);
}

/* len more bytes are at the end of the buffer: cut what can be cut. */
static int
after_block(struct chunk_stream *s, size_t len, int64_t off)
{
	s->next = off + (int64_t)len;
	if (!s->cuts_checked && !header_ready(s))
		return (0);
	return (segment(s, 0));
}

/*
 * Cutting goes on as data comes (the chunker resumes where it stopped),
 * so that only the chunk being cut is buffered, not max bytes.
 */
int
chunk_stream_feed(struct chunk_stream *s, const void *data, size_t len,
    int64_t off)
{
	int rc;

	if ((rc = before_block(s, off)) != 0)
		return (rc);
	if (buf_append(s->seg, data, len))
		return (-1);
	return (after_block(s, len, off));
}

int
chunk_stream_use(struct chunk_stream *s, struct buf *b)
{
	struct buf *old = s->seg;
	size_t tail = old->len - s->start;

	if (b == old)
		return (0);
	if (buf_append(b, old->data + s->start, tail))
		return (-1);
	/* The uncut tail now lives in b only. */
	old->len = s->start;
	if (old == &s->own)
		buf_trim(&s->own, 0);
	s->seg = b;
	s->start = b->len - tail;
	return (0);
}

uint8_t *
chunk_stream_space(struct chunk_stream *s, size_t len)
{
	if (buf_reserve(s->seg, len))
		return (NULL);
	return (s->seg->data + s->seg->len);
}

int
chunk_stream_wrote(struct chunk_stream *s, size_t len, int64_t off)
{
	int rc;

	if (!in_place(s)) {
		log_error("internal error: chunk_stream_wrote without a buffer");
		return (-1);
	}
	/* Cutting before the hole only looks below seg->len. */
	if ((rc = before_block(s, off)) != 0)
		return (rc);
	s->seg->len += len;
	return (after_block(s, len, off));
}

/* Back to the stream's own buffer, leaving the caller's alone. */
static void
detach(struct chunk_stream *s)
{
	s->seg = &s->own;
	s->start = 0;
}

int
chunk_stream_finish(struct chunk_stream *s)
{
	int rc = segment(s, 1);

	if (in_place(s))
		detach(s);
	return (rc);
}

void
chunk_stream_abandon(struct chunk_stream *s)
{
	if (in_place(s)) {
		s->seg->len = s->start;
		detach(s);
	}
}

void
chunk_stream_reset(struct chunk_stream *s, uint64_t file_size)
{
	/* The caller's buffer may be in other hands by now. */
	if (in_place(s))
		detach(s);
	/* What a long chunk took goes back between files. */
	buf_trim(&s->own, (size_t)s->max / 2);
	s->start = 0;
	s->scanned = 0;
	s->seg_offset = 0;
	s->next = 0;
	s->size = file_size;
	free(s->cuts);
	s->cuts = NULL;
	s->ncuts = s->cut = 0;
	s->cuts_checked = 0;
	s->short_file = 0;
}

int
chunk_stream_short(const struct chunk_stream *s)
{
	return (s->short_file);
}
