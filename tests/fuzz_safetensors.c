/*
 * fuzz_safetensors.c - libFuzzer entry point for the safetensors reader.
 * Any input must either be refused with a one-line message or give a file
 * whose tensors are consistent and tile the input's data buffer exactly, and
 * whose floating-point tensors convert to finite floats (ag_st_to_f32).
 * The same bytes as a file (ag_st_load, which reads the tensors from the
 * file straight into place) must give the same result, or the same message,
 * and so must ag_st_load_placed (a prefix of tensors checked but not kept,
 * some read into the caller's memory), as attograd's commands read them.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -Isrc \
 *       tests/fuzz_safetensors.c src/safetensors.c src/bigbuf.c src/fileio.c -o fuzz_st
 *   mkdir -p corpus && ./fuzz_st corpus tests/corpus/safetensors -max_total_time=120
 */
#define _GNU_SOURCE   /* memfd_create: the input as a file, in memory */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "attograd_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant is a bug in the reader: stop with a crash the fuzzer records. */
#define MUST(cond) do { if (!(cond)) abort(); } while (0)

/* skip: the prefix of the tensors read and checked but not kept (their data
 * NULL), or NULL; placed tensors (ag_st_load_placed) sit in the caller's
 * memory, not on the reader's 64-byte boundaries. */
/* A message is one printable line: no byte below 0x20 but the tab, no DEL. */
static int one_line(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\t') || *s == 0x7F) return 0;
    return 1;
}

static void walk_kept(const ag_st_file *f, const uint8_t *data, size_t size, const char *skip, int placed)
{
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | data[i];
    size_t at = 8 + (size_t)hlen;   /* the data buffer starts here */
    for (int i = 0; i < ag_st_count(f); i++) {
        const ag_st_tensor *t = ag_st_at(f, i);
        MUST(t && t->name && ag_st_get(f, t->name) == t);
        MUST(t->ndim >= 0 && t->ndim <= AG_ST_MAX_DIMS && ag_st_dtype_size(t->dtype) > 0);
        uint64_t elems = 1;
        for (int d = 0; d < t->ndim; d++) {
            MUST(t->shape[d] >= 0);
            elems *= (uint64_t)t->shape[d];
        }
        MUST(elems * ag_st_dtype_size(t->dtype) == t->nbytes);
        MUST(t->nbytes <= size - at);
        if (skip && strncmp(t->name, skip, strlen(skip)) == 0) {
            MUST(t->data == NULL);
            at += t->nbytes;
            continue;
        }
        MUST(placed || (uintptr_t)t->data % 64 == 0);
        MUST(memcmp(t->data, data + at, t->nbytes) == 0);
        at += t->nbytes;
        /* floating-point data converts to finite floats, or (F64 only) is
         * refused as out of float's range in one line */
        size_t n = t->nbytes / ag_st_dtype_size(t->dtype);
        int fp = t->dtype == AG_ST_F32 || t->dtype == AG_ST_F64 || t->dtype == AG_ST_F16 || t->dtype == AG_ST_BF16;
        float *vals = fp ? malloc(n * sizeof *vals + 1) : NULL;
        if (vals) {
            char err[256] = "";
            if (ag_st_to_f32(t, vals, err, sizeof err) == 0)
                for (size_t k = 0; k < n; k++) MUST(isfinite(vals[k]));
            else
                MUST(t->dtype == AG_ST_F64 && strstr(err, "too large for F32") && !strchr(err, '\n'));
            free(vals);
        }
    }
    MUST(at == size);
    for (int i = 0; i < ag_st_meta_count(f); i++) {
        const char *k = ag_st_meta_key(f, i), *v = ag_st_meta(f, k);
        MUST(k && v);
        (void)strlen(v);
    }
}

static void walk(const ag_st_file *f, const uint8_t *data, size_t size)
{
    walk_kept(f, data, size, NULL, 0);
}

/* What ag_st_load_placed's hook gives: every other F32 tensor read into
 * memory of its own, as a model's parameters are. */
typedef struct { void *buf[64]; int n; } places;

static int place_some(void *user, ag_st_file *f, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    places *pl = user;
    MUST(ag_st_place(f, "\x01 no such tensor", pl) == -1);
    for (int i = 0; i < ag_st_count(f); i++) {
        const ag_st_tensor *t = ag_st_at(f, i);
        MUST(t->data == NULL);   /* nothing read yet */
        if (i % 2 || t->dtype != AG_ST_F32 || pl->n == 64) continue;
        void *b = malloc(t->nbytes + 1);
        if (!b) continue;
        pl->buf[pl->n++] = b;
        MUST(ag_st_place(f, t->name, b) == 0);
    }
    return 0;
}

/* The input as a file read by ag_st_load: the same file, or the same
 * message, as ag_st_parse gave (labelled with the same path); and by
 * ag_st_load_placed as attograd's commands read a checkpoint, with a prefix
 * of tensors not kept and some tensors placed: the same verdict too. */
static void as_file(const uint8_t *data, size_t size)
{
    static int fd = -2;
    if (fd == -2) fd = memfd_create("fuzz_st", 0);
    if (fd < 0) return;   /* no memfd here: the parse alone is checked */
    MUST(ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == (ssize_t)size);
    char path[64], err_mem[256] = "", err_file[256] = "";
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ag_st_file *m = ag_st_parse(data, size, path, err_mem, sizeof err_mem);
    ag_st_file *f = ag_st_load(path, err_file, sizeof err_file);
    MUST(!m == !f && strcmp(err_mem, err_file) == 0);
    if (f) walk(f, data, size);
    static const char *const prefixes[] = {NULL, "", "a", "o"};
    const char *skip = prefixes[size % 4];
    char err_placed[256] = "";
    places pl = {{0}, 0};
    ag_st_file *g = ag_st_load_placed(path, skip, place_some, &pl, err_placed, sizeof err_placed);
    MUST(!m == !g && strcmp(err_mem, err_placed) == 0);
    if (g) walk_kept(g, data, size, skip, 1);
    for (int i = 0; i < pl.n; i++) free(pl.buf[i]);
    ag_st_free(m);
    ag_st_free(f);
    ag_st_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    err[0] = '\0';
    ag_st_file *f = ag_st_parse(data, size, "fuzz", err, sizeof err);
    if (f) walk(f, data, size);
    else MUST(strncmp(err, "fuzz: ", 6) == 0 && one_line(err));
    ag_st_free(f);
    as_file(data, size);
    return 0;
}
