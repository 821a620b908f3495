#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/catalog-record.h"
#include "coffer/fmt.h"
#include "coffer/log.h"
#include "coffer/name.h"

/* Column list shared by get, find and list; fill() reads it by index. */
#define SNAPSHOT_SELECT                                                     \
	"SELECT s.id, s.sid, s.dataset_id, d.name, s.level, s.parent_id,"  \
	" s.full_id, p.sid, s.depth, s.state, s.started_ns, s.finished_ns," \
	" s.host, s.source, s.files, s.dirs, s.others, s.deleted,"          \
	" s.bytes_read, s.bytes_new, s.bytes_stored, s.warnings,"           \
	" s.record_pack, s.tags, s.parts, s.revision"                       \
	" FROM snapshot s JOIN dataset d ON d.id = s.dataset_id"            \
	" LEFT JOIN snapshot p ON p.id = s.parent_id "

static void
copy_col(char *dst, size_t size, sqlite3_stmt *st, int i)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	size_t n = t ? strlen((const char *)t) : 0;

	if (n >= size)
		n = size - 1;
	if (n)
		memcpy(dst, t, n);
	dst[n] = '\0';
}

/* Fill *s from a SNAPSHOT_SELECT row.  *s holds no strings on entry. */
static int
fill(sqlite3_stmt *st, struct catalog_snapshot *s)
{
	memset(s, 0, sizeof(*s));
	s->id = sqlite3_column_int64(st, 0);
	copy_col(s->sid, sizeof(s->sid), st, 1);
	s->dataset_id = sqlite3_column_int64(st, 2);
	s->level = sqlite3_column_int(st, 4);
	s->parent_id = sqlite3_column_int64(st, 5);
	s->full_id = sqlite3_column_int64(st, 6);
	copy_col(s->parent_sid, sizeof(s->parent_sid), st, 7);
	s->depth = sqlite3_column_int(st, 8);
	s->state = sqlite3_column_int(st, 9);
	s->started_ns = sqlite3_column_int64(st, 10);
	s->finished_ns = sqlite3_column_int64(st, 11);
	s->files = sqlite3_column_int64(st, 14);
	s->dirs = sqlite3_column_int64(st, 15);
	s->others = sqlite3_column_int64(st, 16);
	s->deleted = sqlite3_column_int64(st, 17);
	s->bytes_read = sqlite3_column_int64(st, 18);
	s->bytes_new = sqlite3_column_int64(st, 19);
	s->bytes_stored = sqlite3_column_int64(st, 20);
	s->warnings = sqlite3_column_int64(st, 21);
	copy_col(s->record_pack, sizeof(s->record_pack), st, 22);
	s->parts = sqlite3_column_int(st, 24);
	s->revision = sqlite3_column_int64(st, 25);
	if (cat_col_strdup(st, 3, &s->dataset) ||
	    cat_col_strdup(st, 12, &s->host) ||
	    cat_col_strdup(st, 13, &s->source) ||
	    cat_col_strdup(st, 23, &s->tags)) {
		catalog_snapshot_release(s);
		return (-1);
	}
	return (0);
}

void
catalog_snapshot_release(struct catalog_snapshot *s)
{
	free(s->dataset);
	free(s->host);
	free(s->source);
	free(s->tags);
	s->dataset = s->host = s->source = s->tags = NULL;
}

/* Byte order of two tags of lengths an and bn. */
static int
tag_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);

	return (c != 0 ? c : an < bn ? -1 : an > bn);
}

int
catalog_tags_ok(const char *s)
{
	const char *p, *prev = NULL;
	size_t n, prevn = 0;

	if (strlen(s) > CATALOG_TAGS_MAX)
		return (0);
	for (p = s; *p; p += n + (p[n] == ',')) {
		n = name_span(p);
		if (n == 0 || n > 64 || (p[n] != ',' && p[n] != '\0') ||
		    (p[n] == ',' && p[n + 1] == '\0'))
			return (0);
		/* Sorted, each once. */
		if (prev && tag_cmp(prev, prevn, p, n) >= 0)
			return (0);
		prev = p;
		prevn = n;
	}
	return (1);
}

/*
 * A non-full snapshot must continue its parent's chain: same dataset,
 * same full, one link deeper; a differential sits right on the full.
 * full_id and depth left at 0 are taken from the parent.  Resolution
 * trusts these columns, so a wrong one is refused here, once.
 */
static int
check_parent(struct catalog *c, struct catalog_snapshot *s)
{
	sqlite3_stmt *st;
	int64_t dataset_id, full_id;
	int depth, level, rc, ret = -1;

	if ((st = cat_prepare(c, "SELECT dataset_id, full_id, depth, level"
	    " FROM snapshot WHERE id = ?1", "look up a snapshot")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, s->parent_id);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		if (rc == SQLITE_DONE)
			log_error("cannot add snapshot '%s': no parent "
			    "snapshot %lld", s->sid, (long long)s->parent_id);
		else
			log_error("cannot look up snapshot %lld: %s",
			    (long long)s->parent_id, sqlite3_errmsg(c->db));
		goto out;
	}
	dataset_id = sqlite3_column_int64(st, 0);
	full_id = sqlite3_column_int64(st, 1);
	depth = sqlite3_column_int(st, 2);
	level = sqlite3_column_int(st, 3);
	if (s->full_id == 0)
		s->full_id = full_id;
	if (s->depth == 0)
		s->depth = depth + 1;
	if (dataset_id != s->dataset_id || full_id != s->full_id ||
	    s->depth != depth + 1 ||
	    (s->level == LEVEL_DIFFERENTIAL && level != LEVEL_FULL)) {
		log_error("cannot add snapshot '%s': it does not continue the "
		    "chain of its parent %lld", s->sid,
		    (long long)s->parent_id);
		goto out;
	}
	ret = 0;
out:
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_snapshot_create(struct catalog *c, struct catalog_snapshot *s)
{
	sqlite3_stmt *st = NULL;

	if (!cat_is_hex(s->sid, SNAPSHOT_ID_HEX)) {
		log_error("bad snapshot id '%s'", s->sid);
		return (-1);
	}
	if (s->level < LEVEL_FULL || s->level > LEVEL_INCREMENTAL ||
	    s->state < SNAP_RUNNING || s->state > SNAP_FAILED) {
		log_error("cannot add snapshot '%s': bad level or state",
		    s->sid);
		return (-1);
	}
	if ((s->level == LEVEL_FULL) != (s->parent_id == 0)) {
		log_error("cannot add snapshot '%s': %s", s->sid,
		    s->level == LEVEL_FULL ? "a full has no parent" :
		    "only a full has no parent");
		return (-1);
	}
	if (s->level != LEVEL_FULL && check_parent(c, s))
		return (-1);
	if (cat_savepoint(c))
		return (-1);
	if (s->tags != NULL && !catalog_tags_ok(s->tags)) {
		log_error("cannot add snapshot '%s': bad tags", s->sid);
		return (-1);
	}
	if ((st = cat_prepare(c, "INSERT INTO snapshot(sid, dataset_id,"
	    " level, parent_id, full_id, depth, state, started_ns, host,"
	    " source, tags) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
	    " ?11)", "add a snapshot")) == NULL)
		goto err;
	cat_bind_text(st, 1, s->sid);
	sqlite3_bind_int64(st, 2, s->dataset_id);
	sqlite3_bind_int(st, 3, s->level);
	if (s->level != LEVEL_FULL) {
		sqlite3_bind_int64(st, 4, s->parent_id);
		sqlite3_bind_int64(st, 5, s->full_id);
		sqlite3_bind_int(st, 6, s->depth);
	} else {
		/* Its own id, set below once known. */
		sqlite3_bind_int(st, 6, 0);
	}
	sqlite3_bind_int(st, 7, s->state);
	sqlite3_bind_int64(st, 8, s->started_ns);
	cat_bind_text(st, 9, s->host);
	cat_bind_text(st, 10, s->source);
	cat_bind_text(st, 11, s->tags && *s->tags ? s->tags : NULL);
	if (sqlite3_step(st) != SQLITE_DONE) {
		log_error("cannot add snapshot '%s': %s", s->sid,
		    sqlite3_errmsg(c->db));
		goto err;
	}
	sqlite3_finalize(st);
	st = NULL;
	s->id = sqlite3_last_insert_rowid(c->db);
	if (s->level == LEVEL_FULL) {
		if (cat_run(c, "UPDATE snapshot SET full_id = id WHERE id = ?1",
		    "add a snapshot", CAT_VALS(CAT_INT(s->id)), NULL, NULL))
			goto err;
		s->full_id = s->id;
		s->depth = 0;
	}
	if (cat_release(c))
		goto err;
	return (0);
err:
	sqlite3_finalize(st);
	cat_rollback_to(c);
	s->id = 0;
	return (-1);
}

int
catalog_snapshot_update(struct catalog *c, const struct catalog_snapshot *s)
{
	sqlite3_stmt *st;
	int ret = -1;

	if (s->record_pack[0] != '\0' && !cat_is_hex(s->record_pack, 32)) {
		log_error("bad pack name '%s'", s->record_pack);
		return (-1);
	}
	if ((st = cat_prepare(c, "UPDATE snapshot SET state = ?2,"
	    " finished_ns = ?3, files = ?4, dirs = ?5, others = ?6,"
	    " deleted = ?7, bytes_read = ?8, bytes_new = ?9,"
	    " bytes_stored = ?10, warnings = ?11, record_pack = ?12,"
	    " parts = ?13 WHERE id = ?1", "update a snapshot")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, s->id);
	sqlite3_bind_int(st, 2, s->state);
	if (s->finished_ns != 0)
		sqlite3_bind_int64(st, 3, s->finished_ns);
	sqlite3_bind_int64(st, 4, s->files);
	sqlite3_bind_int64(st, 5, s->dirs);
	sqlite3_bind_int64(st, 6, s->others);
	sqlite3_bind_int64(st, 7, s->deleted);
	sqlite3_bind_int64(st, 8, s->bytes_read);
	sqlite3_bind_int64(st, 9, s->bytes_new);
	sqlite3_bind_int64(st, 10, s->bytes_stored);
	sqlite3_bind_int64(st, 11, s->warnings);
	cat_bind_text(st, 12, s->record_pack[0] ? s->record_pack : NULL);
	if (s->parts > 0)
		sqlite3_bind_int(st, 13, s->parts);
	if (sqlite3_step(st) != SQLITE_DONE) {
		log_error("cannot update snapshot '%s': %s", s->sid,
		    sqlite3_errmsg(c->db));
		goto out;
	}
	if (sqlite3_changes(c->db) != 1) {
		log_error("cannot update snapshot: no snapshot with catalog "
		    "id %lld", (long long)s->id);
		goto out;
	}
	ret = 0;
out:
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_snapshot_fail_running(struct catalog *c, int *n)
{
	if (cat_exec(c, "UPDATE snapshot SET state = 2 WHERE state = 0",
	    "mark interrupted snapshots failed"))
		return (-1);
	if (n != NULL)
		*n = sqlite3_changes(c->db);
	return (0);
}

int
catalog_snapshot_fail(struct catalog *c, int64_t id, int64_t finished_ns)
{
	return (cat_run(c, "UPDATE snapshot SET state = 2,"
	    " finished_ns = ?2 WHERE id = ?1 AND state = 0",
	    "mark a snapshot failed", CAT_VALS(CAT_INT(id),
	    CAT_INT(finished_ns)), NULL, NULL));
}

/* Step st for one snapshot: 1 found, 0 none, -1 error.  With ambiguous
 * set, a second row means the name is ambiguous (*ambiguous = 1, 0). */
static int
fetch_one(struct catalog *c, sqlite3_stmt *st, struct catalog_snapshot *s,
    const char *name, int *ambiguous)
{
	int rc;

	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return (0);
	if (rc != SQLITE_ROW)
		goto err;
	if (fill(st, s))
		return (-1);
	if (ambiguous == NULL)
		return (1);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		return (1);
	catalog_snapshot_release(s);
	if (rc == SQLITE_ROW) {
		*ambiguous = 1;
		return (0);
	}
err:
	log_error("cannot look up snapshot '%s': %s", name,
	    sqlite3_errmsg(c->db));
	return (-1);
}

int
catalog_snapshot_find(struct catalog *c, const char *name,
    struct catalog_snapshot *s)
{
	sqlite3_stmt *st = NULL;
	const char *at = strrchr(name, '@');
	char lo[SNAPSHOT_ID_HEX + 1], hi[SNAPSHOT_ID_HEX + 2];
	size_t i, n = strlen(name);
	int hex, ret, ambiguous = 0;

	if (at != NULL) {
		/*
		 * DATASET@latest, DATASET@full: the newest complete one (a
		 * full); DATASET@TIME: the newest complete one taken at or
		 * before TIME, a date alone meaning by the end of that day.
		 */
		int full = strcmp(at + 1, "full") == 0, date_only = 0;
		int64_t until = INT64_MAX;

		if (at == name || (!full && strcmp(at + 1, "latest") != 0 &&
		    fmt_parse_time(at + 1, &until, &date_only))) {
			log_error("no snapshot '%s' (names are a snapshot id "
			    "prefix, DATASET@latest, DATASET@full or "
			    "DATASET@TIME, as 2026-11-01T02:15:00Z)", name);
			return (0);
		}
		if (date_only)
			until += 86400LL * 1000000000 - 1;
		st = cat_prepare(c, full ?
		    SNAPSHOT_SELECT "WHERE d.name = ?1 AND s.state = 1"
		    " AND s.level = 0 ORDER BY s.started_ns DESC, s.id DESC"
		    " LIMIT 1" :
		    SNAPSHOT_SELECT "WHERE d.name = ?1 AND s.state = 1"
		    " AND s.started_ns <= ?2"
		    " ORDER BY s.started_ns DESC, s.id DESC LIMIT 1",
		    "look up a snapshot");
		if (st == NULL)
			return (-1);
		sqlite3_bind_text(st, 1, name, (int)(at - name),
		    SQLITE_STATIC);
		if (!full)
			sqlite3_bind_int64(st, 2, until);
		ret = fetch_one(c, st, s, name, NULL);
		goto out;
	}

	hex = n > 0 && strspn(name, "0123456789abcdefABCDEF") == n;
	if (hex && n < 4) {
		log_error("snapshot name '%s' is too short: give at least 4 "
		    "hex digits", name);
		return (0);
	}
	if (!hex || n > SNAPSHOT_ID_HEX) {
		log_error("no snapshot '%s'", name);
		return (0);
	}
	/*
	 * A prefix is a range of the sid index: [prefix, prefix "g").  Every
	 * id starting with the prefix sorts inside it ('g' follows all hex
	 * digits), and no LIKE pattern is built from the user's input.
	 */
	for (i = 0; i < n; i++)
		lo[i] = (char)tolower((unsigned char)name[i]);
	lo[n] = '\0';
	memcpy(hi, lo, n);
	hi[n] = 'g';
	hi[n + 1] = '\0';
	if ((st = cat_prepare(c, SNAPSHOT_SELECT
	    "WHERE s.sid >= ?1 AND s.sid < ?2 ORDER BY s.sid LIMIT 2",
	    "look up a snapshot")) == NULL)
		return (-1);
	cat_bind_text(st, 1, lo);
	cat_bind_text(st, 2, hi);
	ret = fetch_one(c, st, s, name, &ambiguous);
	if (ambiguous)
		log_error("snapshot name '%s' is ambiguous", name);
out:
	if (ret == 0 && !ambiguous)
		log_error("no snapshot '%s'", name);
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_snapshot_find_sid(struct catalog *c, const char *sid,
    struct catalog_snapshot *s)
{
	sqlite3_stmt *st;
	int rc, ret;

	if ((st = cat_prepare(c, SNAPSHOT_SELECT "WHERE s.sid = ?1",
	    "look up a snapshot")) == NULL)
		return (-1);
	cat_bind_text(st, 1, sid);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		ret = fill(st, s) ? -1 : 1;
	else if (rc == SQLITE_DONE)
		ret = 0;
	else {
		log_error("cannot look up snapshot %s: %s", sid,
		    sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_snapshot_get(struct catalog *c, int64_t id,
    struct catalog_snapshot *s)
{
	sqlite3_stmt *st;
	int ret;

	if ((st = cat_prepare(c, SNAPSHOT_SELECT "WHERE s.id = ?1",
	    "look up a snapshot")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, id);
	ret = sqlite3_step(st);
	if (ret == SQLITE_ROW) {
		ret = fill(st, s);
	} else {
		if (ret == SQLITE_DONE)
			log_error("no snapshot with catalog id %lld",
			    (long long)id);
		else
			log_error("cannot look up snapshot %lld: %s",
			    (long long)id, sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_snapshot_list(struct catalog *c, const char *dataset,
    int (*cb)(void *arg, const struct catalog_snapshot *s), void *arg)
{
	struct catalog_snapshot s;
	sqlite3_stmt *st;
	int rc, ret = 0;

	/* Its own statement, not a cached one: cb may use the catalog. */
	if ((st = cat_prepare(c, SNAPSHOT_SELECT
	    "WHERE ?1 IS NULL OR d.name = ?1 ORDER BY s.started_ns, s.id",
	    "list snapshots")) == NULL)
		return (-1);
	cat_bind_text(st, 1, dataset);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (fill(st, &s)) {
			ret = -1;
			break;
		}
		ret = cb(arg, &s);
		catalog_snapshot_release(&s);
		if (ret != 0)
			break;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		log_error("cannot list snapshots: %s", sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}

/*
 * The base of a new snapshot of the given level.  "Newest" is by start
 * time, then catalog id (a later row for equal clocks), as for @latest:
 * the snapshot_dataset index (dataset_id, started_ns) gives that order
 * with the rowid, so the scan stops at the first complete one.
 */
int
catalog_snapshot_base(struct catalog *c, int64_t dataset_id, int level,
    struct catalog_snapshot *base)
{
	sqlite3_stmt *st;
	char what[64];
	int ret;

	if (level == LEVEL_FULL)
		return (0);	/* a full has no base */
	if (level != LEVEL_DIFFERENTIAL && level != LEVEL_INCREMENTAL) {
		log_error("cannot find the base of a snapshot: bad level %d",
		    level);
		return (-1);
	}
	if ((st = cat_prepare(c, SNAPSHOT_SELECT
	    "WHERE s.dataset_id = ?1 AND s.state = 1"
	    " AND (?2 IS NULL OR s.level = ?2)"
	    " ORDER BY s.started_ns DESC, s.id DESC LIMIT 1",
	    "look up the base snapshot")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, dataset_id);
	if (level == LEVEL_DIFFERENTIAL)
		sqlite3_bind_int(st, 2, LEVEL_FULL);
	snprintf(what, sizeof(what), "base of a %s of dataset %lld",
	    catalog_level_name(level), (long long)dataset_id);
	ret = fetch_one(c, st, base, what, NULL);
	sqlite3_finalize(st);
	return (ret);
}

int
catalog_snapshot_part_add(struct catalog *c, int64_t snapshot_id, int idx,
    const struct catalog_record_part *where)
{
	if (!cat_is_hex(where->pack, 32)) {
		log_error("bad pack name '%s'", where->pack);
		return (-1);
	}
	return (cat_run(c, "INSERT OR REPLACE INTO snapshot_part"
	    "(snapshot_id, idx, pack, rid) VALUES (?1, ?2, ?3, ?4)",
	    "record where a snapshot record's part is",
	    CAT_VALS(CAT_INT(snapshot_id), CAT_INT(idx), CAT_TEXT(where->pack),
	    CAT_BLOB(where->rid, sizeof(where->rid))), NULL, NULL));
}

int
catalog_snapshot_parts_set(struct catalog *c, int64_t snapshot_id,
    int parts, const struct catalog_record_part *partv)
{
	static const char what[] = "record a snapshot's parts";
	int i;

	if (parts < 1) {
		log_error("internal error: a snapshot record of %d parts",
		    parts);
		return (-1);
	}
	if (cat_savepoint(c))
		return (-1);
	if (cat_run(c, "DELETE FROM snapshot_part WHERE snapshot_id = ?1",
	    what, CAT_VALS(CAT_INT(snapshot_id)), NULL, NULL))
		goto err;
	for (i = 0; i + 1 < parts; i++)
		if (catalog_snapshot_part_add(c, snapshot_id, i, &partv[i]))
			goto err;
	if (cat_run(c, "UPDATE snapshot SET parts = ?2 WHERE id = ?1", what,
	    CAT_VALS(CAT_INT(snapshot_id), CAT_INT(parts)), NULL, NULL))
		goto err;
	return (cat_release(c));
err:
	cat_rollback_to(c);
	return (-1);
}

int
catalog_snapshot_part_packs(struct catalog *c, int64_t snapshot_id,
    char ***packs, size_t *n)
{
	return (cat_strings(c, "SELECT DISTINCT pack FROM snapshot_part"
	    " WHERE snapshot_id = ?1 ORDER BY pack",
	    "find the packs of a snapshot's parts",
	    CAT_VALS(CAT_INT(snapshot_id)), packs, n));
}

int
catalog_snapshot_revise(struct catalog *c, int64_t id)
{
	static const char *const sql[] = {
		"UPDATE snapshot SET revision = revision + 1, parts = NULL,"
		" record_pack = NULL WHERE id = ?1",
		"DELETE FROM snapshot_part WHERE snapshot_id = ?1",
	};
	size_t i;

	if (cat_savepoint(c))
		return (-1);
	for (i = 0; i < sizeof(sql) / sizeof(sql[0]); i++)
		if (cat_run(c, sql[i], "revise a snapshot",
		    CAT_VALS(CAT_INT(id)), NULL, NULL))
			goto err;
	return (cat_release(c));
err:
	cat_rollback_to(c);
	return (-1);
}
