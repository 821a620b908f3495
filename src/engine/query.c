/*
 * The listing commands' reads of the catalog
 * (include/coffer/engine-query.h).
 */
#include "coffer/engine-query.h"

int
engine_snapshot_find(struct catalog *c, const char *name,
    struct catalog_snapshot *s)
{
	return (catalog_snapshot_find(c, name, s));
}

int
engine_snapshot_list(struct catalog *c, const char *dataset,
    int (*cb)(void *arg, const struct catalog_snapshot *s), void *arg)
{
	return (catalog_snapshot_list(c, dataset, cb, arg));
}

int
engine_entry_list(struct catalog *c, int64_t snapshot_id,
    const char *under, int (*cb)(void *arg, const struct entry *e),
    void *arg)
{
	struct catalog_iter *it;
	struct entry e;
	int rc = 0, ret = 0;

	if ((it = catalog_entries(c, snapshot_id, under)) == NULL)
		return (-1);
	while (ret == 0 && (rc = catalog_iter_next(it, &e)) == 1)
		ret = cb(arg, &e);
	catalog_iter_free(it);
	return (ret != 0 ? ret : rc < 0 ? -1 : 0);
}

int
engine_diff(struct catalog *c, int64_t a, int64_t b,
    int (*cb)(void *arg, int change, const struct entry *ea,
    const struct entry *eb), void *arg)
{
	return (catalog_diff(c, a, b, cb, arg));
}

int
engine_drill_list(struct catalog *c, const char *dataset, int latest,
    int (*cb)(void *arg, const struct catalog_drill *d), void *arg)
{
	return (catalog_drill_list(c, dataset, latest, cb, arg));
}

int
engine_verify_run_list(struct catalog *c,
    int (*cb)(void *arg, const struct catalog_verify_run *v), void *arg)
{
	return (catalog_verify_run_list(c, cb, arg));
}

int
engine_run_list(struct catalog *c, int64_t since_ns,
    int (*cb)(void *arg, const struct catalog_run *r,
    const struct catalog_run_action *a, size_t n), void *arg)
{
	return (catalog_run_list(c, since_ns, cb, arg));
}

int
engine_bundle_list(struct catalog *c, int exported, const char *target,
    int (*cb)(void *arg, const struct catalog_bundle *b), void *arg)
{
	return (catalog_bundle_list(c, exported, target, cb, arg));
}
