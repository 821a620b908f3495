#!/bin/bash
test_description='keys that hold no master secret: a removed key is shut out, a bundle'"'"'s keyring gives only its secrets, a keyring put back or missing is refused'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

pass() {
	printf '%s\n' "$2" >"$1" && chmod 600 "$1"
}

# restores REPO KEYOPT...: every snapshot in expect/ restores as it was.
restores() {
	repo=$1 && shift &&
	for d in expect/*; do
		sid=${d#expect/} &&
		rm -rf rst && coffer -r "$repo" "$@" restore "$sid" rst &&
		treecmp "$d" rst || { echo "snapshot $sid differs"; return 1; }
	done
}

# snap REPO KEYOPT...: a backup of src in small packs, its tree kept.
snap() {
	repo=$1 && shift &&
	COFFER_PACK_SIZE=60000 coffer -r "$repo" "$@" backup --json ds src \
		>b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") &&
	mkdir -p expect && cp -a src "expect/$sid"
}

more() {
	for i in $(seq "$1"); do
		head -c 20000 /dev/urandom >"src/f$RANDOM$i"
	done
}

# keyring_ids REPO HOLDER: the keyring's names of that holder.
keyring_ids() {
	coffer -r "$1" key list --json | perl -MJSON::PP -e '
		print map { "$_->{id}\n" } grep { $_->{holder} eq $ARGV[0] }
		@{decode_json(join q(), <STDIN>)->{keyring}}' "$2"
}

test_expect_success 'setup: a new repository keeps no master secret' '
	pass p1 first && pass p2 second &&
	mkdir src && more 10 &&
	coffer init --kdf-memory 8 --passphrase-file p1 repo &&
	test_path_is_file repo/keyring &&
	snap repo --passphrase-file p1 &&
	keyring_ids repo slot >slots && test_line_count = 1 slots &&
	keyring_ids repo "key file" >m && test_line_count = 0 m &&
	coffer -r repo key list >list && cat list &&
	grep " full  " list && ! grep "full\\*" list
'

test_expect_success 'a key file exported, then removed: it is refused, the rest reads' '
	coffer -r repo --passphrase-file p1 key export --to kf 2>err &&
	cat err && name=$(sed -n "s/.*coffer key remove \\([0-9a-f]*\\).*/\\1/p" err) &&
	test -n "$name" && keyring_ids repo "key file" >files &&
	echo "$name" >expect.files && test_cmp expect.files files &&
	restores repo --key-file kf &&
	cp kf kf.copy &&
	coffer -r repo --passphrase-file p1 key remove "$name" >out &&
	grep "removed key $name" out &&
	keyring_ids repo "key file" >files && test_line_count = 0 files &&
	test_expect_code 3 coffer -r repo --key-file kf.copy snapshots 2>err &&
	grep "keyring does not list this key" err &&
	restores repo --passphrase-file p1
'

test_expect_success 'a leaked key file is found by its name: init says it, key list marks it' '
	coffer init --key-file leak.key leakrepo 2>err && cat err &&
	name=$(sed -n "s/.*(its name in the keyring: \([0-9a-f]\{16\}\))\$/\1/p" err) &&
	test -n "$name" &&
	keyring_ids leakrepo "key file" >files && echo "$name" >expect.files &&
	test_cmp expect.files files &&
	coffer -r leakrepo --key-file leak.key key export --to other.key &&
	coffer -r leakrepo --key-file leak.key key list >list && cat list &&
	grep "^$name .*<- this key\$" list &&
	test "$(grep -c "<- this key" list)" = 1 &&
	coffer -r leakrepo --key-file other.key key list --json >l.json &&
	json_check l.json "
		my @k = grep { \$_->{this_key} } @{\$j->{keyring}};
		@k == 1 && \$k[0]{id} ne q($name)" &&
	coffer -r leakrepo key list >nokey && ! grep "this key" nokey &&
	coffer -r leakrepo --key-file other.key key remove "$name" &&
	test_expect_code 3 coffer -r leakrepo --key-file leak.key snapshots
'

test_expect_success 'a keyring put back from before a removal is not used, nor written over' '
	coffer -r repo --passphrase-file p1 key export --to kg 2>err &&
	name=$(sed -n "s/.*coffer key remove \([0-9a-f]*\).*/\1/p" err) &&
	cp repo/keyring keyring.before &&
	coffer -r repo --passphrase-file p1 key remove "$name" &&
	cp repo/keyring keyring.after && cp keyring.before repo/keyring &&
	test_must_fail coffer -r repo --key-file kg restore "$(ls expect | head -1)" r2 \
		2>err && grep "older than coffer.conf says" err &&
	test_must_fail coffer -r repo --passphrase-file p1 key rotate 2>err &&
	grep "keyring did not open" err && cmp repo/keyring keyring.before &&
	cp keyring.after repo/keyring &&
	test_expect_code 3 coffer -r repo --key-file kg snapshots &&
	restores repo --passphrase-file p1
'

test_expect_success 'key changes waiting for the lock start from the keyring as it is then' '
	rm -f rc.a rc.b &&
	{ flock repo/locks/writer sleep 3 & } &&
	sleep 1 &&
	{ (coffer -r repo --passphrase-file p1 key export --to ka 2>/dev/null;
	   echo $? >rc.a) & } &&
	{ (coffer -r repo --passphrase-file p1 key export --to kb 2>/dev/null;
	   echo $? >rc.b) & } &&
	wait &&
	test "$(cat rc.a)" = 0 && test "$(cat rc.b)" = 0 &&
	coffer -r repo --key-file ka snapshots >/dev/null &&
	coffer -r repo --key-file kb snapshots >/dev/null &&
	for n in $(keyring_ids repo "key file"); do
		coffer -r repo --passphrase-file p1 key remove "$n" || return 1
	done &&
	keyring_ids repo "key file" >files && test_line_count = 0 files
'

test_expect_success 'the last key that reads cannot be removed' '
	slot=$(keyring_ids repo slot) &&
	test_expect_code 3 coffer -r repo --passphrase-file p1 key remove \
		"$slot" 2>err && grep "last one that can read" err
'

FORGE=$BUILD/tests/forge-record
test -x "$FORGE" && test_set_prereq FORGE

# pack_epochs: "VERSION EPOCH-LOW-BYTE" of every pack header.
pack_epochs() {
	find repo/packs -type f | while read -r p; do
		echo $(od -An -tu1 -j4 -N2 "$p")
	done | sort -u
}

# forge_conf HOW: coffer.conf as a write-only key holder can make it from
# conf.saved (its MAC is theirs to make, its signature is not), listing
# an epoch 2 whose secret is theirs (the public key of their write-only
# key stands for it).  HOW: "keep" leaves the signature line where it was
# (it no longer checks), "strip" drops it (an unsigned coffer.conf).
forge_conf() {
	pk=$(cut -d" " -f5 wo.key | cut -c193-256) && test ${#pk} = 64 &&
	case $1 in
	keep)	sed "/^mac /d; /^auth /d" conf.saved &&
		echo "epoch 2 $pk created 1" && grep "^auth " conf.saved ;;
	strip)	sed "/^mac /d; /^auth /d" conf.saved &&
		echo "epoch 2 $pk created 1" ;;
	esac | "$FORGE" conf repo wo.key
}

# npacks: how many packs the repository has.
npacks() { find repo/packs -type f | wc -l; }

test_expect_success FORGE 'a write-only key that rewrites coffer.conf: no key seals to its epoch, with the keyring whole or damaged' '
	coffer -r repo --passphrase-file p1 key export --write-only --to wo.key &&
	cp repo/coffer.conf conf.saved && cp repo/keyring keyring.saved &&
	grep "^auth [0-9a-f]\{128\}$" conf.saved &&
	more 2 && n0=$(npacks) &&
	for how in keep; do
		forge_conf $how &&
		for key in "--passphrase-file p1" "--key-file wo.key"; do
			test_expect_code 3 coffer -r repo $key backup ds src \
				2>err || return 1
			cat err
		done &&
		flip_byte repo/keyring 40 &&
		test_expect_code 3 coffer -r repo --passphrase-file p1 backup \
			ds src 2>err && cat err &&
		cp keyring.saved repo/keyring || return 1
	done &&
	test "$(npacks)" = "$n0" &&
	pack_epochs >e && cat e && ! grep " 2\$" e &&
	forge_conf keep &&
	test_expect_code 3 coffer -r repo --key-file wo.key backup ds src 2>err &&
	grep "signature does not check" err &&
	forge_conf strip &&
	for key in "--passphrase-file p1" "--key-file wo.key"; do
		test_must_fail coffer -r repo $key backup ds src 2>err &&
		grep "coffer.conf is malformed" err || return 1
	done &&
	cp conf.saved repo/coffer.conf &&
	{ sed "/^mac /d; /^auth /d; s/^keyring [0-9]* /keyring 1 /" conf.saved &&
	  grep "^auth " conf.saved; } | "$FORGE" conf repo wo.key &&
	test_must_fail coffer -r repo --passphrase-file p1 key rotate 2>err &&
	grep "signature does not check" err &&
	test "$(npacks)" = "$n0" &&
	cp conf.saved repo/coffer.conf &&
	snap repo --passphrase-file p1 &&
	snap repo --key-file wo.key &&
	restores repo --passphrase-file p1
'

test_expect_success 'a key add that fails leaves no key in the keyring' '
	test_must_fail coffer -r repo --passphrase-file p1 key add \
		--kdf-memory 2048 --new-passphrase-file p2 &&
	keyring_ids repo "key file" >files && test_line_count = 0 files &&
	keyring_ids repo slot >slots && test_line_count = 1 slots
'

test_expect_success 'rotate twice, rewrap, retire both old epochs: every snapshot restores' '
	coffer -r repo --passphrase-file p1 key rotate &&
	more 3 && snap repo --passphrase-file p1 &&
	coffer -r repo --passphrase-file p1 key rotate &&
	more 3 && snap repo --passphrase-file p1 &&
	coffer -r repo --passphrase-file p1 key rotate --rewrap &&
	coffer -r repo --passphrase-file p1 key retire 1 &&
	coffer -r repo --passphrase-file p1 key retire 2 &&
	grep -x "format 1" repo/coffer.conf &&
	grep -x "epoch 1 retired [0-9]*" repo/coffer.conf &&
	coffer -r repo key list --json >l.json &&
	json_check l.json "join(q( ), map { \$_->{retired} ? 1 : 0 }
		@{\$j->{epochs}}) eq q(1 1 0)" &&
	coffer -r repo --passphrase-file p1 verify --read-data &&
	restores repo --passphrase-file p1
'

test_expect_success 'a missing keyring is not taken for none: no key writes a new one' '
	mv repo/keyring keyring.old &&
	test_must_fail coffer -r repo --passphrase-file p1 key rotate 2>err &&
	cat err && grep "keyring is missing" err &&
	test_path_is_missing repo/keyring &&
	mv keyring.old repo/keyring && restores repo --passphrase-file p1
'

test_expect_success 'a bundle'"'"'s keyring gives its secrets, ours says who reads: a slot added on the copy keeps reading across a rotation' '
	coffer_init_keyfile src-repo src.key &&
	rm -rf expect && snap src-repo &&
	mkdir off && coffer -r src-repo export --target off --to off --all &&
	(
		export XDG_STATE_HOME=$TMP/copy-state &&
		coffer -r copy import --init off &&
		coffer -r copy key add --kdf-memory 8 --new-passphrase-file p1
	) &&
	coffer -r src-repo key rotate && more 2 && snap src-repo &&
	coffer -r src-repo export --target off --to off --all &&
	(
		export XDG_STATE_HOME=$TMP/copy-state &&
		coffer -r copy import off &&
		grep "^epoch 2 " copy/coffer.conf &&
		unset COFFER_KEY_FILE &&
		restores copy --passphrase-file p1
	)
'

test_done
