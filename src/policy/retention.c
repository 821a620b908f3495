/*
 * Retention rules (include/coffer/policy.h).  Each bucketed rule walks the
 * snapshots newest first and keeps the first one of every bucket (hour,
 * day, ISO week, month, year) until it has kept as many as it may: the
 * newest snapshot of each of the N newest buckets that have one, as
 * restic's keep-daily does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coffer/policy.h"

enum bucket { B_HOUR, B_DAY, B_WEEK, B_MONTH, B_YEAR };

static int64_t
bucket_of(int64_t time_ns, enum bucket b)
{
	int64_t secs = time_ns / 1000000000;
	time_t t;
	struct tm tm;
	char week[16];

	if (time_ns < 0 && time_ns % 1000000000)
		secs--;
	if (b == B_HOUR)
		return (secs >= 0 ? secs / 3600 : (secs - 3599) / 3600);
	t = (time_t)secs;
	gmtime_r(&t, &tm);
	switch (b) {
	case B_DAY:
		return ((int64_t)(tm.tm_year + 1900) * 1000 + tm.tm_yday);
	case B_WEEK:
		/* ISO 8601: the week-numbering year and its week. */
		strftime(week, sizeof(week), "%G%V", &tm);
		return (strtoll(week, NULL, 10));
	case B_MONTH:
		return ((int64_t)(tm.tm_year + 1900) * 100 + tm.tm_mon);
	default:
		return ((int64_t)(tm.tm_year + 1900));
	}
}

int
retention_any(const struct retention *r)
{
	return (r->last > 0 || r->hourly > 0 || r->daily > 0 ||
	    r->weekly > 0 || r->monthly > 0 || r->yearly > 0 ||
	    r->within > 0 || r->ntags > 0);
}

static void
keep_buckets(struct retention_snap *v, size_t n, int count, enum bucket b,
    unsigned reason)
{
	int64_t last = 0, key;
	int have = 0;
	size_t i;

	for (i = 0; i < n && count > 0; i++) {
		key = bucket_of(v[i].time_ns, b);
		if (have && key == last)
			continue;
		v[i].reasons |= reason;
		last = key;
		have = 1;
		count--;
	}
}

int
retention_has_tag(const char *tags, const char *tag)
{
	size_t n = strlen(tag);
	const char *p, *e;

	for (p = tags; p != NULL && *p != '\0'; p = e ? e + 1 : NULL) {
		e = strchr(p, ',');
		if (strncmp(p, tag, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return (1);
	}
	return (0);
}

void
retention_apply(const struct retention *r, struct retention_snap *v,
    size_t n)
{
	size_t i, k;

	for (i = 0; i < n; i++) {
		v[i].reasons = retention_has_tag(v[i].tags,
		    RETENTION_KEEP_TAG) ?
		    RETAIN_MARK : 0;
		for (k = 0; k < r->ntags; k++)
			if (retention_has_tag(v[i].tags, r->tags[k]))
				v[i].reasons |= RETAIN_TAG;
	}
	if (n == 0)
		return;
	for (i = 0; i < n && (int)i < r->last; i++)
		v[i].reasons |= RETAIN_LAST;
	keep_buckets(v, n, r->hourly, B_HOUR, RETAIN_HOURLY);
	keep_buckets(v, n, r->daily, B_DAY, RETAIN_DAILY);
	keep_buckets(v, n, r->weekly, B_WEEK, RETAIN_WEEKLY);
	keep_buckets(v, n, r->monthly, B_MONTH, RETAIN_MONTHLY);
	keep_buckets(v, n, r->yearly, B_YEAR, RETAIN_YEARLY);
	if (r->within > 0) {
		/* Relative to the newest snapshot, as restic does: an old
		 * repository that stopped getting backups keeps its last. */
		int64_t from = v[0].time_ns - (int64_t)(r->within * 1e9);

		for (i = 0; i < n; i++)
			if (v[i].time_ns >= from)
				v[i].reasons |= RETAIN_WITHIN;
	}
}

void
retention_reasons(unsigned mask, char *out, size_t size)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {
		{ RETAIN_LAST, "last" }, { RETAIN_HOURLY, "hourly" },
		{ RETAIN_DAILY, "daily" }, { RETAIN_WEEKLY, "weekly" },
		{ RETAIN_MONTHLY, "monthly" }, { RETAIN_YEARLY, "yearly" },
		{ RETAIN_WITHIN, "within" }, { RETAIN_CHAIN, "chain" },
		{ RETAIN_TAG, "tag" }, { RETAIN_MARK, "keep" },
		{ RETAIN_RUNNING, "running" },
	};
	size_t i, len = 0;
	int n;

	if (size == 0)
		return;
	out[0] = '\0';
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!(mask & names[i].bit))
			continue;
		n = snprintf(out + len, size - len, "%s%s", len ? "," : "",
		    names[i].name);
		if (n < 0 || (size_t)n >= size - len)
			break;
		len += (size_t)n;
	}
}
