#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/engine-offsite.h"
#include "coffer/engine-open.h"
#include "coffer/engine.h"
#include "coffer/fmt.h"
#include "coffer/fsutil.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/signals.h"
#include "coffer/status.h"

const struct cmd_option cmd_import_options[] = {
	CMD_OPT_FLAG('i', "init",
	    "create the repository (-r) from the bundles: a bare machine"),
	CMD_OPT_FLAG('j', "json", "print what was imported as JSON"),
	CMD_OPT_END
};

/* import --init: the new repository, opened as any writer opens one. */
static int
open_new(void *arg, const char *path, struct repo **r, struct catalog **c)
{
	const struct global_opts *g = arg;

	(void)path;		/* g->repo: the same */
	return (cmd_open(g, OPEN_KEYS | OPEN_WRITE, r, c) == STATUS_OK ? 0 :
	    -1);
}

static void
print_result(const struct import_result *res, int json)
{
	char size[32];

	if (json) {
		struct jw j;

		jw_init(&j, stdout);
		jw_begin_object(&j);
		jw_uint(jw_key(&j, "bundles"), res->bundles);
		jw_uint(jw_key(&j, "skipped"), res->skipped);
		jw_uint(jw_key(&j, "packs"), res->packs);
		jw_uint(jw_key(&j, "bytes"), res->bytes);
		jw_uint(jw_key(&j, "snapshots_new"), res->sync.records);
		jw_uint(jw_key(&j, "journal_rows"), res->sync.journal);
		jw_double(jw_key(&j, "seconds"), res->seconds, 3);
		jw_end_object(&j);
		return;
	}
	if (log_level < 0 || (log_level == 0 && !isatty(STDOUT_FILENO)))
		return;
	fmt_bytes(size, sizeof(size), (double)res->bytes);
	printf("imported %zu bundle%s (%zu skipped): %zu packs, %s, %zu new "
	    "snapshots, %zu journal rows, %.1f s\n", res->bundles,
	    res->bundles == 1 ? "" : "s", res->skipped, res->packs, size,
	    res->sync.records, res->sync.journal, res->seconds);
}

int
cmd_import(int argc, char **argv, const struct global_opts *g)
{
	struct import_opts o;
	struct import_result res;
	struct repo *r = NULL;
	struct catalog *c = NULL;
	int ch, st, rc, json = 0, init = 0;

	memset(&o, 0, sizeof(o));
	while ((ch = cmd_getopt(argc, argv, cmd_import_options)) != -1) {
		switch (ch) {
		case 'i':
			init = 1;
			break;
		case 'j':
			json = 1;
			break;
		default:
			return (cmd_usage_error("import"));
		}
	}
	if (argc - optind != 1)
		return (cmd_usage_error("import"));
	o.from = argv[optind];
	signals_install();
	if (init) {
		if (g->repo == NULL) {
			log_error("import --init needs the repository to "
			    "create (-r or COFFER_REPO)");
			return (STATUS_USAGE);
		}
		if (!engine_repo_is_remote(g->repo) &&
		    (rc = fsutil_dir_is_empty(g->repo, 1)) <= 0) {
			if (rc == 0)
				log_error("'%s' is not empty: import --init "
				    "makes a new repository", g->repo);
			return (rc == 0 ? STATUS_USAGE : STATUS_ERROR);
		}
		o.init_path = g->repo;
		o.open_new = open_new;
		o.arg = (void *)(uintptr_t)g;
	} else if ((st = cmd_open_checked(g, OPEN_KEYS | OPEN_WRITE,
	    cmd_open_need_read, "import", &r, &c)) != STATUS_OK)
		return (st);
	if ((st = cmd_status(engine_import(&r, &c, &o, &res))) == STATUS_OK)
		print_result(&res, json);
	if (r != NULL)
		cmd_close(r, c);
	return (st);
}
