/*
 * gemm.c - the blocked matrix multiply behind every matmul and linear op.
 * Operands are packed into cache-sized panels and multiplied by a fixed-size
 * register tile written in plain C that the compiler turns into SIMD FMAs.
 */
#include "gemm.h"

#include <math.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/*
 * Loop structure (Goto/BLIS style, row-major), for one block of C:
 *
 *   for each column chunk jc of NC columns
 *     for each K block pc (block sizes depend only on K)
 *       pack op(B)[pc.., jc..] into NR-column panels B~[k][j]   (~1 MB, L2/L3)
 *       for each row chunk ic of MC rows
 *         pack op(A)[ic.., pc..] into MR-row panels A~[k][i]    (~200 KB, L2)
 *         for each column panel          -- its kc x NR B~ stays in L1
 *           for each row panel
 *             C[MR,NR] (+)= A~ panel * B~ panel      (micro-kernel)
 *
 * Packing absorbs both transpose flags, so one micro-kernel serves all four
 * cases.  Threads split C into rectangular units, each a block as above with
 * the thread's own packing buffers: no barriers inside a product, and units
 * are handed out dynamically so a thread that loses its core does not hold
 * up the others.  Each C element is summed within one unit, k = 0..K-1 in
 * order, block by block, with block sizes that depend only on K, so the
 * result is bitwise the same for any thread count and any schedule.
 */

/* Register tile MR x NR and block sizes.  With AVX-512 there are 32 vector
 * registers: 12 rows x 2 vectors = 24 accumulators, 2 for the B row, and A is
 * broadcast straight from memory.  Without it, 6 x 2 vectors fits in 16. */
#if defined(__AVX512F__)
#define GEMM_VEC_BYTES 64
#define MR 12
#else
#define GEMM_VEC_BYTES 32
#define MR 6
#endif
#define NR (2 * GEMM_VEC_BYTES / (int)sizeof(ag_real))   /* two vectors wide */
#define KC_MAX 256           /* K block: a kc x NR panel of B~ is 32 KB (float) */
#define MC (16 * MR)         /* rows of A~ packed at once: 192 (AVX-512) */
#define NC (32 * NR)         /* columns of B~ packed at once: 1024 (float, AVX-512) */
#define UNIT_ROWS (32 * MR)  /* a parallel unit is at most 384 rows ... */
#define UNIT_COLS (16 * NR)  /* ... by 512 columns, and smaller when needed */
#define UNITS_PER_THREAD 2   /* slack for threads that run at unequal speed */
/* Below this many multiply-adds a product runs on one thread: waking the
 * other threads costs more than it saves. */
#define GEMM_PARALLEL_MIN (96.0 * 96.0 * 96.0)

/* The micro-kernel's inner update c += a*b.  An explicit fma() gives one
 * rounding and vectorizes to vfmadd when the hardware has it (FP_FAST_FMA*);
 * with -std=c11 gcc would otherwise never contract a*b+c.  Without hardware
 * FMA the library call would be slow, so fall back to a separate multiply. */
#ifdef AG_DOUBLE
#ifdef FP_FAST_FMA
#define GEMM_FMA(a, b, c) fma((a), (b), (c))
#endif
#else
#ifdef FP_FAST_FMAF
#define GEMM_FMA(a, b, c) fmaf((a), (b), (c))
#endif
#endif
#ifndef GEMM_FMA
#define GEMM_FMA(a, b, c) ((a) * (b) + (c))
#endif

/* Both compilers default to 256-bit vectors on AVX-512 machines; the tile is
 * laid out for full 512-bit registers, so ask for them in the kernel only. */
#define GEMM_PRAGMA_STR(x) _Pragma(#x)
#define GEMM_PRAGMA(x) GEMM_PRAGMA_STR(x)
#if defined(__clang__) && defined(__AVX512F__)
/* -O0/-O1 skip the loop vectorizer; the request then just goes unmet. */
#pragma clang diagnostic ignored "-Wpass-failed"
#define KERNEL_ATTR __attribute__((min_vector_width(512)))
#define VEC_LOOP GEMM_PRAGMA(clang loop vectorize_width(GEMM_VLEN_LIT) interleave_count(1))
#elif defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
#define KERNEL_ATTR __attribute__((target("prefer-vector-width=512")))
#define VEC_LOOP
#else
#define KERNEL_ATTR
#define VEC_LOOP
#endif
#ifdef AG_DOUBLE
#define GEMM_VLEN_LIT 8
#else
#define GEMM_VLEN_LIT 16
#endif
/* Fully unroll the row loops so the accumulators live in registers. */
#if defined(__GNUC__)
#define UNROLL_ROWS GEMM_PRAGMA(GCC unroll 16)
#else
#define UNROLL_ROWS
#endif

#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define ALWAYS_INLINE inline
#endif

/* C~[MR,width] = A~ B~ over kc steps, then C = C~ (accumulate == 0) or
 * C += C~.  A~ is k-major MR wide; B~ is k-major NR wide, of which the first
 * `width` (a compile-time constant after inlining) columns are used. */
static ALWAYS_INLINE void tile_body(int kc, const ag_real *restrict a, const ag_real *restrict b,
                                    ag_real *restrict c, long ldc, int accumulate, const int width)
{
    ag_real acc[MR][NR];
    UNROLL_ROWS
    for (int i = 0; i < MR; i++) {
        VEC_LOOP
        for (int j = 0; j < width; j++) acc[i][j] = 0;
    }
    for (int k = 0; k < kc; k++) {
        UNROLL_ROWS
        for (int i = 0; i < MR; i++) {
            const ag_real ai = a[i];
            VEC_LOOP
            for (int j = 0; j < width; j++) acc[i][j] = GEMM_FMA(ai, b[j], acc[i][j]);
        }
        a += MR;
        b += NR;
    }
    if (accumulate) {
        UNROLL_ROWS
        for (int i = 0; i < MR; i++) {
            VEC_LOOP
            for (int j = 0; j < width; j++) c[i * ldc + j] += acc[i][j];
        }
    } else {
        UNROLL_ROWS
        for (int i = 0; i < MR; i++) {
            VEC_LOOP
            for (int j = 0; j < width; j++) c[i * ldc + j] = acc[i][j];
        }
    }
}

/* The full MR x NR tile. */
KERNEL_ATTR
static void micro_kernel(int kc, const ag_real *restrict a, const ag_real *restrict b,
                         ag_real *restrict c, long ldc, int accumulate)
{
    tile_body(kc, a, b, c, ldc, accumulate, NR);
}

/* MR x NR/2, for column panels at most half full (e.g. a head size of 16):
 * half the FMAs of the full tile on zero padding would be wasted. */
KERNEL_ATTR
static void micro_kernel_half(int kc, const ag_real *restrict a, const ag_real *restrict b,
                              ag_real *restrict c, long ldc, int accumulate)
{
    tile_body(kc, a, b, c, ldc, accumulate, NR / 2);
}

/* ---- packing ------------------------------------------------------------ */

/* One MR-row panel of op(A): rows i0.., k = p0..p0+kc-1, into dst[k*MR + i],
 * rows past M padded with zeros so the kernel always runs the full tile. */
static void pack_a_panel(int trans_a, const ag_real *A, long lda, int i0, int rows,
                         int p0, int kc, ag_real *restrict dst)
{
    if (trans_a) {
        /* A is stored [K, M]: each k is a contiguous run of rows. */
        for (int k = 0; k < kc; k++) {
            const ag_real *src = A + (long)(p0 + k) * lda + i0;
            ag_real *d = dst + (long)k * MR;
            int i = 0;
            for (; i < rows; i++) d[i] = src[i];
            for (; i < MR; i++) d[i] = 0;
        }
    } else {
        /* A is stored [M, K]: walk each row once, scattering with stride MR. */
        for (int i = 0; i < rows; i++) {
            const ag_real *src = A + (long)(i0 + i) * lda + p0;
            for (int k = 0; k < kc; k++) dst[(long)k * MR + i] = src[k];
        }
        for (int i = rows; i < MR; i++)
            for (int k = 0; k < kc; k++) dst[(long)k * MR + i] = 0;
    }
}

/* One NR-column panel of op(B): k = p0.., columns j0.., into dst[k*NR + j]. */
static void pack_b_panel(int trans_b, const ag_real *B, long ldb, int p0, int kc,
                         int j0, int cols, ag_real *restrict dst)
{
    if (!trans_b) {
        /* B is stored [K, N]: each k is a contiguous run of columns. */
        for (int k = 0; k < kc; k++) {
            const ag_real *src = B + (long)(p0 + k) * ldb + j0;
            ag_real *d = dst + (long)k * NR;
            int j = 0;
            for (; j < cols; j++) d[j] = src[j];
            for (; j < NR; j++) d[j] = 0;
        }
    } else {
        /* B is stored [N, K]: transpose in blocks of 8 k so each source row
         * is read in short contiguous runs and each dst row is written whole. */
        int k = 0;
        for (; k + 8 <= kc; k += 8) {
            ag_real *d = dst + (long)k * NR;
            for (int j = 0; j < cols; j++) {
                const ag_real *src = B + (long)(j0 + j) * ldb + p0 + k;
                for (int t = 0; t < 8; t++) d[t * NR + j] = src[t];
            }
            for (int t = 0; t < 8; t++)
                for (int j = cols; j < NR; j++) d[t * NR + j] = 0;
        }
        for (; k < kc; k++) {
            ag_real *d = dst + (long)k * NR;
            int j = 0;
            for (; j < cols; j++) d[j] = B[(long)(j0 + j) * ldb + p0 + k];
            for (; j < NR; j++) d[j] = 0;
        }
    }
}

/* ---- one block of C ----------------------------------------------------- */

typedef struct {
    int trans_a, trans_b, M, N, K;
    const ag_real *A, *B;
    long lda, ldb, ldc;
    ag_real *C;
    int overwrite;     /* beta == 0: the first K block stores instead of adding */
} gemm_job;

static int min_int(int a, int b) { return a < b ? a : b; }
static int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* K blocks of nearly equal size (at most KC_MAX): a function of K alone, so
 * the summation order never depends on M, N or the threads. */
static int k_block(int K)
{
    int nblocks = ceil_div(K, KC_MAX);
    return ceil_div(K, nblocks);
}

/* Elements, rounded up to whole 64-byte lines so packed panels stay aligned. */
static size_t round_up64(size_t n)
{
    const size_t per_line = 64 / sizeof(ag_real);
    return (n + per_line - 1) / per_line * per_line;
}

/* Packing space for a block of at most rows x cols: A~ then B~. */
static size_t a_space(int rows, int K)
{
    return round_up64((size_t)k_block(K) * min_int(ceil_div(rows, MR) * MR, MC));
}

static size_t block_space(int rows, int cols, int K)
{
    return a_space(rows, K) + round_up64((size_t)k_block(K) * min_int(ceil_div(cols, NR) * NR, NC));
}

/* Merge a partial tile computed into tmp (leading dim NR) into C. */
static void store_edge(const ag_real *tmp, ag_real *c, long ldc, int rows, int cols, int accumulate)
{
    for (int i = 0; i < rows; i++) {
        const ag_real *t = tmp + i * NR;
        ag_real *ci = c + i * ldc;
        if (accumulate)
            for (int j = 0; j < cols; j++) ci[j] += t[j];
        else
            for (int j = 0; j < cols; j++) ci[j] = t[j];
    }
}

/* C[ic:ic+mc, jc:jc+nc] (+)= A~ B~ for one K block of size kc. */
static void macro_kernel(const gemm_job *g, const ag_real *pa, const ag_real *pb, int kc,
                         int ic, int mc, int jc, int nc, int accumulate)
{
    ag_real tmp[MR * NR];
    for (int cpan = 0; cpan * NR < nc; cpan++) {
        const ag_real *bp = pb + (long)cpan * kc * NR;
        int cols = min_int(NR, nc - cpan * NR);
        for (int rpan = 0; rpan * MR < mc; rpan++) {
            const ag_real *ap = pa + (long)rpan * kc * MR;
            int rows = min_int(MR, mc - rpan * MR);
            ag_real *c = g->C + (long)(ic + rpan * MR) * g->ldc + jc + cpan * NR;
            if (cols <= NR / 2) {
                if (rows == MR && cols == NR / 2) {
                    micro_kernel_half(kc, ap, bp, c, g->ldc, accumulate);
                } else {
                    micro_kernel_half(kc, ap, bp, tmp, NR, 0);
                    store_edge(tmp, c, g->ldc, rows, cols, accumulate);
                }
            } else if (rows == MR && cols == NR) {
                micro_kernel(kc, ap, bp, c, g->ldc, accumulate);
            } else {
                micro_kernel(kc, ap, bp, tmp, NR, 0);
                store_edge(tmp, c, g->ldc, rows, cols, accumulate);
            }
        }
    }
}

/* The product restricted to rows [i0, i1) and columns [j0, j1) of C, run
 * serially with packing space ws (block_space of the block's size). */
static void gemm_block(const gemm_job *g, int i0, int i1, int j0, int j1, ag_real *ws)
{
    const int kc_max = k_block(g->K);
    ag_real *pa = ws, *pb = ws + a_space(i1 - i0, g->K);
    for (int jc = j0; jc < j1; jc += NC) {
        const int nc = min_int(NC, j1 - jc);
        for (int pc = 0; pc < g->K; pc += kc_max) {
            const int kc = min_int(kc_max, g->K - pc);
            const int accumulate = pc > 0 || !g->overwrite;
            for (int p = 0; p * NR < nc; p++)
                pack_b_panel(g->trans_b, g->B, g->ldb, pc, kc, jc + p * NR,
                             min_int(NR, nc - p * NR), pb + (long)p * kc * NR);
            for (int ic = i0; ic < i1; ic += MC) {
                const int mc = min_int(MC, i1 - ic);
                for (int p = 0; p * MR < mc; p++)
                    pack_a_panel(g->trans_a, g->A, g->lda, ic + p * MR, min_int(MR, mc - p * MR),
                                 pc, kc, pa + (long)p * kc * MR);
                macro_kernel(g, pa, pb, kc, ic, mc, jc, nc, accumulate);
            }
        }
    }
}

/* ---- parallel units ----------------------------------------------------- */

/* Split C into r x c units on panel boundaries: at most UNIT_ROWS x UNIT_COLS,
 * and cut further (the longer side first) until there are UNITS_PER_THREAD
 * per thread or the panels run out.  Unit (bi, bj) covers row panels
 * [rp*bi/r, rp*(bi+1)/r), likewise columns. */
typedef struct {
    int rp, cp, r, c;
} unit_plan;

static unit_plan plan_units(int M, int N, int nth)
{
    unit_plan u = {ceil_div(M, MR), ceil_div(N, NR), 0, 0};
    u.r = ceil_div(u.rp, UNIT_ROWS / MR);
    u.c = ceil_div(u.cp, UNIT_COLS / NR);
    while (u.r * u.c < UNITS_PER_THREAD * nth) {
        int can_r = u.rp / (u.r + 1) >= 2, can_c = u.cp / (u.c + 1) >= 1;
        int rows = u.rp / u.r * MR, cols = u.cp / u.c * NR;
        if (can_r && (rows >= cols || !can_c)) u.r++;
        else if (can_c) u.c++;
        else break;
    }
    return u;
}

static void run_unit(const gemm_job *g, const unit_plan *u, int t, ag_real *ws)
{
    int bi = t / u->c, bj = t % u->c;
    int i0 = u->rp * bi / u->r * MR, i1 = min_int(g->M, u->rp * (bi + 1) / u->r * MR);
    int j0 = u->cp * bj / u->c * NR, j1 = min_int(g->N, u->cp * (bj + 1) / u->c * NR);
    gemm_block(g, i0, i1, j0, j1, ws);
}

/* ---- workspace ---------------------------------------------------------- */

/* Each calling thread keeps one 64-byte aligned buffer, grown on demand and
 * reused, so steady-state calls do not allocate.  Only the thread that calls
 * ag_gemm* allocates (before any parallel region); the team's threads each
 * get a slice of it. */
static _Thread_local ag_real *ws_buf;
static _Thread_local size_t ws_cap;

static ag_real *workspace(size_t n)
{
    if (n > ws_cap) {
        size_t bytes = n * sizeof(ag_real);
        free(ws_buf);
        ws_buf = aligned_alloc(64, bytes);   /* n is whole 64-byte lines */
        ws_cap = ws_buf ? n : 0;
        if (!ws_buf) ag_error("out of memory: %zu bytes for matrix-multiply panels", bytes);
    }
    return ws_buf;
}

static int max_threads(void)
{
#ifdef _OPENMP
    return omp_in_parallel() ? 1 : omp_get_max_threads();
#else
    return 1;
#endif
}

static int thread_id(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Handles what needs no multiply: empty output, K == 0, and beta other than
 * 0 or 1 (C is scaled first, then accumulated into).  Returns 1 when the
 * product is then complete. */
static int gemm_prologue(int M, int N, int K, ag_real beta, ag_real *C, long ldc, int *overwrite)
{
    *overwrite = beta == 0;
    if (M <= 0 || N <= 0) return 1;
    if (K > 0 && (beta == 0 || beta == 1)) return 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) C[i * ldc + j] = beta == 0 ? 0 : beta * C[i * ldc + j];
    *overwrite = 0;
    return K <= 0;
}

static void check_args(const char *fn, int trans_a, int trans_b, int M, int N, int K, int lda,
                       int ldb, int ldc)
{
    if (M < 0 || N < 0 || K < 0)
        ag_error("%s: negative size %dx%dx%d", fn, M, N, K);
    if (lda < (trans_a ? M : K) || ldb < (trans_b ? K : N) || ldc < N)
        ag_error("%s: leading dimension too small (lda %d, ldb %d, ldc %d for %s%s %dx%dx%d)", fn,
                 lda, ldb, ldc, trans_a ? "T" : "N", trans_b ? "T" : "N", M, N, K);
}

void ag_gemm(int trans_a, int trans_b, int M, int N, int K,
             const ag_real *A, int lda, const ag_real *B, int ldb,
             ag_real beta, ag_real *C, int ldc)
{
    check_args("ag_gemm", trans_a, trans_b, M, N, K, lda, ldb, ldc);
    gemm_job g = {trans_a != 0, trans_b != 0, M, N, K, A, B, lda, ldb, ldc, C, 0};
    if (gemm_prologue(M, N, K, beta, C, ldc, &g.overwrite)) return;

    int nth = (double)M * N * K < GEMM_PARALLEL_MIN ? 1 : max_threads();
    unit_plan u = plan_units(M, N, nth);
    if (nth == 1 || u.r * u.c == 1) {
        gemm_block(&g, 0, M, 0, N, workspace(block_space(M, N, K)));
        return;
    }
    const size_t slice = block_space(ceil_div(u.rp, u.r) * MR, ceil_div(u.cp, u.c) * NR, K);
    ag_real *ws = workspace(slice * (size_t)nth);
    const int units = u.r * u.c;
#ifdef _OPENMP
#pragma omp parallel for num_threads(nth) schedule(dynamic)
#endif
    for (int t = 0; t < units; t++) run_unit(&g, &u, t, ws + slice * (size_t)thread_id());
}

void ag_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K,
                     const ag_real *A, long stride_a, int lda,
                     const ag_real *B, long stride_b, int ldb,
                     ag_real beta, ag_real *C, long stride_c, int ldc)
{
    check_args("ag_gemm_batched", trans_a, trans_b, M, N, K, lda, ldb, ldc);
    if (batch <= 0 || M <= 0 || N <= 0) return;
    int nth = max_threads();
    if (batch < nth) nth = 1;   /* few items: parallelize inside each instead */
    if (nth == 1 || (double)batch * M * N * K < GEMM_PARALLEL_MIN || K == 0) {
        for (int b = 0; b < batch; b++)
            ag_gemm(trans_a, trans_b, M, N, K, A + b * stride_a, lda, B + b * stride_b, ldb, beta,
                    C + b * stride_c, ldc);
        return;
    }

    /* One serial product per item; guided scheduling hands out big runs of
     * items first and small ones at the end to even out the finish. */
    const size_t slice = block_space(M, N, K);
    ag_real *ws = workspace(slice * (size_t)nth);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nth) schedule(guided)
#endif
    for (int b = 0; b < batch; b++) {
        gemm_job g = {trans_a != 0, trans_b != 0, M, N, K, A + b * stride_a, B + b * stride_b,
                      lda, ldb, ldc, C + b * stride_c, 0};
        if (!gemm_prologue(M, N, K, beta, g.C, ldc, &g.overwrite))
            gemm_block(&g, 0, M, 0, N, ws + slice * (size_t)thread_id());
    }
}
