#!/usr/bin/env node
// @openai/agents-realtime's WebRTC transport in headless Chromium against Duet.
//
//   node tests/sdk-js/realtime_webrtc.mjs --base-url http://127.0.0.1:PORT [--dump-events]
//
// The driver (Node): bundles browser/page.mjs with the SDK (esbuild, browser conditions),
// serves it from its own origin on 127.0.0.1, writes the microphone WAV (48 kHz mono s16:
// 1 s silence, 1.5 s synthetic voice, 6 s silence), starts Debian's Chromium through
// playwright-core (never a downloaded browser) with a fake capture device playing that WAV
// once, and runs the page's scenario (see browser/page.mjs):
//
//   a. `new OpenAIRealtimeWebRTC({ baseUrl: '<server>/v1/realtime/calls', useInsecureApiKey: true })`
//      in a RealtimeSession: cross-origin POST (CORS preflight), callId from Location,
//      session.updated within 5 s (connect() waits for it);
//   b. the spoken turn: server VAD, response.done completed, output_audio_buffer.started /
//      .stopped, transcript "echo of 1.5 s", the answer audible in the page (getStats energy);
//   c. a text turn (sendMessage) interrupted with session.interrupt() while it plays:
//      output_audio_buffer.cleared, response.done cancelled, silence after;
//   d. close.
// Exits 0 when every check passed, 1 otherwise, 2 when a dependency is missing.
//
// Environment: DUET_CHROMIUM (default /usr/bin/chromium).

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const CHROMIUM = process.env.DUET_CHROMIUM || '/usr/bin/chromium';
const OVERALL_TIMEOUT_MS = 90_000;
const SCENARIO_TIMEOUT_MS = 60_000;

let esbuild;
let chromium;
try {
  esbuild = await import('esbuild');
  ({ chromium } = await import('playwright-core'));
  await import('@openai/agents-realtime');
} catch (e) {
  console.error(`error: ${e.message}\nthe JS test dependencies are needed: npm ci --prefix tests/sdk-js (./scripts/test does it)`);
  process.exit(2);
}
if (!existsSync(CHROMIUM)) {
  console.error(`error: no Chromium at ${CHROMIUM}: apt-get install chromium (.ci/run does it), or set DUET_CHROMIUM`);
  process.exit(2);
}
/** POST /v1/realtime/client_secrets with the server key, as an app's backend does. */
async function mintSecret(base, key) {
  const res = await fetch(`${base}/v1/realtime/client_secrets`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ expires_after: { anchor: 'created_at', seconds: 600 }, session: { type: 'realtime' } }),
  });
  const body = await res.json();
  if (res.status !== 200 || !String(body.value).startsWith('ek_')) throw new Error(`minting failed: ${res.status} ${JSON.stringify(body)}`);
  return body.value;
}

const version = (pkg) => JSON.parse(readFileSync(join(here, 'node_modules', pkg, 'package.json'))).version;

const { values: args } = parseArgs({
  options: {
    'base-url': { type: 'string' },
    'dump-events': { type: 'boolean', default: false },
    'clear-only': { type: 'boolean', default: false },
    'server-key': { type: 'string' },
  },
});
if (!args['base-url']) {
  console.error('usage: realtime_webrtc.mjs --base-url http://127.0.0.1:PORT');
  process.exit(2);
}
const base = args['base-url'].replace(/\/+$/, '').replace(/\/v1$/, '');

/** 48 kHz mono s16 WAV: 1 s silence, 1.5 s voice (8 harmonics of ~140 Hz), 6 s silence. */
function micWav() {
  const RATE = 48_000;
  const n = Math.round(8.5 * RATE);
  const pcm = Buffer.alloc(2 * n);
  let phase = 0;
  for (let i = RATE; i < Math.round(2.5 * RATE); i++) {
    const t = (i - RATE) / RATE;
    const f0 = 140 + 8 * Math.sin(2 * Math.PI * 5 * t);
    phase += (2 * Math.PI * f0) / RATE;
    const syllable = 0.75 + 0.25 * Math.sin(2 * Math.PI * 4 * t);
    let s = 0;
    for (let h = 1; h <= 8; h++) s += Math.sin(phase * h) / h;
    pcm.writeInt16LE(Math.round(Math.max(-1, Math.min(1, 0.12 * syllable * s)) * 32767), 2 * i);
  }
  const hdr = Buffer.alloc(44);
  hdr.write('RIFF', 0);
  hdr.writeUInt32LE(36 + pcm.length, 4);
  hdr.write('WAVE', 8);
  hdr.write('fmt ', 12);
  hdr.writeUInt32LE(16, 16);
  hdr.writeUInt16LE(1, 20); // PCM
  hdr.writeUInt16LE(1, 22); // mono
  hdr.writeUInt32LE(RATE, 24);
  hdr.writeUInt32LE(RATE * 2, 28);
  hdr.writeUInt16LE(2, 32);
  hdr.writeUInt16LE(16, 34);
  hdr.write('data', 36);
  hdr.writeUInt32LE(pcm.length, 40);
  return Buffer.concat([hdr, pcm]);
}

async function main() {
  const figures = {
    '@openai/agents-realtime': version('@openai/agents-realtime'),
    'playwright-core': version('playwright-core'),
    esbuild: version('esbuild'),
  };
  const tmp = mkdtempSync(join(tmpdir(), 'duet-agents-webrtc-'));
  let server;
  let context;
  try {
    // The SDK and the page, bundled for the browser.
    const t0 = performance.now();
    const built = await esbuild.build({
      entryPoints: [join(here, 'browser', 'page.mjs')],
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'chrome120',
      write: false,
      logLevel: 'warning',
    });
    const bundle = built.outputFiles[0].contents;
    figures.bundle = `${(bundle.length / 1024).toFixed(0)} KiB in ${Math.round(performance.now() - t0)} ms`;
    const html = '<!doctype html><meta charset="utf-8"><title>duet agents-realtime</title>'
      + '<script type="module" src="/page.js"></script>';
    server = createServer((req, res) => {
      if (req.url === '/' || req.url === '/index.html') {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
        res.end(html);
      } else if (req.url === '/page.js') {
        res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' });
        res.end(bundle);
      } else if (req.url === '/favicon.ico') {
        res.writeHead(204);
        res.end();
      } else {
        res.writeHead(404);
        res.end();
      }
    });
    await new Promise((r) => server.listen(0, '127.0.0.1', r));
    const pageUrl = `http://127.0.0.1:${server.address().port}/`;

    const wav = join(tmp, 'mic.wav');
    writeFileSync(wav, micWav());
    const userDataDir = join(tmp, 'profile');
    const flags = [
      '--headless=new',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--use-fake-ui-for-media-stream',
      '--use-fake-device-for-media-stream',
      `--use-file-for-fake-audio-capture=${wav}%noloop`,
      '--allow-loopback-in-peer-connection',
      '--autoplay-policy=no-user-gesture-required',
    ];
    // headless: false so that Playwright adds no --headless of its own; --headless=new is in flags.
    context = await chromium.launchPersistentContext(userDataDir, {
      executablePath: CHROMIUM,
      headless: false,
      args: flags,
      permissions: ['microphone'],
      timeout: 30_000,
    });
    figures.chromium = context.browser()?.version() ?? (await (async () => {
      const p = context.pages()[0] ?? (await context.newPage());
      return p.evaluate(() => navigator.userAgent.match(/Chrome\/([\d.]+)/)?.[1]);
    })());
    const page = context.pages()[0] ?? (await context.newPage());
    page.on('console', (m) => console.log(`[page] ${m.text()}`));
    page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
    page.on('requestfailed', (r) => console.log(`[request failed] ${r.method()} ${r.url()}: ${r.failure()?.errorText}`));
    await page.goto(pageUrl);
    await page.waitForFunction(() => window.duetReady === true, null, { timeout: 10_000 });
    // --server-key: act as the app's backend, which mints an ephemeral client secret; the
    // page then uses the ek_ key as its API key, without useInsecureApiKey.
    const clientSecret = args['server-key'] ? await mintSecret(base, args['server-key']) : null;
    figures.client_secret = clientSecret ? 'ek_ (minted by the backend)' : 'none (useInsecureApiKey)';
    const result = await Promise.race([
      page.evaluate(([b, o]) => window.duetRun(b, o), [base, { clearOnly: args['clear-only'], clientSecret }]),
      new Promise((_, rej) => setTimeout(() => rej(new Error(`the page scenario did not finish within ${SCENARIO_TIMEOUT_MS} ms`)), SCENARIO_TIMEOUT_MS)),
    ]);
    return { ...result, figures: { ...figures, ...result.figures } };
  } finally {
    await context?.close().catch(() => {});
    server?.close();
    rmSync(tmp, { recursive: true, force: true });
  }
}

const tStart = performance.now();
let result;
try {
  result = await Promise.race([
    main(),
    new Promise((_, rej) => setTimeout(() => rej(new Error(`did not finish within ${OVERALL_TIMEOUT_MS} ms`)), OVERALL_TIMEOUT_MS)),
  ]);
} catch (e) {
  result = { passed: [], failed: [`driver: ${e?.stack ?? e}`], figures: {}, events: [] };
}
result.figures.total_s = ((performance.now() - tStart) / 1000).toFixed(1);
console.log('== summary');
for (const [k, v] of Object.entries(result.figures)) console.log(`  ${k}: ${v}`);
console.log(`  checks passed: ${result.passed.length}, failed: ${result.failed.length}`);
if (result.failed.length || args['dump-events']) {
  console.log('== events (ms since connect, type, fields)');
  for (const line of result.events) console.log(line);
}
for (const f of result.failed) console.log(`FAIL: ${f}`);
process.exit(result.failed.length ? 1 : 0);
