#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/log.h"

/*
 * The difference between the views of two snapshots, in one query: each
 * view is CAT_NEWEST over its own chain (the same text as catalog_entries),
 * by path id, so that no path name is read for the rows that a newer link
 * hides nor for the paths that did not change; the views are joined on
 * path id, classified, and only the changes get their name and are sorted
 * by it (BLOB, memcmp order).  The chains may be of different fulls.
 *
 * The join is a full outer join written as a LEFT JOIN (every path of a,
 * with b's row if any) and the anti-join the other way (paths only in b).
 * SQLite's FULL JOIN would read the same, but it never builds an automatic
 * index on the right-hand side of a RIGHT or FULL JOIN (where.c): the plan
 * is a nested scan of vb for each row of va, quadratic (a 100,000-path
 * diff did not finish in minutes).  Here each view is materialized once
 * (MATERIALIZED: it is read twice) and each join probes an automatic
 * index on path_id: about the cost of two resolutions.
 *
 * Modified: type, content (content id or size), symlink target or device
 * number.  Metadata: otherwise permissions, owner, mtime, extended
 * attributes or ACL.  ctime, inode, device and link count are left out:
 * a copy, a restore or a reboot changes them without changing the file.
 * uname and gname follow uid and gid.  IS NOT compares the nullable
 * columns (NULL IS NOT NULL is false).
 */
#define SIDE_COLS(v) v ".depth, " CAT_ENTRY_COLS(v ".")

static const char diff_sql[] =
	"WITH RECURSIVE " CAT_CHAIN("ca", "?1") ", " CAT_CHAIN("cb", "?2") ","
	" va AS MATERIALIZED ("
	CAT_NEWEST("ca", "e.path_id AS path_id", "", "e.path_id") "),"
	" vb AS MATERIALIZED ("
	CAT_NEWEST("cb", "e.path_id AS path_id", "", "e.path_id") "),"
	" d AS ("
	"  SELECT va.path_id AS path_id, CASE"
	"   WHEN vb.path_id IS NULL THEN 2"
	"   WHEN va.kind <> vb.kind OR va.content_id IS NOT vb.content_id"
	"    OR va.size <> vb.size OR va.target IS NOT vb.target"
	"    OR va.rdev <> vb.rdev THEN 3"
	"   WHEN va.mode <> vb.mode OR va.uid <> vb.uid OR va.gid <> vb.gid"
	"    OR va.mtime_ns <> vb.mtime_ns OR va.xattrs IS NOT vb.xattrs"
	"    OR va.acl IS NOT vb.acl THEN 4"
	"  END AS change, " SIDE_COLS("va") ", " SIDE_COLS("vb")
	"  FROM va LEFT JOIN vb ON vb.path_id = va.path_id"
	"  UNION ALL"
	"  SELECT vb.path_id, 1, " SIDE_COLS("va") ", " SIDE_COLS("vb")
	"  FROM vb LEFT JOIN va ON va.path_id = vb.path_id"
	"  WHERE va.path_id IS NULL)"
	" SELECT d.change, p.name, d.*"
	" FROM d CROSS JOIN path p ON p.id = d.path_id"
	" WHERE d.change IS NOT NULL"
	" ORDER BY p.name";

/* Columns of a result row: change, name, then d.*: path_id, change, and
 * for each side depth and the entry columns.  COL_A, COL_B: the first
 * entry column of each side. */
#define COL_A 5
#define COL_B (COL_A + CAT_ENTRY_NCOLS + 1)

int
catalog_diff(struct catalog *c, int64_t a, int64_t b,
    int (*cb)(void *arg, int change, const struct entry *ea,
    const struct entry *eb), void *arg)
{
	struct entry ea, eb;
	sqlite3_stmt *st;
	int rc, change, ret = 0;

	if (cat_snapshot_exists(c, a) || cat_snapshot_exists(c, b))
		return (-1);
	/* Its own statement: cb may use the catalog. */
	if ((st = cat_prepare(c, diff_sql, "compare snapshots")) == NULL)
		return (-1);
	sqlite3_bind_int64(st, 1, a);
	sqlite3_bind_int64(st, 2, b);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		change = sqlite3_column_int(st, 0);
		/* The strings stay valid until the next step. */
		memset(&ea, 0, sizeof(ea));
		memset(&eb, 0, sizeof(eb));
		ea.path = eb.path = (const char *)sqlite3_column_text(st, 1);
		if (ea.path == NULL) {
			log_error("cannot compare snapshots %lld and %lld: "
			    "out of memory", (long long)a, (long long)b);
			ret = -1;
			break;
		}
		if (change != DIFF_ADDED)
			cat_col_entry(st, COL_A, &ea);
		if (change != DIFF_DELETED)
			cat_col_entry(st, COL_B, &eb);
		if ((ret = cb(arg, change, change == DIFF_ADDED ? NULL : &ea,
		    change == DIFF_DELETED ? NULL : &eb)) != 0)
			break;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		log_error("cannot compare snapshots %lld and %lld: %s",
		    (long long)a, (long long)b, sqlite3_errmsg(c->db));
		ret = -1;
	}
	sqlite3_finalize(st);
	return (ret);
}
