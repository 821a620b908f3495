/*
 * Pack files in packs/ab/ and tmp/: opened, created, published, listed,
 * removed, by name.  What is inside a pack is pack.c's.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/log.h"
#include "repo-int.h"

int
repo_clean_tmp(struct repo *r)
{
	struct dirent *de;
	struct stat st;
	int rc = 0;
	DIR *d;

	if ((d = rp_store_dir(r, DIR_TMP)) == NULL)
		return (-1);
	while ((de = readdir(d)) != NULL) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		/* unlinkat removes a link itself, never what it names; a
		 * directory is not coffer's and is left alone. */
		if (fstatat(r->dirs[DIR_TMP], de->d_name, &st,
		    AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)) {
			log_warn("repository '%s': 'tmp/%s' is a directory, "
			    "not a leftover of coffer's: left alone", r->path,
			    de->d_name);
			continue;
		}
		if (unlinkat(r->dirs[DIR_TMP], de->d_name, 0) &&
		    errno != ENOENT) {
			log_errno("repository '%s': cannot remove leftover "
			    "'tmp/%s'", r->path, de->d_name);
			rc = -1;
		} else
			log_info("removed leftover 'tmp/%s'", de->d_name);
	}
	closedir(d);
	return (rc);
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
	snprintf(p, n, "%s/packs/%.2s/%s", r->path, name, name);
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

/*
 * The fan-out directory of pack name ("ab") and its path for messages
 * ("packs/ab"); a name that is not a pack's is refused (reported unless
 * quiet, errno EINVAL).  0 or -1.
 */
static int
fan_of(const char *name, char fan[3], char rel[PACK_NAME_LEN + 16],
    int quiet)
{
	if (!pack_name_ok(name)) {
		if (!quiet)
			log_error("bad pack name '%s'", name);
		errno = EINVAL;
		return (-1);
	}
	memcpy(fan, name, 2);
	fan[2] = '\0';
	snprintf(rel, PACK_NAME_LEN + 16, "packs/%s", fan);
	return (0);
}

/*
 * After a change in fan-out directory dfd (rel for messages): fsync it
 * when ok, and close it.  0, or -1 when not ok or the fsync failed
 * (reported).
 */
static int
fan_done(const struct repo *r, int dfd, const char *rel, int ok)
{
	if (ok && fsync(dfd)) {
		log_errno("repository '%s': fsync of '%s' failed", r->path,
		    rel);
		ok = 0;
	}
	close(dfd);
	return (ok ? 0 : -1);
}

/*
 * packs/ab/NAME opened with flags (O_RDONLY or O_RDWR), through no link;
 * its path for messages into rel.  -1 with errno (reported unless quiet).
 */
static int
pack_open_flags(const struct repo *r, const char *name, int flags, int quiet,
    char rel[PACK_NAME_LEN + 16])
{
	char fan[3];
	int dfd, fd, e;

	if (fan_of(name, fan, rel, quiet))
		return (-1);
	if ((dfd = rp_open_in(r, r->dirs[DIR_PACKS], fan, rel, O_RDONLY,
	    S_IFDIR, quiet)) == -1)
		return (-1);
	snprintf(rel, PACK_NAME_LEN + 16, "packs/%s/%s", fan, name);
	fd = rp_open_in(r, dfd, name, rel, flags, S_IFREG, quiet);
	e = errno;
	close(dfd);
	errno = e;
	return (fd);
}

int
repo_pack_open(const struct repo *r, const char *name, int quiet)
{
	char rel[PACK_NAME_LEN + 16];

	return (pack_open_flags(r, name, O_RDONLY, quiet, rel));
}

int
repo_tmp_create(const struct repo *r, const char *name)
{
	int fd;

	/* O_EXCL: whatever already has the name, a link included, stays. */
	if ((fd = openat(r->dirs[DIR_TMP], name, O_WRONLY | O_CREAT | O_EXCL |
	    O_NOFOLLOW | O_CLOEXEC, 0600)) == -1)
		log_errno("repository '%s': cannot create 'tmp/%s'", r->path,
		    name);
	return (fd);
}

void
repo_tmp_remove(const struct repo *r, const char *name)
{
	unlinkat(r->dirs[DIR_TMP], name, 0);
}

/*
 * Durability order (doc/design.md): the caller fsynced the pack in tmp/; it
 * is renamed into packs/ab/ (made, and packs/ fsynced, when new) and the
 * directory fsynced.  Only then may the catalog reference it.
 */
int
repo_pack_publish(const struct repo *r, const char *name)
{
	char fan[3], rel[PACK_NAME_LEN + 16];
	int dfd;

	if (fan_of(name, fan, rel, 0))
		return (-1);
	if (mkdirat(r->dirs[DIR_PACKS], fan, 0700) == 0) {
		if (fsync(r->dirs[DIR_PACKS])) {
			log_errno("repository '%s': fsync of 'packs' failed",
			    r->path);
			return (-1);
		}
	} else if (errno != EEXIST) {
		log_errno("repository '%s': cannot create '%s'", r->path, rel);
		return (-1);
	}
	if ((dfd = rp_open_in(r, r->dirs[DIR_PACKS], fan, rel, O_RDONLY,
	    S_IFDIR, 0)) == -1)
		return (-1);
	if (renameat(r->dirs[DIR_TMP], name, dfd, name)) {
		log_errno("repository '%s': cannot move 'tmp/%s' to '%s/%s'",
		    r->path, name, rel, name);
		return (fan_done(r, dfd, rel, 0));
	}
	return (fan_done(r, dfd, rel, 1));
}

/* Append the packs of fan-out directory fan (open as dfd) to *v. */
static int
list_fan(const struct repo *r, int dfd, const char *fan, char ***v,
    size_t *n, size_t *cap)
{
	struct dirent *de;
	char **nv;
	DIR *d;

	if ((d = fdopendir(dfd)) == NULL) {
		log_errno("repository '%s': cannot read 'packs/%s'", r->path,
		    fan);
		close(dfd);
		return (-1);
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (!pack_name_ok(de->d_name) || memcmp(de->d_name, fan, 2)) {
			log_warn("repository '%s': 'packs/%s/%s' is not a pack "
			    "name: left out", r->path, fan, de->d_name);
			continue;
		}
		if (*n == *cap) {
			*cap = *cap ? 2 * *cap : 256;
			if ((nv = reallocarray(*v, *cap, sizeof(**v))) == NULL)
				goto nomem;
			*v = nv;
		}
		if (((*v)[*n] = strdup(de->d_name)) == NULL)
			goto nomem;
		(*n)++;
	}
	closedir(d);
	return (0);
nomem:
	log_error("out of memory");
	closedir(d);
	return (-1);
}

int
repo_list_packs(const struct repo *r, char ***names, size_t *n)
{
	struct dirent *de;
	char **v = NULL, rel[16];
	size_t k = 0, cap = 0;
	int dfd;
	DIR *d;

	*names = NULL;
	*n = 0;
	if ((d = rp_store_dir(r, DIR_PACKS)) == NULL)
		return (-1);
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		if (strlen(de->d_name) != 2 || !isxdigit((unsigned char)
		    de->d_name[0]) || !isxdigit((unsigned char)de->d_name[1]) ||
		    isupper((unsigned char)de->d_name[0]) ||
		    isupper((unsigned char)de->d_name[1])) {
			log_warn("repository '%s': 'packs/%s' is not a fan-out "
			    "directory: left out", r->path, de->d_name);
			continue;
		}
		snprintf(rel, sizeof(rel), "packs/%.2s", de->d_name);
		if ((dfd = rp_open_in(r, r->dirs[DIR_PACKS], de->d_name, rel,
		    O_RDONLY, S_IFDIR, 0)) == -1 ||
		    list_fan(r, dfd, de->d_name, &v, &k, &cap))
			goto err;
	}
	closedir(d);
	if (k > 0)
		qsort(v, k, sizeof(*v), rp_cmp_names);
	*names = v;
	*n = k;
	return (0);
err:
	closedir(d);
	while (k > 0)
		free(v[--k]);
	free(v);
	return (-1);
}

int
repo_pack_remove(const struct repo *r, const char *name)
{
	char fan[3], rel[PACK_NAME_LEN + 16];
	int dfd;

	if (fan_of(name, fan, rel, 0))
		return (-1);
	if ((dfd = rp_open_in(r, r->dirs[DIR_PACKS], fan, rel, O_RDONLY,
	    S_IFDIR, 1)) == -1) {
		if (errno == ENOENT)
			return (0);
		log_errno("repository '%s': cannot open '%s'", r->path, rel);
		return (-1);
	}
	if (unlinkat(dfd, name, 0) && errno != ENOENT) {
		log_errno("repository '%s': cannot remove '%s/%s'", r->path,
		    rel, name);
		return (fan_done(r, dfd, rel, 0));
	}
	return (fan_done(r, dfd, rel, 1));
}

int
repo_pack_exists(const struct repo *r, const char *name)
{
	int fd;

	if ((fd = repo_pack_open(r, name, 1)) != -1) {
		close(fd);
		return (1);
	}
	if (errno == ENOENT)
		return (0);
	log_errno("repository '%s': cannot open pack '%s'", r->path, name);
	return (-1);
}

int
repo_pack_open_rw(const struct repo *r, const char *name)
{
	char rel[PACK_NAME_LEN + 16];
	struct stat st;
	int fd;

	fd = pack_open_flags(r, name, O_RDWR, 0, rel);
	/* Written in place: another name (a hard link) must not be. */
	if (fd != -1 && (fstat(fd, &st) || st.st_nlink != 1)) {
		log_error("repository '%s': '%s' has other names (a hard "
		    "link): refused", r->path, rel);
		close(fd);
		return (-1);
	}
	return (fd);
}
