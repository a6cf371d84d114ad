/*
 * cpu.h - which bf16 matrix-multiply kernel this CPU can run, and the data
 * caches the matrix multiplies block for, decided once at run time (the
 * binary may be built for an older CPU than it runs on, or the other way
 * round: detection, not the compiler flags, decides).
 *
 *   AG_BF16_AMX     AMX tiles (tdpbf16ps): the CPU has AMX-TILE, AMX-BF16
 *                   and AVX512-BF16 (the packing uses it), the OS enables
 *                   tile state in XCR0, and Linux grants this process the
 *                   tile data permission (arch_prctl ARCH_REQ_XCOMP_PERM).
 *   AG_BF16_AVX512  AVX-512 with vdpbf16ps (AVX512-F/BW/VL/DQ and
 *                   AVX512-BF16, ZMM and mask state enabled by the OS).
 *   AG_BF16_FP32    the operands rounded to bf16 (kept as fp32 values) and
 *                   multiplied by the fp32 kernel (gemm.c): no special
 *                   instruction, so every CPU has it.
 *   AG_BF16_NONE    no bf16 products (only when AG_BF16_KERNEL=none).
 *
 * Without AG_BF16_KERNEL the choice is AMX when the CPU has it, else
 * AVX512-BF16 when a vdpbf16ps does more multiply-adds per second than the
 * fp32 kernel's fused multiply-add (measured once, see cpu.c), else FP32.
 * AG_BF16_KERNEL=amx|avx512|fp32|none names the kernel to run instead (for
 * tests and comparisons); on a CPU without it, the next one below it in
 * that order runs: it never raises the choice above what the CPU has.  Any
 * other value leaves no kernel (ag_fast_bf16_status says why).  Non-x86
 * builds, and builds with -DAG_NO_X86_KERNELS (which compile the fast bf16
 * file without any of its x86 code, to test that configuration on x86),
 * have FP32 alone.
 */
#ifndef ATTOGRAD_KERNELS_CPU_H
#define ATTOGRAD_KERNELS_CPU_H

#include "attograd.h"

/* In the order the cap (AG_BF16_KERNEL) reads them: a higher value is a
 * kernel that needs more of the CPU. */
enum { AG_BF16_NONE = 0, AG_BF16_FP32 = 1, AG_BF16_AVX512 = 2, AG_BF16_AMX = 3 };

/* The data caches one core sees, as cpuid reports them: Intel's leaf 4, AMD's
 * leaf 0x8000001D, or AMD's older leaves 0x80000005/6 where the first is
 * empty (as in some virtual machines).  l3_share is the L3 divided by the
 * logical CPUs that share it (all online CPUs when cpuid does not say).
 * Sizes in bytes; a field cpuid does not give is 0, and elsewhere than x86
 * all are 0.  Detected on the first call; thread-safe. */
typedef struct ag_cpu_caches {
    long l1d, l2, l3_share;
    int l1d_ways;
} ag_cpu_caches;
ag_cpu_caches ag_cpu_cache_sizes(void);

/* The kernel ag_fast_gemm_bf16 uses: the run-time choice above, or the one
 * AG_BF16_KERNEL names.  Decided on the first call; thread-safe. */
int ag_cpu_bf16(void);
/* The most the CPU and OS allow (AG_BF16_AMX, AG_BF16_AVX512 or, on any
 * other CPU, AG_BF16_FP32), whatever is faster and without the cap: every
 * kernel up to it can run (tests use it to run every kernel there is). */
int ag_cpu_bf16_hw(void);
/* Whether the CPU and OS allow AVX512-BF16 (without asking for AMX's
 * permission): the conversions use it whatever kernel runs. */
int ag_cpu_avx512_bf16(void);
/* Multiply-adds per second of vdpbf16ps over those of the fp32 kernel's
 * fused multiply-add, as measured for the choice (0 where the CPU has no
 * AVX512-BF16: not measured).  Measured on the first call; thread-safe. */
double ag_cpu_bf16_dot_over_fma(void);
/* ag_cpu_bf16() != AG_BF16_NONE */
int ag_bf16_available(void);
/* "amx", "avx512", "fp32" or "none" */
const char *ag_bf16_kernel_name(int kernel);

/* The fast kernels' answer to ag_bf16_status: AG_BF16_READY with the
 * kernel's name, or AG_BF16_TURNED_OFF or AG_BF16_BAD_SETTING with the
 * fact (one line). */
int ag_fast_bf16_status(const char **fact);

#endif
