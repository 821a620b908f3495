/*
 * A repository opened for a command (include/coffer/engine-open.h): the
 * order of the steps is the point.  Nothing read from the repository
 * before the key checks it chooses more than where the catalog is, and
 * the catalog catches up from signed records only.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/engine-open.h"
#include "coffer/engine-catalog.h"
#include "coffer/log.h"
#include "coffer/policy.h"
#include "coffer/repo-keys.h"
#include "coffer/storage.h"
#include "coffer/tuning.h"

/*
 * Whether a step failed because the store could not be reached or read
 * (engine-open.h).  storage_last_error() is this thread's last failure
 * of a store, kept until the next one: a step saw the store fail when it
 * changed during the step.  Its code then tells the connection, the
 * server or the disk failing from an object that is missing, hostile or
 * refused to these credentials, which is the repository's error as much
 * as a wrong key is.  A failure said in the very words of the one before
 * the step goes unseen, and counts as the repository's.
 */
void
engine_store_mark(struct engine_store_mark *m)
{
	const struct storage_error *e = storage_last_error();

	m->code = e->code;
	snprintf(m->msg, sizeof(m->msg), "%s", e->msg);
}

/* Has the store reported a failure since m? */
static int
store_changed(const struct engine_store_mark *m)
{
	const struct storage_error *e = storage_last_error();

	return (e->code != m->code || strcmp(e->msg, m->msg) != 0);
}

int
engine_store_failed(const struct engine_store_mark *m)
{
	const struct storage_error *e = storage_last_error();

	if (!store_changed(m))
		return (0);
	switch (e->code) {
	case EIO:
	case ETIMEDOUT:
	case ECONNREFUSED:
	case ECONNRESET:
	case ECONNABORTED:
	case EHOSTUNREACH:
	case EHOSTDOWN:
	case ENETUNREACH:
	case ENETDOWN:
	case ENETRESET:
	case ENOTCONN:
	case EPIPE:
	case EPROTO:
	case EREMOTEIO:
	case ESTALE:
	case EAGAIN:
	case ENOSPC:
	case EDQUOT:
	case EROFS:
	case ENOMEM:
	case ENOBUFS:
	case EMFILE:
	case ENFILE:
		return (1);
	default:
		return (0);
	}
}

/* A step's failure, after engine_store_mark(m) before it. */
static int
open_failure(const struct engine_store_mark *m)
{
	return (engine_store_failed(m) ? ENGINE_OPEN_STORE : ENGINE_OPEN_REPO);
}

/* Unlock r: the key file, else the passphrase (the last slot first). */
static int
unlock(const struct engine_open_opts *o, struct repo *r, const char *catpath)
{
	char hint[REPO_SLOT_NAME_MAX], *pass = NULL;
	size_t passlen = 0;
	int rc;

	if (o->key_file == NULL) {
		if ((rc = o->passphrase(o->arg, &pass, &passlen)) != 0)
			return (rc);
		catalog_slot_hint_get(catpath, hint, sizeof(hint));
		repo_slot_prefer(r, hint);
	}
	rc = repo_unlock(r, o->key_file, pass, passlen) ? -1 : 0;
	if (pass != NULL)
		o->pass_free(pass, passlen);
	return (rc);
}

int
engine_open(const struct engine_open_opts *o, struct repo **rp,
    struct catalog **cp, int *damaged)
{
	struct engine_store_mark m;
	struct repo *r;
	struct catalog *c = NULL;
	char *catpath = NULL, aside[PATH_MAX + 64];
	int rc = -1, up = 0, guard;

	*rp = NULL;
	if (cp)
		*cp = NULL;
	*damaged = 0;
	/* Each step that may fail is marked first (engine_store_failed). */
	engine_store_mark(&m);
	if ((r = repo_open(o->repo)) == NULL)
		return (open_failure(&m));
	if (o->unlock || o->want_catalog) {
		/* Where the catalog is, by the id coffer.conf claims (only a
		 * hint is read from there before the key checks it). */
		engine_store_mark(&m);
		catpath = engine_catalog_path(r, o->catalog);
		if (catpath == NULL && o->want_catalog) {
			log_error("cannot find a place for the catalog (set "
			    "--catalog or XDG_STATE_HOME)");
			goto err;
		}
		if ((rc = unlock(o, r, catpath)) != 0)
			goto err;
		/* What the key cannot do is refused before it is used. */
		if (o->check != NULL && (rc = o->check(o->check_arg, r)) != 0)
			goto err;
		rc = -1;
	}
	if (o->want_catalog) {
		/* A damaged catalog, or one of another format, is moved
		 * aside and said so there; the sync below rebuilds it. */
		engine_store_mark(&m);
		if ((c = catalog_open_or_reset(catpath, aside,
		    sizeof(aside))) == NULL)
			goto err;
		catalog_slot_hint_set(catpath, repo_unlocked_slot(r));
	}
	free(catpath);
	catpath = NULL;
	if (o->rotate)
		repo_allow_unlisted(r);
	engine_store_mark(&m);
	if (o->write && engine_prepare_write(r, c, o->wait, o->exclusive))
		goto err;
	/*
	 * The repository is the source of truth; the catalog catches up.  A
	 * writer's, under the forget lock shared (doc/design.md, "Deleting
	 * beside writers"): a forget in progress, which may not have seen
	 * this writer's lock, ends first, so that what this catalog holds,
	 * and so what a backup builds on, is never what it is forgetting.
	 * A forget that begins later sees the lock and keeps those bases.
	 */
	engine_store_mark(&m);
	guard = c != NULL && o->write && !o->exclusive;
	if (guard && repo_lock_forget(r, 1, o->forget_wait))
		goto err;
	if (c != NULL)
		up = engine_catalog_update(r, c);
	if (guard)
		repo_unlock_forget(r);
	if (up < 0)
		goto err;
	/* Again with what the records taught a new catalog: a coffer.conf
	 * older than the repository has seen stops a writer. */
	engine_store_mark(&m);
	if (c != NULL && engine_generation_check(r, c, o->write))
		goto err;
	if (o->write)
		engine_journal_catch_up(r, c);
	*damaged = c != NULL && up > 0;
	*rp = r;
	if (cp)
		*cp = c;
	tuning_raise_at("opened");
	return (0);
err:
	if (rc < 0)
		rc = open_failure(&m);
	free(catpath);
	engine_close(r, c);
	return (rc);
}

void
engine_close(struct repo *r, struct catalog *c)
{
	catalog_close(c);
	repo_close(r);
}

void
engine_lock_purpose(const char *command)
{
	repo_lock_purpose(command);
}

void
engine_lock_dataset(const char *name)
{
	repo_lock_dataset(name);
}

int
engine_lock_datasets(const struct policy *p)
{
	char **v = NULL;
	size_t i;

	if (p->ndatasets > 0 && (v = calloc(p->ndatasets, sizeof(*v))) ==
	    NULL) {
		log_error("out of memory");
		return (-1);
	}
	for (i = 0; i < p->ndatasets; i++)
		v[i] = p->datasets[i].name;
	repo_lock_datasets(v, p->ndatasets);
	free(v);
	return (0);
}

int
engine_lock_holders(struct repo *r, struct engine_lock_holder **v,
    size_t *n)
{
	struct repo_lock_who *w = NULL;
	struct engine_lock_holder *e;
	size_t i, nw = 0;

	*v = NULL;
	*n = 0;
	if (repo_lock_list(r, 0, &w, &nw))
		return (-1);
	if ((e = calloc(nw + 1, sizeof(*e))) == NULL) {
		free(w);
		log_error("out of memory");
		return (-1);
	}
	/* A line of another form (an older coffer's) has only its info. */
	for (i = 0; i < nw; i++) {
		snprintf(e[i].info, sizeof(e[i].info), "%s", w[i].info);
		e[i].shared = w[i].shared;
		e[i].expires = w[i].expires;
		snprintf(e[i].host, sizeof(e[i].host), "%s", w[i].host);
		e[i].pid = w[i].pid;
		snprintf(e[i].since, sizeof(e[i].since), "%s", w[i].since);
		snprintf(e[i].command, sizeof(e[i].command), "%s",
		    w[i].command);
		snprintf(e[i].dataset, sizeof(e[i].dataset), "%s",
		    w[i].dataset);
		e[i].listed = w[i].listed;
	}
	free(w);
	*v = e;
	*n = nw;
	return (0);
}

const char *
engine_repo_path(const struct repo *r)
{
	return (repo_path(r));
}

int
engine_init(const char *path, const struct repo_init_opts *o)
{
	struct engine_store_mark m;

	engine_store_mark(&m);
	if (repo_init(path, o) == 0)
		return (0);
	/* The store found the location in use (objects under the prefix,
	 * a coffer.conf put there meanwhile): the user's mistake. */
	return (storage_last_error()->code == EEXIST && store_changed(&m) ?
	    1 : -1);
}

int
engine_repo_is_remote(const char *location)
{
	return (storage_is_remote(location));
}

void
engine_set_cacert(const char *file)
{
	storage_set_cacert(file);
}

char *
engine_secret_new(size_t n)
{
	return ((char *)ccrypto_secret_new(n));
}

void
engine_secret_free(char *p)
{
	ccrypto_secret_free((uint8_t *)p);
}
