// worker.js - the playground's Web Worker: it owns the engine
// (playground.wasm, built from the same C as the attograd command) and
// trains in slices of about 50 ms, posting progress between them, so the
// page's thread only draws and a Pause is heard within one slice.
'use strict';
importScripts('playground.js');

const SLICE_MS = 50;
// an evaluation every tenth of the run (at least 10 steps apart, at most 100)
const evalEvery = () => Math.max(10, Math.min(100, Math.round(info.steps / 10)));
const BIG_TEXT = 1e6;          // bytes of a text whose build the status line follows
const EVAL_WINDOWS = 100;      // text: windows an evaluation scores during training (the last one: all)
const DEFAULT_PROMPT = { copy: 'gcfffbgj|', reverse: 'gcfffbgj|', sort: '210120', add: '27+58=', text: 'The ' };

let M = null, running = false, prompt = '', info = null;
let seen = 0, seenCmd = '';    // the number of the page's last command handled, and its kind
let opened = null;             // the checkpoint last opened: its name and bytes
let lossBuf = 0, evalBuf = 0, idsBuf = 0;
// A large text's last evaluation, of every held-out window (seconds to minutes), runs a
// slice at a time as training does, so a Pause is heard within one and the status line
// follows it; paused, Train finishes it.  While under way: { done, all } windows; else null.
// (Other runs' take a moment, and end with the step's progress as before.)
let finalEval = null;
const bigText = () => info.task === 'text' && !!kept && kept.length >= BIG_TEXT;
// The page's text, kept as /text (a new run built from it again is not sent it again):
// its length and first bytes (the Prompt's choice reads them), or null
let kept = null;
const keep = (text) => { M.FS.writeFile('/text', text); kept = { length: text.length, head: text.slice(0, 64) }; };

// The engine called with its string arguments copied into its heap: ccall put them on its
// stack (5 MB), which a long Prompt overran, and the worker died (memory access out of bounds).
// A string the heap cannot take fails the call (-1, or null), lastError() saying so.
let heapError = '';
function c(name, ret, types, args) {
  const held = [];
  heapError = '';
  try {
    const put = (s) => {
      const b = new TextEncoder().encode(s), p = M._malloc(b.length + 1);
      if (!p) throw Object.assign(new Error(`out of memory for a string of ${b.length} bytes`), { heap: true });
      held.push(p);
      M.HEAPU8.set(b, p);
      M.HEAPU8[p + b.length] = 0;
      return p;
    };
    const a = args.map((v, i) => (types[i] === 'string' ? put(v) : v));
    return M.ccall(name, ret, types.map((t) => (t === 'string' ? 'number' : t)), a);
  } catch (e) {
    if (!(e && e.heap)) throw e;
    heapError = e.message;
    return ret === 'string' ? null : name === 'pg_complete' ? 0 : -1;    // (pg_complete's is a pointer)
  } finally {
    held.forEach((p) => M._free(p));
  }
}
const lastError = () => heapError || M.ccall('pg_error', 'string', [], []);
const refreshInfo = () => (info = JSON.parse(c('pg_info', 'string', [], [])));
// Every message says whether training goes on once the page's command `seen` is handled
// (the page's Train button follows that, unless Train or Pause was pressed since), and
// that command's kind (a refusal of one is cleared by one of its kind that succeeds)
// (a message's attention weights are moved to the page, not copied: a big model's are
// a hundred megabytes)
const post = (m, transfer) => postMessage(Object.assign(m, { n: seen, cmd: seenCmd, running }),
  (transfer || []).concat([m.attention, m.snapshot].filter((a) => a && a.weights).map((a) => a.weights.buffer)));
const fail = (what) => post({ type: 'error', message: what + ': ' + lastError() });
// Why neither Train nor Step can go on, or ''.
// (a text model opened without its text says so first: raised Steps would not let it train)
const stuck = () => (!info || !info.live ? 'no model to train: change the settings'
  : finalEval ? "the last step's evaluation is paused: Train finishes it"
  : !info.trainable ? "this model's text is not loaded: choose it under Text to train on"
  : info.step >= info.steps ? 'the run is at its last step: raise Steps or Reset' : '');

createPlayground().then((module) => {
  M = module;
  lossBuf = M._malloc(4 * 4096);
  evalBuf = M._malloc(8 * 5);
  idsBuf = M._malloc(4 * 1024);
  post({ type: 'ready' });
}, (e) => post({ type: 'error', message: 'the engine did not load: ' + e }));

// The tokens the heatmaps show: for a task, the prompt completed greedily
// (the answer's positions are where attention does the work), cut to the
// L tokens the model reads; for text, the prompt.
function shownTokens() {
  if (info.task !== 'text' && prompt.replace(/\s/g, '').length === info.prompt_len) {
    const done = c('pg_complete', 'string', ['string', 'number', 'string', 'string'], [prompt, 0, '0', '0']);
    if (done) return done.slice(0, info.len);
  }
  return prompt;
}

// A Prompt holding a NUL, refused: the engine takes a C string, which would
// end at it (the rest unread, silently), and the command's --prompt cannot hold one.
const nulError = (p) => {
  const i = p.indexOf('\0');
  return i < 0 ? '' : `Prompt: a NUL (0x00) at position ${new TextEncoder().encode(p.slice(0, i)).length + 1}, ` +
    "which a prompt cannot hold (nor can attograd's --prompt)";
};

function attention() {
  if (!info || !info.live || !prompt) return null;
  if (nulError(prompt)) return { error: nulError(prompt) };
  const T = c('pg_attention', 'number', ['string', 'number'], [shownTokens(), idsBuf]);
  if (T < 0) return { error: lastError().replace(/^(?!Prompt: )/, 'Prompt: ') };   // (the engine's own name the Prompt)
  const L = info.layers, H = info.heads, ptr = c('pg_attention_data', 'number', [], []) >> 2;
  const ids = Array.from(M.HEAP32.subarray(idsBuf >> 2, (idsBuf >> 2) + T));
  return { step: info.step, T, L, H, ids, weights: M.HEAPF32.slice(ptr, ptr + L * H * T * T) };
}

// The prompt for a model just built or opened: the one given if the model
// reads it (an empty one, or one of another task's, is not given), else the
// task's default, else (text) the text's first characters (up to a line's
// end or a NUL, which the engine's C string would end at) or the first letter
// or digit of its vocabulary; the page's Prompt field takes it.
function choosePrompt(given, text) {
  const reads = (p) => !!p && !nulError(p) && c('pg_attention', 'number', ['string', 'number'], [p, idsBuf]) >= 0;
  const start = text ? [...new TextDecoder().decode(text.subarray(0, 64)).trimStart().split(/[\r\n\0]/)[0]].slice(0, 4).join('') : '';
  const letter = info.vocab.map((b) => String.fromCharCode(b)).find((ch) => /[a-z0-9]/i.test(ch));
  return [given, DEFAULT_PROMPT[info.task], start, letter].find(reads) || given;
}

// The completion's bytes (at out, pg_completion_bytes of them: a text's
// NUL is one; the completion was cut at the first) as text, less a UTF-8 character the
// 200-token cut split at its end (it showed as U+FFFD); bytes that are not
// UTF-8 before it show as U+FFFD, as anywhere.
function completionText(out) {
  let n = c('pg_completion_bytes', 'number', [], []);
  const b = M.HEAPU8.subarray(out, out + n);
  for (let k = 1; k <= Math.min(3, n) && b[n - k] >= 0x80; k++)
    if (b[n - k] >= 0xc0) { if ((b[n - k] >= 0xf0 ? 4 : b[n - k] >= 0xe0 ? 3 : 2) > k) n -= k; break; }
  return new TextDecoder().decode(b.subarray(0, n));
}

function evaluate(all) {
  if (c('pg_evaluate', 'number', ['number', 'number'], [all ? 0 : EVAL_WINDOWS, evalBuf]) < 0) return null;
  const v = M.HEAPF64.subarray(evalBuf >> 3, (evalBuf >> 3) + 3);
  return { step: info.step, loss: v[0], correct: v[1], total: v[2] };
}

const evaluating = () => `step ${info.step}/${info.steps} · evaluating on every held-out window…`;

// A large text's last evaluation: begun (the status line says so), then slices.
function beginFinal() {
  const all = c('pg_eval_begin', 'number', ['number'], [0]);
  if (all < 0) return lastError();
  finalEval = { done: 0, all };
  post({ type: 'building', text: evaluating() });
  return null;
}

// Groups of the last evaluation for about SLICE_MS; true while windows remain.  Done, its
// result goes out as training's evaluations do.
function evalSlice() {
  const t0 = performance.now();
  let rc;
  do rc = c('pg_eval_next', 'number', ['number', 'number'], [1, evalBuf]);
  while (rc === 0 && performance.now() - t0 < SLICE_MS);
  const v = M.HEAPF64.subarray(evalBuf >> 3, (evalBuf >> 3) + 5);
  if (rc === 0) {
    finalEval.done = v[3];
    finalEval.all = v[4];
    post({ type: 'building', text: `${evaluating()} (${v[3]} of ${v[4]})` });
    return true;
  }
  finalEval = null;
  const val = rc < 0 ? null : { step: info.step, loss: v[0], correct: v[1], total: v[2] };
  post({ type: 'progress', info, losses: [], val, snapshot: val ? attention() : null,
         error: rc < 0 ? 'evaluation stopped: ' + lastError() : null });
  return false;
}

// Up to `limit` steps, or SLICE_MS of them; one evaluation where a multiple
// of evalEvery() or the last step is reached (then the slice ends there).
function steps(limit) {
  const t0 = performance.now(), losses = [];
  let val = null, error = null;
  while (losses.length < limit && info.step < info.steps && performance.now() - t0 < SLICE_MS) {
    const n = c('pg_train', 'number', ['number', 'number'], [1, lossBuf]);
    if (n < 0) { error = 'training stopped: ' + lastError(); running = false; break; }
    losses.push([info.step + 1, M.HEAPF32[lossBuf >> 2]]);
    info.step++;
    if (info.step === info.steps ? !bigText() : info.step % evalEvery() === 0) {
      val = evaluate(info.step === info.steps);
      break;
    }
    if (info.step === info.steps) break;
  }
  const snap = val ? attention() : null;
  post({ type: 'progress', info, losses, val, snapshot: snap, error });
  // a large text's last evaluation, of every held-out window: in slices of its own (slice())
  if (!error && losses.length && info.step === info.steps && bigText()) {
    const why = beginFinal();
    if (why) post({ type: 'progress', info, losses: [], error: 'evaluation stopped: ' + why });
  }
  return !error && (info.step < info.steps || finalEval !== null);
}

function slice() {
  if (!running) return;
  if (finalEval ? evalSlice() : steps(Infinity)) setTimeout(slice, 0);
  else { running = false; post({ type: 'stopped', info }); }
}

function showModel(extra) {
  refreshInfo();
  post(Object.assign({ type: 'model', info, prompt, attention: attention() }, extra || {}));
}

const handlers = {
  new(m) {
    // a large text's build takes seconds (about 24 for 1.5 GB): the page's status line says which part
    if (m.keptText && !kept) { post({ type: 'error', message: 'cannot build the model: the text was not sent' }); return; }
    const text = m.text || (m.keptText ? kept : null), big = text && text.length >= BIG_TEXT, name = m.textName || 'text';
    if (big && m.text) post({ type: 'building', text: `reading ${name} (${m.text.length} bytes)…` });
    if (m.text) keep(m.text);
    if (big) post({ type: 'building', text: `building the vocabulary and the model of ${name}…` });
    const s = m.settings;
    const rc = c('pg_new', 'number',
      ['string', 'string', 'string', 'string', 'string', 'string', 'string', 'string', 'number', 'string',
       'string', 'string', 'string'],
      [s.task, '/text', m.textName || 'text', s.layers, s.heads, s.d_model, s.context, s.dropout,
       s.optimizer === 'adamw' ? 1 : 0, s.lr, s.batch, s.steps, s.seed]);
    refreshInfo();
    if (rc < 0) {   // refused: the run there was goes on as it was (unless an engine error took it: info says)
      if (!info.live) running = false;
      post({ type: 'error', info: info.live ? null : info, message: 'cannot build the model: ' +
        lastError().replace(/^\/text\b/, m.textName || 'the text') });
      return;
    }
    running = false;
    opened = null;
    if (big) post({ type: 'building', text: `evaluating the model of ${name}…` });
    prompt = choosePrompt(m.prompt, text && kept.head);
    finalEval = null;
    showModel({ val: evaluate(false) });
  },
  steps(m) {
    if (c('pg_set_steps', 'number', ['string'], [m.text]) < 0) { fail('cannot change Steps'); return; }
    refreshInfo();
    if (info.step < info.steps) finalEval = null;    // not the last step now: training goes on
    post({ type: 'extended', info, text: m.text });
  },
  train() {
    if (running) return;
    if (finalEval) { running = true; slice(); return; }    // the last evaluation, paused: finished
    if (stuck()) post({ type: 'error', message: stuck() });
    else { running = true; slice(); }
  },
  pause() {
    running = false;
    if (finalEval)
      post({ type: 'building', text: `step ${info.step}/${info.steps} · the evaluation of every held-out window is paused ` +
                                     `(${finalEval.done} of ${finalEval.all}): Train finishes it` });
  },
  step() {
    if (running) return;
    if (stuck()) post({ type: 'error', message: stuck() });
    else if (steps(1) && finalEval) { running = true; slice(); }    // the last step: its evaluation
    else post({ type: 'attention', attention: attention() });
  },
  // (`choose`: the page's task set back, its Prompt emptied: the model's default)
  prompt(m) {
    prompt = m.choose ? choosePrompt(m.prompt) : m.prompt;
    if (m.choose || !running) post({ type: 'attention', attention: attention(), prompt: m.choose ? prompt : undefined });
  },
  complete(m) {
    if (nulError(m.prompt)) { post({ type: 'error', message: 'cannot complete: ' + nulError(m.prompt) }); return; }
    const out = c('pg_complete', 'number', ['string', 'number', 'string', 'string'],
      [m.prompt, m.tokens, m.temperature, m.seed]);
    if (!out) fail('cannot complete');
    else post({ type: 'completion', text: completionText(out) });
  },
  examples() {
    const text = c('pg_walkthrough', 'string', [], []);
    if (!text) fail('cannot compute the worked examples');
    else post({ type: 'examples', text });
  },
  graph() {
    const text = c('pg_graph', 'string', ['string'], [info ? info.seed : '1']);   // with no model: says so
    if (!text) fail('cannot draw the graph');
    else post({ type: 'graph', graph: JSON.parse(text), step: info.step });
  },
  save() {
    // A text model opened without its text cannot have changed: its file as it was (the
    // engine, without the text to record, wrote the weights alone: the run's state lost)
    if (opened && info && !info.trainable) { post({ type: 'saved', bytes: opened.bytes.slice(), info }); return; }
    if (c('pg_save', 'number', ['string'], ['/save.st']) < 0) { fail('cannot save'); return; }
    const bytes = M.FS.readFile('/save.st');
    M.FS.unlink('/save.st');
    post({ type: 'saved', bytes, info }, [bytes.buffer]);
  },
  // A checkpoint, with its text when given (a text model opened without it
  // can complete, not train: choosing the text opens it again with it).
  open(m) {
    // with a large text, the status line follows it as a new run's (it said nothing for as long)
    const big = m.text && m.text.length >= BIG_TEXT, name = m.textName || 'text';
    if (big) post({ type: 'building', text: `reading ${name} (${m.text.length} bytes)…` });
    M.FS.writeFile('/open.st', m.bytes);
    if (m.text) keep(m.text);
    if (big) post({ type: 'building', text: `building the model of ${m.name} with ${name}…` });
    // a file that does not say its heads or data (a PyTorch state_dict) is read with the page's
    // Heads and Task, and for Task text with the page's text, as --heads, --task and --text
    const hint = !m.text && kept && kept.length && m.task === 'text' ? '/text' : '';
    const rc = c('pg_open', 'number', ['string', 'string', 'string', 'string', 'string', 'string', 'string'],
      ['/open.st', m.text ? '/text' : '', m.textName || '', m.heads || '', m.task || '', hint, m.hintName || 'text']);
    M.FS.unlink('/open.st');
    if (rc < 0) {
      const why = lastError().replace(/^\/open\.st: /, '').replace(/^\/text /, (m.textName || 'the text') + ' ')
        .replace(/\/text\b/g, m.hintName || 'the text');
      post({ type: 'error', message: (m.text ? m.textName : m.name) + ': ' + why });
      return;
    }
    running = false;    // the run it replaced stops
    finalEval = null;
    opened = { name: m.name, bytes: m.bytes, heads: m.heads, task: m.task };
    const task = info && info.live ? info.task : '';
    refreshInfo();
    if (big && info.trainable) post({ type: 'building', text: `evaluating the model of ${name}…` });
    prompt = choosePrompt(info.task === task ? prompt : '', m.text);
    showModel({ opened: m.name, val: info.trainable ? evaluate(false) : null });
  },
  text(m) {
    if (!opened) { fail('no checkpoint to give the text to'); return; }
    handlers.open({ name: opened.name, bytes: opened.bytes, heads: opened.heads, task: opened.task, text: m.text,
                    textName: m.textName });
  },
};

onmessage = (e) => {
  seen = e.data.n;
  seenCmd = e.data.cmd;
  if (!M) { post({ type: 'error', message: 'the engine is still loading' }); return; }
  handlers[e.data.cmd](e.data);
};
