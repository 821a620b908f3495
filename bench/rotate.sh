#!/bin/sh
# bench/rotate.sh: `make bench-rotate`.  Key rotation against rewriting
# the data, in one run: a bench/gen.c tree backed up as two datasets
# (ckpt/ and data/), a second checkpoint step as incrementals, then
#   cp        cp -r of the repository's packs/ to a new directory, synced:
#             the least that resealing the data itself would cost (every
#             byte read and written once, no crypto)
#   rotate    coffer key rotate (a new key epoch)
#   rewrap    coffer key rotate --rewrap: every pack's header resealed in
#             place (and its index read, for the catalog's pack hash)
#   rewrap0   the same again: nothing left to reseal (headers read only)
#   retire    coffer key retire 2, after a second rotation and rewrap
#             (every pack header read to count those still sealed to it)
#   verify    coffer verify --read-data afterwards
# each under /usr/bin/time.  The page cache is warm for every step.  Not
# part of `make check`.
#
# Environment:
#   BENCH_SCALE  tree size: about 2 GiB at 1 (default 1)
#   BENCH_DIR    scratch directory (default /tmp/coffer-rotate); removed
#                at the end unless BENCH_KEEP=1
#   CC           C compiler for bench/gen.c (default cc)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCALE=${BENCH_SCALE:-1}
BD=${BENCH_DIR:-/tmp/coffer-rotate}
KEEP=${BENCH_KEEP:-0}
CC=${CC:-cc}
MAKE=${MAKE:-make}
PROG=rotate
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_number BENCH_SCALE "$SCALE"
[ -x /usr/bin/time ] || apt_install time
claim_dir rotate
build_coffer

unset COFFER_PASSPHRASE COFFER_CATALOG COFFER_REPO COFFER_KEY_FILE || true
export XDG_STATE_HOME="$BD/state" TMPDIR="$BD"
export COFFER_KEY_FILE="$BD/coffer.key"
TREE=$BD/tree
RES=$BD/results.tsv	# step seconds rss_mib exit
: > "$RES"

two_steps
PACKS=$(dusize "$BD/repo/packs")
NPACKS=$(find "$BD/repo/packs" -type f | wc -l)
say "repository: $NPACKS packs, $PACKS bytes"

timed cp cp -r "$BD/repo/packs" "$BD/cp-packs"
rm -rf "$BD/cp-packs"
timed rotate $R key rotate
timed rewrap $R key rotate --rewrap
timed rewrap0 $R key rotate --rewrap
$R key rotate
$R key rotate --rewrap
timed retire $R key retire 2
timed verify $R verify --read-data

printf '%-10s %8s %8s %5s\n' step seconds rss_mib exit
awk -F'\t' '{ printf "%-10s %8s %8s %5s\n", $1, $2, $3, $4 }' "$RES"
awk -F'\t' '$1 == "cp" { cp = $2 } $1 == "rewrap" { rw = $2 }
	END { if (cp > 0) printf "rewrap / cp: %.4f\n", rw / cp }' "$RES"
if [ "$KEEP" != 1 ]; then
	rm -rf "$BD"
else
	say "kept $BD"
fi
