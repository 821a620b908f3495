#ifndef COFFER_STORE_S3_INT_H
#define COFFER_STORE_S3_INT_H

/*
 * Private to the S3 store (src/store/s3*.c): its state, a request and
 * its answer, and what its files share.  s3-http.c makes requests
 * (connections, signing, retries, error messages), s3-xml.c reads the
 * XML answers (listings, the clean of uploads), s3.c is the store
 * (locations, credentials, objects, puts, leases).
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <libxml/tree.h>

#include "coffer/buf.h"
#include "coffer/digest.h"
#include "coffer/storage.h"
#include "store-int.h"

/*
 * A put's parts.  A part costs Swift a segment object, and every request
 * one lookup of its account and container: 16 MiB parts make a pack of
 * 64 MiB five requests, not nine.  A put's second buffer (a part to
 * fill while one goes up) is taken only while fewer than PARTS_LIVE are
 * held, or once a committing put gives one back: a backup's writing
 * pack and the one finishing hold 48 MiB, not 64, and puts beyond send
 * their parts on their own thread with one buffer each (s3.c,
 * part_take_more).
 */
#define PART_SIZE (16u << 20)
#define PARTS_LIVE 3
/* What a small read fetches, for the reads after it (storage.c): a round
 * trip to an object store costs as much as megabytes of transfer. */
#define READ_AHEAD (4u << 20)
#define READ_BLOCKS 8		/* 32 MiB of them at most */
#define SPARE_PARTS 4
#define PARTS_MAX 10000		/* S3's limit of parts in an upload */
#define TRIES 8
#define RETRY_SECONDS 120.0
#define BACKOFF_FIRST 0.2	/* seconds; doubled each try */
#define BACKOFF_MAX 20.0
#define CONNECT_TIMEOUT 10L
#define STALL_SECONDS 30L	/* no byte for this long: a retry */
#define XML_MAX (16u << 20)	/* a listing page, an answer */
#define ERRBODY_MAX 4096
/*
 * An upload older is a crash's.  An import holds its bundle's packs as
 * uploads until the bundle checks, hours for a big one, while other
 * writers clean: a day, as `rclone cleanup` and the local store's tmp/.
 */
#define CLEAN_AGE (24 * 3600)
#define TOKEN_MAX 4096		/* AWS_SESSION_TOKEN */
#define URL_MAX 4096
#define CANON_MAX (URL_MAX + TOKEN_MAX + 1024)
#define HDR_MAX 1024
#define NHDR 8
#define WHAT_MAX (STORAGE_NAME_MAX + 32) /* a request's name, quoted */
#define EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


struct s3 {
	struct storage base;
	char *endpoint;		/* "http://host:port", no slash after */
	char *host;		/* the Host header: "host[:port]" */
	char *bucket;
	char *prefix;		/* "" or "a/b/" */
	char *region;
	char *akid, *secret, *token_hdr; /* token_hdr: its header, or NULL */
	char *cacert;
	double retry_seconds;
	long stall;		/* seconds without a byte: a retry */
	CURLSH *share;
	pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
	pthread_mutex_t mu;	/* the pool and the part buffers */
	struct conn **pool;
	size_t npool, cappool;
	/* Part buffers of puts that ended, for the next puts: a fresh
	 * buffer costs a page fault per 4 KiB written into it. */
	struct buf spare[SPARE_PARTS];
	size_t nspare;
	pthread_cond_t parts_cv;	/* a part buffer was given back */
	unsigned parts_live;	/* part buffers puts hold */
	unsigned draining;	/* puts committing that hold a part in flight */
};

/* An easy handle and the space of one request on it. */
struct conn {
	CURL *c;
	char url[URL_MAX];
	char path[URL_MAX];
	char canon[CANON_MAX];
	char line[NHDR][HDR_MAX];
	struct curl_slist hdr[NHDR + 1];
	char curlerr[CURL_ERROR_SIZE];
};

/* A request and what came back. */
struct req {
	const char *method;
	const char *what;	/* for messages: "'keys/x'", "bucket 'b'" */
	const char *key;	/* under the bucket, prefix included; NULL
				 * for the bucket */
	const char *query;	/* canonical: sorted, encoded; "" none */
	const void *body;
	size_t bodylen, sent;
	int md5;		/* send Content-MD5 (s3_perform computes
				 * md5sum) */
	uint8_t md5sum[DIGEST_MD5_BYTES];
	uint64_t range_off;	/* with range_len > 0: Range */
	size_t range_len;
	/* The body: into fixed (cap bytes), else into dyn (max bytes). */
	unsigned char *fixed;
	size_t cap, got, skip;
	struct buf *dyn;
	size_t max;
	/* Answers. */
	long status;
	uint64_t clen;
	int have_clen;
	char etag[80];
	char errbody[ERRBODY_MAX];
	size_t errlen;
	int too_big, nomem;
	int tries;
};

static inline struct s3 *
s3_of(struct storage *st)
{
	return ((struct s3 *)st);
}

/* s3-http.c: connections, requests, their failures. */

/* ENOMEM recorded: -1. */
int s3_nomem(void);

/* Append s encoded to b (query values). */
int s3_buf_encoded(struct buf *b, const char *s);

/* The locks of the store's curl share. */
void s3_share_lock(CURL *c, curl_lock_data d, curl_lock_access a,
    void *arg);

void s3_share_unlock(CURL *c, curl_lock_data d, void *arg);

/* A pooled connection freed. */
void s3_conn_free(struct conn *cn);

/* Bytes a server sent, for a message: printable, on one line. */
void s3_printable(char *s);

/* The request failed with status: one line, errno from it. */
int s3_http_fail(struct s3 *s, const struct req *r, const char *after);

/*
 * Make request r on a connection of the pool, retried while the failure
 * is transient, within TRIES and the store's time bound.  0: an answer
 * came (r->status, which the caller judges; its body where r said), or
 * -1 (recorded).
 */
int s3_perform(struct s3 *s, struct req *r);

/* r cleared for a request: its method, what messages call it, its key
 * (NULL: the bucket) and canonical query. */
void s3_req_init(struct req *r, const char *method, const char *what,
    const char *key, const char *query);

/* s3-xml.c: XML answers, listings, the clean of uploads. */

/* The document in the n bytes at p (whitespace an answer was kept alive
 * with skipped), or NULL.  No network, no entity of any DTD. */
xmlDoc *s3_xml_parse(const char *p, size_t n);

/* The first element child of n called name, or NULL. */
xmlNode *s3_xml_child(xmlNode *n, const char *name);

/* The text of n's child name into out (cap bytes): 0, or -1 when it is
 * missing or too long. */
int s3_xml_text(xmlNode *n, const char *name, char *out, size_t cap);

/* Request r made, its answer XML, read into b: the doc, or NULL
 * (recorded). */
xmlDoc *s3_xml_answer(struct s3 *s, struct req *r, struct buf *b);

/* The ops of the same names (include/coffer/storage.h). */
int s3_list(struct storage *st, const char *dir,
    int (*fn)(void *, const char *, uint64_t), void *arg);

/* Every key that begins with prefix (the bucket's, the store's prefix
 * included: the store's own keys, as locks/), whole, to fn, every page:
 * 0, fn's value, or -1 (recorded). */
int s3_list_keys(struct s3 *s, const char *prefix, const char *what,
    int (*fn)(void *, const char *, uint64_t), void *arg);

/* Uploads under the prefix begun CLEAN_AGE ago or more are a crash's:
 * aborted, their parts freed.  A younger one may be another writer's. */
int s3_clean(struct storage *st);

/* s3.c: the store. */

/* The query of upload id, with a part number (0: none). */
char *s3_upload_query(const char *id, size_t part);

#endif
