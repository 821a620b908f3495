#!/bin/sh
# bench/run.sh: `make bench`.  coffer against restic and borg, side by side
# on the same generated training-server tree, from page cache.  See
# bench/README.md for what is measured and how.
#
# Environment:
#   BENCH_SCALE  tree size: about 2 GiB at 1, the issue's tree (default 0.5)
#   BENCH_SEED   generator seed (default 1)
#   BENCH_DIR    scratch directory (default /tmp/coffer-bench); an
#                earlier run's is moved aside and removed at the end
#   BENCH_KEEP   1: keep BENCH_DIR (repositories, tree, logs) at the end
#   BENCH_PASSES passes of the initial and unchanged backups, restore and
#                verify, each reported as the median (default 3)
#   CC           C compiler for bench/gen.c and bench/prims.c (default cc)
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SCALE=${BENCH_SCALE:-0.5}
SEED=${BENCH_SEED:-1}
BD=${BENCH_DIR:-/tmp/coffer-bench}
KEEP=${BENCH_KEEP:-0}
PASSES=${BENCH_PASSES:-3}
CC=${CC:-cc}
MAKE=${MAKE:-make}
PROG=bench
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_number BENCH_SCALE "$SCALE"
need_count BENCH_PASSES "$PASSES"

# ---- dependencies ---------------------------------------------------------
missing=
command -v restic >/dev/null 2>&1 || missing="$missing restic"
command -v borg >/dev/null 2>&1 || missing="$missing borgbackup"
[ -x /usr/bin/time ] || missing="$missing time"
for p in pkg-config libsodium-dev libzstd-dev; do
	dpkg -s $p >/dev/null 2>&1 || missing="$missing $p"
done
# shellcheck disable=SC2086
[ -z "$missing" ] || apt_install $missing

# ---- scratch directory and programs ----------------------------------------
need_absolute_dir
# An earlier run's directory is moved aside and removed only after the
# last timed step: on ext4 without a journal, files created within a few
# minutes of many deletions cost a scan past every recently deleted inode
# (find_inode_bit), and that would slow the first restore below.
OLD="$BD.old"
rm_old() {
	if [ -e "$OLD/.coffer-bench" ]; then
		rm -rf "$OLD"
	elif [ -e "$OLD" ]; then
		die "$OLD exists and is not a bench directory; remove it or set BENCH_DIR"
	fi
}
rm_old
if [ -e "$BD" ]; then
	if [ -e "$BD/.coffer-bench" ] || [ -z "$(ls -A "$BD")" ]; then
		: > "$BD/.coffer-bench"
		mv "$BD" "$OLD" 2>/dev/null || rm -rf "$BD"
	else
		die "$BD exists and is not a bench directory; remove it or set BENCH_DIR"
	fi
fi
mkdir -p "$BD" "$BD/bin" "$BD/logs" "$BD/repo" "$BD/dedup"
: > "$BD/.coffer-bench"
# Peak disk use is about 12 GiB per unit of scale (the tree, three
# repositories, the dedup repositories) plus 2.5 GiB per restored tree
# (three tools, PASSES passes).
need_kib=$(awk -v s="$SCALE" -v p="$PASSES" 'BEGIN { printf "%d", s * (12 + 7.5 * p) * 1024 * 1024 + 1048576 }')
avail_kib=$(df -Pk "$BD" | awk 'NR == 2 { print $4 }')
if [ "$avail_kib" -lt "$need_kib" ] && [ -e "$OLD" ]; then
	say "removing $OLD now for its space (restore times may suffer)"
	rm_old
	avail_kib=$(df -Pk "$BD" | awk 'NR == 2 { print $4 }')
fi
[ "$avail_kib" -ge "$need_kib" ] ||
	die "$BD: $((avail_kib / 1048576)) GiB free, scale $SCALE needs about $((need_kib / 1048576)) GiB (set BENCH_DIR or BENCH_SCALE)"
cleanup() {
	rm_old
	if [ "$KEEP" = 1 ]; then
		say "kept $BD"
	else
		(cd "$BD" && rm -rf tree repo repo-pass dedup restore-* cache borg state bin pp build)
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build_coffer
# shellcheck disable=SC2046
$CC -std=c11 -O2 -I"$ROOT/include" $(pkg-config --cflags libsodium libzstd) \
	-o "$BD/bin/prims" "$ROOT/bench/prims.c" "$BD/build/libcoffer.a" \
	$(pkg-config --libs libarchive libsodium libcrypto sqlite3 libzstd) -pthread

# ---- environment of the three tools -----------------------------------------
# Everything each tool keeps (caches, catalogs, keys) lives under $BD.
unset COFFER_PASSPHRASE COFFER_CATALOG COFFER_REPO COFFER_KEY_FILE \
	RESTIC_REPOSITORY BORG_REPO || true
export XDG_STATE_HOME="$BD/state" XDG_CACHE_HOME="$BD/cache"
export BORG_BASE_DIR="$BD/borg"
export RESTIC_PASSWORD=bench-restic-password
export BORG_PASSPHRASE=bench-borg-passphrase
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
export BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
export BORG_DISPLAY_PASSPHRASE=no
TREE=$BD/tree
RES=$BD/results.tsv	# tool step secs rss_mib exit bytes repo_bytes
: > "$RES"
FAILS=$BD/failures.txt
: > "$FAILS"

tree_bytes() { find "$TREE" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }'; }

# warm PATH: read every file below PATH into page cache.  Each timed step
# runs from page cache, its input (the tree, or the repository) read just
# before, untimed, whatever ran before it.  Reading the tree once at the
# start is not enough: this machine's kernel pages out page cache that
# DAMON sees as cold (/sys/kernel/mm/damon), and in one run the second and
# third initial backups of the first tool read the whole tree from disk
# ("File system inputs" in their .time files) while the tools after it
# found it cached.
warm() {
	find "$1" -type f -print0 | xargs -0 cat > /dev/null 2>&1 || true
}

# timed TOOL STEP BYTES REPO CMD...: run CMD under /usr/bin/time -v; record
# wall seconds, peak RSS, exit status, the step's logical bytes and the
# repository's size after it (REPO "-" for none).
timed() {
	_tool=$1 _step=$2 _bytes=$3 _repo=$4
	shift 4
	# Every pass keeps its own output: STEP.log, STEP.2.log, ...
	_log=$BD/logs/$_tool-$_step.log
	_n=2
	while [ -e "$_log" ]; do
		_log=$BD/logs/$_tool-$_step.$_n.log
		_n=$((_n + 1))
	done
	sync
	_t0=$(now)
	if /usr/bin/time -v -o "$_log.time" "$@" >"$_log" 2>&1; then _rc=0; else _rc=$?; fi
	_t1=$(now)
	_secs=$(fsub "$_t1" "$_t0")
	_rss=$(time_rss "$_log.time")
	_rb=-
	[ "$_repo" = - ] || _rb=$(dusize "$_repo")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$_tool" "$_step" "$_secs" \
		"${_rss:-0}" "$_rc" "$_bytes" "$_rb" >> "$RES"
	if [ "$_rc" != 0 ]; then
		{
			printf '%s %s: exit %s: %s\n' "$_tool" "$_step" "$_rc" "$*"
			sed -e 's/^/    /' "$_log" | tail -15
		} >> "$FAILS"
		say "$_tool $_step FAILED (exit $_rc), see $_log"
	else
		say "$_tool $_step: $_secs s, $_rss MiB ($(time_cpu "$_log.time"))"
	fi
	return 0
}

# Per-tool commands, with each tool's defaults (borg: zstd,3, repokey).
# init_tool TOOL REPO (untimed); the others run under timed:
# backup TOOL STEP BYTES REPO NAME PATH [DATASET]; restore TOOL REPO NAME
# TARGET; verify TOOL REPO.  coffer's key file is REPO.key, beside it.
init_tool() {
	case $1 in
	coffer) "$COFFER" -q init --key-file "$2.key" "$2" ;;
	restic) restic -q -r "$2" init ;;
	borg) borg init --encryption=repokey "$2" ;;
	esac
}
backup() {
	warm "$6"
	case $1 in
	coffer) timed "$1" "$2" "$3" "$4" "$COFFER" -q -r "$4" \
		--key-file "$4.key" backup "${7:-tree}" "$6" ;;
	restic) timed "$1" "$2" "$3" "$4" restic -q -r "$4" backup "$6" ;;
	borg) timed "$1" "$2" "$3" "$4" borg create --compression zstd,3 \
		"$4::$5" "$6" ;;
	esac
}
restore() {
	warm "$2"
	case $1 in
	coffer) timed "$1" restore "$BYTES1" - "$COFFER" -q -r "$2" \
		--key-file "$2.key" restore tree@latest "$4" ;;
	restic) timed "$1" restore "$BYTES1" - restic -q -r "$2" restore \
		latest --target "$4" ;;
	borg) mkdir -p "$4"
		# shellcheck disable=SC2016
		timed "$1" restore "$BYTES1" - sh -c 'cd "$1" && exec borg extract "$2"' \
			sh "$4" "$2::$3" ;;
	esac
}
verify() {
	warm "$2"
	case $1 in
	coffer) timed "$1" verify "$BYTES1" - "$COFFER" -q -r "$2" \
		--key-file "$2.key" verify --read-data ;;
	restic) timed "$1" verify "$BYTES1" - restic -q -r "$2" check --read-data ;;
	borg) timed "$1" verify "$BYTES1" - borg check --verify-data "$2" ;;
	esac
}

TOOLS="coffer restic borg"

# ---- the tree -----------------------------------------------------------------
say "generating the tree (scale $SCALE, seed $SEED)"
_t0=$(now)
"$BD/bin/gen" --scale "$SCALE" --seed "$SEED" --manifest "$BD/manifest.tsv" \
	"$TREE" 2>>"$BD/logs/gen.log"
GEN_SECS=$(fsub "$(now)" "$_t0")
BYTES0=$(tree_bytes)
FILES0=$(find "$TREE" -type f | wc -l)
say "tree: $BYTES0 bytes in $FILES0 files (generated in $GEN_SECS s)"

# Read it once into page cache, then time a second read: the machine's
# limit for reading the tree.
sync
find "$TREE" -type f -print0 | xargs -0 cat > /dev/null
_t0=$(now)
find "$TREE" -type f -print0 | xargs -0 cat > /dev/null
CAT_SECS=$(fsub "$(now)" "$_t0")

# ---- primitives -----------------------------------------------------------------
say "measuring primitives"
find "$TREE/data/text" -type f | sort | head -4000 | xargs cat 2>/dev/null |
	head -c 33554432 > "$BD/sample.text"
tail -c 33554432 "$TREE/ckpt/step_01000/model-00001-of-00004.safetensors" \
	> "$BD/sample.bf16"
"$BD/bin/prims" "$BD/sample.text" "$BD/sample.bf16" > "$BD/prims.txt"
rm -f "$BD/sample.text" "$BD/sample.bf16"

# ---- the side-by-side run -----------------------------------------------------
# Steps that can be repeated without changing what the later ones measure
# (the initial backup into an empty repository, a backup of an unchanged
# tree, which adds only an empty snapshot, and verify) run PASSES times,
# the tools taking turns in each pass, and the median is reported: one
# pass moves by 10-20% on a shared machine.  The last initial pass writes
# the repositories the later steps use; the earlier ones write throwaway
# repositories.
new_repo() {
	init_tool "$1" "$2" >"$BD/logs/$1-init.log" 2>&1 || {
		printf '%s init: exit %s\n' "$1" $? >> "$FAILS"
		sed -e 's/^/    /' "$BD/logs/$1-init.log" | tail -15 >> "$FAILS"
	}
}
mkdir -p "$BD/repo-pass"
p=1
while [ "$p" -le "$PASSES" ]; do
	for t in $TOOLS; do
		r=$BD/repo/$t
		[ "$p" = "$PASSES" ] || r=$BD/repo-pass/$p-$t
		new_repo "$t" "$r"
		backup "$t" initial "$BYTES0" "$r" initial "$TREE"
		[ "$p" = "$PASSES" ] || rm -rf "$r" "$r.key"
	done
	p=$((p + 1))
done
rm -rf "$BD/repo-pass"
p=1
while [ "$p" -le "$PASSES" ]; do
	for t in $TOOLS; do
		backup "$t" unchanged "$BYTES0" "$BD/repo/$t" "unchanged-$p" "$TREE"
	done
	p=$((p + 1))
done

say "mutating the tree"
"$BD/bin/gen" --mutate --manifest "$BD/manifest.tsv" "$TREE" \
	2>>"$BD/logs/gen.log"
BYTES1=$(tree_bytes)
FILES1=$(find "$TREE" -type f | wc -l)
find "$TREE" -type f -print0 | xargs -0 cat > /dev/null

for t in $TOOLS; do
	backup "$t" mutated "$BYTES1" "$BD/repo/$t" mutated "$TREE"
done

# Restore in PASSES passes, the tools taking turns in each, each pass of
# each tool into a fresh directory; the median is reported, as for the
# other repeated steps (one restore moved by up to 30% between runs here).
# All restored trees are removed only after the last pass: on ext4
# without a journal, a file created soon after many were deleted costs a
# scan past every recently deleted inode (find_inode_bit), which would
# slow whichever restore ran right after a removal.  Untimed, after the
# last pass: coffer's restored tree must be the source (diff -r; coffer
# restores the dataset root's contents into the target); restic's and
# borg's (the absolute path below the target) must have as many files
# and bytes.
RESTORE_CHECK=
p=1
while [ "$p" -le "$PASSES" ]; do
	for t in $TOOLS; do
		rm -rf "$BD/restore-$t-$p"
		restore "$t" "$BD/repo/$t" mutated "$BD/restore-$t-$p"
	done
	p=$((p + 1))
done
for t in $TOOLS; do
	dir=$BD/restore-$t-$PASSES
	case $t in
	coffer)
		if [ -d "$dir" ] && diff -r -q "$TREE" "$dir" \
		    > "$BD/logs/$t-restore.diff" 2>&1; then
			RESTORE_CHECK="$RESTORE_CHECK $t=identical"
		else
			RESTORE_CHECK="$RESTORE_CHECK $t=DIFFERS"
			{
				printf '%s restore: the restored tree differs from the source (diff -r)\n' "$t"
				sed -e 's/^/    /' "$BD/logs/$t-restore.diff" | head -10
			} >> "$FAILS"
		fi ;;
	*)
		got=$(find "$dir$TREE" -type f -printf '%s\n' 2>/dev/null |
			awk '{ n++; s += $1 } END { printf "%d %.0f\n", n, s }')
		if [ "$got" = "$FILES1 $BYTES1" ]; then
			RESTORE_CHECK="$RESTORE_CHECK $t=same-size"
		else
			RESTORE_CHECK="$RESTORE_CHECK $t=DIFFERS"
		fi ;;
	esac
done
for t in $TOOLS; do rm -rf "$BD/restore-$t"-*; done

COFFER_VERIFY=yes
"$COFFER" help verify >/dev/null 2>&1 || COFFER_VERIFY=no
p=1
while [ "$p" -le "$PASSES" ]; do
	for t in $TOOLS; do
		if [ "$t" = coffer ] && [ "$COFFER_VERIFY" = no ]; then
			printf 'coffer\tverify\tn/a\tn/a\tn/a\t%s\t-\n' "$BYTES1" >> "$RES"
			continue
		fi
		verify "$t" "$BD/repo/$t"
	done
	p=$((p + 1))
done

for t in $TOOLS; do
	printf '%s\trepo_bytes\t%s\n' "$t" "$(dusize "$BD/repo/$t")" >> "$BD/summary.tsv"
done

# ---- checkpoint dedup ---------------------------------------------------------
# Step A = the step before the mutation's, step B = the mutation's: B keeps
# about half of A's tensors byte for byte (bench/gen.c's manifest says which).
# For each tool: repository P gets A, then B: growth = size after B - size
# after A.  Repository Q (empty) gets B alone: alone = its size after B
# minus its size after init.  alone - growth is what the presence of A saved,
# in stored (compressed) bytes; times raw(B) / alone turns it into source
# bytes (the tensors all compress alike); divided by the shared bytes it is
# the share of the shared tensor bytes that the tool did not store again.
STEP_A='' STEP_B=''
for d in "$TREE"/ckpt/step_*; do STEP_A=$STEP_B STEP_B=${d##*/}; done
SHARED=$(awk -F'\t' -v s="$STEP_B" '$1 == s && $5 == 1 { b += $4 } END { print b + 0 }' "$BD/manifest.tsv")
RAW_B=$(find "$TREE/ckpt/$STEP_B" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }')
RAW_A=$(find "$TREE/ckpt/$STEP_A" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }')
say "dedup: $STEP_A then $STEP_B ($SHARED of $RAW_B bytes shared)"
for t in $TOOLS; do
	p=$BD/dedup/$t-pair q=$BD/dedup/$t-alone
	{ init_tool "$t" "$p" && init_tool "$t" "$q"; } >"$BD/logs/$t-dedup-init.log" 2>&1 || {
		printf '%s dedup init: failed\n' "$t" >> "$FAILS"
		sed -e 's/^/    /' "$BD/logs/$t-dedup-init.log" | tail -15 >> "$FAILS"
	}
	e=$(dusize "$q")
	backup "$t" dedup_A "$RAW_A" "$p" a "$TREE/ckpt/$STEP_A" ckpt_a
	a0=$(dusize "$p")
	backup "$t" dedup_B "$RAW_B" "$p" b "$TREE/ckpt/$STEP_B" ckpt_b
	a1=$(dusize "$p")
	backup "$t" dedup_B_alone "$RAW_B" "$q" b "$TREE/ckpt/$STEP_B" ckpt_b
	b=$(dusize "$q")
	awk -v t="$t" -v a0="$a0" -v a1="$a1" -v b="$b" -v e="$e" \
	    -v raw="$RAW_B" -v sh="$SHARED" 'BEGIN {
		growth = a1 - a0; alone = b - e
		pct = (alone > 0 && sh > 0) ? (alone - growth) / alone * raw / sh * 100 : 0
		if (pct < 0) pct = 0
		if (pct > 100) pct = 100
		printf "%s\tdedup_pct\t%.1f\n%s\tdedup_growth\t%d\n%s\tdedup_alone\t%d\n",
		    t, pct, t, growth, t, alone
	}' >> "$BD/summary.tsv"
	rm -rf "$p" "$q"
done

# ---- coffer's passphrase mode -------------------------------------------------
# The key-file mode is what the table shows (unattended runs).  The
# passphrase mode adds an Argon2id derivation per run: back up the same
# small directory into a key-file repository and a passphrase repository.
SMALL=$TREE/data/text/shard_00
SMALL_BYTES=$(find "$SMALL" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f\n", s }')
mkdir -p "$BD/pp"
init_tool coffer "$BD/pp/keyfile" >"$BD/logs/pp-init.log" 2>&1 || true
backup coffer pp_keyfile "$SMALL_BYTES" "$BD/pp/keyfile" x "$SMALL"
export COFFER_PASSPHRASE=bench-coffer-passphrase
"$COFFER" -q init "$BD/pp/passphrase" >>"$BD/logs/pp-init.log" 2>&1 || true
timed coffer pp_passphrase "$SMALL_BYTES" "$BD/pp/passphrase" \
	"$COFFER" -q -r "$BD/pp/passphrase" backup tree "$SMALL"
unset COFFER_PASSPHRASE

# ---- report -------------------------------------------------------------------
CORES=$(nproc)
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
V_COFFER=$("$COFFER" version 2>/dev/null | head -1 | awk '{ print $NF }')
V_RESTIC=$(restic version | head -1 | awk '{ print $2 }')
V_BORG=$(borg --version | awk '{ print $2 }')

awk -F'\t' -v scale="$SCALE" -v seed="$SEED" -v b0="$BYTES0" -v b1="$BYTES1" \
    -v f0="$FILES0" -v f1="$FILES1" -v cat_secs="$CAT_SECS" \
    -v gen_secs="$GEN_SECS" -v cores="$CORES" -v load="$LOAD" \
    -v vc="$V_COFFER" -v vr="$V_RESTIC" -v vb="$V_BORG" \
    -v shared="$SHARED" -v raw_b="$RAW_B" -v step_a="$STEP_A" -v step_b="$STEP_B" \
    -v json="$BD/results.json" -v restore_check="$RESTORE_CHECK" \
    -v passes="$PASSES" '
function mbps(bytes, secs) { return (secs + 0 > 0) ? bytes / secs / 1e6 : 0 }
function jstr(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); return "\"" s "\"" }
function out(x) { printf "%s", x > json }
function num(x) { return (x == "n/a" || x == "-" || x == "") ? "null" : x + 0 }
FILENAME ~ /prims/ {
	split($0, w, " "); prim[w[1]] = w[2]; if (w[3] != "") ratio[w[1]] = w[3]
	pn[++np] = w[1]; next
}
FILENAME ~ /summary/ { sum[$1, $2] = $3; next }
{
	# A step timed in several passes: its seconds are the median, its
	# RSS the largest, and a failure in any pass fails it.
	tool = $1; step = $2; k = tool SUBSEP step
	times[k, ++npass[k]] = $3
	if (!(k in rss) || $4 + 0 > rss[k] + 0) rss[k] = $4
	if (!(k in rc) || rc[k] == 0) rc[k] = $5
	bytes[k] = $6; repo[k] = $7
	# peak RSS row: every key-file-mode step
	if (step !~ /^pp_/ && $4 != "n/a" && $4 + 0 > maxrss[tool]) maxrss[tool] = $4 + 0
}
function median(k,    n, i, j, v, a) {
	n = npass[k]
	for (i = 1; i <= n; i++) {
		if (times[k, i] == "n/a") return "n/a"
		a[i] = times[k, i] + 0
	}
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { v = a[j]; a[j] = a[j - 1]; a[j - 1] = v }
	return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
END {
	for (k in npass) secs[k] = median(k)
	nt = split("coffer restic borg", tools, " ")
	ns = split("initial unchanged mutated restore verify", steps, " ")
	label["initial"] = "initial backup"; label["unchanged"] = "unchanged backup"
	label["mutated"] = "after mutation"; label["restore"] = "full restore"
	label["verify"] = "read-data verify"

	printf "\ncoffer %s vs restic %s vs borg %s; scale %s (%.2f GiB, %d files; %.2f GiB, %d files after mutation); %d cores, load %s at the end\n",
	    vc, vr, vb, scale, b0 / 2^30, f0, b1 / 2^30, f1, cores, load
	printf "coffer: key-file mode, defaults; restic: defaults (repo v2, compression auto); borg: repokey, --compression zstd,3\n"
	printf "MB/s = source bytes of the tree at that step / wall seconds (MB = 1e6); RSS = peak resident MiB (/usr/bin/time -v)\n"
	printf "seconds: median of %d passes for the initial and unchanged backups, restore and verify; one pass after the mutation\n\n", passes
	hdr = sprintf("%-18s", "step")
	sub_ = sprintf("%-18s", "")
	for (i = 1; i <= nt; i++) {
		hdr = hdr sprintf(" | %-34s", tools[i])
		sub_ = sub_ sprintf(" | %7s %7s %6s %11s", "s", "MB/s", "RSS", "repo bytes")
	}
	hdr = hdr sprintf(" | %-10s | %-10s", "vs restic", "vs borg")
	sub_ = sub_ sprintf(" | %-10s | %-10s", "(x faster)", "(x faster)")
	print hdr; print sub_
	line = ""; for (i = 0; i < length(hdr); i++) line = line "-"; print line
	for (s = 1; s <= ns; s++) {
		st = steps[s]
		row = sprintf("%-18s", label[st])
		for (i = 1; i <= nt; i++) {
			t = tools[i]
			if (!((t, st) in secs) || secs[t, st] == "n/a") {
				row = row sprintf(" | %-34s", "n/a")
				continue
			}
			if (rc[t, st] != 0) {
				row = row sprintf(" | %-34s", "FAILED (exit " rc[t, st] ")")
				continue
			}
			row = row sprintf(" | %7.2f %7.1f %6.1f %11s", secs[t, st],
			    mbps(bytes[t, st], secs[t, st]), rss[t, st], repo[t, st])
		}
		for (i = 2; i <= nt; i++) {
			t = tools[i]; c = secs["coffer", st]
			if (c == "n/a" || c + 0 <= 0 || rc["coffer", st] != 0 || rc[t, st] != 0)
				row = row sprintf(" | %-10s", "n/a")
			else
				row = row sprintf(" | %-10s", sprintf("%.2fx", secs[t, st] / c))
		}
		print row
	}
	print line
	row = sprintf("%-18s", "repo bytes")
	for (i = 1; i <= nt; i++) row = row sprintf(" | %-34s", sum[tools[i], "repo_bytes"])
	for (i = 2; i <= nt; i++) {
		o = sum[tools[i], "repo_bytes"]
		row = row sprintf(" | %-10s", o > 0 ? sprintf("%.3f", sum["coffer", "repo_bytes"] / o) : "n/a")
	}
	print row "   (coffer/other)"
	row = sprintf("%-18s", "ckpt dedup %")
	for (i = 1; i <= nt; i++) row = row sprintf(" | %-34s", sum[tools[i], "dedup_pct"] "%")
	for (i = 2; i <= nt; i++) row = row sprintf(" | %-10s", sprintf("%+.1f pt", sum["coffer", "dedup_pct"] - sum[tools[i], "dedup_pct"]))
	print row "   (coffer-other)"
	row = sprintf("%-18s", "peak RSS MiB")
	for (i = 1; i <= nt; i++) row = row sprintf(" | %-34s", sprintf("%.1f", maxrss[tools[i]]))
	for (i = 2; i <= nt; i++) row = row sprintf(" | %-10s", maxrss[tools[i]] > 0 ? sprintf("%.3f", maxrss["coffer"] / maxrss[tools[i]]) : "n/a")
	print row "   (coffer/other, all steps)"
	print line

	printf "\nckpt dedup: %s then %s; %d of %d bytes of %s are tensors shared byte-for-byte with %s\n",
	    step_a, step_b, shared, raw_b, step_b, step_a
	printf "  %% = (alone - growth) / alone * raw / shared: alone = repo bytes for %s in an empty repo, growth = repo growth for %s after %s\n",
	    step_b, step_b, step_a
	for (i = 1; i <= nt; i++) printf "  %-7s growth %d, alone %d\n", tools[i], sum[tools[i], "dedup_growth"], sum[tools[i], "dedup_alone"]
	printf "restored trees:%s\n", restore_check
	if (("coffer", "pp_keyfile") in secs)
		printf "coffer passphrase mode (%s, backup of one text shard dir): %.2f s, %.1f MiB vs key file %.2f s, %.1f MiB: +%.2f s, +%.1f MiB\n",
		    "Argon2id per run", secs["coffer", "pp_passphrase"], rss["coffer", "pp_passphrase"],
		    secs["coffer", "pp_keyfile"], rss["coffer", "pp_keyfile"],
		    secs["coffer", "pp_passphrase"] - secs["coffer", "pp_keyfile"],
		    rss["coffer", "pp_passphrase"] - rss["coffer", "pp_keyfile"]
	printf "\nmachine limits (single core unless noted; MB/s):\n"
	printf "  cat tree > /dev/null (page cache) %8.1f\n", mbps(b0, cat_secs)
	for (i = 1; i <= np; i++) {
		k = pn[i]
		if (k ~ /avg_chunk/) { printf "  %-34s %8d bytes\n", k, prim[k]; continue }
		printf "  %-34s %8.1f%s\n", k, prim[k], (k in ratio) ? sprintf("   (compressed/raw %.3f)", ratio[k]) : ""
	}

	# JSON
	out("{\n")
	out(sprintf("  \"versions\": {\"coffer\": %s, \"restic\": %s, \"borg\": %s},\n", jstr(vc), jstr(vr), jstr(vb)))
	out(sprintf("  \"scale\": %s, \"seed\": %s, \"cores\": %d, \"loadavg_end\": %s,\n", scale, seed, cores, jstr(load)))
	out(sprintf("  \"tree\": {\"bytes\": %d, \"files\": %d, \"bytes_after_mutation\": %d, \"files_after_mutation\": %d, \"generate_seconds\": %s},\n", b0, f0, b1, f1, gen_secs))
	out(sprintf("  \"limits_MBps\": {\"cat\": %.1f", mbps(b0, cat_secs)))
	for (i = 1; i <= np; i++) if (pn[i] !~ /avg_chunk/) out(sprintf(", %s: %s", jstr(pn[i]), prim[pn[i]]))
	out("},\n  \"zstd_ratio\": {")
	sep = ""
	for (i = 1; i <= np; i++) if (pn[i] in ratio) { out(sprintf("%s%s: %s", sep, jstr(pn[i]), ratio[pn[i]])); sep = ", " }
	out(sprintf("},\n  \"chunker_avg_chunk_bytes\": %s,\n", num(prim["chunker_avg_chunk_bytes"])))
	out("  \"steps\": {\n")
	n = split("initial unchanged mutated restore verify dedup_A dedup_B dedup_B_alone pp_keyfile pp_passphrase", all, " ")
	for (i = 1; i <= nt; i++) {
		t = tools[i]
		out(sprintf("    %s: {", jstr(t)))
		sep = ""
		for (s = 1; s <= n; s++) {
			st = all[s]
			if (!((t, st) in secs)) continue
			rate = "null"
			if (secs[t, st] != "n/a") rate = sprintf("%.1f", mbps(bytes[t, st], secs[t, st]))
			all_t = ""
			for (j = 1; j <= npass[t, st]; j++) all_t = all_t (j > 1 ? ", " : "") num(times[t, st, j])
			out(sprintf("%s\n      %s: {\"seconds\": %s, \"passes\": [%s], \"MBps\": %s, \"peak_rss_mib\": %s, \"exit\": %s, \"bytes\": %s, \"repo_bytes\": %s}", \
			    sep, jstr(st), num(secs[t, st]), all_t, rate, num(rss[t, st]), num(rc[t, st]), num(bytes[t, st]), num(repo[t, st])))
			sep = ","
		}
		out(sprintf("\n    }%s\n", (i < nt) ? "," : ""))
	}
	out("  },\n  \"repo_bytes\": {")
	for (i = 1; i <= nt; i++) out(sprintf("%s%s: %s", (i > 1) ? ", " : "", jstr(tools[i]), num(sum[tools[i], "repo_bytes"])))
	out(sprintf("},\n  \"ckpt_dedup\": {\"step_a\": %s, \"step_b\": %s, \"shared_bytes\": %d, \"raw_bytes_b\": %d", jstr(step_a), jstr(step_b), shared, raw_b))
	for (i = 1; i <= nt; i++) out(sprintf(", %s: {\"pct\": %s, \"growth\": %s, \"alone\": %s}", jstr(tools[i]), num(sum[tools[i], "dedup_pct"]), num(sum[tools[i], "dedup_growth"]), num(sum[tools[i], "dedup_alone"])))
	out(sprintf("},\n  \"restore_check\": %s\n}\n", jstr(substr(restore_check, 2))))
	close(json)
}' "$BD/prims.txt" "$BD/summary.tsv" "$RES"

echo
if [ -s "$FAILS" ]; then
	echo "FAILURES (full logs in $BD/logs; kept):"
	cat "$FAILS"
	KEEP=1
fi
echo "results: $BD/results.json"
[ ! -s "$FAILS" ]
