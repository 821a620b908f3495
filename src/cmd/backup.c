#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "coffer/buf.h"
#include "coffer/engine-open.h"
#include "coffer/engine.h"
#include "coffer/fmt.h"
#include "coffer/jw.h"
#include "coffer/log.h"
#include "coffer/name.h"
#include "coffer/signals.h"
#include "coffer/status.h"

static void
print_result(const struct backup_opts *o, const struct backup_result *res,
    int json)
{
	char rd[32], nw[32], st[32];

	if (json) {
		struct jw j;

		jw_init(&j, stdout);
		jw_begin_object(&j);
		jw_str(jw_key(&j, "snapshot"), res->sid);
		jw_str(jw_key(&j, "dataset"), o->dataset);
		jw_str(jw_key(&j, "level"), catalog_level_name(res->level));
		jw_str(jw_key(&j, "parent"),
		    res->parent_sid[0] ? res->parent_sid : NULL);
		jw_int(jw_key(&j, "depth"), res->depth);
		jw_int(jw_key(&j, "files"), res->files);
		jw_int(jw_key(&j, "dirs"), res->dirs);
		jw_int(jw_key(&j, "others"), res->others);
		jw_int(jw_key(&j, "unchanged"), res->unchanged);
		jw_int(jw_key(&j, "deleted"), res->deleted);
		jw_int(jw_key(&j, "changed_during_backup"), res->changing);
		jw_int(jw_key(&j, "bytes_read"), res->bytes_read);
		jw_int(jw_key(&j, "bytes_new"), res->bytes_new);
		jw_int(jw_key(&j, "bytes_stored"), res->bytes_stored);
		jw_int(jw_key(&j, "packs"), res->packs);
		jw_double(jw_key(&j, "seconds"), res->seconds, 3);
		jw_int(jw_key(&j, "warnings"), res->warnings);
		jw_end_object(&j);
		return;
	}
	/* Quiet under cron: a summary only for a person or with -v. */
	if (log_level < 0 || (log_level == 0 && !isatty(STDOUT_FILENO)))
		return;
	fmt_bytes(rd, sizeof(rd), (double)res->bytes_read);
	fmt_bytes(nw, sizeof(nw), (double)res->bytes_new);
	fmt_bytes(st, sizeof(st), (double)res->bytes_stored);
	printf("snapshot %.12s (%s) of '%s': %lld files, %lld dirs stored, "
	    "%lld unchanged, %lld deleted; %s read, %s new, %s stored, "
	    "%.1f s (%.0f MB/s)%s\n", res->sid,
	    catalog_level_name(res->level), fmt_text(o->dataset), (long long)res->files,
	    (long long)res->dirs, (long long)res->unchanged,
	    (long long)res->deleted, rd, nw, st, res->seconds,
	    res->seconds > 0 ? (double)res->bytes_read / res->seconds / 1e6 :
	    0.0, res->warnings ? ", with warnings" : "");
}

const struct cmd_option cmd_backup_options[] = {
	CMD_OPT_VALUE('l', "level", "LEVEL",
	    "full, differential or incremental"),
	CMD_OPT_VALUE('e', "exclude", "GLOB",
	    "leave out what matches GLOB (repeatable)"),
	CMD_OPT_LETTER_FLAG('x', "one-file-system",
	    "stay on the file system of PATH"),
	CMD_OPT_VALUE('z', "compression", "N",
	    "zstd level of new chunks, 1 to 19 (1)"),
	CMD_OPT_VALUE('t', "threads", "N",
	    "threads that hash, compress and encrypt"),
	CMD_OPT_VALUE('T', "time", "TIME",
	    "record the snapshot as taken at TIME (RFC 3339)"),
	CMD_OPT_VALUE('F', "from-tar", "FILE",
	    "back up a tar stream (FILE, or - for standard input), not PATH"),
	CMD_OPT_FLAG('N', "new-source",
	    "accept a PATH other than the dataset's"),
	CMD_OPT_VALUE('g', "tag", "NAME",
	    "tag the snapshot (repeatable; forget --keep-tag)"),
	CMD_OPT_FLAG('K', "keep", "mark it kept: retention never forgets it"),
	CMD_OPT_FLAG('j', "json", "print the result as JSON"),
	CMD_OPT_END
};

static int
cmp_str(const void *a, const void *b)
{
	return (strcmp(*(char *const *)a, *(char *const *)b));
}

/* The tags, checked, sorted and joined ("a,keep"), into a malloc'd *out. */
static int
join_tags(char **v, size_t n, char **out)
{
	struct buf b = BUF_INIT;
	size_t i;

	*out = NULL;
	if (n == 0)
		return (STATUS_OK);
	qsort(v, n, sizeof(*v), cmp_str);
	for (i = 0; i < n; i++) {
		if (v[i][0] == '\0' || strlen(v[i]) > 64 ||
		    name_span(v[i]) != strlen(v[i])) {
			log_error("bad tag '%s' (1 to 64 letters, digits, "
			    "'.', '_' or '-')", v[i]);
			buf_release(&b);
			return (STATUS_USAGE);
		}
		if (i > 0 && strcmp(v[i], v[i - 1]) == 0)
			continue;
		if (buf_printf(&b, "%s%s", b.len ? "," : "", v[i])) {
			buf_release(&b);
			return (STATUS_ERROR);
		}
	}
	if (buf_put_u8(&b, 0) || !catalog_tags_ok((char *)b.data)) {
		log_error("too many tags (at most %d bytes in all)",
		    CATALOG_TAGS_MAX);
		buf_release(&b);
		return (STATUS_USAGE);
	}
	*out = (char *)b.data;
	return (STATUS_OK);
}

int
cmd_backup(int argc, char **argv, const struct global_opts *g)
{
	struct backup_opts o;
	struct backup_result res;
	struct repo *r;
	struct catalog *c;
	char **ex = NULL, **tags = NULL, *joined = NULL;
	char keep[] = RETENTION_KEEP_TAG;
	size_t nex = 0, ntags = 0;
	long long lvl;
	int ch, st, json = 0;

	memset(&o, 0, sizeof(o));
	o.level = LEVEL_AUTO;
	while ((ch = cmd_getopt(argc, argv, cmd_backup_options)) != -1) {
		switch (ch) {
		case 'l':
			if ((o.level = catalog_level_parse(optarg)) < 0) {
				log_error("unknown level '%s' (full, "
				    "differential, incremental)", optarg);
				st = STATUS_USAGE;
				goto out;
			}
			break;
		case 'e':
			if (cmd_push_arg(&ex, &nex, optarg)) {
				st = STATUS_ERROR;
				goto out;
			}
			break;
		case 'x':
			o.walk.one_file_system = 1;
			break;
		case 'j':
			json = 1;
			break;
		case 'N':
			o.new_source = 1;
			break;
		case 'F':
			o.from_tar = optarg;
			break;
		case 'g':
		case 'K':
			if (cmd_push_arg(&tags, &ntags, ch == 'g' ? optarg :
			    keep)) {
				st = STATUS_ERROR;
				goto out;
			}
			break;
		case 'T':
			if (cmd_parse_time("--time", optarg, &o.time_ns)) {
				st = STATUS_USAGE;
				goto out;
			}
			break;
		case 'z':
			lvl = cmd_parse_num("--compression", optarg);
			if (lvl < 1 || lvl > 19) {
				if (lvl >= 0)
					log_error("--compression takes a zstd "
					    "level from 1 to 19");
				st = STATUS_USAGE;
				goto out;
			}
			o.compress_level = (int)lvl;
			break;
		case 't':
			if ((o.threads = cmd_parse_threads(optarg)) < 0) {
				st = STATUS_USAGE;
				goto out;
			}
			break;
		default:
			st = cmd_usage_error("backup");
			goto out;
		}
	}
	if (argc - optind != (o.from_tar != NULL ? 1 : 2)) {
		if (o.from_tar != NULL && argc - optind == 2)
			log_error("--from-tar takes the DATASET alone, not a "
			    "PATH");
		st = cmd_usage_error("backup");
		goto out;
	}
	if (o.from_tar != NULL && strcmp(o.from_tar, "-") == 0 &&
	    isatty(STDIN_FILENO)) {
		log_error("refusing to read an archive from a terminal "
		    "(pipe one in, or give its file)");
		st = STATUS_USAGE;
		goto out;
	}
	if (o.from_tar != NULL && o.walk.one_file_system) {
		log_error("--one-file-system means nothing with --from-tar");
		st = STATUS_USAGE;
		goto out;
	}
	o.dataset = argv[optind];
	o.source = o.from_tar != NULL ? o.from_tar : argv[optind + 1];
	o.walk.root = 1;
	o.walk.excludes = ex;
	o.walk.nexcludes = nex;
	if (o.dataset[0] == '\0' || strchr(o.dataset, '@') ||
	    strchr(o.dataset, '/')) {
		log_error("bad dataset name '%s' (no '@' or '/')", o.dataset);
		st = STATUS_USAGE;
		goto out;
	}
	if ((st = join_tags(tags, ntags, &joined)) != STATUS_OK)
		goto out;
	o.tags = joined;
	signals_install();	/* the engine stops at its next safe point */
	engine_lock_dataset(o.dataset);
	if ((st = cmd_open(g, OPEN_KEYS | OPEN_WRITE, &r, &c)) != STATUS_OK)
		goto out;
	st = cmd_status(engine_backup(r, c, &o, &res));
	if (st == STATUS_OK || st == STATUS_WARN)
		print_result(&o, &res, json);
	cmd_close(r, c);
out:
	free(ex);
	free(tags);
	free(joined);
	return (st);
}
