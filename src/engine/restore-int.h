/*
 * A restore's state, shared by restore.c (the pipeline: windows, writers,
 * directories, links, the run) and restore-read.c (a window's chunks:
 * fetched and verified, or read back from files restored earlier).
 */
#ifndef COFFER_ENGINE_RESTORE_INT_H
#define COFFER_ENGINE_RESTORE_INT_H

#include <pthread.h>

#include "coffer/chunk.h"
#include "coffer/engine.h"
#include "coffer/fsutil.h"
#include "coffer/hmap.h"
#include "coffer/pool.h"
#include "coffer/progress.h"

/*
 * Open pack readers per thread.  A window's chunks are fetched largest
 * first, so in no order of packs: a window of small files drawn from
 * more packs than the cache holds reopens a pack (its header read and its
 * key unsealed into locked memory) every few chunks (100,000 small files
 * from 8 packs: 30,000 opens with 4).
 */
#define READER_CACHE 16
#define WINDOW_BYTES (8u << 20)
#define WINDOW_ENTRIES 4096
/*
 * Windows: filled, fetched, written, and one resting.  The file going on
 * from a window into the next is written from the window's memory until
 * its writer's ticket, and files are written in the middle of their loop
 * (FETCH_HEAD), so a window is fetched into again only two loops after
 * its files were written: with three, fetching waits for the last loop's
 * direct writes.
 */
#define NWINDOWS 4
/* Fetch jobs taken before the written window's files (step_job). */
#define FETCH_HEAD 2
/* Reading back a smaller chunk would cost more than fetching it. */
#define REUSE_MIN (256u << 10)
#define REUSE_FILES 64
#define REUSE_CHUNKS 32768
#define HASH_GROUP 8		/* chunks hashed together (ccrypto_chunk_ids) */
/*
 * The catalog's cache and sorts, beside the windows' 32 MiB: restore
 * reads the catalog in path order, a few rows a file, so 2 MiB do; at
 * CATALOG_CACHE_KIB's 8 MiB its peak memory grows with the catalog.
 */
#define RESTORE_CATALOG_KIB 2048

struct cached_reader {
	char name[PACK_NAME_LEN + 1];
	struct pack_reader *pr;		/* NULL: the pack could not be opened */
	uint64_t used;
};

/* Per-thread: pack readers and a decompressor. */
struct rworker {
	struct cached_reader cache[READER_CACHE];
	uint64_t tick;
	struct compressor *z;
};

/* WR_DAMAGED: its data failed authentication or is missing; WR_FAILED:
 * it could not be written (a full disk, say). */
enum { WR_OK, WR_FAILED, WR_DAMAGED, WR_FAILED_BEFORE };

/* An entry of a window, copied out of the catalog's iterator. */
struct wentry {
	struct entry e;
	void *mem;
	size_t first, njobs;		/* its chunks in this window */
	int cont;			/* goes on with a file begun earlier */
	int last;			/* its last chunk is in this window */
	int link;			/* a second name of an earlier inode */
	int bad;			/* its catalog rows are not sane */
	int rc;				/* WR_*, from writing its file */
	int64_t bytes;			/* written of it in this window */
	int keep_fd;			/* finished: fs_restore_keep's, or -1 */
	int has_id;			/* finished: id is its inode */
	struct fs_file_id id;
};

/* One chunk of a window. */
struct rjob {
	struct catalog_chunk_loc loc;
	size_t off;			/* its bytes in the window's buffer */
	int rc;
	int src_fd;			/* a restored file holding it, or -1 */
	int64_t src_off;		/* where in that file */
	int rb;				/* RB_*: reading it back, under rb.mu */
};

enum { RB_NONE, RB_QUEUED, RB_DONE, RB_FAILED };

/*
 * Reading back runs on threads of its own, from the start of the loop
 * that fetches the window, while the pool decrypts the other chunks (which
 * it takes first): a pool thread would wait for the disk, behind the
 * writes.  Two, so that a read is queued while another is served.  A
 * chunk that could not be read back is fetched by its job.
 */
#define READBACK_THREADS 2

struct readback {
	pthread_t thread[READBACK_THREADS];
	int started;			/* threads */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct window *win;		/* being fetched */
	const size_t *q;		/* its jobs to read back: the end of
					 * its order */
	size_t n, next;
	int quit;
	struct fs_reader *rd[READBACK_THREADS];
	int64_t bytes;			/* read back */
};

struct readback_start {
	struct restore *rs;
	struct fs_reader *rd;
};

/* A restored file chunks are read back from (a slot of a ring); gen
 * tells a chunk's reference to an earlier file in the slot. */
struct reuse_src {
	int fd;
	uint32_t gen;
};

struct reuse_ref {
	uint32_t slot, gen;
	int64_t off;
};

/* A chunk of the file going on into the next window, until it is
 * finished. */
struct reuse_pending {
	int64_t rowid;
	int64_t off;
};

/*
 * A window's chunks are in data, aligned to 4096 and laid out so that a
 * large file's part starts aligned as in the file: its whole blocks can be
 * written to the disk from there (fs_restore_data_lent).  The file going
 * on into the next window may still be written from here after the loop
 * that wrote it, until its writer's ticket; the window is settled before
 * its memory is written again (it is fetched into) or moved (it grows
 * while filled).
 */
struct window {
	struct wentry *ents;
	size_t nents, capents;
	size_t *files;			/* entries whose file is written */
	size_t nfiles, capfiles;
	struct rjob *jobs;
	size_t njobs, capjobs;
	size_t *order;			/* jobs in the order the pool takes
					 * them: to read back last */
	size_t caporder;
	struct buf data;
	struct fs_restore *lent_to;	/* the writer still using data */
	uint64_t lent_ticket;
	/* Its fetched chunks are hashed before any of its files is
	 * written, in groups of HASH_GROUP neighbours in order (largest
	 * first: a group's lanes end about together); how many groups are
	 * done, under restore.mu. */
	size_t ngroups, vdone;
};

struct restore {
	struct repo *repo;
	struct catalog *cat;
	const char *sid;		/* the snapshot's, for errors */
	uint32_t chunk_max;		/* the repository's chunker max */
	struct fs_restore *fr;		/* directories, links, devices */
	struct restore_result *res;
	const struct restore_opts *opts;
	struct pool *pool;
	struct rworker *workers;
	/* Taking entries into fill, on this thread; fetching the chunks of
	 * fetch and writing the files of out, on the pool; spare, written
	 * in the last loop, rests. */
	struct window win[NWINDOWS];
	struct window *fill, *fetch, *out, *spare;
	size_t head;			/* fetch jobs before out's files */
	int running;			/* the pool's loop is on fetch, out */
	/* Writers of regular files, shared by the pool's jobs; and the
	 * out window's groups of chunks hashed (verified). */
	pthread_mutex_t mu;
	pthread_cond_t verified;
	struct fs_restore **writers, **idle;
	size_t nwriters, nidle, capwriters;
	/* A file going on into the next window keeps its writer. */
	struct fs_restore *carry_in, *carry_out;
	/* Hardlink groups: (dev, ino, content) -> index into link_paths. */
	struct hmap links;
	struct hmap planned;		/* groups whose first name is taken */
	char **link_paths;
	struct fs_file_id *link_ids;	/* the inodes restored at them */
	size_t nlinks, caplinks, capids;
	int64_t missing;		/* requested paths not in the snapshot */
	/* Chunks found damaged or missing, marked in the catalog at the
	 * end so that the next backup stores them again. */
	pthread_mutex_t bad_mu;
	int64_t *bad_rows;
	size_t nbad, capbad;
	/* The target takes the snapshot root's metadata (root_entry). */
	int root_ok, root_done;
	int dirs_made;			/* restore_under's directories are
					 * made (make_dirs) */
	char **made;			/* directories above the paths asked
					 * for, made (make_above) */
	size_t nmade, capmade;
	/* Chunks to read back: chunk row -> index into refs. */
	struct hmap seen;
	struct reuse_ref *refs;
	size_t nrefs, caprefs;
	struct reuse_src srcs[REUSE_FILES];
	size_t nsrcs, next_src;		/* slots in use: 0 turns it off */
	struct reuse_pending *pend;
	size_t npend, cappend;
	struct readback rb;
	int read_back_always;		/* even records in memory */
	int change_restored;		/* tests: COFFER_TEST_CHANGE_RESTORED */
	struct progress progress;
};

/*
 * restore-read.c: a chunk, as restore and dump read one.  rst_read_chunk:
 * the chunk loc locates read through w's pack readers into dst
 * (loc->plain_len bytes): authenticated and decompressed, and with
 * hashed, its keyed hash checked against its id (else the caller must:
 * rst_verify_group).  0, or -1 (reported: damaged, missing).
 * rst_worker_release: w's readers and decompressor closed.
 * rst_locs_sane: the catalog is not authenticated as the records are, so
 * a file's chunk locations are checked before anything is reserved for
 * them: a length the chunker cannot have cut (a damaged row of 4 GiB was
 * reserved before its record's own check failed), a record larger than
 * packs hold, or data outside the file is damage.  1 sane, 0 not
 * (reported, with snapshot sid).
 */
int rst_read_chunk(struct repo *r, struct rworker *w,
    const struct catalog_chunk_loc *loc, uint8_t *dst, int hashed);
void rst_worker_release(struct rworker *w);
int rst_locs_sane(const char *sid, uint32_t chunk_max, const struct entry *e,
    const struct catalog_chunk_loc *locs, size_t n);

/* The key of a hardlink group, for restore and dump: inode and
 * content. */
static inline void
rst_link_key(uint8_t key[24], const struct entry *e)
{
	put_u64(key, e->dev);
	put_u64(key + 8, e->ino);
	put_u64(key + 16, (uint64_t)e->content_id);
}

/* restore-read.c: a window's chunks. */
void rst_fetch_chunk(struct restore *rs, struct window *win, struct rjob *j,
    struct rworker *w);
void rst_verify_group(struct restore *rs, struct window *win, size_t g,
    struct rworker *w);
int rst_readback_start(struct restore *rs, struct window *win);
int rst_has_reusable(const struct rjob *jobs, size_t n);
int rst_reuse_add(struct restore *rs, int fd, const struct rjob *jobs,
    size_t n);
int rst_reuse_pend(struct restore *rs, const struct rjob *jobs, size_t n);
void rst_reuse_find(struct restore *rs, struct rjob *j);
size_t rst_reuse_files(int threads);

#endif
