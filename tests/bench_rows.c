/*
 * bench_rows.c - the fused element-wise passes against the unfused ones
 * they replace, on the medium model's MLP activation ([4096, 1536]): GELU
 * with the bias added in its pass against a bias pass then GELU, and GELU's
 * backward with the bias's gradient summed against GELU's backward then the
 * column sums.  Both orders alternate call by call; each figure is the
 * median of 31 calls.  Usage: bench_rows [threads]   (default: all cores)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"
#include "pool.h"

enum { ROWS = 4096, COLS = 1536, CALLS = 31 };

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* the unfused bias pass, as ag_linear adds its bias */
typedef struct {
    ag_real *y;
    const ag_real *b;
} bias_args;

static void add_bias_rows(void *ctx, size_t lo, size_t hi)
{
    const bias_args *a = ctx;
    for (size_t r = lo; r < hi; r++)
        for (size_t c = 0; c < COLS; c++)
            a->y[r * COLS + c] += a->b[c];
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t)
{
    qsort(t, CALLS, sizeof *t, cmp_double);
    return t[CALLS / 2];
}

int main(int argc, char **argv)
{
    if (argc > 1)
        ag_set_threads(atoi(argv[1]));
    const size_t n = (size_t)ROWS * COLS;
    ag_real *x = malloc(n * sizeof *x), *h = malloc(n * sizeof *h), *y = malloc(n * sizeof *y);
    ag_real *dy = malloc(n * sizeof *dy), *dx = malloc(n * sizeof *dx);
    ag_real *b = malloc(COLS * sizeof *b), *db = calloc(COLS, sizeof *db);
    if (!x || !h || !y || !dy || !dx || !b || !db) {
        fprintf(stderr, "bench_rows: out of memory\n");
        return 1;
    }
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, 1, 1);
    for (size_t i = 0; i < n; i++) {
        x[i] = (ag_real)(4 * ag_pcg32_uniform(&rng) - 2);
        dy[i] = (ag_real)(ag_pcg32_uniform(&rng) - 0.5);
    }
    for (int c = 0; c < COLS; c++)
        b[c] = (ag_real)(ag_pcg32_uniform(&rng) - 0.5);
    const ag_kernels *k = ag_kern;
    double fwd_fused[CALLS], fwd_split[CALLS], bwd_fused[CALLS], bwd_split[CALLS];
    for (int i = 0; i < CALLS; i++) {
        double t0 = now();
        k->gelu(x, b, ROWS, COLS, y, NULL);
        double t1 = now();
        memcpy(h, x, n * sizeof *h);
        double t2 = now();
        bias_args ba = { h, b };
        ag_parallel_for(ROWS, n, add_bias_rows, &ba);
        k->gelu(h, NULL, 1, n, y, NULL);
        double t3 = now();
        k->gelu_backward(x, b, NULL, dy, ROWS, COLS, dx, 1, db);
        double t4 = now();
        k->gelu_backward(h, NULL, NULL, dy, 1, n, dx, 1, NULL);
        k->column_sums(dx, ROWS, COLS, db);
        double t5 = now();
        fwd_fused[i] = t1 - t0;
        fwd_split[i] = t3 - t2;
        bwd_fused[i] = t4 - t3;
        bwd_split[i] = t5 - t4;
    }
    double ff = median(fwd_fused), fs = median(fwd_split), bf = median(bwd_fused), bs = median(bwd_split);
    printf("GELU with a bias on [%d, %d], %d threads, %s kernels, median of %d calls (ms):\n", ROWS, COLS,
           ag_get_threads(), k->name, CALLS);
    printf("  forward:  fused %7.2f   bias pass, then GELU %7.2f   unfused / fused %.2f\n", 1e3 * ff, 1e3 * fs,
           fs / ff);
    printf("  backward: fused %7.2f   GELU's backward, then column sums %7.2f   unfused / fused %.2f\n", 1e3 * bf,
           1e3 * bs, bs / bf);
    free(x);
    free(h);
    free(y);
    free(dy);
    free(dx);
    free(b);
    free(db);
    return 0;
}
