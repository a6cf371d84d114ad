/*
 * fileio.c - what reading and writing files share, in the engine and in
 * programs built on it: one-line messages into a caller's buffer
 * (ag_set_err), and files replaced whole or not at all (ag_atomic_*): a
 * temporary file beside the target, fsync, rename over it, fsync of the
 * directory.  A target that exists and is not a regular file (a device,
 * a pipe) is written through instead: renaming over it would replace it;
 * and a name of one of the process's own descriptors (/dev/stdout, /dev/fd/3)
 * is written through that descriptor, where it stands, as cat writes.
 */
#define _XOPEN_SOURCE 700   /* realpath */
#include "attograd_io.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether byte c is shown as \xNN: a control byte other than the newline,
 * carriage return and tab, or DEL. */
static int escaped(unsigned char c)
{
    return (c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7F;
}

/* From the end back, so that each escape (four bytes for one) is written
 * over bytes already read; what does not fit is cut before, never inside,
 * an escape. */
void ag_one_line(char *s, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    if (!s || cap == 0)
        return;
    size_t in = 0, out = 0;
    for (; s[in]; in++) {          /* how much of s fits once escaped */
        size_t w = escaped((unsigned char)s[in]) ? 4 : 1;
        if (out + w > cap - 1)
            break;
        out += w;
    }
    s[out] = '\0';
    while (in > 0) {               /* from the end: out >= in, nothing unread is overwritten */
        unsigned char c = (unsigned char)s[--in];
        if (escaped(c)) {
            out -= 4;
            s[out] = '\\';
            s[out + 1] = 'x';
            s[out + 2] = hex[c >> 4];
            s[out + 3] = hex[c & 15];
        } else {
            s[--out] = c == '\n' || c == '\r' ? ' ' : (char)c;
        }
    }
}

/* Messages are one printable line even when a path, a name or a file's
 * bytes carry a newline or a terminal's escape. */
void ag_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    ag_one_line(err, errlen);
}

/* ---- files replaced atomically ------------------------------------------ */

/* READY: written, synced and closed, not renamed yet (ag_atomic_ready);
 * THROUGH with no stream: written through, flushed and closed. */
enum { CLOSED, WRITING, READY, RENAMING, THROUGH };

/* The directory part of path ("." when it has none); malloc'd. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
}

/* The link's target, read whole; malloc'd, NULL with errno set. */
static char *read_link(const char *path)
{
    for (size_t cap = 256; cap <= ((size_t)1 << 20); cap *= 2) {
        char *buf = malloc(cap);
        if (!buf) { errno = ENOMEM; return NULL; }
        ssize_t n = readlink(path, buf, cap);
        if (n >= 0 && (size_t)n < cap) { buf[n] = '\0'; return buf; }
        free(buf);
        if (n < 0) return NULL;
    }
    errno = ENAMETOOLONG;
    return NULL;
}

/* The name the link cur points to, a relative target taken from the link's
 * directory; malloc'd, NULL with errno set. */
static char *follow(const char *cur)
{
    char *target = read_link(cur);
    if (!target) return NULL;
    const char *slash = strrchr(cur, '/');
    size_t keep = target[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1, tlen = strlen(target);
    char *next = malloc(keep + tlen + 1);
    if (next) {
        memcpy(next, cur, keep);
        memcpy(next + keep, target, tlen + 1);
    } else {
        errno = ENOMEM;
    }
    free(target);
    return next;
}

/* The file a write through path replaces: path with the symlinks of its
 * last component followed.  A path that cannot be inspected is returned as
 * it is, and creating the file then says why.  malloc'd; NULL with errno
 * set. */
char *ag_write_target(const char *path)
{
    if (!path) { errno = EINVAL; return NULL; }
    char *cur = strdup(path);
    for (int hops = 0; cur; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return cur;
        char *next = hops < 40 ? follow(cur) : NULL;
        int saved = hops < 40 ? errno : ELOOP;
        free(cur);
        if (!next) { errno = saved; return NULL; }
        cur = next;
    }
    errno = ENOMEM;
    return NULL;
}

/* ---- the process's own streams ---------------------------------------------
 * /dev/stdout is a link to /proc/self/fd/1, itself a link to whatever the
 * descriptor holds: a file the shell opened with >, a pipe.  Followed to
 * its end, such a name is a file to replace (and the shell's file would be
 * swapped away under it) or to reopen (at its start, not where the shell's
 * descriptor stands).  So the names are recognised on the way, before they
 * are followed, and the descriptor itself is written. */

/* Whether dir is the directory of this process's descriptors: /proc/self/fd
 * (/dev/fd on Linux is a link to it), /proc/thread-self/fd, or /dev/fd
 * where that is a file system of its own.  Compared by real path: the
 * numbers procfs gives its directories are not stable. */
static int own_fd_dir(const char *dir)
{
    static const char *const names[] = { "/proc/self/fd", "/proc/thread-self/fd", "/dev/fd" };
    char *real = realpath(dir, NULL);
    int own = 0;
    for (size_t i = 0; real && !own && i < sizeof names / sizeof names[0]; i++) {
        char *r = realpath(names[i], NULL);
        own = r && strcmp(r, real) == 0;
        free(r);
    }
    free(real);
    return own;
}

/* The descriptor name is in own_fd_dir, or -1.  Its last component is the
 * number as procfs writes it: digits, no leading zero. */
static int fd_named(const char *name)
{
    const char *slash = strrchr(name, '/'), *digits = slash ? slash + 1 : name;
    size_t n = strspn(digits, "0123456789");
    if (n == 0 || n > 9 || digits[n] != '\0' || (n > 1 && digits[0] == '0')) return -1;
    char *dir = dir_of(name);
    int own = dir && own_fd_dir(dir);
    free(dir);
    return own ? atoi(digits) : -1;
}

int ag_stream_fd(const char *path)
{
    char *cur = path ? strdup(path) : NULL;
    int fd = -1;
    for (int hops = 0; cur && hops <= 40; hops++) {
        struct stat st;
        if ((fd = fd_named(cur)) >= 0 || lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) break;
        char *next = follow(cur);
        free(cur);
        cur = next;
    }
    free(cur);
    return fd;
}

FILE *ag_stream_open(int fd, const char *label, char *err, size_t errlen)
{
    if (!label) label = "(stream)";
    int fl = fcntl(fd, F_GETFL);
    if (fl == -1) {
        ag_set_err(err, errlen, "%s: descriptor %d is not open", label, fd);
        return NULL;
    }
    if ((fl & O_ACCMODE) == O_RDONLY) {
        ag_set_err(err, errlen, "%s: descriptor %d is open for reading only", label, fd);
        return NULL;
    }
    /* what the program printed there through stdio goes first */
    if (fd == STDOUT_FILENO) fflush(stdout);
    if (fd == STDERR_FILENO) fflush(stderr);
    /* a duplicate shares the descriptor's position (and O_APPEND): the bytes
     * go on from where it stands, and closing it leaves the descriptor open */
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    FILE *f = copy >= 0 ? fdopen(copy, "wb") : NULL;
    if (!f) {
        ag_set_err(err, errlen, "%s: %s", label, strerror(errno));
        if (copy >= 0) close(copy);
    }
    return f;
}

/* "<target>.tmp.<pid>" beside the target, "<target>.tmp.<pid>.<try>" for
 * the tries after the first (a process of the same pid on another host
 * writing the same file of a shared file system, or a file left by a
 * process that died, holds the first name).  When that is longer than the
 * directory allows a name to be (or than PATH_MAX), the target's file name
 * is cut short in it, on a UTF-8 character boundary.  malloc'd; NULL with
 * errno ENAMETOOLONG when the target's own name is too long for its
 * directory, EISDIR when it has none. */
static char *temp_name(const char *target, int try)
{
    char suffix[48];
    size_t slen = try ? (size_t)snprintf(suffix, sizeof suffix, ".tmp.%ld.%d", (long)getpid(), try)
                      : (size_t)snprintf(suffix, sizeof suffix, ".tmp.%ld", (long)getpid());
    char *dir = dir_of(target);
    if (!dir) { errno = ENOMEM; return NULL; }
    long name_max = pathconf(dir, _PC_NAME_MAX);
    free(dir);
    if (name_max < 64) name_max = 255;
    const char *slash = strrchr(target, '/');
    const char *base = slash ? slash + 1 : target;
    size_t dlen = (size_t)(base - target), blen = strlen(base), keep = blen;
    if (blen == 0) { errno = EISDIR; return NULL; }
    if (blen > (size_t)name_max) { errno = ENAMETOOLONG; return NULL; }
    if (keep + slen > (size_t)name_max) keep = (size_t)name_max - slen;
    if (dlen + keep + slen >= PATH_MAX) keep = dlen + slen + 1 < PATH_MAX ? PATH_MAX - 1 - dlen - slen : 0;
    while (keep > 0 && keep < blen && ((unsigned char)base[keep] & 0xC0) == 0x80) keep--;
    if (keep == 0) { errno = ENAMETOOLONG; return NULL; }
    char *tmp = malloc(dlen + keep + slen + 1);
    if (!tmp) { errno = ENOMEM; return NULL; }
    memcpy(tmp, target, dlen + keep);
    memcpy(tmp + dlen + keep, suffix, slen + 1);
    return tmp;
}

static void release(ag_atomic_file *a)
{
    a->state = CLOSED;
    free(a->tmp);
    free(a->path);
    a->tmp = a->path = NULL;
    a->f = NULL;
}

/* A device, a pipe or a socket is opened as it is, never replaced: /dev/null
 * stays a device.  A pipe that nothing reads fails at once (ENXIO, asked for
 * by O_NONBLOCK) instead of waiting for a reader forever; once open, writes
 * wait for the reader as usual. */
static int open_through(ag_atomic_file *a, const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) {
        int fl = fcntl(fd, F_GETFL);
        if (fl != -1) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    }
    a->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!a->f) {
        int saved = errno;
        if (fd >= 0) close(fd);
        if (saved == ENXIO)
            ag_set_err(err, errlen, "%s: a pipe that nothing reads: start its reader first", path);
        else
            ag_set_err(err, errlen, "%s: %s", path, strerror(saved));
        return -1;
    }
    a->path = strdup(path);
    a->state = THROUGH;
    return 0;
}

int ag_atomic_open(ag_atomic_file *a, const char *path, char *err, size_t errlen)
{
    if (!a) { ag_set_err(err, errlen, "ag_atomic_open: a is NULL"); return -1; }
    memset(a, 0, sizeof *a);
    if (!path || !*path) { ag_set_err(err, errlen, "(no path): empty file name"); return -1; }
    int own = ag_stream_fd(path);
    if (own >= 0) {
        if (!(a->f = ag_stream_open(own, path, err, errlen))) return -1;
        a->path = strdup(path);
        a->state = THROUGH;
        return 0;
    }
    struct stat given;
    int seen = stat(path, &given) == 0;
    if (seen && S_ISSOCK(given.st_mode)) {
        /* open(2) cannot open one (ENXIO), and renaming over it would take
         * its name from the program listening there */
        ag_set_err(err, errlen, "%s: a socket, which is not written as a file", path);
        return -1;
    }
    if (seen && !S_ISREG(given.st_mode) && !S_ISDIR(given.st_mode))
        return open_through(a, path, err, errlen);
    a->path = ag_write_target(path);
    if (!a->path) {
        ag_set_err(err, errlen, "%s: cannot follow the symbolic link: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    int exists = stat(a->path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        ag_set_err(err, errlen, "%s: %s", a->path, strerror(EISDIR));
        release(a);
        return -1;
    }
    /* a file its owner made read-only (chmod a-w) is not replaced behind
     * its back: opening it for writing would be refused, and so is this */
    if (exists && access(a->path, W_OK) != 0 && errno == EACCES) {
        ag_set_err(err, errlen, "%s: %s: the file is read-only", a->path, strerror(EACCES));
        release(a);
        return -1;
    }
    /* O_EXCL: a name someone else holds is never truncated or renamed
     * away from them; the next try's name is used instead */
    int fd = -1;
    for (int try = 0; try < 100; try++) {
        a->tmp = temp_name(a->path, try);
        if (!a->tmp) {
            ag_set_err(err, errlen, "%s: cannot create temp file: %s", a->path, strerror(errno));
            release(a);
            return -1;
        }
        fd = open(a->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) break;
        free(a->tmp);
        a->tmp = NULL;
    }
    /* from here on ag_atomic_discard removes a->tmp: only once the file is
     * ours (a signal between the open and this line leaves it behind,
     * which is better than removing a file of the same name that is not) */
    if (fd >= 0) a->state = WRITING;
    if (!a->tmp) {
        ag_set_err(err, errlen, "%s: cannot create temp file: 100 names beside it are taken (%s)", a->path,
                   strerror(EEXIST));
        release(a);
        return -1;
    }
    /* a file that is replaced keeps its permissions (not set-id bits) */
    if (fd >= 0 && exists) (void)fchmod(fd, st.st_mode & 0777);
    a->f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!a->f) {
        int saved = errno;
        if (fd >= 0) { close(fd); unlink(a->tmp); }
        /* the message names the user's file and the directory the temporary
         * one goes in (it must be writable, not only the file), never the
         * temporary name, which is gone */
        char *dir = dir_of(a->path);
        const char *where = !dir ? "its directory" : strchr(a->path, '/') ? dir : "the current directory";
        ag_set_err(err, errlen, "%s: cannot create temp file in %s: %s", a->path, where, strerror(saved));
        free(dir);
        release(a);
        return -1;
    }
    return 0;
}

/* Makes the rename durable: fsync the directory holding path.  Filesystems
 * that cannot sync directories say EINVAL; that is not a failure. */
static int sync_dir(const char *path)
{
    char *dir = dir_of(path);
    if (!dir) { errno = ENOMEM; return -1; }
    int fd = open(dir, O_RDONLY | O_CLOEXEC);
    free(dir);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    if (rc != 0 && (errno == EINVAL || errno == ENOTSUP)) rc = 0;
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/* Written through: what was written is there; only the write can fail. */
static int ready_through(ag_atomic_file *a, char *err, size_t errlen)
{
    int rc = fflush(a->f) != 0 || ferror(a->f) ? -1 : 0;
    int saved = errno ? errno : EIO;
    if (fclose(a->f) != 0 && !rc) { rc = -1; saved = errno; }
    a->f = NULL;
    if (rc) {
        ag_set_err(err, errlen, "%s: write failed: %s", a->path, strerror(saved));
        release(a);
    }
    return rc;
}

/* After a commit, an abort or a failed open there is no write under way. */
static int under_way(ag_atomic_file *a, const char *fn, char *err, size_t errlen)
{
    if (!a) { ag_set_err(err, errlen, "%s: a is NULL", fn); return 0; }
    if (a->state == CLOSED || (a->state == WRITING && !a->f)) {
        ag_set_err(err, errlen, "%s: no write under way (committed or aborted already, or never opened)",
                   a->path ? a->path : "(no file)");
        return 0;
    }
    return 1;
}

int ag_atomic_ready(ag_atomic_file *a, char *err, size_t errlen)
{
    if (!under_way(a, "ag_atomic_ready", err, errlen)) return -1;
    if (a->state == READY || (a->state == THROUGH && !a->f)) return 0;
    if (a->state == THROUGH) return ready_through(a, err, errlen);
    const char *step = "write failed";
    int rc = fflush(a->f) != 0 || ferror(a->f) ? -1 : 0;
    if (!rc) { step = "fsync failed"; rc = fsync(fileno(a->f)); }
    int saved = errno ? errno : EIO;
    if (fclose(a->f) != 0 && !rc) { rc = -1; saved = errno; step = "close failed"; }
    a->f = NULL;
    if (rc) {
        unlink(a->tmp);
        ag_set_err(err, errlen, "%s: %s: %s", a->path, step, strerror(saved));
        release(a);
        return -1;
    }
    a->state = READY;
    return 0;
}

int ag_atomic_commit(ag_atomic_file *a, char *err, size_t errlen)
{
    /* After a commit, an abort or a failed open there is no stream: fflush
     * would flush every stream of the program and ferror dereference NULL. */
    if (!under_way(a, "ag_atomic_commit", err, errlen)) return -1;
    if (ag_atomic_ready(a, err, errlen)) return -1;
    if (a->state == THROUGH) { release(a); return 0; }
    int rc = 0;
    a->state = RENAMING;
    if (rename(a->tmp, a->path) != 0) {
        rc = -1;
        int saved = errno;
        unlink(a->tmp);
        ag_set_err(err, errlen, "%s: cannot rename temp file over it: %s", a->path, strerror(saved));
    } else if (sync_dir(a->path) != 0) {
        rc = -1;
        ag_set_err(err, errlen, "%s: written, but syncing its directory failed: %s", a->path, strerror(errno));
    }
    release(a);
    return rc;
}

void ag_atomic_abort(ag_atomic_file *a)
{
    if (!a || a->state == CLOSED) return;
    if (a->f) fclose(a->f);
    if (a->tmp) unlink(a->tmp);
    release(a);
}

int ag_atomic_discard(const ag_atomic_file *a)
{
    if (!a) return -1;
    int state = a->state;
    if (state == CLOSED || state == THROUGH) return -1;   /* nothing of ours to remove */
    /* Renaming: a temp file that is gone was renamed into place. */
    return unlink(a->tmp) == 0 || state == WRITING || state == READY;
}
