/*
 * gradcheck.h - compare a function's analytic gradients with central finite
 * differences.  Loss = sum(out * R) for a fixed random R, so every output
 * element's gradient matters.  In the double build (the real check) an entry
 * passes when |analytic - numeric| <= 1e-7 + 1e-5 |numeric|, with eps = 1e-6;
 * the float build runs the same cases as a smoke check with eps = 1e-2 and a
 * tolerance of 2e-2 (1 + |numeric|).  Included by one test file each.
 */
#ifndef ATTOGRAD_GRADCHECK_H
#define ATTOGRAD_GRADCHECK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attograd.h"
#include "check.h"

#ifdef AG_DOUBLE
#define EPS 1e-6
#define ATOL 1e-7
#define RTOL 1e-5
#else
#define EPS 1e-2
#define ATOL 2e-2
#define RTOL 2e-2
#endif

typedef ag_tensor *(*forward_fn)(ag_ctx *ctx, ag_tensor **in, const void *arg);

static ag_pcg32 rng;

/* Values in [lo, hi] with |x| >= gap: keeps relu, max and the like away from kinks. */
static inline void fill(ag_tensor *t, double lo, double hi, double gap)
{
    for (size_t i = 0; i < t->size; i++) {
        double v;
        do
            v = lo + (hi - lo) * ag_pcg32_uniform(&rng);
        while (fabs(v) < gap);
        t->data[i] = (ag_real)v;
    }
}

static inline double weighted_sum(const ag_tensor *out, const double *R)
{
    double s = 0;
    for (size_t i = 0; i < out->size; i++)
        s += (double)out->data[i] * R[i];
    return s;
}

/* Run f on the inputs registered in ps; compare every input's gradient. */
static inline void gradcheck(const char *name, forward_fn f, ag_params *ps, const void *arg)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor **in = ps->list;

    ag_reset(ctx);
    ag_tensor *out = f(ctx, in, arg);
    size_t n_out = out->size;
    double *R = malloc(n_out * sizeof *R);
    ag_real *Rr = malloc(n_out * sizeof *Rr);
    for (size_t i = 0; i < n_out; i++) {
        R[i] = 2 * ag_pcg32_uniform(&rng) - 1;
        Rr[i] = (ag_real)R[i];
    }
    /* R is a constant: rounding it to ag_real keeps the two losses identical. */
    for (size_t i = 0; i < n_out; i++)
        R[i] = Rr[i];
    ag_tensor *Rt = ag_from(ctx, out->ndim, out->shape, Rr);
    ag_tensor *loss = ag_sum_all(ctx, ag_mul(ctx, out, Rt));
    ag_params_zero_grad(ps);
    ag_backward(ctx, loss);
    ag_real *analytic = malloc(ps->total * sizeof *analytic);
    memcpy(analytic, ps->grad, ps->total * sizeof *analytic);

    ag_set_grad_enabled(ctx, 0);
    double worst = 0, worst_a = 0, worst_n = 0;
    size_t worst_i = 0, bad = 0;
    for (size_t i = 0; i < ps->total; i++) {
        ag_real keep = ps->data[i];
        ps->data[i] = keep + (ag_real)EPS;
        ag_reset(ctx);
        double lp = weighted_sum(f(ctx, in, arg), R);
        ps->data[i] = keep - (ag_real)EPS;
        ag_reset(ctx);
        double lm = weighted_sum(f(ctx, in, arg), R);
        ps->data[i] = keep;
        double numeric = (lp - lm) / (2 * EPS), a = analytic[i];
        double excess = fabs(a - numeric) - (ATOL + RTOL * fabs(numeric));
        if (!(excess <= 0))
            bad++;
        if (i == 0 || !(excess <= worst)) {   /* NaN counts as worst */
            worst = excess;
            worst_a = a;
            worst_n = numeric;
            worst_i = i;
        }
    }
    CHECK(bad == 0, "%s: %zu of %zu gradient entries off; worst at %zu: analytic %.10g numeric %.10g", name,
          bad, ps->total, worst_i, worst_a, worst_n);
    free(analytic);
    free(R);
    free(Rr);
    ag_ctx_free(ctx);
}

/* Build a parameter set from up to 4 shapes ({0} ends the list). */
static inline ag_params *inputs(int n, const int shapes[][5], double lo, double hi, double gap)
{
    ag_params *ps = ag_params_new();
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", i);
        ag_params_add(ps, name, shapes[i][0], shapes[i] + 1);
    }
    ag_params_alloc(ps);
    for (int i = 0; i < n; i++)
        fill(ps->list[i], lo, hi, gap);
    return ps;
}

static inline void run(const char *name, forward_fn f, int n, const int shapes[][5], const void *arg,
                double lo, double hi, double gap)
{
    ag_params *ps = inputs(n, shapes, lo, hi, gap);
    gradcheck(name, f, ps, arg);
    ag_params_free(ps);
}

#endif
