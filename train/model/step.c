/*
 * step.c - one training step (see step.h): forward, cross-entropy,
 * backward of the weighted loss; then the checks, clipping and update.
 */
#include <math.h>

#include "step.h"

ag_tensor *step_loss(ag_ctx *ctx, model *m, const step_rows *r)
{
    ag_reset(ctx);
    ag_tensor *logits = model_forward(ctx, m, r->x, r->rows, r->S, 1, NULL);  /* [rows,S,V] */
    return ag_cross_entropy(ctx, logits, r->y);                               /* [1] */
}

double step_gradient(ag_ctx *ctx, model *m, const step_rows *r)
{
    ag_pcg32 *gen = ag_dropout_rng(ctx), kept = *gen;
    if (r->dropout)
        *gen = *r->dropout;
    ag_tensor *loss = step_loss(ctx, m, r);
    if (r->dropout)
        *gen = kept;                    /* the forward pass drew every mask it needs */
    ag_params_zero_grad(m->params);
    /* d(w L)/dθ = w dL/dθ.  A whole batch (w = 1) seeds backward with the
     * loss itself, so its graph is exactly forward and loss. */
    ag_backward(ctx, r->weight == 1 ? loss : ag_scale(ctx, loss, (ag_real)r->weight));
    return (double)loss->data[0];
}

/* The first parameter whose gradient (or value) holds a NaN or infinity,
 * once the one-pass tests below have found that one does.  x - x is 0 for
 * every finite x and NaN for NaN and the infinities. */
static const ag_tensor *first_not_finite(const ag_params *ps, int grads)
{
    for (int i = 0; i < ps->count; i++) {
        const ag_tensor *t = ps->list[i];
        const ag_real *v = grads ? t->grad : t->data;
        int bad = 0;
        for (size_t k = 0; k < t->size; k++)
            bad |= v[k] - v[k] != 0;
        if (bad)
            return t;
    }
    return NULL;
}

/* The gradients' norm is the check: it is NaN or infinite when a gradient
 * is (the squares are summed in double), and the same pass serves the
 * clipping; the update reports values it left not finite.  Both passes
 * are shared between the threads; the search for which parameter it was
 * runs only when one was. */
step_result step_update(ag_params *ps, ag_optim *optim, double loss, double clip, double lr)
{
    step_result r = { loss, STEP_OK, NULL };
    if (!isfinite(loss)) {
        r.status = STEP_BAD_LOSS;
        return r;
    }
    const double norm = ag_grad_norm(ps);
    if (!isfinite(norm) && (r.bad = first_not_finite(ps, 1))) {
        r.status = STEP_BAD_GRAD;
        return r;                       /* no update from a bad gradient */
    }
    if (clip > 0)   /* g <- g min(1, clip / (||g|| + 1e-6)), one norm over every parameter */
        ag_clip_grads_with_norm(ps, clip, norm);
    if (!ag_optim_step(optim, lr) && (r.bad = first_not_finite(ps, 0)))
        r.status = STEP_BAD_UPDATE;
    return r;
}

step_result step_take(ag_ctx *ctx, model *m, ag_optim *optim, const step_rows *batch, double clip, double lr)
{
    return step_update(m->params, optim, step_gradient(ctx, m, batch), clip, lr);
}
