// browser.js - what the playground's test and benchmark share: a plain
// static server for build-web/ (no special headers, as a project page is
// hosted) and headless Chromium (the system's, driven by playwright-core).
'use strict';
const fs = require('fs');
const path = require('path');
const http = require('http');
const { chromium } = require('playwright-core');

function serve(dir) {
  const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm' };
  const server = http.createServer((req, res) => {
    const name = path.join(dir, decodeURIComponent(new URL(req.url, 'http://x').pathname).replace(/\/$/, '/index.html'));
    if (!name.startsWith(dir) || !fs.existsSync(name)) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'Content-Type': types[path.extname(name)] || 'application/octet-stream' });
    res.end(fs.readFileSync(name));
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}

function launch(extra = []) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync', ...extra],
  });
}

module.exports = { serve, launch };
