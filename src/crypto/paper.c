/*
 * The paper key: the repository id and the master secret as text a person
 * can copy by hand and type back, with a checksum on every line that
 * catches a typo and names the line (doc/format.md, "Paper keys").
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

#define PAPER_HEAD "coffer paper key 1"
#define PAPER_CTX "coffer-paper-key"
enum {
	PAPER_DATA = CCRYPTO_REPO_ID_BYTES + CCRYPTO_KEY_BYTES,	/* 48 */
	PAPER_LINE = 8,			/* bytes of data per line */
	PAPER_LINES = PAPER_DATA / PAPER_LINE,
	PAPER_SUM = 2,			/* bytes of checksum per line */
	PAPER_CHECK = 4,		/* bytes of the whole key's check */
	/* Hex digits of a line: its data and its checksum. */
	PAPER_LINE_HEX = 2 * (PAPER_LINE + PAPER_SUM),
};
_Static_assert(PAPER_DATA % PAPER_LINE == 0, "whole lines");

/*
 * A line's checksum: BLAKE2b-256 of the context, the line's number and its
 * bytes, truncated.  The number is in it, so that a line copied twice or
 * two lines swapped are caught as well.
 */
static void
line_sum(unsigned line, const uint8_t *data, uint8_t out[PAPER_SUM])
{
	uint8_t msg[sizeof(PAPER_CTX) + PAPER_LINE], h[32];

	memcpy(msg, PAPER_CTX, sizeof(PAPER_CTX));	/* with its NUL */
	msg[sizeof(PAPER_CTX) - 1] = (uint8_t)line;
	memcpy(msg + sizeof(PAPER_CTX), data, PAPER_LINE);
	blake2b(h, sizeof(h), msg, sizeof(msg), NULL, 0);
	memcpy(out, h, PAPER_SUM);
	sodium_memzero(msg, sizeof(msg));
}

static void
whole_check(const uint8_t *data, uint8_t out[PAPER_CHECK])
{
	uint8_t h[32];

	blake2b(h, sizeof(h), data, PAPER_DATA, (const uint8_t *)PAPER_CTX,
	    sizeof(PAPER_CTX) - 1);
	memcpy(out, h, PAPER_CHECK);
}

int
ccrypto_paper_encode(const struct ccrypto_keys *k,
    const uint8_t repo_id[CCRYPTO_REPO_ID_BYTES], struct buf *out)
{
	const uint8_t *master = ccrypto_keys_master(k);
	char idhex[2 * CCRYPTO_REPO_ID_BYTES + 1], *line = NULL;
	uint8_t *data = NULL, sum[PAPER_SUM], check[PAPER_CHECK];
	unsigned i, j;
	int rc = -1;

	if (master == NULL) {
		log_error("a write-only key has no paper form (use a key file)");
		return (-1);
	}
	if ((data = ccrypto_secret_new(PAPER_DATA)) == NULL ||
	    (line = (char *)ccrypto_secret_new(128)) == NULL)
		goto out;
	memcpy(data, repo_id, CCRYPTO_REPO_ID_BYTES);
	memcpy(data + CCRYPTO_REPO_ID_BYTES, master, CCRYPTO_KEY_BYTES);
	hex_encode(idhex, repo_id, CCRYPTO_REPO_ID_BYTES);
	if (buf_printf(out,
	    "# coffer paper key of repository %s\n"
	    "# Whoever holds it can read every snapshot: keep it as you would "
	    "the data.\n"
	    "# Type it back with 'coffer key import'; the last group of each "
	    "line is\n"
	    "# that line's checksum, and a typo is reported with its line.\n"
	    PAPER_HEAD "\n", idhex))
		goto out;
	for (i = 0; i < PAPER_LINES; i++) {
		const uint8_t *d = data + i * PAPER_LINE;
		size_t n;

		n = (size_t)snprintf(line, 128, "%02u:", i + 1);
		for (j = 0; j < PAPER_LINE; j += 2)
			n += (size_t)snprintf(line + n, 128 - n, " %02x%02x",
			    d[j], d[j + 1]);
		line_sum(i + 1, d, sum);
		n += (size_t)snprintf(line + n, 128 - n, "  %02x%02x\n",
		    sum[0], sum[1]);
		if (buf_append(out, line, n))
			goto out;
	}
	whole_check(data, check);
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
	const char *p = memmem(text, len, PAPER_HEAD, sizeof(PAPER_HEAD) - 1);

	return (p != NULL && (p == (const char *)text || p[-1] == '\n'));
}

struct ccrypto_keys *
ccrypto_paper_decode(const uint8_t *text, size_t len,
    uint8_t repo_id[CCRYPTO_REPO_ID_BYTES])
{
	const char *p = (const char *)text, *end = p + len, *eol, *colon;
	uint8_t *data, lb[PAPER_LINE + PAPER_SUM + 1], sum[PAPER_SUM];
	uint8_t check[PAPER_CHECK], want[PAPER_CHECK];
	struct ccrypto_keys *k = NULL;
	int seen[PAPER_LINES + 1] = { 0 }, head = 0, have_check = 0, bad, n;
	unsigned long num;
	unsigned fline = 0, i;
	char *e;

	if ((data = ccrypto_secret_new(PAPER_DATA)) == NULL)
		return (NULL);
	for (; p < end; p = eol + 1) {
		if ((eol = memchr(p, '\n', (size_t)(end - p))) == NULL)
			eol = end;
		fline++;
		while (p < eol && (*p == ' ' || *p == '\t'))
			p++;
		if (p == eol || *p == '#' || *p == '\r')
			continue;
		if (!head) {
			if ((size_t)(eol - p) < sizeof(PAPER_HEAD) - 1 ||
			    memcmp(p, PAPER_HEAD, sizeof(PAPER_HEAD) - 1)) {
				log_error("paper key, line %u: expected "
				    "'" PAPER_HEAD "'", fline);
				goto err;
			}
			head = 1;
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
		if (colon == NULL || e != colon || num < 1 ||
		    num > PAPER_LINES) {
			log_error("paper key, line %u: expected 'NN: ' and a "
			    "line of the key, numbered 01 to %02d", fline,
			    PAPER_LINES);
			goto err;
		}
		n = line_bytes(colon + 1, (size_t)(eol - colon - 1), lb,
		    sizeof(lb) - 1, &bad);
		if (n < 0 && bad) {
			log_error("paper key, line %02lu: '%c' is not a hex "
			    "digit (0-9, a-f)", num, bad >= 0x20 && bad < 0x7f ?
			    bad : '?');
			goto err;
		}
		if (n != PAPER_LINE + PAPER_SUM) {
			log_error("paper key, line %02lu: %s (expected %d hex "
			    "digits)", num, n >= 0 && n < PAPER_LINE_HEX / 2 ?
			    "digits missing" : "a digit missing or too many",
			    PAPER_LINE_HEX);
			goto err;
		}
		line_sum((unsigned)num, lb, sum);
		if (sodium_memcmp(sum, lb + PAPER_LINE, PAPER_SUM) != 0) {
			log_error("paper key, line %02lu: its checksum does not "
			    "match: a typo in this line", num);
			goto err;
		}
		if (seen[num]) {
			log_error("paper key, line %02lu: given twice", num);
			goto err;
		}
		seen[num] = 1;
		memcpy(data + (num - 1) * PAPER_LINE, lb, PAPER_LINE);
	}
	if (!head) {
		log_error("not a paper key (no '" PAPER_HEAD "' line)");
		goto err;
	}
	for (i = 1; i <= PAPER_LINES; i++)
		if (!seen[i]) {
			log_error("paper key, line %02u: missing", i);
			goto err;
		}
	whole_check(data, want);
	if (have_check && sodium_memcmp(want, check, PAPER_CHECK) != 0) {
		log_error("paper key: the check line does not match the lines "
		    "(lines from two keys?)");
		goto err;
	}
	if ((k = ccrypto_keys_from_master(data + CCRYPTO_REPO_ID_BYTES)) ==
	    NULL)
		goto err;
	memcpy(repo_id, data, CCRYPTO_REPO_ID_BYTES);
err:
	sodium_memzero(lb, sizeof(lb));
	ccrypto_secret_free(data);
	return (k);
}
