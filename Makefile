# packtrain — build, test, run.
#
#   make run      install missing Debian packages (as root), build, start the server
#   make test     install what the tests need, build, run every suite (SKIP=a,b opts out by name)
#   make asan     ASan + UBSan build, runs the unit tests
#   make fuzz     libFuzzer targets of every parser (clang, in build-fuzz/), FUZZ_RUNS each
#   make bench    run the benchmarks in bench/
#   make fresh-check   the README's two commands in a fresh Debian 12 root (tests/fresh_check.sh)
#
# ARCH selects the instruction set of the release build (default x86-64-v3, i.e.
# AVX2+FMA; use ARCH=x86-64-v4 for AVX-512).  BUILD/BIN move the outputs so that
# several builds can share one tree.
#
# Why the two-stage configuration: the flags of the libraries (pkg-config,
# mpicc) only exist after the packages are installed, so they cannot be read
# when this file is parsed.  $(BUILD)/config.mk is made by a rule that first
# installs what is missing and then asks pkg-config; make rebuilds it before
# anything else and restarts with it (GNU make's "remaking makefiles").  It is
# remade when the package lists or the installed packages change.  Every
# object also depends on $(BUILD)/flags.stamp, which holds the compiler's
# version and every flag, so a change of any of them rebuilds everything.

CC      ?= cc
ARCH    ?= x86-64-v3
BUILD   ?= build
BIN     ?= bin
OPT     ?= -O3 -march=$(ARCH)

# Open MPI (backend.kind "mpi", engine/mpi/): used when mpicc is found (it
# is installed by the packages list); `make MPI=0` builds without it.
MPI     ?= 1

PKGS := openblas libmicrohttpd jansson sqlite3 libuv zlib libcurl nettle

# Goals that need no configuration (and must not install anything).
NOCONFIG_GOALS := clean help deps deps-test deps-fuzz fresh-check fuzz
CONFIG_MK      := $(BUILD)/config.mk
NEED_CONFIG    := $(if $(MAKECMDGOALS),$(filter-out $(NOCONFIG_GOALS),$(MAKECMDGOALS)),all)

# `include`, not `-include`: when the rule that makes it fails (not root, no
# network), make must stop there, after install-deps.sh has said why, instead
# of building on with empty flags.
ifneq ($(NEED_CONFIG),)
include $(CONFIG_MK)
endif

CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-missing-field-initializers \
           -pthread -I. $(PKG_CFLAGS) $(if $(filter 1,$(MPI)),$(MPI_CFLAGS)) $(EXTRA_CFLAGS)
LDFLAGS += -pthread $(EXTRA_LDFLAGS)
LDLIBS  += $(PKG_LIBS) $(if $(filter 1,$(MPI)),$(MPI_LIBS)) -lm

# Sources are discovered in every subfolder (rooms by concept, docs/DEVELOPERS.md).
find_c = $(sort $(shell find $(1) -name '*.c' 2>/dev/null))
ENGINE_SRC := $(call find_c,engine)
STORE_SRC  := $(call find_c,store)
SERVER_SRC := $(filter-out server/cli/main.c,$(call find_c,server))
LIB_SRC    := $(ENGINE_SRC) $(STORE_SRC) $(SERVER_SRC)
LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB        := $(BUILD)/libpacktrain.a

UNIT_SRC   := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
UNIT_HELP  := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))
UNIT_HOBJ  := $(UNIT_HELP:%.c=$(BUILD)/%.o)

# The flags stamp: rewritten only when its text changes (compared at parse
# time), so its date says when the compiler or a flag last changed.
FLAGS_STAMP := $(BUILD)/flags.stamp
ifneq ($(NEED_CONFIG),)
ifneq ($(wildcard $(CONFIG_MK)),)
FLAGS_NOW := $(shell $(CC) --version 2>&1 | head -1) | $(CFLAGS) | $(LDFLAGS) | $(LDLIBS)
ifneq ($(FLAGS_NOW),$(file <$(FLAGS_STAMP)))
$(shell mkdir -p $(BUILD))
$(file >$(FLAGS_STAMP),$(FLAGS_NOW))
endif
endif
endif

# The commit the build comes from, for engine/core/version.c only: its header
# is rewritten when the text changes, like the flags stamp, so a new commit
# recompiles one file.
BUILD_INFO := $(BUILD)/build_info.h
ifneq ($(NEED_CONFIG),)
BUILD_COMMIT := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
BUILD_INFO_NOW := \#define PT_BUILD_COMMIT "$(BUILD_COMMIT)"
ifneq ($(BUILD_INFO_NOW),$(file <$(BUILD_INFO)))
$(shell mkdir -p $(BUILD))
$(file >$(BUILD_INFO),$(BUILD_INFO_NOW))
endif
endif
$(BUILD)/engine/core/version.o: CFLAGS += -I$(BUILD)

.PHONY: all run test unit integration asan bench deps deps-test deps-fuzz clean help docker-lint fresh-check \
        fuzz fuzz-targets
.DELETE_ON_ERROR:
.SECONDARY:

all: $(BIN)/packtrain

help:
	@sed -n '2,13p' Makefile

# --- configuration -----------------------------------------------------------
# The package lists are docker/packages.txt (build and run) and
# docker/packages-test.txt (tests only); docker/install-deps.sh installs the
# missing ones as root and otherwise prints the apt-get line and fails.
DPKG_STATUS := $(wildcard /var/lib/dpkg/status)

$(CONFIG_MK): Makefile docker/packages.txt docker/install-deps.sh docker/configure.sh $(DPKG_STATUS)
	@docker/install-deps.sh
	@docker/configure.sh "$@" $(PKGS)

deps:
	@docker/install-deps.sh

deps-test:
	@docker/install-deps.sh --test

deps-fuzz:
	@docker/install-deps.sh --fuzz

# --- build -------------------------------------------------------------------
# The kernels built for a wider instruction set than ARCH name it with
# `#pragma GCC target`, and the SchNet ops their float options with
# `#pragma GCC optimize`; clang ignores both, so with clang (make fuzz, or
# CC=clang) the same are given on the command line: each file's own
# `#pragma GCC target("a,b")` becomes -ma -mb, read from the file itself, so a
# new kernel file needs no line here (a list here once missed ssp_avx2.c and
# broke make fuzz).
ifneq ($(findstring clang,$(CC)),)
pragma_target = $(patsubst %,-m%,$(subst $(comma), ,$(shell sed -n 's/^[#]pragma GCC target("\([^"]*\)").*/\1/p' $(1))))
$(BUILD)/engine/%.o: CFLAGS += -Wno-unknown-pragmas $(call pragma_target,$<)
$(BUILD)/engine/model/schnet_ops.o $(BUILD)/engine/model/schnet_ops_forces.o: \
    CFLAGS += -fno-trapping-math -ffp-contract=fast
endif
# Adam's update vectorises its sqrtf only when the call need not set errno
# (its argument, Adam's v, is never negative); gcc 12 drops the option when
# it comes from a pragma on a target_clones function (engine/train/optim.c).
$(BUILD)/engine/train/optim.o: CFLAGS += -fno-math-errno

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BIN)/packtrain: $(BUILD)/server/cli/main.o $(LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(BUILD)/server/cli/main.o $(LIB) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(UNIT_HOBJ) $(LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(UNIT_HOBJ) $(LIB) $(LDLIBS) $(CMOCKA_LIBS)

# --- tests -------------------------------------------------------------------
# SKIP=browser,torch,... leaves suites out by name; the summary says which.
test: all $(UNIT_BIN)
	@docker/install-deps.sh --test
	@SKIP="$(SKIP)" tests/run_all.sh "$(BUILD)/tests" "$(BIN)/packtrain"

# PACKTRAIN_BIN: the tests that spawn the CLI (test_client's Ctrl-C) run this
# build's binary (make asan's sanitized one), not whatever bin/ holds.
unit: all $(UNIT_BIN)
	@PACKTRAIN_BIN="$(abspath $(BIN)/packtrain)" tests/run_unit.sh "$(BUILD)/tests"

asan:
	$(MAKE) BUILD=build-asan BIN=build-asan/bin \
	    OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	    EXTRA_LDFLAGS="-fsanitize=address,undefined" unit

fresh-check:
	@tests/fresh_check.sh

# --- fuzzing -----------------------------------------------------------------
# Every tests/fuzz/fuzz_NAME.c is a libFuzzer target.  `make fuzz` installs
# clang and its sanitizer runtimes (docker/packages-fuzz.txt), builds the
# library with coverage instrumentation, ASan and UBSan into build-fuzz/ (its
# own config.mk, made the usual way), links each target with libFuzzer, and
# runs each for FUZZ_RUNS executions (tests/fuzz/run.sh: per-target counts,
# time and coverage; any crash, leak, UB or timeout fails).  FUZZ=a,b runs
# only those targets.  The same harnesses, entry points renamed, are linked
# into the unit test test_fuzz_replay, which replays the seeds and every past
# finding (tests/fuzz/corpus, tests/fuzz/regressions) in `make test`/`make asan`.
FUZZ_RUNS ?= 100000
comma     := ,
FUZZ_SRC  := $(sort $(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BIN  := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_CC   ?= clang

fuzz:
	@docker/install-deps.sh --fuzz
	@$(MAKE) --no-print-directory BUILD=build-fuzz BIN=build-fuzz/bin CC=$(FUZZ_CC) MPI=0 \
	    OPT="-O1 -gline-tables-only -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
	    EXTRA_LDFLAGS="-fsanitize=address,undefined" fuzz-targets
	@tests/fuzz/run.sh build-fuzz/fuzz $(FUZZ_RUNS) $(subst $(comma), ,$(FUZZ))

fuzz-targets: $(FUZZ_BIN)

$(BUILD)/fuzz/%: $(BUILD)/tests/fuzz/%.o $(LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $< $(LIB) $(LDLIBS)

# The replay test links every harness, each entry point renamed pt_fuzz_NAME.
FUZZ_REPLAY_OBJ := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/tests/fuzz/replay/%.o)

$(BUILD)/tests/fuzz/replay/%.o: tests/fuzz/%.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DLLVMFuzzerTestOneInput=pt_$* -MD -MP -c $< -o $@

$(BUILD)/tests/test_fuzz_replay: $(BUILD)/tests/unit/test_fuzz_replay.o $(FUZZ_REPLAY_OBJ) $(UNIT_HOBJ) $(LIB) \
                                 $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIB) $(LDLIBS) $(CMOCKA_LIBS)

BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

$(BUILD)/bench/%: bench/%.c $(LIB) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

# make test builds the bench programs too: an engine interface that changes
# under them then fails the tests, not the next benchmark run.
test: $(BENCH_BIN)

bench: all $(BENCH_BIN)
	@docker/install-deps.sh --test
	@bench/run_all.sh "$(BIN)/packtrain" "$(BUILD)/bench"

docker-lint: all
	@docker/lint.sh $(BIN)/packtrain

run: all
	@mkdir -p var
	$(BIN)/packtrain serve --data-dir var --demo $(if $(PORT),--port $(PORT))

clean:
	rm -rf build build-asan build-fuzz bin

-include $(LIB_OBJ:.o=.d) $(BUILD)/server/cli/main.d $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%.d) \
         $(UNIT_HOBJ:.o=.d) $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/tests/fuzz/%.d) $(FUZZ_REPLAY_OBJ:.o=.d)
