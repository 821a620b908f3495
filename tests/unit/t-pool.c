/*
 * The thread pool: every index runs exactly once, on a valid worker
 * number, with pool_run and with pool_start/pool_wait while the caller
 * works on something else in between, with several loops queued, and
 * with pool_wait_but waiting for all but the last.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/pool.h"
#include "tap.h"

struct loop {
	int nthreads;
	size_t n;
	atomic_int *hits;
	atomic_int bad_worker;
	atomic_int running;	/* indexes being worked on right now */
	atomic_int max_running;
	int spin;		/* make each index take a little while */
};

static void
visit(void *arg, size_t i, int worker)
{
	struct loop *l = arg;
	int now, seen;

	if (worker < 0 || worker >= l->nthreads)
		atomic_fetch_add(&l->bad_worker, 1);
	now = atomic_fetch_add(&l->running, 1) + 1;
	seen = atomic_load(&l->max_running);
	while (now > seen &&
	    !atomic_compare_exchange_weak(&l->max_running, &seen, now))
		;
	if (l->spin)
		usleep(2000);
	atomic_fetch_add(&l->hits[i], 1);
	atomic_fetch_sub(&l->running, 1);
}

static int
all_once(const struct loop *l)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (atomic_load(&l->hits[i]) != 1)
			return (0);
	return (1);
}

static void
setup(struct loop *l, struct pool *p, size_t n, int spin)
{
	memset(l, 0, sizeof(*l));
	l->nthreads = pool_threads(p);
	l->n = n;
	l->spin = spin;
	l->hits = calloc(n ? n : 1, sizeof(*l->hits));
}

int
main(void)
{
	static const size_t sizes[] = { 0, 1, 2, 3, 64, 10000 };
	struct loop l;
	struct pool *p;
	size_t s;
	int t, round, i;

	for (t = 1; t <= 4; t++) {
		if ((p = pool_new(t)) == NULL)
			return (1);
		ok(pool_threads(p) == t, "pool of %d has %d threads", t,
		    pool_threads(p));
		for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			setup(&l, p, sizes[s], 0);
			pool_run(p, l.n, visit, &l);
			ok(all_once(&l) && l.bad_worker == 0,
			    "threads %d: pool_run of %zu visits each once", t,
			    l.n);
			free(l.hits);
		}
		/* Start, let the caller do other work, wait; many rounds, so
		 * that a lost wakeup or a stale loop would show. */
		for (round = 0; round < 200; round++) {
			setup(&l, p, (size_t)(round % 7) * 3, 0);
			pool_start(p, l.n, visit, &l);
			if (round % 3 == 0)
				usleep(100);
			pool_wait(p);
			if (!all_once(&l) || l.bad_worker)
				break;
			free(l.hits);
			l.hits = NULL;
		}
		ok(round == 200, "threads %d: 200 start/wait rounds", t);
		free(l.hits);

		/* The workers run while the caller is away. */
		setup(&l, p, 40, 1);
		pool_start(p, l.n, visit, &l);
		/* Up to 10 s for a worker to be scheduled on a loaded host:
		 * what is checked is that one starts at all before the wait. */
		for (i = 0; t > 1 && i < 10000 &&
		    atomic_load(&l.running) == 0 &&
		    atomic_load(&l.max_running) == 0; i++)
			usleep(1000);
		if (t == 1)
			usleep(30000);
		if (t > 1)
			ok(atomic_load(&l.running) > 0 ||
			    atomic_load(&l.max_running) > 0,
			    "threads %d: workers began before pool_wait", t);
		else
			ok(atomic_load(&l.max_running) == 0,
			    "one thread: nothing runs before pool_wait");
		pool_wait(p);
		ok(all_once(&l), "threads %d: every index once after wait", t);
		ok(l.max_running <= t, "threads %d: at most %d at a time "
		    "(saw %d)", t, t, (int)l.max_running);
		free(l.hits);

		/* Loops queue: six started back to back (more than the
		 * queue holds), the caller away meanwhile, then one wait. */
		{
			struct loop q[6];
			int k, good = 1;

			for (round = 0; round < 50 && good; round++) {
				for (k = 0; k < 6; k++) {
					setup(&q[k], p, (size_t)((k * 7 +
					    round) % 23), k == 0 && round == 0);
					pool_start(p, q[k].n, visit, &q[k]);
				}
				if (round % 2 == 0)
					usleep(200);
				pool_wait(p);
				for (k = 0; k < 6; k++) {
					good &= all_once(&q[k]) &&
					    q[k].bad_worker == 0;
					free(q[k].hits);
				}
			}
			ok(good, "threads %d: queued loops each visit every "
			    "index once (%d rounds)", t, round);
		}

		/* pool_wait_but: the next loop queued before waiting for
		 * the one before it, as backup does each step. */
		{
			struct loop a, b;
			int good = 1, untouched = 1;

			for (round = 0; round < 50 && good; round++) {
				setup(&a, p, (size_t)(round % 29 + 1),
				    round == 0);
				setup(&b, p, (size_t)(round % 13 + 1), 0);
				pool_start(p, a.n, visit, &a);
				pool_start(p, b.n, visit, &b);
				pool_wait_but(p, 1);
				good &= all_once(&a) && a.bad_worker == 0;
				/* Without workers nothing but the caller
				 * runs, and it stopped after a. */
				for (s = 0; t == 1 && s < b.n; s++)
					untouched &= atomic_load(&b.hits[s]) ==
					    0;
				pool_wait(p);
				good &= all_once(&b) && b.bad_worker == 0;
				free(a.hits);
				free(b.hits);
			}
			ok(good, "threads %d: pool_wait_but(1) returns with "
			    "the earlier loop done, pool_wait with both (%d "
			    "rounds)", t, round);
			if (t == 1)
				ok(untouched, "one thread: the later loop "
				    "waits for pool_wait");
		}
		pool_free(p);
	}
	return (tap_done());
}
