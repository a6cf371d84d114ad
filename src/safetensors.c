/*
 * safetensors.c - reading and writing safetensors checkpoints.  The reader
 * trusts nothing in the file: every length and offset is checked before it
 * is used, and every problem becomes a one-line message, never a crash.
 */
#include "attograd_io.h"
#include "bigbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NDTYPES 8
static const char *const dtype_names[NDTYPES] = {"F32", "F64", "I32", "I64", "U64", "U8", "F16", "BF16"};
static const size_t dtype_sizes[NDTYPES] = {4, 8, 4, 8, 8, 1, 2, 2};
#define METADATA_KEY "__metadata__"
#define ALIGN AG_ALIGN   /* each tensor's copy starts on a cache line */

size_t ag_st_dtype_size(int dtype)
{
    return dtype >= 0 && dtype < NDTYPES ? dtype_sizes[dtype] : 0;
}

const char *ag_st_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < NDTYPES ? dtype_names[dtype] : "?";
}

/* ---- shared helpers ------------------------------------------------------ */

/* A name as shown in a message: quoted, control bytes and bytes that are
 * not UTF-8 as '?' (the message stays one line of text), cut at about 60
 * bytes (on a UTF-8 character boundary) so one hostile name cannot fill
 * the whole error buffer. */
typedef struct { char s[80]; } shown_name;

static size_t utf8_bad_at(const unsigned char *s, size_t len);

static shown_name show(const char *name)
{
    shown_name out = { { 0 } };   /* all set below; the zeros keep gcc from warning at some levels */
    size_t len = strlen(name), keep = len > 60 ? 60 : len;
    while (keep < len && keep > 0 && ((unsigned char)name[keep] & 0xC0) == 0x80) keep--;
    size_t j = 0;
    out.s[j++] = '"';
    for (size_t i = 0; i < keep; i++) {
        unsigned char c = (unsigned char)name[i];
        out.s[j++] = (c < 0x20 || c == 0x7F) ? '?' : (char)c;
    }
    unsigned char *u = (unsigned char *)out.s + 1;
    for (size_t at; (at = utf8_bad_at(u, keep)) < keep;)
        u[at] = '?';
    out.s[j++] = '"';
    if (keep < len) { memcpy(out.s + j, "...", 3); j += 3; }
    out.s[j] = '\0';
    return out;
}

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, <= U+10FFFF.
 * Returns the offset of the first bad byte, or len if all is well. */
static size_t utf8_bad_at(const unsigned char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        unsigned char c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t need;
        unsigned char lo = 0x80, hi = 0xBF;   /* allowed range of the 2nd byte */
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) { need = 2; lo = 0xA0; }
        else if (c >= 0xE1 && c <= 0xEC) need = 2;
        else if (c == 0xED) { need = 2; hi = 0x9F; }
        else if (c >= 0xEE && c <= 0xEF) need = 2;
        else if (c == 0xF0) { need = 3; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        else if (c == 0xF4) { need = 3; hi = 0x8F; }
        else return i;
        if (len - i <= need) return i;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += need + 1;
    }
    return len;
}

/* NaN and Inf are the values whose exponent bits are all ones; looking at
 * the little-endian bytes directly needs no alignment and no type punning.
 * The exponent lies in the element's top byte `hi` under mask mh and the
 * byte below it under mask ml:
 * F32:  exponent = bits 30..23, i.e. byte 3 & 0x7F and byte 2 & 0x80.
 * F64:  exponent = bits 62..52, i.e. byte 7 & 0x7F and byte 6 & 0xF0.
 * F16:  exponent = bits 14..10, i.e. byte 1 & 0x7C (and byte 0 & 0).
 * BF16: exponent = bits 14..7 (F32's upper half), byte 1 & 0x7F and byte 0 & 0x80.
 * The test runs over blocks without a branch per element, so the compiler
 * can vectorize it: a model's checkpoint is tens of millions of values. */
static inline int any_all_ones(const unsigned char *p, size_t nbytes, const size_t es, const unsigned mh,
                               const unsigned ml)
{
    enum { BLOCK = 4096 };   /* elements between the early exits */
    const size_t n = nbytes / es;
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        const size_t i1 = n - i0 < BLOCK ? n : i0 + BLOCK;
        unsigned bad = 0;
        for (size_t i = i0; i < i1; i++) {
            const unsigned char *e = p + i * es;
            bad |= ((e[es - 1] & mh) == mh) & ((e[es - 2] & ml) == ml);
        }
        if (bad) return 1;
    }
    return 0;
}

static int has_nonfinite(const unsigned char *p, size_t nbytes, int dtype)
{
    switch (dtype) {
    case AG_ST_F32:  return any_all_ones(p, nbytes, 4, 0x7F, 0x80);
    case AG_ST_F64:  return any_all_ones(p, nbytes, 8, 0x7F, 0xF0);
    case AG_ST_F16:  return any_all_ones(p, nbytes, 2, 0x7C, 0x00);
    case AG_ST_BF16: return any_all_ones(p, nbytes, 2, 0x7F, 0x80);
    default:         return 0;
    }
}

/* product(shape) * elsize, or -1 on overflow of 64 bits or of size_t. */
static int shape_bytes(const int64_t *shape, int ndim, size_t elsize, uint64_t *out)
{
    uint64_t n = 1;
    int zero = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0) zero = 1;
        else if (!zero && n > UINT64_MAX / (uint64_t)shape[d]) return -1;
        else if (!zero) n *= (uint64_t)shape[d];
    }
    if (zero) n = 0;
    if (n > UINT64_MAX / elsize || n * elsize > SIZE_MAX) return -1;
    *out = n * elsize;
    return 0;
}

/* ---- reader: the JSON header ---------------------------------------------- */

typedef struct entry {
    ag_st_tensor t;
    uint64_t begin, end;
    int order;            /* position in the header, to break ties */
} entry;

typedef struct parser {
    const unsigned char *h;   /* the JSON header */
    size_t n, pos;
    const char *label;
    char *err;
    size_t errlen;
    char *pool;               /* decoded strings; n + 1 bytes always suffice */
    size_t used;
    entry *ents;
    int nents, capents;
    const char **meta;        /* key, value, key, value ... */
    int nmeta, capmeta;
    int have_meta;
    const char *skip;         /* tensors whose names begin with it: read and checked, not kept (or NULL) */
    unsigned char *chunk;     /* CHUNK bytes for them, allocated at the first */
    unsigned char *placed;    /* per tensor (file order), 1: read into the place ag_st_place gave */
} parser;

static int fail(parser *p, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ag_set_err(p->err, p->errlen, "%s: %s", p->label, msg);
    return -1;
}

static int syntax(parser *p, const char *what)
{
    if (p->pos >= p->n)
        return fail(p, "bad JSON in header: unexpected end of header (%s)", what);
    return fail(p, "bad JSON in header at byte %zu: %s", p->pos, what);
}

static int peek(const parser *p) { return p->pos < p->n ? p->h[p->pos] : -1; }

static void skip_ws(parser *p)
{
    while (p->pos < p->n) {
        unsigned char c = p->h[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
        p->pos++;
    }
}

static int expect(parser *p, int c, const char *what)
{
    skip_ws(p);
    if (peek(p) != c) return syntax(p, what);
    p->pos++;
    skip_ws(p);
    return 0;
}

/* After a member of an array or object: 1 at the closing `close`, 0 after
 * a ',' (both consumed, with the white space around them), -1 with a
 * syntax error saying `what` on anything else. */
static int next_member(parser *p, int close, const char *what)
{
    skip_ws(p);
    int c = peek(p);
    if (c == close) { p->pos++; return 1; }
    if (c != ',') return syntax(p, what);
    p->pos++;
    skip_ws(p);
    return 0;
}

static int hex4(parser *p, unsigned *out)
{
    if (p->n - p->pos < 4) { p->pos = p->n; return syntax(p, "truncated \\u escape"); }
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = p->h[p->pos];
        unsigned d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return syntax(p, "bad hex digit in \\u escape");
        v = v * 16 + d;
        p->pos++;
    }
    *out = v;
    return 0;
}

/* \uXXXX, with UTF-16 surrogate pairs joined: cp = 0x10000 +
 * ((hi - 0xD800) << 10) + (lo - 0xDC00).  Written out as UTF-8. */
static int unicode_escape(parser *p, char **w)
{
    unsigned cp, lo;
    if (hex4(p, &cp)) return -1;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return syntax(p, "unpaired low surrogate in \\u escape");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (p->n - p->pos < 2 || p->h[p->pos] != '\\' || p->h[p->pos + 1] != 'u')
            return syntax(p, "unpaired high surrogate in \\u escape");
        p->pos += 2;
        if (hex4(p, &lo)) return -1;
        if (lo < 0xDC00 || lo > 0xDFFF) return syntax(p, "unpaired high surrogate in \\u escape");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (cp == 0) return syntax(p, "\\u0000 is not allowed in a name or value");
    unsigned char *o = (unsigned char *)*w;
    if (cp < 0x80) { *o++ = (unsigned char)cp; }
    else if (cp < 0x800) {
        *o++ = (unsigned char)(0xC0 | cp >> 6);
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    }
    else if (cp < 0x10000) {
        *o++ = (unsigned char)(0xE0 | cp >> 12);
        *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        *o++ = (unsigned char)(0xF0 | cp >> 18);
        *o++ = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        *o++ = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (cp & 0x3F));
    }
    *w = (char *)o;
    return 0;
}

/* A JSON string at pos, decoded into the pool.  Every escape decodes to no
 * more bytes than it occupies and the two quotes pay for the NUL, so the
 * pool (header size + 1) can never overflow. */
static int parse_string(parser *p, const char **out)
{
    if (peek(p) != '"') return syntax(p, "expected a string");
    p->pos++;
    char *start = p->pool + p->used, *w = start;
    for (;;) {
        if (p->pos >= p->n) return syntax(p, "unterminated string");
        unsigned char c = p->h[p->pos++];
        if (c == '"') break;
        if (c < 0x20) { p->pos--; return syntax(p, "raw control character in string"); }
        if (c != '\\') { *w++ = (char)c; continue; }
        if (p->pos >= p->n) return syntax(p, "unterminated string");
        c = p->h[p->pos++];
        switch (c) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '/': *w++ = '/'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u': if (unicode_escape(p, &w)) return -1; break;
        default: p->pos--; return syntax(p, "bad escape in string");
        }
    }
    *w++ = '\0';
    p->used = (size_t)(w - p->pool);
    *out = start;
    return 0;
}

/* A non-negative JSON integer.  Anything else that JSON allows as a number
 * (a sign, a fraction, an exponent) is a semantic error, named as such. */
static int parse_count(parser *p, uint64_t max, uint64_t *out, const char *what, const char *tname)
{
    if (peek(p) == '-') {
        if (p->pos + 1 < p->n && p->h[p->pos + 1] >= '0' && p->h[p->pos + 1] <= '9')
            return fail(p, "tensor %s: negative %s", show(tname).s, what);
        p->pos++;
        return syntax(p, "expected a digit after '-'");
    }
    int c = peek(p);
    if (c == '"' || c == '[' || c == '{' || c == 't' || c == 'f' || c == 'n')
        return fail(p, "tensor %s: %s must be non-negative integers", show(tname).s, what);
    if (c < '0' || c > '9') return syntax(p, "expected a number");
    uint64_t v = 0;
    size_t first = p->pos;
    while ((c = peek(p)) >= '0' && c <= '9') {
        unsigned d = (unsigned)(c - '0');
        if (v > (max - d) / 10) return fail(p, "tensor %s: %s too large", show(tname).s, what);
        v = v * 10 + d;
        p->pos++;
    }
    if (p->h[first] == '0' && p->pos - first > 1) {
        p->pos = first;
        return syntax(p, "number with a leading zero");
    }
    if (c == '.' || c == 'e' || c == 'E')
        return fail(p, "tensor %s: %s must be integers, not fractions", show(tname).s, what);
    *out = v;
    return 0;
}

/* [n, n, ...] into vals, at most maxn entries (more is an error). */
static int parse_count_array(parser *p, uint64_t *vals, int maxn, int *count, uint64_t max,
                             const char *what, const char *tname)
{
    if (peek(p) != '[') return fail(p, "tensor %s: %s must be an array", show(tname).s, what);
    p->pos++;
    skip_ws(p);
    *count = 0;
    if (peek(p) == ']') { p->pos++; return 0; }
    for (;;) {
        if (*count == maxn) {
            if (maxn == AG_ST_MAX_DIMS) return fail(p, "tensor %s: more than %d dims", show(tname).s, maxn);
            return fail(p, "tensor %s: %s must have exactly %d entries", show(tname).s, what, maxn);
        }
        if (parse_count(p, max, &vals[*count], what, tname)) return -1;
        (*count)++;
        const int r = next_member(p, ']', "expected ',' or ']' in array");
        if (r) return r < 0 ? -1 : 0;
    }
}

static int dtype_from_name(const char *s)
{
    for (int i = 0; i < NDTYPES; i++)
        if (strcmp(s, dtype_names[i]) == 0) return i;
    return -1;
}

/* {"dtype": "...", "shape": [...], "data_offsets": [b, e]}, nothing else. */
static int parse_tensor(parser *p, entry *e)
{
    const char *name = e->t.name;
    int seen_dtype = 0, seen_shape = 0, seen_offs = 0;
    if (peek(p) != '{') return fail(p, "tensor %s: entry must be a JSON object", show(name).s);
    p->pos++;
    skip_ws(p);
    if (peek(p) == '}') p->pos++;
    else for (;;) {
        size_t mark = p->used;   /* field names and dtype strings are not kept */
        const char *key, *s;
        if (parse_string(p, &key) || expect(p, ':', "expected ':' after key")) return -1;
        if (strcmp(key, "dtype") == 0) {
            if (seen_dtype++) return fail(p, "tensor %s: duplicate field \"dtype\"", show(name).s);
            if (peek(p) != '"') return fail(p, "tensor %s: dtype must be a string", show(name).s);
            if (parse_string(p, &s)) return -1;
            e->t.dtype = dtype_from_name(s);
            if (e->t.dtype < 0)
                return fail(p, "tensor %s: unknown dtype %s (known: F32 F64 F16 BF16 I32 I64 U64 U8)",
                            show(name).s, show(s).s);
        } else if (strcmp(key, "shape") == 0) {
            uint64_t dims[AG_ST_MAX_DIMS];
            if (seen_shape++) return fail(p, "tensor %s: duplicate field \"shape\"", show(name).s);
            if (parse_count_array(p, dims, AG_ST_MAX_DIMS, &e->t.ndim, INT64_MAX, "shape dims", name))
                return -1;
            for (int d = 0; d < e->t.ndim; d++) e->t.shape[d] = (int64_t)dims[d];
        } else if (strcmp(key, "data_offsets") == 0) {
            uint64_t offs[2];
            int count;
            if (seen_offs++) return fail(p, "tensor %s: duplicate field \"data_offsets\"", show(name).s);
            if (parse_count_array(p, offs, 2, &count, UINT64_MAX, "data_offsets", name)) return -1;
            if (count != 2) return fail(p, "tensor %s: data_offsets must have exactly 2 entries", show(name).s);
            e->begin = offs[0];
            e->end = offs[1];
        } else {
            return fail(p, "tensor %s: unknown field %s", show(name).s, show(key).s);
        }
        p->used = mark;
        const int r = next_member(p, '}', "expected ',' or '}' in tensor entry");
        if (r < 0) return -1;
        if (r) break;
    }
    if (!seen_dtype) return fail(p, "tensor %s: missing \"dtype\"", show(name).s);
    if (!seen_shape) return fail(p, "tensor %s: missing \"shape\"", show(name).s);
    if (!seen_offs) return fail(p, "tensor %s: missing \"data_offsets\"", show(name).s);
    return 0;
}

static int push_meta(parser *p, const char *s)
{
    if (p->nmeta == p->capmeta) {
        int cap = p->capmeta ? 2 * p->capmeta : 16;
        const char **m = realloc(p->meta, (size_t)cap * sizeof *m);
        if (!m) return fail(p, "out of memory");
        p->meta = m;
        p->capmeta = cap;
    }
    p->meta[p->nmeta++] = s;
    return 0;
}

/* "__metadata__": {"key": "value", ...}; duplicates are found later. */
static int parse_metadata(parser *p)
{
    if (p->have_meta++) return fail(p, "duplicate key \"" METADATA_KEY "\"");
    if (peek(p) != '{') return fail(p, METADATA_KEY " must be a JSON object");
    p->pos++;
    skip_ws(p);
    if (peek(p) == '}') { p->pos++; return 0; }
    for (;;) {
        const char *key, *val;
        if (parse_string(p, &key) || expect(p, ':', "expected ':' after key")) return -1;
        if (peek(p) != '"') return fail(p, "metadata value for key %s is not a string", show(key).s);
        if (parse_string(p, &val) || push_meta(p, key) || push_meta(p, val)) return -1;
        const int r = next_member(p, '}', "expected ',' or '}' in " METADATA_KEY);
        if (r) return r < 0 ? -1 : 0;
    }
}

static int parse_header(parser *p)
{
    skip_ws(p);
    if (peek(p) != '{') return fail(p, "header is not a JSON object");
    p->pos++;
    skip_ws(p);
    if (peek(p) == '}') p->pos++;
    else for (;;) {
        const char *key;
        if (parse_string(p, &key) || expect(p, ':', "expected ':' after key")) return -1;
        if (strcmp(key, METADATA_KEY) == 0) {
            if (parse_metadata(p)) return -1;
        } else {
            if (p->nents == p->capents) {
                if (p->capents > INT_MAX / 2) return fail(p, "too many tensors");
                int cap = p->capents ? 2 * p->capents : 16;
                entry *ne = realloc(p->ents, (size_t)cap * sizeof *ne);
                if (!ne) return fail(p, "out of memory");
                p->ents = ne;
                p->capents = cap;
            }
            entry *e = &p->ents[p->nents];
            memset(e, 0, sizeof *e);
            e->t.name = key;
            e->order = p->nents;
            if (parse_tensor(p, e)) return -1;
            p->nents++;
        }
        const int r = next_member(p, '}', "expected ',' or '}' after a top-level entry");
        if (r < 0) return -1;
        if (r) break;
    }
    skip_ws(p);   /* writers pad with spaces */
    if (p->pos != p->n) return syntax(p, "unexpected bytes after the JSON object");
    return 0;
}

/* ---- reader: checks across entries, and the result ------------------------ */

struct ag_st_file {
    int n, nmeta;
    ag_st_tensor *tensors;     /* file (offset) order */
    int *by_name;              /* tensor indices sorted by strcmp of name */
    const char **meta;         /* key, value pairs in file order */
    int *meta_by_key;          /* pair indices sorted by key */
    char *strings;             /* every name, key and value */
    unsigned char *data;       /* ALIGN-aligned copy of every tensor's bytes (but those placed elsewhere) */
    unsigned char *placed;     /* while an ag_st_load_placed hook runs: per tensor, 1 when read into the
                                * caller's memory; else NULL */
};

static int cmp_offsets(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* Sorting an index by name needs the names; qsort has no context pointer, so
 * the index holds pointers to the strings and is turned into numbers after. */
typedef struct { const char *s; int i; } named;

static int cmp_named(const void *a, const void *b)
{
    return strcmp(((const named *)a)->s, ((const named *)b)->s);
}

/* Sorts n names into idx; returns the index of a duplicated name or -1. */
static int sort_names(named *tmp, int *idx, int n)
{
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_named);
    for (int i = 0; i < n; i++) {
        idx[i] = tmp[i].i;
        if (i > 0 && strcmp(tmp[i - 1].s, tmp[i].s) == 0) return tmp[i].i;
    }
    return -1;
}

static int build_indexes(parser *p, ag_st_file *f)
{
    int m = p->nents > p->nmeta / 2 ? p->nents : p->nmeta / 2;
    named *tmp = malloc((size_t)(m ? m : 1) * sizeof *tmp);
    f->by_name = malloc((size_t)(p->nents ? p->nents : 1) * sizeof *f->by_name);
    f->meta_by_key = malloc((size_t)(p->nmeta ? p->nmeta : 1) * sizeof *f->meta_by_key);
    if (!tmp || !f->by_name || !f->meta_by_key) { free(tmp); return fail(p, "out of memory"); }
    int dup;
    for (int i = 0; i < p->nents; i++) tmp[i] = (named){p->ents[i].t.name, i};
    if ((dup = sort_names(tmp, f->by_name, p->nents)) >= 0) {
        free(tmp);
        return fail(p, "duplicate tensor name %s", show(p->ents[dup].t.name).s);
    }
    f->nmeta = p->nmeta / 2;
    for (int i = 0; i < f->nmeta; i++) tmp[i] = (named){p->meta[2 * i], i};
    if ((dup = sort_names(tmp, f->meta_by_key, f->nmeta)) >= 0) {
        free(tmp);
        return fail(p, "duplicate metadata key %s", show(p->meta[2 * dup]).s);
    }
    free(tmp);
    return 0;
}

/* Each tensor's byte count must follow from its shape, and the ranges,
 * sorted by begin, must tile [0, dlen) exactly: contiguous from 0, no gap,
 * no overlap, ending at dlen.  Entries are already sorted by offset. */
static int check_layout(parser *p, uint64_t dlen)
{
    uint64_t pos = 0;
    for (int i = 0; i < p->nents; i++) {
        entry *e = &p->ents[i];
        shown_name shown = show(e->t.name);
        const char *nm = shown.s;
        uint64_t nbytes;
        if (e->begin > e->end)
            return fail(p, "tensor %s: data_offsets begin %llu > end %llu", nm,
                        (unsigned long long)e->begin, (unsigned long long)e->end);
        if (shape_bytes(e->t.shape, e->t.ndim, dtype_sizes[e->t.dtype], &nbytes))
            return fail(p, "tensor %s: shape size overflows", nm);
        if (nbytes != e->end - e->begin)
            return fail(p, "tensor %s: shape and dtype need %llu bytes but data_offsets span %llu", nm,
                        (unsigned long long)nbytes, (unsigned long long)(e->end - e->begin));
        if (e->end > dlen)
            return fail(p, "tensor %s: data_offsets end %llu is past the end of the data buffer (%llu bytes)",
                        nm, (unsigned long long)e->end, (unsigned long long)dlen);
        if (e->begin < pos)
            return fail(p, "tensor %s: data_offsets [%llu, %llu) overlap the previous tensor", nm,
                        (unsigned long long)e->begin, (unsigned long long)e->end);
        if (e->begin > pos)
            return fail(p, "tensor %s: gap in the data buffer before offset %llu (previous data ends at %llu)",
                        nm, (unsigned long long)e->begin, (unsigned long long)pos);
        e->t.nbytes = (size_t)nbytes;
        pos = e->end;
    }
    if (pos != dlen)
        return fail(p, "%llu trailing bytes after the last tensor in the data buffer",
                    (unsigned long long)(dlen - pos));
    return 0;
}

/* Where the tensors' bytes come from: the file's bytes in memory
 * (ag_st_parse), or the file itself, read front to back from just after
 * its header (ag_st_load): straight into their places, with no copy of
 * the whole file in between. */
typedef struct {
    const unsigned char *mem;   /* the whole file, or NULL: read fd */
    int fd;
    size_t len;                 /* the file's length, for messages */
} source;

/* n bytes of fd into dst.  0, or -1 with *err_no = errno after a read
 * error, 0 when the file ended first. */
static int read_full(int fd, void *dst, size_t n, int *err_no)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (unsigned char *)dst + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            *err_no = r < 0 ? errno : 0;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/* read_full's failure, said */
static int read_failed(parser *p, int err_no, const source *src)
{
    return err_no ? fail(p, "read error: %s", strerror(err_no))
                  : fail(p, "file shrank while being read (expected %zu bytes)", src->len);
}

static int skipped(const parser *p, const ag_st_tensor *t)
{
    return p->skip && strncmp(t->name, p->skip, strlen(p->skip)) == 0;
}

static int nonfinite_found(parser *p, const ag_st_tensor *t)
{
    return fail(p, "tensor %s: %s data contains NaN or Inf", show(t->name).s, dtype_names[t->dtype]);
}

/* A tensor that is not kept (p->skip, which only ag_st_load_except sets:
 * the source is a file): read through one buffer of CHUNK bytes (a
 * multiple of every element size), the same for every such tensor, and
 * checked there, so it costs no memory of its size. */
#define CHUNK ((size_t)1 << 18)
static int check_unkept(parser *p, const ag_st_tensor *t, const source *src)
{
    if (!p->chunk && !(p->chunk = malloc(CHUNK))) return fail(p, "out of memory");
    int bad = 0, err_no = 0, cut = 0;
    for (size_t done = 0, n; done < t->nbytes && !bad && !cut; done += n) {
        n = t->nbytes - done < CHUNK ? t->nbytes - done : CHUNK;
        cut = read_full(src->fd, p->chunk, n, &err_no);
        bad = !cut && has_nonfinite(p->chunk, n, t->dtype);
    }
    if (cut)
        return read_failed(p, err_no, src);
    return bad ? nonfinite_found(p, t) : 0;
}

/* The tensors as the header describes them, data NULL: what ag_st_get and
 * ag_st_at answer from, before the bytes are read (an ag_st_load_placed
 * hook) and after. */
static int list_tensors(parser *p, ag_st_file *f)
{
    f->tensors = malloc((size_t)(p->nents ? p->nents : 1) * sizeof *f->tensors);
    if (!f->tensors) return fail(p, "out of memory");
    for (int i = 0; i < p->nents; i++) {
        f->tensors[i] = p->ents[i].t;
        f->tensors[i].data = NULL;
    }
    f->n = p->nents;
    return 0;
}

/* Places every tensor's bytes in its own ALIGN-aligned place (or where an
 * ag_st_load_placed hook put it) and checks floats.  check_layout has made
 * the entries, in offset order, tile the data buffer, so a file is read
 * once, in order. */
static int copy_data(parser *p, ag_st_file *f, const source *src)
{
    size_t total = ALIGN;
    for (int i = 0; i < p->nents; i++) {
        if (skipped(p, &p->ents[i].t) || (p->placed && p->placed[i]))
            continue;
        size_t padded = (p->ents[i].t.nbytes + ALIGN - 1) / ALIGN * ALIGN;
        if (padded < p->ents[i].t.nbytes || total > SIZE_MAX - padded) return fail(p, "out of memory");
        total += padded;
    }
    f->data = ag_big_alloc(total, 1);   /* ALIGN-aligned; large: on 2 MB pages (see bigbuf.c) */
    if (!f->data) return fail(p, "out of memory");
    size_t at = 0;
    for (int i = 0; i < p->nents; i++) {
        ag_st_tensor *t = &f->tensors[i];
        if (skipped(p, t)) {
            t->data = NULL;             /* read and checked, not kept, even if placed */
            if (check_unkept(p, t, src))
                return -1;
            continue;
        }
        int own = !(p->placed && p->placed[i]);
        unsigned char *dst = own ? f->data + at : (unsigned char *)t->data;
        t->data = NULL;                 /* until its bytes are in and checked */
        int err_no = 0;
        if (src->mem && t->nbytes)
            memcpy(dst, src->mem + 8 + p->n + p->ents[i].begin, t->nbytes);
        else if (!src->mem && read_full(src->fd, dst, t->nbytes, &err_no))
            return read_failed(p, err_no, src);
        if (has_nonfinite(dst, t->nbytes, t->dtype))
            return nonfinite_found(p, t);
        t->data = dst;
        if (own)
            at += (t->nbytes + ALIGN - 1) / ALIGN * ALIGN;
    }
    return 0;
}

int ag_st_place(ag_st_file *f, const char *name, void *dst)
{
    if (!f || !f->placed || !name || !dst) return -1;
    const ag_st_tensor *t = ag_st_get(f, name);
    if (!t) return -1;
    int i = (int)(t - f->tensors);
    f->tensors[i].data = dst;
    f->placed[i] = 1;
    return 0;
}

static uint64_t read_u64le(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

/* What torch.save writes: a zip archive (PyTorch 1.6 on) or, in the legacy
 * format, a bare pickle stream, which opens with the PROTO opcode 0x80 and a
 * protocol number 2..5.  Read as a length field, either is far too large. */
static int looks_like_pickle(const unsigned char *b, size_t len)
{
    if (len >= 4 && memcmp(b, "PK\x03\x04", 4) == 0) return 1;
    return len >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5;
}

/* What ag_st_load_placed calls before reading the tensors' bytes. */
typedef struct {
    int (*hook)(void *user, ag_st_file *f, char *err, size_t errlen);
    void *user;
} placer;

/* The hook, given f with its header read (metadata and tensors, no data),
 * and what it placed recorded in p; 0, or -1 with its message in p->err. */
static int run_hook(parser *p, ag_st_file *f, const placer *pl)
{
    if (!pl) return 0;
    f->meta = p->meta;
    f->placed = p->placed = calloc((size_t)(p->nents ? p->nents : 1), 1);
    if (!p->placed) return fail(p, "out of memory");
    int rc = pl->hook(pl->user, f, p->err, p->errlen);
    f->placed = NULL;                   /* ag_st_place works only in the hook */
    return rc ? -1 : 0;
}

/* A file of len bytes, given its first bytes b -- at least 8 plus its
 * header length of them, or all of a file whose header length is wrong --
 * and the source of the rest. */
static ag_st_file *parse_file(const unsigned char *b, size_t len, const source *src, const char *skip,
                              const placer *pl, const char *label, char *err, size_t errlen)
{
    parser p = {.label = label, .err = err, .errlen = errlen, .skip = skip};
    if (len < 8) {
        fail(&p, "file is %zu byte%s, shorter than the 8-byte header length", len, len == 1 ? "" : "s");
        return NULL;
    }
    uint64_t hlen = read_u64le(b);
    if (hlen == 0) { fail(&p, "header length is 0"); return NULL; }
    if ((hlen > AG_ST_MAX_HEADER || hlen > len - 8) && looks_like_pickle(b, len)) {
        fail(&p, "not a safetensors file (this looks like a PyTorch pickle: save with safetensors)");
        return NULL;
    }
    /* A header is a JSON object: without its '{' after the length, the file
     * is something else (a text, an image), not a damaged checkpoint. */
    const char *what = len > 8 && b[8] != '{' ? "not a safetensors file: no JSON header follows its first 8 "
                                                 "bytes, whose header length " : "header length ";
    if (hlen > AG_ST_MAX_HEADER) {
        fail(&p, "%s%llu exceeds the limit of %llu bytes", what, (unsigned long long)hlen, AG_ST_MAX_HEADER);
        return NULL;
    }
    if (hlen > len - 8) {
        fail(&p, "%s%llu runs past the end of the file (%zu bytes)", what, (unsigned long long)hlen, len);
        return NULL;
    }
    p.h = b + 8;
    p.n = (size_t)hlen;
    size_t bad = utf8_bad_at(p.h, p.n);
    if (bad != p.n) { fail(&p, "header is not valid UTF-8 (byte %zu of the header)", bad); return NULL; }

    ag_st_file *f = calloc(1, sizeof *f);
    p.pool = malloc(p.n + 1);
    if (!f || !p.pool) {
        fail(&p, "out of memory");
        free(f);
        free(p.pool);
        return NULL;
    }
    f->strings = p.pool;
    int rc = parse_header(&p);
    if (!rc && p.nents > 1) qsort(p.ents, (size_t)p.nents, sizeof *p.ents, cmp_offsets);
    rc = rc || build_indexes(&p, f) || check_layout(&p, len - 8 - p.n) || list_tensors(&p, f)
         || run_hook(&p, f, pl) || copy_data(&p, f, src);
    f->meta = p.meta;
    free(p.ents);
    free(p.chunk);
    free(p.placed);
    if (rc) { ag_st_free(f); return NULL; }
    return f;
}

ag_st_file *ag_st_parse(const void *buf, size_t len, const char *label, char *err, size_t errlen)
{
    if (!buf && len) {
        ag_set_err(err, errlen, "%s: no data", label ? label : "(buffer)");
        return NULL;
    }
    const source src = {buf, -1, len};
    return parse_file(buf, len, &src, NULL, NULL, label ? label : "(buffer)", err, errlen);
}

ag_st_file *ag_st_load(const char *path, char *err, size_t errlen)
{
    return ag_st_load_except(path, NULL, err, errlen);
}

static ag_st_file *load(const char *path, const char *prefix, const placer *pl, char *err, size_t errlen);

ag_st_file *ag_st_load_except(const char *path, const char *prefix, char *err, size_t errlen)
{
    return load(path, prefix, NULL, err, errlen);
}

ag_st_file *ag_st_load_placed(const char *path, const char *prefix,
                              int (*hook)(void *user, ag_st_file *f, char *err, size_t errlen), void *user,
                              char *err, size_t errlen)
{
    if (!hook) return load(path, prefix, NULL, err, errlen);
    const placer pl = {hook, user};
    return load(path, prefix, &pl, err, errlen);
}

static ag_st_file *load(const char *path, const char *prefix, const placer *pl, char *err, size_t errlen)
{
    if (!path || !*path) { ag_set_err(err, errlen, "(no path): empty checkpoint path"); return NULL; }
    /* O_NONBLOCK: opening a FIFO that no one writes would wait for a
     * writer, forever; so opened, it is seen for what it is and refused.
     * A regular file is then read blocking, as usual. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) { ag_set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno)); return NULL; }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ag_set_err(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode)) {
        ag_set_err(err, errlen, "%s: %s", path, S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file");
        close(fd);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl == -1 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) == -1) {
        ag_set_err(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (st.st_size < 0 || (uint64_t)st.st_size >= SIZE_MAX) {
        ag_set_err(err, errlen, "%s: file too large", path);
        close(fd);
        return NULL;
    }
    /* The first bytes, and the whole header when its length is plausible
     * (else parse_file stops at the length, never reading past b[8]); then
     * the tensors, read by copy_data into their places; and last a check
     * that nothing follows the size fstat promised. */
    const size_t size = (size_t)st.st_size;
    unsigned char first[9], *head = first;
    int err_no = 0, bad = read_full(fd, first, size < sizeof first ? size : sizeof first, &err_no);
    const uint64_t hlen = size >= 8 ? read_u64le(first) : 0;
    if (!bad && hlen > 0 && hlen <= AG_ST_MAX_HEADER && hlen <= size - 8) {
        head = malloc((size_t)hlen + 8);
        if (!head) {
            ag_set_err(err, errlen, "%s: out of memory reading a header of %llu bytes", path, (unsigned long long)hlen);
            close(fd);
            return NULL;
        }
        memcpy(head, first, sizeof first);
        bad = read_full(fd, head + sizeof first, (size_t)hlen + 8 - sizeof first, &err_no);
    }
    ag_st_file *f = NULL;
    if (!bad) {
        const source src = {NULL, fd, size};
        f = parse_file(head, size, &src, prefix, pl, path, err, errlen);
    }
    /* Past the end fstat gave, whatever was parsed: a file that grew (or
     * one of /proc's, whose size reads as 0) is named as such. */
    unsigned char extra;
    ssize_t r;
    do r = pread(fd, &extra, 1, (off_t)size); while (r < 0 && errno == EINTR);
    if (!bad && r > 0) {
        ag_set_err(err, errlen, "%s: file grew while being read (expected %zu bytes)", path, size);
        ag_st_free(f);
        f = NULL;
    } else if (!bad && r < 0 && f) {
        err_no = errno;
        bad = 1;
    }
    if (bad) {
        if (err_no) ag_set_err(err, errlen, "%s: read error: %s", path, strerror(err_no));
        else ag_set_err(err, errlen, "%s: file shrank while being read (expected %zu bytes)", path, size);
        ag_st_free(f);
        f = NULL;
    }
    if (head != first) free(head);
    close(fd);
    return f;
}

/* ---- floating-point values as float ---------------------------------------- */

static float from_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* IEEE half: sign 1, exponent 5 (bias 15), fraction 10.  Every half is a
 * float: a normal one keeps its fraction (shifted up 13 bits) and re-biases
 * its exponent to 127; a subnormal one, frac * 2^-24, is normalized: with k
 * the top set bit of frac, it is 1.f * 2^(k - 24), exponent field k + 103. */
static float f16_to_f32(unsigned h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1F, frac = h & 0x3FF;
    if (e == 0x1F) return from_bits(sign | 0x7F800000u | frac << 13);   /* inf, NaN */
    if (e != 0) return from_bits(sign | (e + 112) << 23 | frac << 13);
    if (frac == 0) return from_bits(sign);                                 /* +-0 */
    int k = 9;
    while (!(frac >> k)) k--;
    return from_bits(sign | (uint32_t)(k + 103) << 23 | ((frac << (23 - k)) & 0x7FFFFF));
}

int ag_st_to_f32(const ag_st_tensor *t, float *out, char *err, size_t errlen)
{
    if (!t || (!out && t->nbytes)) {
        ag_set_err(err, errlen, "ag_st_to_f32: %s is NULL", t ? "out" : "the tensor");
        return -1;
    }
    if (!t->data && t->nbytes) {
        ag_set_err(err, errlen, "ag_st_to_f32: tensor %s was not kept (ag_st_load_except)", show(t->name).s);
        return -1;
    }
    const unsigned char *p = t->data;
    size_t size = ag_st_dtype_size(t->dtype), n = size ? t->nbytes / size : 0;
    switch (t->dtype) {
    case AG_ST_F32:
        if (n) memcpy(out, p, n * sizeof *out);
        return 0;
    case AG_ST_F16:
        for (size_t i = 0; i < n; i++) out[i] = f16_to_f32((unsigned)p[2 * i] | (unsigned)p[2 * i + 1] << 8);
        return 0;
    case AG_ST_BF16:   /* the upper half of a float (the reader stands alone: the fuzzers link it by itself) */
        for (size_t i = 0; i < n; i++) out[i] = from_bits((uint32_t)p[2 * i] << 16 | (uint32_t)p[2 * i + 1] << 24);
        return 0;
    case AG_ST_F64:
        for (size_t i = 0; i < n; i++) {
            uint64_t bits = read_u64le(p + 8 * i);
            double d;
            memcpy(&d, &bits, sizeof d);
            out[i] = (float)d;   /* rounds to nearest, ties to even */
            if (isinf(out[i]) && !isinf(d)) {
                ag_set_err(err, errlen, "tensor %s: F64 value %.9g (element %zu) is too large for F32", show(t->name).s,
                        d, i);
                return -1;
            }
        }
        return 0;
    default:
        ag_set_err(err, errlen, "tensor %s: dtype %s is not a floating-point type", show(t->name).s,
                ag_st_dtype_name(t->dtype));
        return -1;
    }
}

int ag_st_count(const ag_st_file *f) { return f ? f->n : 0; }

const ag_st_tensor *ag_st_at(const ag_st_file *f, int i)
{
    return f && i >= 0 && i < f->n ? &f->tensors[i] : NULL;
}

const ag_st_tensor *ag_st_get(const ag_st_file *f, const char *name)
{
    if (!f || !name) return NULL;
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const ag_st_tensor *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid - 1; else lo = mid + 1;
    }
    return NULL;
}

const char *ag_st_meta(const ag_st_file *f, const char *key)
{
    if (!f || !key) return NULL;
    int lo = 0, hi = f->nmeta - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int pair = f->meta_by_key[mid];
        int c = strcmp(key, f->meta[2 * pair]);
        if (c == 0) return f->meta[2 * pair + 1];
        if (c < 0) hi = mid - 1; else lo = mid + 1;
    }
    return NULL;
}

int ag_st_meta_count(const ag_st_file *f) { return f ? f->nmeta : 0; }

const char *ag_st_meta_key(const ag_st_file *f, int i)
{
    return f && i >= 0 && i < f->nmeta ? f->meta[2 * i] : NULL;
}

void ag_st_drop_data(ag_st_file *f)
{
    if (!f) return;
    for (int i = 0; i < f->n; i++) f->tensors[i].data = NULL;
    ag_big_free(f->data);
    f->data = NULL;
}

void ag_st_free(ag_st_file *f)
{
    if (!f) return;
    free(f->tensors);
    free(f->by_name);
    free(f->meta);
    free(f->meta_by_key);
    free(f->strings);
    ag_big_free(f->data);
    free(f);
}

/* ---- writer ----------------------------------------------------------------- */

typedef struct sbuf { char *p; size_t len, cap; int oom; } sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *np = realloc(b->p, cap);
        if (!np) { b->oom = 1; return; }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* A JSON string literal.  Only '"', '\\' and control bytes need escapes;
 * UTF-8 goes through as it is (checked valid beforehand). */
static void sb_json(sbuf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    sb_put(b, "\"", 1);
    size_t run = 0;   /* bytes copied in one go between escapes */
    for (const char *c = s;; c++) {
        unsigned char ch = (unsigned char)*c;
        if (ch && ch >= 0x20 && ch != '"' && ch != '\\') { run++; continue; }
        sb_put(b, c - run, run);
        run = 0;
        if (!ch) break;
        char esc[7] = {'\\', (char)ch, 0};
        if (ch == '\n') esc[1] = 'n';
        else if (ch == '\t') esc[1] = 't';
        else if (ch == '\r') esc[1] = 'r';
        else if (ch < 0x20) {
            esc[1] = 'u'; esc[2] = '0'; esc[3] = '0';
            esc[4] = hex[ch >> 4]; esc[5] = hex[ch & 15]; esc[6] = 0;
        }
        sb_str(b, esc);
    }
    sb_put(b, "\"", 1);
}

static void sb_u64(sbuf *b, uint64_t v)
{
    char s[24];
    snprintf(s, sizeof s, "%llu", (unsigned long long)v);
    sb_str(b, s);
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Returns a duplicated string among n, or NULL. */
static const char *find_duplicate(const char **s, int n)
{
    qsort(s, (size_t)n, sizeof *s, cmp_cstr);
    for (int i = 1; i < n; i++)
        if (strcmp(s[i - 1], s[i]) == 0) return s[i];
    return NULL;
}

static int valid_utf8(const char *s)
{
    size_t n = strlen(s);
    return utf8_bad_at((const unsigned char *)s, n) == n;
}

/* Everything that would make the file unreadable is refused up front. */
static int check_inputs(const char *path, const ag_st_tensor *ts, int n, const char *const *meta,
                        int nmeta, char *err, size_t errlen)
{
    if (n < 0 || nmeta < 0 || (n > 0 && !ts) || (nmeta > 0 && !meta)) {
        ag_set_err(err, errlen, "%s: bad tensor or metadata count", path);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const ag_st_tensor *t = &ts[i];
        uint64_t need;
        const char *why = NULL;
        if (!t->name || !*t->name) { ag_set_err(err, errlen, "%s: tensor %d has no name", path, i); return -1; }
        if (strcmp(t->name, METADATA_KEY) == 0) why = "name is reserved";
        else if (!valid_utf8(t->name)) why = "name is not valid UTF-8";
        else if (ag_st_dtype_size(t->dtype) == 0) why = "unknown dtype";
        else if (t->ndim < 0 || t->ndim > AG_ST_MAX_DIMS) why = "ndim must be 0..8";
        for (int d = 0; !why && d < t->ndim; d++)
            if (t->shape[d] < 0) why = "negative dim";
        if (!why && shape_bytes(t->shape, t->ndim, ag_st_dtype_size(t->dtype), &need)) why = "shape overflows";
        if (!why && need != t->nbytes) why = "nbytes does not match shape and dtype";
        if (!why && t->nbytes && !t->data) why = "data is NULL";
        if (!why && has_nonfinite(t->data, t->nbytes, t->dtype)) why = "data contains NaN or Inf";
        if (why) { ag_set_err(err, errlen, "%s: tensor %s: %s", path, show(t->name).s, why); return -1; }
    }
    for (int i = 0; i < 2 * nmeta; i++) {
        if (!meta[i]) { ag_set_err(err, errlen, "%s: metadata entry %d is NULL", path, i / 2); return -1; }
        if (!valid_utf8(meta[i])) {
            ag_set_err(err, errlen, "%s: metadata %s %s is not valid UTF-8", path, i % 2 ? "value" : "key",
                    show(meta[i]).s);
            return -1;
        }
    }
    int m = n > nmeta ? n : nmeta;
    const char **names = malloc((size_t)(m ? m : 1) * sizeof *names);
    if (!names) { ag_set_err(err, errlen, "%s: out of memory", path); return -1; }
    for (int i = 0; i < n; i++) names[i] = ts[i].name;
    const char *dup = find_duplicate(names, n);
    if (dup) ag_set_err(err, errlen, "%s: duplicate tensor name %s", path, show(dup).s);
    if (!dup) {
        for (int i = 0; i < nmeta; i++) names[i] = meta[2 * i];
        dup = find_duplicate(names, nmeta);
        if (dup) ag_set_err(err, errlen, "%s: duplicate metadata key %s", path, show(dup).s);
    }
    free(names);
    return dup ? -1 : 0;
}

/* The 8-byte length plus the JSON, padded with spaces to a multiple of 8 so
 * the data buffer starts 8-aligned in the file. */
static int build_header(sbuf *b, const ag_st_tensor *ts, int n, const char *const *meta, int nmeta)
{
    sb_put(b, "\0\0\0\0\0\0\0\0", 8);
    sb_str(b, "{");
    if (nmeta > 0) {
        sb_str(b, "\"" METADATA_KEY "\":{");
        for (int i = 0; i < nmeta; i++) {
            if (i) sb_str(b, ",");
            sb_json(b, meta[2 * i]);
            sb_str(b, ":");
            sb_json(b, meta[2 * i + 1]);
        }
        sb_str(b, "}");
    }
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        const ag_st_tensor *t = &ts[i];
        if (i || nmeta > 0) sb_str(b, ",");
        sb_json(b, t->name);
        sb_str(b, ":{\"dtype\":\"");
        sb_str(b, dtype_names[t->dtype]);
        sb_str(b, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            if (d) sb_str(b, ",");
            sb_u64(b, (uint64_t)t->shape[d]);
        }
        sb_str(b, "],\"data_offsets\":[");
        sb_u64(b, off);
        sb_str(b, ",");
        off += t->nbytes;
        sb_u64(b, off);
        sb_str(b, "]}");
    }
    sb_str(b, "}");
    while (b->len % 8) sb_str(b, " ");
    if (b->oom) return -1;
    uint64_t hlen = b->len - 8;
    for (int i = 0; i < 8; i++) b->p[i] = (char)(hlen >> (8 * i) & 0xFF);
    return 0;
}

static int write_all(FILE *fp, const void *p, size_t n)
{
    return n == 0 || fwrite(p, 1, n, fp) == n ? 0 : -1;
}

/* The header, then every tensor's bytes; inputs already checked. */
static int write_checked(FILE *fp, const char *label, const ag_st_tensor *tensors, int n,
                         const char *const *meta, int nmeta, char *err, size_t errlen)
{
    sbuf hdr = {0};
    if (build_header(&hdr, tensors, n, meta, nmeta)) {
        ag_set_err(err, errlen, "%s: out of memory", label);
        free(hdr.p);
        return -1;
    }
    int rc = write_all(fp, hdr.p, hdr.len);
    for (int i = 0; i < n && !rc; i++) rc = write_all(fp, tensors[i].data, tensors[i].nbytes);
    if (rc) ag_set_err(err, errlen, "%s: write failed: %s", label, strerror(errno));
    free(hdr.p);
    return rc;
}

int ag_st_check(const char *label, const ag_st_tensor *tensors, int n, const char *const *meta, int nmeta,
                char *err, size_t errlen)
{
    return check_inputs(label ? label : "(checkpoint)", tensors, n, meta, nmeta, err, errlen);
}

int ag_st_write(FILE *f, const char *label, const ag_st_tensor *tensors, int n, const char *const *meta,
                int nmeta, char *err, size_t errlen)
{
    if (!label) label = "(stream)";
    if (!f) { ag_set_err(err, errlen, "%s: no stream to write to", label); return -1; }
    if (check_inputs(label, tensors, n, meta, nmeta, err, errlen)) return -1;
    return write_checked(f, label, tensors, n, meta, nmeta, err, errlen);
}

int ag_st_save(const char *path, const ag_st_tensor *tensors, int n, const char *const *meta, int nmeta,
               char *err, size_t errlen)
{
    if (!path || !*path) { ag_set_err(err, errlen, "(no path): empty checkpoint path"); return -1; }
    if (check_inputs(path, tensors, n, meta, nmeta, err, errlen)) return -1;
    ag_atomic_file out;
    if (ag_atomic_open(&out, path, err, errlen)) return -1;
    if (write_checked(out.f, path, tensors, n, meta, nmeta, err, errlen)) {
        ag_atomic_abort(&out);
        return -1;
    }
    return ag_atomic_commit(&out, err, errlen);
}
