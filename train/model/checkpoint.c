/*
 * checkpoint.c - save and load models and runs (see checkpoint.h).
 *
 * Metadata keys: format, arch, vocab_size, n_layer, n_head, d_model,
 * context_length, qkv_bias, dropout, step, data, vocab; and, in a run's
 * checkpoint, optimizer plus whatever training options the run adds.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "tasks.h"

/* Values are float32 in the file whatever ag_real is. */
static const void *as_f32(const ag_real *src, size_t n, float **tmp)
{
#ifdef AG_DOUBLE
    *tmp = malloc(n * sizeof(float) + 1);
    if (!*tmp)
        ag_error("out of memory saving a checkpoint");
    for (size_t i = 0; i < n; i++)
        (*tmp)[i] = (float)src[i];
    return *tmp;
#else
    (void)n;
    *tmp = NULL;
    return src;
#endif
}

static void from_f32(ag_real *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

static ag_st_tensor st_tensor(const char *name, const ag_tensor *shape_of, const void *data)
{
    ag_st_tensor t;
    memset(&t, 0, sizeof t);
    t.name = name;
    t.dtype = AG_ST_F32;
    t.ndim = shape_of->ndim;
    for (int i = 0; i < shape_of->ndim; i++)
        t.shape[i] = shape_of->shape[i];
    t.data = data;
    t.nbytes = shape_of->size * sizeof(float);
    return t;
}

/* The file's tensors into ts: the weights, then a run's optimizer moments
 * (named in names) and its generators (values in rng).  Values are float32
 * in the file; tmp keeps the converted copies (AG_DOUBLE).  Returns the
 * count. */
static int save_tensors(const model *m, const ckpt_state *state, int per, ag_st_tensor *ts, float **tmp,
                        char (*names)[160], uint64_t rng[4])
{
    const ag_params *ps = m->params;
    int k = 0;
    for (int i = 0; i < ps->count; i++, k++)
        ts[k] = st_tensor(ps->list[i]->name, ps->list[i], as_f32(ps->list[i]->data, ps->list[i]->size, &tmp[k]));
    if (!state)
        return k;
    const ag_optim *o = state->optim;
    for (int moment = 0; moment < per - 1; moment++)
        for (int i = 0; i < ps->count; i++, k++) {
            const ag_tensor *p = ps->list[i];
            const ag_real *buf = (moment == 0 ? o->m : o->v) + (p->data - ps->data);
            snprintf(names[k], sizeof names[k], "optim.%s.%s", moment == 0 ? "m" : "v", p->name);
            ts[k] = st_tensor(names[k], p, as_f32(buf, p->size, &tmp[k]));
        }
    rng[0] = state->data_rng->state;
    rng[1] = state->data_rng->inc;
    rng[2] = state->dropout_rng->state;
    rng[3] = state->dropout_rng->inc;
    memset(&ts[k], 0, sizeof ts[k]);
    ts[k].name = "state.rng";
    ts[k].dtype = AG_ST_U64;
    ts[k].ndim = 1;
    ts[k].shape[0] = 4;
    ts[k].data = rng;
    ts[k].nbytes = 4 * sizeof *rng;
    return k + 1;
}

/* Room for the metadata's values: the vocabulary as a JSON list, numbers. */
typedef struct meta_text {
    char vocab[256 * 4 + 8], num[8][32];
} meta_text;

/* The metadata, key, value, ... into meta (at most 40 pairs); the values
 * are written into text.  Returns the number of pairs. */
static int save_meta(const char **meta, meta_text *text, const model *m, const char *data_name,
                     const uint8_t *vocab, int vocab_size, long step, const ckpt_state *state)
{
    const model_config *c = &m->cfg;
    char (*num)[32] = text->num;
    size_t used = 0, cap = sizeof text->vocab;
    text->vocab[used++] = '[';
    for (int i = 0; i < vocab_size; i++)
        used += (size_t)snprintf(text->vocab + used, cap - used, "%s%d", i ? "," : "", vocab[i]);
    snprintf(text->vocab + used, cap - used, "]");
    snprintf(num[0], sizeof num[0], "%d", c->vocab_size);
    snprintf(num[1], sizeof num[1], "%d", c->n_layer);
    snprintf(num[2], sizeof num[2], "%d", c->n_head);
    snprintf(num[3], sizeof num[3], "%d", c->d_model);
    snprintf(num[4], sizeof num[4], "%d", c->context);
    snprintf(num[5], sizeof num[5], "%.17g", c->dropout);
    snprintf(num[6], sizeof num[6], "%ld", step);
    snprintf(num[7], sizeof num[7], "%ld", state ? state->optim->step : 0L);
    int nm = 0;
#define META(k_, v_) (meta[2 * nm] = (k_), meta[2 * nm + 1] = (v_), nm++)
    META("format", CKPT_FORMAT);
    META("arch", model_arch_name(c->arch));
    META("vocab_size", num[0]);
    META("n_layer", num[1]);
    META("n_head", num[2]);
    META("d_model", num[3]);
    META("context_length", num[4]);
    META("qkv_bias", c->qkv_bias ? "true" : "false");
    META("dropout", num[5]);
    META("step", num[6]);
    META("data", data_name);
    META("vocab", text->vocab);
    if (state) {
        META("optimizer", state->optim->kind == AG_ADAMW ? "adamw" : "sgd");
        META("optim_step", num[7]);
        for (int i = 0; i + 1 < 2 * state->n_options && nm < 40; i += 2)
            META(state->options[i], state->options[i + 1]);
    }
#undef META
    return nm;
}

int ckpt_save(ag_atomic_file *out, const char *path, const model *m, const char *data_name, const uint8_t *vocab,
              int vocab_size, long step, const ckpt_state *state, char *err, size_t errlen)
{
    const ag_params *ps = m->params;
    int per = 1 + (state ? 1 + (state->optim->v != NULL) : 0);
    int n = ps->count * per + (state ? 1 : 0), ret = -1;
    ag_st_tensor *ts = calloc((size_t)n, sizeof *ts);
    float **tmp = calloc((size_t)n, sizeof *tmp);
    char (*names)[160] = calloc((size_t)n, sizeof *names);
    meta_text *text = malloc(sizeof *text);
    uint64_t rng[4];
    const char *meta[2 * 40];
    if (!ts || !tmp || !names || !text) {
        ag_set_err(err, errlen, "%s: out of memory preparing the checkpoint", path);
    } else {
        int k = save_tensors(m, state, per, ts, tmp, names, rng);
        int nm = save_meta(meta, text, m, data_name, vocab, vocab_size, step, state);
        if (ag_atomic_open(out, path, err, errlen) == 0) {
            if (ag_st_write(out->f, path, ts, k, meta, nm, err, errlen) == 0)
                ret = ag_atomic_commit(out, err, errlen);
            else
                ag_atomic_abort(out);
        }
    }
    for (int i = 0; tmp && i < n; i++)
        free(tmp[i]);
    free(tmp);
    free(ts);
    free(names);
    free(text);
    return ret;
}

/* ---- loading ------------------------------------------------------------- */

/* Metadata values are strings that hold JSON: "2", "0.1", "true",
 * "[10, 32, 33]", as attograd writes them or as Python's json.dumps does
 * (with spaces).  Words (arch, data, format, optimizer) may be bare, as
 * attograd writes them, or JSON strings ("\"gpt\""). */

static const char *skip_ws(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    return s;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static const char *skip_digits(const char *s)
{
    while (is_digit(*s))
        s++;
    return s;
}

/* A JSON number at s: its value and the first byte after it, or NULL. */
static const char *json_number(const char *s, double *v)
{
    const char *p = s + (*s == '-');
    if (!is_digit(*p))
        return NULL;
    p = *p == '0' ? p + 1 : skip_digits(p);
    if (*p == '.') {
        if (!is_digit(p[1]))
            return NULL;
        p = skip_digits(p + 1);
    }
    if (*p == 'e' || *p == 'E') {
        p += 1 + (p[1] == '+' || p[1] == '-');
        if (!is_digit(*p))
            return NULL;
        p = skip_digits(p);
    }
    /* strtod on a copy of the number alone (it would read on: "0x10" as
     * 16); a number of any length is one ("1.000...0", 80 digits of 9) */
    char tok[64];
    size_t len = (size_t)(p - s);
    char *copy = len < sizeof tok ? tok : malloc(len + 1);
    if (!copy)
        return NULL;
    memcpy(copy, s, len);
    copy[len] = 0;
    *v = strtod(copy, NULL);
    if (copy != tok)
        free(copy);
    return p;
}

/* The whole value is one JSON number (white space around it allowed). */
static int json_value_number(const char *s, double *v)
{
    const char *end = json_number(skip_ws(s), v);
    return end && !*skip_ws(end) ? 0 : -1;
}

/* A word: the value without surrounding white space or JSON quotes, copied
 * into buf (cut to fit); NULL when the key is absent. */
static const char *meta_word(const ag_st_file *f, const char *key, char *buf, size_t len)
{
    const char *v = ag_st_meta(f, key);
    if (!v)
        return NULL;
    v = skip_ws(v);
    size_t n = strlen(v);
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\n' || v[n - 1] == '\r'))
        n--;
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"' && !memchr(v + 1, '"', n - 2) && !memchr(v + 1, '\\', n - 2)) {
        v++;
        n -= 2;
    }
    snprintf(buf, len, "%.*s", (int)n, v);
    return buf;
}

/* An integer setting: 1 when the key is absent, 0 with *out set, or -1 with
 * a message. */
/* The largest step count a file may give: 2^62 where long has 64 bits (2^30
 * where it has 32, as in WebAssembly), so step + 1 cannot overflow. */
#define STEP_MAX (LONG_MAX / 2 + 1)

static int meta_int(const ag_st_file *f, const char *key, long lo, long hi, long *out, const char *path,
                    char *err, size_t errlen)
{
    const char *v = ag_st_meta(f, key);
    double x;
    if (!v)
        return 1;
    if (json_value_number(v, &x) || x != floor(x)) {
        ag_set_err(err, errlen, "%s: metadata %s = '%.40s%s' is not an integer", path, key, v, meta_more(v));
        return -1;
    }
    if (!(x >= (double)lo && x <= (double)hi)) {
        v = skip_ws(v);
        ag_set_err(err, errlen, "%s: metadata %s = %.40s%s is out of range [%ld, %ld]", path, key, v,
                   meta_more(v), lo, hi);
        return -1;
    }
    *out = (long)x;
    return 0;
}

/* "[10, 32, 33]": a JSON list of distinct byte values, token id -> byte;
 * strictly increasing when `increasing` (a text's vocabulary is its sorted
 * distinct bytes; a task's is in its own order: add's is 0-9, '+', '=').
 * 0, or -1 with the reason in why. */
static int parse_vocab(const char *s, int increasing, uint8_t *vocab, int *n, char *why, size_t whylen)
{
    unsigned char seen[256] = { 0 };
    *n = 0;
    s = skip_ws(s);
    if (*s++ != '[') {
        snprintf(why, whylen, "is not a JSON list of byte values, e.g. \"[10, 32, 33]\"");
        return -1;
    }
    s = skip_ws(s);
    for (int first = 1; *s != ']' || !first; first = 0) {
        double x;
        const char *end = json_number(s, &x);
        if (!end || x != floor(x) || x < 0 || x > 255) {
            snprintf(why, whylen, "entry %d is not a byte value 0..255", *n);
            return -1;
        }
        if (increasing && *n > 0 && x <= vocab[*n - 1]) {
            snprintf(why, whylen, "entry %d (%.0f) is not above the one before (%d): a text's list must increase",
                     *n, x, vocab[*n - 1]);
            return -1;
        }
        if (seen[(int)x]++) {
            snprintf(why, whylen, "entry %d (%.0f) repeats an earlier entry", *n, x);
            return -1;
        }
        vocab[(*n)++] = (uint8_t)x;
        s = skip_ws(end);
        if (*s == ']')
            break;
        if (*s++ != ',') {
            snprintf(why, whylen, "expected ',' or ']' after entry %d", *n - 1);
            return -1;
        }
        s = skip_ws(s);
    }
    if (*skip_ws(s + 1)) {
        snprintf(why, whylen, "has bytes after the closing ']'");
        return -1;
    }
    return 0;
}

/* Where a tensor name is not in the file but one ending in ".name" is (a
 * state_dict of a model wrapped by DistributedDataParallel, "module.", or
 * by torch.compile, "_orig_mod."): what to add to the message, else "".
 * The optimizer's moments of a run's file ("optim.m.name") are no such
 * name. */
static void prefix_hint(const ag_st_file *f, const char *name, char *hint, size_t len)
{
    size_t n = strlen(name);
    hint[0] = '\0';
    for (int i = 0; i < ag_st_count(f); i++) {
        const char *s = ag_st_at(f, i)->name;
        size_t k = strlen(s);
        if (k > n + 1 && s[k - n - 1] == '.' && strcmp(s + k - n, name) == 0 && strncmp(s, "optim.", 6) != 0) {
            snprintf(hint, len, " (the file has '%.80s': its names begin with '%.*s', which attograd's do not)", s,
                     (int)(k - n > 40 ? 40 : k - n), s);
            return;
        }
    }
}

/* Weights may be stored in any floating-point dtype (converted on load); the
 * optimizer's moments only ever come from attograd, in F32. */
static int check_tensor(const ag_st_file *f, const char *name, const ag_tensor *like, int any_float,
                        const char *path, char *err, size_t errlen)
{
    const ag_st_tensor *t = ag_st_get(f, name);
    if (!t) {
        char hint[200];
        prefix_hint(f, name, hint, sizeof hint);
        ag_set_err(err, errlen, "%s: tensor '%s' is missing%s", path, name, hint);
        return -1;
    }
    int d = t->dtype;
    if (any_float ? d != AG_ST_F32 && d != AG_ST_F64 && d != AG_ST_F16 && d != AG_ST_BF16 : d != AG_ST_F32) {
        ag_set_err(err, errlen, "%s: tensor '%s' has dtype %s, expected %s", path, name, ag_st_dtype_name(t->dtype),
                 any_float ? "a floating-point type (F32, F64, F16 or BF16)" : "F32");
        return -1;
    }
    int same = t->ndim == like->ndim;
    for (int i = 0; same && i < like->ndim; i++)
        same = t->shape[i] == like->shape[i];
    if (!same) {
        char want[64], got[96] = "[";
        size_t u = 1;
        for (int i = 0; i < t->ndim; i++)
            u += (size_t)snprintf(got + u, sizeof got - u, "%s%lld", i ? "," : "", (long long)t->shape[i]);
        snprintf(got + u, sizeof got - u, "]");
        ag_set_err(err, errlen, "%s: tensor '%s' has shape %s, the config needs %s", path, name, got,
                 ag_shape_str(like, want, sizeof want));
        return -1;
    }
    return 0;
}

/* A tensor's values into a parameter of n values, converted to ag_real. */
static int load_values(ag_real *dst, const ag_st_tensor *t, size_t n, char *err, size_t errlen)
{
#ifdef AG_DOUBLE
    float *tmp = malloc(n * sizeof *tmp + 1);
    if (!tmp) {
        ag_set_err(err, errlen, "out of memory");
        return -1;
    }
    int rc = ag_st_to_f32(t, tmp, err, errlen);
    from_f32(dst, tmp, rc ? 0 : n);
    free(tmp);
    return rc;
#else
    (void)n;
    return ag_st_to_f32(t, dst, err, errlen);
#endif
}

/* A model size the metadata does not give, from a tensor's shape. */
static int dim_of(const ag_st_file *f, const char *key, const char *tensor, int axis, long lo, long hi, long *out,
                  const char *path, char *err, size_t errlen)
{
    const ag_st_tensor *t = ag_st_get(f, tensor);
    if (!t || t->ndim != 2) {
        char hint[200];
        prefix_hint(f, tensor, hint, sizeof hint);
        ag_set_err(err, errlen, "%s: no metadata %s and no 2-D tensor '%s' to take it from%s", path, key, tensor,
                   t ? "" : hint);
        return -1;
    }
    if (t->shape[axis] < lo || t->shape[axis] > hi) {
        ag_set_err(err, errlen, "%s: tensor '%s' gives %s = %lld, out of range [%ld, %ld]", path, tensor, key,
                 (long long)t->shape[axis], lo, hi);
        return -1;
    }
    *out = (long)t->shape[axis];
    return 0;
}


/* A checkpoint being read: what is known so far, and where a message goes. */
typedef struct reading {
    ckpt *c;
    model *m;                   /* the model being read */
    ag_st_file *f;
    const char *path;
    const ckpt_hints *h;
    const char *emb;            /* the name the token embedding is stored under */
    const char *absent;         /* the tied weight the file stores once under emb, or NULL */
    task t;                     /* the task, when the data is one */
    int is_text;
    char missing[400];          /* what the file does not say, for one message */
    int needs;                  /* the same as CKPT_HEADS | CKPT_DATA | CKPT_VOCAB */
    char *err;
    size_t errlen;
} reading;

/* What neither the file nor the hints say: the bit for the caller, and
 * what is missing for the message. */
static void add_missing(reading *r, int need, const char *what)
{
    size_t used = strlen(r->missing);
    snprintf(r->missing + used, sizeof r->missing - used, "%s%s", used ? "; nor " : "", what);
    r->needs |= need;
}

/* The message, and -1: one line, as ag_set_err makes it (a newline or a
 * carriage return in a value or name the file holds is a space). */
static int say(reading *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static int say(reading *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, r->errlen, fmt, ap);
    va_end(ap);
    for (char *c = r->err; r->errlen && *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    return -1;
}

#define FAIL(...) return say(r, __VA_ARGS__)

/* n_layer from the blocks present: blocks.0 ... blocks.{v-1}. */
static int count_layers(reading *r, long hi, long *v)
{
    char name[64];
    do
        snprintf(name, sizeof name, "blocks.%ld.attn.W_query.weight", *v);
    while (ag_st_get(r->f, name) && ++*v <= hi);
    if (*v < 1 || *v > hi) {
        char hint[200] = "";
        if (*v < 1)
            prefix_hint(r->f, "blocks.0.attn.W_query.weight", hint, sizeof hint);
        FAIL("%s: no metadata n_layer, and %s tensors 'blocks.N.attn.W_query.weight'%s", r->path,
             *v < 1 ? "no" : "too many", hint);
    }
    return 0;
}

/* The model's sizes: each from the metadata, or else from a tensor's shape
 * (n_head from the hints). */
static int read_sizes(reading *r)
{
    model_config *cfg = &r->c->cfg;
    struct { const char *key; long lo, hi; const char *tensor; int axis; int *dst; } dims[] = {
        { "vocab_size", 1, MODEL_MAX_VOCAB, r->emb, 0, &cfg->vocab_size },
        { "n_layer", 1, MODEL_MAX_LAYERS, NULL, 0, &cfg->n_layer },
        { "n_head", 1, MODEL_MAX_HEADS, NULL, 0, &cfg->n_head },
        { "d_model", 1, MODEL_MAX_D_MODEL, r->emb, 1, &cfg->d_model },
        { "context_length", 1, MODEL_MAX_CONTEXT, "pos_emb.weight", 0, &cfg->context },
    };
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        long v = 0;
        int rc = meta_int(r->f, dims[i].key, dims[i].lo, dims[i].hi, &v, r->path, r->err, r->errlen);
        if (rc < 0)
            return -1;
        if (rc == 1 && dims[i].tensor && dim_of(r->f, dims[i].key, dims[i].tensor, dims[i].axis, dims[i].lo,
                                                dims[i].hi, &v, r->path, r->err, r->errlen))
            return -1;
        if (rc == 1 && strcmp(dims[i].key, "n_layer") == 0 && count_layers(r, dims[i].hi, &v))
            return -1;
        if (rc == 1 && strcmp(dims[i].key, "n_head") == 0)
            v = r->h->heads;
        *dims[i].dst = (int)v;
        if (rc == 0 && strcmp(dims[i].key, "n_head") == 0 && r->h->heads && r->h->heads != v) {
            r->c->heads_refused = 1;
            FAIL("%s: metadata n_head is %ld, not the %d heads given", r->path, v, r->h->heads);
        }
    }
    return 0;
}

/* The architecture, sizes, qkv_bias, dropout and step. */
static int read_config(reading *r)
{
    ckpt *c = r->c;
    model_config *cfg = &c->cfg;
    const char *path = r->path;
    char word[64];
    const char *arch = meta_word(r->f, "arch", word, sizeof word);
    if (arch && model_arch_parse(arch) < 0)
        FAIL("%s: metadata arch is %s (expected gpt or attn-only)", path, arch);
    cfg->arch = arch ? model_arch_parse(arch)
              : ag_st_get(r->f, "blocks.0.norm1.weight") || ag_st_get(r->f, "final_norm.weight") ? ARCH_GPT
                                                                                             : ARCH_ATTN_ONLY;
    /* weights tied as nanoGPT ties them are stored once, under either name */
    r->emb = ag_st_get(r->f, "tok_emb.weight") || !ag_st_get(r->f, "out_head.weight") ? "tok_emb.weight"
                                                                                    : "out_head.weight";
    if (read_sizes(r))
        return -1;
    if (!cfg->n_head)
        add_missing(r, CKPT_HEADS, "how many heads (metadata n_head)");
    else if (cfg->d_model % cfg->n_head && ag_st_meta(r->f, "n_head"))
        FAIL("%s: metadata n_head %d does not divide d_model %d", path, cfg->n_head, cfg->d_model);
    else if (cfg->d_model % cfg->n_head) {
        c->heads_refused = 1;
        FAIL("%s: the %d heads given do not divide d_model %d", path, cfg->n_head, cfg->d_model);
    }
    const char *qb = meta_word(r->f, "qkv_bias", word, sizeof word);
    if (qb && strcmp(qb, "true") && strcmp(qb, "false"))
        FAIL("%s: metadata qkv_bias is %s (expected true or false)", path, qb);
    cfg->qkv_bias = qb ? strcmp(qb, "true") == 0 : ag_st_get(r->f, "blocks.0.attn.W_query.bias") != NULL;
    const char *dr = ag_st_meta(r->f, "dropout");
    if (dr && (json_value_number(dr, &cfg->dropout) || !(cfg->dropout >= 0 && cfg->dropout < 1)))
        FAIL("%s: metadata dropout is %.40s%s (expected a number in [0, 1))", path, dr, meta_more(dr));
    return meta_int(r->f, "step", 0, STEP_MAX, &c->step, path, r->err, r->errlen) < 0 ? -1 : 0;
}

/* The vocabulary, token id -> byte: the metadata's list, else the task's,
 * else the hinted text file's sorted distinct bytes. */
static int read_vocab(reading *r)
{
    ckpt *c = r->c;
    const char *path = r->path, *vj = ag_st_meta(r->f, "vocab");
    char e[400];
    if (vj) {
        if (parse_vocab(vj, r->is_text, c->vocab, &c->vocab_size, e, sizeof e))
            FAIL("%s: metadata vocab %s", path, e);
        if (c->vocab_size != c->cfg.vocab_size)
            FAIL("%s: metadata vocab lists %d bytes but the model has %d tokens", path, c->vocab_size,
                 c->cfg.vocab_size);
    } else if (c->data && !r->is_text) {
        c->vocab_size = r->t.vocab;
        memcpy(c->vocab, r->t.chars, (size_t)r->t.vocab);
    } else if (r->is_text && r->h->text) {
        text_data td;
        if (text_load(&td, r->h->text, e, sizeof e))
            FAIL("%s", e);
        c->vocab_size = td.vocab_size;
        memcpy(c->vocab, td.vocab, (size_t)td.vocab_size);
        text_free(&td);
        if (c->vocab_size != c->cfg.vocab_size)
            FAIL("%s: the model has %d tokens but %s has %d distinct bytes, so they cannot be its vocabulary",
                 path, c->cfg.vocab_size, r->h->text, c->vocab_size);
    } else if (r->is_text) {
        add_missing(r, CKPT_VOCAB, "its vocabulary (metadata vocab)");
    }
    return 0;
}

/* The data (a task or text, from the file or else the command line) and
 * the vocabulary; a task model must fit its task: every token id and the
 * whole example. */
static int read_data(reading *r)
{
    ckpt *c = r->c;
    const char *path = r->path;
    char e[400];
    c->data = meta_word(r->f, "data", c->data_name, sizeof c->data_name);
    if (c->data && !*c->data)
        FAIL("%s: metadata data is empty (expected a task name or text)", path);
    if (!c->data)
        c->data = r->h->task ? r->h->task : r->h->text ? "text" : NULL;
    r->is_text = c->data && strcmp(c->data, "text") == 0;
    if (c->data && !r->is_text && task_open(&r->t, c->data, e, sizeof e))
        FAIL("%s: %s%s", path, ag_st_meta(r->f, "data") ? "metadata data: " : "the task given: ", e);
    if (!c->data && !r->h->data_optional)
        add_missing(r, CKPT_DATA, "what it was trained on (metadata data)");
    if (read_vocab(r))
        return -1;
    if (r->missing[0]) {
        c->needs = r->needs;
        FAIL("%s: the file does not say %s", path, r->missing);
    }
    if (c->data && !r->is_text) {
        const task *t = &r->t;
        if (c->cfg.vocab_size != t->vocab || c->vocab_size != t->vocab || memcmp(c->vocab, t->chars, (size_t)t->vocab))
            FAIL("%s: its vocabulary (%d tokens) does not match task %s (%d tokens: %s)", path, c->cfg.vocab_size,
                 t->name, t->vocab, t->chars);
        if (task_check_context(t, c->cfg.context, e, sizeof e))
            FAIL("%s: %s", path, e);
    }
    return 0;
}

/* A file not written by attograd may store tied weights once: under
 * r->emb, and r->absent is the name it lacks. */
static void find_tied(reading *r)
{
    ckpt *c = r->c;
    const ag_st_tensor *tok = ag_st_get(r->f, "tok_emb.weight"), *head = ag_st_get(r->f, "out_head.weight");
    r->absent = c->foreign && !tok != !head ? (tok ? "out_head.weight" : "tok_emb.weight") : NULL;
    if (r->absent)
        snprintf(c->note, sizeof c->note, "%s has no %s: using %s for it (tied weights)", r->path, r->absent,
                 r->emb);
}

/* A run's state: the optimizer, its step and moments, the generators.
 * Returns the number of tensors it adds, or -1. */
static int read_state(reading *r, const ag_params *ps)
{
    ckpt *c = r->c;
    const char *path = r->path;
    char word[64];
    const char *optname = meta_word(r->f, "optimizer", word, sizeof word);
    if (!optname || (strcmp(optname, "sgd") && strcmp(optname, "adamw")))
        FAIL("%s: metadata optimizer is %s (expected sgd or adamw)", path, optname ? optname : "missing");
    c->optim_kind = strcmp(optname, "adamw") == 0 ? AG_ADAMW : AG_SGD;
    const ag_st_tensor *g = ag_st_get(r->f, "state.rng");
    if (g->dtype != AG_ST_U64 || g->ndim != 1 || g->shape[0] != 4)
        FAIL("%s: tensor 'state.rng' must be U64 [4]", path);
    const char *need = c->step < 0 ? "step" : NULL;
    int rc = meta_int(r->f, "optim_step", 0, STEP_MAX, &c->optim_step, path, r->err, r->errlen);
    if (rc < 0)
        return -1;
    if (rc == 1 || need)
        FAIL("%s: metadata '%s' is missing", path, need ? need : "optim_step");
    /* A run takes one optimizer update per training step: micro-batches and
     * ranks add their gradients into that one update, a step that diverges
     * saves nothing, and one the ranks lost is saved as the step before it
     * with the state from before it.  --init starts a new optimizer at step 0
     * for a new run at step 0, and the page resumes and saves as train does,
     * so every run's state attograd writes has optim_step = step.  Files
     * without a run's state (weights only; PyTorch's) record no optim_step
     * and are not held to it.  One that contradicts its step is no run's
     * state: resumed, AdamW's bias correction and SGD's first momentum step
     * would count other steps than the run took, and the resume would not be
     * the run that never stopped. */
    if (c->optim_step != c->step)
        FAIL("%s: metadata optim_step = %ld contradicts step = %ld (a run takes one optimizer step per training "
             "step), so its optimizer state is not the run's", path, c->optim_step, c->step);
    int moments = c->optim_kind == AG_ADAMW ? 2 : 1;
    for (int mo = 0; mo < moments; mo++)
        for (int i = 0; i < ps->count; i++) {
            char name[160];
            snprintf(name, sizeof name, "optim.%s.%s", mo ? "v" : "m", ps->list[i]->name);
            if (check_tensor(r->f, name, ps->list[i], 0, path, r->err, r->errlen))
                return -1;
        }
    return moments * ps->count + 1;
}

/* Nothing in the file the config does not account for: name the first
 * such tensor. */
static int check_unknown(reading *r, const ag_params *ps, int expected)
{
    const ckpt *c = r->c;
    if (ag_st_count(r->f) == expected)
        return 0;
    for (int i = 0; i < ag_st_count(r->f); i++) {
        const char *name = ag_st_at(r->f, i)->name;
        int known = ag_params_find(ps, name) != NULL || (c->has_state && strcmp(name, "state.rng") == 0);
        if (!known && c->has_state && strncmp(name, "optim.", 6) == 0 && (name[6] == 'm' ||
            (name[6] == 'v' && c->optim_kind == AG_ADAMW)) && name[7] == '.')
            known = ag_params_find(ps, name + 8) != NULL;
        if (!known)
            FAIL("%s: unknown tensor '%s' (not part of the %s model this config describes)", r->path, name,
                 model_arch_name(c->cfg.arch));
    }
    FAIL("%s: %d tensors where the config expects %d", r->path, ag_st_count(r->f), expected);
}

/* The model built from the config, every tensor checked and the parameters
 * allocated, from the header alone: before any tensor's bytes are read, so
 * that a message names the first tensor that differs, the file's size
 * bounds what a config read from it allocates, and the weights stored as
 * float32 in a float build are read straight into their parameters
 * (ag_st_place: memory holds one copy of them, not the file's too). */
static int declare_model(reading *r)
{
    ckpt *c = r->c;
    model *m = r->m;
    find_tied(r);
    model_declare(m, &c->cfg);
    const ag_params *ps = m->params;
    for (int i = 0; i < ps->count; i++)
        if ((!r->absent || strcmp(ps->list[i]->name, r->absent)) &&
            check_tensor(r->f, ps->list[i]->name, ps->list[i], 1, r->path, r->err, r->errlen))
            return -1;
    int expected = ps->count - (r->absent != NULL);
    c->has_state = ag_st_get(r->f, "state.rng") != NULL;
    if (c->has_state) {
        int more = read_state(r, ps);
        if (more < 0)
            return -1;
        expected += more;
    }
    if (check_unknown(r, ps, expected))
        return -1;
    if (r->h->forward_only)
        ag_params_alloc_no_grad(m->params);
    else
        ag_params_alloc(m->params);
    for (int i = 0; i < ps->count && sizeof(ag_real) == sizeof(float); i++) {
        const ag_st_tensor *w = ag_st_get(r->f, ps->list[i]->name);
        if (w && w->dtype == AG_ST_F32 && w->nbytes == ps->list[i]->size * sizeof(float))
            ag_st_place(r->f, w->name, ps->list[i]->data);
    }
    return 0;
}

/* The tensors' bytes in: the weights not read in place loaded (another
 * dtype, a double build, the tied weight), the generators checked. */
static int load_model(reading *r)
{
    char e[400];
    const ag_params *ps = r->m->params;
    for (int i = 0; i < ps->count; i++) {
        const ag_st_tensor *w = ag_st_get(r->f, ps->list[i]->name);
        if (!w)
            w = ag_st_get(r->f, r->emb);
        if (w->data != (const void *)ps->list[i]->data &&
            load_values(ps->list[i]->data, w, ps->list[i]->size, e, sizeof e))
            FAIL("%s: %s", r->path, e);
    }
    if (r->c->has_state) {
        const uint64_t *rv = ag_st_get(r->f, "state.rng")->data;
        if (!(rv[1] & 1) || !(rv[3] & 1))
            FAIL("%s: tensor 'state.rng' holds an invalid generator (stream must be odd)", r->path);
    }
    return 0;
}

/* What ag_st_load_placed calls with the header read: the config, the data
 * and the model from it (see declare_model). */
static int on_header(void *user, ag_st_file *f, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;                       /* r's, the same */
    reading *r = user;
    ckpt *c = r->c;
    r->f = f;
    char word[64];
    const char *fmt = meta_word(f, "format", word, sizeof word);
    if (fmt && strncmp(fmt, "attograd/", 9) == 0 && strcmp(fmt, CKPT_FORMAT) != 0)
        return say(r, "%s: metadata format is '%s', which this attograd does not read (it reads %s)", r->path,
                   fmt, CKPT_FORMAT);
    /* A file attograd did not write (a PyTorch state_dict) may omit the
     * metadata; whatever the tensors determine is taken from them. */
    c->foreign = !fmt || strcmp(fmt, CKPT_FORMAT) != 0;
    return read_config(r) || read_data(r) || declare_model(r) ? -1 : 0;
}

int ckpt_open_hints(ckpt *c, const char *path, model *m, const ckpt_hints *hints, char *err, size_t errlen)
{
    static const ckpt_hints no_hints = { 0, NULL, NULL, 0, 0 };
    memset(c, 0, sizeof *c);
    memset(m, 0, sizeof *m);
    c->step = -1;
    c->path = path;
    reading rd = { .c = c, .m = m, .path = path, .h = hints ? hints : &no_hints, .err = err, .errlen = errlen },
            *r = &rd;
    /* A model that only runs forward has no use for the optimizer's
     * moments: they are read and checked like the rest, not kept. */
    r->f = c->file = ag_st_load_placed(path, r->h->forward_only ? "optim." : NULL, on_header, r, err, errlen);
    int rc = c->file ? load_model(r) : -1;
    if (rc) {
        if (m->params)
            model_free(m);
        ag_st_free(c->file);
        c->file = NULL;
    }
    return rc;
}

#undef FAIL

void ckpt_load_state(const ckpt *c, ag_optim *o, ag_pcg32 *data_rng, ag_pcg32 *dropout_rng)
{
    const ag_params *ps = o->ps;
    for (int mo = 0; mo < (o->v ? 2 : 1); mo++)
        for (int i = 0; i < ps->count; i++) {
            char name[160];
            snprintf(name, sizeof name, "optim.%s.%s", mo ? "v" : "m", ps->list[i]->name);
            const ag_st_tensor *t = ag_st_get(c->file, name);
            from_f32((mo ? o->v : o->m) + (ps->list[i]->data - ps->data), t->data, ps->list[i]->size);
        }
    o->step = c->optim_step;
    const uint64_t *r = ag_st_get(c->file, "state.rng")->data;
    data_rng->state = r[0];
    data_rng->inc = r[1];
    dropout_rng->state = r[2];
    dropout_rng->inc = r[3];
}

const char *ckpt_meta(const ckpt *c, const char *key) { return ag_st_meta(c->file, key); }

const char *meta_more(const char *v) { return v && strlen(v) > META_SHOWN ? "..." : ""; }

void ckpt_drop_tensors(ckpt *c) { ag_st_drop_data(c->file); }

void ckpt_close(ckpt *c)
{
    ag_st_free(c->file);
    c->file = NULL;
}
