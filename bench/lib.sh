# bench/lib.sh: what bench/run.sh and bench/growth.sh share.  Sourced,
# after they set PROG (their name in messages), ROOT, BD, CC and MAKE.
# shellcheck shell=sh

say() { printf '%s %s: %s\n' "$(date +%H:%M:%S)" "$PROG" "$*" >&2; }
die() { printf '%s: %s\n' "$PROG" "$*" >&2; exit 1; }
now() { date +%s.%N; }
fsub() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a - b }'; }
dusize() { du -sb "$1" | awk '{ print $1 }'; }

# need_number NAME VALUE: VALUE is a decimal number, or die.
need_number() {
	case $2 in
	''|*[!0-9.]*|*.*.*) die "$1 must be a positive number: $2" ;;
	esac
}

# need_count NAME VALUE: VALUE is a positive integer without leading
# zeros, or die.
need_count() {
	case $2 in
	''|*[!0-9]*|0*) die "$1 must be a positive integer: $2" ;;
	esac
}

# BD must be absolute: the programs run from other directories.
need_absolute_dir() {
	case $BD in
	/*) ;;
	*) die "BENCH_DIR must be an absolute path: $BD" ;;
	esac
}

# apt_install PKG...: Debian packages, with sudo when not root.
apt_install() {
	_sudo=
	[ "$(id -u)" = 0 ] || _sudo=sudo
	say "installing $*"
	$_sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $_sudo apt-get install -y -qq "$@" \
		>/dev/null
}

# build_coffer: coffer from the work tree's sources, built privately in
# $BD/build (builds of the work tree during the run neither race with it
# nor change it) as $BD/bin/coffer, and the tree generator as
# $BD/bin/gen.  Sets COFFER.
build_coffer() {
	say "building coffer"
	$MAKE -C "$ROOT" --no-print-directory -j"$(nproc)" BUILD="$BD/build" \
		BIN="$BD/bin/coffer" "$BD/bin/coffer" >"$BD/logs/build.log" 2>&1 ||
		{ tail -20 "$BD/logs/build.log" >&2; die "make coffer failed"; }
	COFFER=$BD/bin/coffer
	$CC -std=c11 -O2 -o "$BD/bin/gen" "$ROOT/bench/gen.c" -lm
}

# From a /usr/bin/time -v report: peak RSS in MiB; "user U s, system S s".
time_rss() {
	awk -F': ' '/Maximum resident set size/ { printf "%.1f", $2 / 1024 }' "$1"
}
time_cpu() {
	awk -F': ' '/User time/ { u = $2 } /System time/ { k = $2 }
	    END { printf "user %s s, system %s s", u, k }' "$1"
}

# claim_dir KIND: $BD afresh for this bench, with bin/ and logs/: an
# earlier run's directory (marked .coffer-KIND) is removed, anything else
# there is refused.
claim_dir() {
	need_absolute_dir
	if [ -e "$BD" ]; then
		[ -e "$BD/.coffer-$1" ] ||
			die "$BD exists and is not a $1 bench directory; remove it or set BENCH_DIR"
		rm -rf "$BD"
	fi
	mkdir -p "$BD/bin" "$BD/logs"
	: > "$BD/.coffer-$1"
}

# timed STEP CMD...: CMD under /usr/bin/time -v, then sync (counted); a
# line "STEP seconds rss_mib exit" appended to $RES.
timed() {
	_step=$1
	shift
	_log=$BD/logs/$_step.log
	sync
	_t0=$(now)
	if /usr/bin/time -v -o "$_log.time" "$@" >"$_log" 2>&1; then
		_rc=0
	else
		_rc=$?
	fi
	sync
	_t1=$(now)
	printf '%s\t%s\t%s\t%s\n' "$_step" "$(fsub "$_t1" "$_t0")" \
		"$(time_rss "$_log.time")" "$_rc" >> "$RES"
	say "$_step: $(fsub "$_t1" "$_t0") s, exit $_rc"
}

# two_steps: a bench/gen.c tree of scale $SCALE at $TREE backed up into a
# new repository at $BD/repo (key file $COFFER_KEY_FILE) as two datasets,
# ckpt/ and data/, then a second checkpoint step as incrementals.  Sets R,
# the coffer command for it.
two_steps() {
	say "generating a tree (scale $SCALE)"
	"$BD/bin/gen" --scale "$SCALE" "$TREE" 2>>"$BD/logs/gen.log"
	"$COFFER" -q init --key-file "$COFFER_KEY_FILE" "$BD/repo"
	R="$COFFER -q -r $BD/repo"
	$R backup ckpt "$TREE/ckpt"
	$R backup data "$TREE/data"
	"$BD/bin/gen" --mutate "$TREE" 2>>"$BD/logs/gen.log"
	$R backup ckpt "$TREE/ckpt"
	$R backup data "$TREE/data"
}

# swift_up: an OpenStack Swift on loopback in $BD/swift
# (tests/tools/swift-server), its servers ending with this script; its
# SWIFT_* settings read, and exported as the AWS_* variables and
# COFFER_CACERT that coffer and restic take.
swift_up() {
	say "starting Swift"
	sleep 100000 &
	OWNER=$!
	trap 'kill $OWNER 2>/dev/null || :' EXIT
	"$ROOT/tests/tools/swift-server" start "$BD/swift" --owner $OWNER \
		> "$BD/swift.env"
	. "$BD/swift.env"
	export AWS_ACCESS_KEY_ID="$SWIFT_ACCESS_KEY"
	export AWS_SECRET_ACCESS_KEY="$SWIFT_SECRET_KEY"
	export AWS_DEFAULT_REGION="$SWIFT_REGION"
	export COFFER_CACERT="$SWIFT_CACERT"
}
