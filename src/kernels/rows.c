/*
 * rows.c - FAST KERNELS for the row-wise ops: softmax and log-softmax,
 * cross-entropy, layer norm, and GELU (definitions: the ref_ functions of the
 * same names in src/reference.c).
 *
 * Rows are independent, so threads take whole rows (statically, the same
 * rows in every kernel); within a row, exp and erf are the vectorizable
 * versions of fastmath.h, and sums run in AG_LANES partial sums whose order
 * depends only on the row's length.  Results do not depend on the thread
 * count.
 */
#include <math.h>
#include <string.h>

#include "fast.h"
#include "fastmath.h"

/* ---- softmax ------------------------------------------------------------ */

/* y = exp(x - max) over one contiguous row; returns their sum and the
 * row's maximum (a row of all -inf: zeros, sum 0, max -inf). */
static double exp_shifted(const ag_real *restrict x, ag_real *restrict y, size_t n, ag_real *max_out)
{
    ag_real max = *max_out = ag_max_lanes(x, n);
    if (max == -INFINITY) {
        memset(y, 0, n * sizeof *y);
        return 0;
    }
    for (size_t k = 0; k < n; k++)
        y[k] = ag_fast_exp(x[k] - max);
    return ag_array_sum(y, n);
}

/* One contiguous row: softmax, or log_softmax when log_out is set. */
static void softmax_contiguous(const ag_real *restrict x, ag_real *restrict y, size_t n, int log_out)
{
    ag_real max;
    double sum = exp_shifted(x, y, n, &max);
    if (max == -INFINITY) {
        for (size_t k = 0; log_out && k < n; k++)
            y[k] = -INFINITY;
        return;
    }
    if (log_out) {
        /* (x - max) - log(sum), not x - (max + log(sum)): with large logits
         * the latter rounds log(sum) to the spacing of floats near max. */
        ag_real log_sum = (ag_real)log(sum);
        for (size_t k = 0; k < n; k++)
            y[k] = (x[k] - max) - log_sum;
    } else {
        ag_real inv = (ag_real)(1.0 / sum);
        for (size_t k = 0; k < n; k++)
            y[k] *= inv;
    }
}

/* One row whose elements are s apart. */
static void softmax_strided(const ag_real *x, ag_real *y, size_t n, size_t s, int log_out)
{
    ag_real max = -INFINITY;
    for (size_t k = 0; k < n; k++)
        max = x[k * s] > max ? x[k * s] : max;
    if (max == -INFINITY) {
        for (size_t k = 0; k < n; k++)
            y[k * s] = log_out ? -INFINITY : 0;
        return;
    }
    double sum = 0;
    for (size_t k = 0; k < n; k++) {
        ag_real e = ag_fast_exp(x[k * s] - max);
        sum += e;
        if (!log_out)
            y[k * s] = e;
    }
    ag_real log_sum = (ag_real)log(sum), inv = (ag_real)(1.0 / sum);
    for (size_t k = 0; k < n; k++)
        y[k * s] = log_out ? (x[k * s] - max) - log_sum : y[k * s] * inv;
}

void ag_fast_softmax(const ag_real *x, ag_real *y, size_t outer, size_t n, size_t inner, int log_out)
{
    const size_t rows = outer * inner;
    #pragma omp parallel for schedule(static) if (rows * n > AG_PARALLEL_MIN)
    for (size_t row = 0; row < rows; row++) {
        size_t base = (row / inner) * n * inner + row % inner;
        if (inner == 1)
            softmax_contiguous(x + base, y + base, n, log_out);
        else
            softmax_strided(x + base, y + base, n, inner, log_out);
    }
}

void ag_fast_softmax_backward(const ag_real *y, const ag_real *dy, ag_real *dx, size_t outer, size_t n,
                              size_t inner, int log_out)
{
    const size_t rows = outer * inner, s = inner;
    #pragma omp parallel for schedule(static) if (rows * n > AG_PARALLEL_MIN)
    for (size_t row = 0; row < rows; row++) {
        size_t base = (row / inner) * n * inner + row % inner;
        double sum = 0;
        if (log_out) {
            for (size_t k = 0; k < n; k++)
                sum += y[base + k * s] == -INFINITY ? 0 : dy[base + k * s];
            for (size_t k = 0; k < n; k++) {
                ag_real yk = y[base + k * s];
                dx[base + k * s] += yk == -INFINITY ? 0 : dy[base + k * s] - ag_fast_exp(yk) * (ag_real)sum;
            }
            continue;
        }
        if (s == 1)
            sum = ag_dot_lanes(dy + base, y + base, n);
        else
            for (size_t k = 0; k < n; k++)
                sum += (double)dy[base + k * s] * y[base + k * s];
        for (size_t k = 0; k < n; k++)
            dx[base + k * s] += y[base + k * s] * (dy[base + k * s] - (ag_real)sum);
    }
}

/* ---- cross-entropy ------------------------------------------------------ */

void ag_fast_cross_entropy(const ag_real *logits, const int32_t *target, size_t rows, int V, ag_real *prob,
                           double *loss)
{
    #pragma omp parallel for schedule(static) if (rows * (size_t)V > AG_PARALLEL_MIN)
    for (size_t r = 0; r < rows; r++) {
        const ag_real *x = logits + r * (size_t)V;
        ag_real *p = prob + r * (size_t)V, max;
        double sum = exp_shifted(x, p, (size_t)V, &max);
        ag_real inv = sum > 0 ? (ag_real)(1.0 / sum) : 0;   /* all -inf: p stays 0, as softmax's */
        for (int k = 0; k < V; k++)
            p[k] *= inv;
        /* -log softmax(x)[t] = logsumexp(x) - x[t] = (max - x[t]) + log(sum) */
        loss[r] = target[r] >= 0 ? (double)(max - x[target[r]]) + log(sum) : 0;
    }
}

void ag_fast_cross_entropy_backward(const ag_real *prob, const int32_t *target, size_t rows, int V,
                                    ag_real scale, ag_real *dlogits, int assign)
{
    #pragma omp parallel for schedule(static) if (rows * (size_t)V > AG_PARALLEL_MIN)
    for (size_t r = 0; r < rows; r++) {
        int t = target[r];
        const ag_real *p = prob + r * (size_t)V;
        ag_real *g = dlogits + r * (size_t)V;
        if (t < 0) {
            if (assign)
                memset(g, 0, (size_t)V * sizeof(ag_real));
            continue;
        }
        if (assign)
            for (int k = 0; k < V; k++)
                g[k] = scale * p[k];
        else
            for (int k = 0; k < V; k++)
                g[k] += scale * p[k];
        g[t] -= scale;
    }
}

/* ---- layer norm --------------------------------------------------------- */

void ag_fast_layer_norm(const ag_real *x, const ag_real *w, const ag_real *b, size_t rows, int D, ag_real eps,
                        ag_real *y, ag_real *mean, ag_real *rstd)
{
    #pragma omp parallel for schedule(static) if (rows * (size_t)D > AG_PARALLEL_MIN)
    for (size_t r = 0; r < rows; r++) {
        const ag_real *restrict xr = x + r * (size_t)D;
        ag_real *restrict yr = y + r * (size_t)D;
        /* two passes, each a fixed-order lane sum: the mean, then the
         * squared deviations from it */
        ag_real m = (ag_real)(ag_array_sum(xr, (size_t)D) / D);
        double var = ag_sum_sq_dev_lanes(xr, (size_t)D, m) / D;
        ag_real s = (ag_real)(1.0 / sqrt(var + eps));
        mean[r] = m;
        rstd[r] = s;
        if (w && b)
            for (int k = 0; k < D; k++)
                yr[k] = (xr[k] - m) * s * w[k] + b[k];
        else
            for (int k = 0; k < D; k++)
                yr[k] = (xr[k] - m) * s * (w ? w[k] : 1) + (b ? b[k] : 0);
    }
}

void ag_fast_layer_norm_backward(const ag_real *x, const ag_real *w, const ag_real *mean, const ag_real *rstd,
                                 const ag_real *dy, size_t rows, int D, ag_real *dx, int assign, ag_real *dw,
                                 ag_real *db)
{
    const size_t size = rows * (size_t)D;
    /* dx: each row on its own, so rows can go to different threads */
    if (dx) {
        #pragma omp parallel for schedule(static) if (size > AG_PARALLEL_MIN)
        for (size_t r = 0; r < rows; r++) {
            const ag_real *restrict xr = x + r * (size_t)D, *restrict dyr = dy + r * (size_t)D;
            const ag_real m = mean[r], s = rstd[r];
            /* the row means of g = dy w and of g xhat, as fixed-order lane sums */
            ag_real acc_g[AG_LANES] = { 0 }, acc_gx[AG_LANES] = { 0 };
            int k = 0;
            for (; k + AG_LANES <= D; k += AG_LANES)
                for (int l = 0; l < AG_LANES; l++) {
                    ag_real g = dyr[k + l] * (w ? w[k + l] : 1);
                    acc_g[l] += g;
                    acc_gx[l] += g * ((xr[k + l] - m) * s);
                }
            double sum_g = ag_fold_partial_sums(acc_g), sum_gx = ag_fold_partial_sums(acc_gx);
            for (; k < D; k++) {
                ag_real g = dyr[k] * (w ? w[k] : 1);
                sum_g += g;
                sum_gx += g * ((xr[k] - m) * s);
            }
            const ag_real mean_g = (ag_real)(sum_g / D), mean_gx = (ag_real)(sum_gx / D);
            ag_real *restrict dxr = dx + r * (size_t)D;
            for (k = 0; k < D; k++) {
                ag_real d = s * (dyr[k] * (w ? w[k] : 1) - mean_g - (xr[k] - m) * s * mean_gx);
                dxr[k] = assign ? d : dxr[k] + d;
            }
        }
    }
    /* dw, db: each column summed over the rows in row order, by one thread */
    if (dw || db) {
        #pragma omp parallel for schedule(static) if (size > AG_PARALLEL_MIN && D >= 64)
        for (int k0 = 0; k0 < D; k0 += 16) {
            const int k1 = ag_min_int(k0 + 16, D);
            for (size_t r = 0; r < rows; r++) {
                const ag_real *xr = x + r * (size_t)D, *dyr = dy + r * (size_t)D;
                const ag_real m = mean[r], s = rstd[r];
                if (dw)
                    for (int k = k0; k < k1; k++)
                        dw[k] += dyr[k] * ((xr[k] - m) * s);
                if (db)
                    for (int k = k0; k < k1; k++)
                        db[k] += dyr[k];
            }
        }
    }
}

/* ---- GELU --------------------------------------------------------------- */

void ag_fast_gelu(const ag_real *x, ag_real *y, size_t n)
{
    const long size = (long)n;
    #pragma omp parallel for schedule(static) if (size > AG_PARALLEL_MIN)
    for (long i = 0; i < size; i++)
        y[i] = (ag_real)0.5 * x[i] * (1 + ag_fast_erf(x[i] * (ag_real)0.70710678118654752440));
}

void ag_fast_gelu_backward(const ag_real *x, const ag_real *dy, ag_real *dx, size_t n, int assign)
{
    const long size = (long)n;
    #pragma omp parallel for schedule(static) if (size > AG_PARALLEL_MIN)
    for (long i = 0; i < size; i++) {
        ag_real cdf, pdf;
        ag_fast_normal(x[i], &cdf, &pdf);
        ag_real g = dy[i] * (cdf + x[i] * pdf);
        dx[i] = assign ? g : dx[i] + g;
    }
}
