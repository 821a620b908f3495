#!/bin/bash
test_description='packs forged without any key (from coffer.conf alone) are refused before anything is decompressed, cheaply, and verify names them'
. "$(dirname "$0")/../lib.sh"
require_coffer

# Once keys have rotated, coffer.conf lists the epoch's public key: anyone
# who can write the storage can seal a pack key to it and encrypt records
# and an index under that key (tests/tools/forge-pack.c).  What stops such
# a pack is the MAC in its trailer, under the id key.  Each shape is
# planted in a fresh copy of the repository; a sync (snapshots) and a
# verify must refuse it, name it, exit 4 and stay within the budget of
# doc/design.md: about 1 s and 64 MiB per 100 MB of pack.  Memory is
# measured (peak RSS by /usr/bin/time), time only reported.

FORGE=$BUILD/tests/forge-pack
[ -x "$FORGE" ] && test_set_prereq FORGE
[ -x /usr/bin/time ] && test_set_prereq TIME

test_expect_success FORGE 'setup: a snapshot, keys rotated' '
	coffer_init_keyfile pristine &&
	mkdir src && random_file src/a 2 && echo small >src/b &&
	coffer -r pristine backup ds src &&
	coffer -r pristine key rotate &&
	grep "^epoch 2 " pristine/coffer.conf &&
	echo more >src/c && coffer -r pristine backup ds src &&
	cp -a "$XDG_STATE_HOME/coffer" catalog0
'

fresh() {
	rm -rf repo "$XDG_STATE_HOME/coffer" &&
	cp -a pristine repo && cp -a catalog0 "$XDG_STATE_HOME/coffer"
}

# measured LIMIT_KIB CODE CMD...: CMD exits CODE with a peak RSS below
# LIMIT_KIB; its stderr in err, its cost appended to costs.
measured() {
	limit=$1 code=$2 && shift 2 &&
	/usr/bin/time -o rss -f "%e %M" "$COFFER" -r repo "$@" >out 2>err
	st=$? &&
	read -r secs kib <<-EOF &&
	$(tail -n 1 rss)
	EOF
	echo "$pack_shape $*: $secs s, $kib KiB" >>"$TMP/costs" &&
	cat err &&
	test "$st" = "$code" &&
	test "$kib" -lt "$limit"
}

# The budget for a pack of 100 MB or less: 64 MiB above what the same
# commands take on the repository without it (measured in the setup, so
# that a build with sanitizers has its own baseline).
test_expect_success FORGE,TIME 'baseline: the commands on the genuine repository' '
	fresh && pack_shape=none &&
	measured 1000000000 0 snapshots && b1=$kib &&
	measured 1000000000 0 verify --read-data && b2=$kib &&
	echo $(( (b1 > b2 ? b1 : b2) + 65536 )) >limit
'

for shape in bomb many overlap bomb-old many-old overlap-old; do
	test_expect_success FORGE,TIME "forged pack ($shape): sync and verify refuse it cheaply" '
		fresh &&
		pack_shape='"$shape"' &&
		name=$("$FORGE" '"$shape"' repo) &&
		test -f "$(pack_path "$name")" &&
		LIMIT=$(cat limit) &&
		measured $LIMIT 4 snapshots &&
		grep "pack .*$name" err &&
		! grep "decompress" err &&
		test $(grep -c "^error:" err) -le 2 &&
		measured $LIMIT 4 verify &&
		grep "$name" out &&
		measured $LIMIT 4 verify --read-data &&
		grep "$name" out &&
		coffer -r repo snapshots >list 2>/dev/null;
		test $(grep -c "ds" list) = 2
	'
done

test_expect_success FORGE,TIME 'a forged index of 100 MB costs less than 64 MiB more' '
	fresh &&
	pack_shape=bigindex &&
	LIMIT=$(cat limit) &&
	name=$("$FORGE" bigindex repo 2000000) &&
	test $(stat -c %s "$(pack_path "$name")") -gt 100000000 &&
	measured $LIMIT 4 snapshots &&
	grep "pack .*$name" err &&
	measured $LIMIT 4 verify &&
	grep "$name" out
'

test_expect_success FORGE 'the genuine snapshots still restore beside forged packs' '
	fresh &&
	"$FORGE" bomb repo >/dev/null && "$FORGE" many repo >/dev/null &&
	sid=$(coffer -r repo snapshots --json 2>/dev/null |
		perl -MJSON::PP -e "print JSON::PP->new->decode(join q(), <>)->[-1]{id}") &&
	# Its exit status is the one for "error:" lines (issue 40, item 10).
	{ coffer -r repo restore "$sid" dst || :; } &&
	cmp src/a dst/a && cmp src/c dst/c
'

test_expect_success FORGE 'costs' '
	cat "$TMP/costs"
'

test_done
