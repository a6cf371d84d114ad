/*
 * optim.c - SGD with momentum, AdamW and global gradient-norm clipping.
 * Parameters, gradients and moments are parallel contiguous blocks, so an
 * update is a flat loop over each parameter's stretch of them.
 */
#include <math.h>
#include <stdlib.h>

#include "attograd.h"

#ifdef AG_DOUBLE
#define SQRT sqrt
#else
#define SQRT sqrtf
#endif

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

/* Both updates are element by element: each parameter's new value depends on
 * its own gradient and moments only, so the loops are vector code and, for
 * large blocks, split between threads with no effect on the result. */
#define OPTIM_PARALLEL_MIN 16384

static void sgd_step(ag_optim *o, double lr)
{
    ag_params *ps = o->ps;
    const ag_real mu = (ag_real)o->momentum, rate = (ag_real)lr;
    for (int k = 0; k < ps->count; k++) {
        ag_tensor *t_ = ps->list[k];
        size_t off = (size_t)(t_->data - ps->data);
        ag_real *restrict p = t_->data, *restrict buf = o->m + off;
        const ag_real *restrict g = t_->grad;
        const ag_real wd = t_->decay ? (ag_real)o->weight_decay : 0;
        const long n = (long)t_->size;
        if (mu == 0) {
            #pragma omp parallel for schedule(static) if (n > OPTIM_PARALLEL_MIN)
            for (long i = 0; i < n; i++)
                p[i] -= rate * (g[i] + wd * p[i]);
        } else if (o->step == 0) {
            /* the first step starts the buffer at the gradient itself */
            #pragma omp parallel for schedule(static) if (n > OPTIM_PARALLEL_MIN)
            for (long i = 0; i < n; i++) {
                buf[i] = g[i] + wd * p[i];
                p[i] -= rate * buf[i];
            }
        } else {
            #pragma omp parallel for schedule(static) if (n > OPTIM_PARALLEL_MIN)
            for (long i = 0; i < n; i++) {
                buf[i] = mu * buf[i] + (g[i] + wd * p[i]);
                p[i] -= rate * buf[i];
            }
        }
    }
}

static void adamw_step(ag_optim *o, double lr)
{
    ag_params *ps = o->ps;
    long t = o->step + 1;
    double bc1 = 1 - pow(o->beta1, (double)t), bc2 = 1 - pow(o->beta2, (double)t);
    const ag_real b1 = (ag_real)o->beta1, b2 = (ag_real)o->beta2, eps = (ag_real)o->eps;
    const ag_real step_size = (ag_real)(lr / bc1), sqrt_bc2 = (ag_real)sqrt(bc2);
    for (int k = 0; k < ps->count; k++) {
        ag_tensor *t_ = ps->list[k];
        size_t off = (size_t)(t_->data - ps->data);
        ag_real *restrict p = t_->data, *restrict m = o->m + off, *restrict v = o->v + off;
        const ag_real *restrict g = t_->grad;
        const long n = (long)t_->size;
        /* decoupled weight decay, on the parameters the model flagged */
        const ag_real decay = t_->decay ? (ag_real)(1 - lr * o->weight_decay) : 1;
        #pragma omp parallel for schedule(static) if (n > OPTIM_PARALLEL_MIN)
        for (long i = 0; i < n; i++) {
            p[i] *= decay;
            m[i] = b1 * m[i] + (1 - b1) * g[i];
            v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
            p[i] -= step_size * m[i] / (SQRT(v[i]) / sqrt_bc2 + eps);
        }
    }
}

void ag_optim_step(ag_optim *o, double lr)
{
    if (o->kind == AG_SGD)
        sgd_step(o, lr);
    else
        adamw_step(o, lr);
    o->step++;
}

/* Sum of squares in double, in 8 running partial sums (element i goes to
 * lane i % 8) added up at the end: the order is fixed, and the loop is
 * vector code instead of one long chain of dependent additions. */
static double sum_squares(const ag_real *x, size_t n)
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

double ag_clip_grad_norm(ag_params *ps, double max_norm)
{
    double norm = sqrt(sum_squares(ps->grad, ps->total));
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1) {
        ag_real c = (ag_real)coef;
        for (size_t i = 0; i < ps->total; i++)
            ps->grad[i] *= c;
    }
    return norm;
}
