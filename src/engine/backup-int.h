/*
 * A backup's state, shared by backup.c (the walk, the batches on the pool,
 * the run) and recorder.c (the recorder thread: the catalog's side of
 * the pipeline, and the files' entries).
 */
#ifndef COFFER_ENGINE_BACKUP_INT_H
#define COFFER_ENGINE_BACKUP_INT_H

#include <pthread.h>

#include "coffer/chunk.h"
#include "coffer/catalog-known.h"
#include "coffer/engine.h"
#include "coffer/hmap.h"
#include "coffer/pool.h"
#include "coffer/progress.h"
#include "engine-int.h"

#define BATCH_BYTES (6u << 20)
/*
 * A batch also moves on at this many chunks: its files wait in memory (a
 * few hundred bytes each, with their jobs) until their chunks are in the
 * pack, and 6 MiB of 16-byte files would be 393,216 of them.  A batch of
 * the bench's text files holds about 600.
 */
#define BATCH_JOBS 4096
#define READ_BYTES (1u << 20)	/* read straight into the filling batch */
/*
 * Chunks below HASH_SMALL bytes are hashed HASH_GROUP at a time, one job
 * of the pool (ccrypto_chunk_ids: eight side by side where the processor
 * can); a larger one is a job of its own, so that the pool's threads
 * share a batch of checkpoint chunks rather than one of them taking it.
 */
#define HASH_SMALL (64u << 10)
#define HASH_GROUP 16
#define NBATCH 3	/* filling, hashed, sealing */

enum { READING, CLOSED, DEAD, RECORDING, FINISHED };

/* A regular file being stored; its entry is recorded when complete. */
struct pfile {
	struct pfile *next;
	struct pfile *qnext;		/* in the recorder's queue */
	struct entry e;			/* a copy: its strings live in mem */
	void *mem;
	struct catalog_chunk_ref *refs;
	uint8_t (*ids)[CCRYPTO_ID_BYTES];
	size_t nrefs, caprefs;
	size_t outstanding;		/* chunks queued, not yet resolved */
	size_t inflight;		/* chunks in batches, of any attempt */
	uint32_t gen;			/* read attempt (a reread restarts) */
	int state;
	int link;			/* a further name of a file recorded:
					 * its entry only (content_id set) */
};

/* One chunk in the batch. */
struct job {
	struct pfile *f;
	uint32_t gen;
	size_t ref;			/* index in f->refs */
	size_t off;			/* its bytes in the batch's data */
	uint32_t len;
	uint8_t id[CCRYPTO_ID_BYTES];
	int64_t rowid;
	int isnew;
	size_t rec_off, rec_len;	/* sealed record in recs */
	int failed;
};

/*
 * The recorder: a thread that does the catalog's work of the pipeline
 * while the walk reads the next files: a step's task (the packer's
 * flush, then the lookups of the batch to seal, whose sealing it then
 * starts on the pool), and the entries of stored files (their content
 * rows and entry rows, and those of further names of files recorded).
 * The catalog is one SQLite connection, used by one thread at a time:
 * owner says which, and with it go the catalog, the packer, changes to
 * the links map and the result's counts of entries.  The walk's thread
 * takes it only around its own catalog work and has it before the
 * recorder whenever it asks; the recorder takes it when it is free, for
 * its task and a few files at a time, so that a commit never falls
 * between a content row and its chunk rows.
 */
enum { OWN_NONE, OWN_WALK, OWN_RECORDER };
#define RECORD_AT_ONCE 32
/* Files waiting for the recorder, at most: the walk waits beyond (each
 * holds its entry and chunk list). */
#define RECORD_QUEUE_MAX BATCH_JOBS
/* Further names of recorded files handed on at once (walk_file). */
#define LINKS_AT_ONCE 1024

struct recorder {
	pthread_t th;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int owner;
	int depth;			/* the walk's cat_enter nesting */
	int wants;			/* the walk waits for the catalog */
	struct pfile *head, **tail;	/* queued, in order */
	size_t nqueued;
	int task;			/* a step's task is waiting */
	int stop;
	int failed;
};

/* Per-thread state for sealing. */
struct worker {
	struct compressor *z;
};

/* Chunks on their way into the pack, with their bytes. */
struct batch {
	struct backup *b;
	struct buf data;		/* chunk bytes */
	struct job *jobs;
	size_t njobs, capjobs;
	/* The hashing's jobs: group i is jobs[groups[i]] up to
	 * jobs[groups[i + 1]] (hash_groups). */
	size_t *groups;
	size_t ngroups, capgroups;
};

struct backup {
	struct repo *repo;
	struct catalog *cat;
	const struct backup_opts *opts;
	struct backup_result *res;
	struct packer packer;
	struct chunker *chunker;
	uint32_t max_chunk;
	int level;
	int force_full;			/* --new-source, no level asked */
	int64_t dataset_id;

	/*
	 * The view a changed entry is compared with: the base of a
	 * differential or incremental.  For a full, the dataset's previous
	 * snapshot, consulted only for files that keep changing while read.
	 */
	struct catalog_resolver *view;
	int64_t view_id;		/* 0: none */

	/* (dev, ino) -> content id.  Changed by the catalog's holder; the
	 * walk's thread also looks in it without the catalog (walk_file),
	 * so it has a lock of its own (links_get, links_put). */
	struct hmap links;
	pthread_mutex_t links_mu;
	struct fs_walk *walk;

	/* A full's record rows as they are recorded (NULL: the record is
	 * read from the catalog); with the catalog, like the packer. */
	struct catalog_spool *spool;

	/* Checkpoint directories found being written after the walk went
	 * in: put back whole once every file is recorded. */
	char **held;
	size_t nheld;
	int hold_failed;		/* a checkpoint could not be put back */

	/* Files whose chunks are queued: entries wait for their chunk rows. */
	struct pfile *pending;
	size_t links_waiting;		/* link pfiles since finish_files */
	struct hmap pending_links;	/* (dev, ino) of pending hardlinks */
	int64_t snapshot_id;

	/* The file being read, and the cutting of its content. */
	struct pfile *cur;
	struct chunk_stream *cs;

	/* The batches: the walk fills one while the pool hashes another
	 * and then seals the third. */
	struct pool *pool;
	struct worker *workers;
	struct batch batches[NBATCH];
	struct batch *fill, *hashed, *sealing;
	struct buf recs;		/* the sealing batch's new records */
	int running;			/* a pool loop is on them */
	int failed;			/* a step failed: no more steps */

	struct progress progress;
	struct recorder rec;
};

static inline void
count_entry(struct backup_result *res, int kind)
{
	if (kind == ENTRY_FILE)
		res->files++;
	else if (kind == ENTRY_DIR)
		res->dirs++;
	else
		res->others++;
}

/* The key of an inode among hardlinks seen in this run. */
static inline void
link_key(uint8_t key[16], const struct entry *e)
{
	put_u64(key, e->dev);
	put_u64(key + 8, e->ino);
}

/* backup.c: a step's task (the recorder runs it with the catalog). */
int backup_step_task(struct backup *b);

/*
 * recorder.c: the recorder thread and the recording of files' entries.
 * recorder_enter and recorder_leave: the walk's thread takes the catalog
 * (waiting for the recorder's few files), and gives it back; nested
 * calls count.  recorder_queue: a file whose chunks are all in the pack,
 * recorded by the thread once the walk gives the catalog back.
 * recorder_task_post: the step's task handed to the recorder;
 * recorder_task_wait: it is done (-1: the recorder failed).
 * recorder_wait: at most left files queued (0: every one recorded).
 * recorder_stop: the walk is over (or failed, failed set): the thread
 * ends once its queue is recorded (dropped if failed).  0 or -1.
 */
int recorder_start(struct backup *b);
void recorder_enter(struct backup *b);
void recorder_leave(struct backup *b);
void recorder_queue(struct backup *b, struct pfile *f);
void recorder_task_post(struct backup *b);
int recorder_task_wait(struct backup *b);
int recorder_wait(struct backup *b, size_t left);
int recorder_stop(struct backup *b, int failed);
size_t recorder_backlog(struct backup *b);
int recorder_failed(struct backup *b);
/* A file whose chunks are all resolved recorded without the thread:
 * content, entry, the rest.  0 or -1. */
int backup_pfile_finish(struct backup *b, struct pfile *f);
/* (dev, ino) -> content id of the files recorded (b->links, locked). */
int backup_links_get(struct backup *b, const uint8_t key[16], int64_t *cid);
int backup_links_put(struct backup *b, const uint8_t key[16], int64_t cid);

#endif
