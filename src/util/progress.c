#include <stdio.h>
#include <time.h>

#include "coffer/fmt.h"
#include "coffer/log.h"
#include "coffer/progress.h"

double
now_monotonic(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((double)ts.tv_sec + (double)ts.tv_nsec / 1e9);
}

int64_t
now_realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec);
}

void
progress_init(struct progress *p, const char *label, uint64_t total)
{
	p->label = label;
	p->files = p->bytes = 0;
	p->total_bytes = total;
	p->start = p->last = now_monotonic();
	p->enabled = log_watched();
	p->drawn = 0;
	p->unit = NULL;
}

void
progress_update(struct progress *p, uint64_t files, uint64_t bytes)
{
	char done[32], rate[32], eta[32] = "", line[256];
	double t, el, bps;

	p->files += files;
	p->bytes += bytes;
	if (!p->enabled)
		return;
	t = now_monotonic();
	if (t - p->last < 0.25)
		return;
	p->last = t;
	el = t - p->start;
	bps = el > 0 ? (double)p->bytes / el : 0;
	fmt_bytes(done, sizeof(done), (double)p->bytes);
	fmt_bytes(rate, sizeof(rate), bps);
	if (p->total_bytes && bps > 0 && p->bytes <= p->total_bytes) {
		double left = (double)(p->total_bytes - p->bytes) / bps;
		snprintf(eta, sizeof(eta), ", ETA %d:%02d",
		    (int)(left / 60), (int)left % 60);
	}
	snprintf(line, sizeof(line), "%s: %llu %s, %s, %s/s%s", p->label,
	    (unsigned long long)p->files, p->unit ? p->unit : "files", done,
	    rate, eta);
	log_progress(line);
	p->drawn = 1;
}

void
progress_done(struct progress *p)
{
	if (p->drawn)
		log_progress(NULL);
	p->drawn = 0;
}
