#!/bin/bash
test_description='prune is crash-safe, chain-safe, two-host-safe and survives a full disk'
. "$(dirname "$0")/../lib.sh"

# Small packs, so that one snapshot's data spans several and forgetting
# leaves some packs dead, some half used.
export COFFER_PACK_SIZE=1500000

mounts=
trap 'for m in $mounts; do umount "$m" 2>/dev/null; done; test_cleanup_' EXIT

test_expect_success 'setup: snapshot A, then a full B that drops half of A' '
	mkdir src &&
	for f in a1 a2 a3 a4 a5 a6; do random_file src/$f 1 || return 1; done &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >a.json &&
	A=$(json_get a.json "\$j->{snapshot}") && cp -a src treeA &&
	rm src/a3 src/a4 src/a5 && random_file src/b1 1 &&
	coffer -r repo backup --json --level full ds src >b.json &&
	B=$(json_get b.json "\$j->{snapshot}") && cp -a src treeB &&
	cp -a repo pristine && cp -a "$XDG_STATE_HOME" state0 &&
	find repo/packs -type f | wc -l
'

restore_B() {
	rm -rf outB && coffer -r repo restore "$B" outB && treecmp treeB outB
}

fresh() {
	rm -rf repo "$XDG_STATE_HOME" && cp -a pristine repo &&
	cp -a state0 "$XDG_STATE_HOME"
}

test_expect_success 'forget A, prune: packs deleted and repacked, B intact' '
	fresh &&
	coffer -r repo forget "$A" &&
	coffer -r repo prune --max-unused 1% --json >p.json &&
	cat p.json &&
	json_check p.json "\$j->{packs_deleted} + \$j->{packs_repacked} >= 1" &&
	test "$(dir_bytes repo)" -lt "$(dir_bytes pristine)" &&
	coffer -r repo verify --read-data && restore_B
'

for point in repacked committed removing; do
	test_expect_success "kill -9 at '$point': B restores, the next prune finishes" '
		fresh &&
		coffer -r repo forget "$A" &&
		test_expect_code 137 env COFFER_TEST_PRUNE_CRASH='$point' \
			"$COFFER" -r repo prune --max-unused 1% &&
		coffer -r repo verify --read-data &&
		restore_B &&
		coffer -r repo prune --max-unused 1% &&
		coffer -r repo verify --read-data &&
		restore_B &&
		coffer -r repo prune --max-unused 1% --json >again.json &&
		json_check again.json "\$j->{packs_deleted} == 0 && \$j->{packs_repacked} == 0" &&
		rm -rf "$XDG_STATE_HOME/coffer" &&
		coffer -r repo snapshots --json >s.json &&
		json_check s.json "@\$j == 1 && \$j->[0]{id} eq q($B)"
	'
done

test_expect_success 'two hosts: one prunes, the other still restores and verifies' '
	fresh &&
	H2=$TMP/host2 &&
	XDG_STATE_HOME=$H2 coffer -r repo snapshots >/dev/null &&
	coffer -r repo forget "$A" &&
	coffer -r repo prune --max-unused 1% &&
	XDG_STATE_HOME=$H2 coffer -r repo snapshots --json >h2.json &&
	json_check h2.json "@\$j == 1 && \$j->[0]{id} eq q($B)" &&
	XDG_STATE_HOME=$H2 coffer -r repo verify --read-data &&
	rm -rf outB && XDG_STATE_HOME=$H2 coffer -r repo restore "$B" outB &&
	treecmp treeB outB
'

test_expect_success 'forget in every order never breaks a chain' '
	rm -rf repo2 "$XDG_STATE_HOME/coffer" && coffer init --key-file k2 repo2 &&
	export COFFER_KEY_FILE=$TMP/k2 &&
	mkdir c && printf 1 >c/f &&
	coffer -r repo2 backup --json --level full c c >f.json && F=$(json_get f.json "\$j->{snapshot}") &&
	printf 2 >c/f && coffer -r repo2 backup --json --level differential c c >d.json &&
	D=$(json_get d.json "\$j->{snapshot}") &&
	printf 3 >c/f && coffer -r repo2 backup --json c c >i1.json && I1=$(json_get i1.json "\$j->{snapshot}") &&
	printf 4 >c/f && coffer -r repo2 backup --json c c >i2.json && I2=$(json_get i2.json "\$j->{snapshot}") &&
	test_expect_code 2 coffer -r repo2 forget "$F" 2>err && grep "builds on" err &&
	test_expect_code 2 coffer -r repo2 forget "$D" &&
	test_expect_code 2 coffer -r repo2 forget "$I1" &&
	coffer -r repo2 forget "$I2" &&
	coffer -r repo2 restore "$I1" o1 && test "$(cat o1/f)" = 3 &&
	coffer -r repo2 forget "$I1" && coffer -r repo2 restore "$D" o2 &&
	test "$(cat o2/f)" = 2 &&
	coffer -r repo2 forget "$D" "$F" --prune &&
	coffer -r repo2 snapshots --json >none.json &&
	json_check none.json "@\$j == 0" &&
	test -z "$(find repo2/packs -type f -size +100k)"
'

if test_have_prereq ROOT && mkdir -p probe &&
    mount -t tmpfs -o size=1m coffer-test probe 2>/dev/null; then
	umount probe
	test_set_prereq TMPFS
fi

test_expect_success TMPFS 'a full disk during a repack: clear error, nothing lost, later prune works' '
	export COFFER_KEY_FILE=$TMP/key &&
	mkdir small && mount -t tmpfs -o size=24m coffer-test small &&
	mounts="$mounts $TMP/small" &&
	rm -rf "$XDG_STATE_HOME" && cp -a state0 "$XDG_STATE_HOME" &&
	cp -a pristine small/repo &&
	coffer -r small/repo forget "$A" &&
	free=$(df -B1 --output=avail small | tail -1) &&
	head -c $((free - 200000)) /dev/zero >small/filler 2>/dev/null;
	test_expect_code 5 coffer -r small/repo prune --max-unused 1% 2>err;
	rc=$?; cat err; test $rc = 0 &&
	grep -i "no space" err &&
	test_dir_is_empty small/repo/tmp &&
	coffer -r small/repo verify --read-data &&
	rm -rf outB && coffer -r small/repo restore "$B" outB && treecmp treeB outB &&
	rm small/filler &&
	coffer -r small/repo prune --max-unused 1% &&
	coffer -r small/repo verify --read-data
'

test_expect_success '--max-unused 0%: every pack with any unused space is repacked, as restic does' '
	rm -rf z && mkdir z && random_file z/big 1 && head -c 20000 /dev/urandom >z/small &&
	coffer init --key-file zkey zrepo &&
	coffer -r zrepo --key-file zkey backup --json zs "$TMP/z" >z1.json &&
	Z1=$(json_get z1.json "\$j->{snapshot}") &&
	rm z/small && coffer -r zrepo --key-file zkey backup --level full zs "$TMP/z" &&
	coffer -r zrepo --key-file zkey forget "$Z1" &&
	coffer -r zrepo --key-file zkey prune --max-unused 10% --json >z10.json &&
	json_check z10.json "\$j->{packs_repacked} == 0" &&
	coffer -r zrepo --key-file zkey prune --max-unused 0% --json >z0.json &&
	cat z0.json &&
	json_check z0.json "\$j->{packs_repacked} == 1" &&
	test_expect_code 2 coffer -r zrepo --key-file zkey prune --max-unused -1% 2>err &&
	grep "from 0 to 100" err &&
	coffer -r zrepo --key-file zkey verify --read-data
'

test_done
