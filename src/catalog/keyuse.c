/*
 * Which key unlocked each run that wrote the repository, and when
 * (the key_use table): what `key list` shows as a slot's last use.  The
 * rows go to the repository in journal records (journal.c), so that a
 * rebuilt catalog, or another host's, shows them too.  And what this host
 * remembers of the keys' shared state: the newest coffer.conf generation
 * seen (the state table), the slot that last opened.
 */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "catalog-int.h"
#include "coffer/catalog-history.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"

int
catalog_key_use_add(struct catalog *c, const char *key, int64_t time_ns,
    const char *host)
{
	if (key == NULL || *key == '\0' || strlen(key) > CATALOG_KEY_NAME_MAX) {
		log_error("internal error: bad key name");
		return (-1);
	}
	return (cat_run(c, "INSERT INTO key_use(key, time_ns, host)"
	    " VALUES (?1, ?2, ?3) ON CONFLICT(key, time_ns) DO NOTHING",
	    "record the key's use", CAT_VALS(CAT_TEXT(key), CAT_INT(time_ns),
	    CAT_TEXT(host)), NULL, NULL));
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

int
catalog_generation_get(struct catalog *c, uint64_t *gen)
{
	int64_t v = 0;

	if (cat_run(c, "SELECT value FROM state WHERE name ="
	    " 'conf_generation'", "read the catalog's state", NULL, 0,
	    cat_row_int64, &v) < 0)
		return (-1);
	*gen = (uint64_t)v;
	return (0);
}

int
catalog_generation_raise(struct catalog *c, uint64_t gen)
{
	if (gen == 0 || gen > INT64_MAX)
		return (0);
	return (cat_run(c, "INSERT INTO state(name, value)"
	    " VALUES ('conf_generation', ?1) ON CONFLICT(name) DO UPDATE"
	    " SET value = max(value, excluded.value)",
	    "write the catalog's state", CAT_VALS(CAT_INT(gen)), NULL, NULL));
}

/* The hint's file: the catalog's path and ".slot". */
static int
hint_path(const char *catpath, char *out, size_t size)
{
	int n = snprintf(out, size, "%s.slot", catpath);

	return (n < 0 || (size_t)n >= size ? -1 : 0);
}

void
catalog_slot_hint_get(const char *catpath, char *out, size_t size)
{
	char path[PATH_MAX], buf[CATALOG_KEY_NAME_MAX + 2];
	struct stat st;
	ssize_t n;
	int fd;

	if (size > 0)
		out[0] = '\0';
	if (catpath == NULL || size == 0 || hint_path(catpath, path,
	    sizeof(path)))
		return;
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
	    O_CLOEXEC)) == -1)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    (n = read(fd, buf, sizeof(buf) - 1)) > 0) {
		buf[n] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		if (strspn(buf, "0123456789abcdef") == strlen(buf) &&
		    strlen(buf) < size)
			memcpy(out, buf, strlen(buf) + 1);
	}
	close(fd);
}

void
catalog_slot_hint_set(const char *catpath, const char *name)
{
	char path[PATH_MAX], now[CATALOG_KEY_NAME_MAX + 1], line[80];
	int n;

	if (catpath == NULL || name == NULL || *name == '\0' ||
	    hint_path(catpath, path, sizeof(path)))
		return;
	catalog_slot_hint_get(catpath, now, sizeof(now));
	if (strcmp(now, name) == 0)
		return;
	n = snprintf(line, sizeof(line), "%s\n", name);
	if (n > 0 && (size_t)n < sizeof(line))
		(void)fsutil_write_file(path, line, (size_t)n, 0600, 1);
}
