/*
 * safetensors.h - checkpoint files in the safetensors format: an atomic
 * writer and a strictly validating reader, independent of any model.
 *
 * Layout: u64 little-endian header length N, N bytes of UTF-8 JSON mapping
 * tensor names to {"dtype","shape","data_offsets":[begin,end)} plus an
 * optional "__metadata__" object of string -> string, then the data buffer.
 * The writer pads the JSON with spaces so that 8 + N is a multiple of 8.
 */
#ifndef ATTOGRAD_SAFETENSORS_H
#define ATTOGRAD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "attograd.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The dtypes attograd reads and writes; their names in the file are
 * "F32", "F64", "I32", "I64", "U64", "U8". */
enum { AG_ST_F32, AG_ST_F64, AG_ST_I32, AG_ST_I64, AG_ST_U64, AG_ST_U8 };

#define AG_ST_MAX_DIMS 8
/* Largest JSON header accepted; real headers are far smaller, and a bound
 * keeps a corrupt length from asking for gigabytes. */
#define AG_ST_MAX_HEADER 100000000ull

typedef struct ag_st_tensor {
    const char *name;      /* UTF-8, NUL-terminated, never contains NUL itself */
    int dtype;             /* AG_ST_* */
    int ndim;              /* 0..8; 0 = scalar (one element) */
    int64_t shape[AG_ST_MAX_DIMS];
    const void *data;      /* little-endian bytes; see alignment note below */
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
 * atomically: the bytes go to "<path>.tmp.<pid>" in the same directory,
 * which is flushed, fsync'ed and renamed over path, then the directory is
 * fsync'ed.  Tensors with a zero in their shape (nbytes 0, data may be NULL)
 * are allowed.  Rejected before anything is written: duplicate or empty
 * names, the reserved name "__metadata__", names/keys/values that are not
 * valid UTF-8, an unknown dtype, ndim outside 0..8, negative dims, nbytes
 * not matching the shape, NaN or Inf in F32/F64 data (the reader refuses
 * those, so such a file could never be loaded back).  On any failure the
 * temp file is removed, an existing file at path is left as it was, err gets
 * one line naming the file and the cause, and -1 is returned; 0 on success.
 */
int ag_st_save(const char *path, const ag_st_tensor *tensors, int n,
               const char *const *meta, int nmeta, char *err, size_t errlen);

/*
 * Read the whole file into memory and validate it completely (see
 * ag_st_parse).  NULL with err filled ("<path>: <problem>", one line) on any
 * problem, including a file that changes size while it is being read.
 */
ag_st_file *ag_st_load(const char *path, char *err, size_t errlen);

/*
 * The same validation on bytes already in memory; `label` stands in for the
 * path in messages.  The result does not refer to buf afterwards.  Checks:
 * length field vs. file size and AG_ST_MAX_HEADER, UTF-8, JSON syntax (with
 * the byte offset of the error), top-level object, duplicate tensor names or
 * metadata keys, exactly the fields dtype/shape/data_offsets of the right
 * types, known dtype, 0..8 non-negative integer dims, shape * element size
 * == end - begin without overflow, begin <= end, offsets tiling the data
 * buffer exactly (contiguous from 0, no gap, no overlap, no trailing bytes),
 * string metadata values, and no NaN/Inf in F32/F64 data.
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
/* Metadata value for key, NULL if absent. */
const char *ag_st_meta(const ag_st_file *f, const char *key);
int ag_st_meta_count(const ag_st_file *f);
/* Metadata keys in the order they appear in the file; NULL if out of range. */
const char *ag_st_meta_key(const ag_st_file *f, int i);
void ag_st_free(ag_st_file *f);

#ifdef __cplusplus
}
#endif

#endif
