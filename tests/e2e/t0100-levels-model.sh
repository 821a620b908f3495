#!/bin/bash
test_description='levels, model-based: random mutations each round, a snapshot at a random level, every snapshot restores as the copy taken then'
. "$(dirname "$0")/../lib.sh"

# COFFER_TEST_SEED replays a run; COFFER_TEST_ROUNDS changes the number of
# rounds (default 30); COFFER_TEST_LEVELS restricts the levels drawn (a
# comma list of full, differential, incremental, auto; auto = no --level).
MODEL=$TOP/tests/tools/levels-model.pl
seed=${COFFER_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
rounds=${COFFER_TEST_ROUNDS:-30}
levels=${COFFER_TEST_LEVELS:-full,differential,incremental,auto}
case $seed$rounds in
''|*[!0-9]*) echo "Bail out! COFFER_TEST_SEED and COFFER_TEST_ROUNDS are numbers"; exit 1 ;;
esac

seed_diag() {
	echo "seed: $seed — rerun with COFFER_TEST_SEED=$seed"
}
echo "# $(seed_diag)"

failed_rounds=

# snap ROUND LEVEL: mutations are done; back up src at LEVEL (auto: no
# --level), record what each snapshot must be, copy the tree aside.
# Expectations: a full has no parent and depth 0; a differential's parent
# is the newest full before it, depth 1; an incremental's (and auto's, as a
# complete full always exists here) is the previous snapshot, depth + 1.
snap() {
	snap_r_=$1 snap_l_=$2
	case $snap_l_ in
	auto) set -- ;;
	*) set -- --level "$snap_l_" ;;
	esac
	coffer -r repo backup "$@" --json ds "$TMP/src" >json/$snap_r_ 2>err ||
		{ cat err; echo "round $snap_r_: backup $* failed"; return 1; }
	test_must_be_empty err || { echo "round $snap_r_: stderr not empty"; return 1; }
	snap_id_=$(json_get json/$snap_r_ '$j->{snapshot}') || return 1
	case $snap_l_ in
	full) want_l_=full want_p_=null want_d_=0 ;;
	differential) want_l_=differential want_p_=$last_full want_d_=1 ;;
	*) want_l_=incremental want_p_=$prev_id want_d_=$((prev_depth + 1)) ;;
	esac
	printf '%s %s %s %s %s %s\n' "$snap_r_" "$snap_l_" "$snap_id_" \
		"$want_l_" "$want_p_" "$want_d_" >>expect.tsv
	prev_id=$snap_id_ prev_depth=$want_d_
	[ "$want_l_" != full ] || last_full=$snap_id_
	cp -a src copies/$snap_r_ &&
	treecmp src copies/$snap_r_ ||
		{ echo "round $snap_r_: cp -a does not copy faithfully"; return 1; }
}

test_expect_success "setup: the generated tree (seed $seed), a repository, the plan" '
	perl "$MODEL" gen src "$seed" &&
	find src | wc -l &&
	du -sh src &&
	mkdir scratch json copies restored mutations &&
	: >expect.tsv &&
	coffer_init_keyfile repo &&
	perl "$MODEL" plan "$seed" "$rounds" "$levels" >plan &&
	test_line_count = "$rounds" plan &&
	cat plan
'

test_expect_success 'round 0: a full of the generated tree' '
	snap 0 full
'

test_expect_success "rounds 1..$rounds: random mutations, then a snapshot at the planned level" '
	while read -r r level; do
		echo "== round $r: $level" &&
		perl "$MODEL" mutate src "$seed" "$r" scratch >mutations/$r ||
			{ failed_rounds=" $r"; echo "round $r: mutations failed"; return 1; }
		cat mutations/$r
		snap "$r" "$level" || { failed_rounds=" $r"; return 1; }
	done <plan &&
	test_line_count = $((rounds + 1)) expect.tsv
'

test_expect_success 'backup --json: the level and parent of every snapshot' '
	while read -r r asked id level parent depth; do
		json_check json/$r "
			my \$p = \$j->{parent} // q(null);
			\$j->{level} eq q($level) && \$p eq q($parent) or
			    die qq(round $r (asked $asked): level \$j->{level}, parent \$p; want $level, $parent\n);
			\$j->{snapshot} eq q($id) && \$j->{warnings} == 0" || return 1
	done <expect.tsv
'

test_expect_success 'snapshots --json: level, parent and depth of every snapshot' '
	coffer -r repo snapshots --json ds >snaps.json &&
	perl -MJSON::PP -e "
		local \$/;
		open(my \$f, q(<), q(snaps.json)) or die;
		my %s = map { \$_->{id} => \$_ } @{JSON::PP->new->decode(<\$f>)};
		open(\$f, q(<), q(expect.tsv)) or die;
		my \$bad = 0;
		for (split /\n/, <\$f>) {
			my (\$r, \$asked, \$id, \$level, \$parent, \$depth) = split / /;
			my \$s = \$s{\$id} or die qq(round \$r: snapshot \$id not listed\n);
			my \$p = \$s->{parent} // q(null);
			next if \$s->{level} eq \$level && \$p eq \$parent &&
			    \$s->{depth} == \$depth && \$s->{state} eq q(complete);
			print qq(round \$r (asked \$asked): level \$s->{level}, parent \$p, ),
			    qq(depth \$s->{depth}, \$s->{state}; want \$level, \$parent, \$depth\n);
			\$bad++;
		}
		exit(\$bad ? 1 : 0);
	"
'

test_expect_success 'every snapshot restores as the copy of its round' '
	failed_rounds= &&
	while read -r r asked id level parent depth; do
		if coffer -r repo restore "$id" restored/$r >restore.out 2>&1 &&
		    treecmp copies/$r restored/$r >cmp.out; then
			rm -rf restored/$r
		else
			echo "round $r ($asked, snapshot $id, depth $depth) differs:" &&
			cat restore.out &&
			head -n 20 cmp.out &&
			if test -s mutations/$r; then
				echo "mutations of round $r:" &&
				sed "s/^/    /" mutations/$r
			fi
			failed_rounds="$failed_rounds $r"
		fi
	done <expect.tsv &&
	test -z "$failed_rounds" ||
	{ seed_diag; echo "failing rounds:$failed_rounds"; false; }
'

test_expect_success 'restore DATASET@latest and DATASET@full by name' '
	last=$(tail -n 1 expect.tsv | cut -d" " -f1) &&
	coffer -r repo restore ds@latest latest &&
	treecmp copies/$last latest &&
	full_round=$(awk "\$4 == \"full\" { r = \$1 } END { print r }" expect.tsv) &&
	coffer -r repo restore ds@full at-full &&
	treecmp copies/$full_round at-full
'

test_expect_success 'consolidate the latest: a full that restores as the last copy' '
	coffer -r repo consolidate --json ds@latest >cons.json &&
	json_check cons.json "\$j->{level} eq q(full)" &&
	cons=$(json_get cons.json "\$j->{snapshot}") &&
	coffer -r repo restore "$cons" consolidated &&
	treecmp copies/$last consolidated
'

if [ "$test_failed" -gt 0 ]; then
	echo "# $(seed_diag)"
	[ -z "$failed_rounds" ] || echo "# failing rounds:$failed_rounds"
fi
test_done
