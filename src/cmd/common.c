#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/engine.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/status.h"

#define PASS_MAX 1024

void
cmd_passphrase_free(char *pass, size_t len)
{
	if (pass == NULL)
		return;
	explicit_bzero(pass, len + 1);
	free(pass);
}

/* Read a line from the terminal without echo. */
static int
read_tty(const char *prompt, char *out, size_t outlen)
{
	struct termios old, quiet;
	size_t n;
	FILE *tty;
	int ok;

	if ((tty = fopen("/dev/tty", "r+")) == NULL)
		return (-1);
	if (tcgetattr(fileno(tty), &old)) {
		fclose(tty);
		return (-1);
	}
	quiet = old;
	quiet.c_lflag &= ~(tcflag_t)ECHO;
	quiet.c_lflag |= ECHONL;
	fputs(prompt, tty);
	fflush(tty);
	tcsetattr(fileno(tty), TCSAFLUSH, &quiet);
	ok = fgets(out, (int)outlen, tty) != NULL;
	tcsetattr(fileno(tty), TCSAFLUSH, &old);
	fclose(tty);
	if (!ok)
		return (-1);
	n = strcspn(out, "\n");
	out[n] = '\0';
	return (0);
}

int
cmd_passphrase(const struct global_opts *g, const char *prompt, int confirm,
    char **pass, size_t *len)
{
	char *p, *again;
	const char *env;
	unsigned char *data;
	size_t n;

	if ((p = calloc(1, PASS_MAX + 1)) == NULL) {
		log_error("out of memory");
		return (STATUS_ERROR);
	}
	if (g->passphrase_file) {
		if (fsutil_read_file(g->passphrase_file, PASS_MAX, &data, &n)) {
			free(p);
			return (STATUS_REPO);
		}
		/* The first line is the passphrase. */
		n = strcspn((char *)data, "\r\n");
		memcpy(p, data, n);
		explicit_bzero(data, n);
		free(data);
	} else if ((env = getenv("COFFER_PASSPHRASE")) != NULL) {
		n = strlen(env);
		if (n > PASS_MAX)
			n = PASS_MAX;
		memcpy(p, env, n);
	} else {
		if (read_tty(prompt, p, PASS_MAX + 1)) {
			log_error("no passphrase: use --key-file, "
			    "--passphrase-file or COFFER_PASSPHRASE when there "
			    "is no terminal");
			free(p);
			return (STATUS_REPO);
		}
		if (confirm) {
			if ((again = calloc(1, PASS_MAX + 1)) == NULL ||
			    read_tty("enter the passphrase again: ", again,
			    PASS_MAX + 1) || strcmp(p, again) != 0) {
				log_error("the passphrases do not match");
				cmd_passphrase_free(again, PASS_MAX);
				cmd_passphrase_free(p, PASS_MAX);
				return (STATUS_USAGE);
			}
			cmd_passphrase_free(again, PASS_MAX);
		}
		n = strlen(p);
	}
	if (n == 0) {
		log_error("the passphrase is empty");
		cmd_passphrase_free(p, PASS_MAX);
		return (STATUS_USAGE);
	}
	*pass = p;
	*len = n;
	return (STATUS_OK);
}

int
cmd_open(const struct global_opts *g, int flags, struct repo **rp,
    struct catalog **cp)
{
	struct repo *r;
	struct catalog *c = NULL;
	char *pass = NULL, *catpath = NULL;
	size_t passlen = 0;
	int st;

	*rp = NULL;
	if (cp)
		*cp = NULL;
	if (g->repo == NULL) {
		log_error("no repository given: use -r REPO or COFFER_REPO");
		return (STATUS_USAGE);
	}
	if ((r = repo_open(g->repo)) == NULL)
		return (STATUS_REPO);
	if (flags & OPEN_KEYS) {
		if (g->key_file == NULL &&
		    (st = cmd_passphrase(g, "passphrase: ", 0, &pass,
		    &passlen)) != STATUS_OK)
			goto err;
		if (repo_unlock(r, g->key_file, pass, passlen)) {
			st = STATUS_REPO;
			goto err;
		}
		cmd_passphrase_free(pass, passlen);
		pass = NULL;
	}
	if (cp) {
		if (g->catalog)
			catpath = strdup(g->catalog);
		else
			catpath = catalog_default_path(repo_id_hex(r));
		if (catpath == NULL) {
			log_error("cannot find a place for the catalog (set "
			    "--catalog or XDG_STATE_HOME)");
			st = STATUS_REPO;
			goto err;
		}
		if ((c = catalog_open(catpath)) == NULL) {
			st = STATUS_REPO;
			goto err;
		}
		free(catpath);
		catpath = NULL;
	}
	if ((flags & OPEN_WRITE) && engine_prepare_write(r, c, !g->no_wait)) {
		st = STATUS_REPO;
		goto err;
	}
	*rp = r;
	if (cp)
		*cp = c;
	return (STATUS_OK);
err:
	cmd_passphrase_free(pass, passlen);
	free(catpath);
	catalog_close(c);
	repo_close(r);
	return (st);
}

void
cmd_close(struct repo *r, struct catalog *c)
{
	catalog_close(c);
	repo_close(r);
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

int
cmd_listing(int argc, char **argv, const struct global_opts *g,
    const char *name, int (*list)(struct catalog *c, const char *dataset,
    struct cmd_listing *ls))
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ NULL, 0, NULL, 0 }
	};
	struct cmd_listing ls = { 0, 0 };
	const char *dataset = NULL;
	struct repo *r;
	struct catalog *c;
	int ch, st;

	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch != 'j')
			return (cmd_usage_error(name));
		ls.json = 1;
	}
	if (argc - optind > 1)
		return (cmd_usage_error(name));
	if (optind < argc)
		dataset = argv[optind];
	/* Catalog rows only: no key, no lock. */
	if ((st = cmd_open(g, 0, &r, &c)) != STATUS_OK)
		return (st);
	if (ls.json)
		fputs("[", stdout);
	if (list(c, dataset, &ls) < 0)
		st = STATUS_REPO;
	if (ls.json)
		fputs(ls.n ? "\n]\n" : "]\n", stdout);
	cmd_close(r, c);
	return (st);
}
