/*
 * update.c - FAST KERNELS for the optimizer step and the reductions over
 * all parameters (definitions: ref_sgd, ref_adamw, ref_sum_squares and
 * ref_column_sums in src/reference.c).
 *
 * The updates are element by element: each parameter's new value depends
 * on its own gradient and moments only, so the loops are branch-free vector
 * code and, for large blocks, split between threads with no effect on the
 * result.  The sums run in fixed-order partial sums.
 */
#include <math.h>

#include "fast.h"

#ifdef AG_DOUBLE
#define SQRT sqrt
#else
#define SQRT sqrtf
#endif

void ag_fast_sgd(ag_real *restrict p, const ag_real *restrict g, ag_real *restrict buf, size_t n, ag_real lr,
                 ag_real momentum, ag_real decay, int first)
{
    const long len = (long)n;
    if (momentum == 0) {
        #pragma omp parallel for schedule(static) if (len > AG_PARALLEL_MIN)
        for (long i = 0; i < len; i++)
            p[i] -= lr * (g[i] + decay * p[i]);
    } else if (first) {
        #pragma omp parallel for schedule(static) if (len > AG_PARALLEL_MIN)
        for (long i = 0; i < len; i++) {
            buf[i] = g[i] + decay * p[i];
            p[i] -= lr * buf[i];
        }
    } else {
        #pragma omp parallel for schedule(static) if (len > AG_PARALLEL_MIN)
        for (long i = 0; i < len; i++) {
            buf[i] = momentum * buf[i] + (g[i] + decay * p[i]);
            p[i] -= lr * buf[i];
        }
    }
}

/* The bias corrections folded into two constants: lr m^ / (sqrt(v^) + eps)
 * = (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps). */
void ag_fast_adamw(ag_real *restrict p, const ag_real *restrict g, ag_real *restrict m, ag_real *restrict v,
                   size_t n, const ag_adamw_args *a)
{
    const double bc1 = 1 - pow(a->beta1, (double)a->t), bc2 = 1 - pow(a->beta2, (double)a->t);
    const ag_real b1 = (ag_real)a->beta1, b2 = (ag_real)a->beta2, eps = (ag_real)a->eps;
    const ag_real step_size = (ag_real)(a->lr / bc1), sqrt_bc2 = (ag_real)sqrt(bc2);
    const ag_real keep = (ag_real)(1 - a->lr * a->decay);
    const long len = (long)n;
    #pragma omp parallel for schedule(static) if (len > AG_PARALLEL_MIN)
    for (long i = 0; i < len; i++) {
        p[i] *= keep;
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        p[i] -= step_size * m[i] / (SQRT(v[i]) / sqrt_bc2 + eps);
    }
}

/* In double, in 8 running partial sums (element i goes to lane i % 8)
 * added up at the end: the order is fixed, and the loop is vector code
 * instead of one long chain of dependent additions. */
double ag_fast_sum_squares(const ag_real *x, size_t n)
{
    double lane[8] = { 0 };
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            lane[l] += (double)x[i + l] * x[i + l];
    for (int l = 0; i < n; i++, l++)
        lane[l] += (double)x[i] * x[i];
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

/* Each block of 16 columns summed over the rows in row order, by one thread. */
void ag_fast_column_sums(const ag_real *x, size_t rows, size_t cols, ag_real *dst)
{
    const long ncols = (long)cols;
    #pragma omp parallel for schedule(static) if (rows * cols > AG_PARALLEL_MIN && cols >= 64)
    for (long c0 = 0; c0 < ncols; c0 += 16) {
        const long c1 = c0 + 16 < ncols ? c0 + 16 : ncols;
        for (size_t r = 0; r < rows; r++) {
            const ag_real *xr = x + r * cols;
            for (long c = c0; c < c1; c++)
                dst[c] += xr[c];
        }
    }
}
