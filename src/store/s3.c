/*
 * The S3 store: a bucket, path-style, through libcurl (doc/design.md,
 * "The S3 store").  This file is the store: its location and
 * credentials, the probe at open, objects, puts (multipart past a part),
 * deletes and leases.  Requests are made by s3-http.c, XML answers and
 * listings read by s3-xml.c.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <ini.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "coffer/buf.h"
#include "coffer/digest.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/storage.h"
#include "coffer/tuning.h"

#include "lease.h"
#include "s3-int.h"

struct s3_obj {
	struct storage_obj base;
	char *key;
};

/*
 * A put buffers a part; once it is full and more comes, the part goes to
 * the put's uploader thread and the caller fills the next one, so a
 * backup computes while its pack travels.  One part in flight: memory
 * is two parts a put (the second taken at the first hand-over), and
 * parts go up in order.  upload, etag and nparts belong to the uploader
 * while it runs, to the caller once it waited.  A put ended
 * (s3_put_end) has sent its last part and holds no part buffer: only
 * the upload's completion is left for its commit.
 */
struct s3_put {
	struct storage_put base;
	char *key;
	struct buf data;	/* the part being filled */
	int has_data;		/* data is a part buffer taken */
	char *upload;		/* the multipart upload's id, or NULL */
	char (*etag)[80];	/* each part's */
	size_t nparts, capparts;

	pthread_t uploader;
	int running;		/* uploader started, not yet joined */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct buf sending;	/* the part in flight */
	int has_sending;	/* sending is a part buffer taken */
	int busy, stop;		/* under mu */
	int up_failed;		/* under mu, with up_err */
	struct storage_error up_err;
};

/* The full key of name ("PREFIX" "name"), malloc'd, or NULL. */
static char *
key_of(struct s3 *s, const char *name)
{
	char *k;

	if (asprintf(&k, "%s%s", s->prefix, name) < 0) {
		s3_nomem();
		return (NULL);
	}
	return (k);
}

/* A request on object name: the message names it, the key is built. */
static int
obj_req(struct req *r, struct s3 *s, const char *method, char *what,
    const char *name, char **key, const char *query)
{
	snprintf(what, WHAT_MAX, "'%s'", name);
	if ((*key = key_of(s, name)) == NULL)
		return (-1);
	s3_req_init(r, method, what, *key, query);
	return (0);
}

/* A HEAD of name: 0 (size in *size), STORAGE_MISSING or -1. */
static int
head(struct s3 *s, const char *name, uint64_t *size)
{
	char what[WHAT_MAX], *key;
	struct req r;
	int rc;

	if (obj_req(&r, s, "HEAD", what, name, &key, ""))
		return (-1);
	if ((rc = s3_perform(s, &r)) == 0) {
		if (r.status == 404)
			rc = STORAGE_MISSING;
		else if (r.status / 100 != 2)
			rc = s3_http_fail(s, &r, "");
		else if (!r.have_clen)
			rc = storage_fail(EIO, "repository '%s': HEAD %s: no "
			    "size in the answer", s->base.where, what);
		else
			*size = r.clen;
	}
	free(key);
	return (rc);
}

static int
s3_stat(struct storage *st, const char *name, uint64_t *size)
{
	return (head(s3_of(st), name, size));
}

/* The GET r of a small object whole, at most max bytes, into b,
 * NUL-terminated: 0, STORAGE_MISSING or -1 (reported). */
static int
get_whole(struct s3 *s, struct req *r, size_t max, struct buf *b)
{
	int rc;

	r->dyn = b;
	r->max = max;
	if ((rc = s3_perform(s, r)) != 0)
		return (rc);
	if (r->status == 404)
		return (STORAGE_MISSING);
	if (r->status / 100 != 2)
		return (s3_http_fail(s, r, ""));
	if (buf_put_u8(b, 0))
		return (s3_nomem());
	return (0);
}

static int
s3_get(struct storage *st, const char *name, size_t max,
    unsigned char **data, size_t *len)
{
	struct s3 *s = s3_of(st);
	char what[WHAT_MAX], *key;
	struct buf b = BUF_INIT;
	struct req r;
	int rc;

	if (obj_req(&r, s, "GET", what, name, &key, ""))
		return (-1);
	if ((rc = get_whole(s, &r, max, &b)) == 0) {
		/* The data is NUL-terminated; it passes to the caller. */
		*data = b.data;
		*len = b.len - 1;
		b.data = NULL;
	}
	buf_release(&b);
	free(key);
	return (rc);
}

static int
s3_open(struct storage *st, const char *name, struct storage_obj **o,
    uint64_t *size)
{
	struct s3_obj *h;
	int rc;

	if ((rc = head(s3_of(st), name, size)) != 0)
		return (rc);
	if ((h = calloc(1, sizeof(*h))) == NULL ||
	    (h->key = key_of(s3_of(st), name)) == NULL) {
		free(h);
		return (s3_nomem());
	}
	*o = &h->base;
	return (0);
}

/* A ranged GET into buf: one request.  416 (at or past the end) is no
 * byte; a short answer is what there is. */
static int
s3_read(struct storage_obj *o, uint64_t off, void *buf, size_t len,
    size_t *got)
{
	struct s3_obj *h = (struct s3_obj *)o;
	struct s3 *s = s3_of(o->st);
	char what[WHAT_MAX];
	struct req r;
	int rc;

	*got = 0;
	if (len == 0)
		return (0);
	snprintf(what, sizeof(what), "'%s'", o->name);
	s3_req_init(&r, "GET", what, h->key, "");
	r.range_off = off;
	r.range_len = len;
	r.fixed = buf;
	r.cap = len;
	if ((rc = s3_perform(s, &r)) != 0)
		return (rc);
	if (r.status == 416)
		return (0);
	if (r.status == 404)
		return (storage_fail(ENOENT, "repository '%s': '%s' is gone",
		    s->base.where, o->name));
	if (r.status / 100 != 2)
		return (s3_http_fail(s, &r, ""));
	*got = r.got;
	return (0);
}

static void
s3_obj_close(struct storage_obj *o)
{
	struct s3_obj *h = (struct s3_obj *)o;

	free(h->key);
	free(h);
}

/* --- Puts --------------------------------------------------------- */

/* An empty part buffer, a spare one if there is one; s->mu held. */
static void
part_new(struct s3 *s, struct buf *b)
{
	s->parts_live++;
	if (s->nspare > 0)
		*b = s->spare[--s->nspare];
	else
		buf_init(b);
	buf_reset(b);
}

/* A put's first part buffer: always. */
static void
part_take(struct s3 *s, struct buf *b)
{
	pthread_mutex_lock(&s->mu);
	part_new(s, b);
	pthread_mutex_unlock(&s->mu);
}

/*
 * A put's second part buffer, to fill while its first goes up: 1, or 0
 * when PARTS_LIVE are held and none is about to be given back (the put
 * then sends its part on its own thread).  While a committing put will
 * give one back once its part in flight is up, it waits for that (the
 * backup's next pack waits for the last one's).  It never waits on a put
 * that is not committing, so a thread with several puts open (import
 * stages a bundle's packs) cannot wait on itself, and holds a buffer a
 * put then, not two.
 */
static int
part_take_more(struct s3 *s, struct buf *b)
{
	int took = 0;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		if (s->parts_live < PARTS_LIVE) {
			part_new(s, b);
			took = 1;
			break;
		}
		if (s->draining == 0)
			break;
		pthread_cond_wait(&s->parts_cv, &s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return (took);
}

/* b, a part buffer taken, given back: kept for the next put, or freed.
 * drained: the put committing no longer holds a part in flight. */
static void
part_give(struct s3 *s, struct buf *b, int drained)
{
	pthread_mutex_lock(&s->mu);
	s->parts_live--;
	if (drained)
		s->draining--;
	if (b->data != NULL && s->nspare < SPARE_PARTS) {
		s->spare[s->nspare++] = *b;
		buf_init(b);
	}
	pthread_cond_broadcast(&s->parts_cv);
	pthread_mutex_unlock(&s->mu);
	buf_release(b);
}

static int
s3_put_begin(struct storage *st, const char *name, unsigned flags,
    struct storage_put **p)
{
	struct s3_put *h;

	if ((h = calloc(1, sizeof(*h))) == NULL ||
	    (h->key = key_of(s3_of(st), name)) == NULL) {
		free(h);
		return (s3_nomem());
	}
	part_take(s3_of(st), &h->data);
	h->has_data = 1;
	buf_init(&h->sending);
	pthread_mutex_init(&h->mu, NULL);
	pthread_cond_init(&h->cv, NULL);
	*p = &h->base;
	return (0);
}

/* 1 if an upload's ETag is not md5, the MD5 of what was sent.  An ETag
 * that is no plain MD5 (encrypted at rest, say) is not compared. */
static int
etag_differs(const char *etag, const uint8_t *md5)
{
	char hex[2 * DIGEST_MD5_BYTES + 1];
	size_t i, len = strlen(etag);

	if (len == 34 && etag[0] == '"' && etag[33] == '"')
		etag++, len -= 2;
	if (len != 32)
		return (0);
	for (i = 0; i < len; i++)
		if (!isxdigit((unsigned char)etag[i]))
			return (0);
	hex_encode(hex, md5, DIGEST_MD5_BYTES);
	return (strncasecmp(hex, etag, 32) != 0);
}

/* The answer to an upload (a request with md5): 0 or -1. */
static int
upload_ok(struct s3 *s, const struct req *r)
{
	if (r->status / 100 != 2)
		return (s3_http_fail(s, r, ""));
	if (etag_differs(r->etag, r->md5sum))
		return (storage_fail(EIO, "repository '%s': PUT %s: the "
		    "server's ETag %s is not the MD5 of what was sent",
		    s->base.where, r->what, r->etag));
	return (0);
}

static int
upload_begin(struct s3 *s, struct s3_put *h)
{
	char what[WHAT_MAX], id[1024];
	struct buf b = BUF_INIT;
	struct req r;
	xmlDoc *d;
	int rc = -1;

	snprintf(what, sizeof(what), "'%s'", h->base.name);
	s3_req_init(&r, "POST", what, h->key, "uploads=");
	if ((d = s3_xml_answer(s, &r, &b)) != NULL) {
		if (s3_xml_text(xmlDocGetRootElement(d), "UploadId", id,
		    sizeof(id)) || id[0] == '\0')
			storage_fail(EIO, "repository '%s': POST %s: no upload "
			    "id in the answer", s->base.where, what);
		else if ((h->upload = strdup(id)) == NULL)
			s3_nomem();
		else
			rc = 0;
		xmlFreeDoc(d);
	}
	buf_release(&b);
	return (rc);
}

/* The query of upload id, with a part number (0: none). */
char *
s3_upload_query(const char *id, size_t part)
{
	struct buf q = BUF_INIT;

	if ((part > 0 && buf_printf(&q, "partNumber=%zu&", part)) ||
	    buf_puts(&q, "uploadId=") || s3_buf_encoded(&q, id) ||
	    buf_put_u8(&q, 0)) {
		buf_release(&q);
		s3_nomem();
		return (NULL);
	}
	return ((char *)q.data);
}

/* The part in part, uploaded as the next part of h; part is emptied. */
static int
upload_part(struct s3 *s, struct s3_put *h, struct buf *part)
{
	char what[WHAT_MAX], *q, (*nv)[80];
	struct req r;
	int rc;

	if (h->upload == NULL && upload_begin(s, h))
		return (-1);
	if (h->nparts == PARTS_MAX)
		return (storage_fail(EFBIG, "repository '%s': '%s' is too "
		    "large (%d parts)", s->base.where, h->base.name,
		    PARTS_MAX));
	if (h->nparts == h->capparts) {
		h->capparts = h->capparts ? 2 * h->capparts : 16;
		if ((nv = reallocarray(h->etag, h->capparts,
		    sizeof(*nv))) == NULL)
			return (s3_nomem());
		h->etag = nv;
	}
	if ((q = s3_upload_query(h->upload, h->nparts + 1)) == NULL)
		return (-1);
	snprintf(what, sizeof(what), "'%s' (part %zu)", h->base.name,
	    h->nparts + 1);
	s3_req_init(&r, "PUT", what, h->key, q);
	r.body = part->data;
	r.bodylen = part->len;
	r.md5 = 1;
	if ((rc = s3_perform(s, &r)) == 0 &&
	    (rc = upload_ok(s, &r)) == 0)
		snprintf(h->etag[h->nparts++], sizeof(*h->etag), "%s", r.etag);
	free(q);
	buf_reset(part);
	return (rc);
}

/* The uploader thread of a put: each part handed over, in turn.  After
 * a failure it only drains: the put cannot commit. */
static void *
uploader_main(void *arg)
{
	struct s3_put *h = arg;
	struct s3 *s = s3_of(h->base.st);
	int rc;

	pthread_mutex_lock(&h->mu);
	for (;;) {
		while (!h->busy && !h->stop)
			pthread_cond_wait(&h->cv, &h->mu);
		if (!h->busy)
			break;
		rc = h->up_failed;
		pthread_mutex_unlock(&h->mu);
		if (rc == 0)
			rc = upload_part(s, h, &h->sending);
		pthread_mutex_lock(&h->mu);
		if (rc != 0 && !h->up_failed) {
			h->up_failed = 1;
			h->up_err = *storage_last_error();
		}
		buf_reset(&h->sending);
		h->busy = 0;
		pthread_cond_broadcast(&h->cv);
	}
	pthread_mutex_unlock(&h->mu);
	return (NULL);
}

/* The part in flight done: 0, or -1 with its failure recorded on this
 * thread (storage_fail). */
static int
uploads_wait(struct s3_put *h)
{
	struct storage_error e;
	int failed;

	if (!h->running)
		return (0);
	pthread_mutex_lock(&h->mu);
	while (h->busy)
		pthread_cond_wait(&h->cv, &h->mu);
	failed = h->up_failed;
	e = h->up_err;
	pthread_mutex_unlock(&h->mu);
	return (failed ? storage_fail(e.code, "%s", e.msg) : 0);
}

static void
uploads_stop(struct s3_put *h)
{
	if (!h->running)
		return;
	pthread_mutex_lock(&h->mu);
	h->stop = 1;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->uploader, NULL);
	h->running = 0;
}

/* The full part of h to its uploader, once the one before is up; on
 * this thread when there is no second buffer to fill meanwhile
 * (part_take_more) or no thread can be started. */
static int
hand_over(struct s3 *s, struct s3_put *h)
{
	struct buf t;

	if (!h->has_sending) {
		if (!part_take_more(s, &h->sending))
			return (upload_part(s, h, &h->data));
		h->has_sending = 1;
	}
	if (!h->running) {
		if (pthread_create(&h->uploader, NULL, uploader_main, h))
			return (upload_part(s, h, &h->data));
		h->running = 1;
	}
	if (uploads_wait(h))
		return (-1);
	pthread_mutex_lock(&h->mu);
	t = h->sending;
	h->sending = h->data;
	h->data = t;
	h->busy = 1;
	pthread_cond_broadcast(&h->cv);
	pthread_mutex_unlock(&h->mu);
	return (0);
}

static int
s3_put_write(struct storage_put *p, const void *data, size_t len)
{
	struct s3_put *h = (struct s3_put *)p;
	struct s3 *s = s3_of(p->st);
	size_t k;

	while (len > 0) {
		/* A full part goes when more comes: the last is never empty. */
		if (h->data.len == PART_SIZE && hand_over(s, h))
			return (-1);
		k = PART_SIZE - h->data.len < len ? PART_SIZE - h->data.len :
		    len;
		if (buf_append(&h->data, data, k))
			return (s3_nomem());
		data = (const char *)data + k;
		len -= k;
	}
	return (0);
}

/* The multipart upload of h completed: the object appears whole. */
static int
upload_complete(struct s3 *s, struct s3_put *h)
{
	struct buf body = BUF_INIT, b = BUF_INIT;
	char what[WHAT_MAX], *q = NULL;
	struct req r;
	uint64_t size;
	xmlDoc *d;
	size_t i;
	int rc = -1;

	if (h->has_data && upload_part(s, h, &h->data))
		return (-1);
	if (buf_puts(&body, "<CompleteMultipartUpload>"))
		goto nomem;
	for (i = 0; i < h->nparts; i++)
		if (buf_printf(&body, "<Part><PartNumber>%zu</PartNumber>"
		    "<ETag>%s</ETag></Part>", i + 1, h->etag[i]))
			goto nomem;
	if (buf_puts(&body, "</CompleteMultipartUpload>") ||
	    (q = s3_upload_query(h->upload, 0)) == NULL)
		goto nomem;
	snprintf(what, sizeof(what), "'%s'", h->base.name);
	s3_req_init(&r, "POST", what, h->key, q);
	r.body = body.data;
	r.bodylen = body.len;
	if ((d = s3_xml_answer(s, &r, &b)) != NULL) {
		xmlFreeDoc(d);
		rc = 0;
	} else if (r.tries > 1 && r.status == 404 &&
	    head(s, h->base.name, &size) == 0) {
		/* A retry of a completion that was done, its answer lost. */
		rc = 0;
	}
	goto out;
nomem:
	s3_nomem();
out:
	free(q);
	buf_release(&body);
	buf_release(&b);
	return (rc);
}

/* Best effort: what is left, clean removes.  The failure that led
 * here stays the one recorded. */
static void
upload_abort(struct s3 *s, struct s3_put *h)
{
	struct storage_error saved = *storage_last_error();
	char what[WHAT_MAX], *q;
	struct req r;

	if (h->upload == NULL || (q = s3_upload_query(h->upload, 0)) == NULL)
		return;
	snprintf(what, sizeof(what), "'%s' (upload)", h->base.name);
	s3_req_init(&r, "DELETE", what, h->key, q);
	s3_perform(s, &r);
	free(q);
	storage_fail(saved.code, "%s", saved.msg);
}

/* The put's second part buffer given back, its uploader ended: it
 * sends nothing more but its last part, from data.  drained: the put
 * was counted as draining (s3_put_commit). */
static void
sending_give(struct s3_put *h, int drained)
{
	uploads_stop(h);
	if (h->has_sending) {
		part_give(s3_of(h->base.st), &h->sending, drained);
		h->has_sending = 0;
	}
}

static void
s3_put_abort(struct storage_put *p)
{
	struct s3_put *h = (struct s3_put *)p;

	sending_give(h, 0);	/* its uploader ended first */
	upload_abort(s3_of(p->st), h);
	pthread_mutex_destroy(&h->mu);
	pthread_cond_destroy(&h->cv);
	if (h->has_data)
		part_give(s3_of(p->st), &h->data, 0);
	free(h->upload);
	free(h->etag);
	free(h->key);
	free(h);
}

/*
 * Nothing more comes: the last part goes now, as the upload's last (which
 * S3 lets be of any size), and the part buffers go back.  An empty
 * object keeps its (empty) buffer for the plain PUT of its commit.
 */
static int
s3_put_end(struct storage_put *p)
{
	struct s3_put *h = (struct s3_put *)p;
	struct s3 *s = s3_of(p->st);
	int rc;

	rc = uploads_wait(h);
	sending_give(h, 0);
	if (h->data.len == 0 && h->upload == NULL)
		return (rc);
	if (rc == 0)
		rc = upload_part(s, h, &h->data);
	part_give(s, &h->data, 0);
	h->has_data = 0;
	return (rc);
}

static int
s3_put_commit(struct storage_put *p)
{
	struct s3_put *h = (struct s3_put *)p;
	struct s3 *s = s3_of(p->st);
	char what[WHAT_MAX];
	struct req r;
	uint64_t size;
	int rc, drains = h->has_sending;

	/* Counted as draining while its part in flight goes up: a put
	 * that waits for a part buffer waits for that. */
	if (drains) {
		pthread_mutex_lock(&s->mu);
		s->draining++;
		pthread_mutex_unlock(&s->mu);
	}
	rc = uploads_wait(h);
	sending_give(h, drains);
	if (rc != 0) {
		s3_put_abort(p);
		return (rc);
	}
	/* Best effort: a check before the upload, no conditional write. */
	if ((p->flags & STORAGE_PUT_NEW) &&
	    (rc = head(s, p->name, &size)) != STORAGE_MISSING) {
		if (rc == 0)
			rc = storage_fail(EEXIST, "repository '%s': '%s' "
			    "already exists", s->base.where, p->name);
		s3_put_abort(p);
		return (rc);
	}
	if (h->upload != NULL) {
		rc = upload_complete(s, h);
		if (rc == 0) {
			free(h->upload);
			h->upload = NULL;
		}
		s3_put_abort(p);
		return (rc);
	}
	snprintf(what, sizeof(what), "'%s'", p->name);
	s3_req_init(&r, "PUT", what, h->key, "");
	r.body = h->data.data;
	r.bodylen = h->data.len;
	r.md5 = 1;
	if ((rc = s3_perform(s, &r)) == 0)
		rc = upload_ok(s, &r);
	s3_put_abort(p);
	return (rc);
}

static int
s3_del(struct storage *st, const char *name)
{
	struct s3 *s = s3_of(st);
	char what[WHAT_MAX], *key;
	struct req r;
	int rc;

	if (obj_req(&r, s, "DELETE", what, name, &key, ""))
		return (-1);
	if ((rc = s3_perform(s, &r)) == 0 && r.status / 100 != 2 &&
	    r.status != 404)
		rc = s3_http_fail(s, &r, "");
	free(key);
	return (rc);
}

/* --- Leases (lease.c) -------------------------------------------- */

static int
lease_get(void *arg, const char *key, const char *what, size_t max,
    char **data)
{
	struct buf b = BUF_INIT;
	struct req r;
	int rc;

	s3_req_init(&r, "GET", what, key, "");
	if ((rc = get_whole(arg, &r, max, &b)) == 0) {
		*data = (char *)b.data;
		b.data = NULL;
	}
	buf_release(&b);
	return (rc);
}

static int
lease_put(void *arg, const char *key, const char *what, const void *data,
    size_t len)
{
	struct req r;
	int rc;

	s3_req_init(&r, "PUT", what, key, "");
	r.body = data;
	r.bodylen = len;
	r.md5 = 1;
	if ((rc = s3_perform(arg, &r)) == 0)
		rc = upload_ok(arg, &r);
	return (rc);
}

static void
lease_del(void *arg, const char *key, const char *what)
{
	struct req r;

	s3_req_init(&r, "DELETE", what, key, "");
	s3_perform(arg, &r);
}

static int
lease_list(void *arg, const char *prefix, const char *what,
    int (*fn)(void *, const char *, uint64_t), void *fnarg)
{
	return (s3_list_keys(arg, prefix, what, fn, fnarg));
}

static struct lease_io
s3_lease_io(struct storage *st)
{
	return ((struct lease_io){ lease_get, lease_put, lease_del,
	    lease_list, st });
}

/* A lease: the object locks/NAME, or locks/NAME.shared/TOKEN (lease.c). */
static int
s3_lock(struct storage *st, const char *name,
    const struct storage_lock_opts *o, struct storage_lock **l,
    char *holder, size_t holdersz)
{
	struct lease_io io = s3_lease_io(st);

	return (lease_lock(&io, s3_of(st)->prefix, name, o, l, holder,
	    holdersz));
}

static int
s3_holders(struct storage *st, const char *name, struct storage_holder **v,
    size_t *n)
{
	struct lease_io io = s3_lease_io(st);

	return (lease_holders(&io, s3_of(st)->prefix, name, v, n));
}


/* --- The store ---------------------------------------------------- */

static void
s3_close(struct storage *st)
{
	struct s3 *s = s3_of(st);
	size_t i;

	while (s->npool > 0)
		s3_conn_free(s->pool[--s->npool]);
	while (s->nspare > 0)
		buf_release(&s->spare[--s->nspare]);
	free(s->pool);
	if (s->share != NULL)
		curl_share_cleanup(s->share);
	for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&s->share_mu[i]);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->parts_cv);
	if (s->secret != NULL)
		explicit_bzero(s->secret, strlen(s->secret));
	if (s->token_hdr != NULL)
		explicit_bzero(s->token_hdr, strlen(s->token_hdr));
	free(s->endpoint);
	free(s->host);
	free(s->bucket);
	free(s->prefix);
	free(s->region);
	free(s->akid);
	free(s->secret);
	free(s->token_hdr);
	free(s->cacert);
	free(s);
}

static const struct storage_ops s3_ops = {
	.stat = s3_stat,
	.get = s3_get,
	.open = s3_open,
	.read = s3_read,
	.obj_close = s3_obj_close,
	.put_begin = s3_put_begin,
	.put_write = s3_put_write,
	.put_end = s3_put_end,
	.put_commit = s3_put_commit,
	.put_abort = s3_put_abort,
	.del = s3_del,
	.list = s3_list,
	.clean = s3_clean,
	.lock = s3_lock,
	.unlock = lease_unlock,
	.renew = lease_renew,
	.holders = s3_holders,
	.close = s3_close,
};

/* The environment's value of name, NULL when unset or empty. */
static const char *
env(const char *name)
{
	const char *v = getenv(name);

	return (v != NULL && *v != '\0' ? v : NULL);
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int global_ok;

static void
global_init(void)
{
	global_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
	xmlInitParser();
}

struct profile {
	const char *name;
	char *akid, *secret, *token;
	int nomem;
};

static int
on_profile(void *arg, const char *section, const char *name,
    const char *value)
{
	struct profile *p = arg;
	char **to = NULL;

	if (strcmp(section, p->name) != 0)
		return (1);
	if (strcmp(name, "aws_access_key_id") == 0)
		to = &p->akid;
	else if (strcmp(name, "aws_secret_access_key") == 0)
		to = &p->secret;
	else if (strcmp(name, "aws_session_token") == 0)
		to = &p->token;
	if (to != NULL) {
		free(*to);
		if ((*to = strdup(value)) == NULL)
			p->nomem = 1;
	}
	return (1);
}

/* Credentials: the environment's, else the profile's.  0 or -1. */
static int
credentials(struct s3 *s)
{
	const char *id = env("AWS_ACCESS_KEY_ID"), *sec =
	    env("AWS_SECRET_ACCESS_KEY"), *tok = env("AWS_SESSION_TOKEN");
	const char *file = env("AWS_SHARED_CREDENTIALS_FILE"), *home;
	struct profile p = { NULL, NULL, NULL, NULL, 0 };
	char path[4096];
	int rc = -1;

	if (id != NULL && sec != NULL) {
		s->akid = strdup(id);
		s->secret = strdup(sec);
		if (tok != NULL && asprintf(&s->token_hdr,
		    "x-amz-security-token: %s", tok) < 0)
			s->token_hdr = NULL;
		if (s->akid == NULL || s->secret == NULL ||
		    (tok != NULL && s->token_hdr == NULL))
			return (s3_nomem());
		return (0);
	}
	p.name = env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
	if (file == NULL && (home = env("HOME")) != NULL) {
		snprintf(path, sizeof(path), "%s/.aws/credentials", home);
		file = path;
	}
	if (file == NULL || access(file, F_OK) != 0)
		rc = storage_fail(EACCES, "repository '%s': no credentials: "
		    "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
		    "AWS_PROFILE", s->base.where);
	else if (ini_parse(file, on_profile, &p) != 0)
		rc = storage_fail(EINVAL, "repository '%s': cannot read the "
		    "credentials file '%s'", s->base.where, file);
	else if (p.nomem)
		rc = s3_nomem();
	else if (p.akid == NULL || p.secret == NULL)
		rc = storage_fail(EACCES, "repository '%s': no credentials of "
		    "profile '%s' in '%s'", s->base.where, p.name, file);
	else if (p.token != NULL && asprintf(&s->token_hdr,
	    "x-amz-security-token: %s", p.token) < 0)
		rc = s3_nomem();
	else {
		s->akid = p.akid;
		s->secret = p.secret;
		p.akid = p.secret = NULL;
		rc = 0;
	}
	free(p.akid);
	if (p.secret != NULL)
		explicit_bzero(p.secret, strlen(p.secret));
	free(p.secret);
	if (p.token != NULL)
		explicit_bzero(p.token, strlen(p.token));
	free(p.token);
	return (rc);
}

/* 1 if c may be in a bucket name (S3's, with Swift's upper case and _). */
static int
bucket_char(int c)
{
	return (isalnum(c) || c == '-' || c == '.' || c == '_');
}

/*
 * "BUCKET[/PREFIX]" of a location into s: the prefix's components must
 * be object name components; a trailing '/' is dropped.
 */
static int
parse_path(struct s3 *s, const char *path, const char *loc)
{
	size_t n = strcspn(path, "/"), i;
	char *pfx;

	for (i = 0; i < n; i++)
		if (!bucket_char((unsigned char)path[i]))
			break;
	if (n < 3 || n > 63 || i < n)
		return (storage_fail(EINVAL, "'%s': not a bucket name in an "
		    "s3: location", loc));
	if ((s->bucket = strndup(path, n)) == NULL)
		return (s3_nomem());
	path += n;
	while (*path == '/')
		path++;
	if ((pfx = strdup(path)) == NULL)
		return (s3_nomem());
	n = strlen(pfx);
	while (n > 0 && pfx[n - 1] == '/')
		pfx[--n] = '\0';
	if (n > 0 && (!storage_name_ok(pfx) || n > STORAGE_NAME_MAX / 2)) {
		free(pfx);
		return (storage_fail(EINVAL, "'%s': the prefix is not a "
		    "path of plain names", loc));
	}
	if (asprintf(&s->prefix, "%s%s", pfx, n > 0 ? "/" : "") < 0) {
		free(pfx);
		s->prefix = NULL;
		return (s3_nomem());
	}
	free(pfx);
	return (0);
}

/* The endpoint ("http[s]://AUTHORITY"), its Host, and the rest. */
static int
parse_endpoint(struct s3 *s, const char *url, const char **rest,
    const char *loc)
{
	const char *auth = strstr(url, "://") + 3;
	size_t n = strcspn(auth, "/?#");

	/* Credentials in a location are refused, and never echoed. */
	if (memchr(auth, '@', n) != NULL)
		return (storage_fail(EINVAL, "an s3: location holds no "
		    "credentials (USER:PASSWORD@): they come from the "
		    "environment or ~/.aws/credentials"));
	if (n == 0)
		return (storage_fail(EINVAL, "'%s': an s3: endpoint is "
		    "http[s]://HOST[:PORT]", loc));
	if ((s->endpoint = strndup(url, (size_t)(auth - url) + n)) == NULL ||
	    (s->host = strndup(auth, n)) == NULL)
		return (s3_nomem());
	*rest = auth + n;
	return (0);
}

static int
parse_location(struct s3 *s, const char *loc)
{
	const char *rest = loc + 3, *ep, *region, *after;

	region = env("AWS_DEFAULT_REGION") ? env("AWS_DEFAULT_REGION") :
	    env("AWS_REGION") ? env("AWS_REGION") : "us-east-1";
	if ((s->region = strdup(region)) == NULL)
		return (s3_nomem());
	if (!strncmp(rest, "http://", 7) || !strncmp(rest, "https://", 8)) {
		if (parse_endpoint(s, rest, &rest, loc))
			return (-1);
		if (*rest != '/' || rest[1] == '\0')
			return (storage_fail(EINVAL, "'%s': no bucket in the "
			    "s3: location", loc));
		return (parse_path(s, rest + 1, loc));
	}
	if ((ep = env("AWS_ENDPOINT_URL")) != NULL) {
		if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8))
			return (storage_fail(EINVAL, "AWS_ENDPOINT_URL is not "
			    "an http[s]:// URL"));
		if (parse_endpoint(s, ep, &after, "AWS_ENDPOINT_URL"))
			return (-1);
	} else {
		if (asprintf(&s->host, "s3.%s.amazonaws.com", s->region) < 0) {
			s->host = NULL;
			return (s3_nomem());
		}
		if (asprintf(&s->endpoint, "https://%s", s->host) < 0) {
			s->endpoint = NULL;
			return (s3_nomem());
		}
	}
	return (parse_path(s, rest, loc));
}

/* The bucket checked (and made): 0 or -1. */
static int
probe(struct s3 *s, unsigned flags)
{
	struct buf q = BUF_INIT, b = BUF_INIT, body = BUF_INIT;
	char what[128], count[32];
	struct req r;
	xmlDoc *d;
	int rc = -1;

	snprintf(what, sizeof(what), "bucket '%s'", s->bucket);
	if (buf_puts(&q, "list-type=2&max-keys=1") || (s->prefix[0] &&
	    (buf_puts(&q, "&prefix=") || s3_buf_encoded(&q, s->prefix))) ||
	    buf_put_u8(&q, 0)) {
		s3_nomem();
		goto out;
	}
	s3_req_init(&r, "GET", what, NULL, (const char *)q.data);
	r.dyn = &b;
	r.max = XML_MAX;
	if (s3_perform(s, &r))
		goto out;
	if (r.status == 404 && (flags & STORAGE_CREATE)) {
		/* us-east-1 takes no location; others must be named. */
		if (strcmp(s->region, "us-east-1") != 0 &&
		    buf_printf(&body, "<CreateBucketConfiguration><Location"
		    "Constraint>%s</LocationConstraint>"
		    "</CreateBucketConfiguration>", s->region)) {
			s3_nomem();
			goto out;
		}
		s3_req_init(&r, "PUT", what, NULL, "");
		r.body = body.data;
		r.bodylen = body.len;
		if (s3_perform(s, &r) == 0) {
			if (r.status / 100 == 2)
				rc = 0;
			else
				s3_http_fail(s, &r, "");
		}
		goto out;
	}
	if (r.status / 100 != 2) {
		s3_http_fail(s, &r, "");
		goto out;
	}
	if ((d = s3_xml_parse((const char *)b.data, b.len)) == NULL) {
		storage_fail(EIO, "repository '%s': GET %s: the answer is not "
		    "XML", s->base.where, what);
		goto out;
	}
	if ((flags & STORAGE_CREATE) && (s3_xml_child(xmlDocGetRootElement(d),
	    "Contents") != NULL || (s3_xml_text(xmlDocGetRootElement(d),
	    "KeyCount", count, sizeof(count)) == 0 && atoi(count) > 0)))
		storage_fail(EEXIST, "repository '%s': %s already holds "
		    "objects", s->base.where, s->prefix[0] ? "the prefix" :
		    "the bucket");
	else
		rc = 0;
	xmlFreeDoc(d);
out:
	buf_release(&q);
	buf_release(&b);
	buf_release(&body);
	return (rc);
}

struct storage *
storage_s3_open(const char *location, const struct storage_s3_opts *o,
    unsigned flags)
{
	const char *ca = o != NULL && o->cacert != NULL ? o->cacert :
	    env("CURL_CA_BUNDLE") ? env("CURL_CA_BUNDLE") :
	    env("AWS_CA_BUNDLE");
	double secs = tuning_get()->s3_retry_seconds;
	struct s3 *s;
	size_t i, n;

	/* Failures here are the store's too (storage_last_error): they
	 * exit 5, not 3 as a repository that is not one would. */
	pthread_once(&once, global_init);
	if (!global_ok) {
		storage_fail(EIO, "cannot start libcurl");
		goto refused;
	}
	if (strncmp(location, "s3:", 3) != 0) {
		storage_fail(EINVAL, "'%s' is not an s3: location", location);
		goto refused;
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		s3_nomem();
		goto refused;
	}
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->parts_cv, NULL);
	for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&s->share_mu[i], NULL);
	s->base.ops = &s3_ops;
	s->retry_seconds = secs > 0 ? secs : RETRY_SECONDS;
	/* A stall takes a few tries of the bound, not all of it. */
	s->stall = s->retry_seconds / 4 < STALL_SECONDS ?
	    (long)(s->retry_seconds / 4) : STALL_SECONDS;
	if (s->stall < 1)
		s->stall = 1;
	n = strlen(location);
	while (n > 3 && location[n - 1] == '/')
		n--;
	if ((s->base.where = strndup(location, n)) == NULL) {
		s3_nomem();
		goto err;
	}
	if (parse_location(s, location) || credentials(s))
		goto err;
	if (ca != NULL && (s->cacert = strdup(ca)) == NULL) {
		s3_nomem();
		goto err;
	}
	if (s->token_hdr != NULL && strlen(s->token_hdr) > TOKEN_MAX) {
		storage_fail(EINVAL, "AWS_SESSION_TOKEN is too long");
		goto err;
	}
	if ((s->share = curl_share_init()) == NULL) {
		s3_nomem();
		goto err;
	}
	curl_share_setopt(s->share, CURLSHOPT_LOCKFUNC, s3_share_lock);
	curl_share_setopt(s->share, CURLSHOPT_UNLOCKFUNC, s3_share_unlock);
	curl_share_setopt(s->share, CURLSHOPT_USERDATA, s);
	curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(s->share, CURLSHOPT_SHARE,
	    CURL_LOCK_DATA_SSL_SESSION);
	if (probe(s, flags))
		goto err;
	if ((s->base.blocks = storage_blocks_new(READ_AHEAD,
	    READ_BLOCKS)) == NULL) {
		s3_nomem();
		goto err;
	}
	return (&s->base);
err:
	log_error("%s", storage_last_error()->msg);
	free(s->base.where);
	s3_close(&s->base);
	return (NULL);
refused:
	log_error("%s", storage_last_error()->msg);
	return (NULL);
}
