#!/bin/sh
# The built-in demo: a local repository, a small generated training tree,
# and a simulated week of 'coffer run' in two roles on that one
# repository (the clock stepped with --now): a training server
# (policies/demo.policy) backs up and exports with a write-only key file,
# a backup host (policies/demo-backup.policy) keeps, prunes, drills and
# verifies with the full key, each with a catalog of its own.  Then the
# log, the metrics file and a verified restore.  Run by 'make demo'.
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
COFFER=${COFFER:-$TOP/coffer}
DEMO=${COFFER_DEMO_DIR:-$(mktemp -d /tmp/coffer-demo.XXXXXX)}
# The backup host's catalog; the training server's is $DEMO/training
# (training, below): two hosts, each with its own.
export XDG_STATE_HOME="$DEMO/state"
unset COFFER_REPO COFFER_PASSPHRASE COFFER_CATALOG
export COFFER_KEY_FILE="$DEMO/key"
export COFFER_REPO="$DEMO/repo"
say() { printf '\n== %s\n' "$*"; }

say "generating a small training tree in $DEMO/data"
mkdir -p "$DEMO/data/corpus/shards" "$DEMO/data/ckpt/step_100"
# The first checkpoint step, complete; each day adds one (next_day).
head -c 3000000 /dev/urandom >"$DEMO/data/ckpt/step_100/shard-0.bin"
head -c 3000000 /dev/urandom >"$DEMO/data/ckpt/step_100/shard-1.bin"
echo done >"$DEMO/data/ckpt/step_100/COMPLETE"
i=0
while [ $i -lt 300 ]; do
	printf '{"id": %d, "text": "sample %d of the demo corpus"}\n' \
		$i $i >"$DEMO/data/corpus/doc-$i.jsonl"
	i=$((i + 1))
done
head -c 4000000 /dev/urandom >"$DEMO/data/corpus/shards/shard-000.tar"
du -sh "$DEMO/data"

say "coffer init on the backup host (the full key, a raw key file for unattended runs: $COFFER_KEY_FILE)"
"$COFFER" init

say "the training server's write-only key file, made with the full key"
"$COFFER" key export --write-only --to "$DEMO/write-only.key"

# The training server: its policy, its catalog.
training() {
	XDG_STATE_HOME="$DEMO/training" "$COFFER" "$@"
}

for p in demo demo-backup; do
	sed "s|@DEMO@|$DEMO|g" "$TOP/policies/$p.policy" >"$DEMO/$p.policy"
done
mkdir -p "$DEMO/offsite"
START=$(date -u -d 2026-12-06T03:00:00Z +%s)	# a Sunday, after 02:00
NOW0=$(date -u -d @$START +%Y-%m-%dT%H:%M:%SZ)
say "the training server's policy (policies/demo.policy): what is due at the start"
grep -v '^#' "$DEMO/demo.policy" | grep -v '^$'
training run --policy "$DEMO/demo.policy" --dry-run --now "$NOW0"

say "the backup host's policy (policies/demo-backup.policy): what is due at the start"
grep -v '^#' "$DEMO/demo-backup.policy" | grep -v '^$'
"$COFFER" run --policy "$DEMO/demo-backup.policy" --dry-run --now "$NOW0"

say "the write-only key cannot drill: a training-server policy that asks is refused, at its line, before anything runs"
{ cat "$DEMO/demo.policy"; printf '\n[drill weekly]\nschedule = weekly saturday 06:00\n'; } \
	>"$DEMO/refused.policy"
if training run --policy "$DEMO/refused.policy" --now "$NOW0"; then
	echo "a write-only policy with a drill was run" >&2
	exit 1
fi

# Each day at 00:00 the corpus grows, yesterday's checkpoint step gets its
# COMPLETE marker and a new step starts (without one: held back).
next_day() {
	d=$1
	i=0
	while [ $i -lt 40 ]; do
		printf '{"id": "%d-%d", "text": "sample %d of day %d"}\n' \
			"$d" $i $i "$d" >"$DEMO/data/corpus/day-$d-$i.jsonl"
		i=$((i + 1))
	done
	prev=$(ls -d "$DEMO/data/ckpt"/step_* | tail -n 1)
	echo done >"$prev/COMPLETE"
	step="$DEMO/data/ckpt/step_$(( (d + 2) * 100 ))"
	mkdir -p "$step"
	cp "$prev/shard-0.bin" "$step/"	# frozen layers: shared chunks
	head -c 3000000 /dev/urandom >"$step/shard-1.bin"
}

say "a simulated week: each host runs its policy every 3 hours (--now), as cron would"
h=0
while [ $h -lt $((7 * 24)) ]; do
	t=$((START + h * 3600))
	now=$(date -u -d @$t +%Y-%m-%dT%H:%M:%SZ)
	if [ $((h % 24)) = 0 ]; then
		echo
		echo "-- $(date -u -d @$t '+%A %Y-%m-%d')"
	fi
	if [ $((h % 24)) = 21 ] && [ $((h + 3)) -lt $((7 * 24)) ]; then
		next_day $((h / 24))	# at 00:00
	fi
	# Without a terminal, a good run prints nothing: -v shows each
	# action, prefixed here with the simulated time and the host.
	training -v run --policy "$DEMO/demo.policy" --now "$now" \
		2>/dev/null | sed "s/^/$now  training  /"
	"$COFFER" -v run --policy "$DEMO/demo-backup.policy" --now "$now" \
		2>/dev/null | sed "s/^/$now  backup    /"
	h=$((h + 3))
done

say "coffer log on the backup host: the last simulated day's runs of both hosts (from the repository)"
"$COFFER" log --since "$(date -u -d @$((START + 6 * 86400)) +%Y-%m-%dT%H:%M:%SZ)"

say "coffer snapshots: fulls on Sunday, a differential on Wednesday, incrementals; retention applied"
"$COFFER" snapshots

say "coffer bundles: the offsite target's chain"
"$COFFER" bundles

say "coffer drill history"
"$COFFER" drill history

say "coffer verify history: a third of the packs each night"
"$COFFER" verify history

say "the metrics file for node_exporter ($DEMO/coffer.prom)"
grep -v '^#' "$DEMO/coffer.prom"

say "coffer restore corpus@latest $DEMO/restored"
"$COFFER" restore corpus@latest "$DEMO/restored"
if diff -r "$DEMO/data/corpus" "$DEMO/restored" >/dev/null; then
	echo "restored tree is identical to the source"
else
	echo "restored tree DIFFERS from the source" >&2
	exit 1
fi

say "coffer cron: the one line on each host that runs it all"
"$COFFER" cron --policy "$DEMO/demo.policy" --unit crontab
"$COFFER" cron --policy "$DEMO/demo-backup.policy" --unit crontab

say "repository size"
du -sh "$COFFER_REPO"
echo
echo "demo done; everything is in $DEMO (remove it with: rm -rf $DEMO)"
