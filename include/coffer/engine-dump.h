#ifndef COFFER_ENGINE_DUMP_H
#define COFFER_ENGINE_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "coffer/engine.h"

/*
 * coffer dump (src/engine/dump.c): a snapshot, or paths in it, as a pax
 * tar stream, or one regular file's content as it is.
 */
struct dump_opts {
	int fd;				/* written to; the caller's */
	const char *what;		/* fd for messages: "standard
					 * output", a path */
	char *const *paths;		/* subset; NULL/0 = everything */
	size_t npaths;
	int tar;			/* a stream even for one regular
					 * file */
};

struct dump_result {
	int raw;			/* one file's content was written */
	int64_t entries;		/* written */
	int64_t bytes;			/* file content written */
	double seconds;
};

/*
 * Write snapshot s (its resolved chain), or the paths of o in it with
 * what is below them, to o->fd as a pax archive in path order (a
 * directory before what it holds); with one path that is a regular file
 * and not o->tar, that file's content alone.  Each chunk is fetched,
 * authenticated and its keyed hash checked before a byte of it is
 * written, one at a time, and a file's chunk list is read a page at a
 * time: memory does not grow with a file's size (its sparse map aside,
 * as long as its holes are many).  A
 * damaged or missing chunk ends the stream there, with no end of archive
 * (a reader sees it cut short), naming the file.  ENGINE_OK, ENGINE_WARN
 * (metadata that could not be written, warned), ENGINE_REFUSED (not
 * complete, a path not in the snapshot), ENGINE_DAMAGED, ENGINE_ERROR (a
 * write failed), ENGINE_INTERRUPTED.
 */
enum engine_result engine_dump(struct repo *r, struct catalog *c,
    const struct catalog_snapshot *s, const struct dump_opts *o,
    struct dump_result *res);

#endif
