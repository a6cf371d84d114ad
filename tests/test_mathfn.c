/*
 * test_mathfn.c - the engine's own elementary functions (src/mathfn.c)
 * against the C library's in double: over a sweep of each function's range
 * (a grid plus PCG32 draws, the edges and special values), the distance in
 * units in the last place stays within the bound stated for it below.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "check.h"

/* Distance in units in the last place: the doubles between a and b, counted
 * on the unsigned line where consecutive doubles are consecutive integers
 * (negative ones mirrored below the positive). */
static uint64_t ordered(double a)
{
    uint64_t u;
    memcpy(&u, &a, sizeof u);
    return u >> 63 ? ~u : u | 0x8000000000000000ULL;
}

static double ulps(double a, double b)
{
    if (a == b || (a != a && b != b))
        return 0;
    if (a != a || b != b)
        return INFINITY;
    uint64_t ua = ordered(a), ub = ordered(b);
    return (double)(ua > ub ? ua - ub : ub - ua);
}

typedef struct sweep {
    const char *name;
    double (*ours)(double);
    double (*libm)(double);
    double lo, hi;          /* the range swept */
    double bound;           /* ulps allowed */
} sweep;

/* The worst distance over n grid points and n random points in [lo, hi];
 * the argument where it happened into *where. */
static double worst(const sweep *s, int n, ag_pcg32 *rng, double *where)
{
    double w = 0;
    for (int i = 0; i <= 2 * n; i++) {
        double x = i <= n ? s->lo + (s->hi - s->lo) * i / n : s->lo + (s->hi - s->lo) * ag_pcg32_uniform(rng);
        double d = ulps(s->ours(x), s->libm(x));
        if (d > w) {
            w = d;
            *where = x;
        }
    }
    return w;
}

/* b^t for the optimizer's betas: t an integer step count. */
static double pow_beta2(double t) { return ag_math_pow(0.999, floor(t)); }
static double libm_beta2(double t) { return pow(0.999, floor(t)); }
static double pow_beta1(double t) { return ag_math_pow(0.9, floor(t)); }
static double libm_beta1(double t) { return pow(0.9, floor(t)); }

int main(void)
{
    /* The bounds: exp, log and cos within 1 ulp (the result's own rounding,
     * plus what the polynomial's last additions leave); expm1 2 (e^r - 1
     * near ln(2)/2, where r^2 p is a sixth of the result); tanh 4 (a sum and
     * a division after expm1); erf 2 (a Taylor polynomial whose first term
     * dominates, by Horner's rule); b^t within 2 + 2 |t ln b| (ln b's
     * rounding, t times over: 0.999^t to t = 10^4 where it is 4.5e-5, 0.9^t
     * to 200 where it is 7e-10).  All far below the 2^29 ulps of double that
     * one rounding to float spans: each of these results is rounded to float. */
    const sweep sweeps[] = {
        { "exp", ag_math_exp, exp, -745, 709.78, 1 },
        { "exp near 0", ag_math_exp, exp, -1, 1, 1 },
        { "expm1", ag_math_expm1, expm1, -40, 40, 2 },
        { "expm1 near 0", ag_math_expm1, expm1, -0.5, 0.5, 2 },
        { "log", ag_math_log, log, 1e-300, 1e300, 1 },
        { "log near 1", ag_math_log, log, 0.5, 2, 1 },
        { "log of subnormals", ag_math_log, log, 4.9e-324, 2.2e-308, 1 },
        { "tanh", ag_math_tanh, tanh, -25, 25, 4 },
        { "tanh near 0", ag_math_tanh, tanh, -1, 1, 4 },
        { "erf", ag_math_erf, erf, -7, 7, 2 },
        { "erf near 0", ag_math_erf, erf, -1.5, 1.5, 2 },
        { "cos", ag_math_cos, cos, -100, 100, 1 },
        { "cos over a turn", ag_math_cos, cos, 0, 6.283185307179586, 1 },
        { "0.999^t", pow_beta2, libm_beta2, 0, 1e4, 2 + 2 * 10.01 },
        { "0.9^t", pow_beta1, libm_beta1, 0, 200, 2 + 2 * 21.1 },
    };
    ag_pcg32 rng;
    ag_pcg32_seed(&rng, 1, 1);
    for (size_t i = 0; i < sizeof sweeps / sizeof sweeps[0]; i++) {
        const sweep *s = &sweeps[i];
        double at = 0, w = worst(s, 200000, &rng, &at);
        printf("%-18s worst %.0f ulp (at %.17g), bound %.0f\n", s->name, w, at, s->bound);
        CHECK(w <= s->bound, "%s: %.0f ulps from libm at %.17g (bound %.0f)", s->name, w, at, s->bound);
    }

    /* cos past 2^20, where it takes x modulo the double nearest 2 pi first:
     * in [-1, 1] and within |x| 4e-17 (the argument's error) + 2^-50 of
     * libm's cos, from 2^20 to 1e300 and at the largest double, both signs.
     * (The quadrant went through a long, undefined past 2^63, and the
     * remainder grew with x: cos 1e19 was 4e32, cos 1e300 NaN.) */
    {
        double worst_x = 0, worst_excess = 0;
        int in_range = 1;
        for (int i = 0; i < 200000; i++) {
            const double e = 20 + (i % 2 ? 80 : 977) * ag_pcg32_uniform(&rng);   /* 2^20 .. 2^100, .. 2^997 */
            const double x = (i % 4 < 2 ? 1 : -1) * pow(2, e), c = ag_math_cos(x);
            in_range &= c >= -1 && c <= 1;
            const double excess = fabs(c - cos(x)) - (fabs(x) * 4e-17 + 0x1p-50);
            if (excess > worst_excess)
                worst_excess = excess, worst_x = x;
        }
        const double far[] = { 0x1p20, -0x1p20, 1e19, -1e19, 1e300, DBL_MAX, -DBL_MAX };
        for (size_t i = 0; i < sizeof far / sizeof far[0]; i++) {
            const double c = ag_math_cos(far[i]);
            in_range &= c >= -1 && c <= 1;
            const double excess = fabs(c - cos(far[i])) - (fabs(far[i]) * 4e-17 + 0x1p-50);
            if (excess > worst_excess)
                worst_excess = excess, worst_x = far[i];
        }
        printf("%-18s worst excess %.3g (at %.17g)\n", "cos past 2^20", worst_excess, worst_x);
        CHECK(in_range && worst_excess <= 0, "cos past 2^20: a value outside [-1, 1] (%d) or %.3g past the bound at %.17g",
              !in_range, worst_excess, worst_x);
    }

    /* Special values, exactly as libm gives them. */
    const double special[] = { 0.0, -0.0, INFINITY, -INFINITY, NAN, 710, -746, 1e-310, 30, -30, 6, -6, 1e-20 };
    double (*const ours[])(double) = { ag_math_exp, ag_math_expm1, ag_math_log, ag_math_tanh, ag_math_erf };
    double (*const theirs[])(double) = { exp, expm1, log, tanh, erf };
    const char *names[] = { "exp", "expm1", "log", "tanh", "erf" };
    for (size_t f = 0; f < sizeof ours / sizeof ours[0]; f++)
        for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
            double a = ours[f](special[i]), b = theirs[f](special[i]);
            CHECK(ulps(a, b) <= 1 && (a == a) == (b == b), "%s(%g) = %.17g, libm %.17g", names[f], special[i], a, b);
        }
    CHECK(ag_math_exp(-INFINITY) == 0 && ag_math_log(0) == -INFINITY && ag_math_exp(0) == 1 && ag_math_log(1) == 0,
          "the values masking and losses rely on are exact");
    CHECK(ag_math_pow(0.5, 0) == 1 && ag_math_pow(0, 3) == 0 && ag_math_pow(2, 10) == 1024, "b^0 = 1, 0^3 = 0, 2^10 exact");
    /* as C's pow: a NaN exponent gives NaN (0^NaN was +inf), b^0 is 1 even for a NaN b, 0 to a negative power +inf */
    CHECK(isnan(ag_math_pow(0, NAN)) && isnan(ag_math_pow(2, NAN)) && ag_math_pow(NAN, 0) == 1 &&
              ag_math_pow(0, -1) == INFINITY, "0^NaN = %g, 2^NaN = %g, NaN^0 = %g, 0^-1 = %g", ag_math_pow(0, NAN),
          ag_math_pow(2, NAN), ag_math_pow(NAN, 0), ag_math_pow(0, -1));
    return check_done();
}
