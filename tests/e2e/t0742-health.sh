#!/bin/bash
test_description='coffer health: the monitoring-plugins status line, perfdata, exit statuses 0 to 3, --json with Zabbix discovery'
. "$(dirname "$0")/../lib.sh"
require_coffer

test_expect_success 'setup: one dataset, one backup' '
	coffer_init_keyfile repo &&
	mkdir -p data &&
	echo one >data/a &&
	coffer -r repo backup ds data
'

test_expect_success 'a fresh backup with a generous --rpo: OK, exit 0, perfdata' '
	coffer -r repo health --rpo 1d >out &&
	cat out &&
	test "$(wc -l <out)" = 1 &&
	grep -E "^COFFER OK - 1 dataset checked, no problem \| '\''ds_age'\''=[0-9]+s;86400;172800;0;$" out
'

test_expect_success 'without an RPO the age is reported, not judged' '
	coffer -r repo health ds >out &&
	grep -E "^COFFER OK - 1 dataset checked, no problem \| '\''ds_age'\''=[0-9]+s;;;0;$" out
'

test_expect_success '--json: the same facts, and a data array for Zabbix LLD' '
	coffer -r repo health --rpo 1d --json >h.json &&
	json_check h.json "
		\$j->{status} eq \"OK\" && \$j->{exit} == 0 &&
		@{\$j->{data}} == 1 && \$j->{data}[0]{\"{#DATASET}\"} eq \"ds\" &&
		\$j->{datasets}[0]{dataset} eq \"ds\" &&
		\$j->{datasets}[0]{rpo} == 86400 &&
		\$j->{datasets}[0]{age} >= 0 &&
		!defined \$j->{datasets}[0]{drill}"
'

test_expect_success 'a snapshot older than twice the RPO: CRITICAL, exit 2' '
	sleep 3 &&
	test_expect_code 2 coffer -r repo health --rpo 1s >out &&
	cat out &&
	grep -E "^COFFER CRITICAL - ds: snapshot .* old, rpo 1\.0 s \|" out
'

test_expect_success 'a drill that missed its objective: WARNING, exit 1' '
	test_expect_code 6 coffer -r repo drill --rpo 1s ds@latest >/dev/null &&
	test_expect_code 1 coffer -r repo health >out &&
	cat out &&
	grep -E "^COFFER WARNING - ds: last drill missed its objective \|" out
'

test_expect_success 'a failed drill: CRITICAL, exit 2' '
	for p in $(find repo/packs -type f); do rm -f "$p"; done &&
	! coffer -r repo drill ds@latest >/dev/null 2>&1 &&
	test_expect_code 2 coffer -r repo health --rpo 1d >out &&
	cat out &&
	grep -E "^COFFER CRITICAL - ds: last drill failed \|" out &&
	test_expect_code 2 coffer -r repo health --rpo 1d --json >c.json &&
	json_check c.json "
		\$j->{status} eq \"CRITICAL\" && \$j->{exit} == 2 &&
		\$j->{datasets}[0]{drill} eq \"fail\""
'

test_expect_success 'damage found by the last verify: CRITICAL, exit 2' '
	! coffer -r repo verify >/dev/null 2>&1 &&
	test_expect_code 2 coffer -r repo health --rpo 1d >out &&
	cat out &&
	grep -E "^COFFER CRITICAL - .*the last verify found damage \|" out
'

test_expect_success 'not a repository: UNKNOWN, exit 3' '
	mkdir -p notrepo &&
	test_expect_code 3 coffer -r notrepo health >out 2>err &&
	cat out err &&
	grep -E "^COFFER UNKNOWN - " out &&
	test "$(wc -l <out)" = 1 &&
	test_expect_code 3 coffer -r notrepo health --json >u.json 2>err &&
	json_check u.json "\$j->{status} eq \"UNKNOWN\" && \$j->{exit} == 3"
'

# A run at a --now long past records its export then; the export's next
# slot (a day later) is far more than six hours behind the real clock.
test_expect_success 'an export overdue by its schedule: WARNING, exit 1' '
	mkdir -p data2 off2 &&
	echo two >data2/a &&
	coffer init --key-file "$TMP/key2" repo2 &&
	cat >e.policy <<-EOF &&
	[repository]
	path = $TMP/repo2
	key-file = $TMP/key2
	[dataset ds2]
	path = $TMP/data2
	full = daily 02:00
	[export off2]
	to = $TMP/off2
	full = daily 03:00
	EOF
	coffer run --policy e.policy --now 2026-01-01T04:00:00Z >out &&
	test_must_be_empty out &&
	test_expect_code 1 coffer -r repo2 --key-file "$TMP/key2" health \
		--policy e.policy >out &&
	cat out &&
	grep -E "^COFFER WARNING - export to off2 overdue since 2026-01-02T03:00:00Z \|.* '\''off2_export_age'\''=[0-9]+s;;;0;" out
'

test_expect_success 'an export within its schedule: not judged' '
	coffer -r repo2 --key-file "$TMP/key2" export --target off2 \
		--to off2 ds2@latest >/dev/null &&
	coffer -r repo2 --key-file "$TMP/key2" health --policy e.policy >out &&
	grep -E "^COFFER OK - " out
'

test_done
