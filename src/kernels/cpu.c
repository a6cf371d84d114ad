/*
 * cpu.c - run-time detection of the bf16 kernels (see cpu.h).
 *
 * An instruction set is usable only when the CPU has it (cpuid) AND the OS
 * saves its registers on a context switch (XCR0, read with xgetbv once
 * cpuid says OSXSAVE).  AMX tile data is also off by default on Linux: a
 * process must ask for it with arch_prctl(ARCH_REQ_XCOMP_PERM,
 * XFEATURE_XTILEDATA) before its first tile instruction, or that
 * instruction faults.  The permission is per process (every thread, and
 * children), so asking once is enough; if the kernel refuses (too old, or
 * a signal stack too small for the tile state), the AVX-512 kernel is used.
 */
#if defined(__linux__)
#define _GNU_SOURCE   /* syscall() */
#endif

#include "cpu.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(AG_NO_X86_KERNELS)
#define AG_CPU_X86 1
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
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

/* The best kernel the CPU and OS allow; AMX only when want_amx (asking for
 * the tile permission has a cost: every signal frame of the process grows
 * by the 8 KB of tile data). */
static int detect(int want_amx)
{
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) return AG_BF16_NONE;
    __cpuid(1, a, b, c, d);
    if (!(c & CPUID1_ECX_OSXSAVE)) return AG_BF16_NONE;   /* xgetbv would fault */
    const unsigned long long xcr = xcr0();
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned max_sub = a, ebx7 = b, edx7 = d;
    if (max_sub < 1) return AG_BF16_NONE;
    __cpuid_count(7, 1, a, b, c, d);
    const unsigned avx512_all = CPUID7_EBX_AVX512F | CPUID7_EBX_AVX512DQ | CPUID7_EBX_AVX512BW |
                                CPUID7_EBX_AVX512VL;
    if ((ebx7 & avx512_all) != avx512_all || !(a & CPUID7_1_EAX_AVX512_BF16) ||
        (xcr & XCR0_AVX512) != XCR0_AVX512)
        return AG_BF16_NONE;
    const unsigned amx_all = CPUID7_EDX_AMX_BF16 | CPUID7_EDX_AMX_TILE;
    if (want_amx && (edx7 & amx_all) == amx_all && (xcr & XCR0_AMX) == XCR0_AMX &&
        amx_palette_ok() && amx_permission())
        return AG_BF16_AMX;
    return AG_BF16_AVX512;
}

#else

static int detect(int want_amx)
{
    (void)want_amx;
    return AG_BF16_NONE;
}

#endif

#define CAP_UNKNOWN (-1)   /* AG_BF16_KERNEL holds a value we do not know */

/* The cap from AG_BF16_KERNEL: AG_BF16_AMX (no cap) when it is unset. */
static int env_cap(void)
{
    const char *s = getenv("AG_BF16_KERNEL");
    if (!s || strcmp(s, "amx") == 0) return AG_BF16_AMX;
    if (strcmp(s, "avx512") == 0) return AG_BF16_AVX512;
    if (strcmp(s, "none") == 0) return AG_BF16_NONE;
    return CAP_UNKNOWN;
}

/* -1: not detected yet.  Two threads may both detect; they get the same. */
static atomic_int hw_level = -1, capped_level = -1;

int ag_cpu_bf16_hw(void)
{
    int v = atomic_load_explicit(&hw_level, memory_order_relaxed);
    if (v < 0) {
        v = detect(1);
        atomic_store_explicit(&hw_level, v, memory_order_relaxed);
    }
    return v;
}

int ag_cpu_bf16(void)
{
    int v = atomic_load_explicit(&capped_level, memory_order_relaxed);
    if (v < 0) {
        /* Capped below AMX: the tile permission is not asked for. */
        const int cap = env_cap() == CAP_UNKNOWN ? AG_BF16_NONE : env_cap();
        v = cap < AG_BF16_AMX ? detect(0) : ag_cpu_bf16_hw();
        if (v > cap) v = cap;
        atomic_store_explicit(&capped_level, v, memory_order_relaxed);
    }
    return v;
}

int ag_bf16_available(void) { return ag_cpu_bf16() != AG_BF16_NONE; }

const char *ag_bf16_kernel_name(int kernel)
{
    return kernel == AG_BF16_AMX ? "amx" : kernel == AG_BF16_AVX512 ? "avx512" : "none";
}

int ag_fast_bf16_status(const char **fact)
{
    if (env_cap() == CAP_UNKNOWN) {
        /* per thread, so that two threads asking at once do not share it */
        static _Thread_local char line[96];
        snprintf(line, sizeof line, "AG_BF16_KERNEL=%.40s is not one of amx, avx512, none",
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
    if (env_cap() == AG_BF16_NONE && detect(0) != AG_BF16_NONE) {
        *fact = "turned off by AG_BF16_KERNEL=none";
        return AG_BF16_TURNED_OFF;
    }
    *fact = "this CPU has neither AMX nor AVX512-BF16";
    return AG_BF16_NO_HARDWARE;
}
