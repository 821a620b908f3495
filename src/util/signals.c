#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "coffer/signals.h"

/*
 * Atomics, not volatile sig_atomic_t: the handler runs on whichever
 * thread the kernel picks, and the flag is read by every thread that
 * checks for a stop.  volatile makes that safe within one thread only;
 * a lock-free atomic is safe across threads and in a handler.
 */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "a handler may use only lock-free atomics");
static atomic_int caught;
static int installed;
/* The child that stops with us (signals_child), or 0. */
static atomic_int child;

/* Its grace after SIGTERM, in seconds, before SIGKILL. */
#define CHILD_GRACE 1

static void
on_alarm(int sig)
{
	pid_t pid = (pid_t)atomic_load(&child);

	(void)sig;
	if (pid > 0)
		kill(pid, SIGKILL);
}

static void
on_signal(int sig)
{
	pid_t pid = (pid_t)atomic_load(&child);

	/* Two signals on two threads at once: one of them is the first. */
	if (atomic_exchange(&caught, sig) != 0) {
		/* The second one: now, by its default action, and the
		 * child with us. */
		if (pid > 0)
			kill(pid, SIGKILL);
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	/*
	 * A child that hangs (an rclone waiting on the network) would keep
	 * the thread that reads or writes its pipe waiting, the writer lock
	 * held: it is asked to end, then made to.  Its pipe then ends and
	 * the run stops as after an error.
	 */
	if (pid > 0) {
		kill(pid, SIGTERM);
		alarm(CHILD_GRACE);
	}
}

/*
 * Without signals_install, a signal ends the process by its default
 * action: the child (signals_child) is ended first, at once.
 */
static void
on_fatal(int sig)
{
	pid_t pid = (pid_t)atomic_load(&child);

	if (pid > 0)
		kill(pid, SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

static const int stop_sigs[] = { SIGINT, SIGTERM, SIGHUP };
#define NSTOP (sizeof(stop_sigs) / sizeof(stop_sigs[0]))

void
signals_install(void)
{
	struct sigaction sa;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a blocking read returns EINTR, and the loops that
	 * retry it check the flag at their next safe point. */
	for (i = 0; i < NSTOP; i++)
		(void)sigaction(stop_sigs[i], &sa, NULL);
	installed = 1;
}

int
signals_caught(void)
{
	return (atomic_load(&caught));
}

void
signals_child(pid_t pid)
{
	static int alarm_set;
	struct sigaction sa, old;
	size_t i;

	if (pid > 0 && !alarm_set) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_alarm;
		sigemptyset(&sa.sa_mask);
		(void)sigaction(SIGALRM, &sa, NULL);
		if (!installed) {
			sa.sa_handler = on_fatal;
			for (i = 0; i < NSTOP; i++)
				/* One ignored (nohup) stays ignored. */
				if (sigaction(stop_sigs[i], NULL, &old) == 0 &&
				    old.sa_handler == SIG_DFL)
					(void)sigaction(stop_sigs[i], &sa,
					    NULL);
		}
		alarm_set = 1;
	}
	if (pid <= 0) {
		atomic_store(&child, 0);
		alarm(0);
		return;
	}
	atomic_store(&child, pid);
	/* A signal that came before the child was known. */
	if (atomic_load(&caught) != 0) {
		kill(pid, SIGTERM);
		alarm(CHILD_GRACE);
	}
}

const char *
signals_name(int sig)
{
	switch (sig) {
	case SIGINT: return ("SIGINT");
	case SIGTERM: return ("SIGTERM");
	case SIGHUP: return ("SIGHUP");
	default: return ("a signal");
	}
}
