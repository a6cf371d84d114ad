/*
 * test_svg.c - the SVG pictures and the CSV log reader: documents are
 * well-formed XML (checked by a small XML checker below), heatmaps have one
 * cell per weight with labels escaped and made visible, charts have a path and
 * a legend entry per series, and each kind of bad log gets its own message.
 */
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "svg.h"

/* ------------------------------------------------------------------------ */
/* A small XML well-formedness checker                                      */
/* ------------------------------------------------------------------------ */

/* Stricter than XML in one way: a raw '>' in text is refused too, since the
 * writer is meant to escape all of & < >. */

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == ':' || c == '.';
}

/* Length of the entity reference at s ("&amp;" etc.), 0 if it is not one. */
static size_t entity_len(const char *s, const char *end)
{
    static const char *const named[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (int k = 0; k < 5; k++) {
        size_t n = strlen(named[k]);
        if ((size_t)(end - s) >= n && memcmp(s, named[k], n) == 0) return n;
    }
    if (end - s < 4 || s[1] != '#') return 0;
    const char *p = s + 2;
    int hex = *p == 'x';
    p += hex;
    const char *digits = p;
    while (p < end && (hex ? strchr("0123456789abcdefABCDEF", *p) != NULL : (*p >= '0' && *p <= '9')) && *p)
        p++;
    return p > digits && p < end && *p == ';' ? (size_t)(p + 1 - s) : 0;
}

/* Every byte sequence valid UTF-8 and no control characters but tab, LF, CR. */
static int check_chars(const unsigned char *s, size_t len, char *msg, size_t msglen)
{
    for (size_t i = 0; i < len;) {
        unsigned c = s[i];
        size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > len || (n == 2 && c < 0xC2)) {
            snprintf(msg, msglen, "byte %zu: malformed UTF-8 0x%02x", i, c);
            return -1;
        }
        for (size_t k = 1; k < n; k++)
            if ((s[i + k] & 0xC0) != 0x80) {
                snprintf(msg, msglen, "byte %zu: malformed UTF-8 sequence", i);
                return -1;
            }
        if (n == 1 && ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F)) {
            snprintf(msg, msglen, "byte %zu: control character 0x%02x", i, c);
            return -1;
        }
        i += n;
    }
    return 0;
}

#define XML_MAX_DEPTH 64

static int xml_check(const char *doc, size_t len, char *msg, size_t msglen)
{
    if (check_chars((const unsigned char *)doc, len, msg, msglen) != 0) return -1;
    const char *p = doc, *end = doc + len;
    const char *stack[XML_MAX_DEPTH];
    size_t stack_len[XML_MAX_DEPTH];
    int depth = 0, roots = 0;
#define XML_FAIL(...) do { snprintf(msg, msglen, __VA_ARGS__); return -1; } while (0)
    while (p < end) {
        size_t at = (size_t)(p - doc);
        if (*p != '<') {
            if (*p == '&') {
                size_t n = entity_len(p, end);
                if (!n) XML_FAIL("byte %zu: bare '&' in text", at);
                p += n;
                continue;
            }
            if (*p == '>') XML_FAIL("byte %zu: raw '>' in text", at);
            if (depth == 0 && *p != ' ' && *p != '\n' && *p != '\t' && *p != '\r')
                XML_FAIL("byte %zu: text outside the root element", at);
            p++;
            continue;
        }
        if (end - p >= 4 && memcmp(p, "<!--", 4) == 0) {
            const char *q = strstr(p + 4, "-->");
            if (!q) XML_FAIL("byte %zu: unterminated comment", at);
            p = q + 3;
            continue;
        }
        if (end - p >= 2 && p[1] == '?') {
            const char *q = strstr(p + 2, "?>");
            if (!q) XML_FAIL("byte %zu: unterminated processing instruction", at);
            p = q + 2;
            continue;
        }
        if (end - p >= 2 && p[1] == '/') { /* closing tag */
            const char *name = p + 2, *q = name;
            while (q < end && is_name_char(*q)) q++;
            size_t n = (size_t)(q - name);
            while (q < end && *q == ' ') q++;
            if (q >= end || *q != '>') XML_FAIL("byte %zu: malformed closing tag", at);
            if (depth == 0) XML_FAIL("byte %zu: closing tag with nothing open", at);
            depth--;
            if (stack_len[depth] != n || memcmp(stack[depth], name, n) != 0)
                XML_FAIL("byte %zu: </%.*s> closes <%.*s>", at, (int)n, name, (int)stack_len[depth],
                         stack[depth]);
            p = q + 1;
            continue;
        }
        /* opening tag */
        const char *name = p + 1, *q = name;
        while (q < end && is_name_char(*q)) q++;
        if (q == name) XML_FAIL("byte %zu: '<' not starting a tag", at);
        if (depth == 0 && roots++ > 0) XML_FAIL("byte %zu: second root element", at);
        int self_close = 0;
        for (;;) {
            while (q < end && (*q == ' ' || *q == '\n' || *q == '\t')) q++;
            if (q >= end) XML_FAIL("byte %zu: unterminated tag", at);
            if (*q == '>') break;
            if (*q == '/' && q + 1 < end && q[1] == '>') { self_close = 1; q++; break; }
            const char *attr = q;
            while (q < end && is_name_char(*q)) q++;
            if (q == attr) XML_FAIL("byte %zu: bad attribute name", (size_t)(q - doc));
            if (q >= end || *q != '=') XML_FAIL("byte %zu: attribute without '='", (size_t)(q - doc));
            q++;
            if (q >= end || (*q != '"' && *q != '\'')) XML_FAIL("byte %zu: unquoted attribute", (size_t)(q - doc));
            char quote = *q++;
            while (q < end && *q != quote) {
                if (*q == '<') XML_FAIL("byte %zu: '<' in attribute value", (size_t)(q - doc));
                if (*q == '&') {
                    size_t n = entity_len(q, end);
                    if (!n) XML_FAIL("byte %zu: bare '&' in attribute", (size_t)(q - doc));
                    q += n;
                } else {
                    q++;
                }
            }
            if (q >= end) XML_FAIL("byte %zu: unterminated attribute value", at);
            q++;
            if (q < end && *q != ' ' && *q != '>' && *q != '/' && *q != '\n')
                XML_FAIL("byte %zu: attributes not separated", (size_t)(q - doc));
        }
        if (!self_close) {
            if (depth == XML_MAX_DEPTH) XML_FAIL("byte %zu: nesting too deep", at);
            stack[depth] = name;
            stack_len[depth++] = (size_t)(strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_:."));
        }
        p = q + 1;
    }
    if (depth) XML_FAIL("end of document with <%.*s> open", (int)stack_len[depth - 1], stack[depth - 1]);
    if (!roots) XML_FAIL("no root element");
#undef XML_FAIL
    return 0;
}

static int xml_ok(const char *doc)
{
    char msg[200];
    return xml_check(doc, strlen(doc), msg, sizeof msg) == 0;
}

static void test_xml_checker(void)
{
    CHECK(xml_ok("<?xml version=\"1.0\"?>\n<a x=\"1\" y='2'><b/>t &amp; &#x2423; &#10;<c></c></a>\n"),
          "checker accepts a good document");
    static const char *const bad[] = {
        "<a><b></a>",            /* mismatched */
        "<a>",                   /* unclosed */
        "<a x=1/>",              /* unquoted attribute */
        "<a>fish & chips</a>",   /* bare & */
        "<a>1 > 0</a>",          /* raw > */
        "<a x=\"<\"/>",          /* < in attribute */
        "<a>\x01</a>",           /* control byte */
        "<a>\xff</a>",           /* malformed UTF-8 */
        "<a/><b/>",              /* two roots */
        "<a x=\"1\"y=\"2\"/>",   /* attributes run together */
        "</a>",                  /* close with nothing open */
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        CHECK(!xml_ok(bad[k]), "checker refuses bad document %zu: %s", k, bad[k]);
}

/* ------------------------------------------------------------------------ */
/* helpers                                                                  */
/* ------------------------------------------------------------------------ */

static int count(const char *hay, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = strstr(hay, needle); p; p = strstr(p + len, needle)) n++;
    return n;
}

/* An in-memory stream for the writers; the caller frees *buf. */
typedef struct { FILE *f; char *buf; size_t len; } membuf;

static int mem_open(membuf *m)
{
    m->buf = NULL;
    m->len = 0;
    m->f = open_memstream(&m->buf, &m->len);
    return m->f ? 0 : -1;
}

static char *mem_close(membuf *m)
{
    fclose(m->f);
    return m->buf;
}

/* A causal attention pattern: row i spreads over keys 0..i, zero above. */
static float *causal_weights(int n_panels, int T)
{
    float *w = calloc((size_t)n_panels * T * T, sizeof *w);
    for (int p = 0; p < n_panels; p++)
        for (int i = 0; i < T; i++)
            for (int j = 0; j <= i; j++)
                w[((size_t)p * T + i) * T + j] = (float)(j + 1 + p) / (float)((i + 1) * (i + 2 + 2 * p) / 2);
    return w;
}

static char *attention_svg_as(const char *title, int n_panels, const float *w, int rows, int cols,
                              const char *const *rl, const char *const *cl, svg_cells cells, int *rc)
{
    membuf m;
    char err[256] = "";
    if (mem_open(&m) != 0) return NULL;
    *rc = svg_attention(m.f, title, n_panels, NULL, w, rows, cols, rl, cl, cells, err, sizeof err);
    return mem_close(&m);
}

static char *attention_svg(const char *title, int n_panels, const float *w, int rows, int cols,
                           const char *const *rl, const char *const *cl, int *rc)
{
    return attention_svg_as(title, n_panels, w, rows, cols, rl, cl, SVG_CELLS_AUTO, rc);
}

/* ------------------------------------------------------------------------ */
/* heatmaps                                                                 */
/* ------------------------------------------------------------------------ */

static void test_cell_counts(void)
{
    static const int sizes[][3] = {{1, 1, 1}, {1, 12, 12}, {4, 8, 8}, {6, 5, 5}, {2, 64, 64}, {3, 16, 16}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int P = sizes[k][0], T = sizes[k][1], rc = -1;
        float *w = causal_weights(P, T);
        char *doc = attention_svg("attention", P, w, T, T, NULL, NULL, &rc);
        CHECK(rc == 0, "svg_attention %dx%dx%d returns 0", P, T, T);
        CHECK(doc && xml_ok(doc), "%d panels of %d: well-formed", P, T);
        if (doc) {
            CHECK(count(doc, "<rect class=\"cell") == P * T * T, "%d panels of %dx%d: %d cells, want %d", P, T,
                  T, count(doc, "<rect class=\"cell"), P * T * T);
            /* The strictly upper triangle is exactly zero: the masked cells. */
            CHECK(count(doc, "class=\"cell masked\"") == P * T * (T - 1) / 2, "%d panels of %d: %d masked, want %d",
                  P, T, count(doc, "class=\"cell masked\""), P * T * (T - 1) / 2);
            CHECK(count(doc, "class=\"panel\"") == P, "%d panel groups", P);
            CHECK(count(doc, "<title>") == P * T * T, "one tooltip per cell");
        }
        free(doc);
        free(w);
    }
    /* Non-square (e.g. cross attention) and a layout beyond one row of 4. */
    int rc = -1;
    float w[5 * 3 * 7];
    for (int k = 0; k < 5 * 3 * 7; k++) w[k] = 0.5f;
    char *doc = attention_svg(NULL, 5, w, 3, 7, NULL, NULL, &rc);
    CHECK(rc == 0 && doc && xml_ok(doc), "5 panels of 3x7: ok and well-formed");
    CHECK(doc && count(doc, "<rect class=\"cell\"") == 5 * 3 * 7, "5 panels of 3x7 cells, none masked");
    free(doc);
}

/* Cells as one image a panel: asked for, or past SVG_RECT_CELLS_MAX cells
 * (auto); rects up to it.  (tests/cli_viz.sh reads the PNGs back.) */
static void test_cells_as_image(void)
{
    static const struct { int P, T; svg_cells how; int image; } cases[] = {
        {1, 1, SVG_CELLS_IMAGE, 1}, {3, 16, SVG_CELLS_IMAGE, 1}, {3, 16, SVG_CELLS_AUTO, 0},
        {2, 128, SVG_CELLS_AUTO, 0},            /* 32768 cells: the most drawn as rects */
        {3, 128, SVG_CELLS_AUTO, 1}, {3, 128, SVG_CELLS_RECTS, 0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int P = cases[k].P, T = cases[k].T;
        int rc = -1;
        float *w = causal_weights(P, T);
        char *doc = attention_svg_as("t", P, w, T, T, NULL, NULL, cases[k].how, &rc);
        CHECK(rc == 0 && doc && xml_ok(doc), "%d panels of %d, cells %d: ok and well-formed", P, T, (int)cases[k].how);
        if (doc) {
            const int images = count(doc, "<image class=\"cells\""), rects = count(doc, "<rect class=\"cell");
            if (cases[k].image)
                CHECK(images == P && rects == 0 && count(doc, "class=\"masked-area\"") == P &&
                          count(doc, "xlink:href=\"data:image/png;base64,") == P && strstr(doc, "xmlns:xlink="),
                      "%d panels of %d: %d images, %d rect cells, want %d images", P, T, images, rects, P);
            else
                CHECK(images == 0 && rects == P * T * T && !strstr(doc, "xmlns:xlink="),
                      "%d panels of %d: %d images, %d rect cells, want %d rects", P, T, images, rects, P * T * T);
        }
        free(doc);
        free(w);
    }
}

/* Layout: panels go 4 to a row, so panel 4 starts a second row below panel 0. */
static void test_panel_grid(void)
{
    int rc = -1;
    float *w = causal_weights(5, 6);
    char *doc = attention_svg("t", 5, w, 6, 6, NULL, NULL, &rc);
    int x[5] = {0}, y[5] = {0}, n = 0;
    for (const char *p = doc ? strstr(doc, "class=\"panel\"") : NULL; p && n < 5;
         p = strstr(p + 1, "class=\"panel\""), n++)
        sscanf(p, "class=\"panel\" transform=\"translate(%d,%d)", &x[n], &y[n]);
    CHECK(n == 5, "found %d panel transforms", n);
    CHECK(x[0] < x[1] && x[1] < x[2] && x[2] < x[3] && y[0] == y[3], "first four panels side by side");
    CHECK(x[4] == x[0] && y[4] > y[0], "fifth panel starts a second row (x %d y %d)", x[4], y[4]);
    free(doc);
    free(w);
}

static void test_label_escaping(void)
{
    /* A prompt of awkward characters, one label each. */
    static const char *const labels[] = {"<", "&", ">", "\"", "'", "\n", "\x01", " ", "\t", "\xff", "\xc3\xa9"};
    enum { T = sizeof labels / sizeof labels[0] };
    float *w = causal_weights(1, T);
    int rc = -1;
    char *doc = attention_svg("a <b> & \"c\"", 1, w, T, T, labels, labels, &rc);
    CHECK(rc == 0 && doc, "svg_attention with awkward labels");
    if (!doc) return;
    char msg[200] = "";
    CHECK(xml_check(doc, strlen(doc), msg, sizeof msg) == 0, "awkward labels: well-formed (%s)", msg);
    CHECK(strstr(doc, ">&lt;</text>") && strstr(doc, ">&amp;</text>") && strstr(doc, ">&gt;</text>") &&
              strstr(doc, ">&quot;</text>") && strstr(doc, ">&apos;</text>"),
          "the five XML specials appear escaped as labels");
    CHECK(strstr(doc, ">\xE2\x8F\x8E</text>") != NULL, "newline label shown as the return symbol");
    CHECK(strstr(doc, ">\\x01</text>") != NULL, "byte 0x01 shown as \\x01");
    CHECK(strstr(doc, ">\xE2\x90\xA3</text>") != NULL, "space label shown as an open box");
    CHECK(strstr(doc, ">\xE2\x87\xA5</text>") != NULL, "tab label shown as an arrow");
    CHECK(strstr(doc, ">\\xff</text>") != NULL, "a lone 0xff byte shown as \\xff");
    CHECK(strstr(doc, ">\xc3\xa9</text>") != NULL, "valid UTF-8 label kept as is");
    CHECK(memchr(doc, 0x01, strlen(doc)) == NULL && memchr(doc, 0xff, strlen(doc)) == NULL,
          "no raw 0x01 or 0xff byte in the output");
    CHECK(strstr(doc, "a &lt;b&gt; &amp; &quot;c&quot;") != NULL, "title escaped");
    CHECK(strstr(doc, "<title>query 0 '&lt;' \xE2\x86\x92 key 0 '&lt;': 1.000</title>") != NULL,
          "tooltip names query and key labels and the weight");
    free(doc);
    free(w);

    /* Three- and four-byte UTF-8 kept as is; the sequences that only look
     * like it (overlong, a surrogate, U+FFFE, past U+10FFFF, cut short)
     * shown byte by byte, so the document stays valid UTF-8. */
    static const char *const wide[] = {"\xe2\x98\x83", "\xf0\x9d\x84\x9e", "\xe0\x80\x80", "\xed\xa0\x80",
                                       "\xef\xbf\xbe", "\xf4\x90\x80\x80", "\xf0\x80\x80\x80", "\xe2\x98"};
    enum { NW = sizeof wide / sizeof wide[0] };
    float *ww = causal_weights(1, NW);
    doc = attention_svg("\xe2\x98\x83 \xf0\x9d\x84\x9e \xed\xa0\x80", 1, ww, NW, NW, wide, wide, &rc);
    msg[0] = 0;
    CHECK(rc == 0 && doc && xml_check(doc, strlen(doc), msg, sizeof msg) == 0,
          "3- and 4-byte and malformed UTF-8 labels: well-formed valid UTF-8 (%s)", msg);
    CHECK(doc && strstr(doc, ">\xe2\x98\x83</text>") && strstr(doc, ">\xf0\x9d\x84\x9e</text>"),
          "3- and 4-byte UTF-8 labels kept as they are");
    const char *shown[] = {">\\xe0\\x80", ">\\xed\\xa0", ">\\xef\\xbf", ">\\xf4\\x90", ">\\xf0\\x80", ">\\xe2\\x98"};
    for (int i = 0; doc && i < 6; i++)
        CHECK(strstr(doc, shown[i]) != NULL, "malformed label %d shown byte by byte (%s...)", i + 2, shown[i] + 1);
    CHECK(doc && strstr(doc, "\xe2\x98\x83 \xf0\x9d\x84\x9e \\xed\\xa0\\x80"), "title: the valid kept, the surrogate shown");
    free(doc);
    free(ww);

    /* Long labels are cut with an ellipsis; missing labels fall back to indices. */
    static const char *const long_labels[] = {"a_very_long_token_label", "b"};
    float w2[4] = {1, 0, 0.5f, 0.5f};
    doc = attention_svg(NULL, 1, w2, 2, 2, long_labels, NULL, &rc);
    CHECK(rc == 0 && doc && xml_ok(doc), "long labels: ok");
    CHECK(doc && strstr(doc, ">a_very_long\xE2\x80\xA6</text>") != NULL, "long row label cut to 12 with an ellipsis");
    CHECK(doc && strstr(doc, "key 1 '1'") != NULL, "NULL column labels become indices");
    free(doc);
}

static void test_legend_and_axes(void)
{
    float *w = causal_weights(1, 4);
    int rc = -1;
    char *doc = attention_svg("t", 1, w, 4, 4, NULL, NULL, &rc);
    CHECK(doc && strstr(doc, "class=\"colorbar\"") != NULL, "color bar present");
    const char *bar = doc ? strstr(doc, "class=\"colorbar\"") : NULL;
    CHECK(bar && count(bar, "class=\"tick\"") == 5, "color bar has 5 ticks");
    CHECK(doc && strstr(doc, ">0</text>") && strstr(doc, ">0.5</text>") && strstr(doc, ">1</text>"),
          "color bar ticks 0, 0.5, 1");
    CHECK(doc && strstr(doc, ">masked</text>") != NULL, "masked swatch labeled");
    CHECK(doc && strstr(doc, ">query ") && strstr(doc, ">key "), "axis names query and key");
    CHECK(doc && strstr(doc, "<linearGradient id=\"cmap\"") != NULL, "color bar gradient defined");
    free(doc);
    free(w);
}

static double luma_at(const char *p)
{
    unsigned r, g, b;
    if (sscanf(p, "fill=\"#%2x%2x%2x\"", &r, &g, &b) != 3) return -1;
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/* Colormap: heavier weights are darker, from near white to a dark blue. */
static void test_colormap(void)
{
    enum { N = 20 };
    float w[N];
    for (int k = 0; k < N; k++) w[k] = (float)(k + 1) / N;
    int rc = -1;
    char *doc = attention_svg(NULL, 1, w, 1, N, NULL, NULL, &rc);
    double luma[N];
    int n = 0, blue_dark = 0;
    for (const char *p = doc ? strstr(doc, "<rect class=\"cell\"") : NULL; p && n < N;
         p = strstr(p + 1, "<rect class=\"cell\"")) {
        const char *fill = strstr(p, "fill=\"#");
        luma[n++] = fill ? luma_at(fill) : -1;
        if (n == N && fill) {
            unsigned r, g, b;
            blue_dark = sscanf(fill, "fill=\"#%2x%2x%2x\"", &r, &g, &b) == 3 && b > r + 40 && b > g + 20;
        }
    }
    CHECK(n == N, "found %d colored cells", n);
    int monotone = 1;
    for (int k = 1; k < n; k++) monotone &= luma[k] < luma[k - 1];
    CHECK(monotone, "luminance falls as the weight grows");
    CHECK(n == N && luma[0] > 225 && luma[N - 1] < 70, "0.05 is near white (%.0f), 1 is dark (%.0f)", luma[0],
          luma[N - 1]);
    CHECK(blue_dark, "weight 1 is blue");
    free(doc);
}

static void test_attention_errors(void)
{
    char err[256] = "";
    float w[4] = {1, 0, 0, 1};
    membuf m;
    mem_open(&m);
    CHECK(svg_attention(m.f, NULL, 1, NULL, w, 0, 2, NULL, NULL, SVG_CELLS_AUTO, err, sizeof err) == -1 && strstr(err, "positive"),
          "zero rows refused: %s", err);
    CHECK(svg_attention(m.f, NULL, 1, NULL, NULL, 2, 2, NULL, NULL, SVG_CELLS_AUTO, err, sizeof err) == -1, "NULL weights refused");
    free(mem_close(&m));

    /* A stream that cannot be written: the write error is reported. */
    char path[] = "/tmp/attograd_svg_ro_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    close(fd);
    FILE *ro = fopen(path, "r");
    err[0] = '\0';
    CHECK(ro && svg_attention(ro, "t", 1, NULL, w, 2, 2, NULL, NULL, SVG_CELLS_AUTO, err, sizeof err) == -1 &&
              strstr(err, "write error"),
          "read-only stream: write error reported (%s)", err);
    svg_series s = {"a", 2, (const double[]){0, 1}, (const double[]){1, 2}};
    err[0] = '\0';
    CHECK(ro && svg_lines(ro, "t", "x", "y", &s, NULL, 1, err, sizeof err) == -1 && strstr(err, "write error"),
          "read-only stream: svg_lines reports the write error (%s)", err);
    if (ro) fclose(ro);
    unlink(path);
}

/* ------------------------------------------------------------------------ */
/* ticks and line charts                                                    */
/* ------------------------------------------------------------------------ */

/* Is step = m * 10^k with m in {1, 2, 5}? */
static int is_125(double step)
{
    double k = floor(log10(step) + 1e-6), m = step / pow(10, k);
    return fabs(m - 1) < 1e-6 || fabs(m - 2) < 1e-6 || fabs(m - 5) < 1e-6;
}

static void test_ticks(void)
{
    double t[64];
    int n = svg_nice_ticks(0, 1000, 9, t, 64);
    CHECK(n == 6 && t[0] == 0 && fabs(t[5] - 1000) < 1e-9, "0..1000 in <= 9 ticks: 0,200,..,1000 (got %d)", n);
    n = svg_nice_ticks(1.23, 4.17, 8, t, 64);
    CHECK(n == 8 && fabs(t[0] - 1) < 1e-12 && fabs(t[7] - 4.5) < 1e-12, "1.23..4.17: 1.0..4.5 by 0.5 (got %d)", n);
    n = svg_nice_ticks(0, 0.3, 4, t, 64);
    CHECK(n == 4 && fabs(t[3] - 0.3) < 1e-12, "0..0.3 by 0.1 is 4 ticks, not 5 (got %d)", n);
    CHECK(svg_nice_ticks(NAN, 1, 5, t, 64) == 0 && svg_nice_ticks(2, 1, 5, t, 64) == 0 &&
              svg_nice_ticks(0, 1, 1, t, 64) == 0,
          "NaN, reversed range and max_ticks < 2 give no ticks");
    /* Properties on many ranges: 1-2-5 step, even spacing, enclosing, few enough. */
    unsigned seed = 12345;
    int all_ok = 1;
    for (int trial = 0; trial < 500; trial++) {
        seed = seed * 1103515245u + 12345u;
        double lo = ((seed >> 8) % 20000) / 100.0 - 100;
        seed = seed * 1103515245u + 12345u;
        double span = pow(10, ((seed >> 8) % 1200) / 100.0 - 6);
        int max = 3 + trial % 8;
        n = svg_nice_ticks(lo, lo + span, max, t, 64);
        double step = n >= 2 ? t[1] - t[0] : 0;
        /* Enclosing [lo, hi] up to a millionth of a step (rounding). */
        int ok = n >= 2 && n <= max && t[0] <= lo + 1e-6 * step && t[n - 1] >= lo + span - 1e-6 * step;
        ok = ok && is_125(step);
        for (int k = 1; ok && k < n; k++) ok = fabs(t[k] - t[k - 1] - step) < 1e-6 * step;
        /* The next smaller 1-2-5 step would need too many ticks. */
        if (ok) {
            double e = floor(log10(step) + 1e-6), m = round(step / pow(10, e));
            double smaller = (m == 5 ? 2 : m == 2 ? 1 : 0.5) * pow(10, e);
            double need = ceil((lo + span) / smaller - 1e-6) - floor(lo / smaller + 1e-6) + 1;
            ok = need > max;
        }
        if (!ok) {
            printf("ticks for [%g, %g] max %d: n=%d\n", lo, lo + span, max, n);
            all_ok = 0;
            break;
        }
    }
    CHECK(all_ok, "tick properties hold over 500 random ranges");
}

static char *lines_svg(const svg_series *s, const int *dashed, int n, int *rc)
{
    membuf m;
    char err[256] = "";
    if (mem_open(&m) != 0) return NULL;
    *rc = svg_lines(m.f, "loss & <friends>", "step", "loss", s, dashed, n, err, sizeof err);
    return mem_close(&m);
}

static void test_lines(void)
{
    double x[6] = {0, 100, 200, 300, 400, 500};
    double a[6] = {4.2, 3.1, 2.5, 2.2, 2.0, 1.9};
    double b[6] = {4.1, NAN, NAN, 2.4, NAN, 2.1};
    double c[6] = {4.0, 2.8, 2.0, 1.7, 1.5, 1.4};
    svg_series s[3] = {{"run <a> train", 6, x, a}, {"run a val", 6, x, b}, {"run b", 6, x, c}};
    int dashed[3] = {0, 1, 0}, rc = -1;
    char *doc = lines_svg(s, dashed, 3, &rc);
    CHECK(rc == 0 && doc, "svg_lines returns 0");
    if (!doc) return;
    char msg[200] = "";
    CHECK(xml_check(doc, strlen(doc), msg, sizeof msg) == 0, "line chart well-formed (%s)", msg);
    CHECK(count(doc, "<path class=\"series\"") == 3, "one path per series (%d)", count(doc, "<path class=\"series\""));
    CHECK(count(doc, "class=\"legend-entry\"") == 3, "one legend entry per series");
    CHECK(strstr(doc, ">run &lt;a&gt; train</text>") != NULL, "legend label escaped");
    CHECK(strstr(doc, "loss &amp; &lt;friends&gt;") != NULL, "title escaped");
    CHECK(strstr(doc, "nan") == NULL && strstr(doc, "NaN") == NULL, "NaN points never written");
    /* The val series (the second path) has 3 finite points: one move, two lines. */
    const char *p2 = strstr(strstr(doc, "<path class=\"series\"") + 1, "<path class=\"series\"");
    const char *d = p2 ? strstr(p2, " d=\"") : NULL;
    const char *dend = d ? strchr(d + 4, '"') : NULL;
    int moves = 0, lines = 0;
    for (const char *q = d; q && q < dend; q++) moves += *q == 'M', lines += *q == 'L';
    CHECK(d && moves == 1 && lines == 2, "NaNs skipped: val path has M + 2 L (got %d, %d)", moves, lines);
    CHECK(p2 && strstr(p2, "stroke-dasharray") && strstr(p2, "stroke-dasharray") < strstr(p2, "/>"),
          "val series dashed");
    CHECK(count(doc, "<path class=\"series\" fill=\"none\" stroke=\"#") == 3, "every path has a color");
    char c0[8] = "", c1[8] = "", c2[8] = "";
    const char *p1 = strstr(doc, "<path class=\"series\"");
    const char *p3 = p2 ? strstr(p2 + 1, "<path class=\"series\"") : NULL;
    sscanf(p1, "<path class=\"series\" fill=\"none\" stroke=\"%7s", c0);
    if (p2) sscanf(p2, "<path class=\"series\" fill=\"none\" stroke=\"%7s", c1);
    if (p3) sscanf(p3, "<path class=\"series\" fill=\"none\" stroke=\"%7s", c2);
    CHECK(strcmp(c0, c1) == 0, "dashed val shares its train series' color (%s, %s)", c0, c1);
    CHECK(strcmp(c0, c2) != 0, "the next solid series gets a new color (%s, %s)", c0, c2);
    CHECK(strstr(doc, ">500</text>") && strstr(doc, ">0</text>"), "x ticks 0 and 500 labeled");
    CHECK(strstr(doc, ">1.0</text>") && strstr(doc, ">4.5</text>"), "y ticks 1.0 .. 4.5 labeled");
    CHECK(strstr(doc, ">step</text>") && strstr(doc, ">loss</text>"), "axis labels");
    CHECK(count(doc, "<circle") == 3, "sparse dashed series marked at its 3 points");
    free(doc);

    /* Degenerate inputs still make a valid chart. */
    double one_x = 7, one_y = 2;
    svg_series single = {"one point", 1, &one_x, &one_y};
    double nx[2] = {NAN, NAN};
    svg_series empty = {"nothing", 2, nx, nx};
    doc = lines_svg(&single, NULL, 1, &rc);
    CHECK(rc == 0 && doc && xml_ok(doc) && count(doc, "<path class=\"series\"") == 1, "a single point charts");
    /* a path of one point draws nothing: the point is a dot (a log of one row) */
    CHECK(doc && count(doc, "<circle") == 1, "a solid series of one point is drawn as a dot (%d dots)",
          doc ? count(doc, "<circle") : -1);
    free(doc);
    /* A legend of 32 entries (16 logs, train and val) fits in the picture:
     * the chart grows taller rather than cut the last entries off. */
    svg_series many[32];
    int many_dashed[32];
    for (int k = 0; k < 32; k++) {
        many[k] = (svg_series){k % 2 ? "run val" : "run train", 6, x, a};
        many_dashed[k] = k % 2;
    }
    doc = lines_svg(many, many_dashed, 32, &rc);
    int svg_h = 0;
    double lx = 0, ly = -1, lw = 0, lh = 0;
    const char *svg_at = doc ? strstr(doc, "<svg ") : NULL, *leg = doc ? strstr(doc, "class=\"legend\"") : NULL;
    if (svg_at) sscanf(strstr(svg_at, " height=\""), " height=\"%d\"", &svg_h);
    if (leg) sscanf(leg, "class=\"legend\" font-size=\"12\" transform=\"translate(%lf,%lf)\">\n<rect width=\"%lf\" "
                    "height=\"%lf\"", &lx, &ly, &lw, &lh);
    CHECK(rc == 0 && doc && xml_ok(doc) && count(doc, "class=\"legend-entry\"") == 32 && ly >= 0 && lh > 32 * 18 &&
              ly + lh <= svg_h - 62,
          "a legend of 32 entries ends inside the plot area (top %g, height %g, picture %d)", ly, lh, svg_h);
    free(doc);
    doc = lines_svg(s, dashed, 3, &rc);
    CHECK(doc && strstr(doc, "height=\"500\" viewBox=\"0 0 820 500\""), "a short legend leaves the chart 820 x 500");
    free(doc);

    svg_series both[2] = {empty, single};
    doc = lines_svg(both, NULL, 2, &rc);
    CHECK(rc == 0 && doc && xml_ok(doc) && count(doc, "class=\"legend-entry\"") == 2, "an all-NaN series charts");
    free(doc);
    doc = lines_svg(NULL, NULL, 0, &rc);
    CHECK(rc == 0 && doc && xml_ok(doc) && count(doc, "<path class=\"series\"") == 0, "no series: empty axes");
    free(doc);

    /* Values at the edges of a double (a hand-made log): a span past
     * DBL_MAX, a flat value near it, subnormals flat or not, an axis ending
     * near DBL_MAX: every coordinate and label is a number, never nan or
     * inf, and the points stay in the plot area. */
    const double edge[][2] = {{1e308, -1e308}, {1.75e308, 1.75e308}, {1e-320, 1e-320}, {4.9e-324, 4.9e-324},
                              {1e-320, 3e-320}, {0, 1.7e308}, {-1.79e308, 1e300}};
    int edges_ok = 1;
    for (size_t e = 0; e < sizeof edge / sizeof edge[0]; e++) {
        double ex[2] = {1, 2}, ey[2] = {edge[e][0], edge[e][1]};
        svg_series es[2] = {{"y", 2, ex, ey}, {"x", 2, ey, ex}};     /* on each axis */
        doc = lines_svg(es, NULL, 2, &rc);
        int ok = rc == 0 && doc && xml_ok(doc) && !strstr(doc, "nan") && !strstr(doc, "inf");
        double px, py;
        const char *at = doc ? strstr(doc, " d=\"M") : NULL;
        ok = ok && at && sscanf(at + 5, "%lf,%lf", &px, &py) == 2 && px >= 78 - 3 && px <= 796 + 3 &&
             py >= 20 && py <= 500;
        if (!ok) printf("chart of %g and %g: %s\n", edge[e][0], edge[e][1], doc ? doc : "(none)");
        edges_ok &= ok;
        free(doc);
    }
    CHECK(edges_ok, "values at a double's edges chart with finite coordinates and labels");
    double t[64];
    int n = svg_nice_ticks(1e-320, 3e-320, 8, t, 64), finite = 1;
    for (int k = 0; k < n; k++) finite &= isfinite(t[k]);
    CHECK(finite, "subnormal range: no tick is nan (%d ticks)", n);
    n = svg_nice_ticks(0, 1.7e308, 8, t, 64);
    finite = 1;
    for (int k = 0; k < n; k++) finite &= isfinite(t[k]);
    CHECK(finite, "range up to 1.7e308: no tick overflows (%d ticks)", n);
}

/* ------------------------------------------------------------------------ */
/* CSV logs                                                                 */
/* ------------------------------------------------------------------------ */

static char tmpdir[] = "/tmp/attograd_svg_XXXXXX";

static const char *write_file(const char *name, const char *text)
{
    static char path[4][256];
    static int slot;
    char *p = path[slot++ % 4];
    snprintf(p, 256, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
    return p;
}

#define HDR SVG_LOG_HEADER "\n"

static void test_read_log(void)
{
    svg_log log;
    char err[256] = "";
    const char *good = write_file("good.csv", HDR "0,4.17,4.18,0.05,0.0003,12.5,40000\r\n"
                                                  "10,3.5,,,0.0003,12.0,41000\n"
                                                  "\n"
                                                  "20,3.1,3.3,0.2,2e-4,11.9,42000\n");
    CHECK(svg_read_log(good, &log, err, sizeof err) == 0, "good log reads: %s", err);
    CHECK(log.n == 3, "3 rows (got %d)", log.n);
    CHECK(log.cut_line == 0, "no row cut short (got line %ld)", log.cut_line);
    if (log.n == 3) {
        CHECK(log.step[0] == 0 && log.step[1] == 10 && log.step[2] == 20, "steps");
        CHECK(log.train_loss[1] == 3.5 && log.val_loss[0] == 4.18 && log.val_acc[2] == 0.2, "values");
        CHECK(isnan(log.val_loss[1]) && isnan(log.val_acc[1]), "empty fields are NaN");
        CHECK(log.lr[2] == 2e-4 && log.ms_per_step[0] == 12.5 && log.tokens_per_s[2] == 42000, "other columns");
    }
    svg_log_free(&log);
    CHECK(log.n == 0 && log.step == NULL, "svg_log_free empties the log");

    /* a last row with no newline is cut short: left out, its line named;
     * with all its fields too (its last number may be cut), as a resumed
     * run drops it; a byte-order mark before the header is read past */
    const char *cut[] = {HDR "0,4.1,,,0.1,1,1\n10,3.9,,,0.1,1,1\n20,3.",
                         SVG_LOG_BOM HDR "0,4.1,,,0.1,1,1\r\n10,3.9,,,0.1,1,1\r\n20,3.5,,,0.1,1,4"};
    for (int k = 0; k < 2; k++) {
        const char *path = write_file("cut.csv", cut[k]);
        int rc = svg_read_log(path, &log, err, sizeof err);
        CHECK(rc == 0 && log.n == 2 && log.step[1] == 10 && log.cut_line == 4,
              "cut log %d: 2 rows and line 4 cut (rc %d, %d rows, line %ld: %s)", k, rc, log.n, log.cut_line, err);
        svg_log_free(&log);
    }
    CHECK(svg_log_is_header(SVG_LOG_BOM SVG_LOG_HEADER "\r\n", strlen(SVG_LOG_BOM SVG_LOG_HEADER "\r\n")) &&
              svg_log_is_header(SVG_LOG_HEADER, strlen(SVG_LOG_HEADER)) &&
              !svg_log_is_header(SVG_LOG_HEADER "\r1,2", strlen(SVG_LOG_HEADER "\r1,2")) &&
              !svg_log_is_header(SVG_LOG_BOM SVG_LOG_BOM SVG_LOG_HEADER, strlen(SVG_LOG_BOM SVG_LOG_BOM SVG_LOG_HEADER)),
          "svg_log_is_header: one BOM, CR LF or no line end");
    CHECK(svg_log_row_cut("1,2", 3) && !svg_log_row_cut("1,2\n", 4) && !svg_log_row_cut("1,2\r\n", 5),
          "svg_log_row_cut: a line without its newline");
    /* a resume drops the rows plot reads as after the checkpoint, with the
     * step read the same way: 1e3 is step 1000 to both */
    CHECK(svg_log_resume_drops("1e3,2,,,0.1,1,1\n", 16, 500) && !svg_log_resume_drops("5e2,2,,,0.1,1,1\n", 16, 500) &&
              svg_log_resume_drops("501,2,,,0.1,1,1\n", 16, 500) && !svg_log_resume_drops("500,2,,,0.1,1,1\n", 16, 500) &&
              !svg_log_resume_drops("x,2,,,0.1,1,1\n", 14, 0),
          "svg_log_resume_drops: the step as plot reads it");

    const char *only_header = write_file("header.csv", HDR);
    CHECK(svg_read_log(only_header, &log, err, sizeof err) == 0 && log.n == 0, "header-only log has no rows");
    svg_log_free(&log);

    struct { const char *name, *text, *want; } bad[] = {
        {"empty.csv", "", "empty file"},
        {"header.csv", "step,train_loss,val_loss\n1,2,3\n", ":1: bad header"},
        {"cr.csv", "step,train_loss,val_loss,val_acc,lr,ms_per_step,tokens_per_s\r1,2,,,0.1,1,1\r",
         ":1: bad header: its lines end in a carriage return alone, not a newline"},
        {"fields.csv", HDR "0,4.1,,,0.1,1,1\n1,4.0,,,0.1,1\n", ":3: expected 7 comma-separated fields, got 6"},
        /* a row cut short and continued by the next is no last row */
        {"joined.csv", HDR "0,4.1,,,0.1,1,1\n10,3.910,3.8,,,0.1,1,1\n20,3.7,,,0.1,1,1\n",
         ":3: expected 7 comma-separated fields, got 8"},
        {"number.csv", HDR "0,4.1x,,,0.1,1,1\n", ":2: train_loss is not a number: '4.1x'"},
        {"word.csv", HDR "0,4.1,,,abc,1,1\n", ":2: lr is not a number: 'abc'"},
        {"step.csv", HDR ",4.1,,,0.1,1,1\n", ":2: step is empty"},
        {"nanstep.csv", HDR "nan,4.1,,,0.1,1,1\n", ":2: step is not a finite number: 'nan'"},
        {"infstep.csv", HDR "0,4.1,,,0.1,1,1\ninf,4.0,,,0.1,1,1\n", ":3: step is not a finite number: 'inf'"},
        {"twice.csv", HDR "0,4,,,1,1,1\n" HDR, ":3: step is not a number: 'step'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *path = write_file(bad[k].name, bad[k].text);
        err[0] = '\0';
        int rc = svg_read_log(path, &log, err, sizeof err);
        CHECK(rc == -1 && strstr(err, bad[k].want) && strstr(err, path) == err && !strchr(err, '\n'),
              "%s: want \"%s\" after the path, got \"%s\"", bad[k].name, bad[k].want, err);
        CHECK(log.n == 0 && log.step == NULL, "%s: log left empty", bad[k].name);
    }
    /* a NUL byte (a binary file, zeros a crash left) is named as such, not as
     * the field or header it cuts short ("'4.1' is not a number") */
    static const char nul_row[] = HDR "0,4.1\0x,,,0.1,1,1\n", nul_header[] = "step,train_loss\0,val\n0,1\n";
    struct { const char *text; size_t len; const char *want; } nuls[] = {
        {nul_row, sizeof nul_row - 1, ":2: a NUL byte at column 6: not a line of text"},
        {nul_header, sizeof nul_header - 1, ":1: a NUL byte at column 16: not a line of text"},
    };
    for (size_t k = 0; k < sizeof nuls / sizeof nuls[0]; k++) {
        const char *path = write_file("nul.csv", "");
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(nuls[k].text, 1, nuls[k].len, f);
            fclose(f);
        }
        err[0] = '\0';
        int rc = svg_read_log(path, &log, err, sizeof err);
        CHECK(rc == -1 && strstr(err, nuls[k].want) && strstr(err, path) == err, "NUL %zu: want \"%s\", got \"%s\"", k,
              nuls[k].want, err);
        svg_log_free(&log);
    }
    char missing[300];
    snprintf(missing, sizeof missing, "%s/no_such.csv", tmpdir);
    CHECK(svg_read_log(missing, &log, err, sizeof err) == -1 && strstr(err, "no_such.csv: cannot open log"),
          "missing file: %s", err);
    CHECK(svg_read_log(tmpdir, &log, err, sizeof err) == -1 && strstr(err, "is a directory"), "directory: %s", err);
}

/* What a resumed run keeps of a log (svg_log_resume_scan, then
 * svg_log_resume_copy) at checkpoint step 10: the header as it was, its
 * byte-order mark too, and given a newline when it is the whole log
 * without one (it was dropped, and the header written again had no mark). */
static void test_resume_log(void)
{
    struct { const char *text, *want; int rewrite; } cases[] = {
        {SVG_LOG_BOM SVG_LOG_HEADER, SVG_LOG_BOM HDR, 1},
        {SVG_LOG_HEADER, HDR, 1},
        {SVG_LOG_BOM SVG_LOG_HEADER "\r", SVG_LOG_BOM SVG_LOG_HEADER "\r\n", 1},
        {SVG_LOG_BOM HDR, SVG_LOG_BOM HDR, 0},
        {SVG_LOG_BOM HDR "0,4,,,1,1,1\n10,3,,,1,1,1\n", SVG_LOG_BOM HDR "0,4,,,1,1,1\n10,3,,,1,1,1\n", 0},
        {SVG_LOG_BOM HDR "0,4,,,1,1,1\n20,3,,,1,1,1\n", SVG_LOG_BOM HDR "0,4,,,1,1,1\n", 1},
        {SVG_LOG_BOM HDR "0,4,,,1,1,1\n10,3", SVG_LOG_BOM HDR "0,4,,,1,1,1\n", 1},
        {"step,train", "", 1},      /* a first line cut short that is no header */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        FILE *in = fopen(write_file("resume.csv", cases[k].text), "r");
        long cut = -1;
        int rewrite = in ? svg_log_resume_scan(in, 10, &cut) : -2;
        membuf m;
        int copied = -2;
        if (in && fseek(in, 0, SEEK_SET) == 0 && mem_open(&m) == 0) {
            copied = svg_log_resume_copy(in, m.f, 10);
            char *got = mem_close(&m);
            CHECK(copied == 0 && got && strcmp(got, cases[k].want) == 0, "resume copy %zu: want '%s', got '%s'", k,
                  cases[k].want, got ? got : "(null)");
            free(got);
        }
        if (in)
            fclose(in);
        CHECK(rewrite == cases[k].rewrite && cut == (k == 6 ? 3 : 0), "resume scan %zu: %d (want %d), cut %ld", k,
              rewrite, cases[k].rewrite, cut);
    }
}

static void test_plot_logs(void)
{
    const char *a = write_file("tiny.csv", HDR "0,4.2,4.2,,1,1,1\n100,3.0,,,1,1,1\n200,2.5,2.7,,1,1,1\n");
    char b_path[300];
    snprintf(b_path, sizeof b_path, "%s", write_file("noval.csv", HDR "0,4.0,,,1,1,1\n100,3.2,,,1,1,1\n"));
    const char *paths[2] = {a, b_path};
    membuf m;
    char err[256] = "";
    mem_open(&m);
    int rc = svg_plot_logs(m.f, NULL, 2, paths, err, sizeof err);
    char *doc = mem_close(&m);
    CHECK(rc == 0, "svg_plot_logs: %s", err);
    CHECK(doc && xml_ok(doc), "plot well-formed");
    CHECK(doc && count(doc, "<path class=\"series\"") == 3, "tiny train + val, noval train only");
    CHECK(doc && strstr(doc, ">tiny train</text>") && strstr(doc, ">tiny val</text>") &&
              strstr(doc, ">noval train</text>") && !strstr(doc, ">noval val</text>"),
          "series labeled by the log's base name");
    free(doc);

    /* two logs of one file name, in two directories: each named by as much
     * of its path as tells it apart */
    char sub[300], sub_log[320];
    snprintf(sub, sizeof sub, "%s/sub", tmpdir);
    snprintf(sub_log, sizeof sub_log, "%s/tiny.csv", sub);
    mkdir(sub, 0700);
    rename(write_file("sub_tiny.csv", HDR "0,4.0,,,1,1,1\n100,3.2,,,1,1,1\n"), sub_log);
    const char *same_name[3] = {a, sub_log, b_path};
    mem_open(&m);
    rc = svg_plot_logs(m.f, NULL, 3, same_name, err, sizeof err);
    doc = mem_close(&m);
    char want[400];
    snprintf(want, sizeof want, ">%s/tiny train</text>", strrchr(tmpdir, '/') + 1);   /* /tmp/d/tiny.csv: d/tiny */
    CHECK(rc == 0 && doc && strstr(doc, ">sub/tiny train</text>") && strstr(doc, want) &&
              strstr(doc, ">noval train</text>") && !strstr(doc, ">tiny train</text>"),
          "logs of one file name are told apart by their directories (%s)", err);
    free(doc);
    unlink(sub_log);
    rmdir(sub);

    const char *bad_paths[2] = {a, tmpdir};
    mem_open(&m);
    rc = svg_plot_logs(m.f, NULL, 2, bad_paths, err, sizeof err);
    free(mem_close(&m));
    CHECK(rc == -1 && strstr(err, "is a directory"), "a bad log's error is passed on: %s", err);
}

/* The same documents through xmllint when it is installed, as a second opinion. */
static void test_xmllint(void)
{
    if (system("command -v xmllint >/dev/null 2>&1") != 0) {
        printf("xmllint not installed: second-opinion check skipped\n");
        return;
    }
    static const char *const labels[] = {"<", "&", "\n", "\x01", " ", "\xff"};
    float *w = causal_weights(2, 6);
    char path[300];
    snprintf(path, sizeof path, "%s/lint.svg", tmpdir);
    FILE *f = fopen(path, "w");
    char err[256];
    int rc = f ? svg_attention(f, "<&>", 2, NULL, w, 6, 6, labels, labels, SVG_CELLS_AUTO, err, sizeof err) : -1;
    if (f) fclose(f);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", path);
    CHECK(rc == 0 && system(cmd) == 0, "xmllint accepts the heatmap");
    free(w);
}

/* Every file the tests wrote, then the directory: a test run leaves
 * nothing behind in /tmp (the directory is gone, or the check fails). */
static void remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    char p[600];
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        unlink(p);
    }
    if (d)
        closedir(d);
    CHECK(rmdir(tmpdir) == 0, "the test's directory %s is removed, with every file in it", tmpdir);
}

int main(void)
{
    test_xml_checker();
    test_cell_counts();
    test_cells_as_image();
    test_panel_grid();
    test_label_escaping();
    test_legend_and_axes();
    test_colormap();
    test_attention_errors();
    test_ticks();
    test_lines();
    if (mkdtemp(tmpdir)) {
        test_read_log();
        test_resume_log();
        test_plot_logs();
        test_xmllint();
        remove_tmpdir();
    } else {
        CHECK(0, "mkdtemp failed");
    }
    return check_done();
}
