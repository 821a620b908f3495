/*
 * coffer.conf: written, parsed, and checked against its MAC and the
 * authority's signature.  See doc/format.md ("coffer.conf").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/fsutil.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "repo-int.h"

/*
 * The text of coffer.conf before its auth and mac lines, with the epoch
 * lines of the nepochs epochs in ep (doc/format.md).
 */
static int
conf_body(struct buf *b, const uint8_t *id, const struct chunker_params *c,
    const struct repo_epoch *ep, size_t nepochs, int64_t retired1,
    uint64_t keyring_gen, const uint8_t *keyring_mac)
{
	char idhex[2 * CCRYPTO_REPO_ID_BYTES + 1], pkhex[65];
	char khex[2 * CCRYPTO_MAC_BYTES + 1];
	size_t i;

	hex_encode(idhex, id, CCRYPTO_REPO_ID_BYTES);
	if (buf_printf(b,
	    "# coffer repository: do not edit, the mac line authenticates "
	    "this file\n"
	    "format %d\n"
	    "id %s\n"
	    "chunker fastcdc %u %u %u\n",
	    REPO_FORMAT_VERSION, idhex, c->min, c->avg, c->max))
		return (-1);
	hex_encode(khex, keyring_mac, CCRYPTO_MAC_BYTES);
	if (buf_printf(b, "keyring %llu %s\n", (unsigned long long)keyring_gen,
	    khex))
		return (-1);
	if (retired1 != 0 && buf_printf(b, "epoch 1 retired %lld\n",
	    (long long)retired1))
		return (-1);
	for (i = 0; i < nepochs; i++) {
		hex_encode(pkhex, ep[i].pk, sizeof(ep[i].pk));
		if (buf_printf(b, "epoch %u %s created %lld",
		    (unsigned)ep[i].epoch, pkhex,
		    (long long)ep[i].created_ns) ||
		    (ep[i].retired_ns != 0 && buf_printf(b, " retired %lld",
		    (long long)ep[i].retired_ns)) || buf_printf(b, "\n"))
			return (-1);
	}
	return (0);
}

/*
 * The whole of coffer.conf: conf_body, then the authority's signature of
 * it, which only a full key can make, then the mac line.  0 or -1
 * (reported).
 */
int
rp_conf_text(struct buf *b, const struct ccrypto_keys *k, const uint8_t *id,
    const struct chunker_params *c, const struct repo_epoch *ep,
    size_t nepochs, int64_t retired1, uint64_t keyring_gen,
    const uint8_t *keyring_mac)
{
	uint8_t sig[CCRYPTO_SIG_BYTES], mac[CCRYPTO_MAC_BYTES];
	char sighex[2 * CCRYPTO_SIG_BYTES + 1];
	char machex[2 * CCRYPTO_MAC_BYTES + 1];

	if (conf_body(b, id, c, ep, nepochs, retired1, keyring_gen,
	    keyring_mac))
		return (-1);
	if (ccrypto_conf_sign(k, id, b->data, b->len, sig))
		return (-1);
	hex_encode(sighex, sig, sizeof(sig));
	if (buf_printf(b, "auth %s\n", sighex))
		return (-1);
	ccrypto_meta_mac(k, b->data, b->len, mac);
	hex_encode(machex, mac, sizeof(mac));
	return (buf_printf(b, "mac %s\n", machex));
}

/*
 * One "epoch N <pk hex> created NS [retired NS]" line, exactly (no other
 * spacing, nothing after).  0 or -1.
 */
static int
epoch_line(const char *line, struct repo_epoch *e)
{
	unsigned n;
	long long created, retired = 0;
	char pkhex[65];
	const char *rest;
	int end = -1, end2 = -1;

	memset(e, 0, sizeof(*e));
	if (sscanf(line, "epoch %u %64s created %lld%n", &n, pkhex, &created,
	    &end) != 3 || end < 0)
		return (-1);
	rest = line + end;
	if (*rest != '\0' && (sscanf(rest, " retired %lld%n", &retired,
	    &end2) != 1 || end2 < 0 || rest[end2] != '\0' || retired <= 0))
		return (-1);
	if (n < 2 || n > CCRYPTO_EPOCH_MAX || created <= 0 ||
	    strlen(pkhex) != 64 || hex_decode(e->pk, sizeof(e->pk), pkhex) ||
	    !ccrypto_pk_ok(e->pk))
		return (-1);
	e->epoch = n;
	e->created_ns = created;
	e->retired_ns = retired;
	return (0);
}

/*
 * The rest of a "keyring GEN MAC" line: GEN a decimal from 1 to 2^53 with
 * no leading zero, MAC 64 hex digits.  0 or -1.
 */
#define KEYRING_GEN_MAX (1ULL << 53)
static int
keyring_line(const char *p, uint64_t *gen, uint8_t mac[CCRYPTO_MAC_BYTES])
{
	unsigned long long g;
	char *end;

	if (*p < '1' || *p > '9')
		return (-1);
	errno = 0;
	g = strtoull(p, &end, 10);
	if (errno || g == 0 || g > KEYRING_GEN_MAX || *end != ' ' ||
	    strlen(end + 1) != 2 * CCRYPTO_MAC_BYTES ||
	    hex_decode(mac, CCRYPTO_MAC_BYTES, end + 1))
		return (-1);
	*gen = g;
	return (0);
}

/* Parse coffer.conf (untrusted until the MAC is checked by repo_unlock). */
int
rp_conf_parse(struct repo *r, unsigned char *text, size_t len)
{
	char *line, *next, *end = (char *)text + len;
	char idhex[64], machex[130], sighex[2 * CCRYPTO_SIG_BYTES + 2];
	int format = -1, have_id = 0, have_chunker = 0, have_mac = 0;
	int have_auth = 0;
	unsigned min, avg, max;

	r->nepochs = 0;
	r->retired1_ns = 0;
	r->keyring_gen = 0;
	if (memchr(text, '\0', len) != NULL)
		goto bad;
	for (line = (char *)text; line < end; line = next) {
		if ((next = memchr(line, '\n', (size_t)(end - line))) == NULL)
			goto bad;
		*next++ = '\0';
		if (have_mac)
			goto bad;	/* nothing may follow the mac */
		/* The signature covers every byte before it: only the mac
		 * may follow. */
		if (have_auth && strncmp(line, "mac ", 4) != 0)
			goto bad;
		if (line[0] == '#' || line[0] == '\0')
			continue;
		if (sscanf(line, "format %d", &format) == 1) {
			/* It comes first: another format's other lines
			 * are never met, and never called malformed. */
			if (format != REPO_FORMAT_VERSION)
				break;
			continue;
		}
		if (strncmp(line, "auth ", 5) == 0) {
			if (sscanf(line, "auth %129s", sighex) != 1 ||
			    strlen(sighex) != 2 * CCRYPTO_SIG_BYTES ||
			    hex_decode(r->auth_sig, CCRYPTO_SIG_BYTES, sighex))
				goto bad;
			r->auth_body_len = (size_t)(line - (char *)text);
			have_auth = 1;
			continue;
		}
		if (strncmp(line, "keyring ", 8) == 0) {
			if (r->keyring_gen != 0 || r->nepochs > 0 ||
			    keyring_line(line + 8, &r->keyring_gen,
			    r->keyring_mac))
				goto bad;
			continue;
		}
		if (strncmp(line, "epoch 1 retired ", 16) == 0) {
			long long ns;
			int end1 = -1;

			if (r->retired1_ns != 0 || r->nepochs > 0 ||
			    sscanf(line, "epoch 1 retired %lld%n", &ns,
			    &end1) != 1 || end1 < 0 || line[end1] != '\0' ||
			    ns <= 0)
				goto bad;
			r->retired1_ns = ns;
			continue;
		}
		if (strncmp(line, "epoch ", 6) == 0) {
			/* Increasing: the last is the one to seal to. */
			if (r->nepochs == REPO_EPOCHS_MAX ||
			    epoch_line(line, &r->epochs[r->nepochs]) ||
			    (r->nepochs > 0 && r->epochs[r->nepochs].epoch <=
			    r->epochs[r->nepochs - 1].epoch))
				goto bad;
			r->nepochs++;
			continue;
		}
		if (sscanf(line, "id %63s", idhex) == 1) {
			if (strlen(idhex) != 2 * CCRYPTO_REPO_ID_BYTES ||
			    hex_decode(r->id, CCRYPTO_REPO_ID_BYTES, idhex))
				goto bad;
			have_id = 1;
			continue;
		}
		if (sscanf(line, "chunker fastcdc %u %u %u", &min, &avg,
		    &max) == 3) {
			r->chunker.min = min;
			r->chunker.avg = avg;
			r->chunker.max = max;
			have_chunker = 1;
			continue;
		}
		if (sscanf(line, "mac %129s", machex) == 1) {
			if (strlen(machex) != 2 * CCRYPTO_MAC_BYTES ||
			    hex_decode(r->mac, CCRYPTO_MAC_BYTES, machex))
				goto bad;
			r->conf_body_len = (size_t)(line - (char *)text);
			have_mac = 1;
			continue;
		}
		goto bad;
	}
	if (format != REPO_FORMAT_VERSION) {
		if (format > 0)
			log_error("repository '%s' has format %d; this coffer "
			    "reads format %d (upgrade coffer)", r->path,
			    format, REPO_FORMAT_VERSION);
		else
			log_error("repository '%s': bad format in coffer.conf",
			    r->path);
		return (-1);
	}
	/* Epoch 1 is said to be retired only once a later one is listed. */
	if (r->keyring_gen == 0 || !have_auth ||
	    (r->retired1_ns != 0 && r->nepochs == 0))
		goto bad;
	if (!have_id || !have_chunker || !have_mac ||
	    chunker_params_check(&r->chunker))
		goto bad;
	hex_encode(r->id_hex, r->id, CCRYPTO_REPO_ID_BYTES);
	return (0);
bad:
	log_error("repository '%s': coffer.conf is malformed", r->path);
	return (-1);
}

/*
 * coffer.conf's MAC (any key of the repository), then its signature: what
 * it says of the key epochs and the keyring is taken only from a full
 * key's hand.  A write-only key can make the MAC, so without the
 * signature it could list an epoch of its own and read what is sealed to
 * it; it can never make the signature.
 */
int
rp_verify_conf(struct repo *r)
{
	if (ccrypto_meta_mac_verify(r->keys, r->conf, r->conf_body_len,
	    r->mac)) {
		log_error("repository '%s': coffer.conf failed authentication "
		    "(it was altered, or the key is not this repository's)",
		    r->path);
		return (-1);
	}
	if (ccrypto_conf_verify(r->keys, r->id, r->conf, r->auth_body_len,
	    r->auth_sig)) {
		log_error("repository '%s': coffer.conf's signature does not "
		    "check: it was not written by a full key (altered by a "
		    "write-only key, or by someone without a key): refused",
		    r->path);
		return (-1);
	}
	return (rp_load_epochs(r));
}

/*
 * Read coffer.conf again (under the writer lock: a rotation may have
 * changed it since repo_open) and, with a key, check it and load the
 * epochs and the keyring anew, whether or not coffer.conf changed (a key
 * change rewrites the keyring).  0 or -1 (reported).
 */
int
rp_reload_conf(struct repo *r)
{
	unsigned char *text = NULL, *copy;
	size_t len;
	int rc;

	if (rp_get(r, CONF_NAME, CONF_MAX, &text, &len, 0))
		return (-1);
	if (r->conf != NULL && r->conf_len == len &&
	    memcmp(text, r->conf, len) == 0) {
		free(text);
		return (r->keys != NULL ? rp_load_epochs(r) : 0);
	}
	if ((copy = malloc(len + 1)) == NULL) {
		free(text);
		log_error("out of memory");
		return (-1);
	}
	memcpy(copy, text, len + 1);
	free(r->conf);
	r->conf = text;
	r->conf_len = len;
	rc = rp_conf_parse(r, copy, len);
	free(copy);
	if (rc == 0 && r->keys != NULL)
		rc = rp_verify_conf(r);
	return (rc);
}

/* coffer.conf again, with r->epochs; then r holds what it wrote. */
int
rp_write_conf(struct repo *r)
{
	struct buf b = BUF_INIT;
	unsigned char *copy;
	size_t i;
	int rc = -1;

	/*
	 * What the authority signs is what writers seal to: never an epoch
	 * whose secret the keyring does not hold (listed by a write-only
	 * key in an unsigned coffer.conf, or lost), unless it is retired.
	 */
	for (i = 0; i < r->nepochs; i++)
		if (r->epochs[i].retired_ns == 0 &&
		    !ccrypto_keys_has_epoch(r->keys, r->epochs[i].epoch)) {
			log_error("repository '%s': coffer.conf lists key epoch "
			    "%u, whose secret the keyring does not hold: not "
			    "signed (was it added by a write-only key?)",
			    r->path, (unsigned)r->epochs[i].epoch);
			goto out;
		}
	/* The keyring line is a full key's to write (write-only keys can
	 * make coffer.conf's own MAC). */
	if (ccrypto_keyring_line_mac(r->keys, r->id, r->keyring_gen,
	    r->keyring_mac))
		goto out;
	if (rp_conf_text(&b, r->keys, r->id, &r->chunker, r->epochs, r->nepochs,
	    r->retired1_ns, r->keyring_gen, r->keyring_mac))
		goto out;
	if (b.len > CONF_MAX) {
		log_error("repository '%s': coffer.conf would exceed %d bytes",
		    r->path, CONF_MAX);
		goto out;
	}
	if (storage_put(r->st, CONF_NAME, b.data, b.len, 0))
		goto out;
	if ((copy = malloc(b.len + 1)) == NULL) {
		log_error("out of memory");
		goto out;
	}
	memcpy(copy, b.data, b.len);
	copy[b.len] = '\0';
	free(r->conf);
	r->conf = copy;
	r->conf_len = b.len;
	/* The same fields; parsing sets conf_body_len and the MAC. */
	if ((copy = malloc(b.len + 1)) == NULL) {
		log_error("out of memory");
		goto out;
	}
	memcpy(copy, r->conf, b.len + 1);
	rc = rp_conf_parse(r, copy, b.len);
	free(copy);
out:
	buf_release(&b);
	return (rc);
}
