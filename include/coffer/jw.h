#ifndef COFFER_JW_H
#define COFFER_JW_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * The one JSON writer behind every --json; jw_ as git's json-writer, for
 * json_ is jansson's namespace.  It streams: each call writes its bytes
 * to the FILE at once, and the writer keeps only a stack of what is open,
 * so `ls --json` of a snapshot of millions of entries costs the memory of
 * one entry.  That is why --json uses no JSON library from Debian:
 * jansson (which reads and writes the small bundle manifests) and json-c
 * build a document as a tree in memory first, and yajl's streaming
 * generator passes bytes that are not UTF-8 through (invalid JSON) or
 * refuses the string, where a file name must be written whatever its
 * bytes.
 *
 * Calls nest as the document does; in an object, jw_key comes before
 * each value and returns the writer, so a member is one line:
 *
 *	struct jw j;
 *
 *	jw_init(&j, stdout);
 *	jw_begin_object(&j);
 *	jw_str(jw_key(&j, "snapshot"), sid);
 *	jw_int(jw_key(&j, "files"), files);
 *	jw_end_object(&j);
 *
 * prints {"snapshot":"…","files":12} and a newline: a document ends with
 * one when its outermost value is complete.  Misuse (a value without its
 * key in an object, a key in an array, ends that do not match, nesting
 * deeper than JW_DEPTH) is a programmer error and asserted.  Write
 * errors are the FILE's (ferror).
 *
 * Strings are byte strings: valid UTF-8 is passed through; '"' and '\'
 * are escaped, newline and tab as \n and \t, other control bytes and each
 * byte that is not part of valid UTF-8 as \u00XX, so the output is valid
 * JSON whatever a file name holds and the name stays recognizable.
 */

#define JW_DEPTH 16

struct jw {			/* caller-owned; fields are the writer's */
	FILE *f;
	int depth;
	unsigned char st[JW_DEPTH];
};

/* Write to f, which the caller keeps open while it writes. */
void jw_init(struct jw *j, FILE *f);

void jw_begin_object(struct jw *j);
void jw_end_object(struct jw *j);
void jw_begin_array(struct jw *j);
/*
 * An array with each element on a line of its own, indented, and the
 * closing bracket on its own line when there is an element: long
 * listings (ls, snapshots, diff) read, grep and diff line by line.
 */
void jw_begin_array_lines(struct jw *j);
void jw_end_array(struct jw *j);

/* The next member's name, in an object; returns j for the value. */
struct jw *jw_key(struct jw *j, const char *key);

/* A string, escaped as above; NULL writes null. */
void jw_str(struct jw *j, const char *s);
/* The n bytes at s (NUL bytes included) as a string. */
void jw_strn(struct jw *j, const char *s, size_t n);
void jw_int(struct jw *j, int64_t v);
void jw_uint(struct jw *j, uint64_t v);
/*
 * A number with decimals digits after the point ("%.*f"), or with
 * decimals < 0 in the shortest form of six significant digits ("%g").
 * NaN and infinities, which JSON cannot hold, write null.
 */
void jw_double(struct jw *j, double v, int decimals);
void jw_bool(struct jw *j, int v);
void jw_null(struct jw *j);

#endif
