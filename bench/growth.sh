#!/bin/sh
# bench/growth.sh: `make bench-growth`.  Does coffer's memory stay flat as
# its repository grows?  One repository receives GROWTH_ROUNDS trees of
# bench/gen.c, each from its own seed (so nothing deduplicates across
# rounds and the repository grows by a whole tree each time); only one
# tree is on disk at a time.  Each round's full backup is timed under
# /usr/bin/time -v; after the first and the last round, so do a backup of
# the unchanged tree, a restore of the latest snapshot and a read-data
# verify of the whole repository.  It prints one table of peak RSS against
# repository size.  Not part of `make check`.
#
# Environment:
#   BENCH_SCALE    tree size per round: about 2 GiB at 1 (default 1)
#   GROWTH_ROUNDS  trees backed up into the one repository (default 10)
#   BENCH_DIR      scratch directory (default /tmp/coffer-growth); it is
#                  removed at the end unless BENCH_KEEP=1
#   CC             C compiler for bench/gen.c (default cc)
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCALE=${BENCH_SCALE:-1}
ROUNDS=${GROWTH_ROUNDS:-10}
BD=${BENCH_DIR:-/tmp/coffer-growth}
KEEP=${BENCH_KEEP:-0}
CC=${CC:-cc}
MAKE=${MAKE:-make}
PROG=growth
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_number BENCH_SCALE "$SCALE"
need_count GROWTH_ROUNDS "$ROUNDS"
[ -x /usr/bin/time ] || apt_install time
claim_dir growth
# The repository holds about 0.8 GB per GiB of tree and round; one tree
# and one restored tree are on disk besides.
need_kib=$(awk -v s="$SCALE" -v n="$ROUNDS" \
    'BEGIN { printf "%d", s * (n * 1.7 + 4.5) * 1024 * 1024 }')
avail_kib=$(df -Pk "$BD" | awk 'NR == 2 { print $4 }')
[ "$avail_kib" -ge "$need_kib" ] ||
	die "$BD: $((avail_kib / 1048576)) GiB free, $ROUNDS rounds at scale $SCALE need about $((need_kib / 1048576)) GiB"
cleanup() {
	if [ "$KEEP" = 1 ]; then
		say "kept $BD"
	else
		rm -rf "$BD"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build_coffer

unset COFFER_PASSPHRASE COFFER_CATALOG COFFER_REPO COFFER_KEY_FILE || true
export XDG_STATE_HOME="$BD/state"
REPO=$BD/repo
KEY=$BD/repo.key
TREE=$BD/tree
RES=$BD/results.tsv	# round step secs rss_mib exit repo_bytes catalog_bytes
: > "$RES"
FAILED=0

catalog_bytes() {
	find "$BD/state" -type f -name 'catalog.db*' -printf '%s\n' |
		awk '{ s += $1 } END { printf "%.0f\n", s }'
}

# timed ROUND STEP CMD...: run CMD under /usr/bin/time -v and record it.
timed() {
	_round=$1 _step=$2
	shift 2
	_log=$BD/logs/$_round-$_step.log
	_t0=$(now)
	_rc=0
	/usr/bin/time -v -o "$_log.time" "$@" >"$_log" 2>&1 || _rc=$?
	_secs=$(fsub "$(now)" "$_t0")
	_rss=$(time_rss "$_log.time")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$_round" "$_step" "$_secs" \
		"${_rss:-0}" "$_rc" "$(dusize "$REPO")" "$(catalog_bytes)" >> "$RES"
	if [ "$_rc" != 0 ]; then
		FAILED=1
		say "round $_round $_step FAILED (exit $_rc), see $_log"
		tail -5 "$_log" >&2
	else
		say "round $_round $_step: $_secs s, $_rss MiB ($(time_cpu "$_log.time"))"
	fi
}

# The steps measured after the first and the last round.
probe() {
	timed "$1" unchanged "$COFFER" -q -r "$REPO" --key-file "$KEY" \
		backup tree "$TREE"
	rm -rf "$BD/restore"
	timed "$1" restore "$COFFER" -q -r "$REPO" --key-file "$KEY" \
		restore tree@latest "$BD/restore"
	rm -rf "$BD/restore"
	timed "$1" verify "$COFFER" -q -r "$REPO" --key-file "$KEY" \
		verify --read-data
}

"$COFFER" -q init --key-file "$KEY" "$REPO" >"$BD/logs/init.log" 2>&1 ||
	{ cat "$BD/logs/init.log" >&2; die "coffer init failed"; }
r=1
while [ "$r" -le "$ROUNDS" ]; do
	rm -rf "$TREE"
	say "round $r: generating a tree (scale $SCALE, seed $r)"
	"$BD/bin/gen" --scale "$SCALE" --seed "$r" "$TREE" 2>>"$BD/logs/gen.log"
	timed "$r" backup "$COFFER" -q -r "$REPO" --key-file "$KEY" \
		backup tree "$TREE"
	if [ "$r" = 1 ] || [ "$r" = "$ROUNDS" ]; then
		probe "$r"
	fi
	r=$((r + 1))
done
rm -rf "$TREE"

CHUNKS=$(sqlite3 "$(find "$BD/state" -name catalog.db | head -1)" \
	'SELECT count(*) FROM chunk' 2>/dev/null || echo '?')
awk -F'\t' -v rounds="$ROUNDS" -v scale="$SCALE" -v chunks="$CHUNKS" '
{
	key = $1 SUBSEP $2
	secs[key] = $3; rss[key] = $4; rc[key] = $5
	repo[key] = $6; cat[key] = $7
	if ($2 == "backup") order[++n] = $1
}
function gb(b) { return sprintf("%.2f", b / 1e9) }
function cell(k) { return rc[k] == 0 ? sprintf("%7.2f s %6.1f MiB", secs[k], rss[k]) : "  FAILED" }
END {
	printf "\ncoffer: peak RSS as the repository grows (scale %s, %d rounds, %s chunks at the end)\n\n", scale, rounds, chunks
	printf "%-6s %-10s %-10s %-24s\n", "round", "repo GB", "catalog MB", "full backup"
	for (i = 1; i <= n; i++) {
		k = order[i] SUBSEP "backup"
		printf "%-6s %-10s %-10.1f %-24s\n", order[i], gb(repo[k]), cat[k] / 1e6, cell(k)
	}
	printf "\n%-22s %-24s %-24s\n", "step", "after round 1", "after round " rounds
	split("unchanged restore verify", steps, " ")
	for (s = 1; s <= 3; s++) {
		a = 1 SUBSEP steps[s]; b = rounds SUBSEP steps[s]
		printf "%-22s %-24s %-24s\n", steps[s], cell(a), (b in rss) ? cell(b) : "-"
	}
	maxr = 0
	for (k in rss) if (rss[k] + 0 > maxr) maxr = rss[k] + 0
	printf "\npeak RSS over every step: %.1f MiB\n", maxr
}' "$RES"
[ "$FAILED" = 0 ] || { say "some steps failed (logs in $BD/logs)"; KEEP=1; exit 1; }
