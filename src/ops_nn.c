/*
 * ops_nn.c - the layers a transformer needs beyond arithmetic: dropout,
 * embedding lookup and layer normalization, each forward beside its backward.
 */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- dropout ------------------------------------------------------------ */

/* One multiplier per element from the context's generator, in order: 0
 * with probability p, else 1/(1-p) (p rounded down to a multiple of 2^-32
 * where it is not one: see ag_dropout_threshold).  The mask is kept for
 * backward. */
ag_tensor *ag_dropout(ag_ctx *ctx, ag_tensor *a, ag_real p, int training)
{
    ag_need("ag_dropout", "ctx", ctx);
    ag_need_data("ag_dropout", "a", a);
    if (!(p >= 0 && p < 1))
        ag_error("ag_dropout: p = %g is outside [0, 1)", (double)p);
    if (!ag_dropout_p_ok(p))
        ag_error("ag_dropout: p = %.17g keeps 1 - p = %g of the elements, less than the 2^-32 its 32-bit draws can "
                 "express", (double)p, 1 - (double)p);
    if (p == 0 || !training)
        return a;                   /* exact identity: nothing drawn, nothing recorded */
    /* an input the tape will refuse is refused before the draws, which
     * would have moved the generator for a call that did nothing */
    if (ctx->grad_enabled && a->requires_grad)
        ag_same_tape(ctx, AG_OP_DROPOUT, a);
    ag_real *mask = ag_alloc(ctx, a->size * sizeof(ag_real));
    const uint32_t threshold = ag_dropout_threshold(p);
    const ag_real scale = ag_dropout_scale(p);
    /* the draws, a run of RUN at a time (ag_pcg32_fill gives what as many
     * calls of ag_pcg32_next would: the run's length changes no draw) */
    enum { RUN = 256 };
    uint32_t draws[RUN];
    for (size_t i0 = 0; i0 < a->size; i0 += RUN) {
        const size_t n = a->size - i0 < RUN ? a->size - i0 : RUN;
        ag_pcg32_fill(&ctx->dropout_rng, draws, n);
        for (size_t k = 0; k < n; k++)
            mask[i0 + k] = ag_dropout_multiplier(draws[k], threshold, scale);
    }
    ag_tensor *out = ag_empty(ctx, a->ndim, a->shape);
    for (size_t i = 0; i < a->size; i++)
        out->data[i] = a->data[i] * mask[i];
    if (ag_should_record(ctx, out, a, NULL, NULL))
        ag_record(ctx, AG_OP_DROPOUT, out, a, NULL, NULL)->saved = mask;
    return out;
}

/* y = x * mask  =>  dx += dy * mask, the same mask the forward drew */
void ag_backward_dropout(ag_ctx *ctx, ag_node *n)
{
    const ag_real *mask = n->saved, *dy = n->out->grad;
    ag_real *dx = ag_grad(ctx, n->in[0]);
    for (size_t i = 0; i < n->out->size; i++)
        dx[i] += dy[i] * mask[i];
}

/* ---- embedding ---------------------------------------------------------- */

ag_tensor *ag_embedding(ag_ctx *ctx, ag_tensor *W, const int32_t *ids, int ndim, const int *ids_shape)
{
    ag_need("ag_embedding", "ctx", ctx);
    char sw[64];
    ag_need_data("ag_embedding", "W", W);
    ag_need("ag_embedding", "ids", ids);
    ag_need("ag_embedding", "ids_shape", ids_shape);
    if (W->ndim != 2)
        ag_error("ag_embedding: weight must be [V,d], got %s", ag_shape_str(W, sw, sizeof sw));
    if (ndim < 1 || ndim >= AG_MAX_DIMS)
        ag_error("ag_embedding: ids have %d dims (1 to %d supported)", ndim, AG_MAX_DIMS - 1);
    int shape[AG_MAX_DIMS], V = W->shape[0], d = W->shape[1];
    for (int i = 0; i < ndim; i++)
        shape[i] = ids_shape[i];
    shape[ndim] = d;
    (void)ag_shape_size("ag_embedding", ndim + 1, shape);   /* ids_shape's errors named as this op's */
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
void ag_backward_embedding(ag_ctx *ctx, ag_node *node)
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

typedef struct {
    ag_real *mean, *rstd;           /* per row */
} ln_saved;

/* y = (x - mean) / sqrt(var + eps) * weight + bias over the last dim
 * (definition: ref_layer_norm in src/reference.c). */
ag_tensor *ag_layer_norm(ag_ctx *ctx, ag_tensor *x, ag_tensor *weight, ag_tensor *bias, ag_real eps)
{
    ag_need("ag_layer_norm", "ctx", ctx);
    ag_need_data("ag_layer_norm", "x", x);
    if (weight)
        ag_need_data("ag_layer_norm", "weight", weight);
    if (bias)
        ag_need_data("ag_layer_norm", "bias", bias);
    /* 1/sqrt(var + eps) of a constant row is NaN for eps < 0 (and eps NaN is NaN everywhere) */
    if (!(eps >= 0))
        ag_error("ag_layer_norm: eps = %g must be >= 0", (double)eps);
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
    ln_saved *sv = ag_alloc(ctx, sizeof *sv);
    sv->mean = ag_alloc(ctx, R * sizeof(ag_real));
    sv->rstd = ag_alloc(ctx, R * sizeof(ag_real));
    ag_kern->layer_norm(x->data, weight ? weight->data : NULL, bias ? bias->data : NULL, R, D, eps, out->data,
                        sv->mean, sv->rstd);
    if (ag_should_record(ctx, out, x, weight, bias)) {
        ag_node *n = ag_record(ctx, AG_OP_LAYER_NORM, out, x, weight, bias);
        n->saved = sv;
        /* keep input slots positional even when weight is NULL and bias is not */
        n->in[1] = weight;
        n->in[2] = bias;
        n->n_in = 3;
    }
    return out;
}

/* With xhat = (x - mean) rstd and y = xhat w + b:
 *   db += dy,  dw += dy xhat  (summed over the rows),  and with g = dy w,
 *   dx (+)= rstd (g - mean(g) - xhat mean(g xhat))   (means over the row;
 * the derivation is at ref_layer_norm_backward in src/reference.c). */
void ag_backward_layer_norm(ag_ctx *ctx, ag_node *n)
{
    ag_tensor *x = n->in[0], *w = n->in[1], *b = n->in[2];
    const int D = x->shape[x->ndim - 1];
    const ln_saved *sv = n->saved;
    int assign = 0;
    ag_real *dx = x->requires_grad ? ag_grad_begin(ctx, x, &assign) : NULL;
    ag_real *dw = w && w->requires_grad ? ag_grad(ctx, w) : NULL;
    ag_real *db = b && b->requires_grad ? ag_grad(ctx, b) : NULL;
    ag_kern->layer_norm_backward(x->data, w ? w->data : NULL, sv->mean, sv->rstd, n->out->grad, x->size / (size_t)D,
                                 D, dx, assign, dw, db);
}
