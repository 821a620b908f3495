/*
 * The S3 store's requests: a pool of connections (curl easy handles and
 * the scratch space of a request), each request built and signed with
 * AWS Signature V4 there, so that connections are kept alive and reused
 * by every thread, and a ranged read allocates nothing: its headers are
 * built in the connection's buffers and the body lands in the caller's.
 * Timeouts, dropped connections, 5xx and 429 are retried with
 * exponential backoff and jitter, within a bound of tries and of time
 * (COFFER_S3_RETRY_SECONDS); any other answer is final, and a failure
 * is one line naming the request.
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
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

int
s3_nomem(void)
{
	return (storage_fail(ENOMEM, "out of memory"));
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
int
s3_buf_encoded(struct buf *b, const char *s)
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

void
s3_share_lock(CURL *c, curl_lock_data d, curl_lock_access a, void *arg)
{
	struct s3 *s = arg;

	(void)c, (void)a;
	pthread_mutex_lock(&s->share_mu[d]);
}

void
s3_share_unlock(CURL *c, curl_lock_data d, void *arg)
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
		s3_nomem();
		return (NULL);
	}
	return (cn);
}

void
s3_conn_free(struct conn *cn)
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
			s3_conn_free(cn);
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
void
s3_printable(char *s)
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
	xmlDoc *d = s3_xml_parse(r->errbody, r->errlen);
	xmlNode *root = d != NULL ? xmlDocGetRootElement(d) : NULL;

	code[0] = msg[0] = '\0';
	if (root != NULL && strcmp((const char *)root->name, "Error") == 0) {
		s3_xml_text(root, "Code", code, cap);
		s3_xml_text(root, "Message", msg, msgcap);
	}
	xmlFreeDoc(d);
	s3_printable(code);
	s3_printable(msg);
}

/* The request failed with status: one line, errno from it. */
int
s3_http_fail(struct s3 *s, const struct req *r, const char *after)
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
int
s3_perform(struct s3 *s, struct req *r)
{
	char sha[65], after[64];
	uint8_t h[32];
	double start = now_monotonic(), delay = BACKOFF_FIRST, wait;
	struct conn *cn;
	CURLcode cc = CURLE_OK;
	int rc = -1;

	/*
	 * Hashed once, whatever the tries.  Over TLS, an upload checked by
	 * its Content-MD5 (the server refuses a body that differs, and its
	 * ETag is compared) is sent unsigned: TLS already protects it, and
	 * SHA-256 of every pack would cost a backup a core for seconds.
	 */
	if (r->bodylen > 0 && r->md5 &&
	    strncmp(s->endpoint, "https://", 8) == 0)
		memcpy(sha, "UNSIGNED-PAYLOAD", sizeof("UNSIGNED-PAYLOAD"));
	else if (r->bodylen > 0) {
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
			rc = s3_nomem();
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
		wait = delay / 2 + store_jitter() * delay / 2;
		if (r->tries >= TRIES ||
		    now_monotonic() - start + wait > s->retry_seconds)
			break;
		log_info("repository '%s': %s %s: %s, try %d of %d in %.1f s",
		    s->base.where, r->method, r->what, cc == CURLE_OK ?
		    reason(r->status) : curl_easy_strerror(cc), r->tries + 1,
		    TRIES, wait);
		store_sleep_for(wait);
		delay = delay * 2 < BACKOFF_MAX ? delay * 2 : BACKOFF_MAX;
	}
	snprintf(after, sizeof(after), r->tries > 1 ? " (%d tries in %.0f s)" :
	    "", r->tries, now_monotonic() - start);
	if (cc == CURLE_OK)
		rc = s3_http_fail(s, r, after);
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

/* r cleared for a request: its method, what messages call it, its key
 * (NULL: the bucket) and canonical query. */
void
s3_req_init(struct req *r, const char *method, const char *what,
    const char *key, const char *query)
{
	memset(r, 0, sizeof(*r));
	r->method = method;
	r->what = what;
	r->key = key;
	r->query = query;
}
