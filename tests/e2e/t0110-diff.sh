#!/bin/bash
test_description='diff between snapshots: a hand-made case, exact text and JSON, both directions'
. "$(dirname "$0")/../lib.sh"

probe=$TMP/xattr-probe
: >"$probe"
if setfattr -n user.probe -v 1 "$probe" 2>/dev/null; then
	test_set_prereq XATTR
fi
rm -f "$probe"

# diff --json as text, one line per entry: "CHANGE TYPE PATH", the path
# quoted as coffer quotes it in text output.  A type change may report
# either type; such entries print "*" for the type.
cat >json2txt.pl <<\EOF
use JSON::PP;
my %sym = (added => '+', deleted => '-', modified => 'M', metadata => 'U');
sub quote_path {
	my ($s) = @_;
	return $s unless $s =~ /[\x00-\x1f\x7f"\\]/;
	$s =~ s/([\\"])/\\$1/g;
	$s =~ s/\n/\\n/g;
	$s =~ s/\t/\\t/g;
	$s =~ s/([\x00-\x1f\x7f])/sprintf('\\%03o', ord $1)/ge;
	return qq("$s");
}
my %retyped = map { $_ => 1 } @ARGV;
local $/;
my $j = JSON::PP->new->decode(<STDIN>);
ref $j eq 'ARRAY' or die "not a list\n";
for my $e (@$j) {
	for (qw(path change type)) {
		exists $e->{$_} or die "no field $_\n";
	}
	my $s = $sym{$e->{change}} or die "bad change '$e->{change}'\n";
	my $t = $retyped{$e->{path}} ? '*' : $e->{type};
	print "$s $t ", quote_path($e->{path}), "\n";
}
EOF

test_expect_success 'setup: a tree, a full' '
	mkdir -p src/k-dir src/sub src/zz-same &&
	echo keep >src/a-keep.txt &&
	echo delete me >src/b-del.txt &&
	echo modify me >src/c-mod.txt &&
	echo chmod me >src/d-chmod.txt &&
	echo touch me >src/e-touch.txt &&
	echo becomes a symlink >src/f-tolink &&
	echo rewritten in place >src/j-rewrite.bin &&
	echo in a deleted dir >src/k-dir/file &&
	echo xattr >src/l-xattr.txt &&
	ln -s a-keep.txt src/m-retarget &&
	echo becomes a dir >src/n-todir &&
	echo gone >src/sub/gone &&
	echo keep >src/sub/keep &&
	echo same >src/zz-same/f &&
	touch -d "2020-02-02 02:02:02.020202020" src/e-touch.txt \
		src/j-rewrite.bin &&
	coffer_init_keyfile repo &&
	coffer -r repo backup --level full --json ds src >full.json &&
	full=$(json_get full.json "\$j->{snapshot}")
'

# The root directory is not an entry; its mtime is put back anyway, so
# that no implementation has a reason to list it.
test_expect_success 'setup: every kind of change, then an incremental' '
	touch -r src root-mtime &&
	touch -r src/j-rewrite.bin rewrite-mtime &&
	rm src/b-del.txt &&
	echo more >>src/c-mod.txt &&
	chmod 600 src/d-chmod.txt &&
	touch -d "2001-01-01 00:00:00.5" src/e-touch.txt &&
	rm src/f-tolink && ln -s a-keep.txt src/f-tolink &&
	echo new >src/g-new.txt &&
	mkdir src/h-emptydir &&
	echo newline >"src/i-new
line" &&
	echo REWRITTEN IN PLACE >src/j-rewrite.bin &&
	touch -r rewrite-mtime src/j-rewrite.bin &&
	test "$(stat -c "%s %y" src/j-rewrite.bin)" = \
		"19 2020-02-02 02:02:02.020202020 +0000" &&
	rm -r src/k-dir &&
	if test_have_prereq XATTR; then
		setfattr -n user.note -v changed src/l-xattr.txt
	fi &&
	rm src/m-retarget && ln -s c-mod.txt src/m-retarget &&
	rm src/n-todir && mkdir src/n-todir && echo inside >src/n-todir/inside &&
	rm src/sub/gone &&
	touch -r root-mtime src &&
	coffer -r repo backup --level incremental --json ds src >incr.json &&
	incr=$(json_get incr.json "\$j->{snapshot}") &&
	json_check incr.json "\$j->{level} eq q(incremental)"
'

test_expect_success 'diff ds@full ds@latest: exactly the changes, in path order' '
	cat >expect <<-\EOF &&
	- b-del.txt
	M c-mod.txt
	U d-chmod.txt
	U e-touch.txt
	M f-tolink
	+ g-new.txt
	+ h-emptydir
	+ "i-new\nline"
	M j-rewrite.bin
	- k-dir
	- k-dir/file
	U l-xattr.txt
	M m-retarget
	M n-todir
	+ n-todir/inside
	U sub
	- sub/gone
	EOF
	if ! test_have_prereq XATTR; then
		grep -v "^U l-xattr.txt" expect >expect.tmp && mv expect.tmp expect
	fi &&
	coffer -r repo diff ds@full ds@latest >actual 2>err &&
	test_must_be_empty err &&
	test_cmp expect actual
'

test_expect_success 'diff --json: a list in path order that agrees with the text' '
	coffer -r repo diff --json ds@full ds@latest >diff.json &&
	perl json2txt.pl f-tolink n-todir <diff.json >json.txt &&
	cat >expect.json.txt <<-\EOF &&
	- file b-del.txt
	M file c-mod.txt
	U file d-chmod.txt
	U file e-touch.txt
	M * f-tolink
	+ file g-new.txt
	+ dir h-emptydir
	+ file "i-new\nline"
	M file j-rewrite.bin
	- dir k-dir
	- file k-dir/file
	U file l-xattr.txt
	M symlink m-retarget
	M * n-todir
	+ file n-todir/inside
	U dir sub
	- file sub/gone
	EOF
	if ! test_have_prereq XATTR; then
		grep -v "l-xattr.txt" expect.json.txt >tmp && mv tmp expect.json.txt
	fi &&
	test_cmp expect.json.txt json.txt &&
	sed "s/^\([-+MU]\) [^ ]* /\1 /" json.txt >json.short &&
	test_cmp actual json.short
'

test_expect_success 'a type change reports the old or the new type' '
	json_check diff.json "
		my %t = map { \$_->{path} => \$_->{type} } @\$j;
		\$t{q(f-tolink)} =~ /^(file|symlink)\z/ &&
		\$t{q(n-todir)} =~ /^(file|dir)\z/"
'

test_expect_success 'diff the other way: + and - swap, M and U stay' '
	sed -e "s/^+ /X /" -e "s/^- /+ /" -e "s/^X /- /" expect >expect.rev &&
	coffer -r repo diff ds@latest ds@full >actual.rev &&
	test_cmp expect.rev actual.rev &&
	coffer -r repo diff --json ds@latest ds@full >rev.json &&
	perl json2txt.pl f-tolink n-todir <rev.json >rev.txt &&
	sed "s/^\([-+MU]\) [^ ]* /\1 /" rev.txt >json.rev &&
	test_cmp expect.rev json.rev
'

test_expect_success 'diff by full id and by id prefix gives the same' '
	coffer -r repo diff "$full" "$incr" >by-id &&
	test_cmp expect by-id &&
	coffer -r repo diff "$(echo "$full" | cut -c1-8)" \
		"$(echo "$incr" | cut -c1-6)" >by-prefix &&
	test_cmp expect by-prefix
'

test_expect_success 'nothing changed: an incremental, diff prints nothing' '
	coffer -r repo backup --level incremental --json ds src >incr2.json &&
	incr2=$(json_get incr2.json "\$j->{snapshot}") &&
	coffer -r repo diff "$incr" "$incr2" >same 2>err &&
	test_must_be_empty same &&
	test_must_be_empty err &&
	coffer -r repo diff --json "$incr" "$incr2" >same.json &&
	json_check same.json "ref \$j eq q(ARRAY) && @\$j == 0" &&
	coffer -r repo diff "$incr2" "$incr2" >self &&
	test_must_be_empty self
'

test_expect_success 'across two links of the chain: the same changes' '
	coffer -r repo diff ds@full "$incr2" >two-links &&
	test_cmp expect two-links
'

test_expect_success 'a differential sees the same changes against the full' '
	coffer -r repo backup --level differential --json ds src >diff-level.json &&
	json_check diff-level.json "\$j->{level} eq q(differential) &&
		\$j->{parent} eq q($full)" &&
	coffer -r repo diff ds@full ds@latest >vs-differential &&
	test_cmp expect vs-differential
'

test_expect_success 'diff reads the catalog only: the source may be gone' '
	mv src src.away &&
	coffer -r repo diff ds@full "$incr" >no-source &&
	mv src.away src &&
	test_cmp expect no-source
'

test_expect_success 'diff of an unknown snapshot or with one argument fails cleanly' '
	test_must_fail coffer -r repo diff ds@full nosuch@latest >out 2>err &&
	test_must_be_empty out &&
	grep nosuch err &&
	test_expect_code 2 coffer -r repo diff ds@full 2>err &&
	test -s err &&
	! grep "not a coffer command" err
'

test_done
