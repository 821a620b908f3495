/*
 * The runs of `coffer run` in the catalog (catalog.c's run tables):
 * what each run did, for `coffer log`, for the metrics file and for the
 * schedules of jobs that leave no other trace (a prune, a drill).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/catalog-history.h"
#include "coffer/log.h"

int
catalog_run_add(struct catalog *c, struct catalog_run *r,
    const struct catalog_run_action *a, size_t n)
{
	sqlite3_stmt *st = NULL;
	size_t i;

	if (catalog_begin(c))
		return (-1);
	if ((st = cat_prepare(c, "INSERT INTO run(rid, time_ns, wall_ns,"
	    " seconds, host, user, policy, status)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", "record a run")) ==
	    NULL)
		goto err;
	cat_bind_text(st, 1, r->rid);
	sqlite3_bind_int64(st, 2, r->time_ns);
	sqlite3_bind_int64(st, 3, r->wall_ns);
	sqlite3_bind_double(st, 4, r->seconds);
	cat_bind_text(st, 5, r->host);
	cat_bind_text(st, 6, r->user);
	cat_bind_text(st, 7, r->policy);
	sqlite3_bind_int(st, 8, r->status);
	if (sqlite3_step(st) != SQLITE_DONE)
		goto sqlerr;
	sqlite3_finalize(st);
	r->id = sqlite3_last_insert_rowid(c->db);
	if ((st = cat_prepare(c, "INSERT INTO run_action(run_id, seq, kind,"
	    " subject, level, slot_ns, status, done, seconds, detail)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	    "record a run")) == NULL)
		goto err;
	for (i = 0; i < n; i++) {
		sqlite3_reset(st);
		sqlite3_bind_int64(st, 1, r->id);
		sqlite3_bind_int64(st, 2, (int64_t)i + 1);
		cat_bind_text(st, 3, a[i].kind);
		cat_bind_text(st, 4, a[i].subject ? a[i].subject : "");
		cat_bind_text(st, 5, a[i].level);
		if (a[i].slot_ns)
			sqlite3_bind_int64(st, 6, a[i].slot_ns);
		else
			sqlite3_bind_null(st, 6);
		sqlite3_bind_int(st, 7, a[i].status);
		sqlite3_bind_int(st, 8, a[i].done);
		sqlite3_bind_double(st, 9, a[i].seconds);
		cat_bind_text(st, 10, a[i].detail);
		if (sqlite3_step(st) != SQLITE_DONE)
			goto sqlerr;
	}
	sqlite3_finalize(st);
	return (catalog_commit(c));
sqlerr:
	log_error("cannot record a run: %s", sqlite3_errmsg(c->db));
err:
	sqlite3_finalize(st);
	catalog_rollback(c);
	return (-1);
}

int
catalog_run_last(struct catalog *c, const char *kind, const char *subject,
    int64_t *time_ns)
{
	sqlite3_stmt *st;
	int rc, ret = -1;

	*time_ns = 0;
	if ((st = cat_prepare(c, "SELECT max(r.time_ns) FROM run_action a"
	    " JOIN run r ON r.id = a.run_id"
	    " WHERE a.kind = ?1 AND a.subject = ?2 AND a.done = 1",
	    "read the runs")) == NULL)
		return (-1);
	cat_bind_text(st, 1, kind);
	cat_bind_text(st, 2, subject);
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ret = sqlite3_column_type(st, 0) == SQLITE_NULL ? 0 : 1;
		*time_ns = sqlite3_column_int64(st, 0);
	} else
		log_error("cannot read the runs: %s", sqlite3_errmsg(c->db));
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_run_capture(struct catalog *c, const char *subject,
    int64_t *marked_ns, int64_t *end_ns)
{
	sqlite3_stmt *st;
	int rc, ret = -1;

	*marked_ns = *end_ns = 0;
	if ((st = cat_prepare(c, "SELECT a.slot_ns, r.wall_ns, a.seconds"
	    " FROM run_action a JOIN run r ON r.id = a.run_id"
	    " WHERE a.kind = 'backup' AND a.subject = ?1 AND a.done = 1"
	    " AND substr(a.detail, 1, ?3) = ?2"
	    " ORDER BY r.wall_ns DESC LIMIT 1", "read the runs")) == NULL)
		return (-1);
	cat_bind_text(st, 1, subject);
	cat_bind_text(st, 2, CATALOG_RUN_CAPTURE);
	sqlite3_bind_int(st, 3, (int)strlen(CATALOG_RUN_CAPTURE));
	if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		*marked_ns = sqlite3_column_int64(st, 0);
		*end_ns = sqlite3_column_int64(st, 1) +
		    (int64_t)(sqlite3_column_double(st, 2) * 1e9);
		ret = 1;
	} else if (rc == SQLITE_DONE)
		ret = 0;
	else
		log_error("cannot read the runs: %s", sqlite3_errmsg(c->db));
	sqlite3_finalize(st);
	return (ret);
}

static const char *
col_text(sqlite3_stmt *st, int i)
{
	return ((const char *)sqlite3_column_text(st, i));
}

/* A row's text outlives the next step only as a copy. */
static char *
col_dup(sqlite3_stmt *st, int i, int *oom)
{
	char *s = NULL;

	if (sqlite3_column_type(st, i) != SQLITE_NULL &&
	    (s = strdup(col_text(st, i))) == NULL)
		*oom = 1;
	return (s);
}

static void
free_actions(struct catalog_run_action *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		free((char *)v[i].kind);
		free((char *)v[i].subject);
		free((char *)v[i].level);
		free((char *)v[i].detail);
	}
}

int
catalog_run_list(struct catalog *c, int64_t since_ns,
    int (*cb)(void *arg, const struct catalog_run *r,
    const struct catalog_run_action *a, size_t n), void *arg)
{
	sqlite3_stmt *runs = NULL, *acts = NULL;
	struct catalog_run_action *v = NULL, *p;
	struct catalog_run r;
	size_t n = 0, cap = 0;
	int rc, ret = -1, oom = 0;

	if ((runs = cat_prepare(c, "SELECT id, rid, time_ns, wall_ns, seconds,"
	    " host, user, policy, status FROM run WHERE time_ns >= ?1"
	    " ORDER BY time_ns, id", "list the runs")) == NULL ||
	    (acts = cat_prepare(c, "SELECT kind, subject, level,"
	    " coalesce(slot_ns, 0), status, done, seconds, detail"
	    " FROM run_action WHERE run_id = ?1 ORDER BY seq",
	    "list the runs")) == NULL)
		goto out;
	sqlite3_bind_int64(runs, 1, since_ns);
	while ((rc = sqlite3_step(runs)) == SQLITE_ROW) {
		memset(&r, 0, sizeof(r));
		r.id = sqlite3_column_int64(runs, 0);
		snprintf(r.rid, sizeof(r.rid), "%s", col_text(runs, 1));
		r.time_ns = sqlite3_column_int64(runs, 2);
		r.wall_ns = sqlite3_column_int64(runs, 3);
		r.seconds = sqlite3_column_double(runs, 4);
		r.host = col_text(runs, 5);
		r.user = col_text(runs, 6);
		r.policy = col_text(runs, 7);
		r.status = sqlite3_column_int(runs, 8);
		sqlite3_reset(acts);
		sqlite3_bind_int64(acts, 1, r.id);
		free_actions(v, n);
		n = 0;
		while ((rc = sqlite3_step(acts)) == SQLITE_ROW) {
			if (n == cap) {
				cap = cap ? 2 * cap : 8;
				if ((p = reallocarray(v, cap, sizeof(*v))) ==
				    NULL) {
					log_error("out of memory");
					goto out;
				}
				v = p;
			}
			p = &v[n++];
			p->kind = col_dup(acts, 0, &oom);
			p->subject = col_dup(acts, 1, &oom);
			p->level = col_dup(acts, 2, &oom);
			p->slot_ns = sqlite3_column_int64(acts, 3);
			p->status = sqlite3_column_int(acts, 4);
			p->done = sqlite3_column_int(acts, 5);
			p->seconds = sqlite3_column_double(acts, 6);
			p->detail = col_dup(acts, 7, &oom);
			if (oom) {
				log_error("out of memory");
				goto out;
			}
		}
		if (rc != SQLITE_DONE)
			break;
		if ((ret = cb(arg, &r, v, n)) != 0)
			goto out;
	}
	if (rc != SQLITE_DONE) {
		log_error("cannot list the runs: %s", sqlite3_errmsg(c->db));
		goto out;
	}
	ret = 0;
out:
	free_actions(v, n);
	free(v);
	sqlite3_finalize(acts);
	sqlite3_finalize(runs);
	return (ret);
}

int
catalog_run_newest(struct catalog *c, int (*cb)(void *arg, const char *kind,
    const char *subject, int done, int64_t time_ns), void *arg)
{
	sqlite3_stmt *st;
	int rc, ret = 0;

	if ((st = cat_prepare(c, "SELECT a.kind, a.subject, a.done != 0,"
	    " max(r.time_ns) FROM run_action a JOIN run r ON r.id = a.run_id"
	    " GROUP BY 1, 2, 3", "read the runs")) == NULL)
		return (-1);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if ((ret = cb(arg, col_text(st, 0), col_text(st, 1),
		    sqlite3_column_int(st, 2), sqlite3_column_int64(st, 3))) !=
		    0)
			break;
	if (ret == 0 && rc != SQLITE_DONE) {
		log_error("cannot read the runs: %s", sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}
