/*
 * Taking from the repository: forgetting snapshots (forget.c), pruning
 * packs (prune.c), and dropping the packs another host removed (a sync).
 */
#ifndef COFFER_CATALOG_PRUNE_H
#define COFFER_CATALOG_PRUNE_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/catalog.h"

/*
 * Forgetting (forget.c).  catalog_forget: the snapshots sids go from the
 * catalog with their rows, children first, and their ids are kept in
 * forgotten (for the journal, and so that their records, still in the
 * packs until prune, never bring them back); one that a remaining
 * snapshot builds on is first rebased (catalog_snapshot_rebase: its
 * rows rewritten, its tree the same) onto its nearest ancestor that
 * stays, or made a full, so that every host that learns the forget, in
 * whatever order, ends with the same trees; only a failed snapshot's
 * parent stays.  *gone how many went.  catalog_forget_apply: the same
 * for the ids forgotten already (a sync that imported a record again, or
 * a forget from another host).  All or nothing; 0 or -1 (reported).
 * catalog_forgotten_has: 1 if sid is forgotten, 0 if not, -1.
 */
int catalog_forget(struct catalog *c, const char *const *sids, size_t n,
    int64_t now_ns, size_t *gone);
int catalog_forget_apply(struct catalog *c, size_t *gone);
int catalog_forgotten_has(struct catalog *c, const char *sid);

/*
 * Prune (prune.c).  catalog_prune_begin marks the live chunks (those an
 * entry of a snapshot the catalog holds uses), for the calls below.
 * catalog_prune_packs: every pack with its located and live chunks and
 * their stored bytes, by name.  catalog_prune_copy: the chunk cid, which
 * pack pack_id holds, before the pack goes: 0 if no snapshot needs it;
 * 1 if one does (*rowid its row), with *places the other packs said to
 * hold it (catalog_chunk_places): the caller reads one before it lets
 * the pack go without copying the chunk out, and if none holds it,
 * copies it out.  Judged by the ids in the index, not by the catalog's
 * locations (two hosts' catalogs may each locate a chunk in another
 * copy), a pack never goes with the last copy a snapshot needs.
 * catalog_prune_drop
 * (in the caller's transaction, after the live chunks of the packs going
 * were located elsewhere with catalog_chunk_locate): the contents nothing
 * uses, the chunk rows left in those packs, and the packs.  0 or -1.
 */
struct catalog_prune_pack {
	int64_t id;
	char name[33];
	uint64_t size;
	int64_t chunks, live_chunks;
	uint64_t live_bytes;		/* stored bytes of the live chunks */
	int64_t seen_ns;		/* when this catalog learnt of it */
	int64_t condemned_ns;		/* its mark's time; 0: none */
};
int catalog_prune_begin(struct catalog *c);
int catalog_prune_packs(struct catalog *c, struct catalog_prune_pack **packs,
    size_t *n);
int catalog_prune_copy(struct catalog *c, int64_t pack_id,
    const uint8_t cid[32], int64_t *rowid,
    struct catalog_chunk_place **places, size_t *nplaces);
int catalog_prune_drop(struct catalog *c, const int64_t *packs, size_t n);
/*
 * A prune's mark (doc/design.md, "Many writers"): pack name is condemned
 * since time_ns, by its name, whether the catalog knows the pack yet or
 * not.  A chunk located in a condemned pack is not stored for a backup
 * (catalog_chunk_claim), and a new pack that holds it takes it over.  The
 * mark goes with the pack (catalog_prune_drop, catalog_packs_gone_drop).
 * 0 or -1.
 */
int catalog_condemn(struct catalog *c, const char *name, int64_t time_ns);
/*
 * Packs the catalog lists that the repository no longer holds (a sync):
 * catalog_packs_gone notes them, so that catalog_pack_import relocates
 * their chunks to a new pack that holds them too (another host's repack);
 * catalog_packs_gone_drop then removes the gone packs nothing needs, with
 * their chunk rows and the contents no entry uses (*dropped how many);
 * the others stay noted as gone until the next sync.
 */
int catalog_packs_gone(struct catalog *c, const char *const *names,
    size_t n);
int catalog_packs_gone_drop(struct catalog *c, size_t *dropped);
/*
 * catalog_chunk_copies_place (a sync, before catalog_packs_gone_drop): a
 * chunk whose pack is gone is located in a copy another pack holds
 * (chunk_copy), one not condemned if there is one; a chunk in a
 * condemned pack, in a copy that is not.  Two hosts that stored a chunk
 * at once each locate it in their own pack, and a prune judging by the
 * one catalog deletes the other's pack.  0 or -1.
 */
int catalog_chunk_copies_place(struct catalog *c);

#endif
