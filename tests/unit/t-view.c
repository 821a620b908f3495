/*
 * Prune's mark (doc/format.md, "View record", kind 4): only the
 * repository's authority condemns packs.  A condemned pack makes every
 * backup store its chunks again and lets a later prune delete it, so a
 * mark that anyone who can write the storage, or who holds a write-only
 * key, could make would let them have packs deleted.  With real
 * repositories and real keys (no stand-in for the crypto):
 *
 *  - a mark made by a full key (view_note_condemned) reads back with the
 *    exact pack names, in order, and time;
 *  - the same bytes with any one byte changed (signature, time, count,
 *    pack name, headers) never condemn anything, and a changed byte of
 *    the item's body is refused (view_parse 1);
 *  - what a write-only key or a stranger can make is refused: a write-only
 *    key cannot sign a mark at all, a mark signed with its own signing
 *    key, the authority's signature in another context, and a mark of
 *    another repository's full key;
 *  - a host with a write-only key honours a good mark and refuses a
 *    forged one (it must stop deduplicating against condemned packs);
 *  - every truncation of a mark is read without a crash and condemns
 *    nothing.
 *
 * view_parse is internal to src/engine: engine-int.h, as the forge-record
 * test tool includes it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/buf.h"
#include "coffer/crypto.h"
#include "coffer/engine-keys.h"
#include "coffer/hex.h"
#include "coffer/repo.h"
#include "../../src/engine/engine-int.h"
#include "tap.h"
#include "testutil.h"

#define NPACKS 3
#define MARK_TIME 1765100000123456789LL
#define CONDEMNED_CTX "coffer-condemned"	/* view.c's */

/* Where view_note_condemned puts each part of a view that is one mark
 * of NPACKS packs: "CFVW" | 1 | kind | u32 length | body. */
#define AT_KIND 5
#define AT_BODY 10
#define AT_TIME AT_BODY
#define AT_COUNT (AT_TIME + 8)
#define AT_NAMES (AT_COUNT + 4)
#define AT_SIG (AT_NAMES + NPACKS * PACK_NAME_LEN / 2)
#define MARK_LEN (AT_SIG + CCRYPTO_SIG_BYTES)

static char tmpdir[] = "/tmp/coffer-t-view.XXXXXX";

/* What a parse handed its sink. */
struct got {
	size_t n;
	char packs[NPACKS + 1][PACK_NAME_LEN + 1];
	int64_t times[NPACKS + 1];
	int others;			/* items of other kinds */
	int rc;
	char err[4096];			/* what it reported */
};

static int
got_snapshot(void *arg, const struct catalog_known *k)
{
	((struct got *)arg)->others++;
	return (0);
}

static int
got_forgotten(void *arg, const char *sid, int64_t time_ns)
{
	((struct got *)arg)->others++;
	return (0);
}

static int
got_condemned(void *arg, const char *pack, int64_t time_ns)
{
	struct got *g = arg;

	if (g->n <= NPACKS) {
		snprintf(g->packs[g->n], sizeof(g->packs[0]), "%s", pack);
		g->times[g->n] = time_ns;
	}
	g->n++;
	return (0);
}

/* view_parse of a copy of p[0..len) of exactly len bytes (so that an
 * overread is one under the address sanitizer), as r reads it. */
static void
parse(struct repo *r, const uint8_t *p, size_t len, struct got *g)
{
	static const char pack[] = "00112233445566778899aabbccddeeff";
	struct view_sink sink;
	struct stderr_capture cap;
	const char *said;
	uint8_t *copy;

	memset(g, 0, sizeof(*g));
	memset(&sink, 0, sizeof(sink));
	sink.snapshot = got_snapshot;
	sink.forgotten = got_forgotten;
	sink.condemned = got_condemned;
	sink.arg = g;
	if ((copy = malloc(len > 0 ? len : 1)) == NULL) {
		g->rc = -2;
		return;
	}
	memcpy(copy, p, len);
	stderr_capture_begin(&cap);
	g->rc = view_parse(r, copy, len, pack, &sink);
	if ((said = stderr_capture_end(&cap)) != NULL) {
		snprintf(g->err, sizeof(g->err), "%s", said);
		g->err[strcspn(g->err, "\n")] = '\0';
	}
	free(copy);
}

/* g holds exactly the mark of packs at MARK_TIME. */
static int
got_mark(const struct got *g, char packs[NPACKS][PACK_NAME_LEN + 1])
{
	size_t i;

	if (g->rc != 0 || g->n != NPACKS || g->others != 0)
		return (0);
	for (i = 0; i < NPACKS; i++)
		if (strcmp(g->packs[i], packs[i]) != 0 ||
		    g->times[i] != MARK_TIME)
			return (0);
	return (1);
}

/* Refused as not the authority's: 1, nothing condemned, said so. */
static int
refused_forged(const struct got *g)
{
	return (g->rc == 1 && g->n == 0 && g->others == 0 &&
	    strstr(g->err, "prune's mark") != NULL &&
	    strstr(g->err, "forged?") != NULL);
}

/* The repository of full as a write-only key opens it: the key file
 * coffer key export --write-only writes, then unlocked with it. */
static struct repo *
open_write_only(struct repo *full, const char *name)
{
	char key[256], slot[REPO_SLOT_NAME_MAX];
	struct buf out = BUF_INIT;
	struct repo *r = NULL;
	ssize_t w;
	int fd;

	snprintf(key, sizeof(key), "%s/%s.key", tmpdir, name);
	if (engine_key_export(full, 0, 1, &out, slot) != ENGINE_OK)
		return (NULL);
	if ((fd = open(key, O_WRONLY | O_CREAT | O_EXCL, 0600)) == -1)
		goto out;
	w = write(fd, out.data, out.len);
	if (close(fd) || w < 0 || (size_t)w != out.len)
		goto out;
	if ((r = repo_open(repo_path(full))) != NULL &&
	    repo_unlock(r, key, NULL, 0)) {
		repo_close(r);
		r = NULL;
	}
out:
	engine_key_wipe(&out);
	return (r);
}

/* sig in the mark's place for its signature, the body as it is. */
static void
resign(uint8_t *mark, const uint8_t sig[CCRYPTO_SIG_BYTES])
{
	memcpy(mark + AT_SIG, sig, CCRYPTO_SIG_BYTES);
}

int
main(void)
{
	char packs[NPACKS][PACK_NAME_LEN + 1];
	const char *names[NPACKS];
	uint8_t mark[MARK_LEN], forged[MARK_LEN], sig[CCRYPTO_SIG_BYTES];
	uint8_t name[PACK_NAME_LEN / 2], msg[sizeof(CONDEMNED_CTX) +
	    CCRYPTO_REPO_ID_BYTES + AT_SIG - AT_BODY];
	struct repo *ra, *rb, *rw = NULL;
	struct buf v = BUF_INIT;
	struct stderr_capture cap;
	struct got g;
	const char *said;
	uint64_t st = 0x5eed;
	size_t i, len, bad_body, bad_any, j;
	int rc;

	if (ccrypto_init() || mkdtemp(tmpdir) == NULL)
		return (1);
	ra = test_repo_make(tmpdir, "a");
	rb = test_repo_make(tmpdir, "b");
	ok(ra != NULL && rb != NULL, "two repositories, each with a full key");
	if (ra == NULL || rb == NULL)
		goto done;
	rw = open_write_only(ra, "a-wo");
	ok(rw != NULL && ccrypto_keys_write_only(repo_keys(rw)) &&
	    !ccrypto_keys_write_only(repo_keys(ra)),
	    "a write-only key of repository a opens it");
	if (rw == NULL)
		goto done;
	for (i = 0; i < NPACKS; i++) {
		for (j = 0; j < sizeof(name); j++)
			name[j] = (uint8_t)(xorshift64s(&st) >> 56);
		hex_encode(packs[i], name, sizeof(name));
		names[i] = packs[i];
	}

	/* 1. The authority's mark reads back as it was made. */
	rc = view_note_condemned(ra, MARK_TIME, names, NPACKS, &v);
	ok(rc == 0 && v.len == MARK_LEN && v.data[AT_KIND] == 4,
	    "a full key makes a mark (%zu bytes)", v.len);
	if (rc != 0 || v.len != MARK_LEN)
		goto done;
	memcpy(mark, v.data, MARK_LEN);
	parse(ra, mark, MARK_LEN, &g);
	ok(got_mark(&g, packs), "its packs, in order, and its time read back "
	    "(rc %d, %zu packs)", g.rc, g.n);
	ok(g.err[0] == '\0', "nothing reported: '%s'", g.err);

	/* 2, 3. One byte changed: never a pack condemned.  In the body
	 * (time, count, names, signature) refused; a changed name or
	 * signature, or a time still in range, as not the authority's. */
	bad_body = bad_any = 0;
	for (i = 0; i < MARK_LEN; i++) {
		memcpy(forged, mark, MARK_LEN);
		forged[i] ^= i % 2 ? 0x80 : 0x01;
		parse(ra, forged, MARK_LEN, &g);
		if (g.n != 0 || g.others != 0 || g.rc < 0) {
			if (bad_any++ == 0)
				diag("byte %zu changed: rc %d, %zu condemned",
				    i, g.rc, g.n);
		}
		/* In the headers, another kind is skipped: nothing to say.
		 * In the body, a count that no longer fits the length or a
		 * time past INT64_MAX is malformed; the rest fails the
		 * signature. */
		if (i >= AT_BODY && (i < AT_NAMES ? g.rc != 1 || g.n != 0 :
		    !refused_forged(&g))) {
			if (bad_body++ == 0)
				diag("byte %zu changed: rc %d: '%s'", i, g.rc,
				    g.err);
		}
	}
	ok(bad_any == 0, "no byte of %d changed condemns a pack", MARK_LEN);
	ok(bad_body == 0, "each byte of the body changed is refused, a "
	    "changed name or signature as forged");
	memcpy(forged, mark, MARK_LEN);
	forged[AT_SIG + CCRYPTO_SIG_BYTES / 2] ^= 0x10;
	parse(ra, forged, MARK_LEN, &g);
	ok(refused_forged(&g), "a signature byte flipped: refused, named "
	    "(rc %d): '%s'", g.rc, g.err);
	memcpy(forged, mark, MARK_LEN);
	forged[AT_TIME] ^= 0x01;	/* a nanosecond off */
	parse(ra, forged, MARK_LEN, &g);
	ok(refused_forged(&g), "the time changed: refused (rc %d)", g.rc);
	memcpy(forged, mark, MARK_LEN);
	forged[AT_NAMES + PACK_NAME_LEN / 2 + 3] ^= 0x04;
	parse(ra, forged, MARK_LEN, &g);
	ok(refused_forged(&g), "the second pack's name changed: refused, and "
	    "not the first either (rc %d, %zu condemned)", g.rc, g.n);

	/* What a write-only key holder can make. */
	buf_reset(&v);
	stderr_capture_begin(&cap);
	rc = view_note_condemned(rw, MARK_TIME, names, NPACKS, &v);
	if ((said = stderr_capture_end(&cap)) == NULL)
		said = "";
	ok(rc == -1 && strstr(said, "authority") != NULL,
	    "a write-only key cannot sign a mark: '%.*s'",
	    (int)strcspn(said, "\n"), said);
	/* ... with its own signing key, over what the authority signs. */
	memcpy(msg, CONDEMNED_CTX, sizeof(CONDEMNED_CTX));
	memcpy(msg + sizeof(CONDEMNED_CTX), repo_id(ra),
	    CCRYPTO_REPO_ID_BYTES);
	memcpy(msg + sizeof(CONDEMNED_CTX) + CCRYPTO_REPO_ID_BYTES,
	    mark + AT_BODY, AT_SIG - AT_BODY);
	memcpy(forged, mark, MARK_LEN);
	ccrypto_sign(repo_keys(rw), msg, sizeof(msg), sig);
	resign(forged, sig);
	parse(ra, forged, MARK_LEN, &g);
	ok(refused_forged(&g), "a mark signed with the write-only key's own "
	    "signing key: refused by a full key (rc %d)", g.rc);
	parse(rw, forged, MARK_LEN, &g);
	ok(refused_forged(&g), "... and by the write-only key (rc %d)", g.rc);
	/* The authority's signature of another kind (a forget's) over the
	 * same bytes does not pass for a mark. */
	ok(ccrypto_auth_sign(repo_keys(ra), "coffer-forgotten", repo_id(ra),
	    mark + AT_BODY, AT_SIG - AT_BODY, sig) == 0,
	    "the authority signs the body as a forget");
	resign(forged, sig);
	parse(ra, forged, MARK_LEN, &g);
	ok(refused_forged(&g), "a forget's signature on a mark: refused "
	    "(rc %d)", g.rc);
	/* Another repository's authority (a full key anyone can make by
	 * running coffer init). */
	buf_reset(&v);
	rc = view_note_condemned(rb, MARK_TIME, names, NPACKS, &v);
	if (rc == 0 && v.len == MARK_LEN) {
		parse(ra, v.data, v.len, &g);
		ok(refused_forged(&g), "a mark of another repository's full "
		    "key: refused (rc %d)", g.rc);
		parse(rb, v.data, v.len, &g);
		ok(got_mark(&g, packs), "... which its own repository takes");
	} else
		ok(0, "repository b makes a mark");

	/* 4. A write-only host honours the authority's marks. */
	parse(rw, mark, MARK_LEN, &g);
	ok(got_mark(&g, packs), "a write-only key reads the good mark: its "
	    "packs and time (rc %d, %zu packs): '%s'", g.rc, g.n, g.err);
	memcpy(forged, mark, MARK_LEN);
	forged[AT_SIG] ^= 0x01;
	parse(rw, forged, MARK_LEN, &g);
	ok(refused_forged(&g), "... and refuses it with a signature byte "
	    "flipped (rc %d)", g.rc);

	/* 5. Truncated: no crash, nothing condemned; 1 or -1, but for the
	 * view of no item at all (its 5-byte header), which is a good empty
	 * view. */
	bad_any = 0;
	for (len = 0; len < MARK_LEN; len++) {
		parse(ra, mark, len, &g);
		if (g.n != 0 || g.others != 0 ||
		    (len == 5 ? g.rc != 0 : g.rc != 1 && g.rc != -1)) {
			if (bad_any++ == 0)
				diag("%zu bytes: rc %d, %zu condemned", len,
				    g.rc, g.n);
		}
	}
	ok(bad_any == 0, "each of the %d truncations condemns nothing and is "
	    "refused", MARK_LEN);

done:
	buf_release(&v);
	if (rw != NULL)
		repo_close(rw);
	if (ra != NULL)
		repo_close(ra);
	if (rb != NULL)
		repo_close(rb);
	(void)rm_tree(tmpdir);
	return (tap_done());
}
