/*
 * test_gemm.c - the matrix-multiply kernel against a naive triple loop in
 * double: every transpose combination, odd sizes, padded leading dimensions,
 * beta 0 and 1, K == 0, the small-product paths that read operands in place,
 * batched products, the few-rows path (one token at a time), and bitwise
 * agreement across paths and thread counts.
 */
#define _DEFAULT_SOURCE   /* MAP_ANONYMOUS, MAP_NORESERVE */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "check.h"
#include "kernels.h"
#ifndef AG_REFERENCE
#include "kernels/cpu.h"
#include "kernels/fast.h"
#endif

#ifdef AG_DOUBLE
#define EPS DBL_EPSILON
#else
#define EPS FLT_EPSILON
#endif

/* A small fixed LCG so the test needs nothing but itself. */
static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;
static double uniform(void)   /* in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng_state >> 11) / 4503599627370496.0 - 1.0;   /* 2^52 */
}

/* A stored matrix: rows x cols of data inside rows x ld, the padding NaN so
 * that reading past the width poisons the result. */
static ag_real *matrix(int rows, int cols, int ld, int integers)
{
    ag_real *m = malloc(sizeof(ag_real) * ((size_t)rows * ld + 1));
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < ld; j++)
            m[(size_t)i * ld + j] = j >= cols ? (ag_real)NAN
                                  : integers ? (ag_real)(int)floor(uniform() * 3)   /* -3..2 */
                                             : (ag_real)uniform();
    return m;
}

static double elem_a(const ag_real *A, int lda, int ta, int i, int k)
{
    return ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k];
}

static double elem_b(const ag_real *B, int ldb, int tb, int k, int j)
{
    return tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j];
}

/*
 * Checks C (after the call) against the double reference computed from the
 * inputs and C0 (before).  Float summation of K products has the classic
 * bound |err| <= (K+1) u (sum_k |a_ik b_kj| + |beta c0|), u = eps/2; we allow
 * (K+2) eps times that sum, which only a wrong term, not rounding, exceeds.
 * With integer inputs every partial sum is exact, so C must match exactly.
 * Columns between N and ldc must be untouched.  Returns the failure count.
 */
static int verify(const char *what, int ta, int tb, int M, int N, int K, const ag_real *A, int lda,
                  const ag_real *B, int ldb, ag_real beta, const ag_real *C0, const ag_real *C,
                  int ldc, int exact)
{
    int bad = 0, bi = -1, bj = -1;
    double got = 0, want = 0, tol_at = 0;
    for (int i = 0; i < M; i++) {
        for (int j = 0; j < ldc; j++) {
            size_t at = (size_t)i * ldc + j;
            int ok;
            double ref = 0, tol = 0;
            if (j >= N) {
                ok = memcmp(&C[at], &C0[at], sizeof(ag_real)) == 0;
                ref = C0[at];
            } else {
                ref = beta == 0 ? 0 : (double)beta * C0[at];
                double mag = fabs(ref);
                for (int k = 0; k < K; k++) {
                    double p = elem_a(A, lda, ta, i, k) * elem_b(B, ldb, tb, k, j);
                    ref += p;
                    mag += fabs(p);
                }
                tol = exact ? 0 : (K + 2) * EPS * mag;
                ok = fabs((double)C[at] - ref) <= tol;   /* false for NaN */
            }
            if (!ok && bad++ == 0) {
                bi = i;
                bj = j;
                got = C[at];
                want = ref;
                tol_at = tol;
            }
        }
    }
    CHECK(bad == 0, "%s ta=%d tb=%d %dx%dx%d beta=%g: %d bad, first C[%d][%d] = %.9g, want %.9g "
          "(tol %.3g%s)", what, ta, tb, M, N, K, (double)beta, bad, bi, bj, got, want, tol_at,
          bj >= N ? ", padding" : "");
    return bad;
}

/* One product with leading dims padded by `pad`; C starts as NaN for beta 0
 * (it must be ignored) and random for beta 1. */
static void one_case(int ta, int tb, int M, int N, int K, int pad, ag_real beta, int integers)
{
    int lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    ag_real *A = matrix(ta ? K : M, ta ? M : K, lda, integers);
    ag_real *B = matrix(tb ? N : K, tb ? K : N, ldb, integers);
    ag_real *C0 = matrix(M, N, ldc, integers);
    if (beta == 0)
        for (size_t i = 0; i < (size_t)M * ldc; i++)
            if (i % ldc < (size_t)N) C0[i] = (ag_real)NAN;
    ag_real *C = malloc(sizeof(ag_real) * ((size_t)M * ldc + 1));
    memcpy(C, C0, sizeof(ag_real) * (size_t)M * ldc);
    ag_kern->gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    verify(integers ? "exact" : "random", ta, tb, M, N, K, A, lda, B, ldb, beta, C0, C, ldc,
           integers);
    free(A);
    free(B);
    free(C0);
    free(C);
}

static void test_sizes(void)
{
    static const int sizes[] = {1, 3, 17, 65, 257};
    const int ns = (int)(sizeof sizes / sizeof sizes[0]);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int a = 0; a < ns; a++)
                for (int b = 0; b < ns; b++)
                    for (int c = 0; c < ns; c++) {
                        int M = sizes[a], N = sizes[b], K = sizes[c];
                        int pad = (a + b + c) % 3 == 0 ? 0 : 5;
                        /* big ones once per (ta, tb); small ones both ways */
                        if ((double)M * N * K > 257.0 * 65 * 65 && (a + b + c) % 2) continue;
                        one_case(ta, tb, M, N, K, pad, (a + c) % 2 ? 1 : 0, 0);
                    }
}

/* Shapes that cross every blocking boundary: several K blocks, several row
 * chunks, several column chunks (the fast build's block sizes for this
 * CPU: kc, mc, nc), tile edges in both directions, and integer data that
 * must come out exact. */
static void test_blocking(void)
{
    int kc = 384, mc = 192, nc = 2048;
#ifndef AG_REFERENCE
    ag_fast_gemm_blocking(NULL, &kc, &mc, &nc);
#endif
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            one_case(ta, tb, 6 * mc + 49, 37, 300, 3, 0, 0);
            one_case(ta, tb, 29, nc + 52, 33, 0, 1, 0);
            one_case(ta, tb, 130, 130, 2 * kc + 9, 1, 1, 0);
            one_case(ta, tb, 200, 96, kc + 129, 0, 0, 1);
            one_case(ta, tb, 13, 47, 2 * kc + 261, 2, 1, 1);
        }
}

#ifndef AG_REFERENCE
/* The block sizes the model in src/kernels/gemm.c gives for the caches of
 * the three CPUs its comment works out, and for a CPU that reports none
 * (float, AVX-512; other builds check only that the call answers). */
static void test_blocking_model(void)
{
    static const struct {
        const char *cpu;
        ag_cpu_caches caches;
        int kc, mc, nc;
    } cpus[] = {
        {"Zen 4", {32768, 1L << 20, 4L << 20, 8}, 256, 252, 2048},
        {"Zen 5", {49152, 1L << 20, 4L << 20, 12}, 384, 168, 1344},
        {"Sapphire Rapids", {49152, 2L << 20, 1966080, 12}, 384, 336, 640},
        {"nothing reported", {0, 0, 0, 0}, 256, 252, 1024},
    };
    for (int i = 0; i < (int)(sizeof cpus / sizeof cpus[0]); i++) {
        int kc, mc, nc;
        ag_fast_gemm_blocking(&cpus[i].caches, &kc, &mc, &nc);
#if defined(AG_DOUBLE) || !defined(__AVX512F__)
        (void)kc;   /* the table is for float with AVX-512 (tiles 32 floats wide) */
#else
        CHECK(kc == cpus[i].kc && mc == cpus[i].mc && nc == cpus[i].nc,
              "blocking for %s: kc %d mc %d nc %d, the model says %d %d %d", cpus[i].cpu, kc, mc, nc,
              cpus[i].kc, cpus[i].mc, cpus[i].nc);
#endif
    }
}
#endif

/* A stored [M, K] with rows a multiple of 4 KB apart (lda 1024 floats) is
 * packed, its rows sharing L1 sets; 40 columns more apart, it is read in
 * place.  The two must agree bit for bit (the sums run in the same order),
 * with 1 and 2 threads, and with the reference. */
static void test_aliased_rows(void)
{
    const int M = 100, N = 70, K = 300, lds[2] = {1024, 1064};
    for (int tb = 0; tb < 2; tb++) {
        const int ldb = tb ? K : N;
        ag_real *B = matrix(tb ? N : K, tb ? K : N, ldb, 0);
        ag_real *A[2], *C[2];
        A[0] = matrix(M, K, lds[0], 0);
        A[1] = matrix(M, K, lds[1], 0);
        for (int i = 0; i < M; i++) memcpy(A[1] + (size_t)i * lds[1], A[0] + (size_t)i * lds[0], sizeof(ag_real) * K);
        for (int v = 0; v < 2; v++) {
            C[v] = malloc(sizeof(ag_real) * (size_t)M * N);
            ag_kern->gemm(0, tb, M, N, K, A[v], lds[v], B, ldb, 0, C[v], N);
        }
        CHECK(memcmp(C[0], C[1], sizeof(ag_real) * (size_t)M * N) == 0,
              "tb=%d: A with lda %d (packed) and lda %d (in place) differ in bits", tb, lds[0], lds[1]);
        verify("aliased rows", 0, tb, M, N, K, A[0], lds[0], B, ldb, 0, C[0], C[0], N, 0);
        for (int v = 0; v < 2; v++) {
            free(A[v]);
            free(C[v]);
        }
        free(B);
    }
}

/* A stored [M, K] larger than the L2 (2.2 MB: larger than any of the three
 * CPUs' L2) serving 8 column panels is packed; a few of its rows alone fit
 * the L2 and are read in place.  Both sum in the same order: the rows of
 * the big product equal the small products of those rows bit for bit, with
 * 1 and 2 threads. */
static void test_packed_big_a(void)
{
    const int M = 1040, N = 256, K = 520, starts[3] = {0, 517, 1028};
    for (int tb = 0; tb < 2; tb++) {
        const int ldb = tb ? K : N;
        ag_real *A = matrix(M, K, K, 0), *B = matrix(tb ? N : K, tb ? K : N, ldb, 0);
        ag_real *C[2], *part = malloc(sizeof(ag_real) * 12 * N);
        const int saved = ag_get_threads();
        for (int t = 0; t < 2; t++) {
            C[t] = malloc(sizeof(ag_real) * (size_t)M * N);
            check_set_threads(t + 1);
            ag_kern->gemm(0, tb, M, N, K, A, K, B, ldb, 0, C[t], N);
        }
        ag_set_threads(saved);
        CHECK(memcmp(C[0], C[1], sizeof(ag_real) * (size_t)M * N) == 0,
              "tb=%d %dx%dx%d, A packed: 1 and 2 threads differ in bits", tb, M, N, K);
        int same = 1;
        for (int s = 0; s < 3; s++) {
            const int rows = M - starts[s] < 12 ? M - starts[s] : 12;
            ag_kern->gemm(0, tb, rows, N, K, A + (size_t)starts[s] * K, K, B, ldb, 0, part, N);
            same &= memcmp(part, C[0] + (size_t)starts[s] * N, sizeof(ag_real) * (size_t)rows * N) == 0;
        }
        CHECK(same, "tb=%d %dx%dx%d: rows of the product with A packed differ in bits from those rows alone",
              tb, M, N, K);
        free(A);
        free(B);
        free(part);
        free(C[0]);
        free(C[1]);
    }
}

/* Small products, where op(B) is small enough that A (and B, stored [K, N])
 * is read in place and only ragged panels are packed: every row count mod 12
 * (so every kernel height, in place or padded), column counts at and around
 * the half and full tile widths, A^T with few and many rows, one and two K
 * blocks, NaN padding beyond each leading dimension. */
static void test_small(void)
{
    static const int ms[] = {4, 8, 12, 16, 21, 24, 32, 46, 64, 65, 259};
    static const int ns[] = {15, 16, 32, 33, 64, 65};
    static const int ks[] = {16, 32, 65, 300};
    const int nm = (int)(sizeof ms / sizeof ms[0]), nn = (int)(sizeof ns / sizeof ns[0]),
              nk = (int)(sizeof ks / sizeof ks[0]);
    int n = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int a = 0; a < nm; a++)
                for (int b = 0; b < nn; b++)
                    for (int c = 0; c < nk; c++, n++)
                        one_case(ta, tb, ms[a], ns[b], ks[c], n % 3 == 0 ? 3 : 0, n % 2 ? 1 : 0,
                                 n % 5 == 0);
}

/* The sum for C[i][j] runs k = 0..K-1 in an order fixed by K alone, so the
 * columns of a wide product (op(B) too big to read in place: packed panels)
 * must equal, bit for bit, a narrow product over the same leading columns
 * (read in place), and likewise for the leading rows. */
static void test_paths_agree(void)
{
    const int M = 150, N = 1100, K = 300;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = ta ? M : K, ldb = tb ? K : N;
            ag_real *A = matrix(ta ? K : M, ta ? M : K, lda, 0);
            ag_real *B = matrix(tb ? N : K, tb ? K : N, ldb, 0);
            ag_real *wide = malloc(sizeof(ag_real) * (size_t)M * N);
            ag_real *part = malloc(sizeof(ag_real) * (size_t)M * N);
            ag_kern->gemm(ta, tb, M, N, K, A, lda, B, ldb, 0, wide, N);
            static const int widths[] = {16, 32, 40};
            for (int w = 0; w < 3; w++) {
                int n = widths[w], same = 1;
                ag_kern->gemm(ta, tb, M, n, K, A, lda, B, ldb, 0, part, n);
                for (int i = 0; i < M; i++)
                    same &= memcmp(wide + (size_t)i * N, part + (size_t)i * n,
                                   sizeof(ag_real) * n) == 0;
                CHECK(same, "ta=%d tb=%d: %dx%dx%d differs in bits from the first %d columns of "
                      "%dx%dx%d", ta, tb, M, n, K, n, M, N, K);
            }
            /* the first rows alone, as small products (one K block): 20 (a
             * panel of 12 and one of 8), 16 and 64 (their last 16 rows as
             * 8 + 8, where the wide product has 12 + 4) */
            static const int heights[] = {20, 16, 64};
            for (int h = 0; h < 3; h++) {
                const int m = heights[h];
                int same = 1;
                ag_kern->gemm(ta, tb, m, 48, K, A, lda, B, ldb, 0, part, 48);
                for (int i = 0; i < m; i++)
                    same &= memcmp(wide + (size_t)i * N, part + (size_t)i * 48, sizeof(ag_real) * 48) == 0;
                CHECK(same, "ta=%d tb=%d: %dx48x%d differs in bits from the same block of %dx%dx%d",
                      ta, tb, m, K, M, N, K);
            }
            free(A);
            free(B);
            free(wide);
            free(part);
        }
}

/* A C of at most 4 rows with A stored [M, K] (one token at a time, as the
 * key/value cache samples) takes its own path that reads B in place: right
 * on every size, padding never read (it is NaN), and with B stored [K, N]
 * each row the same bits as that row inside a taller product. */
static void test_few_rows(void)
{
    static const int Ns[] = {1, 17, 65, 130}, Ks[] = {1, 16, 17, 385, 1000};
    for (int M = 1; M <= 4; M++)
        for (int tb = 0; tb < 2; tb++)
            for (size_t n = 0; n < sizeof Ns / sizeof Ns[0]; n++)
                for (size_t k = 0; k < sizeof Ks / sizeof Ks[0]; k++) {
                    one_case(0, tb, M, Ns[n], Ks[k], 0, 0, 0);
                    one_case(0, tb, M, Ns[n], Ks[k], 3, 1, 0);
                    one_case(0, tb, M, Ns[n], Ks[k], 1, 0, 1);
                }
    const int M = 13, N = 70, K = 800;
    ag_real *A = matrix(M, K, K, 0), *B = matrix(K, N, N, 0);
    ag_real *tall = malloc(sizeof(ag_real) * M * N), *row = malloc(sizeof(ag_real) * N);
    ag_kern->gemm(0, 0, M, N, K, A, K, B, N, 0, tall, N);
    int same = 1;
    for (int i = 0; i < M; i++) {
        ag_kern->gemm(0, 0, 1, N, K, A + (size_t)i * K, K, B, N, 0, row, N);
        same &= memcmp(row, tall + (size_t)i * N, sizeof(ag_real) * N) == 0;
    }
    CHECK(same, "B stored [K, N]: a 1-row product differs in bits from that row of a %d-row product", M);
    free(A);
    free(B);
    free(tall);
    free(row);
}

static void test_k_zero_and_empty(void)
{
    ag_real A[4] = {1, 2, 3, 4}, B[4] = {5, 6, 7, 8};
    ag_real C[6] = {NAN, NAN, NAN, 1, 2, 3};
    ag_kern->gemm(0, 0, 2, 3, 0, A, 1, B, 3, 0, C, 3);
    int zero = 1;
    for (int i = 0; i < 6; i++) zero &= C[i] == 0;
    CHECK(zero, "K = 0, beta = 0 must zero C (NaN included)");

    ag_real D[6] = {1, 2, 3, 4, 5, 6};
    ag_kern->gemm(1, 1, 2, 3, 0, A, 2, B, 1, 1, D, 3);
    CHECK(D[0] == 1 && D[5] == 6, "K = 0, beta = 1 must leave C alone");

    ag_real E[2] = {7, 7};
    ag_kern->gemm(0, 0, 0, 2, 2, A, 2, B, 2, 0, E, 2);
    ag_kern->gemm(0, 0, 2, 0, 2, A, 2, B, 1, 0, E, 1);
    CHECK(E[0] == 7 && E[1] == 7, "an empty product must write nothing");

    /* 1x1x1 with beta 1: c = 5 + 2*3 */
    ag_real a = 2, b = 3, c = 5;
    ag_kern->gemm(0, 0, 1, 1, 1, &a, 1, &b, 1, 1, &c, 1);
    CHECK(c == 11, "1x1x1: got %g, want 11", (double)c);
}

/* Batched products, including broadcast operands (stride 0) and padded
 * leading dims; each item checked against the reference, and the whole
 * batch against one ag_gemm call per item (same arithmetic: bitwise). */
static void batched_case(int batch, int ta, int tb, int M, int N, int K, int bcast, ag_real beta)
{
    int lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N + 3;
    long sa = bcast == 1 ? 0 : (long)(ta ? K : M) * lda;
    long sb = bcast == 2 ? 0 : (long)(tb ? N : K) * ldb;
    long sc = (long)M * ldc + 7;
    ag_real *A = matrix(batch * (ta ? K : M), ta ? M : K, lda, 0);
    ag_real *B = matrix(batch * (tb ? N : K), tb ? K : N, ldb, 0);
    size_t clen = (size_t)sc * batch;
    ag_real *C0 = malloc(sizeof(ag_real) * clen), *C = malloc(sizeof(ag_real) * clen),
            *L = malloc(sizeof(ag_real) * clen);
    for (size_t i = 0; i < clen; i++) C0[i] = (ag_real)uniform();
    memcpy(C, C0, sizeof(ag_real) * clen);
    memcpy(L, C0, sizeof(ag_real) * clen);
    ag_kern->gemm_batched(batch, ta, tb, M, N, K, A, sa, lda, B, sb, ldb, beta, C, sc, ldc);
    for (int b = 0; b < batch; b++)
        ag_kern->gemm(ta, tb, M, N, K, A + b * sa, lda, B + b * sb, ldb, beta, L + b * sc, ldc);
    int bad = 0;
    for (int b = 0; b < batch && !bad; b++)
        bad += verify("batched", ta, tb, M, N, K, A + b * sa, lda, B + b * sb, ldb, beta,
                      C0 + b * sc, C + b * sc, ldc, 0);
    /* the gap between items (sc > M*ldc) must be untouched too */
    int gaps = 1;
    for (int b = 0; b < batch; b++)
        for (long t = (long)M * ldc; t < sc; t++) gaps &= C[b * sc + t] == C0[b * sc + t];
    CHECK(gaps, "batched %dx%dx%d: wrote between items", M, N, K);
    CHECK(memcmp(C, L, sizeof(ag_real) * clen) == 0,
          "batched %dx%dx%d ta=%d tb=%d bcast=%d differs from per-item ag_gemm", M, N, K, ta, tb,
          bcast);
    free(A);
    free(B);
    free(C0);
    free(C);
    free(L);
}

static void test_batched(void)
{
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            batched_case(12, ta, tb, 32, 32, 16, 0, 0);
            batched_case(7, ta, tb, 33, 17, 65, 1, 1);
            batched_case(5, ta, tb, 64, 64, 32, 2, 1);
            batched_case(3, ta, tb, 3, 5, 7, 0, 0);
            /* a tiny transformer's attention: T = 32, head size 16; T = 64, 32 */
            batched_case(64, ta, tb, 16, 32, 32, 0, 1);
            batched_case(64, ta, tb, 32, 16, 32, 0, 0);
            batched_case(48, ta, tb, 64, 32, 64, 0, 1);
            batched_case(3, ta, tb, 65, 65, 64, 2, 0);
            batched_case(5, ta, tb, 20, 33, 300, 1, 1);
        }
    batched_case(4, 0, 1, 130, 140, 150, 0, 0);
    batched_case(1, 1, 0, 200, 100, 300, 0, 1);
}

/* Each C element is summed by one thread in a K order fixed by K alone, so
 * 1 and 2 threads must agree bit for bit, batched or not.  M must be a
 * multiple of 3 (the batched call splits it into 3 items). */
static void thread_case(int M, int N, int K)
{
    const size_t len = (size_t)M * N;
    const int rows = M / 3;
    int saved = ag_get_threads();
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = ta ? M : K, ldb = tb ? K : N;
            long item_a = ta ? rows : (long)rows * lda;   /* 3 items of M/3 rows each */
            ag_real *A = matrix(ta ? K : M, ta ? M : K, lda, 0);
            ag_real *B = matrix(tb ? N : K, tb ? K : N, ldb, 0);
            ag_real *C[2], *D[2], *E[2];
            for (int t = 0; t < 2; t++) {
                C[t] = calloc(len, sizeof(ag_real));
                D[t] = calloc(len, sizeof(ag_real));
                E[t] = calloc(len, sizeof(ag_real));
                for (size_t i = 0; i < len; i++) D[t][i] = E[t][i] = (ag_real)(i % 7) - 3;
                check_set_threads(t + 1);
                ag_kern->gemm(ta, tb, M, N, K, A, lda, B, ldb, 0, C[t], N);
                ag_kern->gemm(ta, tb, M, N, K, A, lda, B, ldb, 1, E[t], N);   /* accumulating */
                ag_kern->gemm_batched(3, ta, tb, rows, N, K, A, item_a, lda, B, 0, ldb, 1, D[t],
                                (long)rows * N, N);
            }
            ag_set_threads(saved);
            CHECK(memcmp(C[0], C[1], sizeof(ag_real) * len) == 0,
                  "ta=%d tb=%d %dx%dx%d: ag_gemm with 1 and 2 threads differs in bits", ta, tb, M,
                  N, K);
            CHECK(memcmp(E[0], E[1], sizeof(ag_real) * len) == 0,
                  "ta=%d tb=%d %dx%dx%d: ag_gemm with beta 1, 1 and 2 threads differs in bits", ta, tb, M,
                  N, K);
            CHECK(memcmp(D[0], D[1], sizeof(ag_real) * len) == 0,
                  "ta=%d tb=%d %dx%dx%d: ag_gemm_batched with 1 and 2 threads differs in bits", ta,
                  tb, M, N, K);
            verify("threads", ta, tb, M, N, K, A, lda, B, ldb, 0, C[1], C[1], N, 0);
            free(A);
            free(B);
            for (int t = 0; t < 2; t++) {
                free(C[t]);
                free(D[t]);
                free(E[t]);
            }
        }
}

static void test_threads(void)
{
    thread_case(333, 517, 290);   /* A [M, K] read in place, op(B) packed once and shared */
    thread_case(12, 4100, 1030);  /* op(B) too big to share (> 4M elements): packed per unit */
    thread_case(513, 65, 64);     /* small op(B), packed once and shared by the threads */
    thread_case(240, 64, 512);    /* small C, two K blocks: split along K with 2 threads */
    thread_case(66, 65, 1000);    /* the same with three K blocks and ragged tiles */
    thread_case(384, 64, 64);     /* B stored [K, N] read in place: nothing to pack */
    thread_case(3, 4100, 1030);   /* 3 rows (and items of 1 row): columns split between threads */
    thread_case(240, 300, 1024);  /* A's rows 4 KB apart: packed by each unit of rows, op(B) shared */
}

/* ---- strides past INT_MAX elements --------------------------------------- */

/* rows x cols inside rows x ld (cols 0: the caller fills it), mapped without
 * reserving memory: only the pages the rows touch are ever backed, so a
 * stride of hundreds of millions of elements costs a few pages a row. */
static ag_real *sparse_matrix(int rows, int cols, long ld, size_t *bytes)
{
    *bytes = sizeof(ag_real) * ((size_t)(rows - 1) * (size_t)ld + (size_t)(cols > 0 ? cols : ld));
    void *p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    ag_real *m = p;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            m[(size_t)i * (size_t)ld + j] = (ag_real)(int)floor(uniform() * 3);   /* -3..2: exact sums */
    return m;
}

/* The leading dimension that puts the second half of `rows` rows past
 * element INT_MAX (every row but the first two with 3 rows): row index
 * times ld computed in int would wrap there, also at the start of a tile. */
static int huge_ld(int rows)
{
    const double ld = 2147483648.0 / (rows / 2 > 1 ? rows / 2 : 1) + 1;
    return ld > INT_MAX ? INT_MAX : (int)ld;
}

/* One product whose operands' later rows lie past element INT_MAX (each
 * stored matrix's stride from huge_ld).  Integer inputs, so C must be
 * exact; C starts as NaN, which beta 0 must ignore. */
static void huge_stride_case(int ta, int tb, int M, int N, int K)
{
    const int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    const int lda = huge_ld(ar), ldb = huge_ld(br), ldc = huge_ld(M);
    size_t na, nb, nc;
    ag_real *A = sparse_matrix(ar, ac, lda, &na), *B = sparse_matrix(br, bc, ldb, &nb);
    ag_real *C = sparse_matrix(M, N, ldc, &nc);
    if (!A || !B || !C) {
        CHECK(0, "huge strides: cannot map %zu + %zu + %zu bytes of address space", na, nb, nc);
    } else {
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * ldc + j] = (ag_real)NAN;
        ag_kern->gemm(ta, tb, M, N, K, A, lda, B, ldb, 0, C, ldc);
        int bad = 0, bi = 0, bj = 0;
        double got = 0, want = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double ref = 0;
                for (int k = 0; k < K; k++)
                    ref += elem_a(A, lda, ta, i, k) * elem_b(B, ldb, tb, k, j);
                const double c = C[(size_t)i * ldc + j];
                if (!(c == ref) && bad++ == 0) {
                    bi = i, bj = j, got = c, want = ref;
                }
            }
        CHECK(bad == 0, "huge strides ta=%d tb=%d %dx%dx%d (lda %d, ldb %d, ldc %d): %d bad, first C[%d][%d] = %g, "
              "want %g", ta, tb, M, N, K, lda, ldb, ldc, bad, bi, bj, got, want);
    }
    if (A) munmap(A, na);
    if (B) munmap(B, nb);
    if (C) munmap(C, nc);
}

/* A batch of three whose items lie 2^30 + 17 elements apart, so the third
 * starts past element INT_MAX; each item's rows are dense.  Items checked
 * exactly against the double sum, as above. */
static void huge_batch_stride_case(int ta, int tb, int M, int N, int K)
{
    enum { BATCH = 3 };
    const long stride = (1L << 30) + 17;
    const int lda = ta ? M : K, ldb = tb ? K : N, ldc = N;
    size_t na, nb, nc;
    /* each operand: BATCH "rows" of length stride, item b's data at row b */
    ag_real *A = sparse_matrix(BATCH, 0, stride, &na), *B = sparse_matrix(BATCH, 0, stride, &nb);
    ag_real *C = sparse_matrix(BATCH, 0, stride, &nc);
    if (!A || !B || !C) {
        CHECK(0, "huge batch strides: cannot map address space");
    } else {
        const size_t a_len = (size_t)(ta ? K : M) * lda, b_len = (size_t)(tb ? N : K) * ldb;
        for (int b = 0; b < BATCH; b++) {
            for (size_t i = 0; i < a_len; i++) A[b * stride + (long)i] = (ag_real)(int)floor(uniform() * 3);
            for (size_t i = 0; i < b_len; i++) B[b * stride + (long)i] = (ag_real)(int)floor(uniform() * 3);
            for (int i = 0; i < M * N; i++) C[b * stride + i] = (ag_real)NAN;
        }
        ag_kern->gemm_batched(BATCH, ta, tb, M, N, K, A, stride, lda, B, stride, ldb, 0, C, stride, ldc);
        int bad = 0;
        for (int b = 0; b < BATCH; b++)
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double ref = 0;
                    for (int k = 0; k < K; k++)
                        ref += elem_a(A + b * stride, lda, ta, i, k) * elem_b(B + b * stride, ldb, tb, k, j);
                    bad += !((double)C[b * stride + (long)i * ldc + j] == ref);
                }
        CHECK(bad == 0, "huge batch strides ta=%d tb=%d %dx%dx%d: %d elements wrong", ta, tb, M, N, K, bad);
    }
    if (A) munmap(A, na);
    if (B) munmap(B, nb);
    if (C) munmap(C, nc);
}

/* A tall product on 2 threads: 5 million rows make about 6500 units of
 * 768 rows, and a unit's first row panel (panels x unit index) passes
 * INT_MAX in int long before the rows do.  Integer inputs: exact. */
static void test_tall_units(void)
{
    const int M = 5000000, N = 3, K = 2;
    ag_real *A = matrix(M, K, K, 1), *B = matrix(K, N, N, 1), *C = malloc(sizeof(ag_real) * (size_t)M * N);
    if (!A || !B || !C) {
        CHECK(0, "tall product: out of memory");
    } else {
        check_set_threads(2);
        ag_kern->gemm(0, 0, M, N, K, A, K, B, N, 0, C, N);
        int bad = 0, first = -1;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                const double ref = (double)A[(size_t)i * K] * B[j] + (double)A[(size_t)i * K + 1] * B[N + j];
                if (!(C[(size_t)i * N + j] == ref) && bad++ == 0) first = i;
            }
        CHECK(bad == 0, "%dx%dx%d on 2 threads: %d elements wrong, the first in row %d", M, N, K, bad, first);
    }
    free(A);
    free(B);
    free(C);
}

/* Every path (few rows, small products, blocks, threads) with leading
 * dimensions whose products with the row index pass INT_MAX: the kernels
 * take int sizes, and every offset must be computed wider. */
static void test_huge_strides(void)
{
    static const int shapes[][3] = {{3, 5, 7}, {4, 40, 33}, {17, 9, 20}, {40, 40, 40}, {130, 70, 90}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                huge_stride_case(ta, tb, shapes[s][0], shapes[s][1], shapes[s][2]);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            huge_batch_stride_case(ta, tb, 32, 32, 16);    /* the toy model's per-head products */
            huge_batch_stride_case(ta, tb, 3, 50, 20);     /* few rows */
        }
}

int main(void)
{
    test_k_zero_and_empty();
    test_sizes();
    test_blocking();
#ifndef AG_REFERENCE
    test_blocking_model();
#endif
    test_aliased_rows();
    test_packed_big_a();
    test_small();
    test_paths_agree();
    test_few_rows();
    test_batched();
    test_threads();
    test_huge_strides();
    test_tall_units();
    return check_done();
}
