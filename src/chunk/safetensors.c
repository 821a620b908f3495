/*
 * Tensor boundaries of safetensors files, for chunk cut points.
 *
 * Layout: a u64 little-endian header length N, N bytes of UTF-8 JSON, then
 * the tensor data.  The JSON is an object whose members are tensor names
 * mapping to {"dtype": .., "shape": [..], "data_offsets": [begin, end]}
 * (offsets relative to byte 8 + N), plus an optional "__metadata__" object
 * of string to string.  Writers pad the header with spaces.
 *
 * The header comes from the files being backed up, which anyone may have
 * written: the scanner below is a strict, bounded JSON recognizer that
 * reads only head[8 .. 8 + N), never recurses deeper than ST_MAX_DEPTH,
 * advances on every step and stores nothing but the offsets it returns.
 * Anything it does not like means "not safetensors": plain CDC is always
 * a correct fallback, so strictness costs at most some deduplication.
 *
 * Choices where the format is silent:
 *  - Strings must be valid JSON and valid UTF-8 (no raw control
 *    characters, no overlong forms, no lone surrogates, in raw bytes or
 *    \u escapes), as serde_json, the reference reader's parser, requires.
 *  - Member names are compared after unescaping, so "\u005f_metadata__"
 *    is the metadata member, as it is for any JSON reader.
 *  - A tensor may hold members other than "data_offsets" (any JSON); its
 *    "data_offsets" must appear exactly once.  A second "__metadata__"
 *    is an error.
 *  - Duplicate tensor names are accepted: each entry's offsets are
 *    checked like any other and only add cut points inside the data, so
 *    detecting them (a set of all names) would cost memory for nothing.
 *  - Tensors need not tile the data: gaps and overlaps only change where
 *    chunks are cut, never what is stored.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/chunk.h"
#include "coffer/log.h"

/*
 * The reference implementation refuses headers above 100 MB; a larger one
 * is either hostile or not worth the parse.
 */
#define ST_HEADER_MAX (100ULL * 1024 * 1024)

/*
 * Nesting limit for any object or array, the header object being level 1.
 * Real headers reach level 3 ("shape" inside a tensor); the limit bounds
 * the recursion of skip_value, and thus the stack, on a "[[[[..." bomb.
 */
#define ST_MAX_DEPTH 64

/* Internal results: malformed input and ENOMEM must stay distinct. */
#define ST_OK 0
#define ST_BAD (-1)
#define ST_NOMEM (-2)

struct scan {
	const uint8_t *p;	/* next byte to read */
	const uint8_t *end;	/* one past the header's last byte */
};

/* Growable list of absolute offsets. */
struct offs {
	uint64_t *v;
	size_t n, cap;
};

static uint64_t
load_le64(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return (v);
}

uint64_t
safetensors_header_size(const uint8_t *head, size_t len, uint64_t file_size)
{
	uint64_t n;

	if (len < 8)
		return (0);
	n = load_le64(head);
	/* "{}" is the smallest valid header. */
	if (n < 2 || n > ST_HEADER_MAX)
		return (0);
	/* n is bounded above, so 8 + n cannot wrap. */
	if (8 + n > file_size)
		return (0);
	if (len > 8 && head[8] != '{')
		return (0);
	return (8 + n);
}

static int
offs_push(struct offs *o, uint64_t x)
{
	uint64_t *nv;
	size_t ncap;

	if (o->n == o->cap) {
		ncap = o->cap ? o->cap : 64;
		if (o->cap) {
			if (ncap > SIZE_MAX / 2 / sizeof(*nv))
				return (ST_NOMEM);
			ncap *= 2;
		}
		nv = realloc(o->v, ncap * sizeof(*nv));
		if (nv == NULL)
			return (ST_NOMEM);
		o->v = nv;
		o->cap = ncap;
	}
	o->v[o->n++] = x;
	return (ST_OK);
}

/*
 * Sort v[0..n) ascending: LSD radix sort, one byte per pass.  A million
 * tensors give two million offsets, which qsort's comparison callback
 * takes hundreds of milliseconds to order; this is linear, and passes over
 * a byte that all values share (the high bytes of offsets within one
 * file) are skipped.  -1 on ENOMEM.
 */
static int
sort_u64(uint64_t *v, size_t n)
{
	size_t count[8][256], sum, c, i;
	uint64_t *tmp, *src, *dst, *t;
	unsigned int b, d;

	if (n < 2)
		return (0);
	/* v holds n values, so n * sizeof(*tmp) cannot wrap. */
	if ((tmp = malloc(n * sizeof(*tmp))) == NULL)
		return (-1);
	memset(count, 0, sizeof(count));
	for (i = 0; i < n; i++)
		for (b = 0; b < 8; b++)
			count[b][(v[i] >> (8 * b)) & 0xff]++;
	src = v;
	dst = tmp;
	for (b = 0; b < 8; b++) {
		if (count[b][(src[0] >> (8 * b)) & 0xff] == n)
			continue;
		for (d = 0, sum = 0; d < 256; d++) {
			c = count[b][d];
			count[b][d] = sum;
			sum += c;
		}
		for (i = 0; i < n; i++)
			dst[count[b][(src[i] >> (8 * b)) & 0xff]++] = src[i];
		t = src;
		src = dst;
		dst = t;
	}
	if (src != v)
		memcpy(v, src, n * sizeof(*v));
	free(tmp);
	return (0);
}

static void
skip_ws(struct scan *s)
{
	while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' ||
	    *s->p == '\n' || *s->p == '\r'))
		s->p++;
}

/* Consume byte c (after whitespace), or fail. */
static int
expect(struct scan *s, uint8_t c)
{
	skip_ws(s);
	if (s->p == s->end || *s->p != c)
		return (ST_BAD);
	s->p++;
	return (ST_OK);
}

static int
hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return (c - '0');
	if (c >= 'a' && c <= 'f')
		return (c - 'a' + 10);
	if (c >= 'A' && c <= 'F')
		return (c - 'A' + 10);
	return (-1);
}

/* Four hex digits at *pp, advanced past them. */
static int
hex4(const uint8_t **pp, const uint8_t *end, uint32_t *v)
{
	const uint8_t *p = *pp;
	uint32_t x = 0;
	int i, h;

	if (end - p < 4)
		return (ST_BAD);
	for (i = 0; i < 4; i++) {
		if ((h = hexval(p[i])) < 0)
			return (ST_BAD);
		x = (x << 4) | (uint32_t)h;
	}
	*pp = p + 4;
	*v = x;
	return (ST_OK);
}

/*
 * A \u escape, *pp at the 'u': the code point, with a surrogate pair
 * joined.  Lone surrogates are refused: they are not Unicode scalar
 * values and cannot become the UTF-8 the format promises.
 */
static int
read_u(const uint8_t **pp, const uint8_t *end, uint32_t *cp)
{
	const uint8_t *p = *pp + 1;
	uint32_t hi, lo;

	if (hex4(&p, end, &hi))
		return (ST_BAD);
	if (hi >= 0xdc00 && hi <= 0xdfff)
		return (ST_BAD);
	if (hi >= 0xd800 && hi <= 0xdbff) {
		if (end - p < 2 || p[0] != '\\' || p[1] != 'u')
			return (ST_BAD);
		p += 2;
		if (hex4(&p, end, &lo) || lo < 0xdc00 || lo > 0xdfff)
			return (ST_BAD);
		hi = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
	}
	*pp = p;
	*cp = hi;
	return (ST_OK);
}

/*
 * Length of the well-formed UTF-8 sequence of two to four bytes at p
 * (Unicode 15, table 3-7), or 0.  The narrowed ranges of the second byte
 * exclude overlong forms, surrogates and code points above U+10FFFF.
 */
static size_t
utf8_seq(const uint8_t *p, const uint8_t *end)
{
	uint8_t c = p[0], lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return (0);
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if ((size_t)(end - p) < n)
		return (0);
	if (p[1] < lo || p[1] > hi)
		return (0);
	for (i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return (0);
	return (n);
}

/*
 * A string at s->p (after whitespace).  On success *str and *len give its
 * raw bytes between the quotes, escapes still in place, and s->p is past
 * the closing quote.
 */
static int
scan_string(struct scan *s, const uint8_t **str, size_t *len)
{
	const uint8_t *p, *start, *end = s->end;
	uint32_t cp;
	size_t n;

	skip_ws(s);
	p = s->p;
	if (p == end || *p != '"')
		return (ST_BAD);
	start = ++p;
	for (;;) {
		if (p == end)
			return (ST_BAD);
		if (*p == '"')
			break;
		if (*p < 0x20)
			return (ST_BAD);
		if (*p < 0x80 && *p != '\\') {
			p++;
			continue;
		}
		if (*p >= 0x80) {
			if ((n = utf8_seq(p, end)) == 0)
				return (ST_BAD);
			p += n;
			continue;
		}
		if (++p == end)
			return (ST_BAD);
		switch (*p) {
		case '"':
		case '\\':
		case '/':
		case 'b':
		case 'f':
		case 'n':
		case 'r':
		case 't':
			p++;
			break;
		case 'u':
			if (read_u(&p, end, &cp))
				return (ST_BAD);
			break;
		default:
			return (ST_BAD);
		}
	}
	*str = start;
	*len = (size_t)(p - start);
	s->p = p + 1;
	return (ST_OK);
}

/*
 * Whether the raw contents of a string scan_string accepted spell want
 * (plain ASCII) once unescaped.  Escapes are rare in names, hence the
 * byte-for-byte fast path.
 */
static int
key_is(const uint8_t *k, size_t n, const char *want)
{
	const uint8_t *p = k, *end = k + n;
	size_t wn = strlen(want), i = 0;
	uint32_t c;

	if (n == wn && memcmp(k, want, wn) == 0)
		return (1);
	if (memchr(k, '\\', n) == NULL)
		return (0);
	while (p < end) {
		c = *p++;
		if (c == '\\' && p < end) {
			switch (*p) {
			case 'b':
				c = '\b';
				break;
			case 'f':
				c = '\f';
				break;
			case 'n':
				c = '\n';
				break;
			case 'r':
				c = '\r';
				break;
			case 't':
				c = '\t';
				break;
			case 'u':
				if (read_u(&p, end, &c))
					return (0);
				p--;	/* undone by the p++ below */
				break;
			default:	/* '"', '\\', '/': themselves */
				c = *p;
				break;
			}
			p++;
		}
		/* want is ASCII, so any other code point is a mismatch. */
		if (i >= wn || c != (uint8_t)want[i])
			return (0);
		i++;
	}
	return (i == wn);
}

static int
is_digit(uint8_t c)
{
	return (c >= '0' && c <= '9');
}

/* A JSON number, only checked for syntax. */
static int
skip_number(struct scan *s)
{
	const uint8_t *p = s->p, *end = s->end;

	if (p < end && *p == '-')
		p++;
	if (p == end)
		return (ST_BAD);
	if (*p == '0')
		p++;
	else if (*p >= '1' && *p <= '9')
		while (p < end && is_digit(*p))
			p++;
	else
		return (ST_BAD);
	if (p < end && *p == '.') {
		if (++p == end || !is_digit(*p))
			return (ST_BAD);
		while (p < end && is_digit(*p))
			p++;
	}
	if (p < end && (*p == 'e' || *p == 'E')) {
		if (++p < end && (*p == '+' || *p == '-'))
			p++;
		if (p == end || !is_digit(*p))
			return (ST_BAD);
		while (p < end && is_digit(*p))
			p++;
	}
	s->p = p;
	return (ST_OK);
}

static int
skip_word(struct scan *s, const char *w)
{
	size_t n = strlen(w);

	if ((size_t)(s->end - s->p) < n || memcmp(s->p, w, n) != 0)
		return (ST_BAD);
	s->p += n;
	return (ST_OK);
}

/*
 * Any JSON value at s->p (after whitespace), only checked for syntax.
 * depth is the level a container starting here would have.
 */
static int
skip_value(struct scan *s, int depth)
{
	const uint8_t *str;
	size_t len;
	uint8_t close;

	skip_ws(s);
	if (s->p == s->end)
		return (ST_BAD);
	switch (*s->p) {
	case '"':
		return (scan_string(s, &str, &len));
	case 't':
		return (skip_word(s, "true"));
	case 'f':
		return (skip_word(s, "false"));
	case 'n':
		return (skip_word(s, "null"));
	case '{':
	case '[':
		break;
	default:
		return (skip_number(s));
	}
	if (depth > ST_MAX_DEPTH)
		return (ST_BAD);
	close = *s->p == '{' ? '}' : ']';
	s->p++;
	skip_ws(s);
	if (s->p < s->end && *s->p == close) {
		s->p++;
		return (ST_OK);
	}
	for (;;) {
		if (close == '}' &&
		    (scan_string(s, &str, &len) || expect(s, ':')))
			return (ST_BAD);
		if (skip_value(s, depth + 1))
			return (ST_BAD);
		skip_ws(s);
		if (s->p == s->end)
			return (ST_BAD);
		if (*s->p == close) {
			s->p++;
			return (ST_OK);
		}
		if (*s->p++ != ',')
			return (ST_BAD);
	}
}

/*
 * A non-negative integer without fraction or exponent: an offset.  Values
 * of 2^63 and above are refused (no file is that large, and the reference
 * reader holds offsets in 64 bits too).
 */
static int
parse_u64(struct scan *s, uint64_t *v)
{
	const uint8_t *p, *end = s->end;
	uint64_t x = 0;
	unsigned int d;

	skip_ws(s);
	p = s->p;
	if (p == end || !is_digit(*p))
		return (ST_BAD);	/* includes '-' */
	if (*p == '0') {
		p++;
	} else {
		while (p < end && is_digit(*p)) {
			d = (unsigned int)(*p++ - '0');
			if (x > (UINT64_C(0x7fffffffffffffff) - d) / 10)
				return (ST_BAD);
			x = x * 10 + d;
		}
	}
	/* A digit here is a leading zero; '.', 'e' make it a float. */
	if (p < end && (is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E'))
		return (ST_BAD);
	s->p = p;
	*v = x;
	return (ST_OK);
}

/* [begin, end] with begin <= end <= data_len. */
static int
parse_offsets(struct scan *s, uint64_t data_len, uint64_t *b, uint64_t *e)
{
	if (expect(s, '[') || parse_u64(s, b) || expect(s, ',') ||
	    parse_u64(s, e) || expect(s, ']'))
		return (ST_BAD);
	if (*b > *e || *e > data_len)
		return (ST_BAD);
	return (ST_OK);
}

/* A tensor's object (level 2): its data_offsets, other members skipped. */
static int
parse_tensor(struct scan *s, uint64_t data_len, uint64_t *b, uint64_t *e)
{
	const uint8_t *key;
	size_t klen;
	int found = 0;

	if (expect(s, '{'))
		return (ST_BAD);
	skip_ws(s);
	if (s->p < s->end && *s->p == '}')
		return (ST_BAD);	/* no data_offsets */
	for (;;) {
		if (scan_string(s, &key, &klen) || expect(s, ':'))
			return (ST_BAD);
		if (key_is(key, klen, "data_offsets")) {
			if (found || parse_offsets(s, data_len, b, e))
				return (ST_BAD);
			found = 1;
		} else if (skip_value(s, 3)) {
			return (ST_BAD);
		}
		skip_ws(s);
		if (s->p == s->end)
			return (ST_BAD);
		if (*s->p == '}')
			break;
		if (*s->p++ != ',')
			return (ST_BAD);
	}
	s->p++;
	return (found ? ST_OK : ST_BAD);
}

/* The "__metadata__" object: string to string, nothing else. */
static int
parse_metadata(struct scan *s)
{
	const uint8_t *str;
	size_t len;

	if (expect(s, '{'))
		return (ST_BAD);
	skip_ws(s);
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		return (ST_OK);
	}
	for (;;) {
		if (scan_string(s, &str, &len) || expect(s, ':') ||
		    scan_string(s, &str, &len))
			return (ST_BAD);
		skip_ws(s);
		if (s->p == s->end)
			return (ST_BAD);
		if (*s->p == '}')
			break;
		if (*s->p++ != ',')
			return (ST_BAD);
	}
	s->p++;
	return (ST_OK);
}

/*
 * The header object; each tensor adds begin and end, made absolute by
 * adding hs, to o.  Only whitespace may follow the closing brace.
 */
static int
parse_header(struct scan *s, uint64_t hs, uint64_t data_len, struct offs *o)
{
	const uint8_t *key;
	size_t klen;
	uint64_t b, e;
	int meta = 0, r;

	if (expect(s, '{'))
		return (ST_BAD);
	skip_ws(s);
	if (s->p < s->end && *s->p == '}') {
		s->p++;
		goto tail;
	}
	for (;;) {
		if (scan_string(s, &key, &klen) || expect(s, ':'))
			return (ST_BAD);
		if (key_is(key, klen, "__metadata__")) {
			if (meta || parse_metadata(s))
				return (ST_BAD);
			meta = 1;
		} else {
			if (parse_tensor(s, data_len, &b, &e))
				return (ST_BAD);
			/* e <= data_len = file_size - hs: no wrap. */
			if ((r = offs_push(o, hs + b)) ||
			    (r = offs_push(o, hs + e)))
				return (r);
		}
		skip_ws(s);
		if (s->p == s->end)
			return (ST_BAD);
		if (*s->p == '}')
			break;
		if (*s->p++ != ',')
			return (ST_BAD);
	}
	s->p++;
tail:
	skip_ws(s);
	return (s->p == s->end ? ST_OK : ST_BAD);
}

uint64_t
safetensors_declared_size(const uint8_t *head, size_t len,
    uint64_t file_size)
{
	struct offs o = { NULL, 0, 0 };
	struct scan s;
	uint64_t hs, max;
	size_t i;

	hs = safetensors_header_size(head, len, file_size);
	if (hs == 0 || (uint64_t)len < hs)
		return (0);
	s.p = head + 8;
	s.end = head + hs;
	/* Offsets are checked against nothing but overflow here: the
	 * point is to see those beyond the file's end. */
	if (parse_header(&s, hs, UINT64_MAX - hs, &o) != ST_OK) {
		free(o.v);
		return (0);
	}
	for (i = 0, max = hs; i < o.n; i++)
		if (o.v[i] > max)
			max = o.v[i];
	free(o.v);
	return (max);
}

int
safetensors_cuts(const uint8_t *head, size_t len, uint64_t file_size,
    uint64_t **cuts, size_t *n)
{
	struct offs o = { NULL, 0, 0 };
	struct scan s;
	uint64_t hs;
	size_t i, k;
	int r, sorted;

	*cuts = NULL;
	*n = 0;
	hs = safetensors_header_size(head, len, file_size);
	if (hs == 0 || (uint64_t)len < hs)
		return (0);
	s.p = head + 8;
	s.end = head + hs;
	/* The data start is a boundary even when no tensor begins there. */
	if ((r = offs_push(&o, hs)) != ST_OK)
		goto fail;
	if ((r = parse_header(&s, hs, file_size - hs, &o)) != ST_OK)
		goto fail;

	/*
	 * Keep what lies strictly inside the file.  Every value is at
	 * least hs >= 10, so in practice this drops only file_size, the
	 * end of the last tensor.
	 */
	for (i = k = 0, sorted = 1; i < o.n; i++) {
		if (o.v[i] == 0 || o.v[i] >= file_size)
			continue;
		if (k > 0 && o.v[i] < o.v[k - 1])
			sorted = 0;
		o.v[k++] = o.v[i];
	}
	/* Writers usually list tensors in file order: skip the sort then. */
	if (!sorted && sort_u64(o.v, k) != 0) {
		r = ST_NOMEM;
		goto fail;
	}
	for (i = 0, o.n = 0; i < k; i++)
		if (o.n == 0 || o.v[i] != o.v[o.n - 1])
			o.v[o.n++] = o.v[i];
	*cuts = o.v;
	*n = o.n;
	return (1);

fail:
	free(o.v);
	if (r == ST_NOMEM) {
		log_error("out of memory parsing a safetensors header "
		    "(%zu offsets)", o.n);
		return (-1);
	}
	return (0);
}
