#!/bin/sh
# The built-in demo: a local repository, a small generated training tree,
# and a simulated week of 'coffer run' with policies/demo.policy (the
# clock stepped with --now): the levels chosen, exports, retention,
# drills, the log and the metrics file, then a verified restore.  Run by
# 'make demo'.
set -eu
TOP=$(cd "$(dirname "$0")/.." && pwd)
COFFER=${COFFER:-$TOP/coffer}
DEMO=${COFFER_DEMO_DIR:-$(mktemp -d /tmp/coffer-demo.XXXXXX)}
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

say "coffer init (raw key file for unattended runs: $COFFER_KEY_FILE)"
"$COFFER" init

say "the demo policy (policies/demo.policy): what is due at the start"
sed "s|@DEMO@|$DEMO|g" "$TOP/policies/demo.policy" >"$DEMO/demo.policy"
mkdir -p "$DEMO/offsite"
grep -v '^#' "$DEMO/demo.policy" | grep -v '^$'
START=$(date -u -d 2026-12-06T03:00:00Z +%s)	# a Sunday, after 02:00
"$COFFER" run --policy "$DEMO/demo.policy" --dry-run \
	--now "$(date -u -d @$START +%Y-%m-%dT%H:%M:%SZ)"

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

say "a simulated week: coffer run every 3 hours (--now), as cron would"
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
	# action, prefixed here with the simulated time.
	"$COFFER" -v run --policy "$DEMO/demo.policy" --now "$now" \
		2>/dev/null | sed "s/^/$now  /"
	h=$((h + 3))
done

say "coffer log: what each run did (also in the repository, for any host)"
"$COFFER" log | tail -n 12

say "coffer snapshots: fulls on Sunday, a differential on Wednesday, incrementals; retention applied"
"$COFFER" snapshots

say "coffer bundles: the offsite target's chain"
"$COFFER" bundles

say "coffer drill history"
"$COFFER" drill history

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

say "coffer cron: the one line that runs it all"
"$COFFER" cron --policy "$DEMO/demo.policy" --unit crontab

say "repository size"
du -sh "$COFFER_REPO"
echo
echo "demo done; everything is in $DEMO (remove it with: rm -rf $DEMO)"
