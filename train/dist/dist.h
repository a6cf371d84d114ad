/*
 * dist.h - the ranks of a data-parallel run and the few collectives
 * training needs.  The MPI build (make MPI=1, AG_MPI) runs them on Open MPI;
 * the plain build has one rank, where each collective is a copy or nothing,
 * and refuses to run as one of several processes started by mpirun.
 *
 * Rank 0 alone speaks: the other ranks' standard output goes to /dev/null
 * and their standard error to a file no one reads (every rank reads the
 * same options and files and reaches the same verdicts, so one voice says
 * them); what only one rank can know (a timeout, a failed collective, an
 * error in the engine, a verdict of its own before training: dist_agree)
 * goes to the real standard error, naming the rank.  Every collective is bounded by a
 * timeout: a rank that waits longer for the others, or is still waiting
 * half a second after it was told to stop (time for the others, told too,
 * to meet it where the ranks agree to stop), gives up and returns to the
 * training loop, which saves the last step every rank completed and exits
 * with DIST_LOST (or 128 + the signal).
 */
#ifndef ATTOGRAD_DIST_H
#define ATTOGRAD_DIST_H

#include <stdio.h>

#include <signal.h>
#include <stddef.h>

/* The exit status of a rank that gave up waiting for the others (but for
 * a stop signal). */
#define DIST_LOST 4

/* Before anything else: join the run (MPI_Init) and learn this process's
 * rank, or, in the plain build started as several processes, say so (rank
 * 0) and exit 2 (every rank).  cmd names the subcommand in messages. */
void dist_start(const char *cmd);
int dist_rank(void);
int dist_size(void);
/* Ranks on this machine (threads per rank default to its cores / this). */
int dist_local_size(void);
/* Whether stream f (standard output, or where the report went) is a
 * terminal someone watches: under mpirun it is a pseudo-terminal of
 * mpirun's, whatever mpirun's own output is. */
int dist_terminal(FILE *f);
/* Seconds a collective may wait for the other ranks; 0 = forever. */
void dist_set_timeout(long seconds);
/* One line on the real standard error: "attograd CMD: rank R: ...". */
void dist_say(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

typedef enum { DIST_REAL, DIST_DOUBLE } dist_type;

/* The collectives return 0, or -1 when this rank has given up on the
 * others (dist_lost says why): from then on every collective fails at once
 * and the caller goes back to the training loop, which saves. */

/* buf holds every rank's part, rank q's counts[q] elements at displs[q];
 * each rank fills its own part and receives the others'. */
int dist_allgather(void *buf, const int *counts, const int *displs, dist_type type);
/* Rank r sends send[sdispls[q] .. + scounts[q]) to rank q, which receives it at
 * recv[rdispls[r] ..] (counts and displacements in elements). */
int dist_alltoall(const void *send, const int *scounts, const int *sdispls, void *recv, const int *rcounts,
                   const int *rdispls, dist_type type);
/* The exchange of one step's gradients in buckets, overlapped with the
 * backward pass: a bucket is posted as soon as its gradients are final and
 * its slices are in `send`; a thread of its own then runs, bucket by bucket
 * in the order they were posted (the same on every rank), an all-to-all
 * that brings each rank the others' slices of its part of the bucket, the
 * caller's `reduce` (which adds them up into `gather` + gdispls[rank]), and
 * an all-gather of those parts, in place.  Counts and displacements are in
 * ag_real elements, as dist_alltoall's and dist_allgather's. */
typedef struct dist_bucket {
    const void *send;
    const int *scounts, *sdispls;
    void *recv;
    const int *rcounts, *rdispls;
    void *gather;
    const int *gcounts, *gdispls;
} dist_bucket;
typedef void (*dist_reduce_fn)(int bucket, void *user);
/* Before the first post of a step: n buckets.  The main thread calls no
 * other collective until dist_exchange_wait. */
void dist_exchange_start(const dist_bucket *buckets, int n, dist_reduce_fn reduce, void *user);
void dist_exchange_post(int bucket);
/* Once every bucket is posted: until each is gathered (0) or the rank gives
 * up (-1).  The time spent here counts in dist_comm_seconds; what the
 * backward pass hid does not. */
int dist_exchange_wait(void);

/* v[0..n) (n <= 4) become, each, the largest of every rank's; left as they
 * are once the rank has given up. */
void dist_max(long *v, int n);
/* The ranks meet before training, to compare what each was given:
 * v[DIST_AGREE_FIRST..DIST_AGREE_N) become, each, the largest of every
 * rank's (the entries before are dist_exit's, 0 here).  A rank that has
 * reached a verdict alone before training (die() on that rank only: rank
 * 0's is on its stderr; the lowest other rank's, which went to no
 * terminal, is said again on the real one with the rank) meets the others
 * at their next agreement instead of leaving alone, and every rank then
 * leaves with its status, quietly (dist_exit).  last: no agreement
 * follows.  0, or -1 when this rank has given up on the others
 * (dist_lost). */
#define DIST_AGREE_FIRST 2
#define DIST_AGREE_N 8
int dist_agree(long *v, int last);
/* Wall-clock seconds spent in collectives so far (waiting for the other
 * ranks included). */
double dist_comm_seconds(void);
/* Bytes this rank has sent in collectives so far (the payloads; what the
 * MPI library adds is not counted). */
double dist_bytes_sent(void);

/* Exit with status on every rank together, for a verdict every rank
 * reaches (a bad option, --help): in the MPI build the ranks meet on the
 * way out, so that mpirun does not kill the ones still leaving.  Before
 * training a rank meets the others at their next agreement (dist_agree),
 * which takes them all out with it; after it, a rank that waits 10 s alone
 * leaves alone.  The command line's die() ends here (args_exit_hook). */
void dist_exit(int status)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;

/* Why this rank gave up waiting for the others: a collective that did not
 * complete within the timeout, an error MPI returned, the stop flag up half
 * a second while waiting (SIGTERM from mpirun), or the notice of another rank that
 * gave up first. */
typedef enum { DIST_RUNNING, DIST_TIMED_OUT, DIST_FAILED, DIST_STOPPED, DIST_PEER } dist_fault;
dist_fault dist_lost(void);
/* What happened, in words, for the one line the saving rank prints. */
const char *dist_lost_reason(void);
/* A flag a signal handler raises: a collective still waiting half a second
 * after it is up gives up (the handler itself can neither call MPI nor
 * save). */
void dist_watch_stop(volatile sig_atomic_t *flag);
/* After giving up: 1 when no lower-numbered rank has given up too within
 * half a second (after a stop signal: has said it was stopping, or gives
 * up within 50 ms), that is, this rank is the lowest still running on its
 * side of the network, and saves. */
int dist_lowest_alive(void);
/* mpirun kills every rank as soon as one exits non-zero, so a rank that
 * does not save must not leave while the lower rank that saves is still
 * writing: dist_await_saver waits for that rank's word, which
 * dist_saver_done sends to the higher ranks once its save is over
 * (written or not), at most a minute. */
void dist_await_saver(void);
void dist_saver_done(void);
/* The saving rank calls no MPI between dist_saving and dist_saver_done, so
 * the alarm that ends a rank stuck inside MPI after giving up is off while
 * it writes: a checkpoint that takes long to write (a big model, a slow
 * disk, a pipe) is not cut off.  dist_saver_done sets it again. */
void dist_saving(void);

/* The end of a run with exit status `status`.  together: every rank ends
 * with this status (it succeeded, or they stopped together): the ranks
 * wait for each other (rank 0 may still be saving) and leave the run
 * (MPI_Finalize; not after a stop signal, see dist.c).  Otherwise the status
 * is returned at once, and mpirun ends the other ranks.  Returns status. */
int dist_end(int status, int together);

#endif
