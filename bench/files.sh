#!/bin/sh
# bench/files.sh: `make bench-files`.  Many small files (issue 23): coffer,
# restic and borg side by side, in one run, on a tree shaped like ImageNet's
# (BENCH_FILES files of 1 to 8 KiB of incompressible bytes in 1,000
# directories, bench/smallfiles.c).  See bench/README.md for what is
# measured and how.
#
# Environment:
#   BENCH_FILES      files in the tree (default 100000)
#   BENCH_FILES_DIRS directories they are spread over (default 1000)
#   BENCH_SEED       generator seed (default 1)
#   BENCH_DIR        scratch directory (default /var/tmp/coffer-files); an
#                    earlier run's is removed first
#   BENCH_KEEP       1: keep BENCH_DIR (repositories, tree, logs)
#   BENCH_TOOLS      the tools, in the order they take turns (default
#                    "coffer restic borg"; coffer must be one of them)
#   BENCH_MKFS_OPTS  mkfs.ext4 options of the fresh file systems restores go
#                    to (default "-O ^has_journal", as the file system of
#                    this project's machine; "" for ext4's default journal)
#   BENCH_RESTORE_RM 0: skip the restore right after rm -rf (default 1;
#                    at a million files each tool's takes many minutes)
#   CC               C compiler for bench/smallfiles.c (default cc)
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
NFILES=${BENCH_FILES:-100000}
NDIRS=${BENCH_FILES_DIRS:-1000}
SEED=${BENCH_SEED:-1}
BD=${BENCH_DIR:-/var/tmp/coffer-files}
KEEP=${BENCH_KEEP:-0}
TOOLS=${BENCH_TOOLS:-coffer restic borg}
MKFS_OPTS=${BENCH_MKFS_OPTS--O ^has_journal}
RESTORE_RM=${BENCH_RESTORE_RM:-1}
CC=${CC:-cc}
MAKE=${MAKE:-make}
PROG=bench-files
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

need_count BENCH_FILES "$NFILES"
need_count BENCH_FILES_DIRS "$NDIRS"
need_count BENCH_SEED "$SEED"
case " $TOOLS " in
*" coffer "*) ;;
*) die "BENCH_TOOLS must name coffer: $TOOLS" ;;
esac
for t in $TOOLS; do
	case $t in
	coffer|restic|borg) ;;
	*) die "BENCH_TOOLS: unknown tool $t" ;;
	esac
done

missing=
case " $TOOLS " in *" restic "*)
	command -v restic >/dev/null 2>&1 || missing="$missing restic" ;;
esac
case " $TOOLS " in *" borg "*)
	command -v borg >/dev/null 2>&1 || missing="$missing borgbackup" ;;
esac
[ -x /usr/bin/time ] || missing="$missing time"
# shellcheck disable=SC2086
[ -z "$missing" ] || apt_install $missing

# ---- scratch directory ---------------------------------------------------------
need_absolute_dir
MNTS=
umount_all() {
	for m in $MNTS; do umount "$m" 2>/dev/null || true; done
	MNTS=
}
if [ -e "$BD" ]; then
	[ -e "$BD/.coffer-files" ] || [ -z "$(ls -A "$BD")" ] ||
		die "$BD exists and is not a bench-files directory; remove it or set BENCH_DIR"
	for m in "$BD"/mnt-*; do
		[ -d "$m" ] && umount "$m" 2>/dev/null || true
	done
	rm -rf "$BD"
fi
mkdir -p "$BD/bin" "$BD/logs" "$BD/repo"
: > "$BD/.coffer-files"
# The tree takes about 6.5 KiB of disk a file (1-8 KiB in 4 KiB blocks),
# each repository about 5, a restored tree 6.5 (one at a time): about 30
# KiB a file in all, and 1 GiB to spare.
need_kib=$((NFILES * 30 + 1048576))
avail_kib=$(df -Pk "$BD" | awk 'NR == 2 { print $4 }')
[ "$avail_kib" -ge "$need_kib" ] ||
	die "$BD: $((avail_kib / 1048576)) GiB free, $NFILES files need about $((need_kib / 1048576)) GiB"
cleanup() {
	umount_all
	if [ "$KEEP" = 1 ]; then
		say "kept $BD"
	else
		rm -rf "$BD"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

build_coffer
$CC -std=c11 -O2 -o "$BD/bin/smallfiles" "$ROOT/bench/smallfiles.c"

# ---- environment of the three tools ----------------------------------------------
unset COFFER_PASSPHRASE COFFER_CATALOG COFFER_REPO COFFER_KEY_FILE \
	RESTIC_REPOSITORY RESTIC_PASSWORD BORG_REPO || true
export XDG_STATE_HOME="$BD/state" XDG_CACHE_HOME="$BD/cache"
export BORG_BASE_DIR="$BD/borg"
printf 'bench-restic-password\n' > "$BD/restic.pass"
export RESTIC_PASSWORD_FILE="$BD/restic.pass"
export BORG_PASSPHRASE=bench-borg-passphrase
export BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes
export BORG_RELOCATED_REPO_ACCESS_IS_OK=yes
export BORG_DISPLAY_PASSPHRASE=no
TREE=$BD/tree
RES=$BD/results.tsv	# tool step secs rss_mib exit user sys
: > "$RES"
FAILS=$BD/failures.txt
: > "$FAILS"
LOADS=

load() { cut -d' ' -f1-3 /proc/loadavg; }

# warm PATH: read every file below PATH into page cache (untimed), as
# bench/run.sh does before every step: this machine's kernel pages out page
# cache it finds cold.
warm() {
	find "$1" -type f -print0 | xargs -0 cat > /dev/null 2>&1 || true
}

# timed TOOL STEP CMD...: run CMD under /usr/bin/time -v after a sync;
# record wall seconds, peak RSS, exit status, user and system seconds.
timed() {
	_tool=$1 _step=$2
	shift 2
	_log=$BD/logs/$_tool-$_step.log
	sync
	_t0=$(now)
	if /usr/bin/time -v -o "$_log.time" "$@" >"$_log" 2>&1; then _rc=0; else _rc=$?; fi
	_secs=$(fsub "$(now)" "$_t0")
	_rss=$(time_rss "$_log.time")
	_cpu=$(awk -F': ' '/User time/ { u = $2 } /System time/ { k = $2 }
	    END { printf "%s\t%s", u, k }' "$_log.time")
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$_tool" "$_step" "$_secs" \
		"${_rss:-0}" "$_rc" "$_cpu" >> "$RES"
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

# Each tool's settings.  All three compress with zstd at about level 1
# (coffer's default; restic's "auto", zstd's fastest; borg zstd,1) and
# encrypt: coffer with a key file, restic with a password file, borg
# repokey.  Their caches and catalogs live under $BD and stay warm from
# step to step.
R_COFFER=$BD/repo/coffer R_RESTIC=$BD/repo/restic R_BORG=$BD/repo/borg
C() { "$COFFER" -q -r "$R_COFFER" --key-file "$R_COFFER.key" "$@"; }
init_tool() {
	case $1 in
	coffer) "$COFFER" -q init --key-file "$R_COFFER.key" "$R_COFFER" ;;
	restic) restic -q -r "$R_RESTIC" init ;;
	borg) borg init --encryption=repokey "$R_BORG" ;;
	esac
}
# backup TOOL STEP: a snapshot of the tree (borg's archive and restic's tag
# are named STEP).
backup() {
	warm "$TREE"
	case $1 in
	coffer) timed coffer "$2" "$COFFER" -q -r "$R_COFFER" \
		--key-file "$R_COFFER.key" backup tree "$TREE" ;;
	restic) timed restic "$2" restic -q -r "$R_RESTIC" backup --tag "$2" "$TREE" ;;
	borg) timed borg "$2" borg create --compression zstd,1 "$R_BORG::$2" "$TREE" ;;
	esac
}
# restore TOOL STEP TARGET [DIR]: the touched snapshot, whole or DIR of it.
restore() {
	warm "$BD/repo/$1"
	case $1 in
	coffer) timed coffer "$2" "$COFFER" -q -r "$R_COFFER" \
		--key-file "$R_COFFER.key" restore tree@latest "$3" ${4:+"$4"} ;;
	restic) timed restic "$2" restic -q -r "$R_RESTIC" restore latest \
		--target "$3" ${4:+--include "$TREE/$4"} ;;
	borg) mkdir -p "$3"
		# shellcheck disable=SC2016
		timed borg "$2" sh -c 'cd "$1" && shift && exec borg extract "$@"' \
			sh "$3" "$R_BORG::touched" ${4:+"${TREE#/}/$4"} ;;
	esac
}
# quiet TOOL STEP CMD...: timed, standard output to /dev/null (ls of a
# million entries).
quiet() {
	_t=$1 _s=$2
	shift 2
	# shellcheck disable=SC2016
	timed "$_t" "$_s" sh -c 'exec "$@" > /dev/null' sh "$@"
}

# restored_ok TOOL DIR: the restored tree has the source's files and bytes
# (coffer restores the dataset root's contents into DIR, restic and borg
# the absolute path below it).
restored_ok() {
	case $1 in
	coffer) _d=$2 ;;
	*) _d=$2$TREE ;;
	esac
	_got=$(find "$_d" -type f -printf '%s\n' 2>/dev/null |
		awk '{ n++; s += $1 } END { printf "%d %.0f\n", n, s }')
	if [ "$_got" = "$FILES_BYTES" ]; then
		echo same-size
	else
		echo "DIFFERS($_got)"
		printf '%s restore into %s: %s files/bytes, expected %s\n' \
			"$1" "$2" "$_got" "$FILES_BYTES" >> "$FAILS"
	fi
}

# ---- the tree --------------------------------------------------------------------
say "generating $NFILES files in $NDIRS directories (load $(load))"
LOADS="start $(load)"
_t0=$(now)
"$BD/bin/smallfiles" --seed "$SEED" --dirs "$NDIRS" "$TREE" "$NFILES"
GEN_SECS=$(fsub "$(now)" "$_t0")
FILES_BYTES=$(find "$TREE" -type f -printf '%s\n' | awk '{ n++; s += $1 } END { printf "%d %.0f\n", n, s }')
BYTES=${FILES_BYTES#* }
say "tree: $FILES_BYTES (files, bytes) in $GEN_SECS s"
DIR1=$(ls "$TREE" | sed -n "$((NDIRS / 2 + 1))p")

# ---- backups ---------------------------------------------------------------------
for t in $TOOLS; do
	init_tool "$t" >"$BD/logs/$t-init.log" 2>&1 || {
		printf '%s init failed\n' "$t" >> "$FAILS"
		sed -e 's/^/    /' "$BD/logs/$t-init.log" | tail -15 >> "$FAILS"
	}
done
for t in $TOOLS; do backup "$t" initial; done
for t in $TOOLS; do backup "$t" unchanged; done
TOUCHED=$("$BD/bin/smallfiles" --touch "$((NDIRS / 2))" --seed "$SEED" "$TREE")
say "touched $TOUCHED files of $DIR1"
for t in $TOOLS; do backup "$t" touched; done
LOADS="$LOADS, after the backups $(load)"

# ---- listing, diff, one directory -------------------------------------------------
C_A=$(C snapshots | awk '$2 == "tree" { print $1 }' | head -1)
C_B=$(C snapshots | awk '$2 == "tree" { print $1 }' | tail -1)
rid() {
	restic -q -r "$R_RESTIC" snapshots --tag "$1" --json |
		sed -n 's/.*"short_id":"\([0-9a-f]*\)".*/\1/p'
}
for t in $TOOLS; do
	warm "$BD/repo/$t"
	case $t in
	coffer) quiet coffer ls "$COFFER" -q -r "$R_COFFER" \
		--key-file "$R_COFFER.key" ls tree@latest ;;
	restic) quiet restic ls restic -q -r "$R_RESTIC" ls latest ;;
	borg) quiet borg ls borg list "$R_BORG::touched" ;;
	esac
done
for t in $TOOLS; do
	case $t in
	coffer) quiet coffer diff "$COFFER" -q -r "$R_COFFER" \
		--key-file "$R_COFFER.key" diff "$C_A" "$C_B" ;;
	restic) quiet restic diff restic -q -r "$R_RESTIC" diff \
		"$(rid initial)" "$(rid touched)" ;;
	borg) quiet borg diff borg diff "$R_BORG::initial" touched ;;
	esac
done
ONEDIR_CHECK=
for t in $TOOLS; do
	restore "$t" onedir "$BD/onedir-$t" "$DIR1"
	case $t in
	coffer) d=$BD/onedir-$t/$DIR1 ;;
	*) d=$BD/onedir-$t$TREE/$DIR1 ;;
	esac
	n=$(find "$d" -type f 2>/dev/null | wc -l)
	ONEDIR_CHECK="$ONEDIR_CHECK $t=$n"
	rm -rf "$BD/onedir-$t"
done

# ---- full restores, each tool on a fresh file system of its own -------------------
# A new ext4 on a loop device per tool (root only; else a directory of
# $BD's file system, said so in the table): first into the fresh file
# system, then, right after `rm -rf` of that tree, again into the same path.
FRESHFS=no
if [ "$(id -u)" = 0 ] && command -v mkfs.ext4 >/dev/null 2>&1 &&
    command -v losetup >/dev/null 2>&1; then
	FRESHFS=yes
fi
RESTORE_CHECK=
for t in $TOOLS; do
	m=$BD/mnt-$t
	mkdir -p "$m"
	if [ "$FRESHFS" = yes ]; then
		img=$BD/fs-$t.img
		truncate -s "$((NFILES * 16 / 1024 + 1024))M" "$img"
		# shellcheck disable=SC2086
		if mkfs.ext4 -q -F $MKFS_OPTS -N "$((NFILES + NDIRS + 65536))" \
		    "$img" >"$BD/logs/mkfs-$t.log" 2>&1 &&
		    mount -o loop "$img" "$m" 2>>"$BD/logs/mkfs-$t.log"; then
			MNTS="$MNTS $m"
		else
			say "no loop file system ($(tail -1 "$BD/logs/mkfs-$t.log")): restoring into $BD"
			FRESHFS=no
			rm -f "$img"
		fi
	fi
	restore "$t" restore_fresh "$m/r"
	RESTORE_CHECK="$RESTORE_CHECK $t=$(restored_ok "$t" "$m/r")"
	if [ "$t" = coffer ] && ! diff -r -q "$TREE" "$m/r" > "$BD/logs/coffer-restore.diff" 2>&1; then
		RESTORE_CHECK="$RESTORE_CHECK coffer=DIFFERS(diff -r)"
		printf 'coffer restore: differs from the source (diff -r)\n' >> "$FAILS"
		head -5 "$BD/logs/coffer-restore.diff" >> "$FAILS"
	fi
	rm -rf "$m/r"
	if [ "$RESTORE_RM" = 1 ]; then
		restore "$t" restore_rm "$m/r"
		RESTORE_CHECK="$RESTORE_CHECK $t=$(restored_ok "$t" "$m/r")"
		rm -rf "$m/r"
	fi
	if [ "$FRESHFS" = yes ]; then
		umount "$m"
		MNTS=$(echo "$MNTS" | sed "s| $m||")
		rm -f "$BD/fs-$t.img"
	fi
done
LOADS="$LOADS, after the restores $(load)"

# ---- verify, drill ----------------------------------------------------------------
for t in $TOOLS; do
	warm "$BD/repo/$t"
	case $t in
	coffer) timed coffer verify "$COFFER" -q -r "$R_COFFER" \
		--key-file "$R_COFFER.key" verify --read-data ;;
	restic) timed restic verify restic -q -r "$R_RESTIC" check --read-data ;;
	borg) timed borg verify borg check --verify-data "$R_BORG" ;;
	esac
done
mkdir -p "$BD/drill"
warm "$R_COFFER"
timed coffer drill "$COFFER" -q -r "$R_COFFER" --key-file "$R_COFFER.key" \
	drill --scratch "$BD/drill" tree@latest
rm -rf "$BD/drill"
LOADS="$LOADS, end $(load)"

# ---- sizes ------------------------------------------------------------------------
for t in $TOOLS; do
	case $t in
	coffer) idx=$(find "$BD/state" -type f -name 'catalog.db*' -printf '%s\n' |
		awk '{ s += $1 } END { printf "%.0f\n", s }') ;;
	restic) idx=$(dusize "$BD/cache/restic") ;;
	borg) idx=$(dusize "$BD/borg/.cache/borg") ;;
	esac
	printf '%s\trepo\t%s\n%s\tindex\t%s\n' "$t" "$(dusize "$BD/repo/$t")" \
		"$t" "$idx" >> "$BD/sizes.tsv"
done

# ---- report -------------------------------------------------------------------------
V_COFFER=$("$COFFER" version 2>/dev/null | head -1 | awk '{ print $NF }')
V_RESTIC=$(restic version 2>/dev/null | head -1 | awk '{ print $2 }') || V_RESTIC=-
V_BORG=$(borg --version 2>/dev/null | awk '{ print $2 }') || V_BORG=-
FSNOTE="a fresh ext4 per tool on a loop device (mkfs.ext4 $MKFS_OPTS)"
[ "$FRESHFS" = yes ] || FSNOTE="a directory of $BD's file system (not fresh; run as root for a loop device)"
awk -F'\t' -v tools="$TOOLS" -v nf="$NFILES" -v nd="$NDIRS" -v bytes="$BYTES" \
    -v vc="$V_COFFER" -v vr="$V_RESTIC" -v vb="$V_BORG" -v loads="$LOADS" \
    -v fsnote="$FSNOTE" -v touched="$TOUCHED" -v dir1="$DIR1" \
    -v rcheck="$RESTORE_CHECK" -v ocheck="$ONEDIR_CHECK" -v gen="$GEN_SECS" '
FILENAME ~ /sizes/ { size[$1, $2] = $3; next }
{ k = $1 SUBSEP $2; secs[k] = $3; rss[k] = $4; rc[k] = $5; usr[k] = $6; sys[k] = $7 }
END {
	nt = split(tools, t, " ")
	ns = split("initial unchanged touched restore_fresh restore_rm ls diff onedir verify drill", st, " ")
	lab["initial"] = "initial backup"; lab["unchanged"] = "nothing changed"
	lab["touched"] = "one dir touched"; lab["restore_fresh"] = "restore, fresh fs"
	lab["restore_rm"] = "restore after rm -rf"; lab["ls"] = "ls"; lab["diff"] = "diff"
	lab["onedir"] = "one-dir restore"; lab["verify"] = "verify (read data)"
	lab["drill"] = "drill"
	printf "\n%d files of 1-8 KiB in %d directories, %.1f MB (generated in %s s); coffer %s, restic %s, borg %s\n",
	    nf, nd, bytes / 1e6, gen, vc, vr, vb
	printf "load average (1, 5, 15 min): %s\n", loads
	printf "restores: %s\n", fsnote
	printf "one directory touched: %s files of %s rewritten; diff: first snapshot against the touched one\n", touched, dir1
	printf "seconds (wall) / peak RSS MiB; ratio = other tool seconds / coffer seconds\n\n"
	hdr = sprintf("%-21s", "step")
	for (i = 1; i <= nt; i++) hdr = hdr sprintf(" | %-18s", t[i])
	for (i = 1; i <= nt; i++) if (t[i] != "coffer") hdr = hdr sprintf(" | %-9s", "vs " t[i])
	print hdr
	line = ""; for (i = 0; i < length(hdr); i++) line = line "-"; print line
	for (s = 1; s <= ns; s++) {
		row = sprintf("%-21s", lab[st[s]])
		for (i = 1; i <= nt; i++) {
			k = t[i] SUBSEP st[s]
			if (!(k in secs)) cell = "-"
			else if (rc[k] != 0) cell = "FAILED (" rc[k] ")"
			else cell = sprintf("%7.2f s %6.1f", secs[k], rss[k])
			row = row sprintf(" | %-18s", cell)
		}
		c = "coffer" SUBSEP st[s]
		for (i = 1; i <= nt; i++) {
			if (t[i] == "coffer") continue
			k = t[i] SUBSEP st[s]
			if ((k in secs) && (c in secs) && rc[k] == 0 && rc[c] == 0 && secs[c] > 0)
				row = row sprintf(" | %-9s", sprintf("%.2fx", secs[k] / secs[c]))
			else
				row = row sprintf(" | %-9s", "-")
		}
		print row
	}
	print line
	row = sprintf("%-21s", "repository MB")
	for (i = 1; i <= nt; i++) row = row sprintf(" | %-18.1f", size[t[i], "repo"] / 1e6)
	print row
	row = sprintf("%-21s", "local index B/file")
	for (i = 1; i <= nt; i++) row = row sprintf(" | %-18.1f", size[t[i], "index"] / nf)
	print row "   (coffer: catalog; restic: cache; borg: cache)"
	peak = ""
	for (i = 1; i <= nt; i++) {
		m = 0
		for (s = 1; s <= ns; s++) { k = t[i] SUBSEP st[s]; if ((k in rss) && rss[k] + 0 > m) m = rss[k] + 0 }
		peak = peak sprintf("%s %.1f MiB  ", t[i], m)
	}
	printf "peak RSS over every step: %s\n", peak
	printf "user + system seconds:"
	for (s = 1; s <= ns; s++) {
		k = "coffer" SUBSEP st[s]
		if (k in usr) printf " %s %s+%s;", st[s], usr[k], sys[k]
	}
	printf " (coffer)\nrestored trees:%s\none-directory restores (files):%s\n", rcheck, ocheck
}' "$BD/sizes.tsv" "$RES" | tee "$BD/table.txt"

echo
if [ -s "$FAILS" ]; then
	echo "FAILURES (full logs in $BD/logs; kept):"
	cat "$FAILS"
	KEEP=1
fi
[ ! -s "$FAILS" ]
