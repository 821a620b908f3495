/*
 * What coffer watch captures (src/policy/watch.c, policy_watch_due), on a
 * fake clock: a step without its marker never, a marked one once settle
 * has passed since its marker and its last change, once only (the
 * snapshot that took it starts after it was ready), a marker that comes
 * late, a step rewritten after its capture, steps removed, and steps
 * ready together taken in one snapshot without being held off for ever.
 * Then the steps as src/fs/watch.c finds them in a real tree, and an
 * inotify event for a marker written.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coffer/fs-watch.h"
#include "coffer/log.h"
#include "coffer/policy.h"
#include "tap.h"
#include "testutil.h"

#define NS 1000000000LL
#define T0 (1796000000LL * NS)		/* some time in 2026 */

static struct policy_watch_verdict
judge(const struct policy_watch_step *v, size_t n, int64_t captured,
    int64_t now)
{
	struct policy_watch_verdict out;

	policy_watch_due(v, n, 2.0, 1.0, captured, now, &out);
	return (out);
}

static void
test_markers(void)
{
	struct policy_watch_step v[2] = {
		{ 0, 0, 0 },			/* being written */
		{ 1, T0, T0 - NS }		/* marked at T0 */
	};
	struct policy_watch_verdict r;

	r = judge(v, 1, 0, T0 + 100 * NS);
	ok(r.ndue == 0 && !r.capture && r.next_ns == INT64_MAX,
	    "a step without its marker is never due");
	r = judge(v, 2, 0, T0 + NS);
	ok(r.ndue == 0 && !r.capture && r.next_ns == T0 + 2 * NS,
	    "a marked step settles first; look again when it has");
	r = judge(v, 2, 0, T0 + 2 * NS);
	ok(r.ndue == 1 && r.capture && r.first_marked_ns == T0,
	    "settled: due, captured at once");
	r = judge(v, 2, T0 + 2 * NS, T0 + 50 * NS);
	ok(r.ndue == 0 && !r.capture,
	    "a snapshot that started once it was ready holds it");
	r = judge(v, 2, T0 + NS, T0 + 50 * NS);
	ok(r.ndue == 1 && r.capture,
	    "one that started before it was ready may not: due again");
	/* Written to after its marker: settle runs from the last change. */
	v[1].changed_ns = T0 + 5 * NS;
	r = judge(v, 2, 0, T0 + 6 * NS);
	ok(r.ndue == 0 && r.next_ns == T0 + 7 * NS,
	    "a change after the marker restarts settle");
	r = judge(v, 2, T0 + 3 * NS, T0 + 8 * NS);
	ok(r.ndue == 1 && r.capture,
	    "a step rewritten after its capture is due again");
}

static void
test_late_and_removed(void)
{
	struct policy_watch_step v[1] = { { 0, 0, 0 } };
	struct policy_watch_verdict r;
	int64_t captured = T0;

	/* Written long ago, marked only now: taken after settle from the
	 * marker. */
	r = judge(v, 1, captured, T0 + 100 * NS);
	ok(r.ndue == 0, "unmarked after a snapshot: nothing");
	v[0].marked = 1;
	v[0].marked_ns = T0 + 100 * NS;
	v[0].changed_ns = T0 - 1000 * NS;
	r = judge(v, 1, captured, T0 + 101 * NS);
	ok(r.ndue == 0 && r.next_ns == T0 + 102 * NS,
	    "a late marker: settle counts from it");
	r = judge(v, 1, captured, T0 + 102 * NS);
	ok(r.ndue == 1 && r.capture, "a late marker: then due");
	r = judge(v, 0, captured, T0 + 102 * NS);
	ok(r.ndue == 0 && !r.capture && r.next_ns == INT64_MAX,
	    "a step removed before its capture: nothing");
}

static void
test_debounce(void)
{
	struct policy_watch_step v[3] = {
		{ 1, T0, 0 },
		{ 1, T0 + NS / 2, 0 },
		{ 1, T0 + 30 * NS, 0 }
	};
	struct policy_watch_verdict r;
	int i, held = 0;

	r = judge(v, 2, 0, T0 + 2 * NS);
	ok(r.ndue == 1 && !r.capture && r.next_ns == T0 + 2 * NS + NS / 2,
	    "a step ready half a second later: wait for it");
	r = judge(v, 2, 0, T0 + 2 * NS + NS / 2);
	ok(r.ndue == 2 && r.capture && r.first_marked_ns == T0,
	    "both in one snapshot");
	r = judge(v, 3, 0, T0 + 3 * NS);
	ok(r.ndue == 2 && r.capture && r.next_ns == T0 + 32 * NS,
	    "a step far off does not hold the capture");
	/* A step marked every half second: the capture waits at most
	 * 2 * debounce after the first was ready. */
	for (i = 0; i < 40; i++) {
		struct policy_watch_step w[40];
		int j;

		for (j = 0; j < 40; j++) {
			w[j].marked = 1;
			w[j].marked_ns = T0 + j * NS / 2;
			w[j].changed_ns = 0;
		}
		r = judge(w, 40, 0, T0 + 2 * NS + i * NS / 4);
		if (r.capture)
			break;
		held++;
	}
	ok(r.capture && held <= 8, "steps without end: captured after %d "
	    "quarter seconds", held);
}

struct seen {
	int n, marked, changed;
	char names[256];
};

static int
want_all(void *arg, const struct fs_watch_step *s)
{
	(void)arg;
	(void)s;
	return (1);
}

static int
note_step(void *arg, const struct fs_watch_step *s)
{
	struct seen *sn = arg;
	size_t len = strlen(sn->names);

	sn->n++;
	sn->marked += s->marked;
	sn->changed += s->changed_ns > 0;
	snprintf(sn->names + len, sizeof(sn->names) - len, "%s%s",
	    len ? " " : "", s->name);
	return (0);
}

static void
touch(const char *dir, const char *name)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((f = fopen(path, "w")) == NULL)
		abort();
	fputs("x\n", f);
	fclose(f);
}

static void
test_tree(int inotify)
{
	char *const globs[] = { (char *)"step_*" };
	char tmpl[] = "/tmp/t-watch.XXXXXX", path[256];
	struct fs_watch *w;
	struct seen sn;

	if (mkdtemp(tmpl) == NULL)
		abort();
	snprintf(path, sizeof(path), "%s/run1", tmpl);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/run1/step_1", tmpl);
	mkdir(path, 0755);
	touch(path, "w.bin");
	touch(path, "COMPLETE");
	snprintf(path, sizeof(path), "%s/run1/step_2", tmpl);
	mkdir(path, 0755);
	touch(path, "w.bin");
	snprintf(path, sizeof(path), "%s/logs", tmpl);
	mkdir(path, 0755);
	w = fs_watch_open(tmpl, inotify);
	memset(&sn, 0, sizeof(sn));
	ok(fs_watch_scan(w, globs, 1, "COMPLETE", want_all, note_step,
	    &sn) == 0 && sn.n == 2 && sn.marked == 1 && sn.changed == 1 &&
	    (strcmp(sn.names, "run1/step_1 run1/step_2") == 0 ||
	    strcmp(sn.names, "run1/step_2 run1/step_1") == 0),
	    "%s: steps below the root, one marked (%s)",
	    inotify ? "inotify" : "scans", sn.names);
	if (!inotify) {
		ok(fs_watch_fd(w) == -1 && fs_watch_polled(w) != NULL &&
		    !fs_watch_drain(w), "scans only: no descriptor, and why");
	} else if (fs_watch_fd(w) == -1) {
		skip("no inotify here: %s", fs_watch_polled(w));
	} else {
		(void)fs_watch_drain(w);
		snprintf(path, sizeof(path), "%s/run1/step_2", tmpl);
		touch(path, "COMPLETE");
		usleep(50000);
		ok(fs_watch_drain(w) == 1 && !fs_watch_drain(w),
		    "inotify: the marker written in a step is an event");
	}
	fs_watch_close(w);
	rm_tree(tmpl);
}

int
main(void)
{
	log_level = -1;
	test_markers();
	test_late_and_removed();
	test_debounce();
	test_tree(0);
	test_tree(1);
	return (tap_done());
}
