/*
 * Reading a chunk where a pack's index says it is, before the catalog
 * trusts that place (doc/design.md, "Many writers", rule 5): prune
 * before it lets a pack go without copying a chunk out, verify before it
 * takes a copy for a chunk whose own place is damaged.
 */
#include <stdlib.h>
#include <string.h>

#include "coffer/hex.h"
#include "coffer/log.h"
#include "engine-int.h"

void
loc_entry(const struct catalog_chunk_loc *l, struct pack_entry *e)
{
	memset(e, 0, sizeof(*e));
	memcpy(e->id, l->cid, sizeof(e->id));
	e->type = l->type;
	e->flags = l->flags;
	e->offset = l->pack_offset;
	e->plain_len = l->plain_len;
	e->stored_len = l->stored_len;
}

static struct pack_reader *
place_pack(struct place_check *pc, const char *name)
{
	if (pc->pr != NULL && strcmp(pack_reader_name(pc->pr), name) == 0)
		return (pc->pr);
	pack_reader_close(pc->pr);
	pc->pr = pack_reader_open(pc->repo, name);
	return (pc->pr);
}

int
place_check_first(struct place_check *pc,
    const struct catalog_chunk_place *places, size_t n, size_t *bad,
    size_t *nbad, uint64_t *bytes)
{
	const struct catalog_chunk_loc *l;
	struct pack_reader *pr;
	struct pack_entry e;
	size_t i;
	int ok;

	if (nbad != NULL)
		*nbad = 0;
	for (i = 0; i < n; i++) {
		l = &places[i].loc;
		loc_entry(l, &e);
		/* What is wrong there is got over: the caller goes on to
		 * another place, or copies the chunk out. */
		(void)log_hold();
		ok = (pr = place_pack(pc, l->pack)) != NULL &&
		    pack_reader_get(pr, &e, pc->z, pc->out) == 0;
		log_release(1);
		*bytes += l->stored_len;
		if (ok)
			return ((int)i);
		if (bad != NULL)
			bad[(*nbad)++] = i;
	}
	return (-1);
}

int
place_take_copies(struct place_check *pc, struct catalog *c, int64_t *rows,
    size_t *n, char (*taken)[33], size_t *ntaken)
{
	struct catalog_chunk_place *pl = NULL;
	size_t i, j, k, nbad, keep = 0, *bad = NULL, capbad = 0;
	uint64_t bytes = 0;
	char h[17];
	int got, rc = -1;

	*ntaken = 0;
	for (i = 0; i < *n; i++) {
		if (taken != NULL)
			taken[i][0] = '\0';
		free(pl);
		pl = NULL;
		if (catalog_chunk_places(c, rows[i], -1, &pl, &k))
			goto out;
		if (k > 0 && array_grow(&bad, &capbad, k, sizeof(*bad), 4))
			goto out;
		got = place_check_first(pc, pl, k, bad, &nbad, &bytes);
		for (j = 0; j < nbad; j++)
			if (catalog_chunk_copy_drop(c, rows[i],
			    pl[bad[j]].pack_id))
				goto out;
		if (got < 0) {
			rows[keep++] = rows[i];
			continue;
		}
		if (catalog_chunk_locate(c, rows[i], pl[got].pack_id,
		    &pl[got].loc) ||
		    catalog_chunk_copy_drop(c, rows[i], pl[got].pack_id))
			goto out;
		if (taken != NULL)
			memcpy(taken[i], pl[got].loc.pack, sizeof(taken[i]));
		(*ntaken)++;
		hex_encode(h, pl[got].loc.cid, 8);
		log_warn("chunk %s: pack '%s' holds it too, read and found "
		    "whole: the catalog locates it there now", h,
		    pl[got].loc.pack);
	}
	rc = 0;
out:
	/* What was taken before an error stays taken; the rest stay. */
	for (; i < *n; i++) {
		if (taken != NULL)
			taken[i][0] = '\0';
		rows[keep++] = rows[i];
	}
	*n = keep;
	free(pl);
	free(bad);
	return (rc);
}

void
place_check_release(struct place_check *pc)
{
	pack_reader_close(pc->pr);
	pc->pr = NULL;
}
