/*
 * Which key unlocked each run that wrote the repository, and when
 * (schema 9's key_use): what `key list` shows as a slot's last use.  The
 * rows go to the repository in journal records (journal.c), so that a
 * rebuilt catalog, or another host's, shows them too.
 */
#include <string.h>

#include "catalog-int.h"
#include "coffer/log.h"

int
catalog_key_use_add(struct catalog *c, const char *key, int64_t time_ns,
    const char *host)
{
	sqlite3_stmt *st;
	int rc;

	if (key == NULL || *key == '\0' || strlen(key) > CATALOG_KEY_NAME_MAX) {
		log_error("internal error: bad key name");
		return (-1);
	}
	if ((st = cat_prepare(c, "INSERT INTO key_use(key, time_ns, host)"
	    " VALUES (?1, ?2, ?3) ON CONFLICT(key, time_ns) DO NOTHING",
	    "record the key's use")) == NULL)
		return (-1);
	cat_bind_text(st, 1, key);
	sqlite3_bind_int64(st, 2, time_ns);
	cat_bind_text(st, 3, host);
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		log_error("cannot record the key's use: %s",
		    sqlite3_errmsg(c->db));
		return (-1);
	}
	return (0);
}

int
catalog_key_use_last(struct catalog *c,
    int (*cb)(void *arg, const char *key, int64_t time_ns, const char *host),
    void *arg)
{
	sqlite3_stmt *st;
	int rc, ret = 0;

	/* SQLite takes the bare columns from the row of the max. */
	if ((st = cat_prepare(c, "SELECT key, max(time_ns), host FROM key_use"
	    " GROUP BY key ORDER BY key", "read the keys' last use")) == NULL)
		return (-1);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		if ((ret = cb(arg, (const char *)sqlite3_column_text(st, 0),
		    sqlite3_column_int64(st, 1),
		    (const char *)sqlite3_column_text(st, 2))) != 0)
			break;
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		log_error("cannot read the keys' last use: %s",
		    sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}
