#ifndef COFFER_SIGNALS_H
#define COFFER_SIGNALS_H

#include <sys/types.h>

/*
 * Stopping a long run cleanly.  After signals_install, SIGINT, SIGTERM and
 * SIGHUP only set a flag: each pipeline checks signals_caught() at its
 * safe points (between files, between reads of a large file, between
 * packs) and stops there as after an error, so that the snapshot is
 * marked failed, tmp/ is cleaned and every complete snapshot stays
 * restorable.  A second signal ends the process at once, by the signal's
 * default action; a crash at any point is safe too (doc/design.md's order).
 */
void signals_install(void);
/* The signal that asked to stop (SIGINT, ...), or 0. */
int signals_caught(void);
/*
 * A child process that stops with this one (rclone, whose pipe a thread
 * may be blocked on): from signals_child(pid) to signals_child(0), a
 * caught signal sends it SIGTERM, and SIGKILL a second later if it is
 * still there; a second signal sends it SIGKILL before ending this
 * process.  In a run that did not call signals_install, a signal ends
 * the process at once as before, and the child (SIGKILL) with it.  One
 * child at a time.  Clear it (0) after the child has ended
 * and before reaping it, so that its pid cannot have been reused.
 */
void signals_child(pid_t pid);
/* "SIGINT", "SIGTERM", "SIGHUP", or "a signal". */
const char *signals_name(int sig);

#endif
