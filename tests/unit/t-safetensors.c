/*
 * Safetensors header parser: exact cut lists for well-formed headers
 * (out-of-order tensors, zero-size tensors, metadata with escapes,
 * padding), and 0 for each kind of malformed or hostile header.
 * Headers are built in buffers of exactly their size, so that a sanitizer
 * build catches any read past the end.
 * COFFER_TEST_SMALL=1 shrinks the large case (for sanitizer builds).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coffer/chunk.h"
#include "tap.h"
#include "testutil.h"

#define MiB ((uint64_t)1024 * 1024)

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

/* Growable text buffer for headers too large for a fixed array. */
struct text {
	char *p;
	size_t len, cap;
};

static void __attribute__((format(printf, 2, 3)))
text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			fprintf(stderr, "vsnprintf failed\n");
			exit(2);
		}
		if ((size_t)n < t->cap - t->len)
			break;
		t->cap = t->cap * 2 + (size_t)n + 1;
		if ((t->p = realloc(t->p, t->cap)) == NULL) {
			fprintf(stderr, "out of memory (%zu bytes)\n", t->cap);
			exit(2);
		}
	}
	t->len += (size_t)n;
}

/*
 * A file's first 8 + jlen bytes: the length prefix and the JSON, in a
 * buffer of exactly that size.
 */
static uint8_t *
make_head(const char *json, size_t jlen)
{
	uint8_t *h = xmalloc(8 + jlen);

	put_le64(h, jlen);
	memcpy(h + 8, json, jlen);
	return (h);
}

/*
 * safetensors_cuts on the jlen bytes of json followed by data_len bytes
 * of tensor data.
 */
static int
cuts_of(const char *json, size_t jlen, uint64_t data_len, uint64_t **cuts,
    size_t *n)
{
	uint8_t *h = make_head(json, jlen);
	int r;

	r = safetensors_cuts(h, 8 + jlen, 8 + jlen + data_len, cuts, n);
	free(h);
	return (r);
}

/*
 * The cut list must be exactly want[] (relative to the data start, as
 * in the JSON), made absolute here.
 */
static void
check_cuts(const char *name, const char *json, uint64_t data_len,
    const uint64_t *want, size_t nwant)
{
	uint64_t hs = 8 + strlen(json), *cuts;
	size_t n, i;
	int r, same;

	r = cuts_of(json, strlen(json), data_len, &cuts, &n);
	same = r == 1 && n == nwant;
	for (i = 0; same && i < n; i++)
		same = cuts[i] == hs + want[i];
	if (!ok(same, "%s", name)) {
		diag("returned %d, %zu cuts (want %zu):", r, n, nwant);
		for (i = 0; r == 1 && i < n; i++)
			diag("  %llu (data + %lld)",
			    (unsigned long long)cuts[i],
			    (long long)(cuts[i] - hs));
	}
	free(cuts);
}

/* jlen bytes of json (which may hold NULs) must not parse. */
static void
check_bad_n(const char *name, const char *json, size_t jlen,
    uint64_t data_len)
{
	uint64_t *cuts = (uint64_t *)1;
	size_t n = 1;
	int r;

	r = cuts_of(json, jlen, data_len, &cuts, &n);
	ok(r == 0 && cuts == NULL && n == 0, "malformed: %s (got %d)", name,
	    r);
	if (r == 1)
		free(cuts);
}

static void
check_bad(const char *name, const char *json, uint64_t data_len)
{
	check_bad_n(name, json, strlen(json), data_len);
}

static void
test_header_size(void)
{
	uint8_t h[16];

	memset(h, ' ', sizeof(h));
	h[8] = '{';
	put_le64(h, 2);
	ok(safetensors_header_size(h, 16, 10) == 10, "size: N=2, exact fit");
	ok(safetensors_header_size(h, 16, 9) == 0, "size: 8+N > file size");
	ok(safetensors_header_size(h, 8, 10) == 10,
	    "size: len 8, first JSON byte not yet read");
	ok(safetensors_header_size(h, 7, 10) == 0, "size: len < 8");
	ok(safetensors_header_size(h, 0, 10) == 0, "size: len 0");
	put_le64(h, 1);
	ok(safetensors_header_size(h, 16, 100) == 0, "size: N=1");
	put_le64(h, 0);
	ok(safetensors_header_size(h, 16, 100) == 0, "size: N=0");
	put_le64(h, 100 * MiB);
	ok(safetensors_header_size(h, 16, 8 + 100 * MiB) == 8 + 100 * MiB,
	    "size: N = 100 MiB");
	put_le64(h, 100 * MiB + 1);
	ok(safetensors_header_size(h, 16, UINT64_MAX) == 0,
	    "size: N = 100 MiB + 1");
	put_le64(h, UINT64_MAX);
	ok(safetensors_header_size(h, 16, UINT64_MAX) == 0,
	    "size: N = 2^64-1 (no wrap)");
	put_le64(h, UINT64_MAX - 7);
	ok(safetensors_header_size(h, 16, UINT64_MAX) == 0,
	    "size: 8+N wraps to 0");
	put_le64(h, 0x0100000000000002ULL);
	ok(safetensors_header_size(h, 16, UINT64_MAX) == 0,
	    "size: high byte set");
	put_le64(h, 4);
	h[8] = ' ';
	ok(safetensors_header_size(h, 16, 100) == 0, "size: not '{'");
	h[8] = '[';
	ok(safetensors_header_size(h, 16, 100) == 0, "size: '['");
	h[8] = '{';
	ok(safetensors_header_size(h, 9, 100) == 12, "size: len 9, '{'");
}

static void
test_good(void)
{
	static const uint64_t w3[] = { 0, 100, 300 };
	static const uint64_t w3t[] = { 0, 100, 300, 1000 };
	static const uint64_t wz[] = { 0, 10, 20, 30 };
	static const uint64_t w0[] = { 0 };
	static const uint64_t wm[] = { 0, 5 };
	char json[1024];

	/* Listed c, a, b; stored a [0,100) b [100,300) c [300,1000). */
	snprintf(json, sizeof(json),
	    "{\"c\":{\"dtype\":\"BF16\",\"shape\":[10,35],"
	    "\"data_offsets\":[%d,%d]},"
	    "\"a\":{\"dtype\":\"BF16\",\"shape\":[50],"
	    "\"data_offsets\":[%d,%d]},"
	    "\"b\":{\"dtype\":\"F32\",\"shape\":[5,10],"
	    "\"data_offsets\":[%d,%d]}}", 300, 1000, 0, 100, 100, 300);
	check_cuts("3 tensors out of order, file ends at last tensor", json,
	    1000, w3, 3);
	check_cuts("3 tensors out of order, trailing data after them", json,
	    1500, w3t, 4);

	/* Zero-size tensors share offsets with their neighbours. */
	check_cuts("zero-size tensors",
	    "{\"z1\":{\"dtype\":\"F32\",\"shape\":[0],"
	    "\"data_offsets\":[10,10]},"
	    "\"x\":{\"dtype\":\"U8\",\"shape\":[10],\"data_offsets\":[0,10]},"
	    "\"z0\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},"
	    "\"y\":{\"dtype\":\"U8\",\"shape\":[10],"
	    "\"data_offsets\":[10,20]},"
	    "\"z2\":{\"dtype\":\"U8\",\"shape\":[0],"
	    "\"data_offsets\":[30,30]},"
	    "\"z3\":{\"dtype\":\"U8\",\"shape\":[0],"
	    "\"data_offsets\":[40,40]}}", 40, wz, 4);

	check_cuts("metadata with escapes and braces inside strings",
	    "{\"__metadata__\":{\"format\":\"pt\","
	    "\"a\\\"b\":\"}{][\\\\\\\"\","
	    "\"json\":\"{\\\"k\\\":[1,{\\\"x\\\":\\\"}\\\"}]}\","
	    "\"u\":\"\\u00e9\\ud83d\\ude00\\/\\b\\f\\n\\r\\t \xc3\xa9"
	    "\xe2\x82\xac\xf0\x9f\x98\x80\",\"\":\"\"},"
	    "\"t\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[0,5]}}",
	    10, wm, 2);
	check_cuts("metadata last, empty",
	    "{\"t\":{\"data_offsets\":[0,5]},\"__metadata__\":{}}", 10, wm,
	    2);
	check_cuts("escaped member names are unescaped",
	    "{\"\\u005f_metadata__\":{\"a\":\"b\"},"
	    "\"t\":{\"data_offset\\u0073\":[0,5]}}", 10, wm, 2);
	check_cuts("names with escapes that are not the keywords",
	    "{\"\\u00e9\\n\":{\"data\\/offsets\":[1,2],\"data_offsets\":[0,5]},"
	    "\"_\\u005fmetadata_\\u005f\\u0000\":{\"data_offsets\":[5,5]}}",
	    10, wm, 2);

	snprintf(json, sizeof(json), "%s%*s",
	    "{\"t\":{\"dtype\":\"U8\",\"shape\":[5],\"data_offsets\":[0,5]}}",
	    7, "");
	check_cuts("header padded with spaces", json, 10, wm, 2);
	check_cuts("whitespace everywhere",
	    "{\t\"t\"\n:\r{ \"dtype\" : \"U8\" , \"data_offsets\" : [ 0 , 5 ] "
	    "} }\r\n\t ", 10, wm, 2);
	check_cuts("other member types are skipped",
	    "{\"t\":{\"a\":true,\"b\":false,\"c\":null,\"d\":-1.5e+3,"
	    "\"e\":[[],{},[{\"x\":[0.0,1E9,-0]}]],\"f\":{\"g\":\"h\"},"
	    "\"data_offsets\":[0,5],\"i\":0}}", 10, wm, 2);
	check_cuts("empty header, data start only", "{}", 10, w0, 1);
	check_cuts("empty header, no data", "{}  ", 0, NULL, 0);
	check_cuts("all tensors empty at the end", "{\"t\":{"
	    "\"data_offsets\":[0,0]}}", 0, NULL, 0);
	check_cuts("duplicate tensor names are accepted",
	    "{\"t\":{\"data_offsets\":[0,5]},\"t\":{\"data_offsets\":[0,5]}}",
	    10, wm, 2);
}

/* The header's JSON cut to every shorter length must never parse. */
static void
test_truncated(void)
{
	const char *json = "{\"__metadata__\":{\"k\":\"v\\u00e9\"},"
	    "\"t\":{\"dtype\":\"BF16\",\"shape\":[1,[2]],"
	    "\"data_offsets\":[0,5]}}";
	size_t jlen = strlen(json), cut, bad = 0;
	uint64_t *cuts;
	uint8_t *h;
	size_t n;

	for (cut = 2; cut < jlen; cut++) {
		h = make_head(json, cut);
		if (safetensors_cuts(h, 8 + cut, 8 + cut + 10, &cuts, &n) != 0)
			bad++;
		free(h);
	}
	ok(bad == 0, "JSON truncated at each of %zu lengths", jlen - 2);

	/* Complete header, but the caller passes too few bytes of it. */
	h = make_head(json, jlen);
	bad = 0;
	for (cut = 0; cut < 8 + jlen; cut++)
		if (safetensors_cuts(h, cut, 8 + jlen + 10, &cuts, &n) != 0)
			bad++;
	ok(bad == 0, "len < header size at each length");
	ok(safetensors_cuts(h, 8 + jlen, 8 + jlen + 10, &cuts, &n) == 1 &&
	    n == 2, "the same header complete parses");
	free(cuts);
	free(h);
}

/*
 * A tensor whose member "a" nests open k times (then close k times)
 * before its data_offsets [0, 5].
 */
static char *
nest(const char *open, const char *close, size_t k)
{
	struct text t = { NULL, 0, 0 };
	size_t i;

	text_add(&t, "{\"t\":{\"a\":");
	for (i = 0; i < k; i++)
		text_add(&t, "%s", open);
	for (i = 0; i < k; i++)
		text_add(&t, "%s", close);
	text_add(&t, ",\"data_offsets\":[0,5]}}");
	return (t.p);
}

static void
test_bad(void)
{
	static const uint64_t wm[] = { 0, 5 };
	uint8_t h[32];
	uint64_t *cuts;
	size_t n;
	char *bomb;

	/* Length prefix problems. */
	memcpy(h + 8, "{}                      ", 24);
	put_le64(h, 100 * MiB + 1);
	ok(safetensors_cuts(h, 32, UINT64_MAX, &cuts, &n) == 0,
	    "malformed: N too big");
	put_le64(h, 24);
	ok(safetensors_cuts(h, 32, 31, &cuts, &n) == 0,
	    "malformed: N > file size");
	ok(safetensors_cuts(h, 31, 100, &cuts, &n) == 0,
	    "malformed: len < 8 + N");
	ok(safetensors_cuts(h, 32, 32, &cuts, &n) == 1 && n == 0,
	    "the same header with len 8 + N parses");
	free(cuts);
	h[8] = ' ';
	h[9] = '{';
	h[10] = '}';
	ok(safetensors_cuts(h, 32, 100, &cuts, &n) == 0,
	    "malformed: leading whitespace, not '{'");

	check_bad("array", "[]", 10);
	check_bad("not JSON", "{x}", 10);
	check_bad("unterminated string", "{\"t", 10);
	check_bad("unterminated string in metadata",
	    "{\"__metadata__\":{\"a\":\"b}}", 10);
	check_bad("bad escape \\x", "{\"__metadata__\":{\"a\":\"\\x\"}}", 10);
	check_bad("bad escape \\u12", "{\"__metadata__\":{\"a\":\"\\u12\"}}",
	    10);
	check_bad("bad escape \\u12G4",
	    "{\"__metadata__\":{\"a\":\"\\u12G4\"}}", 10);
	check_bad("lone high surrogate",
	    "{\"__metadata__\":{\"a\":\"\\ud800x\"}}", 10);
	check_bad("lone low surrogate",
	    "{\"__metadata__\":{\"a\":\"\\udc00\"}}", 10);
	check_bad("high surrogate then non-surrogate",
	    "{\"__metadata__\":{\"a\":\"\\ud800\\u0041\"}}", 10);
	check_bad("raw control character in string",
	    "{\"__metadata__\":{\"a\":\"\t\"}}", 10);
	check_bad("invalid UTF-8 (lone continuation)",
	    "{\"__metadata__\":{\"a\":\"\x80\"}}", 10);
	check_bad("invalid UTF-8 (overlong)",
	    "{\"__metadata__\":{\"a\":\"\xc0\xaf\"}}", 10);
	check_bad("invalid UTF-8 (surrogate)",
	    "{\"__metadata__\":{\"a\":\"\xed\xa0\x80\"}}", 10);
	check_bad("invalid UTF-8 (above U+10FFFF)",
	    "{\"__metadata__\":{\"a\":\"\xf4\x90\x80\x80\"}}", 10);
	check_bad("invalid UTF-8 (truncated sequence)",
	    "{\"__metadata__\":{\"a\":\"\xe2\x82\"}}", 10);
	check_bad("metadata value not a string",
	    "{\"__metadata__\":{\"a\":1}}", 10);
	check_bad("metadata not an object", "{\"__metadata__\":\"x\"}", 10);
	check_bad("metadata twice",
	    "{\"__metadata__\":{},\"__metadata__\":{}}", 10);

	check_bad("missing data_offsets",
	    "{\"t\":{\"dtype\":\"U8\",\"shape\":[5]}}", 10);
	check_bad("tensor is an empty object", "{\"t\":{}}", 10);
	check_bad("tensor entry is not an object", "{\"t\":[0,5]}", 10);
	check_bad("tensor entry is a string", "{\"t\":\"x\"}", 10);
	check_bad("data_offsets with 1 element",
	    "{\"t\":{\"data_offsets\":[0]}}", 10);
	check_bad("data_offsets with 3 elements",
	    "{\"t\":{\"data_offsets\":[0,5,6]}}", 10);
	check_bad("data_offsets empty", "{\"t\":{\"data_offsets\":[]}}", 10);
	check_bad("data_offsets not an array",
	    "{\"t\":{\"data_offsets\":5}}", 10);
	check_bad("data_offsets twice",
	    "{\"t\":{\"data_offsets\":[0,5],\"data_offsets\":[0,5]}}", 10);
	check_bad("data_offsets twice, once escaped",
	    "{\"t\":{\"data_offsets\":[0,5],\"data_offset\\u0073\":[0,5]}}",
	    10);
	check_bad("negative offset", "{\"t\":{\"data_offsets\":[-1,5]}}", 10);
	check_bad("negative zero", "{\"t\":{\"data_offsets\":[-0,5]}}", 10);
	check_bad("float offset", "{\"t\":{\"data_offsets\":[0,5.0]}}", 10);
	check_bad("exponent offset", "{\"t\":{\"data_offsets\":[0,5e0]}}", 10);
	check_bad("leading zero", "{\"t\":{\"data_offsets\":[00,5]}}", 10);
	check_bad("string offset", "{\"t\":{\"data_offsets\":[\"0\",5]}}",
	    10);
	check_bad("offset 2^63",
	    "{\"t\":{\"data_offsets\":[0,9223372036854775808]}}", 10);
	check_bad("offset 2^64",
	    "{\"t\":{\"data_offsets\":[0,18446744073709551616]}}", 10);
	check_bad("offset of 40 digits", "{\"t\":{\"data_offsets\":"
	    "[0,1234567890123456789012345678901234567890]}}", 10);
	check_bad("end < begin", "{\"t\":{\"data_offsets\":[5,4]}}", 10);
	check_bad("end beyond the data", "{\"t\":{\"data_offsets\":[0,11]}}",
	    10);
	check_bad("begin beyond the data",
	    "{\"t\":{\"data_offsets\":[11,11]}}", 10);
	check_bad("trailing comma in array",
	    "{\"t\":{\"data_offsets\":[0,5,]}}", 10);
	check_bad("trailing comma in tensor",
	    "{\"t\":{\"data_offsets\":[0,5],}}", 10);
	check_bad("trailing comma in header",
	    "{\"t\":{\"data_offsets\":[0,5]},}", 10);
	check_bad("missing comma",
	    "{\"t\":{\"data_offsets\":[0,5]} \"u\":{\"data_offsets\":[0,5]}}",
	    10);
	check_bad("missing colon", "{\"t\" {\"data_offsets\":[0,5]}}", 10);
	check_bad("unquoted name", "{t:{\"data_offsets\":[0,5]}}", 10);
	check_bad("single quotes", "{'t':{\"data_offsets\":[0,5]}}", 10);
	check_bad("trailing garbage",
	    "{\"t\":{\"data_offsets\":[0,5]}}   x", 10);
	check_bad("second object", "{\"t\":{\"data_offsets\":[0,5]}}{}", 10);
	{
		static const char nul_pad[] =
		    "{\"t\":{\"data_offsets\":[0,5]}}\0\0";
		static const char nul_str[] =
		    "{\"t\0\":{\"data_offsets\":[0,5]}}";

		check_bad_n("NUL padding", nul_pad, sizeof(nul_pad) - 1, 10);
		check_bad_n("NUL inside a string", nul_str,
		    sizeof(nul_str) - 1, 10);
	}
	check_bad("bad literal", "{\"t\":{\"a\":tru,\"data_offsets\":[0,5]}}",
	    10);
	check_bad("bad number", "{\"t\":{\"a\":1.,\"data_offsets\":[0,5]}}",
	    10);
	check_bad("bad exponent", "{\"t\":{\"a\":1e,\"data_offsets\":[0,5]}}",
	    10);
	check_bad("hex number", "{\"t\":{\"a\":0x1,\"data_offsets\":[0,5]}}",
	    10);
	check_bad("unclosed nested array",
	    "{\"t\":{\"a\":[[1],\"data_offsets\":[0,5]}}", 10);
	check_bad("mismatched brackets",
	    "{\"t\":{\"a\":[1},\"data_offsets\":[0,5]}}", 10);

	/* Depth: 64 levels in all is fine, 65 is not, 200000 neither. */
	bomb = nest("[", "]", 62);
	check_cuts("nesting 64 deep", bomb, 10, wm, 2);
	free(bomb);
	bomb = nest("[", "]", 63);
	check_bad("nesting 65 deep", bomb, 10);
	free(bomb);
	bomb = nest("[", "", 200000);
	check_bad("depth bomb [[[[... (200000)", bomb, 10);
	free(bomb);
	bomb = nest("{\"\":", "", 50000);
	check_bad("depth bomb {\"\":{\"\":... (50000)", bomb, 10);
	free(bomb);
}

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

/*
 * ntensors tensors of 1..16 bytes laid out in order, listed in a
 * scrambled order (a multiplicative permutation); a zero-size tensor
 * every 7th.  The cut list must be the data start plus every distinct
 * tensor end short of the file's end.
 */
static void
test_many(size_t ntensors, int timed)
{
	struct text t = { NULL, 0, 0 };
	uint64_t *off, *cuts, hs, data_len, sum = 0;
	size_t i, j, n, nwant, nbad = 0;
	uint8_t *h;
	double t0, best = 1e9;
	int r = 0, rep;

	off = xmalloc((ntensors + 1) * sizeof(*off));
	for (i = 0; i < ntensors; i++) {
		off[i] = sum;
		sum += i % 7 == 3 ? 0 : 1 + i % 16;
	}
	off[ntensors] = data_len = sum;
	text_add(&t, "{\"__metadata__\":{\"format\":\"pt\"}");
	for (i = 0; i < ntensors; i++) {
		/* 7919 is prime and does not divide the counts used here. */
		j = (i * 7919) % ntensors;
		text_add(&t, ",\"model.layers.%zu.weight\":{\"dtype\":\"BF16\","
		    "\"shape\":[%llu],\"data_offsets\":[%llu,%llu]}", j,
		    (unsigned long long)(off[j + 1] - off[j]),
		    (unsigned long long)off[j],
		    (unsigned long long)off[j + 1]);
	}
	text_add(&t, "}");
	while (t.len % 8)
		text_add(&t, " ");
	h = make_head(t.p, t.len);
	hs = 8 + t.len;

	for (rep = 0; rep < (timed ? 5 : 1); rep++) {
		t0 = now();
		r = safetensors_cuts(h, hs, hs + data_len, &cuts, &n);
		t0 = now() - t0;
		if (t0 < best)
			best = t0;
		if (rep + 1 < (timed ? 5 : 1) && r == 1)
			free(cuts);
	}
	/* Distinct offsets, strictly below data_len. */
	for (i = 0, nwant = 0; i <= ntensors; i++)
		if ((i == 0 || off[i] != off[i - 1]) && off[i] < data_len)
			nwant++;
	if (r == 1 && n == nwant) {
		for (i = 0, j = 0; i <= ntensors; i++) {
			if ((i > 0 && off[i] == off[i - 1]) ||
			    off[i] >= data_len)
				continue;
			if (cuts[j++] != hs + off[i])
				nbad++;
		}
	}
	ok(r == 1 && n == nwant && nbad == 0,
	    "%zu tensors listed out of order: %zu cuts", ntensors, nwant);
	diag("%zu tensors, header %zu bytes: best of %d parses %.3f ms",
	    ntensors, t.len, timed ? 5 : 1, best * 1e3);
	if (r == 1)
		free(cuts);
	free(h);
	free(t.p);
	free(off);
}

/* The size a header declares: a file shorter than it is being written. */
static void
test_declared(void)
{
	static const char j[] = "{\"a\":{\"dtype\":\"U8\",\"shape\":[100],"
	    "\"data_offsets\":[0,100]},\"b\":{\"dtype\":\"U8\","
	    "\"shape\":[50],\"data_offsets\":[100,150]}}";
	size_t jlen = sizeof(j) - 1;
	uint8_t *h = make_head(j, jlen);

	ok(safetensors_declared_size(h, 8 + jlen, 8 + jlen + 150) ==
	    8 + jlen + 150, "declared size: the end of the last tensor");
	ok(safetensors_declared_size(h, 8 + jlen, 8 + jlen + 60) ==
	    8 + jlen + 150, "declared size of a file cut short: still 150 on");
	ok(safetensors_cuts(h, 8 + jlen, 8 + jlen + 60, &(uint64_t *){ NULL },
	    &(size_t){ 0 }) == 0, "and such a file has no cuts of its own");
	h[8] = '[';
	ok(safetensors_declared_size(h, 8 + jlen, 8 + jlen + 150) == 0,
	    "not a header: 0");
	free(h);
}

int
main(void)
{
	const char *small = getenv("COFFER_TEST_SMALL");

	test_header_size();
	test_good();
	test_truncated();
	test_declared();
	test_bad();
	test_many(10000, 1);
	test_many(small && *small == '1' ? 100000 : 1000000, 0);
	return (tap_done());
}
