#!/bin/bash
test_description='coffer cron: the policy path quoted for cron'"'"'s sh and for systemd, control characters refused'
. "$(dirname "$0")/../lib.sh"
require_coffer

# coffer cron prints the policy's real path into a crontab line (run by
# cron's sh, with '%' special to cron itself) and into systemd units
# (split by systemd's own rules, with '%' specifiers and '$' variables).
# A directory name is enough to inject commands or directives there: the
# admin is handed a symlink, coffer prints the real path.

test_expect_success 'setup' '
	coffer_init_keyfile repo &&
	mkdir data && echo one >data/a &&
	cat >base.policy <<-EOF
	[repository]
	path = $TMP/repo
	key-file = $TMP/key
	[dataset ds]
	path = $TMP/data
	full = weekly sunday 02:15
	EOF
'

# The arguments cron's sh would give the command of the crontab line in
# file $1, one per line of $2 (NUL-separated), without running it: cron
# first turns '\%' into '%' and ends the command at a bare '%' (what
# follows is its standard input), as Vixie cron and cronie do.
cron_argv() {
	perl -e '
		local $/; my $l = <STDIN>; chomp $l;
		my @f = split(/ /, $l, 6);
		my ($out, $esc) = ("", 0);
		for my $c (split //, $f[5]) {
			if ($esc) { $out =~ s/\\\z// if $c eq "%"; $esc = 0; }
			elsif ($c eq "\\") { $esc = 1; }
			elsif ($c eq "%") { last; }
			$out .= $c;
		}
		print $out;
	' <"$1" >cmd &&
	sh -c "args() { for a; do printf \"%s\\0\" \"\$a\"; done; }; args $(cat cmd)" >"$2"
}

# The arguments of the ExecStart= line of unit file $1, by systemd's
# rules (systemd.syntax(7), systemd.service(5)): '%%' is '%' and no other
# specifier is allowed here; words split at blanks outside quotes; C
# escapes; '$$' is '$' and no variable is allowed.  NUL-separated in $2.
systemd_argv() {
	perl -e '
		my $v;
		while (<STDIN>) { chomp; $v = $1 if /^ExecStart=(.*)\z/s; }
		defined $v or die "no ExecStart\n";
		$v =~ s/%(.)/$1 eq "%" ? "%" : die "specifier %$1\n"/ge;
		$v =~ /%\z/ and die "lone %\n";
		my %e = (n => "\n", t => "\t", "\\" => "\\", "\"" => "\"",
		    "\x27" => "\x27", " " => " ", r => "\r", a => "\a");
		my @w; my $i = 0; my $n = length $v;
		while ($i < $n) {
			if (substr($v, $i, 1) =~ /\s/) { $i++; next; }
			my ($w, $q) = ("", "");
			while ($i < $n) {
				my $c = substr($v, $i++, 1);
				if ($q eq "" && $c =~ /\s/) { last; }
				if ($q eq "" && ($c eq "\"" || $c eq "\x27")) { $q = $c; next; }
				if ($q ne "" && $c eq $q) { $q = ""; next; }
				if ($c eq "\\") {
					my $d = substr($v, $i++, 1);
					if ($d eq "x") { $w .= chr(hex(substr($v, $i, 2))); $i += 2; }
					elsif (exists $e{$d}) { $w .= $e{$d}; }
					else { die "bad escape \\$d\n"; }
					next;
				}
				$w .= $c;
			}
			die "unbalanced quotes\n" if $q ne "";
			$w =~ s/\$(\$|[{A-Za-z_])/$1 eq "\$" ? "\$" : die "variable in word\n"/ge;
			push @w, $w;
		}
		print join("\0", @w), "\0";
	' <"$1" >"$2"
}

# expect FILE ARG...: FILE holds exactly these arguments.
expect() {
	f=$1 && shift &&
	printf "%s\\0" "$@" >expect.argv &&
	cmp "$f" expect.argv ||
	{ od -c "$f"; od -c expect.argv; false; }
}

if systemd-analyze --version >/dev/null 2>&1; then
	test_set_prereq SYSTEMD_ANALYZE
fi

n=0
for name in 'with space' '$(touch pwned)' '`touch pwned2`' 'pct%dir%' \
	"quote'dir" 'dq"dir' 'back\slash\' 'semi;colon &' 'dollar$HOME${x}' \
	'star*?[a]' '-dash' 'tab	dir'
do
	n=$((n + 1))
	case $name in *"	"*) ctl=1 ;; *) ctl= ;; esac
	test -n "$ctl" && continue
	test_expect_success "crontab line: a directory named '$name'" '
		d="$TMP/d$n/$name" && mkdir -p "$d" &&
		cp base.policy "$d/p.policy" &&
		ln -sf "$d/p.policy" link$n.policy &&
		coffer cron --policy link$n.policy --unit crontab >line &&
		cat line &&
		test_line_count = 1 line &&
		cron_argv line got.argv &&
		expect got.argv "$COFFER" -q run --policy "$d/p.policy" &&
		test_path_is_missing pwned && test_path_is_missing pwned2
	'
	test_expect_success "systemd units: a directory named '$name'" '
		d="$TMP/d$n/$name" &&
		coffer cron --policy link$n.policy --unit service >unit$n.service &&
		cat unit$n.service &&
		systemd_argv unit$n.service got.argv &&
		expect got.argv "$COFFER" run --policy "$d/p.policy" &&
		test "$(grep -c "^[A-Za-z]*=" unit$n.service)" = 8
	'
	test_expect_success SYSTEMD_ANALYZE "systemd-analyze verify: a directory named '$name'" '
		rm -rf units && mkdir units &&
		coffer cron --policy link$n.policy --unit service >units/c.service &&
		coffer cron --policy link$n.policy --unit timer >units/c.timer &&
		systemd-analyze verify --man=no units/c.service units/c.timer 2>err;
		cat err && test_must_be_empty err
	'
done

test_expect_success 'the whole output: no line begins where the path put it' '
	coffer cron --policy link2.policy >all &&
	cat all &&
	test "$(grep -c "^[^#]" all)" -lt 20 &&
	! grep "^# .*(touch" all | grep -v "^# \\(or\\|and\\|crontab\\)"
'

for name in 'new
line' 'tab	dir' 'esc[31m' 'del'
do
	n=$((n + 1))
	test_expect_success "a path with a control character is refused: $(printf %q "$name")" '
		d="$TMP/c$n/$name" && mkdir -p "$d" &&
		cp base.policy "$d/p.policy" &&
		ln -sf "$d/p.policy" link$n.policy &&
		test_expect_code 2 coffer cron --policy link$n.policy >out 2>err &&
		cat err &&
		test_must_be_empty out &&
		test_line_count = 1 err &&
		grep "^error: .*control character" err
	'
done

test_expect_success 'a policy named with shell and unit-name characters: a plain unit name' '
	mkdir -p "$TMP/plain" &&
	cp base.policy "$TMP/plain/\$(reboot) x.policy" &&
	coffer cron --policy "$TMP/plain/\$(reboot) x.policy" >all &&
	cat all &&
	grep -x "# and /etc/systemd/system/coffer-__reboot__x.timer, then: systemctl enable --now coffer-__reboot__x.timer" all
'

test_done
