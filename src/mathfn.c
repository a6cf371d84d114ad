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

/* ln 2 in two parts: LN2_HI has the low 21 bits of its fraction zero (32
 * significant bits), so k * LN2_HI is exact for |k| < 2^21; LN2_LO is the
 * rest (ln 2 - LN2_HI, rounded). */
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

/* x 2^k for x in [1/2, 2] and -1076 <= k <= 1024 (what exp needs): in two
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
 * 0.347^15 / 15!, is below 2^-63, 2^-61 of the result), as
 * r + r^2 (1/2 + r (1/6 + ...)) so the leading term is exact. */
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

/* Rounds t (|t| < 2^51) to the nearest integer, ties to even, by adding and
 * subtracting 1.5 2^52 (no conversion to an integer type, which WebAssembly
 * checks for range at every call). */
static const double ROUND_SHIFT = 6755399441055744.0;

static double round_near(double t)
{
    return (t + ROUND_SHIFT) - ROUND_SHIFT;
}

/* Splits x = k ln 2 + r, |r| <= ln(2)/2 (k * LN2_HI exact, so r is within
 * an ulp of the true remainder). */
static double reduce_ln2(double x, int *k)
{
    double n = round_near(x * INV_LN2);
    *k = (int)n;
    return (x - n * LN2_HI) - n * LN2_LO;
}

/* 2^(j/32) for j = 0..31 as a double and the rest (2^(j/32) - that double,
 * rounded), evaluated to 50 digits. */
static const double EXP2_32[32][2] = {
    { 1.0, 0.0 },
    { 1.0218971486541166, 5.109225028973444e-17 },
    { 1.0442737824274138, 8.551889705537965e-17 },
    { 1.0671404006768237, -7.899853966841582e-17 },
    { 1.0905077326652577, -3.046782079812471e-17 },
    { 1.1143867425958924, 1.0410278456845571e-16 },
    { 1.1387886347566916, 8.912812676025408e-17 },
    { 1.1637248587775775, 3.8292048369240935e-17 },
    { 1.189207115002721, 3.982015231465646e-17 },
    { 1.215247359980469, -7.712630692681488e-17 },
    { 1.241857812073484, 4.658027591836937e-17 },
    { 1.2690509571917332, 2.667932131342186e-18 },
    { 1.2968395546510096, 2.5382502794888315e-17 },
    { 1.3252366431597413, -2.8587312100388614e-17 },
    { 1.3542555469368927, 7.70094837980299e-17 },
    { 1.383909881963832, -6.770511658794786e-17 },
    { 1.4142135623730951, -9.667293313452913e-17 },
    { 1.4451808069770467, -3.0237581349939873e-17 },
    { 1.4768261459394993, -3.483994556892796e-17 },
    { 1.5091644275934228, -1.016455327754295e-16 },
    { 1.5422108254079407, 7.949834809697621e-17 },
    { 1.5759808451078865, -1.0136916471278304e-17 },
    { 1.6104903319492543, 2.4707192569797888e-17 },
    { 1.645755478153965, -1.0125679913674773e-16 },
    { 1.681792830507429, 8.199010020581497e-17 },
    { 1.718619298122478, -1.851380418263111e-17 },
    { 1.7562521603732995, 2.960140695448873e-17 },
    { 1.7947090750031072, 1.8227458427912087e-17 },
    { 1.8340080864093424, 3.283107224245627e-17 },
    { 1.8741676341103, -6.122763413004143e-17 },
    { 1.9152065613971474, -1.0619946056195963e-16 },
    { 1.9571441241754002, 8.960767791036668e-17 },
};

/* e^x = 2^k 2^(j/32) e^r with x = (32k + j) ln(2)/32 + r, |r| <= ln(2)/64:
 * e^r - 1 by Taylor to r^6 (the next term is below 2^-58), added to the
 * table's two parts so its rounding is the result's only one worth an ulp.
 * Overflow to inf above ln(DBL_MAX), to 0 below -745.2 (e^x is then under
 * half the smallest subnormal, 2^-1075 = e^-745.13, and rounds to 0 anyway);
 * NaN stays NaN. */
double ag_math_exp(double x)
{
    if (x != x)
        return x;
    if (x > 709.782712893384)
        return INFINITY;
    if (x < -745.2)
        return 0;
    /* n = round(32 x / ln 2) as round_near forms it; the sum before the
     * subtraction holds n in its low 32 bits (two's complement), read
     * there rather than converted (WebAssembly range-checks a conversion). */
    double shifted = x * (32 * INV_LN2) + ROUND_SHIFT, n = shifted - ROUND_SHIFT;
    uint64_t bits;
    memcpy(&bits, &shifted, sizeof bits);
    int32_t ni = (int32_t)(uint32_t)bits;
    double r = (x - n * (LN2_HI / 32)) - n * (LN2_LO / 32);    /* n LN2_HI / 32 exact: |n| < 2^21 */
    double p = r + r * r * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (1.0 / 720)))));
    int j = ni & 31, k = (ni - j) / 32;
    return scale2(EXP2_32[j][0] + (EXP2_32[j][0] * p + EXP2_32[j][1]), k);
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
 * 1 beyond 22 (1 - tanh 22 ~ 2 e^-44 < 2^-62, far below 1's half ulp 2^-54). */
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

/* erf about c = 0.75, 1.25, ..., 5.75: ERF_TAYLOR[k][n] = erf^(n)(c) / n!,
 * with erf^(n)(c) = 2/sqrt(pi) (-1)^(n-1) H_(n-1)(c) e^(-c^2) (H the Hermite
 * polynomials) for n >= 1, evaluated to 60 digits and rounded to double.
 * On |x - c| <= 1/4 the terms left out (n >= 19) are below 2^-62 of erf c. */
static const double ERF_TAYLOR[11][19] = {
    { /* c = 0.75 */
      0.7111556336535151, 0.6429310691952074, -0.4821983018964055, 0.026788794549800304, 0.1506869693426267,
      -0.053242729167728105, -0.026872509532768433, 0.018435235177909452, 0.0023017883040209273,
      -0.00396826044637477, 0.00018603225735249506, 0.0006239836743132585, -0.00010618466494862627,
      -7.57456209347206e-05, 2.2117975642824626e-05, 7.166231694301993e-06, -3.252264713003685e-06,
      -5.034286680771006e-07, 3.820585027845882e-07 },
    { /* c = 1.25 */
      0.9229001282564583, 0.2365211224472908, -0.29565140305911347, 0.16753579506683097, -0.006159404230398197,
      -0.04718103640485019, 0.021301272963460433, 0.0036259826094427483, -0.005697678057620952,
      0.0008776361752808411, 0.0007935114997568478, -0.00032395671499069396, -5.2738032824946004e-05,
      5.5828132785536196e-05, -3.0148435589627603e-06, -6.409580608858307e-06, 1.353228718679766e-06,
      5.079348144064654e-07, -2.120606163726382e-07 },
    { /* c = 1.75 */
      0.9866716712191824, 0.05277499593015037, -0.09235624287776316, 0.09015728471400689, -0.04810220983216831,
      0.00662436146831575, 0.008963045098727362, -0.00605875147039124, 0.0007300512471403044,
      0.000894181745354845, -0.00044275049925469434, -5.445490386117354e-06, 6.867167700726822e-05,
      -1.7720574652632584e-05, -4.625462096042058e-06, 3.2732503984500383e-06, -1.7638628012270578e-07,
      -3.247054421567266e-07, 8.158279337337195e-08 },
    { /* c = 2.25 */
      0.9985372834133188, 0.007142319022017983, -0.016070217799540463, 0.021724553691971366,
      -0.019083383636954297, 0.010657679165667459, -0.0029043570710627813, -0.0006704559699518927,
      0.0009994937126113928, -0.00036938041770393946, -1.1466583164141507e-05, 6.51349432823389e-05,
      -2.26882426454011e-05, -1.3320746753833096e-06, 3.4200230329645604e-06, -8.610833786514346e-07,
      -1.5682298693348275e-07, 1.3648439859835954e-07, -1.772131016634986e-08 },
    { /* c = 2.75 */
      0.9998993780778803, 0.0005862772470937923, -0.001612262429507929, 0.0027603887050666057,
      -0.003258113659630606, 0.0027558084140736853, -0.00165732740366605, 0.0006460409566724474,
      -8.901157121243978e-05, -7.122311472315157e-05, 5.499699242438933e-05, -1.5843804712042587e-05,
      -1.0711338137061364e-06, 2.68755471390732e-06, -9.145766511836599e-07, 2.599902759769022e-09,
      1.0580689273108972e-07, -3.451839574679767e-08, -5.174855067623823e-10 },
    { /* c = 3.25 */
      0.9999956972205363, 2.9189025383581702e-05, -9.486433249664052e-05, 0.00019580971194819392,
      -0.00028656933775026826, 0.00031379722549089054, -0.0002635285042150599, 0.0001699914145113912,
      -8.164763053013537e-05, 2.5913847005660593e-05, -2.328866237210874e-06, -2.864299460756217e-06,
      1.9043540620324773e-06, -5.482373634736951e-07, 3.415163322790054e-09, 6.639710279972467e-08,
      -2.7372258733380318e-08, 3.1426537657346073e-09, 1.7276112364526015e-09 },
    { /* c = 3.75 */
      0.9999998862727434, 8.814321912318039e-07, -3.305370717119265e-06, 7.96961606238756e-06,
      -1.3841239877936921e-05, 1.8370974998189114e-05, -1.9272721446953215e-05, 1.627530274121437e-05,
      -1.1128227438398495e-05, 6.108880665651509e-06, -2.603308954634454e-06, 7.753483601441538e-07,
      -9.015197438790608e-08, -5.733324505294767e-08, 4.260241086797881e-08, -1.4202803665529217e-08,
      1.6872829502859595e-09, 8.220961615130933e-10, -5.189879575231049e-10 },
    { /* c = 4.25 */
      0.9999999981494259, 1.6143993719507412e-08, -6.86119733079065e-08, 1.8901925979923262e-07,
      -3.787952693040671e-07, 5.872461798771443e-07, -7.309200163448699e-07, 7.477252151146886e-07,
      -6.378323232711703e-07, 4.5700618015047133e-07, -2.750628401019148e-07, 1.377657287814025e-07,
      -5.5907869992597255e-08, 1.712664555162862e-08, -3.0258541408386185e-09, -4.057911503930884e-10,
      5.685928650775004e-10, -2.3954005565715955e-10, 5.365544562084818e-11 },
    { /* c = 4.75 */
      0.9999999999815149, 1.7934357034341337e-10, -8.518819591312136e-10, 2.6378450138010383e-09,
      -5.9809212547337285e-09, 1.0572396879853772e-08, -1.5144716058506144e-08, 1.8036305869912202e-08,
      -1.8172816922269425e-08, 1.5675358387690353e-08, -1.1660867459902382e-08, 7.505690524657273e-09,
      -4.175206898701798e-09, 1.992617916086827e-09, -8.015568520213184e-10, 2.609475976217993e-10,
      -6.142267001878952e-11, 5.543448213978045e-12, 3.4975769739993805e-12 },
    { /* c = 5.25 */
      0.9999999999998869, 1.2084074716006755e-12, -6.344139225903546e-12, 2.1801684800128854e-11,
      -5.5114709525037056e-11, 1.0920038456253917e-10, -1.7640341711110032e-10, 2.386050341041412e-10,
      -2.7536837502359233e-10, 2.748676808961636e-10, -2.396566871589998e-10, 1.8378485359603671e-10,
      -1.2450012763001698e-10, 7.463941860429059e-11, -3.956196470530362e-11, 1.8452304418895604e-11,
      -7.49376222594815e-12, 2.593319563942725e-12, -7.291083363837765e-13 },
    { /* c = 5.75 */
      0.9999999999999996, 4.938485140964219e-15, -2.8396289560544257e-14, 1.0720628160176492e-13,
      -2.9875262975155936e-13, 6.549691639480571e-13, -1.175690196300027e-12, 1.775545997743364e-12,
      -2.300413758263223e-12, 2.5941725248862415e-12, -2.5743359577057163e-12, 2.2668502698927728e-12,
      -1.782347272631223e-12, 1.2570078056760755e-12, -7.975073209089227e-13, 4.55792741517898e-13,
      -2.345585121932816e-13, 1.0840067646333407e-13, -4.4726993001296737e-14 },
};

/* erf x, odd.  |x| < 1/2: its Taylor series about 0,
 * 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)), to n = 12 (the next term is
 * below 2^-60 of the sum); 1/2 <= |x| < 6: the Taylor polynomial about the
 * nearest c of ERF_TAYLOR; |x| >= 6: +-1 (1 - erf 6 < 2^-55).  Horner's rule
 * with no quotient: a few ulps at most. */
static const double TWO_OVER_SQRT_PI = 1.12837916709551257390e+00;
static const double ERF_ZERO[13] = { 1.0, -1.0 / 3, 1.0 / 10, -1.0 / 42, 1.0 / 216, -1.0 / 1320, 1.0 / 9360,
                                     -1.0 / 75600, 1.0 / 685440, -1.0 / 6894720, 1.0 / 76204800,
                                     -1.0 / 918086400, 1.0 / 11975040000.0 };   /* (-1)^n / (n! (2n+1)) */

double ag_math_erf(double x)
{
    double a = x < 0 ? -x : x;
    if (a != a)
        return x;
    if (a >= 6)
        return x < 0 ? -1 : 1;
    double y;
    /* Each polynomial as its even and its odd terms, p(t) = E(t^2) + t O(t^2):
     * two chains of products and sums, half as long, that the processor
     * runs side by side. */
    if (a < 0.5) {
        double z = a * a, z2 = z * z, e = ERF_ZERO[12], o = ERF_ZERO[11];
        for (int n = 10; n >= 0; n -= 2) {
            e = e * z2 + ERF_ZERO[n];
            if (n > 0)
                o = o * z2 + ERF_ZERO[n - 1];
        }
        y = TWO_OVER_SQRT_PI * (a * (e + z * o));
    } else {
        int k = (int)((a - 0.5) * 2);
        const double *c = ERF_TAYLOR[k];
        double t = a - (0.75 + 0.5 * k), t2 = t * t, e = c[18], o = c[17];
        for (int n = 16; n >= 0; n -= 2) {
            e = e * t2 + c[n];
            if (n > 0)
                o = o * t2 + c[n - 1];
        }
        y = e + t * o;
    }
    return x < 0 ? -y : y;
}

/* cos x: x = n pi/2 + r, |r| <= pi/4, with pi/2 in three parts (the first
 * two of 33 bits, so n times them is exact for |n| < 2^20), then cos r or
 * sin r by Taylor (to r^16 and r^17: the next terms are below 2^-58) by the
 * quadrant n mod 4.  Accurate for |x| < 2^20; the engine's arguments are
 * below 2 pi.  A larger |x| is first taken modulo TWO_PI, the double
 * nearest 2 pi (fmod is exact, so every C library gives the same bits),
 * which puts an error of |x| / 2 pi times TWO_PI - 2 pi (2.4e-16), below
 * |x| 4e-17, into the argument: a value in [-1, 1] near cos x, where n's
 * quadrant once passed a long (undefined past 2^63, a 32-bit long in
 * WebAssembly past 2^31) and r grew with x (cos 1e19 was 4e32, cos 1e300
 * NaN). */
double ag_math_cos(double x)
{
    static const double PIO2_1 = 1.5707963267341256e+00, PIO2_2 = 6.077100506303966e-11,
                        PIO2_3 = 2.0222662487959506e-21, TWO_OVER_PI = 6.36619772367581382433e-01,
                        TWO_PI = 6.283185307179586;
    if (x != x || x == INFINITY || x == -INFINITY)
        return NAN;
    if (fabs(x) >= 0x1p20)
        x = fmod(x, TWO_PI);
    double n = round_near(x * TWO_OVER_PI);
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
        return y > 0 ? 0 : y < 0 ? INFINITY : y;     /* y NaN: NaN, as C's pow */
    return ag_math_exp(y * ag_math_log(b));
}

#ifdef __wasm_simd128__
/* ---- the same exp and erf, two at a time (the browser build) ------------
 *
 * y[i] = ag_math_exp(x[i]) (ag_math_erf) for a whole array, bit for bit:
 * each of WebAssembly's two f64x2 lanes performs the scalar function's
 * operations in its order (IEEE double, no fused multiply-add), so each
 * rounds as the scalar does.  Lanes run one path together; inputs the
 * scalar treats specially (and exp's last n mod 4, erf's below 1/2) go to
 * the scalar function itself.  tests/web_kernels.sh compares the two. */
#include <wasm_simd128.h>

#include "kernels/wasm.h"

#define SPLAT(c) wasm_f64x2_splat(c)
#define ADD(a, b) wasm_f64x2_add(a, b)
#define SUB(a, b) wasm_f64x2_sub(a, b)
#define MUL(a, b) wasm_f64x2_mul(a, b)

/* Each function below works on two vectors side by side, step by step: a
 * Horner chain waits on its last product at every step, and two chains in
 * one instruction stream keep the processor busy while it waits.  (Two
 * named variables, not an array: an array of vectors may be left in
 * memory, and every step would wait on a store.) */

/* ag_math_exp for |x| <= 708, where no special case applies and scale2
 * multiplies once by 2^k, -1022 <= k <= 1021: the table's two parts for
 * n's low five bits, and 2^k from its bits, k = (n - j) / 32 = n >> 5. */
static v128_t exp_finish(v128_t p, v128_t ni)
{
    int j0 = (int)wasm_i64x2_extract_lane(ni, 0) & 31, j1 = (int)wasm_i64x2_extract_lane(ni, 1) & 31;
    v128_t hi = wasm_f64x2_make(EXP2_32[j0][0], EXP2_32[j1][0]), lo = wasm_f64x2_make(EXP2_32[j0][1], EXP2_32[j1][1]);
    v128_t scale = wasm_i64x2_shl(wasm_i64x2_add(wasm_i64x2_shr(ni, 5), wasm_i64x2_splat(1023)), 52);
    return MUL(ADD(hi, ADD(MUL(hi, p), lo)), scale);
}

static inline void exp_lanes(v128_t *x0, v128_t *x1)
{
    v128_t s0 = ADD(MUL(*x0, SPLAT(32 * INV_LN2)), SPLAT(ROUND_SHIFT)), n0 = SUB(s0, SPLAT(ROUND_SHIFT));
    v128_t s1 = ADD(MUL(*x1, SPLAT(32 * INV_LN2)), SPLAT(ROUND_SHIFT)), n1 = SUB(s1, SPLAT(ROUND_SHIFT));
    v128_t ni0 = wasm_i64x2_shr(wasm_i64x2_shl(s0, 32), 32), ni1 = wasm_i64x2_shr(wasm_i64x2_shl(s1, 32), 32);
    v128_t r0 = SUB(SUB(*x0, MUL(n0, SPLAT(LN2_HI / 32))), MUL(n0, SPLAT(LN2_LO / 32)));
    v128_t r1 = SUB(SUB(*x1, MUL(n1, SPLAT(LN2_HI / 32))), MUL(n1, SPLAT(LN2_LO / 32)));
    v128_t p0 = MUL(r0, SPLAT(1.0 / 720)), p1 = MUL(r1, SPLAT(1.0 / 720));
    p0 = MUL(r0, ADD(SPLAT(1.0 / 120), p0));
    p1 = MUL(r1, ADD(SPLAT(1.0 / 120), p1));
    p0 = MUL(r0, ADD(SPLAT(1.0 / 24), p0));
    p1 = MUL(r1, ADD(SPLAT(1.0 / 24), p1));
    p0 = MUL(r0, ADD(SPLAT(1.0 / 6), p0));
    p1 = MUL(r1, ADD(SPLAT(1.0 / 6), p1));
    p0 = ADD(r0, MUL(MUL(r0, r0), ADD(SPLAT(1.0 / 2), p0)));
    p1 = ADD(r1, MUL(MUL(r1, r1), ADD(SPLAT(1.0 / 2), p1)));
    *x0 = exp_finish(p0, ni0);
    *x1 = exp_finish(p1, ni1);
}

static int exp_in_range(v128_t x)
{
    return wasm_i64x2_all_true(wasm_f64x2_le(wasm_f64x2_abs(x), SPLAT(708)));      /* false for NaN */
}

void ag_math_exp_n(const double *x, double *y, size_t n)
{
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v128_t v0 = wasm_v128_load(x + i), v1 = wasm_v128_load(x + i + 2);
        if (exp_in_range(v0) && exp_in_range(v1)) {
            exp_lanes(&v0, &v1);
            wasm_v128_store(y + i, v0);
            wasm_v128_store(y + i + 2, v1);
        } else
            for (int l = 0; l < 4; l++)
                y[i + l] = ag_math_exp(x[i + l]);
    }
    for (; i < n; i++)
        y[i] = ag_math_exp(x[i]);
}

/* ag_math_erf's two Horner chains for a polynomial of even degree `top` in
 * t, p(t) = E(t^2) + t O(t^2): E from c[top] and O from c[top - 1], down
 * the even and the odd coefficients, for four vectors given t^2 (t2[v]),
 * side by side (one vector's two chains wait on each product and sum). */
static inline void even_odd_lanes4(const double *c, int top, const v128_t t2[4], v128_t e[4], v128_t o[4])
{
    v128_t e0 = SPLAT(c[top]), o0 = SPLAT(c[top - 1]), e1 = e0, o1 = o0, e2 = e0, o2 = o0, e3 = e0, o3 = o0;
    for (int n = top - 2; n >= 0; n -= 2) {
        v128_t ce = SPLAT(c[n]);
        e0 = ADD(MUL(e0, t2[0]), ce);
        e1 = ADD(MUL(e1, t2[1]), ce);
        e2 = ADD(MUL(e2, t2[2]), ce);
        e3 = ADD(MUL(e3, t2[3]), ce);
        if (n > 0) {
            v128_t co = SPLAT(c[n - 1]);
            o0 = ADD(MUL(o0, t2[0]), co);
            o1 = ADD(MUL(o1, t2[1]), co);
            o2 = ADD(MUL(o2, t2[2]), co);
            o3 = ADD(MUL(o3, t2[3]), co);
        }
    }
    e[0] = e0, e[1] = e1, e[2] = e2, e[3] = e3, o[0] = o0, o[1] = o1, o[2] = o2, o[3] = o3;
}

/* the same for two vectors (the compiler drops the repeated pair) */
static inline void even_odd_lanes(const double *c, int top, v128_t t20, v128_t t21, v128_t e[2], v128_t o[2])
{
    const v128_t t2[4] = { t20, t21, t20, t21 };
    v128_t e4[4], o4[4];
    even_odd_lanes4(c, top, t2, e4, o4);
    e[0] = e4[0], e[1] = e4[1], o[0] = o4[0], o[1] = o4[1];
}

/* ag_math_erf's polynomial below 1/2 for a = |x| (as the scalar forms it:
 * -x where x < 0, so -0 stays -0).  Its coefficients are read from memory
 * (the empty asm hides where c points): as constants, each vector would be
 * built anew from two integer moves at every use. */
static inline void erf_small_lanes(v128_t *a0, v128_t *a1)
{
    const double *c = ERF_ZERO;
    __asm__("" : "+r"(c));
    v128_t z0 = MUL(*a0, *a0), z1 = MUL(*a1, *a1), e[2], o[2];
    even_odd_lanes(c, 12, MUL(z0, z0), MUL(z1, z1), e, o);
    v128_t two_over_sqrt_pi = SPLAT(TWO_OVER_SQRT_PI);
    *a0 = MUL(two_over_sqrt_pi, MUL(*a0, ADD(e[0], MUL(z0, o[0]))));
    *a1 = MUL(two_over_sqrt_pi, MUL(*a1, ADD(e[1], MUL(z1, o[1]))));
}

/* erf_small_lanes for four vectors side by side (eight chains: one
 * vector's two wait on each product and sum) */
static inline void erf_small_lanes4(v128_t a[4])
{
    const double *c = ERF_ZERO;
    __asm__("" : "+r"(c));
    const v128_t z[4] = { MUL(a[0], a[0]), MUL(a[1], a[1]), MUL(a[2], a[2]), MUL(a[3], a[3]) };
    const v128_t z2[4] = { MUL(z[0], z[0]), MUL(z[1], z[1]), MUL(z[2], z[2]), MUL(z[3], z[3]) };
    v128_t e[4], o[4], two_over_sqrt_pi = SPLAT(TWO_OVER_SQRT_PI);
    even_odd_lanes4(c, 12, z2, e, o);
    for (int v = 0; v < 4; v++)
        a[v] = MUL(two_over_sqrt_pi, MUL(a[v], ADD(e[v], MUL(z[v], o[v]))));
}

/* ag_math_erf's polynomial about c = 0.75 + 0.5 k for a = |x| in [1/2, 6)
 * (a as the scalar forms it: -x where x < 0), the same k in every lane. */
static inline void erf_taylor_lanes(v128_t *a0, v128_t *a1, int k)
{
    v128_t t0 = SUB(*a0, SPLAT(0.75 + 0.5 * k)), t1 = SUB(*a1, SPLAT(0.75 + 0.5 * k)), e[2], o[2];
    even_odd_lanes(ERF_TAYLOR[k], 18, MUL(t0, t0), MUL(t1, t1), e, o);
    *a0 = ADD(e[0], MUL(t0, o[0]));
    *a1 = ADD(e[1], MUL(t1, o[1]));
}

/* The scalar's paths for 256 elements at a time: four neighbours all below
 * 1/2 run together where they lie; otherwise each element's index goes to
 * the list of its path (12: below 1/2, or one of the 11 Taylor centres),
 * and each list runs four at a time (the last two or three with lanes
 * repeated, their copies discarded). */
enum { ERF_CHUNK = 256, ERF_PATHS = 12, ERF_SMALL = ERF_PATHS - 1 };

/* erf of four lanes on one path: |x| as the scalar forms it (-x where
 * x < 0, so -0 stays -0), the polynomial, and the sign back. */
static inline void erf_lanes(v128_t *x0, v128_t *x1, int path)
{
    v128_t neg0 = wasm_f64x2_lt(*x0, SPLAT(0)), neg1 = wasm_f64x2_lt(*x1, SPLAT(0));
    v128_t a0 = wasm_v128_bitselect(wasm_f64x2_neg(*x0), *x0, neg0);
    v128_t a1 = wasm_v128_bitselect(wasm_f64x2_neg(*x1), *x1, neg1);
    if (path == ERF_SMALL)
        erf_small_lanes(&a0, &a1);
    else
        erf_taylor_lanes(&a0, &a1, path);
    *x0 = wasm_v128_bitselect(wasm_f64x2_neg(a0), a0, neg0);
    *x1 = wasm_v128_bitselect(wasm_f64x2_neg(a1), a1, neg1);
}

/* x[ix[l]] for lanes l < n of four (the last repeated), and back */
static void erf_group(const double *x, double *y, const unsigned char *ix, int n, int path)
{
    int l1 = n > 1 ? 1 : 0, l2 = n > 2 ? 2 : l1, l3 = n > 3 ? 3 : l2;
    v128_t x0 = wasm_f64x2_make(x[ix[0]], x[ix[l1]]), x1 = wasm_f64x2_make(x[ix[l2]], x[ix[l3]]);
    erf_lanes(&x0, &x1, path);
    y[ix[0]] = wasm_f64x2_extract_lane(x0, 0);
    y[ix[l1]] = wasm_f64x2_extract_lane(x0, 1);
    y[ix[l2]] = wasm_f64x2_extract_lane(x1, 0);
    y[ix[l3]] = wasm_f64x2_extract_lane(x1, 1);
}

static int all_small(v128_t x) { return wasm_i64x2_all_true(wasm_f64x2_lt(wasm_f64x2_abs(x), SPLAT(0.5))); }

void ag_math_erf_n(const double *x, double *y, size_t n)
{
    for (size_t base = 0; base < n; base += ERF_CHUNK) {
        size_t len = n - base < ERF_CHUNK ? n - base : ERF_CHUNK;
        const double *xc = x + base;
        double *yc = y + base;
        unsigned char idx[ERF_PATHS][ERF_CHUNK];
        int count[ERF_PATHS] = { 0 };
        for (size_t i = 0; i < len; i += 4) {
            if (i + 8 <= len) {         /* eight neighbours below 1/2: four vectors side by side */
                v128_t v[4];
                for (int q = 0; q < 4; q++)
                    v[q] = wasm_v128_load(xc + i + 2 * q);
                if (all_small(v[0]) && all_small(v[1]) && all_small(v[2]) && all_small(v[3])) {
                    v128_t neg[4];
                    for (int q = 0; q < 4; q++) {
                        neg[q] = wasm_f64x2_lt(v[q], SPLAT(0));
                        v[q] = wasm_v128_bitselect(wasm_f64x2_neg(v[q]), v[q], neg[q]);
                    }
                    erf_small_lanes4(v);
                    for (int q = 0; q < 4; q++)
                        wasm_v128_store(yc + i + 2 * q, wasm_v128_bitselect(wasm_f64x2_neg(v[q]), v[q], neg[q]));
                    i += 4;
                    continue;
                }
            }
            if (i + 4 <= len) {         /* four neighbours below 1/2 (the common case): no lists */
                v128_t x0 = wasm_v128_load(xc + i), x1 = wasm_v128_load(xc + i + 2);
                if (all_small(x0) && all_small(x1)) {
                    erf_lanes(&x0, &x1, ERF_SMALL);
                    wasm_v128_store(yc + i, x0);
                    wasm_v128_store(yc + i + 2, x1);
                    continue;
                }
            }
            for (size_t l = i; l < i + 4 && l < len; l++) {
                double a = xc[l] < 0 ? -xc[l] : xc[l];
                if (!(a < 6))                   /* NaN, or +-1 */
                    yc[l] = ag_math_erf(xc[l]);
                else {
                    int k = (int)((a - 0.5) * 2), path = a < 0.5 ? ERF_SMALL : k;   /* k is 0 there: no branch */
                    idx[path][count[path]++] = (unsigned char)l;
                }
            }
        }
        for (int path = 0; path < ERF_PATHS; path++)
            for (int i = 0; i < count[path]; i += 4)
                erf_group(xc, yc, idx[path] + i, count[path] - i < 4 ? count[path] - i : 4, path);
    }
}
#endif
