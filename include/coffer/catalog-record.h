/*
 * Snapshot records (export.c, import.c): a snapshot's rows as the signed
 * record images a backup stores in packs, and those images read back into
 * a catalog (a sync, a rebuild).  doc/format.md, "Snapshot records".
 */
#ifndef COFFER_CATALOG_RECORD_H
#define COFFER_CATALOG_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/buf.h"
#include "coffer/catalog.h"
#include "coffer/entry.h"

/*
 * The snapshot's own rows (the snapshot, its dataset's name, its entries
 * with their paths, their contents as chunk-id lists) as an SQLite database
 * image (sqlite3_serialize), replacing out's content: the head of a record
 * of one part, whatever the snapshot's size (catalog_snapshot_export_parts
 * cuts it in parts).  The signed snapshot record carries it, so the
 * catalog can be rebuilt from packs.
 */
int catalog_snapshot_export(struct catalog *c, int64_t snapshot_id,
    struct buf *out);

/*
 * A snapshot record in parts (export.c describes it): where a part was
 * stored, as the head names it.
 */
struct catalog_record_part {
	char pack[33];			/* the pack holding it */
	uint8_t rid[32];		/* its record id (keyed hash) */
};
/*
 * A part is held whole while it is stored (backup) and read (verify,
 * rebuild): its size is the peak memory of both.  Parts of 32,768
 * entries and about 8 MiB hold a backup of small files under 64 MiB, and
 * a rebuild takes less time with them than with twice as large ones.
 * Readers take parts of any size.
 */
#define CATALOG_RECORD_PART_ENTRIES 32768
#define CATALOG_RECORD_PART_BYTES (8u << 20)
/*
 * A full's parts from its spool are built at the end of its run, two at
 * a time, while one waits to be stored and one is being stored
 * (catalog_snapshot_export_spool): an eighth of the size, so that these
 * four hold half of what one part of the catalog's size would.
 */
#define CATALOG_SPOOL_PART_ENTRIES (CATALOG_RECORD_PART_ENTRIES / 8)
#define CATALOG_SPOOL_PART_BYTES (CATALOG_RECORD_PART_BYTES / 8)

/*
 * emit stores one part: rec holds room bytes (zeros) for the caller's
 * use, then the part's image; emit may write in rec, keep parts of it or
 * release it (the export frees what is left).  part is its index, head is
 * set for the last one.  For every part but the head it fills *where, or
 * leaves it to a later call: before the head is built, emit is called
 * with rec NULL and part the number of parts before the head, and fills
 * where[0..part) with their places.  0, or -1 (reported) to stop the
 * export.
 */
typedef int (*catalog_part_emit_fn)(void *arg, struct buf *rec, size_t room,
    int part, int head, struct catalog_record_part *where);
/*
 * Export snapshot snapshot_id as a sequence of part images of at most
 * max_entries entries and about max_bytes of rows each, handing each to
 * emit as soon as it is made: memory holds one part, whatever the
 * snapshot's size, and SQLite's copy of it is freed before emit runs.
 * Reads the catalog only.  0 or -1 (reported).
 */
int catalog_snapshot_export_parts(struct catalog *c, int64_t snapshot_id,
    size_t max_entries, size_t max_bytes, size_t room,
    catalog_part_emit_fn emit, void *arg);

/*
 * A full backup's record rows, spooled as its entries are recorded
 * (spool.c), so that its record is built from them rather than read back
 * out of the catalog.  catalog_spool_new: an empty spool cutting parts as
 * catalog_snapshot_export_parts would; NULL if none can be had (the
 * export then reads the catalog).  catalog_spool_entry: the entry just
 * added to the catalog, with its content's hash, chunk ids and refs (hash
 * NULL: no content).  catalog_spool_off: the snapshot's rows are no longer
 * only what was spooled (an entry copied or put back): its record must be
 * read from the catalog.  A spool that cannot take a row turns itself
 * off.  Used by one thread at a time: the one holding the catalog.
 */
struct catalog_spool;
struct catalog_spool *catalog_spool_new(struct catalog *c,
    size_t max_entries, size_t max_bytes);
void catalog_spool_entry(struct catalog_spool *sp, const struct entry *e,
    const uint8_t hash[32], const uint8_t (*cids)[32],
    const struct catalog_chunk_ref *refs, size_t nchunks);
void catalog_spool_off(struct catalog_spool *sp);
/* Its last rows written out (or it is off): before the export. */
void catalog_spool_finish(struct catalog_spool *sp);
int catalog_spool_usable(const struct catalog_spool *sp);
void catalog_spool_free(struct catalog_spool *sp);
/*
 * catalog_snapshot_export_parts, but each part's rows from the spool
 * (usable, holding every entry of the snapshot) instead of the catalog;
 * the metadata still comes from the catalog.  The parts hold the same
 * rows as catalog_snapshot_export_parts would give them, in record order
 * rather than path id order.
 */
int catalog_snapshot_export_spool(struct catalog *c, int64_t snapshot_id,
    struct catalog_spool *sp, size_t room, catalog_part_emit_fn emit,
    void *arg);

/*
 * Where the parts of a snapshot's record are, so that an
 * export finds them without reading the head, which a write-only key
 * cannot open.  catalog_snapshot_part_add: part idx (not the head) of
 * snapshot_id is where says, in the caller's transaction (the count goes
 * in snapshot.parts, catalog_snapshot_update).  catalog_snapshot_parts_set:
 * the count and every part but the head (partv[i] is part i, i < parts -
 * 1) at once, replacing what was known.  catalog_snapshot_part_packs: the
 * packs holding its parts other than the head, sorted, each once
 * (names_free, coffer/name.h).  0 or -1 (reported).
 */
int catalog_snapshot_part_add(struct catalog *c, int64_t snapshot_id,
    int idx, const struct catalog_record_part *where);
int catalog_snapshot_parts_set(struct catalog *c, int64_t snapshot_id,
    int parts, const struct catalog_record_part *partv);
int catalog_snapshot_part_packs(struct catalog *c, int64_t snapshot_id,
    char ***packs, size_t *n);

/*
 * The snapshot id inside a snapshot record's image (what
 * catalog_snapshot_export made).  Check the record's signature first: the
 * image is parsed by SQLite.  0, or -1 (reported).
 */
int catalog_record_sid(const void *img, size_t len,
    char sid[SNAPSHOT_ID_HEX + 1]);

/*
 * Bringing the catalog up to date with the repository (import.c).
 *
 * catalog_pack_names: the names of the packs the catalog knows, sorted;
 * a malloc'd array of malloc'd strings.
 *
 * catalog_pack_import: add pack name (size, keyed hash of its header and
 * index; journal: it holds a journal record) and the location of each
 * chunk of its index.  A chunk known
 * without a location gets this one; one located elsewhere keeps its
 * place, and this one is noted as a copy (catalog_chunk_copies_place).
 * All or nothing.
 *
 * catalog_record_peek: the metadata of a snapshot record's image (the
 * rows catalog_snapshot_export wrote, signature already checked).
 *
 * catalog_record_import: insert the snapshot of a record stored in
 * record_pack, with its entries, contents and chunks (chunks without a
 * location until their pack is imported).  0 imported, 1 known already
 * (complete), 2 its parent is not in the catalog (not reported), -1 error
 * (reported); nothing changed unless 0.  A snapshot of that id that is not complete (a run
 * interrupted after its last pack was durable) is replaced.  Must be
 * called outside any transaction.
 *
 * Revisions (a snapshot rebased by forget): a record whose revision is
 * above 0 is refused (-1, reported) unless authority says the record
 * carries the authority's signature, checked; a complete snapshot of the
 * same id is replaced in place (its row, and so its children, stay) only
 * by a record of a higher revision, so that whatever order the records
 * come in, the highest wins.
 */
struct catalog_record_meta {
	int parts;			/* of a head; 0 for another part */
	char sid[SNAPSHOT_ID_HEX + 1];
	char parent_sid[SNAPSHOT_ID_HEX + 1];
	char full_sid[SNAPSHOT_ID_HEX + 1];
	char dataset[256];
	int level;
	int depth;
	int64_t started_ns;
	int64_t revision;		/* meta "revision": 0 when absent */
};

int catalog_pack_names(struct catalog *c, char ***names, size_t *n);
int catalog_pack_import(struct catalog *c, const char *name, uint64_t size,
    const uint8_t hash[32], const struct catalog_chunk_loc *locs, size_t n,
    int journal);
int catalog_record_peek(struct catalog *c, const uint8_t *img, size_t len,
    struct catalog_record_meta *m);
/*
 * What a record image is, read from its meta and part tables alone, with
 * no catalog (verify, sync): snapshot id, its index among the snapshot's
 * parts, and, of a head, the count of parts and where the others are
 * (partv[i] is part i, i < parts - 1; malloc'd).  A part that is not a
 * head has parts 0.  0, or -1 (reported: "snapshot record: ...") if the
 * image is malformed or of another format.
 */
struct catalog_record_info {
	int part;
	int parts;
	int64_t revision;		/* 0 when absent */
	char sid[SNAPSHOT_ID_HEX + 1];
	struct catalog_record_part *partv;
};
int catalog_record_info(const uint8_t *img, size_t len,
    struct catalog_record_info *ri);
void catalog_record_info_release(struct catalog_record_info *ri);

/*
 * Fetch part idx of a snapshot record in parts, from where the head says
 * it is: *img points to its image, its signature checked and its record
 * id compared, valid until the next call.  0, or -1 (reported) if it is
 * missing, damaged or not the record named.
 */
typedef int (*catalog_part_fetch_fn)(void *arg,
    const struct catalog_record_part *where, int idx, const uint8_t **img,
    size_t *len);
/*
 * catalog_record_import with a record in parts: img must be a head (3 is
 * returned for any other part, which is imported with its head: nothing
 * is done).  The head's snapshot is inserted as running and committed,
 * then each part in a transaction of its own (fetched with fetch), then
 * the head's own rows and the change to complete in the last one.  A
 * part missing or not the one the head names (another snapshot's, another
 * copy of that index) leaves the snapshot out (-1, reported, its rows
 * deleted); a crash leaves it running, replaced when its head is read
 * again.
 */
int catalog_record_import(struct catalog *c, const uint8_t *img, size_t len,
    const char *record_pack, int authority, catalog_part_fetch_fn fetch,
    void *arg, struct catalog_record_meta *m);

/*
 * The complete snapshots a rebuild would lose with snapshot sid's record
 * (sid itself when complete, and every snapshot whose chain goes through
 * it): fn(arg, sid, dataset) for each, sid first.  snapshot_of_part: the
 * snapshot (sid, 33 bytes) whose record part rid (32 bytes) is, 1; 0 if
 * no part has that id; -1 (reported).
 */
typedef int catalog_snapshot_fn(void *arg, const char *sid,
    const char *dataset);
int catalog_snapshot_lost(struct catalog *c, const char *sid,
    catalog_snapshot_fn *fn, void *arg);
int catalog_snapshot_of_part(struct catalog *c, const uint8_t *rid,
    char *sid);

#endif
