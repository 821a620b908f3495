/*
 * Access to the repository.  What the unlocked key may do: a write-only
 * key (doc/design.md, "Crypto") seals pack keys but cannot open them, so
 * every pipeline that decrypts a record asks here first and stops before
 * it starts, rather than take unreadable packs for damaged ones.  And
 * what every writer does first (engine_prepare_write).
 */
#include <stdlib.h>

#include "coffer/catalog-history.h"
#include "coffer/catalog.h"
#include "coffer/crypto.h"
#include "coffer/engine.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/repo.h"
#include "coffer/repo-keys.h"
#include "engine-int.h"

int
engine_need_read(struct repo *r, const char *what)
{
	if (!ccrypto_keys_write_only(repo_keys(r)))
		return (0);
	log_error("%s needs the key that reads (decrypts) the repository; "
	    "this key is write-only: it can back up, not read", what);
	return (-1);
}

int
engine_need_complete(const struct catalog_snapshot *s)
{
	if (s->state == SNAP_COMPLETE)
		return (0);
	log_error("snapshot %s is %s, not complete", s->sid,
	    catalog_state_name(s->state));
	return (-1);
}

int
engine_need_full(struct repo *r, const char *what)
{
	if (!ccrypto_keys_write_only(repo_keys(r)))
		return (0);
	log_error("%s needs a full key: only the key that reads decides what "
	    "the repository keeps; this key is write-only: it can back up "
	    "and export", what);
	return (-1);
}

const char *
engine_key_name(const struct repo *r)
{
	const char *slot = repo_unlocked_slot(r);

	if (slot != NULL)
		return (slot);
	return (ccrypto_keys_write_only(repo_keys(r)) ?
	    ENGINE_KEY_FILE_WRITE_ONLY : ENGINE_KEY_FILE_FULL);
}

int
engine_key_use_add(struct repo *r, struct catalog *c)
{
	char *host;
	int rc;

	if ((host = engine_host_name()) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	rc = catalog_key_use_add(c, engine_key_name(r), now_realtime_ns(),
	    host);
	free(host);
	return (rc);
}

int
engine_generation_check(struct repo *r, struct catalog *c, int writing)
{
	uint64_t seen, gen = repo_generation(r);

	if (catalog_generation_get(c, &seen))
		return (-1);
	/* Written only when it grows: readers do not wait on a writer's
	 * catalog transaction for nothing. */
	if (gen > seen)
		return (catalog_generation_raise(c, gen));
	if (gen == seen)
		return (0);
	if (writing) {
		log_error("repository '%s': coffer.conf is older than this host "
		    "has seen (keyring generation %llu, not %llu): put back "
		    "from an earlier copy? nothing is written (put the newer "
		    "coffer.conf and keyring back)", repo_path(r),
		    (unsigned long long)gen, (unsigned long long)seen);
		return (-1);
	}
	log_warn("repository '%s': coffer.conf is older than this host has "
	    "seen (keyring generation %llu, not %llu): put back from an "
	    "earlier copy?", repo_path(r), (unsigned long long)gen,
	    (unsigned long long)seen);
	return (0);
}

/*
 * A rewrap cut short is finished before anything reads a header (every
 * header whole), by a full key, and under the exclusive lock: a shared
 * holder that finds the intent gives its lock back, takes the exclusive
 * one for the recovery, and takes the shared one again.
 */
static int
recover_rewrap(struct repo *r, struct catalog *c, double wait, int exclusive)
{
	int pending;

	if (ccrypto_keys_write_only(repo_keys(r)))
		return (0);
	if (exclusive)
		return (engine_key_recover(r, c));
	if ((pending = pack_rewrap_pending(r)) <= 0)
		return (pending);
	if (repo_lock(r, wait) || engine_key_recover(r, c))
		return (-1);
	return (engine_writer_shared(r, wait));
}

int
engine_prepare_write(struct repo *r, struct catalog *c, double wait,
    int exclusive)
{
	int n = 0;

	if ((exclusive ? repo_lock(r, wait) : repo_lock_shared(r, wait)) ||
	    catalog_lock(c, wait))
		return (-1);
	/* Before anything is sealed: never to what a rollback brought back. */
	if (engine_generation_check(r, c, 1))
		return (-1);
	/* What crashed puts left (never another writer's put in progress:
	 * storage_clean). */
	if (repo_clean_tmp(r))
		return (-1);
	if (recover_rewrap(r, c, wait, exclusive))
		return (-1);
	if (catalog_snapshot_fail_running(c, &n))
		return (-1);
	if (n > 0)
		log_info("marked %d interrupted snapshot%s failed", n,
		    n == 1 ? "" : "s");
	/* Which key writes, for `key list`: journaled with the rest. */
	if (engine_key_use_add(r, c))
		return (-1);
	return (0);
}

int
engine_lock_kept(struct repo *r)
{
	if (!repo_lock_lost(r))
		return (0);
	log_error("repository '%s': the writer lock of this run was lost (its "
	    "lease was not renewed in time): nothing more is completed, as "
	    "a prune may have run meanwhile; run it again", repo_path(r));
	return (-1);
}

int
engine_writer_shared(struct repo *r, double wait)
{
	if (repo_lock_held(r) == REPO_LOCKED_SHARED)
		return (0);
	repo_lock_release(r);
	return (repo_lock_shared(r, wait));
}

void
engine_journal_catch_up(struct repo *r, struct catalog *c)
{
	int rc;

	/* Failed runs, drills and key uses the repository does not know
	 * yet; got over if not (the rows wait in the catalog): the errors
	 * on the way are warnings. */
	(void)log_hold();
	rc = engine_journal_flush(r, c);
	log_release(1);
	if (rc)
		log_warn("the journal (drill results, failed runs) could not "
		    "be written to the repository; the next run tries again");
}
