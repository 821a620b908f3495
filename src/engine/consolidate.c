/*
 * Consolidate: a synthetic full from catalog rows alone.  The new
 * snapshot's own rows are a copy of the source's resolved chain, so its
 * signed record makes it restorable by itself after a catalog rebuild.
 */
#include <stdlib.h>
#include <string.h>

#include "coffer/engine.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "engine-int.h"

enum engine_result
engine_consolidate(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *src, struct consolidate_result *res)
{
	struct catalog_snapshot s;
	struct packer p;
	uint8_t sid[SNAPSHOT_ID_HEX / 2];
	int64_t counts[3];
	double t0 = now_monotonic();
	int status = ENGINE_ERROR, in_txn = 0, running = 0;

	memset(res, 0, sizeof(*res));
	memset(&s, 0, sizeof(s));
	if (engine_need_complete(src))
		return (ENGINE_REFUSED);
	if (packer_init(&p, r, c, 0))
		goto out;
	ccrypto_random(sid, sizeof(sid));
	hex_encode(s.sid, sid, sizeof(sid));
	s.dataset_id = src->dataset_id;
	s.level = LEVEL_FULL;
	s.state = SNAP_RUNNING;
	s.started_ns = now_realtime_ns();
	s.host = engine_host_name();
	if ((s.source = strdup(src->source ? src->source : "")) == NULL) {
		log_error("out of memory");
		goto out;
	}
	if (catalog_begin(c))
		goto out;
	in_txn = 1;
	if (catalog_snapshot_create(c, &s))
		goto out;
	s.full_id = s.id;
	if (catalog_commit(c))
		goto out;
	running = 1;
	if (catalog_begin(c))
		goto out;
	if (catalog_snapshot_materialize(c, src->id, s.id, counts))
		goto out;
	s.files = counts[0];
	s.dirs = counts[1];
	s.others = counts[2];
	s.state = SNAP_COMPLETE;
	s.finished_ns = now_realtime_ns();
	if (catalog_snapshot_update(c, &s) || packer_snapshot_record(&p, &s, NULL))
		goto out;
	s.bytes_stored = p.bytes_stored;
	if (catalog_snapshot_update(c, &s) || engine_lock_kept(r) ||
	    packer_flush(&p) ||
	    catalog_commit(c))
		goto out;
	in_txn = 0;
	memcpy(res->sid, s.sid, sizeof(res->sid));
	res->files = s.files;
	res->dirs = s.dirs;
	res->others = s.others;
	res->bytes_stored = s.bytes_stored;
	status = ENGINE_OK;
out:
	if (in_txn)
		catalog_rollback(c);
	if (running && status != ENGINE_OK)
		(void)catalog_snapshot_fail(c, s.id, now_realtime_ns());
	packer_release(&p);
	catalog_snapshot_release(&s);
	res->seconds = now_monotonic() - t0;
	return (status);
}
