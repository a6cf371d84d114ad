/*
 * ops_softmax.c - softmax, log_softmax, masked_fill and the fused
 * cross-entropy: the ops that turn attention scores into weights and
 * logits into a loss.  All of them subtract the row maximum before exp, and
 * all of them keep -inf (a masked score) from ever turning into NaN.
 */
#include <math.h>
#include <string.h>

#include "fastmath.h"
#include "internal.h"

/* A dim of a tensor seen as [outer, n, inner]: element k of row (o, i) is
 * at (o*n + k)*inner + i.  For the last dim inner == 1 and rows are contiguous. */
typedef struct { size_t outer, n, inner; } rows3;

static rows3 rows_of(const char *op, const ag_tensor *t, int dim, int *d)
{
    *d = ag_norm_dim(op, t, dim);
    rows3 r = { ag_span(t, 0, *d), (size_t)t->shape[*d], ag_span(t, *d + 1, t->ndim) };
    return r;
}

/* y = softmax(x) along one row of stride s, or log_softmax when `log` is set.
 * A row of all -inf has no maximum to subtract: softmax gives zeros and
 * log_softmax gives -inf, instead of exp(-inf - -inf) = NaN. */
static void softmax_contiguous(const ag_real *restrict x, ag_real *restrict y, size_t n, int log_out)
{
    ag_real max = ag_max_lanes(x, n);
    if (max == -INFINITY) {
        for (size_t k = 0; k < n; k++)
            y[k] = log_out ? -INFINITY : 0;
        return;
    }
    for (size_t k = 0; k < n; k++)
        y[k] = ag_fast_exp(x[k] - max);
    double sum = ag_sum_lanes(y, n);
    if (log_out) {
        ag_real log_sum = (ag_real)log(sum);
        for (size_t k = 0; k < n; k++)
            y[k] = (x[k] - max) - log_sum;
    } else {
        ag_real inv = (ag_real)(1.0 / sum);
        for (size_t k = 0; k < n; k++)
            y[k] *= inv;
    }
}

static void softmax_row(const ag_real *x, ag_real *y, size_t n, size_t s, int log_out)
{
    if (s == 1) {
        softmax_contiguous(x, y, n, log_out);
        return;
    }
    ag_real max = -INFINITY;
    for (size_t k = 0; k < n; k++)
        if (x[k * s] > max)
            max = x[k * s];
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
    if (log_out) {
        /* (x - max) - log(sum), not x - (max + log(sum)): with large logits
         * the latter rounds log(sum) to the spacing of floats near max. */
        ag_real log_sum = (ag_real)log(sum);
        for (size_t k = 0; k < n; k++)
            y[k * s] = (x[k * s] - max) - log_sum;
    } else {
        ag_real inv = (ag_real)(1.0 / sum);
        for (size_t k = 0; k < n; k++)
            y[k * s] *= inv;
    }
}

static ag_tensor *softmax_op(ag_ctx *ctx, int op, ag_tensor *a, int dim)
{
    int d;
    rows3 r = rows_of(op == AG_OP_SOFTMAX ? "ag_softmax" : "ag_log_softmax", a, dim, &d);
    ag_tensor *out = ag_empty(ctx, a->ndim, a->shape);
    size_t rows = r.outer * r.inner;
    #pragma omp parallel for schedule(static) if (a->size > AG_PARALLEL_MIN)
    for (size_t row = 0; row < rows; row++) {
        size_t base = (row / r.inner) * r.n * r.inner + row % r.inner;
        softmax_row(a->data + base, out->data + base, r.n, r.inner, op == AG_OP_LOG_SOFTMAX);
    }
    if (ag_should_record(ctx, out, a, NULL, NULL))
        ag_record(ctx, op, out, a, NULL, NULL)->iarg[0] = d;
    return out;
}

ag_tensor *ag_softmax(ag_ctx *ctx, ag_tensor *a, int dim) { return softmax_op(ctx, AG_OP_SOFTMAX, a, dim); }
ag_tensor *ag_log_softmax(ag_ctx *ctx, ag_tensor *a, int dim) { return softmax_op(ctx, AG_OP_LOG_SOFTMAX, a, dim); }

/* y = softmax(x): dy_j/dx_k = y_j ([j = k] - y_k), so
 *   dx_k += y_k (dy_k - sum_j dy_j y_j).
 * Masked entries have y_k = 0 and receive exactly 0; so does a fully masked row. */
void ag_backward_SOFTMAX(ag_ctx *ctx, ag_node *node)
{
    int d;
    rows3 r = rows_of("ag_softmax", node->out, node->iarg[0], &d);
    const ag_real *y = node->out->data, *dy = node->out->grad;
    ag_real *dx = ag_grad(ctx, node->in[0]);
    size_t rows = r.outer * r.inner;
    #pragma omp parallel for schedule(static) if (node->out->size > AG_PARALLEL_MIN)
    for (size_t row = 0; row < rows; row++) {
        size_t base = (row / r.inner) * r.n * r.inner + row % r.inner, s = r.inner;
        double dot = 0;
        if (s == 1)
            dot = ag_dot_lanes(dy + base, y + base, r.n);
        else
            for (size_t k = 0; k < r.n; k++)
                dot += (double)dy[base + k * s] * y[base + k * s];
        for (size_t k = 0; k < r.n; k++)
            dx[base + k * s] += y[base + k * s] * (dy[base + k * s] - (ag_real)dot);
    }
}

/* y = log_softmax(x):  dx_k += dy_k - softmax_k sum_j dy_j.
 * An entry whose output is -inf (its input was -inf) is a constant, not a
 * function of anything: it gets 0, which also covers fully masked rows. */
void ag_backward_LOG_SOFTMAX(ag_ctx *ctx, ag_node *node)
{
    int d;
    rows3 r = rows_of("ag_log_softmax", node->out, node->iarg[0], &d);
    const ag_real *y = node->out->data, *dy = node->out->grad;
    ag_real *dx = ag_grad(ctx, node->in[0]);
    for (size_t o = 0; o < r.outer; o++)
        for (size_t i = 0; i < r.inner; i++) {
            size_t base = o * r.n * r.inner + i, s = r.inner;
            double sum = 0;
            for (size_t k = 0; k < r.n; k++)
                if (y[base + k * s] != -INFINITY)
                    sum += dy[base + k * s];
            for (size_t k = 0; k < r.n; k++) {
                ag_real yk = y[base + k * s];
                if (yk != -INFINITY)
                    dx[base + k * s] += dy[base + k * s] - ag_fast_exp(yk) * (ag_real)sum;
            }
        }
}

/* ---- masked_fill -------------------------------------------------------- */

ag_tensor *ag_masked_fill(ag_ctx *ctx, ag_tensor *a, ag_tensor *mask, ag_real value)
{
    ag_bcast bc = ag_broadcast("ag_masked_fill", a, mask);
    if (bc.out_ndim != a->ndim || memcmp(bc.out_shape, a->shape, (size_t)a->ndim * sizeof(int)) != 0) {
        char sa[64], sm[64];
        ag_error("ag_masked_fill: mask %s does not broadcast to %s", ag_shape_str(mask, sm, sizeof sm),
                 ag_shape_str(a, sa, sizeof sa));
    }
    /* Expand the mask once to a's shape: forward and backward then share it. */
    unsigned char *m = ag_alloc(ctx, a->size);
    size_t o = 0;
    for (int i0 = 0; i0 < bc.n[0]; i0++)
        for (int i1 = 0; i1 < bc.n[1]; i1++)
            for (int i2 = 0; i2 < bc.n[2]; i2++) {
                const ag_real *pm = mask->data + i0 * bc.sb[0] + i1 * bc.sb[1] + i2 * bc.sb[2];
                for (int j = 0; j < bc.n[3]; j++)
                    m[o + (size_t)j] = pm[j * bc.sb[3]] != 0;
                o += (size_t)bc.n[3];
            }
    ag_tensor *out = ag_empty(ctx, a->ndim, a->shape);
    #pragma omp parallel for schedule(static) if (a->size > AG_PARALLEL_MIN)
    for (size_t i = 0; i < a->size; i++)
        out->data[i] = m[i] ? value : a->data[i];
    if (ag_should_record(ctx, out, a, NULL, NULL))
        ag_record(ctx, AG_OP_MASKED_FILL, out, a, NULL, NULL)->saved = m;
    return out;
}

/* A filled entry is a constant: dx = dy where kept, 0 where filled. */
void ag_backward_MASKED_FILL(ag_ctx *ctx, ag_node *n)
{
    const unsigned char *m = n->saved;
    const ag_real *dy = n->out->grad;
    ag_real *dx = ag_grad(ctx, n->in[0]);
    #pragma omp parallel for schedule(static) if (n->out->size > AG_PARALLEL_MIN)
    for (size_t i = 0; i < n->out->size; i++)
        dx[i] += m[i] ? 0 : dy[i];
}

/* ---- cross-entropy ------------------------------------------------------ */

typedef struct {
    int32_t *targets;
    ag_real *prob;                  /* softmax of every row, for backward */
    size_t counted;
} ce_saved;

/* Rows are independent: threads take whole rows, and the mean adds the
 * per-row losses in row order afterwards, so the thread count changes
 * nothing.  Forward keeps each row's softmax, so backward is one pass. */
ag_tensor *ag_cross_entropy(ag_ctx *ctx, ag_tensor *logits, const int32_t *targets)
{
    int V = logits->shape[logits->ndim - 1];
    size_t R = logits->size / (size_t)V;
    for (size_t r = 0; r < R; r++)
        if (targets[r] >= V)
            ag_error("ag_cross_entropy: target %d out of range [0,%d) at row %zu", targets[r], V, r);
    ce_saved *sv = ag_alloc(ctx, sizeof *sv);
    sv->targets = ag_alloc(ctx, R * sizeof(int32_t));
    sv->prob = ag_alloc(ctx, logits->size * sizeof(ag_real));
    double *loss = ag_alloc(ctx, R * sizeof(double));
    memcpy(sv->targets, targets, R * sizeof(int32_t));
    #pragma omp parallel for schedule(static) if (logits->size > AG_PARALLEL_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *x = logits->data + r * (size_t)V;
        ag_real *p = sv->prob + r * (size_t)V;
        ag_real max = ag_max_lanes(x, (size_t)V);
        for (int k = 0; k < V; k++)
            p[k] = ag_fast_exp(x[k] - max);
        double sum = ag_sum_lanes(p, (size_t)V);
        ag_real inv = (ag_real)(1.0 / sum);
        for (int k = 0; k < V; k++)
            p[k] *= inv;
        /* -log softmax(x)[t] = logsumexp(x) - x[t] = (max - x[t]) + log(sum) */
        loss[r] = targets[r] >= 0 ? (double)(max - x[targets[r]]) + log(sum) : 0;
    }
    double total = 0;
    sv->counted = 0;
    for (size_t r = 0; r < R; r++)
        if (targets[r] >= 0) {
            total += loss[r];
            sv->counted++;
        }
    ag_tensor *out = ag_empty(ctx, 1, (int[]){1});
    out->data[0] = sv->counted ? (ag_real)(total / (double)sv->counted) : 0;
    if (ag_should_record(ctx, out, logits, NULL, NULL))
        ag_record(ctx, AG_OP_CROSS_ENTROPY, out, logits, NULL, NULL)->saved = sv;
    return out;
}

/* loss = mean_r (lse_r - x[r, t_r])  =>  dx[r, k] += dy (softmax(x_r)_k - [k = t_r]) / counted */
void ag_backward_CROSS_ENTROPY(ag_ctx *ctx, ag_node *n)
{
    const ce_saved *sv = n->saved;
    ag_tensor *logits = n->in[0];
    int V = logits->shape[logits->ndim - 1];
    size_t R = logits->size / (size_t)V;
    ag_real scale = sv->counted ? n->out->grad[0] / (ag_real)sv->counted : 0;
    int assign;                      /* every row is written: ignored rows get 0 */
    ag_real *dx = ag_grad_begin(ctx, logits, &assign);
    #pragma omp parallel for schedule(static) if (logits->size > AG_PARALLEL_MIN)
    for (size_t r = 0; r < R; r++) {
        int t = sv->targets[r];
        const ag_real *p = sv->prob + r * (size_t)V;
        ag_real *g = dx + r * (size_t)V;
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
