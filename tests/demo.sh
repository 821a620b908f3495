#!/bin/sh
# The built-in demo: a local repository, a small generated training tree,
# a backup, a verified restore.  Run by 'make demo'.
set -eu
COFFER=${COFFER:-$(cd "$(dirname "$0")/.." && pwd)/coffer}
DEMO=${COFFER_DEMO_DIR:-$(mktemp -d /tmp/coffer-demo.XXXXXX)}
export XDG_STATE_HOME="$DEMO/state"
unset COFFER_REPO COFFER_PASSPHRASE COFFER_CATALOG
export COFFER_KEY_FILE="$DEMO/key"
export COFFER_REPO="$DEMO/repo"
say() { printf '\n== %s\n' "$*"; }

say "generating a small training tree in $DEMO/data"
mkdir -p "$DEMO/data/ckpt/step_100" "$DEMO/data/ckpt/step_200" \
	"$DEMO/data/text" "$DEMO/data/shards"
# Checkpoints: step_200 shares its first shard with step_100 (frozen layers).
head -c 6000000 /dev/urandom > "$DEMO/data/ckpt/step_100/shard-0.bin"
head -c 6000000 /dev/urandom > "$DEMO/data/ckpt/step_100/shard-1.bin"
cp "$DEMO/data/ckpt/step_100/shard-0.bin" "$DEMO/data/ckpt/step_200/"
head -c 6000000 /dev/urandom > "$DEMO/data/ckpt/step_200/shard-1.bin"
i=0
while [ $i -lt 300 ]; do
	printf '{"id": %d, "text": "sample %d of the demo corpus"}\n' \
		$i $i > "$DEMO/data/text/doc-$i.jsonl"
	i=$((i + 1))
done
head -c 4000000 /dev/urandom > "$DEMO/data/shards/shard-000.tar"
du -sh "$DEMO/data"

say "coffer init (raw key file for unattended runs: $COFFER_KEY_FILE)"
"$COFFER" init

say "coffer backup demo $DEMO/data"
"$COFFER" backup --json demo "$DEMO/data"

say "coffer backup again: an incremental, nothing new is stored"
"$COFFER" backup --json demo "$DEMO/data"

say "a new checkpoint step appears; another incremental"
mkdir -p "$DEMO/data/ckpt/step_300"
cp "$DEMO/data/ckpt/step_200/shard-0.bin" "$DEMO/data/ckpt/step_300/"
head -c 6000000 /dev/urandom > "$DEMO/data/ckpt/step_300/shard-1.bin"
"$COFFER" backup --json demo "$DEMO/data"
"$COFFER" diff demo@full demo@latest

say "coffer snapshots"
"$COFFER" snapshots

say "coffer ls demo@latest ckpt"
"$COFFER" ls demo@latest ckpt

say "coffer restore demo@latest $DEMO/restored"
"$COFFER" -v restore demo@latest "$DEMO/restored"

say "verifying the restored tree against the source"
if diff -r "$DEMO/data" "$DEMO/restored" >/dev/null; then
	echo "restored tree is identical to the source"
else
	echo "restored tree DIFFERS from the source" >&2
	exit 1
fi
say "coffer verify --read-data: every chunk decrypted and rehashed"
"$COFFER" verify --read-data

say "coffer drill demo@latest: a recorded rehearsal of the recovery"
"$COFFER" drill --rpo 1h demo@latest

say "repository size"
du -sh "$COFFER_REPO"
echo
echo "demo done; everything is in $DEMO (remove it with: rm -rf $DEMO)"
