#!/bin/bash
test_description='offsite export: bundle chains to a directory, a pipe and rclone; import onto a bare machine; hostile bundles refused'
. "$(dirname "$0")/../lib.sh"
require_treecmp

# retar IN OUT PERL: rewrite bundle IN as OUT, member by member; PERL edits
# @m, a list of [name, data, {Archive::Tar options}], in archive order.
retar() {
	perl -MArchive::Tar -e '
		my ($in, $out, $code) = @ARGV;
		my $t = Archive::Tar->new($in) or die "cannot read $in\n";
		my @m = map { [$_->full_path, $_->get_content, {}] }
		    $t->get_files;
		eval $code; die $@ if $@;
		my $n = Archive::Tar->new;
		$n->add_data(@$_) or die "add: " . $n->error for @m;
		$n->write($out) or die "write: " . $n->error;
	' "$1" "$2" "$3"
}

# bare DIR: a new host for the rest of the test's commands: its own state
# directory (no catalog), nothing but the key.
bare() {
	export XDG_STATE_HOME=$TMP/$1-state
	rm -rf "$XDG_STATE_HOME" && mkdir -p "$XDG_STATE_HOME"
}
home() { export XDG_STATE_HOME=$TMP/state; }
host() { export XDG_STATE_HOME=$TMP/$1-state; }	# back to a host
# fingerprint REPO: repo_fingerprint but the writer lock's content (it
# names the last writer, which a refused import still was).
fingerprint() { repo_fingerprint "$1" | grep -v " ./locks/writer$"; }

# restores_all REPO: every snapshot in expect/ restores from REPO as it was.
restores_all() {
	for d in expect/*; do
		sid=${d#expect/} &&
		rm -rf out && coffer -r "$1" restore "$sid" out &&
		treecmp "$d" out || { echo "snapshot $sid differs"; return 1; }
	done
}

snap() {	# snap DATASET SRC [LEVEL]: back up, keep the tree in expect/
	coffer -r repo backup --json ${3:+--level $3} "$1" "$2" >b.json &&
	sid=$(json_get b.json "\$j->{snapshot}") &&
	mkdir -p expect && cp -a "$2" "expect/$sid"
}

test_expect_success 'setup: two datasets, full, differential and incrementals' '
	coffer_init_keyfile repo &&
	mkdir -p a/sub b off &&
	echo secretname_a1 >a/sub/secretname_a1.txt &&
	random_file a/big.bin 2 &&
	echo one >b/secretname_b1 &&
	snap ds-a a full && snap ds-b b full &&
	echo two >a/secretname_a2 && snap ds-a a differential &&
	echo three >b/three && snap ds-b b incremental
'

test_expect_success 'a full bundle to a directory, its b2sum sidecar checks without a key' '
	coffer -r repo export --json --target off --to off ds-a@latest >e1.json &&
	json_check e1.json "\$j->{bundle} eq \"off-0001.cfb\" &&
	    \$j->{level} eq \"full\" && \$j->{sequence} == 1 &&
	    \$j->{packs} > 0 && \$j->{needed_bytes} > 2000000 &&
	    \$j->{needed_bytes} <= \$j->{pack_bytes}" &&
	test_path_is_file off/off-0001.cfb &&
	(cd off && b2sum -c off-0001.cfb.b2sum) &&
	! ls -a off | grep -q "\.tmp"
'

test_expect_success 'later bundles carry only what the target lacks (and the journal of the bundle before)' '
	coffer -r repo export --json --target off --to off ds-b@latest >e2.json &&
	json_check e2.json "\$j->{level} eq \"incremental\" &&
	    \$j->{base_sequence} == 1 && \$j->{packs} > 0" &&
	coffer -r repo export --json --target off --to off ds-a@latest >e3.json &&
	json_check e3.json "\$j->{level} eq \"incremental\" &&
	    \$j->{packs} == \$j->{journal_packs} &&
	    \$j->{journal_packs} > 0" &&
	echo four >a/four && snap ds-a a incremental &&
	coffer -r repo export --json --target off --to off --level differential \
		ds-a@latest >e4.json &&
	json_check e4.json "\$j->{level} eq \"differential\" &&
	    \$j->{base_sequence} == 1" &&
	echo five >b/five && snap ds-b b &&
	coffer -r repo export --target off --to off ds-b@latest &&
	coffer -r repo bundles --json --target off >bl.json &&
	json_check bl.json "@\$j == 5 && \$j->[4]{sequence} == 5" &&
	(cd off && for f in *.b2sum; do b2sum -c "$f" || exit 1; done)
'

test_expect_success 'bundles --at: what the target really holds, and a hole in its chain' '
	coffer -r repo bundles --json --target off --at off >at.json &&
	json_check at.json "@\$j == 5 && !grep { !\$_->{present} } @\$j" &&
	rm -rf holed && cp -r off holed && rm holed/off-0004.cfb &&
	test_expect_code 4 coffer -r repo bundles --target off --at holed \
		>at.txt 2>err &&
	grep "MISSING" at.txt && grep "chain of its last full is broken" err
'

test_expect_success 'a snapshot recorded in parts over many packs travels whole' '
	home && mkdir -p parts/d parts-off &&
	for f in $(seq 1 120); do echo "part $f" >parts/d/f$f || return 1; done &&
	COFFER_RECORD_PART_ENTRIES=16 COFFER_PACK_SIZE=1 \
		coffer -r repo backup --json ds-p parts >bp.json &&
	sid=$(json_get bp.json "\$j->{snapshot}") &&
	coffer -r repo export --target p2 --to parts-off ds-p@latest &&
	bare bp &&
	coffer -r fromparts import --init parts-off &&
	rm -rf out && coffer -r fromparts restore "$sid" out &&
	treecmp parts out && home
'

test_expect_success 'no file name of the source appears in any bundle' '
	for f in off/*.cfb; do
		! grep -a -q secretname "$f" || { echo "$f leaks"; return 1; }
	done
'

test_expect_success 'a bare machine: import --init from the bundles and the key alone' '
	bare b1 &&
	coffer -r new import --init --json off >i.json &&
	json_check i.json "\$j->{bundles} == 5 && \$j->{skipped} == 0" &&
	coffer -r new snapshots --json >s.json &&
	json_check s.json "@\$j == 6" &&
	restores_all new &&
	coffer -r new verify --read-data &&
	coffer -r new import --json off >i2.json &&
	json_check i2.json "\$j->{bundles} == 0 && \$j->{skipped} == 5"
'

test_expect_success 'import --init refuses a directory that is not empty, and the wrong key' '
	bare b2 && mkdir busy && echo x >busy/x &&
	test_expect_code 2 coffer -r busy import --init off 2>err &&
	grep "not empty" err && test_path_is_missing busy/coffer.conf &&
	coffer init --key-file other.key other-repo &&
	test_must_fail coffer -r new2 --key-file other.key import --init off &&
	test_path_is_missing new2
'

test_expect_success 'import --init where the parent is missing: an I/O error, 5 as init, not damage' '
	bare b2b &&
	test_expect_code 5 coffer -r nowhere/repo import --init off 2>err &&
	test_line_count = 1 err && grep "cannot create directory" err &&
	test_expect_code 5 coffer init --key-file k9 nowhere/repo2 2>err &&
	test_path_is_missing nowhere
'

test_expect_success 'two copies of one repository on one host, from two targets: a catalog each' '
	home && mkdir -p twoA twoB &&
	coffer -r repo snapshots --json >all.json &&
	n=$(json_get all.json "scalar @\$j") &&
	coffer -r repo export --target twoA --to twoA --all &&
	coffer -r repo export --target twoB --to twoB --all &&
	bare b5 &&
	coffer -r copyA import --init --json twoA >a.json 2>errA &&
	coffer -r copyB import --init --json twoB >b.json 2>errB &&
	test_must_be_empty errA && test_must_be_empty errB &&
	json_check a.json "\$j->{snapshots_new} == $n" &&
	json_check b.json "\$j->{snapshots_new} == $n" &&
	test "$(ls "$XDG_STATE_HOME/coffer" | wc -l)" = 2 &&
	restores_all copyA && restores_all copyB &&
	a=$(coffer -r copyA catalog path) && b=$(coffer -r copyB catalog path) &&
	test -f "$a" && test -f "$b" && test "$a" != "$b" &&
	test "$(env -u COFFER_KEY_FILE "$COFFER" -r copyA catalog path)" = "$a" &&
	test "$(coffer -r copyA --catalog "$TMP/elsewhere.db" catalog path)" = "$TMP/elsewhere.db"
'

test_expect_success 'through a pipe: export --to -, import -' '
	home && mkdir -p pipe &&
	coffer -r repo export --target p --to - --all >pipe/p-0001.cfb &&
	bare b3 &&
	coffer -r piped import --init - <pipe/p-0001.cfb &&
	restores_all piped
'

test_expect_success 'through rclone: a local remote' '
	home &&
	export RCLONE_CONFIG_LOC_TYPE=local &&
	mkdir -p cloud &&
	coffer -r repo export --target cloud --to "rclone:loc:$TMP/cloud" --all &&
	test_path_is_file cloud/cloud-0001.cfb &&
	(cd cloud && b2sum -c cloud-0001.cfb.b2sum) &&
	bare b4 &&
	coffer -r fromcloud import --init "rclone:loc:$TMP/cloud" &&
	restores_all fromcloud
'

test_expect_success 'a failed upload is not recorded' '
	home &&
	coffer -r repo bundles --json --target nowhere >n0.json &&
	json_check n0.json "@\$j == 0" &&
	test_must_fail coffer -r repo export --target nowhere \
		--to "rclone:nosuchremote:x" --all 2>err &&
	cat err && test_line_count = 1 err &&
	grep "^error: rclone rcat failed: .*nosuchremote" err &&
	coffer -r repo bundles --json --target nowhere >n1.json &&
	json_check n1.json "@\$j == 0"
'

# A repository imported from off-0001 alone, to feed hostile bundles to.
test_expect_success 'setup: a repository holding the first bundle' '
	bare b5 && mkdir one && cp off/off-0001.cfb one/ &&
	coffer -r victim import --init one &&
	fingerprint victim >victim.before &&
	mkdir bad
'

# refused NAME STATUS: import bad/NAME into victim must exit STATUS with a
# message, and leave every file of the repository as it was.
refused() {
	test_expect_code "$2" coffer -r victim import \
		- <"bad/$1" 2>err &&
	cat err && test -s err &&
	fingerprint victim >victim.after &&
	test_cmp victim.before victim.after
}

test_expect_success 'hostile members: ../x, absolute, symlink, duplicate, not in the manifest' '
	b=off/off-0002.cfb &&
	retar $b bad/dotdot.cfb "\$m[1][0] = q{../x}" &&
	refused dotdot.cfb 4 && grep "refused member" err &&
	retar $b bad/abs.cfb "\$m[1][0] = q{/tmp/x}" &&
	refused abs.cfb 4 && grep "refused member" err &&
	retar $b bad/link.cfb "splice(@m, 1, 0, [q{packs/00/00} . q{0} x 30,
		q{}, {type => 2, linkname => q{/etc/passwd}}])" &&
	refused link.cfb 4 && grep "not a regular file" err &&
	retar $b bad/dup.cfb "splice(@m, 2, 0, [@{\$m[1]}])" &&
	refused dup.cfb 4 && grep "twice" err &&
	retar $b bad/extra.cfb "my (\$i) = grep { \$m[\$_][0] =~ m{^packs/} }
		0 .. \$#m; splice(@m, \$i, 0, [q{packs/ff/ff} . q{0} x 30,
		q{junk} x 256, {}])" &&
	refused extra.cfb 4 && grep "not in the manifest" err
'

# tar_end_of FILE N: the offset just past the data of the Nth member
# (from 0) of tar FILE: where a stream cut there stops.
tar_end_of() {
	perl -e '
		my ($f, $want) = @ARGV;
		open(my $fh, "<", $f) or die "$f: $!\n";
		binmode $fh;
		my ($pos, $i) = (0, 0);
		while (read($fh, my $h, 512) == 512) {
			my $size = oct(unpack("Z12", substr($h, 124, 12)));
			my $end = $pos + 512 + int(($size + 511) / 512) * 512;
			if ($i++ == $want) { print "$end\n"; exit 0; }
			seek($fh, $pos = $end, 0);
		}
		die "$f: no member $want\n";
	' "$1" "$2"
}

# A member named as a pack but smaller than a pack's header and index is
# refused from its tar header, before it is staged in tmp/: the stream is
# cut just after it and then held open, so that an import that staged it
# would be seen waiting for more with the file in tmp/.
test_expect_success 'a pack member too small to be a pack is refused before it is staged' '
	b=off/off-0002.cfb &&
	retar $b bad/tiny.cfb "my (\$i) = grep { \$m[\$_][0] =~ m{^packs/} }
		0 .. \$#m; \$m[\$i][1] = q{tiny}; print \"\$i\n\"" >tiny.at &&
	refused tiny.cfb 4 && grep "too small to be a pack" err &&
	end=$(tar_end_of bad/tiny.cfb "$(cat tiny.at)") &&
	test_dir_is_empty victim/tmp &&
	{ { head -c "$end" bad/tiny.cfb; sleep 5; } |
	  "$COFFER" -r victim import - 2>err & } &&
	pid=$! && staged= && n=0 &&
	while kill -0 $pid 2>/dev/null && test $n -lt 150; do
		test -z "$(ls -A victim/tmp)" || staged=t
		sleep 0.02; n=$((n + 1))
	done &&
	! kill -0 $pid 2>/dev/null &&
	{ wait $pid; test $? = 4; } &&
	{ test -z "$staged" || { echo "staged in tmp/"; false; }; } &&
	grep "too small to be a pack" err &&
	fingerprint victim >victim.after &&
	test_cmp victim.before victim.after
'

test_expect_success 'a FIFO or a symlink named as a bundle is refused, not waited on' '
	mkdir -p odd && mkfifo odd/fifo-0001.cfb &&
	test_expect_code 5 coffer -r victim import odd 2>err &&
	grep "not a regular file" err &&
	rm odd/fifo-0001.cfb && ln -s ../off/off-0002.cfb odd/link-0001.cfb &&
	test_expect_code 5 coffer -r victim import odd 2>err &&
	cat err && fingerprint victim >victim.after &&
	test_cmp victim.before victim.after
'

test_expect_success 'truncated anywhere: refused, nothing changed' '
	b=off/off-0002.cfb && size=$(stat -c %s $b) &&
	# (Cutting into the end-of-archive blocks leaves every signed
	# byte: not a truncation to refuse.)
	for cut in 0 100 511 512 1024 1500 2048 $((size / 2)) \
	    $((size - 2100)) $((size - 1600)) $((size - 1500)); do
		head -c $cut $b >bad/cut.cfb &&
		refused cut.cfb 4 || { echo "cut at $cut"; return 1; }
	done
'

test_expect_success 'a flipped byte in a pack, in the manifest, in the signature' '
	b=off/off-0002.cfb &&
	retar $b bad/p.cfb "substr(\$m[1][1], 100, 1) ^= chr(1)" &&
	refused p.cfb 4 && grep "damaged" err &&
	retar $b bad/m.cfb "\$m[-2][1] =~ s/\"sequence\": 2/\"sequence\": 3/ or
		die q{no sequence}" &&
	refused m.cfb 4 && grep "signature" err &&
	retar $b bad/s.cfb "substr(\$m[-1][1], 5, 1) ^= chr(1)" &&
	refused s.cfb 4 && grep "signature" err
'

test_expect_success 'a bundle of another repository is refused' '
	home && mkdir -p other-off &&
	coffer -r other-repo --key-file other.key backup x a >/dev/null &&
	coffer -r other-repo --key-file other.key export --target off \
		--to other-off --all &&
	host b5 && cp other-off/off-0001.cfb bad/other.cfb &&
	test_expect_code 4 coffer -r victim import - <bad/other.cfb 2>err &&
	grep "signature" err &&
	fingerprint victim >victim.after &&
	test_cmp victim.before victim.after
'

test_expect_success 'a gap in the chain, and an older bundle after a newer one' '
	host b5 &&
	test_expect_code 2 coffer -r victim import - <off/off-0003.cfb 2>err &&
	grep "builds on bundle 2, which was not imported" err &&
	fingerprint victim >victim.after &&
	test_cmp victim.before victim.after &&
	coffer -r victim import - <off/off-0002.cfb &&
	coffer -r victim import - <off/off-0004.cfb &&
	fingerprint victim >victim.before &&
	test_expect_code 2 coffer -r victim import - <off/off-0003.cfb 2>err &&
	grep "older than bundle 4" err &&
	fingerprint victim >victim.after &&
	test_cmp victim.before victim.after &&
	coffer -r victim import - <off/off-0005.cfb &&
	coffer -r victim import - <off/off-0002.cfb 2>err &&
	coffer -r victim bundles --imported --json >imp.json &&
	json_check imp.json "@\$j == 4"
'

test_expect_success 'what was exported and imported outlives the catalog (the journal)' '
	bare b5 &&
	coffer -r victim bundles --imported --json >imp2.json &&
	json_check imp2.json "@\$j == 4 && \$j->[3]{sequence} == 5" &&
	bare b6 &&
	coffer -r repo bundles --json --target off >ex.json &&
	json_check ex.json "@\$j == 5" &&
	echo six >a/six && snap ds-a a &&
	coffer -r repo export --json --target off --to off ds-a@latest >e6.json &&
	json_check e6.json "\$j->{level} eq \"incremental\" &&
	    \$j->{sequence} == 6" &&
	coffer -r victim import - <off/off-0006.cfb &&
	rm -rf out && coffer -r victim restore ds-a@latest out &&
	treecmp a out
'

test_expect_success 'drill --from-bundles: a recovery from offsite alone, in this host'"'"'s history' '
	home &&
	coffer -r repo drill --json --from-bundles off ds-b@latest >d.json &&
	json_check d.json "\$j->{verdict} eq \"pass\" &&
	    \$j->{source} eq \"bundles:off\" && \$j->{failures} == 0" &&
	coffer -r repo drill history --json ds-b >h.json &&
	json_check h.json "@\$j == 1 && \$j->[0]{source} eq \"bundles:off\"" &&
	test -z "$(ls "$TMP" | grep coffer-offsite-drill)"
'

test_expect_success 'drill --from-bundles fails when a pack in the bundles is damaged' '
	home && rm -rf offbad && cp -r off offbad &&
	perl -MArchive::Tar -e "1" &&
	retar off/off-0001.cfb offbad/off-0001.cfb \
		"substr(\$m[2][1], 200, 1) ^= chr(1)" &&
	test_expect_code 4 coffer -r repo drill --from-bundles offbad \
		ds-a@latest 2>err &&
	grep "damaged" err &&
	test -z "$(ls "$TMP" | grep coffer-offsite-drill)"
'

test_done
