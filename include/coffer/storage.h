#ifndef COFFER_STORAGE_H
#define COFFER_STORAGE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Storage: the repository as a set of named objects, each written whole
 * (doc/design.md, "Storage interface").  One interface, several stores:
 * a local directory (storage_local_open), memory with fault injection
 * (storage_mem_new), S3 (storage_s3_open), rclone (storage_rclone_open),
 * and one of these by location
 * (storage_open_location).  Nothing here hands out a file descriptor of the
 * repository.
 *
 * Names are relative keys: components of letters, digits, '.', '_' and
 * '-' joined by '/', no component empty, longer than NAME_MAX or
 * starting with '.' or '-' (so no "..", no hidden temporaries), at most
 * STORAGE_NAME_MAX bytes and
 * STORAGE_DEPTH_MAX components, not under "tmp/" or "locks/" (the
 * store's own: puts in progress and locks).  "coffer.conf",
 * "keys/NAME", "packs/ab/abcd...".  Every call checks its name with
 * storage_name_ok and refuses another with EINVAL.
 *
 * Results: 0 done; STORAGE_MISSING (> 0) when the object is not there,
 * never reported, for the calls that say so; -1 failed, reported once
 * (log_error) by the call, with errno and storage_last_error() saying
 * why (an errno code: EIO, ETIMEDOUT, EINVAL for a refused name or a
 * hostile entry, EFBIG for an object over a size cap, ...).
 *
 * Consistency assumed of every store: a committed put is whole under its
 * name, and a later read of that name sees it; a put never half-replaces
 * an object.  Not assumed: conditional writes (STORAGE_PUT_NEW is a best
 * effort on object storage), or a listing that is complete at once (an
 * object just written may be missing from it for a while).
 */
#define STORAGE_NAME_MAX 512
#define STORAGE_DEPTH_MAX 4
#define STORAGE_MISSING 1
#define STORAGE_MSG_MAX 1024

struct storage;
struct storage_obj;		/* an object open for ranged reads */
struct storage_put;		/* an object being written */
struct storage_lock;		/* a lock held */

/* The failure this thread saw last: its errno code and its message. */
struct storage_error {
	int code;
	char msg[STORAGE_MSG_MAX];
};
const struct storage_error *storage_last_error(void);

/* 1 if name is an object name (above), else 0. */
int storage_name_ok(const char *name);

/*
 * The local directory at path, everything in it reached relative to its
 * descriptor, never through a link.  With STORAGE_CREATE, path must be
 * new or an empty directory: it is made (mode 0700) with the store's
 * tmp/ and locks/.  NULL (reported) when it cannot be opened.
 */
#define STORAGE_CREATE 1u
struct storage *storage_local_open(const char *path, unsigned flags);

/*
 * Undo a STORAGE_CREATE at path whose objects are deleted already: the
 * store's tmp/ and locks/, the directories that puts made once empty,
 * and, unless keep, path itself once empty.  0 or -1 (reported).
 */
int storage_local_unmake(const char *path, int keep);

/*
 * An S3 bucket (src/store/s3.c; doc/design.md, "The S3 store"):
 * location "s3:http[s]://HOST[:PORT]/BUCKET[/PREFIX]" (path-style) or
 * "s3:BUCKET[/PREFIX]" (AWS: AWS_ENDPOINT_URL, else
 * https://s3.REGION.amazonaws.com; REGION from AWS_DEFAULT_REGION or
 * AWS_REGION, else us-east-1).  Credentials from AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or the profile AWS_PROFILE
 * ("default") of AWS_SHARED_CREDENTIALS_FILE (~/.aws/credentials).
 * o->cacert (--cacert, COFFER_CACERT; NULL: CURL_CA_BUNDLE, then
 * AWS_CA_BUNDLE, then the system's) verifies an HTTPS endpoint.  With
 * STORAGE_CREATE the bucket is made when missing, and a prefix (or a
 * bucket, without one) that already holds objects is refused.  NULL
 * (reported) when it cannot be opened; no secret is ever in a message.
 */
struct storage_s3_opts {
	const char *cacert;
};
struct storage *storage_s3_open(const char *location,
    const struct storage_s3_opts *o, unsigned flags);

/*
 * Every backend rclone reaches (src/store/rclone.c; doc/design.md, "The
 * rclone store"): location "rclone:REMOTE:PATH", REMOTE a remote of
 * rclone's configuration (or environment, RCLONE_CONFIG_NAME_TYPE=...).
 * rclone (rcd) runs from open to close.  With STORAGE_CREATE a location
 * that already holds objects is refused.  NULL (reported: rclone's own
 * error when the remote is unknown or its backend fails).
 */
struct storage *storage_rclone_open(const char *location, unsigned flags);
/*
 * The last line an rclone wrote to errfd (its standard error, a file),
 * without its "2026/12/06 08:17:17 ERROR : " prefix, control bytes
 * replaced, into out (size bytes); "" if none.
 */
void storage_rclone_last_line(int errfd, char *out, size_t size);

/*
 * The store a location names: "s3:..." the S3 store, "rclone:..." the
 * rclone store, "mem:NAME" a memory store a test named
 * (storage_mem_named), any other a local directory (a path).  flags as
 * above; the S3 store verifies HTTPS with the CA bundle of
 * storage_set_cacert.  NULL (reported).
 */
struct storage *storage_open_location(const char *location,
    unsigned flags);
/* Whether location names object storage rather than a directory. */
int storage_is_remote(const char *location);
/* The CA bundle (a file) that stores opened by location verify HTTPS
 * endpoints with (--cacert, COFFER_CACERT); NULL: the stores' default.
 * Kept, not copied: it must outlive them. */
void storage_set_cacert(const char *file);

/* An empty store in memory, for tests (fault injection below). */
struct storage *storage_mem_new(void);
/*
 * For tests of several hosts in one process: a new handle on the memory
 * store called name, made empty at the first call, that
 * storage_open_location("mem:NAME") opens too (a location of this kind
 * is a memory store only once a test named it: in coffer, none is).  Its
 * objects and locks live until storage_mem_drop(name) and the close of
 * its last handle.  NULL (reported) without memory.
 */
struct storage *storage_mem_named(const char *name);
void storage_mem_drop(const char *name);

/* Close the store, once its objects, puts and locks are closed, given
 * back or aborted; NULL is fine. */
void storage_close(struct storage *st);
/* Where it is, for messages: the directory's absolute path, "memory". */
const char *storage_where(const struct storage *st);

/* The size of object name: 0, STORAGE_MISSING or -1. */
int storage_stat(struct storage *st, const char *name, uint64_t *size);

/*
 * A small object whole, at most max bytes (more fails with EFBIG), into
 * a malloc'd buffer one byte longer, NUL-terminated: 0, STORAGE_MISSING
 * or -1.
 */
int storage_get(struct storage *st, const char *name, size_t max,
    unsigned char **data, size_t *len);

/*
 * Open object name for ranged reads; its size into *size: 0,
 * STORAGE_MISSING or -1.  storage_read reads up to len bytes at off into
 * buf, *got what came: fewer than len only at the end of the object (0
 * at or past it); 0 or -1.  storage_read_all wants exactly len bytes (a
 * shorter object is "truncated", EIO).  storage_cached: 1 if the bytes at
 * off are in local memory (reading them costs no I/O), 0 if not or not
 * known; never reported.  storage_knows_cached: 0 when storage_cached
 * always says 0 (a store without local memory of its objects), so that
 * an object is not opened, a request to a remote store, only to ask.  An
 * object handle may be used by one thread at a time; handles are
 * independent.
 */
int storage_open(struct storage *st, const char *name,
    struct storage_obj **o, uint64_t *size);
int storage_read(struct storage_obj *o, uint64_t off, void *buf, size_t len,
    size_t *got);
int storage_read_all(struct storage_obj *o, uint64_t off, void *buf,
    size_t len);
int storage_cached(struct storage_obj *o, uint64_t off, uint64_t len);
int storage_knows_cached(const struct storage *st);
const char *storage_obj_name(const struct storage_obj *o);
void storage_obj_close(struct storage_obj *o);

/*
 * Write object name atomically: it appears whole, durably, at commit, or
 * not at all; until then readers see what was there before (or nothing).
 * begin, any number of writes, then commit or abort, which both free p
 * (abort of NULL is fine).  After a failed write (reported) the put
 * only fails, unreported: abort it, or commit, which fails.  Many
 * puts may be open at once (an import stages its packs, then commits
 * them); one put is used by one thread at a time.  An existing object is
 * replaced, unless STORAGE_PUT_NEW: then commit fails with EEXIST, which
 * only the local and memory stores promise (object storage has no
 * conditional write): nothing may depend on it for correctness.
 * storage_put_end says that nothing more will be written: the store may
 * send what it holds of p now, so that a put kept open until its commit
 * (an import's) holds no memory or descriptor meanwhile; a write after
 * it fails.  storage_put does all of it for a buffer.  0 or -1.
 */
#define STORAGE_PUT_NEW 1u
int storage_put_begin(struct storage *st, const char *name, unsigned flags,
    struct storage_put **p);
int storage_put_write(struct storage_put *p, const void *data, size_t len);
int storage_put_end(struct storage_put *p);
int storage_put_commit(struct storage_put *p);
void storage_put_abort(struct storage_put *p);
int storage_put(struct storage *st, const char *name, const void *data,
    size_t len, unsigned flags);

/*
 * Make directory dir where a store has directories (the local store: a
 * new repository's layout as its user sees it, before any object is in
 * it); nothing elsewhere.  0 or -1.
 */
int storage_mkdir(struct storage *st, const char *dir);

/* Remove object name, durably: 0 (also when it was not there) or -1. */
int storage_delete(struct storage *st, const char *name);

/*
 * Every object under the directory dir ("packs": "packs/ab/ab..."; "" for
 * all), at any depth, in no particular order, with its size: fn is called
 * for each, and a non-zero return stops the listing and is returned.  A
 * listing may miss objects written just before it (object storage is
 * eventually consistent); it never names one that was not committed.
 * What cannot be an object there (a link, a FIFO, an invalid name) is
 * left out with a warning.  0, fn's value, or -1.  The local store
 * names to fn, with the size STORAGE_NOT_OBJECT, what has an object's
 * name but is none (a link, a FIFO, a device: warned about; an empty
 * directory): whoever expected an object of that name there reads it,
 * and is refused, naming it.
 * storage_list_all: the objects into a malloc'd array sorted by name.
 */
#define STORAGE_NOT_OBJECT UINT64_MAX
struct storage_entry {
	char *name;
	uint64_t size;
};
int storage_list(struct storage *st, const char *dir,
    int (*fn)(void *arg, const char *name, uint64_t size), void *arg);
int storage_list_all(struct storage *st, const char *dir,
    struct storage_entry **v, size_t *n);
void storage_entries_free(struct storage_entry *v, size_t n);

/* Remove what puts cut short by a crash left (tmp/ of the local store,
 * incomplete uploads of object storage), never a put in progress, of
 * this process or another (the local store's puts hold a flock on their
 * file; object stores go by age).  0 or -1. */
int storage_clean(struct storage *st);

/*
 * Lock name (one component, as an object name's, not ending ".shared":
 * the store's own) against every other lock of that name, from this
 * handle or another, this process or another.  o->shared: held beside
 * other shared holders of the name; an exclusive holder excludes them
 * and they it (taken shared when no exclusive holder is live, exclusive
 * when no holder at all is).  o->info (one line: host, pid, time) is
 * stored for whoever finds it busy.  o->wait: how long to wait for it,
 * seconds (< 0 for ever, 0 not at all).  o->ttl: the length of a lease
 * on stores whose locks expire (the S3 and rclone stores' leases: 0 for
 * their default, 15 minutes), which a thread renews every third of it
 * until storage_unlock (a lease that could not be renewed in time, or
 * was taken over, is said once, as a warning, and storage_lock_lost says
 * so from then on); one whose info begins "host HOST pid PID", HOST this
 * host and PID no process, is free at once.  The local store (flock)
 * and the memory store hold the lock until storage_unlock or the end of
 * the process.  Returns 0 taken (*l), 1 busy (not reported; the
 * blocking holder's info, control bytes replaced, into holder: when
 * several shared holders block an exclusive, the first's followed by
 * " (and N more)"), 2 asked to stop while waiting (signals_caught; not
 * reported: stopping is no failure of the store), -1 failed.
 */
struct storage_lock_opts {
	const char *info;
	double wait;
	double ttl;
	int shared;	/* held beside other shared holders of the name; an
			 * exclusive holder excludes them and they it */
};
int storage_lock(struct storage *st, const char *name,
    const struct storage_lock_opts *o, struct storage_lock **l,
    char *holder, size_t holdersz);
/* Give the lock back; NULL is fine. */
void storage_unlock(struct storage_lock *l);
/* 1 once a lease held as l may be another's (not renewed in time, or
 * taken over), else 0. */
int storage_lock_lost(struct storage_lock *l);

/*
 * How a store whose locks are leases tells, before a lease expires, that
 * its holder is gone: gone(info) is 1 when the holder that wrote that
 * info line is known to have ended (a process of this host).  The
 * repository's lock code, which writes the lines, sets it once for the
 * process; unset, a holder is gone when its lease expires.
 */
void storage_holder_gone_fn(int (*gone)(const char *info));

/* A holder of a lock, as storage_lock_holders lists it. */
struct storage_holder {
	char info[512];		/* its info line, control bytes replaced */
	int shared;
	long long expires;	/* Unix seconds; 0: a lock that does not expire */
};
/* Every live holder of lock name (exclusive first), malloc'd into *v
 * (free()); an expired lease, or one whose holder is a gone process of
 * this host, is not live (and may be removed).  0 or -1 (reported). */
int storage_lock_holders(struct storage *st, const char *name,
    struct storage_holder **v, size_t *n);

/*
 * Fault injection in the memory store, deterministic: calls are counted
 * per operation from the moment a fault is set.
 * storage_mem_fail: the nth call (1: the next) of op fails with code.
 * storage_mem_short: reads return at most max bytes each (0: whole).
 * storage_mem_delay: each call of op first sleeps ms milliseconds.
 * storage_mem_stale: listings leave out the objects committed by the
 * last k puts (0: complete).
 * storage_mem_calls: how many calls of op the store has seen.
 * A store that is not the memory store ignores them.
 */
enum storage_op {
	STORAGE_OP_STAT, STORAGE_OP_OPEN, STORAGE_OP_READ,
	STORAGE_OP_PUT_BEGIN, STORAGE_OP_PUT_WRITE, STORAGE_OP_PUT_COMMIT,
	STORAGE_OP_DELETE, STORAGE_OP_LIST, STORAGE_OP_LOCK,
	STORAGE_NOPS
};
int storage_mem_fail(struct storage *st, enum storage_op op, unsigned nth,
    int code);
void storage_mem_short(struct storage *st, size_t max);
void storage_mem_delay(struct storage *st, enum storage_op op, unsigned ms);
void storage_mem_stale(struct storage *st, unsigned k);
unsigned long storage_mem_calls(struct storage *st, enum storage_op op);
/* The read cache of the stores over a network (n blocks of block bytes)
 * on the memory store too; 0 or -1 (out of memory, reported). */
int storage_mem_blocks(struct storage *st, size_t block, unsigned n);

/*
 * For implementations (src/store/): the operations a store provides.
 * The storage_* calls above check names, count on nothing else, report
 * failures and free handles; an operation fails by storage_fail (which
 * records code and message and returns -1).  Handles begin with their
 * base struct.  Optional operations may be NULL: get (open and read),
 * cached (0), put_end, clean and mkdir (nothing to do).  An operation
 * that makes a handle allocates it (the base first); obj_close,
 * put_commit, put_abort and unlock free it, but not the base's name,
 * which the storage_* call owns.  read, put_write, put_end and
 * put_commit may run on any thread.
 */
struct storage_obj {
	struct storage *st;
	char *name;
	uint64_t size;		/* as open said */
};
struct storage_put {
	struct storage *st;
	char *name;
	unsigned flags;
	int failed;
	int ended;		/* storage_put_end was called */
};
struct storage_renewal;
struct storage_lock {
	struct storage *st;
	double ttl;		/* a lease's length, set by a store whose
				 * locks expire and that renews them */
	struct storage_renewal *renewal;	/* storage.c's */
};
struct storage_ops {
	int (*stat)(struct storage *, const char *, uint64_t *);
	int (*get)(struct storage *, const char *, size_t, unsigned char **,
	    size_t *);
	int (*open)(struct storage *, const char *, struct storage_obj **,
	    uint64_t *);
	/* May return fewer bytes than asked before the end (a read cut
	 * short); storage_read reads on. */
	int (*read)(struct storage_obj *, uint64_t, void *, size_t, size_t *);
	int (*cached)(struct storage_obj *, uint64_t, uint64_t);
	void (*obj_close)(struct storage_obj *);
	int (*put_begin)(struct storage *, const char *, unsigned,
	    struct storage_put **);
	int (*put_write)(struct storage_put *, const void *, size_t);
	int (*put_end)(struct storage_put *);
	int (*put_commit)(struct storage_put *);
	void (*put_abort)(struct storage_put *);
	int (*del)(struct storage *, const char *);
	int (*mkdir)(struct storage *, const char *);
	int (*list)(struct storage *, const char *,
	    int (*)(void *, const char *, uint64_t), void *);
	int (*clean)(struct storage *);
	int (*lock)(struct storage *, const char *,
	    const struct storage_lock_opts *, struct storage_lock **, char *,
	    size_t);
	void (*unlock)(struct storage_lock *);
	/* A lease made to last ttl more: 0, 1 when it is no longer this
	 * holder's (taken over after it expired), -1 failed (storage_fail).
	 * NULL: locks that do not expire. */
	int (*renew)(struct storage_lock *);
	/* Every live holder of a lock, as storage_lock_holders: into
	 * *v (malloc'd, any order), *n: 0 or -1 (storage_fail). */
	int (*holders)(struct storage *, const char *,
	    struct storage_holder **, size_t *);
	void (*close)(struct storage *);
};
struct storage_blocks;
struct storage {
	const struct storage_ops *ops;
	char *where;
	/* The read cache (src/store/blocks.c) of a store where a request
	 * costs a round trip, which its open sets; NULL: none. */
	struct storage_blocks *blocks;
};
int storage_fail(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
