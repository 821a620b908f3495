/*
 * What coffer watch captures (include/coffer/policy.h, policy_watch_due):
 * which steps of a checkpoint dataset are complete and not yet in a
 * snapshot, and when to look again.  No file system, no clock, no
 * catalog: the engine brings what it saw.
 */
#include <stdint.h>

#include "coffer/policy.h"

#define NS 1000000000.0

int64_t
policy_watch_ready(const struct policy_watch_step *s, double settle)
{
	int64_t t = s->marked_ns > s->changed_ns ? s->marked_ns :
	    s->changed_ns;

	return (t + (int64_t)(settle * NS));
}

void
policy_watch_due(const struct policy_watch_step *v, size_t n,
    double settle, double debounce, int64_t captured_ns, int64_t now,
    struct policy_watch_verdict *out)
{
	int64_t ready, pending = INT64_MAX, db = (int64_t)(debounce * NS);
	size_t i;

	out->ndue = 0;
	out->capture = 0;
	out->first_ready_ns = INT64_MAX;
	out->first_marked_ns = INT64_MAX;
	out->next_ns = INT64_MAX;
	for (i = 0; i < n; i++) {
		if (!v[i].marked)
			continue;
		ready = policy_watch_ready(&v[i], settle);
		if (ready <= captured_ns)
			continue;
		if (ready > now) {
			if (ready < pending)
				pending = ready;
			continue;
		}
		out->ndue++;
		if (ready < out->first_ready_ns)
			out->first_ready_ns = ready;
		if (v[i].marked_ns < out->first_marked_ns)
			out->first_marked_ns = v[i].marked_ns;
	}
	out->next_ns = pending;
	if (out->ndue == 0)
		return;
	/* Another step about to be ready joins this snapshot, within a
	 * bound: a trainer that marks a step every second must not hold
	 * the capture off for ever. */
	if (pending - now <= db && now < out->first_ready_ns + 2 * db) {
		if (out->first_ready_ns + 2 * db < out->next_ns)
			out->next_ns = out->first_ready_ns + 2 * db;
		return;
	}
	out->capture = 1;
}
