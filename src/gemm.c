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
 * Loop structure (Goto/BLIS style, row-major):
 *
 *   for each column chunk jc of NC_PANELS*NR columns
 *     for each row chunk ic of MC_PANELS*MR rows
 *       for each K block pc (sizes depend only on K)
 *         pack op(A)[ic.., pc..] into MR-row panels  (A~[k][i], k-major)
 *         pack op(B)[pc.., jc..] into NR-column panels (B~[k][j])
 *         for each work item (a tile of row panels x column panels)
 *           for each column panel      -- B~ panel (kc x NR) stays in L1
 *             for each row panel       -- A~ item (rows x kc) stays in L2
 *               C[MR,NR] (+)= A~ panel * B~ panel     (micro-kernel)
 *
 * Packing absorbs both transpose flags, so one micro-kernel serves all four
 * cases.  Threads share the packed panels and split the work items; each C
 * element is still summed by one thread, k = 0..K-1 in order, block by
 * block, with block sizes that depend only on K.  The result is therefore
 * bitwise independent of the thread count and of scheduling.
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
#define GEMM_VLEN (GEMM_VEC_BYTES / (int)sizeof(ag_real))
#define KC_MAX 256         /* K block: a kc x NR panel of B~ is 32 KB (float) */
#define MC_PANELS 96       /* row chunk packed at once: 1152 rows (float, AVX-512) */
#define NC_PANELS 64       /* column chunk packed at once: 2048 columns */
#define ITEM_ROW_PANELS 12 /* a work item spans at most 144 rows ...          */
#define ITEM_COL_PANELS 16 /* ... and 512 columns                             */
/* Below this many multiply-adds a product runs on one thread: waking the
 * other threads and the barriers cost more than they save. */
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

/* C~[MR,NR] = A~ B~ over kc steps, then C = C~ (accumulate == 0) or
 * C += C~.  A~ is k-major MR-wide, B~ is k-major NR-wide. */
KERNEL_ATTR
static void micro_kernel(int kc, const ag_real *restrict a, const ag_real *restrict b,
                         ag_real *restrict c, long ldc, int accumulate)
{
    ag_real acc[MR][NR];
    UNROLL_ROWS
    for (int i = 0; i < MR; i++) {
        VEC_LOOP
        for (int j = 0; j < NR; j++) acc[i][j] = 0;
    }
    for (int k = 0; k < kc; k++) {
        UNROLL_ROWS
        for (int i = 0; i < MR; i++) {
            const ag_real ai = a[i];
            VEC_LOOP
            for (int j = 0; j < NR; j++) acc[i][j] = GEMM_FMA(ai, b[j], acc[i][j]);
        }
        a += MR;
        b += NR;
    }
    if (accumulate) {
        UNROLL_ROWS
        for (int i = 0; i < MR; i++) {
            VEC_LOOP
            for (int j = 0; j < NR; j++) c[i * ldc + j] += acc[i][j];
        }
    } else {
        UNROLL_ROWS
        for (int i = 0; i < MR; i++) {
            VEC_LOOP
            for (int j = 0; j < NR; j++) c[i * ldc + j] = acc[i][j];
        }
    }
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

/* ---- one product -------------------------------------------------------- */

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

/* Packed-panel space one product needs, in elements: A~ for one row chunk,
 * then B~ for one column chunk, each starting on a 64-byte boundary. */
static size_t round_up64(size_t n)
{
    const size_t per_line = 64 / sizeof(ag_real);
    return (n + per_line - 1) / per_line * per_line;
}

static size_t panels_a_len(int M, int K)
{
    return round_up64((size_t)k_block(K) * MR * min_int(ceil_div(M, MR), MC_PANELS));
}

static size_t panels_len(int M, int N, int K)
{
    return panels_a_len(M, K) +
           round_up64((size_t)k_block(K) * NR * min_int(ceil_div(N, NR), NC_PANELS));
}

/* Split rp row panels x cp column panels into a grid of work items, at most
 * ITEM_*_PANELS each way, with enough items (a multiple of nth where the
 * panels allow) to keep nth threads evenly busy. */
static void plan_items(int rp, int cp, int nth, int *rows, int *cols)
{
    int r = ceil_div(rp, ITEM_ROW_PANELS), c = ceil_div(cp, ITEM_COL_PANELS);
    while (nth > 1 && (r * c) % nth != 0 && r * c < 8 * nth) {
        /* split the dimension whose items are larger, if it can be split */
        if (rp / r >= cp / c && r < rp) r++;
        else if (c < cp) c++;
        else if (r < rp) r++;
        else break;
    }
    *rows = r;
    *cols = c;
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

/* Multiply the packed row panels [r0, r1) by column panels [c0, c1) of the
 * current block; (i0, j0) is the C position of panel (0, 0). */
static void run_item(const gemm_job *g, const ag_real *pa, const ag_real *pb, int kc,
                     int i0, int j0, int r0, int r1, int c0, int c1, int accumulate)
{
    ag_real tmp[MR * NR];
    for (int cpan = c0; cpan < c1; cpan++) {
        const ag_real *bp = pb + (long)cpan * kc * NR;
        int j = j0 + cpan * NR, cols = min_int(NR, g->N - j);
        for (int rpan = r0; rpan < r1; rpan++) {
            const ag_real *ap = pa + (long)rpan * kc * MR;
            int i = i0 + rpan * MR, rows = min_int(MR, g->M - i);
            ag_real *c = g->C + i * g->ldc + j;
            if (rows == MR && cols == NR) {
                micro_kernel(kc, ap, bp, c, g->ldc, accumulate);
            } else {
                micro_kernel(kc, ap, bp, tmp, NR, 0);
                store_edge(tmp, c, g->ldc, rows, cols, accumulate);
            }
        }
    }
}

/* The whole product as run by thread tid of nth (nth == 1: serially).  The
 * packed buffers pa/pb are shared by the team; barriers separate packing
 * from use.  With nth == 1 no OpenMP construct is executed, so this is also
 * safe to call from inside someone else's parallel loop. */
static void gemm_run(const gemm_job *g, ag_real *pa, ag_real *pb, int tid, int nth)
{
    const int kc_max = k_block(g->K);
    for (int jc = 0; jc < g->N; jc += NC_PANELS * NR) {
        const int nc = min_int(NC_PANELS * NR, g->N - jc), cp = ceil_div(nc, NR);
        for (int ic = 0; ic < g->M; ic += MC_PANELS * MR) {
            const int mc = min_int(MC_PANELS * MR, g->M - ic), rp = ceil_div(mc, MR);
            int ir, jr;
            plan_items(rp, cp, nth, &ir, &jr);
            for (int pc = 0; pc < g->K; pc += kc_max) {
                const int kc = min_int(kc_max, g->K - pc);
                const int accumulate = pc > 0 || !g->overwrite;
                /* pack: panels dealt to threads as contiguous ranges */
                for (int p = rp * tid / nth; p < rp * (tid + 1) / nth; p++)
                    pack_a_panel(g->trans_a, g->A, g->lda, ic + p * MR, min_int(MR, mc - p * MR),
                                 pc, kc, pa + (long)p * kc * MR);
                for (int p = cp * tid / nth; p < cp * (tid + 1) / nth; p++)
                    pack_b_panel(g->trans_b, g->B, g->ldb, pc, kc, jc + p * NR,
                                 min_int(NR, nc - p * NR), pb + (long)p * kc * NR);
                if (nth > 1) {
#pragma omp barrier
                }
                const int items = ir * jr;
                for (int t = items * tid / nth; t < items * (tid + 1) / nth; t++) {
                    int bi = t / jr, bj = t % jr;
                    run_item(g, pa, pb, kc, ic, jc, rp * bi / ir, rp * (bi + 1) / ir,
                             cp * bj / jr, cp * (bj + 1) / jr, accumulate);
                }
                if (nth > 1) {
#pragma omp barrier
                }
            }
        }
    }
}

/* ---- workspace ---------------------------------------------------------- */

/* Each calling thread keeps one 64-byte aligned buffer, grown on demand and
 * reused, so steady-state calls do not allocate.  Only the thread that calls
 * ag_gemm* allocates (before any parallel region); worker threads are handed
 * slices of it. */
static _Thread_local ag_real *ws_buf;
static _Thread_local size_t ws_cap;

static ag_real *workspace(size_t n)
{
    if (n > ws_cap) {
        size_t bytes = (n * sizeof(ag_real) + 63) / 64 * 64;
        free(ws_buf);
        ws_buf = aligned_alloc(64, bytes);
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

    ag_real *pa = workspace(panels_len(M, N, K));
    ag_real *pb = pa + panels_a_len(M, K);

#ifdef _OPENMP
    int nth = (double)M * N * K < GEMM_PARALLEL_MIN ? 1 : max_threads();
    if (nth > 1) {
#pragma omp parallel num_threads(nth)
        gemm_run(&g, pa, pb, omp_get_thread_num(), omp_get_num_threads());
        return;
    }
#endif
    gemm_run(&g, pa, pb, 0, 1);
}

void ag_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K,
                     const ag_real *A, long stride_a, int lda,
                     const ag_real *B, long stride_b, int ldb,
                     ag_real beta, ag_real *C, long stride_c, int ldc)
{
    check_args("ag_gemm_batched", trans_a, trans_b, M, N, K, lda, ldb, ldc);
    if (batch <= 0 || M <= 0 || N <= 0) return;
    int nth = max_threads();
    double work = (double)batch * M * N * K;
    if (nth > 1 && batch < nth) nth = 1;   /* few items: parallelize inside each */
    if (nth <= 1 || work < GEMM_PARALLEL_MIN || K == 0) {
        for (int b = 0; b < batch; b++)
            ag_gemm(trans_a, trans_b, M, N, K, A + b * stride_a, lda, B + b * stride_b, ldb, beta,
                    C + b * stride_c, ldc);
        return;
    }

    /* One serial product per item; each thread gets its own packing slice. */
    size_t a_len = panels_a_len(M, K), slice = panels_len(M, N, K);
    ag_real *ws = workspace(slice * (size_t)nth);
#ifdef _OPENMP
#pragma omp parallel for num_threads(nth) schedule(static)
#endif
    for (int b = 0; b < batch; b++) {
#ifdef _OPENMP
        ag_real *pa = ws + slice * (size_t)omp_get_thread_num();
#else
        ag_real *pa = ws;
#endif
        gemm_job g = {trans_a != 0, trans_b != 0, M, N, K, A + b * stride_a, B + b * stride_b,
                      lda, ldb, ldc, C + b * stride_c, 0};
        if (!gemm_prologue(M, N, K, beta, g.C, ldc, &g.overwrite))
            gemm_run(&g, pa, pa + a_len, 0, 1);
    }
}
