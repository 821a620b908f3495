#ifndef COFFER_PROGRESS_H
#define COFFER_PROGRESS_H

#include <stdint.h>

/*
 * A one-line progress display on stderr, redrawn at most a few times a
 * second, shown only when stderr is a terminal and log_level >= 0.
 */
struct progress {
	const char *label;
	uint64_t files;
	uint64_t bytes;
	uint64_t total_bytes;	/* 0 when unknown: no ETA */
	double start;
	double last;
	int enabled;
	int drawn;
	const char *unit;	/* what files counts: NULL = "files" */
};

void progress_init(struct progress *p, const char *label, uint64_t total);
/* Account for work done and redraw when due. */
void progress_update(struct progress *p, uint64_t files, uint64_t bytes);
/* Erase the line (if one was drawn). */
void progress_done(struct progress *p);

/* Wall-clock seconds (monotonic). */
double now_monotonic(void);
/* Wall-clock time in ns since the epoch. */
int64_t now_realtime_ns(void);

#endif
