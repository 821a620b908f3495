/*
 * forget: which snapshots retention keeps, and the rest go.
 *
 * Chain-aware: a kept differential or incremental keeps every snapshot it
 * restores from (its parent, up to its full), so that whatever the rules
 * or the order of forgets, no kept snapshot is ever left without its
 * chain.  A snapshot named to be forgotten that a kept one builds on is
 * refused, naming the dependants (consolidate them first, or forget them
 * too).  Only complete snapshots are judged; failed and running ones hold
 * no data and are left as history.
 *
 * Forgetting removes catalog rows and writes the snapshots' ids to the
 * repository's journal, so that no other catalog, and no rebuild, brings
 * them back from their records; the data goes with prune.
 */
#include <stdlib.h>
#include <string.h>

#include "coffer/engine.h"
#include "coffer/log.h"
#include "coffer/progress.h"

struct collect {
	struct forget_item *v;
	size_t n, cap;
	const char *dataset;
};

static int
collect_one(void *arg, const struct catalog_snapshot *s)
{
	struct collect *cl = arg;
	struct forget_item *it;

	if (s->state != SNAP_COMPLETE)
		return (0);
	if (array_grow(&cl->v, &cl->cap, cl->n, sizeof(*cl->v), 64))
		return (-1);
	it = &cl->v[cl->n];
	memset(it, 0, sizeof(*it));
	memcpy(it->sid, s->sid, sizeof(it->sid));
	memcpy(it->parent_sid, s->parent_sid, sizeof(it->parent_sid));
	if ((it->dataset = strdup(s->dataset)) == NULL ||
	    (s->tags != NULL && (it->tags = strdup(s->tags)) == NULL)) {
		free(it->dataset);
		log_error("out of memory");
		return (-1);
	}
	it->level = s->level;
	it->time_ns = s->started_ns;
	cl->n++;
	return (0);
}

/* Newest first within a dataset; datasets by name. */
static int
cmp_items(const void *a, const void *b)
{
	const struct forget_item *x = a, *y = b;
	int c = strcmp(x->dataset, y->dataset);

	if (c != 0)
		return (c);
	if (x->time_ns != y->time_ns)
		return (x->time_ns > y->time_ns ? -1 : 1);
	return (strcmp(y->sid, x->sid));
}

static struct forget_item *
find(struct forget_item *v, size_t n, const char *sid)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(v[i].sid, sid) == 0)
			return (&v[i]);
	return (NULL);
}

/* Each kept snapshot keeps its chain. */
static void
close_chains(struct forget_item *v, size_t n)
{
	struct forget_item *p;
	size_t i;

	for (i = 0; i < n; i++) {
		if (!v[i].keep)
			continue;
		for (p = &v[i]; p->parent_sid[0] != '\0'; ) {
			if ((p = find(v, n, p->parent_sid)) == NULL)
				break;
			if (!p->keep) {
				p->keep = 1;
				memcpy(p->needed_by, v[i].sid,
				    sizeof(p->needed_by));
			}
			p->reasons |= RETAIN_CHAIN;
		}
	}
}

/* By rules, one dataset at a time (v sorted). */
static void
apply_rules(const struct retention *r, struct forget_item *v, size_t n)
{
	struct retention_snap *rs;
	size_t i, j, start;

	if ((rs = calloc(n ? n : 1, sizeof(*rs))) == NULL) {
		/* Keep everything rather than guess. */
		for (i = 0; i < n; i++)
			v[i].keep = 1;
		return;
	}
	for (start = 0; start < n; start = i) {
		for (i = start; i < n &&
		    strcmp(v[i].dataset, v[start].dataset) == 0; i++) {
			rs[i - start].time_ns = v[i].time_ns;
			rs[i - start].tags = v[i].tags;
		}
		retention_apply(r, rs, i - start);
		for (j = start; j < i; j++) {
			v[j].reasons = rs[j - start].reasons;
			v[j].keep = v[j].reasons != 0;
		}
	}
	free(rs);
}

/* Named snapshots go; a kept one that builds on one of them refuses. */
static int
apply_names(const struct forget_opts *o, struct forget_item *v, size_t n,
    struct catalog *c)
{
	struct catalog_snapshot s;
	struct forget_item *it, *p;
	size_t i, k;
	int rc, bad = 0;

	for (i = 0; i < n; i++)
		v[i].keep = 1;
	for (k = 0; k < o->nsids; k++) {
		memset(&s, 0, sizeof(s));
		if ((rc = catalog_snapshot_find(c, o->sids[k], &s)) <= 0)
			return (rc < 0 ? ENGINE_ERROR : ENGINE_REFUSED);
		it = find(v, n, s.sid);
		catalog_snapshot_release(&s);
		if (it == NULL) {
			log_error("snapshot '%s' is not complete: only "
			    "complete snapshots are forgotten", o->sids[k]);
			return (ENGINE_REFUSED);
		}
		if (retention_has_tag(it->tags, RETENTION_KEEP_TAG) &&
		    !o->force) {
			log_error("snapshot %.12s of '%s' is marked kept "
			    "(backup --keep): forget --force forgets it",
			    it->sid, it->dataset);
			return (ENGINE_REFUSED);
		}
		it->keep = 0;
	}
	for (i = 0; i < n; i++) {
		if (!v[i].keep)
			continue;
		for (p = &v[i]; p->parent_sid[0] != '\0'; ) {
			if ((p = find(v, n, p->parent_sid)) == NULL)
				break;
			if (!p->keep) {
				log_error("snapshot %.12s of '%s' builds on "
				    "%.12s: forget it too, or consolidate it "
				    "first", v[i].sid, v[i].dataset, p->sid);
				bad = 1;
				break;
			}
		}
	}
	return (bad ? ENGINE_REFUSED : ENGINE_OK);
}

enum engine_result
engine_forget(struct repo *r, struct catalog *c, const struct forget_opts *o,
    struct forget_result *res)
{
	struct collect cl;
	const char **gone = NULL;
	size_t i, k = 0, n;
	int st;

	memset(res, 0, sizeof(*res));
	memset(&cl, 0, sizeof(cl));
	if (catalog_snapshot_list(c, o->dataset, collect_one, &cl)) {
		res->items = cl.v;
		res->n = cl.n;
		return (ENGINE_ERROR);
	}
	res->items = cl.v;
	res->n = n = cl.n;
	if (n > 1)
		qsort(cl.v, n, sizeof(*cl.v), cmp_items);
	if (o->nsids > 0) {
		if ((st = apply_names(o, cl.v, n, c)) != ENGINE_OK)
			return (st);
	} else {
		apply_rules(&o->rules, cl.v, n);
		close_chains(cl.v, n);
	}
	for (i = 0; i < n; i++)
		if (!cl.v[i].keep)
			res->forget++;
	if (o->dry_run || res->forget == 0)
		return (ENGINE_OK);

	if ((gone = calloc(res->forget, sizeof(*gone))) == NULL) {
		log_error("out of memory");
		return (ENGINE_ERROR);
	}
	for (i = 0; i < n; i++)
		if (!cl.v[i].keep)
			gone[k++] = cl.v[i].sid;
	st = ENGINE_ERROR;
	if (catalog_begin(c))
		goto out;
	if (catalog_forget(c, gone, k, now_realtime_ns(), &res->forgotten) ||
	    catalog_commit(c)) {
		catalog_rollback(c);
		goto out;
	}
	/* The forget reaches the repository before anything is pruned:
	 * no other catalog may keep listing what prune will delete. */
	if (engine_journal_flush(r, c)) {
		log_error("the forgotten snapshots could not be written to the "
		    "repository's journal; prune will not run until they are");
		goto out;
	}
	st = ENGINE_OK;
out:
	free(gone);
	return (st);
}

void
engine_forget_result_release(struct forget_result *res)
{
	size_t i;

	for (i = 0; i < res->n; i++) {
		free(res->items[i].dataset);
		free(res->items[i].tags);
	}
	free(res->items);
	memset(res, 0, sizeof(*res));
}
