/*
 * libFuzzer target: hostile packs and coffer.conf files.
 * The first input byte picks the target; the rest is the file.
 *   0: a pack file, opened, its index read and each indexed record read
 *   1: a coffer.conf, opened (and, when it parses, unlocked)
 * Build: make fuzz; run: build-fuzz/fuzz/fuzz-pack -max_total_time=60
 * -close_fd_mask=2 (errors are the expected outcome and fill stderr)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coffer/crypto.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/repo.h"

static char dir[] = "/tmp/coffer-fuzz-pack.XXXXXX";
static char rpath[256], key_path[256], conf_dir[256];
static struct repo *repo;
static char name[PACK_NAME_LEN + 1];

static int
setup(void)
{
	struct repo_init_opts o;
	uint8_t id[16];
	char sub[300];

	if (mkdtemp(dir) == NULL || crypto_init())
		return (-1);
	snprintf(rpath, sizeof(rpath), "%s/repo", dir);
	snprintf(key_path, sizeof(key_path), "%s/key", dir);
	snprintf(conf_dir, sizeof(conf_dir), "%s/conf", dir);
	memset(&o, 0, sizeof(o));
	o.key_file = key_path;
	if (repo_init(rpath, &o) || (repo = repo_open(rpath)) == NULL ||
	    repo_unlock(repo, key_path, NULL, 0))
		return (-1);
	crypto_random(id, sizeof(id));
	for (int i = 0; i < 16; i++)
		snprintf(name + 2 * i, 3, "%02x", id[i]);
	snprintf(sub, sizeof(sub), "%s/packs/%.2s", rpath, name);
	if (fsutil_mkdir_p(sub, 0700) || fsutil_mkdir_p(conf_dir, 0700))
		return (-1);
	log_level = -1;
	return (0);
}

static void
write_file(const char *path, const uint8_t *p, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	if (fd == -1)
		abort();
	if (n && write(fd, p, n) != (ssize_t)n)
		abort();
	close(fd);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct pack_reader *p;
	struct pack_entry *ents = NULL;
	struct buf out = BUF_INIT;
	char *path;
	size_t n = 0, i;

	if (!ready) {
		if (setup())
			abort();
		ready = 1;
	}
	if (size < 1)
		return (0);
	if (data[0] == 0) {
		path = repo_pack_path(repo, name);
		write_file(path, data + 1, size - 1);
		free(path);
		if ((p = pack_reader_open(repo, name)) != NULL) {
			if (pack_reader_index(p, &ents, &n) == 0) {
				for (i = 0; i < n && i < 64; i++)
					pack_reader_get(p, &ents[i], NULL, &out);
				free(ents);
			}
			pack_reader_close(p);
		}
	} else {
		char conf[300];
		struct repo *r;

		snprintf(conf, sizeof(conf), "%s/coffer.conf", conf_dir);
		write_file(conf, data + 1, size - 1);
		if ((r = repo_open(conf_dir)) != NULL)
			repo_close(r);
	}
	buf_release(&out);
	return (0);
}
