#!/usr/bin/perl
# levels-model.pl: the mutation engine of the model-based levels test
# (tests/e2e/t0100-levels-model.sh).  Core Perl only; every random choice
# comes from Perl's seeded rand (drand48, the same on every platform), and
# every listing is sorted, so a seed replays the same mutations.
#
#   levels-model.pl gen DIR SEED
#	Build the starting tree: about 200 files in nested directories (some
#	empty, a few of 1-3 MiB), symlinks, a hardlink pair, empty
#	directories, xattrs (when setfattr works here), mtimes with ns.
#   levels-model.pl mutate DIR SEED ROUND SCRATCH
#	Apply 3-10 random mutations to DIR; one line per mutation on stdout.
#	SCRATCH is a directory outside DIR for reference files.
#   levels-model.pl plan SEED ROUNDS [LEVELS]
#	One line "ROUND LEVEL" for rounds 1..ROUNDS; LEVELS is a comma list
#	of full, differential, incremental, auto (auto = no --level).  Every
#	allowed level appears in the first rounds, then at random.
use strict;
use warnings;
use File::Find ();
use File::Path ();
use Fcntl qw(:mode);

my $MiB = 1048576;

sub usage { die "usage: levels-model.pl gen|mutate|plan ...\n" }

sub seed_for {
	my ($seed, $round, $salt) = @_;
	return ($seed * 2654435761 + $round * 40503 + $salt * 7919 + 1)
	    % 4294967296;
}

sub pick { my ($l) = @_; return @$l ? $l->[int rand @$l] : undef }

# Incompressible bytes from the seeded generator.
sub rand_bytes {
	my ($n) = @_;
	return '' if $n <= 0;
	my $s = pack('L*', map { int rand 4294967296 } 1 .. int($n / 4) + 1);
	return substr($s, 0, $n);
}

# Text-like bytes: compressible, as most small files are.
sub rand_text {
	my ($n) = @_;
	my @w = qw(alpha beta gamma delta tensor weight step loss epoch shard
	    the of and 0.0001 -3.5e-2 42 layer norm grad);
	my $s = '';
	$s .= $w[int rand @w] . (rand() < 0.1 ? "\n" : ' ') while length($s) < $n;
	return substr($s, 0, $n);
}

sub content {
	my ($n) = @_;
	return rand() < 0.5 ? rand_bytes($n) : rand_text($n);
}

sub small_size {
	my $r = rand();
	return 0 if $r < 0.08;
	return 1 + int rand 2048 if $r < 0.6;
	return 2048 + int rand 30000 if $r < 0.95;
	return 32768 + int rand 200000;
}

sub write_file {
	my ($path, $data) = @_;
	open(my $fh, '>', $path) or die "$path: $!\n";
	binmode $fh;
	print $fh $data or die "$path: $!\n";
	close($fh) or die "$path: $!\n";
}

sub run {
	system(@_) == 0 or die "failed: @_\n";
}

# mtime as stat(1) prints it, with ns: to check it was put back.
sub mtime_str {
	my ($path) = @_;
	open(my $p, '-|', 'stat', '-c', '%y', '--', $path) or die "stat: $!\n";
	my $s = <$p>;
	close($p) or die "stat $path failed\n";
	chomp $s;
	return $s;
}

my $have_xattr;
sub have_xattr {
	my ($scratch) = @_;
	return $have_xattr if defined $have_xattr;
	my $probe = "$scratch/xattr-probe";
	write_file($probe, "x");
	$have_xattr = system("setfattr -n user.probe -v 1 '$probe' 2>/dev/null") == 0
	    ? 1 : 0;
	unlink $probe;
	warn "levels-model: user xattrs not supported here, left out\n"
	    unless $have_xattr;
	return $have_xattr;
}

sub set_xattr {
	my ($path, $name, $value) = @_;
	run('setfattr', '-h', '-n', "user.$name", '-v', $value, '--', $path);
}

# Random historical mtime with nanoseconds.
sub set_old_mtime {
	my ($path) = @_;
	my $t = sprintf('@%d.%09d', 946684800 + int rand 800000000,
	    int rand 1000000000);
	run('touch', '-h', '-d', $t, '--', $path);
}

######################################################################
# gen

sub gen {
	my ($dir, $seed) = @_;
	srand(seed_for($seed, 0, 1));
	mkdir $dir or die "$dir: $!\n" unless -d $dir;
	opendir(my $dh, $dir) or die "$dir: $!\n";
	die "$dir is not empty\n" if grep { !/^\.\.?\z/ } readdir $dh;
	my $scratch = $dir;	# for the xattr probe only

	# Nested directories: d0..d5, each with up to 3 subdirectories, some
	# with one more level.
	my @dirs;
	for my $i (0 .. 5) {
		my $d = "d$i";
		push @dirs, $d;
		for my $j (0 .. int rand 4) {
			my $s = "$d/s$j";
			push @dirs, $s;
			push @dirs, "$s/t0" if rand() < 0.4;
		}
	}
	File::Path::make_path(map { "$dir/$_" } @dirs);
	unshift @dirs, '';

	# About 200 small files.
	my @files;
	for my $n (0 .. 199) {
		my $d = pick(\@dirs);
		my $f = ($d eq '' ? '' : "$d/") . sprintf('f%03d.%s', $n,
		    pick([qw(txt bin json dat)]));
		write_file("$dir/$f", content(small_size()));
		push @files, $f;
	}
	# A few empty files for sure.
	for my $n (0 .. 3) {
		my $f = pick(\@dirs);
		$f = ($f eq '' ? '' : "$f/") . "empty$n";
		write_file("$dir/$f", '');
		push @files, $f;
	}
	# A few big ones, so that chunking matters.
	mkdir "$dir/big";
	for my $n (0 .. 2) {
		my $f = "big/ckpt$n.bin";
		write_file("$dir/$f", rand_bytes($MiB + int rand(2 * $MiB)));
		push @files, $f;
	}
	# Symlinks: to a file, to a directory, dangling, absolute.
	mkdir "$dir/links";
	symlink("../$files[0]", "$dir/links/to-file") or die "symlink: $!\n";
	symlink('../d1', "$dir/links/to-dir") or die "symlink: $!\n";
	symlink('../no/such/file', "$dir/links/dangling") or die "symlink: $!\n";
	symlink('/etc/hostname', "$dir/links/absolute") or die "symlink: $!\n";
	symlink('to-file', "$dir/links/to-link") or die "symlink: $!\n";
	# A hardlink pair across directories.
	mkdir "$dir/hard";
	write_file("$dir/hard/pair1", content(5000));
	link("$dir/hard/pair1", "$dir/d2/pair2") or die "link: $!\n";
	# Empty directories.
	File::Path::make_path("$dir/empty/a/b", "$dir/empty/c");
	# Modes.
	chmod 0600, "$dir/$files[1]";
	chmod 0755, "$dir/$files[2]";
	chmod 0700, "$dir/d3";
	# Xattrs.
	if (have_xattr($scratch)) {
		set_xattr("$dir/$files[$_]", "k$_", "value $_") for 3 .. 7;
		set_xattr("$dir/d4", 'dir', 'on a directory');
	}
	# Old mtimes with ns, files first, then directories deepest first.
	set_old_mtime("$dir/$files[$_]") for 10 .. 30;
	set_old_mtime("$dir/links/dangling");
	set_old_mtime("$dir/$_") for grep { $_ ne '' }
	    sort { ($b =~ tr{/}{}) <=> ($a =~ tr{/}{}) || $a cmp $b } @dirs;
	set_old_mtime("$dir/empty/a/b");
}

######################################################################
# mutate

my ($D, %T);	# the tree and its current listing

sub scan {
	%T = (files => [], dirs => [''], links => [], empty => [], multi => []);
	File::Find::find({
		no_chdir => 1,
		preprocess => sub { sort @_ },
		wanted => sub {
			return if $_ eq $D;
			(my $rel = $_) =~ s{^\Q$D\E/}{};
			my @st = lstat $_ or die "$_: $!\n";
			if (S_ISLNK($st[2])) {
				push @{$T{links}}, $rel;
			} elsif (S_ISDIR($st[2])) {
				push @{$T{dirs}}, $rel;
				opendir(my $dh, $_) or die "$_: $!\n";
				push @{$T{empty}}, $rel
				    unless grep { !/^\.\.?\z/ } readdir $dh;
			} elsif (S_ISREG($st[2])) {
				push @{$T{files}}, $rel;
				push @{$T{multi}}, $rel if $st[3] > 1;
			}
		},
	}, $D);
}

sub subtree_size {
	my ($rel) = @_;
	my $n = 0;
	File::Find::find({ no_chdir => 1, wanted => sub { $n++ } }, "$D/$rel");
	return $n;
}

sub in_dir { my ($d, $name) = @_; return $d eq '' ? $name : "$d/$name" }

my $serial;
sub new_name {
	my ($prefix) = @_;
	return sprintf('%s-r%s-%d', $prefix, $main::round, $serial++);
}

sub is_big { return -s "$D/$_[0]" > 256 * 1024 }

# Each mutation returns a description, or undef when it does not apply.
my %ops = (
	add => sub {
		my $f = in_dir(pick($T{dirs}), new_name('new'));
		write_file("$D/$f", content(small_size()));
		return "add $f";
	},
	rewrite_same_size_same_mtime => sub {
		my @c = grep { -s "$D/$_" > 0 } @{$T{files}};
		my $f = pick(\@c) // return;
		my $p = "$D/$f";
		my $size = -s $p;
		my $before = mtime_str($p);
		run('touch', '-r', $p, "$main::scratch/mtime-ref");
		open(my $fh, '+<', $p) or die "$p: $!\n";
		binmode $fh;
		my ($off, $len) = (0, $size);
		if ($size > 256 * 1024) {	# big: one region in place
			$len = 4096 + int rand 65536;
			$off = int rand($size - $len);
		}
		seek($fh, $off, 0) or die "seek: $!\n";
		read($fh, my $old, $len) == $len or die "$p: short read\n";
		my $new = rand_bytes($len);
		substr($new, 0, 1) = chr(ord($old) ^ 0x5a) if $new eq $old;
		seek($fh, $off, 0) or die "seek: $!\n";
		print $fh $new or die "$p: $!\n";
		close($fh) or die "$p: $!\n";
		run('touch', '-r', "$main::scratch/mtime-ref", $p);
		-s $p == $size or die "$p: size changed\n";
		my $after = mtime_str($p);
		$after eq $before or die "$p: mtime not put back: $before -> $after\n";
		return "rewrite $f ($len bytes at $off, same size $size, mtime put back to $before)";
	},
	append => sub {
		my $f = pick($T{files}) // return;
		my $n = is_big($f) ? 4096 + int rand 200000 : 1 + int rand 5000;
		open(my $fh, '>>', "$D/$f") or die "$f: $!\n";
		binmode $fh;
		print $fh content($n) or die "$f: $!\n";
		close($fh) or die "$f: $!\n";
		return "append $n bytes to $f";
	},
	truncate => sub {
		my @c = grep { -s "$D/$_" > 0 } @{$T{files}};
		my $f = pick(\@c) // return;
		my $to = int rand(-s "$D/$f");
		truncate("$D/$f", $to) or die "$f: $!\n";
		return "truncate $f to $to";
	},
	delete => sub {
		my $f = pick([@{$T{files}}, @{$T{links}}]) // return;
		unlink("$D/$f") or die "$f: $!\n";
		return "delete $f";
	},
	rename => sub {
		my ($what, $from);
		if (rand() < 0.2) {
			my @c = grep { $_ ne '' && subtree_size($_) <= 12 } @{$T{dirs}};
			$from = pick(\@c) // return;
			$what = 'directory';
		} else {
			$from = pick([@{$T{files}}, @{$T{links}}]) // return;
			$what = 'file';
		}
		my @to = grep { $_ ne $from && index("$_/", "$from/") != 0 } @{$T{dirs}};
		my $to = in_dir(pick(\@to), new_name('mv'));
		rename("$D/$from", "$D/$to") or die "mv $from $to: $!\n";
		return "mv $what $from $to";
	},
	chmod => sub {
		if (rand() < 0.25) {
			my @c = grep { $_ ne '' } @{$T{dirs}};
			my $d = pick(\@c) // return;
			my $old = (lstat "$D/$d")[2] & 07777;
			my @m = grep { $_ != $old } (0755, 0750, 0700, 0775, 02755);
			my $m = pick(\@m);
			chmod($m, "$D/$d") or die "$d: $!\n";
			return sprintf('chmod %04o %s', $m, $d);
		}
		my $f = pick($T{files}) // return;
		my $old = (lstat "$D/$f")[2] & 07777;
		my @m = grep { $_ != $old } (0644, 0600, 0640, 0755, 0700, 0744, 0664);
		my $m = pick(\@m);
		chmod($m, "$D/$f") or die "$f: $!\n";
		return sprintf('chmod %04o %s', $m, $f);
	},
	touch_mtime => sub {
		my $f = pick([@{$T{files}}, grep { $_ ne '' } @{$T{dirs}}]) // return;
		set_old_mtime("$D/$f");
		return "touch $f (mtime only)";
	},
	file_to_dir => sub {
		my @c = grep { !is_big($_) } @{$T{files}};
		my $f = pick(\@c) // return;
		unlink("$D/$f") or die "$f: $!\n";
		mkdir("$D/$f") or die "$f: $!\n";
		write_file("$D/$f/inside", content(small_size())) if rand() < 0.6;
		return "file -> directory $f";
	},
	dir_to_file => sub {
		my @c = grep { $_ ne '' && !m{^(big|links|hard)\z} &&
		    subtree_size($_) <= 6 } @{$T{dirs}};
		my $d = pick(\@c) // return;
		File::Path::remove_tree("$D/$d");
		write_file("$D/$d", content(small_size()));
		return "directory -> file $d";
	},
	file_to_symlink => sub {
		my @c = grep { !is_big($_) } @{$T{files}};
		my $f = pick(\@c) // return;
		unlink("$D/$f") or die "$f: $!\n";
		my $target = rand() < 0.5 ? pick($T{files}) : 'dangling/' . new_name('t');
		symlink($target, "$D/$f") or die "$f: $!\n";
		return "file -> symlink $f -> $target";
	},
	symlink_to_file => sub {
		my $l = pick($T{links}) // return;
		unlink("$D/$l") or die "$l: $!\n";
		write_file("$D/$l", content(small_size()));
		return "symlink -> file $l";
	},
	retarget_symlink => sub {
		my $l = pick($T{links}) // return;
		my $old = readlink("$D/$l");
		my $new = $old;
		substr($new, -1, 1) = substr($new, -1) eq 'x' ? 'y' : 'x';	# same length
		unlink("$D/$l") or die "$l: $!\n";
		symlink($new, "$D/$l") or die "$l: $!\n";
		return "retarget $l: $old -> $new";
	},
	hardlink_add => sub {
		my @c = grep { !is_big($_) } @{$T{files}};
		my $f = pick(\@c) // return;
		my $to = in_dir(pick($T{dirs}), new_name('hl'));
		link("$D/$f", "$D/$to") or die "ln $f $to: $!\n";
		return "ln $f $to";
	},
	hardlink_remove => sub {
		my $f = pick($T{multi}) // return;
		unlink("$D/$f") or die "$f: $!\n";
		return "unlink hardlink $f";
	},
	mkdir_empty => sub {
		my $d = in_dir(pick($T{dirs}), new_name('dir'));
		mkdir("$D/$d") or die "$d: $!\n";
		return "mkdir $d";
	},
	rmdir_empty => sub {
		my $d = pick($T{empty}) // return;
		rmdir("$D/$d") or die "$d: $!\n";
		return "rmdir $d";
	},
	xattr_set => sub {
		return unless have_xattr($main::scratch);
		my $f = pick([@{$T{files}}, grep { $_ ne '' } @{$T{dirs}}]) // return;
		my $k = 'k' . int rand 3;
		my $v = 'v' . int rand 1000000;
		set_xattr("$D/$f", $k, $v);
		return "setfattr user.$k=$v $f";
	},
	xattr_remove => sub {
		return unless have_xattr($main::scratch);
		my (@c, $f);
		open(my $p, '-|', 'getfattr', '--absolute-names', '-m', '^user\\.',
		    '--', map { "$D/$_" } @{$T{files}}, grep { $_ ne '' } @{$T{dirs}})
		    or die "getfattr: $!\n";
		while (<$p>) {
			if (m{^# file: \Q$D\E/(.*)$}) {
				$f = $1;
			} elsif (/^(user\.[^=\s]+)/) {
				push @c, [$f, $1];
			}
		}
		close $p;
		my $x = pick(\@c) // return;
		run('setfattr', '-x', $x->[1], '--', "$D/$x->[0]");
		return "setfattr -x $x->[1] $x->[0]";
	},
);

# Kinds and weights.  Round N <= the number of kinds starts with kind N,
# so that a run of that many rounds has every kind at least once.
my @kinds = (
	[add => 3], [rewrite_same_size_same_mtime => 4], [append => 2],
	[truncate => 2], [delete => 2], [rename => 2], [chmod => 2],
	[touch_mtime => 1], [file_to_dir => 1], [dir_to_file => 1],
	[file_to_symlink => 1], [symlink_to_file => 1], [retarget_symlink => 1],
	[hardlink_add => 1], [hardlink_remove => 1], [mkdir_empty => 1],
	[rmdir_empty => 1], [xattr_set => 2], [xattr_remove => 1],
);
my @weighted = map { my ($op, $w) = @$_; ($op) x $w } @kinds;

sub mutate {
	my ($dir, $seed, $round, $scratch) = @_;
	($D = $dir) =~ s{/+\z}{};
	$main::round = $round;
	$main::scratch = $scratch;
	$serial = 0;
	srand(seed_for($seed, $round, 2));
	my $n = 3 + int rand 8;
	for my $i (1 .. $n) {
		scan();
		my $done;
		if ($i == 1 && $round >= 1 && $round <= @kinds) {
			$done = $ops{$kinds[$round - 1][0]}->();
		}
		for my $try (1 .. 50) {
			last if defined $done;
			my $op = $weighted[int rand @weighted];
			$done = $ops{$op}->();
		}
		die "no mutation applies\n" unless defined $done;
		print "$done\n";
	}
}

######################################################################
# plan

sub plan {
	my ($seed, $rounds, $levels) = @_;
	srand(seed_for($seed, 0, 3));
	my @allowed = split /,/, ($levels // 'full,differential,incremental,auto');
	my %w = (full => 1, differential => 2, incremental => 3, auto => 2);
	for (@allowed) {
		die "unknown level '$_'\n" unless $w{$_};
	}
	my @first = @allowed;	# each allowed level once, shuffled
	for (my $i = @first - 1; $i > 0; $i--) {
		my $j = int rand($i + 1);
		@first[$i, $j] = @first[$j, $i];
	}
	my @bag = map { ($_) x $w{$_} } @allowed;
	for my $r (1 .. $rounds) {
		my $l = @first ? shift @first : $bag[int rand @bag];
		print "$r $l\n";
	}
}

my $cmd = shift // usage();
if ($cmd eq 'gen' && @ARGV == 2) {
	gen(@ARGV);
} elsif ($cmd eq 'mutate' && @ARGV == 4) {
	mutate(@ARGV);
} elsif ($cmd eq 'plan' && (@ARGV == 2 || @ARGV == 3)) {
	plan(@ARGV);
} else {
	usage();
}
