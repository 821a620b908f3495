/*
 * manyfiles DIR N [PER_DIR [SIZE]]: make N files under DIR, PER_DIR
 * (default 1000) to a directory DIR/dNNNNNN/fNNNNNN, each SIZE bytes
 * (default 0; non-empty files hold their own name, so that contents
 * differ).  For measuring snapshots of millions of entries (the snapshot
 * record in parts): a shell loop makes a few thousand files a second, this
 * a few hundred thousand.  Not run by make check.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int
main(int argc, char **argv)
{
	char path[4096], data[4096];
	long long n, per = 1000, size = 0, i;
	int dfd = -1, fd;

	if (argc < 3 || argc > 5 || (n = atoll(argv[2])) < 0 ||
	    (argc > 3 && (per = atoll(argv[3])) <= 0) ||
	    (argc > 4 && ((size = atoll(argv[4])) < 0 ||
	    size > (long long)sizeof(data)))) {
		fprintf(stderr, "usage: manyfiles DIR N [PER_DIR [SIZE]]\n");
		return (2);
	}
	if (mkdir(argv[1], 0755) && errno != EEXIST) {
		perror(argv[1]);
		return (1);
	}
	for (i = 0; i < n; i++) {
		if (i % per == 0) {
			if (dfd >= 0)
				close(dfd);
			snprintf(path, sizeof(path), "%s/d%06lld", argv[1],
			    i / per);
			if ((mkdir(path, 0755) && errno != EEXIST) ||
			    (dfd = open(path, O_RDONLY | O_DIRECTORY)) < 0) {
				perror(path);
				return (1);
			}
		}
		snprintf(path, sizeof(path), "f%06lld", i % per);
		if ((fd = openat(dfd, path, O_WRONLY | O_CREAT | O_TRUNC,
		    0644)) < 0) {
			perror(path);
			return (1);
		}
		if (size > 0) {
			memset(data, 'x', (size_t)size);
			snprintf(data, (size_t)size, "%lld\n", i);
			if (write(fd, data, (size_t)size) != (ssize_t)size) {
				perror(path);
				return (1);
			}
		}
		close(fd);
	}
	if (dfd >= 0)
		close(dfd);
	return (0);
}
