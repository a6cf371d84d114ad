# attograd - build the library, the CLI and the tests.
#
#   make                    build/libattograd.a and build/attograd (float)
#   make PRECISION=double   the same in build-double/ (used by the gradient checks)
#   make REFERENCE=1        the same from the plain reference kernels alone
#                           (src/reference.c; no src/kernels/, no OpenMP) in build-ref/
#   make MPI=1              the same with mpicc in build-mpi/: `mpirun -np N
#                           build-mpi/attograd train ...` trains on N ranks
#   make test               every test; ends with "N passed, N failed"
#   make run                build and train the default toy model
#   make test-asan          the suite under AddressSanitizer + UBSan
#   make bench              speed against PyTorch on the same models
#   make bench-gemm         the matrix multiply alone against OpenBLAS sgemm
#   make bench-scale        time and memory from context 256 to 4096, GPT-2-small shape
#   make bench-busy         training beside busy processes, threads against one thread
#   make bench-mpi          2 ranks x 1 thread against 1 rank x 2 threads (needs Open MPI)
#   make CC=clang           any C11 compiler; no fast-math flags ever (masking needs inf)

CC        ?= cc
PRECISION ?= float
ARCH      ?= -march=native
OPT       ?= -O3
SAN       ?=

REFERENCE ?=
MPI       ?=

BUILDDIR  ?= build
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
OPENMP    :=
else
KIND       =
KERNFLAGS  =
KERNEL_SRC = $(wildcard src/kernels/*.c)
# OpenMP where the compiler has it (gcc does; Debian's clang needs libomp-dev).
OPENMP    := $(shell printf 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo -fopenmp)
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
LIBCFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -fno-math-errno -ffp-contract=off $(WARN) $(CFLAGS) $(OPENMP) $(PRECFLAGS) $(KERNFLAGS) \
            $(SAN) -Iinclude -Isrc
ALLCFLAGS = $(LIBCFLAGS) $(MPIFLAGS) -Itrain/model -Itrain/dist -Itrain/cli
# train/'s layers include only downward: each folder is compiled seeing
# itself and the folders below it (train/README.md), so an include that goes
# up does not compile.  main.c, the tests and the benchmarks see them all.
LAYER_model = -Itrain/model
LAYER_dist  = -Itrain/dist -Itrain/model
LAYER_cli   = -Itrain/cli -Itrain/dist -Itrain/model
layer_flags = $(LIBCFLAGS) $(MPIFLAGS) $(or $(LAYER_$(word 2,$(subst /, ,$(1)))),-Itrain/model -Itrain/dist -Itrain/cli)
LDLIBS   = -lm

LIB_SRC   = $(wildcard src/*.c) $(KERNEL_SRC)
LIB_OBJ   = $(LIB_SRC:%.c=$(BUILD)/%.o)
TRAIN_SRC = $(wildcard train/model/*.c train/dist/*.c train/cli/*.c)
TRAIN_OBJ = $(TRAIN_SRC:%.c=$(BUILD)/%.o)
TEST_SRC  = $(wildcard tests/test_*.c)
TEST_BIN  = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
CLI       = $(BUILD)/attograd
LIB       = $(BUILD)/libattograd.a
TRAINLIB  = $(BUILD)/libtrain.a

.PHONY: all lib tests test test-asan run bench bench-busy bench-gemm bench-mpi bench-scale fuzz fuzz-replay clean
all: $(LIB) $(if $(wildcard train/main.c),$(CLI))
lib: $(LIB)

$(BUILD)/src/%.o: src/%.c $(wildcard include/*.h src/*.h src/kernels/*.h) Makefile
	@mkdir -p $(dir $@)
	@echo "  CC  $@"
	@$(CC) $(LIBCFLAGS) -c $< -o $@

$(BUILD)/train/%.o: train/%.c $(wildcard include/*.h train/*/*.h) Makefile
	@mkdir -p $(dir $@)
	@echo "  CC  $@"
	@$(CC) $(call layer_flags,$<) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(TRAINLIB): $(TRAIN_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(CLI): $(BUILD)/train/main.o $(TRAINLIB) $(LIB)
	@echo "  LD  $@"
	@$(CC) $(ALLCFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(TRAINLIB) $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(ALLCFLAGS) -I$(BUILD)/tests $< $(TRAINLIB) $(LIB) -o $@ $(LDLIBS)

# The usage example that opens include/attograd.h, as compilable C: the
# comment's indented lines between "Example:" and its end.
$(BUILD)/tests/header_example.inc: include/attograd.h
	@mkdir -p $(dir $@)
	@sed -n '/^ \* Example:/,/^ \*\//p' $< | sed -n 's/^ \*     //p' >$@
$(BUILD)/tests/test_example: $(BUILD)/tests/header_example.inc

tests: $(TEST_BIN)

# The float build's tests, then the double build's (gradient checks run in
# double precision), then the reference build's in double (the same checks on
# the plain kernels of src/reference.c), then the shell and Python suites
# (tests/cli_reference.sh trains with the reference build's CLI,
# tests/cli_mpi.sh with the MPI build's, made when mpicc and mpirun exist),
# all added up by run.sh.
REFDIR = $(BUILDDIR)-ref
HAVE_MPI := $(shell command -v mpicc >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1 && echo 1)
test:
	@$(MAKE) -s --no-print-directory all tests
	@$(MAKE) -s --no-print-directory PRECISION=double all tests
	@$(MAKE) -s --no-print-directory REFERENCE=1 PRECISION=double all tests
	@$(MAKE) -s --no-print-directory REFERENCE=1 all
	@$(if $(HAVE_MPI),$(MAKE) -s --no-print-directory MPI=1 all,true)
	@ATTOGRAD=./$(BUILDDIR)/attograd ATTOGRAD_REF=./$(REFDIR)/attograd ATTOGRAD_MPI=./$(BUILDDIR)-mpi/attograd \
	    sh tests/run.sh \
	    $(TEST_SRC:tests/%.c=$(BUILDDIR)/tests/%) $(TEST_SRC:tests/%.c=$(BUILDDIR)-double/tests/%) \
	    $(TEST_SRC:tests/%.c=$(REFDIR)-double/tests/%) $(wildcard tests/cli_*.sh) $(wildcard tests/py_*.sh)

# The same suite with every C test and the CLI under ASan + UBSan.  The
# learning runs, minutes long under the sanitizers, are skipped there
# (ATTOGRAD_QUICK); everything else runs.  -O2, not less: from -O2 the
# compilers fuse the matrix multiply's multiply-adds, and the attention's
# backward relies on sums that round as the multiply's do.
test-asan:
	@ATTOGRAD_QUICK=1 $(MAKE) -s --no-print-directory test BUILDDIR=build-asan OPT=-O2 \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"

# Speed against PyTorch on the same three models (tests/bench.sh).
bench: all
	@sh tests/bench.sh

# Time and memory as the context grows, GPT-2-small shape, sampling speed
# (tests/bench_scale.sh; a few minutes).
bench-scale: all
	@sh tests/bench_scale.sh

# Training beside one busy loop per core (tests/bench_busy.sh).
bench-busy: all
	@sh tests/bench_busy.sh

# Data parallelism on this machine: 2 ranks x 1 thread against 1 rank x 2
# threads (tests/bench_mpi.sh; skipped without Open MPI).
bench-mpi:
	@sh tests/bench_mpi.sh

# The matmul kernel alone against OpenBLAS sgemm (needs libopenblas-dev), which
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

# libFuzzer (clang) on the checkpoint reader, the text reader and the argument
# parser, FUZZ_TIME seconds each, seeded with tests/corpus/<name>/; new inputs
# go to build-fuzz/corpus-*, crashes to build-fuzz/.  fuzz-replay runs each
# harness once over its saved corpus only (a regression test).
FUZZ_TIME ?= 60
FUZZ_CC    = clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c11 \
             -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc -Itrain/model -Itrain/dist -Itrain/cli
FUZZERS    = build-fuzz/fuzz_safetensors build-fuzz/fuzz_text build-fuzz/fuzz_args
FUZZ_RUN   = -max_total_time=$(FUZZ_TIME) -artifact_prefix=build-fuzz/ -print_final_stats=1

build-fuzz/fuzz_safetensors: tests/fuzz_safetensors.c src/safetensors.c src/fileio.c include/attograd.h
	@mkdir -p build-fuzz
	$(FUZZ_CC) tests/fuzz_safetensors.c src/safetensors.c src/fileio.c -o $@
build-fuzz/fuzz_text: tests/fuzz_text.c train/model/tasks.c train/model/tasks.h src/pcg32.c src/fileio.c
	@mkdir -p build-fuzz
	$(FUZZ_CC) tests/fuzz_text.c train/model/tasks.c src/pcg32.c src/fileio.c -o $@
build-fuzz/fuzz_args: tests/fuzz_args.c train/cli/args.c train/cli/args.h
	@mkdir -p build-fuzz
	$(FUZZ_CC) tests/fuzz_args.c train/cli/args.c -o $@

fuzz: $(FUZZERS)
	@mkdir -p build-fuzz/corpus-st build-fuzz/corpus-text build-fuzz/corpus-args
	./build-fuzz/fuzz_safetensors build-fuzz/corpus-st tests/corpus/safetensors \
	    -dict=tests/fuzz_safetensors.dict $(FUZZ_RUN)
	./build-fuzz/fuzz_text build-fuzz/corpus-text tests/corpus/text $(FUZZ_RUN)
	./build-fuzz/fuzz_args build-fuzz/corpus-args tests/corpus/args -close_fd_mask=3 $(FUZZ_RUN)

fuzz-replay: $(FUZZERS)
	./build-fuzz/fuzz_safetensors -runs=0 tests/corpus/safetensors
	./build-fuzz/fuzz_text -runs=0 tests/corpus/text
	./build-fuzz/fuzz_args -runs=0 -close_fd_mask=3 tests/corpus/args

run: all
	./$(CLI) train

clean:
	rm -rf build build-double build-ref build-ref-double build-asan build-asan-double build-asan-ref \
	    build-asan-ref-double build-fuzz build-valgrind build-valgrind-double build-mpi build-asan-mpi
