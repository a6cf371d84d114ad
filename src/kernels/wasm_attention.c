/*
 * wasm_attention.c - the browser build's attention forward and backward
 * (make web), with ref_attention's bits (src/reference.c): the same float
 * and double operations in the same order, laid out for SIMD128 lanes.
 *
 * A dot product q . k_j is a chain over c = 0..hd-1 that cannot be split,
 * so four keys j run side by side in f32x4 lanes, each lane that chain,
 * from k (and v) transposed per head into [hd][Tk].  An update o += p v_j
 * (and the backward's dq, dk, dv) is independent per c: four c at a time,
 * j and i in the reference's order.  exp goes through ag_math_exp_n.
 * Dropout and bf16 products take the reference kernel.
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

/* Per call: the head's keys and values transposed, [hd][Tk4] each; one
 * query's scores (float) and exp's arguments and results (double), Tk4 each. */
static size_t scratch_bytes(const ag_attn *a)
{
    size_t T4 = (size_t)padded(a->Tk);
    return 2 * (size_t)a->hd * T4 * sizeof(float) + 2 * T4 * sizeof(float) + 2 * T4 * sizeof(double);
}

size_t ag_wasm_attention_scratch(const ag_attn *a) { return scratch_bytes(a); }

static int reference_only(const ag_attn *a) { return a->dropout != 0 || a->bf16; }

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

/* s[j] = dot(x, keys j) for j < n (rounded up to four), as ref's dot:
 * sum = 0, sum += x[c] kt[c][j] for c = 0, 1, ..., hd-1, in every lane. */
static void dots(const ag_real *x, const float *kt, int T4, int hd, int n, float *s)
{
    for (int j = 0; j < n; j += 4) {
        v128_t sum = wasm_f32x4_splat(0);
        for (int c = 0; c < hd; c++)
            sum = wasm_f32x4_add(sum, wasm_f32x4_mul(wasm_f32x4_splat(x[c]), wasm_v128_load(kt + (size_t)c * T4 + j)));
        wasm_v128_store(s + j, sum);
    }
}

/* y[c] += w x[c] for c < hd, four at a time */
static void axpy(ag_real *y, ag_real w, const ag_real *x, int hd)
{
    v128_t wv = wasm_f32x4_splat(w);
    int c = 0;
    for (; c + 4 <= hd; c += 4)
        wasm_v128_store(y + c, wasm_f32x4_add(wasm_v128_load(y + c), wasm_f32x4_mul(wv, wasm_v128_load(x + c))));
    for (; c < hd; c++)
        y[c] += w * x[c];
}

/* The keys query i sees: 0..last, or none (last < 0). */
static int last_key(const ag_attn *a, int i)
{
    int last = a->causal ? i + a->q_pos0 : a->Tk - 1;
    return last < a->Tk - 1 ? last : a->Tk - 1;
}

/* as ref_attention (see there for the math) */
void ag_wasm_attention(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v, ag_real *o,
                       ag_real *lse, ag_real *weights, ag_real *keep)
{
    if (reference_only(a)) {
        ag_kernels_reference.attention(a, q, k, v, o, lse, weights, keep);
        return;
    }
    const int T4 = padded(a->Tk), hd = a->hd;
    float *kt = ag_wasm_scratch(AG_WASM_ATTENTION, scratch_bytes(a)), *s = kt + (size_t)2 * hd * T4;
    double *arg = (double *)(s + 2 * (size_t)T4), *ex = arg + T4;
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->H; h++) {
            transpose(K(a, k, b, h, 0), a->k_ld, a->Tk, hd, kt);
            for (int i = 0; i < a->Tq; i++) {
                int last = last_key(a, i), n = last + 1;    /* keys past last are -inf */
                ag_real m = -INFINITY;
                if (n > 0)
                    dots(Q(a, q, b, h, i), kt, T4, hd, n, s);
                for (int j = 0; j < a->Tk; j++) {
                    s[j] = j < n ? a->scale * s[j] : -INFINITY;
                    if (s[j] > m)
                        m = s[j];
                }
                /* the exps of keys 0..n-1 only: past them s is -inf, whose
                 * exp is 0, and adding 0 changes no sum (nor p, 0 there) */
                double sum = m == -INFINITY ? 0 : ag_wasm_sum_exp(s, n, m, arg, ex);
                ag_real l = m == -INFINITY ? -INFINITY : (ag_real)(m + ag_math_log(sum));
                lse[((long)b * a->H + h) * a->Tq + i] = l;
                for (int j = 0; j < n; j++)
                    arg[j] = (double)(s[j] - l);
                if (n > 0)
                    ag_math_exp_n(arg, ex, (size_t)n);
                ag_real *oi = O(a, o, b, h, i);
                memset(oi, 0, (size_t)hd * sizeof *oi);
                for (int j = 0; j < a->Tk; j++) {
                    ag_real p = s[j] == -INFINITY ? 0 : (ag_real)ex[j];
                    if (weights)
                        weights[(((long)b * a->H + h) * a->Tq + i) * a->Tk + j] = p;
                    if (p != 0)
                        axpy(oi, p * 1.0f, V(a, v, b, h, j), hd);   /* p z_j, z_j = 1 without dropout */
                }
            }
        }
}

/* as ref_attention_backward (see there for the math) */
void ag_wasm_attention_backward(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v,
                                const ag_real *o, const ag_real *do_, const ag_real *lse, const ag_real *keep,
                                ag_real *dq, ag_real *dk, ag_real *dv, int assign)
{
    if (reference_only(a)) {
        ag_kernels_reference.attention_backward(a, q, k, v, o, do_, lse, keep, dq, dk, dv, assign);
        return;
    }
    const int T4 = padded(a->Tk), hd = a->hd;
    float *kt = ag_wasm_scratch(AG_WASM_ATTENTION, scratch_bytes(a)), *vt = kt + (size_t)hd * T4;
    float *s = vt + (size_t)hd * T4, *dpv = s + T4;
    double *arg = (double *)(dpv + T4), *ex = arg + T4;
    if (assign)
        for (int b = 0; b < a->B; b++)
            for (int h = 0; h < a->H; h++) {
                for (int i = 0; i < a->Tq; i++)
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
            for (int i = 0; i < a->Tq; i++) {
                ag_real l = lse[((long)b * a->H + h) * a->Tq + i];
                int n = last_key(a, i) + 1;
                if (l == -INFINITY || n <= 0)
                    continue;
                const ag_real *qi = Q(a, q, b, h, i), *doi = O(a, do_, b, h, i);
                ag_real D = 0;
                const ag_real *oi = O(a, o, b, h, i);
                for (int c = 0; c < hd; c++)
                    D += doi[c] * oi[c];
                dots(qi, kt, T4, hd, n, s);
                dots(doi, vt, T4, hd, n, dpv);
                for (int j = 0; j < n; j++)
                    arg[j] = (double)(a->scale * s[j] - l);
                ag_math_exp_n(arg, ex, (size_t)n);
                ag_real *dqi = Q(a, dq, b, h, i);
                for (int j = 0; j < n; j++) {
                    ag_real p = (ag_real)ex[j], dp = 1.0f * dpv[j];   /* z_j dot(do_i, v_j), z_j = 1 */
                    ag_real ds = p * (dp - D) * a->scale, pz = p * 1.0f;
                    axpy(V(a, dv, b, h, j), pz, doi, hd);
                    axpy(dqi, ds, K(a, k, b, h, j), hd);
                    axpy(K(a, dk, b, h, j), ds, qi, hd);
                }
            }
        }
}
#endif
