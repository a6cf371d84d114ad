/*
 * bench_blas.c - which OpenBLAS core this process runs, and how fast its
 * sgemm is: the probe tests/bench_blas.sh runs once per OPENBLAS_CORETYPE
 * candidate to pick the reference's fastest kernels.
 * Usage: bench_blas [threads [n]] (defaults 2, 1024).  Prints one line,
 *   core NAME GFLOP/s X
 * where X is the best of several timings of a row-major n x n x n sgemm
 * (the best, not the median: it asks what the kernels can do, and a busy
 * machine only ever makes a timing slower).  Exit 3 if there is no OpenBLAS.
 *
 * The library is opened at run time (libopenblas.so.0, or $BENCH_OPENBLAS),
 * so the probe builds without OpenBLAS's headers and reports cleanly when
 * the library is missing.  OpenBLAS reads OPENBLAS_CORETYPE when it loads:
 * set it in the environment before starting this program.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta,
                         float *c, int ldc);
enum { ROW_MAJOR = 101, NO_TRANS = 111 };   /* the CBLAS enum values */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    int n = argc > 2 ? atoi(argv[2]) : 1024;
    if (threads < 1 || n < 1) {
        fprintf(stderr, "usage: bench_blas [threads [n]]\n");
        return 2;
    }
    const char *lib = getenv("BENCH_OPENBLAS");
    if (!lib || !*lib)
        lib = "libopenblas.so.0";
    void *h = dlopen(lib, RTLD_NOW);
    if (!h) {
        fprintf(stderr, "bench_blas: cannot open %s: %s\n", lib, dlerror());
        return 3;
    }
    sgemm_fn sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
    char *(*corename)(void) = (char *(*)(void))dlsym(h, "openblas_get_corename");
    void (*set_threads)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    if (!sgemm || !corename || !set_threads) {
        fprintf(stderr, "bench_blas: %s is not OpenBLAS (no cblas_sgemm, openblas_get_corename "
                "or openblas_set_num_threads)\n", lib);
        return 3;
    }
    set_threads(threads);

    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "bench_blas: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)(i % 7) * 0.25f - 0.75f;
        b[i] = (float)(i % 5) * 0.25f - 0.5f;
    }
    /* Warm up (pages, buffers, threads), then time for about 0.25 s of
     * repetitions or at least 5 of them, keeping the fastest. */
    sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, n, n, n, 1, a, n, b, n, 0, c, n);
    double best = 0, start = now();
    for (int r = 0; r < 5 || (now() - start < 0.25 && r < 1000); r++) {
        double t0 = now();
        sgemm(ROW_MAJOR, NO_TRANS, NO_TRANS, n, n, n, 1, a, n, b, n, 0, c, n);
        double t = now() - t0;
        if (t > 0 && 2.0 * n * n * (double)n / t > best)
            best = 2.0 * n * n * (double)n / t;
    }
    printf("core %s GFLOP/s %.1f\n", corename(), best * 1e-9);
    free(a);
    free(b);
    free(c);
    return 0;
}
