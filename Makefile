# coffer — plain Makefile.  See README.md.
PREFIX    ?= /usr/local
BINDIR    ?= $(PREFIX)/bin
MANDIR    ?= $(PREFIX)/share/man
DATADIR   ?= $(PREFIX)/share
DESTDIR   ?=
CC        ?= cc
PKG_CONFIG ?= pkg-config
LIBS_PC   := libarchive libsodium libcrypto sqlite3 libzstd jansson inih \
             libcurl libxml-2.0 fuse3

WARN      := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wvla -Wwrite-strings \
             -Wformat=2 -Wno-unused-parameter
ifeq ($(CI),true)
WARN      += -Werror
endif
OPT       ?= -O2 -g
CFLAGS    ?= $(OPT)
SANITIZE  ?=
ifneq ($(SANITIZE),)
CFLAGS    += -fsanitize=$(SANITIZE) -fno-sanitize-recover=all \
             -fno-omit-frame-pointer -O1
LDFLAGS   += -fsanitize=$(SANITIZE)
endif
ALL_CFLAGS = -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -pthread -Iinclude \
             $(shell $(PKG_CONFIG) --cflags $(LIBS_PC) 2>/dev/null) $(WARN) $(CFLAGS)
ALL_LIBS   = $(shell $(PKG_CONFIG) --libs $(LIBS_PC) 2>/dev/null) -pthread

BUILD     ?= build
BIN       ?= coffer
LIB_SRC   := $(sort $(wildcard src/util/*.c src/crypto/*.c src/chunk/*.c \
               src/catalog/*.c src/fs/*.c src/store/*.c src/repo/*.c \
               src/policy/*.c src/engine/*.c))
CMD_SRC   := src/main.c $(sort $(wildcard src/cmd/*.c))
LIB_OBJ   := $(LIB_SRC:%.c=$(BUILD)/%.o)
CMD_OBJ   := $(CMD_SRC:%.c=$(BUILD)/%.o)
# The binary the tests run: the same objects, with the test hooks of
# coffer(1) compiled in (src/util/tuning.c again, with COFFER_TEST_HOOKS).
# $(BIN), which make install installs, has none.
TEST_BIN  := $(BUILD)/test/coffer
TEST_HOOKS_OBJ := $(BUILD)/test/tuning-hooks.o
UNIT_SRC  := $(sort $(wildcard tests/unit/t-*.c))
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TOOL_SRC  := $(sort $(wildcard tests/tools/*.c))
TOOL_BIN  := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tests/%)
HDRS      := $(sort $(wildcard include/coffer/*.h))
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz-*.c))
REPLAY_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/tests/replay-%)
MAN_PAGES := $(sort $(wildcard man/*.1 man/*.5))
MAN1      := $(filter %.1,$(MAN_PAGES))
MAN5      := $(filter %.5,$(MAN_PAGES))
# The alerting rules, their tests and the Grafana dashboard
# (contrib/monitoring/), installed under $(DATADIR)/coffer/monitoring.
MONITORING := $(sort $(wildcard contrib/monitoring/*.yml contrib/monitoring/*.json))

.PHONY: all deps check unit e2e asan tsan tsan-check hdr-check install uninstall clean lint \
        fuzz fuzz-corpus bench bench-growth bench-prune bench-export bench-rotate bench-files bench-s3 bench-fleet \
        demo format man-lint
all: $(BIN) $(TEST_BIN)

$(BIN): $(CMD_OBJ) $(BUILD)/libcoffer.a
	$(CC) $(LDFLAGS) -o $@ $(CMD_OBJ) $(BUILD)/libcoffer.a $(ALL_LIBS)

$(TEST_BIN): $(CMD_OBJ) $(TEST_HOOKS_OBJ) $(BUILD)/libcoffer.a
	$(CC) $(LDFLAGS) -o $@ $(CMD_OBJ) $(TEST_HOOKS_OBJ) $(BUILD)/libcoffer.a \
	  $(ALL_LIBS)

$(TEST_HOOKS_OBJ): src/util/tuning.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -DCOFFER_TEST_HOOKS -MMD -MP -c -o $@ $<

$(BUILD)/libcoffer.a: $(LIB_OBJ)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/libcoffer.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -Itests/unit -o $@ $< $(BUILD)/libcoffer.a $(ALL_LIBS)

# The interleaving test steps hosts at tuning_raise_at's points: the
# test build's tuning.c, linked before the archive's.
$(BUILD)/tests/t-interleave: tests/unit/t-interleave.c $(TEST_HOOKS_OBJ) \
    $(BUILD)/libcoffer.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -Itests/unit -o $@ $< $(TEST_HOOKS_OBJ) \
	  $(BUILD)/libcoffer.a $(ALL_LIBS)

# A test helper that writes with coffer's own code (a forged record).
$(BUILD)/tests/forge-record: tests/tools/forge-record.c $(BUILD)/libcoffer.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libcoffer.a $(ALL_LIBS)

# One operation of the S3 store from the shell (t0622).
$(BUILD)/tests/s3-op: tests/tools/s3-op.c $(BUILD)/libcoffer.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libcoffer.a $(ALL_LIBS)

# A keyless attacker's rewrap intent (libsodium alone).
$(BUILD)/tests/forge-intent: tests/tools/forge-intent.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(ALL_LIBS)

# A test helper that tries a key file's every secret on every pack.
$(BUILD)/tests/wo-probe: tests/tools/wo-probe.c $(BUILD)/libcoffer.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libcoffer.a $(ALL_LIBS)

# A test helper that forges packs with no key: libsodium and libzstd only.
$(BUILD)/tests/forge-pack: tests/tools/forge-pack.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(ALL_LIBS)

# Each libFuzzer target with a main() that runs files through it
# (tests/fuzz/replay.c), by the ordinary compiler: make check replays
# tests/fuzz/corpus/<target>/ through them (t0900).
$(BUILD)/tests/replay-%: tests/fuzz/%.c tests/fuzz/replay.c tests/fuzz/replay.h \
    $(BUILD)/libcoffer.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -DFUZZ_REPLAY -Itests/fuzz -o $@ $< \
	  tests/fuzz/replay.c $(BUILD)/libcoffer.a $(ALL_LIBS)

# Test helpers (tree comparison, ...): standalone programs, no libcoffer.
$(BUILD)/tests/%: tests/tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $<

-include $(LIB_OBJ:.o=.d) $(CMD_OBJ:.o=.d) $(TEST_HOOKS_OBJ:.o=.d)

# Debian packages: build dependencies and what the tests use.
DEB_PKGS := build-essential pkg-config libarchive-dev libsodium-dev libssl-dev \
            libsqlite3-dev libzstd-dev libjansson-dev sqlite3 attr acl perl xxd \
            mandoc rclone jq libinih-dev libtsan2 libcurl4-openssl-dev \
            libxml2-dev
# The test object store (tests/tools/swift-server), installed without
# recommendations: Swift's library only, never the swift-* server packages,
# whose systemd units listen on 0.0.0.0.  libarchive-tools: bsdtar, the
# other tar that coffer dump's streams and backup --from-tar's inputs are
# tested with (t0290, t0292).  libfuse3-dev and fuse3 (fusermount3):
# coffer mount, and its real mounts in t0295.
DEB_PKGS_NOREC := python3-swift openssl curl libarchive-tools libfuse3-dev fuse3
# promtool checks the alerting rules and the metrics files (t0746).  Only
# Debian's prometheus package has it, and installing that package enables
# a Prometheus server on :9090 wherever systemd runs: the package is
# unpacked instead, and its promtool alone installed.
PROMTOOL_BIN := /usr/local/bin/promtool
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq
deps:
	@missing=; norec=; for p in $(DEB_PKGS); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	for p in $(DEB_PKGS_NOREC); do \
	  dpkg -s $$p >/dev/null 2>&1 || norec="$$norec $$p"; done; \
	if [ -z "$$missing$$norec" ]; then echo "deps: all installed"; else \
	  echo "deps: installing$$missing$$norec"; \
	  $(SUDO) apt-get update -qq && \
	  { [ -z "$$missing" ] || $(APT_INSTALL) $$missing; } && \
	  { [ -z "$$norec" ] || \
	    $(APT_INSTALL) --no-install-recommends $$norec; }; fi
	@command -v promtool >/dev/null || { \
	  echo "deps: installing promtool (unpacked from Debian's prometheus)"; \
	  d=$$(mktemp -d) && chmod 0755 $$d && cd $$d && \
	  { apt-get download -qq prometheus 2>/dev/null || \
	    { $(SUDO) apt-get update -qq && apt-get download -qq prometheus; }; } && \
	  dpkg-deb -x prometheus_*.deb x && \
	  $(SUDO) install -m 0755 x/usr/bin/promtool $(PROMTOOL_BIN); \
	  rc=$$?; cd / && rm -rf $$d; exit $$rc; }

unit: $(UNIT_BIN) $(TOOL_BIN) $(REPLAY_BIN)
check: deps
	@$(MAKE) --no-print-directory $(BIN) $(TEST_BIN) unit man-lint
	@command -v prove >/dev/null || { echo "check: prove not found (make deps)"; exit 2; }
	COFFER=$(CURDIR)/$(TEST_BIN) COFFER_RELEASE=$(CURDIR)/$(BIN) \
	  BUILD=$(CURDIR)/$(BUILD) prove -j2 -f $(UNIT_BIN) tests/e2e/t*.sh

e2e: $(BIN) $(TEST_BIN) $(TOOL_BIN) $(REPLAY_BIN)
	COFFER=$(CURDIR)/$(TEST_BIN) COFFER_RELEASE=$(CURDIR)/$(BIN) \
	  BUILD=$(CURDIR)/$(BUILD) prove -v tests/e2e/t*.sh

# Timed comparison with restic and borg on a generated training tree
# (bench/README.md; BENCH_SCALE, BENCH_DIR, BENCH_KEEP).  Not part of check.
# The scripts build coffer with the make that runs them, named through a
# variable of its own: a recipe line that names $(MAKE) runs even under
# make -n, and a bench is not something -n should start.
BENCH_MAKE := $(MAKE)
bench: deps
	CC="$(CC)" MAKE="$(BENCH_MAKE)" sh bench/run.sh

# Retention against restic and borg: forget half of PRUNE_ROUNDS (10)
# trees and reclaim the space (bench/prune.sh).  Not part of check.
bench-prune: deps
	CC="$(CC)" MAKE="$(BENCH_MAKE)" sh bench/prune.sh

# Offsite export and import against cp of the same packs, and a drill
# from bundles against one from the repository (bench/export.sh).  Not
# part of check.
bench-export: deps
	CC="$(CC)" MAKE="$(BENCH_MAKE)" sh bench/export.sh

# Key rotation's rewrap against cp of the same packs (bench/rotate.sh).
# Not part of check.
bench-rotate: deps
	CC="$(CC)" MAKE="$(BENCH_MAKE)" sh bench/rotate.sh

# Peak RSS as one repository grows to GROWTH_ROUNDS (10) benchmark trees
# (bench/README.md).  Not part of check.
bench-growth: deps
	CC="$(CC)" MAKE="$(BENCH_MAKE)" sh bench/growth.sh

# Many small files (BENCH_FILES, default 100,000 of 1-8 KiB in 1,000
# directories) against restic and borg: backups, restores into a fresh
# file system and after rm -rf, ls, diff, verify, drill, peak RSS
# (bench/files.sh, bench/README.md).  Not part of check.
bench-files: deps
	CC="$(CC)" MAKE="$(BENCH_MAKE)" sh bench/files.sh

# A repository on object storage: coffer against restic's S3 backend and
# rclone's copy of the same packs, over HTTPS to a Swift on loopback
# (bench/s3.sh).  Not part of check.
bench-s3: deps
	CC="$(CC)" MAKE="$(BENCH_MAKE)" sh bench/s3.sh

# Many writers, one repository: 1, 2, 4 and 8 simulated hosts backing up
# at once, and 4 one after another, locally and over HTTPS to a Swift on
# loopback (bench/fleet.sh; BENCH_SCALE, FLEET_S3=0).  Not part of check.
bench-fleet: deps
	CC="$(CC)" MAKE="$(BENCH_MAKE)" sh bench/fleet.sh

# The whole of check under AddressSanitizer (leaks included) and UBSan,
# in build-asan/.  A report ends the process by SIGABRT, which no test
# takes for an expected failure (test_must_fail and test_expect_code
# refuse a death by signal), so any report fails the suite.  .ci/run runs
# it after check.
ASAN_CHECK_OPTIONS := abort_on_error=1:halt_on_error=1:detect_leaks=1:print_stacktrace=1
UBSAN_CHECK_OPTIONS := abort_on_error=1:halt_on_error=1:print_stacktrace=1
# The simulations of weeks (t0505, t0860) run a week under the sanitizers:
# the same paths, a third of the time.
asan:
	ASAN_OPTIONS=$(ASAN_CHECK_OPTIONS) UBSAN_OPTIONS=$(UBSAN_CHECK_OPTIONS) \
	  COFFER_TEST_SIM_DAYS=7 INTERLEAVE_SEEDS=40 \
	  $(MAKE) BUILD=build-asan BIN=build-asan/coffer \
	  SANITIZE=address,undefined check

# The unit tests and the end-to-end tests whose runs share memory between
# threads (backup's walk, pool, recorder and pack writer; restore's
# readers and writers; export's hasher; verify and drill) under
# ThreadSanitizer, in build-tsan/.  A report aborts the process, as under
# asan.  Not the whole of check: TSan runs these 5-15 times slower, and
# CI must stay well under 90 minutes.  tests/tsan.supp says why each
# suppression is there.  setarch -R: TSan's shadow mapping fails on
# kernels that put the binary where it expects shadow memory.
TSAN_E2E := t0010-roundtrip t0020-dedup t0025-restore-shared t0050-crash \
            t0080-threads t0120-changing t0200-verify t0220-drill \
            t0260-signals t0360-restore-kill t0410-record-parts \
            t0420-many-files t0430-backup-rollback t0600-export
TSAN_CHECK_OPTIONS := halt_on_error=1:abort_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/tsan.supp
tsan:
	@$(MAKE) --no-print-directory BUILD=build-tsan BIN=build-tsan/coffer \
	  SANITIZE=thread tsan-check
tsan-check: deps
	@$(MAKE) --no-print-directory $(BIN) $(TEST_BIN) unit
	TSAN_OPTIONS=$(TSAN_CHECK_OPTIONS) COFFER=$(CURDIR)/$(TEST_BIN) \
	  INTERLEAVE_SEEDS=12 \
	  COFFER_RELEASE=$(CURDIR)/$(BIN) \
	  BUILD=$(CURDIR)/$(BUILD) setarch $$(uname -m) -R \
	  prove -j2 -f $(UNIT_BIN) $(TSAN_E2E:%=tests/e2e/%.sh)

hdr-check:
	@set -e; for h in $(HDRS); do \
	  printf '#include "%s"\n' "$${h#include/}" | \
	  $(CC) $(ALL_CFLAGS) -x c -fsyntax-only - || { echo "hdr-check: $$h"; exit 1; }; \
	done; echo "hdr-check: $(words $(HDRS)) headers compile alone"

# The binary, coffer(1), a page per command (coffer-backup(1), ...) and
# the file formats a user edits (coffer-policy(5)).
install: coffer
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
	  $(DESTDIR)$(MANDIR)/man5
	install -m 0755 coffer $(DESTDIR)$(BINDIR)/coffer
	install -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(MAN5) $(DESTDIR)$(MANDIR)/man5/
	install -d $(DESTDIR)$(DATADIR)/coffer/monitoring
	install -m 0644 $(MONITORING) $(DESTDIR)$(DATADIR)/coffer/monitoring/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/coffer
	for f in $(MONITORING); do \
	  rm -f $(DESTDIR)$(DATADIR)/coffer/monitoring/$${f##*/}; done
	-rmdir $(DESTDIR)$(DATADIR)/coffer/monitoring $(DESTDIR)$(DATADIR)/coffer
	for m in $(MAN1); do rm -f $(DESTDIR)$(MANDIR)/man1/$${m#man/}; done
	for m in $(MAN5); do rm -f $(DESTDIR)$(MANDIR)/man5/$${m#man/}; done

# Every man page must be free of warnings: mandoc's lint at its warning
# level (its style notes depend on which other manuals are installed, so
# they do not count), or groff's warnings where mandoc is missing.
man-lint:
	@if command -v mandoc >/dev/null; then \
	  mandoc -T lint -W warning $(MAN_PAGES) || \
	  { echo "man-lint: mandoc warns about the pages above"; exit 1; }; \
	else \
	  for m in $(MAN_PAGES); do out=$$(groff -mandoc -ww -z $$m 2>&1); \
	    [ -z "$$out" ] || { echo "$$out"; \
	    echo "man-lint: groff warns about $$m"; exit 1; }; done; \
	fi; echo "man-lint: $(words $(MAN_PAGES)) pages, no warnings"

lint:
	cppcheck --quiet --enable=warning,portability --error-exitcode=1 \
	  --suppress=missingIncludeSystem -Iinclude src

demo: deps
	@$(MAKE) --no-print-directory coffer
	sh tests/demo.sh

# libFuzzer targets for the parsers of untrusted input (needs clang; not
# in make deps).  Each is built, then run for FUZZ_TIME seconds from its
# seeds in tests/fuzz/corpus/<target>/ (read only; what it finds goes to
# build-fuzz/corpus/<target>/).  A crash, leak, timeout or OOM is written
# into the seed directory (-artifact_prefix) and make fuzz fails: commit
# that file with the fix, and make check replays it from then on (t0900).
FUZZ_CC   ?= clang
FUZZ_TIME ?= 60
fuzz:
	@command -v $(FUZZ_CC) >/dev/null || { echo "fuzz: needs clang (apt-get install clang)"; exit 2; }
	$(MAKE) BUILD=build-fuzz BIN=build-fuzz/coffer CC=$(FUZZ_CC) \
	  SANITIZE=address,undefined,fuzzer-no-link build-fuzz/libcoffer.a
	@mkdir -p build-fuzz/fuzz
	@set -e; for f in $(FUZZ_SRC); do \
	  b=build-fuzz/fuzz/$$(basename $$f .c); echo "  FUZZ $$b"; \
	  $(FUZZ_CC) $(ALL_CFLAGS) -fsanitize=fuzzer,address,undefined \
	    -o $$b $$f build-fuzz/libcoffer.a $(ALL_LIBS); done
	@set -e; for f in $(FUZZ_SRC); do \
	  t=$$(basename $$f .c); c=tests/fuzz/corpus/$${t#fuzz-}; \
	  mkdir -p build-fuzz/corpus/$$t; echo "  RUN  $$t, $(FUZZ_TIME) s"; \
	  build-fuzz/fuzz/$$t -max_total_time=$(FUZZ_TIME) -close_fd_mask=2 \
	    -artifact_prefix=$$c/ build-fuzz/corpus/$$t $$c || \
	  { echo "fuzz: $$t failed; its input is in $$c/"; exit 1; }; done

# Regenerate the seeds from each target's fuzz_seeds (then commit them).
fuzz-corpus: $(REPLAY_BIN)
	@set -e; for b in $(REPLAY_BIN); do t=$${b##*/replay-fuzz-}; \
	  mkdir -p tests/fuzz/corpus/$$t; $$b --seeds tests/fuzz/corpus/$$t; \
	  echo "  SEEDS tests/fuzz/corpus/$$t: $$(ls tests/fuzz/corpus/$$t | wc -l) files"; done

format:
	clang-format -i $(LIB_SRC) $(CMD_SRC) $(HDRS)

clean:
	rm -rf build build-asan build-tsan build-fuzz coffer
