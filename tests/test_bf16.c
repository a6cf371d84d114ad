/*
 * test_bf16.c - bf16 rounding and the bf16 matrix multiply.
 *
 *   - ag_bf16_bits / ag_bf16_round on the edge cases (ties to even, the
 *     largest finite values rounding to inf, NaN, inf, subnormals, -0), and
 *     against an independent rounding on many random bit patterns;
 *     fast_f32_to_bf16 bit for bit against it.
 *   - each bf16 kernel this CPU has (AVX512-BF16, AMX), the others reported
 *     skipped: every element against a double-precision product of the same
 *     bf16-rounded inputs, within the bound derived below; exactly, on small
 *     integers; odd M, N, K (1, 15, 17, 33, 100, 1000), both transposes,
 *     padded leading dimensions, beta 0, 1 and 0.5, K == 0; NaN and inf
 *     propagation; bitwise the same on 1 and 2 threads; the plain
 *     ref_gemm_bf16 against the kernel within twice the bound.
 *
 * Built by `make test` with the library (src/kernels/ is part of it); alone:
 *   cc -std=c11 -O2 -march=native -fopenmp -Iinclude -Isrc tests/test_bf16.c
 *      src/kernels/cpu.c src/kernels/gemm_bf16.c src/kernels/bf16_ref.c
 *      src/tensor.c src/pcg32.c -lm
 * (tensor.c for ag_error).  AG_BF16_KERNEL does not affect this test: it
 * runs every kernel the hardware has.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/cpu.h"
#include "kernels/gemm_bf16.h"
#ifdef _OPENMP
#include <omp.h>
#endif

/* ---- helpers ------------------------------------------------------------ */

static unsigned long long rng_state = 0x243F6A8885A308D3ull;
static uint32_t rand32(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 32);
}
static double uniform(void)   /* [-1, 1) */
{
    return (double)rand32() / 2147483648.0 - 1.0;
}

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}
static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void set_threads(int n)
{
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* ---- rounding ----------------------------------------------------------- */

/* Round-to-nearest-even to bf16 by comparing distances, not by the bit
 * trick under test: the two bf16 neighbours of |x| are its truncation and
 * the next bf16 up; the nearer wins, a tie goes to the even one. */
static uint16_t bf16_by_distance(float x)
{
    const uint32_t u = bits_of(x);
    if (isnan(x)) return (uint16_t)((u >> 16) | 0x40);
    if (isinf(x)) return (uint16_t)(u >> 16);
    const uint32_t sign = u & 0x80000000u, mag = u & 0x7fffffffu;
    const uint32_t lo = mag & 0xffff0000u, hi = lo + 0x10000u;   /* hi may be the inf pattern */
    /* Distances in double: bf16 neighbours and x are exact there; the
     * upper neighbour of the largest bf16 is 2^128 for this purpose. */
    const double dx = fabs((double)x), dlo = (double)float_of(lo);
    const double dhi = hi == 0x7f800000u ? ldexp(1.0, 128) : (double)float_of(hi);
    uint32_t r;
    if (dx - dlo < dhi - dx) r = lo;
    else if (dx - dlo > dhi - dx) r = hi;
    else r = (lo & 0x10000u) ? hi : lo;
    return (uint16_t)((sign | r) >> 16);
}

static void test_round_edges(void)
{
    static const struct {
        uint32_t in;
        uint16_t out;
        const char *what;
    } cases[] = {
        {0x3f800000u, 0x3f80, "1"},
        {0x3f808000u, 0x3f80, "1 + 2^-8: tie, to the even 1"},
        {0x3f818000u, 0x3f82, "1 + 3*2^-8: tie, to the even 1 + 2^-6"},
        {0x3f808001u, 0x3f81, "just above a tie rounds up"},
        {0x3f817fffu, 0x3f81, "just below a tie rounds down"},
        {0xbf818000u, 0xbf82, "negative tie, away from the odd neighbour"},
        {0x7f7fffffu, 0x7f80, "largest float rounds to inf"},
        {0x7f7f8000u, 0x7f80, "midpoint above the largest bf16: tie to even is inf"},
        {0x7f7f7fffu, 0x7f7f, "just below that midpoint: largest bf16"},
        {0xff7fffffu, 0xff80, "-largest float rounds to -inf"},
        {0x7f800000u, 0x7f80, "inf"},
        {0xff800000u, 0xff80, "-inf"},
        {0x7fc00000u, 0x7fc0, "quiet NaN"},
        {0x7f800001u, 0x7fc0, "signalling NaN, payload in the low bits only: still NaN, quiet"},
        {0xffffffffu, 0xffff, "negative NaN keeps sign and payload"},
        {0x7fa00000u, 0x7fe0, "signalling NaN with a high payload: made quiet"},
        {0x00000000u, 0x0000, "+0"},
        {0x80000000u, 0x8000, "-0"},
        {0x00000001u, 0x0000, "smallest subnormal rounds to 0"},
        {0x80000001u, 0x8000, "-smallest subnormal rounds to -0"},
        {0x00008000u, 0x0000, "subnormal tie to even 0"},
        {0x00018000u, 0x0002, "subnormal tie to even 2"},
        {0x00008001u, 0x0001, "subnormal above a tie: smallest bf16 subnormal"},
        {0x007fffffu, 0x0080, "largest subnormal rounds up to the smallest normal"},
        {0x00400000u, 0x0040, "subnormal bf16 kept"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const float x = float_of(cases[i].in);
        const uint16_t got = ag_bf16_bits(x);
        CHECK(got == cases[i].out, "ag_bf16_bits(0x%08x) = 0x%04x, want 0x%04x (%s)", cases[i].in, got,
              cases[i].out, cases[i].what);
        const float r = ag_bf16_round(x);
        CHECK(bits_of(r) == (uint32_t)cases[i].out << 16, "ag_bf16_round(0x%08x) = 0x%08x (%s)",
              cases[i].in, bits_of(r), cases[i].what);
        CHECK(bf16_by_distance(x) == cases[i].out, "the test's own rounding of 0x%08x (%s)", cases[i].in,
              cases[i].what);
    }
    CHECK(isnan(ag_bf16_round(NAN)) && isinf(ag_bf16_round(-INFINITY)) && ag_bf16_round(-INFINITY) < 0,
          "NaN stays NaN, -inf stays -inf");
}

/* Random bit patterns (every class: NaN, inf, normal, subnormal), and every
 * low half for a few high halves, against the distance rounding. */
static void test_round_random(void)
{
    int bad = 0;
    uint32_t first = 0;
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = rand32();
        if (i % 4 == 1) u &= 0x807fffffu;   /* subnormals */
        if (i % 4 == 2) u |= 0x7f000000u;   /* near the top: inf and NaN */
        if (ag_bf16_bits(float_of(u)) != bf16_by_distance(float_of(u)) && bad++ == 0) first = u;
    }
    static const uint32_t highs[] = {0x3f80u, 0x3f81u, 0x7f7fu, 0x0000u, 0x0001u, 0x807fu, 0x7f80u, 0xff80u};
    for (size_t h = 0; h < sizeof highs / sizeof highs[0]; h++)
        for (uint32_t lo = 0; lo < 0x10000u; lo++) {
            const uint32_t u = highs[h] << 16 | lo;
            if (ag_bf16_bits(float_of(u)) != bf16_by_distance(float_of(u)) && bad++ == 0) first = u;
        }
    CHECK(bad == 0, "ag_bf16_bits disagrees with nearest-even on %d patterns, first 0x%08x", bad, first);
}

/* fast_f32_to_bf16 against the plain rounding, bit for bit, every length
 * around the 32-element blocks, subnormals included. */
static void test_convert(void)
{
    enum { N = 300 };
    float src[N];
    uint16_t fast[N + 1], ref[N + 1];
    int bad = 0;
    for (int rep = 0; rep < 200; rep++) {
        for (int i = 0; i < N; i++) {
            uint32_t u = rand32();
            if (rep % 3 == 0 && i % 7 == 0) u &= 0x807fffffu;   /* some subnormals */
            if (rep % 3 == 1) u = bits_of((float)uniform());
            src[i] = float_of(u);
        }
        const int n = rep % 3 == 2 ? N : 1 + rep % 70;
        fast[n] = ref[n] = 0xabcd;
        fast_f32_to_bf16(fast, src, n);
        ref_f32_to_bf16(ref, src, n);
        bad += memcmp(fast, ref, sizeof(uint16_t) * (n + 1)) != 0;
    }
    CHECK(bad == 0, "fast_f32_to_bf16 differs from the plain rounding in %d of 200 runs", bad);
}

/* ---- the product -------------------------------------------------------- */

/*
 * The error bound.  Let t_0 = beta*c0 (the old C, when beta != 0) and t_k =
 * bf16(a_ik) bf16(b_kj), k = 1..K; the exact result is s = sum of the t.
 * A product of two bf16 values has at most 16 significant bits, so it is
 * exact in fp32 (barring overflow and underflow) and in double; the
 * reference below sums the t in double (relative error per addition
 * 2^-53, so at most (K+1) 2^-53 sum|t| in all).
 *
 * The kernels add the t in fp32 with round-to-nearest-even, in a fixed
 * tree: the AVX512-BF16 kernel in one chain (acc += t for t_0 then each k;
 * vdpbf16ps rounds after each of its two products), so each t passes
 * through at most K roundings; AMX's tdpbf16ps sums 16 pairs per
 * instruction from zero (even and odd products in separate chains of at
 * most min(16, ceil(K/2)) roundings), combines the two (1) and adds that to
 * the accumulator (1 per instruction, ceil(K/32) in all): at most
 * min(16, ceil(K/2)) + 1 + ceil(K/32) <= K + 2 roundings.  With h
 * roundings on every path, |computed - s| <= gamma_h sum|t|, gamma_h =
 * h u / (1 - h u), u = 2^-24 (Higham, Accuracy and Stability of Numerical
 * Algorithms, 2nd ed., sec. 4.2).  beta other than 0 and 1 scales C first
 * (one more rounding of t_0): h = K + 3 covers every case.
 *
 * Two departures from IEEE, both documented for the instructions: a
 * subnormal bf16 input counts as zero (the term t_k is lost: allow |t_k|),
 * and a sum whose result would be subnormal is flushed to zero (an
 * absolute error below 2^-126 at each of the at most 2K + 4 additions).
 * Hence, per element:
 *
 *   |C - s| <= ((K+3) u / (1 - (K+3) u) + (K+1) 2^-53) sum|t|
 *              + sum of |t_k| with a subnormal factor + (2K + 4) 2^-126.
 *
 * It is tight enough that any wrong, missing or doubled term of random
 * data is caught (a term is ~1/4 of sum|t| / K on average, the allowance is
 * ~K 2^-24 sum|t|).  With small integers every partial sum is an exact
 * integer below 2^24, so C must match s exactly.  A NaN or inf in s must be
 * a NaN, or the same inf, in C.
 */
typedef struct {
    int ta, tb, M, N, K;
    long lda, ldb, ldc;
    float beta;
    float *A, *B, *C0;
} problem;

static float *matrix(int rows, int cols, long ld, int integers)
{
    float *m = malloc(sizeof(float) * ((size_t)rows * ld + 1));
    for (int i = 0; i < rows; i++)
        for (long j = 0; j < ld; j++)
            m[(size_t)i * ld + j] = j >= cols ? NAN   /* padding: reading it poisons C */
                                  : integers ? (float)(int)floor(uniform() * 3)   /* -3..2 */
                                             : (float)uniform();
    return m;
}

static problem make_problem(int ta, int tb, int M, int N, int K, int pad, float beta, int integers)
{
    problem p = {ta, tb, M, N, K, (ta ? M : K) + pad, (tb ? K : N) + pad, N + pad, beta, NULL, NULL, NULL};
    p.A = matrix(ta ? K : M, ta ? M : K, p.lda, integers);
    p.B = matrix(tb ? N : K, tb ? K : N, p.ldb, integers);
    p.C0 = matrix(M, N, p.ldc, integers);
    if (beta == 0)   /* beta 0 must ignore C, even NaN */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) p.C0[(size_t)i * p.ldc + j] = NAN;
    return p;
}

static void free_problem(problem *p)
{
    free(p->A);
    free(p->B);
    free(p->C0);
}

static float *run(const problem *p, int kernel)
{
    float *C = malloc(sizeof(float) * ((size_t)p->M * p->ldc + 1));
    memcpy(C, p->C0, sizeof(float) * (size_t)p->M * p->ldc);
    if (kernel < 0)
        ref_gemm_bf16(p->ta, p->tb, p->M, p->N, p->K, p->A, p->lda, p->B, p->ldb, p->beta, C, p->ldc);
    else
        fast_gemm_bf16_on(kernel, p->ta, p->tb, p->M, p->N, p->K, p->A, p->lda, p->B, p->ldb, p->beta,
                          C, p->ldc);
    return C;
}

static int subnormal(float x) { return x != 0 && fabsf(x) < 0x1p-126f; }

/* The exact sum s for element (i, j), in double, and the bound above. */
static double exact_sum(const problem *p, int i, int j, double *bound)
{
    const double u = 0x1p-24;
    const double h = p->K + 3.0, gamma = h * u / (1 - h * u) + (p->K + 1) * 0x1p-53;
    double s = p->beta == 0 ? 0 : (double)p->beta * p->C0[(size_t)i * p->ldc + j];
    double mag = fabs(s), lost = 0;
    for (int k = 0; k < p->K; k++) {
        const float a = ag_bf16_round(p->ta ? p->A[(size_t)k * p->lda + i] : p->A[(size_t)i * p->lda + k]);
        const float b = ag_bf16_round(p->tb ? p->B[(size_t)j * p->ldb + k] : p->B[(size_t)k * p->ldb + j]);
        const double t = (double)a * b;
        s += t;
        mag += fabs(t);
        if (subnormal(a) || subnormal(b)) lost += fabs(t);
    }
    *bound = gamma * mag + lost + (2.0 * p->K + 4) * 0x1p-126;
    return s;
}

/* Checks C against the bound above, or exactly; columns past N must be
 * untouched.  Returns the failure count. */
static int verify(const char *what, const problem *p, const float *C, int exact)
{
    int bad = 0, bi = -1, bj = -1;
    double got = 0, want = 0, tol_at = 0;
    for (int i = 0; i < p->M; i++) {
        for (long j = 0; j < p->ldc; j++) {
            const size_t at = (size_t)i * p->ldc + j;
            double ref, tol = 0;
            int ok;
            if (j >= p->N) {
                ok = memcmp(&C[at], &p->C0[at], sizeof(float)) == 0;
                ref = p->C0[at];
            } else {
                ref = exact_sum(p, i, (int)j, &tol);
                if (exact) tol = 0;
                if (isnan(ref)) ok = isnan(C[at]);
                else if (isinf(ref)) ok = (double)C[at] == ref;
                else ok = fabs((double)C[at] - ref) <= tol;   /* false for NaN */
            }
            if (!ok && bad++ == 0) {
                bi = i;
                bj = (int)j;
                got = C[at];
                want = ref;
                tol_at = tol;
            }
        }
    }
    CHECK(bad == 0, "%s ta=%d tb=%d %dx%dx%d beta=%g: %d bad, first C[%d][%d] = %.9g, want %.9g (tol %.3g%s)",
          what, p->ta, p->tb, p->M, p->N, p->K, (double)p->beta, bad, bi, bj, got, want, tol_at,
          bj >= p->N ? ", padding" : "");
    return bad;
}

/* Two results of the same problem, each within the bound of s: within
 * twice the bound of each other. */
static void compare(const char *what, const problem *p, const float *C1, const float *C2)
{
    int bad = 0;
    for (int i = 0; i < p->M; i++)
        for (int j = 0; j < p->N; j++) {
            const size_t at = (size_t)i * p->ldc + j;
            double tol;
            exact_sum(p, i, j, &tol);
            if (!(fabs((double)C1[at] - C2[at]) <= 2 * tol)) bad++;
        }
    CHECK(bad == 0, "%s ta=%d tb=%d %dx%dx%d: %d elements more than twice the bound apart", what, p->ta, p->tb,
          p->M, p->N, p->K, bad);
}

static void one_case(int kernel, int ta, int tb, int M, int N, int K, int pad, float beta, int integers)
{
    problem p = make_problem(ta, tb, M, N, K, pad, beta, integers);
    float *C = run(&p, kernel);
    char what[64];
    snprintf(what, sizeof what, "%s %s", ag_bf16_kernel_name(kernel), integers ? "exact" : "random");
    verify(what, &p, C, integers);
    free(C);
    free_problem(&p);
}

/* Odd sizes in every combination, both transposes, beta 0 and 1, padded
 * and unpadded leading dimensions. */
static void test_shapes(int kernel)
{
    static const int sizes[] = {1, 15, 17, 33, 100};
    const int ns = (int)(sizeof sizes / sizeof sizes[0]);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int a = 0; a < ns; a++)
                for (int b = 0; b < ns; b++)
                    for (int c = 0; c < ns; c++) {
                        const int pad = (a + b + c) % 3 == 0 ? 0 : 3;
                        one_case(kernel, ta, tb, sizes[a], sizes[b], sizes[c], pad, (a + c) % 2 ? 1.0f : 0.0f,
                                 (a + b) % 4 == 0);
                    }
}

/* 1000 in each position (several K blocks, row chunks, units), the other
 * dims odd; beta 0.5 (C scaled first); K == 0. */
static void test_large(int kernel)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            one_case(kernel, ta, tb, 33, 17, 1000, 1, 1, 0);
            one_case(kernel, ta, tb, 1000, 33, 100, 0, 0, 0);
            one_case(kernel, ta, tb, 15, 1000, 33, 2, 1, 1);
            one_case(kernel, ta, tb, 1, 1, 1000, 0, 0, 1);
            one_case(kernel, ta, tb, 100, 100, 1000, 0, 1, 1);
        }
    one_case(kernel, 0, 1, 1000, 100, 1000, 0, 0, 0);
    one_case(kernel, 1, 0, 100, 17, 33, 1, 0.5f, 0);
    one_case(kernel, 0, 0, 17, 15, 0, 1, 0.5f, 0);
    one_case(kernel, 0, 1, 17, 15, 0, 0, 0, 0);
    one_case(kernel, 1, 1, 17, 15, 0, 2, 1, 0);
}

/* The same product on 1 and 2 threads, large enough to be split, must be
 * bitwise the same; and the plain reference within twice the bound. */
static void test_threads_and_reference(int kernel)
{
    static const int shapes[][3] = {{200, 300, 700}, {1000, 33, 1000}, {97, 1000, 129}, {333, 257, 65}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            const int ta = t & 1, tb = t >> 1;
            problem p = make_problem(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], (int)s % 2, (float)(t % 2), 0);
            set_threads(1);
            float *c1 = run(&p, kernel);
            set_threads(2);
            float *c2 = run(&p, kernel);
            CHECK(memcmp(c1, c2, sizeof(float) * (size_t)p.M * p.ldc) == 0,
                  "%s ta=%d tb=%d %dx%dx%d: 1 and 2 threads differ", ag_bf16_kernel_name(kernel), ta, tb, p.M,
                  p.N, p.K);
            verify(ag_bf16_kernel_name(kernel), &p, c2, 0);
            if (s < 2) {
                float *cr = run(&p, -1);
                verify("reference", &p, cr, 0);
                compare("kernel vs reference", &p, c2, cr);
                free(cr);
            }
            free(c1);
            free(c2);
            free_problem(&p);
        }
}

/* NaN and inf: a NaN in row i of op(A) makes row i of C NaN; inf times a
 * positive finite gives inf, inf times 0 NaN, inf - inf NaN; an fp32 value
 * past the largest bf16 becomes inf before it is multiplied.  The double
 * reference in verify() says what each element must be. */
static void test_specials(int kernel)
{
    for (int t = 0; t < 4; t++) {
        const int ta = t & 1, tb = t >> 1, M = 37, N = 41, K = 45;
        problem p = make_problem(ta, tb, M, N, K, 1, (float)(t % 2), 0);
        /* positive entries so that single infinities do not cancel */
        for (int i = 0; i < M; i++)
            for (int k = 0; k < K; k++) {
                float *a = ta ? &p.A[(size_t)k * p.lda + i] : &p.A[(size_t)i * p.lda + k];
                *a = fabsf(*a) + 0.25f;
            }
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++) {
                float *b = tb ? &p.B[(size_t)j * p.ldb + k] : &p.B[(size_t)k * p.ldb + j];
                *b = fabsf(*b) + 0.25f;
            }
#define A_AT(i, k) (*(ta ? &p.A[(size_t)(k) * p.lda + (i)] : &p.A[(size_t)(i) * p.lda + (k)]))
#define B_AT(k, j) (*(tb ? &p.B[(size_t)(j) * p.ldb + (k)] : &p.B[(size_t)(k) * p.ldb + (j)]))
        A_AT(3, 44) = NAN;                 /* row 3: NaN everywhere */
        A_AT(5, 0) = INFINITY;             /* row 5: +inf everywhere but column 7 */
        B_AT(0, 7) = 0;                    /* inf * 0 = NaN at (5, 7) */
        A_AT(9, 10) = -INFINITY;           /* row 9: -inf ... */
        B_AT(12, 20) = INFINITY;           /* ... column 20: +inf; (9, 20): -inf + inf = NaN */
        A_AT(30, 1) = 3.4e38f;             /* past the largest bf16: inf */
        B_AT(2, 40) = -3.4e38f;            /* column 40: -inf; (30, 40): inf - inf = NaN */
#undef A_AT
#undef B_AT
        float *C = run(&p, kernel);
        if (verify(ag_bf16_kernel_name(kernel), &p, C, 0) == 0) {
            CHECK(isnan(C[3 * p.ldc + 0]) && isnan(C[5 * p.ldc + 7]) && isinf(C[5 * p.ldc + 0]) &&
                      isnan(C[9 * p.ldc + 20]) && C[9 * p.ldc + 0] < 0 && isinf(C[9 * p.ldc + 0]) &&
                      isnan(C[30 * p.ldc + 40]) && isinf(C[0 * p.ldc + 40]) && C[0 * p.ldc + 40] < 0,
                  "%s ta=%d tb=%d: the special values are where they should be", ag_bf16_kernel_name(kernel), ta, tb);
        }
        free(C);
        free_problem(&p);
    }
}

/* Subnormal inputs: the kernels count them as zero (allowed by the bound);
 * a product that is tiny but normal is kept. */
static void test_tiny(int kernel)
{
    problem p = make_problem(0, 0, 20, 19, 21, 0, 0, 0);
    for (int i = 0; i < 20; i++) p.A[(size_t)i * p.lda + 4] = 0x1p-130f * (float)(i + 1);   /* subnormal */
    for (int j = 0; j < 19; j++) p.B[(size_t)6 * p.ldb + j] = 0x1p-100f;   /* products ~2^-100: normal */
    float *C = run(&p, kernel);
    verify(ag_bf16_kernel_name(kernel), &p, C, 0);
    free(C);
    free_problem(&p);
}

static void test_kernel(int kernel)
{
    test_shapes(kernel);
    test_large(kernel);
    test_threads_and_reference(kernel);
    test_specials(kernel);
    test_tiny(kernel);
}

int main(void)
{
    test_round_edges();
    test_round_random();
    test_convert();

    const int hw = ag_cpu_bf16_hw();
    printf("bf16 kernels here: %s (AG_BF16_KERNEL picks %s)\n", ag_bf16_kernel_name(hw),
           ag_bf16_kernel_name(ag_cpu_bf16()));
    CHECK((ag_bf16_unavailable_message() == NULL) == ag_bf16_available(), "the unavailable message matches");
    if (hw >= AG_BF16_AVX512) test_kernel(AG_BF16_AVX512);
    else CHECK_SKIP("AVX512-BF16 kernel: this CPU (or OS) does not have AVX512-BF16");
    if (hw >= AG_BF16_AMX) test_kernel(AG_BF16_AMX);
    else CHECK_SKIP("AMX kernel: no AMX-BF16 here, or no tile permission from the OS");

    /* Reference alone, always: against the bound, exact on integers. */
    problem p = make_problem(1, 0, 33, 17, 100, 2, 1, 1);
    float *C = run(&p, -1);
    verify("reference exact", &p, C, 1);
    free(C);
    free_problem(&p);
    p = make_problem(0, 1, 15, 33, 1000, 0, 0, 0);
    C = run(&p, -1);
    verify("reference", &p, C, 0);
    free(C);
    free_problem(&p);
    return check_done();
}
