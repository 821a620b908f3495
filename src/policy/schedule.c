/*
 * Schedules and durations (include/coffer/policy.h): the slots of
 * "daily 02:00", "weekly sunday 02:00", "monthly first sunday 02:00",
 * in UTC, and what is due when a job was last done at a given time.
 * Day by day over at most two years: a few hundred gmtime_r calls, no
 * calendar arithmetic to get wrong.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "coffer/policy.h"

#define NS 1000000000LL
#define DAY 86400LL
#define SEARCH_DAYS 800		/* a little over two years */

int
policy_parse_duration(const char *s, double *secs)
{
	static const struct {
		const char *name;
		double mult;
	} units[] = {
		/* "ms" before "m": the longest unit that matches. */
		{ "ms", 0.001 }, { "s", 1 }, { "m", 60 }, { "h", 3600 },
		{ "d", 86400 }, { "w", 604800 },
	};
	const char *p = s;
	double total = 0, v;
	char *end;
	size_t i, n = 0;
	int parts = 0;

	while (*p != '\0') {
		if (!(*p >= '0' && *p <= '9') && *p != '.')
			return (-1);
		errno = 0;
		v = strtod(p, &end);
		if (errno || end == p || !isfinite(v) || v < 0)
			return (-1);
		p = end;
		if (*p == '\0') {
			/* A bare number is seconds, only on its own. */
			if (parts > 0)
				return (-1);
			total += v;
			parts++;
			break;
		}
		for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
			n = strlen(units[i].name);
			if (strncmp(p, units[i].name, n) == 0)
				break;
		}
		if (i == sizeof(units) / sizeof(units[0]))
			return (-1);
		total += v * units[i].mult;
		p += n;
		parts++;
	}
	if (parts == 0 || !(total > 0) || !isfinite(total))
		return (-1);
	*secs = total;
	return (0);
}

static const char *const wdays[7] = {
	"sunday", "monday", "tuesday", "wednesday", "thursday", "friday",
	"saturday"
};
static const char *const ords[4] = { "first", "second", "third", "fourth" };

static int
parse_wday(const char *w)
{
	int i;

	for (i = 0; i < 7; i++)
		if (strcasecmp(w, wdays[i]) == 0 ||
		    (strlen(w) == 3 && strncasecmp(w, wdays[i], 3) == 0))
			return (i);
	return (-1);
}

/* "HH:MM" (hourly: ":MM"). */
static int
parse_hhmm(const char *w, int hourly, int *h, int *m)
{
	int hh = 0, mm, len = 0;

	if (hourly) {
		if (sscanf(w, ":%2d%n", &mm, &len) != 1)
			return (-1);
	} else if (sscanf(w, "%2d:%2d%n", &hh, &mm, &len) != 2)
		return (-1);
	if ((size_t)len != strlen(w) || hh < 0 || hh > 23 || mm < 0 ||
	    mm > 59 || w[len - 3] != ':')
		return (-1);
	*h = hh;
	*m = mm;
	return (0);
}

int
schedule_parse(const char *s, struct schedule *out, const char **why)
{
	char copy[128], *w[6], *save = NULL, *t;
	int n = 0, i = 1, v;

	memset(out, 0, sizeof(*out));
	*why = "needs hourly [:MM], daily [HH:MM], weekly DAY [HH:MM], "
	    "monthly N [HH:MM] or monthly first|second|third|fourth|last "
	    "DAY [HH:MM]";
	if (strlen(s) >= sizeof(copy))
		return (-1);
	memcpy(copy, s, strlen(s) + 1);
	for (t = strtok_r(copy, " \t", &save); t != NULL && n < 6;
	    t = strtok_r(NULL, " \t", &save))
		w[n++] = t;
	if (n == 0 || t != NULL)
		return (-1);
	if (strcasecmp(w[0], "hourly") == 0)
		out->kind = SCHED_HOURLY;
	else if (strcasecmp(w[0], "daily") == 0)
		out->kind = SCHED_DAILY;
	else if (strcasecmp(w[0], "weekly") == 0) {
		out->kind = SCHED_WEEKLY;
		if (n < 2 || (out->wday = parse_wday(w[1])) < 0) {
			*why = "weekly needs a day: weekly sunday 02:00";
			return (-1);
		}
		i = 2;
	} else if (strcasecmp(w[0], "monthly") == 0) {
		out->kind = SCHED_MONTHLY;
		if (n < 2)
			return (-1);
		for (v = 0; v < 4; v++)
			if (strcasecmp(w[1], ords[v]) == 0)
				out->nth = v + 1;
		if (strcasecmp(w[1], "last") == 0)
			out->nth = -1;
		if (out->nth != 0) {
			if (n < 3 || (out->wday = parse_wday(w[2])) < 0) {
				*why = "monthly needs a day: monthly first "
				    "sunday 02:00, or monthly 1 02:00";
				return (-1);
			}
			i = 3;
		} else {
			char *end;
			long d = strtol(w[1], &end, 10);

			if (*end != '\0' || d < 1 || d > 31) {
				*why = "monthly needs a day of the month (1 to "
				    "31) or first|second|third|fourth|last "
				    "DAY";
				return (-1);
			}
			out->mday = (int)d;
			i = 2;
		}
	} else
		return (-1);
	if (i < n) {
		if (parse_hhmm(w[i], out->kind == SCHED_HOURLY, &out->hour,
		    &out->minute)) {
			*why = out->kind == SCHED_HOURLY ? "hourly takes the "
			    "minute as :MM (hourly :15)" : "the time of day "
			    "is HH:MM, 00:00 to 23:59, in UTC";
			return (-1);
		}
		i++;
	}
	if (i != n)
		return (-1);
	*why = NULL;
	return (0);
}

/* Whether day d (days since the epoch) has a slot. */
static int
day_matches(const struct schedule *s, int64_t d)
{
	struct tm tm, next;
	time_t t = (time_t)(d * DAY), t7 = (time_t)((d + 7) * DAY);

	if (s->kind == SCHED_DAILY)
		return (1);
	gmtime_r(&t, &tm);
	if (s->kind == SCHED_WEEKLY)
		return (tm.tm_wday == s->wday);
	if (s->mday > 0)
		return (tm.tm_mday == s->mday);
	if (tm.tm_wday != s->wday)
		return (0);
	if (s->nth > 0)
		return ((tm.tm_mday - 1) / 7 == s->nth - 1);
	gmtime_r(&t7, &next);
	return (next.tm_mon != tm.tm_mon);
}

static int64_t
floor_div(int64_t a, int64_t b)
{
	return (a >= 0 ? a / b : -((-a + b - 1) / b));
}

int64_t
schedule_last(const struct schedule *s, int64_t t)
{
	int64_t secs = floor_div(t, NS), d, slot;
	int k;

	if (s->kind == SCHED_NONE)
		return (INT64_MIN);
	if (s->kind == SCHED_HOURLY) {
		slot = floor_div(secs, 3600) * 3600 + s->minute * 60;
		if (slot > secs)
			slot -= 3600;
		return (slot * NS);
	}
	d = floor_div(secs, DAY);
	for (k = 0; k < SEARCH_DAYS; k++, d--) {
		slot = d * DAY + s->hour * 3600 + s->minute * 60;
		if (slot <= secs && day_matches(s, d))
			return (slot * NS);
	}
	return (INT64_MIN);
}

int64_t
schedule_next(const struct schedule *s, int64_t t)
{
	int64_t secs = floor_div(t, NS), d, slot;
	int k;

	if (s->kind == SCHED_NONE)
		return (INT64_MAX);
	if (s->kind == SCHED_HOURLY) {
		slot = floor_div(secs, 3600) * 3600 + s->minute * 60;
		if (slot * NS <= t)
			slot += 3600;
		return (slot * NS);
	}
	d = floor_div(secs, DAY);
	for (k = 0; k < SEARCH_DAYS; k++, d++) {
		slot = d * DAY + s->hour * 3600 + s->minute * 60;
		if (slot * NS > t && day_matches(s, d))
			return (slot * NS);
	}
	return (INT64_MAX);
}

void
schedule_format(const struct schedule *s, char *out, size_t size)
{
	switch (s->kind) {
	case SCHED_HOURLY:
		snprintf(out, size, "hourly :%02d", s->minute);
		break;
	case SCHED_DAILY:
		snprintf(out, size, "daily %02d:%02d", s->hour, s->minute);
		break;
	case SCHED_WEEKLY:
		snprintf(out, size, "weekly %s %02d:%02d", wdays[s->wday],
		    s->hour, s->minute);
		break;
	case SCHED_MONTHLY:
		if (s->mday > 0)
			snprintf(out, size, "monthly %d %02d:%02d", s->mday,
			    s->hour, s->minute);
		else
			snprintf(out, size, "monthly %s %s %02d:%02d",
			    s->nth > 0 ? ords[s->nth - 1] : "last",
			    wdays[s->wday], s->hour, s->minute);
		break;
	default:
		snprintf(out, size, "never");
	}
}

int
schedule_due(const struct schedule sched[3], const int64_t done[3],
    int64_t now, int64_t *slot)
{
	int64_t sl;
	int lvl, any = 0;

	*slot = now;
	for (lvl = 0; lvl < 3; lvl++) {
		if (sched[lvl].kind == SCHED_NONE)
			continue;
		any = 1;
		sl = schedule_last(&sched[lvl], now);
		if (sl != INT64_MIN && sl > done[lvl]) {
			*slot = sl;
			/* No full yet: nothing else can build on it. */
			return (done[0] == 0 ? 0 : lvl);
		}
	}
	/* Never done at all: a full now, the base of what follows. */
	if (any && done[0] == 0 && done[2] == 0)
		return (0);
	return (-1);
}
