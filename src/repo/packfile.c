/*
 * Packs as objects of the store (packs/ab/NAME): named, put, opened,
 * listed, removed.  What is inside a pack is pack.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/log.h"
#include "repo-int.h"

int
repo_clean_tmp(struct repo *r)
{
	return (storage_clean(r->st));
}

char *
repo_pack_path(const struct repo *r, const char *name)
{
	size_t n = strlen(r->path) + strlen(name) + 16;
	char *p;

	if ((p = malloc(n)) == NULL) {
		log_error("out of memory");
		return (NULL);
	}
	snprintf(p, n, "%s/" PACKS_DIR "/%.2s/%s", r->path, name, name);
	return (p);
}

/* A pack's name is 32 lowercase hex digits: never a path. */
static int
pack_name_ok(const char *name)
{
	size_t i;

	for (i = 0; i < PACK_NAME_LEN; i++)
		if (!((name[i] >= '0' && name[i] <= '9') ||
		    (name[i] >= 'a' && name[i] <= 'f')))
			return (0);
	return (name[i] == '\0');
}

int
rp_pack_object(const char *name, char obj[RP_PACK_OBJ_MAX], int quiet)
{
	if (!pack_name_ok(name)) {
		if (!quiet)
			log_error("bad pack name '%s'", name);
		return (-1);
	}
	snprintf(obj, RP_PACK_OBJ_MAX, PACKS_DIR "/%.2s/%s", name, name);
	return (0);
}

int
repo_pack_stage(struct repo *r, const char *name, struct storage_put **p)
{
	char obj[RP_PACK_OBJ_MAX];

	*p = NULL;
	if (rp_pack_object(name, obj, 0))
		return (-1);
	return (storage_put_begin(r->st, obj, 0, p));
}

int
repo_pack_staged(struct storage_put *p)
{
	return (storage_put_end(p));
}

int
repo_pack_commit(struct storage_put *p)
{
	return (storage_put_commit(p));
}

void
repo_pack_abort(struct storage_put *p)
{
	storage_put_abort(p);
}

/* One entry under packs/: kept when it is packs/ab/abNAME. */
static int
pack_found(void *arg, const char *name, uint64_t size)
{
	struct rp_names *nl = arg;
	const char *fan = name + sizeof(PACKS_DIR), *leaf;

	if (strncmp(name, PACKS_DIR "/", sizeof(PACKS_DIR)) != 0 ||
	    (leaf = strchr(fan, '/')) == NULL || leaf - fan != 2 ||
	    !pack_name_ok(leaf + 1) || memcmp(leaf + 1, fan, 2) != 0) {
		/* An empty directory is no pack, nor worth a word. */
		if (size != STORAGE_NOT_OBJECT)
			log_warn("repository '%s': '%s' is not a pack: left "
			    "out", nl->r->path, name);
		return (0);
	}
	/* What is there but is no object (a link, a FIFO, a directory) is
	 * listed: reading it refuses it, naming it. */
	return (rp_names_add(nl, leaf + 1));
}

int
repo_list_packs(const struct repo *r, char ***names, size_t *n)
{
	return (rp_list_names(r, PACKS_DIR, pack_found, names, n));
}

int
repo_pack_remove(const struct repo *r, const char *name)
{
	char obj[RP_PACK_OBJ_MAX];

	if (rp_pack_object(name, obj, 0))
		return (-1);
	return (storage_delete(r->st, obj));
}

int
repo_pack_exists(const struct repo *r, const char *name)
{
	char obj[RP_PACK_OBJ_MAX];

	if (rp_pack_object(name, obj, 0))
		return (-1);
	return (rp_exists(r, obj));
}
