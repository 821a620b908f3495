/*
 * libFuzzer target for backup --from-tar's reading of an archive
 * (src/fs/tar.c over libarchive): any bytes are refused or taken, never a
 * crash, a leak or an unsafe name.  Each input is an archive, read through
 * a memfd as fs_walk_open_tar reads a file: every entry and all its data,
 * then the hard links.  Each path handed on must be one restore accepts
 * (entry_path_is_safe, or the root), each hard link must name one, and
 * data must come in increasing offsets within the entry's size.
 * Build and run: make fuzz (seeds: tests/fuzz/corpus/tar, written by
 * fuzz_seeds below through make fuzz-corpus).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coffer/entry.h"
#include "coffer/fs.h"
#include "coffer/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_path(const char *p)
{
	if (p == NULL || (!entry_path_is_safe(p) && !entry_path_is_root(p)))
		abort();
}

static void
walk(const char *path)
{
	struct fs_walk_opts o;
	struct fs_walk *w;
	struct entry e;
	const char *to;
	static uint8_t buf[64 * 1024];
	int64_t off, end;
	size_t len;
	int rc;

	memset(&o, 0, sizeof(o));
	o.root = 1;
	if ((w = fs_walk_open_tar(path, &o)) == NULL)
		return;
	while ((rc = fs_walk_next(w, &e)) == 1) {
		check_path(e.path);
		if (fs_walk_details(w, &e))
			break;
		for (end = 0; (rc = fs_walk_read_into(w, buf, sizeof(buf),
		    &len, &off)) == 1; end = off + (int64_t)len)
			if (off < end || len > sizeof(buf) ||
			    off + (int64_t)len > e.size)
				abort();
		if (rc < 0)
			break;
	}
	if (rc == 0)
		while (fs_walk_link_next(w, &e, &to) == 1) {
			check_path(e.path);
			check_path(to);
		}
	fs_walk_close(w);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd;

	log_level = -2;
	if ((fd = memfd_create("tar", MFD_CLOEXEC)) == -1)
		return (0);
	if (write(fd, data, size) == (ssize_t)size) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		walk(path);
	}
	close(fd);
	return (0);
}

#ifdef FUZZ_REPLAY
#include <archive.h>
#include <archive_entry.h>

#include "replay.h"

struct member {
	const char *name;
	unsigned type;
	const char *link;		/* symlink target or hardlink */
	const char *data;
};

/* An archive of the members in format (ARCHIVE_FORMAT_*, with filter),
 * written with libarchive into dir/name. */
static int
seed(const char *dir, const char *name, int format, int filter,
    const struct member *m, size_t n)
{
	static char out[256 * 1024];
	struct archive *a = archive_write_new();
	struct archive_entry *ae = archive_entry_new();
	size_t used = 0, i;
	int rc = -1;

	if (a == NULL || ae == NULL ||
	    archive_write_set_format(a, format) != ARCHIVE_OK ||
	    archive_write_add_filter(a, filter) != ARCHIVE_OK ||
	    archive_write_open_memory(a, out, sizeof(out), &used) !=
	    ARCHIVE_OK)
		goto out;
	for (i = 0; i < n; i++) {
		archive_entry_clear(ae);
		archive_entry_set_pathname(ae, m[i].name);
		archive_entry_set_filetype(ae, m[i].type);
		archive_entry_set_perm(ae, 0644);
		archive_entry_set_mtime(ae, 1700000000, 123456789);
		if (m[i].type == AE_IFLNK)
			archive_entry_set_symlink(ae, m[i].link);
		else if (m[i].link != NULL)
			archive_entry_set_hardlink(ae, m[i].link);
		archive_entry_set_size(ae, m[i].data != NULL ?
		    (la_int64_t)strlen(m[i].data) : 0);
		if (m[i].name[0] == 'x')
			archive_entry_xattr_add_entry(ae, "user.k", "v", 1);
		if (archive_write_header(a, ae) < ARCHIVE_WARN)
			goto out;
		if (m[i].data != NULL)
			archive_write_data(a, m[i].data, strlen(m[i].data));
	}
	if (archive_write_close(a) == ARCHIVE_OK)
		rc = fuzz_write_seed(dir, name, out, used);
out:
	if (rc != 0)
		fprintf(stderr, "fuzz-tar: seed '%s': %s\n", name,
		    a != NULL && archive_error_string(a) != NULL ?
		    archive_error_string(a) : "out of memory");
	archive_entry_free(ae);
	archive_write_free(a);
	return (rc);
}

int
fuzz_seeds(const char *dir)
{
	static const struct member good[] = {
		{ "./", AE_IFDIR, NULL, NULL },
		{ "./d/", AE_IFDIR, NULL, NULL },
		{ "./d/f.txt", AE_IFREG, NULL, "hello\n" },
		{ "./d/x-attr", AE_IFREG, NULL, "attr\n" },
		{ "./d/link", AE_IFREG, "./d/f.txt", NULL },
		{ "./s", AE_IFLNK, "/etc/hostname", NULL },
		{ "./p", AE_IFIFO, NULL, NULL },
	};
	static const struct member bad[] = {
		{ "../up", AE_IFREG, NULL, "evil\n" },
		{ "/abs", AE_IFREG, NULL, "evil\n" },
		{ "a//b/./../c", AE_IFREG, NULL, "evil\n" },
		{ "s", AE_IFLNK, "/etc", NULL },
		{ "s/passwd", AE_IFREG, NULL, "evil\n" },
		{ "h", AE_IFREG, "/etc/passwd", NULL },
		{ "h2", AE_IFREG, "nosuch", NULL },
		{ "h3", AE_IFREG, "s", NULL },
		{ "f", AE_IFREG, NULL, "one\n" },
		{ "f", AE_IFREG, NULL, "two\n" },
		{ ".", AE_IFREG, NULL, "root file\n" },
	};

	if (seed(dir, "pax", ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE,
	    ARCHIVE_FILTER_NONE, good, sizeof(good) / sizeof(good[0])) ||
	    seed(dir, "gnutar-gzip", ARCHIVE_FORMAT_TAR_GNUTAR,
	    ARCHIVE_FILTER_GZIP, good, sizeof(good) / sizeof(good[0])) ||
	    seed(dir, "cpio", ARCHIVE_FORMAT_CPIO_SVR4_NOCRC,
	    ARCHIVE_FILTER_NONE, good, sizeof(good) / sizeof(good[0])) ||
	    seed(dir, "hostile-pax", ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE,
	    ARCHIVE_FILTER_NONE, bad, sizeof(bad) / sizeof(bad[0])) ||
	    seed(dir, "hostile-ustar", ARCHIVE_FORMAT_TAR_USTAR,
	    ARCHIVE_FILTER_NONE, bad, sizeof(bad) / sizeof(bad[0])) ||
	    fuzz_write_seed(dir, "empty", "", 0) ||
	    fuzz_write_seed(dir, "zeros", (const char[1024]){ 0 }, 1024))
		return (-1);
	return (0);
}
#endif
