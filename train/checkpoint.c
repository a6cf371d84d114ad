/*
 * checkpoint.c - save and load models and runs (see checkpoint.h).
 *
 * Metadata keys: format, arch, vocab_size, n_layer, n_head, d_model,
 * context_length, qkv_bias, dropout, step, data, vocab; and, in a run's
 * checkpoint, optimizer plus whatever training options the run adds.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

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

int ckpt_save(ag_atomic_file *out, const char *path, const model *m, const char *data_name, const uint8_t *vocab,
              int vocab_size, long step, const ckpt_state *state, char *err, size_t errlen)
{
    const ag_params *ps = m->params;
    const model_config *c = &m->cfg;
    int per = 1 + (state ? 1 + (state->optim->v != NULL) : 0);
    int n = ps->count * per + (state ? 1 : 0), k = 0, ret = -1;
    ag_st_tensor *ts = calloc((size_t)n, sizeof *ts);
    float **tmp = calloc((size_t)n, sizeof *tmp);
    char (*names)[160] = calloc((size_t)n, sizeof *names);
    uint64_t rng[4];
    if (!ts || !tmp || !names) {
        snprintf(err, errlen, "%s: out of memory preparing the checkpoint", path);
        goto done;
    }
    for (int i = 0; i < ps->count; i++, k++)
        ts[k] = st_tensor(ps->list[i]->name, ps->list[i], as_f32(ps->list[i]->data, ps->list[i]->size, &tmp[k]));
    if (state) {
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
        ts[k].nbytes = sizeof rng;
        k++;
    }

    char vocab_json[256 * 4 + 8], num[10][32];
    size_t used = 0;
    vocab_json[used++] = '[';
    for (int i = 0; i < vocab_size; i++)
        used += (size_t)snprintf(vocab_json + used, sizeof vocab_json - used, "%s%d", i ? "," : "", vocab[i]);
    snprintf(vocab_json + used, sizeof vocab_json - used, "]");
    snprintf(num[0], sizeof num[0], "%d", c->vocab_size);
    snprintf(num[1], sizeof num[1], "%d", c->n_layer);
    snprintf(num[2], sizeof num[2], "%d", c->n_head);
    snprintf(num[3], sizeof num[3], "%d", c->d_model);
    snprintf(num[4], sizeof num[4], "%d", c->context);
    snprintf(num[5], sizeof num[5], "%.17g", c->dropout);
    snprintf(num[6], sizeof num[6], "%ld", step);
    snprintf(num[7], sizeof num[7], "%ld", state ? state->optim->step : 0L);
    const char *meta[2 * 40];
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
    META("vocab", vocab_json);
    if (state) {
        META("optimizer", state->optim->kind == AG_ADAMW ? "adamw" : "sgd");
        META("optim_step", num[7]);
        for (int i = 0; i + 1 < 2 * state->n_options && nm < 40; i += 2)
            META(state->options[i], state->options[i + 1]);
    }
#undef META
    if (ag_atomic_open(out, path, err, errlen) == 0) {
        if (ag_st_write(out->f, path, ts, k, meta, nm, err, errlen) == 0)
            ret = ag_atomic_commit(out, err, errlen);
        else
            ag_atomic_abort(out);
    }
done:
    for (int i = 0; tmp && i < n; i++)
        free(tmp[i]);
    free(tmp);
    free(ts);
    free(names);
    return ret;
}

/* ---- loading ------------------------------------------------------------- */

#define FAIL(...) do { snprintf(err, errlen, __VA_ARGS__); goto fail; } while (0)

static int meta_int(const ag_st_file *f, const char *key, long lo, long hi, long *out, const char *path,
                    char *err, size_t errlen)
{
    const char *v = ag_st_meta(f, key);
    if (!v) {
        snprintf(err, errlen, "%s: metadata '%s' is missing", path, key);
        return -1;
    }
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (end == v || *end || errno) {
        snprintf(err, errlen, "%s: metadata %s = '%.40s' is not an integer", path, key, v);
        return -1;
    }
    if (x < lo || x > hi) {
        snprintf(err, errlen, "%s: metadata %s = %ld is out of range [%ld, %ld]", path, key, x, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

static int parse_vocab(const char *s, uint8_t *vocab, int *n)
{
    /* "[10,32,33]": strictly increasing byte values */
    if (*s++ != '[')
        return -1;
    *n = 0;
    if (*s == ']')
        return s[1] ? -1 : 0;
    for (;;) {
        if (*s < '0' || *s > '9' || *n >= 256)
            return -1;
        long v = 0;
        while (*s >= '0' && *s <= '9' && v <= 255)
            v = v * 10 + (*s++ - '0');
        if (v > 255 || (*n > 0 && v <= vocab[*n - 1]))
            return -1;
        vocab[(*n)++] = (uint8_t)v;
        if (*s == ']')
            return s[1] ? -1 : 0;
        if (*s++ != ',')
            return -1;
    }
}

static int check_tensor(const ag_st_file *f, const char *name, const ag_tensor *like, const char *path,
                        char *err, size_t errlen)
{
    const ag_st_tensor *t = ag_st_get(f, name);
    if (!t) {
        snprintf(err, errlen, "%s: tensor '%s' is missing", path, name);
        return -1;
    }
    if (t->dtype != AG_ST_F32) {
        snprintf(err, errlen, "%s: tensor '%s' has dtype %s, expected F32", path, name, ag_st_dtype_name(t->dtype));
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
        snprintf(err, errlen, "%s: tensor '%s' has shape %s, the config needs %s", path, name, got,
                 ag_shape_str(like, want, sizeof want));
        return -1;
    }
    return 0;
}

int ckpt_open(ckpt *c, const char *path, model *m, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    memset(m, 0, sizeof *m);
    c->path = path;
    ag_st_file *f = c->file = ag_st_load(path, err, errlen);
    if (!f)
        return -1;
    const char *fmt = ag_st_meta(f, "format");
    if (!fmt || strcmp(fmt, CKPT_FORMAT) != 0)
        FAIL("%s: not an attograd checkpoint (metadata format is %s%s%s, expected %s)", path, fmt ? "'" : "",
             fmt ? fmt : "missing", fmt ? "'" : "", CKPT_FORMAT);
    const char *arch = ag_st_meta(f, "arch");
    if (!arch || model_arch_parse(arch) < 0)
        FAIL("%s: metadata arch is %s (expected gpt or attn-only)", path, arch ? arch : "missing");
    model_config *cfg = &c->cfg;
    cfg->arch = model_arch_parse(arch);
    long v;
    if (meta_int(f, "vocab_size", 1, 256, &v, path, err, errlen)) goto fail;
    cfg->vocab_size = (int)v;
    if (meta_int(f, "n_layer", 1, 256, &v, path, err, errlen)) goto fail;
    cfg->n_layer = (int)v;
    if (meta_int(f, "n_head", 1, 4096, &v, path, err, errlen)) goto fail;
    cfg->n_head = (int)v;
    if (meta_int(f, "d_model", 1, 65536, &v, path, err, errlen)) goto fail;
    cfg->d_model = (int)v;
    if (meta_int(f, "context_length", 1, 65536, &v, path, err, errlen)) goto fail;
    cfg->context = (int)v;
    if (meta_int(f, "step", 0, 1L << 62, &c->step, path, err, errlen)) goto fail;
    if (cfg->d_model % cfg->n_head)
        FAIL("%s: metadata n_head %d does not divide d_model %d", path, cfg->n_head, cfg->d_model);
    const char *qb = ag_st_meta(f, "qkv_bias");
    if (!qb || (strcmp(qb, "true") && strcmp(qb, "false")))
        FAIL("%s: metadata qkv_bias is %s (expected true or false)", path, qb ? qb : "missing");
    cfg->qkv_bias = strcmp(qb, "true") == 0;
    const char *dr = ag_st_meta(f, "dropout");
    char *end;
    if (!dr || (cfg->dropout = strtod(dr, &end), end == dr || *end) || !(cfg->dropout >= 0 && cfg->dropout < 1))
        FAIL("%s: metadata dropout is %s (expected a number in [0, 1))", path, dr ? dr : "missing");
    c->data = ag_st_meta(f, "data");
    if (!c->data || !*c->data)
        FAIL("%s: metadata data (task name or text) is missing", path);
    const char *vj = ag_st_meta(f, "vocab");
    if (!vj || parse_vocab(vj, c->vocab, &c->vocab_size) || c->vocab_size != cfg->vocab_size)
        FAIL("%s: metadata vocab must list vocab_size (%d) increasing byte values, e.g. \"[10,32,33]\"", path,
             cfg->vocab_size);

    /* Every tensor must be there, so the file's size bounds the model's:
     * check that before allocating anything the config asks for. */
    double data_bytes = 0;
    for (int i = 0; i < ag_st_count(f); i++)
        data_bytes += (double)ag_st_at(f, i)->nbytes;
    if (model_param_count(cfg) * 4 > data_bytes)
        FAIL("%s: the config needs %.0f parameters (%.0f bytes of F32) but the file holds only %.0f bytes of tensors", path,
             model_param_count(cfg), model_param_count(cfg) * 4, data_bytes);

    model_build(m, cfg);
    const ag_params *ps = m->params;
    for (int i = 0; i < ps->count; i++)
        if (check_tensor(f, ps->list[i]->name, ps->list[i], path, err, errlen))
            goto fail;
    int expected = ps->count;
    const char *optname = ag_st_meta(f, "optimizer");
    c->has_state = ag_st_get(f, "state.rng") != NULL;
    if (c->has_state) {
        if (!optname || (strcmp(optname, "sgd") && strcmp(optname, "adamw")))
            FAIL("%s: metadata optimizer is %s (expected sgd or adamw)", path, optname ? optname : "missing");
        c->optim_kind = strcmp(optname, "adamw") == 0 ? AG_ADAMW : AG_SGD;
        const ag_st_tensor *r = ag_st_get(f, "state.rng");
        if (r->dtype != AG_ST_U64 || r->ndim != 1 || r->shape[0] != 4)
            FAIL("%s: tensor 'state.rng' must be U64 [4]", path);
        long ostep;
        if (meta_int(f, "optim_step", 0, 1L << 62, &ostep, path, err, errlen)) goto fail;
        const uint64_t *rv = r->data;
        if (!(rv[1] & 1) || !(rv[3] & 1))
            FAIL("%s: tensor 'state.rng' holds an invalid generator (stream must be odd)", path);
        int moments = c->optim_kind == AG_ADAMW ? 2 : 1;
        for (int mo = 0; mo < moments; mo++)
            for (int i = 0; i < ps->count; i++) {
                char name[160];
                snprintf(name, sizeof name, "optim.%s.%s", mo ? "v" : "m", ps->list[i]->name);
                if (check_tensor(f, name, ps->list[i], path, err, errlen))
                    goto fail;
            }
        expected += moments * ps->count + 1;
    }
    if (ag_st_count(f) != expected) {
        /* name the first tensor the config does not account for */
        for (int i = 0; i < ag_st_count(f); i++) {
            const char *name = ag_st_at(f, i)->name;
            int known = ag_params_find(ps, name) != NULL || (c->has_state && strcmp(name, "state.rng") == 0);
            if (!known && c->has_state && strncmp(name, "optim.", 6) == 0 && (name[6] == 'm' ||
                (name[6] == 'v' && c->optim_kind == AG_ADAMW)) && name[7] == '.')
                known = ag_params_find(ps, name + 8) != NULL;
            if (!known)
                FAIL("%s: unknown tensor '%s' (not part of the %s model this config describes)", path, name, arch);
        }
        FAIL("%s: %d tensors where the config expects %d", path, ag_st_count(f), expected);
    }
    for (int i = 0; i < ps->count; i++) {
        const ag_st_tensor *t = ag_st_get(f, ps->list[i]->name);
        from_f32(ps->list[i]->data, t->data, ps->list[i]->size);
    }
    return 0;
fail:
    if (m->params)
        model_free(m);
    ag_st_free(c->file);
    c->file = NULL;
    return -1;
}

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
    o->step = strtol(ag_st_meta(c->file, "optim_step"), NULL, 10);
    const uint64_t *r = ag_st_get(c->file, "state.rng")->data;
    data_rng->state = r[0];
    data_rng->inc = r[1];
    dropout_rng->state = r[2];
    dropout_rng->inc = r[3];
}

const char *ckpt_meta(const ckpt *c, const char *key) { return ag_st_meta(c->file, key); }

void ckpt_close(ckpt *c)
{
    ag_st_free(c->file);
    c->file = NULL;
}
