/*
 * reference.c - the definition of every kernel in kernels.h, written to be
 * read: scalar loops in the order the math is written, no vector code, no
 * threads.  This is the place to learn what the engine computes; the files
 * in src/kernels/ compute the same, fast (tests/test_kernels.c holds them
 * to it).  `make REFERENCE=1` builds attograd from this file alone.
 *
 * Shape comments name each buffer's layout: [rows,D] is row-major, element
 * (r, c) at r*D + c.  Every backward restates the forward line it
 * differentiates.  Sums that feed a division or a log run in double.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* ---- matrix multiply ---------------------------------------------------- */

/* Element (i, k) of op(A) and (k, j) of op(B), whichever way they are stored. */
static ag_real op_a(const ag_real *A, int lda, int trans_a, int i, int k)
{
    return trans_a ? A[(long)k * lda + i] : A[(long)i * lda + k];
}

static ag_real op_b(const ag_real *B, int ldb, int trans_b, int k, int j)
{
    return trans_b ? B[(long)j * ldb + k] : B[(long)k * ldb + j];
}

/* C[M,N] = beta C + op(A)[M,K] op(B)[K,N]:  C[i][j] = beta C[i][j] + sum_k op(A)[i][k] op(B)[k][j] */
static void ref_gemm(int trans_a, int trans_b, int M, int N, int K, const ag_real *A, int lda, const ag_real *B,
                     int ldb, ag_real beta, ag_real *C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            ag_real sum = 0;
            for (int k = 0; k < K; k++)
                sum += op_a(A, lda, trans_a, i, k) * op_b(B, ldb, trans_b, k, j);
            ag_real *c = &C[(long)i * ldc + j];
            *c = beta == 0 ? sum : beta * *c + sum;     /* beta 0 ignores C, even a NaN in it */
        }
}

static void ref_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K, const ag_real *A,
                             long stride_a, int lda, const ag_real *B, long stride_b, int ldb, ag_real beta,
                             ag_real *C, long stride_c, int ldc)
{
    for (int b = 0; b < batch; b++)
        ref_gemm(trans_a, trans_b, M, N, K, A + b * stride_a, lda, B + b * stride_b, ldb, beta, C + b * stride_c,
                 ldc);
}

/* The plain loops need no buffer of their own. */
static size_t ref_gemm_scratch(int M, int N, int K)
{
    (void)M, (void)N, (void)K;
    return 0;
}

/* ---- softmax ------------------------------------------------------------ */

/* Over one row of n elements s apart: its maximum m (-inf for a row of
 * all -inf, every key masked) and sum_k exp(x_k - m).  With them
 *   softmax_k     = exp(x_k - m) / sum
 *   log_softmax_k = (x_k - m) - log sum
 * Subtracting m changes nothing mathematically, keeps exp from
 * overflowing, and (x_k - m) - log sum keeps the digits that
 * x_k - (m + log sum) would round away when |m| is large. */
static double sum_exp(const ag_real *x, size_t n, size_t s, ag_real *m)
{
    *m = -INFINITY;
    for (size_t k = 0; k < n; k++)
        if (x[k * s] > *m)
            *m = x[k * s];
    double sum = 0;
    for (size_t k = 0; k < n && *m != -INFINITY; k++)
        sum += ag_math_exp((double)(x[k * s] - *m));
    return sum;
}

/* x, y: [outer, n, inner]; one row is the n elements (o, 0..n-1, i), inner
 * apart.  softmax or log_softmax of each row; a fully masked row gives
 * zeros (log_softmax: -inf), never NaN. */
static void ref_softmax(const ag_real *x, ag_real *y, size_t outer, size_t n, size_t inner, int log_out)
{
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            const ag_real *xr = x + o * n * inner + i;
            ag_real *yr = y + o * n * inner + i, m;
            double sum = sum_exp(xr, n, inner, &m);
            for (size_t k = 0; k < n; k++) {
                if (m == -INFINITY)
                    yr[k * inner] = log_out ? -INFINITY : 0;
                else if (log_out)
                    yr[k * inner] = (ag_real)((xr[k * inner] - m) - ag_math_log(sum));
                else
                    yr[k * inner] = (ag_real)(ag_math_exp((double)(xr[k * inner] - m)) / sum);
            }
        }
}

/* forward was:  y_k = exp(x_k) / sum_j exp(x_j),  so  dy_j/dx_k = y_j ([j = k] - y_k)  and
 *     dx_k += sum_j dy_j y_j ([j = k] - y_k) = y_k (dy_k - sum_j dy_j y_j).
 * forward was:  y_k = x_k - log sum_j exp(x_j),  so  dx_k += dy_k - softmax_k sum_j dy_j,
 *     with softmax_k = exp(y_k).  An output of -inf came from a masked input:
 *     a constant, which gets no gradient (this covers fully masked rows too). */
static void ref_softmax_backward(const ag_real *y, const ag_real *dy, ag_real *dx, size_t outer, size_t n,
                                 size_t inner, int log_out)
{
    for (size_t o = 0; o < outer; o++)
        for (size_t i = 0; i < inner; i++) {
            size_t base = o * n * inner + i;
            const ag_real *yr = y + base, *dyr = dy + base;
            ag_real *dxr = dx + base;
            double sum = 0;
            for (size_t k = 0; k < n; k++) {
                if (log_out)
                    sum += yr[k * inner] == -INFINITY ? 0 : dyr[k * inner];
                else
                    sum += (double)dyr[k * inner] * yr[k * inner];
            }
            for (size_t k = 0; k < n; k++) {
                ag_real yk = yr[k * inner], dyk = dyr[k * inner];
                if (log_out)
                    dxr[k * inner] += yk == -INFINITY ? 0 : dyk - (ag_real)(ag_math_exp((double)yk) * sum);
                else
                    dxr[k * inner] += yk * (dyk - (ag_real)sum);
            }
        }
}

/* ---- cross-entropy ------------------------------------------------------ */

/* logits, prob: [rows,V]; target, loss: [rows].
 *   prob[r]  = softmax(logits[r])
 *   loss[r]  = -log prob[r][t] = log sum_k exp(x_k) - x_t = (m - x_t) + log sum_k exp(x_k - m)
 * (the last form never takes the log of an underflowed probability). */
static void ref_cross_entropy(const ag_real *logits, const int32_t *target, size_t rows, int V, ag_real *prob,
                              double *loss)
{
    ref_softmax(logits, prob, rows, (size_t)V, 1, 0);
    for (size_t r = 0; r < rows; r++) {
        ag_real m;
        double sum = sum_exp(logits + r * V, (size_t)V, 1, &m);
        loss[r] = target[r] >= 0 ? (double)(m - logits[r * V + target[r]]) + ag_math_log(sum) : 0;
    }
}

/* forward was:  loss_r = log sum_k exp(x_k) - x_t,  and  d/dx_k log sum_j exp(x_j) = exp(x_k) / sum_j exp(x_j)
 * = softmax_k,  so  dloss_r/dx_k = softmax_k - [k = t]:
 *     dlogits[r][k] (+)= scale (prob[r][k] - [k = t_r]),  scale = dloss / (rows counted);
 * a row with t_r < 0 is not in the loss and gets 0. */
static void ref_cross_entropy_backward(const ag_real *prob, const int32_t *target, size_t rows, int V,
                                       ag_real scale, ag_real *dlogits, int assign)
{
    for (size_t r = 0; r < rows; r++)
        for (int k = 0; k < V; k++) {
            ag_real g = target[r] < 0 ? 0 : scale * (prob[r * V + k] - (k == target[r]));
            ag_real *d = &dlogits[r * V + k];
            *d = assign ? g : *d + g;
        }
}

/* ---- layer norm --------------------------------------------------------- */

/* x, y: [rows,D]; w, b: [D] (NULL: 1 and 0); mean, rstd: [rows].
 *   mean = sum_k x_k / D,   var = sum_k (x_k - mean)^2 / D   (biased, as PyTorch)
 *   xhat = (x - mean) rstd,  rstd = 1 / sqrt(var + eps)
 *   y    = xhat w + b */
static void ref_layer_norm(const ag_real *x, const ag_real *w, const ag_real *b, size_t rows, int D, ag_real eps,
                           ag_real *y, ag_real *mean, ag_real *rstd)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *xr = x + r * D;
        double sum = 0, sq = 0;
        for (int k = 0; k < D; k++)
            sum += xr[k];
        ag_real m = (ag_real)(sum / D);
        for (int k = 0; k < D; k++)
            sq += (double)(xr[k] - m) * (xr[k] - m);
        ag_real s = (ag_real)(1.0 / sqrt(sq / D + eps));
        mean[r] = m;
        rstd[r] = s;
        for (int k = 0; k < D; k++)
            y[r * D + k] = (xr[k] - m) * s * (w ? w[k] : 1) + (b ? b[k] : 0);
    }
}

/* forward was:  y = xhat w + b,  xhat = (x - mean) rstd;  so
 *     db_k += sum_r dy_k,   dw_k += sum_r dy_k xhat_k,
 * and with g = dy w (the gradient reaching xhat): every x_j moves the mean
 * (d mean/dx_j = 1/D) and the variance (d rstd/dx_j = -rstd^2 xhat_j / D), so
 *     dxhat_k/dx_j = rstd ([k = j] - 1/D - xhat_k xhat_j / D)
 * and dx_j = sum_k g_k dxhat_k/dx_j:
 *     dx = rstd (g - mean(g) - xhat mean(g xhat))     (means over the row) */
static void ref_layer_norm_backward(const ag_real *x, const ag_real *w, const ag_real *mean, const ag_real *rstd,
                                    const ag_real *dy, size_t rows, int D, ag_real *dx, int assign, ag_real *dw,
                                    ag_real *db)
{
    for (size_t r = 0; r < rows; r++) {
        const ag_real *xr = x + r * D, *dyr = dy + r * D;
        double sum_g = 0, sum_gx = 0;
        for (int k = 0; k < D; k++) {
            ag_real xhat = (xr[k] - mean[r]) * rstd[r], g = dyr[k] * (w ? w[k] : 1);
            sum_g += g;
            sum_gx += (double)g * xhat;
            if (dw)
                dw[k] += dyr[k] * xhat;
            if (db)
                db[k] += dyr[k];
        }
        if (!dx)
            continue;
        ag_real mean_g = (ag_real)(sum_g / D), mean_gx = (ag_real)(sum_gx / D);
        for (int k = 0; k < D; k++) {
            ag_real xhat = (xr[k] - mean[r]) * rstd[r], g = dyr[k] * (w ? w[k] : 1);
            ag_real d = rstd[r] * (g - mean_g - xhat * mean_gx);
            dx[r * D + k] = assign ? d : dx[r * D + k] + d;
        }
    }
}

/* ---- GELU --------------------------------------------------------------- */

/* x, y: [rows,cols]; b: [cols] (NULL: none).  x is ag_gelu's input (no
 * bias), or ag_linear_gelu's product x W^T before its bias:
 *   h = x + b,   y = gelu(h) = h Phi(h) = h/2 (1 + erf(h / sqrt 2)),
 * Phi the standard normal cdf. */
static void ref_gelu(const ag_real *x, const ag_real *b, size_t rows, size_t cols, ag_real *y, void *keep)
{
    (void)keep;     /* nothing kept: the backward computes erf again */
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            ag_real h = b ? x[r * cols + c] + b[c] : x[r * cols + c];
            y[r * cols + c] = (ag_real)(0.5 * h * (1 + ag_math_erf(h / sqrt(2.0))));
        }
}

/* forward was:  y = h Phi(h),  h = x + b,  so  dy/dh = Phi(h) + h phi(h),
 * phi(h) = exp(-h^2/2) / sqrt(2 pi), and with dh = dy (Phi(h) + h phi(h)):
 *     dx (+)= dh,   db_c += sum over rows of dh_c   (dy, dx: [rows,cols]; db: [cols]) */
static void ref_gelu_backward(const ag_real *x, const ag_real *b, const void *keep, const ag_real *dy, size_t rows,
                              size_t cols, ag_real *dx, int assign, ag_real *db)
{
    (void)keep;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            size_t i = r * cols + c;
            ag_real h = b ? x[i] + b[c] : x[i];
            double cdf = 0.5 * (1 + ag_math_erf(h / sqrt(2.0)));
            double pdf = ag_math_exp(-0.5 * h * h) / sqrt(2 * 3.14159265358979323846);
            ag_real dh = (ag_real)(dy[i] * (cdf + h * pdf));
            dx[i] = assign ? dh : dx[i] + dh;
            if (db)
                db[c] += dh;
        }
}

static size_t ref_gelu_keep(size_t n)
{
    (void)n;
    return 0;
}

static int ref_gelu_keep_in_x(void) { return 0; }

/* ---- attention ---------------------------------------------------------- */

/* Where query i, key j, value j and output i of item b, head h live. */
#define Q(a, q, b, h, i) ((q) + (b) * (a)->q_bs + (i) * (a)->q_ld + (h) * (a)->hd)
#define K(a, k, b, h, j) ((k) + (b) * (a)->k_bs + (j) * (a)->k_ld + (h) * (a)->hd)
#define V(a, v, b, h, j) ((v) + (b) * (a)->v_bs + (j) * (a)->v_ld + (h) * (a)->hd)
#define O(a, o, b, h, i) ((o) + (b) * (a)->o_bs + (i) * (a)->o_ld + (h) * (a)->hd)

static ag_real dot(const ag_real *x, const ag_real *y, int n)
{
    ag_real s = 0;
    for (int c = 0; c < n; c++)
        s += x[c] * y[c];
    return s;
}

/* x as a product's input at the attention's precision: rounded to bf16 in
 * mixed precision, else itself. */
static ag_real product_input(const ag_attn *a, ag_real x)
{
#ifndef AG_DOUBLE
    if (a->bf16)
        return ag_bf16_round(x);
#else
    (void)a;
#endif
    return x;
}

/* The dropout multipliers z[0..Tk) of query i of item (b, h): draws
 * ((b*H + h)*Tq + i)*Tk + 0.. of the generator, as ag_dropout would draw
 * them for the [B,H,Tq,Tk] weights.  All ones without dropout. */
static void dropout_row(const ag_attn *a, int b, int h, int i, ag_real *z)
{
    if (a->dropout == 0) {
        for (int j = 0; j < a->Tk; j++)
            z[j] = 1;
        return;
    }
    const uint32_t threshold = ag_dropout_threshold(a->dropout);
    const ag_real scale = ag_dropout_scale(a->dropout);
    ag_pcg32 g = a->rng;
    ag_pcg32_advance(&g, (((uint64_t)b * a->H + h) * a->Tq + i) * a->Tk);
    for (int j = 0; j < a->Tk; j++)
        z[j] = ag_dropout_multiplier(ag_pcg32_next(&g), threshold, scale);
}

/* For item b, head h and query i (q_i, k_j, v_j, o_i: the head's hd values
 * where ag_attn's strides put them; for ag_attention, thirds of the rows of
 * qkv [B,T,3d], and rows of o [B,T,d]), in the tutorials' words s_j are the
 * attention scores, p_ij the attention weights and o_i the context vector:
 *   s_j    = scale q_i . k_j                   for each key j visible to i,
 *                                              scale = 1/sqrt(hd); a hidden
 *                                              key (causal: j > i + q_pos0)
 *                                              gets -inf (masked_fill's -inf)
 *   m      = max_j s_j,   sum = sum_j exp(s_j - m)      (in double)
 *   p_ij   = exp(s_j - m) / sum                the softmax weights, as ref_softmax's; hidden keys get 0
 *   lse_i  = log sum_j exp(s_j) = m + log sum  (for backward)
 *   o_i    = sum_j p_ij z_ij v_j               z: the dropout multipliers
 * The weights divide by the sum itself, not exp(s_j - lse_i): lse_i
 * rounded to a float is off by up to half its ulp (2^-11 at scores near
 * 1e4), which every weight would take as a common relative error, so
 * they would not sum to 1.  Nothing of size Tq x Tk is kept: backward
 * recomputes p from lse.  In
 * mixed precision (a->bf16) q, k, v arrive rounded to bf16, and so does
 * each p_ij z_ij before it multiplies v_j. */
static void ref_attention(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v, ag_real *o,
                          ag_real *lse, ag_real *weights, ag_real *keep)
{
    (void)keep;                         /* nothing is kept: backward recomputes */
    /* one query's scores, then its dropout multipliers */
    ag_real *s = malloc(2 * (size_t)a->Tk * sizeof *s);
    if (!s)
        ag_error("out of memory: attention scores of %d keys", a->Tk);
    ag_real *z = s + a->Tk;
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->H; h++)
            for (int i = 0; i < a->Tq; i++) {
                for (int j = 0; j < a->Tk; j++)
                    s[j] = ag_attn_visible(a, i, j) ? a->scale * dot(Q(a, q, b, h, i), K(a, k, b, h, j), a->hd)
                                                    : -INFINITY;
                ag_real m;
                double sum = sum_exp(s, (size_t)a->Tk, 1, &m);    /* the row's max and sum, as softmax's */
                ag_real l = m == -INFINITY ? -INFINITY : (ag_real)(m + ag_math_log(sum));   /* no key: no weights */
                lse[((long)b * a->H + h) * a->Tq + i] = l;
                dropout_row(a, b, h, i, z);
                ag_real *oi = O(a, o, b, h, i);
                for (int c = 0; c < a->hd; c++)
                    oi[c] = 0;
                for (int j = 0; j < a->Tk; j++) {
                    ag_real p = s[j] == -INFINITY ? 0 : (ag_real)(ag_math_exp((double)(s[j] - m)) / sum);
                    if (weights)
                        weights[(((long)b * a->H + h) * a->Tq + i) * a->Tk + j] = p;
                    if (p == 0)
                        continue;           /* a hidden key adds nothing (not even 0 * inf) */
                    const ag_real *vj = V(a, v, b, h, j), pz = product_input(a, p * z[j]);
                    for (int c = 0; c < a->hd; c++)
                        oi[c] += pz * vj[c];
                }
            }
    free(s);
}

/* forward was:  o_i = sum_j p_ij z_ij v_j,  p_ij = exp(s_ij - lse_i),  s_ij = scale q_i . k_j
 * (a hidden key has p_ij = 0 whatever q and k are: it passes nothing back
 * and is skipped); so, with do_i the gradient reaching o_i:
 *   dv_j  += sum_i p_ij z_ij do_i
 *   dp_ij  = z_ij (do_i . v_j)
 *   ds_ij  = p_ij (dp_ij - D_i),   D_i = sum_j p_ij dp_ij      (softmax backward, as ref_softmax_backward)
 *          and D_i = sum_j p_ij z_ij (do_i . v_j) = do_i . (sum_j p_ij z_ij v_j) = do_i . o_i
 *   dq_i  += scale sum_j ds_ij k_j
 *   dk_j  += scale sum_i ds_ij q_i
 * p is recomputed from q, k and lse (whose rounding to a float, up to
 * |lse| u, every weight of the row then shares: the bound under "Large
 * scores" in the README's "Long contexts"); in mixed precision p z and ds are
 * rounded to bf16 before they multiply (do_ arrives rounded too).
 * D_i is taken as do_i . o_i, the same
 * sum in the same order as do_i . v_j: when a query's weights are one-hot
 * (o_i = v_j exactly), dp_ij - D_i is then exactly 0 and so are dq and dk. */
static void ref_attention_backward(const ag_attn *a, const ag_real *q, const ag_real *k, const ag_real *v,
                                   const ag_real *o, const ag_real *do_, const ag_real *lse, const ag_real *keep,
                                   ag_real *dq, ag_real *dk, ag_real *dv, int assign)
{
    (void)keep;
    ag_real *z = malloc((size_t)a->Tk * sizeof *z);
    if (!z)
        ag_error("out of memory: attention backward over %d keys", a->Tk);
    if (assign) {
        /* every element is reached below by += : start the fresh buffers at 0 */
        for (int b = 0; b < a->B; b++)
            for (int h = 0; h < a->H; h++) {
                for (int i = 0; i < a->Tq; i++)
                    memset(Q(a, dq, b, h, i), 0, (size_t)a->hd * sizeof(ag_real));
                for (int j = 0; j < a->Tk; j++) {
                    memset(K(a, dk, b, h, j), 0, (size_t)a->hd * sizeof(ag_real));
                    memset(V(a, dv, b, h, j), 0, (size_t)a->hd * sizeof(ag_real));
                }
            }
    }
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->H; h++)
            for (int i = 0; i < a->Tq; i++) {
                ag_real l = lse[((long)b * a->H + h) * a->Tq + i];
                if (l == -INFINITY)
                    continue;                   /* a query with no visible key: nothing flows */
                const ag_real *qi = Q(a, q, b, h, i), *doi = O(a, do_, b, h, i);
                ag_real D = dot(doi, O(a, o, b, h, i), a->hd);
                dropout_row(a, b, h, i, z);
                for (int j = 0; j < a->Tk; j++) {
                    if (!ag_attn_visible(a, i, j))
                        continue;
                    const ag_real *kj = K(a, k, b, h, j), *vj = V(a, v, b, h, j);
                    ag_real p = (ag_real)ag_math_exp((double)(a->scale * dot(qi, kj, a->hd) - l));
                    ag_real dp = z[j] * dot(doi, vj, a->hd);
                    /* ds here is scale ds_ij: the scale of dq and dk, applied once */
                    ag_real ds = product_input(a, p * (dp - D) * a->scale), pz = product_input(a, p * z[j]);
                    ag_real *dqi = Q(a, dq, b, h, i), *dkj = K(a, dk, b, h, j), *dvj = V(a, dv, b, h, j);
                    for (int c = 0; c < a->hd; c++) {
                        dvj[c] += pz * doi[c];
                        dqi[c] += ds * kj[c];
                        dkj[c] += ds * qi[c];
                    }
                }
            }
    free(z);
}

#undef Q
#undef K
#undef V
#undef O

/* One query's scores and dropout multipliers, for the length of a call. */
static size_t ref_attention_scratch(const ag_attn *a) { return 2 * (size_t)a->Tk * sizeof(ag_real); }

static size_t ref_attention_keep(const ag_attn *a)
{
    (void)a;
    return 0;
}

/* ---- optimizers --------------------------------------------------------- */

/* torch.optim.SGD:  g' = g + decay p;  buf = momentum buf + g' (buf = g' at the first step);  p -= lr buf
 * (momentum 0: p -= lr g', no buffer read) */
static void ref_sgd(ag_real *p, const ag_real *g, ag_real *buf, size_t n, ag_real lr, ag_real momentum,
                    ag_real decay, int first)
{
    for (size_t i = 0; i < n; i++) {
        ag_real gi = g[i] + decay * p[i];
        if (momentum == 0) {
            p[i] -= lr * gi;
            continue;
        }
        buf[i] = first ? gi : momentum * buf[i] + gi;
        p[i] -= lr * buf[i];
    }
}

/* torch.optim.AdamW at step t:
 *   p -= lr decay p                                       (decoupled weight decay)
 *   m  = beta1 m + (1 - beta1) g,   v = beta2 v + (1 - beta2) g^2
 *   p -= lr m^ / (sqrt(v^) + eps),  m^ = m / (1 - beta1^t),  v^ = v / (1 - beta2^t) */
static void ref_adamw(ag_real *p, const ag_real *g, ag_real *m, ag_real *v, size_t n, const ag_adamw_args *a)
{
    double bc1 = 1 - ag_math_pow(a->beta1, (double)a->t), bc2 = 1 - ag_math_pow(a->beta2, (double)a->t);
    const ag_real beta1 = (ag_real)a->beta1, beta2 = (ag_real)a->beta2;
    for (size_t i = 0; i < n; i++) {
        p[i] -= (ag_real)(a->lr * a->decay) * p[i];
        m[i] = beta1 * m[i] + (1 - beta1) * g[i];
        v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
        double m_hat = m[i] / bc1, v_hat = v[i] / bc2;
        /* libm's sqrt, unlike its exp: IEEE rounds it correctly, so every build agrees */
        p[i] -= (ag_real)(a->lr * m_hat / (sqrt(v_hat) + a->eps));
    }
}

/* ---- reductions --------------------------------------------------------- */

static double ref_sum_squares(const ag_real *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (double)x[i] * x[i];
    return s;
}

/* x: [rows,cols];  dst[c] += sum_r x[r][c] */
static void ref_column_sums(const ag_real *x, size_t rows, size_t cols, ag_real *dst)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            dst[c] += x[r * cols + c];
}

/* ---- bf16 mixed precision ---------------------------------------------- */

/* A float's bits, sign | exponent (8) | fraction (23), read as an integer
 * are ordered like the magnitudes, so rounding to the top 16 bits is integer
 * rounding of the low 16: add half (0x8000), minus one unless the kept part
 * is odd (ties go to the even neighbour), and truncate.  A carry out of the
 * fraction moves to the next binade, and from the largest finite values to
 * the infinity pattern 0x7f80, as IEEE rounding does; subnormals round the
 * same way.  The one exception is NaN, whose payload must not carry into
 * the exponent (it could become inf): keep its top bits, set the quiet bit. */
uint16_t ag_bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float ag_bf16_to_float(uint16_t h)
{
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

float ag_bf16_round(float x) { return ag_bf16_to_float(ag_bf16_bits(x)); }

#ifndef AG_DOUBLE
/* C[M,N] = beta C + bf16(op(A)) bf16(op(B)): the inputs rounded, every
 * product and sum in fp32 (a product of two bf16 values is exact in fp32). */
static void ref_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const ag_real *A, int lda,
                          const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc)
{
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float sum = 0;
            for (int k = 0; k < K; k++)
                sum += ag_bf16_round(op_a(A, lda, trans_a, i, k)) * ag_bf16_round(op_b(B, ldb, trans_b, k, j));
            float *c = &C[(long)i * ldc + j];
            *c = beta == 0 ? sum : beta * *c + sum;
        }
}

static void ref_round_bf16(const ag_real *x, ag_real *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = ag_bf16_round(x[i]);
}

/* Plain loops run anywhere. */
static int ref_bf16_status(const char **fact)
{
    *fact = "reference";
    return AG_BF16_READY;
}
#endif

#define AG_KERNEL_REF(field, fast, ref) .field = ref,
const ag_kernels ag_kernels_reference = {.name = "reference", AG_KERNEL_LIST_ALL(AG_KERNEL_REF)};
