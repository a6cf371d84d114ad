/*
 * optim.c - SGD with momentum, AdamW, global gradient-norm clipping and
 * clearing the gradients.
 * Parameters, gradients and moments are parallel contiguous blocks, so an
 * update is one flat loop over all of them.
 */
#include <limits.h>
#include <stdatomic.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The flat loops below run over ps->total elements of the parameters'
 * blocks, which exist only once ag_params_alloc has run (and no parameter
 * can join after it: an optimizer made before would have moments too short),
 * and the gradient block only when the set was not allocated for forward
 * passes alone. */
static void need_grads(const char *fn, const ag_params *ps)
{
    ag_need(fn, "ps", ps);
    if (!ps->data)
        ag_error("%s: the parameters are not allocated (call ag_params_alloc first)", fn);
    if (!ps->grad)
        ag_error("%s: the parameters have no gradients (allocated by ag_params_alloc_no_grad)", fn);
}

/* Everything is allocated first and checked after, and a failure frees it
 * all before ag_error: a program whose error handler longjmps out (one that
 * survives running out of memory) must not be left holding the struct or
 * the one moment block that was granted. */
static ag_optim *optim_new(const char *fn, ag_params *ps, int kind, int moments)
{
    need_grads(fn, ps);
    const size_t n = ps->total ? ps->total : 1;
    ag_optim *o = calloc(1, sizeof *o);
    ag_real *m = ag_big_alloc(n, sizeof(ag_real));
    ag_real *v = moments == 2 ? ag_big_alloc(n, sizeof(ag_real)) : NULL;
    if (!o || !m || (moments == 2 && !v)) {
        free(o);
        ag_big_free(m);
        ag_big_free(v);
        ag_error("%s: out of memory: optimizer state for %zu parameters", fn, ps->total);
    }
    o->kind = kind;
    o->ps = ps;
    o->m = m;
    o->v = v;
    return o;
}

/* torch.optim.SGD's ranges, and finite: an infinite momentum or decay
 * turns the parameters into inf and NaN at the first step (NaN fails both
 * tests) */
static void check_sgd(const char *fn, double momentum, double weight_decay)
{
    if (!(momentum >= 0 && momentum < INFINITY) || !(weight_decay >= 0 && weight_decay < INFINITY))
        ag_error("%s: momentum %g and weight decay %g must be finite and >= 0", fn, momentum, weight_decay);
}

/* torch.optim.AdamW's ranges: a beta of 1 divides by 1 - beta^t = 0;
 * finite too: an infinite eps stops every update, an infinite decay sends
 * the decayed parameters to inf and NaN */
static void check_adamw(const char *fn, double beta1, double beta2, double eps, double weight_decay)
{
    if (!(beta1 >= 0 && beta1 < 1) || !(beta2 >= 0 && beta2 < 1))
        ag_error("%s: betas (%g, %g) must be in [0, 1)", fn, beta1, beta2);
    if (!(eps >= 0 && eps < INFINITY) || !(weight_decay >= 0 && weight_decay < INFINITY))
        ag_error("%s: eps %g and weight decay %g must be finite and >= 0", fn, eps, weight_decay);
}

ag_optim *ag_optim_sgd(ag_params *ps, double momentum, double weight_decay)
{
    check_sgd("ag_optim_sgd", momentum, weight_decay);
    ag_optim *o = optim_new("ag_optim_sgd", ps, AG_SGD, 1);
    o->momentum = momentum;
    o->weight_decay = weight_decay;
    return o;
}

ag_optim *ag_optim_adamw(ag_params *ps, double beta1, double beta2, double eps, double weight_decay)
{
    check_adamw("ag_optim_adamw", beta1, beta2, eps, weight_decay);
    ag_optim *o = optim_new("ag_optim_adamw", ps, AG_ADAMW, 2);
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
    ag_big_free(o->m);
    ag_big_free(o->v);
    free(o);
}

/* One optimizer step over elements [lo, hi) of the flat blocks: of each
 * parameter, the part that lies in that range, with the parameter's own
 * weight decay (definitions: ref_sgd and ref_adamw in src/reference.c):
 *   SGD:    g' = g + decay p;  buf = g' on the first step, then
 *           momentum buf + g';  p -= lr buf  (momentum 0: p -= lr g')
 *   AdamW:  p -= lr decay p;   p -= lr m^ / (sqrt(v^) + eps), m^ and v^ the
 *           bias-corrected running means of g and g^2 */
typedef struct {
    ag_optim *o;
    double lr;
    _Atomic int not_finite;         /* a parameter came out NaN or infinite */
} step_args;

/* 1 if x[0..n-1] are all finite: x - x is 0 for every finite x, NaN for
 * NaN and the infinities, and an OR has no order to keep, so the loop is
 * vector code */
static int all_finite(const ag_real *x, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        bad |= x[i] - x[i] != 0;
    return !bad;
}

static void step_range(void *ctx, size_t lo, size_t hi)
{
    step_args *s = ctx;
    ag_optim *o = s->o;
    ag_params *ps = o->ps;
    for (int k = 0; k < ps->count; k++) {
        ag_tensor *t = ps->list[k];
        const size_t off = (size_t)(t->data - ps->data), end = off + t->size;
        if (end <= lo || off >= hi)
            continue;
        const size_t a = off > lo ? off : lo, b = end < hi ? end : hi;
        const double decay = t->decay ? o->weight_decay : 0;
        if (o->kind == AG_SGD) {
            ag_kern->sgd(ps->data + a, ps->grad + a, o->m + a, b - a, (ag_real)s->lr, (ag_real)o->momentum,
                         (ag_real)decay, o->step == 0);
        } else {
            ag_adamw_args args = { s->lr, o->beta1, o->beta2, o->eps, decay, o->step + 1 };
            ag_kern->adamw(ps->data + a, ps->grad + a, o->m + a, o->v + a, b - a, &args);
        }
        /* the piece just written, while it is in cache */
        if (!all_finite(ps->data + a, b - a))
            atomic_store_explicit(&s->not_finite, 1, memory_order_relaxed);
    }
}

/* The update is element by element, so it runs as one loop over all the
 * parameters' flat blocks, each thread taking a contiguous piece across
 * parameter boundaries: one parallel loop a step instead of one per
 * parameter (a small model has dozens, most too small to share alone), the
 * same bits however it is split. */
int ag_optim_step(ag_optim *o, double lr)
{
    ag_need("ag_optim_step", "opt", o);
    if (!(lr >= 0 && lr < INFINITY))
        ag_error("ag_optim_step: lr = %g is not a finite number >= 0", lr);
    /* A program may change the settings between steps (a schedule), and
     * the step count (a resumed run): checked as the constructors check
     * them, since one out of range turns the parameters into inf and NaN
     * (a beta of 1, a negative step count: bias corrections of 0).  kind
     * decides which moments the update reads. */
    if (o->kind == AG_SGD)
        check_sgd("ag_optim_step", o->momentum, o->weight_decay);
    else if (o->kind == AG_ADAMW)
        check_adamw("ag_optim_step", o->beta1, o->beta2, o->eps, o->weight_decay);
    else
        ag_error("ag_optim_step: kind %d is not AG_SGD or AG_ADAMW", o->kind);
    if (o->step < 0 || o->step == LONG_MAX)
        ag_error("ag_optim_step: step %ld (the updates taken so far) is out of range", o->step);
    if (!o->m || (o->kind == AG_ADAMW && !o->v))
        ag_error("ag_optim_step: no moment buffers for kind %s (made by ag_optim_sgd, and kind changed?)",
                 o->kind == AG_ADAMW ? "AG_ADAMW" : "AG_SGD");
    need_grads("ag_optim_step", o->ps);
    step_args s = { o, lr, 0 };
    ag_parallel_for(o->ps->total, o->ps->total, step_range, &s);
    o->step++;
    return !atomic_load(&s.not_finite);
}

/* x[i] *= c over [lo, hi): clipping's rescale of the gradients */
typedef struct {
    ag_real *x;
    ag_real c;
} scale_args;

static void scale_range(void *ctx, size_t lo, size_t hi)
{
    const scale_args *s = ctx;
    for (size_t i = lo; i < hi; i++)
        s->x[i] *= s->c;
}

static void zero_range(void *ctx, size_t lo, size_t hi)
{
    memset((ag_real *)ctx + lo, 0, (hi - lo) * sizeof(ag_real));
}

/* Split as the optimizer's loop is (the same n, so each thread clears the
 * gradients it will later update), and on one thread when that is too
 * little work to share. */
void ag_params_zero_grad(ag_params *ps)
{
    need_grads("ag_params_zero_grad", ps);
    ag_parallel_for(ps->total, ps->total, zero_range, ps->grad);
}

/* One norm over every parameter's gradient, ||g|| = sqrt(sum of g_i^2),
 * the squares summed in double (the kernel sum_squares): no finite float's
 * square overflows there, so the norm is finite exactly when every
 * gradient is (in the double build, while the sum stays below 1.8e308). */
double ag_grad_norm(ag_params *ps)
{
    need_grads("ag_grad_norm", ps);
    return sqrt(ag_kern->sum_squares(ps->grad, ps->total));
}

/* g *= max_norm / (norm + 1e-6) when that is below 1 (the 1e-6 keeps a
 * zero gradient from dividing by 0; PyTorch multiplies by min(1, that),
 * which leaves g as it is otherwise); a NaN norm changes nothing. */
void ag_clip_grads_with_norm(ag_params *ps, double max_norm, double norm)
{
    need_grads("ag_clip_grads_with_norm", ps);
    /* a negative bound would flip every gradient, NaN would skip clipping */
    if (!(max_norm >= 0))
        ag_error("ag_clip_grads_with_norm: max_norm = %g must be >= 0", max_norm);
    /* a negative norm (no norm is) would flip every gradient */
    if (norm < 0)
        ag_error("ag_clip_grads_with_norm: norm = %g must be >= 0 (ag_grad_norm's)", norm);
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1) {
        ag_real c = (ag_real)coef;
        ag_parallel_for(ps->total, ps->total, scale_range, &(scale_args){ ps->grad, c });
    }
}

/* torch.nn.utils.clip_grad_norm_: the two above. */
double ag_clip_grad_norm(ag_params *ps, double max_norm)
{
    need_grads("ag_clip_grad_norm", ps);
    if (!(max_norm >= 0))
        ag_error("ag_clip_grad_norm: max_norm = %g must be >= 0", max_norm);
    double norm = ag_grad_norm(ps);
    ag_clip_grads_with_norm(ps, max_norm, norm);
    return norm;
}
