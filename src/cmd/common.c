#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/engine-open.h"
#include "coffer/log.h"
#include "coffer/signals.h"
#include "coffer/status.h"

#define PASS_MAX 1024
#define PASS_ENV "COFFER_PASSPHRASE"

extern char **environ;

int
cmd_secrets_init(struct global_opts *g)
{
	static const struct rlimit no_core = { 0, 0 };
	const size_t pre = sizeof(PASS_ENV "=") - 1;
	char **e, *v;
	size_t n;
	int rc = 0;

	/*
	 * Keys and passphrases are about to be held: no core dump of them,
	 * and no same-user process reading our memory or environment
	 * (PR_SET_DUMPABLE 0 denies ptrace and /proc/PID/{mem,environ} to
	 * all but root; RLIMIT_CORE 0 stops the core file that
	 * fs.suid_dumpable = 2 would still write).  Secrets are in
	 * sodium_malloc memory as well, which is locked and left out of
	 * cores (MADV_DONTDUMP).  Not fatal: the run is as safe as before.
	 */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) ||
	    setrlimit(RLIMIT_CORE, &no_core))
		log_warn_errno("cannot disable core dumps");

	/*
	 * COFFER_PASSPHRASE moves into locked memory and leaves the
	 * environment: children would inherit it, and /proc/PID/environ
	 * shows the bytes the process started with, so they are wiped, not
	 * only unset.  The first definition wins, as with getenv.
	 */
	g->env_pass = NULL;
	g->env_passlen = 0;
	for (e = environ; e != NULL && *e != NULL; e++) {
		if (strncmp(*e, PASS_ENV "=", pre) != 0)
			continue;
		v = *e + pre;
		n = strlen(v);
		if (g->env_pass == NULL && rc == 0) {
			if ((g->env_pass = engine_secret_new(PASS_MAX + 1)) ==
			    NULL)
				rc = -1;
			else {
				g->env_passlen = n < PASS_MAX ? n : PASS_MAX;
				memcpy(g->env_pass, v, g->env_passlen);
				g->env_pass[g->env_passlen] = '\0';
			}
		}
		explicit_bzero(v, n);
	}
	unsetenv(PASS_ENV);
	return (rc);
}

void
cmd_secrets_release(struct global_opts *g)
{
	engine_secret_free(g->env_pass);
	g->env_pass = NULL;
	g->env_passlen = 0;
}

void
cmd_passphrase_free(char *pass, size_t len)
{
	/* Freeing wipes all of it. */
	engine_secret_free(pass);
}

/*
 * Read a line from the terminal without echo into out (outlen bytes, NUL
 * terminated, without the newline).  read(2) on the descriptor, not stdio,
 * whose buffer would keep a copy of the line.
 */
static int
read_tty(const char *prompt, char *out, size_t outlen)
{
	struct termios old, quiet;
	size_t n = 0;
	ssize_t r;
	char c;
	int fd;

	if ((fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1)
		return (-1);
	if (tcgetattr(fd, &old)) {
		close(fd);
		return (-1);
	}
	quiet = old;
	quiet.c_lflag &= ~(tcflag_t)ECHO;
	quiet.c_lflag |= ECHONL;
	(void)!write(fd, prompt, strlen(prompt));
	tcsetattr(fd, TCSAFLUSH, &quiet);
	/* One byte at a time: the rest of the line stays in the kernel. */
	for (;;) {
		r = read(fd, &c, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || c == '\n')
			break;
		if (n + 1 < outlen)
			out[n++] = c;
	}
	c = '\0';
	tcsetattr(fd, TCSAFLUSH, &old);
	close(fd);
	out[n] = '\0';
	return (r < 0 || (r == 0 && n == 0) ? -1 : 0);
}

/*
 * The first line of the passphrase file path into out (PASS_MAX + 2
 * bytes), which is also the read buffer: the rest of the file is wiped
 * there, and the file is refused unless only its owner may read or write
 * it, as ssh refuses an unprotected private key.
 */
static int
read_pass_file(const char *path, char *out, size_t *len)
{
	struct stat st;
	size_t n = 0;
	ssize_t r;
	int fd;

	if ((fd = open(path, O_RDONLY | O_NOCTTY | O_CLOEXEC)) == -1) {
		log_errno("cannot open passphrase file '%s'", path);
		return (-1);
	}
	if (fstat(fd, &st)) {
		log_errno("cannot stat passphrase file '%s'", path);
		goto err;
	}
	if (S_ISREG(st.st_mode) && (st.st_mode & 077) != 0) {
		log_error("passphrase file '%s' is open to others (mode %04o): "
		    "chmod 600 '%s'", path, (unsigned)(st.st_mode & 07777),
		    path);
		goto err;
	}
	while (n < PASS_MAX + 1) {
		r = read(fd, out + n, PASS_MAX + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			log_errno("cannot read passphrase file '%s'", path);
			goto err;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > PASS_MAX) {
		log_error("passphrase file '%s' is too large (more than %d "
		    "bytes)", path, PASS_MAX);
		goto err;
	}
	close(fd);
	out[n] = '\0';
	*len = strcspn(out, "\r\n");
	explicit_bzero(out + *len, n - *len);
	return (0);
err:
	explicit_bzero(out, n);
	close(fd);
	return (-1);
}

int
cmd_passphrase(const struct global_opts *g, const char *prompt, int confirm,
    char **pass, size_t *len)
{
	char *p, *again;
	size_t n;

	/* Room for a line of PASS_MAX bytes, and for a file one byte over. */
	if ((p = engine_secret_new(PASS_MAX + 2)) == NULL)
		return (STATUS_ERROR);
	memset(p, 0, PASS_MAX + 2);
	if (g->passphrase_file) {
		if (read_pass_file(g->passphrase_file, p, &n)) {
			cmd_passphrase_free(p, 0);
			return (STATUS_REPO);
		}
	} else if (g->env_pass != NULL) {
		n = g->env_passlen;
		memcpy(p, g->env_pass, n);
	} else {
		if (read_tty(prompt, p, PASS_MAX + 1)) {
			log_error("no passphrase: use --key-file, "
			    "--passphrase-file or COFFER_PASSPHRASE when there "
			    "is no terminal");
			cmd_passphrase_free(p, 0);
			return (STATUS_REPO);
		}
		if (confirm) {
			if ((again = engine_secret_new(PASS_MAX + 1)) == NULL ||
			    read_tty("enter the passphrase again: ", again,
			    PASS_MAX + 1) || strcmp(p, again) != 0) {
				log_error("the passphrases do not match");
				cmd_passphrase_free(again, 0);
				cmd_passphrase_free(p, 0);
				return (STATUS_USAGE);
			}
			cmd_passphrase_free(again, 0);
		}
		n = strlen(p);
	}
	if (n == 0) {
		log_error("the passphrase is empty");
		cmd_passphrase_free(p, 0);
		return (STATUS_USAGE);
	}
	*pass = p;
	*len = n;
	return (STATUS_OK);
}

/* The last cmd_open's catalog update left out what it could not read. */
static int catalog_damage;

int
cmd_catalog_damaged(void)
{
	return (catalog_damage);
}

int
cmd_open(const struct global_opts *g, int flags, struct repo **rp,
    struct catalog **cp)
{
	return (cmd_open_checked(g, flags, NULL, NULL, rp, cp));
}

int
cmd_open_need_read(const void *arg, struct repo *r)
{
	return (engine_need_read(r, arg) ? STATUS_USAGE : STATUS_OK);
}

int
cmd_open_need_full(const void *arg, struct repo *r)
{
	return (engine_need_full(r, arg) ? STATUS_USAGE : STATUS_OK);
}

/* engine_open's passphrase: the global options', else the terminal. */
static int
open_passphrase(void *arg, char **pass, size_t *len)
{
	return (cmd_passphrase(arg, "passphrase: ", 0, pass, len));
}

double
cmd_forget_wait(const struct global_opts *g)
{
	return (g->wait != 0 ? g->wait : FORGET_WAIT);
}

int
cmd_open_checked(const struct global_opts *g, int flags,
    int (*check)(const void *arg, struct repo *r), const void *arg,
    struct repo **rp, struct catalog **cp)
{
	struct engine_open_opts o;
	int rc, damaged;

	*rp = NULL;
	if (cp)
		*cp = NULL;
	if (g->repo == NULL) {
		log_error("no repository given: use -r REPO or COFFER_REPO");
		return (STATUS_USAGE);
	}
	memset(&o, 0, sizeof(o));
	o.repo = g->repo;
	o.catalog = g->catalog;
	o.key_file = g->key_file;
	o.unlock = (flags & OPEN_KEYS) != 0;
	o.want_catalog = cp != NULL;
	o.write = (flags & OPEN_WRITE) != 0;
	o.exclusive = (flags & OPEN_EXCL) != 0;
	o.rotate = (flags & OPEN_ROTATE) != 0;
	o.wait = g->wait;
	o.forget_wait = cmd_forget_wait(g);
	o.passphrase = open_passphrase;
	o.pass_free = cmd_passphrase_free;
	o.check = check;
	o.check_arg = arg;
	o.arg = (void *)(uintptr_t)g;
	/* The repository's error, its store's (which may pass: the
	 * status of an I/O error), or what a callback said. */
	if ((rc = engine_open(&o, rp, cp, &damaged)) != 0)
		return (rc == ENGINE_OPEN_STORE ? STATUS_ERROR :
		    rc < 0 ? STATUS_REPO : rc);
	if (damaged)
		catalog_damage = 1;
	return (STATUS_OK);
}

void
cmd_close(struct repo *r, struct catalog *c)
{
	engine_close(r, c);
}

int
cmd_open_scratch(void *arg, const char *repo, const char *catalog,
    struct repo **r, struct catalog **c)
{
	struct global_opts g = *(const struct global_opts *)arg;

	g.repo = repo;
	g.catalog = catalog;
	return (cmd_open(&g, OPEN_KEYS | OPEN_WRITE, r, c) == STATUS_OK ? 0 :
	    -1);
}

int
cmd_status(enum engine_result res)
{
	switch (res) {
	case ENGINE_OK:
		return (STATUS_OK);
	case ENGINE_WARN:
		return (STATUS_WARN);
	case ENGINE_REFUSED:
		return (STATUS_USAGE);
	case ENGINE_DAMAGED:
		return (STATUS_INTEGRITY);
	case ENGINE_CORRUPTION:
		return (STATUS_CORRUPTION);
	case ENGINE_OBJECTIVE:
		return (STATUS_OBJECTIVE);
	case ENGINE_INTERRUPTED:
		/* What a shell reports for a process the signal ended. */
		if (signals_caught())
			return (128 + signals_caught());
		break;
	case ENGINE_ERROR:
		break;
	}
	return (STATUS_ERROR);
}

int
cmd_repo_failure(const struct engine_store_mark *m)
{
	return (engine_store_failed(m) ? STATUS_ERROR : STATUS_REPO);
}

int
cmd_snapshot_paths(char **paths, size_t n)
{
	size_t i, len;

	for (i = 0; i < n; i++) {
		char *p = paths[i];

		while ((len = strlen(p)) > 1 && p[len - 1] == '/')
			p[len - 1] = '\0';
		if (!entry_path_is_safe(p)) {
			log_error("bad path '%s': give paths relative to the "
			    "snapshot's root", p);
			return (STATUS_USAGE);
		}
	}
	return (STATUS_OK);
}

int
cmd_push_arg(char ***v, size_t *n, char *arg)
{
	char **p;

	if ((p = reallocarray(*v, *n + 1, sizeof(*p))) == NULL) {
		log_error("out of memory");
		return (-1);
	}
	p[(*n)++] = arg;
	*v = p;
	return (0);
}

long long
cmd_parse_num(const char *opt, const char *s)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end != '\0' || v < 0) {
		log_error("option '%s' needs a non-negative number, not '%s'",
		    opt, s);
		return (-1);
	}
	return (v);
}

int
cmd_parse_kdf_memory(const char *s, uint64_t *bytes)
{
	long long mib;

	if ((mib = cmd_parse_num("--kdf-memory", s)) < 0)
		return (-1);
	if (mib < 8 || mib > 4096) {
		log_error("--kdf-memory must be between 8 and 4096 MiB (above "
		    "1024, every host that opens the repository needs "
		    "COFFER_KDF_MAX_MEMORY)");
		return (-1);
	}
	*bytes = (uint64_t)mib << 20;
	return (0);
}

int
cmd_parse_threads(const char *s)
{
	long long n = cmd_parse_num("--threads", s);

	if (n < 1 || n > 64) {
		if (n >= 0)
			log_error("--threads takes 1 to 64");
		return (-1);
	}
	return ((int)n);
}

const struct cmd_option cmd_listing_options[] = {
	CMD_OPT_FLAG('j', "json", "print a JSON array"),
	CMD_OPT_END
};

int
cmd_listing(int argc, char **argv, const struct global_opts *g,
    const char *name, int (*list)(struct catalog *c, const char *dataset,
    struct cmd_listing *ls))
{
	struct cmd_listing ls = { .json = 0 };
	const char *dataset = NULL;
	struct repo *r;
	struct catalog *c;
	int ch, st;

	while ((ch = cmd_getopt(argc, argv, cmd_listing_options)) != -1) {
		if (ch != 'j')
			return (cmd_usage_error(name));
		ls.json = 1;
	}
	if (argc - optind > 1)
		return (cmd_usage_error(name));
	if (optind < argc)
		dataset = argv[optind];
	/* Catalog rows only: no lock (the key, to bring it up to date). */
	if ((st = cmd_open(g, 0, &r, &c)) != STATUS_OK)
		return (st);
	if (ls.json) {
		jw_init(&ls.j, stdout);
		jw_begin_array_lines(&ls.j);
	}
	if (list(c, dataset, &ls) < 0)
		st = STATUS_REPO;
	if (ls.json)
		jw_end_array(&ls.j);
	cmd_close(r, c);
	return (st);
}

int
cmd_snapshot(struct catalog *c, const char *name, struct catalog_snapshot *s)
{
	int rc;

	if ((rc = engine_snapshot_find(c, name, s)) > 0)
		return (STATUS_OK);
	return (rc < 0 ? STATUS_REPO : STATUS_USAGE);
}
