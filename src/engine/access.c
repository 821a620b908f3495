/*
 * What the unlocked key may do.  A write-only key (doc/design.md,
 * "Crypto") seals pack keys but cannot open them: every pipeline that
 * decrypts a record asks here first and stops before it starts, rather
 * than take unreadable packs for damaged ones.
 */
#include "coffer/crypto.h"
#include "coffer/engine.h"
#include "coffer/log.h"
#include "coffer/repo.h"
#include "coffer/repo-keys.h"

int
engine_need_read(struct repo *r, const char *what)
{
	if (!ccrypto_keys_write_only(repo_keys(r)))
		return (0);
	log_error("%s needs the key that reads (decrypts) the repository; "
	    "this key is write-only: it can back up, not read", what);
	return (-1);
}

const char *
engine_key_name(const struct repo *r)
{
	const char *slot = repo_unlocked_slot(r);

	if (slot != NULL)
		return (slot);
	return (ccrypto_keys_write_only(repo_keys(r)) ?
	    ENGINE_KEY_FILE_WRITE_ONLY : ENGINE_KEY_FILE_FULL);
}
