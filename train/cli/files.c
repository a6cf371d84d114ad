/*
 * files.c - the command's rules for the files it reads and writes (see
 * files.h).
 */
#define _XOPEN_SOURCE 700   /* realpath */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "dist.h"
#include "files.h"

int file_name_too_long(const char *path, char *err, size_t errlen)
{
    size_t n = strlen(path);
    if (n < PATH_MAX)
        return 0;
    ag_set_err(err, errlen, "the file name '%.60s...' is %zu bytes, longer than the %d the system accepts", path, n,
               PATH_MAX - 1);
    return -1;
}

int input_check(const char *path, const char *kind, uint64_t limit, char *err, size_t errlen)
{
    struct stat st;
    if (file_name_too_long(path, err, errlen))
        return -1;
    if (stat(path, &st) != 0)
        return 0;
    if (S_ISDIR(st.st_mode))
        ag_set_err(err, errlen, "%s is a directory, not a %s", path, kind);
    else if (!S_ISREG(st.st_mode))
        ag_set_err(err, errlen, "%s is not a regular file (a pipe, device or socket), so not a %s", path, kind);
    else if ((uint64_t)st.st_size > limit)
        ag_set_err(err, errlen, "%s is %lld bytes, more than the %llu GiB a %s may have", path,
                   (long long)st.st_size, (unsigned long long)(limit >> 30), kind);
    else
        return 0;
    return -1;
}

/* What makes two paths the same file: the device and inode of the file,
 * or of its directory and its name when it does not exist yet (the name a
 * write through path creates: a dangling link's target, as
 * ag_write_target follows it, so that --log to a link to the --save file
 * yet to be made is that file). */
typedef struct file_id {
    int known, exists;
    dev_t dev;
    ino_t ino;
    char name[NAME_MAX + 1];
} file_id;

/* The id of a file that exists, from its stat. */
static file_id existing(const struct stat *st)
{
    return (file_id){ .known = 1, .exists = 1, .dev = st->st_dev, .ino = st->st_ino };
}

static file_id identify(const char *path)
{
    file_id id = { 0 };
    struct stat st;
    if (stat(path, &st) == 0)
        return existing(&st);
    char *target = ag_write_target(path);
    const char *to = target ? target : path;
    const char *slash = strrchr(to, '/');
    const char *base = slash ? slash + 1 : to;
    char *dir = slash ? strndup(to, slash == to ? 1 : (size_t)(slash - to)) : strdup(".");
    if (dir && stat(dir, &st) == 0 && strlen(base) < sizeof id.name) {
        id.known = 1;
        id.dev = st.st_dev;
        id.ino = st.st_ino;
        strcpy(id.name, base);
    }
    free(dir);
    free(target);
    return id;
}

static int same_file(file_id a, file_id b)
{
    return a.known && b.known && a.exists == b.exists && a.dev == b.dev && a.ino == b.ino &&
           (a.exists || strcmp(a.name, b.name) == 0);
}

int files_same(const char *a, const char *b)
{
    return same_file(identify(a), identify(b));
}

/* The file an open descriptor writes. */
static file_id identify_fd(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? existing(&st) : (file_id){ 0 };
}

/* ---- the report, away from an output on stdout ----------------------------- */

static FILE *report_to;     /* NULL: stdout */

FILE *report_stream(void)
{
    return report_to ? report_to : stdout;
}

static int report_failed;   /* errno of the report's first write that failed */

const char *path_shown(const char *path, char *buf, size_t len)
{
    snprintf(buf, len, "%s", path ? path : "");
    ag_one_line(buf, len);
    return buf;
}

int report_flush(void)
{
    FILE *out = report_stream();
    errno = 0;
    if (fflush(out) == 0 && !ferror(out))
        return 0;
    if (!report_failed)
        report_failed = errno ? errno : EIO;
    return -1;
}

int report_errno(void)
{
    return report_failed;
}

static void report_away_from(const file_arg *outputs, int n_out)
{
    struct stat st;
    /* /dev/null, a terminal: the report spoils no file there; but not the
     * terminal mpirun gives a rank, which it copies to its own output */
    if (fstat(STDOUT_FILENO, &st) == 0 && S_ISCHR(st.st_mode) && (!isatty(STDOUT_FILENO) || dist_terminal(stdout)))
        return;
    file_id out = identify_fd(STDOUT_FILENO), err = identify_fd(STDERR_FILENO);
    int on_out = 0, on_err = 0;
    for (int i = 0; i < n_out; i++) {
        if (!outputs[i].path)
            continue;
        file_id id = identify(outputs[i].path);
        on_out |= same_file(id, out);
        on_err |= same_file(id, err);
    }
    if (on_out && !report_to) {
        /* stderr into the same file as well (2>&1, or --log /dev/stderr):
         * the report would land in the output there too, unless a person
         * reads it on a terminal */
        fflush(stdout);
        report_to = on_err && !isatty(STDERR_FILENO) ? fopen("/dev/null", "w") : stderr;
        if (!report_to)
            report_to = stderr;
    }
}

/* ---- one run per output -------------------------------------------------- */

/* Two runs writing one file would each replace the other's work and both
 * report success.  So an output that is (or will be) a regular file is
 * claimed for the life of the process by a POSIX record lock (fcntl) on
 * "<file>.lock" beside it.  The kernel drops the lock when the process
 * ends, however it ends, so a lock is never stale: the lock file is removed
 * on the way out, and one left behind by a killed run is just locked again.
 * The lock file names its holder ("attograd PID") for a person who finds
 * it; the refusal takes the holder from the kernel (F_GETLK). */
static char lock_names[4][PATH_MAX + 8];
static volatile int n_locks;

/* The file a write through path replaces, by its real name: path with the
 * links of its last component followed (a dangling link names the file a
 * save creates), then its directory's real path, so every name of one file
 * meets at one lock; malloc'd. */
static char *real_target(const char *path)
{
    char *target = ag_write_target(path);
    char *real = target ? realpath(target, NULL) : NULL;
    if (real || !target) {
        free(target);
        return real;
    }
    /* not there yet: the real directory it will be created in */
    const char *slash = strrchr(target, '/');
    char *dir = slash ? strndup(target, slash == target ? 1 : (size_t)(slash - target)) : strdup(".");
    char *rdir = dir ? realpath(dir, NULL) : NULL;
    free(dir);
    if (!rdir)
        return target;
    const char *base = slash ? slash + 1 : target;
    size_t n = strlen(rdir) + strlen(base) + 2;
    char *joined = malloc(n);
    if (joined)
        snprintf(joined, n, "%s%s%s", rdir, rdir[strlen(rdir) - 1] == '/' ? "" : "/", base);
    free(rdir);
    free(target);
    return joined;
}

static void remove_lock_files(void)
{
    for (int i = 0; i < n_locks; i++)
        unlink(lock_names[i]);
}

/* Exit 2 with one line when another process holds path's lock; otherwise
 * hold it until the process ends.  A directory where no lock file can be
 * made (nor the output, then: saving says why) or a file system without
 * record locks goes unlocked. */
/* The lock file of path into name: 0 when the name does not fit. */
static int lock_name(const char *path, char name[sizeof lock_names[0]])
{
    char *target = real_target(path);
    int fits = target && (size_t)snprintf(name, sizeof lock_names[0], "%s.lock", target) < sizeof lock_names[0];
    free(target);
    return fits;
}

/* The writer's process id when name is base's temporary file as fileio.c
 * names them, "<base>.tmp.<pid>" or "<base>.tmp.<pid>.<try>"; else 0. */
static long temp_of(const char *name, const char *base)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp.", 5) != 0)
        return 0;
    const char *p = name + n + 5;
    long pid = 0;
    for (int part = 0; part < 2; part++) {
        if (*p < '0' || *p > '9')
            return 0;
        for (; *p >= '0' && *p <= '9'; p++)
            if (part == 0 && pid < 100000000)
                pid = pid * 10 + (*p - '0');
        if (*p == '\0')
            return pid;
        if (*p++ != '.')
            return 0;
    }
    return 0;
}

/* With path's lock held, no other run can be replacing path: a temporary
 * file of it whose writer is gone is what a run killed while it saved
 * (SIGKILL, a power cut) left, a checkpoint cut short.  Each is removed,
 * and said.  One whose process is alive stays: another rank's check that
 * the file can be written (made and removed at once), or a rank saving
 * after rank 0 died, which holds no lock.  (A temporary name cut short to
 * fit the directory is not recognised, and stays.) */
static void remove_stale_temps(const char *cmd, const char *lock)
{
    char dir[sizeof lock_names[0]];
    snprintf(dir, sizeof dir, "%s", lock);
    dir[strlen(dir) - 5] = '\0';                 /* the target's real path */
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    const char *base = slash + 1;
    *slash = '\0';
    DIR *d = opendir(slash == dir ? "/" : dir);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const long pid = temp_of(e->d_name, base);
        if (pid <= 0 || pid > INT_MAX || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            fprintf(stderr, "attograd %s: removed %s, a save cut short by a run that was killed\n", cmd, e->d_name);
    }
    closedir(d);
}

static void lock_output(const char *cmd, const char *flag, const char *path)
{
    char name[sizeof lock_names[0]];
    if (!lock_name(path, name) || n_locks == (int)(sizeof lock_names / sizeof lock_names[0]))
        return;
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = open(name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0)
            return;
        struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
        if (fcntl(fd, F_SETLK, &fl) != 0) {
            int locked = errno == EACCES || errno == EAGAIN;
            struct flock who = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
            if (locked && fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK)
                die(cmd, "%s %s is being written by another run (process %ld): wait for it to end or choose "
                         "another file", flag, path, (long)who.l_pid);
            close(fd);
            if (locked)
                continue;                   /* released just now: take it */
            return;
        }
        /* A run that ended between our open and our lock removed the file
         * we hold: a new run would lock another one.  Hold the one named. */
        struct stat held, named;
        if (fstat(fd, &held) != 0 || stat(name, &named) != 0 || held.st_dev != named.st_dev ||
            held.st_ino != named.st_ino) {
            close(fd);
            continue;
        }
        char head[9] = "";
        if (held.st_size > 0 && (pread(fd, head, 9, 0) != 9 || memcmp(head, "attograd ", 9) != 0))
            die(cmd, "%s %s: %s.lock exists and is not attograd's lock file: move it away or choose another "
                     "file", flag, path, path);
        if (ftruncate(fd, 0) == 0)
            dprintf(fd, "attograd %ld\n", (long)getpid());
        memcpy(lock_names[n_locks], name, sizeof name);
        if (n_locks++ == 0)
            atexit(remove_lock_files);
        remove_stale_temps(cmd, name);
        return;                             /* fd stays open: closing it would drop the lock */
    }
}

/* An output that is a pipe is opened now and kept open: one that nothing
 * reads is refused now rather than hanging the run, and a reader started
 * for it does not see the end of the file before anything is written. */
static void hold_pipe(const char *cmd, const char *flag, const char *path)
{
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);     /* open until the process ends */
    if (fd < 0 && errno == ENXIO)
        die(cmd, "%s %s is a pipe that nothing reads: start its reader first", flag, path);
}

/* An output that may be locked: a file (or one to be made), a pipe or a
 * device, not one of the process's own descriptors. */
static int lockable(const char *path)
{
    return path && ag_stream_fd(path) < 0;
}

/* The standard streams the caller closed, held on /dev/null since. */
static int std_closed[3];

void hold_standard_fds(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);     /* the lowest free number: fd */
            std_closed[fd] = 1;
        }
}

void check_stdout_apart(const char *cmd, const file_arg *inputs, int n_in)
{
    struct stat st;
    if (std_closed[STDOUT_FILENO] || fstat(STDOUT_FILENO, &st) != 0 || !S_ISREG(st.st_mode))
        return;
    for (int k = 0; k < n_in; k++)
        if (inputs[k].path && same_file(existing(&st), identify(inputs[k].path)))
            die(cmd, "standard output is the same file as %s %s: what this prints would go into that input; write it "
                     "elsewhere", inputs[k].flag, inputs[k].path);
}

void check_distinct(const char *cmd, const file_arg *inputs, int n_in, const file_arg *outputs, int n_out)
{
    /* a name ending in '/' is a directory's, whether or not one is there
     * (the system's word for it, "Is a directory", is wrong for a name
     * that does not exist yet or is a file's) */
    for (int i = 0; i < n_out; i++) {
        size_t len = outputs[i].path ? strlen(outputs[i].path) : 0;
        struct stat st;
        if (len > 0 && outputs[i].path[len - 1] == '/')
            die(cmd, "%s %s ends in '/', which names a directory: give the name of the file to write", outputs[i].flag,
                outputs[i].path);
        if (len > 0 && stat(outputs[i].path, &st) == 0 && S_ISDIR(st.st_mode))
            die(cmd, "%s %s is a directory: give the name of the file to write", outputs[i].flag, outputs[i].path);
    }
    /* /dev/stdout when the caller closed standard output: the descriptor
     * held in its place is no stream to write through */
    for (int i = 0; i < n_out; i++) {
        int fd = outputs[i].path ? ag_stream_fd(outputs[i].path) : -1;
        if (fd >= 0 && fd <= 2 && std_closed[fd])
            die(cmd, "%s: descriptor %d is not open", outputs[i].path, fd);
    }
    for (int i = 0; i < n_out; i++) {
        if (!outputs[i].path)
            continue;
        file_id out = identify(outputs[i].path);
        for (int k = 0; k < n_in; k++)
            if (inputs[k].path && same_file(out, identify(inputs[k].path)))
                die(cmd, "%s %s is the same file as %s %s: writing it would destroy that input; choose another "
                         "file", outputs[i].flag, outputs[i].path, inputs[k].flag, inputs[k].path);
        for (int k = 0; k < i; k++)
            if (outputs[k].path && same_file(out, identify(outputs[k].path)))
                die(cmd, "%s %s and %s %s are the same file: give each output its own", outputs[k].flag,
                    outputs[k].path, outputs[i].flag, outputs[i].path);
    }
    /* an output named as another's lock file (--save m.st --log m.st.lock)
     * would be that lock, removed when the run ends with what it holds */
    for (int i = 0; i < n_out; i++) {
        char lock[sizeof lock_names[0]];
        if (!lockable(outputs[i].path) || !lock_name(outputs[i].path, lock))
            continue;
        for (int k = 0; k < n_out; k++) {
            char *target = k != i && lockable(outputs[k].path) ? real_target(outputs[k].path) : NULL;
            int clash = target && strcmp(target, lock) == 0;
            free(target);
            if (clash)
                die(cmd, "%s %s is the lock file of %s %s, held while the run writes that and removed when it "
                         "ends: give %s another name", outputs[k].flag, outputs[k].path, outputs[i].flag,
                    outputs[i].path, outputs[k].flag);
        }
    }
    report_away_from(outputs, n_out);
    /* devices and pipes are written through (ag_atomic_open); regular
     * files are replaced, by one run at a time (rank 0 alone writes) */
    for (int i = 0; i < n_out; i++) {
        struct stat st;
        if (!lockable(outputs[i].path))
            continue;
        int exists = stat(outputs[i].path, &st) == 0;
        if (exists && S_ISFIFO(st.st_mode))
            hold_pipe(cmd, outputs[i].flag, outputs[i].path);
        else if ((!exists || S_ISREG(st.st_mode)) && dist_rank() == 0)
            lock_output(cmd, outputs[i].flag, outputs[i].path);
    }
}

int output_through(const char *path)
{
    struct stat st;
    return ag_stream_fd(path) >= 0 || (stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode));
}

int output_check(const char *path, char *err, size_t errlen)
{
    ag_atomic_file a;
    struct stat st;
    /* one of the process's own descriptors is checked whatever it holds (open?
     * for writing?): ag_atomic_open only duplicates it */
    if (ag_stream_fd(path) < 0 && stat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) &&
        !S_ISSOCK(st.st_mode))
        return 0;   /* written through, not replaced (and a pipe opened now would end its reader's input) */
    if (file_name_too_long(path, err, errlen) || ag_atomic_open(&a, path, err, errlen))
        return -1;
    ag_atomic_abort(&a);
    return 0;
}

/* ---- outputs being written when a signal ends the process ---------------- */

static ag_atomic_file *volatile tracked[4];
enum { N_TRACKED = sizeof tracked / sizeof tracked[0] };

void output_track(ag_atomic_file *a)
{
    for (int i = 0; i < N_TRACKED; i++)
        if (!tracked[i]) {
            tracked[i] = a;
            return;
        }
}

int outputs_discard(void)
{
    remove_lock_files();
    int result = -1;
    for (int i = 0; i < N_TRACKED; i++) {
        ag_atomic_file *a = tracked[i];
        int r = a ? ag_atomic_discard(a) : -1;
        if (r > result)
            result = r;
    }
    return result;
}

void on_signal_restarting(int sig, void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

int signal_ignored(int sig)
{
    struct sigaction now;
    return sigaction(sig, NULL, &now) == 0 && now.sa_handler == SIG_IGN;
}

void on_stop_signals(void (*handler)(int))
{
    if (!signal_ignored(SIGINT))
        on_signal_restarting(SIGINT, handler);
    on_signal_restarting(SIGTERM, handler);
    if (!signal_ignored(SIGHUP))
        on_signal_restarting(SIGHUP, handler);
    on_signal_restarting(SIGUSR2, handler);
    on_signal_restarting(SIGALRM, handler);
}

static void discard_and_exit(int sig)
{
    outputs_discard();
    _exit(128 + sig);
}

void outputs_discard_on_signals(void)
{
    on_stop_signals(discard_and_exit);
}
