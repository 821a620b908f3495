#ifndef COFFER_POLICY_H
#define COFFER_POLICY_H

#include <stddef.h>
#include <stdint.h>

/*
 * Retention rules, as restic and borg define them, evaluated on snapshot
 * times (UTC):
 *   last N     the N newest;
 *   hourly N   the newest of each of the N newest hours that have one,
 *   daily, weekly (ISO weeks), monthly, yearly likewise;
 *   within D   every snapshot less than D seconds older than the newest.
 * A snapshot is kept when any rule keeps it.  Rules count per dataset.
 */
enum retention_reason {
	RETAIN_LAST = 1 << 0,
	RETAIN_HOURLY = 1 << 1,
	RETAIN_DAILY = 1 << 2,
	RETAIN_WEEKLY = 1 << 3,
	RETAIN_MONTHLY = 1 << 4,
	RETAIN_YEARLY = 1 << 5,
	RETAIN_WITHIN = 1 << 6,
	RETAIN_CHAIN = 1 << 7		/* a kept snapshot restores from it */
};

struct retention {
	int last, hourly, daily, weekly, monthly, yearly;	/* 0: unset */
	double within;			/* seconds; 0: unset */
};

struct retention_snap {
	int64_t time_ns;		/* in */
	unsigned reasons;		/* out: RETAIN_* that keep it, or 0 */
};

/* 1 if any rule is set. */
int retention_any(const struct retention *r);

/*
 * Set each snapshot's reasons.  v holds one dataset's snapshots, newest
 * first (the caller sorts; equal times keep their order).
 */
void retention_apply(const struct retention *r, struct retention_snap *v,
    size_t n);

/* The names of the reasons set in mask, comma-separated, into out. */
void retention_reasons(unsigned mask, char *out, size_t size);

#endif
