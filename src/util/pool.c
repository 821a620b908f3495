#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "coffer/log.h"
#include "coffer/pool.h"

struct pool {
	int nthreads;
	pthread_t *tids;
	pthread_mutex_t mu;
	pthread_cond_t work;		/* a new loop, or shutdown */
	pthread_cond_t done;		/* a worker finished its share */
	unsigned long gen;		/* loop number */
	int quit;
	/* The current loop. */
	void (*fn)(void *, size_t, int);
	void *arg;
	size_t n, next;
	int busy;			/* workers still in the loop */
};

/* Take indexes until none are left.  Called with mu unlocked. */
static void
drain(struct pool *p, int worker)
{
	size_t i;

	for (;;) {
		pthread_mutex_lock(&p->mu);
		i = p->next < p->n ? p->next++ : p->n;
		pthread_mutex_unlock(&p->mu);
		if (i >= p->n)
			return;
		p->fn(p->arg, i, worker);
	}
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
	unsigned long seen = 0;

	free(s);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (!p->quit && p->gen == seen)
			pthread_cond_wait(&p->work, &p->mu);
		if (p->quit)
			break;
		seen = p->gen;
		pthread_mutex_unlock(&p->mu);
		drain(p, worker);
		pthread_mutex_lock(&p->mu);
		if (--p->busy == 0)
			pthread_cond_signal(&p->done);
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
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->arg = arg;
	p->n = n;
	p->next = 0;
	if (n > 0 && p->nthreads > 1) {
		p->busy = p->nthreads - 1;
		p->gen++;
		pthread_cond_broadcast(&p->work);
	}
	pthread_mutex_unlock(&p->mu);
}

void
pool_wait(struct pool *p)
{
	drain(p, 0);
	pthread_mutex_lock(&p->mu);
	while (p->busy > 0)
		pthread_cond_wait(&p->done, &p->mu);
	p->n = 0;
	pthread_mutex_unlock(&p->mu);
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
