/*
 * The paper key: the repository id and a full key's material as text a
 * person can copy by hand and type back, with a checksum on every line
 * that catches a typo and names the line (doc/format.md, "Paper keys").
 * Format 1: the repository id and a holder key, fifteen lines of 16 bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "blake2b.h"
#include "coffer/buf.h"
#include "coffer/crypto.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "crypto-int.h"

#define PAPER_HEAD "coffer paper key "
#define PAPER_CTX "coffer-paper-key"
enum {
	PAPER_DATA_MAX = CCRYPTO_REPO_ID_BYTES + CCRYPTO_HOLDER_BYTES,
	PAPER_LINE_MAX = 16,
	PAPER_SUM = 2,			/* bytes of checksum per line */
	PAPER_CHECK = 4,		/* bytes of the whole key's check */
};

/* The format's shape: its data, and the bytes of data per line. */
struct paper_fmt {
	int version;
	size_t data, line;
};
static const struct paper_fmt paper_v1 = {
	1, CCRYPTO_REPO_ID_BYTES + CCRYPTO_HOLDER_BYTES, 16
};
_Static_assert((CCRYPTO_REPO_ID_BYTES + CCRYPTO_HOLDER_BYTES) % 16 == 0,
    "whole lines");
#define PAPER_LINES_MAX 15

/*
 * A line's checksum: BLAKE2b-256 of the context, the line's number and its
 * bytes, truncated.  The number is in it, so that a line copied twice or
 * two lines swapped are caught as well.
 */
static void
line_sum(const struct paper_fmt *f, unsigned line, const uint8_t *data,
    uint8_t out[PAPER_SUM])
{
	uint8_t msg[sizeof(PAPER_CTX) + PAPER_LINE_MAX], h[32];

	memcpy(msg, PAPER_CTX, sizeof(PAPER_CTX));	/* with its NUL */
	msg[sizeof(PAPER_CTX) - 1] = (uint8_t)line;
	memcpy(msg + sizeof(PAPER_CTX), data, f->line);
	blake2b(h, sizeof(h), msg, sizeof(PAPER_CTX) + f->line, NULL, 0);
	memcpy(out, h, PAPER_SUM);
	sodium_memzero(msg, sizeof(msg));
}

static void
whole_check(const struct paper_fmt *f, const uint8_t *data,
    uint8_t out[PAPER_CHECK])
{
	uint8_t h[32];

	blake2b(h, sizeof(h), data, f->data, (const uint8_t *)PAPER_CTX,
	    sizeof(PAPER_CTX) - 1);
	memcpy(out, h, PAPER_CHECK);
}

int
ccrypto_paper_encode(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], struct buf *out)
{
	const struct paper_fmt *f = &paper_v1;
	char idhex[2 * CCRYPTO_REPO_ID_BYTES + 1], *line = NULL;
	uint8_t *data = NULL, sum[PAPER_SUM], check[PAPER_CHECK];
	unsigned i, j;
	int rc = -1;

	if (ccrypto_keys_write_only(k)) {
		log_error("a write-only key has no paper form (use a key file)");
		return (-1);
	}
	if (ccrypto_keys_kind(k) != CCRYPTO_KEY_HOLDER) {
		log_error("internal error: a paper key for the master secret");
		return (-1);
	}
	if ((data = ccrypto_secret_new(PAPER_DATA_MAX)) == NULL ||
	    (line = (char *)ccrypto_secret_new(128)) == NULL)
		goto out;
	memcpy(data, repo_id, CCRYPTO_REPO_ID_BYTES);
	ccrypto_keys_holder_parts(k, data + CCRYPTO_REPO_ID_BYTES);
	hex_encode(idhex, repo_id, CCRYPTO_REPO_ID_BYTES);
	if (buf_printf(out,
	    "# coffer paper key of repository %s\n"
	    "# Whoever holds it can read every snapshot: keep it as you would "
	    "the data.\n"
	    "# Type it back with 'coffer key import'; the last group of each "
	    "line is\n"
	    "# that line's checksum, and a typo is reported with its line.\n"
	    PAPER_HEAD "%d\n", idhex, f->version))
		goto out;
	for (i = 0; i < f->data / f->line; i++) {
		const uint8_t *d = data + i * f->line;
		size_t n;

		n = (size_t)snprintf(line, 128, "%02u:", i + 1);
		for (j = 0; j < f->line; j += 2)
			n += (size_t)snprintf(line + n, 128 - n, " %02x%02x",
			    d[j], d[j + 1]);
		line_sum(f, i + 1, d, sum);
		n += (size_t)snprintf(line + n, 128 - n, "  %02x%02x\n",
		    sum[0], sum[1]);
		if (buf_append(out, line, n))
			goto out;
	}
	whole_check(f, data, check);
	if (buf_printf(out, "check: %02x%02x %02x%02x\n", check[0], check[1],
	    check[2], check[3]))
		goto out;
	rc = 0;
out:
	ccrypto_secret_free((uint8_t *)line);
	ccrypto_secret_free(data);
	return (rc);
}

/*
 * The hex digits of p[0..n) into out (at most max bytes), skipping blanks
 * and dashes; the number of bytes, or -1 with *bad the first character
 * that is not a hex digit (or 0 for an odd count).
 */
static int
line_bytes(const char *p, size_t n, uint8_t *out, size_t max, int *bad)
{
	size_t i, got = 0;
	int v, half = -1;

	*bad = 0;
	for (i = 0; i < n; i++) {
		if (p[i] == ' ' || p[i] == '\t' || p[i] == '-' || p[i] == '\r')
			continue;
		if ((v = hex_value((unsigned char)p[i])) < 0) {
			*bad = (unsigned char)p[i];
			return (-1);
		}
		if (half < 0) {
			half = v;
			continue;
		}
		if (got == max)
			return ((int)max + 1);
		out[got++] = (uint8_t)(half << 4 | v);
		half = -1;
	}
	return (half < 0 ? (int)got : -1);
}

int
ccrypto_paper_is(const uint8_t *text, size_t len)
{
	const char *t = (const char *)text, *p;
	size_t off = 0;

	/* At the start of a line (a comment may name it too). */
	while ((p = memmem(t + off, len - off, PAPER_HEAD,
	    sizeof(PAPER_HEAD) - 1)) != NULL) {
		if (p == t || p[-1] == '\n')
			return (1);
		off = (size_t)(p - t) + 1;
	}
	return (0);
}

struct ccrypto_keys *
ccrypto_paper_decode(const uint8_t *text, size_t len,
    uint8_t repo_id[CCRYPTO_REPO_ID_BYTES])
{
	const char *p = (const char *)text, *end = p + len, *eol, *colon, *c;
	const char *v;
	uint8_t *data, lb[PAPER_LINE_MAX + PAPER_SUM + 1], sum[PAPER_SUM];
	uint8_t check[PAPER_CHECK], want[PAPER_CHECK];
	const struct paper_fmt *f = NULL;
	struct ccrypto_keys *k = NULL;
	int seen[PAPER_LINES_MAX + 1] = { 0 }, have_check = 0, bad, n;
	unsigned long num;
	unsigned fline = 0, i, lines = 0;
	char *e;

	if ((data = ccrypto_secret_new(PAPER_DATA_MAX)) == NULL)
		return (NULL);
	for (; p < end; p = eol + 1) {
		if ((eol = memchr(p, '\n', (size_t)(end - p))) == NULL)
			eol = end;
		fline++;
		while (p < eol && (*p == ' ' || *p == '\t'))
			p++;
		if (p == eol || *p == '#' || *p == '\r')
			continue;
		if (f == NULL) {
			if ((size_t)(eol - p) < sizeof(PAPER_HEAD) ||
			    memcmp(p, PAPER_HEAD, sizeof(PAPER_HEAD) - 1)) {
				log_error("paper key, line %u: expected "
				    "'" PAPER_HEAD "1'", fline);
				goto err;
			}
			v = p + sizeof(PAPER_HEAD) - 1;
			for (c = v; c < eol && *c >= '0' && *c <= '9'; c++)
				;
			n = (int)(c - v);
			while (c < eol && (*c == ' ' || *c == '\t' ||
			    *c == '\r'))
				c++;
			if (c != eol || n == 0) {
				log_error("paper key, line %u: expected "
				    "'" PAPER_HEAD "1'", fline);
				goto err;
			}
			if (n != 1 || *v != '1') {
				log_error("paper key has format %.*s; this "
				    "coffer reads format 1 (upgrade coffer)",
				    n > 9 ? 9 : n, v);
				goto err;
			}
			f = &paper_v1;
			lines = (unsigned)(f->data / f->line);
			continue;
		}
		if ((size_t)(eol - p) >= 6 && memcmp(p, "check:", 6) == 0) {
			if (line_bytes(p + 6, (size_t)(eol - p - 6), check,
			    sizeof(check), &bad) != PAPER_CHECK) {
				log_error("paper key, line %u (check): expected "
				    "8 hex digits", fline);
				goto err;
			}
			have_check = 1;
			continue;
		}
		colon = memchr(p, ':', (size_t)(eol - p));
		num = strtoul(p, &e, 10);
		if (colon == NULL || e != colon || num < 1 || num > lines) {
			log_error("paper key, line %u: expected 'NN: ' and a "
			    "line of the key, numbered 01 to %02u", fline,
			    lines);
			goto err;
		}
		n = line_bytes(colon + 1, (size_t)(eol - colon - 1), lb,
		    f->line + PAPER_SUM, &bad);
		if (n < 0 && bad) {
			log_error("paper key, line %02lu: '%c' is not a hex "
			    "digit (0-9, a-f)", num, bad >= 0x20 && bad < 0x7f ?
			    bad : '?');
			goto err;
		}
		if (n != (int)(f->line + PAPER_SUM)) {
			log_error("paper key, line %02lu: %s (expected %zu hex "
			    "digits)", num, n >= 0 && n < (int)(f->line +
			    PAPER_SUM) ? "digits missing" :
			    "a digit missing or too many",
			    2 * (f->line + PAPER_SUM));
			goto err;
		}
		line_sum(f, (unsigned)num, lb, sum);
		if (sodium_memcmp(sum, lb + f->line, PAPER_SUM) != 0) {
			log_error("paper key, line %02lu: its checksum does not "
			    "match: a typo in this line", num);
			goto err;
		}
		if (seen[num]) {
			log_error("paper key, line %02lu: given twice", num);
			goto err;
		}
		seen[num] = 1;
		memcpy(data + (num - 1) * f->line, lb, f->line);
	}
	if (f == NULL) {
		log_error("not a paper key (no '" PAPER_HEAD "1' line)");
		goto err;
	}
	for (i = 1; i <= lines; i++)
		if (!seen[i]) {
			log_error("paper key, line %02u: missing", i);
			goto err;
		}
	whole_check(f, data, want);
	if (have_check && sodium_memcmp(want, check, PAPER_CHECK) != 0) {
		log_error("paper key: the check line does not match the lines "
		    "(lines from two keys?)");
		goto err;
	}
	k = ccrypto_keys_from_holder(data + CCRYPTO_REPO_ID_BYTES);
	if (k == NULL)
		goto err;
	memcpy(repo_id, data, CCRYPTO_REPO_ID_BYTES);
err:
	sodium_memzero(lb, sizeof(lb));
	ccrypto_secret_free(data);
	return (k);
}
