/*
 * bench/smallfiles.c: the tree of `make bench-files`, shaped like ImageNet's
 * training set: NFILES files spread evenly over DIRS class directories
 * (OUT/n0NNNNNNN/n0NNNNNNN_K.JPEG), each of MIN to MAX bytes (uniform) of
 * pseudo-random bytes, which no compressor shrinks (as JPEGs).  The tree
 * is a function of the seed and the arguments.
 *
 *   smallfiles [--seed N] [--dirs D] [--min B] [--max B] OUT NFILES
 *   smallfiles --touch K [--seed N] OUT
 *
 * --touch rewrites every file of the K-th directory (in name order, from
 * 0) with new bytes of the same size: "one directory touched".
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXSIZE (1 << 20)

static uint64_t
splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void
fill(uint64_t *s, unsigned char *p, size_t n)
{
	size_t i;
	uint64_t v;

	for (i = 0; i + 8 <= n; i += 8) {
		v = splitmix(s);
		memcpy(p + i, &v, 8);
	}
	v = splitmix(s);
	memcpy(p + i, &v, n - i);
}

static void
write_file(int dfd, const char *name, const unsigned char *p, size_t n)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || write(fd, p, n) != (ssize_t)n || close(fd)) {
		perror(name);
		exit(1);
	}
}

static int
cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in DIR that do not start with a dot, sorted. */
static char **
names(const char *dir, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **v = NULL;
	size_t cap = 0;

	if (d == NULL) {
		perror(dir);
		exit(1);
	}
	*n = 0;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		if (*n == cap) {
			cap = cap ? cap * 2 : 1024;
			if ((v = realloc(v, cap * sizeof *v)) == NULL)
				exit(1);
		}
		if ((v[(*n)++] = strdup(e->d_name)) == NULL)
			exit(1);
	}
	closedir(d);
	qsort(v, *n, sizeof *v, cmp);
	return v;
}

static int
touch(const char *out, long k, uint64_t seed)
{
	static unsigned char buf[MAXSIZE];
	char path[4096];
	char **dirs, **files;
	size_t nd, nf, i;
	struct stat st;
	int dfd;

	dirs = names(out, &nd);
	if (k < 0 || (size_t)k >= nd) {
		fprintf(stderr, "smallfiles: %s has %zu directories\n", out, nd);
		return 1;
	}
	snprintf(path, sizeof path, "%s/%s", out, dirs[k]);
	if ((dfd = open(path, O_RDONLY | O_DIRECTORY)) < 0) {
		perror(path);
		return 1;
	}
	files = names(path, &nf);
	seed ^= 0x746f756368ULL + (uint64_t)k;
	for (i = 0; i < nf; i++) {
		if (fstatat(dfd, files[i], &st, 0) || st.st_size > MAXSIZE) {
			perror(files[i]);
			return 1;
		}
		fill(&seed, buf, (size_t)st.st_size);
		write_file(dfd, files[i], buf, (size_t)st.st_size);
	}
	close(dfd);
	printf("%zu\n", nf);
	return 0;
}

int
main(int argc, char **argv)
{
	static unsigned char buf[MAXSIZE];
	long long nfiles, i, dirs = 1000, min = 1024, max = 8192, tk = -1;
	uint64_t seed = 1, s;
	char path[4096], name[64];
	int a = 1, dfd = -1;
	long long d, cur = -1;

	for (; a < argc && strncmp(argv[a], "--", 2) == 0; a += 2) {
		if (a + 1 >= argc)
			goto usage;
		if (strcmp(argv[a], "--seed") == 0)
			seed = strtoull(argv[a + 1], NULL, 10);
		else if (strcmp(argv[a], "--dirs") == 0)
			dirs = atoll(argv[a + 1]);
		else if (strcmp(argv[a], "--min") == 0)
			min = atoll(argv[a + 1]);
		else if (strcmp(argv[a], "--max") == 0)
			max = atoll(argv[a + 1]);
		else if (strcmp(argv[a], "--touch") == 0)
			tk = atoll(argv[a + 1]);
		else
			goto usage;
	}
	if (tk >= 0 && argc - a == 1)
		return touch(argv[a], (long)tk, seed);
	if (argc - a != 2 || (nfiles = atoll(argv[a + 1])) <= 0 || dirs <= 0 ||
	    min < 0 || max < min || max > MAXSIZE)
		goto usage;
	if (mkdir(argv[a], 0755) && errno != EEXIST) {
		perror(argv[a]);
		return 1;
	}
	for (i = 0; i < nfiles; i++) {
		/* Files go to directories in runs, as a class's images do. */
		d = i * dirs / nfiles;
		if (d != cur) {
			if (dfd >= 0)
				close(dfd);
			snprintf(path, sizeof path, "%s/n%08lld", argv[a],
			    1000000 + d * 1177);
			if ((mkdir(path, 0755) && errno != EEXIST) ||
			    (dfd = open(path, O_RDONLY | O_DIRECTORY)) < 0) {
				perror(path);
				return 1;
			}
			cur = d;
		}
		s = seed * 0x2545f4914f6cdd1dULL + (uint64_t)i;
		size_t n = (size_t)(min + (long long)(splitmix(&s) %
		    (uint64_t)(max - min + 1)));
		fill(&s, buf, n);
		snprintf(name, sizeof name, "n%08lld_%lld.JPEG",
		    1000000 + d * 1177, i);
		write_file(dfd, name, buf, n);
	}
	if (dfd >= 0)
		close(dfd);
	return 0;
usage:
	fprintf(stderr, "usage: smallfiles [--seed N] [--dirs D] [--min B] "
	    "[--max B] OUT NFILES\n       smallfiles --touch K [--seed N] OUT\n");
	return 2;
}
