// app.js - the playground page: the controls and their URL, and the
// drawings (loss curve, attention heatmaps).  Everything the engine
// computes happens in worker.js; this thread only sends commands and draws
// what comes back, so training never blocks it.
'use strict';

const $ = (id) => document.getElementById(id);
const SETTINGS = ['task', 'layers', 'heads', 'd_model', 'context', 'dropout', 'optimizer', 'lr', 'batch', 'steps', 'seed'];
const SEED_MAX = 9200000000000000000n;            // attograd train --seed's largest
const DEFAULT_LR = { sgd: 0.1, adamw: 0.003 };   // attograd train's defaults

let worker = null, info = null, running = false, textBytes = null;
// Commands to the worker are numbered; runSent: the last Train's or Pause's
let sent = 0, runSent = 0;
let promptTyped = 0;    // the last Prompt typed's command
const send = (m) => { m.n = ++sent; worker.postMessage(m); return m.n; };
let trainLoss = newLosses(), valLoss = [], lastVal = null, current = null;
// The fields as the live run was built from them, and as the last new run asked
const fields = () => Object.fromEntries(SETTINGS.map((k) => [k, $(k).value]));
let built = null, asked = null;

// The error line, and the kind of command (the worker's cmd) whose refusal it says: a
// later one of that kind that succeeds clears it (a refused Complete, then one that
// completes: the line said "cannot complete" over the completion)
let errorFrom = '';
function say(text, from) { $('error').textContent = text; errorFrom = text && from || ''; }
function cleared(...kinds) { if (errorFrom && kinds.includes(errorFrom)) say(''); }

function settings() {
  // each as its field's text: the engine reads it as attograd train reads a flag (an empty
  // field, or one the browser could not read, named so; 1e-320 too close to 0, not a number
  // JS holds; Seed's 64 bits, of which a JS number keeps 53)
  const s = {};
  for (const k of SETTINGS) s[k] = $(k).value;
  return s;
}

function settingsToUrl(f) {
  const q = new URLSearchParams(f || fields());
  history.replaceState(null, '', '?' + q.toString());
}

// A link's parameter the page cannot take (a value its control cannot hold,
// as a task it does not list or text in a number field; a setting given more
// than once; a name that is no setting) is named in one line, and the control
// keeps the page's own value; the line stays when the engine refuses the rest.
let linkNote = '', noteFor = -1, noteShown = '';
function settingsFromUrl() {
  const q = new URLSearchParams(location.search), bad = [], twice = [], unknown = [];
  // each as the link has it, past 40 characters cut (a link of 8000 said them all), a control
  // character as \xNN, as the engine's messages show one (a %0A broke the line in two)
  const cut = (t) => (t.length > 40 ? t.slice(0, 40) + '…' : t)
    .replace(/[\0-\x1f\x7f]/g, (ch) => '\\x' + ch.charCodeAt(0).toString(16).padStart(2, '0'));
  // The link, not the browser, fills the settings: a page come back to by Back or
  // Forward (or reloaded) would otherwise get its fields' last values put back after
  // this ran: a value refused, with the run built from the link's.
  for (const k of SETTINGS) $(k).setAttribute('autocomplete', 'off');
  for (const k of new Set(q.keys())) {
    const all = q.getAll(k), e = SETTINGS.includes(k) && $(k);
    if (!e) { unknown.push(cut(k + '=' + all[0])); continue; }
    if (all.length > 1) { twice.push(cut(all.map((v) => k + '=' + v).join('&'))); continue; }
    const own = e.value;
    e.value = all[0];
    if (e.value !== all[0]) { bad.push(cut(k + '=' + all[0])); e.value = own; }
  }
  linkNote = [[bad, 'not a value the page takes'], [twice, 'a setting given more than once'],
              [unknown, 'not a setting of the page']]
    .filter(([l]) => l.length).map(([l, why]) => `the link's ${l.join(', ')}: ${why}`).join('; ');
  $('textbox').hidden = $('task').value !== 'text';
}

function status() {
  if (!info || !info.live) return;
  const last = trainLoss.n ? trainLoss.v[trainLoss.n - 1].toFixed(4) : '–';
  let s = `step ${info.step}/${info.steps} · loss ${last}`;
  if (info.task !== 'text' && lastVal && lastVal.total)
    s += ` · held-out exact match ${(100 * lastVal.correct / lastVal.total).toFixed(1)}%`;
  else if (lastVal && info.task === 'text')
    s += ` · validation loss ${lastVal.loss.toFixed(4)}`;
  // an opened checkpoint's run the page does not train as it was trained, or its link does not build
  if (info.trained_as)
    s += ` · ${info.trained_as}: the page trains in fp32 on whole batches, so its steps will not match attograd train --resume`;
  if (info.unlinked) s += ` · the link does not carry its ${info.unlinked}: it builds another run`;
  if (info.from_page) s += ` · the page's ${info.from_page} taken: the file does not say them`;
  $('status').textContent = s;
}

// ---- the loss curve -------------------------------------------------------

// The train losses of the run shown, one a step from step `from` + 1 on, in a
// typed array (a million steps are 4 MB, not a million arrays).
function newLosses() { return { v: new Float32Array(1024), n: 0, from: 0 }; }
function addLoss(step, loss) {
  const t = trainLoss;
  if (!t.n) t.from = step - 1;
  if (t.n === t.v.length) { const v = new Float32Array(2 * t.n); v.set(t.v); t.v = v; }
  t.v[t.n++] = loss;
}

// Drawn each progress, so in time that does not grow with the run: where
// steps outnumber the plot's pixels, each pixel column is one vertical line
// from its steps' lowest loss to their highest.  (Math.max(...) of the
// losses, as it was, threw past about 125,000 steps, and the curve stopped.)
function drawLoss() {
  const cv = $('loss'), g = cv.getContext('2d'), W = cv.width, H = cv.height, pad = 34, t = trainLoss;
  g.clearRect(0, 0, W, H);
  let top = -Infinity;
  for (let i = 0; i < t.n; i++) if (t.v[i] > top && t.v[i] < Infinity) top = t.v[i];
  for (const p of valLoss) if (p[1] > top && p[1] < Infinity) top = p[1];
  if (top === -Infinity || !info) return;
  top *= 1.05;
  const steps = Math.max(info.steps, 1), wide = W - pad - 8;
  const x = (s) => pad + wide * s / steps, y = (v) => H - pad - (H - pad - 8) * v / top;
  g.strokeStyle = '#999'; g.fillStyle = '#444'; g.font = '11px sans-serif';
  g.beginPath(); g.moveTo(pad, 8); g.lineTo(pad, H - pad); g.lineTo(W - 8, H - pad); g.stroke();
  g.fillText(top.toFixed(2), 2, 14); g.fillText('0', pad - 10, H - pad); g.fillText(String(steps), W - 40, H - pad + 14);
  g.fillText('step', W / 2, H - 8);
  const line = (pts, color) => {
    g.strokeStyle = color; g.beginPath();
    pts.forEach((p, i) => (i ? g.lineTo(x(p[0]), y(p[1])) : g.moveTo(x(p[0]), y(p[1]))));
    g.stroke();
  };
  if (t.n <= 2 * wide) {
    const pts = [];
    for (let i = 0; i < t.n; i++) pts.push([t.from + 1 + i, t.v[i]]);
    line(pts, '#36c');
  } else {
    g.strokeStyle = '#36c'; g.beginPath();
    let col = NaN, lo = 0, hi = 0;
    const put = () => { if (col === col) { g.lineTo(col, y(lo)); g.lineTo(col, y(hi)); } };
    for (let i = 0; i < t.n; i++) {
      const v = t.v[i], c = Math.round(x(t.from + 1 + i));
      if (!(v < Infinity)) continue;
      if (c !== col) { put(); col = c; lo = hi = v; } else { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    }
    put();
    g.stroke();
  }
  line(valLoss, '#d60');
}

// ---- attention heatmaps ---------------------------------------------------

// A token (one byte) as `attograd attn` labels it (train/cli/svg.c): newline ⏎,
// tab ⇥, space ␣, and as \xNN a control byte, DEL or a byte of a multi-byte
// UTF-8 character (>= 0x80: not a character; it showed as a Latin-1 one).
function tokenText(id) {
  const b = info.vocab[id];
  return b === 10 ? '⏎' : b === 9 ? '⇥' : b === 32 ? '␣'
    : b < 32 || b >= 127 ? '\\x' + b.toString(16).padStart(2, '0') : String.fromCharCode(b);
}

// One canvas per layer and head, made once per shape and painted when it is
// in view (or about to be): a model of 8 layers and 16 heads has 128, 4,096
// at 256 layers, each T x T cells of a T-token Prompt.  A cell is at least
// one pixel (a 512-token Prompt's map is 512 pixels square, not 3,086), its
// labels drawn where a cell is wide enough to read them (the tip names every
// cell's tokens); the weights are the worker's array, read where asked (they
// were copied into an array a row and into JSON for each map: seconds of a
// frozen page).  A cell's query, key and weight show where the mouse is over
// it, or at the keyboard's cell cursor on the focused heatmap (one Tab stop
// for them all: arrow keys move the cursor, Page Up/Down go to the
// previous/next heatmap), said then by a live region too.
// A map far out of view (past 1,500 pixels) lets its pixels go, its canvas 0
// by 0 pixels (its size on the page held by its style), and is painted again
// when scrolled near: a 512-token map is a megabyte, 128 of them all kept once
// scrolled through.
let maps = [], cursor = [0, 0];
const mapOf = (cv) => maps.find((m) => m.cv === cv);
const seen = new IntersectionObserver((es) => {
  for (const e of es) {
    const map = mapOf(e.target);
    if (!map) continue;
    map.inView = e.isIntersecting;
    if (map.inView && map.stale) paint(map);
  }
}, { rootMargin: '300px' });
const release = (map) => { map.cv.width = map.cv.height = 0; map.stale = true; };
const far = new IntersectionObserver((es) => {
  for (const e of es) {
    const map = mapOf(e.target);
    if (!map) continue;
    map.near = e.isIntersecting;
    if (!map.near && document.activeElement !== map.cv) release(map);
  }
}, { rootMargin: '1500px' });
const unobserve = () => { seen.disconnect(); far.disconnect(); };

const weight = (map, i, j) => map.w[map.base + i * map.ids.length + j];
const cellText = (map, i, j) =>
  `query ${tokenText(map.ids[i])} (${i}) → key ${tokenText(map.ids[j])} (${j}): ${weight(map, i, j).toFixed(4)}`;

function tip(text, x, y) {
  const t = $('tip');
  t.textContent = text; t.style.left = x + 12 + 'px'; t.style.top = y + 12 + 'px'; t.style.display = 'block';
}

// The cursor's cell on a focused map: outlined, its details in the tip (and said when `say`).
function cursorCell(map, say) {
  if (document.activeElement !== map.cv || !map.ids.length) return;
  const [i, j] = cursor, { cell, lab } = map, g = map.cv.getContext('2d'), r = map.cv.getBoundingClientRect();
  const k = map.size / r.width;
  g.strokeStyle = '#d00'; g.lineWidth = cell < 4 ? 1 : 2;
  g.strokeRect(lab + j * cell - (cell < 4), lab + i * cell - (cell < 4), Math.max(cell - 1, 2), Math.max(cell - 1, 2));
  tip(cellText(map, i, j), r.left + (lab + (j + 1) * cell) / k, r.top + (lab + i * cell) / k);
  if (say) $('cellsay').textContent = `${map.cv.getAttribute('aria-label')}: ${cellText(map, i, j)}`;
}

function makeMaps(L, H, T, cell, lab) {
  const box = $('heatmaps');
  unobserve();
  box.textContent = '';
  maps = [];
  $('tip').style.display = 'none';    // (a cell of the maps gone: the mouse leaves them unheard)
  cursor = cursor.map((c) => Math.min(c, T - 1));
  for (let l = 0; l < L; l++)
    for (let h = 0; h < H; h++) {
      const fig = document.createElement('figure'), cv = document.createElement('canvas');
      const map = { cv, ids: [], w: null, base: 0, cell, lab, size: lab + T * cell, inView: false, near: false, stale: true };
      cv.width = cv.height = 0;     // (its pixels come when painted)
      cv.style.width = map.size + 'px'; cv.style.aspectRatio = '1';
      cv.tabIndex = maps.length ? -1 : 0;
      cv.setAttribute('role', 'img');
      cv.setAttribute('aria-label', `attention of layer ${l + 1}, head ${h + 1}`);
      // the map's weights as rows (for whoever asks, as the tests do)
      cv.weights = () => map.ids.map((_, i) => Array.from(map.w.subarray(map.base + i * T, map.base + (i + 1) * T)));
      cv.addEventListener('mousemove', (e) => {
        const r = cv.getBoundingClientRect(), k = map.size / r.width;    // (drawn smaller on a narrow screen)
        const j = Math.floor(((e.clientX - r.left) * k - lab) / cell), i = Math.floor(((e.clientY - r.top) * k - lab) / cell);
        if (i < 0 || j < 0 || i >= T || j >= T) $('tip').style.display = 'none';
        else tip(cellText(map, i, j), e.clientX, e.clientY);
      });
      cv.addEventListener('mouseleave', () => ($('tip').style.display = 'none'));
      cv.addEventListener('keydown', (e) => {
        const d = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] }[e.key];
        const k = maps.indexOf(map), to = maps[k + ({ PageUp: -1, PageDown: 1 }[e.key] || 0)];
        if (!d && (!to || to === map)) return;
        e.preventDefault();
        if (d) { cursor = cursor.map((c, x) => Math.max(0, Math.min(T - 1, c + d[x]))); paint(map); cursorCell(map, 1); }
        else { cv.tabIndex = -1; to.cv.tabIndex = 0; to.cv.focus(); }
      });
      cv.addEventListener('focus', () => { paint(map); cursorCell(map, 1); });
      cv.addEventListener('blur', () => { $('tip').style.display = 'none'; if (map.near) paint(map); else release(map); });
      const cap = document.createElement('figcaption');
      cap.textContent = `layer ${l + 1} · head ${h + 1}`;
      fig.append(cv, cap);
      box.append(fig);
      maps.push(map);
      seen.observe(cv); far.observe(cv);
    }
}

// Weight w as a cell from white (0) to blue (1); the tokens on both axes:
// rows are queries, columns keys.
function paint(map) {
  const { cv, ids, w, base, cell, lab, size } = map, T = ids.length, g = cv.getContext('2d');
  map.stale = false;
  if (cv.width !== size) cv.width = cv.height = size;     // (released far from view)
  g.clearRect(0, 0, cv.width, cv.height);
  if (lab) {
    g.font = `${Math.min(12, cell)}px ui-monospace, monospace`; g.fillStyle = '#333';
    for (let i = 0; i < T; i++) {
      const t = tokenText(ids[i]);
      // a key's label wider than its column (\xNN) reads upward, as attograd attn draws it
      if (g.measureText(t).width > cell) {
        g.save(); g.translate(lab + (i + 1) * cell - 3, lab - 3); g.rotate(-Math.PI / 2); g.fillText(t, 0, 0); g.restore();
      } else g.fillText(t, lab + i * cell + 1, lab - 3);
      g.fillText(t, 2, lab + (i + 1) * cell - 3);
    }
  }
  // one pixel a cell, scaled up to cells (a fillRect a cell took 0.35 s a heatmap of a
  // 512-token prompt, seconds of a frozen page), then the white line after each
  const src = new ImageData(T, T), px = new Uint32Array(src.data.buffer);
  for (let k = 0; k < T * T; k++) {
    const v = w[base + k], x = v >= 0 ? Math.min(v, 1) : 0;
    px[k] = 0xffff0000 | (255 - Math.round(175 * x)) << 8 | (255 - Math.round(215 * x));   // (RGBA's bytes)
  }
  if (cell === 1) { g.putImageData(src, lab, lab); return; }
  const one = document.createElement('canvas');
  one.width = one.height = T;
  one.getContext('2d').putImageData(src, 0, 0);
  g.imageSmoothingEnabled = false;
  g.drawImage(one, lab, lab, T * cell, T * cell);
  if (cell >= 4)
    for (let k = 1; k <= T; k++) {
      g.clearRect(lab + k * cell - 1, lab, 1, T * cell);
      g.clearRect(lab, lab + k * cell - 1, T * cell, 1);
    }
}

function drawHeatmaps(a) {
  if (!a) return;
  if (a.error) { unobserve(); maps = []; $('heatmaps').textContent = a.error; $('heatmaps').dataset.key = ''; return; }
  const { T, L, H, ids, weights } = a;
  // a cell of 18 pixels down to 1 (the labels' band, 14 pixels or wider for a label of
  // more than one character (\xNN), where a cell is 6 pixels or more)
  const cell = Math.max(1, Math.min(18, Math.floor(220 / T))), chars = Math.max(...ids.map((id) => tokenText(id).length));
  const lab = cell < 6 ? 0 : Math.max(14, Math.ceil(chars * 0.62 * Math.min(12, cell)) + 5), key = `${L},${H},${T},${lab}`;
  if ($('heatmaps').dataset.key !== key) { makeMaps(L, H, T, cell, lab); $('heatmaps').dataset.key = key; }
  maps.forEach((map, k) => {
    map.ids = ids; map.w = weights; map.base = k * T * T;
    // drawn now where in view (the observer's first word on a new map comes after), else once scrolled to
    map.stale = true;
    if (map.inView || document.activeElement === map.cv) { paint(map); cursorCell(map, 0); }
  });
}

function showAttention(a) {
  current = a;
  const sl = $('snapshot');
  if (Number(sl.value) >= snapshots.length - 1 || !snapshots.length) drawHeatmaps(a);
}

// The heatmaps Snapshot scrubs through: the model's as built, then one each
// evaluation, at most SNAP_MAX of them and at most SNAP_BYTES (a big model's
// heatmaps of a long prompt are megabytes each).  When full, every other one
// goes (the first stays) and from then on one evaluation in twice as many is
// kept, so they stay evenly spread over the run; the latest is kept too,
// until the next comes.  (One each evaluation, kept for good, took about 1.3 GB
// over a million steps of a text model.)
const SNAP_MAX = 100, SNAP_BYTES = 64 << 20;
let snapshots = [], snapEvery = 1, snapSeen = 0;
function clearSnapshots() {
  snapshots = []; snapEvery = 1; snapSeen = 0;
  $('snapshot').max = '0'; $('snapshot').value = '0'; labelSnapshot();
}
function addSnapshot(a) {
  if (!a || a.error) return;
  const sl = $('snapshot'), shown = snapshots[Number(sl.value)], atEnd = Number(sl.value) >= snapshots.length - 1;
  // the latest, kept only as the latest, makes way
  if (snapshots.length && snapshots[snapshots.length - 1].k % snapEvery) snapshots.pop();
  a.k = snapSeen++;
  snapshots.push(a);
  const bytes = () => snapshots.reduce((n, s) => n + s.weights.byteLength, 0);
  while (snapshots.length > SNAP_MAX || (snapshots.length > 2 && bytes() > SNAP_BYTES)) {
    snapEvery *= 2;
    snapshots = snapshots.filter((s, i) => s.k % snapEvery === 0 || i === snapshots.length - 1);
  }
  sl.max = String(snapshots.length - 1);
  if (atEnd) sl.value = sl.max;
  else {
    // the one scrubbed to, or (thinned out) the nearest before it
    let i = 0;
    while (i + 1 < snapshots.length && snapshots[i + 1].k <= shown.k) i++;
    sl.value = String(i);
    if (snapshots[i] !== shown) drawHeatmaps(snapshots[i]);
  }
  labelSnapshot();
}

// The step of the heatmaps Snapshot shows, beside it and as its value said
// (a screen reader said the index: "37")
function labelSnapshot() {
  const sl = $('snapshot'), a = snapshots[Number(sl.value)];
  $('snapinfo').textContent = a ? `step ${a.step}` : '';
  if (a) sl.setAttribute('aria-valuetext', `step ${a.step} of ${info.steps}`);
  else sl.removeAttribute('aria-valuetext');
}

// ---- one training step's autograd graph ----------------------------------

// The ops of one step (playground.c's pg_graph: the graph `attograd graph`
// draws), forward from the top: each op in the row below its lowest input,
// each leaf (a parameter, or the tokens) in the row above its first use.
// Every box shows the op, its output's shape and ||dloss/dvalue||, the
// gradient that flows back into that value.
const SVG = 'http://www.w3.org/2000/svg';
const fmt = (g) => (g === null ? 'no gradient' : '∇ ' + g.toPrecision(3));

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}

function graphLayout(gr) {
  const ops = gr.ops.slice().sort((a, b) => a.id - b.id), rank = new Map(), leafRank = new Map();
  for (const op of ops) rank.set(op.id, 1 + Math.max(0, ...op.in.filter((i) => 'op' in i).map((i) => rank.get(i.op))));
  for (const op of ops)
    for (const i of op.in) if ('leaf' in i && !leafRank.has(i.leaf)) leafRank.set(i.leaf, rank.get(op.id) - 1);
  const rows = [];
  const put = (r, item) => (rows[r] = rows[r] || []).push(item);
  for (const [k, r] of leafRank) put(r, { key: 'leaf' + k, leaf: gr.leaves[k] });
  for (const op of ops) put(rank.get(op.id), { key: 'op' + op.id, op });
  return rows.filter(Boolean);
}

function drawGraph(m) {
  const gr = m.graph, box = $('graph');
  box.textContent = '';
  const W = 150, H = 44, GX = 14, GY = 34, rows = graphLayout(gr), at = new Map();
  const width = Math.max(...rows.map((r) => r.length)) * (W + GX) + GX, height = rows.length * (H + GY) + GY;
  const root = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
    'aria-label': `autograd graph of one training step: ${gr.ops.length} ops` });
  const defs = svg('defs', {}), arrow = svg('marker', { id: 'arrow', viewBox: '0 0 8 8', refX: 8, refY: 4,
    markerWidth: 6, markerHeight: 6, orient: 'auto' });
  arrow.append(svg('path', { d: 'M0,0 L8,4 L0,8 z', fill: '#888' }));
  defs.append(arrow);
  root.append(defs);
  rows.forEach((row, r) => row.forEach((item, c) => {
    const x = GX + c * (W + GX) + (width - row.length * (W + GX) - GX) / 2, y = GY + r * (H + GY);
    at.set(item.key, { x, y });
  }));
  const edges = svg('g', {}), nodes = svg('g', {});
  for (const op of gr.ops) {
    const to = at.get('op' + op.id);
    for (const i of op.in) {
      const from = at.get('op' in i ? 'op' + i.op : 'leaf' + i.leaf);
      edges.append(svg('line', { x1: from.x + W / 2, y1: from.y + H, x2: to.x + W / 2, y2: to.y,
        stroke: '#aaa', 'marker-end': 'url(#arrow)' }));
    }
  }
  const node = (item, fill, name, shape, grad) => {
    const p = at.get(item.key), g = svg('g', { class: item.op ? 'op' : 'leaf', 'data-name': name,
      'data-id': item.op ? item.op.id : '',
      'data-shape': JSON.stringify(shape), 'data-grad': grad === null ? '' : String(grad),
      transform: `translate(${p.x},${p.y})` });
    g.append(svg('title', {}, `${name} [${shape.join(',')}]: ${fmt(grad)} (gradient of the loss, L2 norm)`));
    g.append(svg('rect', { width: W, height: H, rx: item.op ? 8 : 0, fill, stroke: '#777' }));
    g.append(svg('text', { x: 6, y: 13 }, name.length > 23 ? name.slice(0, 22) + '…' : name));
    g.append(svg('text', { x: 6, y: 26 }, '[' + shape.join(',') + ']'));
    g.append(svg('text', { x: 6, y: 39, fill: '#b30' }, fmt(grad)));
    nodes.append(g);
  };
  for (const row of rows)
    for (const item of row)
      if (item.op) node(item, '#eef4ff', item.op.op, item.op.shape, item.op.grad);
      else node(item, item.leaf.param ? '#ffe9b0' : '#e8e8e8', item.leaf.name, item.leaf.shape, item.leaf.grad);
  root.append(edges, nodes);
  box.append(root);
  $('graph-caption').textContent = `One training step at step ${m.step}: ${gr.ops.length} ops on the tape, ` +
    `loss ${gr.loss.toFixed(4)} on ${gr.tokens} tokens (a training problem drawn with Seed, or the vocabulary in ` +
    `order for text). Forward runs down; backward sends each value the gradient shown (∇, its L2 norm) back up.`;
  $('graphview').hidden = false;
}

// The graph, once shown, follows the model: redrawn after a step or a run.
function refreshGraph() { if (!$('graphview').hidden) send({ cmd: 'graph' }); }

// ---- the worker -----------------------------------------------------------

function setRunning(on) {
  running = on;
  $('train').textContent = on ? 'Pause' : 'Train';
}

// A reply says whether the worker trains once it has handled command m.n: the
// Train button follows it, unless Train or Pause was pressed after that command
// (a click that changes a field and presses Train sends a new run, then Train:
// the new run's reply must not turn the button back to Train).
function onReply(m) {
  if ('running' in m && m.n >= runSent) setRunning(m.running);
  onMessage[m.type](m);
}

const onMessage = {
  ready() { reset(); },
  model(m) {
    info = m.info; trainLoss = newLosses(); valLoss = []; lastVal = null;
    clearSnapshots();
    if (m.val) { valLoss.push([m.val.step, m.val.loss]); lastVal = m.val; }
    if (m.opened) {
      for (const k of SETTINGS) if (k in info && k !== 'task') $(k).value = info[k];
      $('task').value = info.task;
      $('textbox').hidden = info.task !== 'text';
      settingsToUrl(built = fields());
      say('');
      $('status').textContent = '';
    }
    // the worker's choice, one the model reads, unless a Prompt was typed since the command
    // (it was put over what the learner typed while the model built; the worker has the typed one)
    if (!(promptTyped > m.n)) $('prompt').value = m.prompt;
    $('completion').textContent = '';
    addSnapshot(m.attention);
    showAttention(m.attention);
    status(); drawLoss();
    if (info.live && !m.opened) $('status').textContent = `step ${info.step}/${info.steps} · loss –` +
      (info.task !== 'text' && lastVal ? ` · held-out exact match ${(100 * lastVal.correct / lastVal.total).toFixed(1)}%` : '');
    if (m.opened) status();
    else settingsToUrl(built = asked);   // the link is to runs the page built
    refreshGraph();
  },
  progress(m) {
    info = m.info;
    for (const p of m.losses) addLoss(p[0], p[1]);
    if (m.val) { valLoss.push([m.val.step, m.val.loss]); lastVal = m.val; }
    if (m.snapshot) { addSnapshot(m.snapshot); showAttention(m.snapshot); }
    if (m.error) say(m.error, 'train');
    else if (m.losses.length) cleared('train', 'step');
    status(); drawLoss();
  },
  stopped(m) { info = m.info; status(); refreshGraph(); },
  extended(m) {
    info = m.info;
    cleared('steps', 'train', 'step');
    if (built) { built.steps = m.text; settingsToUrl(built); }
    status(); drawLoss(); labelSnapshot();
  },
  attention(m) {
    if (m.prompt !== undefined && !(promptTyped > m.n)) $('prompt').value = m.prompt;
    if (m.attention && m.attention.error) say(m.attention.error, 'prompt');
    else { cleared('prompt'); showAttention(m.attention); }
  },
  graph(m) { cleared('graph'); drawGraph(m); },
  examples(m) { cleared('examples'); $('examples-text').textContent = m.text; },
  completion(m) { cleared('complete'); $('completion').textContent = m.text; },
  saved(m) {
    cleared('save');
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([m.bytes], { type: 'application/octet-stream' }));
    a.download = `attograd-${m.info.task}-step${m.info.step}.st`;
    document.body.append(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  },
  // a large text's model under way: which part (reading, vocabulary, evaluation)
  building(m) { $('status').textContent = m.text; },
  error(m) {
    say(m.n === noteFor && noteShown ? noteShown + '; ' + m.message : m.message, m.cmd);   // (the link's line kept)
    if (m.info) { info = m.info; $('status').textContent = 'no model'; }
    // (a build or an opening refused: the run as it was, a line of its building gone)
    else if (m.cmd === 'new' || m.cmd === 'text' || m.cmd === 'open') status();
  },
};

// The text the worker has (a file's bytes, or the textarea's text as typed): it keeps it,
// and a Reset or a new setting builds from its copy (the page's was sent again each time,
// a copy of its every byte on the page's thread)
let textSent = null;
async function reset() {
  say(noteShown = linkNote);
  linkNote = '';
  const s = settings();
  asked = fields();
  const msg = { cmd: 'new', settings: s, prompt: $('prompt').value };
  if (s.task === 'text') {
    // a file's own bytes (the textarea would change a CRLF, a BOM or bytes that are not UTF-8)
    const typed = textBytes ? null : $('text').value;
    if (textSent && textSent.bytes === textBytes && textSent.typed === typed) msg.keptText = true;
    else { msg.text = textBytes || new TextEncoder().encode(typed); textSent = { bytes: textBytes, typed }; }
    msg.textName = $('text').dataset.name || 'text';
  }
  noteFor = send(msg);
}

// A chosen file's bytes, or null with one line naming it (a file past what the browser
// reads, about 2 GB, or gone since it was chosen: the read's exception went uncaught, unsaid)
async function fileBytes(f) {
  try { return new Uint8Array(await f.arrayBuffer()); }
  catch (e) { say(`${f.name}: the browser could not read its ${f.size} bytes (${e.name})`); return null; }
}

function bind() {
  for (const k of SETTINGS) $(k).addEventListener('change', () => {
    // More Steps for a run under way (or opened from a checkpoint) continue
    // it, as train --resume --steps N does; any other change starts anew.
    // (the link takes the Steps once the engine has: a refused one stays out of it)
    if (k === 'steps' && info && info.live && info.step > 0 && Number($('steps').value) >= info.step) {
      send({ cmd: 'steps', text: $('steps').value });
      return;
    }
    if (k === 'optimizer') $('lr').value = DEFAULT_LR[$('optimizer').value];
    if (k === 'task') { $('textbox').hidden = $('task').value !== 'text'; $('prompt').value = ''; }   // the worker gives the task's
    // a setting refused, then set back: the run goes on as it was
    if (info && info.live && built && SETTINGS.every((j) => $(j).value === built[j])) {
      say('');
      settingsToUrl(built);
      if (k === 'task') send({ cmd: 'prompt', prompt: $('prompt').value, choose: true });
      return;
    }
    reset();
  });
  // Seed is a text field (a number field steps and reads it as a double: 2^53 + 1 up
  // would be 2^53): ArrowUp and ArrowDown step it here, exactly, within the range
  // the engine takes (RUN_MAX_SEED); other text goes to the engine, which names it.
  $('seed').addEventListener('keydown', (e) => {
    const t = $('seed').value.trim();
    if ((e.key !== 'ArrowUp' && e.key !== 'ArrowDown') || e.altKey || e.ctrlKey || e.metaKey || !/^\d+$/.test(t)) return;
    e.preventDefault();
    let v = BigInt(t) + (e.key === 'ArrowUp' ? 1n : -1n);
    v = v < 0n ? 0n : v > SEED_MAX ? SEED_MAX : v;
    if (String(v) === $('seed').value) return;
    $('seed').value = String(v);
    $('seed').dispatchEvent(new Event('input', { bubbles: true }));
    $('seed').dispatchEvent(new Event('change', { bubbles: true }));
  });
  // (the worker says when there is nothing to train: it knows the run a change just asked for)
  $('train').addEventListener('click', () => {
    setRunning(!running);
    runSent = send({ cmd: running ? 'train' : 'pause' });
  });
  // (while it trains, Step does nothing; but a run asked for since the last Train, as by the click's
  // own change of a setting typed, is not training: the Step is its, the worker ignoring it if that
  // run was refused and the old one trains on; it did nothing, the new run left at step 0)
  $('step').addEventListener('click', () => {
    if (running && !(noteFor > runSent)) return;
    send({ cmd: 'step' }); refreshGraph();
  });
  $('reset').addEventListener('click', () => { $('text').dataset.name = $('text').dataset.name || ''; reset(); });
  $('prompt').addEventListener('input', () => { promptTyped = send({ cmd: 'prompt', prompt: $('prompt').value }); });
  // (Temperature as its text, as a setting's: the engine names an empty one, or one the browser
  // could not read (it completed greedily, unsaid), and one too close to 0, as attograd sample does)
  $('complete').addEventListener('click', () => send({
    cmd: 'complete', prompt: $('prompt').value, tokens: 200, temperature: $('temperature').value, seed: $('seed').value }));
  // Enter in the Prompt or Temperature completes (it did nothing: typed, a prompt waited for a click)
  for (const id of ['prompt', 'temperature']) $(id).addEventListener('keydown', (e) => {
    if (e.key === 'Enter' && !e.isComposing && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey) $('complete').click();
  });
  $('graphbtn').addEventListener('click', () => send({ cmd: 'graph' }));
  $('save').addEventListener('click', () => send({ cmd: 'save' }));
  $('open').addEventListener('change', async () => {
    const f = $('open').files[0];
    if (!f) return;
    const bytes = await fileBytes(f);
    $('open').value = '';
    // (the page's Heads and Task, for a file that does not say them)
    if (bytes) send({ cmd: 'open', name: f.name, bytes, heads: $('heads').value, task: $('task').value,
                      hintName: $('text').dataset.name || 'text' });
  });
  $('textfile').addEventListener('change', async () => {
    const f = $('textfile').files[0];
    if (!f) return;
    const bytes = await fileBytes(f);
    $('textfile').value = '';    // the same file chosen again is a change too
    if (!bytes) return;
    // a textarea lays out about a megabyte a second: a large file trains unseen
    const big = bytes.length > 1e5;
    $('text').value = big ? '' : new TextDecoder().decode(bytes);
    if (big) $('text').placeholder = `${f.name}: ${bytes.length} bytes, too many to show (text typed here replaces it)`;
    $('text').dataset.name = f.name;
    textBytes = bytes;
    // A text model opened from a checkpoint without its text: the file's
    // bytes join it (training goes on as train --resume would); else a new run.
    if (info && info.live && !info.trainable && info.task === 'text') {
      send({ cmd: 'text', text: bytes, textName: f.name });
      textSent = { bytes, typed: null };
    }
    // (Task changed while the file was read: the text waits for Task text; the run there
    // is, maybe training since, is not built anew from the settings it was built from)
    else if ($('task').value === 'text') reset();
  });
  $('text').addEventListener('change', () => { $('text').dataset.name = 'text'; textBytes = null; reset(); });
  $('examples').addEventListener('toggle', () => {
    if ($('examples').open && !$('examples-text').textContent) send({ cmd: 'examples' });
  });
  $('snapshot').addEventListener('input', () => {
    const i = Number($('snapshot').value), a = snapshots[i];
    if (!a) return;
    labelSnapshot();
    drawHeatmaps(i === snapshots.length - 1 && current ? current : a);
  });
}

function start() {
  if (location.protocol === 'file:') {
    $('app').hidden = true;
    const p = $('noserver');
    p.style.display = 'block';
    p.textContent = 'Opened from a file, the browser refuses this page its worker: serve it ' +
      '(make web-serve, or python3 -m http.server in build-web/) and open http://localhost:8000/';
    return;
  }
  settingsFromUrl();
  bind();
  worker = new Worker('worker.js');
  worker.onmessage = (e) => onReply(e.data);
  worker.onerror = (e) => say('the worker failed: ' + e.message);
}

start();
