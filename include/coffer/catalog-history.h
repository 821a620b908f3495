/*
 * What this host did and saw, kept in the catalog beside the snapshots
 * and journaled (journal.c): verify passes and runs (verify.c), drills,
 * the runs of `coffer run` (run.c), key uses (keyuse.c), offsite bundles
 * (bundle.c).
 */
#ifndef COFFER_CATALOG_HISTORY_H
#define COFFER_CATALOG_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/catalog.h"

/*
 * Where a verify pass stopped by its time limit got to, per mode (a short
 * string naming what the pass checks).  get: 1 found, 0 none, -1.
 */
struct catalog_verify_state {
	uint64_t seed;			/* the pass's random choices */
	char last_pack[33];		/* the last pack done */
	int64_t started_ns;		/* when the pass began */
	int64_t packs, chunks, bytes, errors;	/* done so far */
};
int catalog_verify_state_get(struct catalog *c, const char *mode,
    struct catalog_verify_state *vs);
int catalog_verify_state_put(struct catalog *c, const char *mode,
    const struct catalog_verify_state *vs);
int catalog_verify_state_clear(struct catalog *c, const char *mode);

/*
 * Verify results: one row per verify run (coffer verify, a policy's
 * [verify]), journaled so that other hosts, rebuilt catalogs and imported
 * bundles know what was checked, when, and what was found.  mode is
 * verify_result's ("structure", "read-data", "read-data=P%",
 * "read-data=N/M"); slice_n and slice_m the N/M of a slice (0 else);
 * verdict "pass" (nothing wrong) or "fail".
 */
struct catalog_verify_run {
	int64_t id;
	int64_t time_ns;		/* when it started */
	const char *host;
	const char *mode;
	unsigned slice_n, slice_m;
	int complete;			/* 0: stopped, the next run resumes */
	int64_t packs;			/* packs checked */
	int64_t packs_read;		/* ... whose data was read */
	int64_t bytes_read;
	int64_t damage;			/* problems found */
	double seconds;
	const char *verdict;
};
/* Add v (all but id).  A row of the same time and mode stays. */
int catalog_verify_run_add(struct catalog *c,
    const struct catalog_verify_run *v);
/* Call cb for each verify run, oldest first (the strings are valid during
 * the call); stops and returns cb's value when it is non-zero. */
int catalog_verify_run_list(struct catalog *c,
    int (*cb)(void *arg, const struct catalog_verify_run *v), void *arg);
/*
 * The slice (1..m) that a rotating verify of m slices reads next: the
 * one after the newest run of m slices, or that one again when it
 * stopped before its end; 1 when none.  0, or -1 (reported).
 */
int catalog_verify_next_slice(struct catalog *c, unsigned m, unsigned *n);

/*
 * Recovery drills: one row each.  Seconds are wall time; a negative
 * optional value means none (NULL in the table).
 */
struct catalog_drill {
	int64_t id;
	int64_t time_ns;		/* when it started */
	int64_t dataset_id;
	const char *dataset;		/* list only */
	int64_t snapshot_id;		/* 0 once the snapshot is pruned */
	char sid[SNAPSHOT_ID_HEX + 1];
	int no_write;			/* streamed and verified, not written */
	double sample;			/* percent of the files */
	int64_t files;			/* entries checked */
	int64_t bytes;			/* file content checked */
	int64_t failures;		/* entries that failed a check */
	double seconds;			/* restore (or stream) time */
	double check_seconds;		/* checking the restored tree */
	double estimate_seconds;	/* full restore, from a sample */
	double rto_seconds, rpo_seconds;	/* objectives */
	double rpo_age_seconds;		/* age of the newest snapshot */
	const char *verdict;		/* "pass", "fail", "missed-objective" */
	const char *source;		/* NULL: the repository; else where
					 * it recovered from ("bundles:...") */
	int64_t newest_ns;		/* list only: start of the dataset's
					 * newest complete snapshot, or 0 */
};
/* Add d (all but id, dataset, newest_ns); sets d->id. */
int catalog_drill_add(struct catalog *c, struct catalog_drill *d);
/*
 * Call cb for each drill (of one dataset, or all when dataset is NULL),
 * by dataset then time; with latest, only each dataset's newest.  The
 * strings are valid during the call.  Stops and returns cb's value when
 * it is non-zero.
 */
int catalog_drill_list(struct catalog *c, const char *dataset, int latest,
    int (*cb)(void *arg, const struct catalog_drill *d), void *arg);


/* Copy the drill history and key uses of the catalog file from into c (a
 * rebuild): rows c has already (same time and snapshot, same key and
 * time) are not copied twice. */
int catalog_copy_history(struct catalog *c, const char *from);

/*
 * The runs of `coffer run` (src/catalog/run.c): each
 * run with its actions, journaled to the repository like drill results.
 */
struct catalog_run {
	int64_t id;
	char rid[SNAPSHOT_ID_HEX + 1];	/* its name: random, 32 hex */
	int64_t time_ns;		/* the run's clock (--now) */
	int64_t wall_ns;		/* when it started, by the host's clock */
	double seconds;			/* how long it took */
	const char *host, *user, *policy;
	int status;			/* its exit status */
};
struct catalog_run_action {
	const char *kind;		/* backup, export, forget, prune, drill */
	const char *subject;		/* dataset, target, drill/dataset, "" */
	const char *level;		/* full, ... or NULL */
	int64_t slot_ns;		/* the schedule's slot it served, or 0 */
	int status;			/* its exit status */
	int done;			/* counts as done for its schedule */
	double seconds;
	const char *detail;		/* snapshot id, bundle, a summary */
};
/* Add run r (all but id; sets id) and its n actions, all or nothing. */
int catalog_run_add(struct catalog *c, struct catalog_run *r,
    const struct catalog_run_action *a, size_t n);
/* The run clock's time of the newest done action of kind and subject:
 * 1 found (*time_ns), 0 none, -1 error. */
int catalog_run_last(struct catalog *c, const char *kind,
    const char *subject, int64_t *time_ns);
/*
 * A capture of coffer watch is recorded as a run of one backup whose
 * detail begins with CATALOG_RUN_CAPTURE and whose slot is the time of
 * the first marker it captured.  catalog_run_capture: of the newest done
 * capture of dataset subject, that marker's time (*marked_ns) and when
 * the capture ended (*end_ns, its start and its seconds): 1 found, 0
 * none, -1 error (reported).
 */
#define CATALOG_RUN_CAPTURE "capture of "
int catalog_run_capture(struct catalog *c, const char *subject,
    int64_t *marked_ns, int64_t *end_ns);
/*
 * Each run whose clock is at or after since_ns (0: all), oldest first,
 * with its actions in order; strings valid during the call.  Stops and
 * returns cb's value when it is non-zero.
 */
int catalog_run_list(struct catalog *c, int64_t since_ns,
    int (*cb)(void *arg, const struct catalog_run *r,
    const struct catalog_run_action *a, size_t n), void *arg);

/*
 * For each kind and subject of action, and done or not, the run clock's
 * time of the newest such action (src/catalog/run.c): what coffer run's
 * schedules need of the history.  Strings valid during the call.  Stops
 * and returns cb's value when it is non-zero; 0 or -1.
 */
int catalog_run_newest(struct catalog *c, int (*cb)(void *arg,
    const char *kind, const char *subject, int done, int64_t time_ns),
    void *arg);


/*
 * The highest coffer.conf generation this catalog has seen (0: none):
 * catalog_generation_get; catalog_generation_raise sets it to gen if that
 * is higher.  0 or -1 (reported).
 */
int catalog_generation_get(struct catalog *c, uint64_t *gen);
int catalog_generation_raise(struct catalog *c, uint64_t gen);
/*
 * The key slot that last opened the repository on this host, kept beside
 * the catalog at catpath (a passphrase tries it first: whoever can write
 * the repository can plant slots that are costly to try).
 * slot_hint_get: its name into out ("" when none or unreadable);
 * slot_hint_set: remember name (a failure is reported, and is no more
 * than a hint not kept).
 */
void catalog_slot_hint_get(const char *catpath, char *out, size_t size);
void catalog_slot_hint_set(const char *catpath, const char *name);
/*
 * Key use (keyuse.c): which key unlocked a run that wrote the repository.
 * key names it: a slot by its name, a key file by "key-file:full" or
 * "key-file:write-only" (all key files of a kind are the same bytes, so
 * nothing else tells them apart).  catalog_key_use_add: one use at
 * time_ns from host (NULL: unknown), to be journaled; a use known
 * already (same key and time) is not added twice.  catalog_key_use_last:
 * cb gets each key's newest use, by key; stops and returns cb's value
 * when it is non-zero.  0 or -1 (reported).
 */
#define CATALOG_KEY_NAME_MAX 64
int catalog_key_use_add(struct catalog *c, const char *key, int64_t time_ns,
    const char *host);
int catalog_key_use_last(struct catalog *c,
    int (*cb)(void *arg, const char *key, int64_t time_ns, const char *host),
    void *arg);

/*
 * Offsite bundles (src/catalog/bundle.c): what this host exported to each
 * target and imported from it.
 */
struct catalog_bundle {
	int64_t id;
	int exported;			/* 1 exported, 0 imported */
	char target[65];
	uint32_t seq;
	int level;
	uint32_t base_seq;		/* 0 for a full */
	uint8_t manifest[32];		/* BLAKE2b-256 of its manifest */
	char name[128];			/* its file name */
	uint64_t size;
	int64_t packs;
	char *snapshots;		/* malloc'd: sids, space-separated */
	int64_t created_ns;
};
void catalog_bundle_release(struct catalog_bundle *b);
/*
 * The newest bundle of target in a direction (exported or not); with
 * full_only the newest full.  1 found (*b filled), 0 none, -1 error.
 */
int catalog_bundle_last(struct catalog *c, int exported, const char *target,
    int full_only, struct catalog_bundle *b);
/* A bundle of seq: 1 found, 0 not, -1. */
int catalog_bundle_get(struct catalog *c, int exported, const char *target,
    uint32_t seq, struct catalog_bundle *b);
/* Record b (sets b->id) with the packs it carried, all or nothing. */
int catalog_bundle_add(struct catalog *c, struct catalog_bundle *b,
    char *const *packs, size_t n);
/*
 * The packs that exported bundles of target with from_seq <= seq <= to_seq
 * hold,
 * as a sorted malloc'd array of malloc'd names.
 */
int catalog_bundle_held(struct catalog *c, const char *target,
    uint32_t from_seq, uint32_t to_seq, char ***packs, size_t *n);
/* Each bundle (of target, or of all when NULL), by target and seq. */
int catalog_bundle_list(struct catalog *c, int exported, const char *target,
    int (*cb)(void *arg, const struct catalog_bundle *b), void *arg);
/*
 * The packs a snapshot's chain needs for its data (the chunks of every
 * entry of the snapshot and its ancestors) and for its records' heads,
 * sorted and unique, malloc'd; (*need)[i] is how many of pack i's bytes
 * the chain's chunks take (their stored length plus overhead each), 0 for
 * a pack held for a record head only.  Record parts are named by the
 * heads.
 */
int catalog_chain_packs(struct catalog *c, int64_t snapshot_id,
    uint32_t overhead, char ***packs, uint64_t **need, size_t *n);

#endif
