/*
 * check.h - the tiny test harness every C test in tests/ uses.
 * CHECK(cond, fmt, ...) counts one assertion; a failure prints where and why.
 * CHECK_SKIP(fmt, ...) counts a group of checks that could not run here (a
 * CPU feature missing, say) and prints why.
 * check_done() prints the closing "N passed, N failed" line that tests/run.sh
 * adds up (", N skipped" after it when something was skipped), and returns
 * the exit status (non-zero when anything failed).
 * check_set_threads(n) sets the thread count for what follows (nothing in
 * the reference build, which runs on one thread).
 * check_vm_bytes() is the process's mapped size, for tests that cap the
 * address space a little above it (0 where it cannot be read).
 * check_future_mask(ctx, T) is the [T,T] mask of causal attention for
 * ag_masked_fill: 1 above the diagonal (the future), 0 on and below it.
 */
#ifndef ATTOGRAD_CHECK_H
#define ATTOGRAD_CHECK_H

#include <stdio.h>
#include <unistd.h>

#include "attograd.h"
#include "pool.h"

static int check_passed, check_failed, check_skipped;

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

#define CHECK_SKIP(...)                                                      \
    do {                                                                     \
        check_skipped++;                                                     \
        printf("SKIP %s:%d: ", __FILE__, __LINE__);                          \
        printf(__VA_ARGS__);                                                 \
        printf("\n");                                                        \
        fflush(stdout);                                                      \
    } while (0)

/* n threads, and every parallel loop shared however small, so the tests'
 * small shapes take the paths a large model's do */
static inline void check_set_threads(int n)
{
    ag_set_threads(n);
    ag_threads_share_all(1);
}

static inline int check_done(void)
{
    if (check_skipped)
        printf("%d passed, %d failed, %d skipped\n", check_passed, check_failed, check_skipped);
    else
        printf("%d passed, %d failed\n", check_passed, check_failed);
    return check_failed ? 1 : 0;
}

/* The process's mapped bytes (/proc/self/statm), 0 where unknown. */
static inline size_t check_vm_bytes(void)
{
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    if (fscanf(f, "%lu", &pages) != 1)
        pages = 0;
    fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

static inline ag_tensor *check_future_mask(ag_ctx *ctx, int T)
{
    ag_tensor *m = ag_new(ctx, 2, (int[]){T, T});
    for (int i = 0; i < T; i++)
        for (int j = i + 1; j < T; j++)
            m->data[i * T + j] = 1;
    return m;
}

#endif
