/*
 * The output layer.  The JSON writer: separators at every nesting, the
 * one-element-a-line arrays, strings whatever their bytes (quotes,
 * backslashes, control bytes, valid UTF-8 passed through, invalid bytes
 * and surrogates as \u00XX), numbers at their limits.  The Prometheus
 * helpers: HELP text and a label's value escaped.  Text for people
 * (fmt_text, fmt_path): control bytes (C0, DEL, C1 in UTF-8, bytes of no
 * valid UTF-8 sequence) escaped, valid UTF-8 passed through.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/buf.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"
#include "coffer/prom.h"
#include "tap.h"

static char *out;
static size_t outlen;
static FILE *f;

static struct jw *
start(struct jw *j)
{
	free(out);
	out = NULL;
	if ((f = open_memstream(&out, &outlen)) == NULL) {
		perror("open_memstream");
		exit(1);
	}
	jw_init(j, f);
	return (j);
}

/* What was written since start equals want. */
static int
got(const char *want, const char *name)
{
	fclose(f);
	if (strcmp(out, want) == 0)
		return (ok(1, "%s", name));
	ok(0, "%s", name);
	diag("got  '%s'", out);
	diag("want '%s'", want);
	return (0);
}

static void
test_structure(void)
{
	struct jw j;

	start(&j);
	jw_begin_object(&j);
	jw_end_object(&j);
	got("{}\n", "an empty object is a document with its newline");

	start(&j);
	jw_begin_object(&j);
	jw_str(jw_key(&j, "a"), "x");
	jw_int(jw_key(&j, "b"), -3);
	jw_begin_array(jw_key(&j, "c"));
	jw_int(&j, 1);
	jw_begin_object(&j);
	jw_null(jw_key(&j, "d"));
	jw_end_object(&j);
	jw_begin_array(&j);
	jw_end_array(&j);
	jw_bool(&j, 0);
	jw_end_array(&j);
	jw_bool(jw_key(&j, "e"), 1);
	jw_end_object(&j);
	got("{\"a\":\"x\",\"b\":-3,\"c\":[1,{\"d\":null},[],false],\"e\":true}\n",
	    "commas between members and elements at every depth");

	start(&j);
	jw_begin_array_lines(&j);
	jw_end_array(&j);
	got("[]\n", "an empty array of lines is []");

	start(&j);
	jw_begin_array_lines(&j);
	jw_begin_object(&j);
	jw_int(jw_key(&j, "n"), 1);
	jw_end_object(&j);
	jw_begin_object(&j);
	jw_int(jw_key(&j, "n"), 2);
	jw_end_object(&j);
	jw_end_array(&j);
	got("[\n  {\"n\":1},\n  {\"n\":2}\n]\n",
	    "an array of lines: an element a line, the bracket on its own");

	start(&j);
	jw_begin_object(&j);
	jw_bool(jw_key(&j, "dry_run"), 1);
	jw_begin_array_lines(jw_key(&j, "s"));
	jw_str(&j, "a");
	jw_end_array(&j);
	jw_end_object(&j);
	got("{\"dry_run\":true,\"s\":[\n  \"a\"\n]}\n",
	    "an array of lines as a member's value");

	start(&j);
	jw_int(&j, 1);
	jw_str(&j, "two");
	got("1\n\"two\"\n", "scalars at the top are documents of their own");
}

static void
test_strings(void)
{
	static const char nul[] = "a\0b";
	struct jw j;

	start(&j);
	jw_str(&j, "q\"b\\s/");
	got("\"q\\\"b\\\\s/\"\n", "quote and backslash escaped, slash not");

	start(&j);
	jw_str(&j, "\n\t\r\x01\x1f\x7f");
	got("\"\\n\\t\\u000d\\u0001\\u001f\\u007f\"\n",
	    "newline and tab by name, other control bytes as \\u00XX");

	start(&j);
	jw_strn(&j, nul, 3);
	got("\"a\\u0000b\"\n", "a NUL byte inside a counted string");

	start(&j);
	jw_str(&j, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	got("\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"\n",
	    "valid UTF-8 of 2, 3 and 4 bytes passes through");

	start(&j);
	jw_str(&j, "\xff\xfe" "a\xc3" "b\xe2\x82" "c\x80");
	got("\"\\u00ff\\u00fea\\u00c3b\\u00e2\\u0082c\\u0080\"\n",
	    "invalid and truncated sequences: each byte as \\u00XX");

	start(&j);
	jw_str(&j, "\xc0\xaf\xed\xa0\x80\xf4\x90\x80\x80");
	got("\"\\u00c0\\u00af\\u00ed\\u00a0\\u0080\\u00f4\\u0090\\u0080"
	    "\\u0080\"\n", "overlong, surrogate and beyond U+10FFFF refused");

	start(&j);
	jw_str(&j, NULL);
	got("null\n", "a NULL string is null");

	start(&j);
	jw_begin_object(&j);
	jw_int(jw_key(&j, "k\"\n"), 0);
	jw_end_object(&j);
	got("{\"k\\\"\\n\":0}\n", "keys are escaped too");
}

static void
test_numbers(void)
{
	struct jw j;

	start(&j);
	jw_begin_array(&j);
	jw_int(&j, INT64_MIN);
	jw_int(&j, INT64_MAX);
	jw_uint(&j, UINT64_MAX);
	jw_end_array(&j);
	got("[-9223372036854775808,9223372036854775807,"
	    "18446744073709551615]\n", "64-bit integers at their limits");

	start(&j);
	jw_begin_array(&j);
	jw_double(&j, 1.23456, 3);
	jw_double(&j, 100, -1);
	jw_double(&j, 12.5, -1);
	jw_double(&j, 1e-7, -1);
	jw_double(&j, NAN, 3);
	jw_double(&j, INFINITY, -1);
	jw_double(&j, -DBL_MAX * 2, 0);
	jw_end_array(&j);
	got("[1.235,100,12.5,1e-07,null,null,null]\n",
	    "fixed and shortest forms; NaN and infinities as null");
}

static void
test_prom(void)
{
	struct buf b = BUF_INIT;
	int rc;

	rc = prom_family(&b, "m", "gauge", "a\\b\nc \"d\"");
	rc |= prom_sample(&b, "m", "dataset", "x\"y\\z\nw", 1.5, 3);
	rc |= prom_sample(&b, "m", NULL, NULL, 42, 0);
	rc |= buf_put_u8(&b, 0);
	if (!ok(rc == 0 && strcmp((char *)b.data,
	    "# HELP m a\\\\b\\nc \"d\"\n# TYPE m gauge\n"
	    "m{dataset=\"x\\\"y\\\\z\\nw\"} 1.500\n"
	    "m 42\n") == 0,
	    "prometheus: help and label values escaped, values formatted") &&
	    rc == 0)
		diag("got '%s'", (char *)b.data);
	buf_release(&b);
}

static void
test_fmt_text(void)
{
	static const char plain[] = "/data/run 1/\xc3\xa9t\xc3\xa9 \xe6\x97\xa5";
	const char *v[9];
	char big[64];
	int i;

	ok(fmt_text(plain) == plain, "printable UTF-8 text is itself");
	ok(fmt_text(NULL) == NULL, "NULL stays NULL");
	ok(strcmp(fmt_text("a\033[31mb"), "\"a\\033[31mb\"") == 0,
	    "ESC is escaped, in quotes");
	ok(strcmp(fmt_text("a\nb\tc\"d\\e\x7f"),
	    "\"a\\nb\\tc\\\"d\\\\e\\177\"") == 0,
	    "newline, tab, quote, backslash, DEL");
	ok(strcmp(fmt_text("x\xc2\x9b" "1m"), "\"x\\302\\2331m\"") == 0,
	    "a C1 control in UTF-8 (CSI) is escaped");
	ok(strcmp(fmt_text("x\x9b" "1m\xc3\xa9"), "\"x\\2331m\xc3\xa9\"") == 0,
	    "a raw 0x9b is escaped, UTF-8 after it kept");
	ok(strcmp(fmt_text("\xe6\x97"), "\"\\346\\227\"") == 0,
	    "a truncated sequence is escaped");
	for (i = 0; i < 9; i++) {
		snprintf(big, sizeof(big), "n%d\001", i);
		v[i] = fmt_text(big);
	}
	for (i = 1; i < 9; i++) {
		snprintf(big, sizeof(big), "\"n%d\\001\"", i);
		if (strcmp(v[i], big) != 0)
			break;
	}
	ok(i == 9, "eight results at once stay valid");
}

int
main(void)
{
	test_structure();
	test_strings();
	test_numbers();
	test_prom();
	test_fmt_text();
	free(out);
	return (tap_done());
}
