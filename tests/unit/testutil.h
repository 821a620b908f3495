/*
 * Helpers shared by coffer's unit tests (header-only): removing a test's
 * scratch tree, reproducible pseudo-random numbers, a fingerprint of
 * bytes, a little-endian store, what the code under test wrote to stderr,
 * a new repository unlocked by a key file.
 */
#ifndef COFFER_TESTUTIL_H
#define COFFER_TESTUTIL_H

#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/repo.h"

static inline int
testutil_rm_one(const char *path, const struct stat *sb, int flag,
    struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return (remove(path));
}

/* Remove path and everything below it, not following symlinks.  0 or -1. */
static inline int
rm_tree(const char *path)
{
	return (nftw(path, testutil_rm_one, 16, FTW_DEPTH | FTW_PHYS));
}

/* xorshift64*: the next number from *state (never 0). */
static inline uint64_t
xorshift64s(uint64_t *state)
{
	*state ^= *state >> 12;
	*state ^= *state << 25;
	*state ^= *state >> 27;
	return (*state * 2685821657736338717ULL);
}

/* FNV-1a, 64-bit: a quick fingerprint to compare bytes by. */
static inline uint64_t
fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return (h);
}

static inline void
put_le64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/*
 * What the code under test writes to stderr between stderr_capture_begin
 * and stderr_capture_end, which returns (the start of) it in buf; "" when
 * nothing was written.  NULL when the capture could not be set up.
 */
struct stderr_capture {
	int saved_fd;
	FILE *f;
	char buf[4096];
};

static inline void
stderr_capture_begin(struct stderr_capture *cap)
{
	cap->saved_fd = -1;
	fflush(stderr);
	if ((cap->f = tmpfile()) == NULL)
		return;
	if ((cap->saved_fd = dup(STDERR_FILENO)) == -1 ||
	    dup2(fileno(cap->f), STDERR_FILENO) == -1) {
		if (cap->saved_fd != -1)
			close(cap->saved_fd);
		cap->saved_fd = -1;
		fclose(cap->f);
		cap->f = NULL;
	}
}

static inline const char *
stderr_capture_end(struct stderr_capture *cap)
{
	size_t n;

	if (cap->f == NULL)
		return (NULL);
	fflush(stderr);
	dup2(cap->saved_fd, STDERR_FILENO);
	close(cap->saved_fd);
	rewind(cap->f);
	n = fread(cap->buf, 1, sizeof(cap->buf) - 1, cap->f);
	cap->buf[n] = '\0';
	fclose(cap->f);
	cap->f = NULL;
	return (cap->buf);
}

/* A new repository dir/name, made with a raw key file dir/name.key (no
 * passphrase), opened and unlocked by it; NULL (reported) on failure. */
static inline struct repo *
test_repo_make(const char *dir, const char *name)
{
	struct repo_init_opts o;
	char path[256], key[256];
	struct repo *r;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(key, sizeof(key), "%s/%s.key", dir, name);
	memset(&o, 0, sizeof(o));
	o.key_file = key;
	if (repo_init(path, &o) || (r = repo_open(path)) == NULL)
		return (NULL);
	if (repo_unlock(r, key, NULL, 0)) {
		repo_close(r);
		return (NULL);
	}
	return (r);
}

#endif
