/*
 * Checking a file's content against its catalog entry, by the entry's own
 * chunk boundaries (see integrity-int.h).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "integrity-int.h"

#define BLOCK (256 * 1024)

/* [from, to) all zero: 1 yes, 0 no (*where), -1 read error.  Holes are
 * skipped with SEEK_DATA where the file system has it. */
static int
all_zero(int fd, int64_t from, int64_t to, struct buf *tmp, int64_t *where)
{
	int64_t data;
	ssize_t n;
	size_t want, i;

	while (from < to) {
		data = lseek(fd, from, SEEK_DATA);
		if (data == -1 && errno == ENXIO)
			return (1);	/* a hole up to the end */
		if (data == -1)
			data = from;	/* no SEEK_DATA: read it */
		if (data >= to)
			return (1);
		want = to - data < BLOCK ? (size_t)(to - data) : BLOCK;
		buf_reset(tmp);
		if (buf_reserve(tmp, want))
			return (-1);
		do
			n = pread(fd, tmp->data, want, data);
		while (n == -1 && errno == EINTR);
		if (n == 0)
			errno = EIO;	/* shorter than its size */
		if (n <= 0)
			return (-1);
		for (i = 0; i < (size_t)n; i++)
			if (tmp->data[i] != 0) {
				*where = data;
				return (0);
			}
		from = data + n;
	}
	return (1);
}

int
integrity_content_matches(const struct ccrypto_keys *k, int fd,
    const struct catalog_chunk_loc *locs, size_t n, int64_t size,
    struct buf *tmp, int64_t *where, int64_t *bytes)
{
	uint8_t id[CCRYPTO_ID_BYTES];
	int64_t pos = 0, off;
	size_t i, got;
	ssize_t r;
	int z;

	for (i = 0; i < n; i++) {
		off = (int64_t)locs[i].file_offset;
		if (off < pos || off + (int64_t)locs[i].plain_len > size) {
			*where = off;
			return (0);
		}
		if ((z = all_zero(fd, pos, off, tmp, where)) <= 0)
			return (z);
		buf_reset(tmp);
		if (buf_reserve(tmp, locs[i].plain_len))
			return (-1);
		for (got = 0; got < locs[i].plain_len; got += (size_t)r) {
			do
				r = pread(fd, tmp->data + got,
				    locs[i].plain_len - got,
				    off + (int64_t)got);
			while (r == -1 && errno == EINTR);
			if (r == 0)
				errno = EIO;
			if (r <= 0)
				return (-1);
		}
		ccrypto_chunk_id(k, tmp->data, locs[i].plain_len, id);
		if (memcmp(id, locs[i].cid, sizeof(id)) != 0) {
			*where = off;
			return (0);
		}
		if (bytes != NULL)
			*bytes += locs[i].plain_len;
		pos = off + (int64_t)locs[i].plain_len;
	}
	return (all_zero(fd, pos, size, tmp, where));
}
