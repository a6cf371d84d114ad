/*
 * pool.h - the engine's threads (src/pool.c): run a loop's tasks on a small
 * pool of its own, and decide how many threads a piece of work gets.
 * pool.c's header explains the model; the ops and kernels only call these.
 */
#ifndef ATTOGRAD_POOL_H
#define ATTOGRAD_POOL_H

#include <stddef.h>

/* ag_set_threads asks for at most this many. */
#define AG_POOL_MAX_THREADS 1024

/* A task: fn(ctx, task) for task in [0, n_tasks).  Which thread runs a task
 * must not change what it computes: a task may index per-thread scratch by
 * ag_thread_id(), never results. */
typedef void (*ag_task_fn)(void *ctx, int task);

/* Runs every task once on up to nth threads (the caller is one of them) and
 * returns when all are done.  Thread t first takes tasks
 * [t*n_tasks/nth, (t+1)*n_tasks/nth), the same ones every call, then helps
 * with tasks no thread has started.  Inside a task, on one thread, or while
 * another thread of the program uses the pool, the tasks run in order on
 * the calling thread. */
void ag_parallel(int n_tasks, int nth, ag_task_fn fn, void *ctx);

/* A loop body over [lo, hi) of [0, n). */
typedef void (*ag_range_fn)(void *ctx, size_t lo, size_t hi);

/* fn over [0, n) in contiguous pieces on all threads, or in one piece on
 * the calling thread when `work` (about the elements the loop reads and
 * writes; a loop whose elements cost more, as rows of exps do, weights
 * them: kernels/rows.c) is too little to pay for waking the others.  For loops whose
 * every element or row is computed alone, so the split cannot change a
 * bit. */
void ag_parallel_for(size_t n, size_t work, ag_range_fn fn, void *ctx);

/* The threads for work that takes serial_ns on one thread: ag_max_threads()
 * when sharing it pays by pool.c's model (T (1 - 1/n) >= 2 F), else 1.
 * For kernels that know their time (src/kernels/: the matrix multiplies,
 * the attention); like ag_parallel_for, every size is shared under
 * ag_threads_share_all. */
int ag_threads_for(double serial_ns);

/* Registers *p, a buffer the calling thread keeps between calls (see
 * kernels/fast.h's ag_scratch), to be freed when the thread ends: the
 * pool's workers end at exit, and memory no thread can reach after that is
 * a leak to LeakSanitizer and valgrind.  At most AG_POOL_MAX_OWNED per
 * thread; registering the same p twice is harmless. */
#define AG_POOL_MAX_OWNED 16
void ag_thread_owns(void **p);

/* ag_error's first step: on a thread running a loop's tasks, jump back to
 * that loop (its ag_parallel raises msg again on the calling thread once
 * every thread is out of the loop); elsewhere forget the loops this thread
 * ran inline, which the error leaves, and return. */
void ag_pool_catch(const char *msg);

/* The running thread's place in the current ag_parallel, in [0, nth): 0 on
 * the calling thread and outside any. */
int ag_thread_id(void);

/* The threads a kernel may ask ag_parallel for: 1 inside a task (no nested
 * parallelism), else ag_get_threads(). */
int ag_max_threads(void);

/* For tests: with on, ag_parallel_for shares every loop however small. */
void ag_threads_share_all(int on);

/* What the pool measured on this machine when it started (pool.c's
 * model): the wake-up W and fork F in microseconds, the poll S (-1: never
 * sleeps), the element time E in ns and the least work shared. */
void ag_threads_measured(double *wake_us, double *fork_us, double *spin_us, double *elem_ns, size_t *min_work);

#endif
