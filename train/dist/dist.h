/*
 * dist.h - the ranks of a data-parallel run and the few collectives
 * training needs.  The MPI build (make MPI=1, AG_MPI) runs them on Open MPI;
 * the plain build has one rank, where each collective is a copy or nothing,
 * and refuses to run as one of several processes started by mpirun.
 *
 * Rank 0 alone speaks: the other ranks' standard output and error go to
 * /dev/null (every rank reads the same options and files and reaches the
 * same verdicts, so one voice says them); what only one rank can know (a
 * timeout, a failed collective, an error in the engine) goes to the real
 * standard error, naming the rank.  Every collective is bounded by a
 * timeout: a rank that waits longer for the others says so and exits with
 * DIST_LOST, and mpirun then ends the rest.
 */
#ifndef ATTOGRAD_DIST_H
#define ATTOGRAD_DIST_H

#include <stddef.h>

/* The exit status of a rank that gave up waiting for the others. */
#define DIST_LOST 4

/* Before anything else: join the run (MPI_Init) and learn this process's
 * rank, or, in the plain build started as several processes, say so (rank
 * 0) and exit 2 (every rank).  cmd names the subcommand in messages. */
void dist_start(const char *cmd);
int dist_rank(void);
int dist_size(void);
/* Ranks on this machine (threads per rank default to its cores / this). */
int dist_local_size(void);
/* Whether standard output is a terminal someone watches: under mpirun it
 * is a pseudo-terminal of mpirun's, whatever mpirun's own output is. */
int dist_stdout_terminal(void);
/* Seconds a collective may wait for the other ranks; 0 = forever. */
void dist_set_timeout(long seconds);
/* One line on the real standard error: "attograd CMD: rank R: ...". */
void dist_say(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

typedef enum { DIST_REAL, DIST_DOUBLE } dist_type;

/* buf holds every rank's part, rank q's counts[q] elements at displs[q];
 * each rank fills its own part and receives the others'. */
void dist_allgather(void *buf, const int *counts, const int *displs, dist_type type);
/* Rank r sends send[sdispls[q] .. + scounts[q]) to rank q, which receives it at
 * recv[rdispls[r] ..] (counts and displacements in elements). */
void dist_alltoall(const void *send, const int *scounts, const int *sdispls, void *recv, const int *rcounts,
                   const int *rdispls, dist_type type);
/* The largest of every rank's v. */
long dist_max(long v);
/* Wall-clock seconds spent in collectives so far (waiting for the other
 * ranks included). */
double dist_comm_seconds(void);
/* Bytes this rank has sent in collectives so far (the payloads; what the
 * MPI library adds is not counted). */
double dist_bytes_sent(void);

/* Exit with status on every rank together, for a verdict every rank
 * reaches (a bad option, --help): in the MPI build the ranks meet on the
 * way out, so that mpirun does not kill the ones still leaving; a rank
 * that waits 10 s alone leaves alone.  The command line's die() ends here
 * (args_exit_hook). */
void dist_exit(int status)
#if defined(__GNUC__)
    __attribute__((noreturn))
#endif
    ;

/* The end of a run with exit status `status`.  together: every rank ends
 * with this status (it succeeded, or they stopped together): the ranks
 * wait for each other (rank 0 may still be saving) and leave the run
 * (MPI_Finalize).  Otherwise the status is returned at once, and mpirun
 * ends the other ranks.  Returns status. */
int dist_end(int status, int together);

#endif
