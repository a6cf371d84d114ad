/*
 * bf16_build.h - what the bf16 tests include first.  The bf16 kernels are
 * in the float build with fast kernels only: in the reference and double
 * builds this header is the whole test, a main() that reports it skipped,
 * and BF16_TESTABLE is 0.  Elsewhere BF16_TESTABLE is 1 and nothing is
 * included (the test may still define _DEFAULT_SOURCE after it).
 */
#ifndef ATTOGRAD_BF16_BUILD_H
#define ATTOGRAD_BF16_BUILD_H

#if defined(AG_REFERENCE) || defined(AG_DOUBLE)
#define BF16_TESTABLE 0
#include <stdio.h>
int main(void)
{
    printf("bf16 kernels run in the float build with fast kernels only\n0 passed, 0 failed, 1 skipped\n");
    return 0;
}
#else
#define BF16_TESTABLE 1
#endif

#endif
