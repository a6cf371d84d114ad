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
 *   - row kernels (softmax, cross-entropy, layer norm, GELU, optimizer
 *     steps): |fast - ref| <= TOL (1 + |ref|), TOL = 1e-5 in float (a few
 *     ulp of exp/erf plus the row's sums) and 1e-12 in double (libm
 *     everywhere, only the order of sums differs);
 *   - attention: outputs and gradients are sums over keys of terms bounded
 *     by the largest value involved, so |fast - ref| <= ATOL_ATTN max|ref|
 *     over the tensor, ATOL_ATTN = 2e-5 in float, 1e-12 in double.
 * Beside the tolerance, the fast kernels must give bitwise the same result
 * with 1 and 2 threads (they promise it; training reproducibility rests on
 * it), and special values must match exactly: -inf scores, fully masked
 * rows (zeros, never NaN).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "check.h"
#include "kernels.h"

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

static inline ag_real *copy_buf(const ag_real *src, size_t n)
{
    ag_real *p = malloc((n ? n : 1) * sizeof *p);
    memcpy(p, src, n * sizeof *p);
    return p;
}

static void set_threads(int n)
{
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* max over i of |a - b| / (1 + |b|); NaN in either counts as infinitely far
 * unless both are NaN */
static double rel_diff(const ag_real *a, const ag_real *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) && isnan(b[i]))
            continue;
        if (a[i] == b[i])
            continue;               /* also equal infinities */
        double d = fabs((double)a[i] - b[i]) / (1 + fabs((double)b[i]));
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
} attn_case;

/* Packed [B,T,3d] self-attention layout when Tq == Tk and q_pos0 == 0
 * (as ag_attention calls it), else separate q [B,Tq,d], k and v [B,Tk,d]. */
static void check_attention(attn_case c)
{
    const int d = c.H * c.hd, packed = c.Tq == c.Tk && c.q_pos0 == 0;
    ag_attn a = { .B = c.B, .H = c.H, .Tq = c.Tq, .Tk = c.Tk, .hd = c.hd, .causal = c.causal, .q_pos0 = c.q_pos0,
                  .scale = (ag_real)(1 / sqrt((double)c.hd)), .dropout = (ag_real)c.dropout };
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
    const ag_real *q = qbuf, *k = packed ? qbuf + d : kbuf, *v = packed ? qbuf + 2 * d : vbuf;
    ag_real *dout = random_buf(no, -1, 1);
    /* reference; fast on 1 thread, on 2 threads, and (when it would keep
     * weights for backward) on 1 thread without keeping them */
    ag_real *o[4], *lse[4], *g[4];
    const size_t ng = packed ? nq : nq + 2 * nk, nkeep = ag_kernels_fast.attention_keep(&a);
    CHECK(ag_kernels_reference.attention_keep(&a) == 0, "the reference keeps nothing");
    for (int run = 0; run < 4; run++) {
        const ag_kernels *kern = run ? &ag_kernels_fast : &ag_kernels_reference;
        set_threads(run == 2 ? 2 : 1);
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
    set_threads(2);
    double d_out = scaled_diff(o[1], o[0], no), d_lse = rel_diff(lse[1], lse[0], nl);
    double d_grad = scaled_diff(g[1], g[0], ng);
    CHECK(d_out <= ATOL_ATTN && d_lse <= TOL * 10 && d_grad <= ATOL_ATTN,
          "attention %s: fast vs reference: output %.3g, lse %.3g, gradients %.3g (bound %.1g)", c.label, d_out,
          d_lse, d_grad, ATOL_ATTN);
    CHECK(same_bits(o[1], o[2], no) && same_bits(lse[1], lse[2], nl) && same_bits(g[1], g[2], ng),
          "attention %s: 1 and 2 threads differ", c.label);
    double d_keep = scaled_diff(g[3], g[0], ng);
    CHECK(same_bits(o[3], o[1], no) && d_keep <= ATOL_ATTN,
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
        { "T=1", 2, 2, 1, 1, 8, 1, 0, 0 },
        { "causal T=17 hd=4", 3, 2, 17, 17, 4, 1, 0, 0 },
        { "non-causal T=9", 2, 3, 9, 9, 5, 0, 0, 0 },
        { "causal T=63", 2, 2, 63, 63, 16, 1, 0, 0 },
        { "causal T=64", 1, 3, 64, 64, 16, 1, 0, 0 },
        { "causal T=65", 2, 2, 65, 65, 16, 1, 0, 0 },
        { "causal T=130 hd=32", 2, 2, 130, 130, 32, 1, 0, 0 },
        { "non-causal T=130", 1, 2, 130, 130, 8, 0, 0, 0 },
        { "causal T=70 dropout 0.1", 3, 2, 70, 70, 16, 1, 0, 0.1 },
        { "causal T=200 dropout 0.5", 1, 2, 200, 200, 8, 1, 0, 0.5 },
        { "1 key, 5 queries after it", 2, 2, 5, 1, 8, 1, 0, 0 },
        { "cache: 3 queries after 90 keys", 2, 2, 3, 93, 16, 1, 90, 0 },
        { "first 2 queries see no key", 2, 2, 7, 7, 8, 1, -2, 0 },
        { "no query sees a key", 1, 1, 4, 6, 8, 1, -5, 0 },
        { "many items, parallel", 4, 6, 40, 40, 16, 1, 0, 0.2 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_attention(cases[i]);
}

int main(void)
{
    ag_pcg32_seed(&rng, 2024, 1);
    check_attention_cases();
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
