/*
 * The S3 store's XML answers: parsed without network or DTD entities,
 * the paged listings of objects (ListObjectsV2) and of multipart uploads,
 * and the clean that aborts the uploads a crash left.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "coffer/buf.h"
#include "coffer/log.h"
#include "coffer/storage.h"

#include "s3-int.h"

/* --- XML ---------------------------------------------------------- */

/* The document in the n bytes at p (whitespace an answer was kept alive
 * with skipped), or NULL.  No network, no entity of any DTD. */
xmlDoc *
s3_xml_parse(const char *p, size_t n)
{
	while (n > 0 && isspace((unsigned char)*p))
		p++, n--;
	if (n == 0 || n > INT32_MAX)
		return (NULL);
	return (xmlReadMemory(p, (int)n, NULL, NULL, XML_PARSE_NONET |
	    XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
}

/* The first element child of n called name, or NULL. */
xmlNode *
s3_xml_child(xmlNode *n, const char *name)
{
	xmlNode *c;

	for (c = n != NULL ? n->children : NULL; c != NULL; c = c->next)
		if (c->type == XML_ELEMENT_NODE &&
		    strcmp((const char *)c->name, name) == 0)
			return (c);
	return (NULL);
}

/* The text of n's child name into out (cap bytes): 0, or -1 when it is
 * missing or too long. */
int
s3_xml_text(xmlNode *n, const char *name, char *out, size_t cap)
{
	xmlNode *c = s3_xml_child(n, name);
	xmlChar *t;
	int rc = -1;

	if (cap > 0)
		out[0] = '\0';
	if (c == NULL || (t = xmlNodeGetContent(c)) == NULL)
		return (-1);
	if (strlen((const char *)t) < cap) {
		memcpy(out, t, strlen((const char *)t) + 1);
		rc = 0;
	}
	xmlFree(t);
	return (rc);
}

static int
is_root(xmlDoc *d, const char *name)
{
	xmlNode *r = d != NULL ? xmlDocGetRootElement(d) : NULL;

	return (r != NULL && strcmp((const char *)r->name, name) == 0);
}

/* Request r made, its answer XML, read into b: the doc, or NULL
 * (recorded). */
xmlDoc *
s3_xml_answer(struct s3 *s, struct req *r, struct buf *b)
{
	xmlDoc *d;

	r->dyn = b;
	r->max = XML_MAX;
	if (s3_perform(s, r))
		return (NULL);
	if (r->status / 100 != 2) {
		s3_http_fail(s, r, "");
		return (NULL);
	}
	if ((d = s3_xml_parse((const char *)b->data, b->len)) == NULL) {
		storage_fail(EIO, "repository '%s': %s %s: the answer is not "
		    "XML", s->base.where, r->method, r->what);
		return (NULL);
	}
	/* CompleteMultipartUpload may fail after its 200. */
	if (is_root(d, "Error")) {
		r->errlen = b->len < ERRBODY_MAX - 1 ? b->len : ERRBODY_MAX - 1;
		memcpy(r->errbody, b->data, r->errlen);
		r->errbody[r->errlen] = '\0';
		s3_http_fail(s, r, "");
		xmlFreeDoc(d);
		return (NULL);
	}
	return (d);
}

/* --- Listings ----------------------------------------------------- */

struct page {
	struct storage_entry *v;
	size_t n, cap;
};

static void
page_clear(struct page *pg)
{
	while (pg->n > 0)
		free(pg->v[--pg->n].name);
}

/* One Contents of a listing into pg: what is no object name is left
 * out, with a warning; the store's own (locks/) silently.  With own, a
 * listing of the store's own keys: every key, whole. */
static int
page_add(struct s3 *s, struct page *pg, xmlNode *c, int own)
{
	char key[2 * STORAGE_NAME_MAX + 1024], size[32], *end;
	size_t plen = strlen(s->prefix);
	struct storage_entry *nv;
	const char *rel;
	uint64_t n;

	if (s3_xml_text(c, "Key", key, sizeof(key)) ||
	    s3_xml_text(c, "Size", size, sizeof(size)))
		return (storage_fail(EIO, "repository '%s': a listing entry "
		    "without a key or a size", s->base.where));
	if (strncmp(key, s->prefix, plen) != 0)
		return (0);
	rel = own ? key : key + plen;
	if (!own && (!strncmp(rel, "locks/", 6) || !strncmp(rel, "tmp/", 4)))
		return (0);
	errno = 0;
	n = strtoull(size, &end, 10);
	if ((!own && !storage_name_ok(rel)) || *end != '\0' || errno != 0) {
		s3_printable(key);
		log_warn("repository '%s': '%s' is not an object of the "
		    "repository: left out", s->base.where, key);
		return (0);
	}
	if (pg->n == pg->cap) {
		pg->cap = pg->cap ? 2 * pg->cap : 256;
		if ((nv = reallocarray(pg->v, pg->cap, sizeof(*nv))) == NULL)
			return (s3_nomem());
		pg->v = nv;
	}
	if ((pg->v[pg->n].name = strdup(rel)) == NULL)
		return (s3_nomem());
	pg->v[pg->n++].size = n;
	return (0);
}

/*
 * The pages of a listing (ListObjectsV2, ListMultipartUploads): query
 * writes the next page's query (from the markers the last page left in
 * arg), each reads a page's root and returns 1 when another page
 * follows, 0 at the last, or another value to stop with.
 */
static int
pages(struct s3 *s, const char *what, int (*query)(void *, struct buf *),
    int (*each)(void *, xmlNode *), void *arg)
{
	struct buf q = BUF_INIT, b = BUF_INIT;
	struct req r;
	xmlDoc *d;
	int rc;

	do {
		buf_reset(&q);
		if (query(arg, &q) || buf_put_u8(&q, 0)) {
			rc = s3_nomem();
			break;
		}
		s3_req_init(&r, "GET", what, NULL, (const char *)q.data);
		if ((d = s3_xml_answer(s, &r, &b)) == NULL) {
			rc = -1;
			break;
		}
		rc = each(arg, xmlDocGetRootElement(d));
		xmlFreeDoc(d);
	} while (rc == 1);
	buf_release(&q);
	buf_release(&b);
	return (rc);
}

/* 1 if a page says another follows. */
static int
truncated(xmlNode *root)
{
	char t[8];

	return (s3_xml_text(root, "IsTruncated", t, sizeof(t)) == 0 &&
	    strcmp(t, "true") == 0);
}

struct listing {
	struct s3 *s;
	const char *what;
	char pfx[STORAGE_NAME_MAX * 2 + 8];
	char token[1025];
	struct page pg;
	int own;			/* the store's own keys, whole */
	int (*fn)(void *, const char *, uint64_t);
	void *arg;
};

static int
listing_query(void *arg, struct buf *q)
{
	struct listing *l = arg;

	return ((l->token[0] && (buf_puts(q, "continuation-token=") ||
	    s3_buf_encoded(q, l->token) || buf_puts(q, "&"))) ||
	    buf_puts(q, "list-type=2") || (l->pfx[0] &&
	    (buf_puts(q, "&prefix=") || s3_buf_encoded(q, l->pfx))));
}

/* A page's objects to the callback, once the page is read: it may call
 * the store. */
static int
listing_page(void *arg, xmlNode *root)
{
	struct listing *l = arg;
	xmlNode *c;
	size_t i;
	int rc = 0;

	for (c = root->children; rc == 0 && c != NULL; c = c->next)
		if (c->type == XML_ELEMENT_NODE &&
		    strcmp((const char *)c->name, "Contents") == 0)
			rc = page_add(l->s, &l->pg, c, l->own);
	l->token[0] = '\0';
	if (rc == 0 && truncated(root) && (s3_xml_text(root,
	    "NextContinuationToken", l->token, sizeof(l->token)) ||
	    l->token[0] == '\0'))
		rc = storage_fail(EIO, "repository '%s': GET %s: a truncated "
		    "listing without a continuation token", l->s->base.where,
		    l->what);
	for (i = 0; rc == 0 && i < l->pg.n; i++)
		rc = l->fn(l->arg, l->pg.v[i].name, l->pg.v[i].size);
	page_clear(&l->pg);
	return (rc == 0 && l->token[0] != '\0' ? 1 : rc);
}

/* Every key that begins with pfx to fn, as page_add passes them on
 * (own: the store's own keys, whole). */
static int
list_keys(struct s3 *s, const char *pfx, const char *what, int own,
    int (*fn)(void *, const char *, uint64_t), void *arg)
{
	struct listing *l;
	int rc;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return (s3_nomem());
	snprintf(l->pfx, sizeof(l->pfx), "%s", pfx);
	l->s = s;
	l->what = what;
	l->own = own;
	l->fn = fn;
	l->arg = arg;
	rc = pages(s, what, listing_query, listing_page, l);
	page_clear(&l->pg);
	free(l->pg.v);
	free(l);
	return (rc);
}

int
s3_list(struct storage *st, const char *dir,
    int (*fn)(void *, const char *, uint64_t), void *arg)
{
	struct s3 *s = s3_of(st);
	char what[WHAT_MAX], pfx[STORAGE_NAME_MAX * 2 + 8];

	snprintf(what, sizeof(what), "'%s%s' (listing)", dir, dir[0] ? "/" :
	    "");
	snprintf(pfx, sizeof(pfx), "%s%s%s", s->prefix, dir, dir[0] ? "/" :
	    "");
	return (list_keys(s, pfx, what, 0, fn, arg));
}

int
s3_list_keys(struct s3 *s, const char *prefix, const char *what,
    int (*fn)(void *, const char *, uint64_t), void *arg)
{
	return (list_keys(s, prefix, what, 1, fn, arg));
}

/* The time of an ISO 8601 stamp ("2026-12-06T15:30:00.000Z"), or 0. */
static time_t
iso_time(const char *t)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	if (strptime(t, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
		return (0);
	return (timegm(&tm));
}

/* Abort upload id of key, if it began before cutoff. */
static int
clean_upload(struct s3 *s, xmlNode *u, time_t cutoff)
{
	char key[2 * STORAGE_NAME_MAX + 1024], id[1024], when[64];
	char what[sizeof(key) + 32], *q;
	struct req r;
	time_t t;
	int rc;

	if (s3_xml_text(u, "Key", key, sizeof(key)) ||
	    s3_xml_text(u, "UploadId", id, sizeof(id)) ||
	    s3_xml_text(u, "Initiated", when, sizeof(when)))
		return (0);
	if ((t = iso_time(when)) == 0 || t > cutoff ||
	    strncmp(key, s->prefix, strlen(s->prefix)) != 0)
		return (0);
	s3_printable(key);
	snprintf(what, sizeof(what), "'%s' (upload of %s)",
	    key + strlen(s->prefix), when);
	if ((q = s3_upload_query(id, 0)) == NULL)
		return (-1);
	s3_req_init(&r, "DELETE", what, key, q);
	if ((rc = s3_perform(s, &r)) == 0 && r.status / 100 != 2 &&
	    r.status != 404)
		rc = s3_http_fail(s, &r, "");
	free(q);
	if (rc == 0)
		log_info("repository '%s': aborted the upload of '%s' begun "
		    "%s", s->base.where, key + strlen(s->prefix), when);
	return (rc);
}

struct cleaning {
	struct s3 *s;
	time_t cutoff;
	char kmark[2 * STORAGE_NAME_MAX + 1024], umark[1024];
};

static int
cleaning_query(void *arg, struct buf *q)
{
	struct cleaning *c = arg;

	return ((c->kmark[0] && (buf_puts(q, "key-marker=") ||
	    s3_buf_encoded(q, c->kmark) || buf_puts(q, "&"))) ||
	    (c->s->prefix[0] && (buf_puts(q, "prefix=") ||
	    s3_buf_encoded(q, c->s->prefix) || buf_puts(q, "&"))) ||
	    (c->umark[0] && (buf_puts(q, "upload-id-marker=") ||
	    s3_buf_encoded(q, c->umark) || buf_puts(q, "&"))) ||
	    buf_puts(q, "uploads="));
}

static int
cleaning_page(void *arg, xmlNode *root)
{
	struct cleaning *c = arg;
	xmlNode *u;
	int rc = 0;

	for (u = root->children; rc == 0 && u != NULL; u = u->next)
		if (u->type == XML_ELEMENT_NODE &&
		    strcmp((const char *)u->name, "Upload") == 0)
			rc = clean_upload(c->s, u, c->cutoff);
	if (rc != 0 || !truncated(root) ||
	    s3_xml_text(root, "NextKeyMarker", c->kmark, sizeof(c->kmark)) ||
	    s3_xml_text(root, "NextUploadIdMarker", c->umark, sizeof(c->umark)) ||
	    c->kmark[0] == '\0')
		return (rc);
	return (1);
}

/* Uploads under the prefix begun CLEAN_AGE ago or more are a crash's:
 * aborted, their parts freed.  A younger one may be another writer's. */
int
s3_clean(struct storage *st)
{
	struct cleaning *c;
	int rc;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return (s3_nomem());
	c->s = s3_of(st);
	c->cutoff = time(NULL) - CLEAN_AGE;
	rc = pages(c->s, "uploads (listing)", cleaning_query, cleaning_page,
	    c);
	free(c);
	return (rc);
}
