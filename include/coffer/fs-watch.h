#ifndef COFFER_FS_WATCH_H
#define COFFER_FS_WATCH_H

#include <stddef.h>
#include <stdint.h>

/*
 * A checkpoint tree watched for steps (src/fs/watch.c): inotify on the
 * directories down to the steps and in each step, where the system and
 * the file system allow it (Linux, not a network file system, an
 * inotify instance and watches to spare); else nothing but the caller's
 * periodic scans.  inotify's state is the kernel's: one watch per
 * directory, dropped by the kernel when the directory goes, so that what
 * this process holds does not grow with the steps seen.
 */
struct fs_watch;

/*
 * A watch of the tree at root (not opened until fs_watch_scan); inotify
 * 0: scans only.  NULL out of memory (reported).  fs_watch_close
 * accepts NULL.
 */
struct fs_watch *fs_watch_open(const char *root, int inotify);
void fs_watch_close(struct fs_watch *w);

/* The descriptor to poll for events, or -1 when the tree is scanned
 * only. */
int fs_watch_fd(const struct fs_watch *w);

/*
 * Why the tree is scanned only (a static string: "inotify is off
 * (COFFER_WATCH_INOTIFY=0)", "on a network file system", ...), or NULL
 * while inotify watches it.  Set by the first scan, or when a later one
 * finds the watches run out.
 */
const char *fs_watch_polled(const struct fs_watch *w);

/* Read the events waiting: 1 if any, 0 if none (or scanned only). */
int fs_watch_drain(struct fs_watch *w);

/* Does rel (a directory's path below the root) match one of the n globs?
 * Without '/', a glob matches a name at any depth; with '/', the path. */
int fs_checkpoint_match(char *const *globs, size_t n, const char *rel);

/*
 * A step: a directory below the root that a glob matches (not looked
 * into for further steps).  name: its path below the root.  marked: the
 * marker file (require; NULL: any step is marked at its directory's
 * time) is there, a regular file; marked_ns its newest of mtime and
 * ctime.  changed_ns: the newest mtime or ctime in the step's tree, read
 * only when want(arg, step) says so, else 0.
 */
struct fs_watch_step {
	const char *name;
	int marked;
	int64_t marked_ns;
	int64_t changed_ns;
};

/*
 * Look at the tree: each directory down to the steps (16 levels at most)
 * and each step is watched (added once; the kernel keeps one watch per
 * directory), each step given to step(arg, s).  0; -1 when the root
 * cannot be read (reported once while it stays so) or step returned -1.
 */
int fs_watch_scan(struct fs_watch *w, char *const *globs, size_t n,
    const char *require, int (*want)(void *arg,
    const struct fs_watch_step *s), int (*step)(void *arg,
    const struct fs_watch_step *s), void *arg);

#endif
