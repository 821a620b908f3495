/*
 * The keyring and the key epochs: loaded when a key unlocks, written with
 * every key change, rotated and retired (coffer key).  See doc/format.md
 * ("Keyring", "Key epochs").
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "coffer/fmt.h"
#include "coffer/fsutil.h"
#include "coffer/log.h"
#include "coffer/progress.h"
#include "repo-int.h"

/*
 * The key epochs into r->keys: the public keys coffer.conf lists (now
 * authenticated) and, for a full key, the secrets in the keyring.  A
 * keyring that does not open is reported and left out: packs of the first
 * epoch still open, and those of the others name their epoch.
 */
/* r's key as coffer.conf alone makes it: the epochs' public keys. */
static int
conf_epochs(struct repo *r)
{
	size_t i;

	ccrypto_keys_ring_reset(r->keys);
	for (i = 0; i < r->nepochs; i++)
		if (ccrypto_keys_set_epoch(r->keys, r->epochs[i].epoch,
		    r->epochs[i].pk))
			return (-1);
	return (0);
}

int
rp_load_epochs(struct repo *r)
{
	unsigned char *kr = NULL;
	uint64_t gen;
	uint32_t listed;
	size_t len;
	int rc, holder;

	/* From nothing: a keyring read before (another run's since) is
	 * not this one. */
	if (conf_epochs(r))
		return (-1);
	r->keyring_bad = 0;
	if (ccrypto_keys_write_only(r->keys))
		return (0);
	holder = ccrypto_keys_kind(r->keys) == CCRYPTO_KEY_HOLDER;
	/* The keyring line says which keyring is current: a full key's. */
	if (ccrypto_keyring_line_verify(r->keys, r->id, r->keyring_gen,
	    r->keyring_mac)) {
		log_error("repository '%s': coffer.conf's keyring line failed "
		    "authentication (written by a key that cannot read, or by "
		    "someone without a key)", r->path);
		r->keyring_bad = 1;
		goto bad;
	}
	/* coffer.conf says there is one: missing is not "none yet". */
	if ((rc = rp_get(r, REPO_KEYRING, KEYRING_MAX, &kr, &len, 1)) ==
	    STORAGE_MISSING) {
		r->keyring_bad = 1;
		log_warn("repository '%s': its keyring is missing", r->path);
		goto bad;
	}
	if (rc == 0) {
		rc = ccrypto_keyring_open(r->keys, r->id, kr, len, 0);
		explicit_bzero(kr, len);
		free(kr);
		/* Removed (coffer key remove, or the master secret's after
		 * key retire 1): the key is refused, not half used. */
		if (rc == CCRYPTO_NOT_LISTED) {
			log_error("repository '%s': its keyring does not list "
			    "this key (removed by coffer key remove%s, or the "
			    "keyring was altered): refused", r->path,
			    ccrypto_keys_kind(r->keys) == CCRYPTO_KEY_MASTER ?
			    ", or by key retire 1 for keys holding the master "
			    "secret" : "");
			return (-1);
		}
		r->keyring_bad = rc != 0;
	} else
		r->keyring_bad = 1;
	/*
	 * Not older than coffer.conf says: a keyring put back from an
	 * earlier copy (with a key since removed in it) is not used, nor
	 * written over.  Newer is a write cut short before coffer.conf.
	 */
	gen = ccrypto_keys_ring_gen(r->keys);
	if (!r->keyring_bad && gen < r->keyring_gen) {
		log_error("repository '%s': its keyring is older than "
		    "coffer.conf says (generation %llu, not %llu): put back "
		    "from an earlier copy? not used", r->path,
		    (unsigned long long)gen,
		    (unsigned long long)r->keyring_gen);
		if (conf_epochs(r))
			return (-1);
		r->keyring_bad = 1;
	}
	if (r->keyring_bad)
		goto bad;
	/* Never seal to an epoch whose secret this key cannot see. */
	if ((listed = ccrypto_keys_seal_held(r->keys)) > 0)
		log_warn("repository '%s': coffer.conf lists key epoch %u, "
		    "whose secret the keyring does not hold (written by a "
		    "write-only key, or someone without a key?): new packs "
		    "are sealed to epoch %u", r->path, (unsigned)listed,
		    (unsigned)ccrypto_keys_seal_epoch(r->keys));
	return (0);
bad:
	log_warn("repository '%s': %s", r->path, holder ?
	    "no pack will open with this key" :
	    "packs sealed to key epochs after 1 will not open");
	return (0);
}

/*
 * What a writer checks under the lock, after reading coffer.conf anew: a
 * full key writes only with its keyring open (it decides whom to seal
 * to and what the next keyring holds) and seals only to an epoch whose
 * secret the keyring holds.  0 or -1 (reported).
 */
int
rp_writer_ready(struct repo *r)
{
	uint32_t newest;

	if (r->keys == NULL || ccrypto_keys_write_only(r->keys))
		return (0);
	if (r->keyring_bad) {
		log_error("repository '%s': its keyring did not open (see "
		    "above): nothing is written with this key until it "
		    "does (restore the keyring from a copy, or import from "
		    "a bundle)", r->path);
		return (-1);
	}
	/* rp_load_epochs sealed to the newest held; the newest listed is
	 * the one to seal to. */
	newest = r->nepochs > 0 ? r->epochs[r->nepochs - 1].epoch : 1;
	if (ccrypto_keys_seal_epoch(r->keys) != newest ||
	    !ccrypto_keys_has_epoch(r->keys, newest)) {
		log_error("repository '%s': coffer.conf lists key epoch %u, "
		    "whose secret the keyring does not hold: nothing is "
		    "written to it (coffer.conf altered, or the keyring put back "
		    "from an older copy?)", r->path, (unsigned)newest);
		return (-1);
	}
	/*
	 * A keyring with an epoch past coffer.conf's newest: coffer.conf
	 * put back from before a rotation (which would seal to an epoch the
	 * rotation meant to leave), or a rotation cut short between its two
	 * writes.  Only a rotation goes on from there (past that epoch).
	 */
	if (ccrypto_keys_max_epoch(r->keys) > newest && !r->allow_unlisted) {
		log_error("repository '%s': the keyring holds key epoch %u, "
		    "which coffer.conf does not list: coffer.conf was put "
		    "back from an older copy, or a key rotation was cut "
		    "short; nothing is written until the newer coffer.conf "
		    "is put back or a full key rotates (coffer key rotate)",
		    r->path, (unsigned)ccrypto_keys_max_epoch(r->keys));
		return (-1);
	}
	return (0);
}

void
repo_allow_unlisted(struct repo *r)
{
	r->allow_unlisted = 1;
}

uint64_t
repo_generation(const struct repo *r)
{
	return (r->keyring_gen);
}

/*
 * Key epochs (coffer key rotate, retire).  The order of writes keeps every
 * pack readable at each step: a new epoch's secret is in the keyring
 * before coffer.conf names its public key (a crash between leaves an
 * unused secret); a retired one's leaves the keyring before coffer.conf
 * says so (a crash between: retire again).
 */
int
repo_epochs(const struct repo *r, const struct repo_epoch **v, size_t *n)
{
	*v = r->epochs;
	*n = r->nepochs;
	return (0);
}

/*
 * The keyring as r's key holds it, one generation on, then coffer.conf
 * naming that generation (a crash between leaves a keyring newer than
 * coffer.conf says, which reads).
 */
int
rp_write_keyring(struct repo *r)
{
	struct buf b = BUF_INIT;
	uint64_t gen;
	int rc;

	/* It may hold secrets this key could not read: never over it. */
	if (r->keyring_bad) {
		log_error("repository '%s': the keyring did not open (see "
		    "above): not rewritten", r->path);
		return (-1);
	}
	gen = ccrypto_keys_ring_gen(r->keys);
	if (gen < r->keyring_gen)
		gen = r->keyring_gen;
	if (gen >= KEYRING_GEN_MAX) {
		log_error("repository '%s': the keyring's generation is at its "
		    "end", r->path);
		return (-1);
	}
	gen++;
	rc = ccrypto_keyring_seal(r->keys, r->id, gen, &b) == 0 &&
	    storage_put(r->st, REPO_KEYRING, b.data, b.len, 0) == 0 ? 0 : -1;
	rp_wipe_release(&b);
	if (rc)
		return (-1);
	r->keyring_gen = gen;
	return (rp_write_conf(r));
}

/* Changing the key epochs needs the writer lock and a key that reads. */
static int
locked_full(const struct repo *r)
{
	return (r->lock != NULL && r->keys != NULL &&
	    !ccrypto_keys_write_only(r->keys));
}

int
repo_epoch_rotate(struct repo *r, uint32_t *epoch)
{
	struct repo_epoch *e;
	uint32_t n;

	if (!locked_full(r)) {
		log_error("internal error: rotation needs the lock and a full "
		    "key");
		return (-1);
	}
	if (r->nepochs == REPO_EPOCHS_MAX) {
		log_error("repository '%s' has %d key epochs already, the most "
		    "coffer.conf holds", r->path, REPO_EPOCHS_MAX + 1);
		return (-1);
	}
	/* Past any secret a crash left in the keyring unnamed. */
	n = ccrypto_keys_max_epoch(r->keys) + 1;
	if (r->nepochs > 0 && n <= r->epochs[r->nepochs - 1].epoch)
		n = r->epochs[r->nepochs - 1].epoch + 1;
	e = &r->epochs[r->nepochs];
	memset(e, 0, sizeof(*e));
	e->epoch = n;
	e->created_ns = now_realtime_ns();
	if (ccrypto_epoch_generate(r->keys, n, e->pk))
		return (-1);
	/* rp_write_keyring writes the keyring, then coffer.conf listing it. */
	r->nepochs++;
	if (rp_write_keyring(r)) {
		r->nepochs--;
		return (-1);
	}
	if (ccrypto_keys_set_epoch(r->keys, n, e->pk))
		return (-1);
	*epoch = n;
	return (0);
}

int64_t
repo_epoch1_retired(const struct repo *r)
{
	return (r->retired1_ns);
}

/*
 * Epoch 1: its secret, derived from the master secret, leaves the
 * keyring, then coffer.conf says so.  The caller checked that no pack
 * and no slot needs it, and that r's key is not the master secret.
 */
static int
retire_first(struct repo *r)
{
	if (r->nepochs == 0) {
		log_error("key epoch 1 is the newest, the one new packs are "
		    "sealed to: rotate first");
		return (-1);
	}
	if (ccrypto_keys_kind(r->keys) != CCRYPTO_KEY_HOLDER) {
		log_error("internal error: retiring epoch 1 with the master "
		    "secret");
		return (-1);
	}
	/* The keyring without them, then coffer.conf saying so. */
	if (r->retired1_ns == 0)
		r->retired1_ns = now_realtime_ns();
	ccrypto_epoch_forget(r->keys, 1);
	return (rp_write_keyring(r));
}

int
repo_epoch_retire(struct repo *r, uint32_t epoch)
{
	struct repo_epoch *e = NULL;
	size_t i;

	if (!locked_full(r)) {
		log_error("internal error: retiring needs the lock and a full "
		    "key");
		return (-1);
	}
	if (epoch == 1)
		return (retire_first(r));
	for (i = 0; i < r->nepochs; i++)
		if (r->epochs[i].epoch == epoch)
			e = &r->epochs[i];
	if (e == NULL) {
		log_error("repository '%s' has no key epoch %u", r->path,
		    (unsigned)epoch);
		return (-1);
	}
	if (epoch == r->epochs[r->nepochs - 1].epoch) {
		log_error("key epoch %u is the newest, the one new packs are "
		    "sealed to: rotate first", (unsigned)epoch);
		return (-1);
	}
	/* The keyring without its secret, then coffer.conf saying so (a
	 * crash between: retire again). */
	if (e->retired_ns != 0 && !ccrypto_keys_has_epoch(r->keys, epoch))
		return (0);
	if (e->retired_ns == 0)
		e->retired_ns = now_realtime_ns();
	/* A new generation either way: the change is one a rollback of
	 * coffer.conf must not undo unnoticed. */
	ccrypto_epoch_forget(r->keys, epoch);
	return (rp_write_keyring(r));
}

int
repo_keyring_names(struct repo *r,
    char (*names)[CCRYPTO_RECIPIENT_NAME_MAX + 1], size_t max, size_t *n)
{
	unsigned char *kr = NULL;
	size_t len;
	int rc;

	*n = 0;
	if ((rc = rp_get(r, REPO_KEYRING, KEYRING_MAX, &kr, &len, 1)) != 0)
		return (rc == STORAGE_MISSING ? 0 : -1);
	rc = ccrypto_keyring_names(kr, len, names, max, n);
	free(kr);
	if (rc < 0) {
		log_error("repository '%s': the keyring is malformed",
		    r->path);
		return (-1);
	}
	return (0);
}

int
repo_adopt_epochs(struct repo *r, const struct repo_file *files, size_t n)
{
	const struct repo_file *conf = NULL, *ring = NULL;
	struct repo *t;
	unsigned char *copy;
	uint32_t ours, theirs;
	size_t i;
	int rc = -1;

	for (i = 0; i < n; i++) {
		if (strcmp(files[i].name, "coffer.conf") == 0)
			conf = &files[i];
		else if (strcmp(files[i].name, REPO_KEYRING) == 0)
			ring = &files[i];
	}
	if (conf == NULL || !locked_full(r))
		return (0);
	ours = r->nepochs > 0 ? r->epochs[r->nepochs - 1].epoch : 1;
	if ((t = calloc(1, sizeof(*t))) == NULL ||
	    (copy = malloc(conf->len + 1)) == NULL) {
		free(t);
		log_error("out of memory");
		return (-1);
	}
	t->path = r->path;
	memcpy(copy, conf->data, conf->len);
	copy[conf->len] = '\0';
	if (rp_conf_parse(t, copy, conf->len))
		goto out;
	theirs = t->nepochs > 0 ? t->epochs[t->nepochs - 1].epoch : 1;
	if (theirs <= ours) {
		rc = 0;
		goto out;
	}
	/* Newer than ours, and the same repository's, by its MAC. */
	if (memcmp(t->id, r->id, sizeof(r->id)) != 0 ||
	    memcmp(&t->chunker, &r->chunker, sizeof(r->chunker)) != 0 ||
	    ccrypto_meta_mac_verify(r->keys, conf->data, t->conf_body_len,
	    t->mac)) {
		log_error("repository '%s': a bundle's coffer.conf with key "
		    "epoch %u failed authentication: not taken", r->path,
		    (unsigned)theirs);
		goto out;
	}
	if (ring == NULL) {
		log_error("repository '%s': a bundle lists key epoch %u but "
		    "carries no keyring: not taken", r->path,
		    (unsigned)theirs);
		goto out;
	}
	/* As a rotation writes them: the secrets, then the public keys. */
	if (r->keyring_bad) {
		log_error("repository '%s': the keyring did not open (see "
		    "above): not replaced", r->path);
		goto out;
	}
	/*
	 * Their secrets join ours; which keys open this repository stays
	 * this repository's list (a key the source removed is removed here
	 * by coffer key remove; one the bundle lists that this repository
	 * does not gets nothing).  Then their epochs, in coffer.conf as
	 * this key writes it.
	 */
	if (ccrypto_keyring_open(r->keys, r->id, ring->data, ring->len, 1)) {
		log_error("repository '%s': a bundle's keyring does not open "
		    "with this key: not taken (import with a key of the "
		    "repository the bundle came from)", r->path);
		goto out;
	}
	/*
	 * What this repository retired stays retired (the bundle's secret
	 * for it is dropped); what it still holds is not retired here,
	 * whatever the bundle's coffer.conf says.
	 */
	for (i = 0; i < r->nepochs; i++)
		if (r->epochs[i].retired_ns != 0)
			ccrypto_epoch_forget(r->keys, r->epochs[i].epoch);
	if (r->retired1_ns != 0)
		ccrypto_epoch_forget(r->keys, 1);
	for (i = 0; i < t->nepochs; i++) {
		size_t j;
		int64_t mine = 0;

		for (j = 0; j < r->nepochs; j++)
			if (r->epochs[j].epoch == t->epochs[i].epoch)
				mine = r->epochs[j].retired_ns;
		if (ccrypto_keys_has_epoch(r->keys, t->epochs[i].epoch))
			t->epochs[i].retired_ns = 0;
		else if (mine != 0)
			t->epochs[i].retired_ns = mine;
	}
	memcpy(r->epochs, t->epochs, t->nepochs * sizeof(*r->epochs));
	r->nepochs = t->nepochs;
	if (rp_write_keyring(r) || rp_load_epochs(r))
		goto out;
	log_info("key epochs up to %u from a bundle", (unsigned)theirs);
	rc = 0;
out:
	free(copy);
	free(t);
	return (rc);
}
