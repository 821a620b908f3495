#!/bin/sh
# bench/prune.sh: `make bench-prune`.  Retention against restic and borg:
# one repository per tool receives PRUNE_ROUNDS trees of bench/gen.c, each
# from its own seed (nothing deduplicates across rounds), as full
# snapshots of one dataset; then each tool forgets the older half and
# reclaims its space (coffer forget --keep-last N --prune; restic forget
# --keep-last N --prune; borg prune --keep-last N && borg compact).  Each
# step is timed under /usr/bin/time -v, and the bytes it read and wrote
# through system calls (rchar and wchar of /proc/PID/io, polled) are
# recorded.  Not part of `make check`.
#
# Environment:
#   BENCH_SCALE    tree size per round: about 2 GiB at 1 (default 1)
#   PRUNE_ROUNDS   trees backed up (default 10); the newest half is kept
#   BENCH_DIR      scratch directory (default /tmp/coffer-prune); removed
#                  at the end unless BENCH_KEEP=1
#   CC             C compiler for bench/gen.c (default cc)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCALE=${BENCH_SCALE:-1}
ROUNDS=${PRUNE_ROUNDS:-10}
BD=${BENCH_DIR:-/tmp/coffer-prune}
KEEP=${BENCH_KEEP:-0}
CC=${CC:-cc}
MAKE=${MAKE:-make}
PROG=prune
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_number BENCH_SCALE "$SCALE"
need_count PRUNE_ROUNDS "$ROUNDS"
missing=
command -v restic >/dev/null 2>&1 || missing="$missing restic"
command -v borg >/dev/null 2>&1 || missing="$missing borgbackup"
[ -x /usr/bin/time ] || missing="$missing time"
# shellcheck disable=SC2086
[ -z "$missing" ] || apt_install $missing
claim_dir prune
"$MAKE" -C "$ROOT" --no-print-directory coffer >/dev/null
COFFER=$ROOT/coffer
"$CC" -O2 -o "$BD/bin/gen" "$ROOT/bench/gen.c" -lm

unset COFFER_PASSPHRASE COFFER_CATALOG COFFER_REPO COFFER_KEY_FILE \
	RESTIC_REPOSITORY BORG_REPO || true
export XDG_STATE_HOME="$BD/state" XDG_CACHE_HOME="$BD/cache"
export BORG_BASE_DIR="$BD/borg"
export RESTIC_PASSWORD=bench-restic-password
export BORG_PASSPHRASE=bench-borg-passphrase
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
export BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
TREE=$BD/tree
RES=$BD/results.tsv	# tool step secs rss_mib exit rchar wchar repo_bytes
: > "$RES"

# measured TOOL STEP REPO CMD...: CMD under /usr/bin/time -v, its
# /proc/PID/io polled every 50 ms for the last rchar and wchar seen.
measured() {
	_tool=$1 _step=$2 _repo=$3
	shift 3
	_log=$BD/logs/$_tool-$_step.log
	sync
	_t0=$(now)
	/usr/bin/time -v -o "$_log.time" "$@" >"$_log" 2>&1 &
	_pid=$!
	_io=
	while kill -0 "$_pid" 2>/dev/null; do
		# The child of time(1) is the tool.
		_c=$(pgrep -P "$_pid" | head -1 || true)
		[ -n "$_c" ] && _io=$(cat "/proc/$_c/io" 2>/dev/null || echo "$_io")
		sleep 0.05
	done
	if wait "$_pid"; then _rc=0; else _rc=$?; fi
	_t1=$(now)
	_rchar=$(printf '%s\n' "$_io" | awk '/^rchar/ { print $2 }')
	_wchar=$(printf '%s\n' "$_io" | awk '/^wchar/ { print $2 }')
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$_tool" "$_step" \
		"$(fsub "$_t1" "$_t0")" "$(time_rss "$_log.time")" "$_rc" \
		"${_rchar:-0}" "${_wchar:-0}" "$(dusize "$_repo")" >> "$RES"
	say "$_tool $_step: $(fsub "$_t1" "$_t0") s, exit $_rc"
}

"$COFFER" -q init --key-file "$BD/coffer.key" "$BD/coffer"
restic -q -r "$BD/restic" init
borg init --encryption=repokey "$BD/borg-repo"
r=1
while [ "$r" -le "$ROUNDS" ]; do
	say "round $r: generating a tree (scale $SCALE, seed $r)"
	rm -rf "$TREE"
	"$BD/bin/gen" --scale "$SCALE" --seed "$r" "$TREE" 2>>"$BD/logs/gen.log"
	# One second apart at least: the tools order snapshots by time.
	"$COFFER" -q -r "$BD/coffer" --key-file "$BD/coffer.key" backup \
		--level full tree "$TREE"
	restic -q -r "$BD/restic" backup "$TREE" >/dev/null
	borg create --compression zstd,3 "$BD/borg-repo::round-$r" "$TREE"
	sleep 1
	r=$((r + 1))
done
rm -rf "$TREE"
KEEPN=$(( (ROUNDS + 1) / 2 ))
for t in coffer restic borg-repo; do
	say "$t: $(dusize "$BD/$t") bytes before"
done
measured coffer forget-prune "$BD/coffer" "$COFFER" -q -r "$BD/coffer" \
	--key-file "$BD/coffer.key" forget --keep-last "$KEEPN" --prune
measured restic forget-prune "$BD/restic" restic -q -r "$BD/restic" forget \
	--keep-last "$KEEPN" --prune
measured borg prune "$BD/borg-repo" borg prune --keep-last "$KEEPN" \
	"$BD/borg-repo"
measured borg compact "$BD/borg-repo" borg compact "$BD/borg-repo"

printf '%-8s %-13s %8s %8s %5s %14s %14s %14s\n' tool step seconds rss_mib \
	exit read_bytes written_bytes repo_after
awk -F'\t' '{ printf "%-8s %-13s %8s %8s %5s %14s %14s %14s\n",
    $1, $2, $3, $4, $5, $6, $7, $8 }' "$RES"
if [ "$KEEP" != 1 ]; then
	rm -rf "$BD"
else
	say "kept $BD"
fi
