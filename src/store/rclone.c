/*
 * The rclone store: "rclone:REMOTE:PATH", every backend rclone reaches,
 * through rclone's own binary (doc/design.md, "The rclone store").  At
 * open, coffer starts `rclone rcd` on a loopback port of its own choosing
 * (port 0: the kernel's), with a random user and password passed in its
 * environment, and speaks rclone's remote-control API to it over HTTP
 * (libcurl, connections kept alive and shared by threads):
 *
 *   stat    operations/stat          a put     copy, then move (below)
 *   list    operations/list, recurse delete    operations/deletefile
 *   read    GET /[REMOTE:PATH]/NAME with a Range (--rc-serve)
 *
 * A put is spooled to a private local directory, copied by rclone under
 * tmp/ on the remote (operations/copyfile) and then moved to its name
 * (operations/movefile): the local backend renames, object storage copies
 * server-side, so the object appears whole or not at all.  rclone runs
 * with --no-check-dest, or its move would delete an existing object
 * before putting the new one in its place (and skip one it finds equal by
 * size and time).  Locks are leases (lease.c).  rclone is stopped at
 * close, and dies with coffer (PR_SET_PDEATHSIG).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>

#include "coffer/buf.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/storage.h"

#include "lease.h"
#include "store-int.h"

/* The read cache (blocks.c): each ranged read is a request to rclone,
 * and through it one to the backend. */
#define RCL_READ_AHEAD (4u << 20)
#define RCL_READ_BLOCKS 8

#define PREFIX "rclone:"
#define START_SECONDS 30.0	/* for rclone to listen */
#define STOP_MS 2000		/* for rclone to end after SIGTERM */
#define TRIES 8
#define RETRY_SECONDS 120.0
#define BACKOFF_FIRST 0.2
#define BACKOFF_MAX 20.0
#define ANSWER_MAX (256u << 20)	/* a listing of a million objects */
#define CLEAN_AGE (30 * 60)	/* a tmp/ object older is a crash's */
#define WHAT_MAX (STORAGE_NAME_MAX + 32)
#define SPOOL_MAX 256		/* the spool directory's path, NUL included */

extern char **environ;

struct rcl {
	struct storage base;
	char *fs;		/* "REMOTE:PATH" */
	char url[64];		/* "http://127.0.0.1:PORT/" */
	char user[33], pass[33];
	pid_t pid;
	int status;		/* rclone's, once it ended */
	int errfd;		/* rclone's standard error (a memfd) */
	char spool[SPOOL_MAX];	/* private directory for puts */
	double retry_seconds;
	CURLSH *share;
	pthread_mutex_t share_mu[CURL_LOCK_DATA_LAST];
	pthread_mutex_t mu;	/* the pool, seq */
	CURL **pool;
	size_t npool, cappool;
	unsigned long seq;	/* spool files */
};

struct rcl_obj {
	struct storage_obj base;
	uint64_t size;
};

struct rcl_put {
	struct storage_put base;
	int fd;
	char path[SPOOL_MAX + 32];	/* the spool file */
};

/* A body coming back: into fixed (cap bytes) or into dyn. */
struct answer {
	unsigned char *fixed;
	size_t cap, got;
	struct buf dyn;
	size_t max;		/* of dyn */
	int too_big;
	int tries;		/* perform's */
	double seconds;
};

static inline struct rcl *
rcl_of(struct storage *st)
{
	return ((struct rcl *)st);
}

static int
nomem(void)
{
	return (storage_fail(ENOMEM, "out of memory"));
}

/* --- rclone, the process ------------------------------------------ */

void
storage_rclone_last_line(int errfd, char *out, size_t size)
{
	char tail[4096], *end, *line, *p;
	off_t len;
	ssize_t got;
	size_t n;

	out[0] = '\0';
	if (errfd == -1 || (len = lseek(errfd, 0, SEEK_END)) <= 0)
		return;
	if ((got = pread(errfd, tail, sizeof(tail) - 1, len > (off_t)
	    sizeof(tail) - 1 ? len - (off_t)(sizeof(tail) - 1) : 0)) <= 0)
		return;
	tail[got] = '\0';
	for (end = tail + got; end > tail && (end[-1] == '\n' ||
	    end[-1] == '\r' || end[-1] == ' '); end--)
		end[-1] = '\0';
	line = (p = strrchr(tail, '\n')) != NULL ? p + 1 : tail;
	if (strlen(line) > 20 && line[4] == '/' && line[7] == '/' &&
	    line[13] == ':' && line[19] == ' ')
		line += 20;
	if ((p = strstr(line, " : ")) != NULL && p - line <= 10)
		line = p + 3;
	n = strlen(line);
	if (n >= size)
		n = size - 1;
	memcpy(out, line, n);
	out[n] = '\0';
	for (p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

/* The environment with rclone's rc credentials added: malloc'd. */
static char **
child_env(struct rcl *s)
{
	size_t n = 0, i, j = 0;
	char **e;

	while (environ[n] != NULL)
		n++;
	if ((e = calloc(n + 3, sizeof(*e))) == NULL)
		return (NULL);
	for (i = 0; i < n; i++)
		if (strncmp(environ[i], "RCLONE_RC_", 10) != 0)
			e[j++] = environ[i];
	if (asprintf(&e[j], "RCLONE_RC_USER=%s", s->user) < 0) {
		free(e);
		return (NULL);
	}
	if (asprintf(&e[j + 1], "RCLONE_RC_PASS=%s", s->pass) < 0) {
		free(e[j]);
		free(e);
		return (NULL);
	}
	return (e);
}

static void
env_free(char **e)
{
	size_t i;

	for (i = 0; e[i] != NULL; i++)
		if (strncmp(e[i], "RCLONE_RC_", 10) == 0) {
			explicit_bzero(e[i], strlen(e[i]));
			free(e[i]);
		}
	free(e);
}

/*
 * Start rclone rcd: its standard input /dev/null (a config password is
 * never waited for), its output and error the memfd.  In its own process
 * group, so that a terminal's ^C reaches coffer alone, which stops
 * cleanly through the store before closing it; killed when coffer ends
 * (PR_SET_PDEATHSIG: the thread that opened the store, the main one).
 */
static int
spawn(struct rcl *s)
{
	static const char *const argv[] = {
		"rclone", "rcd", "--rc-addr", "127.0.0.1:0", "--rc-serve",
		"--no-check-dest", "--contimeout", "15s", "--timeout", "60s",
		"--low-level-retries", "3",
		"--log-level", "NOTICE", NULL
	};
	pid_t parent = getpid();
	sigset_t none;
	char **envp;
	int devnull;

	if ((s->errfd = memfd_create("rclone-stderr", MFD_CLOEXEC)) == -1 ||
	    (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) == -1)
		return (storage_fail(errno, "repository '%s': cannot run "
		    "rclone: %s", s->base.where, strerror(errno)));
	if ((envp = child_env(s)) == NULL) {
		close(devnull);
		return (nomem());
	}
	if ((s->pid = fork()) == 0) {
		sigemptyset(&none);
		(void)sigprocmask(SIG_SETMASK, &none, NULL);
		(void)signal(SIGPIPE, SIG_DFL);
		(void)setpgid(0, 0);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 ||
		    getppid() != parent)
			_exit(127);
		if (dup2(devnull, 0) == -1 || dup2(s->errfd, 1) == -1 ||
		    dup2(s->errfd, 2) == -1)
			_exit(127);
		execvpe("rclone", (char *const *)argv, envp);
		(void)!write(2, "cannot run rclone: not found\n", 29);
		_exit(127);
	}
	close(devnull);
	env_free(envp);
	if (s->pid == -1)
		return (storage_fail(errno, "repository '%s': cannot run "
		    "rclone: %s", s->base.where, strerror(errno)));
	return (0);
}

/* rclone's address, from its notice "Serving remote control on URL":
 * 0, or -1 when it ended or said nothing in START_SECONDS. */
static int
await_listen(struct rcl *s)
{
	static const char mark[] = "Serving remote control on http://";
	double end = now_monotonic() + START_SECONDS;
	char text[8192], why[512], *p;
	ssize_t got;
	int status;

	for (;;) {
		got = pread(s->errfd, text, sizeof(text) - 1, 0);
		text[got > 0 ? got : 0] = '\0';
		if ((p = strstr(text, mark)) != NULL &&
		    strchr(p, '\n') != NULL) {
			p += sizeof(mark) - 1;
			p[strcspn(p, "/\n")] = '\0';
			if (strncmp(p, "127.0.0.1:", 10) != 0 ||
			    strlen(p) > 32)
				break;
			snprintf(s->url, sizeof(s->url), "http://%s/", p);
			return (0);
		}
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			s->pid = -1;
			storage_rclone_last_line(s->errfd, why, sizeof(why));
			return (storage_fail(EIO, "repository '%s': rclone "
			    "did not start: %s", s->base.where, why[0] ? why :
			    "it ended"));
		}
		if (now_monotonic() > end)
			break;
		store_sleep_for(0.01);
	}
	return (storage_fail(ETIMEDOUT, "repository '%s': rclone did not "
	    "start listening", s->base.where));
}

/* rclone asked to end, then made to; reaped. */
static void
stop(struct rcl *s)
{
	int ms, status;

	if (s->pid <= 0)
		return;
	kill(s->pid, SIGTERM);
	for (ms = 0; ms < STOP_MS; ms += 10) {
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			s->pid = -1;
			return;
		}
		store_sleep_for(0.01);
	}
	kill(s->pid, SIGKILL);
	while (waitpid(s->pid, &status, 0) == -1 && errno == EINTR)
		;
	s->pid = -1;
}

/* 1 if rclone is gone (reaped: s->pid 0, its status kept). */
static int
gone(struct rcl *s)
{
	if (s->pid > 0 && waitpid(s->pid, &s->status, WNOHANG) == s->pid)
		s->pid = 0;
	return (s->pid <= 0);
}

/* How rclone ended, for a message: its signal, or its status and the
 * last line it wrote. */
static void
how_ended(struct rcl *s, char *out, size_t size)
{
	char why[512];

	if (WIFSIGNALED(s->status)) {
		snprintf(out, size, "rclone was killed (signal %d)",
		    WTERMSIG(s->status));
		return;
	}
	storage_rclone_last_line(s->errfd, why, sizeof(why));
	snprintf(out, size, "rclone ended (exit status %d)%s%.*s",
	    WEXITSTATUS(s->status), why[0] ? ": " : "", 300, why);
}

/* --- Requests ----------------------------------------------------- */

static void
share_lock(CURL *c, curl_lock_data d, curl_lock_access a, void *arg)
{
	pthread_mutex_lock(&((struct rcl *)arg)->share_mu[d]);
}

static void
share_unlock(CURL *c, curl_lock_data d, void *arg)
{
	pthread_mutex_unlock(&((struct rcl *)arg)->share_mu[d]);
}

static CURL *
conn_get(struct rcl *s)
{
	CURL *c = NULL;

	pthread_mutex_lock(&s->mu);
	if (s->npool > 0)
		c = s->pool[--s->npool];
	pthread_mutex_unlock(&s->mu);
	if (c == NULL && (c = curl_easy_init()) != NULL)
		curl_easy_setopt(c, CURLOPT_SHARE, s->share);
	if (c == NULL)
		nomem();
	return (c);
}

static void
conn_put(struct rcl *s, CURL *c)
{
	CURL **v;

	pthread_mutex_lock(&s->mu);
	if (s->npool == s->cappool) {
		v = reallocarray(s->pool, s->cappool ? 2 * s->cappool : 8,
		    sizeof(*v));
		if (v == NULL) {
			pthread_mutex_unlock(&s->mu);
			curl_easy_cleanup(c);
			return;
		}
		s->pool = v;
		s->cappool = s->cappool ? 2 * s->cappool : 8;
	}
	s->pool[s->npool++] = c;
	pthread_mutex_unlock(&s->mu);
}

static size_t
on_body(char *p, size_t size, size_t n, void *arg)
{
	struct answer *a = arg;

	n *= size;
	if (a->fixed != NULL) {
		if (n > a->cap - a->got)
			n = a->cap - a->got;
		memcpy(a->fixed + a->got, p, n);
		a->got += n;
		return (n);
	}
	if (a->dyn.len + n > a->max) {
		a->too_big = 1;
		return (0);
	}
	if (buf_append(&a->dyn, p, n))
		return (0);
	return (n);
}

/* Words of a failure that rclone gave up on after its own retries, and
 * that a later try may not meet: the network's, a server's 5xx. */
static int
transient_text(const char *e)
{
	static const char *const words[] = {
		"timeout", "timed out", "connection reset", "connection refused",
		"broken pipe", "unexpected EOF", "SlowDown", "429", "500 ",
		"502", "503", "504", "InternalError", "ServiceUnavailable",
		"temporar", "try again",
	};
	size_t i;

	for (i = 0; i < sizeof(words) / sizeof(*words); i++)
		if (strcasestr(e, words[i]) != NULL)
			return (1);
	return (0);
}

static int
transient_curl(CURLcode cc)
{
	return (cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_RECV_ERROR ||
	    cc == CURLE_SEND_ERROR || cc == CURLE_GOT_NOTHING ||
	    cc == CURLE_PARTIAL_FILE);
}

/* The "error" of rclone's JSON answer body (NUL-terminated), or "". */
static void
answer_error(const struct answer *a, char *out, size_t size)
{
	json_t *j, *e;
	char *p, *q;

	out[0] = '\0';
	if (a->dyn.len == 0 || (j = json_loadb((const char *)a->dyn.data,
	    a->dyn.len, 0, NULL)) == NULL)
		return;
	if ((e = json_object_get(j, "error")) != NULL && json_is_string(e))
		snprintf(out, size, "%s", json_string_value(e));
	json_decref(j);
	/* rclone's messages run on over lines ("\n\tstatus code: 503"):
	 * one line, each run of control bytes a space. */
	for (p = q = out; *p; p++) {
		if ((unsigned char)*p >= 0x20 && *p != 0x7f)
			*q++ = *p;
		else if (q > out && q[-1] != ' ')
			*q++ = ' ';
	}
	*q = '\0';
}

/*
 * One request to rclone: POST of body (JSON) to url, or GET of url with
 * a Range when len > 0.  Retried while the failure is transient, within
 * TRIES and the store's time bound.  0 with *status (which the caller
 * judges) or -1 (recorded; when rclone has ended, with its last words).
 */
static int
perform(struct rcl *s, const char *what, const char *url, const char *body,
    uint64_t off, size_t len, struct answer *a, long *status)
{
	double start = now_monotonic(), delay = BACKOFF_FIRST, wait;
	char range[64], err[CURL_ERROR_SIZE], why[512];
	struct curl_slist *hdr = NULL, h1, h2;
	CURLcode cc = CURLE_OK;
	int tries = 0, rc = -1;
	CURL *c;

	if ((c = conn_get(s)) == NULL)
		return (-1);
	h1.data = (char *)"Content-Type: application/json";
	h1.next = NULL;
	h2.data = range;
	h2.next = NULL;
	if (body != NULL)
		hdr = &h1;
	else if (len > 0) {
		snprintf(range, sizeof(range), "Range: bytes=%llu-%llu",
		    (unsigned long long)off, (unsigned long long)(off + len -
		    1));
		hdr = &h2;
	}
	for (tries = 1;; tries++) {
		curl_easy_reset(c);
		curl_easy_setopt(c, CURLOPT_SHARE, s->share);
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_USERNAME, s->user);
		curl_easy_setopt(c, CURLOPT_PASSWORD, s->pass);
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
		curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
		if (body != NULL)
			curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		err[0] = '\0';
		a->got = 0;
		a->dyn.len = 0;
		a->too_big = 0;
		cc = curl_easy_perform(c);
		/* An error's body may be longer than the object wanted. */
		if (a->too_big) {
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
			if (*status / 100 != 2) {
				a->dyn.len = 0;
				rc = 0;
				goto out;
			}
			rc = storage_fail(EFBIG, "repository '%s': %s is too "
			    "large (more than %zu bytes)", s->base.where, what,
			    a->max);
			goto out;
		}
		if (cc == CURLE_OK) {
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
			if (*status < 500) {
				rc = 0;
				goto out;
			}
			if (buf_put_u8(&a->dyn, 0)) {
				rc = nomem();
				goto out;
			}
			a->dyn.len--;
			answer_error(a, why, sizeof(why));
			if (!transient_text(why)) {
				rc = 0;
				goto out;
			}
		} else if (gone(s) || !transient_curl(cc))
			break;
		wait = delay / 2 + store_jitter() * delay / 2;
		if (tries >= TRIES ||
		    now_monotonic() - start + wait > s->retry_seconds)
			break;
		log_info("repository '%s': %s: %s, try %d of %d in %.1f s",
		    s->base.where, what, cc == CURLE_OK ? why :
		    curl_easy_strerror(cc), tries + 1, TRIES, wait);
		store_sleep_for(wait);
		delay = delay * 2 < BACKOFF_MAX ? delay * 2 : BACKOFF_MAX;
	}
	if (cc == CURLE_OK) {
		rc = 0;		/* the last answer, for the caller */
		goto out;
	}
	if (gone(s)) {
		how_ended(s, why, sizeof(why));
		rc = storage_fail(EIO, "repository '%s': %s: %s",
		    s->base.where, what, why);
	} else
		rc = storage_fail(cc == CURLE_OPERATION_TIMEDOUT ? ETIMEDOUT :
		    EIO, "repository '%s': %s: %s (%d tries in %.0f s)",
		    s->base.where, what, err[0] ? err : curl_easy_strerror(cc),
		    tries, now_monotonic() - start);
out:
	a->tries = tries;
	a->seconds = now_monotonic() - start;
	conn_put(s, c);
	return (rc);
}

/* An errno for an answer's status. */
static int
status_errno(long status)
{
	switch (status) {
	case 400:
		return (EINVAL);
	case 401:
	case 403:
		return (EACCES);
	case 404:
		return (ENOENT);
	default:
		return (EIO);
	}
}

/*
 * Call rclone's operation op with the JSON object in (its reference
 * taken): 0 with its answer into *out (when out is not NULL),
 * STORAGE_MISSING for a 404 (when missing_ok), or -1 (recorded, in one
 * line with rclone's error).
 */
static int
call(struct rcl *s, const char *op, const char *what, json_t *in,
    int missing_ok, json_t **out)
{
	struct answer a = { NULL, 0, 0, BUF_INIT, ANSWER_MAX, 0, 0, 0 };
	char url[128], why[1024], after[64], *body;
	long status = 0;
	json_t *j = NULL;
	int rc;

	if (out != NULL)
		*out = NULL;
	snprintf(url, sizeof(url), "%s%s", s->url, op);
	body = in != NULL ? json_dumps(in, JSON_COMPACT) : NULL;
	json_decref(in);
	if (body == NULL)
		return (nomem());
	rc = perform(s, what, url, body, 0, 0, &a, &status);
	free(body);
	if (rc != 0)
		goto out;
	if (status == 404 && missing_ok) {
		rc = STORAGE_MISSING;
		goto out;
	}
	if (status != 200) {
		answer_error(&a, why, sizeof(why));
		snprintf(after, sizeof(after), a.tries > 1 ? " (%d tries in "
		    "%.0f s)" : "", a.tries, a.seconds);
		rc = storage_fail(status_errno(status), "repository '%s': %s: "
		    "%s%s", s->base.where, what, why[0] ? why : "failed", after);
		goto out;
	}
	if ((j = json_loadb((const char *)a.dyn.data, a.dyn.len, 0,
	    NULL)) == NULL || !json_is_object(j)) {
		rc = storage_fail(EIO, "repository '%s': %s: rclone's answer "
		    "is no JSON object", s->base.where, what);
		goto out;
	}
	if (out != NULL) {
		*out = j;
		j = NULL;
	}
out:
	json_decref(j);
	buf_release(&a.dyn);
	return (rc);
}

/* {"fs": ..., "remote": key} */
static json_t *
at_key(struct rcl *s, const char *key)
{
	return (json_pack("{s:s, s:s}", "fs", s->fs, "remote", key));
}

/* --- Objects ------------------------------------------------------ */

/* The size of key: 0, STORAGE_MISSING or -1. */
static int
stat_key(struct rcl *s, const char *key, const char *what, uint64_t *size)
{
	json_t *out, *item, *sz;
	int rc;

	if ((rc = call(s, "operations/stat", what, at_key(s, key), 1,
	    &out)) != 0)
		return (rc);
	item = json_object_get(out, "item");
	if (item == NULL || json_is_null(item))
		rc = STORAGE_MISSING;
	else if (json_is_true(json_object_get(item, "IsDir")))
		rc = storage_fail(EISDIR, "repository '%s': %s is a "
		    "directory, not an object", s->base.where, what);
	else if ((sz = json_object_get(item, "Size")) == NULL ||
	    !json_is_integer(sz) || json_integer_value(sz) < 0)
		rc = storage_fail(EIO, "repository '%s': stat %s: no size",
		    s->base.where, what);
	else
		*size = (uint64_t)json_integer_value(sz);
	json_decref(out);
	return (rc);
}

static int
rcl_stat(struct storage *st, const char *name, uint64_t *size)
{
	char what[WHAT_MAX];

	snprintf(what, sizeof(what), "stat '%s'", name);
	return (stat_key(rcl_of(st), name, what, size));
}

/* The URL of key under --rc-serve: "/[REMOTE:PATH]/key", encoded. */
static char *
object_url(struct rcl *s, const char *key)
{
	char *fs, *k, *url = NULL;
	CURL *c;

	if ((c = curl_easy_init()) == NULL)
		return (NULL);
	fs = curl_easy_escape(c, s->fs, 0);
	k = curl_easy_escape(c, key, 0);
	if (fs != NULL && k != NULL &&
	    asprintf(&url, "%s%%5B%s%%5D/%s", s->url, fs, k) < 0)
		url = NULL;
	curl_free(fs);
	curl_free(k);
	curl_easy_cleanup(c);
	return (url);
}

/* len bytes of key at off into buf (*got: what came): 0 or -1. */
static int
read_key(struct rcl *s, const char *key, const char *what, uint64_t off,
    void *buf, size_t len, size_t *got)
{
	struct answer a = { buf, len, 0, BUF_INIT, 0, 0, 0, 0 };
	char *url;
	long status = 0;
	int rc;

	if ((url = object_url(s, key)) == NULL)
		return (nomem());
	a.fixed = buf;
	rc = perform(s, what, url, NULL, off, len, &a, &status);
	free(url);
	if (rc == 0 && status == 404)
		rc = storage_fail(ENOENT, "repository '%s': %s: it is gone",
		    s->base.where, what);
	else if (rc == 0 && status != 200 && status != 206)
		rc = storage_fail(status_errno(status), "repository '%s': %s: "
		    "HTTP %ld", s->base.where, what, status);
	else if (rc == 0 && status == 200 && off > 0)
		rc = storage_fail(EIO, "repository '%s': %s: a range was "
		    "asked for, all of it came", s->base.where, what);
	*got = a.got;
	buf_release(&a.dyn);
	return (rc);
}

/* key whole, at most max bytes, in one GET (a stat and a read could
 * see two versions of an object being replaced): malloc'd,
 * NUL-terminated.  0, STORAGE_MISSING or -1. */
static int
get_key(struct rcl *s, const char *key, const char *what, size_t max,
    unsigned char **data, size_t *len)
{
	struct answer a = { NULL, 0, 0, BUF_INIT, max, 0, 0, 0 };
	char *url;
	long status = 0;
	int rc;

	if ((url = object_url(s, key)) == NULL)
		return (nomem());
	rc = perform(s, what, url, NULL, 0, 0, &a, &status);
	free(url);
	if (rc == 0 && status == 404)
		rc = STORAGE_MISSING;
	else if (rc == 0 && status != 200)
		rc = storage_fail(status_errno(status), "repository '%s': %s: "
		    "HTTP %ld", s->base.where, what, status);
	else if (rc == 0 && buf_put_u8(&a.dyn, 0))
		rc = nomem();
	else if (rc == 0) {
		*len = a.dyn.len - 1;
		*data = a.dyn.data;
		a.dyn.data = NULL;
	}
	buf_release(&a.dyn);
	return (rc);
}

static int
rcl_get(struct storage *st, const char *name, size_t max,
    unsigned char **data, size_t *len)
{
	char what[WHAT_MAX];

	snprintf(what, sizeof(what), "'%s'", name);
	return (get_key(rcl_of(st), name, what, max, data, len));
}

static int
rcl_open(struct storage *st, const char *name, struct storage_obj **o,
    uint64_t *size)
{
	struct rcl_obj *h;
	char what[WHAT_MAX];
	int rc;

	snprintf(what, sizeof(what), "stat '%s'", name);
	if ((rc = stat_key(rcl_of(st), name, what, size)) != 0)
		return (rc);
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return (nomem());
	h->size = *size;
	*o = &h->base;
	return (0);
}

/* A ranged GET, within the size the object had at open. */
static int
rcl_read(struct storage_obj *o, uint64_t off, void *buf, size_t len,
    size_t *got)
{
	struct rcl_obj *h = (struct rcl_obj *)o;
	char what[WHAT_MAX];

	*got = 0;
	if (off >= h->size || len == 0)
		return (0);
	if (len > h->size - off)
		len = (size_t)(h->size - off);
	snprintf(what, sizeof(what), "GET '%s'", o->name);
	return (read_key(rcl_of(o->st), o->name, what, off, buf, len, got));
}

static void
rcl_obj_close(struct storage_obj *o)
{
	free(o);
}

/* --- Puts --------------------------------------------------------- */

/* A name for a put under tmp/: random, so that writers never meet. */
static int
tmp_key(char *out, size_t size)
{
	uint8_t rnd[16];
	char hex[33];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return (storage_fail(EIO, "cannot get random bytes"));
	hex_encode(hex, rnd, sizeof(rnd));
	snprintf(out, size, "tmp/%s", hex);
	return (0);
}

/*
 * The spool file at path (in s->spool) to key: copied by rclone under
 * tmp/, then moved to key (the local backend renames; object storage
 * copies on the server, whole).  0 or -1.
 */
static int
upload(struct rcl *s, const char *path, const char *key, const char *what)
{
	char tmp[64], w[WHAT_MAX + 16];
	int rc;

	if (tmp_key(tmp, sizeof(tmp)))
		return (-1);
	snprintf(w, sizeof(w), "upload of %s", what);
	if (call(s, "operations/copyfile", w, json_pack("{s:s, s:s, s:s, "
	    "s:s}", "srcFs", s->spool, "srcRemote", strrchr(path, '/') + 1,
	    "dstFs", s->fs, "dstRemote", tmp), 0, NULL))
		return (-1);
	snprintf(w, sizeof(w), "commit of %s", what);
	if ((rc = call(s, "operations/movefile", w, json_pack("{s:s, s:s, "
	    "s:s, s:s}", "srcFs", s->fs, "srcRemote", tmp, "dstFs", s->fs,
	    "dstRemote", key), 0, NULL)) != 0)
		(void)call(s, "operations/deletefile", "a put's leftover",
		    at_key(s, tmp), 1, NULL);
	return (rc);
}

/* A new spool file: its descriptor, path into path. */
static int
spool_file(struct rcl *s, char *path, size_t size)
{
	unsigned long n;
	int fd;

	pthread_mutex_lock(&s->mu);
	n = s->seq++;
	pthread_mutex_unlock(&s->mu);
	snprintf(path, size, "%s/p%lu", s->spool, n);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0600)) == -1)
		return (storage_fail(errno, "repository '%s': cannot spool a "
		    "put to '%s': %s", s->base.where, path, strerror(errno)));
	return (fd);
}

static int
write_all(int fd, const void *data, size_t len)
{
	const char *p = data;
	ssize_t n;

	while (len > 0) {
		if ((n = write(fd, p, len)) == -1) {
			if (errno == EINTR)
				continue;
			return (-1);
		}
		p += n;
		len -= (size_t)n;
	}
	return (0);
}

/* data whole to key: spooled and uploaded.  0 or -1. */
static int
put_bytes(struct rcl *s, const char *key, const char *what,
    const void *data, size_t len)
{
	char path[SPOOL_MAX + 32];
	int fd, rc;

	if ((fd = spool_file(s, path, sizeof(path))) < 0)
		return (-1);
	if (write_all(fd, data, len) || close(fd)) {
		rc = storage_fail(errno, "repository '%s': cannot spool %s: "
		    "%s", s->base.where, what, strerror(errno));
		unlink(path);
		return (rc);
	}
	rc = upload(s, path, key, what);
	unlink(path);
	return (rc);
}

static int
rcl_put_begin(struct storage *st, const char *name, unsigned flags,
    struct storage_put **p)
{
	struct rcl_put *h;

	if ((h = calloc(1, sizeof(*h))) == NULL)
		return (nomem());
	if ((h->fd = spool_file(rcl_of(st), h->path, sizeof(h->path))) < 0) {
		free(h);
		return (-1);
	}
	*p = &h->base;
	return (0);
}

static int
rcl_put_write(struct storage_put *p, const void *data, size_t len)
{
	struct rcl_put *h = (struct rcl_put *)p;

	if (write_all(h->fd, data, len))
		return (storage_fail(errno, "repository '%s': cannot spool "
		    "'%s' to '%s': %s", p->st->where, p->name, h->path,
		    strerror(errno)));
	return (0);
}

/* Spooled whole: its descriptor goes (an import keeps many puts open). */
static int
rcl_put_end(struct storage_put *p)
{
	struct rcl_put *h = (struct rcl_put *)p;
	int fd = h->fd;

	h->fd = -1;
	if (close(fd))
		return (storage_fail(errno, "repository '%s': cannot spool "
		    "'%s' to '%s': %s", p->st->where, p->name, h->path,
		    strerror(errno)));
	return (0);
}

static void
rcl_put_abort(struct storage_put *p)
{
	struct rcl_put *h = (struct rcl_put *)p;

	if (h->fd != -1)
		close(h->fd);
	unlink(h->path);
	free(h);
}

static int
rcl_put_commit(struct storage_put *p)
{
	struct rcl_put *h = (struct rcl_put *)p;
	struct rcl *s = rcl_of(p->st);
	char what[WHAT_MAX];
	uint64_t size;
	int rc, fd = h->fd;

	snprintf(what, sizeof(what), "'%s'", p->name);
	h->fd = -1;
	if (fd != -1 && close(fd))
		rc = storage_fail(errno, "repository '%s': cannot spool %s: "
		    "%s", s->base.where, what, strerror(errno));
	/* Best effort: object storage has no conditional write. */
	else if ((p->flags & STORAGE_PUT_NEW) &&
	    (rc = stat_key(s, p->name, what, &size)) != STORAGE_MISSING)
		rc = rc < 0 ? -1 : storage_fail(EEXIST, "repository '%s': "
		    "%s exists already", s->base.where, what);
	else
		rc = upload(s, h->path, p->name, what);
	rcl_put_abort(p);
	return (rc);
}

static int
rcl_del(struct storage *st, const char *name)
{
	char what[WHAT_MAX];
	int rc;

	snprintf(what, sizeof(what), "delete of '%s'", name);
	rc = call(rcl_of(st), "operations/deletefile", what,
	    at_key(rcl_of(st), name), 1, NULL);
	return (rc == STORAGE_MISSING ? 0 : rc);
}

/* --- Listings ----------------------------------------------------- */

/* Every file under dir ("" all), recursively: the answer's "list", in
 * *out (a reference to free); an absent directory lists nothing. */
static int
list_files(struct rcl *s, const char *dir, const char *what, json_t **out)
{
	json_t *a;
	int rc;

	rc = call(s, "operations/list", what, json_pack("{s:s, s:s, "
	    "s:{s:b, s:b, s:b}}", "fs", s->fs, "remote", dir, "opt",
	    "recurse", 1, "filesOnly", 1, "noMimeType", 1), 1, &a);
	if (rc == STORAGE_MISSING) {
		*out = json_array();
		return (*out != NULL ? 0 : nomem());
	}
	if (rc != 0)
		return (-1);
	*out = json_incref(json_object_get(a, "list"));
	json_decref(a);
	if (*out == NULL || !json_is_array(*out)) {
		json_decref(*out);
		return (storage_fail(EIO, "repository '%s': %s: no list in "
		    "rclone's answer", s->base.where, what));
	}
	return (0);
}

static int
rcl_list(struct storage *st, const char *dir,
    int (*fn)(void *, const char *, uint64_t), void *arg)
{
	struct rcl *s = rcl_of(st);
	char what[WHAT_MAX];
	const char *name;
	json_t *v, *e, *sz;
	size_t i;
	int rc = 0;

	snprintf(what, sizeof(what), "list of '%s'", dir);
	if (list_files(s, dir, what, &v))
		return (-1);
	json_array_foreach(v, i, e) {
		name = json_string_value(json_object_get(e, "Path"));
		sz = json_object_get(e, "Size");
		if (name == NULL)
			continue;
		/* The store's own (tmp/, locks/) are no objects. */
		if (!strncmp(name, "tmp/", 4) || !strncmp(name, "locks/", 6))
			continue;
		if (!storage_name_ok(name) || !json_is_integer(sz) ||
		    json_integer_value(sz) < 0) {
			log_warn("repository '%s': '%s' is not an object: "
			    "left out", st->where, name);
			continue;
		}
		if ((rc = fn(arg, name, (uint64_t)json_integer_value(sz))) !=
		    0)
			break;
	}
	json_decref(v);
	return (rc);
}

/* An RFC 3339 time ("2026-12-06T18:38:17.03Z") as seconds, or 0. */
static time_t
rfc3339(const char *t)
{
	struct tm tm;

	memset(&tm, 0, sizeof(tm));
	if (t == NULL || strptime(t, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
		return (0);
	return (timegm(&tm));
}

/* What puts cut short left under tmp/, CLEAN_AGE old: another writer's
 * put in progress is younger (and a lease's, taken without the lock). */
static int
rcl_clean(struct storage *st)
{
	struct rcl *s = rcl_of(st);
	const char *name;
	json_t *v, *e;
	time_t now = time(NULL), t;
	size_t i;
	int rc = 0;

	if (list_files(s, "tmp", "list of 'tmp'", &v))
		return (-1);
	json_array_foreach(v, i, e) {
		name = json_string_value(json_object_get(e, "Path"));
		t = rfc3339(json_string_value(json_object_get(e, "ModTime")));
		if (name == NULL || strncmp(name, "tmp/", 4) != 0 ||
		    (t != 0 && now - t < CLEAN_AGE))
			continue;
		if (call(s, "operations/deletefile", "clean of 'tmp'",
		    at_key(s, name), 1, NULL) < 0) {
			rc = -1;
			break;
		}
	}
	json_decref(v);
	return (rc);
}

/* --- Leases (lease.c) -------------------------------------------- */

static int
lease_get(void *arg, const char *key, const char *what, size_t max,
    char **data)
{
	size_t len;

	return (get_key(arg, key, what, max, (unsigned char **)data, &len));
}

static int
lease_put(void *arg, const char *key, const char *what, const void *data,
    size_t len)
{
	return (put_bytes(arg, key, what, data, len));
}

static void
lease_del(void *arg, const char *key, const char *what)
{
	struct rcl *s = arg;

	(void)call(s, "operations/deletefile", what, at_key(s, key), 1, NULL);
}

/* Every key under prefix ("locks/NAME.shared/"): its directory,
 * listed, and what begins with prefix passed on. */
static int
lease_list(void *arg, const char *prefix, const char *what,
    int (*fn)(void *, const char *, uint64_t), void *fnarg)
{
	char dir[STORAGE_NAME_MAX + 32];
	size_t i, len = strlen(prefix);
	const char *name;
	json_t *v, *e;
	int rc = 0;

	snprintf(dir, sizeof(dir), "%.*s", (int)(len > 0 &&
	    prefix[len - 1] == '/' ? len - 1 : len), prefix);
	if (list_files(arg, dir, what, &v))
		return (-1);
	json_array_foreach(v, i, e) {
		name = json_string_value(json_object_get(e, "Path"));
		if (name != NULL && strncmp(name, prefix, len) == 0 &&
		    (rc = fn(fnarg, name, 0)) != 0)
			break;
	}
	json_decref(v);
	return (rc);
}

static struct lease_io
rcl_lease_io(struct storage *st)
{
	return ((struct lease_io){ lease_get, lease_put, lease_del,
	    lease_list, st });
}

static int
rcl_lock(struct storage *st, const char *name,
    const struct storage_lock_opts *o, struct storage_lock **l,
    char *holder, size_t holdersz)
{
	struct lease_io io = rcl_lease_io(st);

	return (lease_lock(&io, "", name, o, l, holder, holdersz));
}

static int
rcl_holders(struct storage *st, const char *name,
    struct storage_holder **v, size_t *n)
{
	struct lease_io io = rcl_lease_io(st);

	return (lease_holders(&io, "", name, v, n));
}


/* --- The store ---------------------------------------------------- */

static void
rcl_close(struct storage *st)
{
	struct rcl *s = rcl_of(st);
	size_t i;

	stop(s);
	if (s->errfd != -1)
		close(s->errfd);
	if (s->spool[0] != '\0')
		(void)rmdir(s->spool);
	while (s->npool > 0)
		curl_easy_cleanup(s->pool[--s->npool]);
	free(s->pool);
	if (s->share != NULL)
		curl_share_cleanup(s->share);
	for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_destroy(&s->share_mu[i]);
	pthread_mutex_destroy(&s->mu);
	explicit_bzero(s->pass, sizeof(s->pass));
	free(s->fs);
	free(s);
}

static const struct storage_ops rcl_ops = {
	.stat = rcl_stat,
	.get = rcl_get,
	.open = rcl_open,
	.read = rcl_read,
	.obj_close = rcl_obj_close,
	.put_begin = rcl_put_begin,
	.put_write = rcl_put_write,
	.put_end = rcl_put_end,
	.put_commit = rcl_put_commit,
	.put_abort = rcl_put_abort,
	.del = rcl_del,
	.list = rcl_list,
	.clean = rcl_clean,
	.lock = rcl_lock,
	.unlock = lease_unlock,
	.renew = lease_renew,
	.holders = rcl_holders,
	.close = rcl_close,
};

/* The remote reached, and with STORAGE_CREATE found empty (the store's
 * own tmp/ and locks/ aside) and made: rclone's error at once when the
 * remote is unknown or its backend fails. */
static int
probe(struct rcl *s, unsigned flags)
{
	json_t *v, *e;
	const char *name;
	size_t i;
	int rc = 0;

	if (list_files(s, "", "listing", &v))
		return (-1);
	json_array_foreach(v, i, e) {
		name = json_string_value(json_object_get(e, "Path"));
		if ((flags & STORAGE_CREATE) && name != NULL &&
		    strncmp(name, "tmp/", 4) && strncmp(name, "locks/", 6)) {
			rc = storage_fail(EEXIST, "repository '%s': the "
			    "location already holds objects ('%s')",
			    s->base.where, name);
			break;
		}
	}
	json_decref(v);
	if (rc == 0 && (flags & STORAGE_CREATE))
		rc = call(s, "operations/mkdir", "mkdir", at_key(s, ""), 0,
		    NULL);
	return (rc);
}

/* A random secret of 32 hex digits into out. */
static int
secret(char *out)
{
	uint8_t rnd[16];

	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
		return (storage_fail(EIO, "cannot get random bytes"));
	hex_encode(out, rnd, sizeof(rnd));
	explicit_bzero(rnd, sizeof(rnd));
	return (0);
}

static int
setup(struct rcl *s, const char *location)
{
	const char *fs = location + strlen(PREFIX), *env, *tmp;
	char *end;
	size_t i;

	if (strchr(fs, ':') == NULL || fs[0] == '-')
		return (storage_fail(EINVAL, "repository '%s': an rclone "
		    "location is rclone:REMOTE:PATH", location));
	if ((s->fs = strdup(fs)) == NULL)
		return (nomem());
	s->retry_seconds = RETRY_SECONDS;
	if ((env = getenv("COFFER_RCLONE_RETRY_SECONDS")) != NULL &&
	    *env != '\0') {
		s->retry_seconds = strtod(env, &end);
		if (*end != '\0' || s->retry_seconds < 0)
			return (storage_fail(EINVAL, "COFFER_RCLONE_RETRY_"
			    "SECONDS: '%s' is not a number of seconds", env));
	}
	for (i = 0; i < CURL_LOCK_DATA_LAST; i++)
		pthread_mutex_init(&s->share_mu[i], NULL);
	pthread_mutex_init(&s->mu, NULL);
	if ((s->share = curl_share_init()) == NULL)
		return (nomem());
	curl_share_setopt(s->share, CURLSHOPT_LOCKFUNC, share_lock);
	curl_share_setopt(s->share, CURLSHOPT_UNLOCKFUNC, share_unlock);
	curl_share_setopt(s->share, CURLSHOPT_USERDATA, s);
	curl_share_setopt(s->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT);
	if (secret(s->user) || secret(s->pass))
		return (-1);
	/* $TMPDIR when it is an absolute path that fits, else /tmp. */
	if ((tmp = getenv("TMPDIR")) == NULL || tmp[0] != '/' ||
	    strlen(tmp) >= SPOOL_MAX - 32)
		tmp = "/tmp";
	snprintf(s->spool, sizeof(s->spool), "%s/coffer-rclone-XXXXXX", tmp);
	if (mkdtemp(s->spool) == NULL) {
		s->spool[0] = '\0';
		return (storage_fail(errno, "repository '%s': cannot make a "
		    "spool directory: %s", location, strerror(errno)));
	}
	return (0);
}

struct storage *
storage_rclone_open(const char *location, unsigned flags)
{
	struct rcl *s;

	/* Failures here are the store's too (storage_last_error): they
	 * exit 5, not 3 as a repository that is not one would. */
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		storage_fail(EIO, "repository '%s': cannot set up libcurl",
		    location);
		log_error("%s", storage_last_error()->msg);
		return (NULL);
	}
	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (s->base.where = strdup(location)) == NULL) {
		free(s);
		nomem();
		log_error("%s", storage_last_error()->msg);
		return (NULL);
	}
	s->base.ops = &rcl_ops;
	s->errfd = -1;
	if (setup(s, location) || spawn(s) || await_listen(s) ||
	    probe(s, flags) || ((s->base.blocks = storage_blocks_new(
	    RCL_READ_AHEAD, RCL_READ_BLOCKS)) == NULL &&
	    storage_fail(ENOMEM, "out of memory"))) {
		log_error("%s", storage_last_error()->msg);
		storage_close(&s->base);
		return (NULL);
	}
	return (&s->base);
}
