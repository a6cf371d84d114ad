/*
 * test_pool.c - the engine's threads (src/pool.c): every task runs exactly
 * once for many task and thread counts (more threads than cores too),
 * repeated and nested loops, which work is shared (ag_threads_for), two
 * calling threads at once, ag_set_threads from another thread, a pool used
 * in a forked child, threads the system will not give, the wait policies,
 * and kernels and the optimizers giving the same bits on 1, 2 and more
 * threads.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "kernels.h"

enum { MAX_TASKS = 5000 };

typedef struct {
    _Atomic int runs[MAX_TASKS];
    _Atomic int bad_id;             /* a task saw ag_thread_id() outside [0, nth) */
    int nth;
} counts;

static void count_task(void *ctx, int t)
{
    counts *c = ctx;
    const int id = ag_thread_id();
    if (id < 0 || id >= (c->nth > 0 ? c->nth : 1))
        atomic_fetch_add(&c->bad_id, 1);
    atomic_fetch_add(&c->runs[t], 1);
}

/* The tasks that ran other than exactly once, after one loop of n tasks on
 * nth threads; -1 for a thread id out of range. */
static int wrong_runs(int n, int nth)
{
    counts *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->nth = nth;
    ag_parallel(n, nth, count_task, c);
    int wrong = atomic_load(&c->bad_id) ? -1 : 0;
    for (int t = 0; t < n && wrong >= 0; t++)
        wrong += atomic_load(&c->runs[t]) != 1;
    free(c);
    return wrong;
}

static void test_every_task_once(void)
{
    const int ns[] = { 0, 1, 2, 3, 5, 7, 16, 63, 64, 65, 1000, MAX_TASKS };
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const int threads[] = { 1, 2, 3, 4, 8, (int)(cores > 0 && cores < 32 ? 2 * cores + 1 : 65) };   /* the last:
                                                                           more threads than this machine has cores */
    for (size_t i = 0; i < sizeof threads / sizeof threads[0]; i++) {
        ag_set_threads(threads[i]);
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
            for (int nth = 1; nth <= threads[i] + 1; nth += nth < 4 ? 1 : threads[i]) {
                int w = wrong_runs(ns[j], nth);
                CHECK(w == 0, "%d tasks on %d of %d threads: %d ran other than once", ns[j], nth, threads[i], w);
            }
    }
}

/* Thousands of short loops back to back: a task lost or run twice
 * between loops (threads going to sleep and waking) shows in the sums. */
static void test_repeated(void)
{
    ag_set_threads(0);
    const int nth = ag_get_threads() > 1 ? ag_get_threads() : 2;
    int wrong = 0;
    for (int rep = 0; rep < 3000; rep++)
        wrong += wrong_runs(1 + rep % 17, nth) != 0;
    CHECK(wrong == 0, "%d of 3000 back-to-back loops ran a task other than once", wrong);
    /* with pauses: the threads have gone to sleep before the next loop */
    wrong = 0;
    for (int rep = 0; rep < 20; rep++) {
        nanosleep(&(struct timespec){ 0, rep % 2 ? 2000000 : 50000 }, NULL);
        wrong += wrong_runs(9, nth) != 0;
    }
    CHECK(wrong == 0, "%d of 20 loops after a pause ran a task other than once", wrong);
}

/* A loop inside a task runs whole on that task's thread. */
typedef struct {
    _Atomic int inner[64][8];
    _Atomic int max_threads_inside, not_same_thread;
} nest;

typedef struct {
    nest *n;
    int outer;
    pthread_t self;
} inner_ctx;

static void inner_task(void *ctx, int t)
{
    inner_ctx *c = ctx;
    if (!pthread_equal(c->self, pthread_self()))
        atomic_fetch_add(&c->n->not_same_thread, 1);
    atomic_fetch_add(&c->n->inner[c->outer][t], 1);
}

static void outer_task(void *ctx, int t)
{
    nest *n = ctx;
    int m = ag_max_threads();
    if (m > atomic_load(&n->max_threads_inside))
        atomic_store(&n->max_threads_inside, m);
    inner_ctx c = { n, t, pthread_self() };
    ag_parallel(8, 4, inner_task, &c);
}

static void test_nested(void)
{
    ag_set_threads(4);
    static nest n;
    memset(&n, 0, sizeof n);
    ag_parallel(64, 4, outer_task, &n);
    int wrong = 0;
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 8; j++)
            wrong += atomic_load(&n.inner[i][j]) != 1;
    CHECK(wrong == 0, "nested loops: %d inner tasks ran other than once", wrong);
    CHECK(atomic_load(&n.not_same_thread) == 0, "nested loops: an inner task left its outer task's thread");
    CHECK(atomic_load(&n.max_threads_inside) == 1, "ag_max_threads() inside a task is %d, not 1",
          atomic_load(&n.max_threads_inside));
    CHECK(ag_max_threads() == ag_get_threads(), "ag_max_threads() outside a loop is %d, not %d", ag_max_threads(),
          ag_get_threads());
}

/* ag_parallel_for covers [0, n) once, in pieces, shared or not. */
typedef struct {
    _Atomic int *hits;
} range_ctx;

static void range_body(void *ctx, size_t lo, size_t hi)
{
    range_ctx *r = ctx;
    for (size_t i = lo; i < hi; i++)
        atomic_fetch_add(&r->hits[i], 1);
}

static void test_parallel_for(void)
{
    const size_t ns[] = { 0, 1, 2, 5, 31, 1000, 100003 };
    for (int share = 0; share < 2; share++)
        for (int threads = 1; threads <= 5; threads += 2) {
            ag_set_threads(threads);
            ag_threads_share_all(share);
            for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
                range_ctx r = { calloc(ns[j] + 1, sizeof(_Atomic int)) };
                ag_parallel_for(ns[j], ns[j], range_body, &r);
                size_t wrong = 0;
                for (size_t i = 0; i < ns[j]; i++)
                    wrong += atomic_load(&r.hits[i]) != 1;
                CHECK(wrong == 0, "ag_parallel_for n=%zu, %d threads%s: %zu elements visited other than once",
                      ns[j], threads, share ? ", shared" : "", wrong);
                free(r.hits);
            }
        }
    ag_threads_share_all(0);
}

/* ag_threads_for: work of a nanosecond stays on the calling thread, work of
 * a second is shared by every thread, everything is shared under
 * ag_threads_share_all, and inside a task nothing is. */
#ifndef AG_REFERENCE
static void threads_for_task(void *ctx, int t)
{
    (void)t;
    if (ag_threads_for(1e9) != 1)
        atomic_fetch_add((_Atomic int *)ctx, 1);
}
#endif

static void test_threads_for(void)
{
#ifndef AG_REFERENCE
    ag_set_threads(3);
    ag_threads_share_all(0);
    CHECK(ag_threads_for(1) == 1, "ag_threads_for(1 ns): %d threads, not 1", ag_threads_for(1));
    CHECK(ag_threads_for(1e9) == 3, "ag_threads_for(1 s) on 3 threads: %d", ag_threads_for(1e9));
    ag_threads_share_all(1);
    CHECK(ag_threads_for(1) == 3, "ag_threads_for(1 ns), shared all: %d threads, not 3", ag_threads_for(1));
    _Atomic int inside = 0;
    ag_parallel(6, 3, threads_for_task, &inside);
    CHECK(atomic_load(&inside) == 0, "ag_threads_for inside a task: more than 1 thread (%d times)",
          atomic_load(&inside));
    ag_threads_share_all(0);
    ag_set_threads(1);
    CHECK(ag_threads_for(1e9) == 1, "ag_threads_for(1 s) on 1 thread: %d", ag_threads_for(1e9));
#endif
}

/* Two threads of a program calling at once: each loop still runs every
 * task once (one of them on its own thread while the other has the pool). */
static void *caller(void *arg)
{
    int *wrong = arg;
    for (int rep = 0; rep < 500; rep++)
        *wrong += wrong_runs(37, 3) != 0;
    return NULL;
}

static void test_two_callers(void)
{
    ag_set_threads(3);
    pthread_t other;
    int wrong_a = 0, wrong_b = 0;
    CHECK(pthread_create(&other, NULL, caller, &wrong_b) == 0, "pthread_create failed");
    caller(&wrong_a);
    pthread_join(other, NULL);
    CHECK(wrong_a == 0 && wrong_b == 0, "two calling threads: %d and %d loops ran a task other than once", wrong_a,
          wrong_b);
}

/* ag_set_threads from another thread while loops run (any thread may call
 * it at any time): the pool's threads are stopped and started again between
 * the loops as the count changes, and every loop still runs each task once. */
static _Atomic int setter_stop;

static void *setter(void *arg)
{
    (void)arg;
    for (int i = 0; !atomic_load(&setter_stop); i++) {
        ag_set_threads(1 + i % 4);
        (void)ag_get_threads();
        nanosleep(&(struct timespec){ 0, 100000 }, NULL);
    }
    return NULL;
}

static void test_set_threads_elsewhere(void)
{
    ag_set_threads(3);
    atomic_store(&setter_stop, 0);
    pthread_t other;
    CHECK(pthread_create(&other, NULL, setter, NULL) == 0, "pthread_create failed");
    int wrong = 0;
    size_t spread = 0;
    for (int rep = 0; rep < 400; rep++) {
        wrong += wrong_runs(1 + rep % 37, 4) != 0;
        range_ctx r = { calloc(1001, sizeof(_Atomic int)) };
        ag_parallel_for(1000, rep % 2 ? 1000 : (size_t)1 << 30, range_body, &r);
        for (size_t i = 0; i < 1000; i++)
            spread += atomic_load(&r.hits[i]) != 1;
        free(r.hits);
        (void)ag_threads_for(1e6);
    }
    atomic_store(&setter_stop, 1);
    pthread_join(other, NULL);
    CHECK(wrong == 0, "ag_set_threads from another thread: %d of 400 loops ran a task other than once", wrong);
    CHECK(spread == 0, "ag_set_threads from another thread: ag_parallel_for visited %zu elements other than once",
          spread);
}

/* A pool started in the parent, then used in a forked child (as MPI ranks
 * may be started) and in the parent again. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static void test_fork(void)
{
#ifdef UNDER_TSAN
    CHECK_SKIP("fork: ThreadSanitizer does not support a multi-threaded process that forks");
    return;
#endif
    ag_set_threads(3);
    CHECK(wrong_runs(100, 3) == 0, "before fork: a task ran other than once");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int wrong = 0;
        for (int rep = 0; rep < 200; rep++)
            wrong += wrong_runs(1 + rep % 40, 3) != 0;
        ag_set_threads(2);
        wrong += wrong_runs(50, 2) != 0;
        _exit(wrong == 0 ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork or waitpid failed");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child's loops went wrong (status %d)", status);
    CHECK(wrong_runs(100, 3) == 0, "after fork, in the parent: a task ran other than once");
}

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

/* What include/attograd.h promises a program with threads of its own: two
 * threads each training their own context (embedding, layer norm,
 * attention with dropout, the fused linear + GELU, cross-entropy, clipping,
 * AdamW) at the same time get the bits each gets alone, while one of them
 * has the pool's threads and the other runs alone. */
enum { TC_B = 2, TC_T = 24, TC_D = 32, TC_V = 11, TC_STEPS = 12 };
typedef struct {
    uint64_t seed;
    ag_real out[TC_D * TC_D];
    ag_real loss;
} tc_job;

static void *tc_train(void *arg)
{
    tc_job *j = arg;
    ag_ctx *ctx = ag_ctx_new();
    ag_params *ps = ag_params_new();
    ag_tensor *emb = ag_params_add(ps, "emb", 2, (int[]){ TC_V, TC_D });
    ag_tensor *wqkv = ag_params_add(ps, "wqkv", 2, (int[]){ 3 * TC_D, TC_D });
    ag_tensor *wo = ag_params_add(ps, "wo", 2, (int[]){ TC_D, TC_D });
    ag_tensor *lw = ag_params_add(ps, "lw", 1, (int[]){ TC_D });
    ag_tensor *lb = ag_params_add(ps, "lb", 1, (int[]){ TC_D });
    ag_tensor *head = ag_params_add(ps, "head", 2, (int[]){ TC_V, TC_D });
    ag_params_alloc(ps);
    ag_pcg32 g;
    ag_pcg32_seed(&g, j->seed, 1);
    ag_pcg32_seed(ag_dropout_rng(ctx), j->seed, 3);
    for (size_t i = 0; i < ps->total; i++)
        ps->data[i] = (ag_real)(0.1 * ag_pcg32_normal(&g));
    for (int i = 0; i < TC_D; i++)
        lw->data[i] = 1;
    ag_optim *opt = ag_optim_adamw(ps, 0.9, 0.999, 1e-8, 0.01);
    int32_t ids[TC_B * TC_T];
    for (int s = 0; s < TC_STEPS; s++) {
        for (int i = 0; i < TC_B * TC_T; i++)
            ids[i] = (int32_t)ag_pcg32_below(&g, TC_V);
        ag_reset(ctx);
        ag_tensor *x = ag_embedding(ctx, emb, ids, 2, (int[]){ TC_B, TC_T });
        ag_tensor *h = ag_layer_norm(ctx, x, lw, lb, (ag_real)1e-5);
        ag_tensor *a = ag_attention(ctx, ag_linear(ctx, h, wqkv, NULL), 4, 1, (ag_real)0.1, 1, NULL);
        x = ag_add(ctx, x, ag_linear_gelu(ctx, a, wo, NULL));
        ag_tensor *loss = ag_cross_entropy(ctx, ag_linear(ctx, x, head, NULL), ids);
        ag_params_zero_grad(ps);
        ag_backward(ctx, loss);
        ag_clip_grad_norm(ps, 1.0);
        ag_optim_step(opt, 1e-2);
        j->loss = loss->data[0];
    }
    memcpy(j->out, wo->data, sizeof j->out);
    ag_optim_free(opt);
    ag_params_free(ps);
    ag_ctx_free(ctx);
    return NULL;
}

static void test_two_contexts(void)
{
    check_set_threads(2);
    tc_job alone[2] = { { .seed = 1 }, { .seed = 2 } };
    tc_train(&alone[0]);
    tc_train(&alone[1]);
    int differ = 0;
    for (int round = 0; round < 3; round++) {
        tc_job both[2] = { { .seed = 1 }, { .seed = 2 } };
        pthread_t other;
        CHECK(pthread_create(&other, NULL, tc_train, &both[1]) == 0, "pthread_create failed");
        tc_train(&both[0]);
        pthread_join(other, NULL);
        for (int k = 0; k < 2; k++)
            differ += memcmp(both[k].out, alone[k].out, sizeof both[k].out) != 0 || both[k].loss != alone[k].loss;
    }
    CHECK(differ == 0 && alone[0].loss != alone[1].loss,
          "two contexts trained at once on two threads: %d of 6 runs differ from the same run alone", differ);
    ag_threads_share_all(0);
}

/* ag_error raised inside a task (a kernel's scratch buffer that cannot be
 * allocated) under a handler that longjmps, as a program that survives
 * errors has.  The handler runs on the calling thread, once every thread
 * is out of the loop (a pool thread jumping into the caller's stack, or
 * the caller leaving a loop other threads still run, is undefined), and
 * the pool works as before afterwards: loops are shared again.  In a
 * child, which a crash or a hang (alarm) cannot take the suite down with. */
#if !defined(AG_REFERENCE) && !defined(UNDER_TSAN)
static jmp_buf task_jump;
static pthread_t task_caller;
static char task_msg[128];
static _Atomic int task_running;   /* tasks of the failing loop now running */
static _Atomic int task_raise_on;  /* 1: the first task on a pool thread raises; 0: a task on the caller does */
static _Atomic int task_raised;
static int running_at_handler;

static void task_handler(const char *msg, void *user)
{
    (void)user;
    if (!pthread_equal(pthread_self(), task_caller))
        _exit(3);                  /* on a pool thread: nowhere to jump to */
    running_at_handler = atomic_load(&task_running);
    snprintf(task_msg, sizeof task_msg, "%s", msg);
    longjmp(task_jump, 1);
}

static void raising_task(void *ctx, int t)
{
    (void)ctx;
    atomic_fetch_add(&task_running, 1);
    const int on_pool = ag_thread_id() != 0;
    if (on_pool == atomic_load(&task_raise_on) && atomic_exchange(&task_raised, 1) == 0) {
        atomic_fetch_sub(&task_running, 1);
        ag_error("task %d failed", t);
    }
    const struct timespec pause = { 0, 200000 };   /* the other threads are in their tasks meanwhile */
    nanosleep(&pause, NULL);
    atomic_fetch_sub(&task_running, 1);
}

static void note_thread(void *ctx, int t)
{
    (void)t;
    const struct timespec pause = { 0, 200000 };
    nanosleep(&pause, NULL);
    atomic_fetch_or((_Atomic int *)ctx, 1 << (ag_thread_id() & 7));
}

/* 0 when every check passed; else which failed */
static int error_in_task_child(int on_pool)
{
    ag_set_threads(2);
    task_caller = pthread_self();
    ag_set_error_handler(task_handler, NULL);
    int raised = 0;
    for (int rep = 0; rep < 200 && !raised; rep++) {
        atomic_store(&task_raised, 0);
        atomic_store(&task_raise_on, on_pool);
        if (setjmp(task_jump) == 0)
            ag_parallel(16, 2, raising_task, NULL);
        else
            raised = 1;
    }
    ag_set_error_handler(NULL, NULL);
    if (!raised)
        return 77;                 /* no task ever ran on a pool thread */
    if (strncmp(task_msg, "task ", 5) != 0 || !strstr(task_msg, "failed"))
        return 4;
    if (running_at_handler != 0)
        return 5;
    if (wrong_runs(500, 2) != 0)
        return 6;
    _Atomic int seen = 0;
    for (int rep = 0; rep < 50 && atomic_load(&seen) != 3; rep++)
        ag_parallel(8, 2, note_thread, &seen);
    return atomic_load(&seen) == 3 ? 0 : 7;
}
#endif

static void test_error_in_task(void)
{
#ifdef AG_REFERENCE
    CHECK_SKIP("an error in a task: the reference build runs its loops on one thread");
#elif defined(UNDER_TSAN)
    CHECK_SKIP("an error in a task: ThreadSanitizer does not support a multi-threaded process that forks");
#else
    static const char *const what[] = {
        [3] = "the handler ran on a pool thread (it longjmps into the caller's stack)",
        [4] = "the handler was not given the task's message",
        [5] = "the handler ran while tasks of the loop were still running",
        [6] = "a loop after the error ran a task other than once",
        [7] = "loops after the error no longer use the pool's threads",
    };
    for (int on_pool = 0; on_pool < 2; on_pool++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(60);
            _exit(error_in_task_child(on_pool));
        }
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork or waitpid failed");
        const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (code == 77) {
            CHECK_SKIP("an error in a task on a pool thread: no task ran on one in 200 loops");
            continue;
        }
        CHECK(code == 0, "an error raised in a task on %s: %s", on_pool ? "a pool thread" : "the calling thread",
              code >= 3 && code <= 7 ? what[code]
              : WIFSIGNALED(status)  ? strsignal(WTERMSIG(status))
                                     : "the child failed");
    }
#endif
}

/* Threads the system will not give: in a child whose address space is
 * capped a little above what it maps (room for a few threads' stacks), 64
 * threads are asked for.  The loops run on the caller, every task once,
 * and the pool stops asking: it had tried to start the threads again at
 * every loop, creating and joining them each time, so that `attograd eval
 * --threads 100` under `ulimit -v 400000` made no progress in 20 s. */
static void test_denied_threads(void)
{
#if defined(UNDER_TSAN) || defined(UNDER_ASAN)
    CHECK_SKIP("threads denied: the sanitizers' own mappings do not survive a cap on the address space");
    return;
#endif
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit cap;
        const size_t vm = check_vm_bytes();
        if (!vm || getrlimit(RLIMIT_AS, &cap) != 0)
            _exit(77);
        cap.rlim_cur = (rlim_t)(vm + ((size_t)48 << 20));
        if (cap.rlim_max != RLIM_INFINITY && cap.rlim_cur > cap.rlim_max)
            _exit(77);
        if (setrlimit(RLIMIT_AS, &cap) != 0)
            _exit(77);
        ag_set_threads(64);
        int wrong = wrong_runs(1000, 64) != 0;
        const int now = ag_get_threads();
        for (int rep = 0; rep < 50; rep++)
            wrong += wrong_runs(1 + rep, 64) != 0;
        _exit(wrong ? 1 : now == 1 ? 0 : 2);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork or waitpid failed");
    if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
        CHECK_SKIP("threads denied: the address space cannot be capped here");
        return;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 1, "threads denied: a task ran other than once");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) != 2,
          "threads denied: the pool still asks for 64 threads (it will try to start them at every loop)");
}

/* OMP_WAIT_POLICY sets the poll (read when the threads start). */
static void test_policy(void)
{
#ifndef AG_REFERENCE
    double spin;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    ag_set_threads(3);
    ag_threads_measured(NULL, NULL, &spin, NULL, NULL);
    CHECK(spin == 0, "OMP_WAIT_POLICY=passive: threads poll %g us, not 0", spin);
    CHECK(wrong_runs(500, 3) == 0, "passive: a task ran other than once");
    setenv("OMP_WAIT_POLICY", "active", 1);
    ag_set_threads(2);
    ag_threads_measured(NULL, NULL, &spin, NULL, NULL);
    CHECK(spin < 0, "OMP_WAIT_POLICY=active: threads poll %g us, not forever", spin);
    CHECK(wrong_runs(500, 2) == 0, "active: a task ran other than once");
    unsetenv("OMP_WAIT_POLICY");
    ag_set_threads(3);
    double wake, fork_us, elem;
    size_t min_work;
    ag_threads_measured(&wake, &fork_us, &spin, &elem, &min_work);
    CHECK(wake >= 0 && fork_us >= 0 && elem > 0 && spin >= 0 && min_work > 0,
          "default policy: measured wake %g us, fork %g us, poll %g us, element %g ns, least work %zu", wake, fork_us,
          spin, elem, min_work);
#endif
}

/* ---- kernels: the same bits on 1, 2, 3 and 7 threads ------------------- */

static unsigned rng = 12345;
static ag_real uniform(void)
{
    rng = rng * 1103515245u + 12345u;
    return (ag_real)((rng >> 8) & 0xffff) / 32768 - 1;
}

static void test_kernels_threads(void)
{
    enum { M = 150, N = 270, K = 333, ROWS = 96, D = 200 };
    ag_real *A = malloc(sizeof(ag_real) * M * K), *B = malloc(sizeof(ag_real) * K * N);
    ag_real *x = malloc(sizeof(ag_real) * ROWS * D), *w = malloc(sizeof(ag_real) * D);
    for (int i = 0; i < M * K; i++) A[i] = uniform();
    for (int i = 0; i < K * N; i++) B[i] = uniform();
    for (int i = 0; i < ROWS * D; i++) x[i] = uniform() * 3;
    for (int i = 0; i < D; i++) w[i] = uniform();
    const int threads[] = { 1, 2, 3, 7 };
    ag_real *C[4], *Y[4], *S[4], *G[4];
    for (int r = 0; r < 4; r++) {
        check_set_threads(threads[r]);
        C[r] = calloc((size_t)M * N, sizeof(ag_real));
        Y[r] = calloc((size_t)ROWS * D, sizeof(ag_real));
        S[r] = calloc((size_t)ROWS * D, sizeof(ag_real));
        G[r] = calloc((size_t)ROWS * D, sizeof(ag_real));
        ag_real mean[ROWS], rstd[ROWS];
        ag_kern->gemm(0, 1, M, N, K, A, K, B, K, 0, C[r], N);
        ag_kern->gemm(1, 0, M, N, K, A, M, B, N, 1, C[r], N);
        ag_kern->layer_norm(x, w, w, ROWS, D, (ag_real)1e-5, Y[r], mean, rstd);
        ag_kern->softmax(x, S[r], ROWS, D, 1, 0);
        ag_kern->gelu(x, w, ROWS, D, G[r], NULL);
    }
    ag_threads_share_all(0);
    for (int r = 1; r < 4; r++) {
        CHECK(memcmp(C[0], C[r], sizeof(ag_real) * M * N) == 0, "gemm: 1 and %d threads differ in bits", threads[r]);
        CHECK(memcmp(Y[0], Y[r], sizeof(ag_real) * ROWS * D) == 0, "layer_norm: 1 and %d threads differ in bits",
              threads[r]);
        CHECK(memcmp(S[0], S[r], sizeof(ag_real) * ROWS * D) == 0, "softmax: 1 and %d threads differ in bits",
              threads[r]);
        CHECK(memcmp(G[0], G[r], sizeof(ag_real) * ROWS * D) == 0, "gelu: 1 and %d threads differ in bits",
              threads[r]);
    }
    for (int r = 0; r < 4; r++) {
        free(C[r]);
        free(Y[r]);
        free(S[r]);
        free(G[r]);
    }
    free(A);
    free(B);
    free(x);
    free(w);
}

/* The backward kernels' sums over rows (GELU's bias gradient, layer norm's
 * weight and bias gradients, the column sums) and the sum of squares, in
 * blocks fixed by the shape: the same bits on 1, 2, 3 and 7 threads, over
 * enough rows for 32 blocks. */
static void test_row_sums_threads(void)
{
    enum { ROWS = 1000, D = 200, N = ROWS * D };
    ag_real *x = malloc(sizeof(ag_real) * N), *dy = malloc(sizeof(ag_real) * N), *w = malloc(sizeof(ag_real) * D);
    ag_real mean[ROWS], rstd[ROWS];
    for (int i = 0; i < N; i++) x[i] = uniform() * 3, dy[i] = uniform();
    for (int i = 0; i < D; i++) w[i] = uniform();
    check_set_threads(1);
    ag_kern->layer_norm(x, w, w, ROWS, D, (ag_real)1e-5, dy, mean, rstd);   /* mean, rstd; dy overwritten below */
    for (int i = 0; i < N; i++) dy[i] = uniform();
    const int threads[] = { 1, 2, 3, 7 };
    ag_real *out[4];
    double ss[4];
    enum { DX = 0, DW = N, DB = N + D, GX = N + 2 * D, GB = 2 * N + 2 * D, CS = 2 * N + 3 * D, ALL = 2 * N + 4 * D };
    for (int r = 0; r < 4; r++) {
        check_set_threads(threads[r]);
        ag_real *o = out[r] = calloc(ALL, sizeof(ag_real));
        ag_kern->layer_norm_backward(x, w, mean, rstd, dy, ROWS, D, o + DX, 1, o + DW, o + DB);
        ag_kern->gelu_backward(x, w, NULL, dy, ROWS, D, o + GX, 1, o + GB);
        ag_kern->column_sums(dy, ROWS, D, o + CS);
        ss[r] = ag_kern->sum_squares(dy, N);
    }
    ag_threads_share_all(0);
    for (int r = 1; r < 4; r++) {
        CHECK(memcmp(out[0] + DX, out[r] + DX, sizeof(ag_real) * (N + 2 * D)) == 0,
              "layer_norm_backward: 1 and %d threads differ in bits", threads[r]);
        CHECK(memcmp(out[0] + GX, out[r] + GX, sizeof(ag_real) * (N + D)) == 0,
              "gelu_backward with the bias gradient: 1 and %d threads differ in bits", threads[r]);
        CHECK(memcmp(out[0] + CS, out[r] + CS, sizeof(ag_real) * D) == 0, "column_sums: 1 and %d threads differ",
              threads[r]);
        CHECK(memcmp(&ss[0], &ss[r], sizeof ss[0]) == 0, "sum_squares: 1 and %d threads differ", threads[r]);
    }
    for (int r = 0; r < 4; r++)
        free(out[r]);
    free(x);
    free(dy);
    free(w);
}

/* The optimizers update all parameters in one loop whose pieces cross
 * parameter boundaries (src/optim.c): each element must still get its own
 * parameter's weight decay and come out with the bits of the kernel run
 * parameter by parameter, on any thread count.  Sizes are odd so that the
 * pieces' edges fall inside parameters; the clip scales the gradients. */
static void test_optimizer_threads(void)
{
    enum { COUNT = 7, STEPS = 3 };
    const int sizes[COUNT] = { 1, 129, 17, 4000, 3, 650, 2048 };
    for (int kind = 0; kind < 2; kind++) {
        const int threads[] = { 1, 2, 3, 7 };
        ag_real *got[4];
        size_t total = 0;
        for (int r = 0; r < 4; r++) {
            check_set_threads(threads[r]);
            ag_params *ps = ag_params_new();
            for (int k = 0; k < COUNT; k++) {
                char name[16];
                snprintf(name, sizeof name, "p%d", k);
                ag_params_add(ps, name, 1, &sizes[k])->decay = k % 2;
            }
            ag_params_alloc(ps);
            total = ps->total;
            rng = 7;
            for (size_t i = 0; i < total; i++) ps->data[i] = uniform();
            ag_optim *o = kind ? ag_optim_adamw(ps, 0.9, 0.999, 1e-8, 0.1) : ag_optim_sgd(ps, 0.9, 0.1);
            for (int step = 0; step < STEPS; step++) {
                for (size_t i = 0; i < total; i++) ps->grad[i] = uniform() * 5;
                ag_clip_grad_norm(ps, 1.0);
                ag_optim_step(o, 1e-2);
            }
            got[r] = malloc(sizeof(ag_real) * total);
            memcpy(got[r], ps->data, sizeof(ag_real) * total);
            ag_optim_free(o);
            ag_params_free(ps);
        }
        /* the same steps, parameter by parameter on one thread */
        ag_set_threads(1);
        ag_real *p = malloc(sizeof(ag_real) * total), *g = malloc(sizeof(ag_real) * total);
        ag_real *m = calloc(total, sizeof(ag_real)), *v = calloc(total, sizeof(ag_real));
        rng = 7;
        for (size_t i = 0; i < total; i++) p[i] = uniform();
        for (int step = 0; step < STEPS; step++) {
            for (size_t i = 0; i < total; i++) g[i] = uniform() * 5;
            double ss = ag_kern->sum_squares(g, total), coef = 1.0 / (sqrt(ss) + 1e-6);
            if (coef < 1)
                for (size_t i = 0; i < total; i++) g[i] *= (ag_real)coef;
            for (size_t off = 0, k = 0; k < COUNT; off += (size_t)sizes[k], k++) {
                const double decay = k % 2 ? 0.1 : 0;
                if (kind) {
                    ag_adamw_args a = { 1e-2, 0.9, 0.999, 1e-8, decay, step + 1 };
                    ag_kern->adamw(p + off, g + off, m + off, v + off, (size_t)sizes[k], &a);
                } else {
                    ag_kern->sgd(p + off, g + off, m + off, (size_t)sizes[k], (ag_real)1e-2, (ag_real)0.9,
                                 (ag_real)decay, step == 0);
                }
            }
        }
        ag_threads_share_all(0);
        for (int r = 0; r < 4; r++) {
            CHECK(memcmp(got[r], p, sizeof(ag_real) * total) == 0,
                  "%s on %d threads: not the bits of the update parameter by parameter", kind ? "adamw" : "sgd",
                  threads[r]);
            free(got[r]);
        }
        free(p);
        free(g);
        free(m);
        free(v);
    }
}

/* The thread count a program that never calls ag_set_threads gets:
 * OMP_NUM_THREADS's first number (clamped to the pool's maximum), else,
 * for a value that is no positive number or none at all, every usable core
 * (one in the reference build).  Each asked in a forked child before
 * anything here has used the pool, so it is the first answer. */
static int first_threads(const char *omp)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (omp)
            setenv("OMP_NUM_THREADS", omp, 1);
        else
            unsetenv("OMP_NUM_THREADS");
        const int n = ag_get_threads();
        _exit(n > 0 && n < 255 ? n : 255);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static void test_default_threads(void)
{
    const int cores = first_threads(NULL);
    CHECK(cores >= 1 && cores < 255, "threads without OMP_NUM_THREADS: %d", cores);
#ifdef AG_REFERENCE
    const int three = 1, five = 1, most = 1;
#else
    const int three = 3, five = 5, most = AG_POOL_MAX_THREADS < 255 ? AG_POOL_MAX_THREADS : 255;
#endif
    const struct { const char *omp; int want; } cases[] = {
        {"3,2", three}, {"5", five}, {" 5", five}, {"99999", most}, {"0", cores}, {"-4", cores}, {"abc", cores},
        {"", cores},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int got = first_threads(cases[i].omp);
        CHECK(got == cases[i].want, "OMP_NUM_THREADS='%s': %d threads, want %d", cases[i].omp, got, cases[i].want);
    }
}

int main(void)
{
    test_default_threads();   /* first: before anything starts the pool */
    test_every_task_once();
    test_repeated();
    test_nested();
    test_parallel_for();
    test_threads_for();
    test_two_callers();
    test_two_contexts();
    test_set_threads_elsewhere();
    test_error_in_task();
    test_fork();
    test_denied_threads();
    test_policy();
    test_kernels_threads();
    test_row_sums_threads();
    test_optimizer_threads();
    return check_done();
}
