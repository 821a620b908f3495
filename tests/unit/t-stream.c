/*
 * chunk_stream: cutting a file in place, in the caller's buffers (as
 * backup reads straight into its batches), must give exactly the chunks
 * that feeding copies gives (as audit and drill do): same offsets, same
 * lengths, same bytes, whatever the read sizes, holes, buffer switches in
 * mid-chunk, and a read given up and started over.  A safetensors file is
 * cut at its tensor boundaries either way, and one whose header is longer
 * than max is cut as plain data either way.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/buf.h"
#include "coffer/chunk.h"
#include "tap.h"
#include "testutil.h"

#define KiB 1024u
#define MiB (1024u * 1024u)

struct cut {
	int64_t off;
	size_t len;
	uint64_t hash;
};

struct cuts {
	struct cut *v;
	size_t n, cap;
	/* In place: the buffer emit's data must lie in, and where the
	 * next chunk must start in it (right after the previous one). */
	const struct buf *in;
	size_t end;
	int outside, gap;
};

static int
record(void *arg, const uint8_t *data, size_t len, int64_t off)
{
	struct cuts *c = arg;

	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 256;
		if ((c->v = realloc(c->v, c->cap * sizeof(*c->v))) == NULL) {
			fprintf(stderr, "out of memory\n");
			exit(2);
		}
	}
	c->v[c->n].off = off;
	c->v[c->n].len = len;
	c->v[c->n].hash = fnv1a(data, len);
	c->n++;
	if (c->in != NULL) {
		if (data < c->in->data ||
		    data + len > c->in->data + c->in->len)
			c->outside++;
		else {
			if ((size_t)(data - c->in->data) != c->end)
				c->gap++;
			c->end = (size_t)(data - c->in->data) + len;
		}
	}
	return (0);
}

static int
same(const struct cuts *a, const struct cuts *b)
{
	size_t i;

	if (a->n != b->n)
		return (0);
	for (i = 0; i < a->n; i++)
		if (a->v[i].off != b->v[i].off || a->v[i].len != b->v[i].len ||
		    a->v[i].hash != b->v[i].hash)
			return (0);
	return (1);
}

/* A file: its bytes, and data regions (holes between them). */
struct file {
	uint8_t *data;
	size_t size;
	int64_t reg_off[4], reg_len[4];
	int nreg;
};

/* The reference: blocks of a fixed size, fed by copying. */
static void
cut_copying(const struct chunker *ch, const struct file *f, struct cuts *out)
{
	struct chunk_stream *s;
	int r;

	s = chunk_stream_new(ch, 8 * MiB, f->size, record, out);
	for (r = 0; r < f->nreg; r++) {
		int64_t o = f->reg_off[r], end = o + f->reg_len[r];

		while (o < end) {
			size_t n = (size_t)(end - o) < 256 * KiB ?
			    (size_t)(end - o) : 256 * KiB;

			if (chunk_stream_feed(s, f->data + o, n, o))
				exit(2);
			o += (int64_t)n;
		}
	}
	if (chunk_stream_finish(s))
		exit(2);
	chunk_stream_free(s);
}

/*
 * In place, as backup does it: random read sizes, and at random points
 * the walk moves on to another buffer (holding junk ahead, like a batch
 * with other files' chunks).  With give_up, the first attempt stops half
 * way and is abandoned, and the file is read again from the start.
 * Returns the number of failed buffer checks.
 */
static int
cut_in_place(const struct chunker *ch, const struct file *f, uint64_t seed,
    int give_up, struct cuts *out)
{
	struct chunk_stream *s;
	struct buf bufs[3];
	size_t k = 0, cur, junk;
	uint64_t rng = seed;
	int r, attempt, bad = 0;

	for (cur = 0; cur < 3; cur++)
		buf_init(&bufs[cur]);
	cur = 0;
	s = chunk_stream_new(ch, 8 * MiB, f->size, record, out);
	for (attempt = give_up ? 0 : 1; attempt < 2; attempt++) {
		size_t fed = 0, stop = f->size / 2;

		chunk_stream_reset(s, f->size);
		out->n = 0;
		out->in = &bufs[cur];
		out->end = bufs[cur].len;
		if (chunk_stream_use(s, &bufs[cur]))
			exit(2);
		for (r = 0; r < f->nreg; r++) {
			int64_t o = f->reg_off[r], end = o + f->reg_len[r];

			while (o < end) {
				size_t want = 1 + xorshift64s(&rng) % (2 * MiB);
				size_t n = (size_t)(end - o) < want ?
				    (size_t)(end - o) : want;
				uint8_t *p;

				if (attempt == 0 && fed >= stop) {
					/* Given up: the tail leaves. */
					chunk_stream_abandon(s);
					bad += bufs[cur].len != out->end;
					goto next_attempt;
				}
				if (xorshift64s(&rng) % 4 == 0) {
					/* The next buffer, with junk in it. */
					k = (cur + 1) % 3;
					junk = (size_t)(xorshift64s(&rng) %
					    (64 * KiB));
					buf_reset(&bufs[k]);
					if (buf_reserve(&bufs[k], junk))
						exit(2);
					memset(bufs[k].data, 0xee, junk);
					bufs[k].len = junk;
					if (chunk_stream_use(s, &bufs[k]))
						exit(2);
					/* The old one keeps its chunks only. */
					bad += bufs[cur].len != out->end;
					cur = k;
					out->in = &bufs[cur];
					out->end = junk;
				}
				if ((p = chunk_stream_space(s, n)) == NULL)
					exit(2);
				memcpy(p, f->data + o, n);
				if (chunk_stream_wrote(s, n, o))
					exit(2);
				o += (int64_t)n;
				fed += n;
			}
		}
		if (chunk_stream_finish(s))
			exit(2);
next_attempt:
		;
	}
	chunk_stream_free(s);
	for (cur = 0; cur < 3; cur++)
		buf_release(&bufs[cur]);
	return (bad);
}

/*
 * A safetensors file of random tensors between 0.2 and 3 MiB; with pad,
 * a __metadata__ string of that many bytes makes the header longer.
 */
static void
make_safetensors(struct file *f, uint64_t *rng, size_t pad)
{
	size_t cap = 4096 + pad, jl = 0, hdr, total = 0, sizes[12];
	char *json = malloc(cap);
	int i, nt = 12;

	if (json == NULL)
		exit(2);
	for (i = 0; i < nt; i++) {
		sizes[i] = 200 * KiB + xorshift64s(rng) % (3 * MiB);
		sizes[i] &= ~(size_t)1;
	}
	jl += (size_t)snprintf(json + jl, cap - jl, "{");
	if (pad > 0) {
		jl += (size_t)snprintf(json + jl, cap - jl,
		    "\"__metadata__\":{\"pad\":\"");
		memset(json + jl, 'p', pad);
		jl += pad;
		jl += (size_t)snprintf(json + jl, cap - jl, "\"},");
	}
	for (i = 0; i < nt; i++) {
		jl += (size_t)snprintf(json + jl, cap - jl,
		    "%s\"t%d\":{\"dtype\":\"BF16\",\"shape\":[%zu],"
		    "\"data_offsets\":[%zu,%zu]}", i ? "," : "", i,
		    sizes[i] / 2, total, total + sizes[i]);
		total += sizes[i];
	}
	jl += (size_t)snprintf(json + jl, cap - jl, "}");
	hdr = 8 + jl;
	f->size = hdr + total;
	if ((f->data = malloc(f->size)) == NULL)
		exit(2);
	put_le64(f->data, jl);
	memcpy(f->data + 8, json, jl);
	free(json);
	for (i = (int)hdr; (size_t)i < f->size; i++)
		f->data[i] = (uint8_t)xorshift64s(rng);
	f->nreg = 1;
	f->reg_off[0] = 0;
	f->reg_len[0] = (int64_t)f->size;
}

/* Random bytes with two holes; text-like runs so that chunks vary. */
static void
make_sparse(struct file *f, uint64_t *rng)
{
	size_t i;

	f->size = 21 * MiB + 12345;
	if ((f->data = malloc(f->size)) == NULL)
		exit(2);
	for (i = 0; i < f->size; i++)
		f->data[i] = (uint8_t)xorshift64s(rng);
	f->nreg = 3;
	f->reg_off[0] = 0;
	f->reg_len[0] = 7 * MiB + 99;
	f->reg_off[1] = 9 * MiB;
	f->reg_len[1] = 5 * MiB;
	f->reg_off[2] = 16 * MiB;
	f->reg_len[2] = (int64_t)f->size - 16 * MiB;
	/* Holes read as zeros. */
	memset(f->data + f->reg_off[0] + f->reg_len[0], 0,
	    (size_t)(f->reg_off[1] - f->reg_off[0] - f->reg_len[0]));
	memset(f->data + f->reg_off[1] + f->reg_len[1], 0,
	    (size_t)(f->reg_off[2] - f->reg_off[1] - f->reg_len[1]));
}

static void
check_file(const struct chunker *ch, const char *name, const struct file *f)
{
	struct cuts want = { 0 }, got = { 0 };
	uint64_t seed;
	int bad = 0, differ = 0, runs = 0, give_up;

	cut_copying(ch, f, &want);
	for (seed = 1; seed <= 6; seed++)
		for (give_up = 0; give_up < 2; give_up++) {
			bad += cut_in_place(ch, f, seed * 7919, give_up, &got);
			differ += !same(&want, &got);
			bad += got.outside + got.gap;
			got.outside = got.gap = 0;
			runs++;
		}
	ok(want.n > 3, "%s: %zu chunks when copying", name, want.n);
	ok(differ == 0, "%s: in place cuts the same chunks (%d of %d runs "
	    "differ)", name, differ, runs);
	ok(bad == 0, "%s: chunks lie whole in the buffer, tails move and go "
	    "(%d bad)", name, bad);
	free(want.v);
	free(got.v);
}

int
main(void)
{
	struct chunker_params p;
	struct chunker *ch;
	uint8_t key[32];
	uint64_t rng = 42;
	struct file f;
	size_t i;

	for (i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)(i * 37 + 1);
	chunker_params_default(&p);
	if ((ch = chunker_new(&p, key)) == NULL) {
		ok(0, "chunker");
		return (tap_done());
	}
	make_sparse(&f, &rng);
	check_file(ch, "sparse file", &f);
	free(f.data);
	make_safetensors(&f, &rng, 0);
	check_file(ch, "safetensors", &f);
	free(f.data);
	/* A header past max is no header, whatever the read sizes: copying
	 * in 256 KiB blocks sees exactly max bytes when it decides, reads
	 * in place of up to 2 MiB see more. */
	make_safetensors(&f, &rng, 8 * MiB + 600 * KiB);
	check_file(ch, "safetensors, header longer than max", &f);
	free(f.data);
	chunker_free(ch);
	return (tap_done());
}
