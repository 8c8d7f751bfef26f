# packtrain — build, test, run.
#
#   make run      install missing Debian packages (as root), build, start the server
#   make test     build and run every test (unit, integration, browser)
#   make asan     ASan + UBSan build, runs the unit tests
#   make bench    run the benchmarks in bench/
#
# ARCH selects the instruction set of the release build (default x86-64-v3, i.e.
# AVX2+FMA; use ARCH=x86-64-v4 for AVX-512).  BUILD/BIN move the outputs so that
# several builds can share one tree.

CC      ?= cc
ARCH    ?= x86-64-v3
BUILD   ?= build
BIN     ?= bin
OPT     ?= -O3 -march=$(ARCH)

PKGS       := openblas libmicrohttpd jansson sqlite3 libuv zlib libcurl nettle
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null)

# Open MPI (backend.kind "mpi", engine/mpi_backend.h): used when mpicc is
# found; `make MPI=0` builds without it (kind "mpi" is then refused).
MPI     ?= 1
MPICC   := $(if $(filter 1,$(MPI)),$(shell command -v mpicc 2>/dev/null))
MPI_CFLAGS := $(if $(MPICC),-DPT_HAVE_MPI $(shell $(MPICC) --showme:compile))
MPI_LIBS   := $(if $(MPICC),$(shell $(MPICC) --showme:link))

CFLAGS  ?= $(OPT) -g
CFLAGS  += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wno-missing-field-initializers \
           -pthread -I. $(PKG_CFLAGS) $(MPI_CFLAGS) $(EXTRA_CFLAGS)
LDFLAGS += -pthread $(EXTRA_LDFLAGS)
LDLIBS  += $(PKG_LIBS) $(MPI_LIBS) -lm

ENGINE_SRC := $(sort $(wildcard engine/*.c))
STORE_SRC  := $(sort $(wildcard store/*.c))
SERVER_SRC := $(sort $(filter-out server/main.c,$(wildcard server/*.c)))
LIB_SRC    := $(ENGINE_SRC) $(STORE_SRC) $(SERVER_SRC)
LIB_OBJ    := $(LIB_SRC:%.c=$(BUILD)/%.o)
LIB        := $(BUILD)/libpacktrain.a

UNIT_SRC   := $(sort $(wildcard tests/unit/test_*.c))
UNIT_BIN   := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
UNIT_HELP  := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))
UNIT_HOBJ  := $(UNIT_HELP:%.c=$(BUILD)/%.o)

.PHONY: all run test unit integration webtest asan bench deps deps-test deps-check clean help docker-lint
.DELETE_ON_ERROR:
.SECONDARY:

all: $(BIN)/packtrain

help:
	@sed -n '2,12p' Makefile

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	ar rcs $@ $^

$(BIN)/packtrain: $(BUILD)/server/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(UNIT_HOBJ) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(UNIT_HOBJ) $(LIB) $(LDLIBS) $(CMOCKA_LIBS)

# --- tests -----------------------------------------------------------------
test: deps-check all $(UNIT_BIN)
	@tests/run_all.sh "$(BUILD)/tests" "$(BIN)/packtrain"

unit: all $(UNIT_BIN)
	@tests/run_unit.sh "$(BUILD)/tests"

asan:
	$(MAKE) BUILD=build-asan BIN=build-asan/bin \
	    OPT="-O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
	    EXTRA_LDFLAGS="-fsanitize=address,undefined" unit

BENCH_SRC := $(sort $(wildcard bench/*.c))
BENCH_BIN := $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)

$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

bench: all $(BENCH_BIN)
	@bench/run_all.sh "$(BIN)/packtrain" "$(BUILD)/bench"

docker-lint: all
	@docker/lint.sh $(BIN)/packtrain

# --- set-up ----------------------------------------------------------------
# The Debian packages packtrain needs are listed once, in docker/packages.txt.
deps:
	@docker/install-deps.sh

deps-test:
	@PACKAGES_FILE=docker/packages-test.txt docker/install-deps.sh

deps-check:
	@docker/install-deps.sh --check-only

run: deps all
	@mkdir -p var
	$(BIN)/packtrain serve --data-dir var --demo

clean:
	rm -rf build build-asan bin

-include $(LIB_OBJ:.o=.d) $(BUILD)/server/main.d $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%.d)
