#!/bin/sh
# bench/export.sh: `make bench-export`.  Offsite export and import against
# cp of the same packs, in one run: a bench/gen.c tree backed up as two
# datasets (ckpt/ and data/), a second checkpoint step as incrementals,
# then
#   cp        cp -r of the repository's packs/ to a new directory, synced
#   export    coffer export --all to a directory (one bundle), synced
#   import    coffer import --init of that bundle into a new repository
#   chain     coffer export of ckpt@latest alone: packs carried vs needed
#   drill     coffer drill ckpt@latest from the repository, and
#             drill --from-bundles from the bundle
# each under /usr/bin/time; MB/s are of the packs' bytes.  The page cache
# is warm for every step (the packs were just written); all three copy
# steps read the same bytes.  Not part of `make check`.
#
# Environment:
#   BENCH_SCALE  tree size: about 2 GiB at 1 (default 1)
#   BENCH_DIR    scratch directory (default /tmp/coffer-export); removed
#                at the end unless BENCH_KEEP=1
#   CC           C compiler for bench/gen.c (default cc)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCALE=${BENCH_SCALE:-1}
BD=${BENCH_DIR:-/tmp/coffer-export}
KEEP=${BENCH_KEEP:-0}
CC=${CC:-cc}
MAKE=${MAKE:-make}
PROG=export
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_number BENCH_SCALE "$SCALE"
[ -x /usr/bin/time ] || apt_install time
claim_dir export
build_coffer

unset COFFER_PASSPHRASE COFFER_CATALOG COFFER_REPO COFFER_KEY_FILE || true
export XDG_STATE_HOME="$BD/state" TMPDIR="$BD"
export COFFER_KEY_FILE="$BD/coffer.key"
TREE=$BD/tree
RES=$BD/results.tsv	# step seconds rss_mib exit
: > "$RES"

two_steps
PACKS=$(dusize "$BD/repo/packs")
say "repository: $PACKS bytes of packs"

timed cp cp -r "$BD/repo/packs" "$BD/cp-packs"
mkdir -p "$BD/off"
timed export $R export --target off --to "$BD/off" --all
timed import "$COFFER" -q -r "$BD/imported" import --init "$BD/off"
mkdir -p "$BD/chain"
"$COFFER" -r "$BD/repo" export --json --target chain --to "$BD/chain" \
	ckpt@latest > "$BD/logs/chain.json"
timed drill $R drill ckpt@latest
timed drill-bundles $R drill --from-bundles "$BD/off" ckpt@latest

printf '%-14s %8s %8s %5s %9s\n' step seconds rss_mib exit MB/s
awk -F'\t' -v b="$PACKS" '{
	mbs = ($1 ~ /^(cp|export|import)$/ && $2 > 0) ? b / $2 / 1e6 : 0
	printf "%-14s %8s %8s %5s %9.0f\n", $1, $2, $3, $4, mbs
}' "$RES"
sed 's/.*"pack_bytes":\([0-9]*\),"needed_bytes":\([0-9]*\).*/chain export of ckpt@latest: \1 bytes of packs, \2 needed by its snapshots/' \
	"$BD/logs/chain.json"
if [ "$KEEP" != 1 ]; then
	rm -rf "$BD"
else
	say "kept $BD"
fi
