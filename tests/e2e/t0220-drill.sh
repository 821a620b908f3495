#!/bin/bash
test_description='drill: rehearse a restore, check it, time it, record it, export metrics'
. "$(dirname "$0")/../lib.sh"

# metrics_ok FILE: FILE is well-formed Prometheus text exposition format:
# every line a HELP, a TYPE or one sample; each metric family's HELP and
# TYPE come before its samples, once; samples are NAME{labels} VALUE with
# quoted, escaped label values; the file ends with a newline.
metrics_ok() {
	perl -e '
		my ($f) = @ARGV;
		open(my $fh, "<", $f) or die "$f: $!\n";
		local $/;
		my $t = <$fh>;
		$t =~ /\n\z/ or die "no final newline\n";
		my (%help, %type, %seen, $fam);
		my $name = qr/[a-zA-Z_:][a-zA-Z0-9_:]*/;
		my $lval = qr/"(?:[^"\\\n]|\\[\\"n])*"/;
		my $num = qr/[-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|NaN|[-+]?Inf)/;
		for my $l (split /\n/, $t) {
			if ($l =~ /^# HELP ($name) \S/) {
				die "HELP twice: $1\n" if $help{$1}++;
				die "HELP after samples: $1\n" if $seen{$1};
				$fam = $1;
			} elsif ($l =~ /^# TYPE ($name) (gauge|counter|untyped)$/) {
				die "TYPE twice: $1\n" if $type{$1}++;
				die "TYPE after samples: $1\n" if $seen{$1};
			} elsif ($l =~ /^($name)\{($name=$lval(?:,$name=$lval)*)\} ($num)$/) {
				die "sample of $1 without HELP/TYPE\n"
				    unless $help{$1} && $type{$1};
				die "sample of $1 outside its family\n"
				    unless defined $fam && $fam eq $1;
				$seen{$1}++;
			} else {
				die "bad line: $l\n";
			}
		}
		for my $m (qw(coffer_drill_last_timestamp_seconds
		    coffer_drill_success coffer_drill_duration_seconds
		    coffer_drill_bytes coffer_drill_failures
		    coffer_rpo_age_seconds)) {
			die "no samples of $m\n" unless $seen{$m};
		}
	' "$1"
}

# sample FILE METRIC DATASET: the value of METRIC{dataset="DATASET"}.
sample() {
	grep "^$2{dataset=\"$3\"} " "$1" | cut -d" " -f2
}

test_expect_success 'setup: the hostile tree, backed up' '
	mktree src --small 2>/dev/null &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b.json &&
	id=$(json_get b.json "\$j->{snapshot}") &&
	coffer -r repo ls --json ds@latest >ls.json &&
	nentries=$(json_get ls.json "scalar @\$j") &&
	nfiles=$(json_get ls.json "scalar grep { \$_->{type} ne q(dir) } @\$j") &&
	echo "$nentries entries, $nfiles not directories"
'

test_expect_success 'a healthy snapshot: the drill passes, status 0' '
	coffer -r repo drill ds@latest >out 2>err &&
	cat out err &&
	test_must_be_empty err &&
	grep -E "^drill of snapshot $(echo $id | cut -c1-12) of '\''ds'\'':$" out &&
	grep -E "^  restored +$nentries of $nentries entries, " out &&
	grep -E "^  checked +content and metadata of $nentries entries" out &&
	grep -E "^  failures +0$" out &&
	grep -E "^  verdict +pass$" out
'

test_expect_success 'the scratch directory is made under TMPDIR and removed' '
	test -z "$(find "$TMPDIR" -maxdepth 1 -name "coffer-drill.*")"
'

test_expect_success 'drill --json: every field' '
	coffer -r repo drill --json ds@latest >d.json &&
	json_check d.json "
		for (qw(dataset snapshot time time_ns mode sample scratch
		    scratch_kept entries_total files bytes failures seconds
		    check_seconds mb_per_s estimate_seconds rto_seconds
		    rpo_seconds rpo_age_seconds rto_missed rpo_missed verdict
		    problems)) {
			exists \$j->{\$_} or die qq(no field \$_\n);
		}
		\$j->{dataset} eq q(ds) && \$j->{snapshot} eq q($id) &&
		\$j->{mode} eq q(restore) && \$j->{sample} == 100 &&
		!\$j->{scratch_kept} &&
		\$j->{entries_total} == $nentries && \$j->{files} == $nentries &&
		\$j->{bytes} > 20 * 1048576 && \$j->{failures} == 0 &&
		!defined \$j->{estimate_seconds} && !defined \$j->{rto_seconds} &&
		\$j->{rpo_age_seconds} >= 0 && \$j->{verdict} eq q(pass) &&
		!@{\$j->{problems}}" &&
	bytes=$(json_get d.json "\$j->{bytes}")
'

test_expect_success 'the drills are in the history with their counts' '
	coffer -r repo drill history --json >h.json &&
	json_check h.json "
		@\$j == 2 &&
		!grep { \$_->{dataset} ne q(ds) || \$_->{snapshot} ne q($id) ||
		    \$_->{verdict} ne q(pass) || \$_->{files} != $nentries ||
		    \$_->{bytes} != $bytes || \$_->{failures} != 0 ||
		    \$_->{sample} != 100 || \$_->{mode} ne q(restore) ||
		    \$_->{seconds} <= 0 || \$_->{mb_per_s} <= 0 } @\$j" &&
	coffer -r repo drill history ds >h.txt &&
	cat h.txt &&
	test_line_count = 3 h.txt &&
	head -n 1 h.txt | grep "^TIME .*DATASET .*VERDICT .*FILES .*BYTES .*MB/S .*SOURCE$" &&
	test "$(grep -c " ds  *$(echo $id | cut -c1-12)  *pass  *100%  *$nentries " h.txt)" = 2
'

test_expect_success '--keep --scratch DIR: the restored tree stays, identical to the source' '
	coffer -r repo drill --keep --scratch "$TMP/scratch" --json ds@latest >k.json &&
	json_check k.json "\$j->{scratch_kept} && \$j->{verdict} eq q(pass)" &&
	kept=$(json_get k.json "\$j->{scratch}") &&
	case "$kept" in "$TMP/scratch/coffer-drill."*) ;; *) false ;; esac &&
	treecmp src "$kept"
'

test_expect_success '--no-write streams and verifies every chunk, writes nothing' '
	coffer -r repo drill --no-write ds@latest >nw.out &&
	grep -E "^  streamed +$nentries of $nentries entries, .*nothing written$" nw.out &&
	grep -E "^  verdict +pass$" nw.out
'

test_expect_success '--sample: a deterministic share of the files' '
	coffer -r repo drill --sample 20% --json ds@latest >s1.json &&
	coffer -r repo drill --sample 20 --json ds@latest >s2.json &&
	want=$(( (nfiles * 20 + 99) / 100 )) &&
	json_check s1.json "
		\$j->{sample} == 20 && \$j->{files} == $want &&
		\$j->{entries_total} == $nentries &&
		\$j->{verdict} eq q(pass) && defined \$j->{estimate_seconds}" &&
	test "$(json_get s1.json "\$j->{bytes}")" = "$(json_get s2.json "\$j->{bytes}")" &&
	test_expect_code 2 coffer -r repo drill --sample 0 ds@latest &&
	test_expect_code 2 coffer -r repo drill --sample 150% ds@latest
'

test_expect_success 'an RPO shorter than the newest snapshot: missed objective, status 6' '
	sleep 2 &&
	test_expect_code 6 coffer -r repo drill --rpo 1s ds@latest >rpo.out &&
	cat rpo.out &&
	grep -E "^  RPO +1\.0 s: MISSED \(newest snapshot .* old\)$" rpo.out &&
	grep -E "^  verdict +missed-objective$" rpo.out &&
	test_expect_code 6 coffer -r repo drill --rpo 1s --json ds@latest >rpo.json &&
	json_check rpo.json "
		\$j->{rpo_missed} && !\$j->{rto_missed} && \$j->{failures} == 0 &&
		\$j->{rpo_seconds} == 1 && \$j->{rpo_age_seconds} >= 2 &&
		\$j->{verdict} eq q(missed-objective)"
'

test_expect_success 'an RTO shorter than the restore: missed objective, status 6' '
	test_expect_code 6 coffer -r repo drill --rto 1ms --json ds@latest >rto.json &&
	json_check rto.json "\$j->{rto_missed} && \$j->{verdict} eq q(missed-objective)" &&
	coffer -r repo drill --rto 1h --rpo 1d ds@latest >ok.out &&
	grep -E "^  RTO +1h00m: met" ok.out &&
	grep -E "^  RPO +1d00h: met" ok.out
'

test_expect_success 'the history shows each verdict' '
	coffer -r repo drill history --json ds >h2.json &&
	json_check h2.json "
		(grep { \$_->{verdict} eq q(missed-objective) } @\$j) == 3 &&
		(grep { \$_->{verdict} eq q(pass) } @\$j) >= 6 &&
		(grep { \$_->{rpo_seconds} && \$_->{rpo_seconds} == 1 } @\$j) == 2"
'

test_expect_success 'bad arguments are usage errors' '
	test_expect_code 2 coffer -r repo drill &&
	test_expect_code 2 coffer -r repo drill nosuch@latest &&
	test_expect_code 2 coffer -r repo drill --no-write --keep ds@latest &&
	test_expect_code 2 coffer -r repo drill --rto soon ds@latest &&
	test_expect_code 2 coffer -r repo drill history a b
'

test_expect_success '--metrics-file: well-formed Prometheus text' '
	coffer -r repo drill --metrics-file m.prom ds@latest >/dev/null &&
	cat m.prom &&
	metrics_ok m.prom &&
	test "$(sample m.prom coffer_drill_success ds)" = 1 &&
	test "$(sample m.prom coffer_drill_failures ds)" = 0 &&
	test "$(sample m.prom coffer_drill_bytes ds)" = "$bytes"
'

test_expect_success 'label values are escaped; every dataset keeps its series' '
	mkdir odd && printf "x\n" >odd/x &&
	name="we\"ird\\set" &&
	coffer -r repo backup "$name" odd &&
	test_expect_code 6 coffer -r repo drill --rpo 1ms \
		--metrics-file m.prom "$name@latest" >/dev/null &&
	cat m.prom &&
	metrics_ok m.prom &&
	grep -F "coffer_drill_success{dataset=\"we\\\"ird\\\\set\"} 0" m.prom &&
	test "$(sample m.prom coffer_drill_success ds)" = 1 &&
	test "$(grep -c "^coffer_rpo_age_seconds{" m.prom)" = 2
'

test_expect_success 'the metrics file is replaced atomically' '
	ino1=$(stat -c %i m.prom) &&
	coffer -r repo drill --metrics-file m.prom ds@latest >/dev/null &&
	ino2=$(stat -c %i m.prom) &&
	echo "inode $ino1 -> $ino2" &&
	test "$ino1" != "$ino2" &&
	metrics_ok m.prom &&
	# Nothing half-written is left beside it.
	test "$(ls -A | grep -c "m\.prom")" = 1
'

test_expect_success 'a reader never sees a partial metrics file' '
	( for i in 1 2 3 4 5 6; do
		coffer -r repo drill --sample 10% --metrics-file m.prom \
			ds@latest >/dev/null ||
			{ echo "drill $i failed: $?"; exit 1; }
	  done ) &
	writer=$! &&
	reads=0 &&
	while kill -0 $writer 2>/dev/null; do
		cp m.prom snap.prom 2>/dev/null && metrics_ok snap.prom ||
			{ echo "read $reads: not whole"; cat snap.prom;
			  wait $writer; return 1; }
		reads=$((reads + 1))
	done &&
	wait $writer &&
	echo "$reads reads, all whole" &&
	test "$reads" -gt 0
'

test_expect_success 'drill of a snapshot that is not complete is refused' '
	sqlite3 "$(catalog_db repo)" \
		"UPDATE snapshot SET state = 2 WHERE sid = '\''$id'\''" &&
	test_expect_code 2 coffer -r repo drill "$id" 2>err &&
	grep "not complete" err
'

# A sample leaves directories out, so the files' writers make them, on
# several threads: each must see the caller's umask, not another's 0 (a
# race: many directories make it likely to show).
test_expect_success 'directories made for sampled files follow the umask' '
	mkdir wide &&
	for d in $(seq 1 60); do
		mkdir wide/d$d &&
		for f in $(seq 1 20); do
			echo "$d $f" >wide/d$d/f$f || return 1
		done
	done &&
	coffer -r repo backup wide wide &&
	for i in 1 2 3 4; do
		rm -rf "$TMP/sc" && mkdir "$TMP/sc" &&
		(umask 022 && coffer -r repo drill --sample 60% --keep \
		    --scratch "$TMP/sc" --json wide@latest >u.json) &&
		kept=$(json_get u.json "\$j->{scratch}") &&
		bad=$(find "$kept" -mindepth 1 -type d ! -perm 0755 | wc -l) &&
		echo "run $i: $bad directories not 0755" &&
		test "$bad" = 0 || return 1
	done
'

test_done
