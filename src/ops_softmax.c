/*
 * ops_softmax.c - softmax, log_softmax, masked_fill and the fused
 * cross-entropy: the ops that turn attention scores into weights and
 * logits into a loss.  The three that exponentiate subtract the row maximum
 * before exp, and all of them keep -inf (a masked score) from ever turning
 * into NaN, with one
 * exception: cross-entropy of a scored row whose every logit is -inf, a loss
 * of -log(0/0), is NaN, as in PyTorch (a -inf target logit alone gives +inf).
 * The row arithmetic is in the kernels (definitions: ref_softmax,
 * ref_cross_entropy and their backwards in src/reference.c).
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/* A dim of a tensor seen as [outer, n, inner]: element k of row (o, i) is
 * at (o*n + k)*inner + i.  For the last dim inner == 1 and rows are contiguous. */
typedef struct { size_t outer, n, inner; } rows3;

static rows3 rows_of(const char *op, const ag_tensor *t, int dim, int *d)
{
    ag_need_data(op, "a", t);
    *d = ag_norm_dim(op, t, dim);
    rows3 r = { ag_span(t, 0, *d), (size_t)t->shape[*d], ag_span(t, *d + 1, t->ndim) };
    return r;
}

static const char *softmax_fn(int log_out) { return log_out ? "ag_log_softmax" : "ag_softmax"; }

static ag_tensor *softmax_op(ag_ctx *ctx, int op, ag_tensor *a, int dim)
{
    int d, log_out = op == AG_OP_LOG_SOFTMAX;
    ag_need(softmax_fn(log_out), "ctx", ctx);
    rows3 r = rows_of(softmax_fn(log_out), a, dim, &d);
    ag_tensor *out = ag_empty(ctx, a->ndim, a->shape);
    ag_kern->softmax(a->data, out->data, r.outer, r.n, r.inner, log_out);
    if (ag_should_record(ctx, out, a, NULL, NULL))
        ag_record(ctx, op, out, a, NULL, NULL)->iarg[0] = d;
    return out;
}

ag_tensor *ag_softmax(ag_ctx *ctx, ag_tensor *a, int dim) { return softmax_op(ctx, AG_OP_SOFTMAX, a, dim); }
ag_tensor *ag_log_softmax(ag_ctx *ctx, ag_tensor *a, int dim) { return softmax_op(ctx, AG_OP_LOG_SOFTMAX, a, dim); }

/* y = softmax(x):      dx_k += y_k (dy_k - sum_j dy_j y_j)
 * y = log_softmax(x):  dx_k += dy_k - softmax_k sum_j dy_j
 * Masked entries (y = 0, or -inf for log_softmax) receive exactly 0, and so
 * does a fully masked row. */
static void softmax_backward(ag_ctx *ctx, ag_node *node, int log_out)
{
    int d;
    rows3 r = rows_of(softmax_fn(log_out), node->out, node->iarg[0], &d);
    ag_kern->softmax_backward(node->out->data, node->out->grad, ag_grad(ctx, node->in[0]), r.outer, r.n, r.inner,
                              log_out);
}

void ag_backward_softmax(ag_ctx *ctx, ag_node *node) { softmax_backward(ctx, node, 0); }
void ag_backward_log_softmax(ag_ctx *ctx, ag_node *node) { softmax_backward(ctx, node, 1); }

/* ---- masked_fill -------------------------------------------------------- */

/* Forward: out[i] = m[i] ? value : x[i].  Backward, with x the output's
 * gradient dy and out the input's dx: out[i] += m[i] ? 0 : x[i]. */
typedef struct {
    const unsigned char *m;
    const ag_real *x;
    ag_real *out;
    ag_real value;
} fill_args;

static void masked_fill_range(void *ctx, size_t lo, size_t hi)
{
    const fill_args *f = ctx;
    for (size_t i = lo; i < hi; i++)
        f->out[i] = f->m[i] ? f->value : f->x[i];
}

static void masked_fill_backward_range(void *ctx, size_t lo, size_t hi)
{
    const fill_args *f = ctx;
    for (size_t i = lo; i < hi; i++)
        f->out[i] += f->m[i] ? 0 : f->x[i];
}

ag_tensor *ag_masked_fill(ag_ctx *ctx, ag_tensor *a, ag_tensor *mask, ag_real value)
{
    ag_need("ag_masked_fill", "ctx", ctx);
    ag_need_data("ag_masked_fill", "a", a);
    ag_need_data("ag_masked_fill", "mask", mask);
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
    fill_args f = { m, a->data, out->data, value };
    ag_parallel_for(a->size, a->size, masked_fill_range, &f);
    if (ag_should_record(ctx, out, a, NULL, NULL))
        ag_record(ctx, AG_OP_MASKED_FILL, out, a, NULL, NULL)->saved = m;
    return out;
}

/* y = mask ? value : x  =>  dx += dy where kept, nothing where filled (a
 * filled entry is a constant). */
void ag_backward_masked_fill(ag_ctx *ctx, ag_node *n)
{
    const unsigned char *m = n->saved;
    const ag_real *dy = n->out->grad;
    ag_real *dx = ag_grad(ctx, n->in[0]);
    fill_args f = { m, dy, dx, 0 };
    ag_parallel_for(n->out->size, n->out->size, masked_fill_backward_range, &f);
}

/* ---- cross-entropy ------------------------------------------------------ */

typedef struct {
    int32_t *targets;
    ag_real *prob;                  /* softmax of every row, for backward */
    size_t counted;                 /* rows scored (target >= 0): the mean's divisor */
} ce_saved;

/* loss = mean over the scored rows r (t_r >= 0) of -log softmax(x_r)[t_r].
 * Forward keeps each row's softmax, so backward is one pass.  The mean adds
 * the per-row losses in row order. */
ag_tensor *ag_cross_entropy(ag_ctx *ctx, ag_tensor *logits, const int32_t *targets)
{
    ag_need("ag_cross_entropy", "ctx", ctx);
    ag_need_data("ag_cross_entropy", "logits", logits);
    ag_need("ag_cross_entropy", "targets", targets);
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
    ag_kern->cross_entropy(logits->data, targets, R, V, sv->prob, loss);
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

ag_real ag_div_count(ag_real dy, size_t n)
{
    return n ? (ag_real)((double)dy / (double)n) : 0;
}

/* loss = mean_r (lse_r - x[r, t_r])  =>  dx[r, k] (+)= dy (softmax(x_r)_k - [k = t_r]) / counted,
 * over the counted rows r (lse_r = log sum_k exp x[r, k]; an ignored row gets 0) */
void ag_backward_cross_entropy(ag_ctx *ctx, ag_node *n)
{
    const ce_saved *sv = n->saved;
    ag_tensor *logits = n->in[0];
    int V = logits->shape[logits->ndim - 1];
    ag_real scale = ag_div_count(n->out->grad[0], sv->counted);
    int assign;                      /* every row is written: ignored rows get 0 */
    ag_real *dx = ag_grad_begin(ctx, logits, &assign);
    ag_kern->cross_entropy_backward(sv->prob, sv->targets, logits->size / (size_t)V, V, scale, dx, assign);
}
