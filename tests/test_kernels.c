/*
 * test_kernels.c - every fast kernel (src/kernels/) against its definition
 * (src/reference.c), on random and edge shapes, with 1 and 2 threads.
 *
 * Tolerances, and why.  The two implementations sum in different orders
 * (lanes, blocks, fused multiply-adds) and the fast ones use polynomial exp
 * and erf (float build: exp within 2 ulp, erf within 6e-7), so they agree
 * to rounding, not bit for bit.  Each check states its bound:
 *   - sums of n products (matrix multiply): |fast - ref| <= 2 n u sum|a b|
 *     per element, u the unit roundoff (2^-24 float, 2^-53 double): the
 *     classic bound for two different summation orders of the same terms;
 *   - row kernels (softmax, cross-entropy, layer norm, GELU):
 *     |fast - ref| <= TOL (1 + |ref|), TOL = 1e-5 in float (a few ulp of
 *     exp/erf plus the row's sums) and 1e-12 in double (libm everywhere,
 *     only the order of sums differs); sums over rows (layer norm's weight
 *     and bias gradients, column sums) TOL (1 + rows/64) (1 + |ref|);
 *   - optimizer steps: |fast - ref| <= TOL (1e-6 + |ref|) for parameters
 *     and moments (each element is a few operations, ordered differently);
 *   - attention: outputs and gradients are sums over keys of terms bounded
 *     by the largest value involved, so |fast - ref| <= ATOL_ATTN max|ref|
 *     over the tensor, ATOL_ATTN = 2e-5 in float, 1e-12 in double.
 * Beside the tolerance, the fast kernels must give bitwise the same result
 * with 1 and 2 threads (they promise it; training reproducibility rests on
 * it), and special values must match exactly: -inf scores, fully masked
 * rows (zeros, never NaN).
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels.h"
#include "kernels/fastmath.h"

#ifndef AG_REFERENCE

#ifdef AG_DOUBLE
#define TOL 1e-12
#define ATOL_ATTN 1e-12
#define UNIT_ROUNDOFF 1.1102230246251565e-16
#else
#define TOL 1e-5
#define ATOL_ATTN 2e-5
#define UNIT_ROUNDOFF 5.9604644775390625e-08
#endif

static ag_pcg32 rng;

static ag_real *random_buf(size_t n, double lo, double hi)
{
    ag_real *p = malloc((n ? n : 1) * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = (ag_real)(lo + (hi - lo) * ag_pcg32_uniform(&rng));
    return p;
}

static ag_real *copy_buf(const ag_real *src, size_t n)
{
    ag_real *p = malloc((n ? n : 1) * sizeof *p);
    memcpy(p, src, n * sizeof *p);
    return p;
}

/* max over i of |a - b| / (floor + |b|); NaN in either counts as infinitely
 * far unless both are NaN */
static double rel_diff_floor(const ag_real *a, const ag_real *b, size_t n, double floor)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i]))
            continue;
        if (a[i] == b[i])
            continue;               /* also equal infinities */
        double d = fabs((double)a[i] - b[i]) / (floor + fabs((double)b[i]));
        if (!(d <= worst))
            worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

/* the same relative to 1 + |b| */
static double rel_diff(const ag_real *a, const ag_real *b, size_t n) { return rel_diff_floor(a, b, n, 1); }

/* max |a - b| / (|scale| + |b| + 1e-6), element by element: b computed
 * from scale, so a difference is weighed against the larger of the two */
static double rel_diff_scaled(const ag_real *a, const ag_real *b, const ag_real *scale, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (a[i] == b[i] || (isnan(a[i]) && isnan(b[i])))
            continue;
        double d = fabs((double)a[i] - b[i]) / (fabs((double)scale[i]) + fabs((double)b[i]) + 1e-6);
        if (!(d <= worst))
            worst = isnan(d) ? INFINITY : d;
    }
    return worst;
}

static double max_abs(const ag_real *a, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs((double)a[i]) > m ? fabs((double)a[i]) : m;
    return m;
}

/* max |a - b| relative to the largest |b|; 0 when equal */
static double scaled_diff(const ag_real *a, const ag_real *b, size_t n)
{
    double worst = 0, scale = max_abs(b, n);
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= worst))
            worst = isnan(d) ? INFINITY : d;
    }
    return scale > 0 ? worst / scale : worst;
}

static int same_bits(const ag_real *a, const ag_real *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

/* ---- attention ---------------------------------------------------------- */

typedef struct {
    const char *label;
    int B, H, Tq, Tk, hd, causal, q_pos0;
    double dropout;
    int bf16;
} attn_case;

/* Packed [B,T,3d] self-attention layout when Tq == Tk and q_pos0 == 0
 * (as ag_attention calls it), else separate q [B,Tq,d], k and v [B,Tk,d]. */
static void check_attention(attn_case c)
{
    const int d = c.H * c.hd, packed = c.Tq == c.Tk && c.q_pos0 == 0;
    ag_attn a = { .B = c.B, .H = c.H, .Tq = c.Tq, .Tk = c.Tk, .hd = c.hd, .causal = c.causal, .q_pos0 = c.q_pos0,
                  .scale = (ag_real)(1 / sqrt((double)c.hd)), .dropout = (ag_real)c.dropout, .bf16 = c.bf16 };
    ag_pcg32_seed(&a.rng, 77, 9);
    size_t nq, nk;
    if (packed) {
        a.q_ld = a.k_ld = a.v_ld = 3L * d;
        a.q_bs = a.k_bs = a.v_bs = (long)c.Tq * 3 * d;
        nq = nk = (size_t)c.B * c.Tq * 3 * d;
    } else {
        a.q_ld = a.k_ld = a.v_ld = d;
        a.q_bs = (long)c.Tq * d;
        a.k_bs = a.v_bs = (long)c.Tk * d;
        nq = (size_t)c.B * c.Tq * d;
        nk = (size_t)c.B * c.Tk * d;
    }
    a.o_ld = d;
    a.o_bs = (long)c.Tq * d;
    const size_t no = (size_t)c.B * c.Tq * d, nl = (size_t)c.B * c.H * c.Tq;
    ag_real *qbuf = random_buf(nq, -2, 2), *kbuf = packed ? qbuf : random_buf(nk, -2, 2);
    ag_real *vbuf = packed ? qbuf : random_buf(nk, -2, 2);
#ifndef AG_DOUBLE
    if (c.bf16) {       /* in mixed precision the op hands the kernels rounded inputs */
        ag_kernels_reference.round_bf16(qbuf, qbuf, nq);
        if (!packed) {
            ag_kernels_reference.round_bf16(kbuf, kbuf, nk);
            ag_kernels_reference.round_bf16(vbuf, vbuf, nk);
        }
    }
#endif
    const ag_real *q = qbuf, *k = packed ? qbuf + d : kbuf, *v = packed ? qbuf + 2 * d : vbuf;
    ag_real *dout = random_buf(no, -1, 1);
    /* reference; fast on 1 thread, on 2 threads, and (when it would keep
     * weights for backward) on 1 thread without keeping them */
    ag_real *o[4], *lse[4], *g[4];
    const size_t ng = packed ? nq : nq + 2 * nk, nkeep = ag_kernels_fast.attention_keep(&a);
    CHECK(ag_kernels_reference.attention_keep(&a) == 0, "the reference keeps nothing");
    for (int run = 0; run < 4; run++) {
        const ag_kernels *kern = run ? &ag_kernels_fast : &ag_kernels_reference;
        check_set_threads(run == 2 ? 2 : 1);
        o[run] = malloc(no * sizeof(ag_real));
        lse[run] = malloc(nl * sizeof(ag_real));
        ag_real *keep = nkeep && (run == 1 || run == 2) ? random_buf(nkeep, -1, 1) : NULL;
        kern->attention(&a, q, k, v, o[run], lse[run], NULL, keep);
        /* backward into a fresh buffer (assign), with every gradient of one run side by side */
        g[run] = random_buf(ng, -1, 1);     /* garbage: assign must overwrite all of it */
        ag_real *dq = g[run], *dk = packed ? g[run] + d : g[run] + nq, *dv = packed ? g[run] + 2 * d : dk + nk;
        kern->attention_backward(&a, q, k, v, o[run], dout, lse[run], keep, dq, dk, dv, 1);
        free(keep);
    }
    check_set_threads(2);
    /* mixed precision rounds the weights (the fast kernel before
     * normalizing, by up to 2^-9 relative each) and the score gradients */
    const double bound = c.bf16 ? 2e-2 : ATOL_ATTN;
    double d_out = scaled_diff(o[1], o[0], no), d_lse = rel_diff(lse[1], lse[0], nl);
    double d_grad = scaled_diff(g[1], g[0], ng);
    CHECK(d_out <= bound && d_lse <= TOL * 10 && d_grad <= bound,
          "attention %s: fast vs reference: output %.3g, lse %.3g, gradients %.3g (bound %.1g)", c.label, d_out,
          d_lse, d_grad, bound);
    CHECK(same_bits(o[1], o[2], no) && same_bits(lse[1], lse[2], nl) && same_bits(g[1], g[2], ng),
          "attention %s: 1 and 2 threads differ", c.label);
    double d_keep = scaled_diff(g[3], g[0], ng);
    CHECK(same_bits(o[3], o[1], no) && d_keep <= bound,
          "attention %s: without kept weights: same output, gradients within %.3g of the reference", c.label, d_keep);
    /* a query that sees no key: output exactly 0, lse -inf, no NaN anywhere */
    int masked_ok = 1, finite = 1;
    for (int b = 0; b < c.B; b++)
        for (int h = 0; h < c.H; h++)
            for (int i = 0; i < c.Tq; i++) {
                int sees = !c.causal || i + c.q_pos0 >= 0;
                ag_real l = lse[1][((size_t)b * c.H + h) * c.Tq + i];
                if (!sees) {
                    masked_ok &= l == -INFINITY;
                    for (int e = 0; e < c.hd; e++)
                        masked_ok &= o[1][((size_t)b * c.Tq + i) * d + h * c.hd + e] == 0;
                }
            }
    for (size_t e = 0; e < no; e++)
        finite &= isfinite(o[1][e]);
    for (size_t e = 0; e < ng; e++)
        finite &= isfinite(g[1][e]);
    CHECK(masked_ok && finite, "attention %s: queries without keys give 0 and -inf (%d), nothing NaN (%d)",
          c.label, masked_ok, finite);
    for (int run = 0; run < 4; run++) {
        free(o[run]);
        free(lse[run]);
        free(g[run]);
    }
    free(qbuf);
    if (!packed) {
        free(kbuf);
        free(vbuf);
    }
    free(dout);
}

static void check_attention_cases(void)
{
    static const attn_case cases[] = {
        { "T=1", 2, 2, 1, 1, 8, 1, 0, 0, 0 },
        { "causal T=17 hd=4", 3, 2, 17, 17, 4, 1, 0, 0, 0 },
        { "non-causal T=9", 2, 3, 9, 9, 5, 0, 0, 0, 0 },
        { "causal T=63", 2, 2, 63, 63, 16, 1, 0, 0, 0 },
        { "causal T=64", 1, 3, 64, 64, 16, 1, 0, 0, 0 },
        { "causal T=65", 2, 2, 65, 65, 16, 1, 0, 0, 0 },
        { "causal T=130 hd=32", 2, 2, 130, 130, 32, 1, 0, 0, 0 },
        { "non-causal T=130", 1, 2, 130, 130, 8, 0, 0, 0, 0 },
        { "causal T=70 dropout 0.1", 3, 2, 70, 70, 16, 1, 0, 0.1, 0 },
        { "causal T=200 dropout 0.5", 1, 2, 200, 200, 8, 1, 0, 0.5, 0 },
        { "1 key, 5 queries after it", 2, 2, 5, 1, 8, 1, 0, 0, 0 },
        { "cache: 3 queries after 90 keys", 2, 2, 3, 93, 16, 1, 90, 0, 0 },
        { "first 2 queries see no key", 2, 2, 7, 7, 8, 1, -2, 0, 0 },
        { "no query sees a key", 1, 1, 4, 6, 8, 1, -5, 0, 0 },
        { "many items, parallel", 4, 6, 40, 40, 16, 1, 0, 0.2, 0 },
        { "non-causal T=9 dropout 0.3", 2, 3, 9, 9, 5, 0, 0, 0.3, 0 },
        { "causal T=64 dropout 0.25", 1, 3, 64, 64, 16, 1, 0, 0.25, 0 },
        { "cache: 3 queries after 90 keys, dropout 0.1", 2, 2, 3, 93, 16, 1, 90, 0.1, 0 },
        { "T=1 dropout 0.5", 3, 2, 1, 1, 8, 1, 0, 0.5, 0 },
        { "hd=1, T=17", 2, 3, 17, 17, 1, 1, 0, 0, 0 },
        { "hd=3, causal T=33", 2, 2, 33, 33, 3, 1, 0, 0, 0 },
        { "hd=17, non-causal T=3", 2, 1, 3, 3, 17, 0, 0, 0, 0 },
        { "hd=33, causal T=129", 1, 1, 129, 129, 33, 1, 0, 0, 0 },
        { "hd=3, non-causal T=67, dropout 0.2", 1, 2, 67, 67, 3, 0, 0, 0.2, 0 },
#ifndef AG_DOUBLE
        { "bf16, causal T=70 dropout 0.1", 3, 2, 70, 70, 16, 1, 0, 0.1, 1 },
        { "bf16, T=20", 2, 2, 20, 20, 8, 1, 0, 0, 1 },
#endif
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_attention(cases[i]);
}

/* Attention whose scores sit near +-1e4 (q . k / sqrt(hd) with q and k
 * sharing a first component of +-200), spread by the other components,
 * multiples of 1/8 in [-1, 1]: every score is then exact in float, so
 * what separates a kernel from attention computed in double from the same
 * inputs is its own arithmetic.  Forward, both kernels' outputs must be
 * within 16 u max|o| of it (u the unit roundoff): the weights of a query
 * sum to 1 up to rounding.  (The reference once took its weights as
 * exp(s - lse) with lse rounded to a float, half an ulp of 1e4 off, 2^-11:
 * every weight of a row that much too large or small, its output 2.6e-4
 * off where the fast kernel, dividing by its own sum, was 1e-7 off.)
 * Backward, both recompute the weights from the float lse, whose rounding
 * every weight of a row shares: each gradient is then within
 * 2 (max|lse| u + 16 u) max|g| of the double computation, the bound the
 * README states. */
static void check_attention_large_scores(double sign)
{
    enum { T = 70, H = 2, HD = 16, D = H * HD };
    const size_t n = (size_t)T * 3 * D, no = (size_t)T * D;
    ag_attn a = { .B = 1, .H = H, .Tq = T, .Tk = T, .hd = HD, .causal = 1, .scale = (ag_real)0.25,
                  .q_ld = 3 * D, .k_ld = 3 * D, .v_ld = 3 * D, .q_bs = (long)n, .k_bs = (long)n, .v_bs = (long)n,
                  .o_ld = D, .o_bs = (long)no };
    ag_real *x = malloc(n * sizeof *x), *dout = random_buf(no, -1, 1);
    for (size_t e = 0; e < n; e++)
        x[e] = (ag_real)(round(16 * ag_pcg32_uniform(&rng) - 8) / 8);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++) {
            x[(size_t)t * 3 * D + h * HD] = 200;                        /* q: 200 * 200 / 4 = 1e4 */
            x[(size_t)t * 3 * D + D + h * HD] = (ag_real)(200 * sign);  /* k */
        }
    const ag_real *q = x, *k = x + D, *v = x + 2 * D;
    /* the same attention in double */
    double *ot = calloc(no, sizeof *ot), *gt = calloc(n, sizeof *gt), lse_max = 0;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
            double s[T], m = -INFINITY, sum = 0, D_i = 0;
            const ag_real *qi = q + (size_t)i * 3 * D + h * HD, *doi = dout + (size_t)i * D + h * HD;
            for (int j = 0; j <= i; j++) {
                double dd = 0;
                for (int c = 0; c < HD; c++)
                    dd += (double)qi[c] * k[(size_t)j * 3 * D + h * HD + c];
                s[j] = 0.25 * dd;
                m = s[j] > m ? s[j] : m;
            }
            for (int j = 0; j <= i; j++)
                sum += exp(s[j] - m);
            lse_max = fmax(lse_max, fabs(m + log(sum)));
            double *oi = ot + (size_t)i * D + h * HD;
            for (int j = 0; j <= i; j++)
                for (int c = 0; c < HD; c++)
                    oi[c] += exp(s[j] - m) / sum * v[(size_t)j * 3 * D + h * HD + c];
            for (int c = 0; c < HD; c++)
                D_i += (double)doi[c] * oi[c];
            for (int j = 0; j <= i; j++) {
                double p = exp(s[j] - m) / sum, dp = 0;
                for (int c = 0; c < HD; c++)
                    dp += (double)doi[c] * v[(size_t)j * 3 * D + h * HD + c];
                const double ds = p * (dp - D_i) * 0.25;
                for (int c = 0; c < HD; c++) {
                    gt[(size_t)i * 3 * D + h * HD + c] += ds * k[(size_t)j * 3 * D + h * HD + c];
                    gt[(size_t)j * 3 * D + D + h * HD + c] += ds * qi[c];
                    gt[(size_t)j * 3 * D + 2 * D + h * HD + c] += p * doi[c];
                }
            }
        }
    double o_max = 0, g_max = 0;
    for (size_t e = 0; e < no; e++)
        o_max = fmax(o_max, fabs(ot[e]));
    for (size_t e = 0; e < n; e++)
        g_max = fmax(g_max, fabs(gt[e]));
    const double fwd_bound = 16 * UNIT_ROUNDOFF, bwd_bound = 2 * (lse_max * UNIT_ROUNDOFF + 16 * UNIT_ROUNDOFF);
    ag_real *o = malloc(no * sizeof *o), *lse = malloc((size_t)H * T * sizeof *lse), *g = malloc(n * sizeof *g);
    check_set_threads(1);
    for (int run = 0; run < 2; run++) {
        const ag_kernels *kern = run ? &ag_kernels_fast : &ag_kernels_reference;
        kern->attention(&a, q, k, v, o, lse, NULL, NULL);
        kern->attention_backward(&a, q, k, v, o, dout, lse, NULL, g, g + D, g + 2 * D, 1);
        double eo = 0, eg = 0;
        for (size_t e = 0; e < no; e++)
            eo = fmax(eo, fabs(o[e] - ot[e]));
        for (size_t e = 0; e < n; e++)
            eg = fmax(eg, fabs(g[e] - gt[e]));
        CHECK(eo <= fwd_bound * o_max, "attention, scores near %g, %s: output %.3g from double's (bound %.3g)",
              sign * 1e4, kern->name, eo, fwd_bound * o_max);
        CHECK(eg <= bwd_bound * g_max, "attention, scores near %g, %s: gradients %.3g from double's (bound %.3g)",
              sign * 1e4, kern->name, eg, bwd_bound * g_max);
    }
    check_set_threads(2);
    free(x), free(dout), free(ot), free(gt), free(o), free(lse), free(g);
}

/* ---- matrix multiply ---------------------------------------------------- */

/* |fast - ref| <= 2 K u sum_k |a_ik b_kj| per element (plus a tiny absolute
 * slack for the beta C term) */
static void check_gemm(int ta, int tb, int M, int N, int K, double beta)
{
    int lda = (ta ? M : K) + 1, ldb = (tb ? K : N) + 2, ldc = N + 3;
    ag_real *A = random_buf((size_t)(ta ? K : M) * lda, -1, 1), *B = random_buf((size_t)(tb ? N : K) * ldb, -1, 1);
    ag_real *C0 = random_buf((size_t)M * ldc, -1, 1), *C[3];
    for (int run = 0; run < 3; run++) {
        C[run] = copy_buf(C0, (size_t)M * ldc);
        check_set_threads(run == 2 ? 2 : 1);
        (run ? &ag_kernels_fast : &ag_kernels_reference)
            ->gemm(ta, tb, M, N, K, A, lda, B, ldb, (ag_real)beta, C[run], ldc);
    }
    int within = 1;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double mag = fabs(beta * C0[(long)i * ldc + j]);
            for (int k = 0; k < K; k++)
                mag += fabs((double)(ta ? A[(long)k * lda + i] : A[(long)i * lda + k]) *
                            (tb ? B[(long)j * ldb + k] : B[(long)k * ldb + j]));
            double d = fabs((double)C[1][(long)i * ldc + j] - C[0][(long)i * ldc + j]);
            within &= d <= 2.0 * (K + 1) * UNIT_ROUNDOFF * mag + 1e-30;
        }
    CHECK(within, "gemm %s%s %dx%dx%d beta %g: fast vs reference beyond 2 K u sum|a b|", ta ? "T" : "N",
          tb ? "T" : "N", M, N, K, beta);
    CHECK(same_bits(C[1], C[2], (size_t)M * ldc), "gemm %dx%dx%d: 1 and 2 threads differ", M, N, K);
    for (int run = 0; run < 3; run++)
        free(C[run]);
    free(A);
    free(B);
    free(C0);
}

static void check_gemm_cases(void)
{
    static const int sizes[][3] = { { 1, 1, 1 }, { 7, 5, 3 }, { 13, 33, 17 }, { 64, 48, 70 }, { 130, 97, 385 },
                                    { 250, 260, 129 } };
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (int t = 0; t < 4; t++)
            check_gemm(t & 1, t >> 1, sizes[s][0], sizes[s][1], sizes[s][2], t == 3 ? 1 : 0);
    /* a beta other than 0 and 1 (the engine passes only those, but the
     * kernel's definition is C = beta C + op(A) op(B) for any beta) */
    check_gemm(0, 0, 13, 33, 17, 0.5);
    check_gemm(1, 1, 64, 48, 70, -0.75);
    /* batched: each item as the single product */
    enum { BATCH = 5, M = 9, N = 11, K = 13 };
    ag_real *A = random_buf(BATCH * M * K, -1, 1), *B = random_buf(K * N, -1, 1), *C[2];
    for (int run = 0; run < 2; run++) {
        C[run] = calloc(BATCH * M * N, sizeof(ag_real));
        (run ? &ag_kernels_fast : &ag_kernels_reference)
            ->gemm_batched(BATCH, 0, 0, M, N, K, A, M * K, K, B, 0, N, 0, C[run], M * N, N);
    }
    CHECK(rel_diff(C[1], C[0], BATCH * M * N) <= 2.0 * K * UNIT_ROUNDOFF * 4, "batched gemm, B broadcast");
    free(A);
    free(B);
    free(C[0]);
    free(C[1]);
}

/* ---- row kernels -------------------------------------------------------- */

/* x with some -inf entries and, when masked_rows, a few rows of all -inf */
static ag_real *scores(size_t rows, size_t n, int masked_rows)
{
    ag_real *x = random_buf(rows * n, -8, 8);
    for (size_t i = 0; i < rows * n; i++)
        if (ag_pcg32_below(&rng, 5) == 0)
            x[i] = -INFINITY;
    for (size_t r = 0; masked_rows && r < rows; r += 7)
        for (size_t k = 0; k < n; k++)
            x[r * n + k] = -INFINITY;
    return x;
}

/* softmax of x [outer, n, inner] (x freed here) */
static void check_softmax_of(ag_real *x, size_t outer, size_t n, size_t inner, int log_out);

static void check_softmax(size_t outer, size_t n, size_t inner, int log_out)
{
    ag_real *x = scores(outer * inner, n, 1);
    /* scores() masks n consecutive entries; along a middle dim a row is n
     * entries `inner` apart: mask one such row whole (the last of item 0) */
    for (size_t k = 0; inner > 1 && k < n; k++)
        x[k * inner + inner - 1] = -INFINITY;
    check_softmax_of(x, outer, n, inner, log_out);
}

/* Edge rows, contiguous: logits near +1e4 and -1e4 (row r offset by
 * (-1)^r 1e4), and every third row all -inf but one entry. */
static void check_softmax_edges(size_t rows, size_t n, int log_out)
{
    ag_real *x = random_buf(rows * n, -8, 8);
    for (size_t r = 0; r < rows; r++)
        for (size_t k = 0; k < n; k++) {
            if (r % 3 == 2)
                x[r * n + k] = k == (r * 5) % n ? x[r * n + k] : -INFINITY;
            else
                x[r * n + k] += (ag_real)(r % 2 ? -1e4 : 1e4);
        }
    check_softmax_of(x, rows, n, 1, log_out);
}

static void check_softmax_of(ag_real *x, size_t outer, size_t n, size_t inner, int log_out)
{
    const size_t size = outer * n * inner;
    ag_real *dy = random_buf(size, -1, 1), *y[3], *dx[3];
    for (int run = 0; run < 3; run++) {
        const ag_kernels *k = run ? &ag_kernels_fast : &ag_kernels_reference;
        check_set_threads(run == 2 ? 2 : 1);
        y[run] = malloc(size * sizeof(ag_real));
        k->softmax(x, y[run], outer, n, inner, log_out);
        dx[run] = copy_buf(dy, size);              /* backward adds: start from the same values */
        k->softmax_backward(y[run], dy, dx[run], outer, n, inner, log_out);
    }
    CHECK(rel_diff(y[1], y[0], size) <= TOL && rel_diff(dx[1], dx[0], size) <= TOL,
          "%ssoftmax [%zu,%zu,%zu]: fast vs reference %.3g, backward %.3g", log_out ? "log_" : "", outer, n, inner,
          rel_diff(y[1], y[0], size), rel_diff(dx[1], dx[0], size));
    CHECK(same_bits(y[1], y[2], size) && same_bits(dx[1], dx[2], size), "%ssoftmax [%zu,%zu,%zu]: threads differ",
          log_out ? "log_" : "", outer, n, inner);
    int exact = 1;   /* masked entries: exactly 0 (or -inf), gradient exactly unchanged */
    for (size_t i = 0; i < size; i++)
        if (x[i] == -INFINITY)
            exact &= y[1][i] == (log_out ? -INFINITY : 0) && dx[1][i] == dy[i];
    CHECK(exact, "%ssoftmax: -inf inputs give %s and pass no gradient", log_out ? "log_" : "", log_out ? "-inf" : "0");
    for (int run = 0; run < 3; run++) {
        free(y[run]);
        free(dx[run]);
    }
    free(x);
    free(dy);
}

static void check_cross_entropy_of(ag_real *x, int32_t *t, size_t rows, int V);

static void check_cross_entropy(size_t rows, int V)
{
    ag_real *x = scores(rows, (size_t)V, 1);   /* -inf logits, every 7th row all -inf */
    int32_t *t = malloc(rows * sizeof *t);
    for (size_t r = 0; r < rows; r++)
        t[r] = r % 5 == 4 ? -1 : (int32_t)ag_pcg32_below(&rng, (uint32_t)V);   /* some rows ignored */
    check_cross_entropy_of(x, t, rows, V);
}

/* Extreme logits: rows spread over +-1e4 (softmax one-hot to the last
 * bit, losses from 0 to 2e4), rows offset by +-1e4, and rows whose target
 * logit alone is finite.  No row is all -inf: the losses are finite. */
static void check_cross_entropy_extremes(size_t rows, int V)
{
    ag_real *x = random_buf(rows * (size_t)V, -1e4, 1e4);
    int32_t *t = malloc(rows * sizeof *t);
    for (size_t r = 0; r < rows; r++) {
        t[r] = r % 7 == 6 ? -1 : (int32_t)ag_pcg32_below(&rng, (uint32_t)V);
        for (int k = 0; k < V; k++) {
            ag_real *e = &x[r * V + k];
            if (r % 4 == 1)
                *e = *e / 1e3f + (ag_real)(r % 8 == 1 ? 1e4 : -1e4);
            else if (r % 4 == 2 && t[r] >= 0 && k != t[r])
                *e = -INFINITY;
        }
    }
    check_cross_entropy_of(x, t, rows, V);
}

static void check_cross_entropy_of(ag_real *x, int32_t *t, size_t rows, int V)
{
    ag_real *p[2], *g[2];
    double *loss[2];
    for (int run = 0; run < 2; run++) {
        const ag_kernels *k = run ? &ag_kernels_fast : &ag_kernels_reference;
        p[run] = malloc(rows * V * sizeof(ag_real));
        loss[run] = malloc(rows * sizeof(double));
        g[run] = random_buf(rows * V, -1, 1);
        k->cross_entropy(x, t, rows, V, p[run], loss[run]);
        k->cross_entropy_backward(p[run], t, rows, V, (ag_real)0.37, g[run], 1);
    }
    double dl = 0;
    for (size_t r = 0; r < rows; r++)
        dl = fmax(dl, fabs(loss[1][r] - loss[0][r]) / (1 + fabs(loss[0][r])));
    CHECK(dl <= TOL && rel_diff(p[1], p[0], rows * V) <= TOL && rel_diff(g[1], g[0], rows * V) <= TOL,
          "cross_entropy [%zu,%d]: fast vs reference: loss %.3g, prob %.3g, gradient %.3g", rows, V, dl,
          rel_diff(p[1], p[0], rows * V), rel_diff(g[1], g[0], rows * V));
    for (int run = 0; run < 2; run++) {
        free(p[run]);
        free(g[run]);
        free(loss[run]);
    }
    free(x);
    free(t);
}

/* A row length within 15 of INT_MAX: the fast backward's pass over the
 * parameters' gradients, in blocks of 16 columns, ended its last block at
 * 16 x 2^27 = 2^31 in int (signed overflow, which make test-asan's UBSan
 * stops at).  No rows: nothing is read or written, the blocks are still
 * laid out. */
static void check_layer_norm_wide_rows(void)
{
    ag_real dw[4] = { 1, 2, 3, 4 }, db[4] = { 5, 6, 7, 8 }, none[1] = { 0 };
    ag_kernels_fast.layer_norm_backward(none, none, none, none, none, 0, INT_MAX, NULL, 1, dw, db);
    CHECK(dw[0] == 1 && dw[3] == 4 && db[0] == 5 && db[3] == 8,
          "layer_norm backward of 0 rows of %d wrote the parameters' gradients", INT_MAX);
}

/* layer norm of x [rows,D] and its backward from dy (NULL: random); both freed here */
static void check_layer_norm_of(ag_real *x, ag_real *dy, size_t rows, int D, int affine);

static void check_layer_norm(size_t rows, int D, int affine)
{
    check_layer_norm_of(random_buf(rows * D, -3, 5), NULL, rows, D, affine);
}

#ifndef AG_DOUBLE
/* Constant rows, each its own value (small, large, of every sign, and
 * ones whose multiples round): their variance is 0, so xhat is 0 exactly
 * and y is the bias, however the row's sums are ordered; mean and 1/sqrt(eps)
 * must hold that. */
static void check_layer_norm_constant_rows(size_t rows, int D)
{
    static const double values[] = { 0.1, 1000.1, -3.7e4, 1e-3, 7, -0.3, 12345.678, 2.5e6 };
    ag_real *x = malloc(rows * D * sizeof *x);
    for (size_t r = 0; r < rows; r++)
        for (int k = 0; k < D; k++)
            x[r * D + k] = (ag_real)values[r % (sizeof values / sizeof values[0])];
    check_layer_norm_of(x, NULL, rows, D, 1);
}

/* Rows of values up to 1e30 (spread so: each a different power of ten):
 * their deviations from the mean square past the largest float, which
 * the reference squares and sums in double (a float sum of the squares
 * overflowed: rstd 0 and y the bias, where xhat is of order 1). */
static void check_layer_norm_huge_rows(size_t rows, int D)
{
    ag_real *x = random_buf(rows * D, -1, 1);
    for (size_t r = 0; r < rows; r++)
        for (int k = 0; k < D; k++)
            x[r * D + k] *= (ag_real)pow(10.0, 20 + (double)(r % 11));
    check_layer_norm_of(x, NULL, rows, D, 1);
}

/* Rows of nearly one value (spread 1e-3: rstd near its cap 1/sqrt(eps),
 * 316) and a gradient nearly constant along each row: dx is rstd times
 * the small difference of g = dy w and its row mean, so the mean must be
 * summed as the reference sums it (float lane sums were 7e-5 away). */
static void check_layer_norm_narrow_rows(size_t rows, int D)
{
    ag_real *x = random_buf(rows * D, 0, 1e-3), *dy = random_buf(rows * D, 0, 1e-4);
    for (size_t r = 0; r < rows; r++)
        for (int k = 0; k < D; k++) {
            x[r * D + k] += (ag_real)(r % 2 ? 1 : 100);
            dy[r * D + k] = r % 3 ? dy[r * D + k] + (ag_real)0.7 : (ag_real)0.7;
        }
    check_layer_norm_of(x, dy, rows, D, 0);
}
#endif

static void check_layer_norm_of(ag_real *x, ag_real *dy, size_t rows, int D, int affine)
{
    const size_t size = rows * D;
    ag_real *w = random_buf(D, 0.5, 1.5), *b = random_buf(D, -1, 1);
    ag_real *y[3], *mean[3], *rstd[3], *dx[3], *dw[3], *db[3];
    if (!dy)
        dy = random_buf(size, -1, 1);
    for (int run = 0; run < 3; run++) {
        const ag_kernels *k = run ? &ag_kernels_fast : &ag_kernels_reference;
        check_set_threads(run == 2 ? 2 : 1);
        y[run] = malloc(size * sizeof(ag_real));
        mean[run] = malloc(rows * sizeof(ag_real));
        rstd[run] = malloc(rows * sizeof(ag_real));
        dx[run] = random_buf(size, -1, 1);          /* assign: overwritten */
        dw[run] = calloc(D, sizeof(ag_real));
        db[run] = calloc(D, sizeof(ag_real));
        k->layer_norm(x, affine ? w : NULL, affine ? b : NULL, rows, D, (ag_real)1e-5, y[run], mean[run], rstd[run]);
        k->layer_norm_backward(x, affine ? w : NULL, mean[run], rstd[run], dy, rows, D, dx[run], 1, dw[run], db[run]);
    }
    double worst = fmax(fmax(rel_diff(y[1], y[0], size), rel_diff(dx[1], dx[0], size)),
                        fmax(rel_diff(dw[1], dw[0], D), rel_diff(db[1], db[0], D)));
    /* dw and db sum over the rows: relative to (1 + |sum|) they carry the rows' rounding */
    CHECK(worst <= TOL * (1 + rows / 64.0), "layer_norm [%zu,%d]%s: fast vs reference %.3g", rows, D,
          affine ? "" : " (no weight, no bias)", worst);
    /* one thread sums dw and db in the row pass, two in a pass of their own:
     * the same order per column, the same bits */
    CHECK(same_bits(y[1], y[2], size) && same_bits(dx[1], dx[2], size) && same_bits(dw[1], dw[2], D) &&
              same_bits(db[1], db[2], D),
          "layer_norm [%zu,%d]: threads differ", rows, D);
    for (int run = 0; run < 3; run++) {
        free(y[run]);
        free(mean[run]);
        free(rstd[run]);
        free(dx[run]);
        free(dw[run]);
        free(db[run]);
    }
    free(x);
    free(w);
    free(b);
    free(dy);
}

/* GELU over rows x cols, with a bias and its gradient (bias 1), a bias
 * without (2: a bias that is no parameter), or none; the backward adds
 * into dx, or (assign) stores */
static void check_gelu_of(ag_real *x, size_t rows, size_t cols, int bias, int assign);

static void check_gelu(size_t rows, size_t cols, int bias, int assign)
{
    check_gelu_of(random_buf(rows * cols, -9, 9), rows, cols, bias, assign);
}

/* Large |x|: gelu(x) is x (derivative 1) far right and 0 (derivative 0)
 * far left, with nothing NaN or infinite on the way, up to the largest
 * finite values (x^2 overflows there). */
static void check_gelu_large(size_t rows, size_t cols, int bias)
{
    static const double values[] = { 6, -6, 13.5, -13.5, 30, -30, 1e4, -1e4, 1e30, -1e30, 3e38, -3e38 };
    const size_t n = rows * cols, nv = sizeof values / sizeof values[0];
    ag_real *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (ag_real)values[i % nv] * (ag_real)(1 + ag_pcg32_uniform(&rng) / 64);
    check_gelu_of(x, rows, cols, bias, 1);
}

static void check_gelu_of(ag_real *x, size_t rows, size_t cols, int bias, int assign)
{
    const size_t n = rows * cols;
    ag_real *dy = random_buf(n, -1, 1), *b = bias ? random_buf(cols, -1, 1) : NULL;
    ag_real *db0 = random_buf(cols, -1, 1), *y[3], *dx[3], *db[3];
    for (int run = 0; run < 3; run++) {
        const ag_kernels *k = run ? &ag_kernels_fast : &ag_kernels_reference;
        check_set_threads(run == 2 ? 2 : 1);
        y[run] = malloc(n * sizeof(ag_real));
        dx[run] = copy_buf(dy, n);
        db[run] = copy_buf(db0, cols);
        k->gelu(x, b, rows, cols, y[run], NULL);
        k->gelu_backward(x, b, NULL, dy, rows, cols, dx[run], assign, bias == 1 ? db[run] : NULL);
    }
    CHECK(rel_diff(y[1], y[0], n) <= TOL && rel_diff(dx[1], dx[0], n) <= TOL, "gelu %zux%zu: %.3g, backward %.3g",
          rows, cols, rel_diff(y[1], y[0], n), rel_diff(dx[1], dx[0], n));
    CHECK(rel_diff(db[1], db[0], cols) <= TOL * (1 + rows / 64.0), "gelu %zux%zu: bias gradient %.3g", rows, cols,
          rel_diff(db[1], db[0], cols));
    CHECK(same_bits(y[1], y[2], n) && same_bits(dx[1], dx[2], n) && same_bits(db[1], db[2], cols),
          "gelu %zux%zu: threads differ", rows, cols);
    if (ag_kernels_fast.gelu_keep_in_x()) {
        /* gelu' kept over x (as ag_linear_gelu passes it), and in a buffer
         * of its own: the same y, and the backward from the kept values
         * the same bits as the one that computes them again */
        for (int own = 0; own < 2; own++) {
            ag_real *xk = copy_buf(x, n), *other = own ? malloc(n * sizeof(ag_real)) : NULL;
            ag_real *yk = malloc(n * sizeof(ag_real)), *dxk = copy_buf(dy, n), *dbk = copy_buf(db0, cols);
            ag_real *keep = own ? other : xk;
            check_set_threads(own ? 1 : 2);
            ag_kernels_fast.gelu(xk, b, rows, cols, yk, keep);
            ag_kernels_fast.gelu_backward(own ? xk : NULL, b, keep, dy, rows, cols, dxk, assign, bias == 1 ? dbk : NULL);
            CHECK(same_bits(yk, y[1], n) && same_bits(dxk, dx[1], n) && same_bits(dbk, db[1], cols),
                  "gelu %zux%zu: with gelu' kept %s, other bits", rows, cols, own ? "in its own buffer" : "over x");
            CHECK(own || !same_bits(xk, x, n), "gelu %zux%zu: nothing was kept over x", rows, cols);
            free(xk);
            free(other);
            free(yk);
            free(dxk);
            free(dbk);
        }
    }
    if (bias == 1) {
        /* with the bias and its gradient in one pass, the same bits as the
         * unfused ops: the bias added by its own pass, GELU's backward
         * stored, then its column sums */
        ag_real *h = copy_buf(x, n), *yu = malloc(n * sizeof(ag_real)), *dh = malloc(n * sizeof(ag_real));
        ag_real *dbu = copy_buf(db0, cols);
        for (size_t i = 0; i < n; i++)
            h[i] += b[i % cols];
        ag_kernels_fast.gelu(h, NULL, 1, n, yu, NULL);
        ag_kernels_fast.gelu_backward(h, NULL, NULL, dy, 1, n, dh, 1, NULL);
        ag_kernels_fast.column_sums(dh, rows, cols, dbu);
        CHECK(same_bits(yu, y[1], n), "gelu %zux%zu: with the bias fused, other bits than bias + gelu", rows, cols);
        for (size_t i = 0; i < n && !assign; i++)
            dh[i] += dy[i];       /* backward above added to dx = dy */
        CHECK(same_bits(dh, dx[1], n) && same_bits(dbu, db[1], cols),
              "gelu %zux%zu: fused backward, other bits than gelu_backward + column_sums", rows, cols);
        free(h);
        free(yu);
        free(dh);
        free(dbu);
    }
    for (int run = 0; run < 3; run++) {
        free(y[run]);
        free(dx[run]);
        free(db[run]);
    }
    free(x);
    free(dy);
    free(b);
    free(db0);
}

/* ---- optimizer steps and reductions ------------------------------------- */

/* The fast sum of squares of g[0..n) against the reference's, and the same
 * bits on 1 and 2 threads. */
static void sum_squares_matches(const ag_real *g, size_t n)
{
    check_set_threads(1);
    double ss[3] = { ag_kernels_reference.sum_squares(g, n), ag_kernels_fast.sum_squares(g, n) };
    check_set_threads(2);
    ss[2] = ag_kernels_fast.sum_squares(g, n);
    CHECK(fabs(ss[1] - ss[0]) <= 1e-12 * ss[0], "sum_squares n=%zu: %.17g vs %.17g", n, ss[1], ss[0]);
    CHECK(memcmp(&ss[1], &ss[2], sizeof ss[1]) == 0, "sum_squares n=%zu: threads differ (%.17g, %.17g)", n, ss[1],
          ss[2]);
}

static void check_updates(size_t n)
{
    ag_real *p0 = random_buf(n, -1, 1), *g = random_buf(n, -1, 1), *m0 = random_buf(n, -0.1, 0.1);
    ag_real *v0 = random_buf(n, 0, 0.01), *p[3], *m[3], *v[3];
    for (int variant = 0; variant < 4; variant++) {
        for (int run = 0; run < 3; run++) {
            const ag_kernels *k = run ? &ag_kernels_fast : &ag_kernels_reference;
            check_set_threads(run == 2 ? 2 : 1);
            p[run] = copy_buf(p0, n);
            m[run] = copy_buf(m0, n);
            v[run] = copy_buf(v0, n);
            if (variant < 3) {          /* SGD: first step, later step, no momentum */
                k->sgd(p[run], g, m[run], n, (ag_real)0.1, variant == 2 ? 0 : (ag_real)0.9, (ag_real)0.01,
                       variant == 0);
            } else {
                ag_adamw_args a = { 3e-3, 0.9, 0.999, 1e-8, 0.1, 7 };
                k->adamw(p[run], g, m[run], v[run], n, &a);
            }
        }
        /* The moments relative to themselves (they are small); a weight
         * relative to its value before the step as well as after: a step
         * that takes a weight to near zero leaves it an error of a few ulp
         * of the terms that cancelled (a fused or unfused multiply-add), so
         * relative to the result alone it passed or failed by the draw. */
        double d = fmax(rel_diff_scaled(p[1], p[0], p0, n),
                        fmax(rel_diff_floor(m[1], m[0], n, 1e-6), rel_diff_floor(v[1], v[0], n, 1e-6)));
        CHECK(d <= TOL, "%s n=%zu: fast vs reference %.3g", variant < 3 ? "sgd" : "adamw", n, d);
        CHECK(same_bits(p[1], p[2], n) && same_bits(m[1], m[2], n) && same_bits(v[1], v[2], n),
              "%s n=%zu: threads differ", variant < 3 ? "sgd" : "adamw", n);
        for (int run = 0; run < 3; run++) {
            free(p[run]);
            free(m[run]);
            free(v[run]);
        }
    }
    sum_squares_matches(g, n);
    size_t cols = n % 97 % n + 1, rows = n / cols;
    ag_real *cs[3];
    for (int run = 0; run < 3; run++) {
        check_set_threads(run == 2 ? 2 : 1);
        cs[run] = copy_buf(m0, cols);
        (run ? &ag_kernels_fast : &ag_kernels_reference)->column_sums(g, rows, cols, cs[run]);
    }
    CHECK(rel_diff(cs[1], cs[0], cols) <= TOL * (1 + rows / 64.0) && same_bits(cs[1], cs[2], cols),
          "column_sums [%zu,%zu]", rows, cols);
    for (int run = 0; run < 3; run++)
        free(cs[run]);
    free(p0);
    free(g);
    free(m0);
    free(v0);
}

/* The sum of squares of an array long enough for the most pieces, against
 * the reference, and the same bits on 1 and 2 threads. */
static void check_sum_squares(size_t n)
{
    ag_real *g = random_buf(n, -1, 1);
    sum_squares_matches(g, n);
    free(g);
}

#ifndef AG_DOUBLE
/* The fast float log (attention's log-sum-exp, of a row's sum of exps, at
 * least 1) within its stated 2 ulp of the correctly rounded log, over
 * [1, 2^24]: every power of two and its neighbours, a grid and PCG32 draws. */
static void check_fast_log(void)
{
    float worst = 0, at = 1;
    for (int i = 0; i <= 3 * 200000; i++) {
        float x;
        if (i < 3 * 25) {
            x = ldexpf(1, i / 3);
            x = i % 3 == 0 ? x : i % 3 == 1 ? nextafterf(x, 0) : nextafterf(x, INFINITY);
        } else if (i <= 200000) {
            x = 1 + (float)i / 200000 * 3;          /* [1, 4]: the mantissa's fold at sqrt 2, twice */
        } else {
            x = ldexpf(1 + ag_pcg32_uniform(&rng), (int)ag_pcg32_below(&rng, 24));
        }
        if (x < 1)
            continue;
        const float got = ag_fast_log_normal(x), want = (float)log((double)x);
        const float ulp = nextafterf(fabsf(want), INFINITY) - fabsf(want), d = fabsf(got - want) / ulp;
        if (d > worst) {
            worst = d;
            at = x;
        }
    }
    CHECK(ag_fast_log_normal(1) == 0 && worst <= 2, "fast log: %.2f ulp from the correctly rounded log at %.9g (bound 2)",
          worst, at);
}

/* bf16 rounding of a buffer: the fast kernel bit for bit as the plain one
 * (ties, NaN, infinities, subnormals, the largest values included) */
static void check_round_bf16(void)
{
    enum { N = 4099 };
    float *x = malloc(N * sizeof *x), *y[2] = { malloc(N * sizeof(float)), malloc(N * sizeof(float)) };
    const uint32_t special[] = { 0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0xff7f8000u, 0x7fc00001u, 0xffa00000u,
                                 0x7f800000u, 0x00008000u, 0x80018000u, 0x00000001u, 0x80000000u };
    for (int i = 0; i < N; i++) {
        uint32_t u = ag_pcg32_next(&rng);
        if (i < (int)(sizeof special / sizeof special[0]))
            u = special[i];
        memcpy(&x[i], &u, sizeof u);
    }
    ag_kernels_reference.round_bf16(x, y[0], N);
    ag_kernels_fast.round_bf16(x, y[1], N);
    CHECK(memcmp(y[0], y[1], N * sizeof(float)) == 0, "round_bf16: fast and reference differ");
    ag_kernels_fast.round_bf16(x, x, N);    /* in place */
    CHECK(memcmp(x, y[0], N * sizeof(float)) == 0, "round_bf16 in place differs");
    free(x);
    free(y[0]);
    free(y[1]);
}
#endif

int main(void)
{
    ag_pcg32_seed(&rng, 2024, 1);
#ifndef AG_DOUBLE
    check_round_bf16();
    check_fast_log();
#endif
    check_gemm_cases();
    for (int log_out = 0; log_out < 2; log_out++) {
        check_softmax(1, 1, 1, log_out);
        check_softmax(37, 65, 1, log_out);         /* contiguous rows, odd length */
        check_softmax(300, 130, 1, log_out);       /* enough to run on two threads */
        check_softmax(3, 17, 5, log_out);          /* along a middle dim */
    }
    check_cross_entropy(1, 2);
    check_cross_entropy(77, 65);
    check_cross_entropy(600, 65);
    check_layer_norm(1, 1, 1);
    check_layer_norm(33, 63, 1);
    check_layer_norm(513, 128, 1);
    check_layer_norm(40, 17, 0);
    check_layer_norm_wide_rows();
    check_gelu(1, 1, 0, 0);
    check_gelu(1, 1001, 0, 1);
    check_gelu(1, 40000, 0, 0);
    for (int assign = 0; assign < 2; assign++) {
        check_gelu(1, 1, 1, assign);
        check_gelu(37, 19, 1, assign);
        check_gelu(300, 200, 1, assign);
        check_gelu(64, 1536, 1, assign);
        check_gelu(37, 19, 2, assign);
        check_gelu(300, 200, 2, assign);
    }
    /* widths that are not multiples of the lanes (16) or vectors, and edge values */
    for (int log_out = 0; log_out < 2; log_out++) {
        check_softmax(5, 3, 1, log_out);
        check_softmax(9, 17, 1, log_out);
        check_softmax(7, 33, 1, log_out);
        check_softmax(2, 33, 3, log_out);
        check_softmax_edges(12, 1, log_out);
        check_softmax_edges(12, 3, log_out);
        check_softmax_edges(30, 17, log_out);
        check_softmax_edges(30, 33, log_out);
    }
    check_cross_entropy(5, 1);
    check_cross_entropy(9, 3);
    check_cross_entropy(12, 17);
    check_cross_entropy(12, 33);
    check_cross_entropy_extremes(40, 3);
    check_cross_entropy_extremes(40, 33);
    check_layer_norm(5, 3, 1);
    check_layer_norm(9, 33, 1);
    check_layer_norm(4, 17, 0);
#ifndef AG_DOUBLE
    /* (in double neither sums a row exactly: their means both round,
     * and the difference, amplified by up to 1/sqrt(eps), is these rows'
     * conditioning, not the kernel's error; in float both sum the row's
     * floats in doubles) */
    check_layer_norm_constant_rows(16, 1);
    check_layer_norm_constant_rows(16, 3);
    check_layer_norm_constant_rows(16, 17);
    check_layer_norm_constant_rows(16, 33);
    check_layer_norm_constant_rows(16, 768);
    check_layer_norm_narrow_rows(6, 33);
    check_layer_norm_narrow_rows(6, 768);
    check_layer_norm_huge_rows(11, 17);
    check_layer_norm_huge_rows(11, 768);
#endif
    check_gelu(5, 3, 1, 1);
    check_gelu(3, 17, 1, 0);
    check_gelu(2, 33, 2, 1);
    check_gelu_large(6, 17, 0);
    check_gelu_large(6, 33, 1);
    check_updates(7);
    check_updates(70001);
    check_sum_squares(5000003);     /* in 256 pieces of 19584 */
    check_attention_cases();
    check_attention_large_scores(1);
    check_attention_large_scores(-1);
    /* A stored [K, M] too tall to read in place: packed a few k at a time,
     * with K blocks of 257 and 195 (not a multiple of that few), a last
     * panel of 1 row, and (700 rows) several row chunks; last, so the
     * cases above keep their random inputs */
    check_gemm(1, 0, 301, 40, 771, 0);
    check_gemm(1, 1, 700, 37, 390, 1);
    return check_done();
}
#else

int main(void)
{
    printf("test_kernels: the reference build has no fast kernels to compare\n");
    printf("0 passed, 0 failed, 1 skipped\n");
    return 0;
}

#endif
