/*
 * Reading a chunk where a pack's index says it is, before the catalog
 * trusts that place (doc/design.md, "Many writers", rule 5): prune
 * before it lets a pack go without copying a chunk out, verify before it
 * takes a copy for a chunk whose own place is damaged.
 */
#include <string.h>

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

void
place_check_release(struct place_check *pc)
{
	pack_reader_close(pc->pr);
	pc->pr = NULL;
}
