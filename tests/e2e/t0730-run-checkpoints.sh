#!/bin/bash
test_description='coffer run with settle and require: a checkpoint being written is never captured half-written'
. "$(dirname "$0")/../lib.sh"
require_coffer
require_treecmp

# settle is compared with the host's clock (file times are real), so the
# files that must count as settled are left alone for longer than it:
# the sleeps below wait that out.  And a run started right after a write
# must still find it within the settle time on a loaded machine (at 2 s,
# under make check's parallel tests, it once did not).
SETTLE=5

test_expect_success 'setup: a checkpoint tree, one step complete, one being written' '
	coffer_init_keyfile repo &&
	mkdir -p ck/step_100 ck/step_200 &&
	echo w100 >ck/step_100/w.bin && echo done >ck/step_100/COMPLETE &&
	echo w200-part >ck/step_200/w.bin &&
	echo "log 1" >ck/train.log &&
	cat >p.policy <<-EOF &&
	[repository]
	path = $TMP/repo
	key-file = $TMP/key
	[dataset ck]
	path = $TMP/ck
	full = weekly sunday 00:00
	incremental = hourly :00
	checkpoints = step_*
	require = COMPLETE
	settle = ${SETTLE}s
	EOF
	sleep $((SETTLE + 1))
'

latest() {
	rm -rf "$1" && coffer -r repo restore ck@latest "$1"
}

test_expect_success 'a step without its marker is held back whole, and it is not a warning' '
	coffer run -v --policy p.policy --now 2026-12-02T01:00:00Z >out 2>err &&
	cat out err &&
	grep "^backup  *ck  *full  *ok .*1 held back" out &&
	grep "step_200. has no marker file; held back" err &&
	latest r1 &&
	test_path_is_file r1/step_100/w.bin &&
	test_path_is_missing r1/step_200 &&
	test_cmp ck/train.log r1/train.log
'

test_expect_success 'just completed and a log just appended to: both held back, previous versions kept' '
	echo w200 >ck/step_200/w.bin && echo done >ck/step_200/COMPLETE &&
	echo "log 2" >>ck/train.log &&
	coffer run -v --policy p.policy --now 2026-12-02T02:00:00Z >out 2>err &&
	cat out err &&
	grep "^backup  *ck  *incremental  *ok .*2 held back" out &&
	grep "step_200. was written to within the settle time; held back" err &&
	grep "train.log. was written to within the settle time; held back (its previous version kept)" err &&
	latest r2 &&
	test_path_is_missing r2/step_200 &&
	echo "log 1" >expect && test_cmp expect r2/train.log
'

test_expect_success 'once settled, the step and the log are taken whole' '
	sleep $((SETTLE + 1)) &&
	coffer run --policy p.policy --now 2026-12-02T03:00:00Z --json >out.json &&
	json_check out.json "\$j->{status} == 0 && \$j->{actions}[0]{detail} !~ /held/" &&
	latest r3 &&
	test_cmp ck/step_200/w.bin r3/step_200/w.bin &&
	test_path_is_file r3/step_200/COMPLETE &&
	test_cmp ck/train.log r3/train.log
'

test_expect_success 'a step whose marker goes (being rewritten) keeps its earlier entries' '
	rm ck/step_100/COMPLETE && echo w100-rewriting >ck/step_100/w.bin &&
	coffer run --policy p.policy --now 2026-12-02T04:00:00Z >out 2>err &&
	test_must_be_empty out &&
	latest r4 &&
	echo w100 >expect && test_cmp expect r4/step_100/w.bin &&
	test_path_is_file r4/step_100/COMPLETE
'

test_expect_success 'a new step whose file changes while it is read: held back whole, marker and all' '
	sleep $((SETTLE + 1)) &&
	mkdir ck/step_300 && head -c 100000 /dev/zero >ck/step_300/w.bin &&
	echo done >ck/step_300/COMPLETE &&
	echo opt >ck/step_300/opt.bin &&
	cat >grow.sh <<-\EOF &&
	case $COFFER_TEST_PATH in
	*step_300/w.bin) echo more >>"$COFFER_TEST_PATH" ;;
	esac
	EOF
	sleep $((SETTLE + 1)) &&
	COFFER_TEST_BEFORE_CHANGE_CHECK="sh $TMP/grow.sh" \
		coffer run -v --policy p.policy --now 2026-12-02T05:00:00Z >out 2>err &&
	cat out err &&
	grep "^backup  *ck  *incremental  *ok .*held back" out &&
	grep "step_300/w.bin. changed while it was read; its checkpoint .*/ck/step_300. is held back whole" err &&
	latest r5 &&
	test_path_is_missing r5/step_300 &&
	echo w100 >expect && test_cmp expect r5/step_100/w.bin
'

# A step rewritten in place (its marker kept) while the backup reads it:
# the snapshot has the step as it was, every file of it, never the new
# weights beside the old optimizer state.
rewrite_during_read() {
	cat >rewrite.sh <<-EOF
	case \$COFFER_TEST_PATH in
	*step_200/opt.bin) echo "$1" >>"\$COFFER_TEST_PATH" ;;
	esac
	EOF
}

test_expect_success 'a step rewritten while it is read (incremental): its previous version whole' '
	mkdir -p ck/step_200/sub &&
	echo o200 >ck/step_200/opt.bin && echo s200 >ck/step_200/sub/s.bin &&
	sleep $((SETTLE + 1)) &&
	coffer run --policy p.policy --now 2026-12-02T06:00:00Z >out &&
	latest before &&
	test_cmp ck/step_200/opt.bin before/step_200/opt.bin &&
	echo o200-new >ck/step_200/opt.bin && echo new >ck/step_200/sub/new.bin &&
	rm ck/step_200/sub/s.bin &&
	sleep $((SETTLE + 1)) &&
	rewrite_during_read again &&
	COFFER_TEST_BEFORE_CHANGE_CHECK="sh $TMP/rewrite.sh" \
		coffer run -v --policy p.policy --now 2026-12-02T07:00:00Z >out 2>err &&
	cat out err &&
	grep "^backup  *ck  *incremental  *ok .*held back" out &&
	grep "step_200/opt.bin. changed while it was read; its checkpoint .*/ck/step_200. is held back whole" err &&
	latest r6 &&
	treecmp before/step_200 r6/step_200
'

test_expect_success 'the same in a full: the previous snapshot'"'"'s version of the step, whole' '
	rm -f ck/step_200/sub/new.bin &&
	sleep $((SETTLE + 1)) &&
	coffer run --policy p.policy --now 2026-12-02T08:00:00Z >out &&
	latest before &&
	test_path_is_missing before/step_200/sub/new.bin &&
	echo o200-newer >ck/step_200/opt.bin &&
	sleep $((SETTLE + 1)) &&
	rewrite_during_read yet-again &&
	COFFER_TEST_BEFORE_CHANGE_CHECK="sh $TMP/rewrite.sh" \
		coffer run -v --policy p.policy --now 2026-12-06T00:00:00Z >out 2>err &&
	cat out err &&
	grep "^backup  *ck  *full  *ok .*held back" out &&
	grep "step_200/opt.bin. changed while it was read; its checkpoint .*/ck/step_200. is held back whole" err &&
	latest r7 &&
	treecmp before/step_200 r7/step_200 &&
	echo w100 >expect && test_cmp expect r7/step_100/w.bin &&
	test_cmp ck/train.log r7/train.log
'

test_done
