# attograd - build the library, the CLI and the tests.
#
#   make                    build/libattograd.a and build/attograd (float)
#   make PRECISION=double   the same in build-double/ (used by the gradient checks)
#   make REFERENCE=1        the same from the plain reference kernels alone
#                           (src/reference.c; no src/kernels/, one thread) in build-ref/
#   make MPI=1              the same with mpicc in build-mpi/: `mpirun -np N
#                           build-mpi/attograd train ...` trains on N ranks
#   make test               every test; ends with "N passed, N failed[, N skipped]"
#   make run                build and train the default toy model
#   make test-asan          the suite under AddressSanitizer + UBSan
#   make test-tsan          the C tests and a training on 2 threads under ThreadSanitizer
#   make test-clang         the C tests built by clang, float and double
#   make fuzz               each libFuzzer harness for FUZZ_TIME seconds (clang)
#   make fuzz-replay        the saved fuzz corpus (tests/corpus/) once through each harness
#   make coverage           line and branch coverage of the tests, per file (gcc)
#   make analyze            cppcheck and clang-tidy's checks that are clean here (tests/analyze.sh)
#   make bench              speed against PyTorch on the same models
#   make bench-gemm         the matrix multiply alone against OpenBLAS sgemm
#   make bench-scale        time and memory from context 256 to 4096, GPT-2-small shape
#   make bench-busy         training beside busy processes, threads against one thread
#   make bench-threads      the default threads against fixed settings, on this machine
#   make bench-rows         the fused bias + GELU passes against the unfused ones
#   make bench-amx-pack     the AMX kernel's work beside its tiles (any AVX512-BF16 CPU)
#   make bench-mpi          2 ranks x 1 thread against 1 rank x 2 threads (needs Open MPI)
#   make bench-multihost    the gradient exchange's model against 2 namespace hosts on limited links (root)
#   make web                the browser playground in build-web/ (needs emscripten)
#   make web-serve          serve build-web/ on http://localhost:8000/
#   make bench-web          the page's time per step against the native command's
#   make CC=clang           any C11 compiler; no fast-math flags ever (masking needs inf);
#                           a change of compiler or flags rebuilds (build/flags)
#   make install            the command, the library (static and shared), the headers
#                           and attograd.pc under PREFIX (/usr/local), staged in DESTDIR;
#                           make uninstall removes them
#   make pictures           redraw the pictures in data/ with the command

CC        ?= cc
PRECISION ?= float
ARCH      ?= -march=native
OPT       ?= -O3
SAN       ?=

REFERENCE ?=
MPI       ?=

BUILDDIR  ?= build
# make names ./build/x build/x in $^: the same spelling everywhere
override BUILDDIR := $(patsubst ./%,%,$(BUILDDIR))
# A program path to run from a rule: ./ before a relative one, an absolute one
# (make BUILDDIR=/tmp/b run) as it is.
runnable = $(if $(filter /%,$(1)),$(1),./$(1))
# The MPI build: train/ compiled with AG_MPI (train/dist/dist.c) and everything
# linked by mpicc; the engine in src/ is the same code as in the plain build.
# mpicc runs the compiler CC names when one is given (make MPI=1 CC=clang).
ifeq ($(MPI),1)
ifneq ($(origin CC),default)
export OMPI_CC := $(CC)
endif
override CC = $(if $(OMPI_CC),OMPI_CC=$(OMPI_CC) )mpicc
MPIKIND    = -mpi
MPIFLAGS   = -DAG_MPI
else
MPIKIND    =
MPIFLAGS   =
endif
ifeq ($(REFERENCE),1)
# The reference build: every kernel from src/reference.c, one thread.
KIND       = -ref
KERNFLAGS  = -DAG_REFERENCE
KERNEL_SRC =
else
KIND       =
KERNFLAGS  =
KERNEL_SRC = $(wildcard src/kernels/*.c)
endif
ifeq ($(PRECISION),double)
BUILD      = $(BUILDDIR)$(MPIKIND)$(KIND)-double
PRECFLAGS  = -DAG_DOUBLE
else
BUILD      = $(BUILDDIR)$(MPIKIND)$(KIND)
PRECFLAGS  =
endif

WARN     = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unknown-pragmas
CFLAGS  ?= $(OPT) $(ARCH) -g
# The library sees include/ and src/ only: the engine knows nothing of train/.
# -ffp-contract=off: no compiler fuses a*b + c on its own (gcc's -std=c11
# does not; clang would), so plain loops round as written, with either
# compiler; the kernels fuse where they say so.
LIBCFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -pthread -fno-math-errno -ffp-contract=off $(WARN) $(CFLAGS) $(PRECFLAGS) $(KERNFLAGS) \
            $(SAN) -Iinclude -Isrc
ALLCFLAGS = $(LIBCFLAGS) $(MPIFLAGS) -Itrain/model -Itrain/dist -Itrain/cli
# train/'s layers include only downward: each folder is compiled seeing
# itself and the folders below it (train/README.md), so an include that goes
# up does not compile.  main.c, the tests and the benchmarks see them all.
LAYER_model = -Itrain/model
LAYER_dist  = -Itrain/dist -Itrain/model
LAYER_cli   = -Itrain/cli -Itrain/dist -Itrain/model
LAYER_web   = -Itrain/web -Itrain/model
layer_flags = $(LIBCFLAGS) $(MPIFLAGS) $(or $(LAYER_$(word 2,$(subst /, ,$(1)))),-Itrain/model -Itrain/dist -Itrain/cli)
# The engine's threads are POSIX threads (src/pool.c).
LDLIBS   = -lm -pthread

LIB_SRC   = $(wildcard src/*.c) $(KERNEL_SRC)
LIB_OBJ   = $(LIB_SRC:%.c=$(BUILD)/%.o)
TRAIN_SRC = $(wildcard train/model/*.c train/dist/*.c train/cli/*.c)
TRAIN_OBJ = $(TRAIN_SRC:%.c=$(BUILD)/%.o)
TEST_SRC  = $(wildcard tests/test_*.c)
TEST_BIN  = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
CLI       = $(BUILD)/attograd
LIB       = $(BUILD)/libattograd.a
TRAINLIB  = $(BUILD)/libtrain.a

.PHONY: all lib tests test test-asan test-tsan test-clang coverage analyze run bench bench-busy bench-threads bench-rows bench-amx-pack bench-gemm bench-mpi bench-multihost bench-scale fuzz \
        fuzz-replay clean install uninstall pictures FORCE \
        web web-serve bench-web
all: $(LIB) $(if $(wildcard train/main.c),$(CLI))
lib: $(LIB)

# What the build directory's files were made with.  Every object depends on
# it, so a change of compiler or flags (make CC=clang after make) rebuilds
# them all; it is rewritten only when its contents change, so an unchanged
# build stays up to date.
CC_VERSION := $(shell $(CC) --version 2>/dev/null | head -n 1)
BUILD_FLAGS = $(CC) ($(CC_VERSION)) | $(ALLCFLAGS) | $(LDLIBS)
$(BUILD)/flags: FORCE
	@mkdir -p $(BUILD)
	@printf '%s\n' '$(BUILD_FLAGS)' | cmp -s - $@ || printf '%s\n' '$(BUILD_FLAGS)' >$@
FORCE:

$(BUILD)/src/%.o: src/%.c $(wildcard include/*.h src/*.h src/kernels/*.h) Makefile $(BUILD)/flags
	@mkdir -p $(dir $@)
	@echo "  CC  $@"
	@$(CC) $(LIBCFLAGS) -c $< -o $@

$(BUILD)/train/%.o: train/%.c $(wildcard include/*.h train/*/*.h) Makefile $(BUILD)/flags
	@mkdir -p $(dir $@)
	@echo "  CC  $@"
	@$(CC) $(call layer_flags,$<) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(TRAINLIB): $(TRAIN_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(CLI): $(BUILD)/train/main.o $(TRAINLIB) $(LIB) $(BUILD)/flags
	@echo "  LD  $@"
	@$(CC) $(ALLCFLAGS) $(filter-out $(BUILD)/flags,$^) -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(TRAINLIB) $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(ALLCFLAGS) -I$(BUILD)/tests $< $(TRAINLIB) $(LIB) -o $@ $(LDLIBS)

# The usage example that opens include/attograd.h (the engine's header; its
# files are in include/attograd_io.h), as compilable C: the comment's
# indented lines between "Example:" and its end.
$(BUILD)/tests/header_example.inc: include/attograd.h
	@mkdir -p $(dir $@)
	@sed -n '/^ \* Example:/,/^ \*\//p' $< | sed -n 's/^ \*     //p' >$@
$(BUILD)/tests/test_example: $(BUILD)/tests/header_example.inc

tests: $(TEST_BIN)

# The float build's tests, then the double build's (gradient checks run in
# double precision), then the reference build's in double (the same checks on
# the plain kernels of src/reference.c), then the shell and Python suites
# (tests/cli_reference.sh trains with the reference build's CLI,
# tests/cli_mpi.sh and tests/cli_multihost.sh with the MPI build's, made
# when mpicc and mpirun exist),
# all added up by run.sh.
REFDIR = $(BUILDDIR)-ref
HAVE_MPI := $(shell command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 && echo 1)
test:
	@$(MAKE) -s --no-print-directory all tests
	@$(MAKE) -s --no-print-directory PRECISION=double all tests
	@$(MAKE) -s --no-print-directory REFERENCE=1 PRECISION=double all tests
	@$(MAKE) -s --no-print-directory REFERENCE=1 all
	@$(if $(HAVE_MPI),$(MAKE) -s --no-print-directory MPI=1 all,true)
	@ATTOGRAD=$(call runnable,$(BUILDDIR)/attograd) ATTOGRAD_REF=$(call runnable,$(REFDIR)/attograd) \
	    ATTOGRAD_MPI=$(call runnable,$(BUILDDIR)-mpi/attograd) \
	    sh tests/run.sh \
	    $(TEST_SRC:tests/%.c=$(BUILDDIR)/tests/%) $(TEST_SRC:tests/%.c=$(BUILDDIR)-double/tests/%) \
	    $(TEST_SRC:tests/%.c=$(REFDIR)-double/tests/%) $(wildcard tests/cli_*.sh) $(wildcard tests/py_*.sh) \
	    $(wildcard tests/web_*.sh)

# The same suite with every C test and the CLI under ASan + UBSan.  The
# learning runs, minutes long under the sanitizers, are skipped there
# (ATTOGRAD_QUICK); everything else runs.  -O2, not less: from -O2 the
# compilers fuse the matrix multiply's multiply-adds, and the attention's
# backward relies on sums that round as the multiply's do.
test-asan:
	@ATTOGRAD_QUICK=1 $(MAKE) -s --no-print-directory test BUILDDIR=build-asan OPT=-O2 \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"

# The float build's C tests and a short training on 2 threads
# (tests/tsan_train.sh) under ThreadSanitizer, in build-tsan/.  The
# engine's threads are its own (src/pool.c: POSIX threads, C11 atomics, no
# OpenMP), so TSan sees every synchronization they use; a report makes the
# program exit 66, which tests/run.sh counts as a failure.  -O2 as
# test-asan builds.  Skipped, saying so, where a threaded program built
# with -fsanitize=thread does not build or run (a compiler without it, or
# a kernel whose address-space layout its runtime does not accept).
TSAN_FLAGS = -fsanitize=thread -fno-omit-frame-pointer
test-tsan:
	@t=$$(mktemp -d) && trap 'rm -rf "$$t"' EXIT && \
	if ! printf '#include <pthread.h>\nstatic void *f(void *a) { return a; }\nint main(void) { pthread_t t; return pthread_create(&t, 0, f, 0) || pthread_join(t, 0); }\n' | \
	    $(CC) $(TSAN_FLAGS) -pthread -x c - -o $$t/probe 2>/dev/null || ! $$t/probe >/dev/null 2>&1; then \
	    echo "test-tsan: skipped: $(CC) -fsanitize=thread does not build or run a threaded program here"; exit 0; fi; \
	$(MAKE) -s --no-print-directory BUILDDIR=build-tsan OPT=-O2 SAN="$(TSAN_FLAGS)" all tests && \
	ATTOGRAD=./build-tsan/attograd sh tests/run.sh $(TEST_SRC:tests/%.c=build-tsan/tests/%) tests/tsan_train.sh

# The C tests built by clang (float and double): the two compilers fuse
# and vectorize differently, and sums that must round alike (the attention
# backward's against the matrix multiply's) are checked in both.
test-clang:
	@$(MAKE) -s --no-print-directory CC=clang BUILDDIR=build-clang all tests
	@$(MAKE) -s --no-print-directory CC=clang BUILDDIR=build-clang PRECISION=double all tests
	@sh tests/run.sh $(TEST_SRC:tests/%.c=build-clang/tests/%) $(TEST_SRC:tests/%.c=build-clang-double/tests/%)

# Line and branch coverage (gcc's --coverage) in build-cov/, at -O2 as
# test-asan builds (the attention's backward needs the multiply-adds fused):
# the C tests and COV_SUITES (the command-line suites that run no make of
# their own and need no other build, but cli_scale), their learning runs
# skipped (ATTOGRAD_QUICK); the count files are made
# first and writable by all, for the runs cli_robust makes as another user
# (uid 65534); then tests/coverage.sh's summary per file and folder.  Not
# part of make test.
COV_SUITES = tests/cli_bf16.sh tests/cli_checkpoint.sh tests/cli_everyday.sh tests/cli_models.sh tests/cli_robust.sh \
             tests/cli_train.sh
coverage:
	@find build-cov -name '*.gcda' -delete 2>/dev/null || true
	@$(MAKE) -s --no-print-directory BUILDDIR=build-cov OPT=-O2 SAN=--coverage all tests
	@./build-cov/attograd --version >/dev/null
	@find build-cov -name '*.gcda' -exec chmod a+rw {} +
	@ATTOGRAD_QUICK=1 ATTOGRAD=./build-cov/attograd sh tests/run.sh $(TEST_SRC:tests/%.c=build-cov/tests/%) \
	    $(COV_SUITES) || true
	@sh tests/coverage.sh build-cov

# Static analysis (tests/analyze.sh): cppcheck and clang-tidy's analyzer and
# bugprone checks, each with the checks that have no false positive left on
# this code; a tool not installed is skipped, saying so; a finding exits 1.
# Not part of make test.
analyze:
	@sh tests/analyze.sh

# Speed against PyTorch on the same three models (tests/bench.sh).
bench: all
	@sh tests/bench.sh

# Time and memory as the context grows, GPT-2-small shape, sampling speed
# (tests/bench_scale.sh; a few minutes).
bench-scale: all
	@sh tests/bench_scale.sh

# One training step per config (tests/bench_train.c), for the benchmarks.
$(BUILD)/bench_train: tests/bench_train.c $(TRAINLIB) $(LIB)
	@$(CC) $(ALLCFLAGS) $< $(TRAINLIB) $(LIB) -o $@ $(LDLIBS)

# The fused element-wise passes against the unfused ones they replace
# (tests/bench_rows.c), on all threads and on one.
$(BUILD)/bench_rows: tests/bench_rows.c $(LIB)
	@$(CC) $(ALLCFLAGS) $< $(LIB) -o $@ $(LDLIBS)

bench-rows: $(BUILD)/bench_rows
	@$(BUILD)/bench_rows
	@$(BUILD)/bench_rows 1

# The AMX kernel with its tile instructions left out (tests/bench_amx_pack.c):
# its packing, block loop and threads, timed on any CPU with AVX512-BF16,
# beside the time the tiles would take at the AMX ceiling.
$(BUILD)/bench_amx_pack: tests/bench_amx_pack.c src/kernels/gemm_bf16.c $(LIB)
	@$(CC) $(ALLCFLAGS) $< $(LIB) -o $@ $(LDLIBS)

bench-amx-pack: $(BUILD)/bench_amx_pack
	@$(BUILD)/bench_amx_pack 2
	@$(BUILD)/bench_amx_pack 1

# The default threads against 1 thread and all threads sleeping at once or
# never sleeping, per config, on this machine (tests/bench_threads.sh).
bench-threads: all
	@sh tests/bench_threads.sh

# Training beside one busy loop per core (tests/bench_busy.sh).
bench-busy: all
	@sh tests/bench_busy.sh

# Data parallelism on this machine: 2 ranks x 1 thread against 1 rank x 2
# threads (tests/bench_mpi.sh; skipped without Open MPI).
bench-mpi:
	@sh tests/bench_mpi.sh

# The README's model of the gradient exchange (bytes / bandwidth + latency)
# against steps measured on 2 network-namespace hosts whose links tc limits
# (tests/bench_multihost.sh; needs root, iproute2 and Open MPI).
bench-multihost:
	@bash tests/bench_multihost.sh

# The matmul kernel alone against OpenBLAS sgemm (needs libopenblas-dev;
# BENCH_GEMM_STAT=best: each figure's fastest timing, for a busy machine), which
# runs the kernels tests/bench_blas.sh finds fastest on this CPU
# (OPENBLAS_CORETYPE, set for this benchmark only); skipped without OpenBLAS.
bench-gemm: $(LIB)
	@if ! printf '#include <cblas.h>\nint main(void){return !openblas_get_corename();}\n' | \
	    $(CC) -x c - -o /dev/null -lopenblas 2>/dev/null; then \
	    echo "bench-gemm: skipped: no OpenBLAS to compare with (cblas.h and -lopenblas; sh tests/install-deps.sh installs libopenblas-dev)"; \
	    exit 0; fi; \
	$(CC) $(ALLCFLAGS) tests/bench_gemm.c $(LIB) -o $(BUILD)/bench_gemm -lopenblas $(LDLIBS) || exit 1; \
	if core=$$(CC="$(CC)" sh tests/bench_blas.sh 2); then export OPENBLAS_CORETYPE=$$core; \
	else unset OPENBLAS_CORETYPE; fi; \
	echo "OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OPENBLAS_CORETYPE=$${OPENBLAS_CORETYPE:-(unset)} $(BUILD)/bench_gemm 2"; \
	OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 $(BUILD)/bench_gemm 2

# libFuzzer (clang) on the checkpoint reader, the text reader, the argument
# parser, the CSV training log (plot, train --resume) and a checkpoint's
# metadata (the config and a run's settings), FUZZ_TIME seconds each, seeded
# with tests/corpus/<name>/; new inputs go to build-fuzz/corpus-*, crashes to
# build-fuzz/.  fuzz-replay runs each harness once over its saved corpus only
# (a regression test).  fuzz_meta links the engine with the reference
# kernels (as build-ref/): it builds and reads models, never runs them fast.
FUZZ_TIME ?= 60
FUZZ_CC    = clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c11 \
             -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc -Itrain/model -Itrain/dist -Itrain/cli
FUZZERS    = build-fuzz/fuzz_safetensors build-fuzz/fuzz_text build-fuzz/fuzz_args build-fuzz/fuzz_log \
             build-fuzz/fuzz_meta
FUZZ_RUN   = -max_total_time=$(FUZZ_TIME) -artifact_prefix=build-fuzz/ -print_final_stats=1

build-fuzz/fuzz_safetensors: tests/fuzz_safetensors.c src/safetensors.c src/bigbuf.c src/fileio.c src/bigbuf.h include/attograd.h include/attograd_io.h
	@mkdir -p build-fuzz
	$(FUZZ_CC) tests/fuzz_safetensors.c src/safetensors.c src/bigbuf.c src/fileio.c -o $@
build-fuzz/fuzz_text: tests/fuzz_text.c train/model/tasks.c train/model/tasks.h src/pcg32.c src/mathfn.c \
                      src/fileio.c include/attograd.h include/attograd_io.h
	@mkdir -p build-fuzz
	$(FUZZ_CC) tests/fuzz_text.c train/model/tasks.c src/pcg32.c src/mathfn.c src/fileio.c -o $@
build-fuzz/fuzz_args: tests/fuzz_args.c train/cli/args.c train/cli/args.h train/model/number.c train/model/number.h \
                      src/fileio.c include/attograd_io.h
	@mkdir -p build-fuzz
	$(FUZZ_CC) tests/fuzz_args.c train/cli/args.c train/model/number.c src/fileio.c -o $@
build-fuzz/fuzz_log: tests/fuzz_log.c train/cli/svg.c train/cli/svg.h src/fileio.c include/attograd_io.h
	@mkdir -p build-fuzz
	$(FUZZ_CC) tests/fuzz_log.c train/cli/svg.c src/fileio.c -lm -o $@
FUZZ_META_SRC = tests/fuzz_meta.c train/model/checkpoint.c train/model/run.c train/model/number.c train/model/model.c \
                train/model/nn.c train/model/tasks.c $(wildcard src/*.c)
build-fuzz/fuzz_meta: $(FUZZ_META_SRC) $(wildcard src/*.h train/model/*.h) include/attograd.h include/attograd_io.h
	@mkdir -p build-fuzz
	$(FUZZ_CC) -DAG_REFERENCE $(FUZZ_META_SRC) -lm -pthread -o $@

fuzz: $(FUZZERS)
	@mkdir -p build-fuzz/corpus-st build-fuzz/corpus-text build-fuzz/corpus-args build-fuzz/corpus-log \
	    build-fuzz/corpus-meta
	./build-fuzz/fuzz_safetensors build-fuzz/corpus-st tests/corpus/safetensors \
	    -dict=tests/fuzz_safetensors.dict $(FUZZ_RUN)
	./build-fuzz/fuzz_text build-fuzz/corpus-text tests/corpus/text $(FUZZ_RUN)
	./build-fuzz/fuzz_args build-fuzz/corpus-args tests/corpus/args -close_fd_mask=3 $(FUZZ_RUN)
	./build-fuzz/fuzz_log build-fuzz/corpus-log tests/corpus/log $(FUZZ_RUN)
	./build-fuzz/fuzz_meta build-fuzz/corpus-meta tests/corpus/meta $(FUZZ_RUN)

fuzz-replay: $(FUZZERS)
	./build-fuzz/fuzz_safetensors -runs=0 tests/corpus/safetensors
	./build-fuzz/fuzz_text -runs=0 tests/corpus/text
	./build-fuzz/fuzz_args -runs=0 -close_fd_mask=3 tests/corpus/args
	./build-fuzz/fuzz_log -runs=0 tests/corpus/log
	./build-fuzz/fuzz_meta -runs=0 tests/corpus/meta

# The browser playground (train/web/README.md): the engine with the
# reference kernels and the WebAssembly SIMD ones of src/kernels/wasm_*.c
# (the same bits as build-ref/), the model library
# and the page's entry points, compiled by emscripten into one .wasm
# beside the page.  One thread, no OpenMP.  Debian's emcc finds its
# optimizer's JavaScript modules only through NODE_PATH.  emmalloc, the
# smaller of emscripten's allocators (8 KB less than dlmalloc): the engine
# allocates by arenas, a few blocks a run, so its speed does not show.
# The engine's arithmetic (src/, the SIMD kernels) is compiled for speed,
# -O2; what does little arithmetic (the tape's bookkeeping, checkpoints, files,
# the model library, the entry points) for size, -Os: 57 KB off the page,
# at the same step time (make bench-web, the two builds in turn, on the
# README's AMD EPYC Zen 5, family 26 model 2).  With
# the ops at -Os as well the page was 80 KB smaller and 1-4% slower.
WEBDIR     = build-web
WEBOBJ     = $(WEBDIR)-obj
EMCC      ?= emcc
WEB_SRC    = $(wildcard src/*.c) $(wildcard src/kernels/wasm_*.c) $(wildcard train/model/*.c) $(wildcard train/web/*.c)
WEB_FAST   = $(filter-out src/safetensors.c src/fileio.c src/bigbuf.c src/tape.c,$(wildcard src/*.c)) \
             $(wildcard src/kernels/wasm_*.c)
WEB_OBJ    = $(WEB_SRC:%.c=$(WEBOBJ)/%.o)
WEB_PAGE   = $(addprefix train/web/,index.html app.js worker.js)
WEB_EXPORT = pg_new pg_set_steps pg_train pg_evaluate pg_eval_begin pg_eval_next pg_attention pg_attention_data pg_complete pg_completion_bytes pg_info pg_save pg_open \
             pg_walkthrough pg_graph pg_error malloc free
WEB_FLAGS  = -std=c11 -D_POSIX_C_SOURCE=200809L -fno-math-errno -ffp-contract=off $(WARN) -msimd128 \
             -DAG_REFERENCE -Iinclude -Isrc $(LAYER_web)
WEB_LINK   = -sENVIRONMENT=web,worker -sMODULARIZE=1 -sEXPORT_NAME=createPlayground -sALLOW_MEMORY_GROWTH=1 -sMALLOC=emmalloc \
             -sERROR_ON_UNDEFINED_SYMBOLS=0 -sEXPORTED_RUNTIME_METHODS=ccall,FS,UTF8ToString \
             -sEXPORTED_FUNCTIONS=$(subst $(space),$(comma),$(strip $(WEB_EXPORT:%=_%)))
comma     := ,
space     := $(subst x,,x x)

web: $(WEBDIR)/playground.js $(WEB_PAGE:train/web/%=$(WEBDIR)/%)
$(WEBOBJ)/%.o: %.c $(wildcard include/*.h src/*.h src/kernels/wasm.h train/model/*.h) Makefile
	@mkdir -p $(dir $@)
	@echo "  EMCC $<"
	@NODE_PATH=/usr/share/nodejs $(EMCC) $(WEB_FLAGS) $(if $(filter $<,$(WEB_FAST)),-O2,-Os) -c $< -o $@
$(WEBDIR)/playground.js: $(WEB_OBJ)
	@mkdir -p $(WEBDIR)
	@echo "  EMCC $@"
	@NODE_PATH=/usr/share/nodejs $(EMCC) -O2 -msimd128 $(WEB_OBJ) -o $@ $(WEB_LINK)
$(WEBDIR)/%: train/web/%
	@mkdir -p $(WEBDIR)
	@cp $< $@

# The page's time per step against the native command's, Dropout 0 and 0.1 (tests/web/bench.js;
# needs Chromium and tests/web's npm package, sh tests/install-deps.sh).
bench-web: web all
	@$(MAKE) -s --no-print-directory REFERENCE=1 all
	@if [ ! -d tests/web/node_modules/playwright-core ]; then \
	    echo "bench-web: skipped: no playwright-core in tests/web/node_modules (sh tests/install-deps.sh)"; exit 0; fi; \
	ATTOGRAD=$(call runnable,$(BUILD)/attograd) ATTOGRAD_REF=$(call runnable,$(BUILDDIR)-ref/attograd) WEBDIR=$(WEBDIR) node tests/web/bench.js

# The browser build's kernels against the reference's, bit for bit, under
# node (tests/web_kernels.sh); the .wasm inside the .js, which node 20
# would otherwise try to fetch.
$(WEBDIR)/kernels.js: tests/web/kernels.c $(filter src/%,$(WEB_SRC)) $(wildcard include/*.h src/*.h src/kernels/wasm.h tests/*.h) Makefile
	@mkdir -p $(WEBDIR)
	@echo "  EMCC $@"
	@NODE_PATH=/usr/share/nodejs $(EMCC) $(WEB_FLAGS) -O2 tests/web/kernels.c $(filter src/%,$(WEB_SRC)) -o $@ \
	    -sENVIRONMENT=node -sSINGLE_FILE=1 -sALLOW_MEMORY_GROWTH=1 -sERROR_ON_UNDEFINED_SYMBOLS=0

web-serve: web
	@echo "serving $(WEBDIR)/ at http://localhost:8000/ (Ctrl-C stops)"
	@cd $(WEBDIR) && python3 -m http.server 8000 --bind 127.0.0.1

run: all
	$(call runnable,$(CLI)) train

# ---- install --------------------------------------------------------------
# The shared library is built from its own position-independent objects
# (pic/), so the command and the static library keep their code as it is.
# attograd.pc carries what a program linking the library needs: the
# precision's define, and the library (with the sanitizers' flags when it
# was built with them: a program linking it links their runtime).  The
# shared library records libm and the threads' library itself (DT_NEEDED),
# so -lm and -pthread are in Libs.private, which `pkg-config --static`
# adds for a link to libattograd.a.
VERSION      = 0.1
SONAME       = libattograd.so.0
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
LIBDIR      ?= $(PREFIX)/lib
INCLUDEDIR  ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
SHLIB        = $(BUILD)/$(SONAME)
PIC_OBJ      = $(LIB_SRC:%.c=$(BUILD)/pic/%.o)
HEADERS      = $(wildcard include/*.h)

# The directories are where the files will live and what attograd.pc tells
# compilers: absolute (a relative one would be taken from this directory,
# and mean nothing to pkg-config's users), without whitespace (make splits
# it into words, and `$$(pkg-config --cflags attograd)` would split the
# -I), and without the characters the recipes' shell quoting or pkg-config
# reads as syntax: ' " ` \ $ (a quote wrote the files elsewhere before the
# shell stopped) and # (attograd.pc's comment: /tmp/a#b gave -I/tmp/a).  Refused
# before anything is built or written.  DESTDIR, which only stages the
# files, may hold spaces, ' and #, not what the recipes' double quotes
# read: " ` \ $.
install_unsafe = $(or $(filter-out 1,$(words $(1))),$(filter-out /%,$(1)),$(findstring ',$(1)),$(findstring ",$(1)),\
                      $(findstring `,$(1)),$(findstring \,$(1)),$(findstring $$,$(1)),$(findstring $(hash),$(1)))
hash := \#
ifneq ($(filter install uninstall,$(MAKECMDGOALS)),)
$(foreach d,PREFIX BINDIR LIBDIR INCLUDEDIR PKGCONFIGDIR,$(if $(call install_unsafe,$($(d))),\
    $(error $(d)='$($(d))': make install and uninstall need an absolute path without spaces or any of ' " ` \ $$ $(hash))))
$(if $(or $(findstring ",$(DESTDIR)),$(findstring `,$(DESTDIR)),$(findstring \,$(DESTDIR)),$(findstring $$,$(DESTDIR))),\
    $(error DESTDIR='$(DESTDIR)': make install and uninstall need a path without any of " ` \ $$))
endif

$(BUILD)/pic/src/%.o: src/%.c $(wildcard include/*.h src/*.h src/kernels/*.h) Makefile $(BUILD)/flags
	@mkdir -p $(dir $@)
	@echo "  CC  $@"
	@$(CC) $(LIBCFLAGS) -fPIC -c $< -o $@

$(SHLIB): $(PIC_OBJ)
	@echo "  LD  $@"
	@$(CC) -shared -Wl,-soname,$(SONAME) $(CFLAGS) $(SAN) $^ -o $@ $(LDLIBS)

$(BUILD)/attograd.pc: $(BUILD)/flags FORCE
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
	    'Name: attograd' 'Description: reverse-mode autograd engine in C11 with the ops of multi-head attention' \
	    'Version: $(VERSION)' 'Cflags: -I$${includedir} $(PRECFLAGS)' \
	    '$(strip Libs: -L$${libdir} -lattograd $(SAN))' 'Libs.private: $(LDLIBS)' >$@

install: all $(SHLIB) $(BUILD)/attograd.pc
	install -d "$(DESTDIR)$(BINDIR)" "$(DESTDIR)$(LIBDIR)" "$(DESTDIR)$(INCLUDEDIR)" "$(DESTDIR)$(PKGCONFIGDIR)"
	install -m 755 $(CLI) "$(DESTDIR)$(BINDIR)/attograd"
	install -m 644 $(LIB) "$(DESTDIR)$(LIBDIR)/libattograd.a"
	install -m 755 $(SHLIB) "$(DESTDIR)$(LIBDIR)/$(SONAME)"
	ln -sf $(SONAME) "$(DESTDIR)$(LIBDIR)/libattograd.so"
	install -m 644 $(HEADERS) "$(DESTDIR)$(INCLUDEDIR)/"
	install -m 644 $(BUILD)/attograd.pc "$(DESTDIR)$(PKGCONFIGDIR)/attograd.pc"

uninstall:
	rm -f "$(DESTDIR)$(BINDIR)/attograd" "$(DESTDIR)$(LIBDIR)/libattograd.a" "$(DESTDIR)$(LIBDIR)/$(SONAME)" \
	    "$(DESTDIR)$(LIBDIR)/libattograd.so" $(HEADERS:include/%="$(DESTDIR)$(INCLUDEDIR)/%") \
	    "$(DESTDIR)$(PKGCONFIGDIR)/attograd.pc"

# The pictures in data/, drawn by the command as the README shows (the
# copy task's default run, then attn); tests/cli_viz.sh fails when one is
# out of date.  PICTURES_DIR=DIR draws them there instead.
PICTURES_DIR ?= data
pictures: all
	@t=$$(mktemp -d) && trap 'rm -rf "$$t"' EXIT && \
	$(call runnable,$(CLI)) train --quiet --save $$t/copy.st >/dev/null && \
	$(call runnable,$(CLI)) attn --model $$t/copy.st --prompt 'gbjdaifc|gbjdaifc' --out $(PICTURES_DIR)/attention-copy.svg

clean:
	rm -rf build build-double build-ref build-ref-double build-asan build-asan-double build-asan-ref \
	    build-asan-ref-double build-fuzz build-valgrind build-valgrind-double build-mpi build-asan-mpi \
	    build-web build-web-obj build-clang build-clang-double build-tsan
