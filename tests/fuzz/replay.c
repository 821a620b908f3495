/*
 * Run inputs through a libFuzzer target without libFuzzer: linked with one
 * tests/fuzz/fuzz-*.c by the ordinary compiler (make unit builds
 * BUILD/tests/replay-fuzz-*), so that make check replays every corpus
 * file through its target (tests/e2e/t0900-fuzz-corpus.sh), sanitizers
 * included under make asan.
 *
 *   replay-fuzz-X PATH...      each file, and each file in each directory
 *                              (sorted), through LLVMFuzzerTestOneInput
 *   replay-fuzz-X --seeds DIR  write the target's seed inputs into DIR
 *                              (make fuzz-corpus; fuzz_seeds in the target)
 *
 * Prints "replayed N inputs" and exits 0; a failed contract aborts, as it
 * would under libFuzzer.  Exit 2 when an input cannot be read.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));
/* Optional in a target. */
int fuzz_seeds(const char *dir) __attribute__((weak));

static unsigned long replayed;

int
fuzz_write_seed(const char *dir, const char *name, const void *p, size_t n)
{
	char path[4096];
	FILE *f;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >=
	    sizeof(path) || (f = fopen(path, "wb")) == NULL) {
		fprintf(stderr, "replay: cannot create '%s/%s'\n", dir, name);
		return (-1);
	}
	if ((fwrite(p, 1, n, f) != n) | (fclose(f) != 0)) {
		fprintf(stderr, "replay: cannot write '%s'\n", path);
		return (-1);
	}
	return (0);
}

static int
replay_file(const char *path)
{
	uint8_t *data = NULL, *q;
	size_t n = 0, cap = 0;
	FILE *f;

	if ((f = fopen(path, "rb")) == NULL) {
		fprintf(stderr, "replay: cannot open '%s': %s\n", path,
		    strerror(errno));
		return (-1);
	}
	for (;;) {
		if (n == cap) {
			cap = cap ? 2 * cap : 4096;
			if ((q = realloc(data, cap)) == NULL) {
				fprintf(stderr, "replay: out of memory\n");
				goto err;
			}
			data = q;
		}
		n += fread(data + n, 1, cap - n, f);
		if (ferror(f)) {
			fprintf(stderr, "replay: cannot read '%s'\n", path);
			goto err;
		}
		if (feof(f))
			break;
	}
	fclose(f);
	/* An exact-size copy, so that an overread is an overread. */
	if ((q = malloc(n ? n : 1)) == NULL)
		goto err;
	memcpy(q, data, n);
	free(data);
	LLVMFuzzerTestOneInput(q, n);
	free(q);
	replayed++;
	return (0);
err:
	free(data);
	if (f != NULL && !feof(f))
		fclose(f);
	return (-1);
}

static int
replay_path(const char *path)
{
	struct dirent **ents;
	struct stat st;
	char sub[4096];
	int i, n, rc = 0;

	if (stat(path, &st)) {
		fprintf(stderr, "replay: '%s': %s\n", path, strerror(errno));
		return (-1);
	}
	if (!S_ISDIR(st.st_mode))
		return (replay_file(path));
	if ((n = scandir(path, &ents, NULL, alphasort)) < 0) {
		fprintf(stderr, "replay: cannot list '%s': %s\n", path,
		    strerror(errno));
		return (-1);
	}
	for (i = 0; i < n; i++) {
		if (ents[i]->d_name[0] != '.' &&
		    (size_t)snprintf(sub, sizeof(sub), "%s/%s", path,
		    ents[i]->d_name) < sizeof(sub) && replay_file(sub))
			rc = -1;
		free(ents[i]);
	}
	free(ents);
	return (rc);
}

int
main(int argc, char **argv)
{
	int i, rc = 0;

	if (argc == 3 && strcmp(argv[1], "--seeds") == 0) {
		if (fuzz_seeds == NULL) {
			fprintf(stderr, "replay: this target has no seeds\n");
			return (2);
		}
		return (fuzz_seeds(argv[2]) ? 2 : 0);
	}
	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "usage: %s PATH... | --seeds DIR\n", argv[0]);
		return (2);
	}
	if (LLVMFuzzerInitialize != NULL)
		LLVMFuzzerInitialize(&argc, &argv);
	for (i = 1; i < argc; i++)
		if (replay_path(argv[i]))
			rc = 2;
	printf("replayed %lu inputs\n", replayed);
	return (rc);
}
