/*
 * attograd_io.h - the files attograd reads and writes, beside the engine of
 * attograd.h: checkpoints in safetensors (a strict reader, a writer), files
 * replaced whole or not at all, and the one-line messages that report a
 * file's problems to the caller instead of ending the program.
 */
#ifndef ATTOGRAD_IO_H
#define ATTOGRAD_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "attograd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- one-line messages ---------------------------------------------------- */

/* A problem reported as text instead of through ag_error (a file that
 * cannot be read, say): printf into err[errlen], made one printable line
 * whatever a path or a file's bytes put in it (a newline or carriage return
 * becomes a space, a tab stays, any other byte below 0x20 and DEL become the
 * four characters \xNN, as the attograd command shows them; bytes from 0x80
 * up are left as they are), then cut to fit, never within an \xNN.  Nothing
 * happens when err is NULL or errlen is 0.  Every function here that takes
 * err and errlen fills them this way. */
void ag_set_err(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

/* The same rule on a message already written: s, NUL-terminated in a
 * buffer of cap bytes, made one printable line in place (ag_error's
 * messages and the attograd command's own lines go through it too). */
void ag_one_line(char *s, size_t cap);

/* ---- files replaced whole or not at all --------------------------------- */

/* ag_atomic_open creates "<target>.tmp.<pid>" in the target's directory
 * (or, when that name exists, say by a process of the same pid on another
 * host of a shared file system, "<target>.tmp.<pid>.<n>": it never
 * truncates a file it did not create),
 * where target is path with its symlinks followed (the link stays, the file
 * it points to is replaced; a dangling link's target is created).  When that
 * name is longer than the directory allows, the target's name is cut short
 * in it.  The new file gets the permissions of the file it replaces, else
 * 0666 less the umask.  Refused: a target that is a directory, a file this
 * process may not write (read-only: replacing it would bypass that), or
 * whose name is too long.  Write to f, then ag_atomic_commit: flush, fsync, close,
 * rename over the target, fsync the directory.  ag_atomic_abort removes the
 * temporary file.  A target that exists and is not a regular file (a
 * device such as /dev/null, a pipe) is opened and written through, never
 * replaced; a pipe that nothing reads is refused at once, and so is a
 * socket (open cannot open one, and it is not replaced).  A path that names
 * one of the process's own descriptors (ag_stream_fd: /dev/stdout,
 * /dev/fd/3, a link to one) is written through that descriptor
 * (ag_stream_open), whatever it holds: a file the shell opened is neither
 * replaced nor truncated, and gets the bytes where the descriptor stands;
 * commit flushes and closes the duplicate, and fails only when a write
 * did.  On any failure
 * the temporary file is removed, the target is left as it was, err gets one
 * line naming the file and the cause, and -1 is returned; 0 on success.
 * The one exception is the last step: when the rename has happened and the
 * directory's fsync fails, the target holds the new file (it may not
 * survive a crash of the machine) and the line says "written, but syncing
 * its directory failed".
 * Either call frees what open allocated; a commit with no write under way
 * (after a commit or an abort) is -1 with a line saying so.  Open sets
 * up a whole and reads nothing of what it held: opening again an a whose
 * write is under way leaves that write's temporary file, stream and memory
 * behind (commit or abort it first).  A NULL a: open and commit return -1
 * saying so, abort does nothing, discard -1. */
typedef struct ag_atomic_file {
    FILE *f;                /* open for writing between open and commit/abort */
    char *path;             /* the target */
    char *tmp;              /* the temporary file beside it */
    volatile int state;     /* for ag_atomic_discard */
} ag_atomic_file;

int ag_atomic_open(ag_atomic_file *a, const char *path, char *err, size_t errlen);
int ag_atomic_commit(ag_atomic_file *a, char *err, size_t errlen);
void ag_atomic_abort(ag_atomic_file *a);
/* A commit's first part: flush, fsync and close (a write through: flush
 * and close), with a commit's failure and message; the commit that follows
 * only renames (and syncs the directory).  For files that are to appear
 * together: ready each, and only when all are, commit each; a failure of
 * any ready is then aborted everywhere, no target changed.  Ready again, or
 * abort after it, as after open. */
int ag_atomic_ready(ag_atomic_file *a, char *err, size_t errlen);
/* For a signal handler that is about to end the process: removes the
 * temporary file of a write not yet committed.  Returns 1 when a write was
 * under way and its target is left as it was, 0 when the new file is
 * already in place, -1 when no write is under way.  Async-signal-safe. */
int ag_atomic_discard(const ag_atomic_file *a);
/* The file ag_atomic_open would write for path: path with the symlinks of
 * its last component followed, a relative link from the link's directory
 * (a dangling link names the file a save creates).  malloc'd; NULL with
 * errno set (ELOOP after 40 links). */
char *ag_write_target(const char *path);
/* The descriptor N when path names one of this process's own: a name in
 * /proc/self/fd (so /dev/fd/N, /proc/<its pid>/fd/N, /proc/thread-self/fd/N)
 * reached directly or through symbolic links (/dev/stdout, /dev/stderr, a
 * link to them); -1 otherwise (NULL too).  N need not be open. */
int ag_stream_fd(const char *path);
/* A stream writing through a duplicate of descriptor fd (close-on-exec):
 * the bytes go where fd stands, as another write to fd would, and fclose
 * leaves fd open.  stdout or stderr, when fd is theirs, is flushed first.
 * NULL with "<label>: descriptor N is not open" (or "is open for reading
 * only") in err; a NULL label is "(stream)". */
FILE *ag_stream_open(int fd, const char *label, char *err, size_t errlen);

/* ---- checkpoint files: safetensors ----------------------------------------
 * Layout: u64 little-endian header length N, N bytes of UTF-8 JSON mapping
 * tensor names to {"dtype","shape","data_offsets":[begin,end)} plus an
 * optional "__metadata__" object of string -> string, then the data buffer.
 * The writer pads the JSON with spaces so that 8 + N is a multiple of 8. */

/* The dtypes attograd reads and writes; their names in the file are
 * "F32", "F64", "I32", "I64", "U64", "U8", "F16" (IEEE half) and "BF16"
 * (bfloat16: a float's upper 16 bits). */
enum { AG_ST_F32, AG_ST_F64, AG_ST_I32, AG_ST_I64, AG_ST_U64, AG_ST_U8, AG_ST_F16, AG_ST_BF16 };

#define AG_ST_MAX_DIMS 8
/* Largest JSON header accepted; real headers are far smaller, and a bound
 * keeps a corrupt length from asking for gigabytes. */
#define AG_ST_MAX_HEADER 100000000ull

typedef struct ag_st_tensor {
    const char *name;      /* UTF-8, NUL-terminated, never contains NUL itself */
    int dtype;             /* AG_ST_* */
    int ndim;              /* 0..8; 0 = scalar (one element) */
    int64_t shape[AG_ST_MAX_DIMS];
    const void *data;      /* little-endian bytes; see alignment note below (NULL: not kept) */
    size_t nbytes;         /* product(shape) * element size */
} ag_st_tensor;

/* A loaded file: its tensors (data copied out of the file) and metadata. */
typedef struct ag_st_file ag_st_file;

/* Bytes per element of a dtype, 0 if dtype is not an AG_ST_* value. */
size_t ag_st_dtype_size(int dtype);
/* The dtype's name in the file ("F32", ...), or "?" if unknown. */
const char *ag_st_dtype_name(int dtype);

/*
 * Write tensors (offsets consecutive, in the given order, no holes) and
 * metadata pairs (meta[2*i] = key, meta[2*i+1] = value, i < nmeta)
 * atomically, through ag_atomic_open and ag_atomic_commit (the bytes go to
 * "<path>.tmp.<pid>" beside path's target, which is flushed, fsync'ed and
 * renamed over it, then the directory is fsync'ed; a device, a pipe or one
 * of the process's own descriptors, /dev/stdout, is written through, as
 * ag_atomic_open says).  Tensors with a zero in their shape (nbytes 0, data may be NULL)
 * are allowed.  Rejected before anything is written: duplicate or empty
 * names, the reserved name "__metadata__", names/keys/values that are not
 * valid UTF-8, an unknown dtype, ndim outside 0..8, negative dims, nbytes
 * not matching the shape, NaN or Inf in floating-point data (the reader refuses
 * those, so such a file could never be loaded back).  On any failure the
 * temp file is removed, an existing file at path is left as it was, err gets
 * one line naming the file and the cause, and -1 is returned; 0 on success.
 */
int ag_st_save(const char *path, const ag_st_tensor *tensors, int n,
               const char *const *meta, int nmeta, char *err, size_t errlen);
/* ag_st_save's checks alone, nothing written: 0, or -1 with the line a
 * save would give (label standing for the path; NULL: "(checkpoint)").  For
 * a program that learns before a long run that its saves would fail (a
 * metadata value that is not UTF-8: a path with other bytes). */
int ag_st_check(const char *label, const ag_st_tensor *tensors, int n, const char *const *meta, int nmeta,
                char *err, size_t errlen);
/* The same checks and bytes to an open stream (e.g. an ag_atomic_file's);
 * label names it in messages.  Nothing is written when a check fails. */
int ag_st_write(FILE *f, const char *label, const ag_st_tensor *tensors, int n,
                const char *const *meta, int nmeta, char *err, size_t errlen);

/*
 * Read the file and validate it completely (see ag_st_parse): the header,
 * then each tensor's bytes straight into its aligned place, so memory holds
 * one copy of the data.  NULL with err filled ("<path>: <problem>", one line)
 * on any problem, including a file that changes size while it is being read,
 * and a path that is no regular file (a directory, a device, a FIFO: refused
 * unread, a FIFO without waiting for a writer).
 */
ag_st_file *ag_st_load(const char *path, char *err, size_t errlen);
/* ag_st_load, validating the same, but the bytes of the tensors whose
 * names begin with prefix (NULL: none) are read and checked without being
 * kept: their data is NULL, and memory holds none of their size.  For a
 * program that will not use part of a file (a checkpoint's optimizer
 * state when only running the model). */
ag_st_file *ag_st_load_except(const char *path, const char *prefix, char *err, size_t errlen);
/* ag_st_load_except, but with the header read and checked and before any
 * tensor's bytes are, hook(user, f, err, errlen) is called: f answers
 * ag_st_count, ag_st_at, ag_st_get and ag_st_meta (every tensor's data is
 * NULL then), and the hook may give a tensor memory of its own with
 * ag_st_place, so that its bytes are read there, not into the file's buffer
 * (a model's parameters, read in place: memory then holds one copy of
 * them).  The hook returns 0 to go on, or -1 to stop with its own one-line
 * message in err (the load then returns NULL).  A placed tensor's data
 * points at the caller's memory afterwards; its bytes are checked as any
 * (NaN, Inf), and on any failure that memory may hold part of them. */
ag_st_file *ag_st_load_placed(const char *path, const char *prefix,
                              int (*hook)(void *user, ag_st_file *f, char *err, size_t errlen), void *user,
                              char *err, size_t errlen);
/* In an ag_st_load_placed hook: read tensor name's bytes (its nbytes of
 * them) into dst instead (a tensor under the load's prefix is still only
 * checked: its data stays NULL, dst untouched).  0, or -1 when no tensor has
 * that name, dst is NULL or no hook of f is running. */
int ag_st_place(ag_st_file *f, const char *name, void *dst);

/*
 * The same validation on bytes already in memory; `label` stands in for the
 * path in messages.  The result does not refer to buf afterwards.  Checks:
 * length field vs. file size and AG_ST_MAX_HEADER, UTF-8, JSON syntax (with
 * the byte offset of the error), top-level object, duplicate tensor names or
 * metadata keys, exactly the fields dtype/shape/data_offsets of the right
 * types, known dtype, 0..8 non-negative integer dims, shape * element size
 * == end - begin without overflow, begin <= end, offsets tiling the data
 * buffer exactly (contiguous from 0, no gap, no overlap, no trailing bytes),
 * string metadata values, and no NaN/Inf in F32/F64/F16/BF16 data.  A
 * PyTorch pickle (torch.save's zip archive or legacy stream), whose first
 * bytes make no sense as a length, is named as such.
 *
 * Alignment: every tensor's data is copied to its own 64-byte aligned spot,
 * so data may be cast to float *, double *, int64_t * ... directly.
 */
ag_st_file *ag_st_parse(const void *buf, size_t len, const char *label,
                        char *err, size_t errlen);

int ag_st_count(const ag_st_file *f);
/* Tensors in file order (sorted by data offset); NULL if i is out of range. */
const ag_st_tensor *ag_st_at(const ag_st_file *f, int i);
/* NULL if there is no tensor called name. */
const ag_st_tensor *ag_st_get(const ag_st_file *f, const char *name);
/* The values of a floating-point tensor (F32, F64, F16, BF16) as float:
 * nbytes / element size of them into out.  F16 and BF16 widen exactly; F64
 * rounds to the nearest float.  -1 with err (one line naming the tensor)
 * for another dtype or an F64 value beyond float's range; 0 on success. */
int ag_st_to_f32(const ag_st_tensor *t, float *out, char *err, size_t errlen);
/* Metadata value for key, NULL if absent. */
const char *ag_st_meta(const ag_st_file *f, const char *key);
int ag_st_meta_count(const ag_st_file *f);
/* Metadata keys in the order they appear in the file; NULL if out of range. */
const char *ag_st_meta_key(const ag_st_file *f, int i);
/* Release the tensors' bytes (every data becomes NULL) and keep the rest:
 * names, dtypes, shapes, metadata.  For a program done with the values that
 * still reads the metadata (a resumed run's options point into it). */
void ag_st_drop_data(ag_st_file *f);
void ag_st_free(ag_st_file *f);

#ifdef __cplusplus
}
#endif
#endif
