#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "coffer/log.h"
#include "coffer/tuning.h"

static struct tuning t;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* The variable's value, NULL when unset or empty. */
static const char *
env(const char *name)
{
	const char *v = getenv(name);

	return (v != NULL && *v != '\0' ? v : NULL);
}

static int
env_is(const char *name, const char *value)
{
	const char *v = env(name);

	return (v != NULL && strcmp(v, value) == 0);
}

/* A count above 0, else 0. */
static long long
env_count(const char *name)
{
	const char *v = env(name);
	long long n = v != NULL ? atoll(v) : 0;

	return (n > 0 ? n : 0);
}

/*
 * The test hooks exist only in the binary the tests run (the Makefile
 * compiles this file a second time with COFFER_TEST_HOOKS for
 * $(BUILD)/test/coffer): some run a shell command or damage what a
 * restore reads back, which an installed coffer must never do whatever
 * its environment says.  Without it, their fields stay 0 and NULL.
 */
static void
load_test_hooks(void)
{
#ifdef COFFER_TEST_HOOKS
	t.test_before_change_check = env("COFFER_TEST_BEFORE_CHANGE_CHECK");
	t.test_before_dir_metadata = env("COFFER_TEST_BEFORE_DIR_METADATA");
	t.test_before_hardlink = env("COFFER_TEST_BEFORE_HARDLINK");
	t.test_before_drill_check = env("COFFER_TEST_BEFORE_DRILL_CHECK");
	t.test_prune_crash = env("COFFER_TEST_PRUNE_CRASH");
	t.test_change_restored = getenv("COFFER_TEST_CHANGE_RESTORED") != NULL;
	t.test_raise = env("COFFER_TEST_RAISE");
	t.test_error = getenv("COFFER_TEST_ERROR") != NULL;
	t.test_exits = env("COFFER_TEST_EXITS");
#endif
}

static void
load(void)
{
	memset(&t, 0, sizeof(t));
	t.aead_libsodium = env_is("COFFER_AEAD", "libsodium");
	t.blake2b_x8 = !env_is("COFFER_BLAKE2B_X8", "0");
	t.read_back = env_is("COFFER_READ_BACK", "always") ?
	    TUNING_READ_BACK_ALWAYS : env_is("COFFER_READ_BACK", "never") ?
	    TUNING_READ_BACK_NEVER : TUNING_READ_BACK_AUTO;
	t.walk_sync = env_is("COFFER_WALK_AHEAD", "0");
	t.watch_no_inotify = env_is("COFFER_WATCH_INOTIFY", "0");
	t.pack_size = (uint64_t)env_count("COFFER_PACK_SIZE");
	t.record_part_entries = (size_t)env_count(
	    "COFFER_RECORD_PART_ENTRIES");
	t.record_image_bytes = (size_t)env_count(
	    "COFFER_RECORD_IMAGE_BYTES");
	t.kdf_max_memory = env("COFFER_KDF_MAX_MEMORY");
	t.s3_retry_seconds = (double)env_count("COFFER_S3_RETRY_SECONDS");
	t.lease_seconds = (double)env_count("COFFER_LEASE_SECONDS");
	/* 0 is a margin (a test's, or a store read back at once): unset is
	 * the default. */
	t.prune_margin = env("COFFER_PRUNE_MARGIN") == NULL ? -1 :
	    atoll(env("COFFER_PRUNE_MARGIN")) > 0 ?
	    (double)atoll(env("COFFER_PRUNE_MARGIN")) : 0;
	load_test_hooks();
}

const struct tuning *
tuning_get(void)
{
	pthread_once(&once, load);
	return (&t);
}

void
tuning_reload(void)
{
	pthread_once(&once, load);
	load();
}

#ifdef COFFER_TEST_HOOKS
static void (*step_hook)(const char *point);

void
tuning_set_step_hook(void (*fn)(const char *point))
{
	step_hook = fn;
}
#endif

void
tuning_raise_at(const char *point)
{
#ifdef COFFER_TEST_HOOKS
	static atomic_long passed;
	const char *spec = tuning_get()->test_raise, *n, *sig;
	size_t len = strlen(point);
	long want;
	int signo;

	if (step_hook != NULL)
		step_hook(point);
	if (spec == NULL || strncmp(spec, point, len) != 0 || spec[len] != ':')
		return;
	n = spec + len + 1;
	if ((want = atol(n)) <= 0 || (sig = strchr(n, ':')) == NULL)
		return;
	sig++;
	signo = strcmp(sig, "INT") == 0 ? SIGINT : strcmp(sig, "TERM") == 0 ?
	    SIGTERM : strcmp(sig, "HUP") == 0 ? SIGHUP : strcmp(sig, "KILL") ==
	    0 ? SIGKILL : strcmp(sig, "STOP") == 0 ? SIGSTOP : 0;
	if (signo != 0 && atomic_fetch_add(&passed, 1) + 1 == want)
		raise(signo);
#else
	(void)point;
#endif
}

void
tuning_run_hook(const char *name, const char *cmd, const char *var,
    const char *value)
{
#ifdef COFFER_TEST_HOOKS
	if (cmd == NULL)
		return;
	if ((var != NULL && setenv(var, value, 1)) || system(cmd) != 0)
		log_warn("%s failed", name);
#else
	(void)name, (void)cmd, (void)var, (void)value;
#endif
}
