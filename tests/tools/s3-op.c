/*
 * s3-op [-v] LOCATION OP [ARGS]: one operation of coffer's S3 store
 * (src/store/s3.c), or of its rclone store for an "rclone:" LOCATION
 * (src/store/rclone.c), from the shell, for the end-to-end tests of what
 * coffer's commands cannot reach yet.  Errors as coffer prints them;
 * exit 0 done, 1 failed, 2 usage; -v shows each retry.  The CA of an
 * https endpoint from COFFER_CACERT.  Links libcoffer (a rule of its own
 * in the Makefile).
 *
 *   create            open the store with STORAGE_CREATE
 *   put NAME FILE     FILE as object NAME, written in pieces of 1 MiB
 *   get NAME FILE     object NAME into FILE, read in ranges of 1 MiB
 *   list DIR          "NAME SIZE" of each object under DIR ("" for all)
 *   delete NAME
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/log.h"
#include "coffer/storage.h"

#define PIECE (1 << 20)

static int
put(struct storage *st, const char *name, const char *path)
{
	static char buf[PIECE];
	struct storage_put *p;
	FILE *f;
	size_t n;
	int rc = 0;

	if ((f = fopen(path, "rb")) == NULL) {
		perror(path);
		return (1);
	}
	if (storage_put_begin(st, name, 0, &p)) {
		fclose(f);
		return (1);
	}
	while (rc == 0 && (n = fread(buf, 1, sizeof(buf), f)) > 0)
		rc = storage_put_write(p, buf, n);
	fclose(f);
	if (rc) {
		storage_put_abort(p);
		return (1);
	}
	return (storage_put_commit(p) != 0);
}

static int
get(struct storage *st, const char *name, const char *path)
{
	static char buf[PIECE];
	struct storage_obj *o;
	uint64_t size, off;
	size_t got;
	FILE *f;
	int rc;

	if ((rc = storage_open(st, name, &o, &size)) != 0) {
		if (rc == STORAGE_MISSING)
			fprintf(stderr, "error: '%s' is not there\n", name);
		return (1);
	}
	if ((f = fopen(path, "wb")) == NULL) {
		perror(path);
		storage_obj_close(o);
		return (1);
	}
	for (off = 0, rc = 0; rc == 0; off += got) {
		if ((rc = storage_read(o, off, buf, sizeof(buf), &got)) != 0 ||
		    got == 0)
			break;
		if (fwrite(buf, 1, got, f) != got)
			rc = 1;
	}
	storage_obj_close(o);
	if (fclose(f) != 0)
		rc = 1;
	return (rc != 0);
}

static int
print(void *arg, const char *name, uint64_t size)
{
	(void)arg;
	printf("%s %llu\n", name, (unsigned long long)size);
	return (0);
}

int
main(int argc, char **argv)
{
	struct storage_s3_opts o = { getenv("COFFER_CACERT") };
	struct storage *st;
	const char *op;
	int rc = 2;

	if (argc > 1 && strcmp(argv[1], "-v") == 0) {
		log_level = 1;
		argc--, argv++;
	}
	if (argc < 3) {
		fprintf(stderr, "usage: s3-op [-v] LOCATION "
		    "create|put|get|list|delete [ARGS]\n");
		return (2);
	}
	op = argv[2];
	if ((st = strncmp(argv[1], "rclone:", 7) == 0 ?
	    storage_rclone_open(argv[1], strcmp(op, "create") == 0 ?
	    STORAGE_CREATE : 0) : storage_s3_open(argv[1], &o,
	    strcmp(op, "create") == 0 ? STORAGE_CREATE : 0)) == NULL)
		return (1);
	if (strcmp(op, "create") == 0)
		rc = 0;
	else if (strcmp(op, "put") == 0 && argc == 5)
		rc = put(st, argv[3], argv[4]);
	else if (strcmp(op, "get") == 0 && argc == 5)
		rc = get(st, argv[3], argv[4]);
	else if (strcmp(op, "list") == 0 && argc == 4)
		rc = storage_list(st, argv[3], print, NULL) != 0;
	else if (strcmp(op, "delete") == 0 && argc == 4)
		rc = storage_delete(st, argv[3]) != 0;
	else
		fprintf(stderr, "s3-op: bad operation '%s'\n", op);
	storage_close(st);
	return (rc);
}
