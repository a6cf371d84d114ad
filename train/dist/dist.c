/*
 * dist.c - ranks and collectives (see dist.h): Open MPI in the MPI build,
 * one rank otherwise.
 *
 * Faults.  Open MPI's mpirun ends the whole job when one rank dies (kill -9,
 * a crash) or exits with a non-zero status, and names that rank ("mpirun
 * noticed that process rank 1 ... exited on signal 9"); the ranks left get
 * SIGTERM, and SIGKILL a second later (odls_base_sigkill_timeout).  Debian's
 * Open MPI has no fault tolerance beyond that (no ULFM), so nothing here
 * tries to go on without a rank: what it makes sure of is that the steps
 * done are not lost.  Every rank holds the same weights and optimizer state
 * after each step, so any of them can save it; a collective that cannot
 * complete (a rank gone, stuck or cut off; a SIGTERM the ranks do not meet
 * on within half a second; an error) is given up
 * (below), and the lowest-numbered rank still running on its side of the
 * network saves the last completed step.
 */
#include <fcntl.h>
#include <pthread.h>
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

int dist_terminal(FILE *f)
{
    return isatty(fileno(f)) && !getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE");
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

/* Ranks above 0 print nothing of their own on stdout or stderr: stdout
 * goes to /dev/null, stderr to an unlinked temporary file, whence
 * dist_exit takes the line of a verdict this rank reached alone. */
static FILE *kept_stderr;

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
    kept_stderr = tmpfile();
    dup2(null, STDOUT_FILENO);
    dup2(kept_stderr ? fileno(kept_stderr) : null, STDERR_FILENO);
    close(null);
}

/* The last line this rank wrote on its standard error ("attograd train:
 * why"), said on the real one with the rank: its verdict, which no other
 * rank reached and rank 0 did not say. */
static void say_kept_line(void)
{
    char buf[4096];
    fflush(stderr);
    if (!kept_stderr)
        return;
    off_t end = lseek(fileno(kept_stderr), 0, SEEK_END);
    off_t from = end > (off_t)sizeof buf - 1 ? end - (off_t)sizeof buf + 1 : 0;
    ssize_t n = end > 0 ? pread(fileno(kept_stderr), buf, (size_t)(end - from), from) : -1;
    if (n <= 0)
        return;
    buf[n] = 0;
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = 0;
    char *line = strrchr(buf, '\n');
    line = line ? line + 1 : buf;
    char prefix[64];                    /* "attograd train: ", which dist_say writes with the rank */
    int skip = snprintf(prefix, sizeof prefix, "attograd %s: ", command);
    if (skip > 0 && (size_t)skip < sizeof prefix && strncmp(line, prefix, (size_t)skip) == 0)
        line += skip;
    dist_say("%s", line);
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
 * other ranks leaving (or the agreements before training, dist_agree),
 * never a collective of the training. */
static MPI_Comm leaving;
static MPI_Comm faults;
static int notice;                      /* the notice being received (a dist_fault) */
static MPI_Request notice_req = MPI_REQUEST_NULL;
/* The word of a lower rank that has found the stop flag up in a collective
 * (tag STOPPING_TAG): it is alive, and saves if it gives up. */
enum { STOPPING_TAG = 2 };
static int stopping_word;
static MPI_Request stopping_req = MPI_REQUEST_NULL;

/* The notice of a rank that gives up (below) is always being received:
 * MPI_Finalize wants no receive pending. */
static void finalize(void)
{
    if (notice_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&notice_req);
        MPI_Wait(&notice_req, MPI_STATUS_IGNORE);
    }
    if (stopping_req != MPI_REQUEST_NULL) {
        MPI_Cancel(&stopping_req);
        MPI_Wait(&stopping_req, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
}

/* The gradient exchange's two kinds of collectives, each on its own
 * communicator: a bucket's all-gather starts when its all-to-all is in,
 * which differs between ranks, so the two kinds interleave differently on
 * each; on each communicator alone they start in the buckets' order. */
static MPI_Comm exchange_a2a, exchange_gather;
static int exchange_threaded;

static long timeout_seconds;
static int wait_for(MPI_Request *req, int rc, const char *call);

void dist_set_timeout(long seconds) { timeout_seconds = seconds; }

/* The agreements before training (dist_agree), on `leaving`: open until
 * the last has been met. */
static int agree_open = 1;

/* One agreement: v[0..DIST_AGREE_N) become, each, the largest of every
 * rank's; 0, or -1 when the rank gave up. */
static int agree(long *v)
{
    static long in[DIST_AGREE_N], out[DIST_AGREE_N];  /* static: one given up on may still write */
    memcpy(in, v, sizeof in);
    MPI_Request req;
    int rc = MPI_Iallreduce(in, out, DIST_AGREE_N, MPI_LONG, MPI_MAX, leaving, &req);
    if (wait_for(&req, rc, "MPI_Iallreduce") != 0)
        return -1;
    memcpy(v, out, sizeof out);
    return 0;
}

/* die() on every rank (a bad option, a checkpoint that does not fit: the
 * same verdict everywhere, said by rank 0) or --help ends in dist_exit
 * (the command line installs it, cmd_train.c): the ranks leave together, so that each exits with the status, not killed by mpirun,
 * which sends the others SIGTERM as soon as one exits with a non-zero
 * status (and SIGKILL a second later).  Before training, a rank with a
 * verdict of its own (rank 0 alone opens the log and locks the outputs; a
 * host of its own may lack a file) meets the others at their next
 * agreement (dist_agree) with its status, and they leave with it, as
 * together.  After the last agreement, a rank that waits 10 s at the
 * barrier alone had a verdict of its own, and leaves alone. */
void dist_exit(int status)
{
    signal(SIGTERM, SIG_IGN);
    if (agree_open && size > 1) {
        agree_open = 0;
        /* the status, and which rank is the lowest leaving */
        long v[DIST_AGREE_N] = { status + 1, size - rank };
        if (agree(v) != 0)
            exit(status);
        if (rank > 0 && size - v[1] == rank)
            say_kept_line();            /* no lower rank left, rank 0 said nothing: this rank's reason */
    }
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
        finalize();
    exit(status);
}

void dist_start(const char *cmd)
{
    command = cmd;
    /* Open MPI's warnings inside a rank (a peer that hung up, a failed
     * reconnection) wait for mpirun to print them; once mpirun is ending
     * the job they wait forever, and the rank that should save hangs in
     * them.  mpirun itself still names the rank that died. */
    setenv("OMPI_MCA_orte_execute_quiet", "1", 0);
    /* serialized: the gradient exchange's thread calls MPI while the main
     * thread runs backward and calls none (dist_exchange_start) */
    int provided;
    MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    exchange_threaded = provided >= MPI_THREAD_SERIALIZED;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        MPI_Comm_size(node, &local_size);
        MPI_Comm_free(&node);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &leaving);
    MPI_Comm_dup(MPI_COMM_WORLD, &faults);
    MPI_Comm_dup(MPI_COMM_WORLD, &exchange_a2a);
    MPI_Comm_dup(MPI_COMM_WORLD, &exchange_gather);
    MPI_Comm_set_errhandler(exchange_a2a, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(exchange_gather, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(faults, MPI_ERRORS_RETURN);
    MPI_Irecv(&notice, 1, MPI_INT, MPI_ANY_SOURCE, 0, faults, &notice_req);
    MPI_Irecv(&stopping_word, 1, MPI_INT, MPI_ANY_SOURCE, STOPPING_TAG, faults, &stopping_req);
    if (rank > 0) {
        silence();
        ag_set_error_handler(on_engine_error, NULL);
    }
    dist_set_timeout(600);
}

/* ---- waiting, and giving up ------------------------------------------------
 * Every collective is started nonblocking and its request tested in a loop
 * until it completes, until --mpi-timeout seconds pass, until the stop flag
 * the training loop's signal handler sets is up (mpirun turns Ctrl-C into
 * SIGTERM, and sends SIGTERM when a rank or a host is lost), until MPI
 * reports an error, or until another rank says it has given up.  A signal
 * handler itself could neither call MPI nor save: this way control returns
 * to the loop, which saves from normal context.  A rank that gives up leaves
 * the collective pending (MPI has no way to cancel one), tells every other
 * rank on the `faults` communicator, and from then on every collective
 * returns at once, failed.
 *
 * The stop flag is given STOP_GRACE seconds first.  mpirun passes a stop
 * (Ctrl-C, SIGTERM, SIGHUP) to every rank at once as SIGTERM, and each then
 * finishes its step or its group of the evaluation and goes on to the
 * reduction where the ranks agree to stop (train_dist_requests, the
 * evaluation's rounds): a collective that gave up as soon as the flag was up
 * would turn that stop into a fault at the first rank to arrive there, and
 * the run would end as a lost rank's does instead of as one process's.  So
 * a collective waits on while the others are still coming, and gives up once
 * the flag has been up STOP_GRACE seconds since this rank first saw it (a
 * rank gone, or a step or a group longer than that): mpirun sends SIGKILL a
 * second after SIGTERM, and the rest of that second is the saving rank's. */
enum { STOP_GRACE_MS = 500 };
static volatile sig_atomic_t *stop_flag;
static double stop_seen;                /* when a collective first found the stop flag up; 0: not yet */
static dist_fault lost;                 /* why this rank gave up, DIST_RUNNING while it has not */
static int lost_peer = -1, peer_fault;  /* the rank whose notice made it give up, and that rank's reason */
static char lost_why[MPI_MAX_ERROR_STRING + 64];
static int lower_gave_up;               /* a lower rank has given up too */
static int lower_stopping;              /* a lower rank found the stop flag up in a collective */

void dist_watch_stop(volatile sig_atomic_t *flag) { stop_flag = flag; }
dist_fault dist_lost(void) { return lost; }

/* A notice from another rank that it has given up: 1 when one came. */
static int heard_notice(void)
{
    int got = 0;
    MPI_Status st;
    if (notice_req == MPI_REQUEST_NULL || MPI_Test(&notice_req, &got, &st) != MPI_SUCCESS || !got)
        return 0;
    if (st.MPI_SOURCE < rank)
        lower_gave_up = 1;
    if (lost_peer < 0) {
        lost_peer = st.MPI_SOURCE;
        peer_fault = notice;
    }
    MPI_Irecv(&notice, 1, MPI_INT, MPI_ANY_SOURCE, 0, faults, &notice_req);
    return 1;
}

enum { STUCK_SECONDS = 8 };
static char stuck_msg[160];
static int stuck_status;

static void on_stuck(int sig)
{
    (void)sig;
    ssize_t ignored = write(say_fd, stuck_msg, strlen(stuck_msg));
    (void)ignored;
    _exit(stuck_status);
}

static void give_up(dist_fault why, const char *call, int rc)
{
    lost = why;
    if (why == DIST_FAILED) {
        char err[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, err, &len);
        snprintf(lost_why, sizeof lost_why, "%s failed: %s", call, err);
    }
    /* only higher ranks need to hear it (to know a lower one is alive) */
    static int reason;
    reason = why == DIST_PEER ? peer_fault : (int)why;
    for (int q = rank + 1; q < size; q++) {
        MPI_Request req;
        if (MPI_Isend(&reason, 1, MPI_INT, q, 0, faults, &req) == MPI_SUCCESS)
            MPI_Request_free(&req);
    }
    /* From here on Open MPI may hang: its progress engine, reconnecting to
     * a dead rank, waits forever for mpirun to print a warning, and mpirun
     * may be gone.  The alarm ends such a rank; the rank that saves turns
     * it off while it writes (dist_saving), since it calls no MPI then. */
    snprintf(stuck_msg, sizeof stuck_msg, "attograd %s: rank %d: still inside MPI %d s after giving up on the "
             "other ranks; leaving\n", command, rank, STUCK_SECONDS);
    stuck_status = why == DIST_STOPPED && stop_flag ? 128 + (int)*stop_flag : DIST_LOST;
    signal(SIGALRM, on_stuck);
    alarm(STUCK_SECONDS);
}

static const char *fault_words(int why, char *buf, size_t len)
{
    switch (why) {
    case DIST_TIMED_OUT:
        snprintf(buf, len, "the other ranks have not answered for %ld s (--mpi-timeout)", timeout_seconds);
        break;
    case DIST_STOPPED:
        snprintf(buf, len, "stopped by a signal (mpirun sends SIGTERM on Ctrl-C and when a rank or a host is lost)");
        break;
    case DIST_FAILED:
        snprintf(buf, len, "%s", lost == DIST_FAILED ? lost_why : "a collective failed");
        break;
    default:
        snprintf(buf, len, "another rank gave up");
    }
    return buf;
}

const char *dist_lost_reason(void)
{
    static char line[sizeof lost_why + 128];
    char peer[sizeof lost_why];
    if (lost == DIST_PEER)
        snprintf(line, sizeof line, "rank %d gave up: %s", lost_peer, fault_words(peer_fault, peer, sizeof peer));
    else
        fault_words(lost, line, sizeof line);
    return line;
}

/* Word from a lower rank that it is stopping (stop_due): 1 when one came. */
static int heard_stopping(void)
{
    int got = 0;
    if (stopping_req == MPI_REQUEST_NULL || MPI_Test(&stopping_req, &got, MPI_STATUS_IGNORE) != MPI_SUCCESS || !got)
        return 0;
    lower_stopping = 1;                 /* only higher ranks are told */
    MPI_Irecv(&stopping_word, 1, MPI_INT, MPI_ANY_SOURCE, STOPPING_TAG, faults, &stopping_req);
    return 1;
}

/* Half a second for the notices of lower ranks that have given up too:
 * those are alive, and the lowest of them saves.  After a stop signal, the
 * lower ranks that got it too said so as they found it, half a second
 * before giving up (stop_due): their word is here already, and a rank that
 * has none saves at once, 50 ms later, not half a second: mpirun sends
 * SIGKILL a second after SIGTERM, and the save needs what is left of it
 * (when rank 0 is the rank lost, rank 1 waited out all of it).  Rank 0
 * asks nobody (it calls no MPI after giving up). */
int dist_lowest_alive(void)
{
    double deadline = now_seconds() + (lost == DIST_STOPPED ? 0.05 : 0.5);
    while (rank > 0 && !lower_gave_up && !lower_stopping && now_seconds() < deadline) {
        int heard = heard_notice();
        heard |= heard_stopping();
        if (!heard) {
            struct timespec ms = { 0, 1000000 };
            nanosleep(&ms, NULL);
        }
    }
    return !lower_gave_up && !lower_stopping;
}

/* The saver's word travels on `faults` with tag 1 (tag 0: the notices;
 * STOPPING_TAG: a rank stopping). */
enum { SAVER_SECONDS = 60, SAVED_TAG = 1 };

void dist_await_saver(void)
{
    int word, got = 0;
    MPI_Request req;
    if (MPI_Irecv(&word, 1, MPI_INT, MPI_ANY_SOURCE, SAVED_TAG, faults, &req) != MPI_SUCCESS)
        return;
    alarm(SAVER_SECONDS + STUCK_SECONDS);   /* MPI may still hang here (see give_up) */
    double deadline = now_seconds() + SAVER_SECONDS;
    while (!got && now_seconds() < deadline && MPI_Test(&req, &got, MPI_STATUS_IGNORE) == MPI_SUCCESS)
        if (!got) {
            struct timespec ms = { 0, 1000000 };
            nanosleep(&ms, NULL);
        }
}

void dist_saving(void)
{
    if (lost)
        alarm(0);
}

void dist_saver_done(void)
{
    static int word = 1;
    if (lost)
        alarm(STUCK_SECONDS);   /* MPI again, which may hang (see give_up) */
    MPI_Request reqs[64];
    int n = 0;
    for (int q = rank + 1; q < size && n < (int)(sizeof reqs / sizeof reqs[0]); q++)
        if (MPI_Isend(&word, 1, MPI_INT, q, SAVED_TAG, faults, &reqs[n]) == MPI_SUCCESS)
            n++;
    /* delivered before this rank exits, or a second at most: a rank that
     * is gone never takes it */
    double deadline = now_seconds() + 1;
    int all = 0;
    while (!all && now_seconds() < deadline && MPI_Testall(n, reqs, &all, MPI_STATUSES_IGNORE) == MPI_SUCCESS)
        if (!all) {
            struct timespec ms = { 0, 1000000 };
            nanosleep(&ms, NULL);
        }
}

/* Whether the stop flag is up and has been for STOP_GRACE_MS (above).  The
 * one thread that polls at a time (the exchange's, or the main thread's)
 * keeps stop_seen.  The higher ranks are told at once that this rank is
 * stopping, alive (dist_lowest_alive). */
static int stop_due(void)
{
    if (!stop_flag || !*stop_flag)
        return 0;
    double now = now_seconds();
    if (stop_seen == 0) {
        stop_seen = now;
        static int word = 1;
        for (int q = rank + 1; q < size; q++) {
            MPI_Request req;
            if (MPI_Isend(&word, 1, MPI_INT, q, STOPPING_TAG, faults, &req) == MPI_SUCCESS)
                MPI_Request_free(&req);
        }
    }
    return now - stop_seen >= STOP_GRACE_MS / 1e3;
}

/* One look at req: 1 once it has completed, 0 while it has not, -1 when
 * the rank gives up (now or before).  rc is the call's own result. */
static int poll_once(MPI_Request *req, int *rc, const char *call, double deadline)
{
    int done = 0;
    if (lost)
        return -1;
    if (*rc == MPI_SUCCESS)
        *rc = MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (*rc != MPI_SUCCESS)
        give_up(DIST_FAILED, call, *rc);
    else if (done)
        return 1;
    else if (stop_due())
        give_up(DIST_STOPPED, call, *rc);
    else if (heard_notice())
        give_up(DIST_PEER, call, *rc);
    else if (timeout_seconds > 0 && now_seconds() > deadline)
        give_up(DIST_TIMED_OUT, call, *rc);
    return lost ? -1 : 0;
}

/* Until req completes (0), or the rank gives up (-1). */
static int wait_for(MPI_Request *req, int rc, const char *call)
{
    double t0 = now_seconds();
    int r;
    while ((r = poll_once(req, &rc, call, t0 + (double)timeout_seconds)) == 0)
        ;
    comm_seconds += now_seconds() - t0;
    return r == 1 ? 0 : -1;
}

static MPI_Datatype mpi_type(dist_type t)
{
    if (t == DIST_DOUBLE)
        return MPI_DOUBLE;
    return sizeof(ag_real) == sizeof(double) ? MPI_DOUBLE : MPI_FLOAT;
}

static size_t type_size(dist_type t) { return t == DIST_DOUBLE ? sizeof(double) : sizeof(ag_real); }

int dist_allgather(void *buf, const int *counts, const int *displs, dist_type type)
{
    if (size == 1)
        return 0;
    if (lost)
        return -1;
    bytes_sent += (double)counts[rank] * (double)type_size(type) * (size - 1);
    MPI_Request req;
    int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, mpi_type(type),
                             MPI_COMM_WORLD, &req);
    return wait_for(&req, rc, "MPI_Iallgatherv");
}

int dist_alltoall(const void *send, const int *scounts, const int *sdispls, void *recv, const int *rcounts,
                  const int *rdispls, dist_type type)
{
    if (lost)
        return -1;
    for (int q = 0; q < size; q++)
        if (q != rank)
            bytes_sent += (double)scounts[q] * (double)type_size(type);
    MPI_Request req;
    int rc = MPI_Ialltoallv(send, scounts, sdispls, mpi_type(type), recv, rcounts, rdispls, mpi_type(type),
                            MPI_COMM_WORLD, &req);
    return wait_for(&req, rc, "MPI_Ialltoallv");
}

void dist_max(long *v, int n)
{
    /* static: a reduction given up on stays pending, and may still write */
    static long in[4], out[4];
    if (size == 1 || lost || n < 1 || n > 4)
        return;
    memcpy(in, v, (size_t)n * sizeof *v);
    MPI_Request req;
    int rc = MPI_Iallreduce(in, out, n, MPI_LONG, MPI_MAX, MPI_COMM_WORLD, &req);
    if (wait_for(&req, rc, "MPI_Iallreduce") == 0)
        memcpy(v, out, (size_t)n * sizeof *v);
}

int dist_agree(long *v, int last)
{
    if (size == 1)
        return 0;
    if (lost || agree(v) != 0)
        return -1;
    if (last || v[0] > 0)
        agree_open = 0;
    if (v[0] > 0)
        dist_exit((int)v[0] - 1);       /* a rank left, having said why */
    return 0;
}

/* ---- the gradient exchange, overlapped ----------------------------------
 * The main thread posts buckets as backward finishes them and calls no MPI
 * until dist_exchange_wait; the exchange's thread starts each posted
 * bucket's all-to-all, and, as they complete (oldest first), reduces and
 * gathers them, testing its requests every 100 us: Open MPI's TCP transport
 * moves data only inside MPI calls, so someone must keep calling while
 * backward computes.  The thread gives up as wait_for does (timeout, error,
 * stop flag, another rank's notice); a bucket's timeout counts from its
 * collective's start. */
enum { EXCHANGE_MAX = 512 };
static struct {
    const dist_bucket *b;
    int n;
    dist_reduce_fn reduce;
    void *user;
    pthread_t thread;
    int running;                        /* the thread was started */
    pthread_mutex_t lock;
    pthread_cond_t posted_more;
    int queue[EXCHANGE_MAX], posted;    /* buckets in the order posted (under lock) */
    MPI_Request a2a[EXCHANGE_MAX], gather[EXCHANGE_MAX];
    int rc_a2a[EXCHANGE_MAX], rc_gather[EXCHANGE_MAX];
    double t_a2a[EXCHANGE_MAX], t_gather[EXCHANGE_MAX];
} ex = { .lock = PTHREAD_MUTEX_INITIALIZER, .posted_more = PTHREAD_COND_INITIALIZER };

static void *exchange_run(void *unused)
{
    (void)unused;
    if (ex.running) {
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, NULL);     /* the stop signals are the main thread's */
    }
    MPI_Datatype T = mpi_type(DIST_REAL);
    int started = 0, reduced = 0, gathered = 0;
    double timeout = (double)timeout_seconds;
    while (gathered < ex.n && !lost) {
        pthread_mutex_lock(&ex.lock);
        while (ex.running && started == ex.posted && gathered == started)
            pthread_cond_wait(&ex.posted_more, &ex.lock);       /* nothing in flight: wait for a post */
        int posted = ex.posted;
        pthread_mutex_unlock(&ex.lock);
        int moved = 0;
        for (; started < posted; started++, moved = 1) {
            const dist_bucket *b = &ex.b[ex.queue[started]];
            ex.rc_a2a[started] = MPI_Ialltoallv(b->send, b->scounts, b->sdispls, T, b->recv, b->rcounts, b->rdispls,
                                                T, exchange_a2a, &ex.a2a[started]);
            ex.t_a2a[started] = now_seconds();
        }
        if (reduced < started) {
            int r = poll_once(&ex.a2a[reduced], &ex.rc_a2a[reduced], "MPI_Ialltoallv", ex.t_a2a[reduced] + timeout);
            if (r == 1) {
                const dist_bucket *b = &ex.b[ex.queue[reduced]];
                ex.reduce(ex.queue[reduced], ex.user);
                ex.rc_gather[reduced] = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, b->gather, b->gcounts,
                                                        b->gdispls, T, exchange_gather, &ex.gather[reduced]);
                ex.t_gather[reduced] = now_seconds();
                reduced++;
                moved = 1;
            }
        }
        if (gathered < reduced && !lost) {
            int r = poll_once(&ex.gather[gathered], &ex.rc_gather[gathered], "MPI_Iallgatherv",
                              ex.t_gather[gathered] + timeout);
            if (r == 1) {
                gathered++;
                moved = 1;
            }
        }
        if (!moved) {
            struct timespec tick = { 0, 100000 };
            nanosleep(&tick, NULL);
        }
    }
    return NULL;
}

void dist_exchange_start(const dist_bucket *buckets, int n, dist_reduce_fn reduce, void *user)
{
    if (n > EXCHANGE_MAX)
        ag_error("gradient exchange: %d buckets, at most %d", n, EXCHANGE_MAX);
    ex.b = buckets, ex.n = n, ex.reduce = reduce, ex.user = user, ex.posted = 0;
    ex.running = !lost && exchange_threaded;      /* before the thread reads it */
    if (ex.running && pthread_create(&ex.thread, NULL, exchange_run, NULL) != 0)
        ex.running = 0;
}

void dist_exchange_post(int bucket)
{
    const dist_bucket *b = &ex.b[bucket];
    for (int q = 0; q < size; q++)
        if (q != rank)
            bytes_sent += (double)b->scounts[q] * (double)sizeof(ag_real);
    bytes_sent += (double)b->gcounts[rank] * (double)sizeof(ag_real) * (size - 1);
    pthread_mutex_lock(&ex.lock);
    ex.queue[ex.posted++] = bucket;
    pthread_cond_signal(&ex.posted_more);
    pthread_mutex_unlock(&ex.lock);
}

int dist_exchange_wait(void)
{
    double t0 = now_seconds();
    if (ex.running)
        pthread_join(ex.thread, NULL);
    else
        exchange_run(NULL);             /* no thread: the whole exchange now */
    ex.running = 0;
    comm_seconds += now_seconds() - t0;
    return lost ? -1 : 0;
}

/* A rank that has given up leaves without MPI_Finalize, which would wait
 * for the collective it left pending.  So do ranks that stopped together on
 * a signal (status 128 + it), once they have met: the signal came, most
 * likely, from mpirun ending the job (Ctrl-C, SIGTERM), and then MPI_Finalize
 * waits for a daemon that no longer answers until mpirun's SIGKILL, a
 * second after its SIGTERM, ends the rank with that status lost. */
int dist_end(int status, int together)
{
    if (together && !lost) {
        /* a stop the ranks agreed on is no reason to give up here: rank 0
         * may still be saving, and mpirun kills it when another rank exits;
         * nor is --mpi-timeout, for the same reason: the last checkpoint
         * takes as long as it takes (a large model, a slow disk, a pipe
         * read late).  A rank lost meanwhile ends the job through mpirun. */
        stop_flag = NULL;
        timeout_seconds = 0;
        MPI_Request req;
        int rc = MPI_Ibarrier(MPI_COMM_WORLD, &req);
        if (wait_for(&req, rc, "MPI_Ibarrier") == 0 && status < 128)
            finalize();
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
void dist_watch_stop(volatile sig_atomic_t *flag) { (void)flag; }
dist_fault dist_lost(void) { return DIST_RUNNING; }
const char *dist_lost_reason(void) { return ""; }
int dist_lowest_alive(void) { return 1; }
void dist_await_saver(void) {}
void dist_saver_done(void) {}
void dist_saving(void) {}

int dist_allgather(void *buf, const int *counts, const int *displs, dist_type type)
{
    (void)buf, (void)counts, (void)displs, (void)type;
    return 0;
}

int dist_alltoall(const void *send, const int *scounts, const int *sdispls, void *recv, const int *rcounts,
                   const int *rdispls, dist_type type)
{
    size_t unit = type == DIST_DOUBLE ? sizeof(double) : sizeof(ag_real);
    (void)rcounts;
    memcpy((char *)recv + (size_t)rdispls[0] * unit, (const char *)send + (size_t)sdispls[0] * unit,
           (size_t)scounts[0] * unit);
    return 0;
}

/* One rank: the exchange is never needed (a rank's sums are the whole). */
void dist_exchange_start(const dist_bucket *buckets, int n, dist_reduce_fn reduce, void *user)
{
    (void)buckets, (void)n, (void)reduce, (void)user;
}
void dist_exchange_post(int bucket) { (void)bucket; }
int dist_exchange_wait(void) { return 0; }

void dist_max(long *v, int n) { (void)v, (void)n; }
int dist_agree(long *v, int last)
{
    (void)v, (void)last;
    return 0;
}
void dist_exit(int status) { exit(status); }
int dist_end(int status, int together)
{
    (void)together;
    return status;
}

#endif
