/*
 * storage: one contract run against every store (the local directory,
 * memory, S3 when COFFER_TEST_S3_URL names an endpoint: see s3(), and
 * rclone over its local backend and, on COFFER_TEST_RCLONE_S3_URL, its S3
 * backend: see rclone()),
 * then what only the local store meets (links, FIFOs, directories
 * planted where objects belong), each fault the memory store injects,
 * and what only object storage has (a bucket made, multipart uploads,
 * listings over pages).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/repo.h"
#include "coffer/storage.h"
#include "tap.h"
#include "testutil.h"

#define PACK_A "packs/ab/ab000000000000000000000000000001"
#define PACK_B "packs/cd/cd000000000000000000000000000002"
#define LAG_SECONDS 30.0	/* how long an S3 listing may lag a put */

static char base[64];		/* mkdtemp */

/* A fresh local store in base/name. */
static struct storage *
local_new(const char *name, char *dir, size_t dirsz)
{
	snprintf(dir, dirsz, "%s/%s", base, name);
	return (storage_local_open(dir, STORAGE_CREATE));
}

/* Bytes of a pattern: position and seed. */
static void
fill(uint8_t *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed);
}

/* 1 if name holds exactly the n bytes at p. */
static int
holds(struct storage *st, const char *name, const void *p, size_t n)
{
	unsigned char *data;
	size_t len;
	int rc, same;

	if ((rc = storage_get(st, name, 1 << 24, &data, &len)) != 0)
		return (0);
	same = len == n && (n == 0 || memcmp(data, p, n) == 0) &&
	    data[len] == '\0';
	free(data);
	return (same);
}

/* The failure code of the last call, and whether its message has s. */
static int
failed_with(int code, const char *s)
{
	const struct storage_error *e = storage_last_error();

	return (e->code == code && (s == NULL || strstr(e->msg, s) != NULL));
}

static void
round_trips(struct storage *st, const char *kind)
{
	static uint8_t big[1 << 20];
	struct storage_put *p;
	unsigned char *data;
	uint64_t size;
	size_t len, off;
	int ok_all = 1;

	fill(big, sizeof(big), 7);
	ok(storage_put(st, "coffer.conf", "version 1\n", 10, 0) == 0 &&
	    holds(st, "coffer.conf", "version 1\n", 10),
	    "%s: put and get of a small object", kind);
	ok(storage_put(st, "keys/empty", "", 0, 0) == 0 &&
	    holds(st, "keys/empty", "", 0) &&
	    storage_stat(st, "keys/empty", &size) == 0 && size == 0,
	    "%s: an empty object", kind);
	ok(storage_put_begin(st, PACK_A, 0, &p) == 0, "%s: put begun", kind);
	for (off = 0; off < sizeof(big); off += 4099)
		ok_all &= storage_put_write(p, big + off, sizeof(big) - off <
		    4099 ? sizeof(big) - off : 4099) == 0;
	ok(ok_all && storage_put_commit(p) == 0 &&
	    holds(st, PACK_A, big, sizeof(big)),
	    "%s: a streamed put of 1 MiB in pieces, read back whole", kind);
	ok(storage_stat(st, PACK_A, &size) == 0 && size == sizeof(big),
	    "%s: stat gives its size", kind);
	ok(storage_get(st, PACK_A, 1000, &data, &len) == -1 &&
	    failed_with(EFBIG, "too large") && data == NULL,
	    "%s: get over its cap fails (EFBIG)", kind);
	ok(storage_get(st, "keys/none", 100, &data, &len) == STORAGE_MISSING &&
	    storage_stat(st, "keys/none", &size) == STORAGE_MISSING &&
	    storage_get(st, "nodir/sub/x", 100, &data, &len) ==
	    STORAGE_MISSING, "%s: a missing object is STORAGE_MISSING, "
	    "under a missing directory too", kind);
	ok(storage_put(st, "coffer.conf", "version 2\n", 10, 0) == 0 &&
	    holds(st, "coffer.conf", "version 2\n", 10),
	    "%s: a put replaces", kind);
	ok(storage_put(st, "coffer.conf", "x", 1, STORAGE_PUT_NEW) == -1 &&
	    failed_with(EEXIST, NULL) &&
	    holds(st, "coffer.conf", "version 2\n", 10),
	    "%s: STORAGE_PUT_NEW refuses a taken name, which stays", kind);
	ok(storage_put(st, "keys/new", "n", 1, STORAGE_PUT_NEW) == 0 &&
	    holds(st, "keys/new", "n", 1),
	    "%s: STORAGE_PUT_NEW writes a new name", kind);
}

static void
ranges(struct storage *st, const char *kind)
{
	uint8_t data[1000], buf[2000];
	struct storage_obj *o;
	uint64_t size;
	size_t got;

	fill(data, sizeof(data), 3);
	if (!ok(storage_put(st, "keys/r", data, sizeof(data), 0) == 0 &&
	    storage_open(st, "keys/r", &o, &size) == 0 && size == 1000,
	    "%s: open gives the size", kind))
		return;
	ok(storage_read(o, 0, buf, 1000, &got) == 0 && got == 1000 &&
	    memcmp(buf, data, 1000) == 0, "%s: a read of all of it", kind);
	ok(storage_read(o, 123, buf, 10, &got) == 0 && got == 10 &&
	    memcmp(buf, data + 123, 10) == 0, "%s: a read inside", kind);
	ok(storage_read(o, 990, buf, 20, &got) == 0 && got == 10 &&
	    memcmp(buf, data + 990, 10) == 0,
	    "%s: a read across the end gives what there is", kind);
	ok(storage_read(o, 999, buf, 1, &got) == 0 && got == 1 &&
	    buf[0] == data[999], "%s: the last byte", kind);
	ok(storage_read(o, 1000, buf, 5, &got) == 0 && got == 0,
	    "%s: a read at the end gives nothing", kind);
	ok(storage_read(o, 5000, buf, 5, &got) == 0 && got == 0,
	    "%s: a read past the end gives nothing", kind);
	ok(storage_read(o, 10, buf, 0, &got) == 0 && got == 0,
	    "%s: a read of zero bytes", kind);
	ok(storage_read_all(o, 0, buf, 1000) == 0 &&
	    storage_read_all(o, 995, buf, 10) == -1 &&
	    failed_with(EIO, "truncated"),
	    "%s: read_all wants every byte (truncated across the end)", kind);
	ok(strcmp(storage_obj_name(o), "keys/r") == 0, "%s: the object's name",
	    kind);
	ok(storage_cached(o, 0, 0) == 0 && storage_cached(o, 0, 1000) >= 0,
	    "%s: cached is a hint: 0 for nothing, 0 or 1 else", kind);
	ok(storage_knows_cached(st) || storage_cached(o, 0, 1000) == 0,
	    "%s: a store that knows nothing in memory says so", kind);
	storage_obj_close(o);
	ok(storage_open(st, "keys/none", &o, &size) == STORAGE_MISSING &&
	    o == NULL, "%s: open of a missing object", kind);
}

static int
count_entry(void *arg, const char *name, uint64_t size)
{
	(void)name;
	(void)size;
	return (++*(int *)arg == 2 ? 42 : 0);
}

/* The names listed as STORAGE_NOT_OBJECT, in name order, into arg. */
static int
not_object(void *arg, const char *name, uint64_t size)
{
	char *s = arg, *at, *end;
	size_t len = strlen(name), have = strlen(s);

	if (size != STORAGE_NOT_OBJECT || have + len + 2 > 256)
		return (0);
	/* Before the first name that sorts after it. */
	for (at = s; *at != '\0'; at = end) {
		end = strchr(at + 1, ' ');
		end = end != NULL ? end : at + strlen(at);
		if (strncmp(at + 1, name, (size_t)(end - at - 1)) > 0)
			break;
	}
	memmove(at + len + 1, at, strlen(at) + 1);
	*at = ' ';
	memcpy(at + 1, name, len);
	return (0);
}

/* No object of the listing names something under tmp/ or locks/. */
static int
none_private(const struct storage_entry *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!storage_name_ok(v[i].name))
			return (0);
	return (1);
}

static void
atomicity(struct storage *st, const char *kind)
{
	struct storage_entry *v;
	struct storage_put *p;
	unsigned char *data;
	uint64_t size;
	size_t n, len;

	ok(storage_put_begin(st, "keys/half", 0, &p) == 0 &&
	    storage_put_write(p, "half", 4) == 0 &&
	    storage_stat(st, "keys/half", &size) == STORAGE_MISSING &&
	    storage_get(st, "keys/half", 100, &data, &len) == STORAGE_MISSING,
	    "%s: a put in progress is not there", kind);
	ok(storage_list_all(st, "keys", &v, &n) == 0 && none_private(v, n),
	    "%s: nor in a listing", kind);
	for (len = 0; len < n; len++)
		ok(strcmp(v[len].name, "keys/half") != 0,
		    "%s: listing leaves out '%s' in progress", kind,
		    "keys/half");
	storage_entries_free(v, n);
	storage_put_abort(p);
	ok(storage_stat(st, "keys/half", &size) == STORAGE_MISSING,
	    "%s: an aborted put leaves nothing", kind);
	storage_put_abort(NULL);

	ok(storage_put(st, "keys/old", "old", 3, 0) == 0 &&
	    storage_put_begin(st, "keys/old", 0, &p) == 0 &&
	    storage_put_write(p, "new!", 4) == 0 && holds(st, "keys/old",
	    "old", 3), "%s: while it is replaced, readers see the old", kind);
	storage_put_abort(p);
	ok(holds(st, "keys/old", "old", 3),
	    "%s: an aborted replacement leaves the old", kind);
	ok(storage_put_begin(st, "keys/old", 0, &p) == 0 &&
	    storage_put_write(p, "new!", 4) == 0 &&
	    storage_put_commit(p) == 0 && holds(st, "keys/old", "new!", 4),
	    "%s: a committed one is the new, whole", kind);

	ok(storage_put_begin(st, "keys/ended", 0, &p) == 0 &&
	    storage_put_write(p, "ended", 5) == 0 &&
	    storage_put_end(p) == 0 && storage_put_end(p) == 0 &&
	    storage_stat(st, "keys/ended", &size) == STORAGE_MISSING,
	    "%s: a put ended is not there before its commit", kind);
	ok(storage_put_commit(p) == 0 && holds(st, "keys/ended", "ended", 5),
	    "%s: committed, it is, whole", kind);
	ok(storage_put_begin(st, "keys/ended0", 0, &p) == 0 &&
	    storage_put_end(p) == 0 && storage_put_commit(p) == 0 &&
	    holds(st, "keys/ended0", "", 0),
	    "%s: an empty put ended and committed: an empty object", kind);
	ok(storage_put_begin(st, "keys/ended2", 0, &p) == 0 &&
	    storage_put_write(p, "x", 1) == 0 && storage_put_end(p) == 0 &&
	    storage_put_write(p, "y", 1) == -1 && failed_with(EINVAL, "end"),
	    "%s: a write after the end fails", kind);
	ok(storage_put_commit(p) == -1 &&
	    storage_stat(st, "keys/ended2", &size) == STORAGE_MISSING,
	    "%s: and so does its commit, leaving nothing", kind);
	ok(storage_put_begin(st, "keys/ended3", 0, &p) == 0 &&
	    storage_put_write(p, "z", 1) == 0 && storage_put_end(p) == 0,
	    "%s: another ended", kind);
	storage_put_abort(p);
	ok(storage_stat(st, "keys/ended3", &size) == STORAGE_MISSING,
	    "%s: aborted after its end, nothing", kind);
}

struct replacer {
	struct storage *st;
	int failed;
};

/* Replace "keys/flip" 100 times: 1000 bytes of 'a', 3000 of 'b'. */
static void *
replace_often(void *arg)
{
	static uint8_t a[1000], b[3000];
	struct replacer *r = arg;
	int i;

	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	for (i = 0; i < 100; i++)
		r->failed |= storage_put(r->st, "keys/flip", i % 2 ? b : a,
		    i % 2 ? sizeof(b) : sizeof(a), 0) != 0;
	return (NULL);
}

/* 1 if data is one whole version replace_often writes. */
static int
whole_version(const unsigned char *data, size_t len)
{
	size_t i;

	if (len != 1000 && len != 3000)
		return (0);
	for (i = 0; i < len; i++)
		if (data[i] != (len == 1000 ? 'a' : 'b'))
			return (0);
	return (1);
}

/*
 * Readers of an object being replaced see one whole version or another.
 * Swift's object server may answer 404 for an object in the instant its
 * new version takes the old one's place: on object storage a replaced
 * object may be missing for a moment, never partial or mixed.
 */
static void
replaced_under_readers(struct storage *st, const char *kind)
{
	struct replacer r = { st, 0 };
	unsigned char *data;
	int reads = 0, whole = 1, done = 0, missing = 0, rc;
	int may_miss = strstr(kind, "s3") != NULL;
	size_t len;
	pthread_t t;

	if (storage_put(st, "keys/flip", "", 0, 0) ||
	    pthread_create(&t, NULL, replace_often, &r) != 0) {
		ok(0, "%s: a writer to race", kind);
		return;
	}
	while (!done) {
		/* The last reads come after the writer is done. */
		done = pthread_tryjoin_np(t, NULL) == 0;
		rc = storage_get(st, "keys/flip", 4096, &data, &len);
		if (rc == STORAGE_MISSING && may_miss) {
			missing++;
			continue;
		}
		if (rc != 0) {
			whole = 0;
			continue;
		}
		whole &= len == 0 || whole_version(data, len);
		reads++;
		free(data);
	}
	ok(!r.failed && whole && reads > 0, "%s: %d reads while it was "
	    "replaced 100 times: each a whole version (%d found it missing)",
	    kind, reads, missing);
}

/*
 * storage_list_all of dir.  Object storage may list a committed object
 * only a while later (doc/design.md), so over S3 a listing of fewer than
 * want entries is made again, for up to LAG_SECONDS: what is still
 * missing then is missing.  The other stores list at once.
 */
static int
list_settled(struct storage *st, const char *kind, const char *dir,
    size_t want, struct storage_entry **v, size_t *n)
{
	double end = now_monotonic() + LAG_SECONDS;
	int rc;

	while ((rc = storage_list_all(st, dir, v, n)) == 0 && *n < want &&
	    strstr(kind, "s3") != NULL && now_monotonic() < end) {
		storage_entries_free(*v, *n);
		usleep(250000);
	}
	return (rc);
}

static void
listing(struct storage *st, const char *kind)
{
	struct storage_entry *v;
	int stops = 0, i;
	size_t n;

	ok(storage_put(st, PACK_B, "bb", 2, 0) == 0, "%s: a second pack",
	    kind);
	ok(list_settled(st, kind, "packs", 2, &v, &n) == 0 && n == 2 &&
	    strcmp(v[0].name, PACK_A) == 0 && v[0].size == 1 << 20 &&
	    strcmp(v[1].name, PACK_B) == 0 && v[1].size == 2,
	    "%s: the packs, at every depth, sorted, with sizes", kind);
	storage_entries_free(v, n);
	ok(list_settled(st, kind, "packs/ab", 1, &v, &n) == 0 && n == 1 &&
	    strcmp(v[0].name, PACK_A) == 0,
	    "%s: one fan-out directory", kind);
	storage_entries_free(v, n);
	ok(list_settled(st, kind, "", 5, &v, &n) == 0 && n > 4 &&
	    none_private(v, n) && strcmp(v[0].name, "coffer.conf") == 0,
	    "%s: everything, none of it the store's own", kind);
	storage_entries_free(v, n);
	ok(storage_list_all(st, "nothing", &v, &n) == 0 && n == 0 &&
	    storage_list_all(st, "nothing/deeper", &v, &n) == 0 && n == 0,
	    "%s: a directory that is not there lists nothing", kind);
	i = storage_list(st, "", count_entry, &stops);
	ok(i == 42 && stops == 2,
	    "%s: a callback's non-zero value stops the listing (%d, %d)",
	    kind, i, stops);
}

static void
deletes(struct storage *st, const char *kind)
{
	uint64_t size;

	ok(storage_delete(st, PACK_B) == 0 &&
	    storage_stat(st, PACK_B, &size) == STORAGE_MISSING,
	    "%s: delete removes", kind);
	ok(storage_delete(st, PACK_B) == 0 &&
	    storage_delete(st, "nodir/x") == 0,
	    "%s: delete of a missing object is fine", kind);
}

static void
names(struct storage *st, const char *kind)
{
	static const char *const bad[] = {
		"", "/abs", "a//b", "..", "../x", "a/../b", "./a", "a/.", "a/",
		".hidden", "-opt", "a b", "a\nb", "tmp", "tmp/x",
		"locks/writer", "a/b/c/d/e", "caf\xc3\xa9", "a\\b",
	};
	char longname[STORAGE_NAME_MAX + 2];
	struct stderr_capture cap;
	struct storage_lock *l;
	struct storage_put *p;
	unsigned char *data;
	const char *out;
	uint64_t size;
	size_t i, len;
	int refused = 1;

	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	for (i = 0; i <= sizeof(bad) / sizeof(*bad); i++) {
		const char *nm = i < sizeof(bad) / sizeof(*bad) ? bad[i] :
		    longname;

		refused &= !storage_name_ok(nm);
		refused &= storage_put(st, nm, "x", 1, 0) == -1 &&
		    failed_with(EINVAL, "not an object name");
		refused &= storage_get(st, nm, 10, &data, &len) == -1;
		refused &= storage_stat(st, nm, &size) == -1;
		refused &= storage_delete(st, nm) == -1;
		refused &= storage_put_begin(st, nm, 0, &p) == -1 && p == NULL;
		if (!refused)
			diag("%s: '%s' passed", kind, nm);
	}
	ok(refused, "%s: bad names refused by every call (EINVAL)", kind);
	ok(storage_name_ok("coffer.conf") && storage_name_ok("keys/k_1-2.x") &&
	    storage_name_ok(PACK_A) && storage_name_ok("a/b/c/d") &&
	    storage_name_ok("tmpx/a") && storage_name_ok("a/tmp"),
	    "%s: good names pass", kind);
	ok(storage_list(st, "../x", count_entry, &i) == -1 &&
	    storage_list(st, "/", count_entry, &i) == -1,
	    "%s: a bad directory to list is refused", kind);
	ok(storage_lock(st, "a/b", &(struct storage_lock_opts){ "", 0, 0, 0 },
	    &l, NULL, 0) == -1 && storage_lock(st, "..", &(struct
	    storage_lock_opts){ "", 0, 0, 0 }, &l, NULL, 0) == -1,
	    "%s: a bad lock name is refused", kind);
	stderr_capture_begin(&cap);
	storage_put(st, "../escape", "x", 1, 0);
	out = stderr_capture_end(&cap);
	ok(out != NULL && strstr(out, "error: repository '") != NULL &&
	    strstr(out, "'../escape' is not an object name: refused\n") !=
	    NULL && strchr(out, '\n') == out + strlen(out) - 1,
	    "%s: reported once, on one line", kind);
}

struct unlocker {
	struct storage_lock *l;
};

static void *
unlock_later(void *arg)
{
	struct unlocker *u = arg;

	nanosleep(&(struct timespec){ 0, 50 * 1000 * 1000 }, NULL);
	storage_unlock(u->l);
	return (NULL);
}

static void
locks(struct storage *st, struct storage *other, const char *kind)
{
	struct storage_lock_opts o = { "host h pid 1 since now", 0, 0, 0 };
	struct storage_lock *a, *b, *c;
	struct unlocker u;
	pthread_t t;
	char who[64];

	ok(storage_lock(st, "writer", &o, &a, who, sizeof(who)) == 0 &&
	    a != NULL, "%s: a lock taken", kind);
	ok(storage_lock(other, "writer", &o, &b, who, sizeof(who)) == 1 &&
	    b == NULL && strcmp(who, "host h pid 1 since now") == 0,
	    "%s: another takes it not: busy, naming the holder (%s)", kind,
	    who);
	ok(storage_lock(st, "writer", &(struct storage_lock_opts){ "x", 0.05,
	    0, 0 }, &b, who, sizeof(who)) == 1,
	    "%s: nor after waiting a while", kind);
	ok(storage_lock(other, "prune", &o, &c, NULL, 0) == 0,
	    "%s: a lock of another name is another lock", kind);
	storage_unlock(c);
	storage_unlock(a);
	o.info = "second\x1b[2J";
	ok(storage_lock(other, "writer", &o, &b, who, sizeof(who)) == 0,
	    "%s: given back, it is taken again", kind);
	ok(storage_lock(st, "writer", &o, &a, who, sizeof(who)) == 1 &&
	    strcmp(who, "second?[2J") == 0,
	    "%s: a holder's control bytes are not passed on (%s)", kind, who);
	u.l = b;
	if (pthread_create(&t, NULL, unlock_later, &u) != 0) {
		skip("%s: no thread", kind);
		storage_unlock(b);
		return;
	}
	ok(storage_lock(st, "writer", &(struct storage_lock_opts){ "w", 60,
	    0, 0 }, &a, who, sizeof(who)) == 0,
	    "%s: a waiter takes it when it is given back", kind);
	pthread_join(t, NULL);
	storage_unlock(a);
	storage_unlock(NULL);
}

/* Whether st's locks are leases (they expire): the object stores'. */
static int
leased(const struct storage *st)
{
	return (storage_is_remote(storage_where(st)));
}

/*
 * The live holders of lock name are exactly those given, NULL-ended,
 * each "x:INFO" (exclusive) or "s:INFO" (shared), exclusive first and
 * then by info; a lease's expires in the future, else 0.
 */
static int
holders_are(struct storage *st, const char *name, ...)
{
	struct storage_holder *v;
	const char *want;
	size_t n, i = 0;
	va_list ap;
	int same;

	if (storage_lock_holders(st, name, &v, &n) != 0)
		return (0);
	same = 1;
	va_start(ap, name);
	while ((want = va_arg(ap, const char *)) != NULL) {
		if (i >= n || v[i].shared != (want[0] == 's') ||
		    strcmp(v[i].info, want + 2) != 0 || (leased(st) ?
		    v[i].expires <= (long long)time(NULL) : v[i].expires != 0))
			same = 0;
		i++;
	}
	va_end(ap);
	free(v);
	return (same && i == n);
}

/* storage_lock of name on st (o waiting), while a thread gives held
 * back 50 ms later: its result (-1 without a thread). */
static int
waited_for(struct storage *st, const char *name,
    const struct storage_lock_opts *o, struct storage_lock **l,
    struct storage_lock *held)
{
	struct unlocker u = { held };
	char who[128];
	pthread_t t;
	int rc;

	*l = NULL;
	if (pthread_create(&t, NULL, unlock_later, &u) != 0) {
		storage_unlock(held);
		return (-1);
	}
	rc = storage_lock(st, name, o, l, who, sizeof(who));
	pthread_join(t, NULL);
	return (rc);
}

/* Shared and exclusive holders of one name, on two handles. */
static void
shared_locks(struct storage *st, struct storage *other, const char *kind)
{
	struct storage_lock_opts sa = { "host h pid 1 reader a", 0, 0, 1 },
	    sb = { "host h pid 1 reader b", 0, 0, 1 },
	    x = { "host h pid 1 writer x", 0, 0, 0 };
	struct storage_lock *a, *b, *c;
	char who[128];

	ok(storage_lock(st, "backup", &sa, &a, who, sizeof(who)) == 0 &&
	    storage_lock(other, "backup", &sb, &b, who, sizeof(who)) == 0,
	    "%s: shared beside shared", kind);
	ok(storage_lock(other, "backup", &x, &c, who, sizeof(who)) == 1 &&
	    c == NULL && (!strcmp(who, "host h pid 1 reader a (and 1 more)") ||
	    !strcmp(who, "host h pid 1 reader b (and 1 more)")),
	    "%s: exclusive busy beside two shared, naming one (%s)", kind,
	    who);
	ok(holders_are(st, "backup", "s:host h pid 1 reader a",
	    "s:host h pid 1 reader b", NULL),
	    "%s: the holders are the two shared", kind);
	storage_unlock(b);
	ok(storage_lock(st, "backup", &x, &c, who, sizeof(who)) == 1 &&
	    strcmp(who, sa.info) == 0,
	    "%s: exclusive busy beside one shared, naming it (%s)", kind, who);
	storage_unlock(a);
	ok(holders_are(other, "backup", NULL), "%s: given back, no holder",
	    kind);
	ok(storage_lock(st, "backup", &x, &c, who, sizeof(who)) == 0,
	    "%s: given back, exclusive taken", kind);
	ok(storage_lock(other, "backup", &sa, &a, who, sizeof(who)) == 1 &&
	    a == NULL && strcmp(who, x.info) == 0,
	    "%s: shared busy while exclusive held, naming it (%s)", kind, who);
	ok(holders_are(other, "backup", "x:host h pid 1 writer x", NULL),
	    "%s: the holder is the exclusive", kind);
	ok(waited_for(other, "backup", &(struct storage_lock_opts){ sa.info,
	    60, 0, 1 }, &a, c) == 0,
	    "%s: a shared waiter takes it when the exclusive is given back",
	    kind);
	ok(waited_for(st, "backup", &(struct storage_lock_opts){ x.info, 60,
	    0, 0 }, &c, a) == 0,
	    "%s: an exclusive waiter takes it when the shared is given back",
	    kind);
	storage_unlock(c);
	ok(holders_are(st, "backup", NULL) && storage_lock(other, "backup",
	    &sb, &b, who, sizeof(who)) == 0,
	    "%s: all given back, free", kind);
	storage_unlock(b);
	ok(storage_lock(st, "backup.shared", &sa, &a, NULL, 0) == -1 &&
	    storage_lock_holders(st, "backup.shared", &(struct storage_holder
	    *){ NULL }, &(size_t){ 0 }) == -1,
	    "%s: a lock name ending .shared is refused", kind);
}

/*
 * A child process that takes lock name shared on the store at where,
 * with ttl, and dies: killed (-9) while it holds, or at once, its lease
 * left.  gone: its info names this host and its own pid, else "host h
 * pid 1 child".  Its pid, once it is dead, or -1.
 */
static pid_t
dead_sharer(const char *where, const char *name, double ttl, int gone)
{
	struct storage_lock_opts o = { "host h pid 1 child", 0, ttl, 1 };
	char info[512], host[256], c = 0;
	struct storage_lock *l;
	struct storage *st;
	int fd[2], status;
	pid_t pid;

	if (pipe(fd) || (pid = fork()) == -1)
		return (-1);
	if (pid == 0) {
		close(fd[0]);
		gethostname(host, sizeof(host) - 1);
		host[sizeof(host) - 1] = '\0';
		snprintf(info, sizeof(info), "host %s pid %ld child", host,
		    (long)getpid());
		if (gone)
			o.info = info;
		if ((st = storage_open_location(where, 0)) != NULL &&
		    storage_lock(st, name, &o, &l, NULL, 0) == 0)
			c = 1;
		(void)!write(fd[1], &c, 1);
		/* Killed: no unlock, no exit handler. */
		pause();
		_exit(0);
	}
	close(fd[1]);
	if (read(fd[0], &c, 1) != 1)
		c = 0;
	close(fd[0]);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return (c ? pid : -1);
}

/* Leases: renewed when shared too; an expired one, or one whose holder
 * is a gone process of this host, does not count. */
static int
marked_gone(const char *info)
{
	return (strstr(info, "[gone]") != NULL);
}

/*
 * Who a lock line says may back up what: a backup names its dataset
 * (spaces and all), a run or a watch lists its policy's ("-" none), and
 * a line that names none (a run's of before lists) may back up any.
 */
static void
lock_lines(void)
{
	static const char pre[] = "host h pid 7 since 2026-12-07T10:00:00Z "
	    "nonce 0011223344556677@ns.1 command ";
	struct repo_lock_who w;
	char line[512];

	snprintf(line, sizeof(line), "%sbackup dataset my data\n", pre);
	ok(repo_lock_parse(line, &w) == 0 && !w.listed &&
	    strcmp(w.dataset, "my data") == 0 && repo_lock_names(&w,
	    "my data") && !repo_lock_names(&w, "my"),
	    "lock line: a backup's dataset");
	snprintf(line, sizeof(line), "%srun datasets a/bb/c\n", pre);
	ok(repo_lock_parse(line, &w) == 0 && w.listed &&
	    strcmp(w.command, "run") == 0 && repo_lock_names(&w, "a") &&
	    repo_lock_names(&w, "bb") && repo_lock_names(&w, "c") &&
	    !repo_lock_names(&w, "b") && !repo_lock_names(&w, "a/bb") &&
	    !repo_lock_names(&w, "d"), "lock line: a run's datasets");
	snprintf(line, sizeof(line), "%swatch datasets -\n", pre);
	ok(repo_lock_parse(line, &w) == 0 && w.listed &&
	    w.dataset[0] == '\0' && !repo_lock_names(&w, "a"),
	    "lock line: a run that backs up nothing names none");
	snprintf(line, sizeof(line), "%srun datasets %0300d\n", pre, 7);
	ok(repo_lock_parse(line, &w) == 0 && !w.listed &&
	    w.dataset[0] == '\0' && repo_lock_names(&w, "a"),
	    "lock line: a list too long to keep names every dataset");
	snprintf(line, sizeof(line), "%srun\n", pre);
	ok(repo_lock_parse(line, &w) == 0 && !w.listed &&
	    repo_lock_names(&w, "a") && repo_lock_names(&w, "z"),
	    "lock line: a run of before lists names every dataset");
}

/* A lease whose holder the repository's lock code says is gone
 * (storage_holder_gone_fn) is free before it expires, and not listed. */
static void
gone_holders(struct storage *st, struct storage *other, const char *kind)
{
	struct storage_lock_opts o = { "host h pid 1 [gone]", 0, 0, 0 },
	    o2 = { "host h pid 2", 0, 0, 0 };
	struct storage_lock *a = NULL, *b = NULL;
	char who[64];

	ok(storage_lock(st, "ended", &o, &a, NULL, 0) == 0 &&
	    storage_lock(other, "ended", &o2, &b, who, sizeof(who)) == 1,
	    "%s: a lease is busy while its holder is not known gone", kind);
	storage_holder_gone_fn(marked_gone);
	ok(holders_are(other, "ended", NULL),
	    "%s: a holder known gone is not listed", kind);
	ok(storage_lock(other, "ended", &o2, &b, who, sizeof(who)) == 0,
	    "%s: nor does it keep the lock", kind);
	storage_holder_gone_fn(NULL);
	storage_unlock(b);
	storage_unlock(a);
}

static void
shared_leases(struct storage *st, struct storage *other, const char *kind)
{
	struct storage_lock_opts s3s = { "renewed reader", 0, 3, 1 },
	    x = { "writer", 0, 0, 0 };
	struct storage_lock *l, *l2;
	char who[128];
	int rc;

	ok(storage_lock(st, "sharing", &s3s, &l, NULL, 0) == 0,
	    "%s: a shared lease of 3 s taken", kind);
	sleep(7);
	ok(storage_lock(other, "sharing", &x, &l2, who, sizeof(who)) == 1 &&
	    strcmp(who, "renewed reader") == 0 && !storage_lock_lost(l),
	    "%s: 7 s later an exclusive is still kept out: renewed", kind);
	storage_unlock(l);
	/* Long enough for a child to open a store over rclone and Swift,
	 * and take it, before it expires. */
	rc = dead_sharer(storage_where(st), "sharing", 8, 0) > 0 ?
	    storage_lock(other, "sharing", &x, &l2, who, sizeof(who)) : -1;
	ok(rc == 1 && strcmp(who, "host h pid 1 child") == 0,
	    "%s: a dead holder's shared lease of 8 s is there", kind);
	if (rc == 0)
		storage_unlock(l2);
	sleep(9);
	ok(holders_are(st, "sharing", NULL) && storage_lock(other, "sharing",
	    &x, &l2, who, sizeof(who)) == 0,
	    "%s: expired, it is no holder and keeps no exclusive out", kind);
	storage_unlock(l2);
	l2 = NULL;
	/* Judged by the repository's lock code, as coffer's stores are. */
	storage_holder_gone_fn(repo_lock_holder_gone);
	ok(dead_sharer(storage_where(st), "sharing", 0, 1) > 0 &&
	    holders_are(st, "sharing", NULL) && storage_lock(other, "sharing",
	    &x, &l2, who, sizeof(who)) == 0,
	    "%s: one of a gone process of this host does not count", kind);
	storage_holder_gone_fn(NULL);
	storage_unlock(l2);
}

/* The contract, on st (a second handle on the same store: other). */
static void
contract(struct storage *st, struct storage *other, const char *kind)
{
	round_trips(st, kind);
	ranges(st, kind);
	atomicity(st, kind);
	replaced_under_readers(st, kind);
	listing(st, kind);
	deletes(st, kind);
	names(st, kind);
	locks(st, other, kind);
	shared_locks(st, other, kind);
	if (leased(st)) {
		shared_leases(st, other, kind);
		gone_holders(st, other, kind);
	}
}

/* A path under the local store at dir. */
static const char *
at(const char *dir, const char *rel)
{
	static char b[4][512];
	static int i;
	char *p = b[i++ % 4];

	snprintf(p, sizeof(b[0]), "%s/%s", dir, rel);
	return (p);
}

/* Entries in the directory at path (-1 if it cannot be read). */
static int
dir_entries(const char *path)
{
	struct dirent *de;
	DIR *d;
	int n = 0;

	if ((d = opendir(path)) == NULL)
		return (-1);
	while ((de = readdir(d)) != NULL)
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	return (n);
}

/* locks/backup.shared/ of the local store at dir (st) attacked. */
static void
shared_hostile(struct storage *st, const char *dir, const char *outside)
{
	struct storage_lock_opts o = { "host h pid 1 reader", 0, 0, 1 };
	struct storage_lock *l, *x;
	int outside_n = dir_entries(outside);

	mkdir(at(dir, "locks"), 0700);
	symlink(outside, at(dir, "locks/linked.shared"));
	ok(storage_lock(st, "linked", &o, &l, NULL, 0) == -1 &&
	    failed_with(EINVAL, "symbolic link") && dir_entries(outside) ==
	    outside_n, "local: a link in place of the shared holders' directory is "
	    "refused, not followed");
	mkdir(at(dir, "locks/backup.shared"), 0700);
	symlink(at(outside, "secret"), at(dir, "locks/backup.shared/evil"));
	mkfifo(at(dir, "locks/backup.shared/fifo"), 0600);
	alarm(20);
	ok(storage_lock(st, "backup", &o, &l, NULL, 0) == 0 &&
	    holders_are(st, "backup", "s:host h pid 1 reader", NULL) &&
	    dir_entries(at(dir, "locks/backup.shared")) == 3,
	    "local: a link and a FIFO among the shared holders are no "
	    "holders, left alone, not followed");
	alarm(0);
	ok(dead_sharer(dir, "backup", 0, 0) > 0 &&
	    dir_entries(at(dir, "locks/backup.shared")) == 4 &&
	    holders_are(st, "backup", "s:host h pid 1 reader", NULL) &&
	    dir_entries(at(dir, "locks/backup.shared")) == 3,
	    "local: a holder killed -9 is not listed, its file removed");
	storage_unlock(l);
	ok(storage_lock(st, "backup", &(struct storage_lock_opts){ "x", 0, 0,
	    0 }, &x, NULL, 0) == 0 && dir_entries(at(dir,
	    "locks/backup.shared")) == 2, "local: given back, its file "
	    "removed; exclusive taken");
	storage_unlock(x);
}

struct cleaner {
	struct storage *st;
	int stop, failed;
};

static void *
clean_loop(void *arg)
{
	struct cleaner *cl = arg;

	while (!__atomic_load_n(&cl->stop, __ATOMIC_RELAXED))
		if (storage_clean(cl->st))
			cl->failed = 1;
	return (NULL);
}

static void
hostile(void)
{
	char dir[256], outside[256];
	struct storage *st;
	struct storage_entry *v;
	struct storage_lock *l;
	unsigned char *data;
	uint64_t size;
	char not_objects[256];
	size_t n, len, i;
	int fd, leftout = 1;

	snprintf(outside, sizeof(outside), "%s/outside", base);
	if (!ok((st = local_new("hostile", dir, sizeof(dir))) != NULL &&
	    mkdir(outside, 0700) == 0 && mkdir(at(dir, "keys"), 0700) == 0 &&
	    mkdir(at(dir, "packs"), 0700) == 0,
	    "local: a store to attack"))
		return;
	fd = open(at(outside, "secret"), O_WRONLY | O_CREAT, 0600);
	(void)!write(fd, "secret", 6);
	close(fd);

	/* A link in place of an object. */
	symlink(at(outside, "secret"), at(dir, "keys/evil"));
	ok(storage_get(st, "keys/evil", 100, &data, &len) == -1 &&
	    failed_with(EINVAL, "'keys/evil' is a symbolic link where a "
	    "regular file belongs: refused"),
	    "local: a link in place of an object is refused, named");
	ok(storage_stat(st, "keys/evil", &size) == -1,
	    "local: stat refuses it too");
	ok(storage_delete(st, "keys/evil") == 0 &&
	    access(at(dir, "keys/evil"), F_OK) == -1 &&
	    access(at(outside, "secret"), F_OK) == 0,
	    "local: delete removes the link, never what it names");

	/* A link in place of a directory. */
	mkdir(at(outside, "ef"), 0700);
	fd = open(at(outside, "ef/ef00000000000000000000000000000f"),
	    O_WRONLY | O_CREAT, 0600);
	close(fd);
	symlink(at(outside, "ef"), at(dir, "packs/ef"));
	ok(storage_get(st, "packs/ef/ef00000000000000000000000000000f", 100,
	    &data, &len) == -1 && failed_with(EINVAL, "'packs/ef' is a "
	    "symbolic link where a directory belongs"),
	    "local: a link in place of a directory is refused, named");
	ok(storage_put(st, "packs/ef/ef00000000000000000000000000000e", "x",
	    1, 0) == -1 && access(at(outside,
	    "ef/ef00000000000000000000000000000e"), F_OK) == -1,
	    "local: a put through it is refused, nothing written outside");
	ok(storage_delete(st, "packs/ef/ef00000000000000000000000000000f") ==
	    -1 && access(at(outside, "ef/ef00000000000000000000000000000f"),
	    F_OK) == 0, "local: a delete through it removes nothing");

	/* A FIFO: refused without blocking (alarm() ends a hang). */
	mkfifo(at(dir, "keys/fifo"), 0600);
	alarm(20);
	ok(storage_get(st, "keys/fifo", 100, &data, &len) == -1 &&
	    failed_with(EINVAL, "is a FIFO where a regular file belongs"),
	    "local: a FIFO is refused without blocking");
	alarm(0);

	/* A directory where an object belongs, a file where a directory. */
	mkdir(at(dir, "keys/adir"), 0700);
	ok(storage_get(st, "keys/adir", 100, &data, &len) == -1 &&
	    failed_with(EINVAL, "is a directory where a regular file belongs"),
	    "local: a directory where an object belongs is refused");
	ok(storage_put(st, "keys/adir", "x", 1, 0) == -1 &&
	    failed_with(EINVAL, "is a directory where") &&
	    storage_delete(st, "keys/adir") == -1,
	    "local: neither replaced nor deleted");
	fd = open(at(dir, "packs/12"), O_WRONLY | O_CREAT, 0600);
	close(fd);
	ok(storage_get(st, "packs/12/1200000000000000000000000000000", 100,
	    &data, &len) == -1 && failed_with(EINVAL, "'packs/12' is a "
	    "regular file where a directory belongs"),
	    "local: a file where a directory belongs is refused");

	/* Listing leaves out what is no object, and goes on. */
	fd = open(at(dir, "keys/.hidden"), O_WRONLY | O_CREAT, 0600);
	close(fd);
	fd = open(at(dir, "keys/bad name"), O_WRONLY | O_CREAT, 0600);
	close(fd);
	storage_put(st, "keys/good", "g", 1, 0);
	ok(storage_list_all(st, "", &v, &n) == 0, "local: a hostile tree "
	    "lists");
	for (i = 0; i < n; i++)
		leftout &= strcmp(v[i].name, "keys/good") == 0 ||
		    strcmp(v[i].name, "packs/12") == 0;
	ok(n == 2 && leftout, "local: only the two objects (links, FIFO, "
	    "directories, bad names left out)");
	storage_entries_free(v, n);
	not_objects[0] = '\0';
	ok(storage_list(st, "", not_object, not_objects) == 0 &&
	    strcmp(not_objects, " keys/adir keys/fifo packs/ef") == 0,
	    "local: a listing names to its callback what has an object's name "
	    "and is none (%s)", not_objects);

	/* A lock file with a second name. */
	mkdir(at(dir, "locks"), 0700);
	fd = open(at(dir, "locks/writer"), O_WRONLY | O_CREAT, 0600);
	close(fd);
	link(at(dir, "locks/writer"), at(outside, "hard"));
	ok(storage_lock(st, "writer", &(struct storage_lock_opts){ "x", 0, 0, 0 },
	    &l, NULL, 0) == -1 && failed_with(EINVAL, "hard link"),
	    "local: a lock file with another name is refused");

	/* Shared holders' files: links and FIFOs among them are left
	 * alone, a dead holder's is removed. */
	shared_hostile(st, dir, outside);

	/* Puts leave nothing in tmp/; clean removes a crash's leftovers. */
	ok(dir_entries(at(dir, "tmp")) == 0, "local: tmp/ empty after puts");
	fd = open(at(dir, "tmp/put-0123456789abcdef"), O_WRONLY | O_CREAT,
	    0600);
	close(fd);
	mkdir(at(dir, "tmp/notours"), 0700);
	ok(storage_clean(st) == 0 && dir_entries(at(dir, "tmp")) == 1 &&
	    access(at(dir, "tmp/notours"), F_OK) == 0,
	    "local: clean removes leftovers, leaves a directory alone");
	rmdir(at(dir, "tmp/notours"));

	/* Another writer's put in progress is not a leftover: a clean from
	 * another handle (another writer's) leaves it, and it commits. */
	{
		struct storage *other = storage_local_open(dir, 0);
		struct storage_put *p = NULL;
		unsigned char *got = NULL;
		size_t glen = 0;

		ok(other != NULL && storage_put_begin(st, "keys/busy", 0,
		    &p) == 0 && storage_put_write(p, "abc", 3) == 0 &&
		    storage_clean(other) == 0 &&
		    dir_entries(at(dir, "tmp")) == 1 &&
		    storage_put_commit(p) == 0 &&
		    storage_get(st, "keys/busy", 16, &got, &glen) == 0 &&
		    glen == 3 && memcmp(got, "abc", 3) == 0,
		    "local: clean leaves another writer's put in progress");
		free(got);
		storage_close(other);
	}

	/* Cleans racing puts: none may take a put's file between its
	 * creation and its flock. */
	{
		struct cleaner cl = { storage_local_open(dir, 0), 0, 0 };
		pthread_t t;
		int k, puts_ok = 1;

		ok(cl.st != NULL && pthread_create(&t, NULL, clean_loop,
		    &cl) == 0, "local: a cleaner thread on another handle");
		for (k = 0; k < 3000 && puts_ok; k++)
			puts_ok = storage_put(st, "keys/race", "abc", 3, 0) == 0;
		__atomic_store_n(&cl.stop, 1, __ATOMIC_RELAXED);
		pthread_join(t, NULL);
		ok(puts_ok && cl.failed == 0, "local: 3000 puts beside a "
		    "clean in a loop all commit (%d)", k);
		storage_close(cl.st);
	}
	storage_close(st);
}

static void
local_only(void)
{
	char dir[256];
	struct storage *st;

	snprintf(dir, sizeof(dir), "%s/full", base);
	mkdir(dir, 0700);
	close(open(at(dir, "x"), O_WRONLY | O_CREAT, 0600));
	ok(storage_local_open(dir, STORAGE_CREATE) == NULL,
	    "local: create refuses a directory that is not empty");
	ok((st = local_new("made", dir, sizeof(dir))) != NULL &&
	    access(at(dir, "tmp"), F_OK) == 0 &&
	    access(at(dir, "locks"), F_OK) == 0,
	    "local: create makes the directory with tmp/ and locks/");
	storage_close(st);
	ok(storage_local_open(at(base, "none"), 0) == NULL,
	    "local: open of a directory that is not there fails");
	hostile();
}

/* Each fault the memory store injects. */
struct blocks_reader {
	struct storage *st;
	const uint8_t *data;
	size_t size;
	unsigned seed;
	int bad;
};

/* Random small reads of big from one thread, each checked. */
static void *
blocks_read_random(void *arg)
{
	struct blocks_reader *r = arg;
	struct storage_obj *o;
	uint8_t buf[3000];
	uint64_t size;
	size_t off, len;
	int i;

	if (storage_open(r->st, "packs/bb/bbig", &o, &size)) {
		r->bad = 1;
		return (NULL);
	}
	for (i = 0; i < 2000; i++) {
		off = (size_t)rand_r(&r->seed) % r->size;
		len = (size_t)rand_r(&r->seed) % sizeof(buf);
		if (len > r->size - off)
			len = r->size - off;
		if (storage_read_all(o, off, buf, len) ||
		    memcmp(buf, r->data + off, len) != 0)
			r->bad = 1;
	}
	storage_obj_close(o);
	return (NULL);
}

/* The read cache of the stores over a network, on the memory store. */
static void
blocks(void)
{
	static uint8_t big[100000], back[sizeof(big)];
	struct blocks_reader rd[4];
	struct storage *st = storage_mem_new();
	struct storage_obj *o;
	unsigned long reads;
	pthread_t t[4];
	uint64_t size;
	size_t off, got;
	int i, all = 1;

	fill(big, sizeof(big), 3);
	ok(st != NULL && storage_mem_blocks(st, 4096, 4) == 0 &&
	    storage_put(st, "packs/bb/bbig", big, sizeof(big), 0) == 0 &&
	    storage_open(st, "packs/bb/bbig", &o, &size) == 0,
	    "blocks: a store with 4 blocks of 4 KiB, a 100000-byte object");
	reads = storage_mem_calls(st, STORAGE_OP_READ);
	for (off = 0; off < sizeof(big); off += 100)
		all &= storage_read_all(o, off, back + off, 100) == 0;
	reads = storage_mem_calls(st, STORAGE_OP_READ) - reads;
	ok(all && memcmp(big, back, sizeof(big)) == 0 &&
	    reads == (sizeof(big) + 4095) / 4096,
	    "blocks: 1000 reads of 100 bytes, one fetch a block (%lu)", reads);
	ok(storage_read(o, sizeof(big) - 10, back, 100, &got) == 0 &&
	    got == 10 && memcmp(back, big + sizeof(big) - 10, 10) == 0 &&
	    storage_read(o, sizeof(big), back, 100, &got) == 0 && got == 0,
	    "blocks: short at the end, nothing past it");
	ok(storage_read_all(o, 4090, back, 20) == 0 &&
	    memcmp(back, big + 4090, 20) == 0, "blocks: a read across two");
	storage_mem_short(st, 1000);
	ok(storage_read_all(o, 40000 + 4096 * 3, back, 50) == 0 &&
	    memcmp(back, big + 40000 + 4096 * 3, 50) == 0,
	    "blocks: a block filled by reads cut short");
	storage_mem_short(st, 0);
	storage_mem_fail(st, STORAGE_OP_READ, 1, EIO);
	ok(storage_read_all(o, 90000, back, 10) == -1 &&
	    failed_with(EIO, NULL) &&
	    storage_read_all(o, 90000, back, 10) == 0 &&
	    memcmp(back, big + 90000, 10) == 0,
	    "blocks: a failed fetch is reported, the next one works");
	storage_obj_close(o);
	fill(big, sizeof(big), 4);
	ok(storage_put(st, "packs/bb/bbig", big, sizeof(big), 0) == 0 &&
	    storage_open(st, "packs/bb/bbig", &o, &size) == 0 &&
	    storage_read_all(o, 90000, back, 10) == 0 &&
	    memcmp(back, big + 90000, 10) == 0,
	    "blocks: an object written anew is read anew");
	storage_obj_close(o);
	for (i = 0; i < 4; i++) {
		rd[i] = (struct blocks_reader){ st, big, sizeof(big),
		    (unsigned)i + 1, 0 };
		all &= pthread_create(&t[i], NULL, blocks_read_random,
		    &rd[i]) == 0;
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		all &= !rd[i].bad;
	}
	ok(all, "blocks: 4 threads, 8000 random reads through 4 blocks");
	storage_close(st);
}

static void
faults(void)
{
	uint8_t data[1000], buf[1000];
	struct storage *st = storage_mem_new();
	struct storage_entry *v;
	struct storage_obj *o;
	struct storage_lock *l;
	struct storage_put *p;
	struct timespec t0, t1;
	unsigned char *got;
	uint64_t size;
	unsigned long reads;
	size_t n, len;

	fill(data, sizeof(data), 9);
	storage_put(st, "keys/a", data, sizeof(data), 0);
	ok(storage_mem_fail(st, STORAGE_OP_READ, 2, EIO) == 0 &&
	    storage_open(st, "keys/a", &o, &size) == 0,
	    "mem: a read fault set");
	ok(storage_read_all(o, 0, buf, 10) == 0, "mem: the first read is fine");
	ok(storage_read_all(o, 0, buf, 10) == -1 && errno == EIO &&
	    failed_with(EIO, "read of 'keys/a' failed"),
	    "mem: the second fails (EIO, naming the object)");
	ok(storage_read_all(o, 0, buf, 10) == 0, "mem: the third is fine");
	storage_obj_close(o);

	storage_mem_fail(st, STORAGE_OP_PUT_COMMIT, 1, ETIMEDOUT);
	ok(storage_put(st, "keys/b", "b", 1, 0) == -1 &&
	    failed_with(ETIMEDOUT, NULL) &&
	    storage_stat(st, "keys/b", &size) == STORAGE_MISSING,
	    "mem: a commit that times out leaves nothing");
	storage_mem_fail(st, STORAGE_OP_PUT_WRITE, 2, EIO);
	ok(storage_put_begin(st, "keys/c", 0, &p) == 0 &&
	    storage_put_write(p, "c1", 2) == 0 &&
	    storage_put_write(p, "c2", 2) == -1 &&
	    storage_put_write(p, "c3", 2) == -1 &&
	    storage_put_commit(p) == -1 &&
	    storage_stat(st, "keys/c", &size) == STORAGE_MISSING,
	    "mem: after a failed write, the put cannot commit: nothing");
	storage_mem_fail(st, STORAGE_OP_PUT_BEGIN, 1, ENOSPC);
	ok(storage_put(st, "keys/c", "c", 1, 0) == -1 &&
	    failed_with(ENOSPC, NULL), "mem: a put that cannot begin");
	storage_mem_fail(st, STORAGE_OP_OPEN, 1, EACCES);
	ok(storage_get(st, "keys/a", 2000, &got, &len) == -1 &&
	    failed_with(EACCES, NULL), "mem: an open fault fails a get");
	storage_mem_fail(st, STORAGE_OP_STAT, 1, EIO);
	ok(storage_stat(st, "keys/a", &size) == -1 &&
	    storage_stat(st, "keys/a", &size) == 0,
	    "mem: a stat fault, once");
	storage_mem_fail(st, STORAGE_OP_DELETE, 1, EIO);
	ok(storage_delete(st, "keys/a") == -1 &&
	    storage_stat(st, "keys/a", &size) == 0,
	    "mem: a failed delete leaves the object");
	storage_mem_fail(st, STORAGE_OP_LIST, 1, ETIMEDOUT);
	ok(storage_list_all(st, "", &v, &n) == -1 && v == NULL &&
	    failed_with(ETIMEDOUT, NULL), "mem: a listing fault");
	storage_mem_fail(st, STORAGE_OP_LOCK, 1, EIO);
	ok(storage_lock(st, "writer", &(struct storage_lock_opts){ "", 0, 0, 0 },
	    &l, NULL, 0) == -1 && l == NULL, "mem: a lock fault");

	/* Reads cut short: storage_read reads on. */
	storage_mem_short(st, 7);
	reads = storage_mem_calls(st, STORAGE_OP_READ);
	n = storage_get(st, "keys/a", 2000, &got, &len) == 0 && len == 1000 &&
	    memcmp(got, data, 1000) == 0;
	reads = storage_mem_calls(st, STORAGE_OP_READ) - reads;
	ok(n && reads >= 1000 / 7, "mem: reads of 7 bytes at most, read on "
	    "to the whole (%lu reads)", reads);
	free(got);
	storage_mem_short(st, 0);

	/* A delay: at least that long (a lower bound, never flaky). */
	storage_mem_delay(st, STORAGE_OP_STAT, 30);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ok(storage_stat(st, "keys/a", &size) == 0, "mem: a slow stat works");
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ok((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) >=
	    30 * 1000000L, "mem: and took its delay");
	storage_mem_delay(st, STORAGE_OP_STAT, 0);

	/* Stale listings: the last k puts are not listed yet, but read. */
	storage_mem_stale(st, 2);
	storage_put(st, "d/1", "1", 1, 0);
	storage_put(st, "d/2", "2", 1, 0);
	storage_put(st, "d/3", "3", 1, 0);
	ok(storage_list_all(st, "d", &v, &n) == 0 && n == 1 &&
	    strcmp(v[0].name, "d/1") == 0 && holds(st, "d/3", "3", 1),
	    "mem: a stale listing leaves out the last 2 puts, a get sees them");
	storage_entries_free(v, n);
	storage_put(st, "d/4", "4", 1, 0);
	ok(storage_list_all(st, "d", &v, &n) == 0 && n == 2,
	    "mem: one put later, one more is listed");
	storage_entries_free(v, n);
	storage_mem_stale(st, 0);
	ok(storage_list_all(st, "d", &v, &n) == 0 && n == 4,
	    "mem: not stale: all of them");
	storage_entries_free(v, n);
	ok(storage_mem_fail(st, STORAGE_OP_READ, 0, EIO) == -1 &&
	    storage_mem_fail(st, STORAGE_NOPS, 1, EIO) == -1,
	    "mem: a fault of no call is refused");
	storage_close(st);
}

/* A new store's layout where there are directories, and its undoing. */
static void
made(void)
{
	char dir[256], empty[256];
	struct storage *st;
	int fd;

	if (!ok((st = local_new("unmade", dir, sizeof(dir))) != NULL,
	    "local: a store to make and unmake"))
		return;
	ok(storage_mkdir(st, "keys") == 0 && storage_mkdir(st, "packs") == 0 &&
	    storage_mkdir(st, "keys") == 0 && dir_entries(at(dir, "keys")) == 0,
	    "local: storage_mkdir makes a directory, twice is fine");
	ok(storage_mkdir(st, "tmp") == -1 && failed_with(EINVAL, NULL),
	    "local: not the store's own");
	storage_put(st, "packs/ab/ab00", "x", 1, 0);
	storage_delete(st, "packs/ab/ab00");
	storage_close(st);
	mkdir(at(dir, "mine"), 0700);
	fd = open(at(dir, "mine/f"), O_WRONLY | O_CREAT, 0600);
	close(fd);
	ok(storage_local_unmake(dir, 0) == -1 && dir_entries(dir) == 1,
	    "local: unmake leaves a directory that is not empty, and what "
	    "is not the store's");
	unlink(at(dir, "mine/f"));
	rmdir(at(dir, "mine"));
	ok(storage_local_unmake(dir, 0) == 0 && access(dir, F_OK) == -1,
	    "local: unmake removes the store's directories and its own");
	snprintf(empty, sizeof(empty), "%s/kept", base);
	mkdir(empty, 0700);
	st = storage_local_open(empty, STORAGE_CREATE);
	storage_close(st);
	ok(st != NULL && storage_local_unmake(empty, 1) == 0 &&
	    dir_entries(empty) == 0, "local: unmake keeps the directory when "
	    "told to");
}

struct filler {
	struct storage *st;
	int from, to, failed;
};

/* Objects many/NNNNN from..to-1, of one byte each. */
static void *
fill_many(void *arg)
{
	struct filler *f = arg;
	char name[64];
	int i;

	for (i = f->from; i < f->to; i++) {
		snprintf(name, sizeof(name), "many/%05d", i);
		f->failed |= storage_put(f->st, name, "m", 1, 0) != 0;
	}
	return (NULL);
}

struct seen {
	unsigned char once[1040];
	size_t n, twice;
};

/* Each many/NNNNN listed, and whether one came twice. */
static int
count_once(void *arg, const char *name, uint64_t size)
{
	struct seen *v = arg;
	int i;

	if (size != 1 || sscanf(name, "many/%05d", &i) != 1 || i < 0 ||
	    i >= 1040)
		return (-1);
	v->twice += v->once[i]++ > 0;
	v->n++;
	return (0);
}

/* A listing of more objects than a page holds (S3's 1000). */
static void
s3_pages(struct storage *st)
{
	static struct seen v;
	struct filler f[4];
	pthread_t t[4];
	double end;
	int i, made = 1;

	for (i = 0; i < 4; i++) {
		f[i] = (struct filler){ st, i * 260, (i + 1) * 260, 0 };
		made &= pthread_create(&t[i], NULL, fill_many, &f[i]) == 0;
	}
	for (i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		made &= !f[i].failed;
	}
	ok(made, "s3: 1040 objects put, from 4 threads");
	/* A listing may lag behind the puts: listed again until it has
	 * them all, for up to LAG_SECONDS. */
	end = now_monotonic() + LAG_SECONDS;
	for (;;) {
		memset(&v, 0, sizeof(v));
		i = storage_list(st, "many", count_once, &v);
		if (i != 0 || v.n >= 1040 || now_monotonic() >= end)
			break;
		usleep(250000);
	}
	ok(i == 0 && v.n == 1040 && v.twice == 0, "s3: a listing over pages "
	    "gives each once (%zu of 1040)", v.n);
}

/*
 * Puts share a few part buffers (PARTS_LIVE): a put waits for a second
 * one only while a committing put will give one back, else sends its
 * parts itself.  Three big puts open at once on one thread, written in
 * turns (three buffers held: none has a second to fill), wait on nothing
 * (alarm() ends a hang), and each is whole.
 */
static void
s3_puts_at_once(struct storage *st, const uint8_t *big, size_t len)
{
	static const char *names[3] = { "packs/78/78a", "packs/78/78b",
	    "packs/78/78c" };
	struct storage_put *p[3];
	struct storage_obj *o;
	uint8_t tail[64];
	uint64_t size;
	size_t off, n;
	int i, ok_all = 1;

	for (i = 0; i < 3; i++)
		if (storage_put_begin(st, names[i], 0, &p[i]) != 0) {
			ok_all = 0;
			while (i-- > 0)
				storage_put_abort(p[i]);
			break;
		}
	if (!ok(ok_all, "s3: three big puts begun"))
		return;
	alarm(300);
	for (off = 0; off < len; off += n) {
		n = len - off < (5 << 20) ? len - off : (5 << 20);
		for (i = 0; i < 3; i++)
			ok_all &= storage_put_write(p[i], big + off, n) == 0;
	}
	ok(ok_all, "s3: written in turns, a part and more each");
	ok(storage_put_commit(p[0]) == 0, "s3: the first committed");
	for (off = 0; off < len; off += n) {
		n = len - off < (5 << 20) ? len - off : (5 << 20);
		ok_all &= storage_put_write(p[1], big + off, n) == 0;
	}
	ok_all &= storage_put_commit(p[1]) == 0;
	ok_all &= storage_put_commit(p[2]) == 0;
	alarm(0);
	ok(ok_all, "s3: one written on after another committed, then both "
	    "commit");
	for (i = 0; i < 3; i++) {
		ok_all &= storage_open(st, names[i], &o, &size) == 0 &&
		    size == (i == 1 ? 2 * len : len) &&
		    storage_read_all(o, size - sizeof(tail), tail,
		    sizeof(tail)) == 0 &&
		    memcmp(tail, big + len - sizeof(tail), sizeof(tail)) == 0;
		if (o != NULL)
			storage_obj_close(o);
		ok_all &= storage_delete(st, names[i]) == 0;
	}
	ok(ok_all, "s3: each whole");
}

/* This process's resident memory, in bytes (0 if unknown). */
static uint64_t
rss_bytes(void)
{
	unsigned long long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f == NULL)
		return (0);
	if (fscanf(f, "%llu %llu", &pages, &rss) != 2)
		rss = 0;
	fclose(f);
	return ((uint64_t)rss * (uint64_t)sysconf(_SC_PAGESIZE));
}

/*
 * An import keeps a bundle's packs as open puts until the bundle checks:
 * once ended, each has sent its last part, and the memory held does not
 * grow with their number (before, each held its last part, up to 16 MiB).
 */
#define STAGED 20
#define STAGED_BYTES (12u << 20)
#define STAGED_FIRST (20u << 20)	/* the first: a part goes, then the end */

static void
s3_staged_puts(struct storage *st, const uint8_t *big)
{
	struct storage_put *p[STAGED];
	struct storage_obj *o;
	char name[STAGED][32];
	uint8_t tail[64];
	uint64_t before, after, size, len;
	int i, ok_all = 1;

	before = rss_bytes();
	alarm(300);
	for (i = 0; i < STAGED; i++) {
		snprintf(name[i], sizeof(name[i]), "packs/79/79%02d", i);
		if (storage_put_begin(st, name[i], 0, &p[i]) != 0) {
			ok_all = 0;
			break;
		}
		ok_all &= storage_put_write(p[i], big, i == 0 ? STAGED_FIRST :
		    STAGED_BYTES) == 0 && storage_put_end(p[i]) == 0;
	}
	after = rss_bytes();
	if (!ok(ok_all && i == STAGED, "s3: %d puts of 12 MiB written and "
	    "ended, all open", STAGED)) {
		while (i-- > 0)
			storage_put_abort(p[i]);
		alarm(0);
		return;
	}
	/* Without the end, each holds its last part: 228 MiB here, less
	 * the spare buffers already resident (64 MiB at most). */
	ok(before > 0 && after < before + (80u << 20),
	    "s3: they hold no part buffer each (resident memory grew by %lld "
	    "MiB for %u MiB staged)", ((long long)after - (long long)before) /
	    (1 << 20), (unsigned)((STAGED - 1) * (STAGED_BYTES >> 20) +
	    (STAGED_FIRST >> 20)));
	for (i = 0; i < STAGED; i++)
		ok_all &= storage_stat(st, name[i], &size) == STORAGE_MISSING;
	ok(ok_all, "s3: none there before its commit");
	for (i = 0; i < STAGED; i++)
		ok_all &= storage_put_commit(p[i]) == 0;
	alarm(0);
	for (i = 0; i < STAGED; i++) {
		len = i == 0 ? STAGED_FIRST : STAGED_BYTES;
		ok_all &= storage_open(st, name[i], &o, &size) == 0 &&
		    size == len && storage_read_all(o, size - sizeof(tail),
		    tail, sizeof(tail)) == 0 && memcmp(tail, big + len -
		    sizeof(tail), sizeof(tail)) == 0;
		if (o != NULL)
			storage_obj_close(o);
		ok_all &= storage_delete(st, name[i]) == 0;
	}
	ok(ok_all, "s3: committed, each whole");
}

/* An object over the part size: a multipart upload, read in ranges. */
static void
s3_multipart(struct storage *st)
{
	static uint8_t big[(33 << 20) + 12345], back[sizeof(big)];
	struct storage_obj *o;
	struct storage_put *p;
	uint64_t size;
	size_t off, n;
	int ok_all = 1;

	fill(big, sizeof(big), 11);
	ok(storage_put_begin(st, "packs/77/77big", 0, &p) == 0,
	    "s3: a big put begun");
	for (off = 0; off < sizeof(big); off += n) {
		n = sizeof(big) - off < 1000003 ? sizeof(big) - off : 1000003;
		ok_all &= storage_put_write(p, big + off, n) == 0;
	}
	ok(ok_all && storage_stat(st, "packs/77/77big", &size) ==
	    STORAGE_MISSING, "s3: written in parts, not there before commit");
	ok(storage_put_commit(p) == 0, "s3: committed (3 parts of 16 MiB)");
	ok(storage_open(st, "packs/77/77big", &o, &size) == 0 &&
	    size == sizeof(big), "s3: its size");
	for (off = 0; o != NULL && off < sizeof(big); off += n) {
		n = 3 << 20;
		ok_all &= storage_read(o, off, back + off, n, &n) == 0;
		if (n == 0)
			break;
	}
	ok(ok_all && off == sizeof(big) && memcmp(big, back, sizeof(big)) ==
	    0, "s3: read back in ranges of 3 MiB, the same bytes");
	ok(o != NULL && storage_read_all(o, (16 << 20) - 5, back, 10) == 0 &&
	    memcmp(back, big + (16 << 20) - 5, 10) == 0,
	    "s3: a range across two parts");
	storage_obj_close(o);
	s3_puts_at_once(st, big, sizeof(big));
	s3_staged_puts(st, big);
	ok(storage_put_begin(st, "packs/77/77aborted", 0, &p) == 0 &&
	    storage_put_write(p, big, sizeof(big)) == 0,
	    "s3: another big put, parts uploaded");
	storage_put_abort(p);
	ok(storage_stat(st, "packs/77/77aborted", &size) == STORAGE_MISSING,
	    "s3: aborted, nothing");
	ok(storage_clean(st) == 0, "s3: clean (recent uploads kept)");
}

/* A lease of 3 s held for 7: renewed, so another handle still finds it
 * held; given back, it is free at once. */
static void
s3_renewal(struct storage *st, struct storage *other)
{
	struct storage_lock_opts o = { "renewed", 0, 3, 0 };
	struct storage_lock *l, *l2;
	char holder[64];

	ok(storage_lock(st, "renew", &o, &l, NULL, 0) == 0,
	    "s3: a lease of 3 s taken");
	sleep(7);
	ok(storage_lock(other, "renew", &o, &l2, holder, sizeof(holder)) ==
	    1 && strcmp(holder, "renewed") == 0 && !storage_lock_lost(l),
	    "s3: 7 s later it is still held: renewed");
	storage_unlock(l);
	ok(storage_lock(other, "renew", &o, &l2, NULL, 0) == 0,
	    "s3: given back, another takes it");
	storage_unlock(l2);
}

/*
 * The S3 store, when COFFER_TEST_S3_URL gives an endpoint
 * (http[s]://HOST:PORT) and AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY its
 * credentials (COFFER_CACERT: the CA of an https one): the contract in a
 * bucket of its own, then what only object storage meets.
 */
static void
s3(const char *url)
{
	struct storage_s3_opts o = { getenv("COFFER_CACERT") };
	struct storage *st = NULL, *other = NULL;
	char loc[512], none[512];

	snprintf(loc, sizeof(loc), "s3:%s/coffer-t-%ld-%ld/contract", url,
	    (long)getpid(), (long)time(NULL));
	snprintf(none, sizeof(none), "s3:%s/coffer-none-%ld", url,
	    (long)getpid());
	ok(storage_s3_open(none, &o, 0) == NULL &&
	    failed_with(ENOENT, "NoSuchBucket"),
	    "s3: a bucket that is not there is not opened");
	if (!ok((st = storage_s3_open(loc, &o, STORAGE_CREATE)) != NULL &&
	    (other = storage_s3_open(loc, &o, 0)) != NULL,
	    "s3: create makes the bucket; a second handle opens it")) {
		storage_close(st);
		return;
	}
	ok(strcmp(storage_where(st), loc) == 0, "s3: where is the location");
	contract(st, other, "s3");
	ok(storage_s3_open(loc, &o, STORAGE_CREATE) == NULL &&
	    failed_with(EEXIST, "already holds objects"),
	    "s3: create refuses a prefix that holds objects");
	s3_multipart(st);
	s3_pages(st);
	s3_renewal(st, other);
	storage_close(other);
	storage_close(st);
}

/*
 * The rclone store on loc, under kind: the contract, then what its
 * create refuses.
 */
static void
rclone_contract(const char *kind, const char *loc)
{
	struct storage *st = NULL, *other = NULL;

	if (!ok((st = storage_rclone_open(loc, STORAGE_CREATE)) != NULL &&
	    (other = storage_rclone_open(loc, 0)) != NULL,
	    "%s: create, then a second handle on it", kind)) {
		storage_close(st);
		return;
	}
	ok(strcmp(storage_where(st), loc) == 0, "%s: where is the location",
	    kind);
	contract(st, other, kind);
	ok(storage_rclone_open(loc, STORAGE_CREATE) == NULL &&
	    failed_with(EEXIST, "already holds objects"),
	    "%s: create refuses a location that holds objects", kind);
	storage_close(other);
	storage_close(st);
}

/*
 * rclone, when it is installed: over its local backend (a directory
 * under base), and over its S3 backend pointed at
 * COFFER_TEST_RCLONE_S3_URL (http://HOST:PORT; AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY its credentials), configured by environment
 * alone (a remote named coffertests3).
 */
static void
rclone(void)
{
	char loc[512];
	const char *url = getenv("COFFER_TEST_RCLONE_S3_URL");

	if (system("command -v rclone >/dev/null 2>&1") != 0) {
		skip("rclone: not installed");
		return;
	}
	ok(storage_rclone_open("rclone:coffer-no-such-remote:x", 0) ==
	    NULL && failed_with(EIO, "didn't find section in config"),
	    "rclone: an unknown remote is an error at open");
	ok(storage_rclone_open("rclone:nocolon", 0) == NULL &&
	    failed_with(EINVAL, "rclone:REMOTE:PATH"),
	    "rclone: a location without a remote is refused");
	snprintf(loc, sizeof(loc), "rclone::local:%s/rclone", base);
	rclone_contract("rclone-local", loc);
	if (url == NULL || getenv("AWS_ACCESS_KEY_ID") == NULL)
		return;
	setenv("RCLONE_CONFIG_COFFERTESTS3_TYPE", "s3", 1);
	setenv("RCLONE_CONFIG_COFFERTESTS3_PROVIDER", "Other", 1);
	setenv("RCLONE_CONFIG_COFFERTESTS3_ENDPOINT", url, 1);
	setenv("RCLONE_CONFIG_COFFERTESTS3_ACCESS_KEY_ID",
	    getenv("AWS_ACCESS_KEY_ID"), 1);
	setenv("RCLONE_CONFIG_COFFERTESTS3_SECRET_ACCESS_KEY",
	    getenv("AWS_SECRET_ACCESS_KEY"), 1);
	setenv("RCLONE_CONFIG_COFFERTESTS3_REGION", "us-east-1", 1);
	setenv("RCLONE_CONFIG_COFFERTESTS3_FORCE_PATH_STYLE", "true", 1);
	if (getenv("COFFER_CACERT") != NULL)
		setenv("RCLONE_CA_CERT", getenv("COFFER_CACERT"), 1);
	snprintf(loc, sizeof(loc), "rclone:coffertests3:coffer-r-%ld-%ld/"
	    "contract", (long)getpid(), (long)time(NULL));
	rclone_contract("rclone-s3", loc);
}

int
main(void)
{
	struct storage *st, *other;
	char dir[256];

	log_level = -1;
	/* The child processes of dead_sharer open stores by location. */
	storage_set_cacert(getenv("COFFER_CACERT"));
	snprintf(base, sizeof(base), "/tmp/coffer-t-storage-XXXXXX");
	if (mkdtemp(base) == NULL) {
		perror("mkdtemp");
		return (2);
	}
	if ((st = local_new("contract", dir, sizeof(dir))) != NULL &&
	    (other = storage_local_open(dir, 0)) != NULL) {
		contract(st, other, "local");
		ok(dir_entries(at(dir, "tmp")) == 0,
		    "local: no put left anything in tmp/");
		storage_close(other);
	} else
		ok(0, "local: a store in %s", dir);
	storage_close(st);
	st = storage_mem_new();
	contract(st, st, "mem");
	storage_close(st);
	local_only();
	lock_lines();
	made();
	faults();
	blocks();
	if (getenv("COFFER_TEST_S3_URL") != NULL)
		s3(getenv("COFFER_TEST_S3_URL"));
	rclone();
	storage_close(NULL);
	rm_tree(base);
	return (tap_done());
}
