/*
 * The memory store: objects in a process's memory, for unit tests, with
 * the faults object storage has (coffer/storage.h, storage_mem_*):
 * errors on the nth call, reads cut short, slow calls, stale listings.
 * Deterministic: faults are counted in calls, never timed.  A store may
 * be named (storage_mem_named): every handle opened by its name then
 * reaches the same objects and locks, as hosts reach one repository.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coffer/buf.h"
#include "coffer/log.h"
#include "coffer/storage.h"
#include "store-int.h"

#define FAULTS_MAX 8

/* An object's bytes, shared by the handles that read them: a put that
 * replaces the object makes a new blob, and readers keep the old. */
struct blob {
	unsigned refs;
	size_t len;
	unsigned char data[];
};

struct object {
	char *name;
	struct blob *b;
	unsigned long seq;		/* the put that committed it */
};

struct held {
	char *name;
	char *info;
	int shared;
	const void *owner;		/* the mem_lock holding it */
};

/* The objects and locks, shared by the handles (struct mem_handle) on
 * them: the last one closed frees them. */
struct mem {
	unsigned refs;			/* handles, and the registry's */
	char *name;			/* NULL: not named */
	struct mem *next;		/* in the registry */
	pthread_mutex_t mu;
	pthread_cond_t freed;		/* a lock was given back */
	struct object *obj;		/* sorted by name */
	size_t nobj, capobj;
	unsigned long puts;		/* commits so far */
	struct held *locks;
	size_t nlocks, caplocks;
	/* Faults. */
	unsigned long calls[STORAGE_NOPS];
	struct { unsigned long at; int code; } fault[STORAGE_NOPS][FAULTS_MAX];
	unsigned delay_ms[STORAGE_NOPS];
	size_t short_max;
	unsigned stale;
};

struct mem_handle {
	struct storage base;
	struct mem *m;
};

/* The named stores (storage_mem_named); refs is counted under it too. */
static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mem *registry;

struct mem_obj {
	struct storage_obj base;
	struct blob *b;
};

struct mem_put {
	struct storage_put base;
	struct buf data;
};

struct mem_lock {
	struct storage_lock base;
	char *name;
};

static const char *const op_names[STORAGE_NOPS] = {
	"stat", "open", "read", "put", "write", "commit", "delete", "list",
	"lock"
};

static const struct storage_ops mem_ops;

static struct mem *
mem_of(struct storage *st)
{
	return (((struct mem_handle *)st)->m);
}

static int
nomem(void)
{
	return (storage_fail(ENOMEM, "out of memory"));
}

/*
 * A call of op on name: counted, slowed and failed as the faults say.
 * 0, or -1 (the injected failure recorded).
 */
static int
enter(struct mem *m, enum storage_op op, const char *name)
{
	unsigned long n;
	unsigned ms;
	int i, code = 0;

	pthread_mutex_lock(&m->mu);
	n = ++m->calls[op];
	ms = m->delay_ms[op];
	for (i = 0; i < FAULTS_MAX; i++)
		if (m->fault[op][i].at == n) {
			code = m->fault[op][i].code;
			m->fault[op][i].at = 0;
		}
	pthread_mutex_unlock(&m->mu);
	if (ms > 0)
		nanosleep(&(struct timespec){ ms / 1000,
		    (long)(ms % 1000) * 1000000L }, NULL);
	if (code != 0)
		return (storage_fail(code, "repository 'memory': %s of '%s' "
		    "failed: %s", op_names[op], name, strerror(code)));
	return (0);
}

/* The index of name in m->obj, or where it would go (*found 0). */
static size_t
find(const struct mem *m, const char *name, int *found)
{
	size_t lo = 0, hi = m->nobj, mid;
	int c;

	*found = 0;
	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if ((c = strcmp(m->obj[mid].name, name)) == 0) {
			*found = 1;
			return (mid);
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (lo);
}

static void
blob_drop(struct blob *b)
{
	if (b != NULL && --b->refs == 0)
		free(b);
}

static int
mem_stat(struct storage *st, const char *name, uint64_t *size)
{
	struct mem *m = mem_of(st);
	size_t i;
	int found;

	if (enter(m, STORAGE_OP_STAT, name))
		return (-1);
	pthread_mutex_lock(&m->mu);
	i = find(m, name, &found);
	if (found)
		*size = m->obj[i].b->len;
	pthread_mutex_unlock(&m->mu);
	return (found ? 0 : STORAGE_MISSING);
}

static int
mem_open(struct storage *st, const char *name, struct storage_obj **o,
    uint64_t *size)
{
	struct mem *m = mem_of(st);
	struct mem_obj *h;
	size_t i;
	int found;

	if (enter(m, STORAGE_OP_OPEN, name))
		return (-1);
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return (nomem());
	pthread_mutex_lock(&m->mu);
	i = find(m, name, &found);
	if (found) {
		h->b = m->obj[i].b;
		h->b->refs++;
		*size = h->b->len;
	}
	pthread_mutex_unlock(&m->mu);
	if (!found) {
		free(h);
		return (STORAGE_MISSING);
	}
	*o = &h->base;
	return (0);
}

static int
mem_read(struct storage_obj *o, uint64_t off, void *buf, size_t len,
    size_t *got)
{
	struct mem_obj *h = (struct mem_obj *)o;
	struct mem *m = mem_of(o->st);
	size_t max;

	*got = 0;
	if (enter(m, STORAGE_OP_READ, o->name))
		return (-1);
	if (off >= h->b->len)
		return (0);
	pthread_mutex_lock(&m->mu);
	max = m->short_max;
	pthread_mutex_unlock(&m->mu);
	*got = h->b->len - off < len ? (size_t)(h->b->len - off) : len;
	if (max > 0 && *got > max)
		*got = max;
	memcpy(buf, h->b->data + off, *got);
	return (0);
}

static void
mem_obj_close(struct storage_obj *o)
{
	struct mem_obj *h = (struct mem_obj *)o;
	struct mem *m = mem_of(o->st);

	pthread_mutex_lock(&m->mu);
	blob_drop(h->b);
	pthread_mutex_unlock(&m->mu);
	free(h);
}

static int
mem_put_begin(struct storage *st, const char *name, unsigned flags,
    struct storage_put **p)
{
	struct mem_put *h;

	if (enter(mem_of(st), STORAGE_OP_PUT_BEGIN, name))
		return (-1);
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return (nomem());
	buf_init(&h->data);
	*p = &h->base;
	return (0);
}

static int
mem_put_write(struct storage_put *p, const void *data, size_t len)
{
	struct mem_put *h = (struct mem_put *)p;

	if (enter(mem_of(p->st), STORAGE_OP_PUT_WRITE, p->name))
		return (-1);
	if (buf_append(&h->data, data, len))
		return (nomem());
	return (0);
}

static void
mem_put_abort(struct storage_put *p)
{
	struct mem_put *h = (struct mem_put *)p;

	buf_release(&h->data);
	free(h);
}

/* Put b in place as name (m->mu held). */
static int
install(struct mem *m, const char *name, struct blob *b, unsigned flags)
{
	struct object *nv;
	size_t i;
	int found;

	i = find(m, name, &found);
	if (found && (flags & STORAGE_PUT_NEW))
		return (storage_fail(EEXIST, "repository 'memory': '%s' already "
		    "exists", name));
	if (found) {
		blob_drop(m->obj[i].b);
		m->obj[i].b = b;
		m->obj[i].seq = ++m->puts;
		return (0);
	}
	if (m->nobj == m->capobj) {
		m->capobj = m->capobj ? 2 * m->capobj : 64;
		if ((nv = reallocarray(m->obj, m->capobj, sizeof(*nv))) ==
		    NULL)
			return (nomem());
		m->obj = nv;
	}
	memmove(m->obj + i + 1, m->obj + i, (m->nobj - i) * sizeof(*m->obj));
	if ((m->obj[i].name = strdup(name)) == NULL) {
		memmove(m->obj + i, m->obj + i + 1,
		    (m->nobj - i) * sizeof(*m->obj));
		return (nomem());
	}
	m->obj[i].b = b;
	m->obj[i].seq = ++m->puts;
	m->nobj++;
	return (0);
}

static int
mem_put_commit(struct storage_put *p)
{
	struct mem_put *h = (struct mem_put *)p;
	struct mem *m = mem_of(p->st);
	struct blob *b = NULL;
	int rc = -1;

	if (enter(m, STORAGE_OP_PUT_COMMIT, p->name))
		goto out;
	if ((b = malloc(sizeof(*b) + h->data.len + 1)) == NULL) {
		nomem();
		goto out;
	}
	b->refs = 1;
	b->len = h->data.len;
	if (h->data.len > 0)
		memcpy(b->data, h->data.data, h->data.len);
	pthread_mutex_lock(&m->mu);
	if ((rc = install(m, p->name, b, p->flags)) == 0)
		b = NULL;
	pthread_mutex_unlock(&m->mu);
out:
	free(b);
	mem_put_abort(p);
	return (rc);
}

static int
mem_del(struct storage *st, const char *name)
{
	struct mem *m = mem_of(st);
	size_t i;
	int found;

	if (enter(m, STORAGE_OP_DELETE, name))
		return (-1);
	pthread_mutex_lock(&m->mu);
	i = find(m, name, &found);
	if (found) {
		free(m->obj[i].name);
		blob_drop(m->obj[i].b);
		m->nobj--;
		memmove(m->obj + i, m->obj + i + 1,
		    (m->nobj - i) * sizeof(*m->obj));
	}
	pthread_mutex_unlock(&m->mu);
	return (0);
}

/*
 * The names under dir, copied out first: fn may call the store.  A stale
 * listing leaves out what the last m->stale puts committed.
 */
static int
mem_list(struct storage *st, const char *dir,
    int (*fn)(void *, const char *, uint64_t), void *arg)
{
	struct mem *m = mem_of(st);
	struct storage_entry *v;
	size_t i, n = 0, dl = strlen(dir);
	int rc = 0;

	if (enter(m, STORAGE_OP_LIST, dir))
		return (-1);
	pthread_mutex_lock(&m->mu);
	if ((v = calloc(m->nobj + 1, sizeof(*v))) == NULL) {
		pthread_mutex_unlock(&m->mu);
		return (nomem());
	}
	for (i = 0; i < m->nobj; i++) {
		if (dl > 0 && (strncmp(m->obj[i].name, dir, dl) ||
		    m->obj[i].name[dl] != '/'))
			continue;
		if (m->obj[i].seq + m->stale > m->puts)
			continue;
		if ((v[n].name = strdup(m->obj[i].name)) == NULL) {
			rc = nomem();
			break;
		}
		v[n++].size = m->obj[i].b->len;
	}
	pthread_mutex_unlock(&m->mu);
	for (i = 0; rc == 0 && i < n; i++)
		rc = fn(arg, v[i].name, v[i].size);
	storage_entries_free(v, n);
	return (rc);
}

/* The first holder of name that keeps a taker (shared or not) out, and
 * how many more do (m->mu held): NULL when none. */
static struct held *
blocker(struct mem *m, const char *name, int shared, size_t *more)
{
	struct held *first = NULL;
	size_t i;

	*more = 0;
	for (i = 0; i < m->nlocks; i++) {
		if (strcmp(m->locks[i].name, name) != 0 ||
		    (shared && m->locks[i].shared))
			continue;
		if (first == NULL)
			first = &m->locks[i];
		else
			(*more)++;
	}
	return (first);
}

/* Wait for m->freed until deadline (m->mu held): 1 when it passed. */
static int
wait_until(struct mem *m, double wait, const struct timespec *deadline)
{
	if (wait < 0) {
		pthread_cond_wait(&m->freed, &m->mu);
		return (0);
	}
	return (pthread_cond_timedwait(&m->freed, &m->mu, deadline) ==
	    ETIMEDOUT);
}

static int
mem_lock(struct storage *st, const char *name,
    const struct storage_lock_opts *o, struct storage_lock **l,
    char *holder, size_t holdersz)
{
	struct mem *m = mem_of(st);
	struct timespec end;
	struct mem_lock *h;
	struct held *x, *nv;
	size_t more;
	int rc = -1;

	if (enter(m, STORAGE_OP_LOCK, name))
		return (-1);
	if ((h = calloc(1, sizeof(*h))) == NULL ||
	    (h->name = strdup(name)) == NULL) {
		free(h);
		return (nomem());
	}
	clock_gettime(CLOCK_REALTIME, &end);
	end.tv_sec += (time_t)o->wait;
	end.tv_nsec += (long)((o->wait - (double)(time_t)o->wait) * 1e9);
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&m->mu);
	while ((x = blocker(m, name, o->shared, &more)) != NULL &&
	    o->wait != 0)
		if (wait_until(m, o->wait, &end)) {
			x = blocker(m, name, o->shared, &more);
			break;
		}
	if (x != NULL) {
		store_busy_line(holder, holdersz, x->info, more);
		rc = 1;
		goto out;
	}
	if (m->nlocks == m->caplocks) {
		m->caplocks = m->caplocks ? 2 * m->caplocks : 4;
		if ((nv = reallocarray(m->locks, m->caplocks,
		    sizeof(*nv))) == NULL) {
			rc = nomem();
			goto out;
		}
		m->locks = nv;
	}
	x = &m->locks[m->nlocks];
	if ((x->name = strdup(name)) == NULL ||
	    (x->info = strdup(o->info ? o->info : "")) == NULL) {
		free(x->name);
		rc = nomem();
		goto out;
	}
	x->shared = o->shared != 0;
	x->owner = h;
	m->nlocks++;
	*l = &h->base;
	h = NULL;
	rc = 0;
out:
	pthread_mutex_unlock(&m->mu);
	if (h != NULL) {
		free(h->name);
		free(h);
	}
	return (rc);
}

static void
mem_unlock(struct storage_lock *l)
{
	struct mem_lock *h = (struct mem_lock *)l;
	struct mem *m = mem_of(l->st);
	struct held *x;

	size_t i;

	pthread_mutex_lock(&m->mu);
	for (i = 0; i < m->nlocks; i++)
		if (m->locks[i].owner == h) {
			x = &m->locks[i];
			free(x->name);
			free(x->info);
			*x = m->locks[--m->nlocks];
			pthread_cond_broadcast(&m->freed);
			break;
		}
	pthread_mutex_unlock(&m->mu);
	free(h->name);
	free(h);
}

static int
mem_holders(struct storage *st, const char *name, struct storage_holder **v,
    size_t *n)
{
	struct mem *m = mem_of(st);
	size_t i;
	int rc = 0;

	pthread_mutex_lock(&m->mu);
	for (i = 0; rc == 0 && i < m->nlocks; i++)
		if (strcmp(m->locks[i].name, name) == 0)
			rc = store_holder_add(v, n, m->locks[i].info,
			    m->locks[i].shared, 0);
	pthread_mutex_unlock(&m->mu);
	return (rc);
}

static void
mem_free(struct mem *m)
{
	size_t i;

	for (i = 0; i < m->nobj; i++) {
		free(m->obj[i].name);
		blob_drop(m->obj[i].b);
	}
	for (i = 0; i < m->nlocks; i++) {
		free(m->locks[i].name);
		free(m->locks[i].info);
	}
	free(m->obj);
	free(m->locks);
	pthread_mutex_destroy(&m->mu);
	pthread_cond_destroy(&m->freed);
	free(m->name);
	free(m);
}

/* Drop one reference to m (registry_mu held): freed with the last. */
static void
mem_drop(struct mem *m)
{
	if (--m->refs == 0)
		mem_free(m);
}

static void
mem_close(struct storage *st)
{
	pthread_mutex_lock(&registry_mu);
	mem_drop(mem_of(st));
	pthread_mutex_unlock(&registry_mu);
	free(st);
}

static const struct storage_ops mem_ops = {
	.stat = mem_stat,
	.open = mem_open,
	.read = mem_read,
	.obj_close = mem_obj_close,
	.put_begin = mem_put_begin,
	.put_write = mem_put_write,
	.put_commit = mem_put_commit,
	.put_abort = mem_put_abort,
	.del = mem_del,
	.list = mem_list,
	.lock = mem_lock,
	.unlock = mem_unlock,
	.holders = mem_holders,
	.close = mem_close,
};

/* A new handle on m, one more reference (registry_mu held). */
static struct storage *
handle_new(struct mem *m)
{
	struct mem_handle *h;
	char *where;

	if (m->name != NULL)
		where = malloc(strlen(m->name) + 5);
	else
		where = strdup("memory");
	if ((h = calloc(1, sizeof(*h))) == NULL || where == NULL) {
		free(h);
		free(where);
		storage_fail(ENOMEM, "out of memory");
		return (NULL);
	}
	if (m->name != NULL)
		sprintf(where, "mem:%s", m->name);
	h->base.where = where;
	h->base.ops = &mem_ops;
	h->m = m;
	m->refs++;
	return (&h->base);
}

/* An empty store, no reference yet; NULL (reported). */
static struct mem *
mem_new(const char *name)
{
	struct mem *m;

	if ((m = calloc(1, sizeof(*m))) == NULL ||
	    (name != NULL && (m->name = strdup(name)) == NULL)) {
		free(m);
		storage_fail(ENOMEM, "out of memory");
		return (NULL);
	}
	pthread_mutex_init(&m->mu, NULL);
	pthread_cond_init(&m->freed, NULL);
	return (m);
}

struct storage *
storage_mem_new(void)
{
	struct storage *st = NULL;
	struct mem *m;

	pthread_mutex_lock(&registry_mu);
	if ((m = mem_new(NULL)) != NULL && (st = handle_new(m)) == NULL)
		mem_free(m);
	pthread_mutex_unlock(&registry_mu);
	return (st);
}

/* The named store (registry_mu held), or NULL. */
static struct mem *
registered(const char *name)
{
	struct mem *m;

	for (m = registry; m != NULL; m = m->next)
		if (strcmp(m->name, name) == 0)
			return (m);
	return (NULL);
}

struct storage *
storage_mem_named(const char *name)
{
	struct storage *st = NULL;
	struct mem *m;

	pthread_mutex_lock(&registry_mu);
	if ((m = registered(name)) == NULL && (m = mem_new(name)) != NULL) {
		m->refs = 1;
		m->next = registry;
		registry = m;
	}
	if (m != NULL)
		st = handle_new(m);
	pthread_mutex_unlock(&registry_mu);
	return (st);
}

void
storage_mem_drop(const char *name)
{
	struct mem **p, *m;

	pthread_mutex_lock(&registry_mu);
	for (p = &registry; (m = *p) != NULL; p = &m->next)
		if (strcmp(m->name, name) == 0) {
			*p = m->next;
			mem_drop(m);
			break;
		}
	pthread_mutex_unlock(&registry_mu);
}

struct storage *
store_mem_open(const char *location)
{
	struct storage *st = NULL;
	struct mem *m;

	if (strncmp(location, "mem:", 4) != 0)
		return (NULL);
	pthread_mutex_lock(&registry_mu);
	if ((m = registered(location + 4)) != NULL)
		st = handle_new(m);
	pthread_mutex_unlock(&registry_mu);
	return (st);
}

int
store_mem_is(const char *location)
{
	int found;

	if (strncmp(location, "mem:", 4) != 0)
		return (0);
	pthread_mutex_lock(&registry_mu);
	found = registered(location + 4) != NULL;
	pthread_mutex_unlock(&registry_mu);
	return (found);
}

/* The memory store st is, or NULL (another store: faults ignored). */
static struct mem *
mem_if(struct storage *st)
{
	return (st != NULL && st->ops == &mem_ops ? mem_of(st) : NULL);
}

int
storage_mem_fail(struct storage *st, enum storage_op op, unsigned nth,
    int code)
{
	struct mem *m = mem_if(st);
	int i, rc = -1;

	if (m == NULL || op >= STORAGE_NOPS || nth == 0 || code == 0)
		return (-1);
	pthread_mutex_lock(&m->mu);
	for (i = 0; i < FAULTS_MAX && rc != 0; i++)
		if (m->fault[op][i].at == 0) {
			m->fault[op][i].at = m->calls[op] + nth;
			m->fault[op][i].code = code;
			rc = 0;
		}
	pthread_mutex_unlock(&m->mu);
	return (rc);
}

void
storage_mem_short(struct storage *st, size_t max)
{
	struct mem *m = mem_if(st);

	if (m != NULL) {
		pthread_mutex_lock(&m->mu);
		m->short_max = max;
		pthread_mutex_unlock(&m->mu);
	}
}

void
storage_mem_delay(struct storage *st, enum storage_op op, unsigned ms)
{
	struct mem *m = mem_if(st);

	if (m != NULL && op < STORAGE_NOPS) {
		pthread_mutex_lock(&m->mu);
		m->delay_ms[op] = ms;
		pthread_mutex_unlock(&m->mu);
	}
}

void
storage_mem_stale(struct storage *st, unsigned k)
{
	struct mem *m = mem_if(st);

	if (m != NULL) {
		pthread_mutex_lock(&m->mu);
		m->stale = k;
		pthread_mutex_unlock(&m->mu);
	}
}

int
storage_mem_blocks(struct storage *st, size_t block, unsigned n)
{
	struct storage_blocks *b;

	if (mem_if(st) == NULL)
		return (0);
	if ((b = storage_blocks_new(block, n)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	storage_blocks_free(st->blocks);
	st->blocks = b;
	return (0);
}

unsigned long
storage_mem_calls(struct storage *st, enum storage_op op)
{
	struct mem *m = mem_if(st);
	unsigned long n = 0;

	if (m != NULL && op < STORAGE_NOPS) {
		pthread_mutex_lock(&m->mu);
		n = m->calls[op];
		pthread_mutex_unlock(&m->mu);
	}
	return (n);
}
