#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "coffer/json.h"
#include "coffer/log.h"
#include "coffer/status.h"

static void
print_entry(const struct entry *e, int json, int n)
{
	char when[32], mode[12];

	fmt_time(when, sizeof(when), e->mtime_ns);
	snprintf(mode, sizeof(mode), "%04o", e->mode & 07777);
	if (json) {
		printf("%s\n  {\"path\":", n ? "," : "");
		json_str(stdout, e->path);
		printf(",\"type\":\"%s\",\"mode\":\"%s\",\"uid\":%lld,"
		    "\"gid\":%lld,\"user\":", entry_kind_name(e->kind), mode,
		    (long long)e->uid, (long long)e->gid);
		json_str(stdout, e->uname);
		fputs(",\"group\":", stdout);
		json_str(stdout, e->gname);
		printf(",\"size\":%lld,\"mtime\":\"%s\",\"mtime_ns\":%lld,"
		    "\"target\":", (long long)e->size, when,
		    (long long)e->mtime_ns);
		json_str(stdout, e->target);
		putchar('}');
		return;
	}
	printf("%s%s %-8s %-8s %12lld %s ", entry_kind_char(e->kind), mode,
	    e->uname ? e->uname : "?", e->gname ? e->gname : "?",
	    (long long)e->size, when);
	fmt_path(stdout, e->path);
	if (e->target) {
		fputs(" -> ", stdout);
		fmt_path(stdout, e->target);
	}
	putchar('\n');
}

const struct cmd_option cmd_ls_options[] = {
	CMD_OPT_FLAG('j', "json", "print the entries as a JSON array"),
	CMD_OPT_END
};

int
cmd_ls(int argc, char **argv, const struct global_opts *g)
{
	struct catalog_snapshot s;
	struct catalog_iter *it;
	struct entry e;
	struct repo *r;
	struct catalog *c;
	char *under = NULL;
	int ch, st, json = 0, n = 0, rc;

	while ((ch = cmd_getopt(argc, argv, cmd_ls_options)) != -1) {
		if (ch != 'j')
			return (cmd_usage_error("ls"));
		json = 1;
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
	if ((rc = catalog_snapshot_find(c, argv[optind], &s)) <= 0) {
		st = rc < 0 ? STATUS_REPO : STATUS_USAGE;
		goto out;
	}
	if ((it = catalog_entries(c, s.id, under)) == NULL) {
		st = STATUS_REPO;
		goto out;
	}
	if (json)
		fputs("[", stdout);
	while ((rc = catalog_iter_next(it, &e)) == 1)
		print_entry(&e, json, n++);
	if (json)
		fputs(n ? "\n]\n" : "]\n", stdout);
	catalog_iter_free(it);
	if (rc < 0)
		st = STATUS_REPO;
	else if (under && n == 0) {
		log_error("'%s' is not in snapshot %.12s", under, s.sid);
		st = STATUS_USAGE;
	}
out:
	catalog_snapshot_release(&s);
	cmd_close(r, c);
	return (st);
}
