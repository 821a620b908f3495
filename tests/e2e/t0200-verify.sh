#!/bin/bash
test_description='verify: structure and data of the repository, damage mapped to snapshots and files'
. "$(dirname "$0")/../lib.sh"

fresh_repo() {
	rm -rf repo && cp -a pristine repo
}

# Six packs at least: one backup per dataset writes its own pack.  Two
# datasets hold the same tree, so every chunk of it is shared by two
# snapshots.
test_expect_success 'setup: a shared tree in two datasets, and four others' '
	mkdir -p src/data src/notes &&
	random_file src/data/shared.bin 3 &&
	printf "note %s\n" 1 2 3 >src/notes/a.txt &&
	printf "other\n" >src/notes/b.txt &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json one src >one.json &&
	coffer -r repo backup --json two src >two.json &&
	id1=$(json_get one.json "\$j->{snapshot}") &&
	id2=$(json_get two.json "\$j->{snapshot}") &&
	for i in 1 2 3 4; do
		mkdir x$i && random_file x$i/f.bin 1 &&
		coffer -r repo backup x$i x$i || return 1
	done &&
	npacks=$(find repo/packs -type f | wc -l) &&
	echo "$npacks packs" &&
	test "$npacks" -ge 6 &&
	cp -a repo pristine
'

test_expect_success 'a healthy repository: verify passes, the summary ends the output' '
	coffer -r repo verify >out 2>err &&
	cat out &&
	test_must_be_empty err &&
	tail -n 1 out | grep -E "^verified [0-9]+ packs, [0-9]+ chunks \(structure\): no errors$"
'

test_expect_success 'verify --read-data reads and verifies every needed chunk' '
	coffer -r repo verify --read-data >out &&
	tail -n 1 out | grep -E "^verified [0-9]+ packs, [0-9]+ chunks, .*: no errors$" &&
	coffer -r repo verify --read-data --json >all.json &&
	json_check all.json "
		\$j->{complete} && !\$j->{resumed} && \$j->{errors} == 0 &&
		\$j->{mode} eq q(read-data) &&
		\$j->{packs} == \$j->{packs_total} &&
		\$j->{packs_read} == \$j->{packs} &&
		\$j->{chunks} > 0 && \$j->{chunks_read} == \$j->{chunks} &&
		\$j->{bytes_read} >= 7 * 1048576 &&
		\$j->{records} == 6 &&
		!@{\$j->{damaged}} && !@{\$j->{broken}}" &&
	total=$(json_get all.json "\$j->{chunks_read}") &&
	packs_total=$(json_get all.json "\$j->{packs_total}")
'

test_expect_success 'verify (structure) reads no chunk data' '
	coffer -r repo verify --json >s.json &&
	json_check s.json "
		\$j->{mode} eq q(structure) && \$j->{packs_read} == 0 &&
		\$j->{chunks_read} == 0 && \$j->{bytes_read} == 0 &&
		\$j->{chunks} == $total && \$j->{records} == 6"
'

test_expect_success '--read-data=N/M for N = 1..M read every chunk exactly once' '
	sum=0 && : >read-packs &&
	# Each run journals its result in a pack of its own: the packs there
	# before the first slice are the ones the three must read.
	(cd repo/packs && ls */ | grep -v : | grep . | sort) >packs-before &&
	for n in 1 2 3; do
		coffer -v -r repo verify --read-data=$n/3 --json \
			>slice$n.json 2>slice$n.err || return 1
		grep "^verify: read pack " slice$n.err >>read-packs
		sum=$((sum + $(json_get slice$n.json "\$j->{chunks_read}")))
	done &&
	cat read-packs &&
	echo "$sum chunks read in slices, $total in one pass" &&
	test "$sum" = "$total" &&
	# Each pack once: no name twice, and none of those there before
	# left out.
	test "$(cut -d" " -f4 read-packs | sort | uniq -d | wc -l)" = 0 &&
	cut -d" " -f4 read-packs | tr -d : | sort >packs-read &&
	comm -23 packs-before packs-read >missed &&
	test_must_be_empty missed &&
	# The chunk counts in the log add up too.
	test "$(sed "s/.*: \([0-9]*\) chunks$/\1/" read-packs |
		awk "{ s += \$1 } END { print s }")" = "$total"
'

test_expect_success '--read-data=P% reads that share of the packs' '
	coffer -r repo verify --read-data=50% --json >p.json &&
	json_check p.json "
		\$j->{mode} eq q(read-data=50%) && \$j->{complete} &&
		\$j->{packs_read} == int((\$j->{packs_total} + 1) / 2)"
'

test_expect_success 'bad --read-data and --max-duration values are usage errors' '
	test_expect_code 2 coffer -r repo verify --read-data=0/3 &&
	test_expect_code 2 coffer -r repo verify --read-data=4/3 &&
	test_expect_code 2 coffer -r repo verify --read-data=3 &&
	test_expect_code 2 coffer -r repo verify --read-data=0% &&
	test_expect_code 2 coffer -r repo verify --read-data=101% &&
	test_expect_code 2 coffer -r repo verify --max-duration 0 &&
	test_expect_code 2 coffer -r repo verify --max-duration 10x &&
	test_expect_code 2 coffer -r repo verify extra
'

test_expect_success '--max-duration stops after a pack and saves where it got to' '
	coffer -r repo verify --read-data --max-duration 1ms --json >m1.json &&
	json_check m1.json "
		!\$j->{complete} && !\$j->{resumed} && \$j->{packs} == 1 &&
		\$j->{resume_after} =~ /^[0-9a-f]{32}\z/" &&
	coffer -r repo verify --read-data --max-duration 1ms >m1.out &&
	tail -n 1 m1.out | grep "^stopped at the time limit: .*the next run resumes"
'

# The structure pass journals its result: a pack of its own, which the
# resumed pass reads only if its random name sorts after where it stopped.
test_expect_success 'another mode does not disturb it; the next run resumes and completes' '
	coffer -r repo verify >/dev/null &&
	coffer -r repo verify --read-data --json >m2.json &&
	json_check m2.json "
		\$j->{complete} && \$j->{resumed} && \$j->{earlier_packs} == 2 &&
		\$j->{packs} >= \$j->{packs_total} - 3 &&
		\$j->{packs} <= \$j->{packs_total} - 2 &&
		\$j->{errors} == 0" &&
	coffer -r repo verify --read-data --json >m3.json &&
	json_check m3.json "
		\$j->{complete} && !\$j->{resumed} &&
		\$j->{packs} == \$j->{packs_total}"
'

test_expect_success 'a resumed pass covers every pack once over its runs' '
	# Its result is journaled once it completes: no pack of its own
	# comes in its way.
	packs_now=$(find repo/packs -type f | wc -l) &&
	runs=0 &&
	while :; do
		coffer -v -r repo verify --read-data=1/1 --max-duration 1ms \
			--json >r.json 2>>r.err || return 1
		runs=$((runs + 1))
		json_check r.json "\$j->{complete}" 2>/dev/null && break
		test $runs -lt 20 || return 1
	done &&
	echo "$runs runs" &&
	test "$runs" = "$packs_now" &&
	test "$(grep -c "^verify: read pack " r.err)" = "$packs_now" &&
	test "$(grep "^verify: read pack " r.err | sort | uniq -d | wc -l)" = 0
'

test_expect_success 'one byte flipped in a chunk that two snapshots share' '
	read -r pack off len <<-EOF &&
	$(chunk_loc data/shared.bin 1)
	EOF
	echo "pack $pack offset $off stored $len" &&
	flip_byte "$(pack_path "$pack")" $((off + 34 + len / 2))
'

test_expect_success 'structure alone does not see it (no data is read)' '
	coffer -r repo verify
'

test_expect_success 'verify --read-data: status 4, both snapshots and the file named' '
	test_expect_code 4 coffer -r repo verify --read-data >out 2>err &&
	cat out err &&
	grep "failed authentication" err &&
	grep -F "snapshot $(echo $id1 | cut -c1-12) of '\''one'\''" out &&
	grep -F "snapshot $(echo $id2 | cut -c1-12) of '\''two'\''" out &&
	test "$(grep -c "^  data/shared.bin$" out)" = 2 &&
	! grep notes/ out &&
	tail -n 1 out | grep -E "^verified [0-9]+ packs, [0-9]+ chunks, .*: 1 damaged or missing chunk in 1 pack breaks 2 snapshots$"
'

test_expect_success 'verify --read-data --json: the chunk, its pack, both snapshots' '
	test_expect_code 4 coffer -r repo verify --read-data --json >bad.json &&
	json_check bad.json "
		my @b = @{\$j->{broken}};
		\$j->{errors} == 1 && \$j->{damaged_chunks} == 1 &&
		\$j->{damaged}[0]{pack} eq q($pack) &&
		\$j->{damaged}[0]{offset} == $off &&
		\$j->{broken_snapshots} == 2 && @b == 2 &&
		join(q( ), sort map { \$_->{snapshot} } @b) eq
		    join(q( ), sort qw($id1 $id2)) &&
		!grep { join(q(,), @{\$_->{paths}}) ne q(data/shared.bin) } @b"
'

test_expect_success 'a drill of either snapshot fails and names the file' '
	test_expect_code 4 coffer -r repo drill one@latest >d1.out 2>d1.err &&
	cat d1.out &&
	grep -E "^  FAILED +data/shared.bin: " d1.out &&
	grep -E "^  verdict +fail$" d1.out &&
	test_expect_code 4 coffer -r repo drill --json two@latest >d2.json &&
	json_check d2.json "
		\$j->{verdict} eq q(fail) && \$j->{failures} == 1 &&
		\$j->{problems}[0]{path} eq q(data/shared.bin)" &&
	test_expect_code 4 coffer -r repo drill --no-write one@latest >d3.out &&
	grep -E "^  FAILED +data/shared.bin: " d3.out
'

test_expect_success 'a deleted pack: structural verify names what it breaks' '
	fresh_repo &&
	read -r pack off len <<-EOF &&
	$(chunk_loc data/shared.bin 1)
	EOF
	rm "$(pack_path "$pack")" &&
	test_expect_code 4 coffer -r repo verify --json >del.json 2>err &&
	cat err &&
	grep -F "$pack" err &&
	json_check del.json "
		\$j->{bytes_read} == 0 && \$j->{chunks_read} == 0 &&
		\$j->{damaged_packs} == 1 && \$j->{broken_snapshots} == 2 &&
		(grep { \$_ eq q(data/shared.bin) } map { @{\$_->{paths}} }
		    @{\$j->{broken}}) == 2 &&
		(grep { \$_->{problem} =~ /missing/ } @{\$j->{damaged}}) ==
		    \$j->{damaged_chunks}"
'

test_expect_success 'a damaged snapshot record is caught without --read-data' '
	fresh_repo &&
	rp=$(sqlite3 "$(catalog_db)" "SELECT record_pack FROM snapshot
		WHERE sid = '\''$id2'\''") &&
	# The second backup stored no new data: its pack holds the record
	# alone, after the header.
	rec=$(pack_path "$rp") &&
	flip_byte "$rec" 300 &&
	test_expect_code 4 coffer -r repo verify --json >rec.json 2>err &&
	cat err &&
	json_check rec.json "
		\$j->{damaged_chunks} == 0 &&
		@{\$j->{bad_records}} == 1 &&
		\$j->{bad_records}[0]{snapshot} eq q($id2)"
'

test_expect_success 'the pristine repository verifies clean again' '
	fresh_repo &&
	coffer -r repo verify --read-data
'

test_expect_success 'an empty repository verifies' '
	coffer init --key-file key2 empty &&
	COFFER_KEY_FILE=$TMP/key2 coffer -r empty verify >out &&
	grep "^verified 0 packs, 0 chunks (structure): no errors$" out
'

test_done
