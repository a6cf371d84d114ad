/*
 * test_pool_race.c - interleavings of src/pool.c's threads, replayed on
 * purpose.  A pool thread that read a loop's task slot, lost its core, and
 * resumes while the caller is already setting up the next loop must not run
 * a task of the finished loop (its context is gone: on a busy machine that
 * once ended a benchmark with SIGFPE).  And ag_set_threads called by another
 * thread of the program while a loop is being set up: the loop takes the
 * threads the pool then has, not the count it was asked for before (it
 * wrote past the pool's slots: AddressSanitizer's heap-buffer-overflow).
 * pool.c is compiled into this test with POOL_RACE_POINT holding the
 * threads at the points in question.
 */
#include <stdatomic.h>
#include <time.h>

static void race_point(int where, const void *at);
#define POOL_RACE_POINT(where, slot) race_point((where), (slot))
#include "pool.c"

#include "check.h"

/* 0: no replay; 1: loop A is running; 2: loop B is being set up */
static _Atomic int phase;
/* 0, then 1: the pool thread waits at its claim in loop A; 2: the caller is
 * between a slot's end and its opening in loop B; 3: the pool thread went on */
static _Atomic int stage;
static const void *_Atomic held_slot;

static void wait_for(_Atomic int *v, int at_least, long ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (atomic_load(v) >= at_least)
            return;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
            return;
        sched_yield();
    }
}

/* Point 1: a pool thread has read a slot's claim of loop A and is about to
 * read its end: it waits there until the caller, in loop B, has set that
 * slot's new end.  Point 2: the caller, having set the end of that slot in
 * loop B, waits for the pool thread to go on before opening the slot. */
static void race_point(int where, const void *at)
{
    if (where == 3 && atomic_load(&phase) == 3) {
        atomic_store(&phase, 0);
        ag_set_threads(2);           /* as another thread would, between the count and the pool */
        return;
    }
    if (where == 1 && tl_id != 0 && atomic_load(&phase) == 1 && atomic_load(&stage) == 0) {
        atomic_store(&held_slot, at);
        atomic_store(&stage, 1);
        wait_for(&stage, 2, 2000);
        atomic_store(&stage, 3);
    } else if (where == 2 && atomic_load(&phase) == 2 && atomic_load(&stage) == 1 && at == atomic_load(&held_slot)) {
        atomic_store(&stage, 2);
        wait_for(&stage, 3, 2000);
        nanosleep(&(struct timespec){ 0, 20000000 }, NULL);   /* the pool thread's claim, or its failure */
    }
}

#ifndef AG_REFERENCE
typedef struct {
    _Atomic int runs[8];
    _Atomic int closed;       /* ag_parallel returned: no task may run any more */
    _Atomic int late;         /* tasks that ran after that */
} loop_ctx;

static void task(void *ctx, int t)
{
    loop_ctx *c = ctx;
    if (atomic_load(&c->closed)) {
        atomic_fetch_add(&c->late, 1);
        return;
    }
    if (t == 0 && atomic_load(&phase) == 1)
        wait_for(&stage, 1, 2000);   /* loop A: the caller's first task waits until the pool thread is held */
    atomic_fetch_add(&c->runs[t < 8 ? t : 7], 1);
}
#endif

int main(void)
{
#ifdef AG_REFERENCE
    CHECK_SKIP("the reference build runs on one thread: no pool to race");
#else
    ag_set_threads(2);
    /* start the pool and let its threads settle */
    static loop_ctx warm;
    ag_parallel(2, 2, task, &warm);
    int replayed = 0, late = 0, wrong = 0;
    for (int rep = 0; rep < 3; rep++) {
        static loop_ctx a[3], b[3];
        atomic_store(&stage, 0);
        atomic_store(&phase, 1);
        ag_parallel(2, 2, task, &a[rep]);        /* loop A: the caller runs both tasks */
        atomic_store(&a[rep].closed, 1);
        atomic_store(&phase, 2);
        ag_parallel(4, 2, task, &b[rep]);        /* loop B */
        atomic_store(&phase, 0);
        atomic_store(&b[rep].closed, 1);
        nanosleep(&(struct timespec){ 0, 20000000 }, NULL);
        replayed += atomic_load(&stage) == 3;
        late += atomic_load(&a[rep].late) + atomic_load(&b[rep].late);
        for (int t = 0; t < 2; t++) wrong += atomic_load(&a[rep].runs[t]) != 1;
        for (int t = 0; t < 4; t++) wrong += atomic_load(&b[rep].runs[t]) != 1;
    }
    CHECK(replayed > 0, "the interleaving was never replayed (the pool thread never reached its claim in loop A)");
    CHECK(late == 0, "%d tasks of a finished loop ran after it returned", late);
    CHECK(wrong == 0, "%d tasks ran other than once", wrong);

    /* 4 threads asked for, 2 set before the pool is taken */
    ag_set_threads(4);
    static loop_ctx w4, c;
    ag_parallel(4, 4, task, &w4);                /* the pool runs 4 threads */
    atomic_store(&phase, 3);
    ag_parallel(8, 4, task, &c);
    const int nth = atomic_load(&pool.nth), running = pool.started + 1;
    CHECK(nth <= running, "ag_set_threads(2) while a loop of 4 was set up: the loop used %d slots of %d threads",
          nth, running);
    wrong = 0;
    for (int t = 0; t < 8; t++) wrong += atomic_load(&c.runs[t]) != 1;
    CHECK(wrong == 0, "ag_set_threads while a loop was set up: %d tasks ran other than once", wrong);
#endif
    return check_done();
}
