/*
 * Key rotation (coffer key rotate, rotate --rewrap, retire): a new key
 * epoch for new packs, old packs' keys resealed to it in their headers,
 * and an old epoch's secret removed once no pack is sealed to it.  See
 * coffer-key(1), ROTATION, and doc/format.md ("Key epochs").
 */
#include <stdlib.h>
#include <string.h>

#include "coffer/engine-keys.h"
#include "coffer/log.h"
#include "coffer/name.h"
#include "coffer/progress.h"
#include "coffer/repo-keys.h"
#include "coffer/signals.h"

/* The catalog's hash of each pack in names, whose header changed. */
static void
rehash(struct repo *r, struct catalog *c, char **names, size_t n)
{
	struct pack_entry *ents;
	struct pack_reader *pr;
	const uint8_t *h;
	size_t i, nents;

	for (i = 0; i < n; i++) {
		if (names[i] == NULL)
			continue;
		/* Opening it checks the new header: its key opens. */
		if ((pr = pack_reader_open(r, names[i])) == NULL)
			continue;
		ents = NULL;
		if (pack_reader_index(pr, &ents, &nents) == 0 &&
		    (h = pack_reader_hash(pr)) != NULL && c != NULL &&
		    catalog_pack_rehash(c, names[i], h))
			log_warn("the catalog keeps the old hash of pack '%s'",
			    names[i]);
		free(ents);
		pack_reader_close(pr);
	}
}

int
engine_key_recover(struct repo *r, struct catalog *c)
{
	char **names;
	size_t n;
	int rc;

	if ((rc = pack_rewrap_recover(r, &names, &n)) <= 0)
		return (rc);
	rehash(r, c, names, n);
	names_free(names, n);
	return (0);
}

enum engine_result
engine_key_rotate(struct repo *r, uint32_t *epoch)
{
	if (engine_need_read(r, "key rotate"))
		return (ENGINE_REFUSED);
	if (repo_epoch_rotate(r, epoch))
		return (ENGINE_ERROR);
	log_info("new packs are sealed to key epoch %u", (unsigned)*epoch);
	return (ENGINE_OK);
}

enum engine_result
engine_key_rewrap(struct repo *r, struct catalog *c,
    struct key_rewrap_result *res)
{
	struct progress pg;
	char **names = NULL;
	size_t n = 0, i, j, m;
	int changed[PACK_REWRAP_BATCH];
	enum engine_result st = ENGINE_ERROR;

	memset(res, 0, sizeof(*res));
	res->epoch = ccrypto_keys_seal_epoch(repo_keys(r));
	if (engine_need_read(r, "key rotate --rewrap"))
		return (ENGINE_REFUSED);
	if (engine_key_recover(r, c) || repo_list_packs(r, &names, &n))
		return (ENGINE_ERROR);
	progress_init(&pg, "rewrap", (uint64_t)n);
	for (i = 0; i < n; i += m) {
		if (signals_caught()) {
			st = ENGINE_INTERRUPTED;
			goto out;
		}
		m = n - i < PACK_REWRAP_BATCH ? n - i : PACK_REWRAP_BATCH;
		if (pack_rewrap(r, names + i, m, changed))
			goto out;
		for (j = 0; j < m; j++) {
			res->packs++;
			if (changed[j] != 1) {
				res->skipped += changed[j] < 0;
				free(names[i + j]);
				names[i + j] = NULL;
				continue;
			}
			res->rewrapped++;
		}
		rehash(r, c, names + i, m);
		progress_update(&pg, res->packs, 0);
	}
	st = res->skipped > 0 ? ENGINE_DAMAGED : ENGINE_OK;
out:
	progress_done(&pg);
	names_free(names, n);
	return (st);
}

int
engine_key_epoch_packs(struct repo *r, uint32_t *epochs, size_t *counts,
    size_t n, size_t *other)
{
	char **names = NULL;
	uint32_t e;
	size_t i, j, np = 0;

	*other = 0;
	for (j = 0; j < n; j++)
		counts[j] = 0;
	if (repo_list_packs(r, &names, &np))
		return (-1);
	for (i = 0; i < np; i++) {
		if (pack_epoch(r, names[i], &e)) {
			(*other)++;
			continue;
		}
		for (j = 0; j < n && epochs[j] != e; j++)
			;
		if (j < n)
			counts[j]++;
	}
	names_free(names, np);
	return (0);
}

enum engine_result
engine_key_retire(struct repo *r, struct catalog *c, uint32_t epoch)
{
	size_t count, other;

	if (engine_need_read(r, "key retire"))
		return (ENGINE_REFUSED);
	if (epoch == ccrypto_keys_seal_epoch(repo_keys(r))) {
		log_error("key epoch %u is the newest, the one new packs are "
		    "sealed to: rotate first", (unsigned)epoch);
		return (ENGINE_REFUSED);
	}
	/* An intent may name packs still sealed to epoch. */
	if (engine_key_recover(r, c))
		return (ENGINE_ERROR);
	if (engine_key_epoch_packs(r, &epoch, &count, 1, &other))
		return (ENGINE_ERROR);
	if (other > 0) {
		log_error("key retire: %zu pack%s could not be read: nothing "
		    "retired", other, other == 1 ? "" : "s");
		return (ENGINE_ERROR);
	}
	if (count > 0) {
		log_error("key epoch %u still seals %zu pack%s: run key rotate "
		    "--rewrap first", (unsigned)epoch, count, count == 1 ?
		    "" : "s");
		return (ENGINE_REFUSED);
	}
	if (repo_epoch_retire(r, epoch))
		return (ENGINE_ERROR);
	return (ENGINE_OK);
}
