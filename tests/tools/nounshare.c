/*
 * nounshare COMMAND [ARG...]: run COMMAND with unshare(2) refused (EPERM),
 * as a seccomp filter in some containers does, so that tests reach the
 * code paths for it.  Exits 125 when the filter cannot be installed.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#else
#error "nounshare: unknown architecture"
#endif

int
main(int argc, char **argv)
{
	struct sock_filter f[] = {
		/* Another architecture's calls: allowed, as they come. */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
		    offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_unshare, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {
		.len = (unsigned short)(sizeof(f) / sizeof(f[0])),
		.filter = f,
	};

	if (argc < 2) {
		fprintf(stderr, "usage: nounshare COMMAND [ARG...]\n");
		return (2);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		fprintf(stderr, "nounshare: cannot install the filter: %s\n",
		    strerror(errno));
		return (125);
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "nounshare: cannot run '%s': %s\n", argv[1],
	    strerror(errno));
	return (127);
}
