/*
 * libFuzzer target for the policy parser (src/policy/policy.c, libinih
 * beneath it): any bytes are reported or taken, never a crash, a leak or
 * a read past a line.  Each input is a policy file, given to policy_load
 * through a memfd, as coffer run reads one.
 * Build and run: make fuzz (seeds: tests/fuzz/corpus/policy, written by
 * fuzz_seeds below through make fuzz-corpus).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coffer/log.h"
#include "coffer/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	int fd;

	if ((fd = memfd_create("policy", MFD_CLOEXEC)) == -1)
		return (0);
	if (write(fd, data, size) == (ssize_t)size) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		policy_free(policy_load(path));
	}
	close(fd);
	return (0);
}

#ifdef FUZZ_REPLAY
#include "replay.h"

static const char good[] =
	"[repository]\npath = /tmp/repo\nkey-file = /tmp/key\n"
	"[dataset d]\npath = /\nexclude = *.tmp\nfull = monthly first sunday "
	"02:00\ndifferential = weekly sun 02:00\nincremental = hourly :15\n"
	"checkpoints = step_*\nrequire = COMPLETE\nsettle = 10m\n"
	"keep-last = 3\n[retention]\nkeep-daily = 7 ; inline\n"
	"schedule = daily 04:00\nmax-unused = 5%\n"
	"[export off]\nto = /tmp/off\nincremental = daily 03:00\n"
	"datasets = d\n[drill w]\nschedule = monthly last friday 06:00\n"
	"sample = 10%\nrto = 2h\nrpo = 1d\nfrom = off\n"
	"[monitoring]\nmetrics-file = /tmp/m.prom\n";
static const char bad[] =
	"x = 1\n[dataset]\n[dataset a\n[nope b]\nno equals\n"
	"[dataset d]\npath = rel\nfull = weekly someday 25:99\n"
	"[drill e]\nfrom = nowhere\ndatasets = zz ..\n[export]\n";

int
fuzz_seeds(const char *dir)
{
	char longline[5000];

	memset(longline, 'a', sizeof(longline));
	memcpy(longline, "[dataset d]\nexclude = ", 22);
	longline[sizeof(longline) - 1] = '\n';
	if (fuzz_write_seed(dir, "good", good, sizeof(good) - 1) ||
	    fuzz_write_seed(dir, "bad", bad, sizeof(bad) - 1) ||
	    fuzz_write_seed(dir, "long-line", longline, sizeof(longline)) ||
	    fuzz_write_seed(dir, "nul", "[dataset d]\npath = /\0x\n", 22) ||
	    fuzz_write_seed(dir, "empty", "", 0))
		return (-1);
	return (0);
}
#endif
