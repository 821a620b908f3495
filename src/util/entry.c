#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/log.h"

#include "coffer/entry.h"

const char *
entry_kind_char(int kind)
{
	static const char *c[] = { "x", "-", "d", "l", "p", "c", "b", "s" };

	return (kind >= 0 && kind <= ENTRY_SOCK ? c[kind] : "?");
}

const char *
entry_kind_name(int kind)
{
	static const char *n[] = { "deleted", "file", "dir", "symlink",
		"fifo", "chr", "blk", "sock" };

	return (kind >= 0 && kind <= ENTRY_SOCK ? n[kind] : "unknown");
}

int
entry_xattrs_add(struct buf *b, const char *name, const void *value,
    size_t len)
{
	size_t nl = strlen(name);

	if (nl > UINT32_MAX || len > UINT32_MAX)
		return (-1);
	if (buf_put_u32(b, (uint32_t)nl) || buf_append(b, name, nl) ||
	    buf_put_u32(b, (uint32_t)len) || buf_append(b, value, len))
		return (-1);
	return (0);
}

void
entry_xattrs_iter_init(struct entry_xattr_iter *it, const uint8_t *p,
    size_t len)
{
	it->p = p;
	it->left = len;
}

int
entry_xattrs_next(struct entry_xattr_iter *it, const char **name,
    size_t *name_len, const void **value, size_t *value_len)
{
	struct reader r;
	const uint8_t *np, *vp;
	uint32_t nl, vl;

	if (it->left == 0)
		return (0);
	reader_init(&r, it->p, it->left);
	if (reader_u32(&r, &nl) || nl == 0 || reader_bytes(&r, nl, &np) ||
	    memchr(np, '\0', nl) != NULL || reader_u32(&r, &vl) ||
	    reader_bytes(&r, vl, &vp))
		return (-1);
	*name = (const char *)np;
	*name_len = nl;
	*value = vp;
	*value_len = vl;
	it->p = r.p;
	it->left = r.len;
	return (1);
}

int
entry_path_is_safe(const char *path)
{
	const char *p = path, *slash;
	size_t n;

	if (path == NULL || *path == '\0' || *path == '/')
		return (0);
	for (;;) {
		slash = strchr(p, '/');
		n = slash ? (size_t)(slash - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return (0);
		if (slash == NULL)
			return (1);
		p = slash + 1;
	}
}

int
entry_path_is_root(const char *path)
{
	return (path != NULL && strcmp(path, ENTRY_ROOT_PATH) == 0);
}

static size_t
str_size(const char *s)
{
	return (s ? strlen(s) + 1 : 0);
}

static const char *
put_str(char **p, const char *s)
{
	size_t n;
	char *d = *p;

	if (s == NULL)
		return (NULL);
	n = strlen(s) + 1;
	memcpy(d, s, n);
	*p += n;
	return (d);
}

int
entry_dup(struct entry *dst, void **mem, const struct entry *src)
{
	size_t n = src->xattrs_len;
	char *p;

	n += str_size(src->path) + str_size(src->uname) +
	    str_size(src->gname) + str_size(src->target) + str_size(src->acl);
	if ((p = malloc(n ? n : 1)) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	*mem = p;
	*dst = *src;
	if (src->xattrs_len) {
		memcpy(p, src->xattrs, src->xattrs_len);
		dst->xattrs = (const uint8_t *)p;
		p += src->xattrs_len;
	}
	dst->path = put_str(&p, src->path);
	dst->uname = put_str(&p, src->uname);
	dst->gname = put_str(&p, src->gname);
	dst->target = put_str(&p, src->target);
	dst->acl = put_str(&p, src->acl);
	return (0);
}
