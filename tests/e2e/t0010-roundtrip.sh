#!/bin/bash
test_description='backup and restore of a hostile tree: every byte and every bit of metadata'
. "$(dirname "$0")/../lib.sh"

test_expect_success 'setup: the hostile tree with 10,000 small files, a repository' '
	mktree src &&
	coffer_init_keyfile repo
'

test_expect_success 'backup --json: one object, the required fields, no warnings' '
	coffer -r repo backup --json ds "$TMP/src" >backup.json 2>err &&
	test_must_be_empty err &&
	json_check backup.json "
		ref \$j eq q(HASH) or die qq(not an object\n);
		for (qw(snapshot dataset level files dirs bytes_read bytes_new
		    bytes_stored seconds warnings)) {
			exists \$j->{\$_} or die qq(no field \$_\n);
		}
		\$j->{snapshot} =~ /^[0-9a-f]{32}\z/ or die qq(bad id\n);
		\$j->{dataset} eq q(ds) && \$j->{level} eq q(full) &&
		\$j->{files} >= 10000 && \$j->{dirs} >= 20 &&
		\$j->{bytes_read} >= 20971520 &&
		\$j->{bytes_new} > 0 && \$j->{bytes_stored} > 0 &&
		\$j->{bytes_stored} < \$j->{bytes_read} &&
		\$j->{seconds} >= 0 && \$j->{warnings} == 0" &&
	id=$(json_get backup.json "\$j->{snapshot}") &&
	echo "$id"
'

test_expect_success 'snapshots --json: the snapshot with the required fields' '
	coffer -r repo snapshots --json >snaps.json &&
	json_check snaps.json "
		ref \$j eq q(ARRAY) && @\$j == 1 or die qq(not one snapshot\n);
		my \$s = \$j->[0];
		for (qw(id dataset level parent time state files bytes_read
		    bytes_new bytes_stored)) {
			exists \$s->{\$_} or die qq(no field \$_\n);
		}
		\$s->{id} eq q($id) && \$s->{dataset} eq q(ds) &&
		\$s->{level} eq q(full) && !defined \$s->{parent} &&
		\$s->{time} =~ /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:?00)\z/ &&
		\$s->{state} eq q(complete) && \$s->{files} >= 10000 &&
		\$s->{bytes_read} >= 20971520"
'

test_expect_success 'snapshots --json DATASET filters' '
	coffer -r repo snapshots --json ds >s1.json &&
	json_check s1.json "@\$j == 1" &&
	coffer -r repo snapshots --json other >s2.json &&
	json_check s2.json "ref \$j eq q(ARRAY) && @\$j == 0"
'

test_expect_success 'snapshots: a table with the short id, dataset, level, state' '
	coffer -r repo snapshots >table &&
	cat table &&
	short=$(echo "$id" | cut -c1-12) &&
	grep "^$short .*ds.*full.*complete" table &&
	! grep "$id" table
'

test_expect_success 'restore DATASET@latest: identical tree, silently' '
	coffer -r repo restore ds@latest out >stdout 2>err &&
	test_must_be_empty stdout &&
	test_must_be_empty err &&
	treecmp src out
'

test_expect_success 'restore by id prefix, a subset of paths' '
	prefix=$(echo "$id" | cut -c1-8) &&
	coffer -r repo restore "$prefix" sub hard "names/with space.txt" \
		"names/données" links/absolute &&
	(cd sub && find . -mindepth 1 | LC_ALL=C sort) >actual &&
	cat >expect <<-\EOF &&
	./hard
	./hard/pair1
	./hard/pair2
	./hard/sub
	./hard/sub/triple3
	./hard/triple1
	./hard/triple2
	./links
	./links/absolute
	./names
	./names/données
	./names/données/résumé.txt
	./names/with space.txt
	EOF
	test_cmp expect actual &&
	treecmp src/hard sub/hard &&
	treecmp "src/names/données" "sub/names/données" &&
	cmp "src/names/with space.txt" "sub/names/with space.txt" &&
	test "$(readlink sub/links/absolute)" = /etc/hostname
'

test_expect_success 'restore by the full id and by DATASET@full' '
	coffer -r repo restore "$id" one empty &&
	treecmp src/empty one/empty &&
	coffer -r repo restore ds@full two big &&
	treecmp src/big two/big
'

test_expect_success 'restore of a leading-dash path after --' '
	coffer -r repo restore ds@latest dash -- names/-rf names/--help &&
	cmp src/names/-rf dash/names/-rf &&
	cmp src/names/--help dash/names/--help
'

test_expect_success 'restore into an existing empty directory' '
	mkdir empty-target &&
	coffer -r repo restore ds@latest empty-target hard &&
	treecmp src/hard empty-target/hard
'

test_expect_success 'restore into a non-empty target fails and touches nothing' '
	mkdir busy && echo mine >busy/keep &&
	test_must_fail coffer -r repo restore ds@latest busy hard 2>err &&
	cat err && test -s err &&
	test "$(ls -A busy)" = keep &&
	test "$(cat busy/keep)" = mine
'

test_expect_success 'restore --force into a non-empty target' '
	coffer -r repo restore --force ds@latest busy hard &&
	treecmp src/hard busy/hard &&
	test "$(cat busy/keep)" = mine
'

# libarchive sets an existing directory's times when it reaches it, and
# the files replaced in it afterwards moved them.  (Not xattr/: files
# replaced there inherit the default ACL that the first restore gave it
# after its files, as tar's do.)
test_expect_success 'restore --force over the same tree: directory times as backed up' '
	top=$(cd src && ls -A | grep -vx xattr) &&
	coffer -r repo restore ds@latest again $top &&
	coffer -r repo restore --force ds@latest again $top &&
	for d in $top; do
		treecmp "src/$d" "again/$d" || return 1
	done
'

test_expect_success 'restore --force does not write through a symlink in the target' '
	mkdir victim trap &&
	ln -s "$TMP/victim" trap/hard &&
	{ coffer -r repo restore --force ds@latest trap hard 2>err || cat err; } &&
	test_dir_is_empty victim
'

test_expect_success 'ls --json: every path of the tree, relative, once' '
	coffer -r repo ls --json "$id" >ls.json &&
	(cd src && find . -mindepth 1 -print0) >src.paths &&
	perl -MJSON::PP -e "
		local \$/;
		open(my \$f, q(<), q(ls.json)) or die;
		my \$j = JSON::PP->new->decode(<\$f>);
		open(\$f, q(<), q(src.paths)) or die;
		my %want = map { s{^\./}{}r => 1 } split /\0/, <\$f>;
		my %got;
		for my \$e (@\$j) {
			my \$p = \$e->{path};
			\$p =~ s{^\./}{}; \$p =~ s{/\z}{};
			next if \$p eq q() || \$p eq q(.);
			die qq(twice: \$p\n) if \$got{\$p}++;
			die qq(not in the tree: \$p\n) unless \$want{\$p};
		}
		for (sort keys %want) { die qq(missing: \$_\n) unless \$got{\$_} }
		print scalar(keys %got), qq( entries\n);
	"
'

test_expect_success 'ls --json: types, modes, sizes, times, targets' '
	cat >check.pl <<-\EOF &&
	use JSON::PP;
	local $/;
	open(my $f, "<", "ls.json") or die;
	my %e;
	for (@{JSON::PP->new->decode(<$f>)}) {
		(my $p = $_->{path}) =~ s{^\./}{};
		$p =~ s{/\z}{};
		$e{$p} = $_;
	}
	sub want {
		my ($path, $field, $value) = @_;
		my $e = $e{$path} or die "no entry $path\n";
		exists $e->{$field} or die "$path: no field $field\n";
		my $got = $e->{$field};
		$got = "(null)" unless defined $got;
		my $ok = ref $value eq "Regexp" ? $got =~ $value : $got eq $value;
		die "$path: $field is \"$got\", want \"$value\"\n" unless $ok;
	}
	for my $p (keys %e) {
		for (qw(path type mode uid gid size mtime target)) {
			exists $e{$p}{$_} or die "$p: no field $_\n";
		}
		$e{$p}{mode} =~ /^[0-7]{4}\z/ or die "$p: mode $e{$p}{mode}\n";
	}
	want("big/mixed.bin", "type", "file");
	want("big/mixed.bin", "size", 20971520);
	want("big/mixed.bin", "mode", "0644");
	want("big/mixed.bin", "mtime", qr/^2020-01-02T03:04:05/);
	want("sparse/holes", "size", 104857600);
	want("empty/zero", "size", 0);
	want("empty/a/b/c/d", "type", "dir");
	want("modes/m4755", "mode", "4755");
	want("modes/m2755", "mode", "2755");
	want("modes/m0000", "mode", "0000");
	want("modes/m0600", "mode", "0600");
	want("modes/sticky", "mode", "1777");
	want("modes/sticky", "type", "dir");
	want("links/absolute", "type", "symlink");
	want("links/absolute", "target", "/etc/hostname");
	want("links/dangling", "target", "../does/not/exist");
	want("links/newline-target", "target", "weird\nname");
	want("names/new\nline", "type", "file");
	want("names/données/résumé.txt", "type", "file");
	want("日本語/ファイル.txt", "size", 8);
	want("special/fifo", "type", "fifo");
	want("special/null", "type", "chr") if -c "src/special/null";
	want("special/loop", "type", "blk") if -b "src/special/loop";
	want("hard/pair1", "target", "(null)");
	if ($< == 0) {
		want("modes/owned", "uid", 1234);
		want("modes/owned", "gid", 5678);
	}
	print "ok\n";
	EOF
	perl check.pl
'

# The type is one letter as in ls -l; the mode may be symbolic
# (-rwsr-xr-x) or octal (-4755).
test_expect_success 'ls: a long listing with types, modes and link targets' '
	coffer -r repo ls "$id" >ls.txt &&
	grep -E "^(-rwsr-xr-x|-4755) .*modes/m4755$" ls.txt &&
	grep -E "^(drwxrwxrwt|d1777) .*modes/sticky$" ls.txt &&
	grep -E "^(----------|-0000) .*modes/m0000$" ls.txt &&
	grep -E "^p.* special/fifo$" ls.txt &&
	grep -E "^l.* links/absolute -> /etc/hostname$" ls.txt &&
	grep -E "^-.* 20971520 .*big/mixed.bin$" ls.txt &&
	grep -E "^-.* 2020-01-02.03:04:05.*big/mixed.bin$" ls.txt
'

# ls -l and git quote such names; coffer's text listing prints them raw
# for now, so a script reading it line by line is misled.
test_expect_success 'ls: one line per entry, a newline in a name is escaped' '
	# The entries below the root, and the root itself (".").
	test "$(wc -l <ls.txt)" = "$(cd src && find . | grep -c "^\.\(/\|\$\)")" &&
	! grep -x line ls.txt &&
	! grep -x name ls.txt
'

test_expect_success 'ls SNAPSHOT DIR/ lists only what is under DIR' '
	coffer -r repo ls --json ds@latest hard/ >hard.json &&
	json_check hard.json "
		my @p = map { \$_->{path} =~ s{^\./}{}r } @\$j;
		die qq(outside: \$_\n) for grep { !m{^hard(/|\z)} } @p;
		my %p = map { \$_ => 1 } @p;
		\$p{q(hard/pair1)} && \$p{q(hard/sub/triple3)} && \$p{q(hard/triple2)}" &&
	coffer -r repo ls ds@latest hard/ >hard.txt &&
	grep "hard/pair2$" hard.txt &&
	! grep -v "hard" hard.txt
'

test_expect_success 'ls of a file path lists that file' '
	coffer -r repo ls --json "$id" big/mixed.bin >one.json &&
	json_check one.json "@\$j == 1 && \$j->[0]{size} == 20971520"
'

test_expect_success 'unknown snapshots and bad names fail cleanly' '
	test_must_fail coffer -r repo ls nosuch@latest 2>err && test -s err &&
	test_must_fail coffer -r repo ls 0000000000 2>err && test -s err &&
	short=$(echo "$id" | cut -c1-3) &&
	test_must_fail coffer -r repo ls "$short" 2>err && test -s err &&
	test_must_fail coffer -r repo restore nosuch@latest nowhere &&
	test_path_is_missing nowhere
'

test_expect_success 'backup --exclude: a name at any depth, a path from the root' '
	coffer -r repo backup --exclude "*.txt" --exclude "modes/sticky" \
		--exclude /deep ex "$TMP/src" &&
	coffer -r repo ls --json ex@latest >ex.json &&
	json_check ex.json "
		my %p = map { (\$_->{path} =~ s{^\./}{}r) => 1 } @\$j;
		die qq(txt: \$_\n) for grep { /\.txt\z/ } keys %p;
		die qq(below: \$_\n) for grep { m{^(modes/sticky|deep)(/|\z)} } keys %p;
		\$p{q(modes)} && \$p{q(modes/m4755)} && \$p{q(big/mixed.bin)} &&
		\$p{q(many/d00)}" &&
	coffer -r repo restore ex@latest ex-out &&
	test_path_is_missing ex-out/deep &&
	test_path_is_missing ex-out/names/with\ space.txt &&
	cmp src/big/mixed.bin ex-out/big/mixed.bin
'

test_expect_success 'walked without reading ahead (COFFER_WALK_AHEAD=0): the same snapshot' '
	COFFER_WALK_AHEAD=0 coffer -r repo backup --level full sync "$TMP/src" &&
	coffer -r repo backup --level full ahead "$TMP/src" &&
	coffer -r repo ls --json sync@latest >sync.json &&
	coffer -r repo ls --json ahead@latest >ahead.json &&
	test_cmp sync.json ahead.json &&
	test $(grep -c "\"path\"" sync.json) -ge 10000 &&
	coffer -r repo restore sync@latest sync-out &&
	treecmp src sync-out
'

test_expect_success 'nothing was left in tmp/, nothing written to HOME' '
	test_dir_is_empty repo/tmp &&
	test -z "$(find "$HOME" -mindepth 1 ! -type d)"
'

test_done
