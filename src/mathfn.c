/*
 * mathfn.c - the engine's own exp, expm1, log, tanh, erf, cos and pow
 * (of a positive base), in double, written with + - * / only, so every build (glibc or
 * emscripten's libc, any compiler, with FP contraction off as the Makefile
 * builds) gets the same bits from the same input: a run in the page and in
 * the reference build save the same checkpoint.  Accuracy against a
 * correctly rounded result is checked by tests/test_mathfn.c.
 *
 * sqrt stays libm's: IEEE 754 requires it correctly rounded (glibc and
 * WebAssembly's f64.sqrt both are), so it cannot differ between builds.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "attograd.h"

/* ln 2 in two parts: LN2_HI has its low 32 bits zero, so k * LN2_HI is exact
 * for |k| < 2^21; LN2_LO is the rest (ln 2 - LN2_HI, rounded). */
static const double LN2_HI = 6.93147180369123816490e-01, LN2_LO = 1.90821492927058770002e-10;
static const double INV_LN2 = 1.44269504088896338700e+00;

/* 2^k, for -1022 <= k <= 1023, from its bits. */
static double pow2(int k)
{
    uint64_t bits = (uint64_t)(k + 1023) << 52;
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

/* x 2^k for x in [1/2, 2] and -1076 < k < 1025 (what exp needs): in two
 * factors where 2^k alone is out of range, the last one rounding once
 * (to a subnormal, or to inf). */
static double scale2(double x, int k)
{
    if (k > 1023)
        return x * pow2(1023) * pow2(k - 1023);
    if (k < -1022)
        return x * pow2(k + 54) * pow2(-54);
    return x * pow2(k);
}

/* e^r - 1 for |r| <= ln(2)/2 ~ 0.347: Taylor to r^14 (the next term,
 * 0.347^15 / 15!, is below 2^-80), as r + r^2 (1/2 + r (1/6 + ...)) so the
 * leading term is exact. */
static double expm1_small(double r)
{
    static const double c[] = { 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
                                1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600,
                                1.0 / 6227020800.0, 1.0 / 87178291200.0 };
    double p = c[12];
    for (int i = 11; i >= 0; i--)
        p = p * r + c[i];
    return r + r * r * p;
}

/* Splits x = k ln 2 + r, |r| <= ln(2)/2 (k * LN2_HI exact, so r is within
 * an ulp of the true remainder). */
static double reduce_ln2(double x, int *k)
{
    double t = x * INV_LN2;
    double n = (double)(long)(t + (t < 0 ? -0.5 : 0.5));
    *k = (int)n;
    return (x - n * LN2_HI) - n * LN2_LO;
}

/* e^x = 2^k e^r.  Overflow to inf above ln(DBL_MAX), to 0 below the
 * smallest subnormal's log; NaN stays NaN. */
double ag_math_exp(double x)
{
    if (x != x)
        return x;
    if (x > 709.782712893384)
        return INFINITY;
    if (x < -745.2)
        return 0;
    int k;
    double r = reduce_ln2(x, &k);
    return scale2(1 + expm1_small(r), k);
}

/* e^x - 1 = 2^k (e^r - 1) + (2^k - 1): both parts exact but for e^r - 1's
 * own rounding, then one addition; small |x| directly, so 1 + x is never
 * formed. */
double ag_math_expm1(double x)
{
    if (x != x)
        return x;
    if (x > -0.34657359 && x < 0.34657359)
        return expm1_small(x);
    if (x > 700)
        return ag_math_exp(x);
    if (x < -38)
        return -1;      /* e^-38 < 2^-54: -1 + e^x rounds to -1 */
    int k;
    double r = reduce_ln2(x, &k);
    return pow2(k) * expm1_small(r) + (pow2(k) - 1);
}

/* ln x: x = 2^k m with m in [sqrt(1/2), sqrt(2)), f = m - 1, s = f/(2 + f);
 * ln(1 + f) = 2 atanh s = 2s + 2s^3/3 + 2s^5/5 + ... = f - f^2/2 + s (f^2/2 + R),
 * R = 2s^2/3 + 2s^4/5 + ... (|s| < 0.172, so 11 terms reach 2^-60), and
 * ln x = k ln 2 + ln(1 + f), the small parts added first. */
double ag_math_log(double x)
{
    if (x != x || x < 0)
        return NAN;
    if (x == 0)
        return -INFINITY;
    if (x == INFINITY)
        return x;
    int k = 0;
    if (x < 2.2250738585072014e-308) {          /* subnormal: scale into the normal range */
        x *= pow2(54);
        k = -54;
    }
    uint64_t bits;
    memcpy(&bits, &x, sizeof bits);
    k += (int)(bits >> 52) - 1023;
    bits = (bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;   /* m in [1, 2) */
    double m;
    memcpy(&m, &bits, sizeof m);
    if (m > 1.4142135623730951) {
        m *= 0.5;
        k++;
    }
    double f = m - 1, s = f / (2 + f), z = s * s, hfsq = 0.5 * f * f;
    double R = 2.0 / 23;
    for (int d = 21; d >= 3; d -= 2)
        R = R * z + 2.0 / d;
    R *= z;
    return k * LN2_HI - ((hfsq - (s * (hfsq + R) + k * LN2_LO)) - f);
}

/* tanh x = (e^2x - 1) / (e^2x + 1) = expm1(2|x|) / (expm1(2|x|) + 2), odd;
 * 1 beyond 22 (1 - tanh 22 < 2^-63). */
double ag_math_tanh(double x)
{
    double a = x < 0 ? -x : x;
    if (a != a)
        return x;
    if (a > 22)
        return x < 0 ? -1 : 1;
    double e = ag_math_expm1(2 * a), t = e / (e + 2);
    return x < 0 ? -t : t;
}

/* erf x, odd.  |x| < 1: the Taylor series 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)),
 * whose terms fall from the first (no cancellation worth a bit).  1 <= |x| < 6:
 * erf x = 2/sqrt(pi) x e^(-x^2) sum 2^n x^(2n) / (1 3 5 ... (2n+1)), every term
 * positive, with x^2 split exactly (Dekker) so e^(-x^2) loses nothing to its
 * rounding.  |x| >= 6: +-1 (1 - erf 6 < 2^-55). */
double ag_math_erf(double x)
{
    static const double TWO_OVER_SQRT_PI = 1.12837916709551257390e+00;
    double a = x < 0 ? -x : x;
    if (a != a)
        return x;
    if (a >= 6)
        return x < 0 ? -1 : 1;
    double sum;
    if (a < 1) {
        double z = a * a, t = a;
        sum = a;
        for (int n = 1; n < 40; n++) {
            t *= -z / n;
            double term = t / (2 * n + 1);
            sum += term;
            if ((term < 0 ? -term : term) < 1e-17 * sum)
                break;
        }
        sum *= TWO_OVER_SQRT_PI;
    } else {
        double c = 134217729.0 * a, hi_a = c - (c - a), lo_a = a - hi_a;   /* a = hi_a + lo_a, 26 bits each */
        double sq = a * a, sq_lo = ((hi_a * hi_a - sq) + 2 * hi_a * lo_a) + lo_a * lo_a;   /* a^2 = sq + sq_lo */
        double u = 1, w = 2 * a * a;
        sum = 1;
        for (int n = 0; n < 400 && u > 1e-17 * sum; n++) {
            u *= w / (2 * n + 3);
            sum += u;
        }
        sum *= TWO_OVER_SQRT_PI * a * (ag_math_exp(-sq) * (1 - sq_lo));
    }
    return x < 0 ? -sum : sum;
}

/* cos x: x = n pi/2 + r, |r| <= pi/4, with pi/2 in three parts (the first
 * two of 33 bits, so n times them is exact for |n| < 2^20), then cos r or
 * sin r by Taylor (to r^16 and r^17: the next terms are below 2^-60) by the
 * quadrant n mod 4.  Accurate for |x| < 2^20; the engine's arguments are
 * below 2 pi. */
double ag_math_cos(double x)
{
    static const double PIO2_1 = 1.5707963267341256e+00, PIO2_2 = 6.077100506303966e-11,
                        PIO2_3 = 2.0222662487959506e-21, TWO_OVER_PI = 6.36619772367581382433e-01;
    if (x != x || x == INFINITY || x == -INFINITY)
        return NAN;
    double t = x * TWO_OVER_PI;
    double n = (double)(long)(t + (t < 0 ? -0.5 : 0.5));
    double r = ((x - n * PIO2_1) - n * PIO2_2) - n * PIO2_3, z = r * r;
    int q = (int)((long)n & 3);
    double p;
    if (q == 0 || q == 2) {     /* cos r = 1 - z/2 + z^2/24 - ... */
        static const double c[] = { 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800, 1.0 / 479001600,
                                    -1.0 / 87178291200.0, 1.0 / 20922789888000.0 };
        p = c[6];
        for (int i = 5; i >= 0; i--)
            p = p * z + c[i];
        p = 1 - (0.5 * z - z * z * p);
    } else {                    /* sin r = r - r^3/6 + ... */
        static const double s[] = { -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800,
                                    1.0 / 6227020800.0, -1.0 / 1307674368000.0, 1.0 / 355687428096000.0 };
        p = s[7];
        for (int i = 6; i >= 0; i--)
            p = p * z + s[i];
        p = r + r * z * p;
    }
    return q == 0 ? p : q == 1 ? -p : q == 2 ? -p : p;
}

/* b^y = e^(y ln b) for b > 0 (b = 0: 0 for y > 0, 1 for y = 0).  ln b's
 * rounding, scaled by y, is the error: within 2 + 2 |y ln b| ulps. */
double ag_math_pow(double b, double y)
{
    if (y == 0)
        return 1;
    if (b == 0)
        return y > 0 ? 0 : INFINITY;
    return ag_math_exp(y * ag_math_log(b));
}
