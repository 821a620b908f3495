#!/bin/sh
# bench/paired.sh: two coffer binaries (or one binary with and without
# an environment setting) timed in pairs on the same tree, A then B, B then
# A, ..., each backup into a fresh repository and catalog, the tree read
# into page cache before each.  On a shared machine only such pairs say
# which is faster: see bench/README.md ("Paired runs").
#
#   sh bench/paired.sh [-e VAR=VALUE]... A [-e VAR=VALUE]... B
#
# A and B are coffer binaries; each -e sets a variable for the binary that
# follows it (so `paired.sh ./coffer -e COFFER_WALK_AHEAD=0 ./coffer`
# compares a setting).  It prints one line per pair (seconds of A and B,
# B/A) and a summary: ranges, means, and the pairs in which B was at least
# 5% faster than A (and the other way).
#
# Environment:
#   PAIRS       pairs (default 10)
#   PAIRED_TREE the tree (default: 100,000 files of 1 to 8 KiB in 1,000
#               directories, made once by bench/smallfiles.c, as `make
#               bench-files` makes it; "bench" for gen.c's tree at
#               BENCH_SCALE, default 0.25); a directory is used as it is
#   PAIRED_STEP initial (default): each backup the first into its
#               repository; unchanged: a second backup of the same tree,
#               the first one (untimed) made just before it
#   PAIRED_COLD 1: the page cache dropped before each backup (as root),
#               the tree read from disk, as a server's nightly backup
#               reads it; default: the tree read into the cache first
#   BENCH_DIR   scratch directory (default /var/tmp/coffer-paired): the
#               tree is kept there between runs, repositories are not
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PAIRS=${PAIRS:-10}
BD=${BENCH_DIR:-/var/tmp/coffer-paired}
TREE=${PAIRED_TREE:-$BD/files}
CC=${CC:-cc}

usage() {
	echo "usage: paired.sh [-e VAR=VALUE]... A [-e VAR=VALUE]... B" >&2
	exit 2
}
ENV_A= ENV_B= A= B= pending=
while [ $# -gt 0 ]; do
	case $1 in
	-e)	[ $# -ge 2 ] || usage
		pending="$pending $2"
		shift 2 ;;
	*)	if [ -z "$A" ]; then
			A=$1 ENV_A=$pending
		elif [ -z "$B" ]; then
			B=$1 ENV_B=$pending
		else
			usage
		fi
		pending=
		shift ;;
	esac
done
[ -n "$A" ] && [ -n "$B" ] || usage
for bin in "$A" "$B"; do
	[ -x "$bin" ] || { echo "paired.sh: $bin: not executable" >&2; exit 1; }
done
A=$(cd "$(dirname "$A")" && pwd)/$(basename "$A")
B=$(cd "$(dirname "$B")" && pwd)/$(basename "$B")

mkdir -p "$BD/bin"
unset COFFER_PASSPHRASE COFFER_REPO COFFER_KEY_FILE COFFER_CATALOG || true
export XDG_STATE_HOME="$BD/state" XDG_CACHE_HOME="$BD/cache"

case $TREE in
"$BD/files")
	if [ ! -d "$TREE" ]; then
		$CC -std=c11 -O2 -o "$BD/bin/smallfiles" "$ROOT/bench/smallfiles.c"
		"$BD/bin/smallfiles" --seed 1 --dirs 1000 "$TREE.tmp" 100000
		mv "$TREE.tmp" "$TREE"
	fi ;;
bench)
	TREE=$BD/bench
	if [ ! -d "$TREE" ]; then
		$CC -std=c11 -O2 -o "$BD/bin/gen" "$ROOT/bench/gen.c" -lm
		"$BD/bin/gen" --scale "${BENCH_SCALE:-0.25}" --seed 1 "$TREE.tmp"
		mv "$TREE.tmp" "$TREE"
	fi ;;
esac
[ -d "$TREE" ] || { echo "paired.sh: $TREE: no such directory" >&2; exit 1; }

# run BIN ENV: one timed backup into a fresh repository; prints seconds.
run() {
	rm -rf "$BD/repo" "$BD/repo.key" "$BD/state" "$BD/cache"
	"$1" -q init --key-file "$BD/repo.key" "$BD/repo" >/dev/null
	if [ "${PAIRED_STEP:-initial}" = unchanged ]; then
		# shellcheck disable=SC2086
		env $2 "$1" -q -r "$BD/repo" --key-file "$BD/repo.key" \
			backup tree "$TREE" >/dev/null
	fi
	if [ "${PAIRED_COLD:-0}" = 1 ]; then
		sync
		echo 3 > /proc/sys/vm/drop_caches
	else
		find "$TREE" -type f -print0 | xargs -0 cat > /dev/null
		sync
	fi
	_t0=$(date +%s.%N)
	# shellcheck disable=SC2086
	env $2 "$1" -q -r "$BD/repo" --key-file "$BD/repo.key" \
		backup tree "$TREE" >/dev/null
	_t1=$(date +%s.%N)
	echo "$_t0 $_t1" | awk '{ printf "%.3f\n", $2 - $1 }'
}

echo "A: $ENV_A $A"
echo "B: $ENV_B $B"
echo "tree: $TREE, ${PAIRED_STEP:-initial} backups${PAIRED_COLD:+ (PAIRED_COLD=$PAIRED_COLD)}; load $(cut -d' ' -f1-3 /proc/loadavg)"
OUT=$BD/pairs.$$
: > "$OUT"
i=1
while [ "$i" -le "$PAIRS" ]; do
	if [ $((i % 2)) -eq 1 ]; then
		a=$(run "$A" "$ENV_A"); b=$(run "$B" "$ENV_B")
	else
		b=$(run "$B" "$ENV_B"); a=$(run "$A" "$ENV_A")
	fi
	echo "$a $b" >> "$OUT"
	echo "$i $a $b" | awk '{ printf "pair %2d: A %.2f s  B %.2f s  B/A %.3f\n", $1, $2, $3, $3 / $2 }'
	i=$((i + 1))
done
awk '
NR == 1 { amin = amax = $1; bmin = bmax = $2 }
{
	sa += $1; sb += $2
	if ($1 < amin) amin = $1; if ($1 > amax) amax = $1
	if ($2 < bmin) bmin = $2; if ($2 > bmax) bmax = $2
	if ($2 <= 0.95 * $1) bwin++
	if ($1 <= 0.95 * $2) awin++
	if ($2 < $1) bfaster++
}
END {
	printf "A: %.2f-%.2f s (mean %.2f)\n", amin, amax, sa / NR
	printf "B: %.2f-%.2f s (mean %.2f)\n", bmin, bmax, sb / NR
	printf "B faster in %d of %d pairs; by 5%% or more in %d, A by 5%% or more in %d\n",
	    bfaster, NR, bwin, awin
}' "$OUT"
rm -f "$OUT"
rm -rf "$BD/repo" "$BD/repo.key" "$BD/state" "$BD/cache"
