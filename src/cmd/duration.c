/*
 * Option values the commands share: durations ("90s", "30m", "1h30m"),
 * percentages ("10%"), times ("2026-11-01T02:15:00Z"), --since.
 */
#include <stdio.h>

#include "cmd.h"
#include "coffer/fmt.h"
#include "coffer/log.h"
#include "coffer/policy.h"

int
cmd_parse_duration(const char *opt, const char *s, double *secs)
{
	if (policy_parse_duration(s, secs) == 0)
		return (0);
	log_error("option '%s' needs a duration such as 90s, 30m, 2h or "
	    "1h30m, not '%s'", opt, s);
	return (-1);
}

int
cmd_parse_percent(const char *opt, const char *s, int zero_ok, double *pct)
{
	if (policy_parse_percent(s, zero_ok, pct) == 0)
		return (0);
	log_error("option '%s' needs a percentage %s, such as 10%%, not '%s'",
	    opt, zero_ok ? "from 0 to 100" : "above 0 and at most 100", s);
	return (-1);
}

void
cmd_fmt_seconds(char *out, size_t len, double s)
{
	long long t;

	if (s < 0) {
		snprintf(out, len, "-");
		return;
	}
	if (s < 60) {
		snprintf(out, len, "%.1f s", s);
		return;
	}
	t = (long long)(s + 0.5);
	if (t < 3600)
		snprintf(out, len, "%lldm%02llds", t / 60, t % 60);
	else if (t < 86400)
		snprintf(out, len, "%lldh%02lldm", t / 3600, t % 3600 / 60);
	else
		snprintf(out, len, "%lldd%02lldh", t / 86400, t % 86400 / 3600);
}

int
cmd_parse_time(const char *opt, const char *s, int64_t *ns)
{
	if (fmt_parse_time(s, ns, NULL) == 0)
		return (0);
	log_error("%s: '%s' is not a time (2026-11-01T02:15:00Z, or with an "
	    "offset: +01:00)", opt, s);
	return (-1);
}

int
cmd_parse_since(const char *opt, const char *s, int64_t now_ns,
    int64_t *ns)
{
	double ago;

	if (policy_parse_duration(s, &ago) == 0) {
		*ns = now_ns - (int64_t)(ago * 1e9);
		return (0);
	}
	if (fmt_parse_time(s, ns, NULL) == 0)
		return (0);
	log_error("%s: '%s' is neither a duration ago (7d, 12h, 1h30m) nor a "
	    "time in UTC (2026-12-01T00:00:00Z)", opt, s);
	return (-1);
}
