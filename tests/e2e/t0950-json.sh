#!/bin/bash
test_description='--json: every command prints one valid JSON document, whatever the names'
. "$(dirname "$0")/../lib.sh"

# A strict parser besides perl's: make deps installs jq.
command -v jq >/dev/null || { echo "Bail out! jq not found (make deps)"; exit 1; }

# json_strict FILE [FILTER]...: FILE is valid UTF-8 holding exactly one
# JSON document, which jq and JSON::PP (strict RFC 8259, no trailing
# text) both parse, and each jq FILTER is true of it.
json_strict() {
	js_file_=$1
	shift
	if ! iconv -f UTF-8 -t UTF-8 "$js_file_" >/dev/null; then
		echo "json_strict: $js_file_ is not UTF-8" >&4
		return 1
	fi
	if ! test "$(jq -s length "$js_file_")" = 1 ||
	    ! perl -MJSON::PP -0777 -ne 'JSON::PP->new->decode($_)' \
	    "$js_file_"; then
		echo "json_strict: $js_file_ is not one JSON document:" >&4
		cat "$js_file_" >&4
		return 1
	fi
	for js_filter_; do
		if ! jq -e "$js_filter_" "$js_file_" >/dev/null; then
			echo "json_strict: $js_file_: false: $js_filter_" >&4
			cat "$js_file_" >&4
			return 1
		fi
	done
}

# A name with a newline, a double quote, a backslash and a byte that is
# not UTF-8; in JSON it is "a\nb\"c\\d\u00ffe": the byte as U+00FF.
weird=$(printf 'a\nb"c\\d\377e')
weird_json='"a\nb\"c\\d\u00ffe"'
export WEIRD="$weird"
# A dataset name that a Prometheus label and JSON must both escape.
qds='q"b\s'

test_expect_success 'setup: names that JSON must escape, three snapshots' '
	mkdir -p src/names src/data &&
	printf "weird\n" >"src/names/$weird" &&
	printf "utf8\n" >"src/names/caf$(printf "\303\251")" &&
	printf "ctl\n" >"src/names/tab$(printf "\t")ctl$(printf "\001")" &&
	printf "one\n" >src/data/one.txt &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --json ds src >b1.json &&
	printf "two\n" >src/data/two.txt &&
	printf "changed\n" >src/data/one.txt &&
	coffer -r repo backup --json ds src >b2.json &&
	rm "src/names/$weird" &&
	coffer -r repo backup --json ds src >b3.json &&
	mkdir q && printf "q\n" >q/f &&
	coffer -r repo backup --json "$qds" q >bq.json
'

test_expect_success 'backup --json' '
	json_strict b1.json \
		".snapshot | test(\"^[0-9a-f]{32}\$\")" \
		".dataset == \"ds\" and .level == \"full\" and .parent == null" \
		".depth == 0 and .files == 4 and .dirs == 3 and .warnings == 0" \
		"[.bytes_read, .bytes_new, .bytes_stored, .packs, .seconds] |
		    all(type == \"number\")" &&
	json_strict b2.json \
		".level == \"incremental\" and .depth == 1" \
		".parent == $(jq .snapshot b1.json)" &&
	json_strict bq.json ".dataset == \"q\\\"b\\\\s\""
'

test_expect_success 'snapshots --json: a list of every snapshot' '
	coffer -r repo snapshots --json >snaps.json &&
	json_strict snaps.json \
		"type == \"array\" and length == 4" \
		"all(.[]; .state == \"complete\" and (.id | length) == 32)" \
		"map(.dataset) | sort == [\"ds\", \"ds\", \"ds\", \"q\\\"b\\\\s\"]" \
		"map(select(.dataset == \"ds\") | .level) | sort ==
		    [\"full\", \"incremental\", \"incremental\"]" &&
	coffer -r repo snapshots --json nothing >none.json &&
	json_strict none.json ". == []"
'

test_expect_success 'ls --json: the names as JSON strings' '
	coffer -r repo ls --json "$(jq -r .snapshot b2.json)" >ls.json &&
	json_strict ls.json \
		"type == \"array\"" \
		"map(.path) | index($weird_json | \"names/\" + .) != null" \
		"map(.path) | index(\"names/caf\\u00e9\") != null" \
		"map(.path) | index(\"names/tab\\tctl\\u0001\") != null" \
		"all(.[]; (.mode | test(\"^[0-7]{4}\$\")) and
		    (.size | type) == \"number\")" \
		"map(select(.type == \"file\") | .target) | all(. == null)" &&
	grep -F -e "\"names/${weird_json#\"}" ls.json
'

test_expect_success 'ls --json: the bytes of each name come back (perl, no decoding)' '
	(cd src && find . -mindepth 1 -print0) >src.paths &&
	printf "%s\0" "./names/$WEIRD" >>src.paths &&
	json_check ls.json "
		open(my \$f, q(<), q(src.paths)) or die;
		local \$/;
		my %want = map { s{^\./}{}r => 1 } split /\0/, <\$f>;
		my %got = map { \$_->{path} => 1 } @\$j;
		delete \$got{q(.)};
		\$got{q(names/) . \$ENV{WEIRD}} &&
		    join(q(|), sort keys %got) eq join(q(|), sort keys %want)"
'

test_expect_success 'ls --json of a directory, and of a name that is not there' '
	coffer -r repo ls --json ds@latest names >names.json &&
	json_strict names.json "length == 3" &&
	test_expect_code 2 coffer -r repo ls --json ds@latest nowhere >nowhere.json &&
	json_strict nowhere.json ". == []"
'

test_expect_success 'diff --json: changes, with the deleted name' '
	coffer -r repo diff --json "$(jq -r .snapshot b1.json)" ds@latest \
		>diff.json &&
	json_strict diff.json \
		"type == \"array\"" \
		"map(select(.change == \"deleted\") | .path) | index($weird_json | \"names/\" + .) != null" \
		"map(select(.path == \"data/two.txt\") | .change) == [\"added\"]" \
		"map(select(.path == \"data/one.txt\") | .change) == [\"modified\"]" \
		"all(.[]; .type | type == \"string\")" &&
	coffer -r repo diff --json ds@latest ds@latest >same.json &&
	json_strict same.json ". == []"
'

test_expect_success 'consolidate --json' '
	coffer -r repo consolidate --json ds@latest >cons.json &&
	json_strict cons.json \
		".level == \"full\" and .dataset == \"ds\"" \
		".source == $(jq .snapshot b3.json)" \
		".snapshot | test(\"^[0-9a-f]{32}\$\")" \
		"[.files, .dirs, .others, .bytes_stored, .seconds] |
		    all(type == \"number\")"
'

test_expect_success 'verify --json, and verify --read-data --json' '
	coffer -r repo verify --json >v.json &&
	json_strict v.json \
		".mode == \"structure\" and .complete == true" \
		".resumed == false and .resume_after == null" \
		".errors == 0 and .damaged == [] and .broken == [] and
		    .bad_records == []" \
		".packs > 0 and .records > 0" &&
	coffer -r repo verify --read-data --json >vr.json &&
	json_strict vr.json \
		".mode == \"read-data\" and .chunks_read > 0 and .errors == 0"
'

test_expect_success 'catalog check --json and catalog rebuild --json' '
	coffer -r repo catalog check --json >check.json &&
	json_strict check.json \
		".action == \"checked\" and .packs_missing == 0" \
		".verify.mode == \"structure\" and .verify.complete == true" &&
	coffer -r repo catalog rebuild --json >rebuild.json &&
	json_strict rebuild.json \
		".action == \"rebuilt\" and .snapshots_added == 5" \
		"(.previous | type) == \"string\""
'

test_expect_success 'audit --json: a new file with the awkward name' '
	printf "back\n" >"src/names/$weird" &&
	coffer -r repo audit --json ds >audit.json &&
	json_strict audit.json \
		".dataset == \"ds\" and .complete == true" \
		".changes | map(select(.change == \"new\") | .path) |
		    index($weird_json | \"names/\" + .) != null" \
		"[.entries, .files, .bytes, .corrupt, .modified, .missing,
		    .new, .unreadable, .recut, .seconds] |
		    all(type == \"number\")"
'

test_expect_success 'drill --json, drill history --json, and the metrics file' '
	coffer -r repo drill --json --rpo 1d --metrics-file m.prom \
		"$(jq -r .snapshot b2.json)" >drill.json &&
	json_strict drill.json \
		".verdict == \"pass\" and .mode == \"restore\"" \
		".problems == [] and .rto_missed == false" \
		".rto_seconds == null and .rpo_seconds == 86400" \
		".scratch_kept == false and (.scratch | type) == \"string\"" \
		".sample == 100 and .failures == 0" &&
	coffer -r repo drill --json --no-write --sample 50 "$qds@latest" \
		--metrics-file m.prom >drill2.json &&
	json_strict drill2.json \
		".mode == \"no-write\" and .sample == 50 and .scratch == null" \
		".dataset == \"q\\\"b\\\\s\"" &&
	grep -F "coffer_drill_success{dataset=\"q\\\"b\\\\s\"} 1" m.prom &&
	grep -F "coffer_drill_success{dataset=\"ds\"} 1" m.prom &&
	coffer -r repo drill history --json >hist.json &&
	json_strict hist.json \
		"length == 2 and all(.[]; .verdict == \"pass\")" \
		"map(.dataset) | sort == [\"ds\", \"q\\\"b\\\\s\"]"
'

test_expect_success 'forget --dry-run --json, prune --dry-run --json' '
	coffer -r repo forget --dry-run --json --keep-last 1 \
		--dataset ds >forget.json &&
	json_strict forget.json \
		".dry_run == true and .forgotten == 0" \
		".snapshots | length == 4" \
		".forget == (.snapshots | map(select(.keep | not)) | length)" \
		".snapshots | all(.[]; (.keep | type) == \"boolean\" and
		    (.reasons | type) == \"string\")" &&
	coffer -r repo prune --dry-run --json >prune.json &&
	json_strict prune.json \
		".dry_run == true and .packs > 0 and .packs_written == 0" \
		"[.bytes_before, .bytes_deleted, .bytes_read, .seconds] |
		    all(type == \"number\")" &&
	coffer -r repo forget --dry-run --prune --json --keep-last 1 \
		--dataset ds >fp.json &&
	json_strict fp.json ".dry_run == true and has(\"packs_deleted\")"
'

test_expect_success 'export --json, bundles --json, import --json' '
	mkdir off &&
	coffer -r repo export --json --target off --to off ds@latest >exp.json &&
	json_strict exp.json \
		".target == \"off\" and .level == \"full\" and .sequence == 1" \
		".bundle | type == \"string\"" &&
	coffer -r repo bundles --json >bundles.json &&
	json_strict bundles.json \
		"type == \"array\" and length == 1" \
		".[0].target == \"off\" and (.[0].snapshots | length) >= 1" &&
	coffer -r repo import --json off >imp.json &&
	json_strict imp.json ".bundles + .skipped == 1 and .snapshots_new == 0"
'

test_expect_success 'damage: verify and drill still print one valid document' '
	mkdir dmg &&
	random_file "dmg/$weird" 1 &&
	find repo/packs -type f | sort >before &&
	coffer -r repo backup dmg dmg &&
	find repo/packs -type f | sort >after &&
	pack=$(comm -13 before after | xargs ls -S | head -n 1) &&
	flip_byte "$pack" $(($(stat -c %s "$pack") / 2)) &&
	test_expect_code 4 coffer -r repo verify --read-data --json >bad.json &&
	json_strict bad.json \
		".errors >= 1 and .damaged_chunks >= 1" \
		".damaged | all(.[]; (.chunk | length) == 64 and
		    (.pack | type) == \"string\" and
		    (.offset | type) == \"number\" and
		    (.problem | type) == \"string\")" \
		".broken | map(select(.dataset == \"dmg\") | .paths[]) |
		    index($weird_json) != null" &&
	test_expect_code 4 coffer -r repo drill --json dmg@latest >bad-drill.json &&
	json_strict bad-drill.json \
		".verdict == \"fail\" and .failures >= 1" \
		".problems | map(.path) | index($weird_json) != null"
'

test_done
