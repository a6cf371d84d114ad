/*
 * optim.c - SGD with momentum, AdamW and global gradient-norm clipping.
 * Parameters, gradients and moments are parallel contiguous blocks, so an
 * update is a flat loop over each parameter's stretch of them.
 */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

static ag_optim *optim_new(ag_params *ps, int kind, int moments)
{
    ag_optim *o = calloc(1, sizeof *o);
    if (!o)
        ag_error("out of memory creating the optimizer");
    o->kind = kind;
    o->ps = ps;
    size_t n = ps->total ? ps->total : 1;
    o->m = calloc(n, sizeof(ag_real));
    o->v = moments == 2 ? calloc(n, sizeof(ag_real)) : NULL;
    if (!o->m || (moments == 2 && !o->v))
        ag_error("out of memory: optimizer state for %zu parameters", ps->total);
    return o;
}

ag_optim *ag_optim_sgd(ag_params *ps, double momentum, double weight_decay)
{
    ag_optim *o = optim_new(ps, AG_SGD, 1);
    o->momentum = momentum;
    o->weight_decay = weight_decay;
    return o;
}

ag_optim *ag_optim_adamw(ag_params *ps, double beta1, double beta2, double eps, double weight_decay)
{
    ag_optim *o = optim_new(ps, AG_ADAMW, 2);
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = weight_decay;
    return o;
}

void ag_optim_free(ag_optim *o)
{
    if (!o)
        return;
    free(o->m);
    free(o->v);
    free(o);
}

/* The updates run parameter by parameter, each a stretch of the flat
 * blocks with its own weight decay (definitions: ref_sgd and ref_adamw in
 * src/reference.c). */
void ag_optim_step(ag_optim *o, double lr)
{
    ag_params *ps = o->ps;
    for (int k = 0; k < ps->count; k++) {
        ag_tensor *t = ps->list[k];
        size_t off = (size_t)(t->data - ps->data);
        double decay = t->decay ? o->weight_decay : 0;
        if (o->kind == AG_SGD) {
            ag_kern->sgd(t->data, t->grad, o->m + off, t->size, (ag_real)lr, (ag_real)o->momentum, (ag_real)decay,
                         o->step == 0);
        } else {
            ag_adamw_args a = { lr, o->beta1, o->beta2, o->eps, decay, o->step + 1 };
            ag_kern->adamw(t->data, t->grad, o->m + off, o->v + off, t->size, &a);
        }
    }
    o->step++;
}

double ag_clip_grad_norm(ag_params *ps, double max_norm)
{
    double norm = sqrt(ag_kern->sum_squares(ps->grad, ps->total));
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1) {
        ag_real c = (ag_real)coef;
        for (size_t i = 0; i < ps->total; i++)
            ps->grad[i] *= c;
    }
    return norm;
}
