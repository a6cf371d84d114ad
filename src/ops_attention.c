/*
 * ops_attention.c - multi-head scaled dot-product attention as one op, the
 * computation a model can also spell out op by op (reshape, transpose,
 * matmul, masked_fill, softmax, dropout, matmul).  Per batch item b and head h,
 * with q, k and v the head's hd columns of the packed [B,T,3d] input:
 *
 *   S = q k^T / sqrt(hd)           [T,T]   with -inf above the diagonal if causal
 *   P = softmax(S)                         row by row: the attention weights
 *   O = dropout(P) v               [T,hd]  written straight into [B,T,d]
 *
 * Each head is read in place (row stride 3d) and written in place (row
 * stride d): no split, no transpose.  The arithmetic is the attention
 * kernel's (definition: ref_attention in src/reference.c), which keeps
 * only each query's log-sum-exp for backward, not P: memory grows with T,
 * not T^2 (the fast kernel keeps P of sequences short enough to fit one
 * block, at most 64 values per query).  Dropout on P uses the multipliers
 * ag_dropout would draw from the context's generator for the [B,H,T,T]
 * weights; the op remembers the generator's state and backward regenerates
 * them.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "internal.h"

typedef struct {
    ag_attn geometry;           /* shapes, strides, scale, dropout and its generator state */
    const ag_real *qkv;         /* what the kernel read: the input, or its bf16 rounding */
    ag_real *lse;               /* [B,H,T] per query: log of the softmax denominator */
    ag_real *keep;              /* whatever else the kernel keeps for backward, or NULL */
} attn_saved;

/* At bf16 precision the products take bf16 inputs: a rounded copy of x. */
static const ag_real *rounded(ag_ctx *ctx, const ag_real *x, size_t n)
{
    ag_real *r = ag_alloc(ctx, n * sizeof(ag_real));
    ag_kern->round_bf16(x, r, n);
    return r;
}

/* The heads of a packed [B,T,3d] input, read in place, and of the [B,T,d]
 * output they are written to. */
static ag_attn self_attention(int B, int T, int d, int n_head)
{
    const int hd = d / n_head;
    return (ag_attn){
        .B = B, .H = n_head, .Tq = T, .Tk = T, .hd = hd, .q_pos0 = 0,
        .q_bs = (long)T * 3 * d, .q_ld = 3L * d, .k_bs = (long)T * 3 * d, .k_ld = 3L * d,
        .v_bs = (long)T * 3 * d, .v_ld = 3L * d, .o_bs = (long)T * d, .o_ld = d,
        .scale = (ag_real)(1.0 / sqrt((double)hd)),
    };
}

/* qkv must be [B,T,3d] with d split evenly into n_head heads. */
static void check_qkv(const char *fn, const ag_tensor *qkv, int n_head)
{
    if (qkv->ndim != 3 || n_head < 1 || qkv->shape[2] % 3 != 0 || qkv->shape[2] / 3 % n_head != 0) {
        char s[64];
        ag_error("%s: input %s is not [B,T,3d] with d divisible by %d heads", fn, ag_shape_str(qkv, s, sizeof s),
                 n_head);
    }
}

/* The kernels count their work in int: (item, query block) pairs forward,
 * items of one batch row and head backward.  B x heads x queries within
 * INT_MAX covers both; past it the input alone is over 24 GB. */
static void check_items(const char *fn, int B, int n_head, int T)
{
    if ((long long)B * n_head * T > INT_MAX)
        ag_error("%s: B %d x %d heads x %d queries = %lld is too large (at most %d)", fn, B, n_head, T,
                 (long long)B * n_head * T, INT_MAX);
}

ag_tensor *ag_attention(ag_ctx *ctx, ag_tensor *qkv, int n_head, int causal, ag_real dropout, int training,
                        ag_tensor **weights)
{
    ag_need("ag_attention", "ctx", ctx);
    ag_need_data("ag_attention", "qkv", qkv);
    check_qkv("ag_attention", qkv, n_head);
    if (!(dropout >= 0 && dropout < 1))
        ag_error("ag_attention: dropout p = %g is outside [0, 1)", (double)dropout);
    if (!ag_dropout_p_ok(dropout))
        ag_error("ag_attention: dropout p = %.17g keeps 1 - p = %g of the weights, less than the 2^-32 its 32-bit "
                 "draws can express", (double)dropout, 1 - (double)dropout);
    const int B = qkv->shape[0], T = qkv->shape[1], d = qkv->shape[2] / 3;
    check_items("ag_attention", B, n_head, T);
    ag_attn a = self_attention(B, T, d, n_head);
    a.causal = causal != 0;
    a.dropout = training ? dropout : 0;
    a.bf16 = ctx->precision == AG_BF16;
    /* an input the tape will refuse is refused before the generator moves
     * past the dropout mask of a call that did nothing */
    if (ctx->grad_enabled && qkv->requires_grad)
        ag_same_tape(ctx, AG_OP_ATTENTION, qkv);
    if (a.dropout > 0) {
        /* the mask is draws 0 .. B*H*T*T-1 from here; move the generator past them */
        a.rng = ctx->dropout_rng;
        ag_pcg32_advance(&ctx->dropout_rng, (uint64_t)B * n_head * T * T);
    }
    ag_tensor *out = ag_empty(ctx, 3, (int[]){B, T, d});
    ag_real *lse = ag_alloc(ctx, (size_t)B * n_head * T * sizeof(ag_real));
    ag_real *w = NULL;
    if (weights) {
        *weights = ag_empty(ctx, 4, (int[]){B, n_head, T, T});
        w = (*weights)->data;
    }
    const int record = ag_should_record(ctx, out, qkv, NULL, NULL);
    const size_t nkeep = record ? ag_kern->attention_keep(&a) : 0;
    ag_real *keep = nkeep ? ag_alloc(ctx, nkeep * sizeof(ag_real)) : NULL;
    const ag_real *q = a.bf16 ? rounded(ctx, qkv->data, qkv->size) : qkv->data, *k = q + d, *v = q + 2 * d;
    ag_kern->attention(&a, q, k, v, out->data, lse, w, keep);
    if (record) {
        attn_saved *sv = ag_alloc(ctx, sizeof *sv);
        sv->geometry = a;
        sv->qkv = q;
        sv->lse = lse;
        sv->keep = keep;
        ag_record(ctx, AG_OP_ATTENTION, out, qkv, NULL, NULL)->saved = sv;
    }
    return out;
}

ag_tensor *ag_attention_cached(ag_ctx *ctx, ag_tensor *qkv, int n_head, ag_tensor *k_cache, ag_tensor *v_cache,
                               int pos)
{
    ag_need("ag_attention_cached", "ctx", ctx);
    char s[64], sk[64], sv[64];
    ag_need_data("ag_attention_cached", "qkv", qkv);
    ag_need_data("ag_attention_cached", "k_cache", k_cache);
    ag_need_data("ag_attention_cached", "v_cache", v_cache);
    /* nothing is recorded: a backward would leave qkv's inputs without this
     * op's share of their gradient, and say nothing */
    if (ctx->grad_enabled && qkv->requires_grad)
        ag_error("ag_attention_cached: qkv wants a gradient, which this op does not give (it is for inference: "
                 "turn gradients off with ag_set_grad_enabled first)");
    check_qkv("ag_attention_cached", qkv, n_head);
    const int B = qkv->shape[0], T = qkv->shape[1], d = qkv->shape[2] / 3;
    check_items("ag_attention_cached", B, n_head, T);
    for (int c = 0; c < 2; c++) {
        const ag_tensor *t = c ? v_cache : k_cache;
        if (t->ndim != 3 || t->shape[0] != B || t->shape[2] != d)
            ag_error("ag_attention_cached: cache %s does not fit input %s (need [%d,S,%d])",
                     ag_shape_str(t, sk, sizeof sk), ag_shape_str(qkv, s, sizeof s), B, d);
    }
    /* one buffer for both would have the values written over the keys */
    if (k_cache->data == v_cache->data)
        ag_error("ag_attention_cached: k_cache and v_cache share their data (each needs its own)");
    if (v_cache->shape[1] != k_cache->shape[1])
        ag_error("ag_attention_cached: key cache %s and value cache %s differ", ag_shape_str(k_cache, sk, sizeof sk),
                 ag_shape_str(v_cache, sv, sizeof sv));
    const int S = k_cache->shape[1];
    if (pos < 0 || pos > S - T)
        ag_error("ag_attention_cached: positions %d..%lld do not fit a cache of %d", pos, (long long)pos + T - 1, S);
    /* the new positions' keys and values into the cache (rounded in bf16:
     * they are the products' inputs) */
    const int bf16 = ctx->precision == AG_BF16;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            const ag_real *row = qkv->data + ((size_t)b * T + t) * 3 * d;
            const size_t at = ((size_t)b * S + pos + t) * d;
            ag_real *kd = k_cache->data + at, *vd = v_cache->data + at;
            if (bf16) {
                ag_kern->round_bf16(row + d, kd, (size_t)d);
                ag_kern->round_bf16(row + 2 * d, vd, (size_t)d);
            } else {
                memcpy(kd, row + d, (size_t)d * sizeof(ag_real));
                memcpy(vd, row + 2 * d, (size_t)d * sizeof(ag_real));
            }
        }
    /* the queries read in place in qkv (row stride 3d), as ag_attention
     * reads them; the keys and values of positions 0..pos+T-1 in the caches
     * (row stride d); query 0 sits at position pos among the keys */
    const int hd = d / n_head;
    ag_attn a = {
        .B = B, .H = n_head, .Tq = T, .Tk = pos + T, .hd = hd, .causal = 1, .q_pos0 = pos,
        .bf16 = bf16,
        .q_bs = (long)T * 3 * d, .q_ld = 3L * d, .k_bs = (long)S * d, .k_ld = d, .v_bs = (long)S * d, .v_ld = d,
        .o_bs = (long)T * d, .o_ld = d, .scale = (ag_real)(1.0 / sqrt((double)hd)),
    };
    ag_tensor *out = ag_empty(ctx, 3, (int[]){B, T, d});
    ag_real *lse = ag_alloc(ctx, (size_t)B * n_head * T * sizeof(ag_real));
    const ag_real *q = bf16 ? rounded(ctx, qkv->data, qkv->size) : qkv->data;   /* the queries (all of qkv) */
    ag_kern->attention(&a, q, k_cache->data, v_cache->data, out->data, lse, NULL, NULL);
    return out;
}

/* The sizes asked about must be ones ag_attention accepts: a head count of
 * 0 divided by zero below, and a negative size wrapped to a huge one.  The
 * answers count at most ~70 values per element of [B,T,d] (a log-sum-exp
 * and up to 64 kept weights per query and head, at most d heads, the bf16
 * copies), so below 2^64 / 128 such bytes no size_t sum wraps. */
static void check_geometry(const char *fn, int B, int T, int d, int n_head)
{
    if (B < 1 || T < 1 || d < 1 || n_head < 1 || d % n_head != 0)
        ag_error("%s: B %d, T %d, d %d and %d heads (each at least 1, d divisible by the heads)", fn, B, T, d,
                 n_head);
    if ((double)B * T * d * sizeof(ag_real) > (double)SIZE_MAX / 128)
        ag_error("%s: [%d,%d,%d] is too large to count its bytes", fn, B, T, d);
}

/* What ag_attention and its backward allocate above: lse, keep, and at
 * bf16 the rounded qkv and output gradient. */
size_t ag_attention_arena_bytes(int B, int T, int d, int n_head, int precision)
{
    check_geometry("ag_attention_arena_bytes", B, T, d, n_head);
    if (precision != AG_FP32 && precision != AG_BF16)
        ag_error("ag_attention_arena_bytes: precision %d is not AG_FP32 or AG_BF16", precision);
    const ag_attn a = self_attention(B, T, d, n_head);
    size_t n = (size_t)B * n_head * T + ag_kern->attention_keep(&a);
    if (precision == AG_BF16)
        n += (size_t)B * T * 3 * d + (size_t)B * T * d;
    return n * sizeof(ag_real);
}

size_t ag_attention_scratch_bytes(int B, int T, int d, int n_head)
{
    check_geometry("ag_attention_scratch_bytes", B, T, d, n_head);
    const ag_attn a = self_attention(B, T, d, n_head);
    return ag_kern->attention_scratch(&a);
}

/* Per batch item and head, with Z the dropout multipliers, so that
 * O = (P * Z) v where * is the elementwise product (as below), dO the
 * output's gradient and D_i = dO_i . O_i, the row sums of dO * O:
 *   dv = (P * Z)^T dO,   dP = (dO v^T) * Z,   dS = P * (dP - D),
 *   dq = dS k / sqrt(hd),                     dk = dS^T q / sqrt(hd)
 * (dS is the gradient of the scaled scores S; the kernel recomputes P from
 * q, k and the saved log-sum-exp, or reads the P the fast kernel kept for a
 * short sequence; ref_attention_backward in src/reference.c derives D).  These are added
 * into dqkv's columns of q, k and v; the heads together cover every column,
 * so a new gradient buffer is stored, not added to. */
void ag_backward_attention(ag_ctx *ctx, ag_node *n)
{
    const attn_saved *sv = n->saved;
    const ag_attn *a = &sv->geometry;
    const int d = a->H * a->hd;
    int assign;
    ag_real *dqkv = ag_grad_begin(ctx, n->in[0], &assign);
    const ag_real *q = sv->qkv, *dout = a->bf16 ? rounded(ctx, n->out->grad, n->out->size) : n->out->grad;
    ag_kern->attention_backward(a, q, q + d, q + 2 * d, n->out->data, dout, sv->lse, sv->keep, dqkv, dqkv + d,
                                dqkv + 2 * d, assign);
}
