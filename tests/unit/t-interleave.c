/*
 * Hosts writing one repository at once, stepped (issue 44): backups,
 * forgets and prunes of NHOSTS hosts, each with its own catalog, on one
 * memory store, interleaved at the points where the engine calls
 * tuning_raise_at (the step hook of the test build).  At each point of
 * the operation in progress a seeded generator may run, right there, a
 * whole operation of another host, which may nest one more (DEPTH_MAX).
 * A schedule is a seed: ROUNDS operations from the top, the source trees
 * changing between them.  At its end, from a catalog rebuilt from the
 * repository alone and from each host's own: every snapshot whose backup
 * succeeded and that no forget removed is complete and restores exactly
 * what its backup read, and verify finds every complete snapshot's
 * chunks where the indexes say.
 *
 * The schedule of a seed is the same at every run: nesting happens only
 * where no pack's put is under way on a writer's thread.  What it leads
 * to may still differ: keys, snapshot ids and pack names are random, and
 * which of two copies of a chunk a catalog knows follows them.
 *
 * An operation nested under a holder of the writer lock that excludes it,
 * or under a forget (every writer takes the forget lock shared while its
 * catalog catches up), must fail at once (no wait) and is counted, not
 * run.  Forget and prune
 * take the lock shared, as their commands do (RETENTION_EXCLUSIVE);
 * INTERLEAVE_SHARED=1 makes them take it shared whatever that says.
 * INTERLEAVE_SEEDS=N runs N schedules, INTERLEAVE_SEED=S only S;
 * INTERLEAVE_TRACE=1 shows each step, and checks after each operation
 * from the top.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/engine-check.h"
#include "coffer/engine-open.h"
#include "coffer/engine-retention.h"
#include "coffer/engine.h"
#include "coffer/storage.h"
#include "coffer/tuning.h"
#include "tap.h"
#include "testutil.h"

/* Forget and prune share the writer lock with backups, as their
 * commands open it (src/cmd/forget.c). */
#define RETENTION_EXCLUSIVE 0

#define NHOSTS 4
#define NTREES 3		/* host h backs up tree h % NTREES */
#define NFILES 6
#define ROUNDS 6		/* operations from the top, per schedule */
#define DEPTH_MAX 3		/* operations in progress at once */
#define NSNAPS (ROUNDS * 16)
#define SEEDS 80

enum op { OP_BACKUP, OP_FORGET, OP_PRUNE, NOPS };
static const char *const op_name[NOPS] = { "backup", "forget", "prune" };

/* A source tree: each file's version, 0 when absent.  A version's bytes
 * are the same in every tree (shared chunks), its size its own. */
struct tree {
	unsigned ver[NFILES];
};

struct snap {
	char sid[SNAPSHOT_ID_HEX + 1];
	int host;
	struct tree read;		/* what the backup read */
	int forgotten;
};

/* One schedule's state. */
static struct {
	uint64_t rng;
	char dir[512];			/* its scratch tree */
	char repo[64];			/* "mem:NAME" */
	struct storage *store;		/* a handle on it, for counts */
	char key[PATH_MAX];
	struct tree trees[NTREES];
	unsigned next_ver;
	struct snap snaps[NSNAPS];
	size_t nsnaps;
	enum op running[NHOSTS + 1];	/* the stack of operations */
	int host_busy[NHOSTS];
	int depth;
	int exclusive_held;		/* holders of the exclusive lock */
	char failure[512];		/* the first assertion that failed */
} S;

/* Over every schedule. */
static struct {
	long run[NOPS], nested[NOPS], refused[NOPS];
	long beside_backup[NOPS];	/* ran nested in a running backup */
	long beside_retention[NOPS];	/* ... in a forget or prune */
	long snapshots, checked;
} N;

static char scratch[256];
static int retention_exclusive = RETENTION_EXCLUSIVE;
static int trace;		/* INTERLEAVE_TRACE=1: each step on stdout */

static void __attribute__((format(printf, 1, 2)))
fail(const char *fmt, ...)
{
	va_list ap;

	if (S.failure[0] != '\0')
		return;
	va_start(ap, fmt);
	vsnprintf(S.failure, sizeof(S.failure), fmt, ap);
	va_end(ap);
}

static unsigned
pick(unsigned n)
{
	return ((unsigned)(xorshift64s(&S.rng) >> 33) % n);
}

/* The bytes of version v of a file: its size differs from every other
 * version's, so that a backup never takes a change for none. */
static size_t
ver_bytes(unsigned v, uint8_t **out)
{
	uint64_t st = 0x9e3779b97f4a7c15ULL * v;
	size_t i, n = 700 + (size_t)v * 53;
	uint8_t *p;

	if ((p = malloc(n)) == NULL)
		return (0);
	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(xorshift64s(&st) >> 56);
	*out = p;
	return (n);
}

static void
tree_path(char *buf, size_t size, int t, int f)
{
	if (f < 0)
		snprintf(buf, size, "%s/tree%d", S.dir, t);
	else
		snprintf(buf, size, "%s/tree%d/f%d", S.dir, t, f);
}

static int
write_file(const char *path, unsigned v)
{
	uint8_t *p = NULL;
	size_t n = ver_bytes(v, &p);
	FILE *f;
	int rc = -1;

	if (n > 0 && (f = fopen(path, "w")) != NULL) {
		rc = fwrite(p, 1, n, f) == n ? 0 : -1;
		if (fclose(f))
			rc = -1;
	}
	free(p);
	return (rc);
}

/* Between operations: some files of some trees change, move to another
 * tree's version (chunks the repository has), go or come back. */
static void
change_trees(int initial)
{
	char path[PATH_MAX];
	int t, f, n;

	for (t = 0; t < NTREES; t++)
		for (n = initial ? NFILES : (int)pick(3); n > 0; n--) {
			f = initial ? n - 1 : (int)pick(NFILES);
			tree_path(path, sizeof(path), t, f);
			switch (initial ? 0 : pick(4)) {
			case 0:
			case 1:
				S.trees[t].ver[f] = ++S.next_ver;
				break;
			case 2:
				S.trees[t].ver[f] =
				    S.trees[(t + 1) % NTREES].ver[f];
				break;
			default:
				S.trees[t].ver[f] = 0;
			}
			if (S.trees[t].ver[f] == 0)
				(void)unlink(path);
			else if (write_file(path, S.trees[t].ver[f]))
				fail("cannot write %s", path);
		}
}

static int
open_repo(const char *catalog, int write, int exclusive, struct repo **r,
    struct catalog **c)
{
	struct engine_open_opts o;
	int damaged;

	memset(&o, 0, sizeof(o));
	o.repo = S.repo;
	o.catalog = catalog;
	o.key_file = S.key;
	o.unlock = 1;
	o.want_catalog = 1;
	o.write = write;
	o.exclusive = exclusive;
	o.wait = 0;
	return (engine_open(&o, r, c, &damaged));
}

static struct snap *
snap_find(const char *sid)
{
	size_t i;

	for (i = 0; i < S.nsnaps; i++)
		if (strcmp(S.snaps[i].sid, sid) == 0)
			return (&S.snaps[i]);
	return (NULL);
}

static void
do_backup(int host, struct repo *r, struct catalog *c)
{
	struct backup_opts o;
	struct backup_result res;
	struct tree read = S.trees[host % NTREES];
	enum engine_result er;
	char dataset[16], src[PATH_MAX];

	/* Hosts h and h + NTREES back up one dataset: a forget beside
	 * one of them may see the other's newer snapshots. */
	snprintf(dataset, sizeof(dataset), "d%d", host % NTREES);
	tree_path(src, sizeof(src), host % NTREES, -1);
	memset(&o, 0, sizeof(o));
	o.dataset = dataset;
	o.source = src;
	switch (pick(4)) {
	case 0:
		o.level = LEVEL_FULL;
		break;
	case 1:
		o.level = LEVEL_DIFFERENTIAL;	/* on the newest full */
		break;
	default:
		o.level = LEVEL_AUTO;
	}
	o.walk.root = 1;
	o.threads = 1;
	er = engine_backup(r, c, &o, &res);
	if (er != ENGINE_OK && er != ENGINE_WARN) {
		fail("host %d: backup failed (%d)", host, (int)er);
		return;
	}
	if (S.nsnaps == NSNAPS) {
		fail("more than %d snapshots", NSNAPS);
		return;
	}
	memcpy(S.snaps[S.nsnaps].sid, res.sid, sizeof(res.sid));
	S.snaps[S.nsnaps].read = read;
	S.snaps[S.nsnaps].host = host;
	S.snaps[S.nsnaps++].forgotten = 0;
	N.snapshots++;
}

/* Whether a forget is running: it holds the forget lock, which every
 * writer takes shared while its catalog catches up (no wait here). */
static int
forget_running(void)
{
	int i;

	for (i = 0; i < S.depth; i++)
		if (S.running[i] == OP_FORGET)
			return (1);
	return (0);
}

static void
do_forget(int host, struct repo *r, struct catalog *c)
{
	struct forget_opts o;
	struct forget_result res;
	struct snap *s;
	enum engine_result er;
	size_t i;

	memset(&o, 0, sizeof(o));
	o.rules.last = 1 + (int)pick(2);
	er = engine_forget(r, c, &o, &res);
	if (er != ENGINE_OK) {
		fail("host %d: forget failed (%d)", host, (int)er);
		return;
	}
	for (i = 0; i < res.n; i++)
		if (!res.items[i].keep &&
		    (s = snap_find(res.items[i].sid)) != NULL) {
			s->forgotten = 1;
			if (trace)
				diag("%*s(snapshot %td forgotten)",
				    2 * S.depth, "", s - S.snaps + 1);
		}
	engine_forget_result_release(&res);
}

static void
do_prune(int host, struct repo *r, struct catalog *c)
{
	struct prune_opts o;
	struct prune_result res;
	enum engine_result er;

	memset(&o, 0, sizeof(o));
	o.max_unused = pick(2) ? 0 : 0.5;
	if ((er = engine_prune(r, c, &o, &res)) != ENGINE_OK)
		fail("host %d: prune failed (%d)", host, (int)er);
	else if (trace)
		diag("%*s(%lld of %lld packs deleted, %lld repacked, %lld "
		    "chunks moved)", 2 * S.depth, "",
		    (long long)res.packs_deleted, (long long)res.packs,
		    (long long)res.packs_repacked,
		    (long long)res.chunks_moved);
}

/* Whether an operation of kind op (OP_BACKUP) or not is running. */
static int
running(int backup)
{
	int i;

	for (i = 0; i < S.depth; i++)
		if ((S.running[i] == OP_BACKUP) == backup)
			return (1);
	return (0);
}

/* Host h's own catalog. */
static void
host_catalog(char *buf, size_t size, int h)
{
	snprintf(buf, size, "%s/host%d/catalog.db", S.dir, h);
}

/*
 * Operation op of host, nested in those running: one the writer lock
 * excludes must be refused at once, any other must open and succeed.
 */
static void
run_op(int host, enum op op)
{
	struct repo *r;
	struct catalog *c;
	char catalog[PATH_MAX];
	int excl = op != OP_BACKUP && retention_exclusive;
	int excluded = S.depth > 0 && (excl || S.exclusive_held > 0 ||
	    forget_running());
	int rc;

	host_catalog(catalog, sizeof(catalog), host);
	rc = open_repo(catalog, 1, excl, &r, &c);
	if (excluded) {
		if (rc == 0) {
			fail("host %d: %s opened beside the exclusive lock",
			    host, op_name[op]);
			engine_close(r, c);
		}
		N.refused[op]++;
		return;
	}
	if (rc != 0) {
		fail("host %d: %s cannot open the repository", host,
		    op_name[op]);
		return;
	}
	if (trace)
		diag("%*s%s host %d", 2 * S.depth, "", op_name[op], host);
	N.run[op]++;
	if (trace && op == OP_BACKUP)
		diag("%*s(snapshot %zu)", 2 * S.depth, "", S.nsnaps + 1);
	if (S.depth > 0)
		N.nested[op]++;
	N.beside_backup[op] += running(1);
	N.beside_retention[op] += running(0);
	S.running[S.depth++] = op;
	S.host_busy[host] = 1;
	S.exclusive_held += excl;
	if (op == OP_BACKUP)
		do_backup(host, r, c);
	else if (op == OP_FORGET)
		do_forget(host, r, c);
	else
		do_prune(host, r, c);
	S.exclusive_held -= excl;
	S.host_busy[host] = 0;
	S.depth--;
	engine_close(r, c);
}

/* A backup for every two of the others. */
static enum op
pick_op(void)
{
	unsigned k = pick(4);

	return (k < 2 ? OP_BACKUP : k == 2 ? OP_FORGET : OP_PRUNE);
}

/*
 * tuning_raise_at's hook: perhaps another host's operation, here, on the
 * thread that passes the point (a backup's recorder passes backup-pack
 * during its walk).  The operation stepped waits there; its other
 * threads pass no point meanwhile.  Not at backup-part: a pack's put may
 * still be under way on its writer's thread there, and what the nested
 * operation found would depend on that thread's speed.  Nor at
 * sync-listed: a writer's catalog catches up under the forget lock, which
 * a nested forget would find held by a writer below.  Nor at opened
 * (there for the end-to-end tests), which the operations' own points
 * follow closely.
 */
static void
step(const char *point)
{
	int host, i;

	if (trace)
		diag("%*s.%s (%lu puts)", 2 * S.depth, "", point,
		    storage_mem_calls(S.store, STORAGE_OP_PUT_COMMIT));
	if (strcmp(point, "backup-part") == 0 ||
	    strcmp(point, "sync-listed") == 0 ||
	    strcmp(point, "opened") == 0 ||
	    S.depth == 0 || S.depth >= DEPTH_MAX || S.failure[0] != '\0' || pick(3) != 0)
		return;
	host = (int)pick(NHOSTS);
	for (i = 0; i < NHOSTS && S.host_busy[host]; i++)
		host = (host + 1) % NHOSTS;
	if (!S.host_busy[host])
		run_op(host, pick_op());
}

/* The restored tree at dir is t. */
static int
same_tree(const char *dir, const struct tree *t)
{
	char path[PATH_MAX];
	uint8_t *want = NULL, *got = NULL;
	struct dirent *d;
	size_t n, found = 0, present = 0;
	struct stat sb;
	DIR *dp;
	FILE *f;
	int i, ok = 1;

	for (i = 0; i < NFILES && ok; i++) {
		snprintf(path, sizeof(path), "%s/f%d", dir, i);
		if (t->ver[i] == 0) {
			ok = lstat(path, &sb) != 0 && errno == ENOENT;
			continue;
		}
		present++;
		n = ver_bytes(t->ver[i], &want);
		ok = n > 0 && (got = malloc(n + 1)) != NULL &&
		    (f = fopen(path, "r")) != NULL;
		if (ok) {
			ok = fread(got, 1, n + 1, f) == n &&
			    memcmp(got, want, n) == 0;
			fclose(f);
		}
		free(want);
		free(got);
		want = got = NULL;
	}
	if (ok && (dp = opendir(dir)) != NULL) {
		while ((d = readdir(dp)) != NULL)
			found += d->d_name[0] != '.';
		closedir(dp);
	}
	return (ok && found == present);
}

/* The end of a schedule, from catalog (name: which, for the messages):
 * every snapshot not forgotten is complete and restores what its backup
 * read, and verify finds nothing damaged. */
static void
check_catalog(const char *catalog, const char *name, int round)
{
	struct catalog_snapshot cs;
	struct restore_opts ro;
	struct restore_result rr;
	struct verify_opts vo;
	struct verify_result vr;
	struct repo *r;
	struct catalog *c;
	char target[640];
	enum engine_result er;
	size_t i;

	if (open_repo(catalog, 0, 0, &r, &c)) {
		fail("the repository does not open (%s)", name);
		return;
	}
	for (i = 0; i < S.nsnaps && S.failure[0] == '\0'; i++) {
		if (S.snaps[i].forgotten)
			continue;
		memset(&cs, 0, sizeof(cs));
		if (catalog_snapshot_find_sid(c, S.snaps[i].sid, &cs) != 1 ||
		    cs.state != SNAP_COMPLETE) {
			fail("snapshot %zu (host %d) is not complete in the "
			    "repository (%s)", i + 1, S.snaps[i].host, name);
			catalog_snapshot_release(&cs);
			break;
		}
		snprintf(target, sizeof(target), "%s/restore%d-%s-%zu", S.dir,
		    round, name, i);
		memset(&ro, 0, sizeof(ro));
		ro.target = target;
		ro.threads = 1;
		er = engine_restore(r, c, &cs, &ro, &rr);
		if (er != ENGINE_OK)
			fail("snapshot %zu (host %d) does not restore (%d, "
			    "%s)", i + 1, S.snaps[i].host, (int)er, name);
		else if (!same_tree(target, &S.snaps[i].read))
			fail("snapshot %zu (host %d) restores another tree "
			    "(%s)", i + 1, S.snaps[i].host, name);
		catalog_snapshot_release(&cs);
		N.checked++;
	}
	memset(&vo, 0, sizeof(vo));
	vo.read = VERIFY_STRUCTURE;
	if (S.failure[0] == '\0') {
		memset(&vr, 0, sizeof(vr));
		if ((er = engine_verify(r, c, &vo, &vr)) != ENGINE_OK)
			fail("verify --read-data: %d (%zu damaged chunks, "
			    "%zu bad records, %s)", (int)er, vr.ndamage,
			    vr.nbad_records, name);
		engine_verify_result_release(&vr);
	}
	engine_close(r, c);
}

/* From a catalog the repository alone rebuilds, then from each host's
 * own, brought up to date: a host whose catalog located a chunk in a
 * pack another host's prune deleted (it held a copy) restores too. */
static void
check_repository(int round)
{
	char catalog[PATH_MAX], name[32];
	int h;

	snprintf(catalog, sizeof(catalog), "%s/rebuilt%d.db", S.dir, round);
	check_catalog(catalog, "rebuilt", round);
	for (h = 0; h < NHOSTS && S.failure[0] == '\0'; h++) {
		host_catalog(catalog, sizeof(catalog), h);
		snprintf(name, sizeof(name), "host%d", h);
		check_catalog(catalog, name, round);
	}
}

static int
make_repository(uint64_t seed)
{
	struct repo_init_opts o;
	char path[PATH_MAX];
	int h;

	snprintf(S.repo, sizeof(S.repo), "mem:interleave-%llu",
	    (unsigned long long)seed);
	if ((S.store = storage_mem_named(S.repo + 4)) == NULL)
		return (-1);
	snprintf(S.key, sizeof(S.key), "%s/key", S.dir);
	memset(&o, 0, sizeof(o));
	o.key_file = S.key;
	if (engine_init(S.repo, &o))
		return (-1);
	for (h = 0; h < NHOSTS; h++) {
		snprintf(path, sizeof(path), "%s/host%d", S.dir, h);
		if (mkdir(path, 0700))
			return (-1);
	}
	for (h = 0; h < NTREES; h++) {
		tree_path(path, sizeof(path), h, -1);
		if (mkdir(path, 0700))
			return (-1);
	}
	return (0);
}

/* One schedule: 1 when every assertion held. */
static int
schedule(uint64_t seed)
{
	int round;

	memset(&S, 0, sizeof(S));
	S.rng = seed * 0x2545f4914f6cdd1dULL + 1;
	snprintf(S.dir, sizeof(S.dir), "%s/s%llu", scratch,
	    (unsigned long long)seed);
	if (mkdir(S.dir, 0700) || make_repository(seed)) {
		fail("cannot set up");
		goto out;
	}
	change_trees(1);
	for (round = 0; round < ROUNDS && S.failure[0] == '\0'; round++) {
		run_op((int)pick(NHOSTS), round < 2 ? OP_BACKUP : pick_op());
		/* Traced: which operation broke it. */
		if (trace && S.failure[0] == '\0') {
			check_repository(round);
			diag("checked: %s", S.failure[0] ? S.failure : "ok");
		}
		change_trees(0);
	}
	if (S.failure[0] == '\0')
		check_repository(ROUNDS);
out:
	storage_close(S.store);
	storage_mem_drop(S.repo + 4);
	(void)rm_tree(S.dir);
	return (S.failure[0] == '\0');
}

/* stderr (what the runs report: the refused locks) into a file, so that
 * only a failing schedule's is shown. */
static int
quiet_stderr(const char *file)
{
	int fd;

	fflush(stderr);
	if ((fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0)
		return (-1);
	if (ftruncate(fd, 0) || dup2(fd, STDERR_FILENO) < 0) {
		close(fd);
		return (-1);
	}
	close(fd);
	return (0);
}

static void
show_stderr(const char *file)
{
	char line[512];
	FILE *f;
	int n = 0;

	fflush(stderr);
	if ((f = fopen(file, "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL && n++ < 40 + 1000 * trace) {
		line[strcspn(line, "\n")] = '\0';
		diag("  %s", line);
	}
	fclose(f);
}

int
main(void)
{
	const char *v, *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" :
	    "/tmp";
	char errfile[PATH_MAX];
	uint64_t seed, first = 1, seeds = SEEDS;
	long failed = 0;
	int saved;

	if ((v = getenv("INTERLEAVE_SEED")) != NULL && *v) {
		first = strtoull(v, NULL, 10);
		seeds = 1;
	} else if ((v = getenv("INTERLEAVE_SEEDS")) != NULL && *v)
		seeds = strtoull(v, NULL, 10);
	trace = (v = getenv("INTERLEAVE_TRACE")) != NULL && *v == '1';
	if ((v = getenv("INTERLEAVE_SHARED")) != NULL && strcmp(v, "1") == 0)
		retention_exclusive = 0;
	/*
	 * Small packs and records of many parts: a backup's data is put
	 * (with its record's first part) before the rest of its record,
	 * each pack a step.  Determinism: a nested operation runs where
	 * the pack writer's thread has no put in flight (backup-pack comes
	 * before a pack's put starts, the earlier ones durable).
	 */
	setenv("COFFER_PACK_SIZE", "4096", 1);
	setenv("COFFER_RECORD_PART_ENTRIES", "2", 1);
	setenv("COFFER_WALK_AHEAD", "0", 1);
	setenv("COFFER_PRUNE_MARGIN", "0", 1);
	tuning_reload();
	snprintf(scratch, sizeof(scratch), "%s/coffer-t-interleave.XXXXXX",
	    base);
	if (mkdtemp(scratch) == NULL) {
		ok(0, "scratch directory");
		return (tap_done());
	}
	snprintf(errfile, sizeof(errfile), "%s/stderr", scratch);
	saved = dup(STDERR_FILENO);
	tuning_set_step_hook(step);
	for (seed = first; seed < first + seeds; seed++) {
		if (quiet_stderr(errfile))
			break;
		if (schedule(seed))
			continue;
		failed++;
		ok(0, "schedule %llu (INTERLEAVE_SEED=%llu): %s",
		    (unsigned long long)seed, (unsigned long long)seed,
		    S.failure);
		show_stderr(errfile);
	}
	tuning_set_step_hook(NULL);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	ok(failed == 0 && seed == first + seeds,
	    "%llu schedules of %d hosts, forget and prune %s",
	    (unsigned long long)seeds, NHOSTS,
	    retention_exclusive ? "exclusive" : "shared");
	diag("operations run (nested): backup %ld (%ld), forget %ld (%ld), "
	    "prune %ld (%ld)", N.run[OP_BACKUP], N.nested[OP_BACKUP],
	    N.run[OP_FORGET], N.nested[OP_FORGET], N.run[OP_PRUNE],
	    N.nested[OP_PRUNE]);
	diag("refused by the lock: backup %ld, forget %ld, prune %ld",
	    N.refused[OP_BACKUP], N.refused[OP_FORGET], N.refused[OP_PRUNE]);
	diag("beside a running backup: backup %ld, forget %ld, prune %ld",
	    N.beside_backup[OP_BACKUP], N.beside_backup[OP_FORGET],
	    N.beside_backup[OP_PRUNE]);
	diag("beside a forget or prune: backup %ld, forget %ld, prune %ld",
	    N.beside_retention[OP_BACKUP], N.beside_retention[OP_FORGET],
	    N.beside_retention[OP_PRUNE]);
	diag("%ld snapshots made, %ld checked at the end", N.snapshots,
	    N.checked);
	(void)rm_tree(scratch);
	return (tap_done());
}
