/*
 * bf16_check.h - the checks of a bf16 matrix-multiply kernel, shared by
 * test_bf16.c (the kernels this CPU has) and test_bf16_amx.c (the AMX
 * kernel on emulated tiles).  Each kernel is run through ag_fast_gemm_bf16_on
 * and compared with a double-precision product of the same bf16-rounded
 * inputs within the bound derived below.
 */
#ifndef ATTOGRAD_TESTS_BF16_CHECK_H
#define ATTOGRAD_TESTS_BF16_CHECK_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "kernels.h"
#include "kernels/cpu.h"
#include "kernels/gemm_bf16.h"

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
    double *s, *bound;   /* per element of C: exact sum and bound; NULL until needed */
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
    problem p = {ta, tb, M, N, K, (ta ? M : K) + pad, (tb ? K : N) + pad, N + pad, beta, NULL, NULL, NULL,
                 NULL, NULL};
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
    free(p->s);
    free(p->bound);
}

static float *run(const problem *p, int kernel)
{
    float *C = malloc(sizeof(float) * ((size_t)p->M * p->ldc + 1));
    memcpy(C, p->C0, sizeof(float) * (size_t)p->M * p->ldc);
    if (kernel < 0)
        ag_kernels_reference.gemm_bf16(p->ta, p->tb, p->M, p->N, p->K, p->A, (int)p->lda, p->B, (int)p->ldb, p->beta, C,
                                       (int)p->ldc);
    else
        ag_fast_gemm_bf16_on(kernel, p->ta, p->tb, p->M, p->N, p->K, p->A, p->lda, p->B, p->ldb, p->beta,
                          C, p->ldc);
    return C;
}

static int subnormal(float x) { return x != 0 && fabsf(x) < 0x1p-126f; }

/* The exact sums s and their bounds (above) for every element, computed
 * on first use, after the test has put its special values into A and B:
 * op(A) and op(B)^T are rounded to bf16 once, then each s is a dot product
 * in double. */
static void exact_sums(problem *p)
{
    if (p->s) return;
    const int M = p->M, N = p->N, K = p->K;
    const double u = 0x1p-24;
    const double h = K + 3.0, gamma = h * u / (1 - h * u) + (K + 1) * 0x1p-53;
    float *a = malloc(sizeof(float) * ((size_t)M * K + 1)), *b = malloc(sizeof(float) * ((size_t)N * K + 1));
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            a[(size_t)i * K + k] = ag_bf16_round(p->ta ? p->A[(size_t)k * p->lda + i] : p->A[(size_t)i * p->lda + k]);
    for (int j = 0; j < N; j++)
        for (int k = 0; k < K; k++)
            b[(size_t)j * K + k] = ag_bf16_round(p->tb ? p->B[(size_t)j * p->ldb + k] : p->B[(size_t)k * p->ldb + j]);
    p->s = malloc(sizeof(double) * ((size_t)M * N + 1));
    p->bound = malloc(sizeof(double) * ((size_t)M * N + 1));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = p->beta == 0 ? 0 : (double)p->beta * p->C0[(size_t)i * p->ldc + j];
            double mag = fabs(s), lost = 0;
            const float *ai = a + (size_t)i * K, *bj = b + (size_t)j * K;
            for (int k = 0; k < K; k++) {
                const double t = (double)ai[k] * bj[k];
                s += t;
                mag += fabs(t);
                if (subnormal(ai[k]) || subnormal(bj[k])) lost += fabs(t);
            }
            p->s[(size_t)i * N + j] = s;
            p->bound[(size_t)i * N + j] = gamma * mag + lost + (2.0 * K + 4) * 0x1p-126;
        }
    free(a);
    free(b);
}

/* Checks C against the bound above, or exactly; columns past N must be
 * untouched.  Returns the failure count. */
static int verify(const char *what, problem *p, const float *C, int exact)
{
    exact_sums(p);
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
                ref = p->s[(size_t)i * p->N + j];
                tol = exact ? 0 : p->bound[(size_t)i * p->N + j];
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
static void compare(const char *what, problem *p, const float *C1, const float *C2)
{
    exact_sums(p);
    int bad = 0;
    for (int i = 0; i < p->M; i++)
        for (int j = 0; j < p->N; j++) {
            const size_t at = (size_t)i * p->ldc + j;
            if (!(fabs((double)C1[at] - C2[at]) <= 2 * p->bound[(size_t)i * p->N + j])) bad++;
        }
    CHECK(bad == 0, "%s ta=%d tb=%d %dx%dx%d: %d elements more than twice the bound apart", what, p->ta, p->tb,
          p->M, p->N, p->K, bad);
}

/* Set by a program whose kernel is slow (the emulated one): the largest
 * products are left out. */
static int bf16_light;

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

/* 1000 in each position (row chunks, units, and several K blocks of the
 * AMX kernel), the other dims odd; K 2101, AVX512-BF16's K blocks (at most
 * 1024) of unequal pairs (351, 351, 349); beta 0.5 (C scaled first); K == 0. */
static void test_large(int kernel)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            one_case(kernel, ta, tb, 33, 17, 1000, 1, 1, 0);
            one_case(kernel, ta, tb, 1000, 33, 100, 0, 0, 0);
            one_case(kernel, ta, tb, 15, 1000, 33, 2, 1, 1);
            one_case(kernel, ta, tb, 1, 1, 1000, 0, 0, 1);
            one_case(kernel, ta, tb, 100, 100, 1000, 0, 1, 1);
            one_case(kernel, ta, tb, 200, 33, 2101, 1, 1, 0);
        }
    if (!bf16_light) one_case(kernel, 0, 1, 1000, 100, 1000, 0, 0, 0);
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
    for (size_t s = bf16_light ? 2 : 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            const int ta = t & 1, tb = t >> 1;
            problem p = make_problem(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2], (int)s % 2, (float)(t % 2), 0);
            check_set_threads(1);
            float *c1 = run(&p, kernel);
            check_set_threads(2);
            float *c2 = run(&p, kernel);
            CHECK(memcmp(c1, c2, sizeof(float) * (size_t)p.M * p.ldc) == 0,
                  "%s ta=%d tb=%d %dx%dx%d: 1 and 2 threads differ", ag_bf16_kernel_name(kernel), ta, tb, p.M,
                  p.N, p.K);
            verify(ag_bf16_kernel_name(kernel), &p, c2, 0);
            if (s == 2 || t == 0) {
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

/* rows x cols at stride ld, mapped without reserving memory (only the rows'
 * pages are backed); small integers, exact in bf16. */
static float *sparse_matrix(int rows, int cols, long ld, size_t *bytes)
{
    *bytes = sizeof(float) * ((size_t)(rows - 1) * (size_t)ld + (size_t)cols);
    void *v = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (v == MAP_FAILED) return NULL;
    float *m = v;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) m[(size_t)i * (size_t)ld + j] = (float)(int)floor(uniform() * 3);
    return m;
}

/* Leading dimensions that put the later half of each operand's rows past
 * element INT_MAX (an offset computed in int would wrap there, also at a
 * tile's first row); integer inputs, so C must be exact. */
static void test_huge_strides(int kernel)
{
    static const int shapes[][3] = {{3, 5, 7}, {40, 40, 40}, {130, 70, 90}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int t = 0; t < 4; t++) {
            const int ta = t & 1, tb = t >> 1, M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
            const long lda = 2147483648L / (ar / 2 > 1 ? ar / 2 : 1) + 1;
            const long ldb = 2147483648L / (br / 2 > 1 ? br / 2 : 1) + 1;
            const long ldc = 2147483648L / (M / 2 > 1 ? M / 2 : 1) + 1;
            size_t na, nb, nc;
            float *A = sparse_matrix(ar, ac, lda, &na), *B = sparse_matrix(br, bc, ldb, &nb);
            float *C = sparse_matrix(M, N, ldc, &nc);
            if (A && B && C) {
                ag_fast_gemm_bf16_on(kernel, ta, tb, M, N, K, A, lda, B, ldb, 0, C, ldc);
                int bad = 0;
                for (int i = 0; i < M; i++)
                    for (int j = 0; j < N; j++) {
                        double ref = 0;
                        for (int k = 0; k < K; k++)
                            ref += (double)(ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                                   (tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
                        bad += !((double)C[(size_t)i * ldc + j] == ref);
                    }
                CHECK(bad == 0, "%s huge strides ta=%d tb=%d %dx%dx%d (lda %ld, ldb %ld, ldc %ld): %d wrong",
                      ag_bf16_kernel_name(kernel), ta, tb, M, N, K, lda, ldb, ldc, bad);
            } else {
                CHECK(0, "huge strides: cannot map %zu + %zu + %zu bytes of address space", na, nb, nc);
            }
            if (A) munmap(A, na);
            if (B) munmap(B, nb);
            if (C) munmap(C, nc);
        }
}

static void test_kernel(int kernel)
{
    test_shapes(kernel);
    test_large(kernel);
    test_threads_and_reference(kernel);
    test_specials(kernel);
    test_tiny(kernel);
    test_huge_strides(kernel);
}

#endif
