/*
 * files.h - the command's rules for the files it reads and writes.  An
 * input must be a regular file within a size limit; no output may be an
 * input or another output; an output is created for a moment, exactly as it
 * will be, before any work starts; and an output being written when a
 * signal ends the process leaves no temporary file behind.  Devices and
 * pipes are written through, and one run at a time writes a file.  An
 * output that is standard output gets its bytes alone: the command's report
 * goes to stderr instead.
 */
#ifndef ATTOGRAD_FILES_H
#define ATTOGRAD_FILES_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "attograd_io.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif
/* Room for a message naming two paths the system accepts. */
#define ERR_MAX (3 * PATH_MAX)

/* The largest inputs read: a text file (each byte becomes a 4-byte token)
 * or a CSV log, and a checkpoint (read whole, then copied out). */
#define TEXT_MAX_BYTES ((uint64_t)1 << 30)
#define CKPT_MAX_BYTES ((uint64_t)4 << 30)

/* -1 with err when path is a directory, not a regular file (a pipe, a
 * device), larger than limit bytes, or a name longer than the system
 * accepts; 0 otherwise, also when it cannot be looked at (the reader then
 * says why).  kind names what it should be ("text file", "checkpoint"). */
int input_check(const char *path, const char *kind, uint64_t limit, char *err, size_t errlen);

/* A standard stream the caller closed (`attograd graph ... >&-`) would be
 * the number of the first file the command opens, and what it prints would
 * go into that file (an output's lock file).  Each closed one is held on
 * /dev/null, opened the other way round, so that using it fails as using a
 * closed stream does, and is reported; an output naming it (/dev/stdout)
 * is refused by check_distinct as a descriptor not open.  Called first
 * thing in main. */
void hold_standard_fds(void);

/* A file named by a flag; path NULL when the flag was not given. */
typedef struct file_arg {
    const char *flag, *path;
} file_arg;

/* Exit 2 with one line when an output is the same file as an input or as
 * another output: the same device and inode (symlinks followed), or, for
 * outputs that do not exist yet, the same name in the same directory; when
 * another run is writing it (each output that is a regular file is locked,
 * through "<file>.lock", until the process ends); or when it is a pipe that
 * nothing reads (a pipe is held open until the process ends).  One of the
 * process's own descriptors (ag_stream_fd: /dev/stdout, /dev/fd/3) is
 * written where it stands, by this process alone: neither locked nor held.
 * An output that is the file standard output writes moves the report to
 * stderr (report_stream). */
void check_distinct(const char *cmd, const file_arg *inputs, int n_in, const file_arg *outputs, int n_out);

/* A path as a message shows it, for a line of a report (ag_one_line: a
 * newline a space, another control byte, a terminal's escape, \xNN): a
 * checkpoint's recorded text_path or log_path may hold any of them.  Into
 * buf (SHOWN_MAX bytes hold any path), cut to fit; returns buf. */
#define SHOWN_MAX (4 * PATH_MAX + 1)
const char *path_shown(const char *path, char *buf, size_t len);

/* 1 when a and b name the same file, as check_distinct tells outputs apart. */
int files_same(const char *a, const char *b);

/* Exit 2 with one line when standard output is a regular file that is one
 * of the inputs (`attograd sample --model m.st >>m.st`): what the command
 * prints would go into it, as `cat f >>f` refuses to. */
void check_stdout_apart(const char *cmd, const file_arg *inputs, int n_in);

/* Where a command's report goes (train's configuration, progress, saves and
 * summary; graph's line): stdout, unless an output is the file or pipe
 * stdout writes (--save /dev/stdout | gzip), which then gets its own bytes alone,
 * and the report goes to stderr (or nowhere, when stderr writes into an
 * output too and is not a terminal), as tar -cvf - does. */
FILE *report_stream(void);
/* fflush(report_stream()): 0, or -1 when it or an earlier write failed;
 * report_errno() is then the errno of the first write that failed (a
 * stream's error flag stays, its cause does not). */
int report_flush(void);
int report_errno(void);

/* Create the temporary file that writing path will create, and remove it:
 * -1 with err when it cannot be (no such directory, no permission, a name
 * too long, a directory in the way).  A device or a pipe, written through,
 * passes; so does one of the process's own descriptors open for writing
 * (/dev/stdout), and one that is not is refused, as is a socket. */
int output_check(const char *path, char *err, size_t errlen);

/* 1 when writing path writes into what is there instead of replacing it
 * (ag_atomic_open): one of the process's own descriptors, or an existing
 * file that is not a regular file or a directory (a pipe, a device). */
int output_through(const char *path);

/* While tracked (until the process ends), an open ag_atomic_file's
 * temporary file is removed by outputs_discard: its storage must outlive
 * the process's last signal. */
void output_track(ag_atomic_file *a);
/* For a signal handler that ends the process (async-signal-safe): removes
 * the temporary files of tracked writes and the outputs' lock files.  1 when one was under way and its
 * target is left as it was, 0 when a tracked write had already put its file
 * in place, -1 when no write was under way. */
int outputs_discard(void);
/* -1 with err when path is longer than the system accepts, shown by its
 * start (the message stays short and whole); else 0. */
int file_name_too_long(const char *path, char *err, size_t errlen);
/* handler for signal sig.  A write the signal interrupts (a progress line
 * or a checkpoint into a pipe that is full) goes on after the handler
 * (SA_RESTART): failed with EINTR, it would be taken for a closed stdout,
 * or fail the save the signal asked for. */
void on_signal_restarting(int sig, void (*handler)(int));
/* Whether sig is ignored (SIG_IGN): as the process started, until it sets
 * a handler. */
int signal_ignored(int sig);
/* handler for the signals that ask a process to stop, as above: SIGINT,
 * SIGTERM, SIGHUP (a closed terminal), and SIGUSR2 and SIGALRM, which batch
 * schedulers and `timeout -s` send as a warning before a kill, and whose
 * default action would end the process with nothing saved or cleaned up.
 * SIGQUIT keeps its default (Ctrl-\: leave at once, with a core dump).
 * A SIGHUP ignored when the process started (`nohup`) stays ignored: the
 * run was asked to outlive its terminal.  So does a SIGINT ignored when it
 * started: a shell without job control starts a command run with `&` so,
 * for the Ctrl-C meant for the commands in front to pass it by (kill -INT
 * reaches it through `env --default-signal=INT`; SIGTERM always). */
void on_stop_signals(void (*handler)(int));
/* The stop signals (on_stop_signals) end the process with 128 + the signal
 * after outputs_discard (for commands that write a file and then stop). */
void outputs_discard_on_signals(void);

#endif
