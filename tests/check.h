/*
 * check.h - the tiny test harness every C test in tests/ uses.
 * CHECK(cond, fmt, ...) counts one assertion; a failure prints where and why.
 * check_done() prints the closing "N passed, N failed" line that tests/run.sh
 * adds up, and returns the exit status (non-zero when anything failed).
 */
#ifndef ATTOGRAD_CHECK_H
#define ATTOGRAD_CHECK_H

#include <stdio.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (cond) {                                                          \
            check_passed++;                                                  \
        } else {                                                             \
            check_failed++;                                                  \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                      \
            printf(__VA_ARGS__);                                             \
            printf("\n");                                                    \
            fflush(stdout);                                                  \
        }                                                                    \
    } while (0)

static inline int check_done(void)
{
    printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

#endif
