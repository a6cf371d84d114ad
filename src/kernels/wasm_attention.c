/*
 * wasm_attention.c - the browser build's attention forward and backward
 * (make web), with ref_attention's bits (src/reference.c): the same float
 * and double operations in the same order, laid out for SIMD128 lanes.
 *
 * A dot product q . k_j is a chain over c = 0..hd-1 that cannot be split,
 * so four keys j run side by side in f32x4 lanes, each lane that chain,
 * from k (and v) transposed per head into [hd][Tk].  A sum o_i = sum_j
 * p_j v_j (and the backward's dq, dk, dv) is independent per c: four c at
 * a time, each held in a register over j (or i) in the reference's order.
 * exp goes through ag_math_exp_n, once for all of a head's queries (its
 * four-lane groups then run full).  Dropout's multipliers z_ij are the
 * reference's draws: the call's draws run (b, h, i, j) in order, so one
 * generator walks them, jumping over the keys a query does not see.
 * bf16 products take the reference kernel.
 */
#if defined(__wasm_simd128__) && !defined(AG_DOUBLE)
#include <math.h>
#include <string.h>
#include <wasm_simd128.h>

#include "wasm.h"

#define Q(a, q, b, h, i) ((q) + (b) * (a)->q_bs + (i) * (a)->q_ld + (h) * (a)->hd)
#define K(a, k, b, h, j) ((k) + (b) * (a)->k_bs + (j) * (a)->k_ld + (h) * (a)->hd)
#define V(a, v, b, h, j) ((v) + (b) * (a)->v_bs + (j) * (a)->v_ld + (h) * (a)->hd)
#define O(a, o, b, h, i) ((o) + (b) * (a)->o_bs + (i) * (a)->o_ld + (h) * (a)->hd)

/* Keys padded to a multiple of four (the padding is zero). */
static int padded(int Tk) { return (Tk + 3) & ~3; }

/* Per call: the head's keys and values transposed, [hd][Tk4] each; for
 * every query of the head, its scores, its weights p (the backward's
 * do_i . v_j first) and the backward's ds, [Tq][Tk4] floats each, exp's
 * arguments and results, [Tq][Tk4] doubles each (query i's n keys take
 * n rounded up to four of them, the queries' one after another), and how
 * many keys each query sees (backward), Tq ints, its largest score
 * (forward), Tq floats, and one query's dropout multipliers, Tk4 floats. */
static size_t scratch_bytes(const ag_attn *a)
{
    size_t T4 = (size_t)padded(a->Tk), Tq = (size_t)(a->Tq > 0 ? a->Tq : 0);
    return 2 * (size_t)a->hd * T4 * sizeof(float) + 3 * Tq * T4 * sizeof(float) + 2 * Tq * T4 * sizeof(double) +
           Tq * sizeof(int) + Tq * sizeof(float) + T4 * sizeof(float);
}

size_t ag_wasm_attention_scratch(const ag_attn *a) { return scratch_bytes(a); }

static int reference_only(const ag_attn *a) { return a->bf16; }

/* Dropout's generator on its way through a call's draws: the weight
 * (b, h, i, j) takes draw ((b H + h) Tq + i) Tk + j of a->rng (ag_attn),
 * and the queries come in that order, so each row's draws follow the
 * last ones taken; `at` counts the draws behind g. */
typedef struct mask_walk {
    ag_pcg32 g;
    uint64_t at;
    uint32_t threshold;
    ag_real scale;
} mask_walk;

static mask_walk mask_start(const ag_attn *a)
{
    return (mask_walk){ a->rng, 0, ag_dropout_threshold(a->dropout), ag_dropout_scale(a->dropout) };
}

/* z[j] = the dropout multiplier of key j of query i of item b, head h
 * (0 with probability p, else 1/(1-p): ag_dropout_multiplier) for the
 * j < n the query sees, then 0 up to n rounded to four.  The draws the
 * walk passes over (the previous query's hidden keys, a query with none
 * to see) cost one jump, ag_pcg32_advance's few steps, not a draw each. */
static void mask_row(mask_walk *w, const ag_attn *a, int b, int h, int i, int n, float *z)
{
    const uint64_t first = (((uint64_t)b * a->H + h) * a->Tq + (uint64_t)i) * (uint64_t)a->Tk;
    ag_pcg32_advance(&w->g, first - w->at);
    for (int j = 0; j < n; j++)
        z[j] = ag_dropout_multiplier(ag_pcg32_next(&w->g), w->threshold, w->scale);
    for (int j = n; j < padded(n); j++)
        z[j] = 0;
    w->at = first + (uint64_t)n;
}

/* x [Tk rows, ld apart][hd] -> xt [hd][T4], zero past Tk */
static void transpose(const ag_real *x, long ld, int Tk, int hd, float *xt)
{
    int T4 = padded(Tk);
    for (int c = 0; c < hd; c++) {
        float *row = xt + (size_t)c * T4;
        for (int j = 0; j < Tk; j++)
            row[j] = x[j * ld + c];
        for (int j = Tk; j < T4; j++)
            row[j] = 0;
    }
}

/* S[i][j] = dot(x_i, keys j) for every query i < Tq (x_i = x + i ld) and
 * j < n[i] rounded up to four, as ref's dot: sum = 0, sum += x_i[c]
 * kt[c][j] for c = 0, 1, ..., hd-1, in every lane.  Four queries side by
 * side (their four chains share each load of the keys, and one alone
 * would wait on each add); rows past Tq repeat the last. */
static void all_dots(const ag_real *x, long ld, int Tq, const int *n, const float *kt, int T4, int hd, float *S)
{
    for (int i0 = 0; i0 < Tq; i0 += 4) {
        int i[4], top = 0;
        float *s[4];
        for (int r = 0; r < 4; r++) {
            i[r] = i0 + r < Tq ? i0 + r : Tq - 1;
            s[r] = S + (size_t)i[r] * T4;
            top = n[i[r]] > top ? n[i[r]] : top;
        }
        const ag_real *x0 = x + i[0] * ld, *x1 = x + i[1] * ld, *x2 = x + i[2] * ld, *x3 = x + i[3] * ld;
        for (int j = 0; j < top; j += 4) {
            v128_t s0 = wasm_f32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
            for (int c = 0; c < hd; c++) {
                const v128_t kc = wasm_v128_load(kt + (size_t)c * T4 + j);
                s0 = wasm_f32x4_add(s0, wasm_f32x4_mul(wasm_f32x4_splat(x0[c]), kc));
                s1 = wasm_f32x4_add(s1, wasm_f32x4_mul(wasm_f32x4_splat(x1[c]), kc));
                s2 = wasm_f32x4_add(s2, wasm_f32x4_mul(wasm_f32x4_splat(x2[c]), kc));
                s3 = wasm_f32x4_add(s3, wasm_f32x4_mul(wasm_f32x4_splat(x3[c]), kc));
            }
            wasm_v128_store(s[0] + j, s0);
            wasm_v128_store(s[1] + j, s1);
            wasm_v128_store(s[2] + j, s2);
            wasm_v128_store(s[3] + j, s3);
        }
    }
}

/* The keys query i sees: 0..last, or none (last < 0). */
static int last_key(const ag_attn *a, int i)
{
    int last = a->causal ? i + a->q_pos0 : a->Tk - 1;
    return last < a->Tk - 1 ? last : a->Tk - 1;
}

/* s[j] = scale s[j] for j < n (rounded up to four), and the largest of
 * those j < n, as the reference's `if (s_j > m) m = s_j` from m = -inf
 * finds it: pmax(m, s) is s only where m < s, so a NaN never wins (a
 * row with one has NaN weights either way), and which of +0 and -0 wins
 * changes neither s - m nor m + log(sum). */
static ag_real scale_max(float *s, ag_real scale, int n)
{
    const v128_t vs = wasm_f32x4_splat(scale), lane = wasm_i32x4_make(0, 1, 2, 3);
    v128_t m = wasm_f32x4_splat(-INFINITY);
    for (int j = 0; j < n; j += 4) {
        v128_t x = wasm_f32x4_mul(vs, wasm_v128_load(s + j));
        wasm_v128_store(s + j, x);
        v128_t in = wasm_i32x4_lt(wasm_i32x4_add(lane, wasm_i32x4_splat(j)), wasm_i32x4_splat(n));
        m = wasm_f32x4_pmax(m, wasm_v128_bitselect(x, wasm_f32x4_splat(-INFINITY), in));
    }
    ag_real lanes[4], best = -INFINITY;
    wasm_v128_store(lanes, m);
    for (int l = 0; l < 4; l++)
        if (lanes[l] > best)
            best = lanes[l];
    return best;
}

/* How many keys query i sees (0 .. Tk). */
static int seen(const ag_attn *a, int i) { return last_key(a, i) + 1 > 0 ? last_key(a, i) + 1 : 0; }

/* arg[j] = (double)(mul s[j] - sub) for j < n, then 0 up to n rounded to
 * four (an argument exp takes in its vector lanes); mul 1 leaves s[j]
 * as it is, a product by one being exact. */
static void exp_args(const float *s, float mul, float sub, int n, double *arg)
{
    const v128_t vm = wasm_f32x4_splat(mul), vs = wasm_f32x4_splat(sub);
    for (int j = 0; j < n; j += 4) {
        v128_t x = wasm_f32x4_sub(wasm_f32x4_mul(vm, wasm_v128_load(s + j)), vs);
        wasm_v128_store(arg + j, ag_wasm_lo(x));
        wasm_v128_store(arg + j + 2, ag_wasm_hi(x));
    }
    for (int j = n; j < padded(n); j++)
        arg[j] = 0;
}

/* y[c] = sum_j w_j x_j[c] in j's order from y[c] (from 0 when fresh),
 * over the j < n (and, with `live` given, only those with live[j] != 0:
 * the forward skips a key whose weight p_j is 0, a hidden one, even
 * where dropout has made w_j = p_j z_j 0 as well), for c < hd four at a
 * time: the reference's y[c] += w_j x_j[c], each sum kept in a register.
 * w_j is w[j ws], x_j is x + j ld; with `seen` given, j runs over all n
 * and counts only where seen[j] > col (the queries that see key col). */
static void gather(ag_real *y, int fresh, const float *w, long ws, const ag_real *x, long ld, int n, int hd,
                   const float *live, const int *seen, int col)
{
    int c = 0;
    for (; c + 16 <= hd; c += 16) {     /* four chains side by side, as in dots */
        v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
        if (!fresh)
            a0 = wasm_v128_load(y + c), a1 = wasm_v128_load(y + c + 4), a2 = wasm_v128_load(y + c + 8),
            a3 = wasm_v128_load(y + c + 12);
        for (int j = 0; j < n; j++) {
            ag_real wj = w[j * ws];
            if ((live && live[j] == 0) || (seen && seen[j] <= col))
                continue;
            const v128_t wv = wasm_f32x4_splat(wj);
            const ag_real *xj = x + j * ld + c;
            a0 = wasm_f32x4_add(a0, wasm_f32x4_mul(wv, wasm_v128_load(xj)));
            a1 = wasm_f32x4_add(a1, wasm_f32x4_mul(wv, wasm_v128_load(xj + 4)));
            a2 = wasm_f32x4_add(a2, wasm_f32x4_mul(wv, wasm_v128_load(xj + 8)));
            a3 = wasm_f32x4_add(a3, wasm_f32x4_mul(wv, wasm_v128_load(xj + 12)));
        }
        wasm_v128_store(y + c, a0);
        wasm_v128_store(y + c + 4, a1);
        wasm_v128_store(y + c + 8, a2);
        wasm_v128_store(y + c + 12, a3);
    }
    for (; c + 4 <= hd; c += 4) {
        v128_t acc = fresh ? wasm_f32x4_splat(0) : wasm_v128_load(y + c);
        for (int j = 0; j < n; j++) {
            ag_real wj = w[j * ws];
            if ((live && live[j] == 0) || (seen && seen[j] <= col))
                continue;
            acc = wasm_f32x4_add(acc, wasm_f32x4_mul(wasm_f32x4_splat(wj), wasm_v128_load(x + j * ld + c)));
        }
        wasm_v128_store(y + c, acc);
    }
    for (; c < hd; c++) {
        ag_real acc = fresh ? 0 : y[c];
        for (int j = 0; j < n; j++)
            if (!(live && live[j] == 0) && !(seen && seen[j] <= col))
                acc += w[j * ws] * x[j * ld + c];
        y[c] = acc;
    }
}

/* Key j's dv_j += sum_i p_ij do_i and dk_j += sum_i ds_ij q_i over the
 * queries i that see it (seen[i] > j), in i's order: two gathers, their
 * eight chains of sixteen c side by side where hd allows (p_ij = p[i ws],
 * ds_ij = ds[i ws]). */
static void key_sums(ag_real *dv, ag_real *dk, const float *p, const float *ds, long ws, const ag_real *do_,
                     long do_ld, const ag_real *q, long q_ld, int Tq, int hd, const int *seen, int j)
{
    int c = 0;
    for (; c + 16 <= hd; c += 16) {
        v128_t v0 = wasm_v128_load(dv + c), v1 = wasm_v128_load(dv + c + 4), v2 = wasm_v128_load(dv + c + 8);
        v128_t v3 = wasm_v128_load(dv + c + 12), k0 = wasm_v128_load(dk + c), k1 = wasm_v128_load(dk + c + 4);
        v128_t k2 = wasm_v128_load(dk + c + 8), k3 = wasm_v128_load(dk + c + 12);
        for (int i = 0; i < Tq; i++) {
            if (seen[i] <= j)
                continue;
            const v128_t pv = wasm_f32x4_splat(p[i * ws]), dsv = wasm_f32x4_splat(ds[i * ws]);
            const ag_real *doi = do_ + i * do_ld + c, *qi = q + i * q_ld + c;
            v0 = wasm_f32x4_add(v0, wasm_f32x4_mul(pv, wasm_v128_load(doi)));
            v1 = wasm_f32x4_add(v1, wasm_f32x4_mul(pv, wasm_v128_load(doi + 4)));
            v2 = wasm_f32x4_add(v2, wasm_f32x4_mul(pv, wasm_v128_load(doi + 8)));
            v3 = wasm_f32x4_add(v3, wasm_f32x4_mul(pv, wasm_v128_load(doi + 12)));
            k0 = wasm_f32x4_add(k0, wasm_f32x4_mul(dsv, wasm_v128_load(qi)));
            k1 = wasm_f32x4_add(k1, wasm_f32x4_mul(dsv, wasm_v128_load(qi + 4)));
            k2 = wasm_f32x4_add(k2, wasm_f32x4_mul(dsv, wasm_v128_load(qi + 8)));
            k3 = wasm_f32x4_add(k3, wasm_f32x4_mul(dsv, wasm_v128_load(qi + 12)));
        }
        wasm_v128_store(dv + c, v0), wasm_v128_store(dv + c + 4, v1), wasm_v128_store(dv + c + 8, v2);
        wasm_v128_store(dv + c + 12, v3), wasm_v128_store(dk + c, k0), wasm_v128_store(dk + c + 4, k1);
        wasm_v128_store(dk + c + 8, k2), wasm_v128_store(dk + c + 12, k3);
    }
    if (c < hd) {
        gather(dv + c, 0, p, ws, do_ + c, do_ld, Tq, hd - c, NULL, seen, j);
        gather(dk + c, 0, ds, ws, q + c, q_ld, Tq, hd - c, NULL, seen, j);
    }
}

/* as ref_attention (see there for the math), one head of one item at a
 * time: every query's scores first, then one call of exp for all their
 * sums, and those exps divided by their query's sum are the weights; then
 * the outputs */
void ag_wasm_attention(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v, ag_real *o,
                       ag_real *lse, ag_real *weights, ag_real *keep)
{
    if (reference_only(a)) {
        ag_kernels_reference.attention(a, q, k, v, o, lse, weights, keep);
        return;
    }
    const int T4 = padded(a->Tk), hd = a->hd, Tq = a->Tq;
    float *kt = ag_wasm_scratch(AG_WASM_ATTENTION, scratch_bytes(a)), *S = kt + (size_t)2 * hd * T4;
    float *P = S + (size_t)Tq * T4;
    double *arg = (double *)(P + 2 * (size_t)Tq * T4), *ex = arg + (size_t)Tq * T4;
    int *n_of = (int *)(ex + (size_t)Tq * T4);
    ag_real *max = (ag_real *)(n_of + Tq);     /* each query's largest score */
    float *pz = max + Tq;                      /* one query's p_j z_j */
    mask_walk mask = mask_start(a);
    for (int i = 0; i < Tq; i++)
        n_of[i] = seen(a, i);   /* keys past them are -inf */
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->H; h++) {
            transpose(K(a, k, b, h, 0), a->k_ld, a->Tk, hd, kt);
            all_dots(Q(a, q, b, h, 0), a->q_ld, Tq, n_of, kt, T4, hd, S);
            ag_real *lse_bh = lse + ((long)b * a->H + h) * Tq;
            size_t at = 0;      /* where query i's exps start */
            for (int i = 0; i < Tq; i++) {
                const int n = n_of[i];
                float *s = S + (size_t)i * T4;
                const ag_real m = scale_max(s, a->scale, n);
                /* the exps of keys 0..n-1 only: past them s is -inf, whose
                 * exp is 0, and adding 0 changes no sum (nor p, 0 there) */
                max[i] = m;
                if (m != -INFINITY)
                    exp_args(s, 1, m, n, arg + at), at += (size_t)padded(n);
            }
            ag_math_exp_n(arg, ex, at);
            at = 0;
            for (int i = 0; i < Tq; i++) {
                const int n = n_of[i];
                const ag_real m = max[i];
                const float *s = S + (size_t)i * T4;
                float *p = P + (size_t)i * T4;
                double sum = 0;
                if (m != -INFINITY) {
                    for (int j = 0; j < n; j++)
                        sum += ex[at + (size_t)j];
                    /* p_j = exp(s_j - m) / sum rounded, 0 where s_j = -inf */
                    const v128_t vsum = wasm_f64x2_splat(sum);
                    for (int j = 0; j < n; j += 4) {
                        v128_t sj = wasm_v128_load(s + j);
                        v128_t pj = ag_wasm_narrow(wasm_f64x2_div(wasm_v128_load(ex + at + j), vsum),
                                                   wasm_f64x2_div(wasm_v128_load(ex + at + j + 2), vsum));
                        wasm_v128_store(p + j, wasm_v128_andnot(pj, wasm_f32x4_eq(sj, wasm_f32x4_splat(-INFINITY))));
                    }
                    at += (size_t)padded(n);
                } else              /* no score above -inf: weights 0, and NaN for a NaN score */
                    for (int j = 0; j < padded(n); j++)
                        p[j] = j < n && s[j] != -INFINITY ? NAN : 0;
                lse_bh[i] = m == -INFINITY ? -INFINITY : (ag_real)(m + ag_math_log(sum));
                if (weights) {
                    ag_real *w = weights + (((long)b * a->H + h) * Tq + i) * a->Tk;
                    for (int j = 0; j < a->Tk; j++)
                        w[j] = j < n ? p[j] : 0;
                }
                /* o_i = sum_j p_j z_j v_j, z_j = 1 without dropout (p 1 = p) */
                if (a->dropout != 0) {
                    mask_row(&mask, a, b, h, i, n, pz);
                    for (int j = 0; j < n; j += 4)
                        wasm_v128_store(pz + j, wasm_f32x4_mul(wasm_v128_load(p + j), wasm_v128_load(pz + j)));
                }
                gather(O(a, o, b, h, i), 1, a->dropout != 0 ? pz : p, 1, V(a, v, b, h, 0), a->v_ld, n, hd, p, NULL, 0);
            }
        }
}

/* as ref_attention_backward (see there for the math), one head of one
 * item at a time: every query's dot products and one call of exp for all
 * its weights, then dq query by query and dk, dv key by key, each sum in
 * the reference's order (dq_i over j, dk_j and dv_j over i) */
void ag_wasm_attention_backward(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v,
                                const ag_real *o, const ag_real *do_, const ag_real *lse, const ag_real *keep,
                                ag_real *dq, ag_real *dk, ag_real *dv, int assign)
{
    if (reference_only(a)) {
        ag_kernels_reference.attention_backward(a, q, k, v, o, do_, lse, keep, dq, dk, dv, assign);
        return;
    }
    const int T4 = padded(a->Tk), hd = a->hd, Tq = a->Tq;
    float *kt = ag_wasm_scratch(AG_WASM_ATTENTION, scratch_bytes(a));
    float *vt = kt + (size_t)hd * T4, *S = vt + (size_t)hd * T4, *P = S + (size_t)Tq * T4;
    float *DS = P + (size_t)Tq * T4;
    double *arg = (double *)(DS + (size_t)Tq * T4), *ex = arg + (size_t)Tq * T4;
    int *n_of = (int *)(ex + (size_t)Tq * T4);
    float *z = (float *)(n_of + Tq) + Tq;       /* one query's dropout multipliers (past the forward's maxima) */
    mask_walk mask = mask_start(a);
    if (assign)
        for (int b = 0; b < a->B; b++)
            for (int h = 0; h < a->H; h++) {
                for (int i = 0; i < Tq; i++)
                    memset(Q(a, dq, b, h, i), 0, (size_t)hd * sizeof(ag_real));
                for (int j = 0; j < a->Tk; j++) {
                    memset(K(a, dk, b, h, j), 0, (size_t)hd * sizeof(ag_real));
                    memset(V(a, dv, b, h, j), 0, (size_t)hd * sizeof(ag_real));
                }
            }
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->H; h++) {
            transpose(K(a, k, b, h, 0), a->k_ld, a->Tk, hd, kt);
            transpose(V(a, v, b, h, 0), a->v_ld, a->Tk, hd, vt);
            const ag_real *lse_bh = lse + ((long)b * a->H + h) * Tq;
            size_t at = 0;
            for (int i = 0; i < Tq; i++)
                n_of[i] = lse_bh[i] == -INFINITY ? 0 : seen(a, i);  /* no visible key: nothing flows */
            all_dots(Q(a, q, b, h, 0), a->q_ld, Tq, n_of, kt, T4, hd, S);
            all_dots(O(a, do_, b, h, 0), a->o_ld, Tq, n_of, vt, T4, hd, P);
            for (int i = 0; i < Tq; i++) {
                exp_args(S + (size_t)i * T4, a->scale, lse_bh[i], n_of[i], arg + at);
                at += (size_t)padded(n_of[i]);
            }
            ag_math_exp_n(arg, ex, at);
            at = 0;
            for (int i = 0; i < Tq; i++) {
                const int n = n_of[i];
                if (n == 0)
                    continue;
                const ag_real *doi = O(a, do_, b, h, i), *oi = O(a, o, b, h, i);
                ag_real D = 0;
                for (int c = 0; c < hd; c++)
                    D += doi[c] * oi[c];
                float *p = P + (size_t)i * T4, *ds = DS + (size_t)i * T4;
                /* dp_j = z_j dot(do_i, v_j), ds_j = p_j (dp_j - D) scale, and p_j z_j for dv;
                 * without dropout z_j = 1, and z_j x = x */
                const v128_t Dv = wasm_f32x4_splat(D), scale = wasm_f32x4_splat(a->scale);
                if (a->dropout != 0)
                    mask_row(&mask, a, b, h, i, n, z);
                for (int j = 0; j < n; j += 4) {
                    v128_t pj = ag_wasm_narrow(wasm_v128_load(ex + at + j), wasm_v128_load(ex + at + j + 2));
                    v128_t dp = wasm_v128_load(p + j);
                    if (a->dropout != 0) {
                        const v128_t zj = wasm_v128_load(z + j);
                        dp = wasm_f32x4_mul(zj, dp);
                        wasm_v128_store(p + j, wasm_f32x4_mul(pj, zj));
                    } else
                        wasm_v128_store(p + j, pj);
                    wasm_v128_store(ds + j, wasm_f32x4_mul(wasm_f32x4_mul(pj, wasm_f32x4_sub(dp, Dv)), scale));
                }
                at += (size_t)padded(n);
                gather(Q(a, dq, b, h, i), 0, ds, 1, K(a, k, b, h, 0), a->k_ld, n, hd, NULL, NULL, 0);
            }
            for (int j = 0; j < a->Tk; j++)
                key_sums(V(a, dv, b, h, j), K(a, dk, b, h, j), P + j, DS + j, T4, O(a, do_, b, h, 0), a->o_ld,
                         Q(a, q, b, h, 0), a->q_ld, Tq, hd, n_of, j);
        }
}
#endif
