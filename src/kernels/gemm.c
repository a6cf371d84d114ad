/*
 * gemm.c - FAST KERNEL: the blocked matrix multiply behind every matmul and
 * linear op (the definition: ref_gemm in src/reference.c).
 * Operands are packed into cache-sized panels, or read in place when small,
 * and multiplied by register tiles written with compiler vector types.
 */
#include "cpu.h"
#include "fast.h"
#include "fastmath.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * Loop structure (Goto/BLIS style, row-major), for one block of C:
 *
 *   for each column chunk jc of nc columns
 *     for each K block pc of kc (block sizes depend only on K and the L1d)
 *       pack op(B)[pc.., jc..] into NR-column panels B~[k][j]   (L3)
 *       for each row chunk ic of mc rows
 *         pack op(A)[ic.., pc..] into MR-row panels A~[k][i]    (L2; not
 *                 when A is stored [M, K] and small: see in_place_product)
 *         for each column panel          -- its kc x NR B~ stays in L1
 *           for each row panel
 *             C[MR,NR] (+)= A~ panel * B~ panel      (micro-kernel)
 *
 * kc, mc and nc come from the caches this CPU reports, by the model in
 * "cache blocking" below.
 *
 * Packing absorbs both transpose flags, so one micro-kernel serves all four
 * cases.  Threads split C into rectangular units, each a block as above.
 * An op(B) larger than one core's L2 (and up to SHARED_B_MAX elements) is
 * packed once, by the whole team, and then only read by every unit (one
 * barrier between the two); each unit packs its own A~.  So the units
 * split C by rows alone whenever A is packed: a unit of half the columns
 * would pack its rows of A again.  (At 1024^3 on 2 threads, 2 x 2 units
 * each packing their own copied 16 MB instead of 8; dW = dy^T x of 1536 x
 * 384 x 4096, 4 units, packed its B four times.  Sharing B was 2-14%
 * faster on both, Zen 5 at a load of 5-8, fastest of 300 calls.)  An op(B)
 * that the L2 holds -- a small model's weights -- is packed by each unit
 * from cache, at the speed of a copy, for less than sharing costs: a
 * second parallel loop and its join per product, and every unit reading
 * the panels the other cores packed, whose lines they wrote last
 * (768 x 512 x 128 and the other products of a d_model 128 model on 2
 * threads, Zen 5: 8-25% faster with B packed per unit).  A larger op(B) is
 * packed per unit too, into the thread's own buffers.  A small product gets one unit per thread, so
 * thread t always gets the same
 * rows of a tall product: the rows the element-wise ops and the attention
 * op also give thread t, so they stay in its cache from one op to the next
 * (smaller units measured slower on every product of the toy model).  A
 * large product gets two units per thread, so a thread that loses its core
 * for a while does not hold up the others: ag_parallel (src/pool.c) gives a
 * unit no thread has started to whichever thread is free.  A product with a small C and a
 * long K is split along K instead (see gemm_ksplit).
 *
 * A stored [M, K] that the L2 holds is not packed at all: the row-major
 * kernel reads its MR rows in place, which saves the copy.  A
 * stored [K, M] is packed except in the products of a small transformer
 * (d_model 64..128, heads of 16..32), where A~ would serve only a few
 * column panels.  Those read B in place too when it is stored [K, N]; only
 * ragged edge panels and B^T are packed.
 *
 * Every C element is summed k = 0..K-1 in order, one fused multiply-add per
 * step, block by block with block sizes that depend only on K (and on the
 * L1d's size, the same for every thread of a process), on whichever
 * path, tile or thread: results are bitwise the same for any thread count
 * and schedule, and a batched product equals its items done one by one.
 * One path sums otherwise: a C of at most four rows times a B stored [N, K]
 * (gemm_few_rows), whose elements are lane-wise dot products, in an order
 * that again depends on K and the L1d alone.
 */

/* Register tile MR x NR.  With AVX-512 there are 32 vector registers: 12
 * rows x 2 vectors = 24 accumulators, 2 for the B row, and A is broadcast
 * straight from memory.  Without it, 6 x 2 vectors fits in 16.  The tile is
 * the largest the registers hold, on every CPU: per k it loads MR + 2 = 14
 * operands for 24 fused multiply-adds, and it needs at least (FMA latency x
 * FMAs per cycle) independent accumulators to keep the FMA units busy: 4 x 2
 * = 8 on Zen 5 and Sapphire Rapids, 4 x 1 = 4 on Zen 4, which runs a 512-bit
 * FMA as two 256-bit halves (one per cycle, not two).  24 covers all three;
 * its 14 loads per 24 FMAs fit the two loads a cycle all three can issue
 * (12 cycles of FMAs at two a cycle, 24 at one).  So halving the vector
 * width on Zen 4 would change nothing but the tile's size: the tile is
 * fixed by the vector width the build targets, and only the cache blocking
 * (gemm_blocking_for, below) is decided from what the CPU reports. */
#if defined(__AVX512F__)
#define GEMM_VEC_BYTES 64
#define MR 12
#else
#define GEMM_VEC_BYTES 32
#define MR 6
#endif
#define NR (2 * GEMM_VEC_BYTES / (int)sizeof(ag_real))   /* two vectors wide */
#define UNIT_ROWS (64 * MR)  /* a parallel unit is at most 768 rows ... */
#define UNIT_COLS (16 * NR)  /* ... by 512 columns, and smaller when needed */
/* A product below LOCAL_MAX multiply-adds gets one unit per thread (see
 * above); a larger one UNITS_PER_THREAD units per thread, which balances
 * better when a unit takes longer than the cost of moving its inputs
 * between cores.  These three were measured on Zen 5, and again on an
 * Emerald Rapids (2 cores under KVM, 48 KB L1d, 2 MB L2), where no other
 * value was 3% better: products timed alternately in one process, best of
 * 101, and the small model's training step, median of 100 alternated
 * steps.  There, 1 unit per thread made three of the small model's
 * 768-row products 2-3% faster alone but its step no faster (1.00); 3
 * units made two of them 6% slower; every product local (LOCAL_MAX
 * unbounded) left the small model's step the same (1.00), none local made
 * the toy's 1-3% slower;
 * 1 batch task per thread instead of 4 left the per-head products within
 * 2%, 16 made them 2-3% slower (as on Zen 5). */
#define LOCAL_MAX (128.0 * 128 * 128 * 4)
#define UNITS_PER_THREAD 2
#define BATCH_TASKS_PER_THREAD 4   /* see ag_fast_gemm_batched */

#define GEMM_PRAGMA_STR(x) _Pragma(#x)
#define GEMM_PRAGMA(x) GEMM_PRAGMA_STR(x)
#if defined(__clang__)
#define UNROLL_ROWS GEMM_PRAGMA(clang loop unroll(full))
#elif defined(__GNUC__)
#define UNROLL_ROWS GEMM_PRAGMA(GCC unroll 16)
#endif
#if defined(__GNUC__)
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define NOINLINE __attribute__((noinline))
#else
#define UNROLL_ROWS
#define ALWAYS_INLINE inline
#define NOINLINE
#endif

/* gcc and clang: the tile is written with vector types, so the accumulators
 * are registers by construction rather than by the grace of the optimizer
 * (at -O3 gcc would otherwise unroll the half-width tile's column loop before
 * vectorizing it, and keeps the accumulators in memory around the k loop).
 * acc += a*b must become one fused multiply-add, as AG_FMA (fast.h) writes it:
 * -std=c11 turns contraction off in gcc, so the kernels turn it back on.
 * Clang keeps vectors wider than 256 bits only where asked to. */
#if defined(__GNUC__)
#define GEMM_VECTOR_TILE 1
#if defined(__clang__)
#define GEMM_CONTRACT GEMM_PRAGMA(STDC FP_CONTRACT ON)
#define KERNEL_ATTR __attribute__((min_vector_width(GEMM_VEC_BYTES * 8)))
#else
#define GEMM_CONTRACT
#define KERNEL_ATTR __attribute__((optimize("fp-contract=fast")))
#endif
#else
#define GEMM_VECTOR_TILE 0
#define GEMM_CONTRACT
#define KERNEL_ATTR
#endif

/* C~[rows, nvec vectors] = op(A) op(B) over kc steps, then C = C~
 * (accumulate == 0) or C += C~.  Element (i, k) of the A panel is
 * a[i*a_rs + k*a_ks] and row k of the B panel starts at b + k*b_ks, so one
 * body serves packed panels and operands read in place.  rows, nvec and one
 * of the A strides are compile-time constants after inlining.  Every C
 * element is acc = fma(a_ik, b_kj, acc) for k in order, whatever the tile. */
#if GEMM_VECTOR_TILE
#define VLEN (GEMM_VEC_BYTES / (int)sizeof(ag_real))
#define PREFETCH_C_AFTER_K 64   /* a K block at most this long: C not prefetched */
typedef ag_real gemm_vec __attribute__((vector_size(GEMM_VEC_BYTES)));
/* the same, loadable and storable at any element boundary */
typedef ag_real gemm_vec_u
    __attribute__((vector_size(GEMM_VEC_BYTES), aligned(sizeof(ag_real)), may_alias));

KERNEL_ATTR
static ALWAYS_INLINE void tile_body(int kc, const ag_real *restrict a, long a_rs, long a_ks,
                                    const ag_real *restrict b, long b_ks, ag_real *restrict c,
                                    long ldc, int accumulate, const int rows, const int nvec)
{
    GEMM_CONTRACT
    const gemm_vec zero = {0};
    gemm_vec acc[MR][2];
    UNROLL_ROWS
    for (int i = 0; i < rows; i++)
        for (int v = 0; v < nvec; v++) acc[i][v] = zero;
    /* The C tile is read and written only after the k loop, and its lines
     * are far apart in time (once per K block): fetched now, for writing,
     * they arrive while the loop runs (+3-5% at 1024^3 on Zen 5).  After a
     * short K block (an attention head's products) the stores come a few
     * hundred cycles later, and the prefetches only take load slots from
     * the loop: without them 16..64 measured 1-4% faster on Zen 5.  On
     * Emerald Rapids (one thread, alternated timings) prefetching at K 16..64
     * made three head products 3-6% slower and one 2% faster, and at K
     * 128..1536 neither gained nor lost more than 2%. */
    if (kc > PREFETCH_C_AFTER_K) {
        UNROLL_ROWS
        for (int i = 0; i < rows; i++)
            for (int v = 0; v < nvec; v++) __builtin_prefetch(c + i * ldc + v * VLEN, 1, 3);
    }
    /* A read in place row-major has its rows a_rs apart: addressed from one
     * pointer, 12 rows took 12 general registers, and gcc kept the loop's
     * own (B's stride, the end) on the stack.  From two pointers, each row
     * is base + (0..5) * a_rs, which x86 addresses with three index
     * registers (a_rs, 3 a_rs, 5 a_rs, scaled by 1, 2 or 4): no spills, and
     * 64 x 32 x 32 x 16 measured 2-4% faster (Zen 5, one thread).  Packed
     * panels (a_rs 1) compile as before. */
    const ag_real *a_hi = a + (rows / 2) * a_rs;
    for (int k = 0; k < kc; k++) {
        gemm_vec bv[2];
        for (int v = 0; v < nvec; v++) bv[v] = *(const gemm_vec_u *)(b + v * VLEN);
        UNROLL_ROWS
        for (int i = 0; i < rows; i++) {
            const ag_real *ar = i < rows / 2 ? a : a_hi;
            const gemm_vec ai = ar[(i % (rows / 2)) * a_rs] - zero;   /* broadcast: x - 0 is x, even -0 */
            for (int v = 0; v < nvec; v++) acc[i][v] += ai * bv[v];
        }
        a += a_ks;
        a_hi += a_ks;
        b += b_ks;
    }
    UNROLL_ROWS
    for (int i = 0; i < rows; i++) {
        gemm_vec_u *ci = (gemm_vec_u *)(c + i * ldc);
        for (int v = 0; v < nvec; v++) {
            if (accumulate) ci[v] += acc[i][v];
            else ci[v] = acc[i][v];
        }
    }
}
#else
static ALWAYS_INLINE void tile_body(int kc, const ag_real *restrict a, long a_rs, long a_ks,
                                    const ag_real *restrict b, long b_ks, ag_real *restrict c,
                                    long ldc, int accumulate, const int rows, const int nvec)
{
    const int width = nvec * (NR / 2);
    ag_real acc[MR][NR];
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < width; j++) acc[i][j] = 0;
    for (int k = 0; k < kc; k++) {
        for (int i = 0; i < rows; i++) {
            const ag_real ai = a[i * a_rs];
            for (int j = 0; j < width; j++) acc[i][j] = AG_FMA(ai, b[j], acc[i][j]);
        }
        a += a_ks;
        b += b_ks;
    }
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < width; j++)
            c[i * ldc + j] = accumulate ? c[i * ldc + j] + acc[i][j] : acc[i][j];
}
#endif

/* The kernels: rows a multiple of MR_STEP up to MR, width NR/2 or NR (a
 * head size of 16 would waste half the FMAs of a full tile on padding), and
 * two A layouts: k-major, a[i + k*a_stride] (packed panels, stride MR, or
 * A^T read in place, stride lda), and row-major, a[i*a_stride + k] (A read
 * in place).  Kept out of line: one is picked per tile from a table, and
 * their callers lack KERNEL_ATTR. */
#define MR_STEP (MR / 3)
typedef void (*kernel_fn)(int kc, const ag_real *a, long a_stride, const ag_real *b, long b_stride,
                          ag_real *c, long ldc, int accumulate);
enum { A_KMAJOR, A_ROWMAJOR };

#define GEMM_KERNEL(name, rows, nvec, a_rs, a_ks)                                              \
    KERNEL_ATTR NOINLINE static void name(int kc, const ag_real *restrict a, long a_stride,     \
                                          const ag_real *restrict b, long b_stride,            \
                                          ag_real *restrict c, long ldc, int accumulate)       \
    {                                                                                           \
        tile_body(kc, a, a_rs, a_ks, b, b_stride, c, ldc, accumulate, rows, nvec);            \
    }
GEMM_KERNEL(kernel_k1h, MR_STEP, 1, 1, a_stride)
GEMM_KERNEL(kernel_k1f, MR_STEP, 2, 1, a_stride)
GEMM_KERNEL(kernel_k2h, 2 * MR_STEP, 1, 1, a_stride)
GEMM_KERNEL(kernel_k2f, 2 * MR_STEP, 2, 1, a_stride)
GEMM_KERNEL(kernel_k3h, MR, 1, 1, a_stride)
GEMM_KERNEL(kernel_k3f, MR, 2, 1, a_stride)
GEMM_KERNEL(kernel_r1h, MR_STEP, 1, a_stride, 1)
GEMM_KERNEL(kernel_r1f, MR_STEP, 2, a_stride, 1)
GEMM_KERNEL(kernel_r2h, 2 * MR_STEP, 1, a_stride, 1)
GEMM_KERNEL(kernel_r2f, 2 * MR_STEP, 2, a_stride, 1)
GEMM_KERNEL(kernel_r3h, MR, 1, a_stride, 1)
GEMM_KERNEL(kernel_r3f, MR, 2, a_stride, 1)

/* [layout][rows / MR_STEP - 1][width / (NR/2) - 1] */
static const kernel_fn kernels[2][3][2] = {
    {{kernel_k1h, kernel_k1f}, {kernel_k2h, kernel_k2f}, {kernel_k3h, kernel_k3f}},
    {{kernel_r1h, kernel_r1f}, {kernel_r2h, kernel_r2f}, {kernel_r3h, kernel_r3f}},
};

/* ---- packing ------------------------------------------------------------ */

/* A full row of a panel (NR or MR elements) copied as whole vectors: a loop
 * of single elements is compiled into a call to memcpy per row of the panel,
 * whose call and size dispatch cost more than the 128-byte copy itself (5%
 * of a 1024^3 product on 2 threads, Zen 5, was that call in B's packing). */
#if GEMM_VECTOR_TILE
static ALWAYS_INLINE void copy_vectors(ag_real *restrict d, const ag_real *restrict s, const int nvec)
{
    for (int v = 0; v < nvec; v++) ((gemm_vec_u *)d)[v] = ((const gemm_vec_u *)s)[v];
}
#endif

/* A stored [M, K] packs each panel as a transpose: MR rows of k-contiguous
 * elements into k-major rows of MR, and so does a B stored [N, K] (NR
 * columns).  Element by element that is MR*kc scattered stores (5% of a
 * 1024^3 product, whose A is packed, on Zen 5; about as much of a small
 * model's x W^T, whose B is W stored [N, K]); with AVX-512 in float a block
 * of 16 k is one 16 x 16 transpose in registers, 64 shuffles and 16 stores. */
#if defined(__AVX512F__) && !defined(AG_DOUBLE) && MR == 12
#include <immintrin.h>
#define PACK_TRANSPOSE 1
/* 16 k of `rows` rows (12 or 16; the others taken as zero) src[r*ld + k]
 * into dst[k*stride + r] for r < 16 under `keep` (the lanes stored). */
static ALWAYS_INLINE void transpose_16k(const float *src, long ld, const int rows, float *restrict dst, long stride,
                                        __mmask16 keep)
{
    __m512 t[16], u[16];
    const __m512 zero = _mm512_setzero_ps();
    for (int p = 0; p < 8; p++) {   /* rows 2p, 2p+1: lane L holds their k = 4L.. interleaved */
        const __m512 a = 2 * p < rows ? _mm512_loadu_ps(src + 2 * p * ld) : zero;
        const __m512 b = 2 * p + 1 < rows ? _mm512_loadu_ps(src + (2 * p + 1) * ld) : zero;
        t[2 * p] = _mm512_unpacklo_ps(a, b);
        t[2 * p + 1] = _mm512_unpackhi_ps(a, b);
    }
    for (int g = 0; g < 4; g++) {   /* u[4g+m], lane L: rows 4g..4g+3 at k = 4L+m */
        u[4 * g] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0x44);
        u[4 * g + 1] = _mm512_shuffle_ps(t[4 * g], t[4 * g + 2], 0xEE);
        u[4 * g + 2] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0x44);
        u[4 * g + 3] = _mm512_shuffle_ps(t[4 * g + 1], t[4 * g + 3], 0xEE);
    }
    for (int m = 0; m < 4; m++) {   /* k = 4L+m gathers lane L of u[m], u[4+m], u[8+m], u[12+m] */
        const __m512 v0 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0x88), v1 = _mm512_shuffle_f32x4(u[m], u[4 + m], 0xDD);
        const __m512 v2 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0x88);
        const __m512 v3 = _mm512_shuffle_f32x4(u[8 + m], u[12 + m], 0xDD);
        _mm512_mask_storeu_ps(dst + (0 + m) * stride, keep, _mm512_shuffle_f32x4(v0, v2, 0x88));
        _mm512_mask_storeu_ps(dst + (4 + m) * stride, keep, _mm512_shuffle_f32x4(v1, v3, 0x88));
        _mm512_mask_storeu_ps(dst + (8 + m) * stride, keep, _mm512_shuffle_f32x4(v0, v2, 0xDD));
        _mm512_mask_storeu_ps(dst + (12 + m) * stride, keep, _mm512_shuffle_f32x4(v1, v3, 0xDD));
    }
}

/* 16 k of a full A panel: MR = 12 rows */
static void pack_a_rows_16k(const float *src, long lda, float *restrict dst)
{
    transpose_16k(src, lda, MR, dst, MR, 0x0fff);
}

/* 16 k of a full B panel stored [N, K]: NR = 32 columns, two transposes */
_Static_assert(NR == 32, "a B panel is two 16-float vectors wide");
static void pack_b_cols_16k(const float *src, long ldb, float *restrict dst)
{
    transpose_16k(src, ldb, 16, dst, NR, 0xffff);
    transpose_16k(src + 16 * ldb, ldb, 16, dst + 16, NR, 0xffff);
}
#else
#define PACK_TRANSPOSE 0
#endif

/* One MR-row panel of op(A): rows i0.., k = p0..p0+kc-1, into dst[k*MR + i],
 * rows past M padded with zeros. */
static void pack_a_panel(int trans_a, const ag_real *A, long lda, int i0, int rows,
                         int p0, int kc, ag_real *restrict dst)
{
    if (trans_a) {
        /* A is stored [K, M]: each k is a contiguous run of rows.  A full
         * panel copies a constant MR per k, which compiles to a few vector
         * moves instead of a call to memmove. */
        if (rows == MR) {
            for (int k = 0; k < kc; k++) {
                const ag_real *src = A + (long)(p0 + k) * lda + i0;
                ag_real *d = dst + (long)k * MR;
                for (int i = 0; i < MR; i++) d[i] = src[i];
            }
            return;
        }
        for (int k = 0; k < kc; k++) {
            const ag_real *src = A + (long)(p0 + k) * lda + i0;
            ag_real *d = dst + (long)k * MR;
            int i = 0;
            for (; i < rows; i++) d[i] = src[i];
            for (; i < MR; i++) d[i] = 0;
        }
    } else {
        /* A is stored [M, K]: walk each row once, scattering with stride MR. */
        int k0 = 0;
#if PACK_TRANSPOSE
        if (rows == MR)
            for (; k0 + 16 <= kc; k0 += 16) pack_a_rows_16k(A + (long)i0 * lda + p0 + k0, lda, dst + (long)k0 * MR);
        if (k0 == kc) return;
#endif
        for (int i = 0; i < rows; i++) {
            const ag_real *src = A + (long)(i0 + i) * lda + p0;
            for (int k = k0; k < kc; k++) dst[(long)k * MR + i] = src[k];
        }
        for (int i = rows; i < MR; i++)
            for (int k = k0; k < kc; k++) dst[(long)k * MR + i] = 0;
    }
}

/* One NR-column panel of op(B): k = p0.., columns j0.., into dst[k*NR + j],
 * zero-padded to the width its kernel reads (NR/2 or NR). */
static void pack_b_panel(int trans_b, const ag_real *B, long ldb, int p0, int kc,
                         int j0, int cols, ag_real *restrict dst)
{
    const int width = cols <= NR / 2 ? NR / 2 : NR;
    if (!trans_b) {
        /* B is stored [K, N]: each k is a contiguous run of columns (a full
         * panel: a constant NR, as above). */
        if (cols == NR) {
            for (int k = 0; k < kc; k++) {
                const ag_real *src = B + (long)(p0 + k) * ldb + j0;
                ag_real *d = dst + (long)k * NR;
#if GEMM_VECTOR_TILE
                copy_vectors(d, src, 2);
#else
                for (int j = 0; j < NR; j++) d[j] = src[j];
#endif
            }
            return;
        }
        for (int k = 0; k < kc; k++) {
            const ag_real *src = B + (long)(p0 + k) * ldb + j0;
            ag_real *d = dst + (long)k * NR;
            int j = 0;
            for (; j < cols; j++) d[j] = src[j];
            for (; j < width; j++) d[j] = 0;
        }
    } else {
        /* B is stored [N, K]: transpose in blocks of 16 k in registers for
         * a full panel, else of 8 k so each source row is read in short
         * contiguous runs and each dst row is written whole. */
        int k = 0;
#if PACK_TRANSPOSE
        if (cols == NR)
            for (; k + 16 <= kc; k += 16) pack_b_cols_16k(B + (long)j0 * ldb + p0 + k, ldb, dst + (long)k * NR);
#endif
        for (; k + 8 <= kc; k += 8) {
            ag_real *d = dst + (long)k * NR;
            for (int j = 0; j < cols; j++) {
                const ag_real *src = B + (long)(j0 + j) * ldb + p0 + k;
                for (int t = 0; t < 8; t++) d[t * NR + j] = src[t];
            }
            for (int t = 0; t < 8; t++)
                for (int j = cols; j < width; j++) d[t * NR + j] = 0;
        }
        for (; k < kc; k++) {
            ag_real *d = dst + (long)k * NR;
            int j = 0;
            for (; j < cols; j++) d[j] = B[(long)(j0 + j) * ldb + p0 + k];
            for (; j < width; j++) d[j] = 0;
        }
    }
}

/* ---- cache blocking ----------------------------------------------------- */

/*
 * The block sizes follow from the data caches one core sees (cpuid, via
 * ag_cpu_cache_sizes), by one model, in the spirit of BLIS's analytical one:
 *
 *   kc  The B micro-panel (kc x NR) fills the L1d: the kernel rereads it for
 *       every row panel of a chunk (mc/MR times), so it is what L1 must keep.
 *       The A micro-panel and the C tile are used once each per kernel call
 *       and stream from L2, which easily keeps up (per k, MR + NR operands =
 *       176 bytes for 24 FMAs: ~15 bytes a cycle at two FMAs a cycle; an L2
 *       delivers 32-64).  Each K block costs a load and a store of every C
 *       tile, so kc is as large as L1 allows, not smaller; measured on Zen 5
 *       at 1024^3 and on the d_model-384 layers, kc = 384 (the B panel = 48
 *       KB = L1d) beat 192, 256 and 288 by 7-15%, and 512 (B panel past
 *       L1) by ~10%; on Emerald Rapids (48 KB too, one thread, alternated
 *       timings) 256 was 1-7% slower.  kc sets where the K blocks fall,
 *       hence the order of the sums (see k_block): it is the one block size
 *       results depend on, the same on every CPU with the same L1d.
 *   mc  The A block (mc x kc), reused by every column panel, in a quarter of
 *       L2: the B micro-panels and the C tiles stream through the same L2
 *       (and so do B's lines on their way from L3), and a block of half the
 *       L2 (336 rows on Zen 5) measured 6-9% slower than 192 rows.  (With a
 *       2 MB L2, Emerald Rapids: 336 rows, within 1% of 168 and 504.)  A
 *       multiple of MR.
 *   nc  B~ (kc x nc) in half of this core's share of L3 (the other half
 *       for A and C on their way to L2), at most NC_MAX columns; a multiple
 *       of NR.  (Under KVM an Emerald Rapids reported its whole 260 MB L3
 *       as 133 MB per logical CPU, so nc = NC_MAX there; 640, the figure
 *       of a real core's share, measured up to 5% slower on the large
 *       products and no product more than 1% faster.)
 *   A read in place: its MR rows at one k lie lda apart, and the L1d maps
 *       addresses a way's size apart (l1d / ways: 4 KB on all the CPUs
 *       below) to one set.  When lda is a multiple of a large power of two
 *       the rows crowd into few sets (lda = 1024 floats: all 12 in one), and
 *       once they take more than half a set's ways they evict the B
 *       micro-panel the kernel rereads; A is then packed (1024^3 on Zen 5:
 *       0.72x OpenBLAS in place, 0.95x packed; lda = 1536, 6 rows to a set,
 *       is as fast in place as packed).
 *
 * With AVX-512, float (NR = 32: 128 bytes of B per k):
 *
 *                      L1d          L2     L3 per core    kc    mc    nc
 *   Zen 4 (fam. 25)   32 KB 8-way   1 MB   4 MB           256   252  2048
 *   Zen 5 (fam. 26)   48 KB 12-way  1 MB   4 MB           384   168  1344
 *   Sapphire Rapids   48 KB 12-way  2 MB   1.875 MB       384   336   640
 *   Emerald Rapids    48 KB 12-way  2 MB   133 MB (KVM)   384   336  4096
 *
 * (Zen 4: kc = 32768/128; mc = 262144/(256*4) = 256 -> 252; nc = 2097152/
 * 1024 = 2048.  Zen 5: mc = 262144/1536 = 170 -> 168; nc = 2097152/1536 =
 * 1365 -> 1344.  Sapphire Rapids: mc = 524288/1536 = 341 -> 336; nc =
 * 983040/1536 = 640.  Emerald Rapids: nc = 68157440/1536 = 44373 ->
 * NC_MAX.)  On Zen 4 the A rows of lda = 512 or 1536 floats (6
 * to a set of 8 ways) are packed; on the others they are read in place.
 * A cache cpuid does not report is taken as 32 KB 8-way, 1 MB, 2 MB.
 */
#define NC_MAX 4096

typedef struct {
    int kc, mc, nc;
    long alias_period;   /* bytes: addresses this far apart share an L1 set */
    int alias_rows;      /* more A rows than this to one set: pack A */
    long l2;             /* bytes: an A larger than this is packed (see in_place_product) */
} gemm_blocking;

static gemm_blocking gemm_blocking_for(ag_cpu_caches c)
{
    const long l1d = c.l1d > 0 ? c.l1d : 32 * 1024, l2 = c.l2 > 0 ? c.l2 : 1024 * 1024;
    const long l3 = c.l3_share > 0 ? c.l3_share : 2 * 1024 * 1024;
    const int ways = c.l1d_ways > 0 ? c.l1d_ways : 8;
    const long elem = (long)sizeof(ag_real);
    gemm_blocking b;
    b.kc = (int)fmax(16, fmin(4096, (double)(l1d / (NR * elem))));
    b.mc = (int)fmax(MR, fmin(4096, (double)(l2 / 4 / (b.kc * elem) / MR * MR)));
    b.nc = (int)fmax(NR, fmin(NC_MAX, (double)(l3 / 2 / (b.kc * elem) / NR * NR)));
    b.alias_period = l1d / ways;
    b.alias_rows = ways / 2;
    b.l2 = l2;
    return b;
}

/* This CPU's blocking, decided on the first call: kc is stored last
 * (release) and read first (acquire).  Two threads may both decide; they
 * store the same. */
static atomic_int blk_kc, blk_mc, blk_nc, blk_alias_rows;
static atomic_long blk_alias_period, blk_l2;

static gemm_blocking blocking(void)
{
    gemm_blocking b;
    b.kc = atomic_load_explicit(&blk_kc, memory_order_acquire);
    if (b.kc == 0) {
        b = gemm_blocking_for(ag_cpu_cache_sizes());
        atomic_store_explicit(&blk_mc, b.mc, memory_order_relaxed);
        atomic_store_explicit(&blk_nc, b.nc, memory_order_relaxed);
        atomic_store_explicit(&blk_alias_rows, b.alias_rows, memory_order_relaxed);
        atomic_store_explicit(&blk_alias_period, b.alias_period, memory_order_relaxed);
        atomic_store_explicit(&blk_l2, b.l2, memory_order_relaxed);
        atomic_store_explicit(&blk_kc, b.kc, memory_order_release);
        return b;
    }
    b.mc = atomic_load_explicit(&blk_mc, memory_order_relaxed);
    b.nc = atomic_load_explicit(&blk_nc, memory_order_relaxed);
    b.alias_rows = atomic_load_explicit(&blk_alias_rows, memory_order_relaxed);
    b.alias_period = atomic_load_explicit(&blk_alias_period, memory_order_relaxed);
    b.l2 = atomic_load_explicit(&blk_l2, memory_order_relaxed);
    return b;
}

void ag_fast_gemm_blocking(const ag_cpu_caches *caches, int *kc, int *mc, int *nc)
{
    const gemm_blocking b = caches ? gemm_blocking_for(*caches) : blocking();
    *kc = b.kc;
    *mc = b.mc;
    *nc = b.nc;
}

static long gcd_long(long a, long b)
{
    while (b) {
        const long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Whether A stored [M, K] with this lda would put more than alias_rows of
 * its MR rows into one L1 set at each k (see the model above): the rows
 * fall on period / gcd(row bytes, period) distinct offsets. */
static int a_rows_alias(long lda)
{
    const gemm_blocking b = blocking();
    const long distinct = b.alias_period / gcd_long(lda * (long)sizeof(ag_real), b.alias_period);
    return (MR + distinct - 1) / distinct > b.alias_rows;
}

/* ---- one block of C ----------------------------------------------------- */

typedef struct {
    int trans_a, trans_b, M, N, K;
    const ag_real *A, *B;
    long lda, ldb, ldc;
    ag_real *C;
    int overwrite;          /* beta == 0: the first K block stores instead of adding */
    int in_place;           /* A read in place where the layout allows */
    int b_in_place;         /* B too (small op(B) stored [K, N]) */
    const ag_real *b_all;   /* op(B) packed once for every unit, or NULL: pack per block */
} gemm_job;

/* a / b rounded up, for a >= 0, b > 0; a + b - 1 could pass INT_MAX */
static int ceil_div(int a, int b) { return a / b + (a % b != 0); }

/* K blocks of nearly equal size (at most kc): a function of K and the L1d
 * alone, so the summation order never depends on M, N or the threads. */
static int k_block(int K)
{
    int nblocks = ceil_div(K, blocking().kc);
    return ceil_div(K, nblocks);
}

/* A stored [M, K] is read in place by the row-major kernel when it is
 * already in this core's L2 -- a small model's activations, just written by
 * the op before -- and its rows do not crowd into a few L1 sets
 * (a_rows_alias, from the blocking model above): its MR rows are MR
 * sequential streams, and a block of them stays in L2 across the column
 * panels just as A~ would, so a copy would be overhead.  An A larger than
 * the L2 arrives from L3 or memory on each chunk's first column panel, as
 * MR interleaved streams at a stride the prefetcher follows less well than
 * one sequential copy; packed (a 16 x 16 transpose per 16 k, see
 * pack_a_rows_16k) it is read once, in order, and the kernel then reads A~
 * from L2.  That pays when the chunk serves enough column panels: at least
 * A_PACK_PANELS.  Measured on Zen 5 (1 MB L2), one thread, fastest of 40:
 * packing A gained 5-10% on 4096 x {384, 1152, 1536} x {128, 384} and 2048 x
 * 1536 x 768, 2% at K 1536; it lost 4-8% on A of 1.5 MB with 4 panels (768 x
 * 128 x 512) and on the small models' products whose A fits the L2.
 * A stored [K, M] is read down its columns,
 * one line per k: that pays only when op(B) (K*N elements) is small enough
 * that A~ would serve few column panels, and below a few hundred rows,
 * beyond which the lines are far apart and packing wins again.  B is read in
 * place too when it is stored [K, N] and a column panel is exactly NR or
 * NR/2 wide; only ragged panels are packed. */
#define IN_PLACE_MAX (128 * 1024)
#define IN_PLACE_MAX_AT_ROWS 256
/* B read in place walks kc rows ldb apart for every row panel, and they stay
 * in L1 only while K*ldb is small; packing it is a copy of K*N elements that
 * pays for itself only over many row panels.  So B stays in place when it is
 * tiny or when C has few rows. */
#define B_IN_PLACE_MAX 4096
#define B_IN_PLACE_ROWS 128
/* op(B) larger than the L2 and up to this many elements (16 MB in float)
 * is packed once per product and shared by the threads; a smaller or a
 * larger one, per unit. */
#define SHARED_B_MAX (4L * 1024 * 1024)

#define A_PACK_PANELS 8

static int in_place_product(int trans_a, int M, int N, int K, long lda)
{
    if (!trans_a)
        return !a_rows_alias(lda) &&
               ((long)M * K * (long)sizeof(ag_real) <= blocking().l2 || ceil_div(N, NR) < A_PACK_PANELS);
    return (long)K * N <= IN_PLACE_MAX && M <= IN_PLACE_MAX_AT_ROWS;
}

static int a_in_place(const gemm_job *g, int rows) { return g->in_place && rows % MR_STEP == 0; }

static int b_in_place(const gemm_job *g, int cols)
{
    return g->b_in_place && (cols == NR || cols == NR / 2);
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
    return round_up64((size_t)k_block(K) * ag_min_int(ceil_div(rows, MR) * MR, blocking().mc));
}

static size_t block_space(int rows, int cols, int K)
{
    return a_space(rows, K) + round_up64((size_t)k_block(K) * ag_min_int(ceil_div(cols, NR) * NR, blocking().nc));
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

/* C[ic:ic+mc, jc:jc+nc] (+)= op(A) op(B) for the K block pc..pc+kc-1.  pa
 * holds the packed row panels of this chunk, pb the packed column panels
 * (panel p at p*kc*NR); panels read in place skip them.  Ragged tiles run
 * the next larger kernel into tmp (the packed padding is zero). */
static void macro_kernel(const gemm_job *g, const ag_real *pa, const ag_real *pb, int pc, int kc,
                         int ic, int mc, int jc, int nc, int accumulate)
{
    ag_real tmp[MR * NR];
    for (int cpan = 0; cpan * NR < nc; cpan++) {
        const int j = jc + cpan * NR, cols = ag_min_int(NR, nc - cpan * NR);
        const int halves = cols <= NR / 2 ? 1 : 2;
        const ag_real *bp = pb + (long)cpan * kc * NR;
        long b_stride = NR;
        if (b_in_place(g, cols)) {
            bp = g->B + (long)pc * g->ldb + j;
            b_stride = g->ldb;
        }
        for (int rpan = 0; rpan * MR < mc; rpan++) {
            const int i = ic + rpan * MR, rows = ag_min_int(MR, mc - rpan * MR);
            const int steps = ceil_div(rows, MR_STEP);
            const ag_real *ap = pa + (long)rpan * kc * MR;
            long a_stride = MR;
            int layout = A_KMAJOR;
            if (a_in_place(g, rows)) {
                ap = g->trans_a ? g->A + (long)pc * g->lda + i : g->A + (long)i * g->lda + pc;
                a_stride = g->lda;
                layout = g->trans_a ? A_KMAJOR : A_ROWMAJOR;
            }
            const kernel_fn kern = kernels[layout][steps - 1][halves - 1];
            ag_real *c = g->C + (long)i * g->ldc + j;
            if (rows == steps * MR_STEP && cols == halves * (NR / 2)) {
                kern(kc, ap, a_stride, bp, b_stride, c, g->ldc, accumulate);
            } else {
                kern(kc, ap, a_stride, bp, b_stride, tmp, NR, 0);
                store_edge(tmp, c, g->ldc, rows, cols, accumulate);
            }
        }
    }
}

/* Packs the column panels of op(B) in columns jc..jc+nc-1, K block pc.., that
 * are not read in place. */
static void pack_b_block(const gemm_job *g, int pc, int kc, int jc, int nc, ag_real *pb)
{
    for (int p = 0; p * NR < nc; p++) {
        const int cols = ag_min_int(NR, nc - p * NR);
        if (!b_in_place(g, cols))
            pack_b_panel(g->trans_b, g->B, g->ldb, pc, kc, jc + p * NR, cols, pb + (long)p * kc * NR);
    }
}

/* A stored [K, M] (op(A) = A^T: dy^T in a weight gradient dy^T x), a
 * chunk whose every panel is packed.  Row k of the chunk is mc contiguous
 * elements; it is read once, in order, and dealt out MR to a panel.  (A
 * panel at a time, the copy walked all kc rows once per panel, 48 bytes of
 * each, and gcc built every 12-element copy out of single-element loads.)
 * Such an A is packed because it is larger than the L2, so it comes from L3
 * or memory, and it arrives as runs of mc elements lda apart: a jump after
 * every few lines, often onto another 4 KB page, where the hardware's
 * stream prefetchers, which follow adjacent lines within a page, start
 * again.  So the copy asks for the row PACK_AHEAD_BYTES of packed data
 * ahead of the one it copies, about a page of lines in flight instead of
 * one row's.  (Zen 5, dW 1536 x 384 x 4096, dy from memory, one thread:
 * the copy was 9% of the time, 8% row by row, 6% with the prefetch; the
 * product 1-7% faster on one thread, 3-5% on two; 2 KB ahead gained less, 8
 * KB the same as 4, 16 KB less.  The small model's 512 x 128 x 768, whose
 * dy the caches hold, 7-13% faster, from the copy's code alone.)
 *
 * The copy takes PACK_TRANS_K rows at a time, the fewest whose MR elements
 * per panel make whole 64-byte lines (with AVX-512, 4 in float: 4 x 48
 * bytes = 3 lines; 2 in double), and writes each panel's part of them in one go.  A row at
 * a time, every panel of the chunk was left with a partly written line,
 * and the panels lie kc*MR elements apart: 18 KB at kc 384, a multiple of
 * half the L1d's 4 KB way (l1d / ways on the CPUs in "cache blocking"),
 * so the 22 partial lines of a 264-row chunk crowd into 2 of its sets (12
 * ways each) and evict one another.  (Emerald Rapids, 48 KB 12-way L1d,
 * 512 x 128 x 768 TN on one thread, alternated timings, faster by: 5% at
 * kc 384; 10% with K blocks of 256, panels 12 KB apart, all in one set;
 * 4% at 192, 9 KB apart, 4 sets; 2% at 154, 7392 bytes apart, no two
 * lines in one set.  1536 x 384 x 4096 TN (K blocks of 373): 1%.  2 rows
 * at a time gained 2% at kc 384, 8 and 16 the same as 4.) */
#define PACK_AHEAD_BYTES 4096
#define PANEL_ROW_BYTES (MR * (int)sizeof(ag_real))
#define PACK_TRANS_K                                                                              \
    (PANEL_ROW_BYTES % 64 == 0 ? 1 : PANEL_ROW_BYTES % 32 == 0 ? 2 : PANEL_ROW_BYTES % 16 == 0 ? 4 : 8)
_Static_assert(PANEL_ROW_BYTES * PACK_TRANS_K % 64 == 0, "PACK_TRANS_K rows of a panel fill whole lines");

static void pack_a_rows_trans(const ag_real *A, long lda, int pc, int kc, int ic, int mc, ag_real *restrict pa)
{
    const int full = mc / MR, rest = mc - full * MR;
    const long row_bytes = (long)mc * (long)sizeof(ag_real);
    const int ahead = (int)((PACK_AHEAD_BYTES + row_bytes - 1) / row_bytes);
    for (int k0 = 0; k0 < kc; k0 += PACK_TRANS_K) {
        const int rows = ag_min_int(PACK_TRANS_K, kc - k0);
        const ag_real *src = A + (long)(pc + k0) * lda + ic;
#if defined(__GNUC__)
        for (int r = 0; r < rows && k0 + r + ahead < kc; r++) {
            const char *next = (const char *)(src + (long)(r + ahead) * lda);
            for (long b = 0; b < row_bytes + 64; b += 64) __builtin_prefetch(next + b, 0, 3);
        }
#endif
        ag_real *d = pa + (long)k0 * MR;
        /* one loop twice: with a constant count for every group but a
         * short last one, so that the compiler unrolls it */
        if (rows == PACK_TRANS_K) {
            for (int p = 0; p < full; p++)
                for (int r = 0; r < PACK_TRANS_K; r++)
                    memcpy(d + (long)p * kc * MR + r * MR, src + r * lda + p * MR, MR * sizeof(ag_real));
        } else {
            for (int p = 0; p < full; p++)
                for (int r = 0; r < rows; r++)
                    memcpy(d + (long)p * kc * MR + r * MR, src + r * lda + p * MR, MR * sizeof(ag_real));
        }
        if (rest) {
            ag_real *e = d + (long)full * kc * MR;
            for (int r = 0; r < rows; r++) {
                int i = 0;
                for (; i < rest; i++) e[r * MR + i] = src[r * lda + full * MR + i];
                for (; i < MR; i++) e[r * MR + i] = 0;
            }
        }
    }
}

static void pack_a_block(const gemm_job *g, int pc, int kc, int ic, int mc, ag_real *pa)
{
    if (g->trans_a && !g->in_place) {
        pack_a_rows_trans(g->A, g->lda, pc, kc, ic, mc, pa);
        return;
    }
    for (int p = 0; p * MR < mc; p++) {
        const int rows = ag_min_int(MR, mc - p * MR);
        if (!a_in_place(g, rows))
            pack_a_panel(g->trans_a, g->A, g->lda, ic + p * MR, rows, pc, kc, pa + (long)p * kc * MR);
    }
}

/* Columns of op(B) rounded up to whole panels: the row length of b_all. */
static long padded_cols(int N) { return (long)ceil_div(N, NR) * NR; }

/* Packs panel t of the (K block, column panel) grid of op(B) into b_all,
 * where K block pc starts at pc * padded_cols(N); one panel is the unit of
 * work when a team shares the packing. */
static void pack_b_shared(const gemm_job *g, int t, ag_real *b_all)
{
    const int kc_max = k_block(g->K), panels = ceil_div(g->N, NR);
    const int pc = t / panels * kc_max, p = t % panels;
    const int kc = ag_min_int(kc_max, g->K - pc), cols = ag_min_int(NR, g->N - p * NR);
    if (!b_in_place(g, cols))
        pack_b_panel(g->trans_b, g->B, g->ldb, pc, kc, p * NR, cols,
                     b_all + pc * padded_cols(g->N) + (long)p * kc * NR);
}

/* The product restricted to rows [i0, i1) and columns [j0, j1) of C, run
 * serially with packing space ws (block_space of the block's size). */
static void gemm_block(const gemm_job *g, int i0, int i1, int j0, int j1, ag_real *ws)
{
    const gemm_blocking blk = blocking();
    const int kc_max = k_block(g->K);
    /* rows in chunks of at most blk.mc, as equal as whole panels allow */
    const int chunks = ceil_div(i1 - i0, blk.mc);
    const int mc_max = ceil_div(ceil_div(i1 - i0, chunks), MR) * MR;
    ag_real *pa = ws, *pb = ws + a_space(i1 - i0, g->K);
    for (int jc = j0; jc < j1; jc += blk.nc) {
        const int nc = ag_min_int(blk.nc, j1 - jc);
        for (int pc = 0; pc < g->K; pc += kc_max) {
            const int kc = ag_min_int(kc_max, g->K - pc);
            const int accumulate = pc > 0 || !g->overwrite;
            const ag_real *bp = pb;
            if (g->b_all)
                bp = g->b_all + pc * padded_cols(g->N) + (long)jc * kc;
            else
                pack_b_block(g, pc, kc, jc, nc, pb);
            for (int ic = i0; ic < i1; ic += mc_max) {
                const int mc = ag_min_int(mc_max, i1 - ic);
                pack_a_block(g, pc, kc, ic, mc, pa);
                macro_kernel(g, pa, bp, pc, kc, ic, mc, jc, nc, accumulate);
            }
        }
    }
}

/* ---- small products ------------------------------------------------------ */

/* A product of one K block whose op(B) fits the L1d and whose rows fit one
 * row chunk -- an attention head's q k^T, p v or dk^T of 16..64, a block of
 * the attention kernel -- has nothing to block.  gemm_block's bookkeeping
 * around it (chunk loops, a packing check per panel, the kernel looked up
 * per tile) then costs as much as the arithmetic of a 32x32x16 product.
 * gemm_small walks the tiles directly, row panels outside so each A panel
 * serves every column panel while op(B) stays in L1: each A panel read in
 * place or packed, op(B) read in place or packed once.  Each C
 * element is still the tile's sum, k = 0..K-1 from zero, then stored or
 * added: the same bits as gemm_block.  What is read in place is what
 * gemm_block reads in place (make_job decides).
 *
 * A last 16 rows run as 8 + 8, not 12 + 4: a tile of 4 rows keeps 8
 * accumulators, just the FMA latency x units of Zen 5 and Sapphire Rapids
 * (4 x 2), and loads 6 operands for its 8 multiply-adds, so it runs at the
 * loads' pace; one of 8 rows loads 10 for 16 (a head of 16 or 64 rows). */
static int small_product(const gemm_job *g)
{
    const gemm_blocking b = blocking();
    return g->K <= b.kc && g->M <= b.mc && padded_cols(g->N) <= b.nc &&
           (long)g->K * padded_cols(g->N) <= (long)b.kc * NR;
}

/* Rows of the next row panel when `left` rows remain. */
static int small_panel_rows(int left)
{
    if (left == MR + MR_STEP) return 2 * MR_STEP;
    return left < MR ? left : MR;
}

static void gemm_small(const gemm_job *g, ag_real *ws)
{
    const int M = g->M, N = g->N, K = g->K, panels = ceil_div(N, NR);
    /* a_space(M, K) for one K block and one row chunk, without the
     * divisions by the blocking's sizes that k_block and a_space make (with
     * the pass over B below, 3-5% of a 32 x 32 x 16 product on one thread,
     * Zen 5) */
    ag_real *pa = ws, *pb = ws + round_up64((size_t)K * (size_t)(ceil_div(M, MR) * MR));
    ag_real tmp[MR * NR];
    if (!g->b_in_place || (N % NR != 0 && N % NR != NR / 2)) pack_b_block(g, 0, K, 0, N, pb);
    for (int i = 0, rows; i < M; i += rows) {
        rows = small_panel_rows(M - i);
        const int steps = ceil_div(rows, MR_STEP);
        const ag_real *ap = pa;
        long a_stride = MR;
        int layout = A_KMAJOR;
        if (a_in_place(g, rows)) {
            ap = g->trans_a ? g->A + i : g->A + (long)i * g->lda;
            a_stride = g->lda;
            layout = g->trans_a ? A_KMAJOR : A_ROWMAJOR;
        } else {
            pack_a_panel(g->trans_a, g->A, g->lda, i, rows, 0, K, pa);
        }
        for (int p = 0; p < panels; p++) {
            const int j = p * NR, cols = ag_min_int(NR, N - j), halves = cols <= NR / 2 ? 1 : 2;
            const ag_real *bp = pb + (long)p * K * NR;
            long b_stride = NR;
            if (b_in_place(g, cols)) {
                bp = g->B + j;
                b_stride = g->ldb;
            }
            const kernel_fn kern = kernels[layout][steps - 1][halves - 1];
            ag_real *c = g->C + (long)i * g->ldc + j;
            if (rows == steps * MR_STEP && cols == halves * (NR / 2)) {
                kern(K, ap, a_stride, bp, b_stride, c, g->ldc, !g->overwrite);
            } else {
                kern(K, ap, a_stride, bp, b_stride, tmp, NR, 0);
                store_edge(tmp, c, g->ldc, rows, cols, !g->overwrite);
            }
        }
    }
}

/* ---- parallel units ----------------------------------------------------- */

/* Split C into r x c units on panel boundaries: at most UNIT_ROWS x UNIT_COLS
 * (any width when rows_only), and cut further (the longer side first, or
 * the rows alone) until there are UNITS_PER_THREAD per thread or the panels
 * run out.  Unit (bi, bj) covers row panels
 * [rp*bi/r, rp*(bi+1)/r), likewise columns. */
typedef struct {
    int rp, cp, r, c;
} unit_plan;

static unit_plan plan_units(int M, int N, int nth, int per_thread, int rows_only)
{
    unit_plan u = {ceil_div(M, MR), ceil_div(N, NR), 0, 0};
    u.r = ceil_div(u.rp, UNIT_ROWS / MR);
    u.c = rows_only ? 1 : ceil_div(u.cp, UNIT_COLS / NR);
    while (u.r * u.c < per_thread * nth) {
        int can_r = u.rp / (u.r + 1) >= 2, can_c = u.cp / (u.c + 1) >= 1;
        int rows = u.rp / u.r * MR, cols = u.cp / u.c * NR;
        if (can_r && (rows_only || rows >= cols || !can_c)) u.r++;
        else if (can_c) u.c++;
        else break;
    }
    return u;
}

/* Where unit b of n starts among `panels` panels of `width`, as a row or
 * column index, at most `size`; in long, since panels x b can pass INT_MAX
 * long before the size does. */
static int unit_edge(int panels, int b, int n, int width, int size)
{
    const long e = (long)panels * b / n * width;
    return e < size ? (int)e : size;
}

static void run_unit(const gemm_job *g, const unit_plan *u, int t, ag_real *ws)
{
    int bi = t / u->c, bj = t % u->c;
    int i0 = unit_edge(u->rp, bi, u->r, MR, g->M), i1 = unit_edge(u->rp, bi + 1, u->r, MR, g->M);
    int j0 = unit_edge(u->cp, bj, u->c, NR, g->N), j1 = unit_edge(u->cp, bj + 1, u->c, NR, g->N);
    gemm_block(g, i0, i1, j0, j1, ws);
}

/* ---- workspace ---------------------------------------------------------- */

/* Each calling thread keeps one 64-byte aligned buffer, grown on demand and
 * reused, so steady-state calls do not allocate.  Only the thread that calls
 * ag_gemm* allocates (before any parallel region); the team's threads each
 * get a slice of it. */
static _Thread_local ag_scratch panels;

static ag_real *workspace(size_t n)
{
    return ag_scratch_get(&panels, n * sizeof(ag_real), "matrix-multiply panels");
}

/* The units of one product, for ag_parallel: each thread packs into its
 * own slice of ws. */
typedef struct {
    const gemm_job *g;
    const unit_plan *u;
    ag_real *ws, *b_all;
    size_t slice;
} units_call;

static void unit_task(void *ctx, int t)
{
    const units_call *c = ctx;
    run_unit(c->g, c->u, t, c->ws + c->slice * (size_t)ag_thread_id());
}

static void pack_b_task(void *ctx, int t)
{
    const units_call *c = ctx;
    pack_b_shared(c->g, t, c->b_all);
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

static gemm_job make_job(int trans_a, int trans_b, int M, int N, int K, const ag_real *A, long lda,
                         const ag_real *B, long ldb, ag_real *C, long ldc)
{
    gemm_job g = {trans_a != 0, trans_b != 0, M, N, K, A, B, lda, ldb, ldc, C, 0,
                  in_place_product(trans_a, M, N, K, lda), 0, NULL};
    g.b_in_place = g.in_place && !trans_b && (long)K * N <= IN_PLACE_MAX &&
                   ((long)K * ldb <= B_IN_PLACE_MAX || M <= B_IN_PLACE_ROWS);
    return g;
}

/* ---- split along K ------------------------------------------------------ */

/* A product with a small C and a long K (a weight gradient, dW = dy^T x,
 * sums over every token) has too few tiles of C to share, but several K
 * blocks.  Each thread then takes whole K blocks.  With the partial
 * products P_b = op(A)[:, block b] op(B)[block b, :], block 0's goes
 * straight into C (C (+)= P_0), each later one to its own buffer, and C is
 * then C += P_1 + P_2 + ... in block order.  That is the very sequence of
 * roundings of the serial loop, which computes each block's tile sums from
 * zero and adds them to C one block after another: the result is the same
 * bit for bit, for any thread count.  (Block 0 in C rather than in a
 * buffer of its own saves writing and rereading one partial of C's size:
 * half of the summing pass on 2 threads.)  With the rows of dy and x split
 * between threads the way the forward pass split them, each thread also
 * reads rows it already has in cache. */
#define KSPLIT_MAX_MN (256 * 256)   /* C at most this many elements */

static int ksplit_blocks(int M, int N, int K, int nth)
{
    int nkb = ceil_div(K, k_block(K));
    return nth > 1 && nkb >= nth && (long)M * N <= KSPLIT_MAX_MN ? nkb : 0;
}

typedef struct {
    const gemm_job *g;
    ag_real *ws;
    size_t part, slice;
    int nkb, kb;
} ksplit_call;

/* K block b's partial product: block 0's straight into C (added to it, or
 * stored when C is overwritten, as the serial loop's first block is), each
 * later block's into its own buffer */
static void ksplit_block_task(void *ctx, int b)
{
    const ksplit_call *c = ctx;
    const gemm_job *g = c->g;
    const int k0 = b * c->kb, kc = ag_min_int(c->kb, g->K - k0);
    const ag_real *A = g->trans_a ? g->A + (long)k0 * g->lda : g->A + k0;
    const ag_real *B = g->trans_b ? g->B + k0 : g->B + (long)k0 * g->ldb;
    ag_real *C = b == 0 ? g->C : c->ws + c->part * (size_t)(b - 1);
    gemm_job sub = make_job(g->trans_a, g->trans_b, g->M, g->N, kc, A, g->lda, B, g->ldb, C, b == 0 ? g->ldc : g->N);
    sub.overwrite = b == 0 ? g->overwrite : 1;
    gemm_block(&sub, 0, g->M, 0, g->N, c->ws + c->part * (size_t)(c->nkb - 1) + c->slice * (size_t)ag_thread_id());
}

/* rows [lo, hi) of C += P_1 + P_2 + ... in block order */
static void ksplit_sum_rows(void *ctx, size_t lo, size_t hi)
{
    const ksplit_call *c = ctx;
    const gemm_job *g = c->g;
    const int N = g->N;
    for (size_t i = lo; i < hi; i++) {
        ag_real *cr = g->C + (long)i * g->ldc;
        for (int b = 1; b < c->nkb; b++) {
            const ag_real *p = c->ws + c->part * (size_t)(b - 1) + (long)i * N;
            for (int j = 0; j < N; j++) cr[j] += p[j];
        }
    }
}

static void gemm_ksplit(const gemm_job *g, int nkb, int nth)
{
    const int kb = k_block(g->K), M = g->M, N = g->N;
    const size_t part = round_up64((size_t)M * N), slice = block_space(M, N, kb);
    ag_real *ws = workspace(part * (size_t)(nkb - 1) + slice * (size_t)nth);
    ksplit_call c = { g, ws, part, slice, nkb, kb };
    ag_parallel(nkb, nth, ksplit_block_task, &c);
    ag_parallel_for((size_t)M, (size_t)M * N * (nkb - 1), ksplit_sum_rows, &c);
}

/* ---- a few rows of C ----------------------------------------------------- */

/* A C of at most FEW_ROWS rows with A stored [M, K] -- one new token per
 * sequence, as sampling with the key/value cache asks -- is a few
 * matrix-vector products that read each element of B once, so packing B
 * (for B stored [N, K], a transposing copy of all of it) would cost more
 * than the product.  B is read in place instead.  Stored [K, N], each
 * element is summed as the tiled kernel sums it (from zero per K block, k in
 * order, one fused multiply-add each, then added to C), vectorized across
 * columns: the same bits as that row inside a taller C.  Stored [N, K],
 * each element of a K block is a dot product of two contiguous rows in
 * ag_dot_lanes' 16 lanes (a chain in k order would need B's columns, which
 * only a gather or a transpose gives, and both cost more than the product):
 * the order depends on K and the L1d alone, so results do not depend on the
 * threads, but they round differently from the same row inside a taller C,
 * so that path is taken only for a B of FEW_ROWS_BIG_B elements or more (a
 * weight matrix), where packing costs most; smaller products keep the tile's order
 * (attention's backward relies on it for the score gradients of its last,
 * short key block: src/kernels/attention.c).  Threads take whole columns. */
#define FEW_ROWS 4
#define FEW_COLS 64
#define FEW_ROWS_BIG_B (64L * 1024)

static int few_rows(int trans_a, int trans_b, int M, int N, int K)
{
    return !trans_a && M <= FEW_ROWS && (!trans_b || (long)N * K >= FEW_ROWS_BIG_B);
}

/* acc += a*b as tile_body does it: contracted to one fused multiply-add
 * exactly where the tile's is (not at all below -O2) */
#if GEMM_VECTOR_TILE
#define TILE_MADD(acc, a, b) ((acc) += (a) * (b))
#else
#define TILE_MADD(acc, a, b) ((acc) = AG_FMA((a), (b), (acc)))
#endif

KERNEL_ATTR
static void gemm_few_rows(const gemm_job *g, int j0, int j1)
{
    GEMM_CONTRACT
    const int K = g->K, kb = k_block(K);
    const long ldb = g->ldb;
    ag_real acc[FEW_COLS];
    for (int i = 0; i < g->M; i++) {
        const ag_real *a = g->A + (long)i * g->lda;
        ag_real *c = g->C + (long)i * g->ldc;
        for (int jb = j0; jb < j1; jb += FEW_COLS) {
            const int nb = ag_min_int(FEW_COLS, j1 - jb);
            for (int pc = 0; pc < K; pc += kb) {
                const int kc = ag_min_int(kb, K - pc);
                for (int j = 0; j < nb; j++) acc[j] = 0;
                if (g->trans_b) {
                    const ag_real *b = g->B + jb * ldb + pc;
                    for (int j = 0; j < nb; j++) acc[j] = (ag_real)ag_dot_lanes(a + pc, b + j * ldb, (size_t)kc);
                } else {
                    const ag_real *b = g->B + pc * ldb + jb;
                    for (int k = 0; k < kc; k++)
                        for (int j = 0; j < nb; j++) TILE_MADD(acc[j], a[pc + k], b[k * ldb + j]);
                }
                if (pc == 0 && g->overwrite)
                    for (int j = 0; j < nb; j++) c[jb + j] = acc[j];
                else
                    for (int j = 0; j < nb; j++) c[jb + j] += acc[j];
            }
        }
    }
}

typedef struct {
    const gemm_job *g;
    int nth, per;
} few_rows_call;

/* Task t: the t-th of nth equal runs of FEW_COLS-column chunks */
static void few_rows_task(void *ctx, int t)
{
    const few_rows_call *c = ctx;
    const int N = c->g->N;
    const int j0 = ag_min_int(N, t * c->per * FEW_COLS), j1 = ag_min_int(N, (t + 1) * c->per * FEW_COLS);
    if (j0 < j1) gemm_few_rows(c->g, j0, j1);
}

static void gemm_few_rows_threads(const gemm_job *g, int nth)
{
    const int N = g->N, chunks = ceil_div(N, FEW_COLS);
    if (nth > chunks) nth = chunks;
    if (nth <= 1) {
        gemm_few_rows(g, 0, N);
        return;
    }
    few_rows_call c = { g, nth, ceil_div(chunks, nth) };
    ag_parallel(nth, nth, few_rows_task, &c);
}

/* ---- how long a multiply-add takes --------------------------------------- */

/* Whether a product is worth sharing is pool.c's question (ag_threads_for),
 * asked with the product's time on one thread: its multiply-adds times the
 * time of one, measured here once, on the first call, as the fastest of a
 * few runs of a 64 x 64 x 64 product (a quarter of a million multiply-adds,
 * where sharing starts to pay, so with the overheads such a product has)
 * on the calling thread.  Stored in femtoseconds; 0: not yet measured. */
static atomic_long madd_fs;

double ag_fast_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double measure_madd_ns(void)
{
    enum { S = 64, RUNS = 8 };
    ag_real *x = malloc(sizeof(ag_real) * 3 * S * S);
    if (!x) return 0.02;   /* no memory to measure with: a plausible time */
    for (int i = 0; i < 3 * S * S; i++) x[i] = (ag_real)(i % 13) / 13;
    gemm_job g = make_job(0, 0, S, S, S, x, S, x + S * S, S, x + 2 * S * S, S);
    g.overwrite = 1;
    ag_real *ws = workspace(block_space(S, S, S));
    double best = 1e9;
    for (int r = 0; r < RUNS; r++) {
        const double t0 = ag_fast_seconds();
        if (small_product(&g)) gemm_small(&g, ws);
        else gemm_block(&g, 0, S, 0, S, ws);
        const double t = ag_fast_seconds() - t0;
        if (t > 0 && t < best) best = t;
    }
    free(x);
    return best < 1e9 ? best * 1e9 / ((double)S * S * S) : 0.02;
}

double ag_fast_gemm_madd_ns(void)
{
    long fs = atomic_load_explicit(&madd_fs, memory_order_relaxed);
    if (fs == 0) {
        fs = (long)(measure_madd_ns() * 1e6) + 1;
        atomic_store_explicit(&madd_fs, fs, memory_order_relaxed);
    }
    return (double)fs * 1e-6;
}

void ag_fast_gemm(int trans_a, int trans_b, int M, int N, int K,
             const ag_real *A, int lda, const ag_real *B, int ldb,
             ag_real beta, ag_real *C, int ldc)
{
    ag_gemm_check_args("ag_gemm", trans_a, trans_b, M, N, K, lda, ldb, ldc);
    gemm_job g = make_job(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc);
    if (gemm_prologue(M, N, K, beta, C, ldc, &g.overwrite)) return;

    int nth = ag_threads_for((double)M * N * K * ag_fast_gemm_madd_ns());
    if (few_rows(trans_a, trans_b, M, N, K)) {
        gemm_few_rows_threads(&g, nth);
        return;
    }
    int nkb = ksplit_blocks(M, N, K, nth);
    if (nkb) {
        gemm_ksplit(&g, nkb, nth);
        return;
    }
    if (nth == 1 && small_product(&g)) {
        gemm_small(&g, workspace(block_space(M, N, K)));
        return;
    }
    const long b_elems = (long)K * N;
    const int local = (double)M * N * K < LOCAL_MAX;
    const int share_b = b_elems * (long)sizeof(ag_real) > blocking().l2 && b_elems <= SHARED_B_MAX;
    unit_plan u = plan_units(M, N, nth, local ? 1 : UNITS_PER_THREAD, b_elems <= SHARED_B_MAX && !g.in_place);
    if (nth == 1 || u.r * u.c == 1) {
        gemm_block(&g, 0, M, 0, N, workspace(block_space(M, N, K)));
        return;
    }
    const size_t slice = block_space(ceil_div(u.rp, u.r) * MR, ceil_div(u.cp, u.c) * NR, K);
    if (!share_b) {
        units_call c = { &g, &u, workspace(slice * (size_t)nth), NULL, slice };
        ag_parallel(u.r * u.c, nth, unit_task, &c);
        return;
    }

    /* op(B) packed once, by the whole team, instead of once per unit (a
     * 4096-row product has 6 units to a column chunk); the units then only
     * read it.  When every panel is read in place there is nothing to pack
     * and no barrier to wait at. */
    int b_panels = ceil_div(K, k_block(K)) * ceil_div(N, NR);
    if (g.b_in_place && (N % NR == 0 || N % NR == NR / 2)) b_panels = 0;
    ag_real *ws = workspace(slice * (size_t)nth + round_up64((size_t)K * padded_cols(N)));
    ag_real *b_all = ws + slice * (size_t)nth;
    g.b_all = b_all;
    units_call c = { &g, &u, ws, b_all, slice };
    if (b_panels > 0) ag_parallel(b_panels, nth, pack_b_task, &c);
    ag_parallel(u.r * u.c, nth, unit_task, &c);
}

typedef struct {
    gemm_job item;   /* item 0; item b is the same shifted by b strides */
    long stride_a, stride_b, stride_c;
    ag_real beta;
    ag_real *ws;
    size_t slice;
    int few, small;   /* every item is few_rows, or a small product */
    int batch, tasks;   /* task t: items batch*t/tasks .. batch*(t+1)/tasks - 1 */
} batch_call;

/* Item b, on one thread */
static void batch_item(const batch_call *c, int b)
{
    gemm_job g = c->item;
    g.A += b * c->stride_a;
    g.B += b * c->stride_b;
    g.C += b * c->stride_c;
    if (gemm_prologue(g.M, g.N, g.K, c->beta, g.C, g.ldc, &g.overwrite)) return;
    if (c->few)
        gemm_few_rows(&g, 0, g.N);   /* as ag_fast_gemm does the item alone */
    else if (c->small)
        gemm_small(&g, c->ws + c->slice * (size_t)ag_thread_id());
    else
        gemm_block(&g, 0, g.M, 0, g.N, c->ws + c->slice * (size_t)ag_thread_id());
}

static void batch_task(void *ctx, int t)
{
    const batch_call *c = ctx;
    const int b1 = (int)((long)c->batch * (t + 1) / c->tasks);
    for (int b = (int)((long)c->batch * t / c->tasks); b < b1; b++) batch_item(c, b);
}

void ag_fast_gemm_batched(int batch, int trans_a, int trans_b, int M, int N, int K,
                     const ag_real *A, long stride_a, int lda,
                     const ag_real *B, long stride_b, int ldb,
                     ag_real beta, ag_real *C, long stride_c, int ldc)
{
    ag_gemm_check_args("ag_gemm_batched", trans_a, trans_b, M, N, K, lda, ldb, ldc);
    if (batch <= 0 || M <= 0 || N <= 0) return;
    int nth = ag_threads_for((double)batch * M * N * K * ag_fast_gemm_madd_ns());
    if (batch < nth) {   /* few items: parallelize inside each instead */
        for (int b = 0; b < batch; b++)
            ag_fast_gemm(trans_a, trans_b, M, N, K, A + b * stride_a, lda, B + b * stride_b, ldb, beta,
                    C + b * stride_c, ldc);
        return;
    }

    /* One serial product per item, the items split evenly between threads
     * (they all cost the same): each item as ag_fast_gemm does it on one
     * thread, with the job's decisions taken once for all.  A task is a run
     * of items, BATCH_TASKS_PER_THREAD runs a thread: claiming a task is a
     * locked instruction, which waits for every store before it -- the C
     * tile the last item wrote -- to leave the core: with a task per item,
     * a tenth of the samples of 64 items of 32 x 32 x 16 on 2 threads (Zen
     * 5) fell on that instruction, and runs of items made the call 2-3%
     * faster.  A few runs a thread still let a thread that loses its core
     * for a while hand the rest of its items to the others. */
    const size_t slice = block_space(M, N, K);
    batch_call c = { make_job(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc), stride_a, stride_b,
                     stride_c, beta, workspace(slice * (size_t)nth), slice,
                     few_rows(trans_a, trans_b, M, N, K), 0, batch,
                     ag_min_int(batch, nth * BATCH_TASKS_PER_THREAD) };
    c.small = !c.few && small_product(&c.item);
    ag_parallel(c.tasks, nth, batch_task, &c);
}

/* The most the products above ask workspace() for, for any transposes and
 * batch count, on the threads a product may use: bytes the panels can hold
 * once a product of these sizes has run (kernels.h, gemm_scratch). */
size_t ag_fast_gemm_scratch(int M, int N, int K)
{
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    const int nth = ag_max_threads(), nkb = ksplit_blocks(M, N, K, nth);
    const size_t split = nkb ? round_up64((size_t)M * N) * (size_t)(nkb - 1) + block_space(M, N, k_block(K)) * (size_t)nth : 0;
    const size_t tiled = block_space(M, N, K) * (size_t)nth + round_up64((size_t)K * padded_cols(N));
    return sizeof(ag_real) * (split > tiled ? split : tiled);
}
