/*
 * attention.c - FAST KERNEL: multi-head attention in blocks, with memory
 * linear in the sequence length (the definition: ref_attention and
 * ref_attention_backward in src/reference.c).
 *
 * The FlashAttention algorithm.  The forward pass takes the queries BQ at a
 * time and runs over the keys BK at a time, keeping per query only a running
 * maximum m and a running sum l of exp(s - m) (the online softmax): when a
 * key block raises the maximum, what was summed so far -- l and the output
 * accumulated so far -- is rescaled by exp(m_old - m_new).  At the end
 * o = acc / l, and only lse = m + log l is kept for backward, no [T,T]
 * matrix (but for a sequence of one block each way, whose weights are
 * kept: ag_fast_attention_keep).  The backward pass recomputes each block's weights from lse
 * (p = exp(s - lse)), walking key blocks in the outer loop so each key
 * block's dk and dv are summed in registers-sized scratch and written once
 * (FlashAttention-2's order).  Under the causal mask, blocks that lie
 * wholly above the diagonal are skipped.
 *
 * Inside a block, scores are kept transposed, S^T[j][i] (computed as
 * K Q^T): a query's scores then form a column, so its maximum and sum are
 * elementwise maxima and sums down the rows, vector code across all the
 * block's queries at once.  The block products go through the matrix
 * multiply, one thread each.
 *
 * In mixed precision (a->bf16) q, k, v and the output's gradient arrive
 * rounded to bf16, and each block's weights and score gradients are
 * rounded before the products they enter; the products themselves run on
 * the fp32 kernel (exact for bf16 inputs up to the fp32 sums), which at
 * these block sizes is faster than packing for the bf16 one.
 *
 * Threads: the forward pass splits (item, query block) pairs between
 * threads, the backward pass whole items (an item's dq rows take a
 * contribution from every key block).  Every number is computed by one
 * thread in one order, whatever the thread count.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fast.h"
#include "fastmath.h"
#include "gemm_bf16.h"

/* The loops here are short (one block row) and dominated by exp: full-width
 * AVX-512 vectors do them in half the instructions of the 256-bit ones gcc
 * otherwise prefers. */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif

#define BQ 64                   /* queries per block */
#define BK 64                   /* keys per block */


/* Row `row` of head h of batch item b, in a buffer with batch stride bs and row stride ld. */
static ag_real *at(const ag_real *base, long bs, long ld, const ag_attn *a, int b, int h, int row)
{
    return (ag_real *)base + b * bs + row * ld + (long)h * a->hd;
}

/* The first of a block's queries i0.. (a column of S^T) that sees key j:
 * j <= i + q_pos0, clamped to [0, nq]. */
static int first_seeing(const ag_attn *a, int j, int i0, int nq)
{
    if (!a->causal)
        return 0;
    long lo = (long)j - a->q_pos0 - i0;
    return lo < 0 ? 0 : lo > nq ? nq : (int)lo;
}

/* z[jj*nq + ii] = the dropout multiplier of query i0+ii and key j0+jj: draw
 * ((b*H + h)*Tq + i)*Tk + j of the generator (see ag_attn). */
static void dropout_block(const ag_attn *a, int b, int h, int i0, int nq, int j0, int nk, ag_real *z)
{
    const uint32_t threshold = ag_dropout_threshold(a->dropout);
    const ag_real scale = ag_dropout_scale(a->dropout);
    const long n = (long)nq * nk;
    uint32_t draws[BQ * BK];            /* [nq][nk], query by query */
    ag_real m[BQ * BK];
    ag_pcg32 g = a->rng;                /* one jump to the block's first draw */
    ag_pcg32_advance(&g, (((uint64_t)b * a->H + h) * a->Tq + (uint64_t)i0) * a->Tk + (uint64_t)j0);
    if (nk == a->Tk)                    /* every key: the block's rows are one run of draws (short rows, */
                                        /* as make run's, then fill in lanes: 4% of its step with dropout) */
        ag_pcg32_fill(&g, draws, (size_t)n);
    else
        for (int ii = 0; ii < nq; ii++) {   /* a run per row, the Tk - nk keys between skipped */
            ag_pcg32_fill(&g, draws + (long)ii * nk, (size_t)nk);
            ag_pcg32_advance(&g, (uint64_t)(a->Tk - nk));
        }
    /* the multipliers as a vector select, then transposed: a branch per
     * draw would be mispredicted at every dropped weight */
    for (long e = 0; e < n; e++)
        m[e] = ag_dropout_multiplier(draws[e], threshold, scale);
    for (int ii = 0; ii < nq; ii++)
        for (int jj = 0; jj < nk; jj++)
            z[(long)jj * nq + ii] = m[(long)ii * nk + jj];
}

/* dst = bf16(src) (mixed precision: a product's input); src may be dst */
static void round_block(const ag_real *src, ag_real *dst, long n)
{
#ifndef AG_DOUBLE
    ag_fast_round_bf16(src, dst, (size_t)n);
#else
    (void)src;
    (void)dst;
    (void)n;                            /* never asked: bf16 needs the float build */
#endif
}

/* Shared when pool.c's model says it pays (ag_threads_for), from the time
 * on one thread of the two products every score takes part in, q.k and
 * p v: 2 B H Tq Tk hd multiply-adds (the causal mask skips about half the
 * blocks, and the softmax's exp adds about as much back; the backward has
 * more products and is shared at least as readily). */
static int threads_for(const ag_attn *a)
{
    double madds = 2.0 * a->B * a->H * a->Tq * a->Tk * a->hd;
    return ag_threads_for(madds * ag_fast_gemm_madd_ns());
}

/* Per-thread scratch, grown on demand and kept, so steady-state calls do
 * not allocate (as the matrix multiply's panels). */
static _Thread_local ag_scratch scratch_buf;

static ag_real *scratch(size_t n)
{
    return ag_scratch_get(&scratch_buf, n * sizeof(ag_real), "attention scratch");
}

/* The scratch elements forward_block and backward_item take. */
static size_t forward_scratch(void) { return 2L * BK * BQ + 3L * BQ; }
static long backward_block(int hd) { return (long)BQ * (BK > hd ? BK : hd); }   /* [nk, nq] or [hd, nq] */
static size_t backward_scratch(const ag_attn *a)
{
    return (size_t)a->Tq + 4 * (size_t)backward_block(a->hd) + 2 * (size_t)BK * (size_t)a->hd;
}

/* What forward and backward leave held: each thread's buffer grown to the
 * larger of the two, on every thread the call may use (whether it shares
 * depends on times measured when it runs; an estimate must not). */
size_t ag_fast_attention_scratch(const ag_attn *a)
{
    const size_t f = forward_scratch(), b = backward_scratch(a);
    return sizeof(ag_real) * (f > b ? f : b) * (size_t)ag_max_threads();
}

/* ---- forward ------------------------------------------------------------ */

/* A sequence short enough for one block each way keeps its weights for
 * backward, transposed as the block holds them ([Tk,Tq] per item): at most
 * BK values per query, and backward then skips recomputing them. */
size_t ag_fast_attention_keep(const ag_attn *a)
{
    return a->Tq <= BQ && a->Tk <= BK ? (size_t)a->B * a->H * a->Tq * a->Tk : 0;
}

/* Queries i0..i0+nq-1 of head h of item b; keep: the item's [Tk,Tq] kept
 * weights, or NULL. */
static void forward_block(const ag_attn *a, int b, int h, int i0, int nq, const ag_real *q, const ag_real *k,
                          const ag_real *v, ag_real *o, ag_real *lse, ag_real *keep)
{
    ag_real *st = scratch(forward_scratch());               /* [nk, nq] S^T, then the weights P^T */
    ag_real *z = st + (long)BK * BQ;                        /* [nk, nq] P^T after dropout */
    ag_real *m = z + (long)BK * BQ, *l = m + BQ, *alpha = l + BQ;   /* [nq] each */
    const ag_real *qb = at(q, a->q_bs, a->q_ld, a, b, h, i0), scale = a->scale;
    ag_real *ob = at(o, a->o_bs, a->o_ld, a, b, h, i0);
    /* keys [0, nkeys) are visible to some query of the block */
    long last = a->causal ? (long)i0 + nq - 1 + a->q_pos0 + 1 : a->Tk;
    const int nkeys = last < 0 ? 0 : last > a->Tk ? a->Tk : (int)last;
    for (int ii = 0; ii < nq; ii++) {
        m[ii] = -INFINITY;
        l[ii] = 0;
    }
    for (int j0 = 0; j0 < nkeys; j0 += BK) {
        const int nk = ag_min_int(BK, nkeys - j0);
        ag_fast_gemm(0, 1, nk, nq, a->hd, at(k, a->k_bs, a->k_ld, a, b, h, j0), (int)a->k_ld, qb, (int)a->q_ld, 0,
                     st, nq);                                                          /* S^T = K Q^T */
        /* scale and mask; the new maximum of each column (held in alpha) */
        for (int ii = 0; ii < nq; ii++)
            alpha[ii] = m[ii];
        for (int jj = 0; jj < nk; jj++) {
            ag_real *restrict r = st + (long)jj * nq, *restrict mx = alpha;
            /* masked by selection over the whole row: full vectors, no
             * ragged remainder loops where the diagonal cuts the block */
            const int lo = first_seeing(a, j0 + jj, i0, nq);
            for (int ii = 0; ii < nq; ii++) {
                r[ii] = ii < lo ? -INFINITY : r[ii] * scale;
                mx[ii] = r[ii] > mx[ii] ? r[ii] : mx[ii];
            }
        }
        /* alpha = exp(m_old - m_new) rescales what was summed so far; a
         * query that has seen no key yet keeps m = -inf and subtracts 0 */
        for (int ii = 0; ii < nq; ii++) {
            ag_real m_new = alpha[ii];
            alpha[ii] = m_new == -INFINITY ? 1 : ag_fast_exp(m[ii] - m_new);
            m[ii] = m_new;
            l[ii] *= alpha[ii];
        }
        for (int jj = 0; jj < nk; jj++) {
            ag_real *restrict r = st + (long)jj * nq, *restrict sum = l;
            const ag_real *restrict mx = m;
            for (int ii = 0; ii < nq; ii++) {
                r[ii] = ag_fast_exp(r[ii] - (mx[ii] == -INFINITY ? 0 : mx[ii]));
                sum[ii] += r[ii];
            }
        }
        const ag_real *pt = st;
        if (a->dropout > 0) {
            dropout_block(a, b, h, i0, nq, j0, nk, z);
            for (long e = 0; e < (long)nk * nq; e++)
                z[e] *= st[e];
            pt = z;
        }
        if (a->bf16) {                  /* the product's input, rounded (st itself stays fp32) */
            round_block(pt, z, (long)nk * nq);
            pt = z;
        }
        if (j0 > 0)
            for (int ii = 0; ii < nq; ii++) {
                ag_real *oi = ob + ii * a->o_ld;
                for (int c = 0; c < a->hd; c++)
                    oi[c] *= alpha[ii];
            }
        ag_fast_gemm(1, 0, nq, a->hd, nk, pt, nq, at(v, a->v_bs, a->v_ld, a, b, h, j0), (int)a->v_ld,
                     j0 > 0 ? 1 : 0, ob, (int)a->o_ld);                                /* O (+)= P V */
    }
    ag_real *lse_b = lse + ((long)b * a->H + h) * a->Tq + i0;
    for (int ii = 0; ii < nq; ii++) {
        ag_real *oi = ob + ii * a->o_ld, inv = l[ii] > 0 ? 1 / l[ii] : 0;
        if (nkeys == 0)
            memset(oi, 0, (size_t)a->hd * sizeof(ag_real));     /* no key for any query of the block */
        else
            for (int c = 0; c < a->hd; c++)
                oi[c] *= inv;
        lse_b[ii] = l[ii] > 0 ? m[ii] + ag_fast_log_normal(l[ii]) : -INFINITY;   /* l >= 1: the max's own exp */
        alpha[ii] = inv;
    }
    if (keep)                           /* one block: st holds all of P^T, unnormalized */
        for (int jj = 0; jj < a->Tk; jj++)
            for (int ii = 0; ii < nq; ii++)
                keep[(long)jj * nq + ii] = jj < nkeys ? st[(long)jj * nq + ii] * alpha[ii] : 0;
}

/* One call's arguments, for its tasks. */
typedef struct {
    const ag_attn *a;
    const ag_real *q, *k, *v, *o, *do_, *lse, *keep_in;
    ag_real *o_out, *lse_out, *keep_out, *dq, *dk, *dv;
    int assign;
    long per_item;
    int nqb;
} attn_call;

/* Task t: query block t % nqb of item t / nqb. */
static void forward_task(void *ctx, int t)
{
    const attn_call *c = ctx;
    const ag_attn *a = c->a;
    const int item = t / c->nqb, i0 = t % c->nqb * BQ;
    forward_block(a, item / a->H, item % a->H, i0, ag_min_int(BQ, a->Tq - i0), c->q, c->k, c->v, c->o_out,
                  c->lse_out, c->keep_out ? c->keep_out + item * c->per_item : NULL);
}

void ag_fast_attention(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v, ag_real *o,
                       ag_real *lse, ag_real *weights, ag_real *keep)
{
    const long per_item = (long)a->Tq * a->Tk;
    if (!ag_fast_attention_keep(a))
        keep = NULL;                    /* nothing to keep: a caller's buffer is not ours to write */
    if (weights) {
        /* only pictures and tests ask for the weights: the definition
         * computes them, and what is kept is those very weights */
        ag_kernels_reference.attention(a, q, k, v, o, lse, weights, NULL);
        for (long item = 0; keep && item < (long)a->B * a->H; item++)
            for (int i = 0; i < a->Tq; i++)
                for (int j = 0; j < a->Tk; j++)
                    keep[item * per_item + (long)j * a->Tq + i] = weights[item * per_item + (long)i * a->Tk + j];
        return;
    }
    const int nqb = (a->Tq + BQ - 1) / BQ;
    attn_call c = { .a = a, .q = q, .k = k, .v = v, .o_out = o, .lse_out = lse, .keep_out = keep, .per_item = per_item,
                    .nqb = nqb };
    ag_parallel(a->B * a->H * nqb, threads_for(a), forward_task, &c);
}

/* ---- backward ----------------------------------------------------------- */

/* P^T [nk,nq] = exp(S^T scale - lse) in place, 0 where masked and for a
 * query that sees no key (lse = -inf); masked by selection over whole rows,
 * as in forward. */
static void recompute_weights(const ag_attn *a, const ag_real *lse_b, int j0, int nk, int i0, int nq, ag_real *pt)
{
    const ag_real scale = a->scale;
    for (int jj = 0; jj < nk; jj++) {
        ag_real *restrict r = pt + (long)jj * nq;
        const ag_real *restrict ls = lse_b + i0;
        const int lo = first_seeing(a, j0 + jj, i0, nq);
        for (int ii = 0; ii < nq; ii++) {
            ag_real p = ag_fast_exp(r[ii] * scale - ls[ii]);
            r[ii] = ii < lo || ls[ii] == -INFINITY ? 0 : p;
        }
    }
}

/* D_i = sum_j p_ij dp_ij (dp after dropout) over the one block of keys, in
 * double: the softmax backward's row sum from its definition, which for a
 * one-hot row of weights is exactly that row's dp whatever the rounding of
 * the products before it. */
static void row_sums_of_p_dp(const ag_real *pt, const ag_real *zt, int dropout, const ag_real *dpt, int nk, int nq,
                             ag_real *D)
{
    double acc[BQ] = { 0 };
    for (int jj = 0; jj < nk; jj++)
        for (int ii = 0; ii < nq; ii++) {
            ag_real dp = dropout ? zt[(long)jj * nq + ii] * dpt[(long)jj * nq + ii] : dpt[(long)jj * nq + ii];
            acc[ii] += (double)pt[(long)jj * nq + ii] * dp;
        }
    for (int ii = 0; ii < nq; ii++)
        D[ii] = (ag_real)acc[ii];
}

/* D[i] = x_i . y_i for `rows` rows of hd elements, ld apart, each summed as
 * the matrix multiply sums an element: one fused multiply-add per element,
 * c in order (the same bits as ag_fast_gemm's x_i . y_i in builds whose
 * matrix multiply fuses, which every build at -O2 and above does).  Eight
 * rows' chains run side by side, so they overlap instead of waiting on each
 * other. */
static void row_dots(const ag_real *x, const ag_real *y, long ld, int rows, int hd, ag_real *D)
{
    int row = 0;
    for (; row + 8 <= rows; row += 8) {
        ag_real acc[8] = { 0 };
        for (int c = 0; c < hd; c++)
            for (int r = 0; r < 8; r++)
                acc[r] = AG_FMA(x[(row + r) * ld + c], y[(row + r) * ld + c], acc[r]);
        for (int r = 0; r < 8; r++)
            D[row + r] = acc[r];
    }
    for (; row < rows; row++) {
        ag_real acc = 0;
        for (int c = 0; c < hd; c++)
            acc = AG_FMA(x[row * ld + c], y[row * ld + c], acc);
        D[row] = acc;
    }
}

/* keep: the item's kept weights P^T [Tk,Tq] (one block each way), or NULL. */
static void backward_item(const ag_attn *a, int b, int h, const ag_real *q, const ag_real *k, const ag_real *v,
                          const ag_real *o, const ag_real *do_, const ag_real *lse, const ag_real *keep,
                          ag_real *dq, ag_real *dk, ag_real *dv, int assign)
{
    const int hd = a->hd;
    const ag_real scale = a->scale;
    const long block = backward_block(hd);
    ag_real *D = scratch(backward_scratch(a));   /* [Tq] do_i . o_i */
    ag_real *p_buf = D + a->Tq;                  /* [nk, nq] P^T */
    ag_real *zt = p_buf + block;                 /* [nk, nq] dropout multipliers */
    ag_real *pdt = zt + block;                   /* [nk, nq] P^T after dropout */
    ag_real *dst = pdt + block;                  /* [nk, nq] dP^T, then dS^T */
    ag_real *dk_acc = dst + block, *dv_acc = dk_acc + (long)BK * hd;   /* [nk, hd] each */
    const ag_real *lse_b = lse + ((long)b * a->H + h) * a->Tq;
    /* D_i = do_i . o_i in the order and rounding of the matrix multiply's
     * do_i . v_j: where a query's weights are one-hot (o_i = v_j), the two
     * are equal and dS is exactly 0.  (A single block computes D from P and
     * dP instead.) */
    if (!keep)
        row_dots(at(do_, a->o_bs, a->o_ld, a, b, h, 0), at(o, a->o_bs, a->o_ld, a, b, h, 0), a->o_ld, a->Tq, hd, D);
    if (assign)
        for (int i = 0; i < a->Tq; i++)
            memset(at(dq, a->q_bs, a->q_ld, a, b, h, i), 0, (size_t)hd * sizeof(ag_real));
    for (int j0 = 0; j0 < a->Tk; j0 += BK) {
        const int nk = ag_min_int(BK, a->Tk - j0);
        const ag_real *kb = at(k, a->k_bs, a->k_ld, a, b, h, j0), *vb = at(v, a->v_bs, a->v_ld, a, b, h, j0);
        memset(dk_acc, 0, (size_t)nk * hd * sizeof(ag_real));
        memset(dv_acc, 0, (size_t)nk * hd * sizeof(ag_real));
        /* the queries that see key j0 or a later one of the block: i >= j0 - q_pos0 */
        long first = a->causal ? (long)j0 - a->q_pos0 : 0;
        for (int i0 = first < 0 ? 0 : (int)(first / BQ * BQ); i0 < a->Tq; i0 += BQ) {
            const int nq = ag_min_int(BQ, a->Tq - i0);
            const ag_real *qb = at(q, a->q_bs, a->q_ld, a, b, h, i0), *dob = at(do_, a->o_bs, a->o_ld, a, b, h, i0);
            const ag_real *pt = keep;       /* the only block: P^T as the forward kept it */
            if (!keep) {
                ag_fast_gemm(0, 1, nk, nq, hd, kb, (int)a->k_ld, qb, (int)a->q_ld, 0, p_buf, nq);   /* S^T = K Q^T */
                recompute_weights(a, lse_b, j0, nk, i0, nq, p_buf);
                pt = p_buf;
            }
            const ag_real *pd = pt;
            if (a->dropout > 0) {
                dropout_block(a, b, h, i0, nq, j0, nk, zt);
                for (long e = 0; e < (long)nk * nq; e++)
                    pdt[e] = pt[e] * zt[e];
                pd = pdt;
            }
            if (a->bf16) {
                round_block(pd, pdt, (long)nk * nq);
                pd = pdt;
            }
            ag_fast_gemm(0, 0, nk, hd, nq, pd, nq, dob, (int)a->o_ld, 1, dv_acc, hd);     /* dV += Pd dO */
            ag_fast_gemm(0, 1, nk, nq, hd, vb, (int)a->v_ld, dob, (int)a->o_ld, 0, dst, nq); /* dP^T = V dO^T */
            if (keep)
                row_sums_of_p_dp(pt, zt, a->dropout > 0, dst, nk, nq, D + i0);
            for (int jj = 0; jj < nk; jj++) {
                ag_real *restrict g = dst + (long)jj * nq;
                const ag_real *restrict p = pt + (long)jj * nq, *restrict z = zt + (long)jj * nq;
                const ag_real *restrict d = D + i0;
                if (a->dropout > 0)
                    for (int ii = 0; ii < nq; ii++)
                        g[ii] = p[ii] * (z[ii] * g[ii] - d[ii]) * scale;
                else
                    for (int ii = 0; ii < nq; ii++)
                        g[ii] = p[ii] * (g[ii] - d[ii]) * scale;                     /* dS = P (dP - D) */
            }
            if (a->bf16)
                round_block(dst, dst, (long)nk * nq);
            ag_fast_gemm(1, 0, nq, hd, nk, dst, nq, kb, (int)a->k_ld, 1,
                         at(dq, a->q_bs, a->q_ld, a, b, h, i0), (int)a->q_ld);          /* dQ += dS K */
            ag_fast_gemm(0, 0, nk, hd, nq, dst, nq, qb, (int)a->q_ld, 1, dk_acc, hd);   /* dK += dS^T Q */
        }
        for (int jj = 0; jj < nk; jj++) {
            ag_real *dkj = at(dk, a->k_bs, a->k_ld, a, b, h, j0 + jj), *dvj = at(dv, a->v_bs, a->v_ld, a, b, h, j0 + jj);
            const ag_real *gk = dk_acc + (long)jj * hd, *gv = dv_acc + (long)jj * hd;
            for (int c = 0; c < hd; c++) {
                dkj[c] = assign ? gk[c] : dkj[c] + gk[c];
                dvj[c] = assign ? gv[c] : dvj[c] + gv[c];
            }
        }
    }
}

/* Task t: item t (batch t / H, head t % H). */
static void backward_task(void *ctx, int item)
{
    const attn_call *c = ctx;
    const ag_attn *a = c->a;
    backward_item(a, item / a->H, item % a->H, c->q, c->k, c->v, c->o, c->do_, c->lse,
                  c->keep_in ? c->keep_in + item * c->per_item : NULL, c->dq, c->dk, c->dv, c->assign);
}

void ag_fast_attention_backward(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v,
                                const ag_real *o, const ag_real *do_, const ag_real *lse, const ag_real *keep,
                                ag_real *dq, ag_real *dk, ag_real *dv, int assign)
{
    const int items = a->B * a->H, nth = threads_for(a);
    const long per_item = (long)a->Tq * a->Tk;
    if (!ag_fast_attention_keep(a))
        keep = NULL;
    attn_call c = { .a = a, .q = q, .k = k, .v = v, .o = o, .do_ = do_, .lse = lse, .keep_in = keep, .dq = dq, .dk = dk,
                    .dv = dv, .assign = assign, .per_item = per_item };
    ag_parallel(items, nth, backward_task, &c);
}
