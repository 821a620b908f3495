#ifndef COFFER_SIGNALS_H
#define COFFER_SIGNALS_H

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
/* "SIGINT", "SIGTERM", "SIGHUP", or "a signal". */
const char *signals_name(int sig);

#endif
