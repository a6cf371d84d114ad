/*
 * pool.c - the engine's threads: a pool of its own (POSIX threads) that runs
 * the parallel loops of the ops and kernels, and the one place that decides
 * how long idle threads wait awake and which work is worth sharing.
 *
 * A training step of a small model is hundreds of short parallel loops with
 * a little serial work between them.  What a loop costs beyond its work is
 * getting the other threads to start it, and that depends on the CPU and on
 * what else the machine runs, so nothing here is a constant tuned on one
 * machine: when the pool starts, it measures this machine and derives its
 * settings from a stated model.
 *
 *   wake     W  the time from posting a loop to a sleeping thread starting
 *               it (a futex or condition-variable wake-up: microseconds on
 *               bare metal, tens of them in a virtual machine).
 *   fork     F  the same with the threads awake and polling: the least a
 *               shared loop costs (about a microsecond).
 *   element  E  the time one thread takes per element of a plain
 *               element-wise loop (y = a*y + x over data in L2).
 *
 * Waiting.  An idle thread polls for the next loop for a time S, then
 * sleeps.  If the serial stretch before a loop was longer than S, that loop
 * pays W more; so with S = 20 W a loop is slowed by at most 5% of the
 * serial stretch before it, and a thread never wastes more than S of a core
 * per stretch that another process could have used.  With more threads
 * than cores S = 0: a polling thread would hold a core a thread with work
 * needs, and S = 0 too when polling threads started a loop no sooner than
 * half a wake-up (2 F >= W): they were off their cores, as on a machine
 * busy with other work, and polling only takes time from threads with
 * work (measured on a 2-core machine at load 20: the small model's step
 * 37 ms sleeping at once, 168 ms polling).  Polling is measured
 * on a clock, not counted in rounds: a `pause` takes 10 cycles on one CPU
 * and 140 on another.
 *
 * Sharing.  A loop of w elements takes w E on one thread and about
 * w E / n + F on n.  It is shared when that saves at least F more, i.e.
 * when w E (1 - 1/n) >= 2 F; smaller loops run on the calling thread
 * alone.  The matrix multiplies and the attention know their time on one
 * thread better than by elements: T = (multiply-adds) x the time of one in
 * their kernel, which src/kernels/gemm.c measures once on this machine
 * (ag_fast_gemm_madd_ns); they share when T (1 - 1/n) >= 2 F, the same
 * rule (ag_threads_for).  So the least product worth two threads follows
 * the machine: 2 F / (1 - 1/2) / (ns per multiply-add) on 2 threads; on
 * the 2-core Zen 5 (F 0.5 us, 0.0095 ns) 2 x 10^5 multiply-adds, 59^3,
 * where a constant 96^3 was used before; where polling threads lose their
 * cores (a busy machine: F 8 us) 3.5 x 10^6, 151^3.
 *
 * What varies between processes.  Over many starts of one program on that
 * Zen 5, the multiply-add time varied by about 10% and W within 2x.  F
 * took one of two values 20-100x apart: the machine's own (0.1-0.5 us)
 * while the pool's thread had a core to itself, or about W when it had
 * not (another process held the second core, and the scheduler had put
 * the pool's thread beside the caller, which polled for it in vain: every
 * probe after the first, which wakes the sleeping thread, ran out its 2
 * ms).  Products between the two lines -- the toy model's per-head products,
 * 10^6 multiply-adds -- were then shared in one process and not in the
 * next.  Such a process truly cannot share them (its second thread has no
 * core), so the split follows the machine as measured at start; with the
 * machine to itself (its threads run as real-time, chrt -f, beside the
 * same load) every process measured alike, and the products went one way.
 *
 * A busy machine.  The task split is fixed (thread t first takes the same
 * tasks every call, so its rows stay in its cache from one op to the next),
 * but a task no thread has started is taken by whichever thread is free.
 * A thread that lost its core to another process therefore delays a loop by
 * at most the task it is in, never by its whole share: the caller does the
 * rest.  Results never depend on which thread ran a task.
 *
 * The user's policy wins: ag_set_threads (the CLI's --threads; before any
 * call, OMP_NUM_THREADS, as the OpenMP runtimes read it), OMP_WAIT_POLICY=
 * passive (sleep at once: S = 0) or active (never sleep).  The pool starts
 * on first use, survives fork() (the child starts its own threads when it
 * first needs them: MPI ranks may be forked), and serves one calling thread
 * at a time; a second thread's loops run on that thread alone.  No OpenMP:
 * its runtimes read their waiting policy once, when the program is loaded,
 * so a library cannot set it for the machine it finds itself on.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "pool.h"

#define MAX_THREADS AG_POOL_MAX_THREADS
#define SPIN_FOREVER INT64_MAX

/* Where thread t takes its next task: (generation << 32) | next task, and
 * the end of its share.  A thread still looking at an old loop's slots
 * fails to claim anything, because the generation no longer matches: a
 * new loop first closes each slot (its generation, next task CLOSED), then
 * sets the end, then opens it, so a thread that reads the new end (acquire)
 * finds the old claim gone when it tries to take it.  (Setting the end
 * first let a thread that read an old loop's spent claim and then the new
 * end take one task more of the old loop, whose context was gone.) */
#define CLOSED 0x7fffffffu
typedef struct {
    _Alignas(64) _Atomic uint64_t claim;
    _Atomic int end;
} slot;

/* Read without `use` by every thread that calls the engine (a program may
 * run contexts on threads of its own, and call ag_set_threads from any of
 * them): want, started and the measurements are atomic.  A loop asks for
 * the threads running (started + 1) at most, whatever want says by then. */
static struct {
    pthread_mutex_t use;            /* held by the thread running a loop */
    pthread_mutex_t mu;             /* with cv: sleeping threads */
    pthread_cond_t cv;
    _Atomic int want;               /* threads asked for (0: not yet decided) */
    _Atomic int started;            /* threads running besides the caller's */
    pthread_t *threads;
    slot *slots;
    _Atomic uint32_t gen;           /* bumped for each loop, and to stop */
    uint32_t start_gen;             /* gen when the threads were started */
    _Atomic(ag_task_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int nth;
    _Atomic int done;               /* tasks finished in this loop */
    _Atomic int failed;             /* a task of this loop raised an error: the rest are skipped */
    char fail_msg[512];             /* the first one's message, for the calling thread */
    _Atomic int sleepers;
    _Atomic int quit;
    _Atomic int64_t spin_ns;        /* S */
    _Atomic int64_t wake_ns, fork_ns;   /* W, F as measured */
    _Atomic double elem_ns;         /* E */
    _Atomic size_t min_work;        /* a loop with less work runs on one thread */
} pool = { .use = PTHREAD_MUTEX_INITIALIZER, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static int share_all;                  /* ag_threads_share_all */
static _Thread_local int tl_id;        /* ag_thread_id() */
static _Thread_local int tl_inside;    /* in a task, or a pool thread: loops run inline */

/* Errors in tasks.  ag_error on a thread that is running a loop's tasks
 * (ag_pool_catch) jumps back to the loop on that thread, not to the
 * program's handler: a pool thread must not run a handler that longjmps
 * into another thread's stack, and the calling thread must not leave a
 * loop that other threads are still running.  The loop skips its tasks
 * not yet started, and when every thread is out of it ag_parallel raises
 * the first message on the calling thread. */
typedef struct {
    jmp_buf jb;
    char msg[512];
} trap;
static _Thread_local trap *tl_trap;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

int ag_thread_id(void) { return tl_id; }

/* ---- how many threads ------------------------------------------------- */

/* The cores this process may run on (its affinity mask: mpirun and taskset
 * narrow it), as OpenMP's omp_get_num_procs counts them.  WebAssembly (the
 * browser build, make web) declares the mask but has no call to read it. */
static int usable_cores(void)
{
#if defined(CPU_COUNT) && !defined(__wasm__)
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static int clamp_threads(long n)
{
#ifdef AG_REFERENCE
    (void)n;
    return 1;                       /* the reference build runs on one thread */
#else
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
#endif
}

/* Before ag_set_threads: OMP_NUM_THREADS (its first number), else every
 * usable core. */
static int default_threads(void)
{
    const char *s = getenv("OMP_NUM_THREADS");
    if (s) {
        char *end;
        long n = strtol(s, &end, 10);
        if (end != s && n > 0)
            return clamp_threads(n);
    }
    return clamp_threads(usable_cores());
}

int ag_get_threads(void)
{
    int n = atomic_load(&pool.want);
    if (!n) {
        /* the first caller decides, unless ag_set_threads came first */
        const int d = default_threads();
        n = atomic_compare_exchange_strong(&pool.want, &n, d) ? d : n;
    }
    return n;
}

int ag_max_threads(void) { return tl_inside ? 1 : ag_get_threads(); }

/* ---- the pool's threads -------------------------------------------------- */

/* tests/test_pool_race.c holds a thread at these points to replay the
 * interleaving the slots' protocol must survive; nothing otherwise. */
#ifndef POOL_RACE_POINT
#define POOL_RACE_POINT(where, slot) ((void)0)
#endif

/* Claims the next task of this slot in loop `gen`, or returns -1. */
static int claim(slot *s, uint32_t gen)
{
    uint64_t v = atomic_load_explicit(&s->claim, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(v >> 32) != gen)
            return -1;
        POOL_RACE_POINT(1, s);
        if ((int)(uint32_t)v >= atomic_load_explicit(&s->end, memory_order_acquire))
            return -1;
        if (atomic_compare_exchange_weak_explicit(&s->claim, &v, v + 1, memory_order_acq_rel, memory_order_acquire))
            return (int)(uint32_t)v;
    }
}

/* Thread id's share of loop gen, then whatever the others have not
 * started.  A task that raises an error ends there (it counts as done), and
 * no thread starts another task of the loop. */
static void run_tasks(uint32_t gen, int id, int nth, ag_task_fn fn, void *ctx)
{
    trap tr;
    trap *const outer = tl_trap;
    volatile int ran = 0, k = 0;
    if (setjmp(tr.jb) != 0) {
        if (atomic_exchange(&pool.failed, 1) == 0)
            memcpy(pool.fail_msg, tr.msg, sizeof pool.fail_msg);
        ran = ran + 1;
    }
    tl_trap = &tr;
    for (; k < nth; k = k + 1) {
        slot *s = &pool.slots[(id + k) % nth];
        for (int t; (t = claim(s, gen)) >= 0; ran = ran + 1)
            if (!atomic_load_explicit(&pool.failed, memory_order_relaxed))
                fn(ctx, t);
    }
    tl_trap = outer;
    if (ran)
        atomic_fetch_add_explicit(&pool.done, ran, memory_order_release);
}

void ag_pool_catch(const char *msg)
{
    trap *const t = tl_trap;
    if (t) {
        snprintf(t->msg, sizeof t->msg, "%s", msg);
        longjmp(t->jb, 1);
    }
    /* no loop of this thread catches it: the error leaves every loop
     * this thread was running inline */
    tl_id = 0;
    tl_inside = 0;
}

/* Polls for a loop after `seen` for S, then sleeps until one is posted. */
static uint32_t wait_for_loop(uint32_t seen)
{
    const int64_t t0 = now_ns(), spin = atomic_load_explicit(&pool.spin_ns, memory_order_relaxed);
    uint32_t g;
    for (unsigned i = 1;; i++) {
        if ((g = atomic_load_explicit(&pool.gen, memory_order_acquire)) != seen)
            return g;
        cpu_relax();
        if (i % 64 == 0 && now_ns() - t0 >= spin)
            break;
    }
    /* sleepers is raised before gen is read again, and the poster raises
     * gen before reading sleepers: one of the two sees the other (both are
     * sequentially consistent), so no post is missed. */
    pthread_mutex_lock(&pool.mu);
    atomic_fetch_add(&pool.sleepers, 1);
    while ((g = atomic_load(&pool.gen)) == seen)
        pthread_cond_wait(&pool.cv, &pool.mu);
    atomic_fetch_sub(&pool.sleepers, 1);
    pthread_mutex_unlock(&pool.mu);
    return g;
}

/* ---- buffers that end with their thread ---------------------------------- */

static _Thread_local void **tl_owned[AG_POOL_MAX_OWNED];
static _Thread_local int tl_n_owned;
static pthread_key_t owned_key;
static pthread_once_t owned_once = PTHREAD_ONCE_INIT;

/* The key's destructor: runs as a thread that registered a buffer ends
 * (glibc runs it while the thread's _Thread_local data still exist). */
static void free_owned(void *unused)
{
    (void)unused;
    for (int i = 0; i < tl_n_owned; i++) {
        free(*tl_owned[i]);
        *tl_owned[i] = NULL;
    }
    tl_n_owned = 0;
}

static void make_owned_key(void) { pthread_key_create(&owned_key, free_owned); }

void ag_thread_owns(void **p)
{
    for (int i = 0; i < tl_n_owned; i++)
        if (tl_owned[i] == p)
            return;
    if (tl_n_owned == AG_POOL_MAX_OWNED)
        ag_error("ag_thread_owns: more than %d buffers on one thread", AG_POOL_MAX_OWNED);
    pthread_once(&owned_once, make_owned_key);
    tl_owned[tl_n_owned++] = p;
    pthread_setspecific(owned_key, &tl_n_owned);   /* non-NULL: the destructor runs */
}

static void *pool_thread(void *arg)
{
    tl_id = (int)(intptr_t)arg;
    tl_inside = 1;
    uint32_t seen = pool.start_gen;   /* a loop posted before this thread ran is still seen */
    for (;;) {
        seen = wait_for_loop(seen);
        if (atomic_load(&pool.quit))
            return NULL;
        int nth = atomic_load_explicit(&pool.nth, memory_order_relaxed);
        if (tl_id < nth)
            run_tasks(seen, tl_id, nth, atomic_load_explicit(&pool.fn, memory_order_relaxed),
                      atomic_load_explicit(&pool.ctx, memory_order_relaxed));
    }
}

static void post(void)
{
    atomic_fetch_add(&pool.gen, 1);
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.cv);
        pthread_mutex_unlock(&pool.mu);
    }
}

/* Posts fn's n_tasks on nth threads (`use` held, threads started), takes
 * part, and waits for the last task. */
static void run_loop(int n_tasks, int nth, ag_task_fn fn, void *ctx)
{
    const uint32_t gen = atomic_load(&pool.gen) + 1;
    for (int t = 0; t < nth; t++) {
        const int lo = (int)((long)n_tasks * t / nth), hi = (int)((long)n_tasks * (t + 1) / nth);
        atomic_store_explicit(&pool.slots[t].claim, (uint64_t)gen << 32 | CLOSED, memory_order_relaxed);
        atomic_store_explicit(&pool.slots[t].end, hi, memory_order_release);
        POOL_RACE_POINT(2, &pool.slots[t]);
        atomic_store_explicit(&pool.slots[t].claim, (uint64_t)gen << 32 | (uint32_t)lo, memory_order_release);
    }
    atomic_store_explicit(&pool.fn, fn, memory_order_relaxed);
    atomic_store_explicit(&pool.ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&pool.nth, nth, memory_order_relaxed);
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    atomic_store_explicit(&pool.failed, 0, memory_order_relaxed);
    post();
    tl_id = 0;
    tl_inside = 1;
    run_tasks(gen, 0, nth, fn, ctx);
    tl_inside = 0;
    /* the tasks left were started by threads still in them; one that lost
     * its core is let run by yielding this one */
    const int64_t t0 = now_ns();
    for (unsigned i = 1; atomic_load_explicit(&pool.done, memory_order_acquire) < n_tasks; i++) {
        cpu_relax();
        if (i % 64 == 0 && now_ns() - t0 > 100000)
            sched_yield();
    }
}

static void stop_threads(void)
{
    if (!pool.started)
        return;
    atomic_store(&pool.quit, 1);
    post();
    for (int i = 0; i < pool.started; i++)
        pthread_join(pool.threads[i], NULL);
    atomic_store(&pool.quit, 0);
    pool.started = 0;
}

/* In a forked child only the forking thread exists: the pool starts anew
 * when the child first needs it. */
static void before_fork(void) { pthread_mutex_lock(&pool.use); }
static void after_fork_parent(void) { pthread_mutex_unlock(&pool.use); }
static void after_fork_child(void)
{
    pool.started = 0;
    atomic_store(&pool.sleepers, 0);
    atomic_store(&pool.quit, 0);
    pthread_mutex_init(&pool.mu, NULL);
    pthread_cond_init(&pool.cv, NULL);
    pthread_mutex_init(&pool.use, NULL);
}

/* At exit, the threads are stopped and freed (memory checkers then find
 * nothing held) unless a loop is running: exit called from inside a task. */
static void at_exit(void)
{
    if (tl_inside || pthread_mutex_trylock(&pool.use) != 0)
        return;
    stop_threads();
    pthread_mutex_unlock(&pool.use);
}

static void register_handlers(void)
{
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    atexit(at_exit);
}

/* ---- measuring this machine ------------------------------------------------ */

typedef struct {
    int64_t posted, started[MAX_THREADS];
    _Atomic int arrived;
    int64_t busy_ns;
} probe;

/* Task 0 (the caller's) waits until every other task has started (or 2 ms,
 * if a thread cannot get a core); the others note when they started. */
static void probe_task(void *ctx, int task)
{
    probe *p = ctx;
    if (task == 0) {
        const int64_t t0 = now_ns();
        while (atomic_load(&p->arrived) < atomic_load(&pool.nth) - 1 && now_ns() - t0 < 2000000)
            cpu_relax();
        return;
    }
    p->started[task] = now_ns();
    atomic_fetch_add(&p->arrived, 1);
}

/* The latest start after posting, over the threads, of one loop. */
static int64_t probe_start(int nth)
{
    static probe p;
    memset(p.started, 0, sizeof p.started[0] * (size_t)nth);
    atomic_store(&p.arrived, 0);
    p.posted = now_ns();
    run_loop(nth, nth, probe_task, &p);
    int64_t latest = 0;
    for (int t = 1; t < nth; t++)
        latest = p.started[t] > latest ? p.started[t] : latest;
    return latest > p.posted ? latest - p.posted : 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int64_t median(int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    return v[n / 2];
}

/* E: y = a*y + x over 32768 elements (256 KB: in L2, as a small model's
 * activations are), the fastest of a few runs. */
static double measure_element(void)
{
    enum { N = 32768 };
    ag_real *x = malloc(2 * N * sizeof *x);
    if (!x)
        return 0.1;
    ag_real *y = x + N;
    for (int i = 0; i < N; i++) x[i] = (ag_real)i, y[i] = 1;
    int64_t best = INT64_MAX;
    for (int rep = 0; rep < 10; rep++) {
        const int64_t t0 = now_ns();
        for (int i = 0; i < N; i++) y[i] = (ag_real)0.5 * y[i] + x[i];
        __asm__ __volatile__("" : : "r"(y) : "memory");   /* the loop's result counts */
        const int64_t t = now_ns() - t0;
        best = t < best ? t : best;
    }
    free(x);
    return best > 0 ? (double)best / N : 0.1;
}

/* S from W, or from the user's OMP_WAIT_POLICY (read again by each
 * ag_set_threads). */
static void apply_policy(void)
{
    const char *policy = getenv("OMP_WAIT_POLICY");
    int64_t spin = 20 * pool.wake_ns;
    if (spin > 5000000)
        spin = 5000000;            /* a measurement spoiled by a busy machine: no more than 5 ms */
    if (pool.want > usable_cores())
        spin = 0;                  /* more threads than cores: a polling thread takes the core of one with work */
    if (2 * pool.fork_ns >= pool.wake_ns)
        spin = 0;                  /* polling threads were off their cores (a machine busy with other work):
                                    * polling bought nothing and takes time a thread with work needs */
    if (policy && strcasecmp(policy, "passive") == 0)
        spin = 0;
    else if (policy && strcasecmp(policy, "active") == 0)
        spin = SPIN_FOREVER;
    atomic_store(&pool.spin_ns, spin);
}

/* W (threads asleep), F (threads polling), E, and from them S and the
 * least work worth sharing; with `use` held and the threads started. */
static void measure(int nth)
{
    enum { TRIES = 15 };
    int64_t wake[TRIES], forks[TRIES];
    atomic_store(&pool.spin_ns, 0);
    for (int i = 0; i < TRIES; i++) {
        const int64_t t0 = now_ns();
        while (atomic_load(&pool.sleepers) < nth - 1 && now_ns() - t0 < 20000000)
            sched_yield();
        wake[i] = probe_start(nth);
    }
    atomic_store(&pool.spin_ns, SPIN_FOREVER);
    for (int i = 0; i < TRIES; i++)
        forks[i] = probe_start(nth);
    /* W: the typical wake-up.  F: the fastest, the machine's own cost with
     * the threads on their cores; on a machine busy with other work a
     * polling thread is often off its core, and then the caller takes its
     * tasks (ag_parallel) rather than wait. */
    pool.wake_ns = median(wake, TRIES);
    qsort(forks, TRIES, sizeof forks[0], cmp_i64);
    pool.fork_ns = forks[0];
    pool.elem_ns = measure_element();

    apply_policy();
    /* w E (1 - 1/n) >= 2 F */
    const int64_t f = pool.fork_ns > 100 ? pool.fork_ns : 100;
    pool.min_work = (size_t)(2.0 * (double)f / (pool.elem_ns * (1.0 - 1.0 / nth)));
}

/* Starts the threads for ag_get_threads() (with `use` held); 0 if they
 * could not all be started and loops must run on the caller alone.  Then
 * the pool asks for one thread from now on (until ag_set_threads): trying
 * again at every loop created and joined threads each time, and under a
 * cap on memory (`ulimit -v`) a program asking for 100 threads made no
 * progress. */
static int start_threads(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_handlers);
    const int nth = ag_get_threads();
    if (pool.started == nth - 1)
        return 1;
    stop_threads();
    if (nth == 1)
        return 0;
    free(pool.threads);
    free(pool.slots);
    pool.threads = malloc(sizeof *pool.threads * (size_t)(nth - 1));
    pool.slots = aligned_alloc(64, sizeof *pool.slots * (size_t)nth);
    if (!pool.threads || !pool.slots) {
        free(pool.threads);
        free(pool.slots);
        pool.threads = NULL;
        pool.slots = NULL;
        pool.want = 1;              /* as when the system will not give the threads */
        return 0;
    }
    memset(pool.slots, 0, sizeof *pool.slots * (size_t)nth);
    /* the pool's threads take no signals: they stay the program's main thread's */
    sigset_t all, old;
    pool.start_gen = atomic_load(&pool.gen);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (int i = 1; i < nth; i++) {
        if (pthread_create(&pool.threads[i - 1], NULL, pool_thread, (void *)(intptr_t)i) != 0)
            break;
        pool.started = i;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (pool.started != nth - 1) {
        stop_threads();
        pool.want = 1;
        return 0;
    }
    measure(nth);
    return 1;
}

/* ---- the entry points ------------------------------------------------------ */

static void run_inline(int n_tasks, ag_task_fn fn, void *ctx)
{
    const int id = tl_id, inside = tl_inside;
    tl_id = 0;
    tl_inside = 1;
    for (int t = 0; t < n_tasks; t++)
        fn(ctx, t);
    tl_id = id;
    tl_inside = inside;
}

void ag_parallel(int n_tasks, int nth, ag_task_fn fn, void *ctx)
{
    if (n_tasks <= 0)
        return;
    if (nth > n_tasks)
        nth = n_tasks;
    if (nth > ag_max_threads())
        nth = ag_max_threads();
    POOL_RACE_POINT(3, NULL);
    if (nth <= 1 || pthread_mutex_trylock(&pool.use) != 0) {
        run_inline(n_tasks, fn, ctx);
        return;
    }
    if (!start_threads()) {
        pthread_mutex_unlock(&pool.use);
        run_inline(n_tasks, fn, ctx);
        return;
    }
    /* another thread's ag_set_threads may have changed the pool since
     * ag_max_threads answered: no more threads than it has now */
    if (nth > pool.started + 1)
        nth = pool.started + 1;
    char msg[sizeof pool.fail_msg];
    run_loop(n_tasks, nth, fn, ctx);
    const int failed = atomic_load(&pool.failed);
    if (failed)
        memcpy(msg, pool.fail_msg, sizeof msg);
    pthread_mutex_unlock(&pool.use);
    if (failed)
        ag_error("%s", msg);        /* on the calling thread, every thread out of the loop */
}

/* The least work ag_parallel_for shares (the pool is measured on first use). */
static size_t min_work(void)
{
    if (pool.started != ag_get_threads() - 1 && pthread_mutex_trylock(&pool.use) == 0) {
        if (!start_threads())
            pool.min_work = SIZE_MAX;
        pthread_mutex_unlock(&pool.use);
    }
    return pool.min_work;
}

int ag_threads_for(double serial_ns)
{
    const int nth = ag_max_threads();
    if (nth <= 1)
        return 1;
    if (share_all)
        return nth;
    if (min_work() == SIZE_MAX)
        return 1;                  /* no threads could be started */
    /* T (1 - 1/n) >= 2 F, with F at least 100 ns as for min_work */
    const double f = pool.fork_ns > 100 ? (double)pool.fork_ns : 100;
    return serial_ns * (1.0 - 1.0 / nth) >= 2 * f ? nth : 1;
}

typedef struct {
    ag_range_fn fn;
    void *ctx;
    size_t n;
    int tasks;
} range_loop;

static void range_task(void *ctx, int t)
{
    const range_loop *r = ctx;
    r->fn(r->ctx, r->n * (size_t)t / (size_t)r->tasks, r->n * (size_t)(t + 1) / (size_t)r->tasks);
}

void ag_parallel_for(size_t n, size_t work, ag_range_fn fn, void *ctx)
{
    const int nth = ag_max_threads();
    if (nth <= 1 || n < 2 || (!share_all && work < min_work())) {
        fn(ctx, 0, n);
        return;
    }
    /* four tasks a thread: a thread that loses its core holds up a quarter
     * of its share at most */
    range_loop r = { fn, ctx, n, n < (size_t)4 * nth ? (int)n : 4 * nth };
    ag_parallel(r.tasks, nth, range_task, &r);
}

void ag_set_threads(int n)
{
    pool.want = clamp_threads(n > 0 ? n : usable_cores());
    if (pool.started)
        apply_policy();
}

void ag_threads_share_all(int on) { share_all = on; }

/* For `attograd info`-style reports and the benchmarks: what was measured. */
void ag_threads_measured(double *wake_us, double *fork_us, double *spin_us, double *elem_ns, size_t *min_work_)
{
    size_t mw = min_work();
    int64_t spin = atomic_load(&pool.spin_ns);
    if (wake_us) *wake_us = (double)pool.wake_ns / 1000;
    if (fork_us) *fork_us = (double)pool.fork_ns / 1000;
    if (spin_us) *spin_us = spin == SPIN_FOREVER ? -1 : (double)spin / 1000;
    if (elem_ns) *elem_ns = pool.elem_ns;
    if (min_work_) *min_work_ = mw;
}
