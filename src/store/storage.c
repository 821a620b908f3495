/*
 * The storage interface (coffer/storage.h): what every store shares.
 * Names are checked here, once, for every store; failures are reported
 * here, once, from the message the store recorded with storage_fail.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coffer/log.h"
#include "coffer/name.h"
#include "coffer/pool.h"
#include "coffer/progress.h"
#include "coffer/storage.h"
#include "store-int.h"

static _Thread_local struct storage_error last;
static void renewal_start(struct storage_lock *l);
static const char *cacert;

void
storage_set_cacert(const char *file)
{
	cacert = file;
}

int
storage_is_remote(const char *location)
{
	return (strncmp(location, "s3:", 3) == 0 ||
	    strncmp(location, "rclone:", 7) == 0 || store_mem_is(location));
}

struct storage *
storage_open_location(const char *location, unsigned flags)
{
	struct storage_s3_opts o = { cacert };

	if (store_mem_is(location))
		return (store_mem_open(location));
	if (strncmp(location, "s3:", 3) == 0)
		return (storage_s3_open(location, &o, flags));
	if (strncmp(location, "rclone:", 7) == 0)
		return (storage_rclone_open(location, flags));
	return (storage_local_open(location, flags));
}

const struct storage_error *
storage_last_error(void)
{
	return (&last);
}

int
storage_fail(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last.msg, sizeof(last.msg), fmt, ap);
	va_end(ap);
	last.code = code;
	errno = code;
	return (-1);
}

/* rc from a store: a failure is reported, with errno its code. */
static int
reported(int rc)
{
	if (rc < 0) {
		log_error("%s", last.msg);
		errno = last.code;
		return (-1);
	}
	return (rc);
}

/* One component of a name: name.h's alphabet, not hidden, no option,
 * no longer than a file name may be. */
static int
component_ok(const char *s, size_t n)
{
	return (n > 0 && n <= NAME_MAX && s[0] != '.' && s[0] != '-' &&
	    name_span(s) >= n);
}

int
storage_name_ok(const char *name)
{
	const char *p, *slash;
	size_t n = strlen(name);
	int depth = 0;

	if (n == 0 || n > STORAGE_NAME_MAX)
		return (0);
	/* The store's own areas: its puts in progress and its locks. */
	if (!strncmp(name, "tmp/", 4) || !strncmp(name, "locks/", 6) ||
	    !strcmp(name, "tmp") || !strcmp(name, "locks"))
		return (0);
	for (p = name;; p = slash + 1) {
		slash = strchr(p, '/');
		if (!component_ok(p, slash ? (size_t)(slash - p) : strlen(p)) ||
		    ++depth > STORAGE_DEPTH_MAX)
			return (0);
		if (slash == NULL)
			return (1);
	}
}

/* name checked; refused with EINVAL (reported) if not one. */
static int
check_name(const struct storage *st, const char *name)
{
	if (storage_name_ok(name))
		return (0);
	return (reported(storage_fail(EINVAL, "repository '%s': '%s' is not an "
	    "object name: refused", st->where, name)));
}

/* A directory to list: "" or a name. */
static int
check_dir(const struct storage *st, const char *dir)
{
	return (dir[0] == '\0' ? 0 : check_name(st, dir));
}

const char *
storage_where(const struct storage *st)
{
	return (st->where);
}

void
storage_close(struct storage *st)
{
	char *where;

	if (st == NULL)
		return;
	where = st->where;
	storage_blocks_free(st->blocks);
	st->ops->close(st);
	free(where);
}

int
storage_stat(struct storage *st, const char *name, uint64_t *size)
{
	if (check_name(st, name))
		return (-1);
	return (reported(st->ops->stat(st, name, size)));
}

/* The object open as o, whole, at most max bytes. */
static int
read_whole(struct storage_obj *o, uint64_t size, size_t max,
    unsigned char **data, size_t *len)
{
	unsigned char *p;

	if (size > max)
		return (reported(storage_fail(EFBIG, "repository '%s': '%s' is "
		    "too large (more than %zu bytes)", o->st->where, o->name,
		    max)));
	if ((p = malloc((size_t)size + 1)) == NULL)
		return (reported(storage_fail(ENOMEM, "out of memory")));
	if (storage_read_all(o, 0, p, (size_t)size)) {
		free(p);
		return (-1);
	}
	p[size] = '\0';
	*data = p;
	*len = (size_t)size;
	return (0);
}

int
storage_get(struct storage *st, const char *name, size_t max,
    unsigned char **data, size_t *len)
{
	struct storage_obj *o;
	uint64_t size;
	int rc;

	*data = NULL;
	*len = 0;
	if (check_name(st, name))
		return (-1);
	if (st->ops->get != NULL)
		return (reported(st->ops->get(st, name, max, data, len)));
	if ((rc = storage_open(st, name, &o, &size)) != 0)
		return (rc);
	rc = read_whole(o, size, max, data, len);
	storage_obj_close(o);
	return (rc);
}

int
storage_open(struct storage *st, const char *name, struct storage_obj **o,
    uint64_t *size)
{
	char *copy;
	int rc;

	*o = NULL;
	if (check_name(st, name))
		return (-1);
	if ((copy = strdup(name)) == NULL)
		return (reported(storage_fail(ENOMEM, "out of memory")));
	if ((rc = st->ops->open(st, name, o, size)) != 0) {
		free(copy);
		return (reported(rc));
	}
	(*o)->st = st;
	(*o)->name = copy;
	(*o)->size = *size;
	return (0);
}

int
storage_read_on(struct storage_obj *o, uint64_t off, void *buf, size_t len,
    size_t *got)
{
	size_t n;

	/* A store may cut a read short (a dropped connection): read on
	 * until the end, which a read of nothing marks. */
	for (*got = 0; *got < len; *got += n) {
		if (o->st->ops->read(o, off + *got, (char *)buf + *got,
		    len - *got, &n))
			return (-1);
		if (n == 0)
			break;
	}
	return (0);
}

int
storage_read(struct storage_obj *o, uint64_t off, void *buf, size_t len,
    size_t *got)
{
	struct storage_blocks *b = o->st->blocks;

	if (b != NULL && len < storage_blocks_size(b))
		return (reported(storage_blocks_read(b, o, off, buf, len,
		    got)));
	return (reported(storage_read_on(o, off, buf, len, got)));
}

int
storage_read_all(struct storage_obj *o, uint64_t off, void *buf, size_t len)
{
	size_t got;

	if (storage_read(o, off, buf, len, &got))
		return (-1);
	if (got < len)
		return (reported(storage_fail(EIO, "repository '%s': '%s' is "
		    "truncated (%zu bytes at offset %llu, %zu wanted)",
		    o->st->where, o->name, got, (unsigned long long)off,
		    len)));
	return (0);
}

int
storage_cached(struct storage_obj *o, uint64_t off, uint64_t len)
{
	if (o->st->ops->cached == NULL || len == 0)
		return (0);
	return (o->st->ops->cached(o, off, len) == 1);
}

/* Set once (repo/lock.c, under pthread_once) before any lock is taken
 * or listed. */
static int (*holder_gone)(const char *);

void
storage_holder_gone_fn(int (*gone)(const char *info))
{
	holder_gone = gone;
}

int
store_holder_gone(const char *info)
{
	return (holder_gone != NULL && holder_gone(info));
}

int
storage_knows_cached(const struct storage *st)
{
	return (st->ops->cached != NULL);
}

const char *
storage_obj_name(const struct storage_obj *o)
{
	return (o->name);
}

void
storage_obj_close(struct storage_obj *o)
{
	char *name;

	if (o == NULL)
		return;
	name = o->name;
	o->st->ops->obj_close(o);
	free(name);
}

int
storage_put_begin(struct storage *st, const char *name, unsigned flags,
    struct storage_put **p)
{
	char *copy;

	*p = NULL;
	if (check_name(st, name))
		return (-1);
	if ((copy = strdup(name)) == NULL)
		return (reported(storage_fail(ENOMEM, "out of memory")));
	if (st->ops->put_begin(st, name, flags, p)) {
		free(copy);
		return (reported(-1));
	}
	(*p)->st = st;
	(*p)->name = copy;
	(*p)->flags = flags;
	(*p)->failed = 0;
	(*p)->ended = 0;
	return (0);
}

int
storage_put_write(struct storage_put *p, const void *data, size_t len)
{
	/* The failure was reported when it happened. */
	if (p->failed)
		return (storage_fail(EIO, "repository '%s': write of '%s' after "
		    "a failure", p->st->where, p->name));
	if (p->ended) {
		p->failed = 1;
		return (reported(storage_fail(EINVAL, "repository '%s': write "
		    "of '%s' after its end", p->st->where, p->name)));
	}
	if (len > 0 && p->st->ops->put_write(p, data, len)) {
		p->failed = 1;
		return (reported(-1));
	}
	return (0);
}

int
storage_put_end(struct storage_put *p)
{
	if (p->failed)
		return (storage_fail(EIO, "repository '%s': end of '%s' after "
		    "a failure", p->st->where, p->name));
	if (p->ended)
		return (0);
	p->ended = 1;
	if (p->st->ops->put_end != NULL && p->st->ops->put_end(p)) {
		p->failed = 1;
		return (reported(-1));
	}
	return (0);
}

int
storage_put_commit(struct storage_put *p)
{
	struct storage *st;
	char *name = p->name;
	int rc;

	if (p->failed) {
		rc = storage_fail(EIO, "repository '%s': '%s' not written: "
		    "writing it failed", p->st->where, name);
		p->st->ops->put_abort(p);
		free(name);
		return (rc);
	}
	st = p->st;
	rc = p->st->ops->put_commit(p);
	storage_blocks_forget(st->blocks, name);
	free(name);
	return (reported(rc));
}

void
storage_put_abort(struct storage_put *p)
{
	char *name;

	if (p == NULL)
		return;
	name = p->name;
	p->st->ops->put_abort(p);
	free(name);
}

int
storage_put(struct storage *st, const char *name, const void *data,
    size_t len, unsigned flags)
{
	struct storage_put *p;

	if (storage_put_begin(st, name, flags, &p))
		return (-1);
	if (storage_put_write(p, data, len)) {
		storage_put_abort(p);
		return (-1);
	}
	return (storage_put_commit(p));
}

int
storage_mkdir(struct storage *st, const char *dir)
{
	if (check_dir(st, dir))
		return (-1);
	if (st->ops->mkdir == NULL)
		return (0);
	return (reported(st->ops->mkdir(st, dir)));
}

int
storage_delete(struct storage *st, const char *name)
{
	if (check_name(st, name))
		return (-1);
	storage_blocks_forget(st->blocks, name);
	return (reported(st->ops->del(st, name)));
}

int
storage_list(struct storage *st, const char *dir,
    int (*fn)(void *arg, const char *name, uint64_t size), void *arg)
{
	if (check_dir(st, dir))
		return (-1);
	return (reported(st->ops->list(st, dir, fn, arg)));
}

struct collect {
	struct storage_entry *v;
	size_t n, cap;
};

static int
collect(void *arg, const char *name, uint64_t size)
{
	struct collect *c = arg;
	struct storage_entry *nv;

	if (size == STORAGE_NOT_OBJECT)
		return (0);
	if (c->n == c->cap) {
		c->cap = c->cap ? 2 * c->cap : 64;
		if ((nv = reallocarray(c->v, c->cap, sizeof(*nv))) == NULL)
			return (storage_fail(ENOMEM, "out of memory"));
		c->v = nv;
	}
	if ((c->v[c->n].name = strdup(name)) == NULL)
		return (storage_fail(ENOMEM, "out of memory"));
	c->v[c->n++].size = size;
	return (0);
}

static int
cmp_entry(const void *a, const void *b)
{
	return (strcmp(((const struct storage_entry *)a)->name,
	    ((const struct storage_entry *)b)->name));
}

int
storage_list_all(struct storage *st, const char *dir,
    struct storage_entry **v, size_t *n)
{
	struct collect c = { NULL, 0, 0 };

	*v = NULL;
	*n = 0;
	if (storage_list(st, dir, collect, &c)) {
		storage_entries_free(c.v, c.n);
		return (-1);
	}
	if (c.n > 1)
		qsort(c.v, c.n, sizeof(*c.v), cmp_entry);
	*v = c.v;
	*n = c.n;
	return (0);
}

void
storage_entries_free(struct storage_entry *v, size_t n)
{
	while (v != NULL && n > 0)
		free(v[--n].name);
	free(v);
}

int
storage_clean(struct storage *st)
{
	if (st->ops->clean == NULL)
		return (0);
	return (reported(st->ops->clean(st)));
}

/* A lock name: one component, not ending ".shared" (where the local
 * and lease stores keep the shared holders of the name before it). */
static int
check_lock_name(const struct storage *st, const char *name)
{
	size_t n = strlen(name), k = strlen(STORE_SHARED);

	if (strchr(name, '/') != NULL || (n >= k &&
	    strcmp(name + n - k, STORE_SHARED) == 0))
		return (reported(storage_fail(EINVAL, "repository '%s': '%s' is "
		    "not a lock name: refused", st->where, name)));
	return (check_name(st, name));
}

/* Control bytes of s replaced: it comes from the store, and goes to a
 * terminal. */
static void
printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			*s = '?';
}

void
store_busy_line(char *out, size_t size, const char *first, size_t more)
{
	if (size == 0)
		return;
	if (more > 0)
		snprintf(out, size, "%s (and %zu more)", first, more);
	else
		snprintf(out, size, "%s", first);
}

int
store_holder_add(struct storage_holder **v, size_t *n, const char *info,
    int shared, long long expires)
{
	struct storage_holder *nv;

	if ((nv = reallocarray(*v, *n + 1, sizeof(*nv))) == NULL)
		return (storage_fail(ENOMEM, "out of memory"));
	*v = nv;
	snprintf(nv[*n].info, sizeof(nv[*n].info), "%s", info);
	nv[*n].info[strcspn(nv[*n].info, "\n")] = '\0';
	nv[*n].shared = shared;
	nv[*n].expires = expires;
	(*n)++;
	return (0);
}

static int
cmp_holder(const void *a, const void *b)
{
	const struct storage_holder *x = a, *y = b;

	if (x->shared != y->shared)
		return (x->shared - y->shared);
	return (strcmp(x->info, y->info));
}

int
storage_lock_holders(struct storage *st, const char *name,
    struct storage_holder **v, size_t *n)
{
	size_t i;

	*v = NULL;
	*n = 0;
	if (check_lock_name(st, name))
		return (-1);
	if (st->ops->holders(st, name, v, n)) {
		free(*v);
		*v = NULL;
		*n = 0;
		return (reported(-1));
	}
	for (i = 0; i < *n; i++)
		printable((*v)[i].info);
	if (*n > 1)
		qsort(*v, *n, sizeof(**v), cmp_holder);
	return (0);
}

int
storage_lock(struct storage *st, const char *name,
    const struct storage_lock_opts *o, struct storage_lock **l,
    char *holder, size_t holdersz)
{
	int rc;

	*l = NULL;
	if (holdersz > 0)
		holder[0] = '\0';
	if (check_lock_name(st, name))
		return (-1);
	if ((rc = st->ops->lock(st, name, o, l, holder, holdersz)) == 0) {
		(*l)->st = st;
		renewal_start(*l);
	}
	if (rc == 1 && holdersz > 0)
		printable(holder);
	return (reported(rc));
}

/*
 * Renewal of a lease: a thread a lock, waking every third of its ttl.
 * A renewal that fails is tried again at the next wake; once the lease
 * may have expired (ttl after the last renewal that worked began: the
 * process stopped, the store unreachable) or was taken over, it is lost:
 * said once, and the thread ends.  A renewal that works after the lease
 * may have expired does not undo that: another writer may have taken
 * the lock, done its work and given it back meanwhile.
 */
struct storage_renewal {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop, lost;		/* under mu */
	double renewed;		/* under mu: when the last renewal that
				 * worked began (monotonic) */
};

static void *
renew_main(void *arg)
{
	struct storage_lock *l = arg;
	struct storage_renewal *w = l->renewal;
	double renewed, began, period = l->ttl / 3;
	struct timespec until;
	int rc, lost = 0;

	thread_name("lease");
	pthread_mutex_lock(&w->mu);
	renewed = w->renewed;
	while (!w->stop && !lost) {
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += (time_t)period;
		until.tv_nsec += (long)((period - (double)(time_t)period) *
		    1e9);
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu,
		    &until) == 0)
			;
		if (w->stop)
			break;
		pthread_mutex_unlock(&w->mu);
		began = now_monotonic();
		if (began - renewed >= l->ttl) {
			log_warn("repository '%s': its lock was not renewed for "
			    "%.0f s, longer than it lasts: it may have been "
			    "another's since", l->st->where, began - renewed);
			lost = 1;
		} else if ((rc = l->st->ops->renew(l)) == 0)
			renewed = began;
		else if (rc == 1) {
			log_warn("repository '%s': its lock was taken over "
			    "by another writer", l->st->where);
			lost = 1;
		} else if (now_monotonic() - renewed >= l->ttl) {
			log_warn("%s; the lock of repository '%s' may have "
			    "expired", storage_last_error()->msg,
			    l->st->where);
			lost = 1;
		}
		pthread_mutex_lock(&w->mu);
		w->lost = lost;
		w->renewed = renewed;
	}
	pthread_mutex_unlock(&w->mu);
	return (NULL);
}

/* A renewal for l, when its store renews leases; without one (no
 * memory, no thread) the lease lasts its ttl, said as a warning. */
static void
renewal_start(struct storage_lock *l)
{
	struct storage_renewal *w;

	l->renewal = NULL;
	if (l->st->ops->renew == NULL || l->ttl <= 0)
		return;
	if ((w = calloc(1, sizeof(*w))) == NULL)
		goto fail;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->renewed = now_monotonic();
	l->renewal = w;
	if (pthread_create(&w->thread, NULL, renew_main, l) == 0)
		return;
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
	l->renewal = NULL;
fail:
	log_warn("repository '%s': its lock cannot be renewed: it lasts "
	    "%.0f s", l->st->where, l->ttl);
}

int
storage_lock_lost(struct storage_lock *l)
{
	int lost;

	if (l == NULL || l->renewal == NULL)
		return (0);
	/* Asked, not waiting for the thread: a process that was stopped
	 * past its lease's length may ask before the thread wakes. */
	pthread_mutex_lock(&l->renewal->mu);
	lost = l->renewal->lost ||
	    now_monotonic() - l->renewal->renewed >= l->ttl;
	pthread_mutex_unlock(&l->renewal->mu);
	return (lost);
}

void
storage_unlock(struct storage_lock *l)
{
	struct storage_renewal *w;

	if (l == NULL)
		return;
	if ((w = l->renewal) != NULL) {
		pthread_mutex_lock(&w->mu);
		w->stop = 1;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->thread, NULL);
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		free(w);
	}
	l->st->ops->unlock(l);
}
