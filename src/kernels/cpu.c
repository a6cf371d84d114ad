/*
 * cpu.c - run-time detection and choice of the bf16 kernels (see cpu.h).
 *
 * An instruction set is usable only when the CPU has it (cpuid) AND the OS
 * saves its registers on a context switch (XCR0, read with xgetbv once
 * cpuid says OSXSAVE).  AMX tile data is also off by default on Linux: a
 * process must ask for it with arch_prctl(ARCH_REQ_XCOMP_PERM,
 * XFEATURE_XTILEDATA) before its first tile instruction, or that
 * instruction faults.  The permission is per process (every thread, and
 * children), so asking once is enough; if the kernel refuses (too old, or
 * a signal stack too small for the tile state), the AVX-512 kernel is used.
 * Whether that kernel beats the fp32 one is measured (see ag_cpu_bf16).
 * The cache sizes come from cpuid as well (see ag_cpu_cache_sizes).
 */
#if defined(__linux__)
#define _GNU_SOURCE   /* syscall() */
#endif

#include "cpu.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(AG_NO_X86_KERNELS)
#define AG_CPU_X86 1
#include <cpuid.h>
#include <immintrin.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#else
#define AG_CPU_X86 0
#endif

#if AG_CPU_X86

/* cpuid leaf 7 sub-leaf 0, EBX */
#define CPUID7_EBX_AVX512F (1u << 16)
#define CPUID7_EBX_AVX512DQ (1u << 17)
#define CPUID7_EBX_AVX512BW (1u << 30)
#define CPUID7_EBX_AVX512VL (1u << 31)
/* cpuid leaf 7 sub-leaf 0, EDX */
#define CPUID7_EDX_AMX_BF16 (1u << 22)
#define CPUID7_EDX_AMX_TILE (1u << 24)
/* cpuid leaf 7 sub-leaf 1, EAX */
#define CPUID7_1_EAX_AVX512_BF16 (1u << 5)
/* cpuid leaf 1, ECX */
#define CPUID1_ECX_OSXSAVE (1u << 27)
/* XCR0: x87 | SSE | AVX | opmask | ZMM0-15 upper halves | ZMM16-31 */
#define XCR0_AVX512 ((1u << 1) | (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7))
/* XCR0: XTILECFG | XTILEDATA */
#define XCR0_AMX ((1u << 17) | (1u << 18))

/* Linux, arch/x86/include/uapi/asm/prctl.h */
#define AG_ARCH_GET_XCOMP_PERM 0x1022
#define AG_ARCH_REQ_XCOMP_PERM 0x1023
#define AG_XFEATURE_XTILEDATA 18

static unsigned long long xcr0(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (unsigned long long)hi << 32 | lo;
}

/* Whether palette 1 offers the tiles the AMX kernel configures: 8 tiles of
 * 16 rows x 64 bytes (cpuid leaf 0x1D sub-leaf 1: EBX = bytes per row |
 * tile count << 16, ECX = rows). */
static int amx_palette_ok(void)
{
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 0x1D) return 0;
    __cpuid_count(0x1D, 0, a, b, c, d);
    if (a < 1) return 0;   /* highest palette */
    __cpuid_count(0x1D, 1, a, b, c, d);
    return (b & 0xFFFF) >= 64 && (b >> 16) >= 8 && (c & 0xFFFF) >= 16;
}

/* Asks Linux for the tile data permission; 1 when granted. */
static int amx_permission(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    unsigned long features = 0;
    if (syscall(SYS_arch_prctl, AG_ARCH_REQ_XCOMP_PERM, AG_XFEATURE_XTILEDATA) != 0) return 0;
    if (syscall(SYS_arch_prctl, AG_ARCH_GET_XCOMP_PERM, &features) != 0) return 0;
    return (features >> AG_XFEATURE_XTILEDATA) & 1;
#else
    return 0;   /* other systems: no known way to ask, so no AMX */
#endif
}

/* The best kernel the CPU and OS allow (FP32 when they have no bf16
 * instructions); AMX only when want_amx (asking for
 * the tile permission has a cost: every signal frame of the process grows
 * by the 8 KB of tile data). */
static int detect(int want_amx)
{
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) return AG_BF16_FP32;
    __cpuid(1, a, b, c, d);
    if (!(c & CPUID1_ECX_OSXSAVE)) return AG_BF16_FP32;   /* xgetbv would fault */
    const unsigned long long xcr = xcr0();
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned max_sub = a, ebx7 = b, edx7 = d;
    if (max_sub < 1) return AG_BF16_FP32;
    __cpuid_count(7, 1, a, b, c, d);
    const unsigned avx512_all = CPUID7_EBX_AVX512F | CPUID7_EBX_AVX512DQ | CPUID7_EBX_AVX512BW |
                                CPUID7_EBX_AVX512VL;
    if ((ebx7 & avx512_all) != avx512_all || !(a & CPUID7_1_EAX_AVX512_BF16) ||
        (xcr & XCR0_AVX512) != XCR0_AVX512)
        return AG_BF16_FP32;
    const unsigned amx_all = CPUID7_EDX_AMX_BF16 | CPUID7_EDX_AMX_TILE;
    if (want_amx && (edx7 & amx_all) == amx_all && (xcr & XCR0_AMX) == XCR0_AMX &&
        amx_palette_ok() && amx_permission())
        return AG_BF16_AMX;
    return AG_BF16_AVX512;
}

/* ---- vdpbf16ps against the fp32 kernel's multiply-add ------------------- */

/* Register-only loops of one instruction, many independent accumulators
 * (more than latency x throughput asks on any CPU we know), no memory
 * access inside; the empty asm keeps each step a step.  Each returns a
 * value of its accumulators, so that the work is kept. */
#define CPU_ACC12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define CPU_ACC16(X) CPU_ACC12(X) X(12) X(13) X(14) X(15)

/* The fp32 kernel's multiply-add, as gemm.c compiles it: a fused
 * multiply-add on vectors of the width this build gives it (zmm with
 * AVX-512, else ymm).  A build without FMA makes the kernel do a multiply
 * and an add per multiply-add, on narrower vectors than vdpbf16ps's: not
 * measured (FMA_VEC_BYTES 0), vdpbf16ps does more there on any CPU that
 * has it. */
#if defined(__AVX512F__)
#define FMA_VEC_BYTES 64
typedef __m512 fma_vec;
#define FMA_SET1(x) _mm512_set1_ps(x)
#define FMA_MADD(a, b, c) _mm512_fmadd_ps(a, b, c)
#define FMA_FIRST(v) _mm512_cvtss_f32(v)
#elif defined(__FMA__)
#define FMA_VEC_BYTES 32
typedef __m256 fma_vec;
#define FMA_SET1(x) _mm256_set1_ps(x)
#define FMA_MADD(a, b, c) _mm256_fmadd_ps(a, b, c)
#define FMA_FIRST(v) _mm256_cvtss_f32(v)
#else
#define FMA_VEC_BYTES 0
#endif

#if FMA_VEC_BYTES
static double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

__attribute__((noinline)) static float fma_rounds(long n, float seed)
{
    const fma_vec a = FMA_SET1(seed), b = FMA_SET1(1e-3f);
#define DECL(i) fma_vec c##i = FMA_SET1((float)(i));
#define STEP(i) c##i = FMA_MADD(a, b, c##i);
    CPU_ACC12(DECL)
    for (long r = 0; r < n; r++) {
        CPU_ACC12(STEP)
        __asm__ volatile("" : "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3), "+x"(c4), "+x"(c5), "+x"(c6), "+x"(c7),
                         "+x"(c8), "+x"(c9), "+x"(c10), "+x"(c11));
    }
#undef DECL
#undef STEP
    return FMA_FIRST(c0) + FMA_FIRST(c1) + FMA_FIRST(c2) + FMA_FIRST(c3) + FMA_FIRST(c4) + FMA_FIRST(c5) +
           FMA_FIRST(c6) + FMA_FIRST(c7) + FMA_FIRST(c8) + FMA_FIRST(c9) + FMA_FIRST(c10) + FMA_FIRST(c11);
}

/* vdpbf16ps zmm: 16 lanes x 2 products each */
__attribute__((noinline, target("avx512f,avx512bf16"))) static float dot_rounds(long n, float seed)
{
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(seed), _mm512_set1_ps(2e-3f));
#define DECL(i) __m512 c##i = _mm512_set1_ps((float)(i));
#define STEP(i) c##i = _mm512_dpbf16_ps(c##i, a, a);
    CPU_ACC16(DECL)
    for (long r = 0; r < n; r++) {
        CPU_ACC16(STEP)
        __asm__ volatile("" : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7));
        __asm__ volatile("" : "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11), "+v"(c12), "+v"(c13), "+v"(c14), "+v"(c15));
    }
#undef DECL
#undef STEP
    __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, c##i);
    CPU_ACC16(SUM)
#undef SUM
    return _mm512_reduce_add_ps(s);
}
#endif

/* Multiply-adds per second of vdpbf16ps over the fp32 FMA's, measured on
 * this thread: a short warm-up of each (a core may run its first wide
 * vector instructions slower while it raises their power), then the
 * fastest of TRIES runs of each, alternated.  About 200 000 instructions
 * in all: 0.12-0.18 ms on the Emerald Rapids, whose vdpbf16ps issues at
 * half the FMA's rate. */
static double measure_dot_over_fma(void)
{
#if !FMA_VEC_BYTES
    return 2;
#else
    enum { ROUNDS = 1024, TRIES = 5 };
    volatile float sink = 0;
    sink += fma_rounds(2 * ROUNDS, 1e-3f);
    sink += dot_rounds(ROUNDS, 1e-3f);
    double fma_best = 1e9, dot_best = 1e9;
    for (int t = 0; t < TRIES; t++) {
        double t0 = now_seconds();
        sink += fma_rounds(ROUNDS, 1e-3f);
        double t1 = now_seconds();
        if (t1 - t0 > 0 && t1 - t0 < fma_best) fma_best = t1 - t0;
        t0 = now_seconds();
        sink += dot_rounds(ROUNDS, 1e-3f);
        t1 = now_seconds();
        if (t1 - t0 > 0 && t1 - t0 < dot_best) dot_best = t1 - t0;
    }
    (void)sink;
    const double fma_madds = (double)ROUNDS * 12 * (FMA_VEC_BYTES / 4), dot_madds = (double)ROUNDS * 16 * 32;
    if (fma_best >= 1e9 || dot_best >= 1e9) return 1;   /* a clock that did not move: no preference */
    return (dot_madds / dot_best) / (fma_madds / fma_best);
#endif
}

/* One cache of a deterministic cache parameters leaf (Intel's 4, AMD's
 * 0x8000001D, the same layout): EAX bits 4:0 type (0: no more caches, 1:
 * data, 3: unified), 7:5 level, 25:14 logical CPUs sharing it - 1; EBX
 * 11:0 line - 1, 21:12 partitions - 1, 31:22 ways - 1; ECX sets - 1. */
static void caches_from_leaf(unsigned leaf, ag_cpu_caches *c)
{
    for (unsigned i = 0; i < 16; i++) {
        unsigned a, b, cx, d;
        __cpuid_count(leaf, i, a, b, cx, d);
        const unsigned type = a & 31, level = a >> 5 & 7, sharing = (a >> 14 & 4095) + 1;
        if (type == 0) break;
        if (type != 1 && type != 3) continue;   /* instruction caches */
        const int ways = (int)(b >> 22) + 1;
        const long size = (long)ways * ((b >> 12 & 1023) + 1) * ((b & 4095) + 1) * ((long)cx + 1);
        if (level == 1) {
            c->l1d = size;
            c->l1d_ways = ways;
        } else if (level == 2) {
            c->l2 = size;
        } else if (level == 3) {
            c->l3_share = size / sharing;
        }
    }
}

static ag_cpu_caches detect_caches(void)
{
    ag_cpu_caches c = {0, 0, 0, 0};
    unsigned a, b, cx, d;
    const unsigned max = __get_cpuid_max(0, NULL), ext = __get_cpuid_max(0x80000000, NULL);
    __cpuid(0, a, b, cx, d);
    const int amd = b == 0x68747541;   /* "Auth" of AuthenticAMD */
    if (!amd && max >= 4) caches_from_leaf(4, &c);
    if (amd && ext >= 0x8000001D) caches_from_leaf(0x8000001D, &c);
    if (amd && c.l1d == 0 && ext >= 0x80000006) {
        /* 0x80000005 ECX: L1d KB in 31:24, ways in 23:16; 0x80000006 ECX:
         * L2 KB in 31:16; EDX: L3 in 512 KB units in 31:18, the whole
         * processor's (shared by every online CPU, as far as we know) */
        __cpuid(0x80000005, a, b, cx, d);
        c.l1d = (long)(cx >> 24) * 1024;
        c.l1d_ways = (int)(cx >> 16 & 255);
        __cpuid(0x80000006, a, b, cx, d);
        c.l2 = (long)(cx >> 16) * 1024;
        long cpus = 1;
#ifdef _SC_NPROCESSORS_ONLN
        cpus = sysconf(_SC_NPROCESSORS_ONLN);
        if (cpus < 1) cpus = 1;
#endif
        c.l3_share = (long)(d >> 18) * 512 * 1024 / cpus;
    }
    if (c.l1d_ways == 255) c.l1d_ways = 0;   /* fully associative: no ways to count */
    return c;
}

#else

static int detect(int want_amx)
{
    (void)want_amx;
    return AG_BF16_FP32;
}

static ag_cpu_caches detect_caches(void)
{
    return (ag_cpu_caches){0, 0, 0, 0};
}

static double measure_dot_over_fma(void) { return 0; }

#endif

/* l1d is stored last (release) and read first (acquire): a thread that sees
 * it sees the others.  Two threads may both detect; they store the same. */
static atomic_long cache_l1d = -1, cache_l2, cache_l3_share;
static atomic_int cache_l1d_ways;

ag_cpu_caches ag_cpu_cache_sizes(void)
{
    long l1d = atomic_load_explicit(&cache_l1d, memory_order_acquire);
    if (l1d < 0) {
        const ag_cpu_caches c = detect_caches();
        atomic_store_explicit(&cache_l2, c.l2, memory_order_relaxed);
        atomic_store_explicit(&cache_l3_share, c.l3_share, memory_order_relaxed);
        atomic_store_explicit(&cache_l1d_ways, c.l1d_ways, memory_order_relaxed);
        atomic_store_explicit(&cache_l1d, c.l1d, memory_order_release);
        return c;
    }
    return (ag_cpu_caches){l1d, atomic_load_explicit(&cache_l2, memory_order_relaxed),
                           atomic_load_explicit(&cache_l3_share, memory_order_relaxed),
                           atomic_load_explicit(&cache_l1d_ways, memory_order_relaxed)};
}

#define CAP_UNKNOWN (-1)   /* AG_BF16_KERNEL holds a value we do not know */
#define CAP_AUTO (-2)      /* AG_BF16_KERNEL unset: the run-time choice */

static int env_cap(void)
{
    const char *s = getenv("AG_BF16_KERNEL");
    if (!s) return CAP_AUTO;
    if (strcmp(s, "amx") == 0) return AG_BF16_AMX;
    if (strcmp(s, "avx512") == 0) return AG_BF16_AVX512;
    if (strcmp(s, "fp32") == 0) return AG_BF16_FP32;
    if (strcmp(s, "none") == 0) return AG_BF16_NONE;
    return CAP_UNKNOWN;
}

/* -1: not detected yet.  Two threads may both detect; they get the same
 * (the ratio may differ in its last digits: both are far from 1 on every
 * CPU we know). */
static atomic_int hw_level = -1, capped_level = -1, avx512_bf16 = -1;
static _Atomic double dot_over_fma = -1;

int ag_cpu_bf16_hw(void)
{
    int v = atomic_load_explicit(&hw_level, memory_order_relaxed);
    if (v < 0) {
        v = detect(1);
        atomic_store_explicit(&hw_level, v, memory_order_relaxed);
    }
    return v;
}

int ag_cpu_avx512_bf16(void)
{
    int v = atomic_load_explicit(&avx512_bf16, memory_order_relaxed);
    if (v < 0) {
        v = detect(0) >= AG_BF16_AVX512;
        atomic_store_explicit(&avx512_bf16, v, memory_order_relaxed);
    }
    return v;
}

double ag_cpu_bf16_dot_over_fma(void)
{
    double r = atomic_load_explicit(&dot_over_fma, memory_order_relaxed);
    if (r < 0) {
        r = ag_cpu_avx512_bf16() ? measure_dot_over_fma() : 0;
        atomic_store_explicit(&dot_over_fma, r, memory_order_relaxed);
    }
    return r;
}

/*
 * The run-time choice.  Every kernel spends most of a product's time in
 * its multiply instruction (the rounding to bf16, in the packing or in a
 * pass before it, costs less: 7% of a small model's bf16 step with the
 * fp32 kernel), so the faster instruction makes the faster kernel.  AMX's tdpbf16ps does 16 x 16 x 32
 * multiply-adds per instruction, several times any vector instruction:
 * AMX, where the CPU has it, is taken unmeasured.  Between vdpbf16ps (32
 * multiply-adds per zmm instruction, bf16 pairs) and the fp32 kernel's
 * fused multiply-add (16 per zmm instruction, products of bf16-rounded
 * fp32 exact, so the same mixed precision) what decides is how many of
 * each a core issues per cycle, which differs from CPU to CPU: on AMD Zen
 * 4 and Zen 5 vdpbf16ps gives about twice the FMA's multiply-adds per
 * second, on Intel's Emerald Rapids (family 6 model 207) about half.  So
 * both are measured, once, as register-only loops (measure_dot_over_fma,
 * about 0.15 ms), and vdpbf16ps is used only when it does more.
 */
int ag_cpu_bf16(void)
{
    int v = atomic_load_explicit(&capped_level, memory_order_relaxed);
    if (v < 0) {
        const int cap = env_cap();
        if (cap == CAP_UNKNOWN || cap == AG_BF16_NONE) {
            v = AG_BF16_NONE;
        } else if (cap == CAP_AUTO) {
            v = ag_cpu_bf16_hw();
            if (v == AG_BF16_AVX512 && !(ag_cpu_bf16_dot_over_fma() > 1)) v = AG_BF16_FP32;
        } else {
            /* Capped below AMX: the tile permission is not asked for. */
            v = cap < AG_BF16_AMX ? detect(0) : ag_cpu_bf16_hw();
            if (v > cap) v = cap;
        }
        atomic_store_explicit(&capped_level, v, memory_order_relaxed);
    }
    return v;
}

int ag_bf16_available(void) { return ag_cpu_bf16() != AG_BF16_NONE; }

const char *ag_bf16_kernel_name(int kernel)
{
    return kernel == AG_BF16_AMX      ? "amx"
           : kernel == AG_BF16_AVX512 ? "avx512"
           : kernel == AG_BF16_FP32   ? "fp32"
                                      : "none";
}

int ag_fast_bf16_status(const char **fact)
{
    if (env_cap() == CAP_UNKNOWN) {
        /* per thread, so that two threads asking at once do not share it */
        static _Thread_local char line[96];
        snprintf(line, sizeof line, "AG_BF16_KERNEL=%.40s is not one of amx, avx512, fp32, none",
                 getenv("AG_BF16_KERNEL"));
        for (char *c = line; *c; c++)
            if (*c == '\n' || *c == '\r') *c = ' ';
        *fact = line;
        return AG_BF16_BAD_SETTING;
    }
    const int kernel = ag_cpu_bf16();
    if (kernel != AG_BF16_NONE) {
        *fact = ag_bf16_kernel_name(kernel);
        return AG_BF16_READY;
    }
    *fact = "turned off by AG_BF16_KERNEL=none";   /* the fp32 kernel runs everywhere */
    return AG_BF16_TURNED_OFF;
}
