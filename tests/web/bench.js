// bench.js - make bench-web: the page's engine (build-web/playground.wasm,
// in headless Chromium) against the native command on one thread, time per
// training step on `make run`'s model (copy, 2 layers, 4 heads, d_model 64,
// batch 32, SGD), with Dropout 0 and 0.1 (dropout on the attention weights
// and the residual branches: the mask's draws and their products are the
// step's extra work).  The page and the native fast build: the best of 3
// runs of 50 steps after 5 warm-up steps, the two dropouts alternating run
// by run (so a change in the machine's load falls on both); the reference
// build (the page's bits) one run each.  Wall time, all measured here one
// after the other.  The page is
// timed in 3 browser launches as a learner's browser runs it, and in one
// with V8's optimizing compiler for all the WebAssembly from the start
// (--no-liftoff): a launch either reaches that speed or stays up to 1.5x
// slower over all its runs here (some functions, it seems, kept in V8's
// baseline tier: with --no-liftoff no launch was slow).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const { serve, launch } = require('./browser');

const WEBDIR = path.resolve(process.env.WEBDIR || 'build-web');
const NATIVE = path.resolve(process.env.ATTOGRAD || 'build/attograd');
const REF = path.resolve(process.env.ATTOGRAD_REF || 'build-ref/attograd');
const STEPS = 50, RUNS = 3, DROPOUTS = [0, 0.1];


// ms per step of `attograd train` on one thread, from its progress line,
// for each of DROPOUTS: the best of `runs`, the dropouts taking turns.
function native(bin, runs) {
  const best = DROPOUTS.map(() => Infinity);
  for (let r = 0; r < runs; r++)
    DROPOUTS.forEach((p, d) => {
      const out = execFileSync(bin, ['train', '--threads', '1', '--steps', String(STEPS + 5), '--log-every', '5',
                                     '--eval-every', '0', '--dropout', String(p)]).toString();
      // the lines after the warm-up's: steps 6..55 in 10 lines of 5
      const ms = [...out.matchAll(/^step +(\d+)\/\d+ .*?\| +([0-9.]+) ms\/step/gm)].filter((m) => Number(m[1]) > 5)
        .map((m) => Number(m[2]));
      best[d] = Math.min(best[d], ms.reduce((a, b) => a + b, 0) / ms.length);
    });
  return best;
}

async function page(flags) {
  const server = await serve(WEBDIR);
  const browser = await launch(flags);
  const p = await browser.newPage();
  await p.goto(`http://127.0.0.1:${server.address().port}/`);
  await p.addScriptTag({ url: 'playground.js' });
  const ms = await p.evaluate(async ([steps, runs, dropouts]) => {
    const M = await createPlayground();   // eslint-disable-line no-undef
    // (the settings as the page's fields hold them: text; the optimizer a number)
    const args = ['string', 'string', 'string', 'string', 'string', 'string', 'string', 'string', 'number', 'string',
                  'string', 'string', 'string'];
    const must = (what, rc) => {                  // a refused run is an error, not a time
      if (rc < 0) throw new Error(`${what}: ${M.UTF8ToString(M.ccall('pg_error', 'number', [], []))}`);
      return rc;
    };
    const buf = M._malloc(4 * (steps + 5));
    const best = dropouts.map(() => Infinity);
    for (let r = 0; r < runs; r++)
      dropouts.forEach((dropout, d) => {
        must('pg_new', M.ccall('pg_new', 'number', args, ['copy', '', '', '2', '4', '64', '0', String(dropout), 0, '0.1', '32', '400', '1']));
        must('pg_train', M.ccall('pg_train', 'number', ['number', 'number'], [5, buf]));
        const t0 = performance.now();
        must('pg_train', M.ccall('pg_train', 'number', ['number', 'number'], [steps, buf]));
        best[d] = Math.min(best[d], (performance.now() - t0) / steps);
      });
    return best;
  }, [STEPS, RUNS, DROPOUTS]);
  const version = browser.version();
  await browser.close();
  server.close();
  return { ms, version };
}

(async () => {
  const cpu = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/) || [])[1] || os.cpus()[0].model;
  const launches = [];
  for (let i = 0; i < 3; i++)
    launches.push(await page([]));
  const web = await page(['--js-flags=--no-liftoff']);
  const fast = native(NATIVE, RUNS);
  const ref = fs.existsSync(REF) ? native(REF, 1) : null;   // the reference is slow: once
  console.log(`make run's model (copy, 2 layers, 4 heads, d_model 64, batch 32, SGD), ms per step (${STEPS} steps after 5)`);
  console.log(`machine: ${cpu}, ${os.cpus().length} cores; load average ${os.loadavg()[0].toFixed(1)}`);
  DROPOUTS.forEach((p, d) => {
    const ms = web.ms[d];
    console.log(`dropout ${p}:`);
    console.log(`  page (Chromium ${web.version}, WebAssembly SIMD128, 1 thread), 3 launches: ` +
                launches.map((l) => `${l.ms[d].toFixed(2)} ms`).join(', '));
    console.log(`  page, all WebAssembly optimized from the start (--js-flags=--no-liftoff) ${ms.toFixed(2)} ms` +
                (d ? `   ${(ms / web.ms[0]).toFixed(2)}x dropout 0's` : ''));
    console.log(`  native ${path.relative(process.cwd(), NATIVE)} --threads 1          ${fast[d].toFixed(2)} ms` +
                `   page / native ${(ms / fast[d]).toFixed(2)}x`);
    if (ref)
      console.log(`  native ${path.relative(process.cwd(), REF)} --threads 1 (same bits) ${ref[d].toFixed(2)} ms` +
                  `   page / reference ${(ms / ref[d]).toFixed(2)}x`);
  });
})().catch((e) => { console.log('bench-web: ' + (e.stack || e)); process.exit(1); });
