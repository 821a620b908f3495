/*
 * coffer cron --policy FILE [--unit crontab|service|timer|watch]: how to
 * run a policy unattended.  coffer run does what is due whenever it is
 * called, so it is called at every minute of the hour that any of the
 * policy's schedules has a slot at: each slot is then met on time, and a
 * run with nothing due is cheap.  coffer watch, for the checkpoints, is
 * a service of its own that systemd restarts when it fails.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/log.h"
#include "coffer/policy.h"
#include "coffer/status.h"

const struct cmd_option cmd_cron_options[] = {
	CMD_OPT_VALUE('p', "policy", "FILE", "the policy file"),
	CMD_OPT_VALUE('u', "unit", "WHAT",
	    "print only the crontab line, the service, the timer or the "
	    "watch service"),
	CMD_OPT_END
};

static void
mark(unsigned char minutes[60], const struct schedule *s)
{
	if (s->kind != SCHED_NONE)
		minutes[s->minute] = 1;
}

/* "0,15,30" into out, from the minutes any schedule of p uses. */
static void
policy_minutes(const struct policy *p, char *out, size_t size)
{
	unsigned char m[60];
	size_t i, len = 0;
	int l, n;

	memset(m, 0, sizeof(m));
	for (i = 0; i < p->ndatasets; i++)
		for (l = 0; l < 3; l++)
			mark(m, &p->datasets[i].sched[l]);
	for (i = 0; i < p->nexports; i++)
		for (l = 0; l < 3; l++)
			mark(m, &p->exports[i].sched[l]);
	for (i = 0; i < p->ndrills; i++)
		mark(m, &p->drills[i].sched);
	for (i = 0; i < p->nverifies; i++)
		mark(m, &p->verifies[i].sched);
	mark(m, &p->prune_sched);
	out[0] = '\0';
	for (l = 0; l < 60; l++) {
		if (!m[l])
			continue;
		n = snprintf(out + len, size - len, "%s%d", len ? "," : "", l);
		if (n < 0 || (size_t)n >= size - len)
			break;
		len += (size_t)n;
	}
}

/*
 * The unit's name: the policy file's name without ".policy", with what a
 * unit name may not hold (or a shell would take for syntax, in the
 * command printed to enable it) as '_'.
 */
static void
unit_name(const char *path, char *out, size_t size)
{
	const char *base = strrchr(path, '/');
	size_t n, i, len;

	base = base ? base + 1 : path;
	n = strlen(base);
	if (n > 7 && strcmp(base + n - 7, ".policy") == 0)
		n -= 7;
	snprintf(out, size, "coffer-%.*s", (int)n, base);
	for (i = 7, len = strlen(out); i < len; i++)
		if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		    "0123456789_.:-", out[i]) == NULL)
			out[i] = '_';
}

/* Does s hold a control character (C0, DEL)?  Neither a crontab line nor
 * a unit file can carry a newline in a value; the rest would reach the
 * admin's terminal. */
static int
has_control(const char *s)
{
	const unsigned char *p;

	for (p = (const unsigned char *)s; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return (1);
	return (0);
}

/*
 * s as one word of a crontab command: cron's sh reads it, after cron
 * itself took an unescaped '%' for the end of the command (crontab(5)).
 * So: single quotes around runs of other bytes, and a quote or a '%'
 * outside them, backslashed (cron turns "\%" into "%", sh "\'" into
 * "'").  A '%' never follows a backslash of the text that way.
 */
static void
put_cron_word(FILE *f, const char *s)
{
	int inq = 0;

	if (*s == '\0')
		fputs("''", f);
	for (; *s; s++) {
		if (*s == '\'' || *s == '%') {
			if (inq)
				putc('\'', f);
			inq = 0;
			putc('\\', f);
			putc(*s, f);
			continue;
		}
		if (!inq)
			putc('\'', f);
		inq = 1;
		putc(*s, f);
	}
	if (inq)
		putc('\'', f);
}

/*
 * s as one word of a unit file's ExecStart= (systemd.syntax(7),
 * systemd.service(5)): in double quotes, with C escapes for '"' and '\\';
 * '%' doubled (specifiers are resolved first, everywhere in the unit
 * file) and, exec, '$' doubled (no variable is expanded).  In a
 * Description=, where only specifiers apply, quoted the same way, so
 * that a trailing backslash cannot continue the line.
 */
static void
put_unit_word(FILE *f, const char *s, int exec)
{
	putc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			putc('\\', f);
		else if (*s == '%' || (exec && *s == '$'))
			putc(*s, f);
		putc(*s, f);
	}
	putc('"', f);
}

/* A service that runs coffer CMD --policy POL, of systemd type type,
 * with the lines of tail after its ExecStart=. */
static void
print_service(const char *exe, const char *pol, const char *cmd,
    const char *type, const char *tail)
{
	printf("[Unit]\n"
	    "Description=coffer %s --policy ", cmd);
	put_unit_word(stdout, pol, 0);
	printf("\n"
	    "Documentation=man:coffer-%s(1) man:coffer-policy(5)\n"
	    "After=local-fs.target network-online.target\n"
	    "Wants=network-online.target\n"
	    "\n"
	    "[Service]\n"
	    "Type=%s\n"
	    "ExecStart=", cmd, type);
	put_unit_word(stdout, exe, 1);
	printf(" %s --policy ", cmd);
	put_unit_word(stdout, pol, 1);
	printf("\n%s", tail);
}

int
cmd_cron(int argc, char **argv, const struct global_opts *g)
{
	char exe[PATH_MAX], pol[PATH_MAX], minutes[256], name[128];
	const char *policy = NULL, *unit = NULL;
	struct policy *p;
	ssize_t n;
	size_t i;
	int ch, all, ckpt = 0;

	while ((ch = cmd_getopt(argc, argv, cmd_cron_options)) != -1) {
		switch (ch) {
		case 'p':
			policy = optarg;
			break;
		case 'u':
			unit = optarg;
			if (strcmp(unit, "crontab") != 0 &&
			    strcmp(unit, "service") != 0 &&
			    strcmp(unit, "timer") != 0 &&
			    strcmp(unit, "watch") != 0) {
				log_error("--unit is crontab, service, timer or "
				    "watch, not '%s'", unit);
				return (STATUS_USAGE);
			}
			break;
		default:
			return (cmd_usage_error("cron"));
		}
	}
	if (optind != argc || policy == NULL)
		return (cmd_usage_error("cron"));
	if ((p = policy_load(policy)) == NULL)
		return (STATUS_USAGE);
	if (realpath(policy, pol) == NULL) {
		log_errno("cannot resolve '%s'", policy);
		policy_free(p);
		return (STATUS_ERROR);
	}
	if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) < 0)
		snprintf(exe, sizeof(exe), "coffer");
	else
		exe[n] = '\0';
	if (has_control(pol) || has_control(exe)) {
		log_error("cannot print a crontab line or units for '%s': its "
		    "path%s holds a control character", has_control(pol) ?
		    pol : exe, has_control(pol) ? "" : " (coffer's)");
		policy_free(p);
		return (STATUS_USAGE);
	}
	policy_minutes(p, minutes, sizeof(minutes));
	unit_name(pol, name, sizeof(name));
	for (i = 0; i < p->ndatasets; i++)
		ckpt |= p->datasets[i].ncheckpoints > 0;
	policy_free(p);
	all = unit == NULL;
	if (all)
		printf("# crontab -e (in /etc/cron.d/, add the user after the "
		    "times):\n");
	if (all || strcmp(unit, "crontab") == 0) {
		printf("%s * * * * ", minutes);
		put_cron_word(stdout, exe);
		printf(" -q run --policy ");
		put_cron_word(stdout, pol);
		putchar('\n');
	}
	if (all)
		printf("\n# or systemd: /etc/systemd/system/%s.service\n", name);
	if (all || strcmp(unit, "service") == 0) {
		print_service(exe, pol, "run", "oneshot",
		    "Nice=10\n"
		    "IOSchedulingClass=idle\n");
	}
	if (all)
		printf("\n# and /etc/systemd/system/%s.timer, then: "
		    "systemctl enable --now %s.timer\n", name, name);
	if (all || strcmp(unit, "timer") == 0) {
		printf("[Unit]\n"
		    "Description=coffer run --policy ");
		put_unit_word(stdout, pol, 0);
		printf(", at every slot\n"
		    "\n"
		    "[Timer]\n"
		    "OnCalendar=*-*-* *:%s:00\n"
		    "Persistent=true\n"
		    "\n"
		    "[Install]\n"
		    "WantedBy=timers.target\n", minutes);
	}
	/* All of it: the watch only for a policy with checkpoints. */
	if (all && ckpt)
		printf("\n# and for the checkpoints, /etc/systemd/system/"
		    "%s-watch.service, then: systemctl enable --now "
		    "%s-watch.service\n", name, name);
	/* Restarted when it fails; a stop (SIGTERM) is its clean end. */
	if ((all && ckpt) || (unit != NULL && strcmp(unit, "watch") == 0))
		print_service(exe, pol, "watch", "simple",
		    "Restart=on-failure\n"
		    "RestartSec=10\n"
		    "Nice=10\n"
		    "IOSchedulingClass=best-effort\n"
		    "IOSchedulingPriority=7\n"
		    "\n"
		    "[Install]\n"
		    "WantedBy=multi-user.target\n");
	return (STATUS_OK);
}
