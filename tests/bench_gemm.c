/*
 * bench_gemm.c - GFLOP/s of ag_gemm against OpenBLAS on square products and
 * on the shapes transformers run (projections, their backward passes,
 * per-head attention products), down to the toy model's 512 x 64 x 64; and
 * of the bf16 product (ag_fast_gemm_bf16: bf16 inputs, fp32 sums) on the same
 * shapes, when the CPU has a bf16 kernel and the build is float.
 * Usage: bench_gemm [threads] (default 2); BENCH_GEMM_STAT=best reports
 * each figure's fastest timing instead of the median (a busy machine).
 * The two libraries are timed in turn (see measure_in_turn);
 * BENCH_GEMM_SAME=attograd (or openblas) times that library in both
 * places, which checks the method: every ratio should then be near 1.
 *
 * Each figure is also given as a fraction of the ceiling bench_ceiling.h
 * measures first: a register-only loop of the instruction the kernel is
 * made of (fp32: vfmadd231ps; bf16: vdpbf16ps, or tdpbf16ps with AMX) on
 * the same threads.
 *
 * OpenBLAS picks its kernels when it loads, from cpuid or OPENBLAS_CORETYPE;
 * `make bench-gemm` sets OPENBLAS_CORETYPE to the fastest core type
 * tests/bench_blas.sh finds on this CPU.  This prints the core in use, and
 * the cache blocking attograd chose from the caches cpuid reports.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "bench_ceiling.h"
#include "kernels.h"
#include "kernels/cpu.h"
#include "kernels/fast.h"
#include "kernels/gemm_bf16.h"
#include "pool.h"

#ifdef AG_DOUBLE
#define BLAS_GEMM cblas_dgemm
#else
#define BLAS_GEMM cblas_sgemm
#endif

typedef struct {
    const char *what;
    int batch, ta, tb, M, N, K;
    double ours, blas, bf16;   /* median GFLOP/s */
    double ratio;              /* ours / OpenBLAS: the median of the rounds' ratios */
    int blas_items;            /* a batch's items split between our threads, one OpenBLAS thread each */
} shape;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    ag_real *A, *B, *C;
} operands;

enum { USE_OURS, USE_BLAS, USE_BLAS_ITEMS, USE_BF16 };

/* Item b of a batch, for ag_parallel: by our bf16 kernel or by OpenBLAS. */
typedef struct {
    const shape *s;
    const operands *o;
    int which;
} item_call;

static void run_item(void *ctx, int b)
{
    const item_call *c = ctx;
    const shape *s = c->s;
    const operands *o = c->o;
    int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N, ldc = s->N;
    long sa = (long)s->M * s->K, sb = (long)s->K * s->N, sc = (long)s->M * s->N;
#ifndef AG_DOUBLE
    if (c->which == USE_BF16) {
        ag_fast_gemm_bf16(s->ta, s->tb, s->M, s->N, s->K, o->A + b * sa, lda, o->B + b * sb, ldb, 0,
                          o->C + b * sc, ldc);
        return;
    }
#endif
    BLAS_GEMM(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->M, s->N,
              s->K, 1, o->A + b * sa, lda, o->B + b * sb, ldb, 0, o->C + b * sc, ldc);
}

/* Operands as the engine stores them: op(A) is A[M,K] or A[K,M]^T, etc.,
 * densely packed (ld = row width), batch items back to back. */
static void run_once(const shape *s, const operands *o, int which)
{
    int lda = s->ta ? s->M : s->K, ldb = s->tb ? s->K : s->N, ldc = s->N;
    long sa = (long)s->M * s->K, sb = (long)s->K * s->N, sc = (long)s->M * s->N;
#ifndef AG_DOUBLE
    if (which == USE_BF16) {
        /* no batched bf16 entry point: the items in parallel, each on one
         * thread (as the attention op calls products from its threads) */
        if (s->batch == 1) {
            ag_fast_gemm_bf16(s->ta, s->tb, s->M, s->N, s->K, o->A, lda, o->B, ldb, 0, o->C, ldc);
            return;
        }
        item_call c = { s, o, which };
        ag_parallel(s->batch, ag_get_threads(), run_item, &c);
        return;
    }
#endif
    if (which == USE_OURS) {
        if (s->batch == 1)
            ag_kern->gemm(s->ta, s->tb, s->M, s->N, s->K, o->A, lda, o->B, ldb, 0, o->C, ldc);
        else
            ag_kern->gemm_batched(s->batch, s->ta, s->tb, s->M, s->N, s->K, o->A, sa, lda, o->B, sb,
                            ldb, 0, o->C, sc, ldc);
        return;
    }
    /* OpenBLAS has no batched call: its items one after another, each on
     * OpenBLAS's threads, or (USE_BLAS_ITEMS) split between our threads
     * as ours are, each on one OpenBLAS thread; measure() keeps the faster */
    item_call c = { s, o, which };
    ag_parallel(s->batch, which == USE_BLAS_ITEMS ? ag_get_threads() : 1, run_item, &c);
}

/* BENCH_GEMM_STAT=best: the fastest of 51 short timings instead of the
 * median of 11, for a machine shared with other work, where the median measures
 * the others' load as much as the product and the fastest run is the one
 * least disturbed. */
static int stat_best(void)
{
    const char *s = getenv("BENCH_GEMM_STAT");
    return s && strcmp(s, "best") == 0;
}

/* Repetitions of one call that take at least 5 ms (a reliable median), or
 * 0.5 ms for the fastest of many (shorter timings are more often spared
 * by the other work of a busy machine), after a first call that pages in,
 * grows buffers and wakes threads. */
static int reps_for(const shape *s, const operands *o, int which)
{
    const double least = stat_best() ? 5e-4 : 5e-3;
    run_once(s, o, which);
    int reps = 1;
    for (double t = 0; reps < (1 << 20); reps *= 2) {
        double t0 = now();
        for (int r = 0; r < reps; r++) run_once(s, o, which);
        t = now() - t0;
        if (t > least) break;
    }
    return reps;
}

/* GFLOP/s of one timing of reps calls */
static double rate_of(const shape *s, const operands *o, int which, int reps)
{
    double t0 = now();
    for (int r = 0; r < reps; r++) run_once(s, o, which);
    return 2.0 * s->batch * s->M * s->N * s->K * reps / (now() - t0) * 1e-9;
}

/* Timings per figure: the median of 11, or the fastest of 51. */
static int timings(void) { return stat_best() ? 51 : 11; }

/* Median (or fastest) GFLOP/s over timings() timings. */
static double measure(const shape *s, const operands *o, int which)
{
    const int reps = reps_for(s, o, which), n = timings();
    double rate[51];
    for (int m = 0; m < n; m++) rate[m] = rate_of(s, o, which, reps);
    qsort(rate, (size_t)n, sizeof rate[0], cmp_double);
    return stat_best() ? rate[n - 1] : rate[n / 2];
}

/* Waits until no thread of the process is polling for work: OpenBLAS's
 * workers spin for a while after each call (about 120 ms on the Emerald
 * Rapids of the README: a count of cycles, so longer on a slower clock),
 * ours for well under a millisecond.  Done when a 5 ms nap costs the process
 * under 0.5 ms of CPU time; at most a second. */
static void quiet(void)
{
    for (int i = 0; i < 200; i++) {
        struct timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        nanosleep(&(struct timespec){0, 5000000}, NULL);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        if ((double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec) < 5e-4) return;
    }
}

/* Calls for 20 ms, untimed: the library's threads awake and polling, its
 * operands in cache, the core out of its idle state (with one untimed call
 * instead, our small products, first after quiet()'s naps, came out at
 * half the rate of the runs before and after: toy logits 97 GFLOP/s
 * against 214-220, on the README's Emerald Rapids). */
static void warm_up(const shape *s, const operands *o, int which)
{
    for (double t0 = now(); now() - t0 < 0.02;) run_once(s, o, which);
}

/* Which library BENCH_GEMM_SAME names for both places, or -1. */
static int same_library(void)
{
    const char *v = getenv("BENCH_GEMM_SAME");
    if (!v || !*v) return -1;
    return strcmp(v, "openblas") == 0 ? USE_BLAS : USE_OURS;
}

/* Ours and OpenBLAS's timings taken in turn, a round each, so both see the
 * same moments of a machine whose speed drifts (an Emerald Rapids under
 * KVM by up to 2x within minutes: timed all of one library, then all of
 * the other, its 1024^3 ratio came out 1.23 in a run where the rounds'
 * ratios in turn were 0.93-0.95).  OpenBLAS's worker keeps polling for
 * about 120 ms after each call (yielding the core, but still: a 768 x 512
 * x 128 product of ours ran at half speed beside it), so each round starts
 * once the process is quiet, then each library warms up and is timed.  The
 * figures: the median of 11 rounds each (fastest of 51 with
 * BENCH_GEMM_STAT=best), and the ratio the median of the rounds' ratios
 * (the fastest over the fastest). */
static void measure_in_turn(shape *s, const operands *o, int threads)
{
    int first = USE_OURS, second = s->blas_items ? USE_BLAS_ITEMS : USE_BLAS;
    if (same_library() >= 0) first = second = same_library() == USE_BLAS ? second : USE_OURS;
    const int n = timings();
    if (s->blas_items) openblas_set_num_threads(1);
    const int ro = reps_for(s, o, first), rb = reps_for(s, o, second);
    double ours[51], blas[51], ratio[51];
    for (int m = 0; m < n; m++) {
        quiet();
        warm_up(s, o, first);
        ours[m] = rate_of(s, o, first, ro);
        warm_up(s, o, second);
        blas[m] = rate_of(s, o, second, rb);
        ratio[m] = ours[m] / blas[m];
    }
    if (s->blas_items) openblas_set_num_threads(threads);
    qsort(ours, (size_t)n, sizeof ours[0], cmp_double);
    qsort(blas, (size_t)n, sizeof blas[0], cmp_double);
    qsort(ratio, (size_t)n, sizeof ratio[0], cmp_double);
    s->ours = stat_best() ? ours[n - 1] : ours[n / 2];
    s->blas = stat_best() ? blas[n - 1] : blas[n / 2];
    s->ratio = stat_best() ? s->ours / s->blas : ratio[n / 2];
}

static void fill(ag_real *x, size_t n)
{
    unsigned s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        x[i] = (ag_real)((int)(s >> 16 & 1023) - 512) / 512;
    }
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    if (threads < 1) {
        fprintf(stderr, "bench_gemm: thread count must be >= 1\n");
        return 2;
    }
    ag_set_threads(threads);
    openblas_set_num_threads(threads);
    /* OpenBLAS's new worker threads busy-wait for work for a while (~0.1 s)
     * and would take a core from ours during the first measurements. */
    nanosleep(&(struct timespec){0, 500000000}, NULL);
    /* the ceilings first, before any library's threads exist or poll, and
     * again at the end (below): the higher counts, the other work of a
     * shared machine having lowered the other */
    double fp32_ceiling = ceiling_fp32(threads);
    double bf16_ceiling = ag_bf16_available() ? ceiling_bf16(ag_cpu_bf16(), threads) : 0;

    /* rows = batch*seq (e.g. 16 x 256 = 4096), d_model 128..512, MLP 4*d */
    shape shapes[] = {
        {"square", 1, 0, 0, 256, 256, 256, 0, 0, 0, 0, 0},
        {"square", 1, 0, 0, 512, 512, 512, 0, 0, 0, 0, 0},
        {"square", 1, 0, 0, 1024, 1024, 1024, 0, 0, 0, 0, 0},
        {"linear x W^T", 1, 0, 1, 4096, 384, 128, 0, 0, 0, 0, 0},
        {"linear x W^T", 1, 0, 1, 4096, 1536, 384, 0, 0, 0, 0, 0},
        {"linear x W^T", 1, 0, 1, 4096, 384, 1536, 0, 0, 0, 0, 0},
        {"linear x W^T", 1, 0, 1, 512, 512, 512, 0, 0, 0, 0, 0},
        {"dx = dy W", 1, 0, 0, 4096, 384, 1536, 0, 0, 0, 0, 0},
        {"dx = dy W", 1, 0, 0, 4096, 128, 384, 0, 0, 0, 0, 0},
        {"dW = dy^T x", 1, 1, 0, 1536, 384, 4096, 0, 0, 0, 0, 0},
        {"dW = dy^T x", 1, 1, 0, 128, 128, 4096, 0, 0, 0, 0, 0},
        {"dW = dy^T x", 1, 1, 0, 64, 256, 512, 0, 0, 0, 0, 0},
        {"attn q k^T", 256, 0, 1, 32, 32, 16, 0, 0, 0, 0, 0},
        {"attn p v", 256, 0, 0, 32, 16, 32, 0, 0, 0, 0, 0},
        {"attn q k^T", 128, 0, 1, 64, 64, 32, 0, 0, 0, 0, 0},
        {"attn q k^T", 32, 0, 1, 256, 256, 64, 0, 0, 0, 0, 0},
        {"attn p v", 32, 0, 0, 256, 64, 256, 0, 0, 0, 0, 0},
        {"attn dp^T", 32, 1, 0, 256, 64, 256, 0, 0, 0, 0, 0},
        /* the toy model (B 16, T 32, d 64, 4 heads, vocab 65) and the small
         * one (B 12, T 64, d 128, MLP 512), as the engine calls them */
        {"toy x W^T", 1, 0, 1, 512, 64, 64, 0, 0, 0, 0, 0},
        {"toy logits", 1, 0, 1, 512, 65, 64, 0, 0, 0, 0, 0},
        {"toy dx = dy W", 1, 0, 0, 512, 64, 64, 0, 0, 0, 0, 0},
        {"toy dW", 1, 1, 0, 64, 64, 512, 0, 0, 0, 0, 0},
        {"toy dW logits", 1, 1, 0, 65, 64, 512, 0, 0, 0, 0, 0},
        {"toy q k^T", 64, 0, 0, 32, 32, 16, 0, 0, 0, 0, 0},
        {"toy p v", 64, 0, 0, 32, 16, 32, 0, 0, 0, 0, 0},
        {"toy dp", 64, 0, 1, 32, 32, 16, 0, 0, 0, 0, 0},
        {"toy dq", 64, 0, 1, 32, 16, 32, 0, 0, 0, 0, 0},
        {"toy dk^T", 64, 1, 0, 16, 32, 32, 0, 0, 0, 0, 0},
        {"small x W^T", 1, 0, 1, 768, 128, 128, 0, 0, 0, 0, 0},
        {"small MLP up", 1, 0, 1, 768, 512, 128, 0, 0, 0, 0, 0},
        {"small MLP down", 1, 0, 1, 768, 128, 512, 0, 0, 0, 0, 0},
        {"small dx up", 1, 0, 0, 768, 128, 512, 0, 0, 0, 0, 0},
        {"small dW", 1, 1, 0, 128, 128, 768, 0, 0, 0, 0, 0},
        {"small dW up", 1, 1, 0, 512, 128, 768, 0, 0, 0, 0, 0},
        {"small q k^T", 48, 0, 0, 64, 64, 32, 0, 0, 0, 0, 0},
        {"small p v", 48, 0, 0, 64, 32, 64, 0, 0, 0, 0, 0},
    };
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);

    size_t most = 0;
    for (int i = 0; i < ns; i++) {
        const shape *s = &shapes[i];
        size_t big = (size_t)s->batch * s->M * s->K;
        if ((size_t)s->batch * s->K * s->N > big) big = (size_t)s->batch * s->K * s->N;
        if ((size_t)s->batch * s->M * s->N > big) big = (size_t)s->batch * s->M * s->N;
        if (big > most) most = big;
    }
    operands o = {malloc(most * sizeof(ag_real)), malloc(most * sizeof(ag_real)),
                  malloc(most * sizeof(ag_real))};
    if (!o.A || !o.B || !o.C) {
        fprintf(stderr, "bench_gemm: out of memory\n");
        return 1;
    }
    fill(o.A, most);
    fill(o.B, most);

    /* bf16 only in the float build, and only with a kernel for it. */
#ifdef AG_DOUBLE
    const int bf16 = 0;
#else
    const int bf16 = ag_bf16_available();
#endif
    /* A batch runs on OpenBLAS its faster way: its items one after another
     * on OpenBLAS's threads, or split between our threads with one
     * OpenBLAS thread each, as ours split them (one measurement of each
     * first, OpenBLAS alone). */
    for (int i = 0; threads > 1 && i < ns; i++)
        if (shapes[i].batch > 1) {
            const double own = measure(&shapes[i], &o, USE_BLAS);
            openblas_set_num_threads(1);
            shapes[i].blas_items = measure(&shapes[i], &o, USE_BLAS_ITEMS) > own;
            openblas_set_num_threads(threads);
        }
    for (int i = 0; i < ns; i++) measure_in_turn(&shapes[i], &o, threads);
    quiet();
    for (int i = 0; bf16 && i < ns; i++) shapes[i].bf16 = measure(&shapes[i], &o, USE_BF16);
    if (fp32_ceiling > 0) {
        nanosleep(&(struct timespec){0, 500000000}, NULL);      /* the libraries' threads go to sleep */
        fp32_ceiling = fmax(fp32_ceiling, ceiling_fp32(threads));
        if (bf16_ceiling > 0) bf16_ceiling = fmax(bf16_ceiling, ceiling_bf16(ag_cpu_bf16(), threads));
    }

    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("%s gemm, %d thread%s, %s GFLOP/s", AG_PRECISION_NAME, threads, threads == 1 ? "" : "s",
           stat_best() ? "best of 51" : "median");
    if (bf16)
        printf("; bf16: bf16 inputs, fp32 sums (%s kernel; vdpbf16ps/FMA multiply-adds measured %.2f, "
               "0: no AVX512-BF16)", ag_bf16_kernel_name(ag_cpu_bf16()), ag_cpu_bf16_dot_over_fma());
    printf("\nOpenBLAS: core %s (OPENBLAS_CORETYPE=%s), %d thread%s, build: %s\n",
           openblas_get_corename(), ct && *ct ? ct : "unset", openblas_get_num_threads(),
           openblas_get_num_threads() == 1 ? "" : "s", openblas_get_config());
    const ag_cpu_caches caches = ag_cpu_cache_sizes();
    int kc, mc, nc;
    ag_fast_gemm_blocking(NULL, &kc, &mc, &nc);
    printf("attograd blocking: kc %d, mc %d, nc %d, from the caches cpuid reports: L1d %ld KB %d-way, L2 %ld KB, "
           "L3 %ld KB per logical CPU (0: not reported)\n", kc, mc, nc, caches.l1d / 1024, caches.l1d_ways,
           caches.l2 / 1024, caches.l3_share / 1024);
    double wake_us, fork_us, spin_us, elem_ns;
    size_t min_work;
    ag_threads_measured(&wake_us, &fork_us, &spin_us, &elem_ns, &min_work);
    printf("attograd pool, measured at start: wake %.2f us, fork %.2f us, spin %.2f us (-1: never sleeps), "
           "element %.3f ns, multiply-add %.4f ns\n", wake_us, fork_us, spin_us, elem_ns, ag_fast_gemm_madd_ns());
    if (fp32_ceiling > 0)
        printf("ceiling, register-only loops on %d thread%s at once, the higher of a run before the products and "
               "one after (tests/bench_ceiling.h): fp32 %.1f GFLOP/s "
               "(vfmadd231ps zmm, 16 accumulators)", threads, threads == 1 ? "" : "s", fp32_ceiling);
    else
        printf("ceiling: not measured (a float build with AVX-512 measures it)");
    if (bf16_ceiling > 0)
        printf("; bf16 %.1f GFLOP/s (%s)", bf16_ceiling, ceiling_bf16_loop(ag_cpu_bf16()));
    printf("\n");
    printf("attograd and OpenBLAS timed in turn, %d rounds, each from a quiet process, each library warmed up 20 ms; "
           "ratio: %s\n", timings(), stat_best() ? "the fastest over the fastest" : "the median of the rounds' ratios");
    if (same_library() >= 0)
        printf("BENCH_GEMM_SAME=%s: that library in both columns (a check of the method: ratios near 1)\n",
               getenv("BENCH_GEMM_SAME"));
    if (threads > 1)
        printf("batched rows: OpenBLAS's faster of its items in turn on its threads (marked o) and split between %d "
               "threads on one OpenBLAS thread each (marked s)\n", threads);
    printf("%-14s %5s %2s %5s %5s %5s %9s %9s %6s", "shape", "batch", "op", "M", "N", "K",
           "attograd", "OpenBLAS", "ratio");
    if (fp32_ceiling > 0) printf(" %8s", "/ceiling");
    char bf16_label[32];   /* the column names the kernel that ran */
    snprintf(bf16_label, sizeof bf16_label, "bf16 %s", ag_bf16_kernel_name(ag_cpu_bf16()));
    if (bf16) printf(" %11s %9s", bf16_label, "bf16/fp32");
    if (bf16 && bf16_ceiling > 0) printf(" %8s", "/ceiling");
    printf("\n");
    for (int i = 0; i < ns; i++) {
        const shape *s = &shapes[i];
        printf("%-14s %5d %c%c %5d %5d %5d %9.1f %8.1f%c %6.2f", s->what, s->batch,
               s->ta ? 'T' : 'N', s->tb ? 'T' : 'N', s->M, s->N, s->K, s->ours, s->blas,
               s->batch == 1 || threads == 1 ? ' ' : s->blas_items ? 's' : 'o', s->ratio);
        if (fp32_ceiling > 0) printf(" %8.2f", s->ours / fp32_ceiling);
        if (bf16) printf(" %11.1f %9.2f", s->bf16, s->bf16 / s->ours);
        if (bf16 && bf16_ceiling > 0) printf(" %8.2f", s->bf16 / bf16_ceiling);
        printf("\n");
    }
    free(o.A);
    free(o.B);
    free(o.C);
    return 0;
}
