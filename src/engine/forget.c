/*
 * forget: which snapshots retention keeps, and the rest go.
 *
 * Only what the rules keep stays.  A kept differential or incremental
 * whose parent goes is first rebased: its own catalog rows are rewritten
 * (records only, no data read or copied) so that it stands on its
 * nearest kept ancestor, as a differential on a full or an incremental
 * on anything else, or on nothing, as a full; its tree is the same, its
 * id too (its children name it), and a record of the next revision,
 * signed by the authority as well (a full key), carries the new rows to
 * every other catalog (doc/design.md, "Rebased snapshots").  The rebases
 * commit, with their records durable, before anything is forgotten: a
 * crash between leaves every snapshot whole.
 *
 * A snapshot named to be forgotten that a kept one builds on is refused,
 * naming the dependants (consolidate them first, or forget them too):
 * naming one link of a chain is more often a mistake than a wish to
 * rewrite the snapshots after it.  Only complete snapshots are judged;
 * failed and running ones hold no data and are left as history.
 *
 * Forgetting removes catalog rows and writes the snapshots' ids to the
 * repository's journal, so that no other catalog, and no rebuild, brings
 * them back from their records; the data goes with prune.
 */
#include <stdlib.h>
#include <string.h>

#include "coffer/catalog-prune.h"
#include "coffer/engine-retention.h"
#include "coffer/engine.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/tuning.h"
#include "engine-int.h"

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
	it->finished_ns = s->finished_ns;
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

/*
 * Each kept snapshot whose parent goes is rebased onto its nearest kept
 * ancestor, or made a full when none is kept.  An ancestor not judged
 * (not in v) stays, so it is the one.  Oldest first (v is newest first
 * within a dataset), as they are rebased, so that an ancestor's own
 * rebase is known: on one made a full, a differential.  Every catalog
 * that rebases for itself (catalog_forget_apply) goes oldest first too,
 * and so comes to the same levels.
 */
static int
plan_rebases(struct catalog *c, struct forget_item *v, size_t n,
    size_t *nrebase)
{
	struct catalog_snapshot s;
	struct forget_item *a, *p;
	const char *onto;
	size_t i;
	int level, rc;

	*nrebase = 0;
	for (i = n; i-- > 0; ) {
		if (!v[i].keep || v[i].parent_sid[0] == '\0')
			continue;
		if ((p = find(v, n, v[i].parent_sid)) == NULL || p->keep)
			continue;
		for (a = p; a != NULL && !a->keep; a = p) {
			if (a->parent_sid[0] == '\0')
				break;
			if ((p = find(v, n, a->parent_sid)) == NULL)
				break;
		}
		onto = "";
		level = LEVEL_FULL;
		if (a != NULL && a->keep) {
			onto = a->sid;
			level = a->rebase ? a->rebase_level : a->level;
		} else if (a != NULL && a->parent_sid[0] != '\0') {
			memset(&s, 0, sizeof(s));
			if ((rc = catalog_snapshot_find_sid(c, a->parent_sid,
			    &s)) < 0)
				return (-1);
			if (rc > 0) {
				onto = a->parent_sid;
				level = s.level;
				catalog_snapshot_release(&s);
			}
		}
		v[i].rebase = 1;
		memcpy(v[i].onto, onto, strlen(onto) + 1);
		v[i].rebase_level = onto[0] == '\0' ? LEVEL_FULL :
		    level == LEVEL_FULL ? LEVEL_DIFFERENTIAL : LEVEL_INCREMENTAL;
		(*nrebase)++;
	}
	return (0);
}

/*
 * Rebase one planned snapshot in the open transaction, and store its
 * record of the next revision (authority-signed: p->authority).
 */
static int
rebase_one(struct catalog *c, struct packer *p, const struct forget_item *it)
{
	struct catalog_snapshot k, a;
	int64_t id;
	int rc = -1;

	memset(&k, 0, sizeof(k));
	memset(&a, 0, sizeof(a));
	if (catalog_snapshot_find_sid(c, it->sid, &k) != 1 ||
	    (it->onto[0] != '\0' &&
	    catalog_snapshot_find_sid(c, it->onto, &a) != 1)) {
		log_error("cannot rebase snapshot %.12s: it or %.12s is not in "
		    "the catalog", it->sid, it->onto);
		goto out;
	}
	id = k.id;
	if (catalog_snapshot_rebase(c, id, a.id) ||
	    catalog_snapshot_revise(c, id))
		goto out;
	catalog_snapshot_release(&k);
	if (catalog_snapshot_get(c, id, &k))
		goto out;
	if (packer_snapshot_record(p, &k, NULL) ||
	    catalog_snapshot_update(c, &k))
		goto out;
	log_info("snapshot %.12s of '%s' rebased: %s%s%.12s (revision %lld)",
	    k.sid, k.dataset, catalog_level_name(k.level),
	    k.parent_sid[0] ? " on " : "", k.parent_sid,
	    (long long)k.revision);
	rc = 0;
out:
	catalog_snapshot_release(&k);
	catalog_snapshot_release(&a);
	return (rc);
}

/* The planned rebases, in one transaction committed once their records
 * are durable. */
static enum engine_result
rebase_kept(struct repo *r, struct catalog *c, struct forget_result *res)
{
	struct packer p;
	size_t i;
	int st = ENGINE_ERROR, in_txn = 0;

	if (ccrypto_keys_write_only(repo_keys(r)) ||
	    !ccrypto_keys_auth_known(repo_keys(r))) {
		log_error("forget would rebase %zu snapshot%s (their parents "
		    "go), which only a full key may sign: run it with the "
		    "full key", res->rebase, res->rebase == 1 ? "" : "s");
		return (ENGINE_REFUSED);
	}
	if (packer_init(&p, r, c, 0))
		return (ENGINE_ERROR);
	p.authority = 1;
	if (catalog_begin(c))
		goto out;
	in_txn = 1;
	for (i = res->n; i-- > 0; ) {
		if (!res->items[i].rebase)
			continue;
		if (rebase_one(c, &p, &res->items[i]))
			goto out;
		res->rebased++;
	}
	if (packer_flush(&p) || catalog_commit(c))
		goto out;
	in_txn = 0;
	st = ENGINE_OK;
out:
	if (in_txn) {
		catalog_rollback(c);
		res->rebased = 0;
	}
	packer_release(&p);
	return (st);
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

/* Does writer w choose bases (a backup, a run or a watch), and may it
 * in dataset (its line names or lists it, or names none)? */
static int
builds_on(const struct repo_lock_who *w, const char *dataset)
{
	if (w->command[0] != '\0' && strcmp(w->command, "backup") != 0 &&
	    strcmp(w->command, "run") != 0 && strcmp(w->command, "watch") != 0)
		return (0);
	return (repo_lock_names(w, dataset));
}

/*
 * What a backup running beside this forget may build on (doc/design.md,
 * "Many writers"): it took as its base the newest complete snapshot of
 * its dataset (or the newest full) that its catalog had when it began,
 * which is the newest as of some time after it began, less the margin
 * for clocks and listings.  So, in a dataset such a writer backs up (its
 * lock names or lists it, or names none), the snapshots that
 * finished since then and the newest (and newest full) before it stay,
 * marked RETAIN_RUNNING; by name, such a snapshot is refused.  v is
 * sorted (dataset, newest first).  ENGINE_OK, ENGINE_REFUSED or
 * ENGINE_ERROR.
 */
static int
hold_bases(struct repo *r, struct forget_item *v, size_t n, int named)
{
	struct repo_lock_who *w = NULL;
	int64_t since = INT64_MAX, m;
	size_t nw = 0, i, k;
	int newest = 0, full = 0, bad = 0, hold;

	if (repo_lock_list(r, 1, &w, &nw))
		return (ENGINE_ERROR);
	m = engine_margin_ns();
	for (i = 0; i < n; i++) {
		if (i == 0 || strcmp(v[i].dataset, v[i - 1].dataset) != 0) {
			newest = full = 0;
			since = INT64_MAX;
			for (k = 0; k < nw; k++)
				if (builds_on(&w[k], v[i].dataset) &&
				    w[k].since_ns - m < since)
					since = w[k].since_ns - m;
		}
		if (since == INT64_MAX)
			continue;	/* no writer of it beside */
		if (v[i].finished_ns > since)
			hold = 1;
		else {
			hold = !newest || (v[i].level == LEVEL_FULL && !full);
			newest = 1;
			full |= v[i].level == LEVEL_FULL;
		}
		if (!hold || v[i].keep)
			continue;
		if (named) {
			log_error("snapshot %.12s of '%s' may be the base of a "
			    "backup running now: forget it once it has ended "
			    "(coffer locks)", v[i].sid, v[i].dataset);
			bad = 1;
			continue;
		}
		v[i].keep = 1;
		v[i].reasons |= RETAIN_RUNNING;
	}
	free(w);
	return (bad ? ENGINE_REFUSED : ENGINE_OK);
}

static enum engine_result
forget(struct repo *r, struct catalog *c, const struct forget_opts *o,
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
		if ((st = apply_names(o, cl.v, n, c)) != ENGINE_OK ||
		    (st = hold_bases(r, cl.v, n, 1)) != ENGINE_OK)
			return (st);
	} else {
		apply_rules(&o->rules, cl.v, n);
		if ((st = hold_bases(r, cl.v, n, 0)) != ENGINE_OK)
			return (st);
		if (plan_rebases(c, cl.v, n, &res->rebase))
			return (ENGINE_ERROR);
	}
	tuning_raise_at("forget-planned");
	for (i = 0; i < n; i++)
		if (!cl.v[i].keep)
			res->forget++;
	if (o->dry_run || res->forget == 0)
		return (ENGINE_OK);
	if (res->rebase > 0 && (st = rebase_kept(r, c, res)) != ENGINE_OK)
		return (st);

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

enum engine_result
engine_forget(struct repo *r, struct catalog *c, const struct forget_opts *o,
    struct forget_result *res)
{
	enum engine_result st;

	memset(res, 0, sizeof(*res));
	if (o->dry_run)
		return (forget(r, c, o, res));
	/* One forget at a time, its plan made from the repository as it is
	 * then: another's rebases and forgets taken in first. */
	if (repo_lock_forget(r, 0, o->wait))
		return (ENGINE_ERROR);
	st = engine_catalog_update(r, c) < 0 ? ENGINE_ERROR :
	    forget(r, c, o, res);
	repo_unlock_forget(r);
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
