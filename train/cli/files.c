/*
 * files.c - the command's rules for the files it reads and writes (see
 * files.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "files.h"

/* A name longer than the system accepts, shown by its start: the message
 * stays short and whole. */
static int too_long(const char *path, char *err, size_t errlen)
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
    if (too_long(path, err, errlen))
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
 * or of its directory and its name when it does not exist yet. */
typedef struct file_id {
    int known, exists;
    dev_t dev;
    ino_t ino;
    const char *name;
} file_id;

static file_id identify(const char *path)
{
    file_id id = { 0, 0, 0, 0, NULL };
    struct stat st;
    if (stat(path, &st) == 0) {
        id = (file_id){ 1, 1, st.st_dev, st.st_ino, NULL };
        return id;
    }
    const char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    if (dir && stat(dir, &st) == 0)
        id = (file_id){ 1, 0, st.st_dev, st.st_ino, slash ? slash + 1 : path };
    free(dir);
    return id;
}

static int same_file(file_id a, file_id b)
{
    return a.known && b.known && a.exists == b.exists && a.dev == b.dev && a.ino == b.ino &&
           (a.exists || strcmp(a.name, b.name) == 0);
}

void check_distinct(const char *cmd, const file_arg *inputs, int n_in, const file_arg *outputs, int n_out)
{
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
}

int output_check(const char *path, char *err, size_t errlen)
{
    ag_atomic_file a;
    if (too_long(path, err, errlen) || ag_atomic_open(&a, path, err, errlen))
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
    int result = -1;
    for (int i = 0; i < N_TRACKED; i++) {
        ag_atomic_file *a = tracked[i];
        int r = a ? ag_atomic_discard(a) : -1;
        if (r > result)
            result = r;
    }
    return result;
}

void on_stop_signals(void (*handler)(int))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
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
