/*
 * fuzz_meta.c - libFuzzer entry point for a checkpoint's metadata, as
 * `attograd train --resume`, `eval` and `info` read it: the model config,
 * data and vocabulary, step and optim_step (checkpoint.c), the run's
 * recorded settings and dropout (run.c: run_settings_read,
 * run_dropout_read), and the text's identity, text_bytes and text_fnv1a64
 * (text_check_unchanged).
 *
 * The input is a selector byte, then key NUL value NUL ... pairs: the
 * metadata.  The harness writes them with ag_st_write into a safetensors
 * file beside the tensors of the model the metadata seems to describe (its
 * sizes read leniently here and kept small, so that a mutated size still
 * meets tensors of its shape), and with a run's state when the selector
 * says so, then opens it with ckpt_open_hints under the selector's hints.
 * Opened, the config is in range and agrees with the model, a run's
 * optim_step is its step; refused, the message is one line naming the
 * file.  The recorded settings are read from the same file's metadata
 * whether or not the model opens: either refused in one line or each in
 * its range.  The safetensors reader itself is fuzz_safetensors' part.
 *
 *   make build-fuzz/fuzz_meta && ./build-fuzz/fuzz_meta corpus tests/corpus/meta -max_total_time=60
 */
#define _GNU_SOURCE   /* memfd_create: the file, in memory */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checkpoint.h"
#include "run.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant is a bug in the reader: crash so the fuzzer records it. */
#define MUST(cond) do { if (!(cond)) abort(); } while (0)

enum { MAX_PAIRS = 48, MAX_TENSORS = 3 * 64 + 1 };

/* What the selector byte asks for. */
enum {
    SEL_STATE = 1,          /* optimizer moments and generators: a run's checkpoint */
    SEL_FORWARD = 2,        /* hints: forward_only (eval, info) */
    SEL_OPTIONAL = 4,       /* hints: data_optional (info, graph) */
    SEL_HEADS = 8,          /* hints: --heads 2 */
    SEL_TASK = 16,          /* hints: --task copy */
    SEL_TEXT = 32,          /* hints: --text FILE */
    SEL_TIED = 64,          /* out_head.weight left out (a tied PyTorch file) */
    SEL_SAME = 128,         /* text_check_unchanged: the same file as recorded */
};

/* A message is one line: no newline, no carriage return (ag_set_err). */
static int one_line(const char *err) { return !strpbrk(err, "\n\r"); }

/* A file in memory, by path (/proc/self/fd/N), rewritten each time; fd 0
 * (never a memfd's: it is stdin) until it is made. */
typedef struct memfile { int fd; char path[64]; } memfile;

static const char *memfile_put(memfile *m, const char *name, const void *bytes, size_t n)
{
    if (m->fd == 0) {
        m->fd = memfd_create(name, 0);
        snprintf(m->path, sizeof m->path, "/proc/self/fd/%d", m->fd);
    }
    if (m->fd < 0) return NULL;
    MUST(ftruncate(m->fd, 0) == 0 && (n == 0 || pwrite(m->fd, bytes, n, 0) == (ssize_t)n));
    return m->path;
}

/* A value as a small whole number, read leniently (spaces and quotes
 * skipped), clamped to [lo, hi]; dflt when absent or not a number. */
static int lenient_int(const char *v, int lo, int hi, int dflt)
{
    if (!v) return dflt;
    while (*v == ' ' || *v == '"' || *v == '\t' || *v == '\n' || *v == '\r') v++;
    char *end;
    long x = strtol(v, &end, 10);
    if (end == v) return dflt;
    return x < lo ? lo : x > hi ? hi : (int)x;
}

static const char *lookup(const char *const *kv, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (strcmp(kv[2 * i], key) == 0) return kv[2 * i + 1];
    return NULL;
}

/* The model the metadata seems to describe, kept small. */
static model_config config_of(const char *const *kv, int n)
{
    const char *arch = lookup(kv, n, "arch"), *qkv = lookup(kv, n, "qkv_bias");
    model_config c;
    memset(&c, 0, sizeof c);
    c.arch = arch && strstr(arch, "attn-only") ? ARCH_ATTN_ONLY : ARCH_GPT;
    c.vocab_size = lenient_int(lookup(kv, n, "vocab_size"), 1, 256, 12);
    c.n_layer = lenient_int(lookup(kv, n, "n_layer"), 1, 3, 1);
    c.n_head = lenient_int(lookup(kv, n, "n_head"), 1, 8, 1);
    c.d_model = lenient_int(lookup(kv, n, "d_model"), 1, 16, 8);
    c.context = lenient_int(lookup(kv, n, "context_length"), 1, 32, 8);
    c.qkv_bias = qkv && strstr(qkv, "true");
    if (c.d_model % c.n_head)
        c.n_head = 1;                       /* a model can be built; the reader refuses what the metadata says */
    return c;
}

/* The safetensors file of metadata kv and the tensors of model c (zeros),
 * with a run's state when asked; its bytes in *out.  0, or -1 when
 * ag_st_write refuses the metadata (not UTF-8, say): nothing to read. */
static int write_file(const char *const *kv, int n, const model_config *c, int sel, char **out, size_t *len)
{
    model m;
    model_declare(&m, c);
    const ag_params *ps = m.params;
    static ag_st_tensor ts[MAX_TENSORS];
    static char names[MAX_TENSORS][160];
    size_t biggest = 0;
    for (int i = 0; i < ps->count; i++)
        biggest = ps->list[i]->size > biggest ? ps->list[i]->size : biggest;
    float *zeros = calloc(biggest + 1, sizeof *zeros);
    MUST(zeros);
    const char *opt = lookup(kv, n, "optimizer");
    int moments = sel & SEL_STATE ? 1 + (opt && strstr(opt, "adamw") != NULL) : 0;
    int k = 0;
    for (int mo = -1; mo < moments; mo++)
        for (int i = 0; i < ps->count && k < MAX_TENSORS - 1; i++) {
            const ag_tensor *p = ps->list[i];
            if (mo < 0 && (sel & SEL_TIED) && strcmp(p->name, "out_head.weight") == 0)
                continue;
            memset(&ts[k], 0, sizeof ts[k]);
            snprintf(names[k], sizeof names[k], mo < 0 ? "%s" : mo == 0 ? "optim.m.%s" : "optim.v.%s", p->name);
            ts[k].name = names[k];
            ts[k].dtype = AG_ST_F32;
            ts[k].ndim = p->ndim;
            for (int d = 0; d < p->ndim; d++) ts[k].shape[d] = p->shape[d];
            ts[k].data = zeros;
            ts[k].nbytes = p->size * sizeof(float);
            k++;
        }
    static const uint64_t rng[4] = { 7, 3, 11, 5 };
    if (sel & SEL_STATE) {
        memset(&ts[k], 0, sizeof ts[k]);
        ts[k].name = "state.rng";
        ts[k].dtype = AG_ST_U64;
        ts[k].ndim = 1;
        ts[k].shape[0] = 4;
        ts[k].data = rng;
        ts[k].nbytes = sizeof rng;
        k++;
    }
    FILE *f = open_memstream(out, len);
    MUST(f);
    char err[512] = "";
    int rc = ag_st_write(f, "fuzz", ts, k, (const char *const *)kv, n, err, sizeof err);
    MUST(fclose(f) == 0);
    MUST(rc == 0 || (err[0] && one_line(err)));
    free(zeros);
    model_free(&m);
    return rc;
}

/* The recorded settings, the dropout and the text's identity, from the
 * metadata of ck (opened as a checkpoint or only as a safetensors file). */
static void check_settings(const ckpt *ck, const text_data *td, int same)
{
    char err[512] = "";
    run_settings s;
    if (run_settings_read(&s, ck, err, sizeof err) == 0) {
        MUST(s.lr > 0 && s.lr <= RUN_MAX_LR && s.batch >= 1 && s.batch <= RUN_MAX_BATCH);
        MUST(s.steps >= 0 && s.schedule_steps >= 0 && s.warmup >= 0 && s.seed >= 0);
        MUST(s.momentum >= 0 && s.momentum < 1 && s.beta1 >= 0 && s.beta1 < 1 && s.beta2 >= 0 && s.beta2 < 1);
        MUST(s.eps > 0 && s.clip >= 0 && s.min_lr >= 0 && s.weight_decay >= 0);
        MUST(s.schedule && s.order && s.precision);
        MUST(s.micro_batch >= 0 && (!s.text_path || *s.text_path) && (!s.log_path || *s.log_path));
        if (strcmp(s.schedule, "cosine") == 0)
            MUST(s.warmup <= s.schedule_steps && s.min_lr <= s.lr);
        /* each value read back as the flag reads it */
        for (int i = 0; i < RUN_N_RECORDED; i++) {
            const char *v = run_recorded_text(ck, &RUN_RECORDED[i]);
            run_settings again = s;
            MUST(!v || run_setting_set(&again, &RUN_RECORDED[i], v) == 0);
        }
    } else {
        MUST(err[0] && one_line(err) && strstr(err, ck->path));
    }
    double p = -1;
    err[0] = 0;
    if (run_dropout_read(ck, &p, err, sizeof err) == 0)
        MUST(p >= 0 && p <= MODEL_MAX_DROPOUT);
    else
        MUST(err[0] && one_line(err));
    err[0] = 0;
    int rc = text_check_unchanged(ck, td, same, err, sizeof err);
    MUST(rc == 0 || rc == -1 || rc == -2);
    MUST(rc == 0 || (err[0] && one_line(err)));
    const char *bytes = ckpt_meta(ck, "text_bytes"), *hash = ckpt_meta(ck, "text_fnv1a64");
    if (rc == 0 && bytes && hash)
        MUST(strtoull(bytes, NULL, 10) == td->n);
    for (int i = 0; i < ag_st_meta_count(ck->file); i++) {
        const char *key = ag_st_meta_key(ck->file, i);
        MUST(key && ckpt_meta(ck, key) && strlen(ckpt_meta(ck, key)) < (1u << 24));
    }
}

/* The checkpoint opened as the commands open it, under the selector's hints. */
static void check_open(const char *path, int sel, const char *text_path, const text_data *td)
{
    ckpt ck;
    model m;
    ckpt_hints h = { sel & SEL_HEADS ? 2 : 0, sel & SEL_TASK ? "copy" : NULL, sel & SEL_TEXT ? text_path : NULL,
                     (sel & SEL_OPTIONAL) != 0, (sel & SEL_FORWARD) != 0 };
    char err[512] = "";
    if (ckpt_open_hints(&ck, path, &m, &h, err, sizeof err) != 0) {
        MUST(err[0] && one_line(err) && strstr(err, path));
        MUST(ck.file == NULL && m.params == NULL);
        return;
    }
    const model_config *c = &m.cfg;
    MUST(c->arch == ck.cfg.arch && c->vocab_size == ck.cfg.vocab_size && c->n_layer == ck.cfg.n_layer &&
         c->n_head == ck.cfg.n_head && c->d_model == ck.cfg.d_model && c->context == ck.cfg.context &&
         c->qkv_bias == ck.cfg.qkv_bias && c->dropout == ck.cfg.dropout);
    MUST(c->vocab_size >= 1 && c->vocab_size <= MODEL_MAX_VOCAB && c->n_layer >= 1 && c->n_layer <= MODEL_MAX_LAYERS);
    MUST(c->n_head >= 1 && c->d_model % c->n_head == 0 && c->context >= 1 && c->context <= MODEL_MAX_CONTEXT);
    MUST(c->dropout >= 0 && c->dropout < 1 && (c->qkv_bias == 0 || c->qkv_bias == 1));
    MUST(ck.step >= -1 && (ck.data || (sel & SEL_OPTIONAL)));
    MUST(!ck.data || ck.vocab_size == c->vocab_size);
    for (int i = 1; ck.data && strcmp(ck.data, "text") == 0 && i < ck.vocab_size; i++)
        MUST(ck.vocab[i] > ck.vocab[i - 1]);
    MUST(m.params && m.params->data);
    if (ck.has_state) {
        MUST(ck.step >= 0 && ck.optim_step == ck.step);
        MUST(ck.optim_kind == AG_SGD || ck.optim_kind == AG_ADAMW);
        if (!(sel & SEL_FORWARD)) {         /* a resume's optimizer takes the moments and step */
            ag_optim *o = ck.optim_kind == AG_ADAMW ? ag_optim_adamw(m.params, 0.9, 0.999, 1e-8, 0)
                                                    : ag_optim_sgd(m.params, 0.9, 0);
            ag_pcg32 a, b;
            ckpt_load_state(&ck, o, &a, &b);
            MUST(o->step == ck.step && (a.inc & 1) && (b.inc & 1));
            ag_optim_free(o);
        }
    }
    ckpt_drop_tensors(&ck);                 /* as a run keeps it: metadata only */
    check_settings(&ck, td, sel & SEL_SAME);
    model_free(&m);
    ckpt_close(&ck);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static memfile file, text;
    static const char hello[] = "hello, world\n";
    if (size < 1)
        return 0;
    int sel = data[0];
    /* the pairs: each piece up to a NUL, in its own allocation */
    char *pieces[2 * MAX_PAIRS];
    int npieces = 0;
    for (size_t start = 1, i = 1; i <= size && npieces < 2 * MAX_PAIRS; i++) {
        if (i < size && data[i] != 0)
            continue;
        size_t len = i - start;
        pieces[npieces] = malloc(len + 1);
        MUST(pieces[npieces]);
        memcpy(pieces[npieces], data + start, len);
        pieces[npieces++][len] = 0;
        start = i + 1;
    }
    int n = npieces / 2;
    const char *kv[2 * MAX_PAIRS];
    for (int i = 0; i < 2 * n; i++)
        kv[i] = pieces[i];

    model_config c = config_of(kv, n);
    char *bytes = NULL;
    size_t len = 0;
    const char *text_path = memfile_put(&text, "text", hello, sizeof hello - 1);
    text_data td;
    char err[512];
    MUST(text_from_bytes(&td, (const uint8_t *)hello, sizeof hello - 1, err, sizeof err) == 0);
    if (text_path && write_file(kv, n, &c, sel, &bytes, &len) == 0) {
        const char *path = memfile_put(&file, "ckpt", bytes, len);
        if (path) {
            check_open(path, sel, text_path, &td);
            /* the metadata alone, as run_settings_read sees it after any
             * config: the file opened as safetensors, not as a model */
            ckpt meta;
            memset(&meta, 0, sizeof meta);
            meta.path = path;
            meta.step = -1;
            err[0] = 0;
            meta.file = ag_st_load(path, err, sizeof err);
            if (meta.file) {
                check_settings(&meta, &td, sel & SEL_SAME);
                ckpt_close(&meta);
            } else {
                MUST(err[0] && one_line(err));
            }
        }
    }
    free(bytes);
    text_free(&td);
    for (int i = 0; i < npieces; i++)
        free(pieces[i]);
    return 0;
}
