/*
 * update.c - FAST KERNELS for the optimizer step and the reductions over
 * all parameters (definitions: ref_sgd, ref_adamw, ref_sum_squares and
 * ref_column_sums in src/reference.c).
 *
 * The updates are element by element: each parameter's new value depends
 * on its own gradient and moments only, so the loops are branch-free vector
 * code and, for large blocks, split between threads with no effect on the
 * result.  The sums run in fixed-order partial sums.
 */
#include <math.h>
#include <string.h>

#include "fast.h"

#ifdef AG_DOUBLE
#define SQRT sqrt
#else
#define SQRT sqrtf
#endif

typedef struct {
    ag_real *restrict p, *restrict buf, *restrict m, *restrict v;
    const ag_real *restrict g;
    ag_real lr, momentum, decay, b1, b2, eps, step_size, sqrt_bc2, keep;
    int first;
} update_args;

static void sgd_range(void *ctx, size_t lo, size_t hi)
{
    const update_args *u = ctx;
    ag_real *restrict p = u->p, *restrict buf = u->buf;
    const ag_real *restrict g = u->g;
    const ag_real lr = u->lr, momentum = u->momentum, decay = u->decay;
    if (momentum == 0) {
        for (size_t i = lo; i < hi; i++)
            p[i] -= lr * (g[i] + decay * p[i]);
    } else if (u->first) {
        for (size_t i = lo; i < hi; i++) {
            buf[i] = g[i] + decay * p[i];
            p[i] -= lr * buf[i];
        }
    } else {
        for (size_t i = lo; i < hi; i++) {
            buf[i] = momentum * buf[i] + (g[i] + decay * p[i]);
            p[i] -= lr * buf[i];
        }
    }
}

void ag_fast_sgd(ag_real *restrict p, const ag_real *restrict g, ag_real *restrict buf, size_t n, ag_real lr,
                 ag_real momentum, ag_real decay, int first)
{
    update_args u = { .p = p, .buf = buf, .g = g, .lr = lr, .momentum = momentum, .decay = decay, .first = first };
    ag_parallel_for(n, n, sgd_range, &u);
}

static void adamw_range(void *ctx, size_t lo, size_t hi)
{
    const update_args *u = ctx;
    ag_real *restrict p = u->p, *restrict m = u->m, *restrict v = u->v;
    const ag_real *restrict g = u->g;
    const ag_real b1 = u->b1, b2 = u->b2, eps = u->eps, step_size = u->step_size, sqrt_bc2 = u->sqrt_bc2;
    const ag_real keep = u->keep;
    for (size_t i = lo; i < hi; i++) {
        p[i] *= keep;
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        p[i] -= step_size * m[i] / (SQRT(v[i]) / sqrt_bc2 + eps);
    }
}

/* The bias corrections folded into two constants: lr m^ / (sqrt(v^) + eps)
 * = (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps). */
void ag_fast_adamw(ag_real *restrict p, const ag_real *restrict g, ag_real *restrict m, ag_real *restrict v,
                   size_t n, const ag_adamw_args *a)
{
    const double bc1 = 1 - ag_math_pow(a->beta1, (double)a->t), bc2 = 1 - ag_math_pow(a->beta2, (double)a->t);
    update_args u = { .p = p, .g = g, .m = m, .v = v, .b1 = (ag_real)a->beta1, .b2 = (ag_real)a->beta2,
                      .eps = (ag_real)a->eps, .step_size = (ag_real)(a->lr / bc1), .sqrt_bc2 = (ag_real)sqrt(bc2),
                      .keep = (ag_real)(1 - a->lr * a->decay) };
    ag_parallel_for(n, n, adamw_range, &u);
}

/* In double, in 8 running partial sums (element i goes to lane i % 8)
 * added up at the end: the order is fixed, and the loop is vector code
 * instead of one long chain of dependent additions. */
static double sum_squares_lanes(const ag_real *x, size_t n)
{
    double lane[8] = { 0 };
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            lane[l] += (double)x[i + l] * x[i + l];
    for (int l = 0; i < n; i++, l++)
        lane[l] += (double)x[i] * x[i];
    return ((lane[0] + lane[4]) + (lane[2] + lane[6])) + ((lane[1] + lane[5]) + (lane[3] + lane[7]));
}

/* At most this many pieces of at least SQ_PIECE_MIN elements each (a
 * whole number of 64-element lines): where the pieces end depends on n
 * alone. */
enum { SQ_PIECES = 256, SQ_PIECE_MIN = 16384 };

typedef struct {
    const ag_real *x;
    size_t n, piece;
    double *sums;
} squares_args;

static void sum_squares_pieces(void *ctx, size_t lo, size_t hi)
{
    const squares_args *a = ctx;
    for (size_t k = lo; k < hi; k++) {
        const size_t i0 = k * a->piece, i1 = i0 + a->piece < a->n ? i0 + a->piece : a->n;
        a->sums[k] = sum_squares_lanes(a->x + i0, i1 - i0);
    }
}

/* The whole array in pieces whose bounds depend on n alone, each summed as
 * above, shared between threads (a model's gradient: the clipping norm and
 * the step's finiteness check, every step), and the pieces' sums added in
 * order: the same bits on any number of threads. */
double ag_fast_sum_squares(const ag_real *x, size_t n)
{
    size_t piece = (n + SQ_PIECES - 1) / SQ_PIECES;
    piece = piece < SQ_PIECE_MIN ? SQ_PIECE_MIN : (piece + 63) / 64 * 64;
    const size_t pieces = n ? (n - 1) / piece + 1 : 0;
    if (pieces <= 1)
        return sum_squares_lanes(x, n);
    double sums[SQ_PIECES];
    squares_args a = { x, n, piece, sums };
    ag_parallel_for(pieces, n, sum_squares_pieces, &a);
    double s = 0;
    for (size_t k = 0; k < pieces; k++)
        s += sums[k];
    return s;
}

/* Column sums in blocks of rows.  A column's sum over the rows in row
 * order is one chain that a thread cannot start without the rows before
 * its own, so rows go in blocks whose bounds depend on the numbers of rows
 * and columns alone: block b sums its rows, in order, into a row of partial sums of
 * its own (zeroed first), and the partial sums are added to the
 * destination in block order.  Any thread may take any block: the bits do
 * not depend on the thread count, and the kernels that sum a gradient over
 * rows while they write it (GELU's bias, layer norm's weight and bias) get
 * the bits of this one without a second pass over what they wrote. */
size_t ag_fast_row_block(size_t rows, size_t cols)
{
    size_t b = (rows + AG_ROW_BLOCKS - 1) / AG_ROW_BLOCKS;
    b = b < AG_ROW_BLOCK_MIN ? AG_ROW_BLOCK_MIN : b;
    /* at most AG_ROW_PARTIALS partial sums in all (a wide row, a large
     * vocabulary's, takes fewer blocks: the buffer is kept) */
    const size_t most = cols ? (AG_ROW_PARTIALS / cols ? AG_ROW_PARTIALS / cols : 1) : AG_ROW_BLOCKS;
    if ((rows + b - 1) / b > most)
        b = (rows + most - 1) / most;
    return b;
}

typedef struct {
    const ag_real *x;
    size_t rows, cols, block;
    ag_real *dst;
} column_args;

/* dst[k] += partials[b][k] for b in order: columns lo..hi-1 */
static void add_partials_range(void *ctx, size_t lo, size_t hi)
{
    const column_args *c = ctx;
    ag_real *restrict dst = c->dst;
    for (size_t b = 0; b < c->rows; b++) {
        const ag_real *restrict p = c->x + b * c->cols;
        for (size_t k = lo; k < hi; k++)
            dst[k] += p[k];
    }
}

void ag_fast_add_partials(const ag_real *partials, size_t blocks, size_t cols, ag_real *dst)
{
    column_args c = { partials, blocks, cols, 0, dst };
    ag_parallel_for(cols, blocks * cols, add_partials_range, &c);
}

/* blocks lo..hi-1: each one's partial sums */
static void column_sums_blocks(void *ctx, size_t lo, size_t hi)
{
    const column_args *c = ctx;
    const size_t cols = c->cols;
    for (size_t b = lo; b < hi; b++) {
        ag_real *restrict p = c->dst + b * cols;
        const size_t r0 = b * c->block, r1 = r0 + c->block < c->rows ? r0 + c->block : c->rows;
        memset(p, 0, cols * sizeof *p);
        for (size_t r = r0; r < r1; r++) {
            const ag_real *restrict xr = c->x + r * cols;
            for (size_t k = 0; k < cols; k++)
                p[k] += xr[k];
        }
    }
}

static _Thread_local ag_scratch column_partials;

void ag_fast_column_sums(const ag_real *x, size_t rows, size_t cols, ag_real *dst)
{
    if (rows == 0 || cols == 0)
        return;
    const size_t block = ag_fast_row_block(rows, cols), blocks = (rows + block - 1) / block;
    ag_real *partials = ag_scratch_get(&column_partials, blocks * cols * sizeof(ag_real), "column sums' partial sums");
    column_args c = { x, rows, cols, block, partials };
    ag_parallel_for(blocks, rows * cols, column_sums_blocks, &c);
    ag_fast_add_partials(partials, blocks, cols, dst);
}
