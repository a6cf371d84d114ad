/*
 * table.c - the fast kernels, gathered into the interface the ops call
 * (kernels.h), in the order of kernels.h's AG_KERNEL_LIST.
 */
#include "cpu.h"
#include "fast.h"
#include "gemm_bf16.h"

#define AG_KERNEL_FAST(field, fast, ref) .field = fast,
const ag_kernels ag_kernels_fast = {.name = "fast", AG_KERNEL_LIST_ALL(AG_KERNEL_FAST)};
