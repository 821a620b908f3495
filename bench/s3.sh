#!/bin/sh
# bench/s3.sh: `make bench-s3`.  A repository on object storage: coffer
# against restic's S3 backend and against the store's own floor, in one
# run, all over HTTPS to one OpenStack Swift (s3api) on loopback, started
# here by tests/tools/swift-server:
#   coffer-backup   coffer backup of a bench/gen.c tree into s3:https://…
#   restic-backup   restic backup of the same tree (its S3 backend)
#   rclone-up       rclone copy of coffer's packs (a local repository of
#                   the same tree, made untimed) to a bucket: the floor
#                   of an upload of those bytes
#   coffer-restore  coffer restore of the snapshot from the bucket
#   restic-restore  restic restore of its snapshot
#   rclone-down     rclone copy of those packs back: a download's floor
# each under /usr/bin/time (seconds, peak RSS).  Swift's Python proxy and
# the TLS proxy share the machine's cores with the tool under test, as
# they would not on a real store: read the ratios, not the MB/s.
# Not part of `make check`.
#
# Environment:
#   BENCH_SCALE  tree size: about 2 GiB at 1 (default 1)
#   BENCH_DIR    scratch directory (default /tmp/coffer-s3); removed at
#                the end unless BENCH_KEEP=1
#   CC           C compiler for bench/gen.c (default cc)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCALE=${BENCH_SCALE:-1}
BD=${BENCH_DIR:-/tmp/coffer-s3}
KEEP=${BENCH_KEEP:-0}
CC=${CC:-cc}
MAKE=${MAKE:-make}
PROG=bench-s3
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_number BENCH_SCALE "$SCALE"
missing=
command -v restic >/dev/null 2>&1 || missing="$missing restic"
command -v rclone >/dev/null 2>&1 || missing="$missing rclone"
[ -x /usr/bin/time ] || missing="$missing time"
# shellcheck disable=SC2086
[ -z "$missing" ] || apt_install $missing
"$ROOT/tests/tools/swift-server" check >/dev/null ||
	die "Swift cannot run here (make deps installs python3-swift)"
claim_dir s3
build_coffer

unset COFFER_PASSPHRASE COFFER_CATALOG COFFER_REPO COFFER_KEY_FILE \
	CURL_CA_BUNDLE AWS_CA_BUNDLE || true
export XDG_STATE_HOME="$BD/state" TMPDIR="$BD"
export COFFER_KEY_FILE="$BD/coffer.key"
TREE=$BD/tree
RES=$BD/results.tsv	# step seconds rss_mib exit
: > "$RES"

swift_up
export RESTIC_PASSWORD=bench-restic-password
# rclone's S3 backend on the same endpoint, configured by environment.
export RCLONE_CONFIG_SW_TYPE=s3 RCLONE_CONFIG_SW_PROVIDER=Other \
	RCLONE_CONFIG_SW_ENDPOINT="$SWIFT_S3_HTTPS_URL" \
	RCLONE_CONFIG_SW_ACCESS_KEY_ID="$SWIFT_ACCESS_KEY" \
	RCLONE_CONFIG_SW_SECRET_ACCESS_KEY="$SWIFT_SECRET_KEY" \
	RCLONE_CONFIG_SW_REGION="$SWIFT_REGION" \
	RCLONE_CONFIG_SW_FORCE_PATH_STYLE=true RCLONE_CA_CERT="$SWIFT_CACERT"

say "generating a tree (scale $SCALE)"
"$BD/bin/gen" --scale "$SCALE" "$TREE" 2>>"$BD/logs/gen.log"
BYTES=$(dusize "$TREE")
CR=s3:$SWIFT_S3_HTTPS_URL/coffer-bench
RR=s3:$SWIFT_S3_HTTPS_URL/restic-bench

# The floor's bytes: coffer's packs of the same tree, made locally.
"$COFFER" -q init --key-file "$BD/local.key" "$BD/local"
"$COFFER" -q -r "$BD/local" --key-file "$BD/local.key" backup tree "$TREE"
PACKS=$(dusize "$BD/local/packs")

"$COFFER" -q init --key-file "$COFFER_KEY_FILE" "$CR"
restic -q --cacert "$SWIFT_CACERT" -r "$RR" init >/dev/null
cat "$TREE"/*/* >/dev/null 2>&1 || :
timed coffer-backup "$COFFER" -q -r "$CR" backup tree "$TREE"
timed restic-backup restic -q --cacert "$SWIFT_CACERT" -r "$RR" backup "$TREE"
rclone -q mkdir sw:floor
timed rclone-up rclone -q copy "$BD/local/packs" sw:floor/packs
timed coffer-restore "$COFFER" -q -r "$CR" restore tree@latest "$BD/out-coffer"
timed restic-restore restic -q --cacert "$SWIFT_CACERT" -r "$RR" restore latest --target "$BD/out-restic"
timed rclone-down rclone -q copy sw:floor/packs "$BD/down"
"$COFFER" -q -r "$BD/local" --key-file "$BD/local.key" restore tree@latest \
	"$BD/out-local"
diff -r "$BD/out-coffer" "$BD/out-local" >/dev/null ||
	die "coffer's restore from the bucket differs from the local one"

V_RESTIC=$(restic version | awk '{ print $2; exit }')
V_RCLONE=$(rclone version | awk '{ print $2; exit }')
printf '\ncoffer vs restic %s vs rclone %s over HTTPS to Swift on loopback; tree %.2f GiB, packs %.2f GiB; %d cores, load %s\n' \
	"$V_RESTIC" "$V_RCLONE" "$(awk -v b="$BYTES" 'BEGIN{print b/2^30}')" \
	"$(awk -v b="$PACKS" 'BEGIN{print b/2^30}')" "$(nproc)" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-15s %8s %8s %5s %8s\n' step seconds rss_mib exit MB/s
awk -F'\t' -v b="$BYTES" -v p="$PACKS" '{
	mbs = ($2 > 0) ? (($1 ~ /^rclone/) ? p : b) / $2 / 1e6 : 0
	printf "%-15s %8s %8s %5s %8.0f\n", $1, $2, $3, $4, mbs
	t[$1] = $2
} END {
	printf "\nbackup:  restic/coffer %.2fx (target >= 1.5), coffer/rclone-up %.2fx (target <= 1.5)\n",
	    t["restic-backup"] / t["coffer-backup"], t["coffer-backup"] / t["rclone-up"]
	printf "restore: restic/coffer %.2fx (target >= 1.5), coffer/rclone-down %.2fx (target <= 1.5)\n",
	    t["restic-restore"] / t["coffer-restore"], t["coffer-restore"] / t["rclone-down"]
}' "$RES"
if [ "$KEEP" != 1 ]; then
	"$ROOT/tests/tools/swift-server" stop "$BD/swift" || :
	rm -rf "$BD"
else
	say "kept $BD"
fi
