#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "coffer/engine-open.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/status.h"

const struct cmd_option cmd_init_options[] = {
	CMD_OPT_VALUE('K', "key-file", "PATH",
	    "write a key file instead of a passphrase slot"),
	CMD_OPT_VALUE('m', "kdf-memory", "MIB",
	    "Argon2id memory, 8 to 4096 MiB (64)"),
	CMD_OPT_END
};

int
cmd_init(int argc, char **argv, const struct global_opts *g)
{
	struct repo_init_opts o;
	const char *path = g->repo;
	char *pass = NULL, name[CCRYPTO_RECIPIENT_NAME_MAX + 1] = "";
	size_t passlen = 0;
	int ch, st, empty;

	memset(&o, 0, sizeof(o));
	o.key_file = g->key_file;
	while ((ch = cmd_getopt(argc, argv, cmd_init_options)) != -1) {
		switch (ch) {
		case 'K':
			o.key_file = optarg;
			break;
		case 'm':
			if (cmd_parse_kdf_memory(optarg, &o.kdf_memory))
				return (STATUS_USAGE);
			break;
		default:
			return (cmd_usage_error("init"));
		}
	}
	if (optind < argc)
		path = argv[optind++];
	if (path == NULL || optind != argc)
		return (cmd_usage_error("init"));
	/* A directory that holds something is the user's mistake (status
	 * 2), and is said before a passphrase is asked for. */
	if (!engine_repo_is_remote(path) &&
	    (empty = fsutil_dir_is_empty(path, 1)) <= 0) {
		if (empty == 0)
			log_error("'%s' is not empty: a repository needs a new "
			    "or empty directory", path);
		return (empty == 0 ? STATUS_USAGE : STATUS_ERROR);
	}
	if (o.key_file == NULL) {
		st = cmd_passphrase(g, "new passphrase: ", 1, &pass, &passlen);
		if (st != STATUS_OK)
			return (st);
		o.passphrase = pass;
		o.passlen = passlen;
	}
	o.key_name = name;
	/* A location on object storage that holds objects is the same
	 * mistake as a directory that is not empty. */
	switch (engine_init(path, &o)) {
	case 0:
		st = STATUS_OK;
		break;
	case 1:
		st = STATUS_USAGE;
		break;
	default:
		st = STATUS_ERROR;
	}
	cmd_passphrase_free(pass, passlen);
	/* Its name: what key list shows and key remove takes, should the
	 * key file leak. */
	if (st == STATUS_OK && log_level >= 0 && o.key_file != NULL)
		fprintf(stderr, "created repository '%s' with key file '%s' "
		    "(its name in the keyring: %s)\n", path, o.key_file, name);
	else if (st == STATUS_OK && log_level >= 0)
		fprintf(stderr, "created repository '%s' with key slot %s\n",
		    path, name);
	return (st);
}
