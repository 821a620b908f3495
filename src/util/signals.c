#include <signal.h>
#include <string.h>

#include "coffer/signals.h"

static volatile sig_atomic_t caught;

static void
on_signal(int sig)
{
	if (caught != 0) {
		/* The second one: now, by its default action. */
		signal(sig, SIG_DFL);
		raise(sig);
		return;
	}
	caught = sig;
}

void
signals_install(void)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a blocking read returns EINTR, and the loops that
	 * retry it check the flag at their next safe point. */
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		(void)sigaction(sigs[i], &sa, NULL);
}

int
signals_caught(void)
{
	return (caught);
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
