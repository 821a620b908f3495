#!/bin/bash
test_description='every fuzz corpus file replays through its target without a crash'
. "$(dirname "$0")/../lib.sh"

# The seeds of make fuzz-corpus and every crash make fuzz has found
# (tests/fuzz/corpus/<target>/), through BUILD/tests/replay-fuzz-<target>:
# the target's own checks, and the sanitizers under make asan.
for f in "$TOP"/tests/fuzz/fuzz-*.c; do
	t=$(basename "$f" .c)
	t=${t#fuzz-}
	if [ -x "$BUILD/tests/replay-fuzz-$t" ]; then
		test_set_prereq "REPLAY_$t"
	fi
	test_expect_success "REPLAY_$t" "corpus/$t replays through fuzz-$t" '
		n=$(ls "$TOP/tests/fuzz/corpus/'"$t"'" | wc -l) &&
		test "$n" -gt 0 &&
		"$BUILD/tests/replay-fuzz-'"$t"'" "$TOP/tests/fuzz/corpus/'"$t"'" \
			>out 2>err &&
		grep -x "replayed $n inputs" out
	'
done

test_done
