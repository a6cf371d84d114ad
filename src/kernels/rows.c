/*
 * rows.c - FAST KERNELS for the row-wise ops: softmax and log-softmax,
 * cross-entropy, layer norm, and GELU (definitions: the ref_ functions of the
 * same names in src/reference.c).
 *
 * Rows are independent, so threads take whole rows (ag_parallel_for: the
 * same rows in every kernel); within a row, exp and erf are the vectorizable
 * versions of fastmath.h, and sums run in AG_LANES partial sums whose order
 * depends only on the row's length.  Results do not depend on the thread
 * count.
 */
#include <math.h>
#include <stdatomic.h>
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

/* What a row of exps costs.  ag_parallel_for counts work in elements of
 * pool.c's y = a y + x, and shares a loop only when that much work pays for
 * waking the other threads.  An element of a row of exps (softmax's,
 * cross-entropy's) costs far more: the exp is some twenty vector operations
 * where that is two, and a short row adds the folds of its lane sums (on the
 * Zen 5 of the README a 65-wide row of cross-entropy took 26 of the pool's
 * elements per element, softmax's 19, so the toy model's cross-entropy ran
 * on one thread for 45 us).  So these loops state their work as elements
 * times that ratio, measured here once, on the first call, against the
 * pool's own element time: exp_shifted over 64 rows of 64, the fastest of
 * 4 runs.  Stored in 1/16ths; 0: not yet measured. */
static atomic_int exp_weight16;

static int measure_exp_weight16(void)
{
    enum { N = 64 * 64, RUNS = 4 };
    double wake_us, fork_us, spin_us, elem_ns;
    size_t min_work;
    ag_threads_measured(&wake_us, &fork_us, &spin_us, &elem_ns, &min_work);
    ag_real *x = malloc(2 * N * sizeof *x);
    if (!x || !(elem_ns > 0)) {
        free(x);
        return 16 * 16;   /* nothing to measure with: 16, under the Zen 5's 19-26 */
    }
    for (int i = 0; i < N; i++)
        x[i] = (ag_real)(i % 29) / 7 - 2;
    double best = 1e9, total = 0;
    volatile size_t len = 64;   /* read at run time: a row as the kernels get it, not one specialized for 64 */
    for (int r = 0; r < RUNS; r++) {
        const double t0 = ag_fast_seconds();
        for (int row = 0; row < 64; row++) {
            ag_real max;
            total += exp_shifted(x + 64 * row, x + N + 64 * row, len, &max);
        }
        const double t = ag_fast_seconds() - t0;
        if (t > 0 && t < best) best = t;
    }
    free(x);
    if (!(total >= 64 * RUNS) || best == 1e9)
        return 16 * 16;   /* each row's sum is at least 1: anything else means no measurement */
    const double ratio = best * 1e9 / N / elem_ns;
    return ratio < 1 ? 16 : ratio > 1000 ? 16 * 1000 : (int)(16 * ratio);
}

/* n elements of rows of exps, as ag_parallel_for's work */
static size_t exp_work(size_t n)
{
    if (ag_max_threads() <= 1)
        return n;                   /* one thread (or inside a task): nothing to decide */
    int w = atomic_load_explicit(&exp_weight16, memory_order_relaxed);
    if (w == 0) {
        w = measure_exp_weight16();
        atomic_store_explicit(&exp_weight16, w, memory_order_relaxed);
    }
    return n / 16 * (size_t)w + n % 16 * (size_t)w / 16;
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
        ag_real log_sum = (ag_real)ag_math_log(sum);
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
    ag_real log_sum = (ag_real)ag_math_log(sum), inv = (ag_real)(1.0 / sum);
    for (size_t k = 0; k < n; k++)
        y[k * s] = log_out ? (x[k * s] - max) - log_sum : y[k * s] * inv;
}

/* Every kernel's arguments, for the row loops ag_parallel_for runs. */
typedef struct {
    const ag_real *x, *y, *w, *b, *dy, *mean, *rstd, *prob;
    ag_real *out, *dx, *dw, *db, *meanw, *rstdw;
    ag_real *keep;                  /* GELU's forward: where it keeps gelu' (x itself) */
    const ag_real *kept;            /* GELU's backward: what the forward kept, or NULL */
    const int32_t *target;
    double *loss;
    size_t n, inner;
    int D, log_out, assign;
    ag_real *part_w, *part_b;       /* backward: each block of rows' partial sums of dw (layer norm), db */
    size_t block;                   /* backward: rows a block (ag_fast_row_block) */
    ag_real eps, scale;
} rows_args;

static void softmax_rows(void *ctx, size_t lo, size_t hi)
{
    const rows_args *r = ctx;
    const size_t n = r->n, inner = r->inner;
    for (size_t row = lo; row < hi; row++) {
        size_t base = (row / inner) * n * inner + row % inner;
        if (inner == 1)
            softmax_contiguous(r->x + base, r->out + base, n, r->log_out);
        else
            softmax_strided(r->x + base, r->out + base, n, inner, r->log_out);
    }
}

void ag_fast_softmax(const ag_real *x, ag_real *y, size_t outer, size_t n, size_t inner, int log_out)
{
    const size_t rows = outer * inner;
    rows_args r = { .x = x, .out = y, .n = n, .inner = inner, .log_out = log_out };
    ag_parallel_for(rows, exp_work(rows * n), softmax_rows, &r);
}

static void softmax_backward_rows(void *ctx, size_t lo, size_t hi)
{
    const rows_args *r = ctx;
    const ag_real *y = r->y, *dy = r->dy;
    ag_real *dx = r->dx;
    const size_t n = r->n, inner = r->inner, s = inner;
    for (size_t row = lo; row < hi; row++) {
        size_t base = (row / inner) * n * inner + row % inner;
        double sum = 0;
        if (r->log_out) {
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

void ag_fast_softmax_backward(const ag_real *y, const ag_real *dy, ag_real *dx, size_t outer, size_t n,
                              size_t inner, int log_out)
{
    const size_t rows = outer * inner;
    rows_args r = { .y = y, .dy = dy, .dx = dx, .n = n, .inner = inner, .log_out = log_out };
    ag_parallel_for(rows, rows * n, softmax_backward_rows, &r);
}

/* ---- cross-entropy ------------------------------------------------------ */

static void cross_entropy_rows(void *ctx, size_t lo, size_t hi)
{
    const rows_args *a = ctx;
    const size_t V = a->n;
    const int32_t *target = a->target;
    for (size_t r = lo; r < hi; r++) {
        const ag_real *x = a->x + r * V;
        ag_real *p = a->out + r * V, max;
        double sum = exp_shifted(x, p, V, &max);
        ag_real inv = sum > 0 ? (ag_real)(1.0 / sum) : 0;   /* all -inf: p stays 0, as softmax's */
        for (size_t k = 0; k < V; k++)
            p[k] *= inv;
        /* -log softmax(x)[t] = logsumexp(x) - x[t] = (max - x[t]) + log(sum) */
        a->loss[r] = target[r] >= 0 ? (double)(max - x[target[r]]) + ag_math_log(sum) : 0;
    }
}

void ag_fast_cross_entropy(const ag_real *logits, const int32_t *target, size_t rows, int V, ag_real *prob,
                           double *loss)
{
    rows_args r = { .x = logits, .target = target, .out = prob, .loss = loss, .n = (size_t)V };
    ag_parallel_for(rows, exp_work(rows * (size_t)V), cross_entropy_rows, &r);
}

static void cross_entropy_backward_rows(void *ctx, size_t lo, size_t hi)
{
    const rows_args *a = ctx;
    const size_t V = a->n;
    const ag_real scale = a->scale;
    for (size_t r = lo; r < hi; r++) {
        int t = a->target[r];
        const ag_real *p = a->prob + r * V;
        ag_real *g = a->dx + r * V;
        if (t < 0) {
            if (a->assign)
                memset(g, 0, V * sizeof(ag_real));
            continue;
        }
        if (a->assign)
            for (size_t k = 0; k < V; k++)
                g[k] = scale * p[k];
        else
            for (size_t k = 0; k < V; k++)
                g[k] += scale * p[k];
        g[t] -= scale;
    }
}

void ag_fast_cross_entropy_backward(const ag_real *prob, const int32_t *target, size_t rows, int V,
                                    ag_real scale, ag_real *dlogits, int assign)
{
    rows_args r = { .prob = prob, .target = target, .n = (size_t)V, .scale = scale, .dx = dlogits,
                    .assign = assign };
    ag_parallel_for(rows, rows * (size_t)V, cross_entropy_backward_rows, &r);
}

/* ---- layer norm --------------------------------------------------------- */

static void layer_norm_rows(void *ctx, size_t lo, size_t hi)
{
    const rows_args *a = ctx;
    const int D = a->D;
    const ag_real *w = a->w, *b = a->b, eps = a->eps;
    /* a group of rows at a time, each sweep over all of them before the
     * next: a row's sums are chains of dependent additions, and the rows'
     * chains are independent, so the core runs several rows' at once
     * where one row's sweeps had to wait for each other */
    enum { GROUP = 8 };
    for (size_t g0 = lo; g0 < hi; g0 += GROUP) {
        const size_t g1 = g0 + GROUP < hi ? g0 + GROUP : hi;
        /* two sweeps, each a fixed-order lane sum: the mean, then the
         * squared deviations from it.  Both sum in double lanes, as the
         * reference sums in double: float lanes rounded a constant row's
         * mean off its value (12345.678 x 768 by 0.005), and x - mean,
         * divided by the row's spread of 0, made y -0.84 where it is the
         * bias; and their squares overflowed past |x - mean| = 1.8e19. */
        for (size_t r = g0; r < g1; r++)
            a->meanw[r] = (ag_real)(ag_array_sum_wide(a->x + r * (size_t)D, (size_t)D) / D);
        for (size_t r = g0; r < g1; r++) {
            const double var = ag_sum_sq_dev_lanes(a->x + r * (size_t)D, (size_t)D, a->meanw[r]) / D;
            a->rstdw[r] = (ag_real)(1.0 / sqrt(var + eps));
        }
        for (size_t r = g0; r < g1; r++) {
            const ag_real *restrict xr = a->x + r * (size_t)D;
            ag_real *restrict yr = a->out + r * (size_t)D;
            const ag_real m = a->meanw[r], s = a->rstdw[r];
            if (w && b)
                for (int k = 0; k < D; k++)
                    yr[k] = (xr[k] - m) * s * w[k] + b[k];
            else
                for (int k = 0; k < D; k++)
                    yr[k] = (xr[k] - m) * s * (w ? w[k] : 1) + (b ? b[k] : 0);
        }
    }
}

void ag_fast_layer_norm(const ag_real *x, const ag_real *w, const ag_real *b, size_t rows, int D, ag_real eps,
                        ag_real *y, ag_real *mean, ag_real *rstd)
{
    rows_args r = { .x = x, .w = w, .b = b, .D = D, .eps = eps, .out = y, .meanw = mean, .rstdw = rstd };
    ag_parallel_for(rows, rows * (size_t)D, layer_norm_rows, &r);
}

/* Layer norm's backward in one pass over x and dy: each row's dx, and
 * the weight's and bias's gradients dw_k = sum_r dy_rk xhat_rk, db_k =
 * sum_r dy_rk summed as the rows go by, in blocks of rows: block b sums its
 * rows in row order into partial sums of its own, and the blocks' partial
 * sums are added to dw and db in block order at the end (ag_fast_row_block,
 * update.c).  Where the blocks end depends on the shape alone, so the bits
 * do not depend on which thread took which block (a thread's rows could
 * not start a column's sum in row order without the rows before them, and
 * the gradients were summed over columns in a second pass that read x and
 * dy again).  The partial sums are the calling thread's buffer. */
static _Thread_local ag_scratch ln_partials;

/* blocks lo..hi-1: dx for their rows (when dx is wanted), and the
 * blocks' partial sums of dw and db (when wanted) */
static void layer_norm_backward_blocks(void *ctx, size_t lo, size_t hi)
{
    const rows_args *a = ctx;
    const int D = a->D, assign = a->assign;
    const ag_real *w = a->w;
    const size_t block = a->block;
    for (size_t bk = lo; bk < hi; bk++) {
        ag_real *restrict pw = a->part_w ? a->part_w + bk * (size_t)D : NULL;
        ag_real *restrict pb = a->part_b ? a->part_b + bk * (size_t)D : NULL;
        const size_t r0 = bk * block, r1 = r0 + block < a->n ? r0 + block : a->n;
        for (size_t r = r0; r < r1; r++) {
            const ag_real *restrict xr = a->x + r * (size_t)D, *restrict dyr = a->dy + r * (size_t)D;
            const ag_real m = a->mean[r], s = a->rstd[r];
            if (pw && r == r0)
                for (int k = 0; k < D; k++)
                    pw[k] = dyr[k] * ((xr[k] - m) * s);
            else if (pw)
                for (int k = 0; k < D; k++)
                    pw[k] += dyr[k] * ((xr[k] - m) * s);
            if (pb && r == r0)
                memcpy(pb, dyr, (size_t)D * sizeof *pb);
            else if (pb)
                for (int k = 0; k < D; k++)
                    pb[k] += dyr[k];
            if (!a->dx)
                continue;
            /* the row means of g = dy w and of g xhat, as fixed-order lane
             * sums, in doubles as the reference sums them: dx is rstd times
             * g less these means, and rstd is up to 1/sqrt(eps) (316 for a
             * row of nearly one value), so float lanes' rounding of a mean
             * came out 7e-5 of a dy of 0.7 away from the reference's dx */
            double acc_g[AG_LANES] = { 0 }, acc_gx[AG_LANES] = { 0 };
            int k = 0;
            for (; k <= D - AG_LANES; k += AG_LANES)   /* not k + AG_LANES <= D: that wraps for D near INT_MAX */
                for (int l = 0; l < AG_LANES; l++) {
                    ag_real g = dyr[k + l] * (w ? w[k + l] : 1);
                    acc_g[l] += g;
                    acc_gx[l] += (double)g * ((xr[k + l] - m) * s);
                }
            double sum_g = ag_fold_partial_sums_wide(acc_g), sum_gx = ag_fold_partial_sums_wide(acc_gx);
            for (; k < D; k++) {
                ag_real g = dyr[k] * (w ? w[k] : 1);
                sum_g += g;
                sum_gx += (double)g * ((xr[k] - m) * s);
            }
            const ag_real mean_g = (ag_real)(sum_g / D), mean_gx = (ag_real)(sum_gx / D);
            ag_real *restrict dxr = a->dx + r * (size_t)D;
            for (k = 0; k < D; k++) {
                ag_real d = s * (dyr[k] * (w ? w[k] : 1) - mean_g - (xr[k] - m) * s * mean_gx);
                dxr[k] = assign ? d : dxr[k] + d;
            }
        }
    }
}

void ag_fast_layer_norm_backward(const ag_real *x, const ag_real *w, const ag_real *mean, const ag_real *rstd,
                                 const ag_real *dy, size_t rows, int D, ag_real *dx, int assign, ag_real *dw,
                                 ag_real *db)
{
    if (rows == 0 || D <= 0 || (!dx && !dw && !db))
        return;
    const size_t block = ag_fast_row_block(rows, (size_t)D), blocks = (rows + block - 1) / block;
    const size_t size = rows * (size_t)D;
    /* the partial sums: [blocks, D] for dw, then for db */
    ag_real *partials = NULL;           /* blocks * D <= max(AG_ROW_PARTIALS, D): no overflow */
    if (dw || db)
        partials = ag_scratch_get(&ln_partials, 2 * blocks * (size_t)D * sizeof(ag_real),
                                  "layer norm's partial sums");
    rows_args r = { .x = x, .w = w, .mean = mean, .rstd = rstd, .dy = dy, .n = rows, .D = D, .dx = dx,
                    .assign = assign, .dw = dw, .db = db, .block = block,
                    .part_w = dw ? partials : NULL, .part_b = db ? partials + blocks * (size_t)D : NULL };
    ag_parallel_for(blocks, size, layer_norm_backward_blocks, &r);
    if (dw)
        ag_fast_add_partials(partials, blocks, (size_t)D, dw);
    if (db)
        ag_fast_add_partials(partials + blocks * (size_t)D, blocks, (size_t)D, db);
}

/* ---- GELU --------------------------------------------------------------- */

/* gelu(h) = h Phi(h) = h/2 (1 + erf(h / sqrt 2)), and its derivative
 * gelu'(h) = Phi(h) + h phi(h) into *d: one exp serves Phi and phi
 * (ag_fast_normal), and the backward's recomputation gives the same bits. */
static inline ag_real gelu_of(ag_real h, ag_real *d)
{
    ag_real cdf, pdf;
    ag_fast_normal(h, &cdf, &pdf);
    *d = AG_FMA(h, pdf, cdf);
    return h * cdf;
}

/* dy gelu'(h) */
static inline ag_real gelu_grad(ag_real h, ag_real dy)
{
    ag_real d;
    (void)gelu_of(h, &d);
    return dy * d;
}

/* Without a bias: elements lo..hi-1 of the whole array; with keep (which
 * is x, see ag_fast_gelu), gelu' written over each x once read. */
static void gelu_range(void *ctx, size_t lo, size_t hi)
{
    const rows_args *a = ctx;
    ag_real *restrict y = a->out, *restrict xk = a->keep, d;
    if (xk)
        for (size_t i = lo; i < hi; i++) {
            y[i] = gelu_of(xk[i], &d);
            xk[i] = d;
        }
    else
        for (size_t i = lo; i < hi; i++)
            y[i] = gelu_of(a->x[i], &d);
}

/* With a bias: rows lo..hi-1, the bias added as each element is read (the
 * sum rounds to the float the separate bias pass stored, so the result is
 * the unfused one bit for bit); with keep, as gelu_range. */
static void gelu_bias_rows(void *ctx, size_t lo, size_t hi)
{
    const rows_args *a = ctx;
    const size_t cols = a->n;
    const ag_real *restrict b = a->b;
    ag_real d;
    for (size_t r = lo; r < hi; r++) {
        ag_real *restrict y = a->out + r * cols;
        if (a->keep) {
            ag_real *restrict xk = a->keep + r * cols;
            for (size_t c = 0; c < cols; c++) {
                y[c] = gelu_of(xk[c] + b[c], &d);
                xk[c] = d;
            }
        } else {
            const ag_real *restrict x = a->x + r * cols;
            for (size_t c = 0; c < cols; c++)
                y[c] = gelu_of(x[c] + b[c], &d);
        }
    }
}

/* The forward keeps gelu'(x + b) for the backward, over x itself: x is the
 * linear layer's product, which nothing else reads, so this costs no
 * memory, and the backward becomes a multiply where it computed erf and exp
 * again (a third of the step's GELU time on `make run`'s model). */
size_t ag_fast_gelu_keep(size_t n)
{
    (void)n;
    return 0;                       /* nothing beside x */
}

int ag_fast_gelu_keep_in_x(void) { return 1; }

void ag_fast_gelu(const ag_real *x, const ag_real *b, size_t rows, size_t cols, ag_real *y, void *keep)
{
    rows_args r = { .x = x, .b = b, .out = y, .n = cols, .keep = keep };
    if (keep && keep != x)          /* kept elsewhere than over x: the pass runs over a copy */
        memcpy(keep, x, rows * cols * sizeof(ag_real));
    if (b)
        ag_parallel_for(rows, rows * cols, gelu_bias_rows, &r);
    else
        ag_parallel_for(rows * cols, rows * cols, gelu_range, &r);
}

/* dx (+)= gelu'(x + b) dy over rows r0..r1-1, columns c0..c1-1, and db +=
 * each column's values in row order (b, db may be NULL); gelu' from the
 * forward's keep when there is one. */
static void gelu_backward_block(const rows_args *a, size_t r0, size_t r1, size_t c0, size_t c1)
{
    const size_t cols = a->n;
    const ag_real *restrict b = a->b;
    ag_real *restrict db = a->db;
    for (size_t r = r0; r < r1; r++) {
        const ag_real *restrict x = a->x + r * cols, *restrict dy = a->dy + r * cols;
        ag_real *restrict dx = a->dx + r * cols;
        if (a->kept) {
            const ag_real *restrict d = a->kept + r * cols;
            for (size_t c = c0; c < c1; c++) {
                ag_real g = dy[c] * d[c];
                dx[c] = a->assign ? g : dx[c] + g;
                if (db)
                    db[c] += g;
            }
        } else if (db)
            for (size_t c = c0; c < c1; c++) {
                ag_real g = gelu_grad(b ? x[c] + b[c] : x[c], dy[c]);
                dx[c] = a->assign ? g : dx[c] + g;
                db[c] += g;
            }
        else if (b)
            for (size_t c = c0; c < c1; c++) {
                ag_real g = gelu_grad(x[c] + b[c], dy[c]);
                dx[c] = a->assign ? g : dx[c] + g;
            }
        else
            for (size_t c = c0; c < c1; c++) {
                ag_real g = gelu_grad(x[c], dy[c]);
                dx[c] = a->assign ? g : dx[c] + g;
            }
    }
}

/* elements lo..hi-1 (no bias, no bias gradient: the array is one row) */
static void gelu_backward_range(void *ctx, size_t lo, size_t hi)
{
    const rows_args *a = ctx;
    rows_args flat = *a;
    flat.n = hi - lo;
    flat.x += lo;
    flat.dy += lo;
    flat.dx += lo;
    if (flat.kept)
        flat.kept += lo;
    gelu_backward_block(&flat, 0, 1, 0, hi - lo);
}

/* Rows lo..hi-1, no bias gradient */
static void gelu_backward_rows(void *ctx, size_t lo, size_t hi)
{
    gelu_backward_block(ctx, lo, hi, 0, ((const rows_args *)ctx)->n);
}

/* Blocks of rows lo..hi-1 (ag_fast_row_block): dx, and the bias's gradient
 * summed into each block's row of partial sums as the rows go by */
static void gelu_backward_blocks(void *ctx, size_t lo, size_t hi)
{
    const rows_args *a = ctx;
    const size_t cols = a->n, block = a->block;
    for (size_t bk = lo; bk < hi; bk++) {
        rows_args piece = *a;
        piece.db = a->part_b + bk * cols;
        memset(piece.db, 0, cols * sizeof *piece.db);
        const size_t r0 = bk * block, r1 = r0 + block < a->inner ? r0 + block : a->inner;
        gelu_backward_block(&piece, r0, r1, 0, cols);
    }
}

/* each block's partial sums of the bias's gradient, on the calling thread */
static _Thread_local ag_scratch gelu_partials;

/* The bias's gradient sums each column over the rows in ag_fast_column_sums'
 * blocks and order, so the bits are the unfused ops' (GELU's backward,
 * then the column sums of what it stored) however the blocks were shared,
 * in one pass over the rows. */
void ag_fast_gelu_backward(const ag_real *x, const ag_real *b, const void *keep, const ag_real *dy, size_t rows,
                           size_t cols, ag_real *dx, int assign, ag_real *db)
{
    rows_args r = { .x = x, .b = b, .kept = keep, .dy = dy, .dx = dx, .assign = assign, .n = cols, .inner = rows };
    const size_t size = rows * cols;
    if (!b && !db) {
        ag_parallel_for(size, size, gelu_backward_range, &r);
    } else if (!db) {
        ag_parallel_for(rows, size, gelu_backward_rows, &r);
    } else if (rows && cols) {
        r.block = ag_fast_row_block(rows, cols);
        const size_t blocks = (rows + r.block - 1) / r.block;
        r.part_b = ag_scratch_get(&gelu_partials, blocks * cols * sizeof(ag_real), "GELU's partial sums");
        ag_parallel_for(blocks, size, gelu_backward_blocks, &r);
        ag_fast_add_partials(r.part_b, blocks, cols, db);
    }
}
