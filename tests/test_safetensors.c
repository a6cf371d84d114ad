/*
 * test_safetensors.c - the checkpoint file layer: round trips through a real
 * file, the byte layout checked by hand, atomic replacement when saving
 * fails, and a catalogue of broken files each rejected for its own reason.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "attograd_io.h"

#define CORPUS_DIR "tests/corpus/safetensors"

static char dir[64];   /* scratch directory for this run */

/* Declares char var[] holding dir/name. */
#define PATH_IN(var, name)                                                   \
    char var[300];                                                           \
    snprintf(var, sizeof var, "%s/%s", dir, name)

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, fp);
    fclose(fp);
    return b;
}

static void spill(const char *path, const void *b, size_t len)
{
    FILE *fp = fopen(path, "wb");
    if (!fp) { perror(path); exit(1); }
    fwrite(b, 1, len, fp);
    fclose(fp);
}

static uint64_t le64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

static void put_le64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
}

/* A file by hand: length, the JSON exactly as given (no padding), data. */
static unsigned char *mk(const char *json, const void *data, size_t dlen, size_t *len)
{
    size_t n = strlen(json);
    unsigned char *b = malloc(8 + n + dlen + 1);
    put_le64(b, n);
    memcpy(b + 8, json, n);
    if (dlen) memcpy(b + 8 + n, data, dlen);
    *len = 8 + n + dlen;
    return b;
}

/* Files in dir other than "." and "..", to catch leftover temp files. */
static int count_entries(const char *d)
{
    DIR *dp = opendir(d);
    if (!dp) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dp)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(dp);
    return n;
}

static int one_line(const char *s) { return strchr(s, '\n') == NULL && strchr(s, '\r') == NULL; }

/* ---- round trip --------------------------------------------------------- */

#define WEIRD_NAME "we\"ird\\name\n\t\x01 \xc3\xa9 \xe2\x98\x83 \xf0\x9d\x84\x9e"
#define WEIRD_NAME_JSON "\"we\\\"ird\\\\name\\n\\t\\u0001 \xc3\xa9 \xe2\x98\x83 \xf0\x9d\x84\x9e\""

static float wte[12];
static double pi_val = 3.141592653589793;
static int32_t ids[5] = {-1, 0, 7, INT32_MIN, INT32_MAX};
static int64_t big[4] = {INT64_MIN, -2, 3, INT64_MAX};
static uint64_t step[1] = {UINT64_MAX};
static uint8_t bytes3[3] = {0, 0x80, 0xff};
static float weird[2] = {-0.0f, 1e-45f};

enum { NT = 8 };
static ag_st_tensor sample[NT];
static const char *const sample_meta[] = {
    "format", "pt",
    "note", "quote \" backslash \\ newline \n tab \t ctrl \x1f unicode \xc3\xa9\xf0\x9d\x84\x9e",
    "key with \"quotes\"", "v",
};

static void init_sample(void)
{
    for (int i = 0; i < 12; i++) wte[i] = 0.5f * (float)i - 1.0f;
    wte[11] = 3.4028235e38f;   /* FLT_MAX: large but finite */
    ag_st_tensor t[NT] = {
        {"wte", AG_ST_F32, 2, {4, 3}, wte, sizeof wte},
        {"scalar", AG_ST_F64, 0, {0}, &pi_val, 8},
        {"bytes", AG_ST_U8, 1, {3}, bytes3, 3},      /* odd size: the rest is unaligned in the file */
        {"ids", AG_ST_I32, 1, {5}, ids, sizeof ids},
        {"empty", AG_ST_F32, 2, {0, 7}, NULL, 0},     /* zero elements: allowed, no bytes */
        {"big", AG_ST_I64, 2, {2, 2}, big, sizeof big},
        {"step", AG_ST_U64, 1, {1}, step, 8},
        {WEIRD_NAME, AG_ST_F32, 1, {2}, weird, sizeof weird},
    };
    memcpy(sample, t, sizeof t);
}

static void test_round_trip(void)
{
    char err[512] = "";
    PATH_IN(path, "model.safetensors");
    int rc = ag_st_save(path, sample, NT, sample_meta, 3, err, sizeof err);
    CHECK(rc == 0, "save failed: %s", err);
    CHECK(count_entries(dir) == 1, "a temp file was left behind (%d entries)", count_entries(dir));

    ag_st_file *f = ag_st_load(path, err, sizeof err);
    CHECK(f != NULL, "load failed: %s", err);
    if (!f) return;
    CHECK(ag_st_count(f) == NT, "count %d", ag_st_count(f));
    for (int i = 0; i < NT && i < ag_st_count(f); i++) {
        const ag_st_tensor *in = &sample[i], *out = ag_st_get(f, in->name);
        CHECK(out != NULL, "tensor %d missing", i);
        if (!out) continue;
        /* the writer lays tensors out in the given order, so offset order is the same */
        CHECK(ag_st_at(f, i) == out, "tensor %d not at position %d", i, i);
        CHECK(strcmp(out->name, in->name) == 0, "name %d", i);
        CHECK(out->dtype == in->dtype && out->ndim == in->ndim, "dtype/ndim of %d", i);
        for (int d = 0; d < in->ndim; d++) CHECK(out->shape[d] == in->shape[d], "shape %d[%d]", i, d);
        CHECK(out->nbytes == in->nbytes, "nbytes of %d: %zu", i, out->nbytes);
        CHECK(out->data != NULL && (uintptr_t)out->data % 64 == 0, "data of %d not 64-aligned", i);
        CHECK(in->nbytes == 0 || memcmp(out->data, in->data, in->nbytes) == 0, "data of %d differs", i);
    }
    /* typed reads straight from the pointer, thanks to the alignment */
    const ag_st_tensor *b = ag_st_get(f, "big");
    CHECK(b && ((const int64_t *)b->data)[0] == INT64_MIN && ((const int64_t *)b->data)[3] == INT64_MAX,
          "int64 extremes");
    const ag_st_tensor *w = ag_st_get(f, WEIRD_NAME);
    CHECK(w && signbit(((const float *)w->data)[0]), "-0.0 keeps its sign");
    CHECK(ag_st_get(f, "nope") == NULL && ag_st_get(f, "") == NULL, "absent names");
    CHECK(ag_st_at(f, -1) == NULL && ag_st_at(f, NT) == NULL, "out-of-range at");

    CHECK(ag_st_meta_count(f) == 3, "meta count %d", ag_st_meta_count(f));
    for (int i = 0; i < 3; i++) {
        const char *k = ag_st_meta_key(f, i), *v = ag_st_meta(f, sample_meta[2 * i]);
        CHECK(k && strcmp(k, sample_meta[2 * i]) == 0, "meta key %d in file order", i);
        CHECK(v && strcmp(v, sample_meta[2 * i + 1]) == 0, "meta value %d", i);
    }
    CHECK(ag_st_meta(f, "absent") == NULL && ag_st_meta_key(f, 3) == NULL, "absent metadata");
    ag_st_free(f);
}

/* The layout read back without the reader: length field, padding, the JSON
 * entries with offsets summed here, and the data buffer as the plain
 * concatenation of the inputs. */
static void test_layout(void)
{
    size_t len = 0;
    PATH_IN(model, "model.safetensors");
    unsigned char *b = slurp(model, &len);
    CHECK(b != NULL && len >= 8, "cannot read back the file");
    if (!b || len < 8) { free(b); return; }
    uint64_t n = le64(b);
    size_t total = 0;
    for (int i = 0; i < NT; i++) total += sample[i].nbytes;
    CHECK((8 + n) % 8 == 0, "8 + header length %llu not a multiple of 8", (unsigned long long)n);
    CHECK(8 + n + total == len, "file is %zu bytes, expected %llu", len, (unsigned long long)(8 + n + total));
    if (8 + n + total != len) { free(b); return; }

    char *json = malloc(n + 1);
    memcpy(json, b + 8, n);
    json[n] = '\0';
    CHECK(json[0] == '{', "header starts with %c", json[0]);
    size_t end = n;
    while (end > 0 && json[end - 1] == ' ') end--;
    CHECK(end > 0 && json[end - 1] == '}' && n - end < 8, "padding: %zu spaces after the object", n - end);
    CHECK(strstr(json, "\"__metadata__\":{\"format\":\"pt\",") != NULL, "metadata entry");
    CHECK(strstr(json, "\"quote \\\" backslash \\\\ newline \\n tab \\t ctrl \\u001f unicode") != NULL,
          "metadata value escaped");
    CHECK(strstr(json, "\"key with \\\"quotes\\\"\":\"v\"") != NULL, "metadata key escaped");
    uint64_t off = 0;
    for (int i = 0; i < NT; i++) {
        const ag_st_tensor *t = &sample[i];
        char want[320], shape[96] = "", qname[64];
        for (int d = 0; d < t->ndim; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? "," : "",
                     (long long)t->shape[d]);
        if (i == NT - 1) snprintf(qname, sizeof qname, "%s", WEIRD_NAME_JSON);
        else snprintf(qname, sizeof qname, "\"%.40s\"", t->name);   /* plain names need no escapes */
        snprintf(want, sizeof want, "%s:{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%llu,%llu]}",
                 qname, ag_st_dtype_name(t->dtype), shape, (unsigned long long)off,
                 (unsigned long long)(off + t->nbytes));
        CHECK(strstr(json, want) != NULL, "header lacks %s", want);
        if (t->nbytes)
            CHECK(memcmp(b + 8 + n + off, t->data, t->nbytes) == 0, "data of %s not at offset %llu", t->name,
                  (unsigned long long)off);
        off += t->nbytes;
    }
    free(json);
    free(b);
}

/* Escapes in names written by someone else: \uXXXX, surrogate pairs, \/. */
static void test_reader_escapes(void)
{
    char err[512] = "";
    const char *json =
        "{\"\\u00e9\\ud834\\udd1e\\u0041\\/\\b\\f\\r\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]},"
        "\n \"__metadata__\" : {\"k\\u00E9\" : \"\\\"v\\\\\"}\t}\r\n  ";
    size_t len;
    unsigned char *b = mk(json, "\x2a", 1, &len);
    ag_st_file *f = ag_st_parse(b, len, "esc", err, sizeof err);
    CHECK(f != NULL, "escapes: %s", err);
    if (f) {
        const ag_st_tensor *t = ag_st_get(f, "\xc3\xa9\xf0\x9d\x84\x9e" "A/\b\f\r");
        CHECK(t && t->ndim == 0 && t->nbytes == 1 && *(const uint8_t *)t->data == 42, "decoded name");
        CHECK(ag_st_meta(f, "k\xc3\xa9") && strcmp(ag_st_meta(f, "k\xc3\xa9"), "\"v\\") == 0, "decoded meta");
    }
    ag_st_free(f);
    free(b);

    /* empty header object, no tensors, no data: a valid (useless) file */
    b = mk("{}      ", NULL, 0, &len);
    f = ag_st_parse(b, len, "empty", err, sizeof err);
    CHECK(f && ag_st_count(f) == 0 && ag_st_meta_count(f) == 0, "empty file: %s", f ? "" : err);
    ag_st_free(f);
    free(b);
}

/* ---- saving: replacement and failure ------------------------------------ */

static void check_intact(const char *path, const unsigned char *old, size_t oldlen, const char *what)
{
    size_t len = 0;
    unsigned char *b = slurp(path, &len);
    CHECK(b && len == oldlen && memcmp(b, old, len) == 0, "%s: the existing file was changed", what);
    free(b);
}

static int is_symlink(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
}

/* ag_atomic_*: symlinks are followed to the file they name, long names get
 * a temp name that fits, permissions are kept, discard undoes a write. */
static void test_atomic_files(void)
{
    char err[8192] = "";
    PATH_IN(sub, "sub");
    PATH_IN(real, "sub/real");
    PATH_IN(link, "link");
    mkdir(sub, 0755);
    spill(real, "old", 3);
    chmod(real, 0640);
    CHECK(symlink("sub/real", link) == 0, "make a relative symlink");
    ag_atomic_file a;
    CHECK(ag_atomic_open(&a, link, err, sizeof err) == 0, "open through a link: %s", err);
    CHECK(a.path && strcmp(a.path, real) == 0, "target of the link: %s", a.path);
    CHECK(a.tmp && strstr(a.tmp, "/sub/real.tmp."), "temp file beside the target: %s", a.tmp);
    fputs("new", a.f);
    CHECK(ag_atomic_commit(&a, err, sizeof err) == 0, "commit through a link: %s", err);
    size_t len = 0;
    unsigned char *b = slurp(real, &len);
    CHECK(b && len == 3 && memcmp(b, "new", 3) == 0, "the link's target was replaced");
    free(b);
    CHECK(is_symlink(link), "the link is still a link");
    struct stat st;
    CHECK(stat(real, &st) == 0 && (st.st_mode & 0777) == 0640, "permissions kept (%o)", st.st_mode & 0777);
    CHECK(count_entries(sub) == 1, "nothing else beside the target");

    /* a link chain and a dangling link: the final target is created */
    PATH_IN(chain, "chain");
    PATH_IN(dangling, "sub/dangling");
    PATH_IN(made, "sub/made");
    CHECK(symlink("link", chain) == 0 && symlink("made", dangling) == 0, "make more links");
    CHECK(ag_atomic_open(&a, chain, err, sizeof err) == 0 && ag_atomic_commit(&a, err, sizeof err) == 0,
          "save through a chain: %s", err);
    CHECK(stat(real, &st) == 0 && st.st_size == 0 && is_symlink(chain), "chain: the final target replaced");
    CHECK(ag_atomic_open(&a, dangling, err, sizeof err) == 0 && ag_atomic_commit(&a, err, sizeof err) == 0,
          "save through a dangling link: %s", err);
    CHECK(stat(made, &st) == 0 && S_ISREG(st.st_mode) && is_symlink(dangling), "dangling: its target created");
    PATH_IN(loop, "loop");
    CHECK(symlink("loop", loop) == 0, "make a loop");
    err[0] = '\0';
    CHECK(ag_atomic_open(&a, loop, err, sizeof err) == -1 && strstr(err, strerror(ELOOP)) && one_line(err),
          "a symlink loop: %s", err);
    unlink(loop);
    unlink(made);
    unlink(dangling);
    unlink(chain);

    /* a name of 250 bytes is legal; "<name>.tmp.<pid>" is not, so the temp
     * name is cut to fit, and a 256-byte name is refused before writing */
    char name[260], longpath[600];
    memset(name, 'n', 250);
    strcpy(name + 250, ".st");
    name[250 - 3] = '.';
    snprintf(longpath, sizeof longpath, "%s/%.250s", dir, name);
    CHECK(ag_atomic_open(&a, longpath, err, sizeof err) == 0, "open a 250-byte name: %s", err);
    CHECK(a.tmp && strlen(strrchr(a.tmp, '/') + 1) <= 255 && strstr(a.tmp, ".tmp."), "short temp name: %s", a.tmp);
    CHECK(ag_atomic_commit(&a, err, sizeof err) == 0 && access(longpath, F_OK) == 0, "commit 250 bytes: %s", err);
    unlink(longpath);
    memset(name, 'n', 256);
    name[256] = '\0';
    snprintf(longpath, sizeof longpath, "%s/%s", dir, name);
    err[0] = '\0';
    CHECK(ag_atomic_open(&a, longpath, err, sizeof err) == -1 && strstr(err, strerror(ENAMETOOLONG)) &&
          strstr(err, name) && one_line(err), "a 256-byte name: %s", err);

    /* a temp name someone else holds (a process of the same pid on another
     * host writing the same file of a shared file system) is left alone */
    char theirs[600];
    snprintf(theirs, sizeof theirs, "%s.tmp.%ld", real, (long)getpid());
    spill(theirs, "theirs", 6);
    CHECK(ag_atomic_open(&a, real, err, sizeof err) == 0, "open beside a taken temp name: %s", err);
    CHECK(a.tmp && strcmp(a.tmp, theirs) != 0 && strstr(a.tmp, ".tmp."), "another temp name: %s", a.tmp);
    fputs("ours", a.f);
    CHECK(ag_atomic_commit(&a, err, sizeof err) == 0, "commit beside a taken temp name: %s", err);
    b = slurp(theirs, &len);
    CHECK(b && len == 6 && memcmp(b, "theirs", 6) == 0, "the other writer's temp file untouched");
    free(b);
    b = slurp(real, &len);
    CHECK(b && len == 4 && memcmp(b, "ours", 4) == 0, "our bytes in the target");
    free(b);
    unlink(theirs);

    /* discard: the write is undone and the old file stays */
    CHECK(ag_atomic_discard(&a) == -1, "discard with nothing open");
    spill(real, "old", 3);
    CHECK(ag_atomic_open(&a, real, err, sizeof err) == 0, "open to discard: %s", err);
    fputs("new", a.f);
    fflush(a.f);
    CHECK(ag_atomic_discard(&a) == 1 && access(a.tmp, F_OK) != 0, "discard removes the temp file");
    ag_atomic_abort(&a);
    b = slurp(real, &len);
    CHECK(b && len == 3 && memcmp(b, "old", 3) == 0 && count_entries(sub) == 1, "discard keeps the old file");
    free(b);

    /* ready: the bytes are in the temp file, synced and closed, and the
     * target is still the old file until the commit renames it; an abort
     * (or a discard) after it leaves the old file, as before it */
    spill(real, "old", 3);
    CHECK(ag_atomic_open(&a, real, err, sizeof err) == 0, "open to ready: %s", err);
    fputs("new", a.f);
    CHECK(ag_atomic_ready(&a, err, sizeof err) == 0 && !a.f && ag_atomic_ready(&a, err, sizeof err) == 0,
          "ready, twice: %s", err);
    b = slurp(a.tmp, &len);
    CHECK(b && len == 3 && memcmp(b, "new", 3) == 0, "ready: the temp file holds the bytes");
    free(b);
    b = slurp(real, &len);
    CHECK(b && len == 3 && memcmp(b, "old", 3) == 0, "ready: the target is the old file");
    free(b);
    CHECK(ag_atomic_commit(&a, err, sizeof err) == 0, "commit after ready: %s", err);
    b = slurp(real, &len);
    CHECK(b && len == 3 && memcmp(b, "new", 3) == 0 && count_entries(sub) == 1, "commit after ready renames");
    free(b);
    CHECK(ag_atomic_open(&a, real, err, sizeof err) == 0 && ag_atomic_ready(&a, err, sizeof err) == 0,
          "open and ready to discard: %s", err);
    CHECK(ag_atomic_discard(&a) == 1, "discard after ready: the target left as it was");
    ag_atomic_abort(&a);
    CHECK(ag_atomic_open(&a, real, err, sizeof err) == 0 && ag_atomic_ready(&a, err, sizeof err) == 0,
          "open and ready to abort: %s", err);
    ag_atomic_abort(&a);
    b = slurp(real, &len);
    CHECK(b && len == 3 && memcmp(b, "new", 3) == 0 && count_entries(sub) == 1, "abort after ready: nothing left");
    free(b);
    CHECK(ag_atomic_ready(&a, err, sizeof err) == -1 && strstr(err, "no write under way") &&
              ag_atomic_ready(NULL, err, sizeof err) == -1 && strstr(err, "ag_atomic_ready: a is NULL"),
          "ready with no write under way: %s", err);

    /* a commit with no write under way (after a commit, after an abort)
     * is refused in words: there is no stream to flush */
    CHECK(ag_atomic_open(&a, real, err, sizeof err) == 0, "open to commit twice: %s", err);
    fputs("twice", a.f);
    CHECK(ag_atomic_commit(&a, err, sizeof err) == 0, "first commit: %s", err);
    CHECK(ag_atomic_commit(&a, err, sizeof err) == -1 && strstr(err, "no write under way") && one_line(err),
          "second commit: %s", err);
    CHECK(ag_atomic_open(&a, real, err, sizeof err) == 0, "open to abort: %s", err);
    ag_atomic_abort(&a);
    CHECK(ag_atomic_commit(&a, err, sizeof err) == -1 && strstr(err, "no write under way"), "commit after abort: %s",
          err);
    /* no ag_atomic_file at all: named, never followed */
    CHECK(ag_atomic_open(NULL, real, err, sizeof err) == -1 && strstr(err, "ag_atomic_open: a is NULL"),
          "open of NULL: %s", err);
    CHECK(ag_atomic_commit(NULL, err, sizeof err) == -1 && strstr(err, "ag_atomic_commit: a is NULL"),
          "commit of NULL: %s", err);
    ag_atomic_abort(NULL);
    CHECK(ag_atomic_discard(NULL) == -1, "discard of NULL: no write under way");
    /* a NULL label is named as a stream, not printed through %s */
    CHECK(ag_stream_open(-1, NULL, err, sizeof err) == NULL && strncmp(err, "(stream): descriptor -1", 23) == 0,
          "stream of a bad descriptor, no label: %s", err);
    b = slurp(real, &len);
    CHECK(b && len == 5 && memcmp(b, "twice", 5) == 0 && count_entries(sub) == 1, "the committed file stays");
    free(b);
    unlink(real);
    unlink(link);
    rmdir(sub);
}

/* The process's own descriptors by name: written through the descriptor,
 * where it stands, the file it holds neither replaced nor truncated. */
static void test_own_streams(void)
{
    char err[8192] = "", name[64];
    PATH_IN(sub, "own");
    PATH_IN(held, "own/held");
    PATH_IN(to_out, "own/to_stdout");
    PATH_IN(digits, "own/3");
    mkdir(sub, 0755);
    spill(held, "first ", 6);
    int fd = open(held, O_WRONLY | O_APPEND);
    CHECK(fd > 2, "open a file to write through (fd %d)", fd);
    CHECK(ag_stream_fd("/dev/stdout") == 1 && ag_stream_fd("/dev/stderr") == 2, "/dev/stdout is 1, /dev/stderr 2");
    CHECK(ag_stream_fd("/proc/self/fd/1") == 1, "/proc/self/fd/1 is 1");
    snprintf(name, sizeof name, "/dev/fd/%d", fd);
    CHECK(ag_stream_fd(name) == fd, "%s is %d (got %d)", name, fd, ag_stream_fd(name));
    snprintf(name, sizeof name, "/proc/%ld/fd/%d", (long)getpid(), fd);
    CHECK(ag_stream_fd(name) == fd, "%s is %d", name, fd);
    CHECK(symlink("/dev/stdout", to_out) == 0 && ag_stream_fd(to_out) == 1, "a link to /dev/stdout is 1");
    CHECK(ag_stream_fd("/dev/fd/77") == 77, "a descriptor not open is still named (77)");
    CHECK(ag_stream_fd("/dev/fd/01") == -1 && ag_stream_fd("/proc/1/fd/1") == -1 && ag_stream_fd(held) == -1 &&
              ag_stream_fd(digits) == -1 && ag_stream_fd("/dev/null") == -1 && ag_stream_fd(NULL) == -1,
          "not own descriptors: a leading zero, another process's, a file, a file named 3, /dev/null, NULL");
    struct stat before, after;
    stat(held, &before);
    ag_atomic_file a;
    snprintf(name, sizeof name, "/dev/fd/%d", fd);
    CHECK(ag_atomic_open(&a, name, err, sizeof err) == 0 && !a.tmp, "open %s: %s", name, err);
    fputs("second", a.f);
    CHECK(ag_atomic_ready(&a, err, sizeof err) == 0 && !a.f, "ready through %s: %s", name, err);
    CHECK(ag_atomic_commit(&a, err, sizeof err) == 0, "commit through %s after ready: %s", name, err);
    CHECK(fcntl(fd, F_GETFD) != -1, "the descriptor is still open after the commit");
    size_t len = 0;
    unsigned char *b = slurp(held, &len);
    CHECK(b && len == 12 && memcmp(b, "first second", 12) == 0, "the bytes went after what was there");
    free(b);
    CHECK(stat(held, &after) == 0 && after.st_ino == before.st_ino && count_entries(sub) == 2,
          "the same file (inode), no temporary file beside it");
    close(fd);
    CHECK(ag_atomic_open(&a, name, err, sizeof err) == -1 && strstr(err, "is not open") && one_line(err),
          "a closed descriptor: %s", err);
    fd = open(held, O_RDONLY);
    snprintf(name, sizeof name, "/dev/fd/%d", fd);
    CHECK(ag_atomic_open(&a, name, err, sizeof err) == -1 && strstr(err, "open for reading only"),
          "a descriptor open for reading: %s", err);
    close(fd);
    unlink(to_out);
    unlink(held);
    rmdir(sub);
}

/* NULL where a path, a stream or a tensor is needed: -1 (or NULL) and a
 * line, not a crash. */
static void test_null_arguments(void)
{
    char err[512] = "";
    CHECK(ag_st_load(NULL, err, sizeof err) == NULL && strstr(err, "empty checkpoint path"), "load NULL: %s", err);
    err[0] = 0;
    CHECK(ag_st_write(NULL, "label", sample, 1, NULL, 0, err, sizeof err) == -1 && strstr(err, "label") &&
              strstr(err, "no stream"), "write to a NULL stream: %s", err);
    err[0] = 0;
    float out[2];
    CHECK(ag_st_to_f32(NULL, out, err, sizeof err) == -1 && strstr(err, "NULL"), "to_f32 of NULL: %s", err);
    errno = 0;
    CHECK(ag_write_target(NULL) == NULL && errno == EINVAL, "ag_write_target(NULL): errno %d", errno);
    err[0] = 0;
    CHECK(ag_st_parse(NULL, 16, "buf", err, sizeof err) == NULL && strstr(err, "buf: no data"), "parse NULL: %s", err);
    /* the writer's counts and arrays */
    FILE *sink = fopen("/dev/null", "wb");
    const char *nulls[] = {"k", NULL};
    const char *counts[][2] = {{"-1 tensors", NULL}, {"NULL tensors", NULL}, {"-1 metadata", NULL},
                               {"NULL metadata", NULL}};
    for (int c = 0; c < 4 && sink; c++) {
        err[0] = 0;
        int rc = ag_st_write(sink, "w.st", c == 1 ? NULL : sample, c == 0 ? -1 : 1, NULL, c == 2 ? -1 : c == 3,
                             err, sizeof err);
        CHECK(rc == -1 && strstr(err, "w.st: bad tensor or metadata count"), "write with %s: %s", counts[c][0], err);
    }
    err[0] = 0;
    CHECK(sink && ag_st_write(sink, "w.st", sample, 1, nulls, 1, err, sizeof err) == -1 &&
              strstr(err, "w.st: metadata entry 0 is NULL"), "write with a NULL metadata value: %s", err);
    const char *bad_key[] = {"k\xff", "v"}, *bad_value[] = {"k", "v\xc3"};
    err[0] = 0;
    CHECK(sink && ag_st_write(sink, "w.st", sample, 1, bad_key, 1, err, sizeof err) == -1 &&
              strstr(err, "w.st: metadata key \"k?\" is not valid UTF-8") && one_line(err),
          "write with a metadata key not UTF-8: %s", err);
    err[0] = 0;
    CHECK(sink && ag_st_write(sink, "w.st", sample, 1, bad_value, 1, err, sizeof err) == -1 &&
              strstr(err, "w.st: metadata value \"v?\" is not valid UTF-8") && one_line(err),
          "write with a metadata value not UTF-8: %s", err);
    if (sink) fclose(sink);
}

static void test_save_failures(void)
{
    char err[512] = "", tmpname[340];
    PATH_IN(path, "model.safetensors");
    size_t oldlen = 0;
    unsigned char *old = slurp(path, &oldlen);
    ag_st_tensor one = {"x", AG_ST_F32, 1, {2}, (float[]){1, 2}, 8};

    /* a successful save replaces the file */
    PATH_IN(p2, "second.safetensors");
    CHECK(ag_st_save(p2, sample, 2, NULL, 0, err, sizeof err) == 0, "save: %s", err);
    CHECK(ag_st_save(p2, &one, 1, NULL, 0, err, sizeof err) == 0, "resave: %s", err);
    ag_st_file *f = ag_st_load(p2, err, sizeof err);
    CHECK(f && ag_st_count(f) == 1 && ag_st_get(f, "x") && !ag_st_get(f, "wte"), "replaced contents");
    ag_st_free(f);
    unlink(p2);

    /* directory does not exist */
    PATH_IN(nodir, "no/such/dir/m.safetensors");
    err[0] = '\0';
    CHECK(ag_st_save(nodir, &one, 1, NULL, 0, err, sizeof err) == -1, "save into a missing directory");
    CHECK(strncmp(err, nodir, strlen(nodir)) == 0 && strstr(err, strerror(ENOENT)) && one_line(err),
          "missing dir message: %s", err);
    /* ... naming the file and the directory, not the temporary name (gone,
     * and a "No such file" after it read as if that were missing) */
    CHECK(strstr(err, "temp file in ") && strstr(err, "no/such/dir: ") && !strstr(err, ".tmp."),
          "missing dir message names the temporary file: %s", err);

    /* the temp path is taken by a directory: the next name is used and the
     * directory left alone; with every name taken, nothing is created */
    snprintf(tmpname, sizeof tmpname, "%s.tmp.%ld", path, (long)getpid());
    mkdir(tmpname, 0755);
    err[0] = '\0';
    CHECK(ag_st_save(path, &one, 1, NULL, 0, err, sizeof err) == 0, "save beside a taken temp path: %s", err);
    struct stat st;
    CHECK(stat(tmpname, &st) == 0 && S_ISDIR(st.st_mode), "the directory at the temp path left alone");
    spill(path, old, oldlen);
    char taken[600];
    for (int i = 1; i < 100; i++) {
        snprintf(taken, sizeof taken, "%s.%d", tmpname, i);
        mkdir(taken, 0755);
    }
    err[0] = '\0';
    CHECK(ag_st_save(path, &one, 1, NULL, 0, err, sizeof err) == -1, "save with every temp name taken");
    CHECK(strstr(err, "cannot create temp file") && strstr(err, strerror(EEXIST)) && one_line(err),
          "every name taken: %s", err);
    check_intact(path, old, oldlen, "every temp name taken");
    for (int i = 1; i < 100; i++) {
        snprintf(taken, sizeof taken, "%s.%d", tmpname, i);
        rmdir(taken);
    }
    rmdir(tmpname);

    /* a write that fails part way (the file size limit, as a full disk
     * would): the target stays, the temp file is removed */
    struct rlimit was;
    if (getrlimit(RLIMIT_FSIZE, &was) == 0) {
        struct rlimit small = { 64, was.rlim_max };
        void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &small);
        err[0] = '\0';
        int rc = ag_st_save(path, sample, NT, sample_meta, 3, err, sizeof err);
        setrlimit(RLIMIT_FSIZE, &was);
        signal(SIGXFSZ, old_handler);
        CHECK(rc == -1, "save past the file size limit");
        CHECK(strstr(err, "write failed") && strstr(err, strerror(EFBIG)) && one_line(err), "size limit: %s", err);
        check_intact(path, old, oldlen, "size limit");
        CHECK(lstat(tmpname, &st) != 0, "temp file removed after a failed write");
        /* ... and one that fails when the buffered bytes go out (the SVGs'
         * and the log's writes): the message names the file, not the
         * temporary one it removed */
        ag_atomic_file w;
        CHECK(ag_atomic_open(&w, path, err, sizeof err) == 0, "open for a failed flush: %s", err);
        fputs("a few bytes, buffered", w.f);
        small.rlim_cur = 0;
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &small);
        err[0] = '\0';
        rc = ag_atomic_commit(&w, err, sizeof err);
        setrlimit(RLIMIT_FSIZE, &was);
        signal(SIGXFSZ, old_handler);
        CHECK(rc == -1 && strncmp(err, path, strlen(path)) == 0 && strstr(err, "write failed") &&
                  strstr(err, strerror(EFBIG)) && !strstr(err, ".tmp.") && one_line(err),
              "a failed flush: %s", err);
        check_intact(path, old, oldlen, "a failed flush");
        CHECK(lstat(tmpname, &st) != 0, "temp file removed after a failed flush");
    } else {
        printf("note: no RLIMIT_FSIZE, the failed-write case not run\n");
    }

    /* a directory as the target is refused before anything is written */
    PATH_IN(dpath, "adir");
    mkdir(dpath, 0755);
    PATH_IN(keep, "adir/keep");
    spill(keep, "k", 1);
    int before = count_entries(dir);
    err[0] = '\0';
    CHECK(ag_st_save(dpath, &one, 1, NULL, 0, err, sizeof err) == -1, "save over a directory");
    CHECK(strstr(err, strerror(EISDIR)) && one_line(err), "directory target: %s", err);
    CHECK(count_entries(dir) == before, "temp file left after refusing a directory");

    /* rename fails (the target became a non-empty directory while the file
     * was written): the temp file is removed */
    PATH_IN(later, "later");
    ag_atomic_file af;
    CHECK(ag_atomic_open(&af, later, err, sizeof err) == 0, "open later: %s", err);
    fputs("x", af.f);
    PATH_IN(later_keep, "later/keep");
    mkdir(later, 0755);
    spill(later_keep, "k", 1);
    err[0] = '\0';
    CHECK(ag_atomic_commit(&af, err, sizeof err) == -1 && strstr(err, "cannot rename") && !strstr(err, ".tmp."),
          "rename failure: %s", err);
    CHECK(count_entries(dir) == before + 1, "temp file left after a failed rename");
    unlink(later_keep);
    rmdir(later);
    unlink(keep);
    rmdir(dpath);

    /* an unwritable directory; root ignores permissions, so then the save
     * runs in a child that has dropped to an unprivileged user */
    PATH_IN(ro, "ro");
    mkdir(ro, 0755);
    PATH_IN(ropath, "ro/m.safetensors");
    CHECK(ag_st_save(ropath, &one, 1, NULL, 0, err, sizeof err) == 0, "save in ro before chmod: %s", err);
    size_t rolen = 0;
    unsigned char *roold = slurp(ropath, &rolen);
    chmod(ro, 0555);
    chmod(dir, 0755);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        free(roold);   /* the child ends with _exit; keep leak checkers quiet */
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(4);
        err[0] = '\0';
        int rc = ag_st_save(ropath, sample, NT, NULL, 0, err, sizeof err);
        if (rc == -1 && strstr(err, strerror(EACCES)) && strncmp(err, ropath, strlen(ropath)) == 0) _exit(0);
        printf("unwritable dir: rc %d, '%s'\n", rc, err);
        _exit(1);
    }
    int status = -1;
    if (pid > 0) waitpid(pid, &status, 0);
    if (pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 4)
        printf("note: cannot drop root privileges, unwritable-directory case not run\n");
    else
        CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "save in an unwritable dir (status %d)",
              status);
    check_intact(ropath, roold, rolen, "unwritable dir");
    CHECK(count_entries(ro) == 1, "stray files in unwritable dir");
    chmod(dir, 0700);
    chmod(ro, 0755);
    free(roold);
    unlink(ropath);
    rmdir(ro);

    /* bad input is refused before anything touches the disk */
    float nanv[2] = {1, NAN};
    double infv[1] = {-INFINITY};
    struct { ag_st_tensor t[2]; int n; const char *want; } bad[] = {
        {{{"a", AG_ST_F32, 1, {2}, wte, 8}, {"a", AG_ST_F32, 1, {2}, wte, 8}}, 2, "duplicate tensor name \"a\""},
        {{{"n", AG_ST_F32, 1, {2}, nanv, 8}}, 1, "tensor \"n\": data contains NaN or Inf"},
        {{{"i", AG_ST_F64, 0, {0}, infv, 8}}, 1, "tensor \"i\": data contains NaN or Inf"},
        {{{"m", AG_ST_F32, 1, {3}, wte, 8}}, 1, "nbytes does not match"},
        {{{"__metadata__", AG_ST_F32, 1, {2}, wte, 8}}, 1, "name is reserved"},
        {{{"bad\xff", AG_ST_F32, 1, {2}, wte, 8}}, 1, "tensor \"bad?\": name is not valid UTF-8"},
        {{{"\xe2\x98\x83\xc0\xaf", AG_ST_F32, 1, {2}, wte, 8}}, 1, "tensor \"\xe2\x98\x83??\": name is not"},
        {{{"d", 17, 1, {2}, wte, 8}}, 1, "unknown dtype"},
        {{{"g", AG_ST_F32, 1, {-2}, wte, 8}}, 1, "negative dim"},
        {{{"h", AG_ST_F32, 9, {1, 1, 1, 1, 1, 1, 1, 1}, wte, 4}}, 1, "ndim must be 0..8"},
        {{{"", AG_ST_F32, 1, {2}, wte, 8}}, 1, "has no name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECK(ag_st_save(path, bad[i].t, bad[i].n, NULL, 0, err, sizeof err) == -1, "bad input %zu saved", i);
        CHECK(strstr(err, bad[i].want) && one_line(err), "bad input %zu: got '%s'", i, err);
        check_intact(path, old, oldlen, bad[i].want);
    }
    const char *dupmeta[] = {"k", "1", "k", "2"};
    err[0] = '\0';
    CHECK(ag_st_save(path, &one, 1, dupmeta, 2, err, sizeof err) == -1 &&
          strstr(err, "duplicate metadata key \"k\""), "duplicate metadata key saved: %s", err);
    CHECK(count_entries(dir) == 1, "stray files after refused saves");
    check_intact(path, old, oldlen, "refused saves");
    free(old);
}

/* ---- loading: files that are not files ---------------------------------- */

static void alarm_noop(int sig) { (void)sig; }

static void test_load_failures(void)
{
    char err[512];
    PATH_IN(missing, "missing.safetensors");
    CHECK(!ag_st_load(missing, err, sizeof err) && strncmp(err, missing, strlen(missing)) == 0 &&
          strstr(err, "cannot open") && strstr(err, strerror(ENOENT)), "missing file: %s", err);
    CHECK(!ag_st_load(dir, err, sizeof err) && strstr(err, "is a directory"), "directory: %s", err);
    CHECK(!ag_st_load("/dev/null", err, sizeof err) && strstr(err, "not a regular file"), "/dev/null: %s", err);
    /* a pipe that no one writes: refused at once, not waited on (opened
     * without O_NONBLOCK, open blocked until a writer came: forever; an
     * alarm without SA_RESTART ends that wait here, as EINTR) */
    PATH_IN(fifo, "fifo.safetensors");
    if (mkfifo(fifo, 0600) == 0) {
        struct sigaction on_alarm = {0}, old_alarm;
        on_alarm.sa_handler = alarm_noop;
        sigemptyset(&on_alarm.sa_mask);
        sigaction(SIGALRM, &on_alarm, &old_alarm);
        alarm(2);
        ag_st_file *ff = ag_st_load(fifo, err, sizeof err);
        alarm(0);
        CHECK(!ff && strstr(err, "not a regular file") && one_line(err), "a FIFO no one writes: %s", err);
        ag_st_free(ff);
        alarm(2);
        ff = ag_st_load_except(fifo, "x", err, sizeof err);
        alarm(0);
        sigaction(SIGALRM, &old_alarm, NULL);
        CHECK(!ff && strstr(err, "not a regular file"), "a FIFO, ag_st_load_except: %s", err);
        ag_st_free(ff);
        unlink(fifo);
    }
    /* a file truncated on disk goes through the same checks as a buffer */
    size_t len = 0;
    PATH_IN(model, "model.safetensors");
    unsigned char *b = slurp(model, &len);
    PATH_IN(cut, "cut.safetensors");
    spill(cut, b, len - 3);
    CHECK(!ag_st_load(cut, err, sizeof err) && strncmp(err, cut, strlen(cut)) == 0 &&
          strstr(err, "past the end of the data buffer"), "truncated file: %s", err);
    spill(cut, b, 5);
    CHECK(!ag_st_load(cut, err, sizeof err) && strstr(err, "shorter than the 8-byte"), "5-byte file: %s", err);
    unlink(cut);
    free(b);
}

/* ---- broken files, each with its own message ---------------------------- */

/* A valid base: tensor a = F32[2] at [0,8), b = U8[3] at [8,11). */
#define BASE_A "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}"
#define BASE_B "\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[8,11]}"
#define BASE_JSON "{\"__metadata__\":{\"format\":\"pt\"}," BASE_A "," BASE_B "}"
static const unsigned char base_data[11] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 1, 2, 3};  /* 1.0f, 2.0f */

static void expect_reject(const unsigned char *b, size_t len, const char *want, const char *what)
{
    char err[512] = "";
    ag_st_file *f = ag_st_parse(b, len, "broken.st", err, sizeof err);
    CHECK(f == NULL, "%s: accepted", what);
    CHECK(strncmp(err, "broken.st: ", 11) == 0 && one_line(err), "%s: message format '%s'", what, err);
    CHECK(strstr(err, want) != NULL, "%s: wanted '%s', got '%s'", what, want, err);
    ag_st_free(f);
}

static void reject_json(const char *json, const void *data, size_t dlen, const char *want)
{
    size_t len;
    unsigned char *b = mk(json, data, dlen, &len);
    expect_reject(b, len, want, json);
    free(b);
}

static void test_truncation_and_lengths(void)
{
    char err[512];
    size_t len;
    unsigned char *b = mk(BASE_JSON, base_data, sizeof base_data, &len);
    ag_st_file *f = ag_st_parse(b, len, "base", err, sizeof err);
    CHECK(f && ag_st_count(f) == 2 && ((const float *)ag_st_get(f, "a")->data)[1] == 2.0f, "base: %s", err);
    ag_st_free(f);
    size_t n = strlen(BASE_JSON);
    for (size_t cut = 0; cut < len; cut++) {
        const char *want = cut < 8 ? "shorter than the 8-byte header length"
                         : cut < 8 + n ? "runs past the end of the file"
                                       : "past the end of the data buffer";
        char what[64];
        snprintf(what, sizeof what, "truncated to %zu bytes", cut);
        /* a fresh copy of exactly cut bytes, so ASan sees any read past it */
        unsigned char *c = malloc(cut ? cut : 1);
        memcpy(c, b, cut);
        expect_reject(c, cut, want, what);
        free(c);
    }
    unsigned char *c = malloc(len);
    memcpy(c, b, len);
    put_le64(c, (uint64_t)1 << 63);
    expect_reject(c, len, "exceeds the limit", "length 2^63");
    put_le64(c, UINT64_MAX);
    expect_reject(c, len, "exceeds the limit", "length 2^64-1");
    put_le64(c, len - 8 + 1);
    expect_reject(c, len, "runs past the end of the file", "length one past the end");
    put_le64(c, 0);
    expect_reject(c, len, "header length is 0", "length zero");
    put_le64(c, n - 1);   /* header ends one byte early: the '}' is taken as data */
    expect_reject(c, len, "unexpected end of header", "length one short");
    put_le64(c, n + 2);   /* two data bytes read as JSON */
    expect_reject(c, len, "bad JSON in header at byte", "length two long");
    free(c);
    free(b);
}

static void test_bad_json(void)
{
    const unsigned char *d = base_data;
    reject_json("{\"a\"{", d, 0, "bad JSON in header at byte 4: expected ':' after key");
    reject_json("{" BASE_A ",}", d, 8, "expected a string");
    reject_json("{\"a", d, 0, "unexpected end of header (unterminated string)");
    reject_json("{" BASE_A "}x", d, 8, "unexpected bytes after the JSON object");
    reject_json("{" BASE_A " " BASE_B "}", d, 11, "expected ',' or '}' after a top-level entry");
    reject_json("{\"a\\q\":1}", d, 0, "bad escape in string");
    reject_json("{\"a\nb\":1}", d, 0, "raw control character in string");
    reject_json("[1,2]", d, 0, "header is not a JSON object");
    reject_json("   ", d, 0, "header is not a JSON object");
    reject_json("{\"\\ud800\":1}", d, 0, "unpaired high surrogate");
    reject_json("{\"\\ud800\\u0041\":1}", d, 0, "unpaired high surrogate");
    reject_json("{\"\\udc00\":1}", d, 0, "unpaired low surrogate");
    reject_json("{\"\\u00G0\":1}", d, 0, "bad hex digit");
    reject_json("{\"\\u00", d, 0, "truncated \\u escape");
    reject_json("{\"a\\u0000\":1}", d, 0, "\\u0000 is not allowed");
    reject_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", d, 8, "leading zero");
    reject_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,],\"data_offsets\":[0,8]}}", d, 8, "expected a number");
    reject_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[2}", d, 8, "expected ',' or ']' in array");
    reject_json("{\"a\":{\"dtype\":\"F32\" \"shape\":[2]}}", d, 8, "expected ',' or '}' in tensor entry");
    reject_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[-]}}", d, 8, "expected a digit after '-'");
    reject_json("{\"__metadata__\":{\"k\":\"v\" \"x\":\"y\"}}", d, 0, "expected ',' or '}' in __metadata__");
    reject_json("{\"a\":{\"dtype\":\"F32\"", d, 0, "unexpected end of header");

    /* invalid UTF-8: a stray byte, an overlong '/', a UTF-16 surrogate, a cut sequence */
    reject_json("{\"\xff\":1}", d, 0, "header is not valid UTF-8 (byte 2 of the header)");
    reject_json("{\"\xc0\xaf\":1}", d, 0, "not valid UTF-8");
    reject_json("{\"\xed\xa0\x80\":1}", d, 0, "not valid UTF-8");
    reject_json("{\"\xf4\x90\x80\x80\":1}", d, 0, "not valid UTF-8");
    reject_json("{\"a\":1}\xe2\x98", d, 0, "not valid UTF-8");
}

static void test_bad_entries(void)
{
    const unsigned char *d = base_data;
    float nanf_[2] = {1, NAN}, inff_[2] = {INFINITY, 0};
    double nand[1] = {-NAN}, infd[1] = {-INFINITY};
    struct { const char *json; const void *data; size_t dlen; const char *want; } cases[] = {
        {"{" BASE_A "," BASE_A "}", d, 8, "duplicate tensor name \"a\""},
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", d, 0, "duplicate metadata key \"k\""},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", d, 0, "duplicate key \"__metadata__\""},
        {"{\"__metadata__\":{\"k\":1}}", d, 0, "metadata value for key \"k\" is not a string"},
        {"{\"__metadata__\":{\"k\":[\"v\"]}}", d, 0, "metadata value for key \"k\" is not a string"},
        {"{\"__metadata__\":[]}", d, 0, "__metadata__ must be a JSON object"},
        {"{\"a\":{\"dtype\":\"F17\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8, "unknown dtype \"F17\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", d, 8,
         "shape and dtype need 12 bytes but data_offsets span 8"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[6,9]}}", d, 9, "overlap the previous tensor"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[9,11]}}", d, 11, "gap in the data buffer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", d, 8, "gap in the data buffer"},
        {"{" BASE_A "}", d, 11, "3 trailing bytes after the last tensor"},
        {"{}", d, 1, "1 trailing bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", d, 8, "begin 8 > end 0"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", nanf_, 8,
         "tensor \"a\": F32 data contains NaN or Inf"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", inff_, 8, "F32 data contains NaN"},
        {"{\"x\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]}}", infd, 8,
         "tensor \"x\": F64 data contains NaN or Inf"},
        {"{\"x\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", nand, 8, "F64 data contains NaN"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", d, 8, "negative shape dims"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-1,8]}}", d, 8, "negative data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", d, 8,
         "more than 8 dims"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", d, 8, "not fractions"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2e0],\"data_offsets\":[0,8]}}", d, 8, "not fractions"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", d, 8,
         "shape dims must be non-negative integers"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", d, 8, "shape dims must be an array"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,8]}}", d, 8,
         "shape dims too large"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", d, 8,
         "shape size overflows"},
        /* 2^62 elements fit in 64 bits but their 2^64 bytes wrap to 0 */
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,0]}}", d, 0,
         "shape size overflows"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,18446744073709551616]}}", d, 8,
         "data_offsets too large"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,8]}}", d, 8, "exactly 2 entries"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", d, 8, "exactly 2 entries"},
        {"{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8, "tensor \"a\": missing \"dtype\""},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", d, 8, "missing \"shape\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", d, 8, "missing \"data_offsets\""},
        {"{\"a\":{}}", d, 0, "missing \"dtype\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"crc\":1}}", d, 8,
         "unknown field \"crc\""},
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}}", d, 8, "duplicate field \"dtype\""},
        {"{\"a\":{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8, "dtype must be a string"},
        {"{\"a\":[0,8]}", d, 8, "tensor \"a\": entry must be a JSON object"},
        {"{\"a\\nb\":7}", d, 0, "tensor \"a?b\": entry must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        reject_json(cases[i].json, cases[i].data, cases[i].dlen, cases[i].want);

    /* 0-element tensors tile like any other: two at one offset is fine */
    char err[512];
    size_t len;
    unsigned char *b = mk("{\"z\":{\"dtype\":\"F64\",\"shape\":[3,0],\"data_offsets\":[8,8]},"
                          "\"y\":{\"dtype\":\"I64\",\"shape\":[0],\"data_offsets\":[8,8]}," BASE_A "}",
                          d, 8, &len);
    ag_st_file *f = ag_st_parse(b, len, "zeros", err, sizeof err);
    CHECK(f && ag_st_count(f) == 3 && strcmp(ag_st_at(f, 0)->name, "a") == 0 &&
          strcmp(ag_st_at(f, 1)->name, "z") == 0 && ag_st_get(f, "y")->nbytes == 0, "zero-size tensors: %s",
          f ? "order" : err);
    ag_st_free(f);
    free(b);
}

/* ---- half precision, F64, and conversion to float ------------------------ */

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* A half's value from its fields, computed in double (exact there). */
static double f16_value(unsigned h)
{
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}

static double bf16_value(unsigned h)
{
    int e = (h >> 7) & 0xFF, m = h & 0x7F;
    double v = e ? ldexp(128 + m, e - 134) : ldexp(m, -133);
    return h & 0x8000 ? -v : v;
}

static void test_half_dtypes(void)
{
    char err[512] = "";
    CHECK(strcmp(ag_st_dtype_name(AG_ST_F16), "F16") == 0 && ag_st_dtype_size(AG_ST_F16) == 2, "F16 name/size");
    CHECK(strcmp(ag_st_dtype_name(AG_ST_BF16), "BF16") == 0 && ag_st_dtype_size(AG_ST_BF16) == 2, "BF16 name/size");

    /* every finite half and bfloat16 converts to exactly its value; the
     * comparison is on bits, so -0 must stay -0 */
    static unsigned char buf[2 * 65536];
    static float out[65536];
    for (int dt = 0; dt < 2; dt++) {
        int dtype = dt ? AG_ST_BF16 : AG_ST_F16, wrong = 0, n = 0;
        for (unsigned h = 0; h < 65536; h++) {
            int finite = dt ? ((h >> 7) & 0xFF) != 0xFF : ((h >> 10) & 0x1F) != 0x1F;
            if (!finite) continue;
            buf[2 * n] = (unsigned char)(h & 0xFF);
            buf[2 * n + 1] = (unsigned char)(h >> 8);
            n++;
        }
        ag_st_tensor t = {"h", dtype, 1, {n}, buf, (size_t)n * 2};
        CHECK(ag_st_to_f32(&t, out, err, sizeof err) == 0, "%s conversion: %s", ag_st_dtype_name(dtype), err);
        for (int i = 0, k = 0; k < 65536; k++) {
            unsigned h = (unsigned)k;
            int finite = dt ? ((h >> 7) & 0xFF) != 0xFF : ((h >> 10) & 0x1F) != 0x1F;
            if (!finite) continue;
            float want = (float)(dt ? bf16_value(h) : f16_value(h));
            wrong += bits_of(out[i]) != bits_of(want);
            i++;
        }
        CHECK(wrong == 0 && n == (dt ? 65536 - 256 : 65536 - 2048), "%s: %d of %d values converted wrongly",
              ag_st_dtype_name(dtype), wrong, n);
    }

    /* F64 rounds to nearest, ties to even; beyond float's range is an error */
    double edge = ldexp(1, 128) - ldexp(1, 103);   /* halfway from FLT_MAX to 2^128: rounds up, overflows */
    struct { double in; float want; } f64[] = {
        {1.0 / 3, (float)(1.0 / 3)},
        {1 + ldexp(1, -24), 1.0f},                            /* halfway, 1.0 is even */
        {1 + 3 * ldexp(1, -24), 1 + 0x1p-22f},                /* halfway, rounds up to even */
        {-2.5, -2.5f},
        {ldexp(1, -150), 0.0f},                               /* halfway to the smallest subnormal */
        {1.5 * ldexp(1, -150), 0x1p-149f},
        {edge - ldexp(1, 80), 3.4028234664e38f},              /* just below the edge: FLT_MAX */
        {-0.0, -0.0f},
    };
    enum { NF64 = sizeof f64 / sizeof f64[0] };
    double in[NF64];
    float got[NF64];
    for (int i = 0; i < NF64; i++) in[i] = f64[i].in;
    ag_st_tensor t64 = {"d", AG_ST_F64, 1, {NF64}, in, sizeof in};
    CHECK(ag_st_to_f32(&t64, got, err, sizeof err) == 0, "F64 conversion: %s", err);
    for (int i = 0; i < NF64; i++) {
        CHECK(bits_of(got[i]) == bits_of(f64[i].want), "F64 %.17g -> %.9g, want %.9g", f64[i].in, got[i],
              f64[i].want);
    }
    double over[3] = {1, edge, 2};
    ag_st_tensor tover = {"big \n", AG_ST_F64, 1, {3}, over, sizeof over};
    err[0] = '\0';
    CHECK(ag_st_to_f32(&tover, got, err, sizeof err) == -1 && strstr(err, "tensor \"big ?\"") &&
          strstr(err, "(element 1) is too large for F32") && one_line(err), "F64 overflow: '%s'", err);
    over[1] = -1e300;
    err[0] = '\0';
    CHECK(ag_st_to_f32(&tover, got, err, sizeof err) == -1 && strstr(err, "-1e+300"), "F64 -1e300: '%s'", err);
    int32_t iv[2] = {1, 2};
    ag_st_tensor ti = {"i", AG_ST_I32, 1, {2}, iv, sizeof iv};
    err[0] = '\0';
    CHECK(ag_st_to_f32(&ti, got, err, sizeof err) == -1 && strstr(err, "I32 is not a floating-point type"),
          "I32 to float: '%s'", err);

    /* half-precision files round-trip through the writer and the reader */
    uint16_t hv[3] = {0x3C00, 0x8001, 0x7BFF}, bv[2] = {0x3F80, 0xFF7F};   /* 1, -2^-24, 65504; 1, -max */
    ag_st_tensor ts[2] = {{"half", AG_ST_F16, 1, {3}, hv, 6}, {"bf", AG_ST_BF16, 2, {1, 2}, bv, 4}};
    PATH_IN(path, "half.safetensors");
    CHECK(ag_st_save(path, ts, 2, NULL, 0, err, sizeof err) == 0, "save F16/BF16: %s", err);
    ag_st_file *f = ag_st_load(path, err, sizeof err);
    CHECK(f != NULL, "load F16/BF16: %s", err);
    if (f) {
        const ag_st_tensor *h = ag_st_get(f, "half"), *b = ag_st_get(f, "bf");
        CHECK(h && h->dtype == AG_ST_F16 && h->nbytes == 6 && memcmp(h->data, hv, 6) == 0, "F16 read back");
        CHECK(b && b->dtype == AG_ST_BF16 && b->ndim == 2 && memcmp(b->data, bv, 4) == 0, "BF16 read back");
        float v[3];
        CHECK(h && ag_st_to_f32(h, v, err, sizeof err) == 0 && v[0] == 1 && v[1] == -0x1p-24f && v[2] == 65504,
              "F16 values");
        CHECK(b && ag_st_to_f32(b, v, err, sizeof err) == 0 && v[0] == 1 && v[1] == -0x1.fep127f, "BF16 values");
    }
    ag_st_free(f);
    unlink(path);

    /* NaN and Inf in half precision are refused like in F32, by the writer and the reader */
    uint16_t inf16 = 0x7C00, nan16 = 0xFE01, infb = 0xFF80, nanb = 0x7FC1;
    struct { int dtype; uint16_t v; } nf[] = {{AG_ST_F16, inf16}, {AG_ST_F16, nan16}, {AG_ST_BF16, infb},
                                              {AG_ST_BF16, nanb}};
    for (size_t i = 0; i < sizeof nf / sizeof nf[0]; i++) {
        ag_st_tensor tn = {"n", nf[i].dtype, 1, {1}, &nf[i].v, 2};
        err[0] = '\0';
        CHECK(ag_st_save(path, &tn, 1, NULL, 0, err, sizeof err) == -1 && strstr(err, "NaN or Inf"),
              "saved %s 0x%04x: '%s'", ag_st_dtype_name(nf[i].dtype), nf[i].v, err);
        char json[128], want[64];
        snprintf(json, sizeof json, "{\"n\":{\"dtype\":\"%s\",\"shape\":[1],\"data_offsets\":[0,2]}}",
                 ag_st_dtype_name(nf[i].dtype));
        snprintf(want, sizeof want, "tensor \"n\": %s data contains NaN or Inf", ag_st_dtype_name(nf[i].dtype));
        reject_json(json, &nf[i].v, 2, want);
    }
    /* the largest finite values are not mistaken for Inf */
    uint16_t big16 = 0xFBFF, bigb = 0x7F7F;
    ag_st_tensor tb[2] = {{"a", AG_ST_F16, 0, {0}, &big16, 2}, {"b", AG_ST_BF16, 0, {0}, &bigb, 2}};
    CHECK(ag_st_save(path, tb, 2, NULL, 0, err, sizeof err) == 0, "largest finite halves: %s", err);
    f = ag_st_load(path, err, sizeof err);
    CHECK(f && ag_st_count(f) == 2, "largest finite halves load: %s", f ? "" : err);
    ag_st_free(f);
    unlink(path);
}

/* The reader scans for NaN and Inf in blocks of elements: one bad value is
 * found wherever it lies, at a block's first or last element or in the
 * ragged tail, in every dtype; the largest finite values pass. */
static void test_nonfinite_anywhere(void)
{
    enum { N = 2 * 4096 + 3 };   /* two whole blocks of the scan and a tail */
    static const struct {
        int dtype;
        size_t es;
        unsigned char big[8], inf[8], nan[8];   /* little-endian bytes */
    } kinds[] = {
        {AG_ST_F32, 4, {0xFF, 0xFF, 0x7F, 0x7F}, {0, 0, 0x80, 0xFF}, {1, 0, 0xC0, 0x7F}},
        {AG_ST_F64, 8, {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xEF, 0x7F}, {0, 0, 0, 0, 0, 0, 0xF0, 0x7F},
         {0, 0, 0, 0, 0, 0, 0xF8, 0xFF}},
        {AG_ST_F16, 2, {0xFF, 0x7B}, {0x00, 0xFC}, {0x01, 0x7E}},
        {AG_ST_BF16, 2, {0x7F, 0x7F}, {0x80, 0x7F}, {0xC1, 0xFF}},
    };
    static const size_t at[] = {0, 1, 4095, 4096, 8191, 8192, N - 1};
    unsigned char *data = malloc((size_t)N * 8);
    char err[256], json[160], want[64];
    for (size_t d = 0; d < sizeof kinds / sizeof kinds[0]; d++) {
        const size_t es = kinds[d].es, bytes = (size_t)N * es;
        const char *name = ag_st_dtype_name(kinds[d].dtype);
        snprintf(json, sizeof json, "{\"x\":{\"dtype\":\"%s\",\"shape\":[%d],\"data_offsets\":[0,%zu]}}", name, N,
                 bytes);
        for (size_t i = 0; i < N; i++) memcpy(data + i * es, kinds[d].big, es);
        size_t len;
        unsigned char *b = mk(json, data, bytes, &len);
        ag_st_file *f = ag_st_parse(b, len, "finite", err, sizeof err);
        CHECK(f != NULL, "%s: %d largest finite values refused: %s", name, N, err);
        ag_st_free(f);
        free(b);
        snprintf(want, sizeof want, "tensor \"x\": %s data contains NaN or Inf", name);
        for (size_t k = 0; k < sizeof at / sizeof at[0]; k++)
            for (int which = 0; which < 2; which++) {
                memcpy(data + at[k] * es, which ? kinds[d].nan : kinds[d].inf, es);
                reject_json(json, data, bytes, want);
                memcpy(data + at[k] * es, kinds[d].big, es);
            }
    }
    free(data);
}

/* ag_st_load_except: the tensors under the prefix listed with their dtype
 * and shape but no data, still checked for NaN and Inf wherever it lies in
 * their bytes (which are read through a 256 KB buffer: three rounds and a
 * tail here); the others kept as ag_st_load keeps them. */
static void test_load_except(void)
{
    enum { NM = 3 * 65536 + 5 };
    float *m = malloc(NM * sizeof *m), w[6] = {1, 2, 3, 4, 5, 6};
    uint16_t v[6] = {0x3C00, 0x4000, 0, 0x8000, 0x3800, 0x7BFF};   /* F16: 1, 2, 0, -0, 0.5, 65504 */
    for (int i = 0; i < NM; i++) m[i] = 0.001f * (float)i;
    ag_st_tensor t[] = {
        {"w", AG_ST_F32, 2, {2, 3}, w, sizeof w},
        {"optim.m.w", AG_ST_F32, 1, {NM}, m, NM * sizeof *m},
        {"optim.v.w", AG_ST_F16, 2, {2, 3}, v, sizeof v},
        {"optimizer", AG_ST_F32, 1, {2}, w, 2 * sizeof *w},     /* not under "optim." */
        {"state.rng", AG_ST_U64, 1, {1}, step, 8},
    };
    const int n = (int)(sizeof t / sizeof t[0]);
    char err[512] = "";
    PATH_IN(path, "except.safetensors");
    CHECK(ag_st_save(path, t, n, NULL, 0, err, sizeof err) == 0, "save: %s", err);
    ag_st_file *all = ag_st_load(path, err, sizeof err), *some = ag_st_load_except(path, "optim.", err, sizeof err),
               *none = ag_st_load_except(path, NULL, err, sizeof err);
    CHECK(all && some && none && ag_st_count(some) == n && ag_st_count(none) == n, "loads: %s", err);
    for (int i = 0; all && some && none && i < n; i++) {
        const ag_st_tensor *a = ag_st_get(all, t[i].name), *s = ag_st_get(some, t[i].name),
                           *z = ag_st_get(none, t[i].name);
        int under = strncmp(t[i].name, "optim.", 6) == 0;
        CHECK(s && s->dtype == a->dtype && s->ndim == a->ndim && s->shape[0] == a->shape[0] && s->nbytes == a->nbytes,
              "%s: listed as ag_st_load lists it", t[i].name);
        CHECK(s && (under ? s->data == NULL : s->data && memcmp(s->data, t[i].data, t[i].nbytes) == 0),
              "%s: %s", t[i].name, under ? "kept though under the prefix" : "not kept as written");
        CHECK(z && z->data && memcmp(z->data, t[i].data, t[i].nbytes) == 0, "%s: a NULL prefix skipped it", t[i].name);
    }
    float out[6];
    CHECK(some && ag_st_to_f32(ag_st_get(some, "optim.v.w"), out, err, sizeof err) == -1 && strstr(err, "not kept") &&
              strstr(err, "optim.v.w"), "a tensor not kept read as floats: '%s'", err);
    CHECK(some && ag_st_to_f32(ag_st_get(some, "w"), out, err, sizeof err) == 0 && out[5] == 6, "kept tensor read");
    ag_st_free(all);
    ag_st_free(some);
    ag_st_free(none);

    /* the writer refuses NaN: poke it into the file by hand */
    static const size_t at[] = {0, 65535, 65536, NM - 1};   /* first, a round's end and start, last */
    FILE *f = fopen(path, "r+b");
    unsigned char lenb[8];
    uint64_t hlen = 0;
    CHECK(f && fread(lenb, 1, 8, f) == 8, "reading %s back", path);
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | lenb[i];
    for (size_t k = 0; f && k < sizeof at / sizeof at[0]; k++) {
        const long off = (long)(8 + hlen + sizeof w + at[k] * sizeof *m);   /* "optim.m.w" follows "w" */
        const float nan = NAN;
        CHECK(fseek(f, off, SEEK_SET) == 0 && fwrite(&nan, sizeof nan, 1, f) == 1 && fflush(f) == 0, "poke NaN");
        ag_st_file *bad = ag_st_load_except(path, "optim.", err, sizeof err);
        CHECK(!bad && strstr(err, "tensor \"optim.m.w\": F32 data contains NaN or Inf") && one_line(err),
              "NaN at element %zu of a tensor not kept: '%s'", at[k], err);
        ag_st_free(bad);
        CHECK(fseek(f, off, SEEK_SET) == 0 && fwrite(&m[at[k]], sizeof *m, 1, f) == 1 && fflush(f) == 0, "unpoke");
    }
    ag_st_file *again = ag_st_load_except(path, "optim.", err, sizeof err);
    CHECK(again != NULL, "the file with its values back: %s", err);
    ag_st_free(again);
    if (f) fclose(f);
    unlink(path);
    free(m);
}

/* ag_st_load_placed: the hook sees the header (tensors listed, no data,
 * metadata), may place tensors in memory of its own, which their bytes are
 * read into and checked there; the others are kept as ag_st_load keeps
 * them; a hook's -1 stops the load with its message; ag_st_place outside a
 * hook is refused. */
typedef struct {
    float *dst;             /* where "w" goes (NULL: nowhere) */
    int calls, saw_header;
    const char *fail;       /* a message to stop with, or NULL */
    const char *name;       /* the tensor placed in dst (NULL: "w") */
} place_probe;

static int place_hook(void *user, ag_st_file *f, char *err, size_t errlen)
{
    place_probe *pp = user;
    pp->calls++;
    const ag_st_tensor *w = ag_st_get(f, "w"), *m = ag_st_get(f, "m");
    pp->saw_header = ag_st_count(f) == 2 && w && m && w->data == NULL && m->data == NULL && w->nbytes == 24 &&
                     ag_st_meta(f, "k") && strcmp(ag_st_meta(f, "k"), "v") == 0;
    if (pp->fail) {
        ag_set_err(err, errlen, "%s", pp->fail);
        return -1;
    }
    if (pp->dst && ag_st_place(f, pp->name ? pp->name : "w", pp->dst) != 0) return -1;
    return ag_st_place(f, "no such tensor", pp->dst) == -1 && ag_st_place(f, "m", NULL) == -1 ? 0 : -1;
}

static void test_load_placed(void)
{
    float w[6] = {1, 2, 3, 4, 5, 6}, m[3] = {7, 8, 9}, dst[6] = {0};
    ag_st_tensor t[] = {
        {"w", AG_ST_F32, 2, {2, 3}, w, sizeof w},
        {"m", AG_ST_F32, 1, {3}, m, sizeof m},
    };
    const char *meta[] = {"k", "v"};
    char err[512] = "";
    PATH_IN(path, "placed.safetensors");
    CHECK(ag_st_save(path, t, 2, meta, 1, err, sizeof err) == 0, "save: %s", err);
    place_probe pp = {dst, 0, 0, NULL, NULL};
    ag_st_file *f = ag_st_load_placed(path, NULL, place_hook, &pp, err, sizeof err);
    CHECK(f && pp.calls == 1 && pp.saw_header, "the hook once, on the header (%d calls): %s", pp.calls, err);
    const ag_st_tensor *gw = ag_st_get(f, "w"), *gm = ag_st_get(f, "m");
    CHECK(gw && gw->data == (const void *)dst && memcmp(dst, w, sizeof w) == 0, "w read into the hook's memory");
    CHECK(gm && gm->data && gm->data != (const void *)dst && memcmp(gm->data, m, sizeof m) == 0, "m kept as loaded");
    CHECK(f && ag_st_place(f, "w", dst) == -1, "ag_st_place after the hook is refused");
    ag_st_drop_data(f);
    gw = ag_st_get(f, "w");
    gm = ag_st_get(f, "m");
    CHECK(gw && gm && !gw->data && !gm->data && gm->nbytes == sizeof m && ag_st_count(f) == 2 &&
              strcmp(ag_st_meta(f, "k"), "v") == 0 && memcmp(dst, w, sizeof w) == 0,
          "ag_st_drop_data: no data, the rest kept, placed memory untouched");
    ag_st_drop_data(NULL);
    ag_st_free(f);
    CHECK(ag_st_place(NULL, "w", dst) == -1, "ag_st_place of no file");

    pp = (place_probe){NULL, 0, 0, "stopped by the hook", NULL};
    f = ag_st_load_placed(path, NULL, place_hook, &pp, err, sizeof err);
    CHECK(!f && strcmp(err, "stopped by the hook") == 0, "a hook's -1 stops the load with its message: '%s'", err);

    /* a tensor under the prefix, placed: checked, not read there */
    float mdst[3] = {0};
    pp = (place_probe){mdst, 0, 0, NULL, "m"};
    f = ag_st_load_placed(path, "m", place_hook, &pp, err, sizeof err);
    CHECK(f && ag_st_get(f, "m")->data == NULL && mdst[0] == 0 && mdst[2] == 0 && ag_st_get(f, "w")->data &&
              memcmp(ag_st_get(f, "w")->data, w, sizeof w) == 0,
          "a placed tensor under the prefix is not read into its place: %s", err);
    ag_st_free(f);

    /* a NaN in a placed tensor: refused as anywhere, naming it */
    FILE *fp = fopen(path, "r+b");
    unsigned char lenb[8];
    uint64_t hlen = 0;
    CHECK(fp && fread(lenb, 1, 8, fp) == 8, "reading %s back", path);
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | lenb[i];
    const float nan = NAN;
    CHECK(fp && fseek(fp, (long)(8 + hlen + 4 * sizeof(float)), SEEK_SET) == 0 && fwrite(&nan, sizeof nan, 1, fp) == 1 &&
              fclose(fp) == 0, "poke NaN into w");
    pp = (place_probe){dst, 0, 0, NULL, NULL};
    f = ag_st_load_placed(path, NULL, place_hook, &pp, err, sizeof err);
    CHECK(!f && strstr(err, "tensor \"w\": F32 data contains NaN or Inf") && one_line(err), "NaN in a placed tensor: '%s'",
          err);
    ag_st_free(f);
    unlink(path);
}

/* The file changes between its header and its data (the hook runs in
 * between): cut short, while a kept or an unkept (checked only) tensor is
 * read, or grown; each refused in one line naming what happened. */
typedef struct {
    const char *path;
    off_t to;               /* the length to cut the file to, or -1: append a byte */
} change_probe;

static int change_hook(void *user, ag_st_file *f, char *err, size_t errlen)
{
    (void)f;
    const change_probe *cp = user;
    if (cp->to >= 0) {
        if (truncate(cp->path, cp->to) == 0) return 0;
    } else {
        FILE *fp = fopen(cp->path, "ab");
        if (fp && fputc('x', fp) != EOF && fclose(fp) == 0) return 0;
    }
    ag_set_err(err, errlen, "the test could not change %s", cp->path);
    return -1;
}

static void test_changed_while_read(void)
{
    float w[64], m[3] = {7, 8, 9};
    for (int i = 0; i < 64; i++) w[i] = (float)i;
    ag_st_tensor t[] = {
        {"w", AG_ST_F32, 1, {64}, w, sizeof w},
        {"m", AG_ST_F32, 1, {3}, m, sizeof m},
    };
    char err[512] = "";
    PATH_IN(path, "changing.safetensors");
    const struct { const char *prefix; off_t cut_into; const char *want; } cases[] = {
        {NULL, 100, "file shrank while being read"},   /* inside w, which is kept */
        {"w", 100, "file shrank while being read"},    /* inside w, checked and not kept */
        {"w", -1, "file grew while being read"},
        {NULL, -1, "file grew while being read"},
    };
    for (int c = 0; c < 4; c++) {
        CHECK(ag_st_save(path, t, 2, NULL, 0, err, sizeof err) == 0, "save: %s", err);
        size_t len = 0;
        unsigned char *b = slurp(path, &len);
        uint64_t hlen = 0;
        for (int i = 7; b && i >= 0; i--) hlen = hlen << 8 | b[i];
        free(b);
        change_probe cp = {path, cases[c].cut_into < 0 ? -1 : (off_t)(8 + hlen) + cases[c].cut_into};
        err[0] = 0;
        ag_st_file *f = ag_st_load_placed(path, cases[c].prefix, change_hook, &cp, err, sizeof err);
        CHECK(!f && strstr(err, path) && strstr(err, cases[c].want) && one_line(err),
              "%s, prefix %s: '%s'", cases[c].want, cases[c].prefix ? cases[c].prefix : "none", err);
        ag_st_free(f);
    }
    unlink(path);
}

/* ag_st_check: a save's verdict, nothing written */
static void test_check_only(void)
{
    char err[512] = "";
    float v[2] = {1, 2};
    ag_st_tensor t = {"w", AG_ST_F32, 1, {2}, v, sizeof v};
    const char *good[2] = {"text_path", "/tmp/caf\xc3\xa9.txt"}, *bad[2] = {"text_path", "/tmp/caf\xe9.txt"};
    CHECK(ag_st_check("x.st", &t, 1, good, 1, err, sizeof err) == 0, "a UTF-8 value passes: %s", err);
    CHECK(ag_st_check("x.st", &t, 1, bad, 1, err, sizeof err) == -1 && strncmp(err, "x.st: ", 6) == 0 &&
              strstr(err, "is not valid UTF-8") && one_line(err), "a Latin-1 value: %s", err);
    CHECK(ag_st_check(NULL, NULL, 0, bad, 1, err, sizeof err) == -1 && strncmp(err, "(checkpoint): ", 14) == 0,
          "no label: %s", err);
    PATH_IN(none, "never_written.safetensors");
    CHECK(ag_st_check(none, &t, 1, good, 1, err, sizeof err) == 0 && access(none, F_OK) != 0,
          "nothing is written");
}

/* torch.save's formats, named as such instead of as a length of 10^18 */
static void test_pickle(void)
{
    static const unsigned char zip[] = "PK\x03\x04\x14\x00\x00\x00\x08\x00archive/data.pkl";
    static const unsigned char legacy[] = "\x80\x02\x8a\x0alq\x1c\x0f\x02\x00ok";   /* protocol 2 */
    static const unsigned char proto4[] = "\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00}\x94.";
    const char *want = "not a safetensors file (this looks like a PyTorch pickle: save with safetensors)";
    expect_reject(zip, sizeof zip - 1, want, "zip archive");
    expect_reject(legacy, sizeof legacy - 1, want, "legacy pickle");
    expect_reject(proto4, sizeof proto4 - 1, want, "pickle protocol 4");
    /* other files with an impossible length keep the length message */
    static const unsigned char other[] = "\x80\x06\x00\x00\x00\x00\x00\x01{}";
    expect_reject(other, sizeof other - 1, "exceeds the limit", "0x80 0x06 is not a pickle protocol");
    static const unsigned char pk[] = "PK\x05\x06\x00\x00\x00\x00\x00\x00";
    expect_reject(pk, sizeof pk - 1, "exceeds the limit", "PK without the local-header magic");
}

/* Whatever a flipped byte does, the reader either refuses with a proper
 * message or returns tensors that tile the file's data buffer exactly. */
static void check_accepted(const ag_st_file *f, const unsigned char *b, size_t len, int *bad)
{
    size_t start = 8 + (size_t)le64(b), at = start;
    for (int i = 0; i < ag_st_count(f); i++) {
        const ag_st_tensor *t = ag_st_at(f, i);
        uint64_t elems = 1;
        for (int d = 0; d < t->ndim; d++) elems *= (uint64_t)t->shape[d];
        if (ag_st_get(f, t->name) != t || elems * ag_st_dtype_size(t->dtype) != t->nbytes ||
            at + t->nbytes > len || (t->nbytes && memcmp(t->data, b + at, t->nbytes) != 0)) {
            (*bad)++;
            return;
        }
        if (t->dtype == AG_ST_F32)
            for (size_t k = 0; k < t->nbytes / 4; k++) *bad += !isfinite(((const float *)t->data)[k]);
        if (t->dtype == AG_ST_F64)
            for (size_t k = 0; k < t->nbytes / 8; k++) *bad += !isfinite(((const double *)t->data)[k]);
        at += t->nbytes;
    }
    if (at != len) (*bad)++;
    for (int i = 0; i < ag_st_meta_count(f); i++)
        if (!ag_st_meta(f, ag_st_meta_key(f, i))) (*bad)++;
}

static void test_bit_flips(void)
{
    size_t len;
    PATH_IN(model, "model.safetensors");
    unsigned char *orig = slurp(model, &len);
    unsigned char *b = malloc(len);
    static const unsigned char masks[] = {0x01, 0x02, 0x20, 0x40, 0x80, 0xff};
    int accepted = 0, rejected = 0, bad = 0, bad_msg = 0, data_ok = 0;
    size_t data_start = 8 + (size_t)le64(orig);
    for (size_t pos = 0; pos < len; pos++)
        for (size_t m = 0; m < sizeof masks; m++) {
            char err[512] = "";
            memcpy(b, orig, len);
            b[pos] ^= masks[m];
            ag_st_file *f = ag_st_parse(b, len, "flip", err, sizeof err);
            if (f) {
                accepted++;
                check_accepted(f, b, len, &bad);
                data_ok += pos >= data_start;
            } else {
                rejected++;
                bad_msg += strncmp(err, "flip: ", 6) != 0 || !one_line(err) || strlen(err) < 12;
            }
            ag_st_free(f);
        }
    CHECK(bad == 0, "%d inconsistent accepted files", bad);
    CHECK(bad_msg == 0, "%d rejections with a malformed message", bad_msg);
    /* integer data can hold any bytes, so flips there must be accepted */
    CHECK(data_ok > 0 && accepted > 0 && rejected > 0, "accepted %d (data %d), rejected %d", accepted, data_ok,
          rejected);
    free(b);
    free(orig);
}

/* Seed files for the fuzzer double as an independent check: they are made
 * by tests/make_st_corpus.py with Python's json module.  ok_* must load,
 * bad_* must not. */
static void test_corpus(void)
{
    DIR *dp = opendir(CORPUS_DIR);
    CHECK(dp != NULL, "cannot open %s (run from the repository root)", CORPUS_DIR);
    if (!dp) return;
    int nok = 0, nbad = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        int ok = strncmp(e->d_name, "ok_", 3) == 0, isbad = strncmp(e->d_name, "bad_", 4) == 0;
        if (!ok && !isbad) continue;
        char p[512], err[512] = "";
        snprintf(p, sizeof p, "%s/%s", CORPUS_DIR, e->d_name);
        ag_st_file *f = ag_st_load(p, err, sizeof err);
        if (ok) CHECK(f != NULL, "%s rejected: %s", p, err);
        else CHECK(f == NULL && strncmp(err, p, strlen(p)) == 0, "%s accepted", p);
        nok += ok;
        nbad += isbad;
        ag_st_free(f);
    }
    closedir(dp);
    CHECK(nok >= 3 && nbad >= 10, "corpus has only %d ok and %d bad files", nok, nbad);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ag_st_test.XXXXXX");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 1; }
    init_sample();
    test_round_trip();
    test_layout();
    test_reader_escapes();
    test_save_failures();
    test_null_arguments();
    test_atomic_files();
    test_own_streams();
    test_load_failures();
    test_truncation_and_lengths();
    test_bad_json();
    test_bad_entries();
    test_half_dtypes();
    test_nonfinite_anywhere();
    test_load_except();
    test_load_placed();
    test_changed_while_read();
    test_pickle();
    test_check_only();
    test_bit_flips();
    test_corpus();
    PATH_IN(model, "model.safetensors");
    unlink(model);
    if (rmdir(dir) != 0) printf("note: %s not empty\n", dir);
    return check_done();
}
