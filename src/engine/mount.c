/*
 * coffer mount: the complete snapshots as a read-only tree served by
 * src/fs/fuse.c.
 *
 *   /                     the datasets
 *   /DATASET/             its complete snapshots by id, "latest", "full"
 *   /DATASET/SID/...      the snapshot's view (its chain resolved)
 *
 * A node number names its node by itself, so nothing is kept per node
 * the kernel knows (a listing of a million names holds none of them):
 *
 *   1                          the root
 *   01 snapshot:22 dataset:38 what:2
 *                              a dataset's directory (snapshot 0), or
 *                              latest or full pointing to the snapshot:
 *                              a link's target is its node's for good,
 *                              so the kernel may keep it (a path through
 *                              latest reads no link), and latest moving
 *                              on is a new node
 *   00 snapshot:22 path:40     an entry: the snapshot's and its path's
 *                              catalog rows (path 0: the snapshot's root)
 *
 * A hardlink's names are different nodes with one st_ino, 10 and a hash
 * of the snapshot and the source's (dev, ino, content).  Entries and
 * directories are read from the catalog a path or a page at a time
 * (catalog-browse.h); the snapshots and datasets, few, are listed again
 * when a second has passed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "coffer/catalog-browse.h"
#include "coffer/engine-mount.h"
#include "coffer/fs-fuse.h"
#include "coffer/log.h"
#include "mount-int.h"

#define NODE_DATASET (1ull << 62)
#define NODE_LINK_INO (2ull << 62)
#define SNAP_BITS 22
#define PATH_BITS 40
#define DS_BITS 38
#define WHAT_DIR 0
#define WHAT_LATEST 1
#define WHAT_FULL 2
/* Chunk locations of an open file read from the catalog at once. */
#define LOC_PAGE 256
/* The snapshot lists are read again after this long. */
#define LIST_AGE 1.0

struct msnap {
	int64_t id;
	char sid[SNAPSHOT_ID_HEX + 1];
	int64_t dataset_id;
	int64_t started_ns;
};

struct mdataset {
	int64_t id;
	char *name;
	int64_t latest, full;		/* index into snaps, or -1 */
	int64_t started_ns;		/* its newest snapshot's */
};

struct mnt {
	struct repo *repo;
	struct catalog *cat;
	struct catalog_browse *b;
	uint32_t chunk_max;
	struct mcache mc;
	struct msnap *snaps;		/* complete, oldest first */
	size_t nsnaps, capsnaps;
	struct mdataset *ds;
	size_t nds, capds;
	double listed;			/* when, now_monotonic; 0: never */
	struct buf name;		/* a path being made */
	/* The entry last read, of node last (0: none), which the kernel
	 * mostly asks about again at once (a lookup, then its xattrs);
	 * its strings are the browse handle's until its next call. */
	uint64_t last;
	struct entry last_e;
	int64_t damaged;
	int warned_range;
};

/* An open file. */
struct mfile {
	struct entry e;			/* path, size, content: for sanity
					 * checks and messages */
	void *mem;
	char sid[SNAPSHOT_ID_HEX + 1];
	struct catalog_chunk_loc *locs;	/* a page of its chunks */
	size_t n;
	uint64_t page_lo;		/* the page holds every chunk that
					 * ends after page_lo, up to its
					 * last, */
	int page_last;			/* and after that none */
	int64_t next;			/* where a sequential read goes on */
};

/* An open directory: where its listing stopped. */
struct mdir {
	char *cursor;			/* the last name given; NULL: none */
	int64_t pos;			/* the offset after it */
};

static uint64_t
node_dataset(int64_t dataset, int what, int64_t snap)
{
	return (NODE_DATASET | ((uint64_t)snap << (DS_BITS + 2)) |
	    ((uint64_t)dataset << 2) | (uint64_t)what);
}

static int64_t
node_ds(uint64_t node)
{
	return ((int64_t)((node >> 2) & ((1ull << DS_BITS) - 1)));
}

static int64_t
node_ds_snap(uint64_t node)
{
	return ((int64_t)((node & ~NODE_DATASET) >> (DS_BITS + 2)));
}

static uint64_t
node_entry(int64_t snap, int64_t path)
{
	return (((uint64_t)snap << PATH_BITS) | (uint64_t)path);
}

static int
is_entry(uint64_t node)
{
	return ((node >> 62) == 0 && node >= (1ull << PATH_BITS));
}

static int64_t
node_snap(uint64_t node)
{
	return ((int64_t)(node >> PATH_BITS));
}

static int64_t
node_path(uint64_t node)
{
	return ((int64_t)(node & ((1ull << PATH_BITS) - 1)));
}

/* splitmix64's finalizer: st_ino for a hardlink group, not a secret. */
static uint64_t
mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (x);
}

static int
snaps_add(void *arg, const struct catalog_snapshot *s)
{
	struct mnt *m = arg;
	struct msnap *p;
	struct mdataset *d = NULL;
	size_t i;

	if (s->state != SNAP_COMPLETE)
		return (0);
	for (i = 0; i < m->nds; i++)
		if (m->ds[i].id == s->dataset_id)
			d = &m->ds[i];
	if (d == NULL) {
		if (array_grow(&m->ds, &m->capds, m->nds, sizeof(*m->ds), 8))
			return (-1);
		d = &m->ds[m->nds];
		memset(d, 0, sizeof(*d));
		d->id = s->dataset_id;
		d->latest = d->full = -1;
		if ((d->name = strdup(s->dataset)) == NULL) {
			log_error("out of memory");
			return (-1);
		}
		m->nds++;
	}
	if (array_grow(&m->snaps, &m->capsnaps, m->nsnaps, sizeof(*m->snaps),
	    64))
		return (-1);
	p = &m->snaps[m->nsnaps];
	p->id = s->id;
	memcpy(p->sid, s->sid, sizeof(p->sid));
	p->dataset_id = s->dataset_id;
	p->started_ns = s->started_ns;
	/* Oldest first: the last seen is the newest. */
	d->latest = (int64_t)m->nsnaps;
	if (s->level == LEVEL_FULL)
		d->full = (int64_t)m->nsnaps;
	d->started_ns = s->started_ns;
	m->nsnaps++;
	return (0);
}

static void
lists_free(struct mnt *m)
{
	size_t i;

	for (i = 0; i < m->nds; i++)
		free(m->ds[i].name);
	m->nds = m->nsnaps = 0;
}

/* The lists of snapshots and datasets, read again when older than
 * LIST_AGE (force: now).  0 or -EIO. */
static int
lists(struct mnt *m, int force)
{
	double now = now_monotonic();

	if (!force && m->listed > 0 && now - m->listed < LIST_AGE)
		return (0);
	lists_free(m);
	if (catalog_snapshot_list(m->cat, NULL, snaps_add, m) != 0) {
		lists_free(m);
		m->listed = 0;
		return (-EIO);
	}
	m->listed = now;
	return (0);
}

static const struct mdataset *
dataset_by_id(struct mnt *m, int64_t id)
{
	size_t i;

	for (i = 0; i < m->nds; i++)
		if (m->ds[i].id == id)
			return (&m->ds[i]);
	return (NULL);
}

static const struct msnap *
snap_by_id(struct mnt *m, int64_t id)
{
	size_t i;

	for (i = 0; i < m->nsnaps; i++)
		if (m->snaps[i].id == id)
			return (&m->snaps[i]);
	return (NULL);
}

/* A snapshot still there (a forget may take it while mounted): the
 * lists are read again once before it is said not to be. */
static const struct msnap *
snap_find(struct mnt *m, int64_t id)
{
	const struct msnap *s;

	if ((s = snap_by_id(m, id)) != NULL || lists(m, 0) != 0)
		return (s);
	return (snap_by_id(m, id));
}

static void
attr_dir(struct fs_fuse_attr *a, uint64_t ino, int64_t t_ns)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->mode = S_IFDIR | 0555;
	a->nlink = 2;
	a->mtime_ns = a->ctime_ns = t_ns;
}

static uint32_t
kind_mode(int kind)
{
	switch (kind) {
	case ENTRY_FILE:
		return (S_IFREG);
	case ENTRY_DIR:
		return (S_IFDIR);
	case ENTRY_SYMLINK:
		return (S_IFLNK);
	case ENTRY_FIFO:
		return (S_IFIFO);
	case ENTRY_CHR:
		return (S_IFCHR);
	case ENTRY_BLK:
		return (S_IFBLK);
	default:
		return (S_IFSOCK);
	}
}

/* An entry's attributes as restore would set them. */
static int
attr_entry(struct mnt *m, uint64_t node, const struct entry *e,
    struct fs_fuse_attr *a)
{
	uint64_t data = 0;

	memset(a, 0, sizeof(*a));
	a->ino = node;
	a->mode = kind_mode(e->kind) | (e->mode & 07777);
	a->nlink = e->nlink > 0 ? e->nlink : 1;
	a->uid = e->uid;
	a->gid = e->gid;
	a->mtime_ns = e->mtime_ns;
	a->ctime_ns = e->ctime_ns;
	a->rdev = e->rdev;
	a->cache = 1;
	if (e->kind == ENTRY_SYMLINK && e->target != NULL)
		a->size = (int64_t)strlen(e->target);
	if (e->kind == ENTRY_FILE) {
		a->size = e->size;
		/* Holes take no room, as on the source. */
		if (e->content_id != 0 &&
		    catalog_content_data_bytes(m->cat, e->content_id, &data))
			return (-EIO);
		a->blocks = (int64_t)((data + 511) / 512);
		if (e->nlink > 1)
			a->ino = NODE_LINK_INO | (mix(mix(mix(
			    (uint64_t)node_snap(node)) ^ e->dev) ^ e->ino ^
			    mix((uint64_t)e->content_id)) >> 2);
	}
	return (0);
}

/* The entry of node in its snapshot (path 0: the root's, "."); 1, 0
 * (none: *e is zeroed), or -EIO. */
static int
entry_of(struct mnt *m, uint64_t node, struct entry *e)
{
	int64_t path = node_path(node);
	int rc;

	if (node == m->last) {
		*e = m->last_e;
		return (1);
	}
	m->last = 0;
	rc = catalog_browse_get(m->b, node_snap(node), path == 0 ?
	    ENTRY_ROOT_PATH : NULL, &path, e);
	if (rc < 0)
		return (-EIO);
	if (rc == 0)
		memset(e, 0, sizeof(*e));
	else {
		m->last = node;
		m->last_e = *e;
	}
	return (rc);
}

/* A snapshot's root: the dataset root's entry, or a plain directory
 * when the snapshot has none (a tar stream's). */
static int
attr_snap_root(struct mnt *m, const struct msnap *s, struct fs_fuse_attr *a)
{
	struct entry e;
	uint64_t node = node_entry(s->id, 0);
	int rc;

	if ((rc = entry_of(m, node, &e)) < 0)
		return (rc);
	if (rc == 0 || e.kind != ENTRY_DIR) {
		attr_dir(a, node, s->started_ns);
		a->cache = 1;
		return (0);
	}
	return (attr_entry(m, node, &e, a));
}

/* A dataset's directory, or its link latest or full to the snapshot
 * the node names. */
static int
attr_dataset(struct mnt *m, uint64_t node, struct fs_fuse_attr *a)
{
	const struct mdataset *d;
	const struct msnap *s;
	int rc;

	if ((rc = lists(m, 0)) != 0)
		return (rc);
	if ((d = dataset_by_id(m, node_ds(node))) == NULL)
		return (-ENOENT);
	if ((node & 3) == WHAT_DIR) {
		attr_dir(a, node, d->started_ns);
		return (0);
	}
	if ((s = snap_find(m, node_ds_snap(node))) == NULL)
		return (-ENOENT);
	memset(a, 0, sizeof(*a));
	a->ino = node;
	a->mode = S_IFLNK | 0777;
	a->nlink = 1;
	a->size = (int64_t)strlen(s->sid);
	a->mtime_ns = a->ctime_ns = s->started_ns;
	return (0);
}

/* The node of d's directory (what WHAT_DIR), or of its link latest or
 * full as it points now; 0 when there is none (no such snapshot). */
static uint64_t
dataset_child(const struct mnt *m, const struct mdataset *d, int what)
{
	int64_t i = what == WHAT_LATEST ? d->latest : d->full;

	if (what == WHAT_DIR)
		return (node_dataset(d->id, WHAT_DIR, 0));
	if (i < 0 || m->snaps[i].id >= (1ll << SNAP_BITS))
		return (0);
	return (node_dataset(d->id, what, m->snaps[i].id));
}

static int
op_getattr(void *arg, uint64_t node, struct fs_fuse_attr *a)
{
	struct mnt *m = arg;
	const struct msnap *s;
	struct entry e;
	int rc;

	if (node == FS_FUSE_ROOT) {
		attr_dir(a, node, 0);
		return (0);
	}
	if ((node >> 62) == 1)
		return (attr_dataset(m, node, a));
	if (!is_entry(node) || (s = snap_find(m, node_snap(node))) == NULL)
		return (-ENOENT);
	if (node_path(node) == 0)
		return (attr_snap_root(m, s, a));
	if ((rc = entry_of(m, node, &e)) <= 0)
		return (rc < 0 ? rc : -ENOENT);
	return (attr_entry(m, node, &e, a));
}

/* Name of node's directory in its snapshot into m->name ("" for the
 * root).  0, -ENOENT, -ENOTDIR or -EIO. */
static int
dir_name(struct mnt *m, uint64_t node)
{
	struct entry e;
	int rc;

	buf_reset(&m->name);
	if (node_path(node) == 0)
		return (buf_append(&m->name, "", 1) ? -ENOMEM : 0);
	if ((rc = entry_of(m, node, &e)) <= 0)
		return (rc < 0 ? rc : -ENOENT);
	if (e.kind != ENTRY_DIR)
		return (-ENOTDIR);
	return (buf_append(&m->name, e.path, strlen(e.path) + 1) ? -ENOMEM :
	    0);
}

static int
lookup_entry(struct mnt *m, uint64_t parent, const char *name,
    uint64_t *node, struct fs_fuse_attr *a)
{
	struct entry e;
	int64_t path;
	int rc;

	if (snap_find(m, node_snap(parent)) == NULL)
		return (-ENOENT);
	if ((rc = dir_name(m, parent)) != 0)
		return (rc);
	m->name.len--;		/* its NUL */
	if ((m->name.len > 0 && buf_append(&m->name, "/", 1)) ||
	    buf_append(&m->name, name, strlen(name) + 1))
		return (-ENOMEM);
	m->last = 0;
	rc = catalog_browse_get(m->b, node_snap(parent),
	    (const char *)m->name.data, &path, &e);
	if (rc <= 0)
		return (rc < 0 ? -EIO : -ENOENT);
	if (path >= (1ll << PATH_BITS) || path <= 0) {
		if (!m->warned_range++)
			log_warn("the catalog's path rows pass 2^40: '%s' "
			    "and later paths cannot be shown", e.path);
		return (-EOVERFLOW);
	}
	*node = node_entry(node_snap(parent), path);
	m->last = *node;
	m->last_e = e;
	return (attr_entry(m, *node, &e, a));
}

static int
lookup_dataset(struct mnt *m, uint64_t parent, const char *name,
    uint64_t *node, struct fs_fuse_attr *a)
{
	const struct mdataset *d;
	const struct msnap *s = NULL;
	size_t i;
	int rc;

	if ((rc = lists(m, 0)) != 0)
		return (rc);
	if ((d = dataset_by_id(m, node_ds(parent))) == NULL)
		return (-ENOENT);
	if (strcmp(name, "latest") == 0 || strcmp(name, "full") == 0) {
		if ((*node = dataset_child(m, d, name[0] == 'l' ?
		    WHAT_LATEST : WHAT_FULL)) == 0)
			return (-ENOENT);
		return (attr_dataset(m, *node, a));
	}
	for (i = 0; i < m->nsnaps; i++) {
		s = &m->snaps[i];
		if (s->dataset_id == d->id && strcmp(s->sid, name) == 0)
			break;
	}
	if (i == m->nsnaps)
		return (-ENOENT);
	if (s->id >= (1ll << SNAP_BITS))
		return (-EOVERFLOW);
	*node = node_entry(s->id, 0);
	return (attr_snap_root(m, s, a));
}

static int
op_lookup(void *arg, uint64_t parent, const char *name, uint64_t *node,
    struct fs_fuse_attr *a)
{
	struct mnt *m = arg;
	size_t i;
	int rc;

	if (parent == FS_FUSE_ROOT) {
		if ((rc = lists(m, 0)) != 0)
			return (rc);
		for (i = 0; i < m->nds; i++)
			if (strcmp(m->ds[i].name, name) == 0)
				break;
		if (i == m->nds)
			return (-ENOENT);
		*node = dataset_child(m, &m->ds[i], WHAT_DIR);
		return (attr_dataset(m, *node, a));
	}
	if ((parent >> 62) == 1)
		return ((parent & 3) == WHAT_DIR ?
		    lookup_dataset(m, parent, name, node, a) : -ENOTDIR);
	if (!is_entry(parent))
		return (-ENOENT);
	return (lookup_entry(m, parent, name, node, a));
}

static int
op_readlink(void *arg, uint64_t node, char **target)
{
	struct mnt *m = arg;
	const struct msnap *s;
	struct entry e;
	const char *t;
	int rc;

	if ((node >> 62) == 1) {
		if ((node & 3) == WHAT_DIR)
			return (-EINVAL);
		if ((s = snap_find(m, node_ds_snap(node))) == NULL)
			return (-ENOENT);
		t = s->sid;
	} else {
		if (!is_entry(node) || node_path(node) == 0)
			return (-EINVAL);
		if ((rc = entry_of(m, node, &e)) <= 0)
			return (rc < 0 ? rc : -ENOENT);
		if (e.kind != ENTRY_SYMLINK || e.target == NULL)
			return (-EINVAL);
		t = e.target;
	}
	return ((*target = strdup(t)) == NULL ? -ENOMEM : 0);
}

static int
op_opendir(void *arg, uint64_t node, void **dh)
{
	struct mnt *m = arg;
	struct fs_fuse_attr a;
	struct mdir *d;
	int rc;

	if ((rc = op_getattr(m, node, &a)) != 0)
		return (rc);
	if ((a.mode & S_IFMT) != S_IFDIR)
		return (-ENOTDIR);
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return (-ENOMEM);
	*dh = d;
	return (0);
}

static void
op_releasedir(void *arg, void *dh)
{
	struct mdir *d = dh;

	if (d != NULL)
		free(d->cursor);
	free(d);
}

/* The root's and a dataset's entries (few): from position off. */
static int
readdir_lists(struct mnt *m, uint64_t node, int64_t off, fs_fuse_fill_fn
    fill, void *fa)
{
	static const char *const links[] = { "latest", "full" };
	const struct mdataset *d = NULL;
	struct fs_fuse_attr a;
	uint64_t child;
	int64_t k = 2, i;
	int rc;

	if ((rc = lists(m, 0)) != 0)
		return (rc);
	if (node != FS_FUSE_ROOT && (d = dataset_by_id(m, node_ds(node))) ==
	    NULL)
		return (-ENOENT);
	if (d == NULL) {
		for (i = 0; i < (int64_t)m->nds; i++, k++) {
			child = dataset_child(m, &m->ds[i], WHAT_DIR);
			if (k < off)
				continue;
			if ((rc = attr_dataset(m, child, &a)) != 0)
				return (rc);
			if (fill(fa, m->ds[i].name, child, &a, k + 1))
				return (0);
		}
		return (0);
	}
	for (i = 0; i < 2; i++) {
		if ((child = dataset_child(m, d, i == 0 ? WHAT_LATEST :
		    WHAT_FULL)) == 0 || k++ < off)
			continue;
		if ((rc = attr_dataset(m, child, &a)) != 0)
			return (rc);
		if (fill(fa, links[i], child, &a, k))
			return (0);
	}
	for (i = 0; i < (int64_t)m->nsnaps; i++) {
		if (m->snaps[i].dataset_id != d->id ||
		    m->snaps[i].id >= (1ll << SNAP_BITS) || k++ < off)
			continue;
		if ((rc = attr_snap_root(m, &m->snaps[i], &a)) != 0)
			return (rc);
		if (fill(fa, m->snaps[i].sid, node_entry(m->snaps[i].id, 0),
		    &a, k))
			return (0);
	}
	return (0);
}

/*
 * A snapshot directory's entries from position off: on from where the
 * last call stopped when off is where it stopped (a listing read
 * through), else from the start, skipping (a seek back).
 */
static int
readdir_entries(struct mnt *m, uint64_t node, struct mdir *d, int64_t off,
    fs_fuse_fill_fn fill, void *fa)
{
	struct catalog_children *it;
	struct fs_fuse_attr a;
	struct entry e;
	int64_t path;
	int rc;

	if (off != d->pos || d->cursor == NULL) {
		free(d->cursor);
		d->cursor = NULL;
		d->pos = 2;
	}
	if ((rc = dir_name(m, node)) != 0)
		return (rc);
	if ((it = catalog_children(m->cat, node_snap(node),
	    (const char *)m->name.data, d->cursor)) == NULL)
		return (-EIO);
	while ((rc = catalog_children_next(it, &e, &path)) == 1) {
		const char *base = strrchr(e.path, '/');
		uint64_t child = node_entry(node_snap(node), path);
		char *c;

		base = base != NULL ? base + 1 : e.path;
		if (path <= 0 || path >= (1ll << PATH_BITS))
			continue;
		if (d->pos >= off) {
			if ((rc = attr_entry(m, child, &e, &a)) != 0)
				break;
			if (fill(fa, base, child, &a, d->pos + 1))
				break;
		}
		if ((c = strdup(e.path)) == NULL) {
			rc = -ENOMEM;
			break;
		}
		free(d->cursor);
		d->cursor = c;
		d->pos++;
	}
	catalog_children_free(it);
	return (rc == -1 ? -EIO : rc < 0 ? rc : 0);
}

static int
op_readdir(void *arg, uint64_t node, void *dh, int64_t off,
    fs_fuse_fill_fn fill, void *fa)
{
	struct mnt *m = arg;
	struct fs_fuse_attr a;

	attr_dir(&a, node, 0);
	if (off == 0 && fill(fa, ".", 0, &a, 1))
		return (0);
	a.ino = FS_FUSE_ROOT;
	if (off <= 1 && fill(fa, "..", 0, &a, 2))
		return (0);
	if (off < 2)
		off = 2;
	if (node == FS_FUSE_ROOT || (node >> 62) == 1)
		return (readdir_lists(m, node, off, fill, fa));
	return (readdir_entries(m, node, dh, off, fill, fa));
}

static int
op_open(void *arg, uint64_t node, void **fh)
{
	struct mnt *m = arg;
	const struct msnap *s;
	struct mfile *f;
	struct entry e;
	int rc;

	if (!is_entry(node) || (s = snap_find(m, node_snap(node))) == NULL)
		return (-ENOENT);
	if (node_path(node) == 0)
		return (-EISDIR);
	if ((rc = entry_of(m, node, &e)) <= 0)
		return (rc < 0 ? rc : -ENOENT);
	if (e.kind == ENTRY_DIR)
		return (-EISDIR);
	if (e.kind != ENTRY_FILE)
		return (-ENXIO);
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return (-ENOMEM);
	if (entry_dup(&f->e, &f->mem, &e)) {
		free(f);
		return (-ENOMEM);
	}
	memcpy(f->sid, s->sid, sizeof(f->sid));
	f->next = 0;
	*fh = f;
	return (0);
}

static void
op_release(void *arg, void *fh)
{
	struct mfile *f = fh;

	if (f == NULL)
		return;
	free(f->locs);
	free(f->mem);
	free(f);
}

/* f's page holds the chunks from pos on, or is read so that it does.
 * 0 or -EIO. */
static int
page_for(struct mnt *m, struct mfile *f, uint64_t pos)
{
	const struct catalog_chunk_loc *last;

	if (f->locs != NULL && f->page_lo <= pos) {
		last = &f->locs[f->n - 1];
		if (f->page_last || last->file_offset + last->plain_len > pos)
			return (0);
	}
	free(f->locs);
	f->locs = NULL;
	f->n = 0;
	if (catalog_content_chunks_at(m->cat, f->e.content_id, pos, LOC_PAGE,
	    &f->locs, &f->n))
		return (-EIO);
	if (!rst_locs_sane(f->sid, m->chunk_max, &f->e, f->locs, f->n)) {
		m->damaged++;
		free(f->locs);
		f->locs = NULL;
		f->n = 0;
		return (-EIO);
	}
	f->page_lo = pos;
	f->page_last = f->n < LOC_PAGE;
	if (f->n == 0) {
		/* No chunk ends after pos: a hole to the end. */
		free(f->locs);
		f->locs = NULL;
	}
	return (0);
}

/* The page's first chunk that ends after pos, or NULL (a hole up to
 * the page's end, or to the file's when it is the last). */
static const struct catalog_chunk_loc *
chunk_after(const struct mfile *f, uint64_t pos, size_t *idx)
{
	size_t lo = 0, hi = f->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (f->locs[mid].file_offset + f->locs[mid].plain_len <= pos)
			lo = mid + 1;
		else
			hi = mid;
	}
	*idx = lo;
	return (lo < f->n ? &f->locs[lo] : NULL);
}

/* A sequential reader's next chunks after index i, fetched ahead. */
static void
read_ahead(struct mnt *m, struct mfile *f, size_t i)
{
	size_t k;

	for (k = i + 1; k < f->n && k <= i + MCACHE_AHEAD; k++)
		mcache_ahead(&m->mc, &f->locs[k]);
}

static ssize_t
op_read(void *arg, void *fh, char *buf, size_t size, int64_t off)
{
	struct mnt *m = arg;
	struct mfile *f = fh;
	const struct catalog_chunk_loc *l = NULL;
	const uint8_t *data;
	uint64_t pos, end, from, to;
	size_t i = 0;
	int rc, seq;

	if (off < 0)
		return (-EINVAL);
	if (off >= f->e.size || size == 0)
		return (0);
	if ((uint64_t)(f->e.size - off) < size)
		size = (size_t)(f->e.size - off);
	seq = off == f->next;
	pos = (uint64_t)off;
	end = pos + size;
	memset(buf, 0, size);		/* holes */
	while (pos < end) {
		if ((rc = page_for(m, f, pos)) != 0)
			return (rc);
		if (f->n == 0 || (l = chunk_after(f, pos, &i)) == NULL) {
			if (f->page_last)
				break;
			/* The page ended before pos: read on from there. */
			f->page_lo = UINT64_MAX;
			continue;
		}
		if (l->file_offset >= end)
			break;
		if ((data = mcache_get(&m->mc, l)) == NULL) {
			log_error("snapshot %s: '%s' is damaged at offset "
			    "%llu: reads of it fail", f->sid, f->e.path,
			    (unsigned long long)l->file_offset);
			(void)catalog_chunks_mark_damaged(m->cat, &l->rowid,
			    1);
			m->damaged++;
			return (-EIO);
		}
		from = pos > l->file_offset ? pos : l->file_offset;
		to = l->file_offset + l->plain_len < end ? l->file_offset +
		    l->plain_len : end;
		memcpy(buf + (from - (uint64_t)off), data + (from -
		    l->file_offset), (size_t)(to - from));
		pos = to;
	}
	if (seq && l != NULL)
		read_ahead(m, f, i);
	f->next = off + (int64_t)size;
	return ((ssize_t)size);
}

/* The node's entry, its xattrs; 0 or a negative errno. */
static int
xattrs_of(struct mnt *m, uint64_t node, struct entry *e)
{
	int rc;

	memset(e, 0, sizeof(*e));
	if (!is_entry(node))
		return (0);
	if (snap_find(m, node_snap(node)) == NULL)
		return (-ENOENT);
	rc = entry_of(m, node, e);
	return (rc < 0 ? rc : 0);
}

/* The value of xattr name of e (an ACL's too), or -ENODATA; with size
 * 0 its size. */
static ssize_t
xattr_get(struct mnt *m, const struct entry *e, const char *name,
    void *buf, size_t size)
{
	struct entry_xattr_iter it;
	const char *n;
	const void *v = NULL;
	size_t nl, vl = 0;
	int rc, def;

	if ((def = strcmp(name, FS_FUSE_ACL_DEFAULT) == 0) ||
	    strcmp(name, FS_FUSE_ACL_ACCESS) == 0) {
		if ((rc = fs_fuse_acl_xattr(e->acl, def, &m->name)) <= 0)
			return (rc < 0 ? -ENOMEM : -ENODATA);
		v = m->name.data;
		vl = m->name.len;
	} else {
		entry_xattrs_iter_init(&it, e->xattrs, e->xattrs_len);
		while ((rc = entry_xattrs_next(&it, &n, &nl, &v, &vl)) == 1)
			if (nl == strlen(name) && memcmp(n, name, nl) == 0)
				break;
		if (rc != 1)
			return (rc < 0 ? -EIO : -ENODATA);
	}
	if (size == 0)
		return ((ssize_t)vl);
	if (vl > size)
		return (-ERANGE);
	memcpy(buf, v, vl);
	return ((ssize_t)vl);
}

static ssize_t
op_getxattr(void *arg, uint64_t node, const char *name, void *buf,
    size_t size)
{
	struct mnt *m = arg;
	struct entry e;
	int rc;

	if ((rc = xattrs_of(m, node, &e)) != 0)
		return (rc);
	return (xattr_get(m, &e, name, buf, size));
}

/* Name n (nl bytes) after the len bytes of buf; size 0: counted only. */
static int
list_put(char *buf, size_t size, size_t *len, const char *n, size_t nl)
{
	if (size > 0) {
		if (*len + nl + 1 > size)
			return (-ERANGE);
		memcpy(buf + *len, n, nl);
		buf[*len + nl] = '\0';
	}
	*len += nl + 1;
	return (0);
}

static ssize_t
op_listxattr(void *arg, uint64_t node, char *buf, size_t size)
{
	static const char *const acls[] = { FS_FUSE_ACL_ACCESS,
	    FS_FUSE_ACL_DEFAULT };
	struct mnt *m = arg;
	struct entry_xattr_iter it;
	struct entry e;
	const char *n;
	const void *v;
	size_t nl, vl, len = 0, i;
	int rc;

	if ((rc = xattrs_of(m, node, &e)) != 0)
		return (rc);
	entry_xattrs_iter_init(&it, e.xattrs, e.xattrs_len);
	while ((rc = entry_xattrs_next(&it, &n, &nl, &v, &vl)) == 1)
		if ((rc = list_put(buf, size, &len, n, nl)) != 0)
			return (rc);
	if (rc < 0)
		return (-EIO);
	for (i = 0; i < 2; i++) {
		if ((rc = fs_fuse_acl_xattr(e.acl, (int)i, &m->name)) < 0)
			return (-ENOMEM);
		if (rc == 1 && (rc = list_put(buf, size, &len, acls[i],
		    strlen(acls[i]))) != 0)
			return (rc);
	}
	return ((ssize_t)len);
}

static const struct fs_fuse_ops mount_ops = {
	.lookup = op_lookup,
	.getattr = op_getattr,
	.readlink = op_readlink,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
};

enum engine_result
engine_mount(struct repo *r, struct catalog *c, const struct mount_opts *o,
    struct mount_result *res)
{
	struct fs_fuse_opts fo;
	struct mnt m;
	int status = ENGINE_ERROR, cache = 0;

	memset(res, 0, sizeof(*res));
	if (engine_need_read(r, "mount"))
		return (ENGINE_REFUSED);
	memset(&m, 0, sizeof(m));
	m.repo = r;
	m.cat = c;
	m.chunk_max = repo_chunker_params(r)->max;
	buf_init(&m.name);
	if ((m.b = catalog_browse_new(c)) == NULL)
		goto out;
	if (mcache_init(&m.mc, r, o->cache_bytes ? o->cache_bytes :
	    MOUNT_CACHE_BYTES))
		goto out;
	cache = 1;
	if (lists(&m, 1) != 0)
		goto out;
	memset(&fo, 0, sizeof(fo));
	fo.fsname = "coffer";
	fo.allow_other = o->allow_other;
	if (fs_fuse_run(o->mountpoint, &fo, &mount_ops, &m, &res->signal))
		goto out;
	res->damaged = m.damaged;
	status = m.damaged > 0 ? ENGINE_DAMAGED : ENGINE_OK;
out:
	if (cache)
		mcache_release(&m.mc);
	catalog_browse_free(m.b);
	lists_free(&m);
	free(m.snaps);
	free(m.ds);
	buf_release(&m.name);
	return (status);
}
