#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/status.h"

/* The listing: a JSON array when json, else lines. */
struct ls_state {
	int json;
	struct jw j;
	int n;
};

static int
print_entry(void *arg, const struct entry *e)
{
	struct ls_state *ls = arg;
	struct jw *j = ls->json ? &ls->j : NULL;
	char when[32], mode[12];

	ls->n++;

	fmt_time(when, sizeof(when), e->mtime_ns);
	snprintf(mode, sizeof(mode), "%04o", e->mode & 07777);
	if (j) {
		jw_begin_object(j);
		jw_str(jw_key(j, "path"), e->path);
		jw_str(jw_key(j, "type"), entry_kind_name(e->kind));
		jw_str(jw_key(j, "mode"), mode);
		jw_int(jw_key(j, "uid"), e->uid);
		jw_int(jw_key(j, "gid"), e->gid);
		jw_str(jw_key(j, "user"), e->uname);
		jw_str(jw_key(j, "group"), e->gname);
		jw_int(jw_key(j, "size"), e->size);
		jw_str(jw_key(j, "mtime"), when);
		jw_int(jw_key(j, "mtime_ns"), e->mtime_ns);
		jw_str(jw_key(j, "target"), e->target);
		jw_end_object(j);
		return (0);
	}
	printf("%s%s %-8s %-8s %12lld %s ", entry_kind_char(e->kind), mode,
	    e->uname ? fmt_text(e->uname) : "?",
	    e->gname ? fmt_text(e->gname) : "?",
	    (long long)e->size, when);
	fmt_path(stdout, e->path);
	if (e->target) {
		fputs(" -> ", stdout);
		fmt_path(stdout, e->target);
	}
	putchar('\n');
	return (0);
}

const struct cmd_option cmd_ls_options[] = {
	CMD_OPT_FLAG('j', "json", "print the entries as a JSON array"),
	CMD_OPT_END
};

int
cmd_ls(int argc, char **argv, const struct global_opts *g)
{
	struct catalog_snapshot s;
	struct ls_state ls = { .json = 0 };
	struct repo *r;
	struct catalog *c;
	char *under = NULL;
	int ch, st, rc;

	while ((ch = cmd_getopt(argc, argv, cmd_ls_options)) != -1) {
		if (ch != 'j')
			return (cmd_usage_error("ls"));
		ls.json = 1;
	}
	if (argc - optind < 1 || argc - optind > 2)
		return (cmd_usage_error("ls"));
	if (argc - optind == 2) {
		/* "train/" and "train" name the same directory. */
		under = argv[optind + 1];
		while (strlen(under) > 1 && under[strlen(under) - 1] == '/')
			under[strlen(under) - 1] = '\0';
		if (strcmp(under, ".") == 0 || strcmp(under, "/") == 0)
			under = NULL;
	}
	if ((st = cmd_open(g, 0, &r, &c)) != STATUS_OK)
		return (st);
	memset(&s, 0, sizeof(s));
	if ((st = cmd_snapshot(c, argv[optind], &s)) != STATUS_OK)
		goto out;
	if (ls.json) {
		jw_init(&ls.j, stdout);
		jw_begin_array_lines(&ls.j);
	}
	rc = engine_entry_list(c, s.id, under, print_entry, &ls);
	if (ls.json)
		jw_end_array(&ls.j);
	if (rc < 0)
		st = STATUS_REPO;
	else if (under && ls.n == 0) {
		log_error("'%s' is not in snapshot %.12s", under, s.sid);
		st = STATUS_USAGE;
	}
out:
	catalog_snapshot_release(&s);
	cmd_close(r, c);
	return (st);
}
