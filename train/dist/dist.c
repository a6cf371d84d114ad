/*
 * dist.c - ranks and collectives (see dist.h): Open MPI in the MPI build,
 * one rank otherwise.
 *
 * Faults.  Open MPI's mpirun ends the whole job when one rank dies (kill -9,
 * a crash) or exits with a non-zero status, and names that rank ("mpirun
 * noticed that process rank 1 ... exited on signal 9"); the ranks left get
 * SIGTERM, and SIGKILL a second later.  Debian's Open MPI has no fault
 * tolerance beyond that (no ULFM), so nothing here tries to go on without a
 * rank.  What mpirun cannot see is a rank that is alive but stuck (stopped,
 * hung in a file system, cut off by the network): the others would wait in
 * a collective forever.  So every collective runs under an alarm of the
 * --mpi-timeout seconds; a rank it fires on says so on its standard error
 * and exits with DIST_LOST, which makes mpirun end the job.  Errors that a
 * collective returns (MPI_ERRORS_RETURN on the communicator) are one line
 * naming the rank and the call, then MPI_Abort.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef AG_MPI
#include <mpi.h>
#endif

#include "attograd.h"
#include "dist.h"
#include "run.h"

static int rank, size = 1, local_size = 1;
static const char *command = "train";
static int say_fd = STDERR_FILENO;      /* the real standard error, also on ranks > 0 */
static double comm_seconds, bytes_sent;

int dist_rank(void) { return rank; }
int dist_size(void) { return size; }
int dist_local_size(void) { return local_size; }
double dist_comm_seconds(void) { return comm_seconds; }
double dist_bytes_sent(void) { return bytes_sent; }

int dist_stdout_terminal(void)
{
    return isatty(STDOUT_FILENO) && !getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE");
}

void dist_say(const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "attograd %s: rank %d: ", command, rank);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    if (len + 1 < sizeof line)
        line[len++] = '\n';
    ssize_t ignored = write(say_fd, line, len);
    (void)ignored;
}

#ifdef AG_MPI

/* Ranks above 0 print nothing of their own on stdout or stderr. */
static void silence(void)
{
    fflush(stdout);
    fflush(stderr);
    int null = open("/dev/null", O_WRONLY);
    if (null < 0)
        return;
    say_fd = dup(STDERR_FILENO);
    if (say_fd < 0)
        say_fd = STDERR_FILENO;
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    close(null);
}

static long timeout_seconds;
static char timeout_msg[256];

static void on_alarm(int sig)
{
    (void)sig;
    ssize_t ignored = write(say_fd, timeout_msg, strlen(timeout_msg));
    (void)ignored;
    _exit(DIST_LOST);
}

void dist_set_timeout(long seconds)
{
    timeout_seconds = seconds;
    snprintf(timeout_msg, sizeof timeout_msg,
             "attograd %s: rank %d: the other ranks have not answered for %ld s (one is stuck or gone; "
             "--mpi-timeout sets the wait); giving up\n", command, rank, seconds);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
}

/* A library error on a rank above 0 (rank 0 keeps the engine's own
 * handler, which prints it): say it with the rank, and exit 2. */
static void on_engine_error(const char *msg, void *user)
{
    (void)user;
    dist_say("%s", msg);
    exit(2);
}

/* A second communicator for leaving: a barrier there can only meet
 * other ranks leaving, never a collective of the training. */
static MPI_Comm leaving;

/* die() on every rank (a bad option, a checkpoint that does not fit: the
 * same verdict everywhere, said by rank 0) or --help ends in dist_exit
 * (the command line installs it, cmd_train.c): the ranks leave together, so that each exits with the status, not killed by mpirun,
 * which sends the others SIGTERM as soon as one exits with a non-zero
 * status (and SIGKILL a second later).  A rank that waits 10 s at the
 * barrier alone had a verdict of its own, and leaves alone. */
void dist_exit(int status)
{
    signal(SIGTERM, SIG_IGN);
    MPI_Request req;
    int done = 0;
    if (MPI_Ibarrier(leaving, &req) == MPI_SUCCESS) {
        double deadline = now_seconds() + 10;
        while (MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done && now_seconds() < deadline) {
            struct timespec ms = { 0, 1000000 };
            nanosleep(&ms, NULL);
        }
    }
    if (done)
        MPI_Finalize();
    exit(status);
}

void dist_start(const char *cmd)
{
    command = cmd;
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &local_size);
        MPI_Comm_free(&node);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &leaving);
    if (rank > 0) {
        silence();
        ag_set_error_handler(on_engine_error, NULL);
    }
    dist_set_timeout(600);
}

static double started;

static void begin(void)
{
    started = now_seconds();
    if (timeout_seconds > 0)
        alarm((unsigned)timeout_seconds);
}

static void end(int rc, const char *call)
{
    if (timeout_seconds > 0)
        alarm(0);
    comm_seconds += now_seconds() - started;
    if (rc != MPI_SUCCESS) {
        char why[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, why, &len);
        dist_say("%s failed: %s", call, why);
        MPI_Abort(MPI_COMM_WORLD, DIST_LOST);
        _exit(DIST_LOST);
    }
}

static MPI_Datatype mpi_type(dist_type t)
{
    if (t == DIST_DOUBLE)
        return MPI_DOUBLE;
    return sizeof(ag_real) == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT;
}

static size_t type_size(dist_type t) { return t == DIST_DOUBLE ? sizeof(double) : sizeof(ag_real); }

void dist_allgather(void *buf, const int *counts, const int *displs, dist_type type)
{
    if (size == 1)
        return;
    bytes_sent += (double)counts[rank] * (double)type_size(type) * (size - 1);
    begin();
    end(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, mpi_type(type), MPI_COMM_WORLD),
        "MPI_Allgatherv");
}

void dist_alltoall(const void *send, const int *scounts, const int *sdispls, void *recv, const int *rcounts,
                   const int *rdispls, dist_type type)
{
    for (int q = 0; q < size; q++)
        if (q != rank)
            bytes_sent += (double)scounts[q] * (double)type_size(type);
    begin();
    end(MPI_Alltoallv(send, scounts, sdispls, mpi_type(type), recv, rcounts, rdispls, mpi_type(type),
                      MPI_COMM_WORLD), "MPI_Alltoallv");
}

static long reduce(long v, MPI_Op op, const char *call)
{
    if (size == 1)
        return v;
    long out = v;
    begin();
    end(MPI_Allreduce(&v, &out, 1, MPI_LONG, op, MPI_COMM_WORLD), call);
    return out;
}

long dist_max(long v) { return reduce(v, MPI_MAX, "MPI_Allreduce"); }

int dist_end(int status, int together)
{
    if (together) {
        begin();
        end(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        MPI_Finalize();
    }
    return status;
}

#else /* one process */

/* Launchers' variables: Open MPI's mpirun, and MPICH's or Slurm's PMI. */
static int env_int(const char *a, const char *b)
{
    const char *s = getenv(a);
    if (!s)
        s = getenv(b);
    return s ? atoi(s) : -1;
}

void dist_start(const char *cmd)
{
    command = cmd;
    int n = env_int("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"), r = env_int("OMPI_COMM_WORLD_RANK", "PMI_RANK");
    if (n <= 1)
        return;
    /* Every rank exits 2, rank 0 after saying why.  mpirun sends the others
     * SIGTERM when the first exits (SIGKILL a second later): ignored here,
     * and ranks above 0 wait half a second, so that rank 0 has spoken. */
    signal(SIGTERM, SIG_IGN);
    if (r > 0) {
        struct timespec half = { 0, 500000000 };
        nanosleep(&half, NULL);
        exit(2);
    }
    fprintf(stderr, "attograd %s: started as one of %d processes (mpirun -np %d), but this attograd was built "
                    "without MPI, so each would train the same model alone: build it with make MPI=1 and run "
                    "build-mpi/attograd\n", cmd, n, n);
    exit(2);
}

void dist_set_timeout(long seconds) { (void)seconds; }

void dist_allgather(void *buf, const int *counts, const int *displs, dist_type type)
{
    (void)buf, (void)counts, (void)displs, (void)type;
}

void dist_alltoall(const void *send, const int *scounts, const int *sdispls, void *recv, const int *rcounts,
                   const int *rdispls, dist_type type)
{
    size_t unit = type == DIST_DOUBLE ? sizeof(double) : sizeof(ag_real);
    (void)rcounts;
    memcpy((char *)recv + (size_t)rdispls[0] * unit, (const char *)send + (size_t)sdispls[0] * unit,
           (size_t)scounts[0] * unit);
}

long dist_max(long v) { return v; }
void dist_exit(int status) { exit(status); }
int dist_end(int status, int together)
{
    (void)together;
    return status;
}

#endif
