/*
 * Where bundles go and come from: a directory, a pipe ("-": standard
 * output when writing, standard input when reading), or an rclone remote
 * ("rclone:REMOTE:PATH", through the rclone binary's rcat, cat and lsf;
 * RCLONE_* variables and rclone's config file configure it).
 *
 * Nothing written is visible under its name until it is complete: in a
 * directory a file is written under a temporary name, fsynced and
 * renamed; rclone's rcat uploads a stream as one object.  A failed write
 * says so, and the caller records nothing.
 */
#ifndef COFFER_REMOTE_H
#define COFFER_REMOTE_H

#include <stddef.h>
#include <sys/types.h>

enum remote_kind { REMOTE_DIR, REMOTE_PIPE, REMOTE_RCLONE };

struct remote {
	enum remote_kind kind;
	char *spec;			/* as given, for messages */
	char *path;			/* directory, or "REMOTE:PATH" */
};

/* Parse spec.  0, or -1 (reported). */
int remote_parse(const char *spec, struct remote *t);
void remote_release(struct remote *t);

/* The bundle names (*.cfb) the remote holds, sorted.  Not for a pipe. */
int remote_list(const struct remote *t, char ***names, size_t *n);

/* A stream being written or read: fd, and what closes it. */
struct remote_stream {
	int fd;
	pid_t pid;			/* rclone's, or 0 */
	int errfd;			/* rclone's standard error, or -1 */
	int dfd;			/* the directory's, or -1 */
	char *name;			/* final name in the directory */
	char *tmp;			/* temporary name in the directory */
	const struct remote *t;
};

/* Write name: s->fd takes the bytes.  0 or -1. */
int remote_put_begin(const struct remote *t, const char *name,
    struct remote_stream *s);
/* Close; with ok, make it visible under its name (0), else discard it.
 * -1 when it could not be completed (reported). */
int remote_put_end(struct remote_stream *s, int ok);
/* Read name (ignored for a pipe): s->fd gives the bytes.  0 or -1. */
int remote_get_begin(const struct remote *t, const char *name,
    struct remote_stream *s);
/* Close; -1 when the transport failed (rclone's status). */
int remote_get_end(struct remote_stream *s);

#endif
