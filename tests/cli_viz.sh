#!/usr/bin/env bash
# cli_viz.sh - the picture commands end to end: trains a small copy model,
# then checks `attn` (well-formed SVG, one cell per weight, the prompt on the
# axes, the causal triangle, the copy stripe read back from --csv), `plot`,
# `graph` (parsed by Graphviz when installed), `walkthrough` (its numbers
# against the tutorials' printed ones and against plain-Python arithmetic), and
# that every user error is one line, exit status 2, and leaves no file.
# Run from the repository root; ATTOGRAD overrides the binary.
A=${ATTOGRAD:-./build/attograd}
PY=${PYTHON:-python3}
# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if ! [ -x "$A" ]; then fail "no binary at $A"; finish; fi
if ! "$PY" -c 'import xml.dom.minidom' 2>/dev/null; then fail "$PY cannot import xml.dom.minidom"; finish; fi
if ! "$A" attn --help >/dev/null 2>&1; then fail "$A has no attn command"; finish; fi

# ---- a small trained copy model (seeded: the same weights every run) ------
# One thread: the steps are small and the machine may be busy.
"$A" train --steps 200 --threads 1 --quiet --save "$tmp/copy.st" --log "$tmp/copy.csv" >/dev/null 2>"$tmp/train.err"
check "train the copy model" test -s "$tmp/copy.st"
"$A" train --steps 40 --eval-every 20 --log-every 10 --threads 1 --optimizer adamw --quiet \
    --log "$tmp/adamw.csv" >/dev/null 2>&1
check "train a second run for plot" test -s "$tmp/adamw.csv"

# ---- attn: all heads ------------------------------------------------------
PROMPT='gbjdaifc|gbjdaifc'
"$A" attn --model "$tmp/copy.st" --prompt "$PROMPT" --out "$tmp/attn.svg" --csv "$tmp/attn.csv" 2>"$tmp/err"
check "attn exits 0" test $? -eq 0
check "attn prints nothing on success" test ! -s "$tmp/err"

# The SVG: well-formed; 4 heads x 16 x 16 cells; labels; masked = above the
# diagonal; each cell's tooltip agrees with the CSV.  The CSV: rows of
# weights sum to 1, the future is exactly 0, and in the answer half the
# weight (averaged over heads) peaks 8 keys back, on the symbol to copy next.
"$PY" - "$tmp/attn.svg" "$tmp/attn.csv" "$PROMPT" <<'EOF'
import csv, re, sys, xml.dom.minidom
svg, tab, prompt = sys.argv[1], sys.argv[2], sys.argv[3]
fails = 0
def check(cond, msg):
    global fails
    if not cond:
        fails += 1
        print("FAIL: attn:", msg)
doc = xml.dom.minidom.parse(svg)
def text(node):
    return "".join(n.data for n in node.childNodes if n.nodeType == n.TEXT_NODE)
def by_class(cls):
    return [e for e in doc.getElementsByTagName("*") if cls in e.getAttribute("class").split()]
H, L = 4, 16
labels = list(prompt.replace("|", "|"))[:L]
cells = by_class("cell")
check(len(cells) == H * L * L, "%d cells, want %d" % (len(cells), H * L * L))
titles = [text(e) for e in by_class("panel-title")]
check(titles == ["head %d" % h for h in range(H)], "panel titles %s" % titles)
for group in ("row-labels", "col-labels"):
    gs = by_class(group)
    check(len(gs) == H, "%d %s groups" % (len(gs), group))
    for g in gs:
        got = [text(t) for t in g.getElementsByTagName("text")]
        check(got == labels, "%s %s, want %s" % (group, got, labels))
W = {}
for r in csv.DictReader(open(tab)):
    W[(int(r["head"]), int(r["query"]), int(r["key"]))] = float(r["weight"])
check(len(W) == H * L * L, "csv has %d weights" % len(W))
pat = re.compile(r"query (\d+) '(.*)' \u2192 key (\d+) '(.*)': ([0-9.]+)$")
for k, c in enumerate(cells):
    h = k // (L * L)
    t = text(c.getElementsByTagName("title")[0])
    m = pat.match(t)
    check(m is not None, "tooltip %r" % t)
    if not m:
        break
    i, j, v = int(m.group(1)), int(m.group(3)), float(m.group(5))
    check(m.group(2) == labels[i] and m.group(4) == labels[j], "tooltip labels %r" % t)
    masked = "masked" in c.getAttribute("class").split()
    if j > i:
        check(masked and W[(h, i, j)] == 0, "future cell %d,%d,%d not masked" % (h, i, j))
    check(abs(v - W[(h, i, j)]) <= 0.0005 + 1e-9, "tooltip %r vs csv %g" % (t, W[(h, i, j)]))
    if fails > 5:
        break
for h in range(H):
    for i in range(L):
        s = sum(W[(h, i, j)] for j in range(L))
        check(abs(s - 1) < 1e-5, "head %d query %d weights sum to %g" % (h, i, s))
# the copy rule drawn by at least one head: every answer query's strongest key
# is the symbol it must output next, 8 positions back
stripes = []
for h in range(H):
    stripes.append([max(range(L), key=lambda j: W[(h, i, j)]) - i for i in range(8, L)])
check(any(st == [-8] * 8 for st in stripes),
      "some head's answer queries should attend 8 keys back, got offsets %s" % stripes)
print("attn-checks-failed", fails)
sys.exit(1 if fails else 0)
EOF
check "attn SVG and CSV content" test $? -eq 0

"$A" attn --model "$tmp/copy.st" --prompt 'abcdefgh|' --head 2 --layer 1 --out "$tmp/one.svg" 2>/dev/null
"$PY" - "$tmp/one.svg" <<'EOF'
import sys, xml.dom.minidom
doc = xml.dom.minidom.parse(sys.argv[1])
els = doc.getElementsByTagName("*")
cells = [e for e in els if "cell" in e.getAttribute("class").split()]
titles = ["".join(n.data for n in e.childNodes if n.nodeType == n.TEXT_NODE)
          for e in els if e.getAttribute("class") == "panel-title"]
ok = len(cells) == 81 and titles == ["head 2"]
print("one head:", len(cells), titles)
sys.exit(0 if ok else 1)
EOF
check "attn --head 2 --layer 1 on a 9-token prompt: one panel of 9 x 9" test $? -eq 0

# ---- attn --cells image: each panel's cells one PNG, a pixel a cell --------
# The same prompt as the first picture: every pixel is its rect's colour
# (alpha 255), or transparent where the rect is masked (the hatching shows
# through); the PNG's chunk CRCs and zlib stream check out; the image covers
# the rects' grid.
"$A" attn --model "$tmp/copy.st" --prompt "$PROMPT" --cells image --out "$tmp/img.svg" --csv "$tmp/img.csv" 2>"$tmp/err"
check "attn --cells image exits 0, silent" test $? -eq 0 -a ! -s "$tmp/err"
check "attn --cells image: the same --csv" cmp -s "$tmp/attn.csv" "$tmp/img.csv"
# image_matches_rects RECTS.svg IMAGE.svg HEADS TOKENS
image_matches_rects() {
"$PY" - "$@" <<'EOF'
import base64, struct, sys, zlib, xml.dom.minidom
rects_doc, img_doc = (xml.dom.minidom.parse(f) for f in sys.argv[1:3])
H, L = int(sys.argv[3]), int(sys.argv[4])
fails = 0
def check(cond, msg):
    global fails
    if not cond:
        fails += 1
        print("FAIL: attn --cells image:", msg)
def by_class(doc, cls):
    return [e for e in doc.getElementsByTagName("*") if cls in e.getAttribute("class").split()]
def png_pixels(uri):
    prefix = "data:image/png;base64,"
    check(uri.startswith(prefix), "href %r..." % uri[:40])
    data = base64.b64decode(uri[len(prefix):], validate=True)
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "PNG signature")
    pos, chunks = 8, []
    while pos < len(data):
        n, = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        check(crc == zlib.crc32(kind + body), "%s chunk CRC" % kind)
        chunks.append((kind, body))
        pos += 12 + n
    check([k for k, _ in chunks] == [b"IHDR", b"IDAT", b"IEND"], "chunks %s" % [k for k, _ in chunks])
    w, h, depth, ctype, comp, filt, inter = struct.unpack(">IIBBBBB", chunks[0][1])
    check((depth, ctype, comp, filt, inter) == (8, 6, 0, 0, 0), "IHDR: 8-bit RGBA, no interlace")
    raw = zlib.decompress(chunks[1][1])        # checks the stream and its Adler-32
    check(len(raw) == h * (1 + 4 * w), "%d bytes of pixels for %d x %d" % (len(raw), w, h))
    rows = [raw[i * (1 + 4 * w):(i + 1) * (1 + 4 * w)] for i in range(h)]
    check(all(r[0] == 0 for r in rows), "every row unfiltered")
    return w, h, [[tuple(r[1 + 4 * j:5 + 4 * j]) for j in range(w)] for r in rows]
check(not by_class(img_doc, "cell"), "no rect cells in an image picture")
images, masks = by_class(img_doc, "cells"), by_class(img_doc, "masked-area")
check(len(images) == H and len(masks) == H, "%d images and %d hatched areas, want %d each" % (len(images), len(masks), H))
check(img_doc.documentElement.getAttribute("xmlns:xlink") == "http://www.w3.org/1999/xlink", "xlink namespace declared")
cells = by_class(rects_doc, "cell")
size = int(cells[0].getAttribute("width"))
for h, im in enumerate(images):
    check(im.tagName == "image" and im.getAttribute("width") == im.getAttribute("height") == str(L * size),
          "image %d is %sx%s, want the grid's %d" % (h, im.getAttribute("width"), im.getAttribute("height"), L * size))
    w, hh, px = png_pixels(im.getAttribute("xlink:href"))
    check((w, hh) == (L, L), "panel %d PNG %dx%d, want %dx%d" % (h, w, hh, L, L))
    if (w, hh) != (L, L):
        break
    for c in cells[h * L * L:(h + 1) * L * L]:
        i, j = int(c.getAttribute("y")) // size, int(c.getAttribute("x")) // size
        if "masked" in c.getAttribute("class").split():
            check(px[i][j][3] == 0, "panel %d cell %d,%d: masked, pixel %s" % (h, i, j, px[i][j]))
        else:
            fill = c.getAttribute("fill")
            want = tuple(int(fill[k:k + 2], 16) for k in (1, 3, 5)) + (255,)
            check(px[i][j] == want, "panel %d cell %d,%d: pixel %s, rect %s" % (h, i, j, px[i][j], fill))
        if fails > 5:
            break
print("image-checks-failed", fails)
sys.exit(1 if fails else 0)
EOF
}
image_matches_rects "$tmp/attn.svg" "$tmp/img.svg" 4 16
check "attn --cells image: one PNG a panel, each pixel its rect's colour" test $? -eq 0

# --cells auto (the default) draws images past 32768 cells: 4 heads of a
# 100-token prompt on a text model of context 128 (40,000 cells), under a
# tenth of the rects' size; --cells rects still draws every cell
for _ in $(seq 20); do printf 'the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.\n'; done >"$tmp/long.txt"
"$A" train --text "$tmp/long.txt" --context 128 --layers 1 --heads 4 --d-model 16 --steps 2 --threads 1 \
    --quiet --save "$tmp/long.st" >/dev/null 2>&1
check "train a text model of context 128" test -s "$tmp/long.st"
LP=$(head -c 100 "$tmp/long.txt")
"$A" attn --model "$tmp/long.st" --prompt "$LP" --out "$tmp/auto.svg" 2>/dev/null
check "attn, 40000 cells: drawn as 4 images by default" \
    test "$(grep -o '<image class="cells"' "$tmp/auto.svg" | wc -l)" -eq 4 -a "$(grep -c '<rect class="cell' "$tmp/auto.svg")" -eq 0
"$A" attn --model "$tmp/long.st" --prompt "$LP" --cells rects --out "$tmp/rects.svg" 2>/dev/null
check "attn --cells rects, 40000 cells: every cell a rect" test "$(grep -c '<rect class="cell' "$tmp/rects.svg")" -eq 40000
check "attn, 40000 cells: the images' SVG under a tenth of the rects'" \
    test "$(($(wc -c <"$tmp/auto.svg") * 10))" -lt "$(wc -c <"$tmp/rects.svg")"
"$A" attn --model "$tmp/long.st" --prompt "${LP:0:90}" --out "$tmp/under.svg" 2>/dev/null
check "attn, 4 x 90 x 90 = 32400 cells: rects by default" test "$(grep -c '<rect class="cell' "$tmp/under.svg")" -eq 32400
# a panel of 128 x 128: 65,664 bytes of pixels, past one stored block's 65,535
LP=$(head -c 128 "$tmp/long.txt")
"$A" attn --model "$tmp/long.st" --prompt "$LP" --head 1 --cells image --out "$tmp/img128.svg" 2>/dev/null
"$A" attn --model "$tmp/long.st" --prompt "$LP" --head 1 --cells rects --out "$tmp/rects128.svg" 2>/dev/null
image_matches_rects "$tmp/rects128.svg" "$tmp/img128.svg" 1 128
check "attn --cells image, 128 x 128 (two deflate blocks): each pixel its rect's colour" test $? -eq 0

# ---- attn on a text model: labels that need XML escaping ---------------
printf 'a <b> & "c" d\n<a & b> "d" c\n%.0s' $(seq 40) >"$tmp/t.txt"
"$A" train --text "$tmp/t.txt" --context 16 --layers 1 --heads 2 --d-model 16 --steps 5 --threads 1 \
    --quiet --save "$tmp/text.st" >/dev/null 2>&1
"$A" attn --model "$tmp/text.st" --prompt 'a <b> & "c"' --out "$tmp/text.svg" 2>/dev/null
"$PY" - "$tmp/text.svg" <<'EOF'
import sys, xml.dom.minidom
doc = xml.dom.minidom.parse(sys.argv[1])
rows = [e for e in doc.getElementsByTagName("g") if e.getAttribute("class") == "row-labels"][0]
got = ["".join(n.data for n in t.childNodes) for t in rows.getElementsByTagName("text")]
want = ["a", "\u2423", "<", "b", ">", "\u2423", "&", "\u2423", '"', "c", '"']
print("text labels:", got)
sys.exit(0 if got == want else 1)
EOF
check "attn on text: escaped labels, space shown as a visible space" test $? -eq 0

# ---- plot -----------------------------------------------------------------
"$A" plot --log "$tmp/copy.csv" --log "$tmp/adamw.csv" --out "$tmp/plot.svg" 2>/dev/null
check "plot exits 0" test $? -eq 0
"$PY" - "$tmp/plot.svg" <<'EOF'
import sys, xml.dom.minidom
doc = xml.dom.minidom.parse(sys.argv[1])
els = doc.getElementsByTagName("*")
def cls(c): return [e for e in els if c in e.getAttribute("class").split()]
def text(e): return "".join(n.data for n in e.getElementsByTagName("text")[0].childNodes) if e.tagName != "text" else "".join(n.data for n in e.childNodes)
legend = [text(e) for e in cls("legend-entry")]
axes = [text(e) for e in cls("axis-label")]
series = cls("series")
print("plot:", legend, axes, len(series))
ok = legend == ["copy train", "copy val", "adamw train", "adamw val"] and axes == ["step", "loss"] and len(series) == 4
sys.exit(0 if ok else 1)
EOF
check "plot: two logs, train and val each, labeled axes and legend" test $? -eq 0

# ---- graph ------------------------------------------------------------------
"$A" graph --model "$tmp/copy.st" --out "$tmp/g.dot" >"$tmp/out" 2>&1
check "graph exits 0" test $? -eq 0
check "graph DOT is a digraph" grep -q '^digraph attograd {' "$tmp/g.dot"
check "graph ends at the loss" grep -q 'label="cross_entropy\\n\[1\]"' "$tmp/g.dot"
check "graph has the logits' shape [1,16,11]" grep -q 'label="linear\\n\[1,16,11\]"' "$tmp/g.dot"
"$A" graph --model "$tmp/copy.st" --out "$tmp/g2.dot" >"$tmp/out" 2>&1
check "graph: a second run writes the same file (leaves are numbered, not named by address)" cmp -s "$tmp/g.dot" "$tmp/g2.dot"
# Every parameter is in exactly one filled box; the query, key and value
# weights of a layer share one (they are joined into one [3d,d] projection).
"$A" info "$tmp/copy.st" | grep -oE '^    (tok_emb|pos_emb|blocks|final_norm|out_head)[^ ]* +F32' |
    awk '{ print $1 }' >"$tmp/params"
grep 'fillcolor="#ffe9b0"' "$tmp/g.dot" | sed 's/.*label="\([^\\]*\)\\n.*/\1/' | tr '+' '\n' | sort >"$tmp/boxed"
nparams=$(wc -l <"$tmp/params")
check "graph: each of the $nparams parameters in one filled box" \
    sh -c '[ "$1" -gt 0 ] && sort "$2" | cmp -s - "$3"' - "$nparams" "$tmp/params" "$tmp/boxed"
check "graph: q, k, v weights joined in one box" grep -q 'label="blocks.0.attn.W_query.weight+blocks.0.attn.W_key.weight+blocks.0.attn.W_value.weight' "$tmp/g.dot"
if command -v dot >/dev/null 2>&1; then
    dot -Tsvg "$tmp/g.dot" -o "$tmp/g.svg" 2>"$tmp/err"
    check "dot -Tsvg renders the graph" test $? -eq 0 -a -s "$tmp/g.svg" -a ! -s "$tmp/err"
else
    skip "graphviz dot is not installed"
fi
# The pictures render in an SVG renderer other than a browser: librsvg reads
# each to pixels (a wrong attribute or entity is an error or a warning there)
if command -v rsvg-convert >/dev/null 2>&1; then
    for svg in attn one text plot img; do
        rsvg-convert -o "$tmp/$svg.png" "$tmp/$svg.svg" 2>"$tmp/err"
        check "rsvg-convert renders $svg.svg ($(head -c 200 "$tmp/err"))" test $? -eq 0 -a -s "$tmp/$svg.png" -a ! -s "$tmp/err"
    done
else
    skip "rsvg-convert (librsvg2-bin) is not installed"
fi

# ---- walkthrough --------------------------------------------------------------
"$A" walkthrough >"$tmp/walk.txt" 2>&1
check "walkthrough exits 0" test $? -eq 0
"$PY" - "$tmp/walk.txt" <<'EOF'
import math, re, sys
out = open(sys.argv[1], encoding="utf-8").read().split("\n")
fails = 0
def check(cond, msg):
    global fails
    if not cond:
        fails += 1
        print("FAIL: walkthrough:", msg)
num = r"-?inf|-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
def parse(s): return [float(x) for x in re.findall(num, s)]
def vector(label, start=0):
    for k in range(start, len(out)):
        if out[k].strip().startswith(label):
            return parse(out[k].strip()[len(label):])
    check(False, "no line " + label); return []
def matrix(label, rows, start=0):
    for k in range(start, len(out)):
        if out[k].strip() == label:
            return [parse(out[k + 1 + i]) for i in range(rows)]
    check(False, "no matrix " + label); return [[]] * rows
def close(a, b, tol):
    a, b = list(a), list(b)
    return len(a) == len(b) and all(x == y or abs(x - y) <= tol for x, y in zip(a, b))
def flat(m): return [x for r in m for x in r]
def section(n):
    for k, l in enumerate(out):
        if l.startswith("== %d." % n): return k
    check(False, "no section %d" % n); return 0
def softmax(v):
    m = max(v); e = [math.exp(x - m) for x in v]; s = sum(e); return [x / s for x in e]
def matmul(A, B): return [[sum(a * b for a, b in zip(r, c)) for c in zip(*B)] for r in A]
# Stated in the tutorials' worked examples:
check(close(vector("context vector:"), [0.3990, 0.3854, 0.8610], 1e-4), "Hello shiny sun context")
check(close(vector("context vector for journey:"), [0.3061, 0.8210], 1e-4), "journey context")
notebook_w = [[0.19212602, 0.1646463, 0.16516064, 0.15499417, 0.17211477, 0.15095802],
              [0.20412546, 0.16588287, 0.16621484, 0.14957766, 0.16645327, 0.1477459],
              [0.20356156, 0.16592424, 0.16624875, 0.14981547, 0.16641727, 0.14803267],
              [0.18688802, 0.1666883, 0.16683646, 0.15710352, 0.16609134, 0.15639237],
              [0.18304484, 0.16685854, 0.16695702, 0.1588405, 0.16582507, 0.15847409],
              [0.19347237, 0.16633299, 0.16656809, 0.15418623, 0.16656083, 0.15287954]]
notebook_masked = [[1, 0, 0, 0, 0, 0], [0.551678, 0.44832197, 0, 0, 0, 0],
                   [0.3799672, 0.30971354, 0.31031927, 0, 0, 0],
                   [0.27584285, 0.24602847, 0.24624716, 0.23188154, 0, 0],
                   [0.21751536, 0.1982809, 0.19839793, 0.18875293, 0.1970528, 0],
                   [0.19347237, 0.16633299, 0.16656809, 0.15418623, 0.16656083, 0.15287954]]
notebook_scores = [[0.2899089], [0.4656424, 0.17225963], [0.45943564, 0.17031771, 0.17308104],
                   [0.26415503, 0.10239156, 0.10364803, 0.01864095],
                   [0.21828783, 0.08735328, 0.08818767, 0.01770909, 0.0785667],
                   [0.34078205, 0.12703359, 0.12903105, 0.01979299, 0.12896936, 0.00775672]]
notebook_context = [[-0.0872, 0.0286], [-0.0991, 0.0501], [-0.0999, 0.0633], [-0.0983, 0.0489],
                    [-0.0514, 0.1098], [-0.0754, 0.0693]]
s3 = section(3)
check(close(flat(matrix("attention weights (no mask)", 6, s3)), flat(notebook_w), 1.5e-6), "causal: weights")
wa = matrix("renormalized masked weights", 6, s3)
wb = matrix("masked weights", 6, s3)
check(close(flat(wa), flat(notebook_masked), 1.5e-6), "causal (a) renormalized")
check(close(flat(wb), flat(notebook_masked), 1.5e-6), "causal (b) -inf then softmax")
ms = matrix("masked scores", 6, s3)
check(all(ms[i][j] == -math.inf for i in range(6) for j in range(i + 1, 6)), "masked scores: -inf above the diagonal")
check(all(close(ms[i][:i + 1], notebook_scores[i], 1.5e-6) for i in range(6)), "masked scores")
cb = matrix("context matrix from (b)", 6, s3)
check(close(flat(cb), flat(notebook_context), 1.01e-4), "causal context matrix")
# Computed here from the worked examples' inputs:
E = [[0.34, 0.22, 0.54], [0.53, 0.34, 0.98], [0.29, 0.54, 0.93]]
sc = [sum(a * b for a, b in zip(E[1], e)) for e in E]
check(close(vector("attention scores:"), sc, 6e-5), "Hello scores")
check(close(vector("attention weights:"), softmax(sc), 6e-5), "Hello weights")
X = [[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64], [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]]
Wq = [[0.2961, 0.5166], [0.2517, 0.6886], [0.0740, 0.8665]]
Wk = [[0.1366, 0.1025], [0.1841, 0.7264], [0.3153, 0.6871]]
Wv = [[0.0756, 0.1966], [0.3164, 0.4017], [0.1186, 0.8274]]
def loss(Wq, Wk, Wv):
    q = matmul([X[1]], Wq)[0]; K = matmul(X, Wk); V = matmul(X, Wv)
    w = softmax([sum(a * b for a, b in zip(q, k)) / math.sqrt(2) for k in K])
    return sum(sum(w[j] * V[j][c] for j in range(6)) for c in range(2))
s2 = section(2)
for name, idx in (("dL/dW_query", 0), ("dL/dW_key", 1), ("dL/dW_value", 2)):
    Ws = [[r[:] for r in W] for W in (Wq, Wk, Wv)]
    grad = []
    for i in range(3):
        for j in range(2):
            h = 1e-6
            Ws[idx][i][j] += h; up = loss(*Ws)
            Ws[idx][i][j] -= 2 * h; down = loss(*Ws)
            Ws[idx][i][j] += h
            grad.append((up - down) / (2 * h))
    check(close(flat(matrix(name, 3, s2)), grad, 6e-5), name + " vs central differences")
s4 = section(4)
drop = matrix("dropout(masked weights)", 6, s4)
kept = [(i, j) for i in range(6) for j in range(6) if drop[i][j] != 0]
check(all(j <= i and abs(drop[i][j] - 2 * wb[i][j]) <= 2e-6 for i, j in kept), "dropout survivors doubled")
check(0 < len(kept) < 21, "dropout kept %d of 21" % len(kept))
s5 = section(5)
merged = matrix("merged context, batch 0: head 0 | head 1 (= section 3's context)", 6, s5)
check(close([x for r in merged for x in r[2:]], flat(cb), 1e-4), "head 1 of the merge = section 3's context")
Xw = matmul(X, Wq)
check(close(flat(matrix("queries of head 0 (= section 2's X W_query)", 6, s5)), flat(Xw), 6e-5), "head 0 queries")
mha = vector("with out_proj = identity it returns the merged context: max |difference|", s5)
check(mha and mha[0] <= 1e-6, "nn_mha_forward vs the steps")
s6 = section(6)
x0 = matrix("x[0]", 8, s6)
bow = [[sum(x0[i][c] for i in range(t + 1)) / (t + 1) for c in range(2)] for t in range(8)]
check(close(flat(matrix("xbow[0] by loop", 8, s6)), flat(bow), 2e-4), "bag of words by loop")
check(close(flat(matrix("averaging matrix", 8, s6)), [1 / (t + 1) if i <= t else 0 for t in range(8) for i in range(8)], 6e-5),
      "averaging matrix")
for label in ("xbow by matmul: max |difference| to the loop", "xbow by masked softmax: max |difference| to the loop",
              "softmax weights = the averaging matrix: max |difference|"):
    v = vector(label, s6)
    check(v and v[0] <= 1e-6, label)
s7 = section(7)
vals = [0.1, -0.2, 0.3, -0.2, 0.5]
check(close(vector("softmax([0.1, -0.2, 0.3, -0.2, 0.5]):", s7), softmax(vals), 6e-5), "diffuse softmax")
check(close(vector("softmax(8 * [0.1, -0.2, 0.3, -0.2, 0.5]):", s7), softmax([8 * v for v in vals]), 6e-5), "saturated softmax")
var = vector("var(w) =", s7)
check(len(var) >= 3 and 12 < var[0] < 20 and 0.75 < var[2] < 1.25, "score variances %s" % var)
print("walkthrough-checks-failed", fails)
sys.exit(1 if fails else 0)
EOF
check "walkthrough numbers" test $? -eq 0
for fn in ag_matmul ag_softmax ag_masked_fill ag_dropout ag_reshape ag_transpose ag_backward nn_mha_forward; do
    check "walkthrough names $fn" grep -q "\[.*$fn" "$tmp/walk.txt"
done
check "walkthrough notes the tutorial's rounded context" grep -q '\[0.3992, 0.3858, 0.8610\]' "$tmp/walk.txt"

# ---- errors: one line on stderr, status 2, no file left behind ------------
mkdir "$tmp/o"
printf 'step,loss\n1,2\n' >"$tmp/badheader.csv"
expect_error() {
    local what=$1; shift
    "$@" >"$tmp/o.out" 2>"$tmp/o.err"
    local rc=$?
    local lines
    lines=$(wc -l <"$tmp/o.err")
    if [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && [ -z "$(ls -A "$tmp/o")" ]; then ok; else
        fail "$what: exit $rc, $lines stderr lines, files: $(ls -A "$tmp/o" | tr '\n' ' ')"; cat "$tmp/o.err"; fi
}
M=$tmp/copy.st; O=$tmp/o/x.svg
expect_error "attn without --model" "$A" attn --prompt abc --out "$O"
expect_error "attn without --out" "$A" attn --model "$M" --prompt abc
expect_error "attn, missing model file" "$A" attn --model "$tmp/none.st" --prompt abc --out "$O"
expect_error "attn, model is not a checkpoint" "$A" attn --model "$tmp/copy.csv" --prompt abc --out "$O"
expect_error "attn --layer 2 of 2 layers" "$A" attn --model "$M" --prompt abc --layer 2 --out "$O"
expect_error "attn --head 4 of 4 heads" "$A" attn --model "$M" --prompt abc --head 4 --out "$O"
expect_error "attn --head x" "$A" attn --model "$M" --prompt abc --head x --out "$O"
expect_error "attn --cells png" "$A" attn --model "$M" --prompt abc --cells png --out "$O"
expect_error "attn, prompt token outside the task" "$A" attn --model "$M" --prompt 'abz' --out "$O"
expect_error "attn, prompt longer than L + 1" "$A" attn --model "$M" --prompt 'abcdefgh|abcdefgha' --out "$O"
expect_error "attn, text prompt byte outside the vocabulary" "$A" attn --model "$tmp/text.st" --prompt 'a?' --out "$O"
expect_error "attn, text prompt longer than the context" "$A" attn --model "$tmp/text.st" --prompt 'a b c d e f g h a' --out "$O"
expect_error "attn, --out in a missing directory" "$A" attn --model "$M" --prompt abc --out "$tmp/o/no/x.svg"
expect_error "attn, --csv in a missing directory" "$A" attn --model "$M" --prompt abc --out "$O" --csv "$tmp/o/no/x.csv"
expect_error "plot without --log" "$A" plot --out "$O"
expect_error "plot, missing log" "$A" plot --log "$tmp/none.csv" --out "$O"
expect_error "plot, one log given twice" "$A" plot --log "$tmp/copy.csv" --log "$tmp/./copy.csv" --out "$O"
check "plot, one log given twice: said so" grep -q "is the same file as --log $tmp/copy.csv: give each log once" "$tmp/o.err"
{ head -n 1 "$tmp/copy.csv"; printf '10,nan,,,0.1,1,1\n20,inf,-inf,,0.1,1,1\n'; } >"$tmp/nonfinite.csv"
expect_error "plot, a log with no finite loss" "$A" plot --log "$tmp/copy.csv" --log "$tmp/nonfinite.csv" --out "$O"
check "plot, a log with no finite loss: said so" grep -q "nonfinite.csv: no row has a finite train or validation loss (2 rows): nothing to draw" "$tmp/o.err"
expect_error "plot, second log has a bad header" "$A" plot --log "$tmp/copy.csv" --log "$tmp/badheader.csv" --out "$O"
expect_error "graph --tokens 17 > L" "$A" graph --model "$M" --tokens 17 --out "$tmp/o/g.dot"
expect_error "graph, missing model" "$A" graph --model "$tmp/none.st" --out "$tmp/o/g.dot"
expect_error "walkthrough --section 9" "$A" walkthrough --section 9
expect_error "walkthrough, stray argument" "$A" walkthrough extra

# An existing file is replaced only by a complete picture.
printf 'old' >"$tmp/keep.svg"
"$A" attn --model "$M" --prompt 'abz' --out "$tmp/keep.svg" 2>/dev/null
check "a failed attn leaves an existing --out untouched" test "$(cat "$tmp/keep.svg")" = old
"$A" attn --model "$M" --prompt 'abc' --out "$tmp/keep.svg" 2>/dev/null
check "a successful attn replaces it" grep -q '</svg>' "$tmp/keep.svg"
check "no temporary files left" test -z "$(ls "$tmp" | grep '\.tmp\.')"

# ---- the pictures in data/ are what the command draws today ---------------
# `make pictures` draws them; drawn again here, each must be the same bytes.
# Drawn by the binary under test: make's `all` is not remade (-o all).  Run
# by hand (not from make, whose flags an inner make inherits), remaking it
# rebuilt $(dirname $A) from these sources with make's default flags: an
# ATTOGRAD built otherwise, or installed, was replaced by another binary.
mkdir -p "$tmp/pictures"
make -s --no-print-directory -o all CLI="$A" pictures PICTURES_DIR="$tmp/pictures" >"$tmp/err" 2>&1
check "make pictures draws them ($(head -c 300 "$tmp/err"))" test -s "$tmp/pictures/attention-copy.svg"
for f in "$tmp"/pictures/*; do
    check "data/$(basename "$f") is up to date (make pictures redraws it)" cmp -s "$f" "data/$(basename "$f")"
done

finish
