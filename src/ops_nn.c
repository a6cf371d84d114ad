/*
 * ops_nn.c - the layers a transformer needs beyond arithmetic: dropout,
 * embedding lookup and layer normalization, each forward beside its backward.
 */
#include <math.h>
#include <string.h>

#include "fastmath.h"
#include "internal.h"

/* ---- dropout ------------------------------------------------------------ */

ag_real *ag_dropout_mask(ag_ctx *ctx, size_t n, ag_real p)
{
    /* Keep an element when a 32-bit draw is at least p * 2^32, so it is
     * dropped with probability p.  Survivors are scaled by 1/(1-p), which
     * keeps the expected value unchanged ("inverted" dropout), so evaluation
     * needs no rescaling. */
    uint32_t threshold = (uint32_t)((double)p * 4294967296.0);
    ag_real keep_scale = (ag_real)(1.0 / (1.0 - (double)p));
    ag_real *mask = ag_alloc(ctx, n * sizeof(ag_real));
    for (size_t i = 0; i < n; i++)
        mask[i] = ag_pcg32_next(&ctx->dropout_rng) >= threshold ? keep_scale : 0;
    return mask;
}

ag_tensor *ag_dropout(ag_ctx *ctx, ag_tensor *a, ag_real p, int training)
{
    if (!(p >= 0 && p < 1))
        ag_error("ag_dropout: p = %g is outside [0, 1)", (double)p);
    if (p == 0 || !training)
        return a;                   /* exact identity: nothing drawn, nothing recorded */
    ag_real *mask = ag_dropout_mask(ctx, a->size, p);
    ag_tensor *out = ag_empty(ctx, a->ndim, a->shape);
    for (size_t i = 0; i < a->size; i++)
        out->data[i] = a->data[i] * mask[i];
    if (ag_should_record(ctx, out, a, NULL, NULL))
        ag_record(ctx, AG_OP_DROPOUT, out, a, NULL, NULL)->saved = mask;
    return out;
}

/* y = x * mask  =>  dx += dy * mask, the same mask the forward drew */
void ag_backward_DROPOUT(ag_ctx *ctx, ag_node *n)
{
    const ag_real *mask = n->saved, *dy = n->out->grad;
    ag_real *dx = ag_grad(ctx, n->in[0]);
    for (size_t i = 0; i < n->out->size; i++)
        dx[i] += dy[i] * mask[i];
}

/* ---- embedding ---------------------------------------------------------- */

ag_tensor *ag_embedding(ag_ctx *ctx, ag_tensor *W, const int32_t *ids, int ndim, const int *ids_shape)
{
    char sw[64];
    if (W->ndim != 2)
        ag_error("ag_embedding: weight must be [V,d], got %s", ag_shape_str(W, sw, sizeof sw));
    if (ndim < 1 || ndim >= AG_MAX_DIMS)
        ag_error("ag_embedding: ids have %d dims (1 to %d supported)", ndim, AG_MAX_DIMS - 1);
    int shape[AG_MAX_DIMS], V = W->shape[0], d = W->shape[1];
    for (int i = 0; i < ndim; i++)
        shape[i] = ids_shape[i];
    shape[ndim] = d;
    ag_tensor *out = ag_empty(ctx, ndim + 1, shape);
    size_t n = out->size / (size_t)d;
    int32_t *saved = ag_alloc(ctx, n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= V)
            ag_error("ag_embedding: id %d out of range [0,%d) at position %zu", ids[i], V, i);
        saved[i] = ids[i];
        memcpy(out->data + i * (size_t)d, W->data + (size_t)ids[i] * d, (size_t)d * sizeof(ag_real));
    }
    if (ag_should_record(ctx, out, W, NULL, NULL))
        ag_record(ctx, AG_OP_EMBEDDING, out, W, NULL, NULL)->saved = saved;
    return out;
}

/* y_i = W[id_i]  =>  dW[id_i] += dy_i; a repeated id collects every use. */
void ag_backward_EMBEDDING(ag_ctx *ctx, ag_node *node)
{
    const int32_t *ids = node->saved;
    int d = node->in[0]->shape[1];
    size_t n = node->out->size / (size_t)d;
    ag_real *dW = ag_grad(ctx, node->in[0]);
    for (size_t i = 0; i < n; i++) {
        ag_real *row = dW + (size_t)ids[i] * d;
        const ag_real *g = node->out->grad + i * (size_t)d;
        for (int k = 0; k < d; k++)
            row[k] += g[k];
    }
}

/* ---- layer norm --------------------------------------------------------- */

/* D ones in the arena: the weight of a layer norm that has none. */
static const ag_real *ones(ag_ctx *ctx, int D)
{
    ag_real *o = ag_alloc(ctx, (size_t)D * sizeof(ag_real));
    for (int k = 0; k < D; k++)
        o[k] = 1;
    return o;
}

ag_tensor *ag_layer_norm(ag_ctx *ctx, ag_tensor *x, ag_tensor *weight, ag_tensor *bias, ag_real eps)
{
    int D = x->shape[x->ndim - 1];
    char sx[64], sp[64];
    if (weight && (weight->ndim != 1 || weight->shape[0] != D))
        ag_error("ag_layer_norm: weight %s does not fit input %s", ag_shape_str(weight, sp, sizeof sp),
                 ag_shape_str(x, sx, sizeof sx));
    if (bias && (bias->ndim != 1 || bias->shape[0] != D))
        ag_error("ag_layer_norm: bias %s does not fit input %s", ag_shape_str(bias, sp, sizeof sp),
                 ag_shape_str(x, sx, sizeof sx));
    size_t R = x->size / (size_t)D;
    ag_tensor *out = ag_empty(ctx, x->ndim, x->shape);
    ag_real *stats = ag_alloc(ctx, 2 * R * sizeof(ag_real));   /* mean, 1/std per row */
    const ag_real *wv = weight ? weight->data : ones(ctx, D), *bv = bias ? bias->data : NULL;
    #pragma omp parallel for schedule(static) if (x->size > AG_PARALLEL_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *restrict xr = x->data + r * (size_t)D;
        ag_real *restrict yr = out->data + r * (size_t)D;
        /* two passes, each a fixed-order lane sum: the mean, then the
         * squared deviations from it (biased variance, as PyTorch) */
        ag_real m = (ag_real)(ag_sum_lanes(xr, (size_t)D) / D);
        double var = ag_sum_sq_dev_lanes(xr, (size_t)D, m) / D;
        ag_real rstd = (ag_real)(1.0 / sqrt(var + eps));
        stats[2 * r] = m;
        stats[2 * r + 1] = rstd;
        if (bv)
            for (int k = 0; k < D; k++)
                yr[k] = (xr[k] - m) * rstd * wv[k] + bv[k];
        else
            for (int k = 0; k < D; k++)
                yr[k] = (xr[k] - m) * rstd * wv[k];
    }
    if (ag_should_record(ctx, out, x, weight, bias)) {
        ag_node *n = ag_record(ctx, AG_OP_LAYER_NORM, out, x, weight, bias);
        n->saved = stats;
        /* keep input slots positional even when weight is NULL and bias is not */
        n->in[1] = weight;
        n->in[2] = bias;
        n->n_in = 3;
    }
    return out;
}

/* With xhat = (x - mean) rstd and y = xhat w + b:
 *   db += dy,  dw += dy xhat,  and with g = dy w,
 *   dx = rstd (g - mean(g) - xhat mean(g xhat))   (mean over the row). */
void ag_backward_LAYER_NORM(ag_ctx *ctx, ag_node *n)
{
    ag_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    const int D = x->shape[x->ndim - 1];
    const size_t R = x->size / (size_t)D;
    const ag_real *stats = n->saved, *wv = w ? w->data : ones(ctx, D);
    int assign = 0;
    ag_real *dx = x->requires_grad ? ag_grad_begin(ctx, x, &assign) : NULL;
    ag_real *dw = w && w->requires_grad ? ag_grad(ctx, w) : NULL;
    ag_real *db = b && b->requires_grad ? ag_grad(ctx, b) : NULL;
    /* dx: each row on its own, so rows can go to different threads */
    if (dx) {
        #pragma omp parallel for schedule(static) if (x->size > AG_PARALLEL_MIN)
        for (size_t r = 0; r < R; r++) {
            const ag_real *restrict xr = x->data + r * (size_t)D, *restrict dy = n->out->grad + r * (size_t)D;
            const ag_real m = stats[2 * r], rstd = stats[2 * r + 1];
            /* the row means of g = dy w and of g xhat, as fixed-order lane sums */
            ag_real acc_g[AG_LANES] = { 0 }, acc_gx[AG_LANES] = { 0 };
            int k = 0;
            for (; k + AG_LANES <= D; k += AG_LANES)
                for (int l = 0; l < AG_LANES; l++) {
                    ag_real g = dy[k + l] * wv[k + l];
                    acc_g[l] += g;
                    acc_gx[l] += g * ((xr[k + l] - m) * rstd);
                }
            double sum_g = ag_lanes_sum(acc_g), sum_gx = ag_lanes_sum(acc_gx);
            for (; k < D; k++) {
                ag_real g = dy[k] * wv[k];
                sum_g += g;
                sum_gx += g * ((xr[k] - m) * rstd);
            }
            const ag_real mean_g = (ag_real)(sum_g / D), mean_gx = (ag_real)(sum_gx / D);
            ag_real *restrict dxr = dx + r * (size_t)D;
            if (assign)
                for (k = 0; k < D; k++)
                    dxr[k] = rstd * (dy[k] * wv[k] - mean_g - (xr[k] - m) * rstd * mean_gx);
            else
                for (k = 0; k < D; k++)
                    dxr[k] += rstd * (dy[k] * wv[k] - mean_g - (xr[k] - m) * rstd * mean_gx);
        }
    }
    /* dw, db: each column summed over the rows in row order, by one thread */
    if (dw || db) {
        #pragma omp parallel for schedule(static) if (x->size > AG_PARALLEL_MIN && D >= 64)
        for (int k0 = 0; k0 < D; k0 += 16) {
            const int k1 = k0 + 16 < D ? k0 + 16 : D;
            for (size_t r = 0; r < R; r++) {
                const ag_real *xr = x->data + r * (size_t)D, *dy = n->out->grad + r * (size_t)D;
                const ag_real m = stats[2 * r], rstd = stats[2 * r + 1];
                if (dw)
                    for (int k = k0; k < k1; k++)
                        dw[k] += dy[k] * ((xr[k] - m) * rstd);
                if (db)
                    for (int k = k0; k < k1; k++)
                        db[k] += dy[k];
            }
        }
    }
}
