/*
 * Import: bundles back into a repository (include/coffer/bundle.h).
 *
 * A bundle is hostile until it checked out whole.  Its packs are staged
 * in tmp/ as they stream in (a pipe cannot be read twice), each hashed;
 * at its end the manifest's signature is checked with the repository's
 * key (the one the user unlocked, never one the bundle brings), then that
 * it belongs to this repository, that every member is one the manifest
 * lists with its size and hash and every listed one came, and that the
 * bundle has its place in the target's chain: not one imported before
 * under the same number, not older than one imported, and building on
 * one that was imported.  Only then are its packs renamed into packs/,
 * and the import recorded.  Whatever failed, the staged files go and the
 * repository is as it was.
 *
 * With --init, the first bundle's coffer.conf and key slots make the
 * repository (they come before any pack); the user's key must open it,
 * which also authenticates coffer.conf (its MAC), and the rest proceeds
 * as above.  A first bundle that fails leaves nothing behind.
 *
 * Packs the repository already holds are read and checked but not
 * staged.  Last, the catalog is brought up to date (engine_sync) as after
 * any change to packs/: it is the same code that rebuilds it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "coffer/bundle.h"
#include "coffer/catalog-history.h"
#include "coffer/engine-offsite.h"
#include "coffer/engine.h"
#include "coffer/hex.h"
#include "coffer/hmap.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "coffer/remote.h"
#include "coffer/repo-keys.h"
#include "coffer/signals.h"
#include "engine-int.h"

#define MANIFEST_MAX (64u << 20)

/* A member as it came. */
struct member {
	char name[48];
	uint64_t size;
	uint8_t hash[BUNDLE_HASH_BYTES];
	struct storage_put *staged;	/* the pack's put, until committed */
};

struct import {
	struct repo **r;
	struct catalog **c;
	const struct import_opts *o;
	struct import_result *res;
	int created;			/* this run made the repository */
	enum engine_result init_st;	/* why it could not, when it
					 * was not the bundle (else OK) */
	/* The bundle being read. */
	const char *what;
	struct member *mem;
	size_t nmem, capmem;
	struct hmap seen;		/* pack id -> 1 */
	struct repo_file meta[2 + BUNDLE_SLOTS_MAX];	/* conf, slots, keyring */
	size_t nmeta;
	struct buf manifest;
	uint8_t sig[CCRYPTO_SIG_BYTES];
	int have_manifest, have_sig;
	struct progress progress;
};

static void
bundle_reset(struct import *x)
{
	size_t i;

	/* What is not committed is aborted: no pack of it stays. */
	for (i = 0; i < x->nmem; i++) {
		repo_pack_abort(x->mem[i].staged);
		x->mem[i].staged = NULL;
	}
	x->nmem = 0;
	hmap_clear(&x->seen);
	for (i = 0; i < x->nmeta; i++) {
		explicit_bzero(x->meta[i].data, x->meta[i].len);
		free(x->meta[i].data);
	}
	memset(x->meta, 0, sizeof(x->meta));
	x->nmeta = 0;
	buf_reset(&x->manifest);
	x->have_manifest = x->have_sig = 0;
}

static struct member *
member_new(struct import *x, const char *name, uint64_t size)
{
	struct member *m;

	if (array_grow(&x->mem, &x->capmem, x->nmem, sizeof(*x->mem), 64)) {
		log_errno("out of memory");
		return (NULL);
	}
	m = &x->mem[x->nmem++];
	memset(m, 0, sizeof(*m));
	snprintf(m->name, sizeof(m->name), "%s", name);
	m->size = size;
	return (m);
}

/* coffer.conf or a key slot: kept in memory (a bare machine's repository
 * is made of them), each once, all before any pack. */
static int
read_meta(struct import *x, struct bundle_reader *br, const char *name,
    uint64_t size)
{
	struct repo_file *f;
	struct member *m;
	struct buf b = BUF_INIT;
	size_t i;

	for (i = 0; i < x->nmeta; i++)
		if (strcmp(x->meta[i].name, name) == 0) {
			log_error("%s: member '%s' appears twice", x->what,
			    name);
			return (-1);
		}
	if (x->nmem > x->nmeta || x->nmeta == 2 + BUNDLE_SLOTS_MAX ||
	    size > BUNDLE_META_MAX) {
		log_error("%s: member '%s' out of place or too large",
		    x->what, name);
		return (-1);
	}
	if (bundle_reader_read(br, &b, BUNDLE_META_MAX) ||
	    (m = member_new(x, name, size)) == NULL) {
		buf_release(&b);
		return (-1);
	}
	ccrypto_plain_hash(b.data, b.len, m->hash);
	f = &x->meta[x->nmeta++];
	snprintf(f->name, sizeof(f->name), "%s", name);
	f->data = b.data;		/* the buffer is handed over */
	f->len = b.len;
	return (0);
}

/* The repository, made from the bundle's coffer.conf and slots (init). */
static int
make_repo(struct import *x)
{
	if (*x->r != NULL)
		return (0);
	if (x->nmeta == 0 || strcmp(x->meta[0].name, "coffer.conf") != 0) {
		log_error("%s: does not begin with coffer.conf: cannot make "
		    "a repository of it", x->what);
		return (-1);
	}
	if (repo_init_from(x->o->init_path, x->meta, x->nmeta)) {
		x->init_st = ENGINE_ERROR;
		return (-1);
	}
	x->created = 1;
	if (x->o->open_new(x->o->arg, x->o->init_path, x->r, x->c)) {
		x->init_st = ENGINE_ERROR;
		return (-1);
	}
	if (engine_need_read(*x->r, "import")) {
		x->init_st = ENGINE_REFUSED;
		return (-1);
	}
	return (0);
}

static int
read_pack(struct import *x, struct bundle_reader *br, const char *name,
    uint64_t size)
{
	struct member *m;
	uint8_t id[16];
	const char *pack = name + 9;
	int64_t one;
	int have;

	if (x->have_manifest || x->have_sig) {
		log_error("%s: member '%s' after the manifest", x->what, name);
		return (-1);
	}
	if (make_repo(x))
		return (-1);
	if (hex_decode(id, sizeof(id), pack) || hmap_get(&x->seen, id,
	    &one)) {
		log_error("%s: member '%s' appears twice", x->what, name);
		return (-1);
	}
	if (hmap_put(&x->seen, id, 1) || (m = member_new(x, name, size)) ==
	    NULL || (have = repo_pack_exists(*x->r, pack)) < 0)
		return (-1);
	/* Staged as an open put, committed once the bundle checks; sent
	 * meanwhile, so that a bundle of many packs is not held in memory
	 * on object storage. */
	if (!have && repo_pack_stage(*x->r, pack, &m->staged))
		return (-1);
	if (bundle_reader_copy(br, m->staged, m->hash) ||
	    (m->staged != NULL && repo_pack_staged(m->staged)))
		return (-1);
	x->res->bytes += size;
	return (0);
}

/* Read the whole bundle: staged packs, meta files, manifest, signature. */
static int
read_bundle(struct import *x, struct bundle_reader *br)
{
	enum bundle_member kind;
	const char *name;
	uint64_t size;
	struct buf b = BUF_INIT;
	int rc;

	while ((rc = bundle_reader_next(br, &name, &kind, &size)) == 1) {
		if (signals_caught())
			return (-1);
		if (x->have_sig) {
			log_error("%s: member '%s' after the signature",
			    x->what, name);
			return (-1);
		}
		switch (kind) {
		case BUNDLE_M_CONF:
		case BUNDLE_M_KEY:
			if (read_meta(x, br, name, size))
				return (-1);
			break;
		case BUNDLE_M_PACK:
			if (read_pack(x, br, name, size))
				return (-1);
			progress_update(&x->progress, x->res->packs,
			    x->res->bytes);
			break;
		case BUNDLE_M_MANIFEST:
			if (x->have_manifest || bundle_reader_read(br,
			    &x->manifest, MANIFEST_MAX))
				goto twice;
			x->have_manifest = 1;
			break;
		case BUNDLE_M_SIG:
			if (!x->have_manifest || bundle_reader_read(br, &b,
			    sizeof(x->sig)) || b.len != sizeof(x->sig)) {
				buf_release(&b);
				log_error("%s: a bad or misplaced signature",
				    x->what);
				return (-1);
			}
			memcpy(x->sig, b.data, sizeof(x->sig));
			buf_release(&b);
			x->have_sig = 1;
			break;
		default:
			return (-1);
		}
	}
	if (rc < 0)
		return (-1);
	if (!x->have_sig) {
		log_error("%s: no signed manifest (cut short?)", x->what);
		return (-1);
	}
	return (0);
twice:
	log_error("%s: a second or unreadable manifest", x->what);
	return (-1);
}

static int
cmp_member(const void *a, const void *b)
{
	return (strcmp(((const struct member *)a)->name,
	    ((const struct member *)b)->name));
}

/* Every member listed, as listed; every listed file came.  0 or -1. */
static int
check_files(struct import *x, const struct bundle_manifest *m)
{
	struct member key, *got;
	size_t i;

	if (x->nmem > 1)
		qsort(x->mem, x->nmem, sizeof(*x->mem), cmp_member);
	for (i = 0; i < m->nfiles; i++) {
		snprintf(key.name, sizeof(key.name), "%s", m->files[i].name);
		got = bsearch(&key, x->mem, x->nmem, sizeof(*x->mem),
		    cmp_member);
		if (got == NULL) {
			log_error("%s: '%s' is in the manifest, not in the "
			    "bundle", x->what, m->files[i].name);
			return (-1);
		}
		if (got->size != m->files[i].size || memcmp(got->hash,
		    m->files[i].hash, BUNDLE_HASH_BYTES) != 0) {
			log_error("%s: '%s' is damaged (its size or hash is "
			    "not the manifest's)", x->what, got->name);
			return (-1);
		}
	}
	if (x->nmem != m->nfiles) {
		for (i = 0; i < x->nmem; i++) {
			size_t j;

			for (j = 0; j < m->nfiles; j++)
				if (strcmp(m->files[j].name,
				    x->mem[i].name) == 0)
					break;
			if (j == m->nfiles) {
				log_error("%s: member '%s' is not in the "
				    "manifest", x->what, x->mem[i].name);
				return (-1);
			}
		}
		log_error("%s: members and manifest differ", x->what);
		return (-1);
	}
	return (0);
}

/*
 * The bundle's place in its target's chain, against what was imported:
 * 1 new and in place, 0 imported before (the same bundle), -1 refused
 * (reported) or error.
 */
static int
check_chain(struct import *x, const struct bundle_manifest *m,
    const uint8_t hash[BUNDLE_HASH_BYTES])
{
	struct catalog_bundle b;
	int found, rc = -1;

	memset(&b, 0, sizeof(b));
	if ((found = catalog_bundle_get(*x->c, 0, m->target, m->seq, &b)) < 0)
		return (-1);
	if (found) {
		if (memcmp(b.manifest, hash, BUNDLE_HASH_BYTES) == 0)
			rc = 0;
		else
			log_error("%s: bundle %u of target '%s' was imported "
			    "before with other contents: refused", x->what,
			    m->seq, m->target);
		goto out;
	}
	catalog_bundle_release(&b);
	if ((found = catalog_bundle_last(*x->c, 0, m->target, 0, &b)) < 0)
		goto out;
	if (found && b.seq > m->seq) {
		log_error("%s: bundle %u of target '%s' is older than bundle "
		    "%u imported already: refused (a replay?)", x->what,
		    m->seq, m->target, b.seq);
		goto out;
	}
	catalog_bundle_release(&b);
	if (m->level != LEVEL_FULL) {
		if ((found = catalog_bundle_get(*x->c, 0, m->target,
		    m->base_seq, &b)) < 0)
			goto out;
		if (!found || memcmp(b.manifest, m->base_hash,
		    BUNDLE_HASH_BYTES) != 0) {
			log_error("%s: bundle %u of target '%s' builds on "
			    "bundle %u, which was not imported: import "
			    "%s-%04u%s first", x->what, m->seq, m->target,
			    m->base_seq, m->target, m->base_seq,
			    BUNDLE_SUFFIX);
			goto out;
		}
	}
	rc = 1;
out:
	catalog_bundle_release(&b);
	return (rc);
}

/*
 * One bundle, from what s reads.  ENGINE_OK (imported or imported
 * before), ENGINE_DAMAGED (not a good bundle), ENGINE_REFUSED (not this
 * repository's, or out of its chain), ENGINE_ERROR.
 */
static enum engine_result
import_one(struct import *x, struct remote_stream *s, const char *name)
{
	struct bundle_reader *br;
	struct bundle_manifest m;
	uint8_t hash[BUNDLE_HASH_BYTES];
	const char *why;
	enum engine_result st = ENGINE_DAMAGED;
	struct storage_put *p;
	size_t i, published = 0;
	int rc;

	memset(&m, 0, sizeof(m));
	x->what = name;
	if ((br = bundle_reader_new(s->fd, name)) == NULL)
		return (ENGINE_DAMAGED);
	if (read_bundle(x, br) || make_repo(x)) {
		if (signals_caught())
			st = ENGINE_INTERRUPTED;
		else if (x->init_st != ENGINE_OK)
			st = x->init_st;
		goto out;
	}
	if (bundle_manifest_verify(repo_keys(*x->r), x->manifest.data,
	    x->manifest.len, x->sig)) {
		log_error("%s: the manifest's signature is not this "
		    "repository's key's: refused", name);
		goto out;
	}
	if (bundle_manifest_decode(x->manifest.data, x->manifest.len, &m,
	    &why)) {
		log_error("%s: the manifest %s", name, why);
		goto out;
	}
	if (memcmp(m.repo_id, repo_id(*x->r), sizeof(m.repo_id)) != 0) {
		log_error("%s: a bundle of another repository: refused", name);
		st = ENGINE_REFUSED;
		goto out;
	}
	if (check_files(x, &m))
		goto out;
	bundle_manifest_hash(x->manifest.data, x->manifest.len, hash);
	if ((rc = check_chain(x, &m, hash)) < 0) {
		st = ENGINE_REFUSED;
		goto out;
	}
	if (rc == 0) {
		log_info("%s: imported before; skipped", name);
		x->res->skipped++;
		st = ENGINE_OK;
		goto out;
	}
	st = ENGINE_ERROR;
	/* Its packs may be sealed to a key epoch newer than ours. */
	if (repo_adopt_epochs(*x->r, x->meta, x->nmeta))
		goto out;
	for (i = 0; i < x->nmem; i++) {
		if (x->mem[i].staged == NULL)
			continue;
		p = x->mem[i].staged;
		x->mem[i].staged = NULL;
		if (repo_pack_commit(p))
			goto out;
		x->res->packs++;
		published++;
	}
	if (engine_bundle_record(*x->c, &m, 0, hash, name,
	    bundle_reader_offset(br), NULL, 0, (int64_t)published))
		goto out;
	x->res->bundles++;
	st = ENGINE_OK;
out:
	bundle_manifest_release(&m);
	bundle_reader_free(br);
	if (*x->r != NULL)
		bundle_reset(x);
	return (st);
}

static enum engine_result
import_name(struct import *x, const struct remote *t, const char *name)
{
	struct remote_stream s;
	enum engine_result st;

	if (remote_get_begin(t, name, &s))
		return (ENGINE_ERROR);
	st = import_one(x, &s, name);
	/* A pipe's writer may still be writing: let it see the end. */
	if (remote_get_end(&s) && st == ENGINE_OK)
		st = ENGINE_ERROR;
	return (st);
}

/*
 * Each pack of a bundle is an open put until the bundle checks (one
 * descriptor each on the local store): as many as this process may have.
 */
static void
files_max(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &rl);
	}
}

enum engine_result
engine_import(struct repo **r, struct catalog **c,
    const struct import_opts *o, struct import_result *res)
{
	struct import x;
	struct remote t;
	char **names = NULL;
	size_t i, n = 0;
	double t0 = now_monotonic();
	enum engine_result st = ENGINE_ERROR;

	memset(res, 0, sizeof(*res));
	if (*r != NULL && engine_need_read(*r, "import"))
		return (ENGINE_REFUSED);
	memset(&x, 0, sizeof(x));
	x.r = r;
	x.c = c;
	x.o = o;
	x.res = res;
	hmap_init(&x.seen, 16);
	files_max();
	if (remote_parse(o->from, &t))
		return (ENGINE_REFUSED);
	progress_init(&x.progress, "import", 0);
	if (t.kind == REMOTE_PIPE)
		st = import_name(&x, &t, "standard input");
	else if (remote_list(&t, &names, &n) == 0) {
		if (n == 0) {
			log_error("'%s' holds no bundle (*%s)", o->from,
			    BUNDLE_SUFFIX);
			st = ENGINE_REFUSED;
		} else
			st = ENGINE_OK;
		for (i = 0; i < n && st == ENGINE_OK; i++)
			st = import_name(&x, &t, names[i]);
	}
	progress_done(&x.progress);
	if (*r != NULL && x.created && res->bundles == 0) {
		/* The first bundle of an init failed: nothing stays. */
		catalog_close(*c);
		repo_close(*r);
		*c = NULL;
		*r = NULL;
		if (repo_remove_made(o->init_path))
			log_warn("could not remove '%s'", o->init_path);
	} else if (*r == NULL && x.created) {
		if (repo_remove_made(o->init_path))
			log_warn("could not remove '%s'", o->init_path);
	}
	if (*r != NULL && *c != NULL && (res->bundles > 0 ||
	    res->skipped > 0) && engine_sync(*r, *c, &res->sync))
		st = ENGINE_ERROR;
	/* Packs or records the catalog had to leave out (reported) are
	 * damage, as catalog rebuild says. */
	else if (st == ENGINE_OK && (res->sync.packs_bad > 0 ||
	    res->sync.records_bad > 0))
		st = ENGINE_DAMAGED;
	/* Which bundles were imported outlives this catalog. */
	if (*r != NULL && *c != NULL && res->bundles > 0 &&
	    engine_journal_flush(*r, *c))
		log_warn("the journal could not be written to the repository; "
		    "the next run tries again");
	res->seconds = now_monotonic() - t0;
	if (*r != NULL)
		bundle_reset(&x);
	else
		for (i = 0; i < x.nmeta; i++)
			free(x.meta[i].data);
	free(x.mem);
	hmap_release(&x.seen);
	buf_release(&x.manifest);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	remote_release(&t);
	return (st);
}
