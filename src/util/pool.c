#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "coffer/log.h"
#include "coffer/pool.h"

/*
 * Loops queue up: a later one's indexes are handed out once the earlier
 * one's are, so no thread waits at the end of a loop while another is
 * queued behind it.
 */
#define POOL_QUEUE 4

struct loop {
	void (*fn)(void *, size_t, int);
	void *arg;
	size_t n, next;			/* indexes, and the next to hand out */
	size_t done;			/* indexes finished */
};

struct pool {
	int nthreads;
	pthread_t *tids;
	pthread_mutex_t mu;
	pthread_cond_t work;		/* a loop queued, or shutdown */
	pthread_cond_t done;		/* a loop finished */
	int quit;
	struct loop q[POOL_QUEUE];	/* a ring, oldest first */
	size_t head, count;
};

/* The next index of the oldest loop with some left.  Under mu. */
static struct loop *
take(struct pool *p, size_t *i)
{
	size_t k;

	for (k = 0; k < p->count; k++) {
		struct loop *l = &p->q[(p->head + k) % POOL_QUEUE];

		if (l->next < l->n) {
			*i = l->next++;
			return (l);
		}
	}
	return (NULL);
}

/* Index done; retire the finished loops at the head.  Under mu. */
static void
finish(struct pool *p, struct loop *l)
{
	l->done++;
	if (l->done < l->n)
		return;
	while (p->count > 0 && p->q[p->head].done == p->q[p->head].n) {
		p->head = (p->head + 1) % POOL_QUEUE;
		p->count--;
	}
	pthread_cond_broadcast(&p->done);
}

struct start {
	struct pool *p;
	int worker;
};

static void *
worker_main(void *v)
{
	struct start *s = v;
	struct pool *p = s->p;
	int worker = s->worker;
	struct loop *l = NULL;
	size_t i;

	thread_name("pool");
	free(s);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->quit && (l = take(p, &i)) == NULL)
			pthread_cond_wait(&p->work, &p->mu);
		if (p->quit)
			break;
		pthread_mutex_unlock(&p->mu);
		l->fn(l->arg, i, worker);
		pthread_mutex_lock(&p->mu);
		finish(p, l);
	}
	pthread_mutex_unlock(&p->mu);
	return (NULL);
}

struct pool *
pool_new(int threads)
{
	struct pool *p;
	struct start *s;
	int i;

	if (threads < 1)
		threads = 1;
	if ((p = calloc(1, sizeof(*p))) == NULL ||
	    (p->tids = calloc((size_t)threads, sizeof(*p->tids))) == NULL) {
		free(p);
		log_error("out of memory");
		return (NULL);
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	p->nthreads = 1;
	for (i = 1; i < threads; i++) {
		if ((s = malloc(sizeof(*s))) == NULL)
			break;
		s->p = p;
		s->worker = i;
		if (pthread_create(&p->tids[i], NULL, worker_main, s)) {
			free(s);
			break;
		}
		p->nthreads++;
	}
	if (p->nthreads < threads)
		log_warn("started %d of %d threads", p->nthreads, threads);
	return (p);
}

void
pool_free(struct pool *p)
{
	int i;

	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->quit = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
	for (i = 1; i < p->nthreads; i++)
		pthread_join(p->tids[i], NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->done);
	free(p->tids);
	free(p);
}

int
pool_threads(const struct pool *p)
{
	return (p->nthreads);
}

void
pool_start(struct pool *p, size_t n, void (*fn)(void *, size_t, int),
    void *arg)
{
	struct loop *l;

	if (n == 0)
		return;
	pthread_mutex_lock(&p->mu);
	if (p->count == POOL_QUEUE) {
		/* Full (or no workers to empty it): run what is queued. */
		pthread_mutex_unlock(&p->mu);
		pool_wait(p);
		pthread_mutex_lock(&p->mu);
	}
	l = &p->q[(p->head + p->count) % POOL_QUEUE];
	l->fn = fn;
	l->arg = arg;
	l->n = n;
	l->next = l->done = 0;
	p->count++;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->mu);
}

void
pool_wait_but(struct pool *p, size_t keep)
{
	struct loop *l = NULL;
	size_t i;

	/* Loops retire in order, each as soon as it and those before it
	 * are done: more than keep left means an older one still runs. */
	pthread_mutex_lock(&p->mu);
	while (p->count > keep) {
		if ((l = take(p, &i)) == NULL) {
			pthread_cond_wait(&p->done, &p->mu);
			continue;
		}
		pthread_mutex_unlock(&p->mu);
		l->fn(l->arg, i, 0);
		pthread_mutex_lock(&p->mu);
		finish(p, l);
	}
	pthread_mutex_unlock(&p->mu);
}

void
pool_wait(struct pool *p)
{
	pool_wait_but(p, 0);
}

void
pool_run(struct pool *p, size_t n, void (*fn)(void *, size_t, int),
    void *arg)
{
	size_t i;

	/* Not worth waking anyone for one item, or without workers. */
	if (n == 1 || p->nthreads == 1) {
		for (i = 0; i < n; i++)
			fn(arg, i, 0);
		return;
	}
	pool_start(p, n, fn, arg);
	pool_wait(p);
}

int
pool_default_threads(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return (n < 1 ? 1 : n > 64 ? 64 : (int)n);
}

void
thread_name(const char *role)
{
	char name[16];

	snprintf(name, sizeof(name), "coffer/%s", role);
	(void)pthread_setname_np(pthread_self(), name);
}
