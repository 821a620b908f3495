#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "coffer/engine-check.h"
#include "coffer/engine.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/status.h"

static const char *const change_names[] = {
	[AUDIT_CORRUPT] = "corrupt",
	[AUDIT_MODIFIED] = "modified",
	[AUDIT_MISSING] = "missing",
	[AUDIT_NEW] = "new",
	[AUDIT_UNREADABLE] = "unreadable",
};

struct report {
	int json;		/* --json: changes go to j */
	struct jw j;
};

static int
report(void *arg, int change, const char *path, int kind, int64_t offset)
{
	struct report *rp = arg;

	if (rp->json) {
		jw_begin_object(&rp->j);
		jw_str(jw_key(&rp->j, "change"), change_names[change]);
		jw_str(jw_key(&rp->j, "path"), path);
		jw_str(jw_key(&rp->j, "type"), entry_kind_name(kind));
		if (change == AUDIT_CORRUPT)
			jw_int(jw_key(&rp->j, "offset"), offset);
		jw_end_object(&rp->j);
	} else {
		/* Corruption in capitals: it must not drown in the list. */
		printf("%-10s ", change == AUDIT_CORRUPT ? "CORRUPT" :
		    change_names[change]);
		fmt_path(stdout, path);
		putchar('\n');
	}
	return (0);
}

const struct cmd_option cmd_audit_options[] = {
	CMD_OPT_VALUE('e', "exclude", "GLOB",
	    "leave out what matches GLOB, as backup did"),
	CMD_OPT_LETTER_FLAG('x', "one-file-system",
	    "stay on one file system, as backup did"),
	CMD_OPT_FLAG('j', "json", "print the report as JSON"),
	CMD_OPT_END
};

int
cmd_audit(int argc, char **argv, const struct global_opts *g)
{
	struct catalog_snapshot s;
	struct audit_opts o;
	struct audit_result res;
	struct report rp = { .json = 0 };
	struct repo *r;
	struct catalog *c;
	char **ex = NULL, *latest = NULL, sz[32];
	const char *dataset, *name;
	size_t nex = 0, n;
	int ch, st;

	memset(&o, 0, sizeof(o));
	memset(&s, 0, sizeof(s));
	while ((ch = cmd_getopt(argc, argv, cmd_audit_options)) != -1) {
		switch (ch) {
		case 'e':
			if (cmd_push_arg(&ex, &nex, optarg)) {
				st = STATUS_ERROR;
				goto out0;
			}
			break;
		case 'x':
			o.walk.one_file_system = 1;
			break;
		case 'j':
			rp.json = 1;
			break;
		default:
			st = cmd_usage_error("audit");
			goto out0;
		}
	}
	if (argc - optind < 1 || argc - optind > 2) {
		st = cmd_usage_error("audit");
		goto out0;
	}
	dataset = argv[optind];
	if (dataset[0] == '\0' || strchr(dataset, '@') ||
	    strchr(dataset, '/')) {
		log_error("bad dataset name '%s' (no '@' or '/')", dataset);
		st = STATUS_USAGE;
		goto out0;
	}
	if (argc - optind == 2) {
		name = argv[optind + 1];
	} else {
		n = strlen(dataset) + sizeof("@latest");
		if ((latest = malloc(n)) == NULL) {
			log_error("out of memory");
			st = STATUS_ERROR;
			goto out0;
		}
		snprintf(latest, n, "%s@latest", dataset);
		name = latest;
	}
	o.walk.root = 1;
	o.walk.excludes = ex;
	o.walk.nexcludes = nex;
	o.report = report;
	o.arg = &rp;
	/* The chunker and id keys are needed to rehash; nothing is
	 * written, so no lock. */
	if ((st = cmd_open(g, OPEN_KEYS, &r, &c)) != STATUS_OK)
		goto out0;
	if ((st = cmd_snapshot(c, name, &s)) != STATUS_OK)
		goto out;
	if (strcmp(s.dataset, dataset) != 0) {
		log_error("snapshot %.12s is of dataset '%s', not '%s'", s.sid,
		    s.dataset, dataset);
		st = STATUS_USAGE;
		goto out;
	}
	if (rp.json) {
		jw_init(&rp.j, stdout);
		jw_begin_object(&rp.j);
		jw_str(jw_key(&rp.j, "dataset"), s.dataset);
		jw_str(jw_key(&rp.j, "snapshot"), s.sid);
		jw_str(jw_key(&rp.j, "source"), s.source);
		jw_begin_array(jw_key(&rp.j, "changes"));
	}
	st = cmd_status(engine_audit(r, c, &s, &o, &res));
	if (rp.json) {
		jw_end_array(&rp.j);
		jw_bool(jw_key(&rp.j, "complete"),
		    st != STATUS_ERROR && st != STATUS_USAGE);
		jw_int(jw_key(&rp.j, "entries"), res.entries);
		jw_int(jw_key(&rp.j, "files"), res.files);
		jw_int(jw_key(&rp.j, "bytes"), res.bytes);
		jw_int(jw_key(&rp.j, "corrupt"), res.corrupt);
		jw_int(jw_key(&rp.j, "modified"), res.modified);
		jw_int(jw_key(&rp.j, "missing"), res.missing);
		jw_int(jw_key(&rp.j, "new"), res.added);
		jw_int(jw_key(&rp.j, "unreadable"), res.unreadable);
		jw_int(jw_key(&rp.j, "recut"), res.recut);
		jw_double(jw_key(&rp.j, "seconds"), res.seconds, 3);
		jw_end_object(&rp.j);
	} else if (st != STATUS_ERROR && st != STATUS_USAGE &&
	    (log_level >= 0 || st != STATUS_OK)) {
		fmt_bytes(sz, sizeof(sz), (double)res.bytes);
		printf("audit of '%s' against %.12s: %lld entries, %lld files "
		    "rehashed (%s): %lld silently corrupted, %lld modified, "
		    "%lld missing, %lld new%s\n", fmt_text(s.dataset),
		    fmt_text(s.sid),
		    (long long)res.entries, (long long)res.files, sz,
		    (long long)res.corrupt, (long long)res.modified,
		    (long long)res.missing, (long long)res.added,
		    res.unreadable ? ", some unreadable" : "");
	}
out:
	catalog_snapshot_release(&s);
	cmd_close(r, c);
out0:
	free(ex);
	free(latest);
	return (st);
}
