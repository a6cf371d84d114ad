# attograd - build the library, the CLI and the tests.
#
#   make                    build/libattograd.a and build/attograd (float)
#   make PRECISION=double   the same in build-double/ (used by the gradient checks)
#   make test               every test; ends with "N passed, N failed"
#   make run                build and train the default toy model
#   make test-asan          the suite under AddressSanitizer + UBSan
#   make bench              speed against PyTorch on the same models
#   make CC=clang           any C11 compiler; never -ffast-math (masking needs inf)

CC        ?= cc
PRECISION ?= float
ARCH      ?= -march=native
OPT       ?= -O3
SAN       ?=

BUILDDIR  ?= build
ifeq ($(PRECISION),double)
BUILD      = $(BUILDDIR)-double
PRECFLAGS  = -DAG_DOUBLE
else
BUILD      = $(BUILDDIR)
PRECFLAGS  =
endif

# OpenMP where the compiler has it (gcc does; Debian's clang needs libomp-dev).
OPENMP := $(shell printf 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo -fopenmp)

WARN     = -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unknown-pragmas
CFLAGS  ?= $(OPT) $(ARCH) -g
ALLCFLAGS = -std=c11 -D_POSIX_C_SOURCE=200809L -fno-math-errno $(WARN) $(CFLAGS) $(OPENMP) $(PRECFLAGS) $(SAN) -Iinclude -Isrc -Itrain
LDLIBS   = -lm

LIB_SRC   = $(wildcard src/*.c)
LIB_OBJ   = $(LIB_SRC:%.c=$(BUILD)/%.o)
TRAIN_SRC = $(filter-out train/main.c,$(wildcard train/*.c))
TRAIN_OBJ = $(TRAIN_SRC:%.c=$(BUILD)/%.o)
TEST_SRC  = $(wildcard tests/test_*.c)
TEST_BIN  = $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
CLI       = $(BUILD)/attograd
LIB       = $(BUILD)/libattograd.a
TRAINLIB  = $(BUILD)/libtrain.a

.PHONY: all lib tests test test-asan run bench bench-gemm fuzz clean
all: $(LIB) $(if $(wildcard train/main.c),$(CLI))
lib: $(LIB)

$(BUILD)/%.o: %.c $(wildcard include/*.h src/*.h train/*.h) Makefile
	@mkdir -p $(dir $@)
	@echo "  CC  $@"
	@$(CC) $(ALLCFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(TRAINLIB): $(TRAIN_OBJ)
	@rm -f $@
	@ar rcs $@ $^

$(CLI): $(BUILD)/train/main.o $(TRAINLIB) $(LIB)
	@echo "  LD  $@"
	@$(CC) $(ALLCFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/check.h tests/gradcheck.h $(TRAINLIB) $(LIB)
	@mkdir -p $(dir $@)
	@echo "  LD  $@"
	@$(CC) $(ALLCFLAGS) $< $(TRAINLIB) $(LIB) -o $@ $(LDLIBS)

tests: $(TEST_BIN)

# The float build's tests, then the double build's (gradient checks run in
# double precision), then the shell and Python suites, all added up by run.sh.
test:
	@$(MAKE) -s --no-print-directory all tests
	@$(MAKE) -s --no-print-directory PRECISION=double all tests
	@ATTOGRAD=./$(BUILDDIR)/attograd sh tests/run.sh $(TEST_SRC:tests/%.c=$(BUILDDIR)/tests/%) \
	    $(TEST_SRC:tests/%.c=$(BUILDDIR)-double/tests/%) $(wildcard tests/cli_*.sh) $(wildcard tests/py_*.sh)

# The same suite with every C test and the CLI under ASan + UBSan.
test-asan:
	@$(MAKE) -s --no-print-directory test BUILDDIR=build-asan OPT=-O1 \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"

# Speed against PyTorch on the same three models (tests/bench.sh).
bench: all
	@sh tests/bench.sh

# The matmul kernel alone against OpenBLAS sgemm (needs libopenblas-dev).
bench-gemm: $(LIB)
	@$(CC) $(ALLCFLAGS) tests/bench_gemm.c $(LIB) -o $(BUILD)/bench_gemm -lopenblas $(LDLIBS)
	OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 $(BUILD)/bench_gemm 2

# libFuzzer on the checkpoint reader (clang), seeded with tests/corpus/.
FUZZ_TIME ?= 60
fuzz:
	@mkdir -p build-fuzz/corpus-st
	clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -std=c11 \
	    -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc tests/fuzz_safetensors.c src/safetensors.c \
	    -o build-fuzz/fuzz_safetensors
	./build-fuzz/fuzz_safetensors build-fuzz/corpus-st tests/corpus/safetensors \
	    -dict=tests/fuzz_safetensors.dict -max_total_time=$(FUZZ_TIME)

run: all
	./$(CLI) train

clean:
	rm -rf build build-double build-asan build-asan-double build-fuzz
