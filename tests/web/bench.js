// bench.js - make bench-web: the page's engine (build-web/playground.wasm,
// in headless Chromium) against the native command on one thread, time per
// training step on `make run`'s model (copy, 2 layers, 4 heads, d_model 64,
// batch 32, SGD).  The page and the native fast build: the best of 3 runs
// of 50 steps after 5 warm-up steps; the reference build (the page's bits)
// one run.  Wall time, all measured here one after the other.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const http = require('http');
const { execFileSync } = require('child_process');
const { chromium } = require('playwright-core');

const WEBDIR = path.resolve(process.env.WEBDIR || 'build-web');
const NATIVE = path.resolve(process.env.ATTOGRAD || 'build/attograd');
const REF = path.resolve(process.env.ATTOGRAD_REF || 'build-ref/attograd');
const STEPS = 50, RUNS = 3;

function serve() {
  const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm' };
  const server = http.createServer((req, res) => {
    const name = path.join(WEBDIR, new URL(req.url, 'http://x').pathname.replace(/\/$/, '/index.html'));
    if (!name.startsWith(WEBDIR) || !fs.existsSync(name)) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'Content-Type': types[path.extname(name)] || 'application/octet-stream' });
    res.end(fs.readFileSync(name));
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}

// ms per step of `attograd train` on one thread, from its progress line.
function native(bin, runs) {
  let best = Infinity;
  for (let r = 0; r < runs; r++) {
    const out = execFileSync(bin, ['train', '--threads', '1', '--steps', String(STEPS + 5), '--log-every', '5',
                                   '--eval-every', '0']).toString();
    // the lines after the warm-up's: steps 6..55 in 10 lines of 5
    const ms = [...out.matchAll(/^step +(\d+)\/\d+ .*?\| +([0-9.]+) ms\/step/gm)].filter((m) => Number(m[1]) > 5)
      .map((m) => Number(m[2]));
    best = Math.min(best, ms.reduce((a, b) => a + b, 0) / ms.length);
  }
  return best;
}

async function page() {
  const server = await serve();
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const p = await browser.newPage();
  await p.goto(`http://127.0.0.1:${server.address().port}/`);
  await p.addScriptTag({ url: 'playground.js' });
  const ms = await p.evaluate(async ([steps, runs]) => {
    const M = await createPlayground();   // eslint-disable-line no-undef
    const args = ['string', 'string', 'string', 'number', 'number', 'number', 'number', 'number', 'number', 'number',
                  'number', 'number', 'number'];
    const buf = M._malloc(4 * (steps + 5));
    let best = Infinity;
    for (let r = 0; r < runs; r++) {
      M.ccall('pg_new', 'number', args, ['copy', '', '', 2, 4, 64, 0, 0, 0, 0.1, 32, 400, 1]);
      M.ccall('pg_train', 'number', ['number', 'number'], [5, buf]);
      const t0 = performance.now();
      M.ccall('pg_train', 'number', ['number', 'number'], [steps, buf]);
      best = Math.min(best, (performance.now() - t0) / steps);
    }
    return best;
  }, [STEPS, RUNS]);
  const version = browser.version();
  await browser.close();
  server.close();
  return { ms, version };
}

(async () => {
  const cpu = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/model name\s*:\s*(.*)/) || [])[1] || os.cpus()[0].model;
  const web = await page();
  const fast = native(NATIVE, RUNS), ref = fs.existsSync(REF) ? native(REF, 1) : NaN;   // the reference is slow: once
  console.log(`make run's model (copy, 2 layers, 4 heads, d_model 64, batch 32, SGD), ms per step (${STEPS} steps after 5)`);
  console.log(`machine: ${cpu}, ${os.cpus().length} cores; load average ${os.loadavg()[0].toFixed(1)}`);
  console.log(`  page (Chromium ${web.version}, WebAssembly SIMD128, 1 thread) ${web.ms.toFixed(2)} ms`);
  console.log(`  native ${path.relative(process.cwd(), NATIVE)} --threads 1          ${fast.toFixed(2)} ms` +
              `   page / native ${(web.ms / fast).toFixed(2)}x`);
  if (Number.isFinite(ref))
    console.log(`  native ${path.relative(process.cwd(), REF)} --threads 1 (same bits) ${ref.toFixed(2)} ms` +
                `   page / reference ${(web.ms / ref).toFixed(2)}x`);
})().catch((e) => { console.log('bench-web: ' + (e.stack || e)); process.exit(1); });
