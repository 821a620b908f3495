#ifndef COFFER_TUNING_H
#define COFFER_TUNING_H

#include <stddef.h>
#include <stdint.h>

/*
 * The switches coffer takes from the environment besides its options:
 * read once, here, and documented in man/coffer.1 (ENVIRONMENT, TEST
 * HOOKS).  The library asks tuning_get() rather than getenv.  A numeric
 * switch left unset, empty or not above 0 is 0: the default of the module
 * that uses it.
 */
enum tuning_read_back {
	TUNING_READ_BACK_AUTO = 0,	/* when the pack record is not in
					 * memory */
	TUNING_READ_BACK_ALWAYS = 1,
	TUNING_READ_BACK_NEVER = 2
};

struct tuning {
	/* For tests and comparisons. */
	int aead_libsodium;		/* COFFER_AEAD=libsodium: records by
					 * libsodium, not OpenSSL */
	int blake2b_x8;			/* COFFER_BLAKE2B_X8 (1; 0: off):
					 * eight chunk ids at once on
					 * AVX-512 */
	int read_back;			/* COFFER_READ_BACK: always, never */
	int walk_sync;			/* COFFER_WALK_AHEAD=0: walks read
					 * no entries ahead on a thread */
	int watch_no_inotify;		/* COFFER_WATCH_INOTIFY=0: coffer
					 * watch scans only */
	uint64_t pack_size;		/* COFFER_PACK_SIZE: bytes a pack
					 * is cut at */
	size_t record_part_entries;	/* COFFER_RECORD_PART_ENTRIES:
					 * entries per snapshot record part */
	size_t record_image_bytes;	/* COFFER_RECORD_IMAGE_BYTES: room
					 * a spooled part's image is first
					 * given, beyond its template */

	double s3_retry_seconds;	/* COFFER_S3_RETRY_SECONDS: how long
					 * an S3 request is retried at most */
	double lease_seconds;		/* COFFER_LEASE_SECONDS: the length
					 * of a writer's lease on object
					 * storage (0: the store's) */
	double prune_margin;		/* COFFER_PRUNE_MARGIN: seconds a
					 * prune's mark waits beyond the
					 * writers beside it (-1: unset) */

	/* This host's limit, as given (NULL: unset); checked by the key
	 * slot code, which knows the bounds. */
	const char *kdf_max_memory;	/* COFFER_KDF_MAX_MEMORY, MiB */

	/* Test hooks, only in the test build (src/util/tuning.c): shell
	 * commands run at one point each, or NULL. */
	const char *test_before_change_check;	/* backup, a file read */
	const char *test_before_dir_metadata;	/* restore, before dirs */
	const char *test_before_hardlink;	/* restore, a second name */
	const char *test_before_drill_check;	/* drill, before checks */
	const char *test_prune_crash;	/* prune: the step to die at */
	int test_change_restored;	/* restore: alter what it reads back */
	const char *test_raise;		/* POINT:N:SIG: raise SIG at POINT's
					 * Nth passage (tuning_raise_at) */
	int test_error;			/* main: an error before the command */
	const char *test_exits;		/* main: the file of each run's
					 * status and errors */
};

/* The switches, read from the environment at the first call (from any
 * thread). */
const struct tuning *tuning_get(void);

/* Read the environment again: for unit tests that change it, while no
 * other thread uses the switches. */
void tuning_reload(void);

/*
 * Run a test hook: cmd (one of struct tuning's test_* commands) with sh,
 * with var=value added to the environment first when var is not NULL; a
 * warning naming name if it fails.  Nothing when cmd is NULL.
 */
void tuning_run_hook(const char *name, const char *cmd, const char *var,
    const char *value);

/*
 * A test hook for signals at a chosen point, as if one arrived then:
 * with COFFER_TEST_RAISE=POINT:N:SIG (SIG one of INT, TERM, HUP, KILL),
 * the Nth call of tuning_raise_at(POINT) raises SIG in this process.
 * Points: "verify-pack" (a pack checked), "restore-file" (a file
 * restored), "restore-write" (a file's data written, before it takes its
 * path), "rewrap-intent" (a rewrap's intent written, no header yet),
 * "rewrap-header" (one more header rewritten, the intent still there),
 * "backup-part" (a part of a snapshot record stored).  Only the test
 * build acts on it (src/util/tuning.c, COFFER_TEST_HOOKS).
 */
void tuning_raise_at(const char *point);
/*
 * The test build's step hook (tests/unit/t-interleave.c): fn(point) at
 * every tuning_raise_at, on the thread that passes the point, before
 * COFFER_TEST_RAISE is looked at; NULL: none.  Besides the points above:
 * "backup-synced" (a backup has its lock, its catalog synced and its
 * base chosen, its snapshot running), "backup-pack" (a writer's pack is
 * full, about to be put, the ones before it durable: a backup's last
 * holds its snapshot record's head), and the points of forget and
 * prune.  Only in $(BUILD)/test/tuning-hooks.o: a program
 * that calls it links that object before libcoffer.a.
 */
void tuning_set_step_hook(void (*fn)(const char *point));

#endif
