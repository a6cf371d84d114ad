/*
 * gemm_bf16.c - C (+)= bf16(op(A)) bf16(op(B)) with fp32 accumulation, on
 * AVX512-BF16 (vdpbf16ps) or AMX (tdpbf16ps), picked at run time.
 *
 * Both instructions multiply PAIRS of bf16: 32-bit lane j of one operand
 * holds (x[2p], x[2p+1]) and of the other (y[2p], y[2p+1]), and the lane's
 * fp32 accumulator gets both products.  So both kernels pack op(B) into the
 * pair-interleaved layout: row p of a packed panel holds, for each column
 * j, the pair (op(B)[2p][j], op(B)[2p+1][j]) in one 32-bit word; and op(A)
 * with the pairs (op(A)[i][2p], op(A)[i][2p+1]).  An odd K is padded with a
 * zero.  The fp32 -> bf16 rounding (vcvtne2ps2bf16: to nearest even, NaN
 * kept quiet; a subnormal becomes zero, as the products would treat it
 * anyway) happens while packing: there is no separate conversion pass.
 *
 * What the instructions compute, from Intel's documentation (and for
 * vdpbf16ps checked on this project's AMD Zen 5 against that description on
 * a few million random lanes: bit for bit):
 *   vdpbf16ps: acc = acc + a[2p+1] b[2p+1], rounded; then acc = acc + a[2p]
 *     b[2p], rounded.  A bf16 product is exact in fp32 (8-bit significands),
 *     so each step is one fp32 rounding, to nearest even whatever MXCSR says.
 *   tdpbf16ps: per instruction, sums over its 16 pairs from zero (even and
 *     odd halves separately), then adds them to the accumulator (so the
 *     current manual; the intrinsics guide shows plain accumulation in k
 *     order; the error bound covers either).
 *   Both treat subnormal inputs as zero and flush subnormal results to zero.
 * The order of the sums is fixed by K alone here (the K loop always runs in
 * order, and a block's partial result is stored to C exactly and reloaded
 * as the next block's starting value), never by M, N, the tile an element
 * lands in or the thread: results are bitwise the same for any thread
 * count.  tests/bf16_check.h derives the error bound that covers both.
 *
 * Every function that uses AVX-512 or AMX instructions carries a target
 * attribute, so this file compiles for any x86-64 (-march=x86-64-v2, say)
 * and the instructions run only after cpu.c found them.
 */
#include "gemm_bf16.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu.h"
#include "fast.h"

#if defined(__GNUC__) && defined(__x86_64__) && !defined(AG_NO_X86_KERNELS)
#define BF16_X86 1
#include <immintrin.h>
#else
#define BF16_X86 0
#endif

/* The plain rounding, for what the vector conversion leaves (tails,
 * subnormals) and for CPUs without it. */
static void convert_plain(uint16_t *dst, const float *src, long n)
{
    for (long i = 0; i < n; i++) dst[i] = ag_bf16_bits(src[i]);
}

/* The float's bits rounded to bf16 as ag_bf16_bits rounds (to nearest,
 * ties to even; a NaN made quiet), kept in the high half: branch-free
 * integer arithmetic, which the compiler makes vector code of. */
static inline uint32_t round_word(uint32_t u)
{
    const uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    return nan ? (u & 0xffff0000u) | 0x00400000u : rounded;
}

#if BF16_X86

/* a / b rounded up, for a >= 0, b > 0; a + b - 1 could pass INT_MAX */
static int ceil_div(int a, int b) { return a / b + (a % b != 0); }


/* One 64-byte aligned buffer per calling thread, grown on demand and kept,
 * so steady-state calls do not allocate.  The team's threads get slices. */
static _Thread_local ag_scratch panels;

static void *workspace(size_t bytes)
{
    return ag_scratch_get(&panels, bytes, "bf16 matrix-multiply panels");
}

/* 32-bit words, rounded up to whole 64-byte lines. */
static size_t words64(size_t n) { return (n + 15) / 16 * 16; }

#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#ifndef AG_AMX_EMULATE
#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16")))
#define amx_loadconfig(cfg) _tile_loadconfig(cfg)
#define amx_release() _tile_release()
#define amx_load(t, base, stride) _tile_loadd(t, base, stride)
#define amx_store(t, base, stride) _tile_stored(t, base, stride)
#define amx_zero(t) _tile_zero(t)
#define amx_dpbf16ps(c, a, b) _tile_dpbf16ps(c, a, b)
#else
/* tests/test_bf16_amx.c builds this file with the tile instructions done in
 * C, to test everything around them on a CPU without AMX. */
#define AMX_TARGET
void amx_emul_loadconfig(const void *cfg);
void amx_emul_release(void);
void amx_emul_load(int t, const void *base, long stride);
void amx_emul_store(int t, void *base, long stride);
void amx_emul_zero(int t);
void amx_emul_dpbf16ps(int c, int a, int b);
#define amx_loadconfig(cfg) amx_emul_loadconfig(cfg)
#define amx_release() amx_emul_release()
#define amx_load(t, base, stride) amx_emul_load(t, base, stride)
#define amx_store(t, base, stride) amx_emul_store(t, base, stride)
#define amx_zero(t) amx_emul_zero(t)
#define amx_dpbf16ps(c, a, b) amx_emul_dpbf16ps(c, a, b)
#endif
#define ALWAYS_INLINE inline __attribute__((always_inline))
#define NOINLINE __attribute__((noinline))

/* ---- conversion: fp32 -> bf16 pairs, 16 words at a time ----------------- */

static unsigned mask16(int n) { return n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1u; }

/* word t of the result takes 16-bit element idx[t] of its input: the first
 * 16 elements (row 0) and the next 16 (row 1) interleaved */
static const uint16_t interleave_idx[32] __attribute__((aligned(64))) = {
    0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
    8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

/* 16 words, word t = (bf16(r0[t]), bf16(r1[t])) for the lanes in mask m,
 * zero elsewhere; r1 NULL reads as zeros (the padding of an odd K).  Masked
 * loads never touch the lanes outside the mask. */
AVX512_TARGET static ALWAYS_INLINE __m512i pairs_of_rows(const float *r0, const float *r1, unsigned m)
{
    const __m512 x0 = _mm512_maskz_loadu_ps((__mmask16)m, r0);
    const __m512 x1 = r1 ? _mm512_maskz_loadu_ps((__mmask16)m, r1) : _mm512_setzero_ps();
    const __m512i w = (__m512i)_mm512_cvtne2ps_pbh(x1, x0);   /* bf16(x0[0..15]), bf16(x1[0..15]) */
    return _mm512_permutexvar_epi16(_mm512_load_si512(interleave_idx), w);
}

/* 16 words from a run of n (<= 32) consecutive floats, zero past n: word t =
 * (bf16(src[2t]), bf16(src[2t+1])), which is just the run converted in
 * order. */
AVX512_TARGET static ALWAYS_INLINE __m512i pairs_of_run(const float *src, int n)
{
    const __m512 lo = _mm512_maskz_loadu_ps((__mmask16)mask16(n), src);
    const __m512 hi = n > 16 ? _mm512_maskz_loadu_ps((__mmask16)mask16(n - 16), src + 16)
                             : _mm512_setzero_ps();
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

/* Transposes 16 x 16 32-bit words in place: r[i] lane j <-> r[j] lane i.
 * Four rounds of in-register shuffles (64 in all): 32-bit interleaves of
 * row pairs, 64-bit interleaves of those, then two rounds of 128-bit lane
 * moves.  After round 2, lane group L of r[4i+c] holds column 4L+c of rows
 * 4i..4i+3; rounds 3 and 4 gather each column's four groups. */
AVX512_TARGET static ALWAYS_INLINE void transpose16(__m512i r[16])
{
    __m512i t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        r[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        /* x: groups 0, 1 of rows 0-3 and 4-7; y: groups 2, 3; likewise x2, y2
         * for rows 8-11 and 12-15 */
        const __m512i x = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x44), y = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xee);
        const __m512i x2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x44);
        const __m512i y2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xee);
        t[c] = _mm512_shuffle_i32x4(x, x2, 0x88);        /* group 0: column c */
        t[4 + c] = _mm512_shuffle_i32x4(x, x2, 0xdd);    /* group 1: column 4 + c */
        t[8 + c] = _mm512_shuffle_i32x4(y, y2, 0x88);
        t[12 + c] = _mm512_shuffle_i32x4(y, y2, 0xdd);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* ---- AVX512-BF16 kernel -------------------------------------------------- */

/*
 * Goto/BLIS-style blocking, as the fp32 gemm.c, on pairs of k:
 *
 *   pack all of op(B), once per call, shared by the threads, into NR-column
 *   panels per K block: panel word [p][j] = (op(B)[2p][j], op(B)[2p+1][j])
 *   each thread, for each of its units (a block of rows x columns of C):
 *     for each K block (size set by K alone, even)
 *       for each chunk of MC rows: pack op(A) (row-major pairs when A is
 *           stored [M, K]: a straight conversion; pair-major when stored
 *           [K, M]: [p][i] = (op(A)[i][2p], op(A)[i][2p+1]))
 *         for each NR-column panel
 *           for each MR-row panel: micro-kernel, C tile in registers
 *
 * Micro-kernel: MR = 12 rows x 2 vectors of 16 fp32 = 24 accumulators; per
 * pair step 2 loads of B and 12 broadcast loads of an A word feed 24
 * vdpbf16ps.  Zen 5 issues two vdpbf16ps per cycle with a few cycles'
 * latency, so 24 independent chains keep both pipes busy: alone, on data
 * in L1, the kernel runs at 98% of a register-only vdpbf16ps loop.  The
 * accumulators start from zero (first K block, beta 0) or from C, and end
 * in C: C's tile is read and written once per K block, with masks at the
 * ragged right edge; ragged bottom edges use the kernel with fewer rows.
 * Those C accesses are far apart in time and miss the caches, so the next
 * tile's lines are prefetched while a tile runs (+20% at 1024^3).  Nothing
 * is read past a buffer: masked loads do not touch masked-out lanes.
 */
#define MR 12
#define NR 32
/* k per block.  A block's B panel (512 pairs x 32 words = 64 KB) and A
 * panel (12 x 528 words) stream from L2, which keeps up with the kernel;
 * what costs is the block boundary (C read and written, A repacked): on
 * Zen 5 1024 beat 512 by ~5% and 256 by ~15% (one thread, 1024^3). */
#ifndef KC_MAX
#define KC_MAX 1024
#endif
#ifndef MC
#define MC (16 * MR)        /* rows of A packed at once */
#endif

typedef void (*bf16_kernel)(int kcp, const uint32_t *a, long a_stride, const uint32_t *b, float *c,
                            long ldc, int load_c, unsigned m0, unsigned m1);

/* a: element (row i, pair p) at a[i*a_rs + p*a_ks].  b: pair row p at b +
 * p*NR, 64-byte aligned.  rows, nvec and one A stride are constants after
 * inlining. */
AVX512_TARGET static ALWAYS_INLINE void tile_body(int kcp, const uint32_t *restrict a, long a_rs,
                                                  long a_ks, const uint32_t *restrict b,
                                                  float *restrict c, long ldc, int load_c,
                                                  unsigned m0, unsigned m1, const int rows,
                                                  const int nvec)
{
    __m512 acc[MR][2];
    const __mmask16 mask[2] = {(__mmask16)m0, (__mmask16)m1};
#pragma GCC unroll 12
    for (int i = 0; i < rows; i++)
        for (int v = 0; v < nvec; v++)
            acc[i][v] = load_c ? _mm512_maskz_loadu_ps(mask[v], c + i * ldc + 16 * v) : _mm512_setzero_ps();
    for (int p = 0; p < kcp; p++) {
        __m512bh bv[2];
        for (int v = 0; v < nvec; v++) bv[v] = (__m512bh)_mm512_load_si512(b + 16 * v);
#pragma GCC unroll 12
        for (int i = 0; i < rows; i++) {
            const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i * a_rs]);
            for (int v = 0; v < nvec; v++) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], ai, bv[v]);
        }
        a += a_ks;
        b += NR;
    }
#pragma GCC unroll 12
    for (int i = 0; i < rows; i++)
        for (int v = 0; v < nvec; v++) _mm512_mask_storeu_ps(c + i * ldc + 16 * v, mask[v], acc[i][v]);
}

/* Kernels for rows 1..MR, 1 or 2 vectors, A row-major (stride a_stride
 * words between rows) or pair-major (MR words per pair). */
#define BF16_KERNEL(name, rows, nvec, a_rs, a_ks)                                           \
    AVX512_TARGET NOINLINE static void name(int kcp, const uint32_t *a, long a_stride,      \
                                            const uint32_t *b, float *c, long ldc,          \
                                            int load_c, unsigned m0, unsigned m1)           \
    {                                                                                       \
        (void)a_stride;                                                                     \
        tile_body(kcp, a, a_rs, a_ks, b, c, ldc, load_c, m0, m1, rows, nvec);               \
    }
#define BF16_KERNELS(rows)                                \
    BF16_KERNEL(kr##rows##_1, rows, 1, a_stride, 1)       \
    BF16_KERNEL(kr##rows##_2, rows, 2, a_stride, 1)       \
    BF16_KERNEL(kp##rows##_1, rows, 1, 1, MR)             \
    BF16_KERNEL(kp##rows##_2, rows, 2, 1, MR)
BF16_KERNELS(1)
BF16_KERNELS(2)
BF16_KERNELS(3)
BF16_KERNELS(4)
BF16_KERNELS(5)
BF16_KERNELS(6)
BF16_KERNELS(7)
BF16_KERNELS(8)
BF16_KERNELS(9)
BF16_KERNELS(10)
BF16_KERNELS(11)
BF16_KERNELS(12)

#define BF16_ROW(r) {{kr##r##_1, kr##r##_2}, {kp##r##_1, kp##r##_2}}
/* [rows - 1][A pair-major][nvec - 1] */
static const bf16_kernel kernels[MR][2][2] = {
    BF16_ROW(1), BF16_ROW(2), BF16_ROW(3), BF16_ROW(4), BF16_ROW(5), BF16_ROW(6),
    BF16_ROW(7), BF16_ROW(8), BF16_ROW(9), BF16_ROW(10), BF16_ROW(11), BF16_ROW(12)};

typedef struct {
    int ta, tb, M, N, K;
    int overwrite;          /* beta 0: the first K block stores instead of adding */
    const float *A, *B;
    long lda, ldb, ldc;
    float *C;
    int kb;                 /* K block, even */
    int panels;             /* column panels of NR */
    uint32_t *b_all;        /* op(B) packed, see b_panel() */
    long a_rs;              /* row stride of packed A (A stored [M, K]) */
    size_t a_words;         /* packed A per thread */
} avx_job;

/* K blocks of nearly equal even size, at most KC_MAX: a function of K alone. */
static int k_block(int K)
{
    const int nb = ceil_div(K, KC_MAX), kb = ceil_div(K, nb);
    return kb + (kb & 1);
}

/* Packed op(B): K block after K block, each a row of column panels; a
 * panel is kcp x NR words plus one 64-byte line, so that the same pair row
 * of successive panels does not fall in the same cache set (kcp*NR*4 bytes
 * is a multiple of 4 KB for many K). */
static long panel_words(int kcp) { return (long)kcp * NR + 16; }

static uint32_t *b_panel(const avx_job *g, int pc, int p)
{
    const int kcp = (ag_min_int(g->kb, g->K - pc) + 1) / 2;
    return g->b_all + (long)(pc / g->kb) * g->panels * panel_words(g->kb / 2) + (long)p * panel_words(kcp);
}

#define B_CHUNK 16   /* pairs of k per packing task when B is stored [K, N] */

/* Packs op(B) for K block pc.. (kc long, kcp pairs) into its panels
 * (b_panel), pair row q of a panel at + q*NR.  B stored [K, N]: task
 * `part` is pairs part*B_CHUNK.., every panel, reading each pair of rows
 * of B from start to end (one stream per row, which the prefetchers
 * follow).  B stored [N, K]: task `part` is panel `part`; column j of
 * op(B) is row j of B, read along k and turned into pair rows 16 x 16 at a
 * time by a register transpose. */
AVX512_TARGET NOINLINE static void avx_pack_b(const avx_job *g, int pc, int kc, int part)
{
    const int kcp = (kc + 1) / 2;
    if (!g->tb) {
        const int q1 = ag_min_int(kcp, (part + 1) * B_CHUNK);
        for (int q = part * B_CHUNK; q < q1; q++) {
            const int k = pc + 2 * q;
            const float *r0 = g->B + (long)k * g->ldb;
            const float *r1 = k + 1 < g->K ? r0 + g->ldb : NULL;
            for (int p = 0; p < g->panels; p++) {
                const int j0 = p * NR, cols = ag_min_int(NR, g->N - j0);
                uint32_t *d = b_panel(g, pc, p) + (long)q * NR;
                _mm512_store_si512(d, pairs_of_rows(r0 + j0, r1 ? r1 + j0 : NULL, mask16(cols)));
                const __m512i hi = cols > 16 ? pairs_of_rows(r0 + j0 + 16, r1 ? r1 + j0 + 16 : NULL, mask16(cols - 16))
                                             : _mm512_setzero_si512();
                _mm512_store_si512(d + 16, hi);
            }
        }
        return;
    }
    const int j0 = part * NR, cols = ag_min_int(NR, g->N - j0);
    uint32_t *dst = b_panel(g, pc, part);
    for (int h = 0; h < NR / 16; h++) {
        const int jh = j0 + 16 * h, n = ag_min_int(16, cols - 16 * h);
        for (int q = 0; q < kcp; q += 16) {
            __m512i v[16];
            for (int j = 0; j < 16; j++)
                v[j] = j < n ? pairs_of_run(g->B + (long)(jh + j) * g->ldb + pc + 2 * q, kc - 2 * q)
                             : _mm512_setzero_si512();
            transpose16(v);
            const int m = ag_min_int(16, kcp - q);   /* never past the panel */
            for (int t = 0; t < m; t++) _mm512_store_si512(dst + (long)(q + t) * NR + 16 * h, v[t]);
        }
    }
}

#define A_AHEAD 4   /* pairs of rows of A stored [K, M] fetched ahead while packing */

/* Rows ic..ic+mc-1 of op(A), K block pc.., into pa: row-major pairs
 * (row i at i*a_rs) when A is stored [M, K], else MR-row panels of
 * pair-major words ([panel][p][i]). */
AVX512_TARGET NOINLINE static void avx_pack_a(const avx_job *g, int pc, int kc, int ic, int mc, uint32_t *restrict pa)
{
    const int kcp = (kc + 1) / 2;
    if (!g->ta) {
        for (int i = 0; i < mc; i++) {
            const float *src = g->A + (long)(ic + i) * g->lda + pc;
            uint32_t *d = pa + i * g->a_rs;
            for (int q = 0; q < kcp; q += 16)   /* a_rs >= kcp rounded up to 16 */
                _mm512_store_si512(d + q, pairs_of_run(src + 2 * q, kc - 2 * q));
        }
        return;
    }
    /* A stored [K, M]: each pair of k rows is read along the chunk's mc
     * columns, one MR-wide piece per panel.  These are short runs (mc
     * floats) lda apart, which the hardware prefetchers follow poorly
     * from one row to the next: the rows A_AHEAD pairs on are fetched
     * while these are packed.  The weight gradients dy^T x on the 2-core
     * Zen 5, alternating runs: 1536 x 384 x 4096 565-639 GFLOP/s without,
     * 658-687 with 2, 4 or 8 pairs ahead alike; 384 x 1536 x 4096 563-569
     * without, 584-594 with; 128 x 128 x 4096 (rows 512 bytes apart, one
     * stream) within 3% either way. */
    for (int q = 0; q < kcp; q++) {
        const int k = pc + 2 * q;
        const float *r0 = g->A + (long)k * g->lda + ic;
        const float *r1 = k + 1 < g->K ? r0 + g->lda : NULL;
        if (k + 2 * A_AHEAD + 1 < g->K)
            for (int j = 0; j < mc; j += 16) {
                __builtin_prefetch(r0 + 2 * A_AHEAD * g->lda + j, 0, 3);
                __builtin_prefetch(r0 + (2 * A_AHEAD + 1) * g->lda + j, 0, 3);
            }
        for (int r = 0; r * MR < mc; r++) {
            const __m512i v = pairs_of_rows(r0 + r * MR, r1 ? r1 + r * MR : NULL, mask16(ag_min_int(MR, mc - r * MR)));
            _mm512_mask_storeu_epi32(pa + ((long)r * kcp + q) * MR, (__mmask16)0x0fff, v);
        }
    }
}

/* Prefetch for writing the cache lines of a rows x cols tile of C. */
static ALWAYS_INLINE void prefetch_tile(const float *c, int rows, long ldc, int cols)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols + 15; j += 16) __builtin_prefetch(c + i * ldc + ag_min_int(j, cols - 1), 1, 3);
}

/* C[i0:i1, j0:j1] over all K blocks; pa is this thread's packing space. */
AVX512_TARGET NOINLINE static void avx_unit(const avx_job *g, int i0, int i1, int j0, int j1, uint32_t *pa)
{
    for (int pc = 0; pc < g->K; pc += g->kb) {
        const int kc = ag_min_int(g->kb, g->K - pc), kcp = (kc + 1) / 2;
        const int load_c = pc > 0 || !g->overwrite;
        for (int ic = i0; ic < i1; ic += MC) {
            const int mc = ag_min_int(MC, i1 - ic);
            avx_pack_a(g, pc, kc, ic, mc, pa);
            for (int j = j0; j < j1; j += NR) {
                const int cols = ag_min_int(NR, j1 - j), nvec = cols > 16 ? 2 : 1;
                const unsigned m0 = mask16(cols), m1 = mask16(cols - 16);
                const uint32_t *bp = b_panel(g, pc, j / NR);
                for (int r = 0; r * MR < mc; r++) {
                    const int rows = ag_min_int(MR, mc - r * MR);
                    const uint32_t *ap = g->ta ? pa + (long)r * kcp * MR : pa + r * MR * g->a_rs;
                    float *c = g->C + (long)(ic + r * MR) * g->ldc + j;
                    /* C is read (or written) once per K block, far apart in
                     * time: fetch the next tile's rows while this one runs */
                    if ((r + 1) * MR < mc)
                        prefetch_tile(c + MR * g->ldc, ag_min_int(MR, mc - (r + 1) * MR), g->ldc, cols);
                    else if (j + NR < j1)
                        prefetch_tile(g->C + (long)ic * g->ldc + j + NR, ag_min_int(MR, mc), g->ldc,
                                      ag_min_int(NR, j1 - j - NR));
                    kernels[rows - 1][g->ta][nvec - 1](kcp, ap, g->a_rs, bp, c, g->ldc, load_c, m0, m1);
                }
            }
        }
    }
}

/* Packing op(B) is split into tasks: per K block, B_CHUNK pairs each (B
 * stored [K, N]) or one panel each (stored [N, K]). */
static int avx_b_parts(const avx_job *g) { return g->tb ? g->panels : ceil_div(g->kb / 2, B_CHUNK); }

static void avx_pack_b_task(const avx_job *g, int t)
{
    const int parts = avx_b_parts(g), pc = t / parts * g->kb, part = t % parts;
    const int kc = ag_min_int(g->kb, g->K - pc);
    avx_pack_b(g, pc, kc, part);
}

/* Units: r x c blocks of C on panel boundaries.  Rows are split first (a
 * unit then packs A once and sweeps all of B); columns only when there are
 * too few row panels.  A small product gets one unit per thread, handed out
 * statically (thread t gets the same rows of a tall product each time, the
 * rows the element-wise ops give it, as the fp32 gemm.c does); a larger
 * one two per thread, handed out dynamically, so that a thread that loses
 * its core for a while does not hold up the other. */
#define LOCAL_MAX (128.0 * 128 * 128 * 4)
/* op(B) up to this many elements is packed by each thread for itself. */
#define PRIVATE_B_MAX (64L * 1024)

typedef struct {
    int rp, cp, r, c;
} unit_plan;

static unit_plan plan_units(int M, int N, int nth, int per_thread)
{
    unit_plan u = {ceil_div(M, MR), ceil_div(N, NR), 1, 1};
    if (nth == 1) return u;
    const int want = per_thread * nth;
    u.r = ag_min_int(u.rp, want);
    u.c = ag_min_int(u.cp, ceil_div(want, u.r));
    return u;
}

/* Where unit b of n starts among np panels of `width`, at most `size`; in
 * long, since np x b can pass INT_MAX before the size does. */
static int unit_edge(int np, int b, int n, int width, int size)
{
    const long e = (long)np * b / n * width;
    return e < size ? (int)e : size;
}

static void avx_run_unit(const avx_job *g, const unit_plan *u, int t, uint32_t *pa)
{
    const int bi = t / u->c, bj = t % u->c;
    const int i0 = unit_edge(u->rp, bi, u->r, MR, g->M), i1 = unit_edge(u->rp, bi + 1, u->r, MR, g->M);
    const int j0 = unit_edge(u->cp, bj, u->c, NR, g->N), j1 = unit_edge(u->cp, bj + 1, u->c, NR, g->N);
    if (i0 < i1 && j0 < j1) avx_unit(g, i0, i1, j0, j1, pa);
}

/* One product's units, for ag_parallel.  With private_b each thread packs
 * op(B) for itself, into its own copy, before its first unit. */
typedef struct {
    const avx_job *g;
    const unit_plan *u;
    uint32_t *pa_all, *private_b;
    size_t b_words;
    int b_tasks;
    char packed[AG_POOL_MAX_THREADS];
} avx_call;

static void avx_pack_b_call(void *ctx, int t)
{
    const avx_call *c = ctx;
    avx_pack_b_task(c->g, t);
}

static void avx_unit_call(void *ctx, int t)
{
    avx_call *c = ctx;
    const int id = ag_thread_id();
    if (c->private_b) {
        avx_job mine = *c->g;
        mine.b_all = c->private_b + c->b_words * (size_t)id;
        if (!c->packed[id]) {
            for (int k = 0; k < c->b_tasks; k++) avx_pack_b_task(&mine, k);
            c->packed[id] = 1;
        }
        avx_run_unit(&mine, c->u, t, c->pa_all + c->g->a_words * (size_t)id);
    } else {
        avx_run_unit(c->g, c->u, t, c->pa_all + c->g->a_words * (size_t)id);
    }
}

static void gemm_avx512(int ta, int tb, int M, int N, int K, const float *A, long lda, const float *B,
                        long ldb, int overwrite, float *C, long ldc, int nth)
{
    avx_job g = {ta != 0, tb != 0, M, N, K, overwrite, A, B, lda, ldb, ldc, C, k_block(K),
                 ceil_div(N, NR), NULL, 0, 0};
    const int kcp_max = g.kb / 2;
    /* A stored [M, K]: row stride a multiple of 16 words, plus 16 when it
     * would be a multiple of 1 KB (rows that far apart share L1 sets) */
    g.a_rs = (long)words64((size_t)kcp_max);
    if (g.a_rs % 256 == 0) g.a_rs += 16;
    g.a_words = ta ? words64((size_t)MC * kcp_max) : (size_t)MC * g.a_rs;
    const size_t b_words = (size_t)ceil_div(K, g.kb) * g.panels * panel_words(kcp_max);
    const int local = (double)M * N * K < LOCAL_MAX;
    const unit_plan u = plan_units(M, N, nth, local ? 1 : 2);
    const int units = u.r * u.c;
    if (units < nth) nth = units;
    const int b_tasks = ceil_div(K, g.kb) * avx_b_parts(&g);
    /* A small op(B) is packed by every thread for itself: a little more
     * work, but no barrier between packing and multiplying, which matters
     * for the small products of a small model (and on a busy machine, where
     * a thread waits at a barrier for one that lost its core). */
    const int private_b = nth > 1 && (long)K * N <= PRIVATE_B_MAX;
    uint32_t *ws = workspace(sizeof(uint32_t) * (b_words * (private_b ? (size_t)nth : 1) + g.a_words * (size_t)nth));
    g.b_all = ws;
    uint32_t *pa_all = ws + b_words * (private_b ? (size_t)nth : 1);
    if (nth == 1) {
        for (int t = 0; t < b_tasks; t++) avx_pack_b_task(&g, t);
        for (int t = 0; t < units; t++) avx_run_unit(&g, &u, t, pa_all);
        return;
    }
    avx_call c = { &g, &u, pa_all, private_b ? ws : NULL, b_words, b_tasks, { 0 } };
    if (!private_b) ag_parallel(b_tasks, nth, avx_pack_b_call, &c);
    ag_parallel(units, nth, avx_unit_call, &c);
}

/* ---- AMX kernel ------------------------------------------------------------ */

/*
 * Written from Intel's documentation of AMX; it runs only where cpu.c finds
 * AMX-TILE, AMX-BF16, tile state in XCR0 and the Linux tile permission.
 * tests/test_bf16.c has checked it on a Sapphire Rapids machine's real tiles
 * (1166 GFLOP/s at 1024^3 on 2 threads there, about a quarter of the tiles'
 * ceiling); elsewhere tests/test_bf16_amx.c runs it on tiles emulated in C.
 *
 * Tiles (palette 1): 8 registers of up to 16 rows x 64 bytes.  Here every
 * tile is 16 x 64 bytes: tmm0-3 hold a 2 x 2 block of 16 x 16 fp32 C tiles,
 * tmm4-5 two A tiles (16 rows x 32 bf16 = 16 pairs of k), tmm6-7 two B
 * tiles (16 pair rows x 16 columns of pairs).  One step of the k loop is 4
 * tile loads and 4 tdpbf16ps, each 16 x 16 x 32 multiply-adds.
 *
 * op(A) and op(B) are packed once per call, shared by the threads, into
 * 1 KB tiles zero-padded to whole 32 x 32 blocks (so nothing reads past a
 * buffer and the padding adds zeros): A tile (t, c) = rows 16t.., k 32c..;
 * B tile (u, c) = columns 16u.., k pairs 16c...  The threads take 32 x 32
 * blocks of C (units of rows x columns as above, in blocks); each loads the
 * tile configuration once per call and releases the tiles at the end.  A
 * block of C inside the matrix is loaded and stored in place; one on the
 * ragged edge goes through a 32 x 32 buffer.
 */
#define AMX_KC 256   /* k per block: a 32-row A block and 32-column B block are 16 KB each */

typedef struct {
    uint8_t palette, start_row, reserved0[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} __attribute__((aligned(64))) amx_tilecfg;
_Static_assert(sizeof(amx_tilecfg) == 64, "the tile configuration is 64 bytes");

/* A static const object: the config is never written at run time (gcc's
 * ldtilecfg wrapper tells the compiler it reads only 8 of the 64 bytes). */
static const amx_tilecfg amx_cfg = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

/* gcc's tile load is an asm statement that does not tell the compiler it
 * reads memory: this barrier makes earlier stores (the edge buffer) land
 * first. */
#define AMX_MEMORY_BARRIER() __asm__ volatile("" ::: "memory")

typedef struct {
    int ta, tb, M, N, K, overwrite;
    const float *A, *B;
    long lda, ldb, ldc;
    float *C;
    int kc_tiles;           /* 32-wide k chunks: ceil(K / 32) */
    int m_tiles, n_tiles;   /* 16-row / 16-column tiles, rounded up to even */
    uint32_t *a_t, *b_t;    /* packed tiles, 256 words each: [tile][chunk] */
} amx_job;

/*
 * Packing runs in tasks of the order that reads the stored operand forward:
 * an operand whose tile rows run along its stored rows (A [M, K], B [N, K])
 * by row (column) tile, each task reading 16 rows from k 0 on; one stored
 * across (A [K, M], B [K, N]) by k chunk, each task reading the 32 stored
 * rows of its chunk from column 0 on.  By tile, the latter read 64 bytes of
 * each stored row in turn, rows lda apart, which the prefetchers do not
 * follow: 4.5-9 GB/s of fp32 against 35-40 (one Zen 5 core, the medium
 * model's dy^T x and dy W).  The tiles are the same either way.  By chunk,
 * the 32 rows are 32 streams, more than the prefetchers track: each read
 * fetches its row 4 tiles ahead (dy^T x, 1536 x 384 x 4096: A 5.6 ms by
 * tile, 3.1 by chunk, 1.8 with the prefetch, as fast as A [M, K] of the
 * same size read in place, which is past the caches).
 */
static ALWAYS_INLINE void amx_pack_prefetch(const float *r0, const float *r1)
{
    __builtin_prefetch(r0 + 64, 0, 3);
    if (r1) __builtin_prefetch(r1 + 64, 0, 3);
}

/* A tiles of row tile t, all chunks (A stored [M, K]). */
AVX512_TARGET NOINLINE static void amx_pack_a_rows(const amx_job *g, int t)
{
    for (int c = 0; c < g->kc_tiles; c++) {
        uint32_t *d = g->a_t + ((size_t)t * g->kc_tiles + c) * 256;
        const int k0 = 32 * c;
        for (int r = 0; r < 16; r++) {
            const int i = 16 * t + r;
            const __m512i w = i < g->M ? pairs_of_run(g->A + (long)i * g->lda + k0, g->K - k0)
                                       : _mm512_setzero_si512();
            _mm512_store_si512(d + 16 * r, w);
        }
    }
}

/* A tiles of chunk c, all row tiles (A stored [K, M]): a pair of k rows
 * gives one pair per row i (lane r = row 16t+r); the tile wants row-major,
 * so transpose. */
AVX512_TARGET NOINLINE static void amx_pack_a_chunk(const amx_job *g, int c)
{
    const int k0 = 32 * c;
    for (int t = 0; t < g->m_tiles; t++) {
        uint32_t *d = g->a_t + ((size_t)t * g->kc_tiles + c) * 256;
        const int rows = g->M - 16 * t;
        __m512i v[16];
        for (int q = 0; q < 16; q++) {
            const int k = k0 + 2 * q;
            v[q] = _mm512_setzero_si512();
            if (k < g->K && rows > 0) {
                const float *r0 = g->A + (long)k * g->lda + 16 * t;
                amx_pack_prefetch(r0, k + 1 < g->K ? r0 + g->lda : NULL);
                v[q] = pairs_of_rows(r0, k + 1 < g->K ? r0 + g->lda : NULL, mask16(rows));
            }
        }
        transpose16(v);
        for (int r = 0; r < 16; r++) _mm512_store_si512(d + 16 * r, v[r]);
    }
}

/* B tiles of chunk c, all column tiles (B stored [K, N]). */
AVX512_TARGET NOINLINE static void amx_pack_b_chunk(const amx_job *g, int c)
{
    const int k0 = 32 * c;
    for (int u = 0; u < g->n_tiles; u++) {
        uint32_t *d = g->b_t + ((size_t)u * g->kc_tiles + c) * 256;
        const int cols = g->N - 16 * u;
        for (int q = 0; q < 16; q++) {
            const int k = k0 + 2 * q;
            __m512i v = _mm512_setzero_si512();
            if (k < g->K && cols > 0) {
                const float *r0 = g->B + (long)k * g->ldb + 16 * u;
                amx_pack_prefetch(r0, k + 1 < g->K ? r0 + g->ldb : NULL);
                v = pairs_of_rows(r0, k + 1 < g->K ? r0 + g->ldb : NULL, mask16(cols));
            }
            _mm512_store_si512(d + 16 * q, v);
        }
    }
}

/* B tiles of column tile u, all chunks (B stored [N, K]): column j of
 * op(B) is row j of B (lane q = pair q); the tile wants pair rows, so
 * transpose. */
AVX512_TARGET NOINLINE static void amx_pack_b_cols(const amx_job *g, int u)
{
    const int cols = g->N - 16 * u;
    for (int c = 0; c < g->kc_tiles; c++) {
        uint32_t *d = g->b_t + ((size_t)u * g->kc_tiles + c) * 256;
        const int k0 = 32 * c;
        __m512i v[16];
        for (int j = 0; j < 16; j++)
            v[j] = j < cols ? pairs_of_run(g->B + (long)(16 * u + j) * g->ldb + k0, g->K - k0)
                            : _mm512_setzero_si512();
        transpose16(v);
        for (int q = 0; q < 16; q++) _mm512_store_si512(d + 16 * q, v[q]);
    }
}

/* The 32 x 32 block (bm, bn) of C, k chunks c0..c1-1; load_c: start from C. */
AMX_TARGET NOINLINE static void amx_block(const amx_job *g, int bm, int bn, int c0, int c1, int load_c)
{
    const int i0 = 32 * bm, j0 = 32 * bn;
    const int rows = ag_min_int(32, g->M - i0), cols = ag_min_int(32, g->N - j0);
    float edge[32 * 32] __attribute__((aligned(64)));
    float *c = g->C + (long)i0 * g->ldc + j0;
    long ld = g->ldc;
    const int inside = rows == 32 && cols == 32;
    if (!inside) {
        if (load_c) {
            memset(edge, 0, sizeof edge);
            for (int i = 0; i < rows; i++) memcpy(edge + 32 * i, c + (long)i * g->ldc, sizeof(float) * cols);
        }
        c = edge;
        ld = 32;
    }
    const long stride = ld * (long)sizeof(float);
    AMX_MEMORY_BARRIER();
    if (load_c) {
        amx_load(0, c, stride);
        amx_load(1, c + 16, stride);
        amx_load(2, c + 16 * ld, stride);
        amx_load(3, c + 16 * ld + 16, stride);
    } else {
        amx_zero(0);
        amx_zero(1);
        amx_zero(2);
        amx_zero(3);
    }
    const size_t tile = 256, a_step = (size_t)g->kc_tiles * tile;
    const uint32_t *a0 = g->a_t + (size_t)(2 * bm) * a_step, *a1 = a0 + a_step;
    const uint32_t *b0 = g->b_t + (size_t)(2 * bn) * a_step, *b1 = b0 + a_step;
    for (int k = c0; k < c1; k++) {
        amx_load(4, a0 + k * tile, 64);
        amx_load(5, a1 + k * tile, 64);
        amx_load(6, b0 + k * tile, 64);
        amx_load(7, b1 + k * tile, 64);
        amx_dpbf16ps(0, 4, 6);
        amx_dpbf16ps(1, 4, 7);
        amx_dpbf16ps(2, 5, 6);
        amx_dpbf16ps(3, 5, 7);
    }
    amx_store(0, c, stride);
    amx_store(1, c + 16, stride);
    amx_store(2, c + 16 * ld, stride);
    amx_store(3, c + 16 * ld + 16, stride);
    AMX_MEMORY_BARRIER();
    if (!inside) {
        float *dst = g->C + (long)i0 * g->ldc + j0;
        for (int i = 0; i < rows; i++) memcpy(dst + (long)i * g->ldc, edge + 32 * i, sizeof(float) * cols);
    }
}

AMX_TARGET NOINLINE static void amx_configure(void) { amx_loadconfig(&amx_cfg); }
AMX_TARGET NOINLINE static void amx_done(void) { amx_release(); }

/* Blocks [bm0, bm1) x [bn0, bn1): for each k block, the columns, then the
 * rows, so one block column of B (2 x 8 tiles, 16 KB) stays in L1 while
 * the unit's A blocks stream past it. */
static void amx_unit(const amx_job *g, int bm0, int bm1, int bn0, int bn1)
{
    const int chunks = AMX_KC / 32;
    for (int c0 = 0; c0 < g->kc_tiles; c0 += chunks) {
        const int c1 = ag_min_int(g->kc_tiles, c0 + chunks), load_c = c0 > 0 || !g->overwrite;
        for (int bn = bn0; bn < bn1; bn++)
            for (int bm = bm0; bm < bm1; bm++) amx_block(g, bm, bn, c0, c1, load_c);
    }
}

static void amx_run_unit(const amx_job *g, const unit_plan *u, int t)
{
    const int bi = t / u->c, bj = t % u->c;
    amx_unit(g, unit_edge(u->rp, bi, u->r, 1, u->rp), unit_edge(u->rp, bi + 1, u->r, 1, u->rp),
             unit_edge(u->cp, bj, u->c, 1, u->cp), unit_edge(u->cp, bj + 1, u->c, 1, u->cp));
}

/* One product's packing and units, for ag_parallel; a unit sets up the
 * tiles of the thread it runs on and releases them. */
typedef struct {
    amx_job *g;
    const unit_plan *u;
} amx_call;

/* The packing's tasks, in the order that reads each operand forward (above): A's, then B's. */
static int amx_a_tasks(const amx_job *g) { return g->ta ? g->kc_tiles : g->m_tiles; }
static int amx_pack_tasks(const amx_job *g) { return amx_a_tasks(g) + (g->tb ? g->n_tiles : g->kc_tiles); }

static void amx_pack(const amx_job *g, int t)
{
    const int na = amx_a_tasks(g);
    if (t < na)
        g->ta ? amx_pack_a_chunk(g, t) : amx_pack_a_rows(g, t);
    else
        g->tb ? amx_pack_b_cols(g, t - na) : amx_pack_b_chunk(g, t - na);
}

static void amx_pack_call(void *ctx, int t)
{
    const amx_call *c = ctx;
    amx_pack(c->g, t);
}

static void amx_unit_call(void *ctx, int t)
{
    const amx_call *c = ctx;
    amx_configure();
    amx_run_unit(c->g, c->u, t);
    amx_done();
}

static void gemm_amx(int ta, int tb, int M, int N, int K, const float *A, long lda, const float *B,
                     long ldb, int overwrite, float *C, long ldc, int nth)
{
    amx_job g = {ta != 0, tb != 0, M, N, K, overwrite, A, B, lda, ldb, ldc, C, ceil_div(K, 32),
                 2 * ceil_div(M, 32), 2 * ceil_div(N, 32), NULL, NULL};
    const size_t a_words = (size_t)g.m_tiles * g.kc_tiles * 256, b_words = (size_t)g.n_tiles * g.kc_tiles * 256;
    uint32_t *ws = workspace(sizeof(uint32_t) * (a_words + b_words));
    g.a_t = ws;
    g.b_t = ws + a_words;
    /* units of 32 x 32 blocks, rows first (as the AVX-512 kernel's panels) */
    unit_plan u = {g.m_tiles / 2, g.n_tiles / 2, 1, 1};
    if (nth > 1) {
        u.r = ag_min_int(u.rp, 2 * nth);
        u.c = ag_min_int(u.cp, ceil_div(2 * nth, u.r));
    }
    const int units = u.r * u.c, pack_tasks = amx_pack_tasks(&g);
    if (units < nth) nth = units;
    if (nth == 1) {
        for (int t = 0; t < pack_tasks; t++) amx_pack(&g, t);
        amx_configure();
        for (int t = 0; t < units; t++) amx_run_unit(&g, &u, t);
        amx_done();
        return;
    }
    amx_call c = { &g, &u };
    ag_parallel(pack_tasks, nth, amx_pack_call, &c);
    ag_parallel(units, nth, amx_unit_call, &c);
}

/* ---- conversion helper ------------------------------------------------------ */

AVX512_TARGET NOINLINE static void convert_avx512(uint16_t *dst, const float *src, long n)
{
    long i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 lo = _mm512_loadu_ps(src + i), hi = _mm512_loadu_ps(src + i + 16);
        /* vcvtne2ps2bf16 turns subnormal inputs into zeros; they are rare,
         * so a block that has one is redone by the plain rounding */
        const __m512i exp = _mm512_set1_epi32(0x7f800000), frac = _mm512_set1_epi32(0x007fffff);
        const __mmask16 sub_lo = _mm512_mask_test_epi32_mask(
            _mm512_testn_epi32_mask(_mm512_castps_si512(lo), exp), _mm512_castps_si512(lo), frac);
        const __mmask16 sub_hi = _mm512_mask_test_epi32_mask(
            _mm512_testn_epi32_mask(_mm512_castps_si512(hi), exp), _mm512_castps_si512(hi), frac);
        if (sub_lo | sub_hi) {
            convert_plain(dst + i, src + i, 32);
            continue;
        }
        _mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
    convert_plain(dst + i, src + i, n - i);
}

#endif /* BF16_X86 */

/* ---- the fp32 kernel on bf16-rounded operands ------------------------------ */

/*
 * AG_BF16_FP32: op(A) and op(B) rounded to bf16 as the packing above
 * rounds them (nearest even, NaN made quiet, a subnormal to zero), kept as
 * fp32 values with the low 16 bits zero, then multiplied by the fp32
 * kernel (gemm.c).  A product of two bf16 is exact in fp32 (8-bit
 * significands), so each fused multiply-add rounds once, as each half of a
 * vdpbf16ps does: the same mixed precision, summed in k order (one term a
 * step, where vdpbf16ps adds a pair's odd product, then its even one), in
 * an order fixed by K alone, so bitwise the same on any thread count; the
 * bound of tests/bf16_check.h covers both orders.  The rounding is one
 * pass over each operand into this thread's buffer, rows shared between
 * the threads (each element alone: the split changes no bit); the fp32
 * kernel then packs or reads those copies as it would the originals.
 */
#ifndef AG_DOUBLE
static _Thread_local ag_scratch rounded_operands;

/* y = bf16(x) for n floats, a subnormal x to zero; branch-free integer
 * arithmetic on the bits, which the compiler makes vector code of. */
static void round_flush_plain(const float *restrict x, float *restrict y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        u = round_word((u & 0x7f800000u) == 0 ? u & 0x80000000u : u);
        memcpy(&y[i], &u, sizeof u);
    }
}

#if BF16_X86
/* The same with vcvtneps2bf16 (which rounds exactly so: it is the
 * packing's conversion), 16 at a time, widened back to fp32 by a shift:
 * about twice the plain loop's speed. */
AVX512_TARGET NOINLINE static void round_flush_avx512(const float *restrict x, float *restrict y, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 m = (__mmask16)mask16((int)(n - i < 16 ? n - i : 16));
        const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
        _mm512_mask_storeu_epi32(y + i, m, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
}
#endif

void ag_fast_round_bf16_ftz(const float *x, float *y, size_t n, int plain)
{
#if BF16_X86
    if (!plain && ag_cpu_avx512_bf16()) {
        round_flush_avx512(x, y, n);
        return;
    }
#endif
    (void)plain;
    round_flush_plain(x, y, n);
}

typedef struct {
    const float *A, *B;
    long lda, ldb;
    size_t rows_a, cols_a, cols_b;   /* the operands as stored */
    float *a, *b;                    /* their rounded copies, rows packed */
} round_job;

/* rows [lo, hi) of A's stored rows followed by B's */
static void round_rows(void *ctx, size_t lo, size_t hi)
{
    const round_job *j = ctx;
    for (size_t r = lo; r < hi; r++) {
        if (r < j->rows_a)
            ag_fast_round_bf16_ftz(j->A + (long)r * j->lda, j->a + r * j->cols_a, j->cols_a, 0);
        else
            ag_fast_round_bf16_ftz(j->B + (long)(r - j->rows_a) * j->ldb, j->b + (r - j->rows_a) * j->cols_b, j->cols_b, 0);
    }
}

/* Floats of each rounded copy, whole 64-byte lines */
static size_t floats64(size_t n) { return (n + 15) / 16 * 16; }

/* beta 0 (overwrite) or 1 */
static void gemm_fp32_rounded(int ta, int tb, int M, int N, int K, const float *A, long lda, const float *B,
                              long ldb, int overwrite, float *C, long ldc)
{
    round_job j = {A, B, lda, ldb, (size_t)(ta ? K : M), (size_t)(ta ? M : K), (size_t)(tb ? K : N), NULL, NULL};
    const size_t rows_b = (size_t)(tb ? N : K), na = floats64(j.rows_a * j.cols_a), nb = floats64(rows_b * j.cols_b);
    /* a C too far apart to pass as an int leading dimension goes through a
     * packed copy (tests make such strides; the engine does not) */
    const int c_copy = ldc > 0x7fffffffL;
    float *ws = ag_scratch_get(&rounded_operands, sizeof(float) * (na + nb + (c_copy ? (size_t)M * N : 0)),
                               "bf16-rounded matrix-multiply operands");
    j.a = ws;
    j.b = ws + na;
    const size_t elems = j.rows_a * j.cols_a + rows_b * j.cols_b;
    ag_parallel_for(j.rows_a + rows_b, 2 * elems, round_rows, &j);
    float *c = c_copy ? ws + na + nb : C;
    const int ld = c_copy ? N : (int)ldc;
    if (c_copy && !overwrite)
        for (int i = 0; i < M; i++) memcpy(c + (size_t)i * N, C + (long)i * ldc, sizeof(float) * N);
    ag_fast_gemm(ta, tb, M, N, K, j.a, (int)j.cols_a, j.b, (int)j.cols_b, overwrite ? 0.0f : 1.0f, c, ld);
    if (c_copy)
        for (int i = 0; i < M; i++) memcpy(C + (long)i * ldc, c + (size_t)i * N, sizeof(float) * N);
}
#endif

/* ---- entry points ------------------------------------------------------------ */

#if BF16_X86
/* Whether a product is shared is decided as for the fp32 one (gemm.c,
 * ag_fast_gemm_madd_ns; pool.c's ag_threads_for): from its time on one
 * thread, with the time of a multiply-add of each kernel measured once, on
 * a 64 x 64 x 64 product, the fastest of 8 runs.  In femtoseconds, per
 * kernel; 0: not yet measured. */
static atomic_long madd_fs[AG_BF16_AMX + 1];

static double bf16_madd_ns(int kernel)
{
    long fs = atomic_load_explicit(&madd_fs[kernel], memory_order_relaxed);
    if (fs > 0) return (double)fs * 1e-6;
    enum { S = 64, RUNS = 8 };
    float *x = malloc(sizeof(float) * 3 * S * S);
    double best = 1e9;
    for (int i = 0; x && i < 3 * S * S; i++) x[i] = (float)(i % 13) / 13;
    for (int r = 0; x && r < RUNS; r++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (kernel == AG_BF16_AMX)
            gemm_amx(0, 0, S, S, S, x, S, x + S * S, S, 1, x + 2 * S * S, S, 1);
        else
            gemm_avx512(0, 0, S, S, S, x, S, x + S * S, S, 1, x + 2 * S * S, S, 1);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double t = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (t > 0 && t < best) best = t;
    }
    free(x);
    const double ns = best < 1e9 ? best * 1e9 / ((double)S * S * S) : 0.01;
    atomic_store_explicit(&madd_fs[kernel], (long)(ns * 1e6) + 1, memory_order_relaxed);
    return ns;
}
#endif

void ag_fast_gemm_bf16_on(int kernel, int trans_a, int trans_b, int M, int N, int K, const float *A,
                       long lda, const float *B, long ldb, float beta, float *C, long ldc)
{
    ag_gemm_check_args("ag_fast_gemm_bf16", trans_a, trans_b, M, N, K, lda, ldb, ldc);
#ifndef AG_AMX_EMULATE
    if (kernel > AG_BF16_FP32 && kernel > ag_cpu_bf16_hw())
        ag_error("ag_fast_gemm_bf16: the %s kernel is not available on this CPU", ag_bf16_kernel_name(kernel));
#endif
    if (kernel == AG_BF16_NONE) {
#ifndef AG_DOUBLE
        ag_kernels_reference.gemm_bf16(trans_a, trans_b, M, N, K, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
#else
        ag_error("ag_fast_gemm_bf16: no bf16 kernel on this CPU, and the plain one needs the float build");
#endif
        return;
    }
    if (M == 0 || N == 0) return;
    /* beta other than 0 and 1, or nothing to add: scale C here, then add */
    int overwrite = beta == 0;
    if (K == 0 || (beta != 0 && beta != 1)) {
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) C[(long)i * ldc + j] = beta == 0 ? 0 : beta * C[(long)i * ldc + j];
        overwrite = 0;
        if (K == 0) return;
    }
#ifndef AG_DOUBLE
    if (kernel == AG_BF16_FP32) {
        gemm_fp32_rounded(trans_a, trans_b, M, N, K, A, lda, B, ldb, overwrite, C, ldc);
        return;
    }
#else
    if (kernel == AG_BF16_FP32) ag_error("ag_fast_gemm_bf16: the fp32 kernel needs the float build");
    (void)A;
    (void)B;
#endif
#if BF16_X86
    const int nth = ag_threads_for((double)M * N * K * bf16_madd_ns(kernel));
    if (kernel == AG_BF16_AMX)
        gemm_amx(trans_a, trans_b, M, N, K, A, lda, B, ldb, overwrite, C, ldc, nth);
    else
        gemm_avx512(trans_a, trans_b, M, N, K, A, lda, B, ldb, overwrite, C, ldc, nth);
#else
    (void)overwrite;   /* unreachable: no kernel but FP32 and NONE is available here */
#endif
}

void ag_fast_gemm_bf16(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc)
{
    ag_fast_gemm_bf16_on(ag_cpu_bf16(), trans_a, trans_b, M, N, K, A, lda, B, ldb, beta, C, ldc);
}

void ag_fast_f32_to_bf16(uint16_t *dst, const float *src, long n)
{
#if BF16_X86
    if (ag_cpu_avx512_bf16()) {
        convert_avx512(dst, src, n);
        return;
    }
#endif
    convert_plain(dst, src, n);
}

/* The plain rounding of ag_bf16_bits in integer arithmetic on the float's
 * bits, branch-free so the compiler makes vector code of it; x may be y. */
void ag_fast_round_bf16(const float *x, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        u = round_word(u);
        memcpy(&y[i], &u, sizeof u);
    }
}

/* The most gemm_avx512, gemm_amx or gemm_fp32_rounded (with the fp32
 * kernel's own) asks for, for any transposes, on the kernel ag_cpu_bf16()
 * picks (kernels.h, gemm_bf16_scratch). */
size_t ag_fast_gemm_bf16_scratch(int M, int N, int K)
{
    if (M <= 0 || N <= 0 || K <= 0) return 0;
    const int kernel = ag_cpu_bf16();
#ifndef AG_DOUBLE
    if (kernel == AG_BF16_FP32)
        return sizeof(float) * (floats64((size_t)M * K) + floats64((size_t)K * N)) + ag_fast_gemm_scratch(M, N, K);
#endif
    (void)kernel;
#if BF16_X86
    if (kernel == AG_BF16_AMX)
        return sizeof(uint32_t) * (size_t)(2 * ceil_div(M, 32) + 2 * ceil_div(N, 32)) * (size_t)ceil_div(K, 32) * 256;
    if (kernel == AG_BF16_AVX512) {
        const int nth = ag_max_threads();   /* at most: whether it shares depends on measured times */
        const int kb = k_block(K);
        long a_rs = (long)words64((size_t)kb / 2);
        if (a_rs % 256 == 0) a_rs += 16;
        const size_t a_words = (size_t)MC * (size_t)a_rs;   /* A stored [M, K]; [K, M] packs less */
        const size_t b_words = (size_t)ceil_div(K, kb) * (size_t)ceil_div(N, NR) * (size_t)panel_words(kb / 2);
        const int private_b = nth > 1 && (long)K * N <= PRIVATE_B_MAX;
        return sizeof(uint32_t) * (b_words * (private_b ? (size_t)nth : 1) + a_words * (size_t)nth);
    }
#endif
    return 0;   /* the plain definition runs: it packs nothing */
}
