/*
 * fastmath.h - for the fast kernels: exp, erf and a log that the compiler
 * can vectorize, and sums in a fixed order of vector lanes.
 *
 * libm's expf/erff are function calls, so a loop calling them runs one
 * element at a time.  These are plain C with no calls and no branches, so
 * loops over softmax rows and GELU activations become SIMD code; their
 * polynomials are evaluated with fused multiply-adds where the hardware has
 * them (AG_FMA, fast.h: one rounding a step, and half the instructions).
 * Accuracy (float build): exp within 2 ulp; erf within 6e-7 absolute; the
 * log, of normal positive floats only, within 2 ulp.  Special values that
 * masking relies on are exact: exp(-inf) = 0, exp(+inf) = inf, NaN stays
 * NaN.  The double build, which the gradient checks use, maps them to the
 * engine's own double functions (src/mathfn.c, within a few ulps).
 */
#ifndef ATTOGRAD_FASTMATH_H
#define ATTOGRAD_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attograd.h"
#include "fast.h"

#ifdef AG_DOUBLE

static inline ag_real ag_fast_exp(ag_real x) { return ag_math_exp(x); }
static inline ag_real ag_fast_erf(ag_real x) { return ag_math_erf(x); }
static inline ag_real ag_fast_log_normal(ag_real x) { return ag_math_log(x); }

/* The standard normal cdf Phi(x) and density phi(x), for GELU's derivative. */
static inline void ag_fast_normal(ag_real x, ag_real *cdf, ag_real *pdf)
{
    *cdf = 0.5 * (1 + ag_math_erf(x * 0.70710678118654752440));
    *pdf = 0.39894228040143267794 * ag_math_exp(-0.5 * x * x);
}

#else

/* exp(x) = 2^n e^r with n = round(x / ln 2) and |r| <= ln(2)/2, e^r by its
 * Taylor polynomial to degree 7 (truncation < 2e-9 relative).  Below -87
 * (where the result would be subnormal) the answer is 0, above 88 inf,
 * and NaN gives NaN. */
/* e^r for |r| <= ln(2)/2 by that polynomial (Horner, fused where the
 * hardware fuses), times 2^n for the n in -126..127 that xc's reduction
 * gave: the part of exp that the callers below share. */
static inline float fast_exp_reduced(float xc)
{
    float t = xc * 1.44269504088896341f + 12582912.0f;   /* 1.5 * 2^23 rounds to an integer */
    float n = t - 12582912.0f;
    /* ln 2 split in two so n * ln2_hi is exact */
    float r = (xc - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f;
    float p = 1.0f / 5040;
    p = AG_FMA(p, r, 1.0f / 720);
    p = AG_FMA(p, r, 1.0f / 120);
    p = AG_FMA(p, r, 1.0f / 24);
    p = AG_FMA(p, r, 1.0f / 6);
    p = AG_FMA(p, r, 0.5f);
    p = AG_FMA(p, r, 1.0f);
    p = AG_FMA(p, r, 1.0f);
    int32_t bits = ((int32_t)n + 127) << 23;             /* 2^n as a float's exponent field */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline float ag_fast_exp(float x)
{
    float xc = x > -87.0f ? (x < 88.0f ? x : 88.0f) : -87.0f;   /* NaN lands here too: no UB below */
    float y = fast_exp_reduced(xc);
    y = x < -87.0f ? 0.0f : y;
    y = x > 88.0f ? INFINITY : y;
    return x != x ? x : y;
}

/* ln x for a normal float x > 0 (a softmax row's sum of exps, which is at
 * least 1): x = 2^k m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact),
 * s = f / (2 + f), ln(1 + f) = 2 atanh s = f - f^2/2 + s (f^2/2 + R) with
 * R = 2s^2/3 + 2s^4/5 + ... (src/mathfn.c's ag_math_log, in float, fewer
 * terms: |s| < 0.172, so those to s^8 leave under 3e-9 relative); within 2
 * ulp.  No branches, so a loop over rows vectorizes (ag_math_log, in
 * double, costs several times as much). */
static inline float ag_fast_log_normal(float x)
{
    uint32_t bits;
    memcpy(&bits, &x, sizeof bits);
    int k = (int)(bits >> 23) - 127;
    bits = (bits & 0x007fffffu) | 0x3f800000u;             /* m in [1, 2) */
    float m;
    memcpy(&m, &bits, sizeof m);
    const int big = m > 1.41421356f;
    m = big ? 0.5f * m : m;
    k += big;
    const float f = m - 1, s = f / (2 + f), z = s * s, hfsq = 0.5f * f * f;
    const float R = z * (2.0f / 3 + z * (2.0f / 5 + z * (2.0f / 7 + z * (2.0f / 9))));
    /* ln 2 split in two so k * ln2_hi is exact; the small parts first */
    const float kf = (float)k;
    return kf * 0.693145751953125f - ((hfsq - (s * (hfsq + R) + kf * 1.42860682030941723212e-6f)) - f);
}

/* erf by Abramowitz & Stegun 7.1.26: for z = |x|, t = 1/(1 + p z),
 * erf(z) = 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^{-z^2}; odd in x.
 * erf_tail gives 1 - erf(z), and takes e^{-z^2} from its caller, who may
 * need it too. */
static inline float erf_tail(float z, float exp_minus_z2)
{
    float t = 1.0f / AG_FMA(0.3275911f, z, 1.0f);
    float poly = AG_FMA(t, 1.061405429f, -1.453152027f);
    poly = AG_FMA(t, poly, 1.421413741f);
    poly = AG_FMA(t, poly, -0.284496736f);
    poly = AG_FMA(t, poly, 0.254829592f);
    return t * poly * exp_minus_z2;
}

static inline float ag_fast_erf(float x)
{
    float z = fabsf(x);
    float e = 1.0f - erf_tail(z, ag_fast_exp(-z * z));
    return x < 0 ? -e : e;
}

/* The standard normal cdf Phi(x) = (1 + erf(x / sqrt 2)) / 2 and density
 * phi(x) = exp(-x^2 / 2) / sqrt(2 pi), for GELU's derivative: erf(x / sqrt 2)
 * needs exp(-x^2 / 2) too, so one exp serves both.  That exponent is never
 * positive, so its exp needs no overflow test (a NaN x clamps to -87 and
 * comes out NaN through the tail's t); and Phi of a negative x is the tail
 * halved, 1 - Phi(-x), not 1/2 (1 + erf) with its cancellation. */
static inline void ag_fast_normal(float x, float *cdf, float *pdf)
{
    const float a = -0.5f * x * x;
    const float g = a < -87.0f ? 0.0f : fast_exp_reduced(a > -87.0f ? a : -87.0f);
    const float half_tail = 0.5f * erf_tail(fabsf(x) * 0.70710678118654752440f, g);
    *cdf = x < 0 ? half_tail : 1.0f - half_tail;
    *pdf = 0.39894228040143267794f * g;
}

#endif

/* Sum of n values in a fixed order that vectorizes: AG_LANES running
 * partial sums (lane i takes elements i, i + AG_LANES, ...), added up at the
 * end pairwise (a tree, not a chain of dependent adds).  The order depends
 * only on n, so results are reproducible. */
#define AG_LANES 16

/* The AG_LANES partial sums in acc[] folded into their total, pairwise
 * (acc is overwritten). */
static inline ag_real ag_fold_partial_sums(ag_real *acc)
{
    for (int w = AG_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            acc[l] += acc[l + w];
    return acc[0];
}

/* The largest of the AG_LANES partial maxima in acc[] (acc is overwritten). */
static inline ag_real ag_fold_partial_maxes(ag_real *acc)
{
    for (int w = AG_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            acc[l] = acc[l + w] > acc[l] ? acc[l + w] : acc[l];
    return acc[0];
}

/* x[0] + ... + x[n-1] in lanes as above. */
static inline double ag_array_sum(const ag_real *x, size_t n)
{
    ag_real acc[AG_LANES] = { 0 };
    size_t i = 0;
    for (; i + AG_LANES <= n; i += AG_LANES)
        for (int l = 0; l < AG_LANES; l++)
            acc[l] += x[i + l];
    double s = ag_fold_partial_sums(acc);
    for (; i < n; i++)
        s += x[i];
    return s;
}

/* ag_fold_partial_sums for lanes that are doubles (the same order). */
static inline double ag_fold_partial_sums_wide(double *acc)
{
    for (int w = AG_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            acc[l] += acc[l + w];
    return acc[0];
}

/* x[0] + ... + x[n-1] in lanes as above, each lane a double, for a sum
 * that is amplified afterwards (a row's mean, from which layer norm divides
 * the deviations by the row's spread, which may be 0).  A float lane rounds
 * as it goes; a double one adds up to 2^29 floats of one binade exactly, so
 * a row of D copies of one value sums to exactly D times it, and its mean
 * is that value, as the reference's double sum gives.  In the double
 * build, the same sum as ag_array_sum. */
static inline double ag_array_sum_wide(const ag_real *x, size_t n)
{
    double acc[AG_LANES] = { 0 };
    size_t i = 0;
    for (; i + AG_LANES <= n; i += AG_LANES)
        for (int l = 0; l < AG_LANES; l++)
            acc[l] += x[i + l];
    double s = ag_fold_partial_sums_wide(acc);
    for (; i < n; i++)
        s += x[i];
    return s;
}

/* sum_i (x[i] - m)^2, lanes as above, each square and lane a double (as
 * the reference sums them): a float square overflows once |x - m| passes
 * 1.8e19, and a row's variance then came out inf (layer norm's rstd 0).
 * In the double build, the same order as ever. */
static inline double ag_sum_sq_dev_lanes(const ag_real *x, size_t n, ag_real m)
{
    double acc[AG_LANES] = { 0 };
    size_t i = 0;
    for (; i + AG_LANES <= n; i += AG_LANES)
        for (int l = 0; l < AG_LANES; l++)
            acc[l] += (double)(x[i + l] - m) * (x[i + l] - m);
    double s = ag_fold_partial_sums_wide(acc);
    for (; i < n; i++)
        s += (double)(x[i] - m) * (x[i] - m);
    return s;
}

/* Largest of n >= 1 values the same way; -inf if all are -inf. */
static inline ag_real ag_max_lanes(const ag_real *x, size_t n)
{
    ag_real acc[AG_LANES];
    for (int l = 0; l < AG_LANES; l++)
        acc[l] = -INFINITY;
    size_t i = 0;
    for (; i + AG_LANES <= n; i += AG_LANES)
        for (int l = 0; l < AG_LANES; l++)
            acc[l] = x[i + l] > acc[l] ? x[i + l] : acc[l];
    ag_real m = ag_fold_partial_maxes(acc);
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    return m;
}

/* sum_i a[i] * b[i], lanes as above. */
static inline double ag_dot_lanes(const ag_real *a, const ag_real *b, size_t n)
{
    ag_real acc[AG_LANES] = { 0 };
    size_t i = 0;
    for (; i + AG_LANES <= n; i += AG_LANES)
        for (int l = 0; l < AG_LANES; l++)
            acc[l] += a[i + l] * b[i + l];
    double s = ag_fold_partial_sums(acc);
    for (; i < n; i++)
        s += (double)a[i] * b[i];
    return s;
}

#endif
