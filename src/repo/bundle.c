/*
 * Bundles (include/coffer/bundle.h, doc/format.md): the pax container
 * through libarchive, and the signed JSON manifest through jansson.
 *
 * libarchive is asked for the tar formats only, with no filter and no
 * conversion to disk: a bundle is data to check, never a tree to extract.
 * A member is accepted by the exact shape of its name (bundle_member_kind),
 * which excludes absolute names, "..", and anything a manifest does not
 * describe; links, devices and directories are refused by type.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <jansson.h>

#include "coffer/bundle.h"
#include "coffer/fsutil.h"
#include "coffer/hex.h"
#include "coffer/log.h"
#include "coffer/pool.h"
#include "coffer/repo.h"
#include "coffer/signals.h"
#include "repo-int.h"

#define IO_BYTES (1u << 20)
#define MEMBER_MAX ((uint64_t)1 << 40)

static const char sig_ctx[] = "coffer-bundle";
static const char *const level_names[] = {
	"full", "differential", "incremental"
};

/* Manifests. */

void
bundle_manifest_release(struct bundle_manifest *m)
{
	size_t i;

	for (i = 0; i < m->nsnapshots; i++)
		free(m->snapshots[i]);
	for (i = 0; i < m->nfiles; i++)
		free(m->files[i].name);
	free(m->snapshots);
	free(m->files);
	m->snapshots = NULL;
	m->files = NULL;
	m->nsnapshots = m->nfiles = 0;
}

int
bundle_manifest_add_file(struct bundle_manifest *m, const char *name,
    uint64_t size, const uint8_t hash[BUNDLE_HASH_BYTES])
{
	struct bundle_file *v;

	if ((v = reallocarray(m->files, m->nfiles + 1, sizeof(*v))) == NULL)
		goto nomem;
	m->files = v;
	v = &m->files[m->nfiles];
	if ((v->name = strdup(name)) == NULL)
		goto nomem;
	v->size = size;
	memcpy(v->hash, hash, BUNDLE_HASH_BYTES);
	m->nfiles++;
	return (0);
nomem:
	log_errno("bundle manifest");
	return (-1);
}

int
bundle_manifest_add_snapshot(struct bundle_manifest *m, const char *sid)
{
	char **v;

	if ((v = reallocarray(m->snapshots, m->nsnapshots + 1,
	    sizeof(*v))) == NULL || (m->snapshots = v,
	    (v[m->nsnapshots] = strdup(sid)) == NULL)) {
		log_errno("bundle manifest");
		return (-1);
	}
	m->nsnapshots++;
	return (0);
}

static json_t *
hex_json(const uint8_t *p, size_t n)
{
	char h[2 * 64 + 1];

	hex_encode(h, p, n);
	return (json_string(h));
}

int
bundle_manifest_encode(const struct bundle_manifest *m, struct buf *out)
{
	json_t *root, *files, *snaps, *f;
	char *text = NULL;
	size_t i;
	int rc = -1;

	if ((root = json_object()) == NULL ||
	    (files = json_array()) == NULL ||
	    json_object_set_new(root, "files", files) ||
	    (snaps = json_array()) == NULL ||
	    json_object_set_new(root, "snapshots", snaps))
		goto out;
	if (json_object_set_new(root, "format", json_integer(m->format)) ||
	    json_object_set_new(root, "repository", hex_json(m->repo_id,
	    sizeof(m->repo_id))) ||
	    json_object_set_new(root, "target", json_string(m->target)) ||
	    json_object_set_new(root, "sequence", json_integer(m->seq)) ||
	    json_object_set_new(root, "level",
	    json_string(level_names[m->level])) ||
	    json_object_set_new(root, "base_sequence",
	    json_integer(m->base_seq)) ||
	    (m->base_seq && json_object_set_new(root, "base_manifest",
	    hex_json(m->base_hash, BUNDLE_HASH_BYTES))) ||
	    json_object_set_new(root, "created_ns",
	    json_integer(m->created_ns)))
		goto out;
	for (i = 0; i < m->nsnapshots; i++)
		if (json_array_append_new(snaps, json_string(m->snapshots[i])))
			goto out;
	for (i = 0; i < m->nfiles; i++) {
		if ((f = json_object()) == NULL ||
		    json_array_append_new(files, f) ||
		    json_object_set_new(f, "name",
		    json_string(m->files[i].name)) ||
		    json_object_set_new(f, "size",
		    json_integer((json_int_t)m->files[i].size)) ||
		    json_object_set_new(f, "blake2b", hex_json(m->files[i].hash,
		    BUNDLE_HASH_BYTES)))
			goto out;
	}
	if ((text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS)) ==
	    NULL || buf_puts(out, text) || buf_puts(out, "\n"))
		goto out;
	rc = 0;
out:
	if (rc)
		log_error("cannot encode the bundle manifest");
	free(text);
	json_decref(root);
	return (rc);
}

static int
get_hex(json_t *o, const char *key, uint8_t *out, size_t n)
{
	const char *s;

	if ((s = json_string_value(json_object_get(o, key))) == NULL ||
	    strlen(s) != 2 * n)
		return (-1);
	return (hex_decode(out, n, s));
}

static int
get_uint(json_t *o, const char *key, uint64_t max, uint64_t *v)
{
	json_t *j = json_object_get(o, key);

	if (!json_is_integer(j) || json_integer_value(j) < 0 ||
	    (uint64_t)json_integer_value(j) > max)
		return (-1);
	*v = (uint64_t)json_integer_value(j);
	return (0);
}

static int
is_hex(const char *s, size_t min, size_t max)
{
	size_t n = strlen(s);

	return (n >= min && n <= max && strspn(s, "0123456789abcdef") == n);
}

enum bundle_member
bundle_member_kind(const char *name)
{
	if (strcmp(name, "coffer.conf") == 0)
		return (BUNDLE_M_CONF);
	if (strcmp(name, BUNDLE_MANIFEST) == 0)
		return (BUNDLE_M_MANIFEST);
	if (strcmp(name, BUNDLE_SIG) == 0)
		return (BUNDLE_M_SIG);
	if (strncmp(name, "keys/", 5) == 0 && is_hex(name + 5, 1, 64))
		return (BUNDLE_M_KEY);
	/* The keyring travels as key material does: a bare machine needs
	 * it for packs of key epochs after 1. */
	if (strcmp(name, "keyring") == 0)
		return (BUNDLE_M_KEY);
	/* packs/ab/abNAME: 32 hex digits under their first two. */
	if (strncmp(name, "packs/", 6) == 0 && strlen(name) == 6 + 3 + 32 &&
	    name[8] == '/' && memcmp(name + 6, name + 9, 2) == 0 &&
	    is_hex(name + 9, 32, 32))
		return (BUNDLE_M_PACK);
	return (BUNDLE_M_BAD);
}

static int
cmp_names(const void *a, const void *b)
{
	return (strcmp(((const struct bundle_file *)a)->name,
	    ((const struct bundle_file *)b)->name));
}

int
bundle_manifest_decode(const void *text, size_t len,
    struct bundle_manifest *m, const char **why)
{
	struct bundle_file *sorted = NULL;
	json_error_t jerr;
	json_t *root, *a, *f;
	const char *s;
	uint64_t v;
	size_t i;
	int conf = 0;

	memset(m, 0, sizeof(*m));
	*why = "is not valid JSON";
	if ((root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr)) ==
	    NULL)
		return (-1);
	*why = "has a bad or missing field";
	if (!json_is_object(root) ||
	    get_uint(root, "format", INT32_MAX, &v))
		goto bad;
	m->format = (int)v;
	if (m->format != BUNDLE_FORMAT) {
		static _Thread_local char msg[80];

		snprintf(msg, sizeof(msg), "has format %d; this coffer reads "
		    "format %d (upgrade coffer)", m->format, BUNDLE_FORMAT);
		*why = msg;
		goto bad;
	}
	if (get_hex(root, "repository", m->repo_id, sizeof(m->repo_id)) ||
	    (s = json_string_value(json_object_get(root, "target"))) == NULL ||
	    strlen(s) == 0 || strlen(s) > BUNDLE_TARGET_MAX ||
	    get_uint(root, "sequence", UINT32_MAX, &v) || v == 0)
		goto bad;
	snprintf(m->target, sizeof(m->target), "%s", s);
	m->seq = (uint32_t)v;
	if ((s = json_string_value(json_object_get(root, "level"))) == NULL)
		goto bad;
	for (m->level = 0; m->level < 3; m->level++)
		if (strcmp(s, level_names[m->level]) == 0)
			break;
	if (m->level == 3 ||
	    get_uint(root, "base_sequence", m->seq - 1, &v) ||
	    ((m->level == 0) != (v == 0)))
		goto bad;
	m->base_seq = (uint32_t)v;
	if (m->base_seq && get_hex(root, "base_manifest", m->base_hash,
	    BUNDLE_HASH_BYTES))
		goto bad;
	if (get_uint(root, "created_ns", INT64_MAX, &v))
		goto bad;
	m->created_ns = (int64_t)v;
	if (!json_is_array(a = json_object_get(root, "snapshots")))
		goto bad;
	json_array_foreach(a, i, f) {
		if ((s = json_string_value(f)) == NULL || !is_hex(s, 32, 32))
			goto bad;
		if (bundle_manifest_add_snapshot(m, s))
			goto nomem;
	}
	if (!json_is_array(a = json_object_get(root, "files")))
		goto bad;
	json_array_foreach(a, i, f) {
		uint8_t h[BUNDLE_HASH_BYTES];

		if (!json_is_object(f) ||
		    (s = json_string_value(json_object_get(f, "name"))) ==
		    NULL || get_uint(f, "size", MEMBER_MAX, &v) ||
		    get_hex(f, "blake2b", h, sizeof(h)))
			goto bad;
		switch (bundle_member_kind(s)) {
		case BUNDLE_M_CONF:
			conf++;
			/* FALLTHROUGH */
		case BUNDLE_M_KEY:
		case BUNDLE_M_PACK:
			break;
		default:
			*why = "lists a file of a bad name";
			goto bad;
		}
		if (bundle_manifest_add_file(m, s, v, h))
			goto nomem;
	}
	if (conf != 1) {
		*why = "does not list coffer.conf once";
		goto bad;
	}
	if ((sorted = malloc(m->nfiles * sizeof(*sorted))) == NULL)
		goto nomem;
	memcpy(sorted, m->files, m->nfiles * sizeof(*sorted));
	qsort(sorted, m->nfiles, sizeof(*sorted), cmp_names);
	for (i = 1; i < m->nfiles; i++)
		if (strcmp(sorted[i - 1].name, sorted[i].name) == 0) {
			*why = "lists a file twice";
			goto bad;
		}
	free(sorted);
	json_decref(root);
	return (0);
nomem:
	*why = "cannot be held in memory";
bad:
	free(sorted);
	json_decref(root);
	bundle_manifest_release(m);
	return (-1);
}

void
bundle_manifest_hash(const void *text, size_t len,
    uint8_t out[BUNDLE_HASH_BYTES])
{
	ccrypto_plain_hash(text, len, out);
}

/* The signed message: a context, so that no other signed object of the
 * repository (a snapshot record) can pass for a manifest. */
static int
signed_msg(struct buf *b, const void *text, size_t len)
{
	return (buf_append(b, sig_ctx, sizeof(sig_ctx)) ||
	    buf_append(b, text, len));
}

void
bundle_manifest_sign(const struct ccrypto_keys *k, const void *text,
    size_t len, uint8_t sig[CCRYPTO_SIG_BYTES])
{
	struct buf b = BUF_INIT;

	if (signed_msg(&b, text, len) == 0)
		ccrypto_sign(k, b.data, b.len, sig);
	else
		memset(sig, 0, CCRYPTO_SIG_BYTES);	/* never verifies */
	buf_release(&b);
}

int
bundle_manifest_verify(const struct ccrypto_keys *k, const void *text,
    size_t len, const uint8_t sig[CCRYPTO_SIG_BYTES])
{
	struct buf b = BUF_INIT;
	int rc = -1;

	if (signed_msg(&b, text, len) == 0)
		rc = ccrypto_verify(k, b.data, b.len, sig);
	buf_release(&b);
	return (rc);
}

/* Writing. */

struct bundle_writer {
	struct archive *a;
	int out;
	const char *what;
	uint64_t size;
	struct ccrypto_plain_state sum;
	uint8_t *io;
	int failed;
	int quiet_pipe;			/* EPIPE: the reader says why */
	/*
	 * Every byte is hashed twice, for its member's hash and for the
	 * bundle's (the sidecar): the member's is taken on a thread of its
	 * own while the bundle's is taken as the bytes are written, so that
	 * an export costs one hash's time, not two.
	 */
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int th_started, th_busy, th_quit;
	struct ccrypto_plain_state *th_state;
	const void *th_p;
	size_t th_n;
};

static void *
hasher_main(void *arg)
{
	struct bundle_writer *w = arg;

	thread_name("hash");
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->th_busy && !w->th_quit)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->th_quit)
			break;
		pthread_mutex_unlock(&w->mu);
		ccrypto_plain_hash_update(w->th_state, w->th_p, w->th_n);
		pthread_mutex_lock(&w->mu);
		w->th_busy = 0;
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	return (NULL);
}

/* Hash p (n bytes) into st: on the hasher thread, or here without one. */
static void
hash_start(struct bundle_writer *w, struct ccrypto_plain_state *st,
    const void *p, size_t n)
{
	if (!w->th_started) {
		ccrypto_plain_hash_update(st, p, n);
		return;
	}
	pthread_mutex_lock(&w->mu);
	w->th_state = st;
	w->th_p = p;
	w->th_n = n;
	w->th_busy = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void
hash_wait(struct bundle_writer *w)
{
	if (!w->th_started)
		return;
	pthread_mutex_lock(&w->mu);
	while (w->th_busy)
		pthread_cond_wait(&w->cv, &w->mu);
	pthread_mutex_unlock(&w->mu);
}

static la_ssize_t
write_cb(struct archive *a, void *arg, const void *p, size_t n)
{
	struct bundle_writer *w = arg;

	/* Said once: libarchive writes again as it closes. */
	if (w->failed)
		return (-1);
	if (fsutil_write_all_quiet(w->out, p, n)) {
		if (errno != EPIPE || !w->quiet_pipe)
			log_errno("write to '%s' failed", w->what);
		w->failed = 1;
		return (-1);
	}
	ccrypto_plain_hash_update(&w->sum, p, n);
	w->size += n;
	return ((la_ssize_t)n);
}

void
bundle_writer_quiet_pipe(struct bundle_writer *w)
{
	w->quiet_pipe = 1;
}

struct bundle_writer *
bundle_writer_new(int out, const char *what)
{
	struct bundle_writer *w;

	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (w->io = malloc(IO_BYTES)) == NULL ||
	    (w->a = archive_write_new()) == NULL) {
		log_errno("cannot start a bundle");
		bundle_writer_free(w);
		return (NULL);
	}
	w->out = out;
	w->what = what;
	ccrypto_plain_hash_init(&w->sum, BUNDLE_SUM_BYTES);
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	/* Without the thread, both hashes are taken here: slower, same. */
	w->th_started = pthread_create(&w->th, NULL, hasher_main, w) == 0;
	if (archive_write_set_format_pax_restricted(w->a) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(w->a, 1) != ARCHIVE_OK ||
	    archive_write_open2(w->a, w, NULL, write_cb, NULL, NULL) !=
	    ARCHIVE_OK) {
		log_error("%s: %s", what, archive_error_string(w->a));
		bundle_writer_free(w);
		return (NULL);
	}
	return (w);
}

/* A member's header: a regular file, mode 0600, owned by nobody in
 * particular, time 0: nothing about the host or the data. */
static int
member_header(struct bundle_writer *w, const char *name, uint64_t size)
{
	struct archive_entry *e;
	int rc;

	if ((e = archive_entry_new()) == NULL) {
		log_errno("%s", w->what);
		return (-1);
	}
	archive_entry_set_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0600);
	archive_entry_set_size(e, (la_int64_t)size);
	archive_entry_set_mtime(e, 0, 0);
	rc = archive_write_header(w->a, e);
	archive_entry_free(e);
	if (rc != ARCHIVE_OK) {
		if (!w->failed)
			log_error("%s: %s", w->what,
			    archive_error_string(w->a));
		return (-1);
	}
	return (0);
}

static int
member_data(struct bundle_writer *w, const void *p, size_t n)
{
	if (archive_write_data(w->a, p, n) != (la_ssize_t)n) {
		if (!w->failed)
			log_error("%s: %s", w->what,
			    archive_error_string(w->a));
		return (-1);
	}
	return (0);
}

int
bundle_writer_add_pack(struct bundle_writer *w, struct repo *r,
    const char *pack, uint64_t *size, uint8_t hash[BUNDLE_HASH_BYTES])
{
	struct ccrypto_plain_state h;
	char obj[RP_PACK_OBJ_MAX];
	struct storage_obj *o;
	uint64_t done;
	size_t want;
	int rc;

	if (rp_pack_object(pack, obj, 0) ||
	    (rc = storage_open(r->st, obj, &o, size)) < 0)
		return (-1);
	if (rc == STORAGE_MISSING) {
		log_error("repository '%s': pack '%s' is missing", r->path,
		    pack);
		return (-1);
	}
	/* The member is the object's name: packs/ab/NAME. */
	if ((rc = member_header(w, obj, *size)) != 0)
		goto out;
	ccrypto_plain_hash_init(&h, BUNDLE_HASH_BYTES);
	for (done = 0; done < *size; done += want) {
		want = *size - done < IO_BYTES ? (size_t)(*size - done) :
		    IO_BYTES;
		/* A pack shorter than it was is "truncated". */
		if ((rc = storage_read_all(o, done, w->io, want)) != 0)
			goto out;
		/* Both read w->io, which neither changes. */
		hash_start(w, &h, w->io, want);
		rc = member_data(w, w->io, want);
		hash_wait(w);
		if (rc)
			goto out;
	}
	ccrypto_plain_hash_final(&h, hash);
out:
	storage_obj_close(o);
	return (rc ? -1 : 0);
}

int
bundle_writer_add_mem(struct bundle_writer *w, const char *name,
    const void *p, size_t n, uint8_t hash[BUNDLE_HASH_BYTES])
{
	if (hash)
		ccrypto_plain_hash(p, n, hash);
	return (member_header(w, name, n) || member_data(w, p, n));
}

int
bundle_writer_finish(struct bundle_writer *w, uint8_t sum[BUNDLE_SUM_BYTES],
    uint64_t *size)
{
	if (archive_write_close(w->a) != ARCHIVE_OK) {
		if (!w->failed)
			log_error("%s: %s", w->what,
			    archive_error_string(w->a));
		return (-1);
	}
	ccrypto_plain_hash_final(&w->sum, sum);
	*size = w->size;
	return (0);
}

void
bundle_writer_free(struct bundle_writer *w)
{
	if (w == NULL)
		return;
	if (w->th_started) {
		pthread_mutex_lock(&w->mu);
		w->th_quit = 1;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		pthread_join(w->th, NULL);
	}
	if (w->a) {
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		archive_write_free(w->a);
	}
	free(w->io);
	free(w);
}

/* Reading. */

struct bundle_reader {
	struct archive *a;
	int in;
	const char *what;
	uint64_t offset;
	uint8_t *io;			/* what read_cb hands libarchive */
	uint64_t size;			/* of the current member */
	int eof_error;			/* the stream failed, not the format */
};

static la_ssize_t
read_cb(struct archive *a, void *arg, const void **p)
{
	struct bundle_reader *r = arg;
	ssize_t n;

	/* A signal stops a reader that waits on a pipe (rclone's, whose
	 * rclone signals_child stops too). */
	do
		n = read(r->in, r->io, IO_BYTES);
	while (n < 0 && errno == EINTR && !signals_caught());
	if (n < 0) {
		archive_set_error(a, errno, "read error: %s", strerror(errno));
		r->eof_error = 1;
		return (-1);
	}
	r->offset += (uint64_t)n;
	*p = r->io;
	return (n);
}

struct bundle_reader *
bundle_reader_new(int in, const char *what)
{
	struct bundle_reader *r;

	if ((r = calloc(1, sizeof(*r))) == NULL ||
	    (r->io = malloc(IO_BYTES)) == NULL ||
	    (r->a = archive_read_new()) == NULL) {
		log_errno("cannot read a bundle");
		bundle_reader_free(r);
		return (NULL);
	}
	r->in = in;
	r->what = what;
	if (archive_read_support_format_tar(r->a) != ARCHIVE_OK ||
	    archive_read_open2(r->a, r, NULL, read_cb, NULL, NULL) !=
	    ARCHIVE_OK) {
		log_error("%s: not a bundle: %s", what,
		    archive_error_string(r->a));
		bundle_reader_free(r);
		return (NULL);
	}
	return (r);
}

int
bundle_reader_next(struct bundle_reader *r, const char **name,
    enum bundle_member *kind, uint64_t *size)
{
	struct archive_entry *e;
	const char *n;
	int rc;

	rc = archive_read_next_header(r->a, &e);
	if (rc == ARCHIVE_EOF)
		return (0);
	if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
		log_error("%s: not a bundle, or cut short: %s", r->what,
		    archive_error_string(r->a));
		return (-1);
	}
	if ((n = archive_entry_pathname(e)) == NULL) {
		log_error("%s: a member without a name", r->what);
		return (-1);
	}
	if ((*kind = bundle_member_kind(n)) == BUNDLE_M_BAD) {
		log_error("%s: refused member '%s' (not a name a bundle "
		    "holds)", r->what, n);
		return (-1);
	}
	if (archive_entry_filetype(e) != AE_IFREG ||
	    archive_entry_hardlink(e) != NULL ||
	    archive_entry_symlink(e) != NULL) {
		log_error("%s: refused member '%s' (not a regular file)",
		    r->what, n);
		return (-1);
	}
	if (!archive_entry_size_is_set(e) || archive_entry_size(e) < 0 ||
	    (uint64_t)archive_entry_size(e) > MEMBER_MAX) {
		log_error("%s: member '%s' has no valid size", r->what, n);
		return (-1);
	}
	/* Refused from its header, before it is staged: the cost of a
	 * hostile bundle stays with the bytes it sends. */
	if (*kind == BUNDLE_M_PACK &&
	    (uint64_t)archive_entry_size(e) < PACK_MIN_BYTES) {
		log_error("%s: member '%s' is too small to be a pack (%lld "
		    "bytes)", r->what, n, (long long)archive_entry_size(e));
		return (-1);
	}
	*name = n;
	*size = r->size = (uint64_t)archive_entry_size(e);
	return (1);
}

/*
 * Read the current member to its end (libarchive's blocks, no copy),
 * hashing it, into fd and/or out.  A member with holes (a sparse entry)
 * is not one a bundle holds.
 */
static int
member_read(struct bundle_reader *r, struct storage_put *to, struct buf *out,
    size_t max,
    uint8_t hash[BUNDLE_HASH_BYTES])
{
	struct ccrypto_plain_state h;
	const void *p;
	uint64_t done = 0;
	la_int64_t off;
	size_t n;
	int rc;

	ccrypto_plain_hash_init(&h, BUNDLE_HASH_BYTES);
	while ((rc = archive_read_data_block(r->a, &p, &n, &off)) ==
	    ARCHIVE_OK) {
		if (off < 0 || (uint64_t)off != done) {
			log_error("%s: a member with holes", r->what);
			return (-1);
		}
		done += n;
		if (done > r->size || (out && (done > max ||
		    buf_append(out, p, n)))) {
			log_error("%s: a member is too large", r->what);
			return (-1);
		}
		ccrypto_plain_hash_update(&h, p, n);
		if (to != NULL && storage_put_write(to, p, n))
			return (-1);
	}
	if (rc != ARCHIVE_EOF) {
		log_error("%s: cut short or damaged: %s", r->what,
		    archive_error_string(r->a));
		return (-1);
	}
	if (done != r->size) {
		log_error("%s: cut short (a member has %llu of %llu bytes)",
		    r->what, (unsigned long long)done,
		    (unsigned long long)r->size);
		return (-1);
	}
	if (hash)
		ccrypto_plain_hash_final(&h, hash);
	return (0);
}

int
bundle_reader_copy(struct bundle_reader *r, struct storage_put *to,
    uint8_t hash[BUNDLE_HASH_BYTES])
{
	return (member_read(r, to, NULL, 0, hash));
}

int
bundle_reader_read(struct bundle_reader *r, struct buf *out, size_t max)
{
	buf_reset(out);
	return (member_read(r, NULL, out, max, NULL));
}

uint64_t
bundle_reader_offset(const struct bundle_reader *r)
{
	return (r->offset);
}

void
bundle_reader_free(struct bundle_reader *r)
{
	if (r == NULL)
		return;
	if (r->a)
		archive_read_free(r->a);
	free(r->io);
	free(r);
}
