#!/bin/sh
# bench/fleet.sh: `make bench-fleet`.  Many writers, one repository: 1, 2,
# 4 and 8 simulated hosts (each its own XDG_STATE_HOME, so its own
# catalog) back up at once into one repository, then the 4 hosts' backups
# again one after another, each step into a fresh repository and fresh
# catalogs.  On a local repository, then over HTTPS to one OpenStack
# Swift (s3api) on loopback, started here by tests/tools/swift-server
# (FLEET_S3=0 leaves it out).
#
# Each step's source is BENCH_SCALE x 256 MiB in all, split evenly between
# its hosts; each host's half is the same for every host of the step (its
# shared/ directory, dedup across hosts) and half its own (own/).  The
# files are random bytes (4 MiB each), so compression gives up on them
# and the work is chunking, hashing, encryption and the store.
#
# Per step: wall time from the first writer's start to the last one's
# end; MB/s of source data over it; each writer's own seconds; the time
# before each backup began its work (its wall time less the seconds its
# `backup --json` reports: start, repository open, the writer lock,
# catalog sync); the time each spent refused by flock (local only:
# strace of flock, coffer polls with LOCK_NB, so a wait shows as a
# refused call; on Swift the lock is a lease object and not seen there);
# the writers' user+system seconds (/usr/bin/time -v), Swift's servers'
# (from /proc), and the whole machine's busy share (/proc/stat).
# Not part of `make check`.
#
# Environment:
#   BENCH_SCALE    source bytes per step: 256 MiB at 1 (default 1)
#   BENCH_DIR      scratch directory (default /tmp/coffer-fleet); removed
#                  at the end unless BENCH_KEEP=1
#   FLEET_WRITERS  writer counts (default "1 2 4 8")
#   FLEET_SERIAL   writer count also run one after another (default 4)
#   FLEET_S3       0: the local repository only (default 1)
#   CC             C compiler for the private build (default cc)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCALE=${BENCH_SCALE:-1}
BD=${BENCH_DIR:-/tmp/coffer-fleet}
KEEP=${BENCH_KEEP:-0}
WRITERS=${FLEET_WRITERS:-1 2 4 8}
SERIAL=${FLEET_SERIAL:-4}
S3=${FLEET_S3:-1}
CC=${CC:-cc}
MAKE=${MAKE:-make}
PROG=bench-fleet
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_number BENCH_SCALE "$SCALE"
for n in $WRITERS $SERIAL; do
	need_count FLEET_WRITERS "$n"
done
missing=
[ -x /usr/bin/time ] || missing="$missing time"
command -v strace >/dev/null 2>&1 || missing="$missing strace"
# shellcheck disable=SC2086
[ -z "$missing" ] || apt_install $missing
if [ "$S3" != 0 ]; then
	"$ROOT/tests/tools/swift-server" check >/dev/null ||
		die "Swift cannot run here (make deps installs python3-swift; FLEET_S3=0 skips it)"
fi
claim_dir fleet
build_coffer

unset COFFER_PASSPHRASE COFFER_CATALOG COFFER_REPO COFFER_KEY_FILE \
	CURL_CA_BUNDLE AWS_CA_BUNDLE XDG_STATE_HOME || true
export TMPDIR="$BD"
export COFFER_KEY_FILE	# per step, a key file for its repository
RES=$BD/results.tsv	# store n mode bytes wall min max pre lock cpu swift busy stored failed
: > "$RES"
FILE=4194304

# mkfiles DIR BYTES: BYTES of random data in files of 4 MiB.
mkfiles() {
	mkdir -p "$1"
	_left=$2
	_i=0
	while [ "$_left" -gt 0 ]; do
		_n=$FILE
		[ "$_left" -ge "$_n" ] || _n=$_left
		head -c "$_n" /dev/urandom > "$1/f$_i"
		_left=$((_left - _n))
		_i=$((_i + 1))
	done
}

# make_data N: $BD/data/N/hK for hosts 1..N, BENCH_SCALE x 256 MiB in
# all, each half shared with the other hosts, half its own.
make_data() {
	_d=$BD/data/$1
	_half=$(awk -v s="$SCALE" -v n="$1" \
	    'BEGIN { printf "%d", 268435456 * s / n / 2 }')
	mkfiles "$_d/shared" "$_half"
	for _h in $(seq 1 "$1"); do
		mkdir -p "$_d/h$_h"
		cp -r "$_d/shared" "$_d/h$_h/shared"
		mkfiles "$_d/h$_h/own" "$_half"
	done
	rm -rf "$_d/shared"
}

# cpu_busy: "busy total" jiffies of the whole machine (/proc/stat).
cpu_busy() {
	awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i
	    print t - $5 - $6, t; exit }' /proc/stat
}

# swift_cpu: user+system clock ticks of Swift's servers, 0 without them.
swift_cpu() {
	_t=0
	for _p in ${SWIFT_PIDS:-}; do
		_t=$((_t + $(awk '{ print $14 + $15 }' "/proc/$_p/stat" 2>/dev/null ||
		    echo 0)))
	done
	echo "$_t"
}

# writer LOG REPO HOST DATA: one host's backup, timed; LOG.rc gets
# "exit start end".
writer() {
	_s=$(now)
	if XDG_STATE_HOME=$BD/state/$(basename "$1") /usr/bin/time -v \
	    -o "$1.time" strace -f --seccomp-bpf -e trace=flock,close -ttt \
	    -o "$1.strace" "$COFFER" -r "$2" backup --json "$3" "$4" \
	    > "$1.json" 2> "$1.err"; then
		_rc=0
	else
		_rc=$?
	fi
	echo "$_rc $_s $(now)" > "$1.rc"
}

# Seconds between a refused flock (EAGAIN) and the next granted one on
# the same fd before it is closed, summed: what the writer waited for
# locks (a refused probe of another put's temporary file is closed).
flock_wait() {
	awk '$3 ~ /^(flock|close)\(/ {
		fd = $3; sub(/^[a-z]*\(/, "", fd); sub(/[,)].*/, "", fd)
		if ($3 ~ /^close/) delete t0[fd]
		else if ($0 ~ /= -1 EAGAIN/) { if (!(fd in t0)) t0[fd] = $2 }
		else if ($0 ~ /= 0$/ && fd in t0) { w += $2 - t0[fd]; delete t0[fd] }
	} END { printf "%.3f", w }' "$1"
}

# step STORE REPO N MODE: N hosts' backups into a new repository REPO,
# at once (MODE par) or one after another (ser); a line in $RES.
step() {
	_tag=$1-$3-$4
	COFFER_KEY_FILE=$BD/$_tag.key
	"$COFFER" -q init --key-file "$COFFER_KEY_FILE" "$2" \
	    2>"$BD/logs/$_tag.init" ||
		die "init $2 failed: $(cat "$BD/logs/$_tag.init")"
	rm -rf "$BD/state"
	cat "$BD/data/$3"/h*/*/* > /dev/null
	sync
	_c0=$(cpu_busy)
	_w0=$(swift_cpu)
	_t0=$(now)
	_pids=
	for _h in $(seq 1 "$3"); do
		if [ "$4" = par ]; then
			writer "$BD/logs/$_tag-h$_h" "$2" "host$_h" \
			    "$BD/data/$3/h$_h" &
			_pids="$_pids $!"
		else
			writer "$BD/logs/$_tag-h$_h" "$2" "host$_h" \
			    "$BD/data/$3/h$_h"
		fi
	done
	for _p in $_pids; do
		wait "$_p"
	done
	_t1=$(now)
	_w1=$(swift_cpu)
	_c1=$(cpu_busy)
	_bytes=$(du -sb --apparent-size "$BD/data/$3" | awk '{ print $1 }')
	: > "$BD/logs/$_tag.writers"
	for _h in $(seq 1 "$3"); do
		_l=$BD/logs/$_tag-h$_h
		read -r _rc _s _e < "$_l.rc"
		_sec=$(sed -n 's/.*"seconds": *\([0-9.]*\).*/\1/p' "$_l.json")
		_st=$(sed -n 's/.*"bytes_stored": *\([0-9]*\).*/\1/p' "$_l.json")
		_cpu=$(awk -F': ' '/User time/ { u = $2 }
		    /System time/ { k = $2 } END { print u + k }' "$_l.time")
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$_rc" \
		    "$(fsub "$_e" "$_s")" "$(fsub "$(fsub "$_e" "$_s")" \
		    "${_sec:-0}")" "$(flock_wait "$_l.strace")" "$_cpu" \
		    "${_st:-0}" "$(fsub "$_s" "$_t0")" >> "$BD/logs/$_tag.writers"
		[ "$_rc" = 0 ] || say "$_tag host$_h: exit $_rc: $(tail -3 "$_l.err")"
	done
	awk -F'\t' -v store="$1" -v n="$3" -v mode="$4" -v b="$_bytes" \
	    -v wall="$(fsub "$_t1" "$_t0")" -v c0="$_c0" -v c1="$_c1" \
	    -v sw="$((_w1 - _w0))" -v hz="$(getconf CLK_TCK)" '
	{
		if (NR == 1 || $2 < mn) mn = $2
		if ($2 > mx) mx = $2
		if ($3 > pre) pre = $3
		if ($4 > lk) lk = $4
		cpu += $5; st += $6; if ($1 != 0) bad++
	} END {
		split(c0, a, " "); split(c1, z, " ")
		busy = (z[2] > a[2]) ? (z[1] - a[1]) / (z[2] - a[2]) * 100 : 0
		printf "%s\t%d\t%s\t%d\t%s\t%.2f\t%.2f\t%.2f\t%.3f\t%.1f\t%.1f\t%.0f\t%d\t%d\n",
		    store, n, mode, b, wall, mn, mx, pre, lk, cpu, sw / hz,
		    busy, st, bad
	}' "$BD/logs/$_tag.writers" >> "$RES"
	say "$_tag: $(fsub "$_t1" "$_t0") s"
}

# run_store STORE REPO-PREFIX: every step on one store.
run_store() {
	for n in $WRITERS; do
		step "$1" "$2-$n-par" "$n" par
	done
	[ ! -d "$BD/data/$SERIAL" ] || step "$1" "$2-$SERIAL-ser" "$SERIAL" ser
}

say "generating data (scale $SCALE)"
for n in $WRITERS $SERIAL; do
	[ -d "$BD/data/$n" ] || make_data "$n"
done

run_store local "$BD/repo"

if [ "$S3" != 0 ]; then
	swift_up
	run_store swift "s3:$SWIFT_S3_HTTPS_URL/fleet"
fi

printf '\nmany writers, one repository; %d cores, load %s; MB = 10^6 bytes\n' \
	"$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"
FAILED=0
for store in local swift; do
	grep -q "^$store	" "$RES" || continue
	printf '\n%s\n' "$store"
	printf '%-8s %6s %7s %7s %12s %6s %6s %8s %8s %6s %9s %s\n' writers \
	    MB wall_s MB/s each_s pre_s lock_s cpu_s swift_s busy% stored_MB exit
	awk -F'\t' -v store="$store" '$1 == store {
		printf "%-8s %6.0f %7.2f %7.1f %12s %6.2f %6s %8.1f %8.1f %6.0f %9.0f %s\n",
		    $2 ($3 == "ser" ? " serial" : ""), $4 / 1e6, $5, $4 / 1e6 / $5,
		    sprintf("%.2f-%.2f", $6, $7), $8,
		    store == "local" ? sprintf("%.3f", $9) : "-", $10, $11, $12,
		    $13 / 1e6, $14 ? "FAILED " $14 : "0"
	}' "$RES"
	awk -F'\t' '$14 != 0 { exit 1 }' "$RES" || FAILED=1
done
cat <<'EOF'

wall_s: first writer's start to the last one's end; each_s: each writer's
own seconds (min-max); pre_s: the longest time before a backup began its
work (open, writer lock, catalog sync); lock_s: the longest time a writer
was refused by flock (local); cpu_s: the writers' user+system seconds;
swift_s: Swift's servers'; busy%: the whole machine's busy share;
stored_MB: bytes the writers stored (each writer's bytes_stored, summed)
EOF
if [ "$KEEP" != 1 ] && [ "$FAILED" = 0 ]; then
	[ "$S3" = 0 ] || "$ROOT/tests/tools/swift-server" stop "$BD/swift" || :
	rm -rf "$BD"
else
	say "kept $BD"
fi
[ "$FAILED" = 0 ] || die "some writers failed; logs in $BD/logs"
