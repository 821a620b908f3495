#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "catalog-int.h"
#include "coffer/pool.h"

/*
 * Checkpoints off the writer's thread.
 *
 * SQLite copies the WAL back into the database (a checkpoint) inside the
 * commit that takes the WAL past its threshold, on the committing thread:
 * it reads the frames, writes the pages and syncs the database file.  A
 * backup commits from its recorder, the thread the walk waits on, and a
 * long run of new files commits often enough for those checkpoints to be
 * a good part of that thread's time.  Here the writer's commit only looks
 * at the WAL's length (a WAL hook, which takes the place of SQLite's
 * automatic checkpoint), and a thread with a connection of its own runs
 * PASSIVE checkpoints: those copy what is committed without taking the
 * writer's lock, so the writer goes on meanwhile.
 *
 * SQLite starts the WAL over only from a transaction begun with all of
 * it copied, and a writer that begins its next transaction right after
 * a commit (a backup does) never waits for the thread: its WAL grows.
 * It stays bounded: at CKPT_INLINE frames (or when the thread failed to
 * start or to checkpoint) the commit checkpoints, as SQLite would, and
 * only what the thread has not copied yet; the next transaction then
 * starts the WAL over.
 */
#define CKPT_FRAMES 1000		/* SQLite's own threshold (4 MiB) */
#define CKPT_INLINE (16 * CKPT_FRAMES)

struct cat_ckpt {
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	sqlite3 *db;		/* the thread's own connection */
	char *path;
	int started;		/* the thread runs (and must be joined) */
	int failed;		/* no thread, or its checkpoint failed */
	int want;		/* the WAL passed CKPT_FRAMES: checkpoint it */
	int stop;
};

static void *
ckpt_main(void *arg)
{
	struct cat_ckpt *k = arg;
	int rc;

	thread_name("ckpt");
	pthread_mutex_lock(&k->mu);
	for (;;) {
		while (!k->want && !k->stop)
			pthread_cond_wait(&k->cv, &k->mu);
		if (k->stop)
			break;
		k->want = 0;
		pthread_mutex_unlock(&k->mu);
		/* BUSY: another checkpoint runs (a reader's close): later. */
		rc = sqlite3_wal_checkpoint_v2(k->db, "main",
		    SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		pthread_mutex_lock(&k->mu);
		if (rc != SQLITE_OK && rc != SQLITE_BUSY)
			k->failed = 1;
	}
	pthread_mutex_unlock(&k->mu);
	return (NULL);
}

/* The thread and its connection; on failure the commits checkpoint. */
static void
ckpt_start(struct cat_ckpt *k)
{
	k->failed = 1;
	if (sqlite3_open_v2(k->path, &k->db, SQLITE_OPEN_READWRITE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
		return;
	/*
	 * A checkpoint copies frames file to file, past the page cache; the
	 * read opens the connection's WAL, which a checkpoint by a
	 * connection that has not read yet would skip in older SQLites.
	 */
	if (sqlite3_exec(k->db, "PRAGMA cache_size = 16; "
	    "SELECT count(*) FROM sqlite_master", NULL, NULL, NULL) !=
	    SQLITE_OK)
		return;
	if (pthread_mutex_init(&k->mu, NULL) != 0)
		return;
	if (pthread_cond_init(&k->cv, NULL) != 0) {
		pthread_mutex_destroy(&k->mu);
		return;
	}
	if (pthread_create(&k->th, NULL, ckpt_main, k) != 0) {
		pthread_cond_destroy(&k->cv);
		pthread_mutex_destroy(&k->mu);
		return;
	}
	k->started = 1;
	k->failed = 0;
}

static int
wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct catalog *c = arg;
	struct cat_ckpt *k = c->ckpt;
	int failed;

	if (frames < CKPT_FRAMES)
		return (SQLITE_OK);
	if (!k->started && !k->failed)
		ckpt_start(k);
	failed = 1;
	if (k->started) {
		pthread_mutex_lock(&k->mu);
		failed = k->failed;
		/* Not woken for the commit's own checkpoint: it would take
		 * the checkpoint's lock, and that one would not run. */
		if (!failed && frames < CKPT_INLINE) {
			k->want = 1;
			pthread_cond_signal(&k->cv);
		}
		pthread_mutex_unlock(&k->mu);
	}
	/* As SQLite's own hook: a checkpoint that fails (or finds the
	 * thread's running) is tried again at the next commit, and the
	 * commit stands. */
	if (failed || frames >= CKPT_INLINE)
		(void)sqlite3_wal_checkpoint_v2(db, name,
		    SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	return (SQLITE_OK);
}

int
cat_ckpt_attach(struct catalog *c)
{
	struct cat_ckpt *k;

	if ((k = calloc(1, sizeof(*k))) == NULL ||
	    (k->path = strdup(c->path)) == NULL) {
		free(k);
		return (-1);
	}
	c->ckpt = k;
	sqlite3_wal_hook(c->db, wal_hook, c);
	return (0);
}

void
cat_ckpt_detach(struct catalog *c)
{
	struct cat_ckpt *k = c->ckpt;

	if (k == NULL)
		return;
	if (c->db != NULL)
		sqlite3_wal_hook(c->db, NULL, NULL);
	if (k->started) {
		pthread_mutex_lock(&k->mu);
		k->stop = 1;
		pthread_cond_signal(&k->cv);
		pthread_mutex_unlock(&k->mu);
		pthread_join(k->th, NULL);
		pthread_cond_destroy(&k->cv);
		pthread_mutex_destroy(&k->mu);
	}
	/* Not the last connection: it leaves the WAL to the writer's close. */
	sqlite3_close(k->db);
	free(k->path);
	free(k);
	c->ckpt = NULL;
}
