/*
 * The S3 store: a bucket, path-style, through libcurl, each request
 * signed with AWS Signature V4 (doc/design.md, "The S3 store").
 *
 * A request is made on a connection from the store's pool (an easy
 * handle and its scratch space), so that connections are kept alive and
 * reused by every thread, and a ranged read allocates nothing: its
 * headers are built in the connection's buffers and the body lands in
 * the caller's.  Timeouts, dropped connections, 5xx and 429 are retried
 * with exponential backoff and jitter, within a bound of tries and of
 * time (COFFER_S3_RETRY_SECONDS); any other answer is final.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
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
#include "coffer/storage.h"
#include "coffer/tuning.h"

#define PART_SIZE (8u << 20)	/* bytes a put buffers; its parts */
#define PARTS_MAX 10000		/* S3's limit of parts in an upload */
#define TRIES 8
#define RETRY_SECONDS 120.0
#define BACKOFF_FIRST 0.2	/* seconds; doubled each try */
#define BACKOFF_MAX 20.0
#define CONNECT_TIMEOUT 10L
#define STALL_SECONDS 30L	/* no byte for this long: a retry */
#define XML_MAX (16u << 20)	/* a listing page, an answer */
#define ERRBODY_MAX 4096
#define LEASE_TTL 900.0		/* a lease's default length, seconds */
#define LEASE_MAX 4096
#define CLEAN_AGE (30 * 60)	/* an upload older is a crash's */
#define TOKEN_MAX 4096		/* AWS_SESSION_TOKEN */
#define URL_MAX 4096
#define CANON_MAX (URL_MAX + TOKEN_MAX + 1024)
#define HDR_MAX 1024
#define NHDR 8
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
	pthread_mutex_t mu;	/* the pool */
	struct conn **pool;
	size_t npool, cappool;
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
	int md5;		/* send Content-MD5 (perform computes
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

struct s3_obj {
	struct storage_obj base;
	char *key;
};

struct s3_put {
	struct storage_put base;
	char *key;
	struct buf data;	/* the part being filled */
	char *upload;		/* the multipart upload's id, or NULL */
	char (*etag)[80];	/* each part's */
	size_t nparts, capparts;
};

struct s3_lock {
	struct storage_lock base;
	char *key;
	char token[33];
};

static struct s3 *
s3_of(struct storage *st)
{
	return ((struct s3 *)st);
}

static int
nomem(void)
{
	return (storage_fail(ENOMEM, "out of memory"));
}

static double
now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

static void
sleep_for(double s)
{
	struct timespec ts;

	if (s <= 0)
		return;
	ts.tv_sec = (time_t)s;
	ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* A uniform double in [0, 1). */
static double
jitter(void)
{
	uint32_t x = 0;

	if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x))
		x = (uint32_t)rand();
	return ((double)x / 4294967296.0);
}

/*
 * s percent-encoded into out (cap bytes, NUL included) as Signature V4
 * wants it: everything but A-Z a-z 0-9 - _ . ~ (and '/' when slash).
 * 0, or -1 when it does not fit.
 */
static int
uri_encode(char *out, size_t cap, const char *s, int slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (isalnum(ch) || ch == '-' || ch == '_' || ch == '.' ||
		    ch == '~' || (slash && ch == '/')) {
			if (n + 1 >= cap)
				return (-1);
			out[n++] = (char)ch;
		} else {
			if (n + 3 >= cap)
				return (-1);
			out[n++] = '%';
			out[n++] = hex[ch >> 4];
			out[n++] = hex[ch & 15];
		}
	}
	if (n >= cap)
		return (-1);
	out[n] = '\0';
	return (0);
}

/* Append s encoded to b (query values). */
static int
buf_encoded(struct buf *b, const char *s)
{
	char tmp[3 * 1024 + 1];
	size_t n = strlen(s);

	if (n > 1024) {
		/* A continuation token is short; this is for safety. */
		return (-1);
	}
	if (uri_encode(tmp, sizeof(tmp), s, 0))
		return (-1);
	return (buf_puts(b, tmp));
}

/* --- Connections -------------------------------------------------- */

static void
share_lock(CURL *c, curl_lock_data d, curl_lock_access a, void *arg)
{
	struct s3 *s = arg;

	(void)c, (void)a;
	pthread_mutex_lock(&s->share_mu[d]);
}

static void
share_unlock(CURL *c, curl_lock_data d, void *arg)
{
	struct s3 *s = arg;

	(void)c;
	pthread_mutex_unlock(&s->share_mu[d]);
}

static struct conn *
conn_get(struct s3 *s)
{
	struct conn *cn = NULL;

	pthread_mutex_lock(&s->mu);
	if (s->npool > 0)
		cn = s->pool[--s->npool];
	pthread_mutex_unlock(&s->mu);
	if (cn != NULL)
		return (cn);
	if ((cn = calloc(1, sizeof(*cn))) == NULL ||
	    (cn->c = curl_easy_init()) == NULL) {
		free(cn);
		nomem();
		return (NULL);
	}
	return (cn);
}

static void
conn_free(struct conn *cn)
{
	if (cn != NULL) {
		curl_easy_cleanup(cn->c);
		free(cn);
	}
}

/* Back to the pool, its connection kept alive. */
static void
conn_put(struct s3 *s, struct conn *cn)
{
	struct conn **nv;

	pthread_mutex_lock(&s->mu);
	if (s->npool == s->cappool) {
		s->cappool = s->cappool ? 2 * s->cappool : 8;
		if ((nv = reallocarray(s->pool, s->cappool, sizeof(*nv))) ==
		    NULL) {
			s->cappool = s->npool;
			pthread_mutex_unlock(&s->mu);
			conn_free(cn);
			return;
		}
		s->pool = nv;
	}
	s->pool[s->npool++] = cn;
	pthread_mutex_unlock(&s->mu);
}

/* --- Callbacks ---------------------------------------------------- */

static size_t
on_header(char *p, size_t size, size_t n, void *arg)
{
	struct req *r = arg;
	size_t len = size * n, k;
	char *v;

	if (len >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		/* A new answer (after a 100 Continue, say): start over. */
		if ((v = memchr(p, ' ', len)) != NULL)
			r->status = strtol(v + 1, NULL, 10);
		r->etag[0] = '\0';
		r->have_clen = 0;
		return (len);
	}
	if (len > 5 && strncasecmp(p, "etag:", 5) == 0) {
		for (v = p + 5; v < p + len && (*v == ' ' || *v == '\t'); v++)
			;
		for (k = 0; v < p + len && *v != '\r' && *v != '\n' &&
		    k + 1 < sizeof(r->etag); v++)
			r->etag[k++] = *v;
		r->etag[k] = '\0';
	} else if (len > 15 && strncasecmp(p, "content-length:", 15) == 0) {
		r->clen = strtoull(p + 15, NULL, 10);
		r->have_clen = 1;
		/* A get over its cap stops here, before any byte. */
		if (r->dyn != NULL && r->status / 100 == 2 &&
		    r->clen > r->max) {
			r->too_big = 1;
			return (0);
		}
	}
	return (len);
}

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	struct req *r = arg;
	size_t len = size * n, k;

	if (r->status / 100 != 2) {
		k = sizeof(r->errbody) - 1 - r->errlen;
		if (k > len)
			k = len;
		memcpy(r->errbody + r->errlen, p, k);
		r->errlen += k;
		r->errbody[r->errlen] = '\0';
		return (len);
	}
	if (r->fixed != NULL) {
		/* A 200 to a ranged request is the whole object. */
		if (r->status == 200 && r->skip > 0) {
			k = r->skip < len ? r->skip : len;
			r->skip -= k;
			p += k;
			len -= k;
		}
		k = r->cap - r->got < len ? r->cap - r->got : len;
		memcpy(r->fixed + r->got, p, k);
		r->got += k;
		return (size * n);
	}
	if (r->dyn != NULL) {
		if (r->dyn->len + len > r->max) {
			r->too_big = 1;
			return (0);
		}
		if (buf_append(r->dyn, p, len)) {
			r->nomem = 1;
			return (0);
		}
	}
	return (len);
}

static size_t
on_read(char *p, size_t size, size_t n, void *arg)
{
	struct req *r = arg;
	size_t k = r->bodylen - r->sent;

	if (k > size * n)
		k = size * n;
	memcpy(p, (const char *)r->body + r->sent, k);
	r->sent += k;
	return (k);
}

/* --- Signing ------------------------------------------------------ */

/* The n bytes at in, base64 with padding, into out (4 * ceil(n / 3) + 1). */
static void
base64(char *out, const uint8_t *in, size_t n)
{
	static const char b[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	uint32_t v;
	size_t i;

	for (i = 0; i + 2 < n; i += 3, out += 4) {
		v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 |
		    in[i + 2];
		out[0] = b[v >> 18];
		out[1] = b[v >> 12 & 63];
		out[2] = b[v >> 6 & 63];
		out[3] = b[v & 63];
	}
	if (i < n) {
		v = (uint32_t)in[i] << 16 |
		    (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);
		out[0] = b[v >> 18];
		out[1] = b[v >> 12 & 63];
		out[2] = i + 1 < n ? b[v >> 6 & 63] : '=';
		out[3] = '=';
		out += 4;
	}
	*out = '\0';
}

static void
hmac(const uint8_t *key, size_t keylen, const char *msg, uint8_t out[32])
{
	digest_hmac_sha256(key, keylen, msg, strlen(msg), out);
}

/*
 * The request's headers, signed (Signature V4) for now, into cn->hdr.
 * sha: the payload's SHA-256, hex.  0, or -1 when they do not fit.
 */
static int
sign(struct s3 *s, struct conn *cn, const struct req *r, const char *sha)
{
	char date[17], day[9], scope[128], sts[256], hexsig[65], hcanon[65];
	uint8_t k[32], h[32];
	char kdate[300];
	struct tm tm;
	time_t t = time(NULL);
	int n = 0, len;
	size_t i;

	gmtime_r(&t, &tm);
	strftime(date, sizeof(date), "%Y%m%dT%H%M%SZ", &tm);
	strftime(day, sizeof(day), "%Y%m%d", &tm);
	snprintf(scope, sizeof(scope), "%s/%s/s3/aws4_request", day,
	    s->region);
	len = snprintf(cn->canon, sizeof(cn->canon),
	    "%s\n%s\n%s\nhost:%s\nx-amz-content-sha256:%s\nx-amz-date:%s\n"
	    "%s%s%s\nhost;x-amz-content-sha256;x-amz-date%s\n%s", r->method,
	    cn->path, r->query, s->host, sha, date,
	    s->token_hdr ? "x-amz-security-token:" : "",
	    s->token_hdr ? s->token_hdr + 22 : "", s->token_hdr ? "\n" : "",
	    s->token_hdr ? ";x-amz-security-token" : "", sha);
	if (len < 0 || (size_t)len >= sizeof(cn->canon))
		return (-1);
	digest_sha256(cn->canon, (size_t)len, h);
	hex_encode(hcanon, h, 32);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", date,
	    scope, hcanon);
	snprintf(kdate, sizeof(kdate), "AWS4%s", s->secret);
	hmac((uint8_t *)kdate, strlen(kdate), day, k);
	explicit_bzero(kdate, sizeof(kdate));
	hmac(k, 32, s->region, k);
	hmac(k, 32, "s3", k);
	hmac(k, 32, "aws4_request", k);
	hmac(k, 32, sts, h);
	explicit_bzero(k, sizeof(k));
	hex_encode(hexsig, h, 32);

	snprintf(cn->line[n++], HDR_MAX, "Host: %s", s->host);
	snprintf(cn->line[n++], HDR_MAX, "x-amz-date: %s", date);
	snprintf(cn->line[n++], HDR_MAX, "x-amz-content-sha256: %s", sha);
	if ((size_t)snprintf(cn->line[n++], HDR_MAX, "Authorization: "
	    "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=host;"
	    "x-amz-content-sha256;x-amz-date%s, Signature=%s", s->akid, scope,
	    s->token_hdr ? ";x-amz-security-token" : "", hexsig) >= HDR_MAX)
		return (-1);
	snprintf(cn->line[n++], HDR_MAX, "Expect:");
	if (r->md5) {
		char b64[32];

		base64(b64, r->md5sum, sizeof(r->md5sum));
		snprintf(cn->line[n++], HDR_MAX, "Content-MD5: %s", b64);
	}
	for (i = 0; i < (size_t)n; i++) {
		cn->hdr[i].data = cn->line[i];
		cn->hdr[i].next = &cn->hdr[i + 1];
	}
	if (s->token_hdr != NULL) {
		cn->hdr[n].data = s->token_hdr;
		cn->hdr[n].next = &cn->hdr[n + 1];
		n++;
	}
	cn->hdr[n - 1].next = NULL;
	return (0);
}

/* --- XML ---------------------------------------------------------- */

/* The document in the n bytes at p (whitespace an answer was kept alive
 * with skipped), or NULL.  No network, no entity of any DTD. */
static xmlDoc *
xml_parse(const char *p, size_t n)
{
	while (n > 0 && isspace((unsigned char)*p))
		p++, n--;
	if (n == 0 || n > INT32_MAX)
		return (NULL);
	return (xmlReadMemory(p, (int)n, NULL, NULL, XML_PARSE_NONET |
	    XML_PARSE_NOERROR | XML_PARSE_NOWARNING));
}

/* The first element child of n called name, or NULL. */
static xmlNode *
xml_child(xmlNode *n, const char *name)
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
static int
xml_text(xmlNode *n, const char *name, char *out, size_t cap)
{
	xmlNode *c = xml_child(n, name);
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

/* --- Requests ----------------------------------------------------- */

/* 1 if a retry may get over the transfer's failure cc. */
static int
transient(CURLcode cc)
{
	switch (cc) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return (1);
	default:
		return (0);
	}
}

static int
status_errno(long status)
{
	switch (status) {
	case 404:
		return (ENOENT);
	case 401:
	case 403:
		return (EACCES);
	case 409:
		return (EEXIST);
	case 413:
		return (EFBIG);
	case 400:
		return (EINVAL);
	case 408:
		return (ETIMEDOUT);
	default:
		return (EIO);
	}
}

static const char *
reason(long status)
{
	switch (status) {
	case 400: return ("Bad Request");
	case 401: return ("Unauthorized");
	case 403: return ("Forbidden");
	case 404: return ("Not Found");
	case 409: return ("Conflict");
	case 416: return ("Range Not Satisfiable");
	case 429: return ("Too Many Requests");
	case 500: return ("Internal Server Error");
	case 501: return ("Not Implemented");
	case 502: return ("Bad Gateway");
	case 503: return ("Service Unavailable");
	case 504: return ("Gateway Timeout");
	default: return ("HTTP error");
	}
}

/* Bytes a server sent, for a message: printable, on one line. */
static void
printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			*s = '?';
}

/* The error code ("SlowDown") and message in an error answer's body,
 * or "". */
static void
error_code(const struct req *r, char *code, size_t cap, char *msg,
    size_t msgcap)
{
	xmlDoc *d = xml_parse(r->errbody, r->errlen);
	xmlNode *root = d != NULL ? xmlDocGetRootElement(d) : NULL;

	code[0] = msg[0] = '\0';
	if (root != NULL && strcmp((const char *)root->name, "Error") == 0) {
		xml_text(root, "Code", code, cap);
		xml_text(root, "Message", msg, msgcap);
	}
	xmlFreeDoc(d);
	printable(code);
	printable(msg);
}

/* The request failed with status: one line, errno from it. */
static int
http_fail(struct s3 *s, const struct req *r, const char *after)
{
	char code[64], msg[256];

	error_code(r, code, sizeof(code), msg, sizeof(msg));
	return (storage_fail(status_errno(r->status), "repository '%s': %s "
	    "%s: %ld %s%s%s%s", s->base.where, r->method, r->what, r->status,
	    code[0] ? code : reason(r->status), msg[0] ? ": " : "", msg,
	    after));
}

/* The url and path of r in cn: 0, or -1 when too long. */
static int
locate(struct s3 *s, struct conn *cn, const struct req *r)
{
	char enc[URL_MAX];
	int n;

	if (r->key != NULL && uri_encode(enc, sizeof(enc), r->key, 1))
		return (-1);
	n = snprintf(cn->path, sizeof(cn->path), "/%s%s%s", s->bucket,
	    r->key != NULL ? "/" : "", r->key != NULL ? enc : "");
	if (n < 0 || (size_t)n >= sizeof(cn->path))
		return (-1);
	n = snprintf(cn->url, sizeof(cn->url), "%s%s%s%s", s->endpoint,
	    cn->path, r->query[0] ? "?" : "", r->query);
	return (n < 0 || (size_t)n >= sizeof(cn->url) ? -1 : 0);
}

/* cn set up for one try of r. */
static void
setup(struct s3 *s, struct conn *cn, struct req *r)
{
	CURL *c = cn->c;

	curl_easy_reset(c);
	cn->curlerr[0] = '\0';
	curl_easy_setopt(c, CURLOPT_URL, cn->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, cn->hdr);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_SHARE, s->share);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cn->curlerr);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, s->stall);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (s->cacert != NULL)
		curl_easy_setopt(c, CURLOPT_CAINFO, s->cacert);
	if (strcmp(r->method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (strcmp(r->method, "PUT") == 0) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, r);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE,
		    (curl_off_t)r->bodylen);
	} else if (strcmp(r->method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, r->body ? r->body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE,
		    (curl_off_t)r->bodylen);
	} else if (strcmp(r->method, "DELETE") == 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
	if (r->range_len > 0) {
		snprintf(cn->line[NHDR - 1], HDR_MAX, "%llu-%llu",
		    (unsigned long long)r->range_off,
		    (unsigned long long)(r->range_off + r->range_len - 1));
		curl_easy_setopt(c, CURLOPT_RANGE, cn->line[NHDR - 1]);
	}
}

static void
fresh(struct req *r)
{
	r->status = 0;
	r->clen = 0;
	r->have_clen = 0;
	r->etag[0] = '\0';
	r->errlen = 0;
	r->errbody[0] = '\0';
	r->got = 0;
	r->skip = (size_t)r->range_off;
	r->sent = 0;
	r->too_big = r->nomem = 0;
	if (r->dyn != NULL)
		buf_reset(r->dyn);
}

/* 1 if an answer is worth another try: 5xx, 429, S3's RequestTimeout. */
static int
retry_status(const struct req *r)
{
	char code[64], msg[8];

	if (r->status >= 500 || r->status == 429)
		return (1);
	if (r->status == 400) {
		error_code(r, code, sizeof(code), msg, sizeof(msg));
		return (strcmp(code, "RequestTimeout") == 0);
	}
	return (0);
}

/*
 * Make request r on a connection of the pool, retried while the failure
 * is transient, within TRIES and the store's time bound.  0: an answer
 * came (r->status, which the caller judges; its body where r said), or
 * -1 (recorded).
 */
static int
perform(struct s3 *s, struct req *r)
{
	char sha[65], after[64];
	uint8_t h[32];
	double start = now_mono(), delay = BACKOFF_FIRST, wait;
	struct conn *cn;
	CURLcode cc = CURLE_OK;
	int rc = -1;

	/* Hashed once, whatever the tries. */
	if (r->bodylen > 0) {
		digest_sha256(r->body, r->bodylen, h);
		hex_encode(sha, h, 32);
	} else
		memcpy(sha, EMPTY_SHA256, sizeof(sha));
	if (r->md5)
		digest_md5(r->body, r->bodylen, r->md5sum);
	if ((cn = conn_get(s)) == NULL)
		return (-1);
	if (locate(s, cn, r) || sign(s, cn, r, sha)) {
		rc = storage_fail(ENAMETOOLONG, "repository '%s': %s %s: the "
		    "request is too long", s->base.where, r->method, r->what);
		goto out;
	}
	for (r->tries = 1;; r->tries++) {
		fresh(r);
		/* Signed again: a signature is good for minutes only. */
		if (r->tries > 1)
			sign(s, cn, r, sha);
		setup(s, cn, r);
		cc = curl_easy_perform(cn->c);
		if (r->too_big) {
			rc = storage_fail(EFBIG, "repository '%s': %s is too "
			    "large (more than %zu bytes)", s->base.where,
			    r->what, r->max);
			goto out;
		}
		if (r->nomem) {
			rc = nomem();
			goto out;
		}
		if (cc == CURLE_OK) {
			curl_easy_getinfo(cn->c, CURLINFO_RESPONSE_CODE,
			    &r->status);
			if (!retry_status(r)) {
				rc = 0;
				goto out;
			}
		} else if (!transient(cc))
			break;
		wait = delay / 2 + jitter() * delay / 2;
		if (r->tries >= TRIES ||
		    now_mono() - start + wait > s->retry_seconds)
			break;
		log_info("repository '%s': %s %s: %s, try %d of %d in %.1f s",
		    s->base.where, r->method, r->what, cc == CURLE_OK ?
		    reason(r->status) : curl_easy_strerror(cc), r->tries + 1,
		    TRIES, wait);
		sleep_for(wait);
		delay = delay * 2 < BACKOFF_MAX ? delay * 2 : BACKOFF_MAX;
	}
	snprintf(after, sizeof(after), r->tries > 1 ? " (%d tries in %.0f s)" :
	    "", r->tries, now_mono() - start);
	if (cc == CURLE_OK)
		rc = http_fail(s, r, after);
	else
		rc = storage_fail(cc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT :
		    cc == CURLE_PEER_FAILED_VERIFICATION ? EACCES : EIO,
		    "repository '%s': %s %s: %s%s", s->base.where, r->method,
		    r->what, cn->curlerr[0] ? cn->curlerr :
		    curl_easy_strerror(cc), after);
out:
	conn_put(s, cn);
	return (rc);
}

/* The full key of name ("PREFIX" "name"), malloc'd, or NULL. */
static char *
key_of(struct s3 *s, const char *name)
{
	char *k;

	if (asprintf(&k, "%s%s", s->prefix, name) < 0) {
		nomem();
		return (NULL);
	}
	return (k);
}

/* A request on object name, its messages naming it. */
static void
req_init(struct req *r, const char *method, const char *what,
    const char *key, const char *query)
{
	memset(r, 0, sizeof(*r));
	r->method = method;
	r->what = what;
	r->key = key;
	r->query = query;
}

/* A request on object name: the message names it, the key is built. */
#define WHAT_MAX (STORAGE_NAME_MAX + 32)
static int
obj_req(struct req *r, struct s3 *s, const char *method, char *what,
    const char *name, char **key, const char *query)
{
	snprintf(what, WHAT_MAX, "'%s'", name);
	if ((*key = key_of(s, name)) == NULL)
		return (-1);
	req_init(r, method, what, *key, query);
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
	if ((rc = perform(s, &r)) == 0) {
		if (r.status == 404)
			rc = STORAGE_MISSING;
		else if (r.status / 100 != 2)
			rc = http_fail(s, &r, "");
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
	r.dyn = &b;
	r.max = max;
	if ((rc = perform(s, &r)) == 0) {
		if (r.status == 404)
			rc = STORAGE_MISSING;
		else if (r.status / 100 != 2)
			rc = http_fail(s, &r, "");
		else if (buf_put_u8(&b, 0))
			rc = nomem();
		else {
			if ((*data = b.data) == NULL)
				rc = nomem();
			*len = b.len - 1;
			b.data = NULL;
		}
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
		return (nomem());
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
	req_init(&r, "GET", what, h->key, "");
	r.range_off = off;
	r.range_len = len;
	r.fixed = buf;
	r.cap = len;
	if ((rc = perform(s, &r)) != 0)
		return (rc);
	if (r.status == 416)
		return (0);
	if (r.status == 404)
		return (storage_fail(ENOENT, "repository '%s': '%s' is gone",
		    s->base.where, o->name));
	if (r.status / 100 != 2)
		return (http_fail(s, &r, ""));
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

static int
s3_put_begin(struct storage *st, const char *name, unsigned flags,
    struct storage_put **p)
{
	struct s3_put *h;

	if ((h = calloc(1, sizeof(*h))) == NULL ||
	    (h->key = key_of(s3_of(st), name)) == NULL) {
		free(h);
		return (nomem());
	}
	buf_init(&h->data);
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
		return (http_fail(s, r, ""));
	if (etag_differs(r->etag, r->md5sum))
		return (storage_fail(EIO, "repository '%s': PUT %s: the "
		    "server's ETag %s is not the MD5 of what was sent",
		    s->base.where, r->what, r->etag));
	return (0);
}

/* A request on the upload of h whose answer is XML: the doc, or NULL
 * (recorded). */
static xmlDoc *
xml_answer(struct s3 *s, struct req *r, struct buf *b)
{
	xmlDoc *d;

	r->dyn = b;
	r->max = XML_MAX;
	if (perform(s, r))
		return (NULL);
	if (r->status / 100 != 2) {
		http_fail(s, r, "");
		return (NULL);
	}
	if ((d = xml_parse((const char *)b->data, b->len)) == NULL) {
		storage_fail(EIO, "repository '%s': %s %s: the answer is not "
		    "XML", s->base.where, r->method, r->what);
		return (NULL);
	}
	/* CompleteMultipartUpload may fail after its 200. */
	if (is_root(d, "Error")) {
		r->errlen = b->len < ERRBODY_MAX - 1 ? b->len : ERRBODY_MAX - 1;
		memcpy(r->errbody, b->data, r->errlen);
		r->errbody[r->errlen] = '\0';
		http_fail(s, r, "");
		xmlFreeDoc(d);
		return (NULL);
	}
	return (d);
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
	req_init(&r, "POST", what, h->key, "uploads=");
	if ((d = xml_answer(s, &r, &b)) != NULL) {
		if (xml_text(xmlDocGetRootElement(d), "UploadId", id,
		    sizeof(id)) || id[0] == '\0')
			storage_fail(EIO, "repository '%s': POST %s: no upload "
			    "id in the answer", s->base.where, what);
		else if ((h->upload = strdup(id)) == NULL)
			nomem();
		else
			rc = 0;
		xmlFreeDoc(d);
	}
	buf_release(&b);
	return (rc);
}

/* The query of upload id, with a part number (0: none). */
static char *
upload_query(const char *id, size_t part)
{
	struct buf q = BUF_INIT;

	if ((part > 0 && buf_printf(&q, "partNumber=%zu&", part)) ||
	    buf_puts(&q, "uploadId=") || buf_encoded(&q, id) ||
	    buf_put_u8(&q, 0)) {
		buf_release(&q);
		nomem();
		return (NULL);
	}
	return ((char *)q.data);
}

/* The part buffered in h, uploaded as the next part. */
static int
upload_part(struct s3 *s, struct s3_put *h)
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
			return (nomem());
		h->etag = nv;
	}
	if ((q = upload_query(h->upload, h->nparts + 1)) == NULL)
		return (-1);
	snprintf(what, sizeof(what), "'%s' (part %zu)", h->base.name,
	    h->nparts + 1);
	req_init(&r, "PUT", what, h->key, q);
	r.body = h->data.data;
	r.bodylen = h->data.len;
	r.md5 = 1;
	if ((rc = perform(s, &r)) == 0 &&
	    (rc = upload_ok(s, &r)) == 0)
		snprintf(h->etag[h->nparts++], sizeof(*h->etag), "%s", r.etag);
	free(q);
	buf_reset(&h->data);
	return (rc);
}

static int
s3_put_write(struct storage_put *p, const void *data, size_t len)
{
	struct s3_put *h = (struct s3_put *)p;
	struct s3 *s = s3_of(p->st);
	size_t k;

	while (len > 0) {
		/* A full part goes when more comes: the last is never empty. */
		if (h->data.len == PART_SIZE && upload_part(s, h))
			return (-1);
		k = PART_SIZE - h->data.len < len ? PART_SIZE - h->data.len :
		    len;
		if (buf_append(&h->data, data, k))
			return (nomem());
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

	if (upload_part(s, h))
		return (-1);
	if (buf_puts(&body, "<CompleteMultipartUpload>"))
		goto nomem;
	for (i = 0; i < h->nparts; i++)
		if (buf_printf(&body, "<Part><PartNumber>%zu</PartNumber>"
		    "<ETag>%s</ETag></Part>", i + 1, h->etag[i]))
			goto nomem;
	if (buf_puts(&body, "</CompleteMultipartUpload>") ||
	    (q = upload_query(h->upload, 0)) == NULL)
		goto nomem;
	snprintf(what, sizeof(what), "'%s'", h->base.name);
	req_init(&r, "POST", what, h->key, q);
	r.body = body.data;
	r.bodylen = body.len;
	if ((d = xml_answer(s, &r, &b)) != NULL) {
		xmlFreeDoc(d);
		rc = 0;
	} else if (r.tries > 1 && r.status == 404 &&
	    head(s, h->base.name, &size) == 0) {
		/* A retry of a completion that was done, its answer lost. */
		rc = 0;
	}
	goto out;
nomem:
	nomem();
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

	if (h->upload == NULL || (q = upload_query(h->upload, 0)) == NULL)
		return;
	snprintf(what, sizeof(what), "'%s' (upload)", h->base.name);
	req_init(&r, "DELETE", what, h->key, q);
	perform(s, &r);
	free(q);
	storage_fail(saved.code, "%s", saved.msg);
}

static void
s3_put_abort(struct storage_put *p)
{
	struct s3_put *h = (struct s3_put *)p;

	upload_abort(s3_of(p->st), h);
	buf_release(&h->data);
	free(h->upload);
	free(h->etag);
	free(h->key);
	free(h);
}

static int
s3_put_commit(struct storage_put *p)
{
	struct s3_put *h = (struct s3_put *)p;
	struct s3 *s = s3_of(p->st);
	char what[WHAT_MAX];
	struct req r;
	uint64_t size;
	int rc;

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
	req_init(&r, "PUT", what, h->key, "");
	r.body = h->data.data;
	r.bodylen = h->data.len;
	r.md5 = 1;
	if ((rc = perform(s, &r)) == 0)
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
	if ((rc = perform(s, &r)) == 0 && r.status / 100 != 2 &&
	    r.status != 404)
		rc = http_fail(s, &r, "");
	free(key);
	return (rc);
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
 * out, with a warning; the store's own (locks/) silently. */
static int
page_add(struct s3 *s, struct page *pg, xmlNode *c)
{
	char key[2 * STORAGE_NAME_MAX + 1024], size[32], *end;
	size_t plen = strlen(s->prefix);
	struct storage_entry *nv;
	const char *rel;
	uint64_t n;

	if (xml_text(c, "Key", key, sizeof(key)) ||
	    xml_text(c, "Size", size, sizeof(size)))
		return (storage_fail(EIO, "repository '%s': a listing entry "
		    "without a key or a size", s->base.where));
	if (strncmp(key, s->prefix, plen) != 0)
		return (0);
	rel = key + plen;
	if (!strncmp(rel, "locks/", 6) || !strncmp(rel, "tmp/", 4))
		return (0);
	errno = 0;
	n = strtoull(size, &end, 10);
	if (!storage_name_ok(rel) || *end != '\0' || errno != 0) {
		printable(key);
		log_warn("repository '%s': '%s' is not an object of the "
		    "repository: left out", s->base.where, key);
		return (0);
	}
	if (pg->n == pg->cap) {
		pg->cap = pg->cap ? 2 * pg->cap : 256;
		if ((nv = reallocarray(pg->v, pg->cap, sizeof(*nv))) == NULL)
			return (nomem());
		pg->v = nv;
	}
	if ((pg->v[pg->n].name = strdup(rel)) == NULL)
		return (nomem());
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
			rc = nomem();
			break;
		}
		req_init(&r, "GET", what, NULL, (const char *)q.data);
		if ((d = xml_answer(s, &r, &b)) == NULL) {
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

	return (xml_text(root, "IsTruncated", t, sizeof(t)) == 0 &&
	    strcmp(t, "true") == 0);
}

struct listing {
	struct s3 *s;
	const char *what;
	char pfx[STORAGE_NAME_MAX * 2 + 8];
	char token[1025];
	struct page pg;
	int (*fn)(void *, const char *, uint64_t);
	void *arg;
};

static int
listing_query(void *arg, struct buf *q)
{
	struct listing *l = arg;

	return ((l->token[0] && (buf_puts(q, "continuation-token=") ||
	    buf_encoded(q, l->token) || buf_puts(q, "&"))) ||
	    buf_puts(q, "list-type=2") || (l->pfx[0] &&
	    (buf_puts(q, "&prefix=") || buf_encoded(q, l->pfx))));
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
			rc = page_add(l->s, &l->pg, c);
	l->token[0] = '\0';
	if (rc == 0 && truncated(root) && (xml_text(root,
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

static int
s3_list(struct storage *st, const char *dir,
    int (*fn)(void *, const char *, uint64_t), void *arg)
{
	struct s3 *s = s3_of(st);
	struct listing *l;
	char what[WHAT_MAX];
	int rc;

	if ((l = calloc(1, sizeof(*l))) == NULL)
		return (nomem());
	snprintf(what, sizeof(what), "'%s%s' (listing)", dir, dir[0] ? "/" :
	    "");
	snprintf(l->pfx, sizeof(l->pfx), "%s%s%s", s->prefix, dir,
	    dir[0] ? "/" : "");
	l->s = s;
	l->what = what;
	l->fn = fn;
	l->arg = arg;
	rc = pages(s, what, listing_query, listing_page, l);
	page_clear(&l->pg);
	free(l->pg.v);
	free(l);
	return (rc);
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

	if (xml_text(u, "Key", key, sizeof(key)) ||
	    xml_text(u, "UploadId", id, sizeof(id)) ||
	    xml_text(u, "Initiated", when, sizeof(when)))
		return (0);
	if ((t = iso_time(when)) == 0 || t > cutoff ||
	    strncmp(key, s->prefix, strlen(s->prefix)) != 0)
		return (0);
	printable(key);
	snprintf(what, sizeof(what), "'%s' (upload of %s)",
	    key + strlen(s->prefix), when);
	if ((q = upload_query(id, 0)) == NULL)
		return (-1);
	req_init(&r, "DELETE", what, key, q);
	if ((rc = perform(s, &r)) == 0 && r.status / 100 != 2 &&
	    r.status != 404)
		rc = http_fail(s, &r, "");
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
	    buf_encoded(q, c->kmark) || buf_puts(q, "&"))) ||
	    (c->s->prefix[0] && (buf_puts(q, "prefix=") ||
	    buf_encoded(q, c->s->prefix) || buf_puts(q, "&"))) ||
	    (c->umark[0] && (buf_puts(q, "upload-id-marker=") ||
	    buf_encoded(q, c->umark) || buf_puts(q, "&"))) ||
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
	    xml_text(root, "NextKeyMarker", c->kmark, sizeof(c->kmark)) ||
	    xml_text(root, "NextUploadIdMarker", c->umark, sizeof(c->umark)) ||
	    c->kmark[0] == '\0')
		return (rc);
	return (1);
}

/* Uploads under the prefix begun CLEAN_AGE ago or more are a crash's:
 * aborted, their parts freed.  A younger one may be another writer's. */
static int
s3_clean(struct storage *st)
{
	struct cleaning *c;
	int rc;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return (nomem());
	c->s = s3_of(st);
	c->cutoff = time(NULL) - CLEAN_AGE;
	rc = pages(c->s, "uploads (listing)", cleaning_query, cleaning_page,
	    c);
	free(c);
	return (rc);
}

/* --- Leases ------------------------------------------------------- */

struct lease {
	char token[33];
	long long expires;
	char info[512];
};

/* The lease at key: 0 (in *l), STORAGE_MISSING or -1.  One that is not
 * a lease is an expired one, to be replaced. */
static int
lease_read(struct s3 *s, const char *key, const char *what, struct lease *l)
{
	struct buf b = BUF_INIT;
	struct req r;
	int rc, off = 0;

	req_init(&r, "GET", what, key, "");
	r.dyn = &b;
	r.max = LEASE_MAX;
	memset(l, 0, sizeof(*l));
	if ((rc = perform(s, &r)) == 0) {
		if (r.status == 404)
			rc = STORAGE_MISSING;
		else if (r.status / 100 != 2)
			rc = http_fail(s, &r, "");
		else if (buf_put_u8(&b, 0))
			rc = nomem();
		else if (sscanf((char *)b.data, "coffer-lease 1 %32s %lld %n",
		    l->token, &l->expires, &off) < 2 || off == 0)
			l->expires = 0;
		else {
			snprintf(l->info, sizeof(l->info), "%s",
			    (char *)b.data + off);
			l->info[strcspn(l->info, "\n")] = '\0';
		}
	}
	buf_release(&b);
	return (rc);
}

static int
lease_write(struct s3 *s, const char *key, const char *what,
    const struct lease *l)
{
	char line[sizeof(*l) + 64];
	struct req r;
	int n, rc;

	n = snprintf(line, sizeof(line), "coffer-lease 1 %s %lld %s\n",
	    l->token, l->expires, l->info);
	if (n < 0 || (size_t)n >= sizeof(line))
		n = (int)strlen(line);
	req_init(&r, "PUT", what, key, "");
	r.body = line;
	r.bodylen = (size_t)n;
	r.md5 = 1;
	if ((rc = perform(s, &r)) == 0)
		rc = upload_ok(s, &r);
	return (rc);
}

/*
 * A lease: the object locks/NAME, "coffer-lease 1 TOKEN EXPIRES INFO".
 * Free when missing or expired: ours is written, then read back, and
 * held if it is still ours.  Best effort (doc/design.md): two writers
 * that write within one read's time may both believe they hold it.
 */
static int
s3_lock(struct storage *st, const char *name,
    const struct storage_lock_opts *o, struct storage_lock **l,
    char *holder, size_t holdersz)
{
	struct s3 *s = s3_of(st);
	char what[WHAT_MAX];
	double end = now_mono() + o->wait, ttl = o->ttl > 0 ? o->ttl :
	    LEASE_TTL;
	struct lease mine, seen;
	struct s3_lock *h;
	uint8_t rnd[16];
	int rc;

	if ((h = calloc(1, sizeof(*h))) == NULL ||
	    asprintf(&h->key, "%slocks/%s", s->prefix, name) < 0) {
		free(h);
		return (nomem());
	}
	snprintf(what, sizeof(what), "'locks/%s'", name);
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		rc = storage_fail(EIO, "cannot get random bytes");
		goto out;
	}
	memset(&mine, 0, sizeof(mine));
	hex_encode(mine.token, rnd, sizeof(rnd));
	snprintf(mine.info, sizeof(mine.info), "%s", o->info ? o->info : "");
	mine.info[strcspn(mine.info, "\n")] = '\0';
	for (;;) {
		if ((rc = lease_read(s, h->key, what, &seen)) < 0)
			goto out;
		if (rc == 0 && seen.expires > (long long)time(NULL) &&
		    strcmp(seen.token, mine.token) == 0) {
			memcpy(h->token, mine.token, sizeof(h->token));
			*l = &h->base;
			return (0);
		}
		if (rc == 0 && seen.expires > (long long)time(NULL)) {
			if (o->wait >= 0 && now_mono() >= end) {
				if (holdersz > 0)
					snprintf(holder, holdersz, "%s",
					    seen.info);
				rc = 1;
				goto out;
			}
			sleep_for(o->wait < 0 || end - now_mono() > 0.25 ?
			    0.25 : end - now_mono());
			continue;
		}
		/* Free: ours written, then read again (above). */
		mine.expires = (long long)time(NULL) + (long long)ttl;
		if (lease_write(s, h->key, what, &mine)) {
			rc = -1;
			goto out;
		}
	}
out:
	free(h->key);
	free(h);
	return (rc);
}

/* Best effort: the lease removed if it is still ours (else it expires). */
static void
s3_unlock(struct storage_lock *l)
{
	struct s3_lock *h = (struct s3_lock *)l;
	struct s3 *s = s3_of(l->st);
	struct lease seen;
	struct req r;

	if (lease_read(s, h->key, "lease", &seen) == 0 &&
	    strcmp(seen.token, h->token) == 0) {
		req_init(&r, "DELETE", "lease", h->key, "");
		perform(s, &r);
	}
	free(h->key);
	free(h);
}

/* --- The store ---------------------------------------------------- */

static void
s3_close(struct storage *st)
{
	struct s3 *s = s3_of(st);
	size_t i;

	while (s->npool > 0)
		conn_free(s->pool[--s->npool]);
	free(s->pool);
	if (s->share != NULL)
		curl_share_cleanup(s->share);
	for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&s->share_mu[i]);
	pthread_mutex_destroy(&s->mu);
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
	.put_commit = s3_put_commit,
	.put_abort = s3_put_abort,
	.del = s3_del,
	.list = s3_list,
	.clean = s3_clean,
	.lock = s3_lock,
	.unlock = s3_unlock,
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
			return (nomem());
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
		rc = nomem();
	else if (p.akid == NULL || p.secret == NULL)
		rc = storage_fail(EACCES, "repository '%s': no credentials of "
		    "profile '%s' in '%s'", s->base.where, p.name, file);
	else if (p.token != NULL && asprintf(&s->token_hdr,
	    "x-amz-security-token: %s", p.token) < 0)
		rc = nomem();
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
		return (nomem());
	path += n;
	while (*path == '/')
		path++;
	if ((pfx = strdup(path)) == NULL)
		return (nomem());
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
		return (nomem());
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
		return (nomem());
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
		return (nomem());
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
			return (nomem());
		}
		if (asprintf(&s->endpoint, "https://%s", s->host) < 0) {
			s->endpoint = NULL;
			return (nomem());
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
	    (buf_puts(&q, "&prefix=") || buf_encoded(&q, s->prefix))) ||
	    buf_put_u8(&q, 0)) {
		nomem();
		goto out;
	}
	req_init(&r, "GET", what, NULL, (const char *)q.data);
	r.dyn = &b;
	r.max = XML_MAX;
	if (perform(s, &r))
		goto out;
	if (r.status == 404 && (flags & STORAGE_CREATE)) {
		/* us-east-1 takes no location; others must be named. */
		if (strcmp(s->region, "us-east-1") != 0 &&
		    buf_printf(&body, "<CreateBucketConfiguration><Location"
		    "Constraint>%s</LocationConstraint>"
		    "</CreateBucketConfiguration>", s->region)) {
			nomem();
			goto out;
		}
		req_init(&r, "PUT", what, NULL, "");
		r.body = body.data;
		r.bodylen = body.len;
		if (perform(s, &r) == 0) {
			if (r.status / 100 == 2)
				rc = 0;
			else
				http_fail(s, &r, "");
		}
		goto out;
	}
	if (r.status / 100 != 2) {
		http_fail(s, &r, "");
		goto out;
	}
	if ((d = xml_parse((const char *)b.data, b.len)) == NULL) {
		storage_fail(EIO, "repository '%s': GET %s: the answer is not "
		    "XML", s->base.where, what);
		goto out;
	}
	if ((flags & STORAGE_CREATE) && (xml_child(xmlDocGetRootElement(d),
	    "Contents") != NULL || (xml_text(xmlDocGetRootElement(d),
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

	pthread_once(&once, global_init);
	if (!global_ok) {
		log_error("cannot start libcurl");
		return (NULL);
	}
	if (strncmp(location, "s3:", 3) != 0) {
		log_error("'%s' is not an s3: location", location);
		return (NULL);
	}
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	pthread_mutex_init(&s->mu, NULL);
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
		nomem();
		goto err;
	}
	if (parse_location(s, location) || credentials(s))
		goto err;
	if (ca != NULL && (s->cacert = strdup(ca)) == NULL) {
		nomem();
		goto err;
	}
	if (s->token_hdr != NULL && strlen(s->token_hdr) > TOKEN_MAX) {
		storage_fail(EINVAL, "AWS_SESSION_TOKEN is too long");
		goto err;
	}
	if ((s->share = curl_share_init()) == NULL) {
		nomem();
		goto err;
	}
	curl_share_setopt(s->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(s->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(s->share, CURLSHOPT_USERDATA, s);
	curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
	curl_share_setopt(s->share, CURLSHOPT_SHARE,
	    CURL_LOCK_DATA_SSL_SESSION);
	if (probe(s, flags))
		goto err;
	return (&s->base);
err:
	log_error("%s", storage_last_error()->msg);
	free(s->base.where);
	s3_close(&s->base);
	return (NULL);
}
