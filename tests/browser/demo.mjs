#!/usr/bin/env node
// Real-browser test of the Duet demo page: Debian's chromium, driven by playwright-core, with a
// fake microphone that plays a WAV file this script writes (2 s silence, 1.5 s of synthetic
// voiced audio, then 7 s of silence; `%noloop`: after its end the capture goes on silent,
// where it would otherwise loop and speak again over the later steps).
//
//   node tests/browser/demo.mjs --url http://127.0.0.1:8080/ [--chromium /usr/bin/chromium]
//        [--artifacts tests/artifacts] [--timeout 60] [--no-websocket] [--scenario echo|moshi]
//
// Scenario (WebRTC): Connect → the server VAD hears the utterance → the echo answer plays
// (speech_started/stopped, response.done, output_audio_buffer.started/stopped, audio energy
// on the remote track, transcript "echo of …", per-turn latency) → screenshot → a typed
// message → Interrupt while its answer plays (response.cancel + output_audio_buffer.clear →
// response.done cancelled, output_audio_buffer.cleared) → Disconnect (hangup).
// Then the same utterance over the WebSocket fallback (AudioWorklet capture, 24 kHz PCM16
// appends, Web Audio playback of response.output_audio.delta).
//
// `--scenario moshi` (a server on `--model moshi` with `duet moshi-tiny` weights): over WebRTC
// the full-duplex model speaks on its own (response.speak; the page shows "speaking", the
// transcript and the audio), the user's speech barges in (the model's response ends
// cancelled), and after the user stops the page says "listening", not "thinking": a duplex
// model does not owe an answer.
//
// Exits 0 on success; otherwise prints what failed, the page's event types and console, saves
// tests/artifacts/demo-failure.png and exits 1. Never downloads a browser.

import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

process.env.PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD = '1';
const here = dirname(fileURLToPath(import.meta.url));

// ---------------------------------------------------------------------------------------------
// Arguments.

function parseArgs(argv) {
  const opts = {
    url: 'http://127.0.0.1:8080/',
    chromium: process.env.CHROMIUM || '/usr/bin/chromium',
    artifacts: resolve(here, '..', 'artifacts'),
    timeout: 60,
    websocket: true,
    scenario: 'echo',
  };
  for (let i = 2; i < argv.length; i++) {
    const a = argv[i];
    const val = () => {
      if (i + 1 >= argv.length) fail(`missing value after ${a}`);
      return argv[++i];
    };
    if (a === '--url') opts.url = val();
    else if (a === '--chromium') opts.chromium = val();
    else if (a === '--artifacts') opts.artifacts = resolve(val());
    else if (a === '--timeout') opts.timeout = Number(val());
    else if (a === '--no-websocket') opts.websocket = false;
    else if (a === '--scenario') opts.scenario = val();
    else if (a === '--expect-demo-secret') opts.demoSecret = true;
    else if (a === '--mic-wav') opts.micWav = val();
    else if (a === '--expect-words') opts.words = val().split(/\s+/).filter(Boolean);
    else if (a === '--semantic') opts.semantic = val();
    else if (a === '--chromium-arg') (opts.chromiumArgs ||= []).push(val());
    else if (a === '--expect-secure') opts.expectSecure = true;
    else if (a === '-h' || a === '--help') {
      console.log('usage: node demo.mjs --url http://127.0.0.1:PORT/ [--chromium PATH] [--artifacts DIR] [--timeout SECS] [--no-websocket] [--scenario echo|moshi|speech|assistant] [--mic-wav FILE --expect-words "w1 w2"] [--semantic low|medium|high|auto] [--chromium-arg ARG]… [--expect-secure]');
      process.exit(0);
    } else fail(`unknown argument ${a}`);
  }
  if (!['echo', 'moshi', 'speech', 'assistant'].includes(opts.scenario)) fail(`--scenario must be echo, moshi, speech or assistant, not ${opts.scenario}`);
  if (opts.scenario === 'speech' && (!opts.micWav || !opts.words)) fail('--scenario speech needs --mic-wav FILE and --expect-words');
  return opts;
}

function fail(msg) {
  console.error(`demo.mjs: ${msg}`);
  process.exit(2);
}

// ---------------------------------------------------------------------------------------------
// The fake microphone: 48 kHz mono 16-bit WAV.

const SR = 48000;
// The fake capture starts with getUserMedia, before the call is up: the lead silence covers
// the connection time (about 0.5–1 s here) so the server hears the whole utterance.
const LEAD_SILENCE_S = 2.0;
const SPEECH_S = 1.5;
const TAIL_SILENCE_S = 7.0;

/** The same voice as tests/common `voiced()`: 8 harmonics of ~140 Hz with vibrato, 4 Hz AM. */
function voiced(secs) {
  const n = Math.round(secs * SR);
  const out = new Float32Array(n);
  let phase = 0;
  for (let i = 0; i < n; i++) {
    const t = i / SR;
    const f0 = 140 + 8 * Math.sin(2 * Math.PI * 5 * t);
    phase += (2 * Math.PI * f0) / SR;
    const syllable = 0.75 + 0.25 * Math.sin(2 * Math.PI * 4 * t);
    let s = 0;
    for (let h = 1; h <= 8; h++) s += Math.sin(phase * h) / h;
    // 10 ms fade in/out so the onset is not a click.
    const fade = Math.min(1, i / (0.01 * SR), (n - 1 - i) / (0.01 * SR));
    out[i] = 0.12 * syllable * s * fade;
  }
  return out;
}

function wav(samples) {
  const data = samples.length * 2;
  const buf = Buffer.alloc(44 + data);
  buf.write('RIFF', 0, 'ascii');
  buf.writeUInt32LE(36 + data, 4);
  buf.write('WAVE', 8, 'ascii');
  buf.write('fmt ', 12, 'ascii');
  buf.writeUInt32LE(16, 16);
  buf.writeUInt16LE(1, 20); // PCM
  buf.writeUInt16LE(1, 22); // mono
  buf.writeUInt32LE(SR, 24);
  buf.writeUInt32LE(SR * 2, 28);
  buf.writeUInt16LE(2, 32);
  buf.writeUInt16LE(16, 34);
  buf.write('data', 36, 'ascii');
  buf.writeUInt32LE(data, 40);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    buf.writeInt16LE(Math.round(s * 32767), 44 + i * 2);
  }
  return buf;
}

function micWav() {
  const lead = new Float32Array(Math.round(LEAD_SILENCE_S * SR));
  const speech = voiced(SPEECH_S);
  const tail = new Float32Array(Math.round(TAIL_SILENCE_S * SR));
  const all = new Float32Array(lead.length + speech.length + tail.length);
  all.set(lead, 0);
  all.set(speech, lead.length);
  all.set(tail, lead.length + speech.length);
  return wav(all);
}

// ---------------------------------------------------------------------------------------------
// Checks.

class Check extends Error {}

const results = [];
function ok(cond, what, detail) {
  if (!cond) throw new Check(`${what}${detail !== undefined ? `: ${typeof detail === 'string' ? detail : JSON.stringify(detail)}` : ''}`);
  results.push(what);
  console.log(`  ok  ${what}`);
}

const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
function step(name) {
  console.log(`[${elapsed()}] ${name}`);
}

/** Waits until `fn(arg)` (run in the page) is truthy; returns its value. */
async function until(page, what, fn, arg, timeoutMs) {
  try {
    const handle = await page.waitForFunction(fn, arg, { timeout: timeoutMs, polling: 50 });
    return await handle.jsonValue();
  } catch (e) {
    if (e && e.name === 'TimeoutError') throw new Check(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    throw e;
  }
}

/** The first logged event of `type` (direction `dir`) at or after `since` ms. */
const findEvent = ({ type, dir = 'in', since = 0, where = null }) => {
  return window.duet.log.find((e) => e.dir === dir && e.type === type && e.t >= since
    && (!where || Object.entries(where).every(([k, v]) => {
      const got = k.split('.').reduce((o, p) => (o == null ? o : o[p]), e.event);
      return got === v;
    }))) || null;
};

async function waitEvent(page, type, opts = {}, timeoutMs = 15000) {
  const { dir = 'in', since = 0, where = null } = opts;
  return until(page, `${dir === 'in' ? '←' : '→'} ${type}${where ? ` ${JSON.stringify(where)}` : ''}`,
    findEvent, { type, dir, since, where }, timeoutMs);
}

function maxRmsBetween(history, from, to) {
  let m = 0;
  for (const [t, r] of history) if (t >= from && t <= to) m = Math.max(m, r);
  return m;
}


// ---------------------------------------------------------------------------------------------
// Scenarios.

const TEXT_MESSAGE = 'please read this rather long sentence back to me slowly one word at a time so that I can interrupt you halfway through it';

async function webrtcScenario(page, opts, requests) {
  step('WebRTC: open the page and connect');
  await page.goto(opts.url, { waitUntil: 'load', timeout: 10000 });
  await until(page, 'window.duet', () => !!window.duet, null, 5000);
  if (opts.expectSecure) {
    // A page on a name that is not the machine's own needs HTTPS for the microphone.
    const ctx = await page.evaluate(() => ({ secure: window.isSecureContext, protocol: location.protocol, host: location.hostname, media: !!(navigator.mediaDevices && navigator.mediaDevices.getUserMedia) }));
    ok(ctx.secure && ctx.protocol === 'https:' && ctx.media, `a secure context on ${ctx.host} with getUserMedia`, ctx);
  }
  ok(await page.locator('[data-testid="state"]').isVisible(), 'state indicator is visible');
  ok(await page.isChecked('[data-testid="aec"]'), 'echo cancellation is on by default');
  await page.click('[data-testid="connect"]');
  await until(page, 'state "connected"', () => window.duet.state === 'connected' || (window.duet.state === 'failed' && 'failed'), null, 10000)
    .then((v) => ok(v === true, 'state is connected', v));
  await waitEvent(page, 'session.created', {}, 5000);
  ok(true, 'session.created received over oai-events');
  const callId = await page.evaluate(() => window.duet.callId);
  ok(typeof callId === 'string' && callId.startsWith('rtc_'), 'call id read from Location', callId);
  if (opts.demoSecret) {
    ok(await page.evaluate(() => window.duet.demoSecret) === true, 'the page connected with a client secret the server minted for it');
    ok(requests.some((r) => r === 'POST 200 /demo/client_secret'), 'POST /demo/client_secret answered 200', requests.filter((r) => r.includes('demo')));
  }

  step('WebRTC: the fake mic speaks; wait for the echo answer');
  const speechStarted = await waitEvent(page, 'input_audio_buffer.speech_started', {}, 10000);
  const speechStopped = await waitEvent(page, 'input_audio_buffer.speech_stopped', {}, 8000);
  const heardSecs = (speechStopped.event.audio_end_ms - speechStarted.event.audio_start_ms) / 1000;
  ok(heardSecs > 1.0 && heardSecs < 3.0, `server VAD heard ~1.5 s of speech (${heardSecs.toFixed(2)} s)`);
  const outStarted = await waitEvent(page, 'output_audio_buffer.started', { since: speechStopped.t }, 8000);
  const done = await waitEvent(page, 'response.done', { since: speechStopped.t }, 10000);
  ok(done.event.response.status === 'completed', 'response.done completed', done.event.response.status);
  const outStopped = await waitEvent(page, 'output_audio_buffer.stopped', { since: outStarted.t }, 10000);
  ok(outStopped.event.response_id === outStarted.event.response_id, 'output_audio_buffer.started/stopped for the same response');
  // Let the meter catch the tail, then read the levels.
  await page.waitForTimeout(300);
  const stats = await page.evaluate(() => window.duet.stats());
  ok(stats.input.maxRms > 0.01, `mic energy reached the page (max input RMS ${stats.input.maxRms.toFixed(4)})`);
  const answerRms = maxRmsBetween(stats.output.history, outStarted.t, outStopped.t + 300);
  ok(answerRms > 0.01, `received audio energy during the answer (max output RMS ${answerRms.toFixed(4)})`);
  const beforeRms = maxRmsBetween(stats.output.history, 0, speechStopped.t);
  ok(beforeRms < answerRms / 4, `output is quiet before the answer (max RMS ${beforeRms.toFixed(4)})`);

  const transcript = await page.locator('[data-testid="transcript"]').innerText();
  ok(/echo of \d/.test(transcript), 'transcript shows "echo of …"', transcript.slice(0, 200));
  const tr = await page.evaluate(() => window.duet.transcripts);
  const user = tr.find((t) => t.role === 'user');
  ok(user && /🎤 \d+\.\d s of speech/.test(user.text), 'user bubble shows the speech placeholder', user);
  const assistant = tr.find((t) => t.role === 'assistant');
  ok(assistant && assistant.text.startsWith('echo of'), 'assistant transcript recorded', assistant);

  for (const type of ['session.created', 'input_audio_buffer.speech_started', 'input_audio_buffer.speech_stopped',
    'response.created', 'output_audio_buffer.started', 'response.done', 'output_audio_buffer.stopped']) {
    ok(await page.locator(`[data-testid="log"] li[data-type="${type}"]`).count() > 0, `event log row ${type}`);
  }
  const deltaRows = await page.locator('[data-testid="log"] li[data-type="response.output_audio_transcript.delta"]').count();
  const deltaEvents = await page.evaluate(() => window.duet.log.filter((e) => e.type === 'response.output_audio_transcript.delta').length);
  ok(deltaEvents === 0 || deltaRows < deltaEvents || deltaEvents === 1,
    `transcript deltas folded (${deltaEvents} events in ${deltaRows} row${deltaRows === 1 ? '' : 's'})`);

  const turns = await page.evaluate(() => window.duet.turns);
  const voiceTurn = turns.find((t) => t.kind === 'voice');
  ok(voiceTurn && voiceTurn.latencyMs > 0 && voiceTurn.latencyMs < 3000,
    `per-turn latency measured (speech end → first audio ${voiceTurn && voiceTurn.latencyMs} ms)`);
  const turnsText = await page.locator('[data-testid="turns"]').innerText();
  ok(/\d+ ms|\d+\.\d+ s/.test(turnsText), 'per-turn latency shown on the page', turnsText);

  mkdirSync(opts.artifacts, { recursive: true });
  const shot = join(opts.artifacts, 'demo.png');
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`  screenshot: ${shot}`);

  step('WebRTC: type a message, interrupt its spoken answer');
  await page.fill('[data-testid="text"]', TEXT_MESSAGE);
  await page.click('[data-testid="send"]');
  const item = await waitEvent(page, 'conversation.item.added', { since: 0, where: { 'item.role': 'user', 'item.content.0.type': 'input_text' } }, 5000);
  ok(item.event.item.content[0].text === TEXT_MESSAGE, 'conversation.item.added echoes the typed text');
  const created = await waitEvent(page, 'response.created', { since: item.t }, 5000);
  const textStarted = await waitEvent(page, 'output_audio_buffer.started', { since: item.t, where: { response_id: created.event.response.id } }, 5000);
  const audibleAt = await until(page, 'the typed answer to be audible on the remote track',
    (since) => (window.duet.stats().output.history.find(([t, r]) => t >= since && r > 0.01) || [null])[0],
    textStarted.t, 5000);
  ok(true, `the typed answer is audible ${Math.round(audibleAt - textStarted.t)} ms after output_audio_buffer.started`);
  await page.waitForTimeout(400); // let it speak a few words
  ok(await page.evaluate(() => window.duet.activeResponse !== null || window.duet.activity === 'speaking'),
    'the answer is still playing when Interrupt is clicked');
  await page.click('[data-testid="interrupt"]');
  const cleared = await waitEvent(page, 'output_audio_buffer.cleared', { since: textStarted.t }, 5000);
  const cancelled = await waitEvent(page, 'response.done', { since: textStarted.t, where: { 'response.id': created.event.response.id } }, 5000);
  ok(cancelled.event.response.status === 'cancelled', 'response.done cancelled', cancelled.event.response);
  ok(cleared.event.response_id === created.event.response.id, 'output_audio_buffer.cleared for the interrupted response');
  const sent = await page.evaluate(() => window.duet.log.filter((e) => e.dir === 'out').map((e) => e.type));
  ok(sent.includes('response.cancel') && sent.includes('output_audio_buffer.clear'),
    'Interrupt sent response.cancel + output_audio_buffer.clear', sent);
  // The remote audio must go quiet soon after output_audio_buffer.cleared (the server purges
  // its queue; what is left is the browser's jitter buffer) and stay quiet.
  await page.waitForTimeout(1500);
  const after = await page.evaluate(() => window.duet.stats().output.history);
  const tail = after.filter(([t]) => t >= cleared.t - 200);
  const lastLoud = tail.filter(([, r]) => r >= 0.01).reduce((m, [t]) => Math.max(m, t), cleared.t);
  const stopMs = Math.round(lastLoud - cleared.t);
  console.log(`  output RMS around cleared (t-cleared ms:rms): ${tail.slice(0, 30).map(([t, r]) => `${Math.round(t - cleared.t)}:${r.toFixed(3)}`).join(' ')}`);
  ok(stopMs < 1000, `audio stops after the interrupt (last audible ${stopMs} ms after output_audio_buffer.cleared)`);
  const badge = await page.locator(`[data-testid="transcript"] .msg.assistant.cancelled`).count();
  ok(badge > 0, 'the interrupted answer is marked in the transcript');
  await page.screenshot({ path: join(opts.artifacts, 'demo-interrupted.png'), fullPage: true });

  step('WebRTC: ICE restart on the same call (restartIce + PATCH), then a turn on the new path');
  await page.evaluate(() => window.duet.restartIce());
  ok(requests.some((r) => r === `PATCH 200 /v1/realtime/calls/${callId}`), `PATCH /v1/realtime/calls/${callId} answered 200`,
    requests.filter((r) => r.includes('/calls')));
  await until(page, 'the peer connection connected again', () => window.duet.iceRestarts.count === 1
    && window.duet.iceRestarts.state === 'connected', null, 10000);
  ok(await page.evaluate(() => window.duet.callId) === callId, 'the same call after the restart');
  const restartAt = await page.evaluate(() => window.duet.log.length ? window.duet.log[window.duet.log.length - 1].t : 0);
  await page.fill('[data-testid="text"]', 'after the restart');
  await page.click('[data-testid="send"]');
  const again = await waitEvent(page, 'output_audio_buffer.started', { since: restartAt }, 8000);
  const againDone = await waitEvent(page, 'response.done', { since: restartAt, where: { 'response.id': again.event.response_id } }, 10000);
  ok(againDone.event.response.status === 'completed', 'a turn after the ICE restart completes', againDone.event.response.status);
  await waitEvent(page, 'output_audio_buffer.stopped', { since: again.t }, 10000);
  const restartStats = await page.evaluate(() => window.duet.stats());
  const restartRms = maxRmsBetween(restartStats.output.history, again.t, again.t + 3000);
  ok(restartRms > 0.01, `audio plays on the new path (max output RMS ${restartRms.toFixed(4)})`);
  const createdCount = await page.evaluate(() => window.duet.log.filter((e) => e.type === 'session.created').length);
  ok(createdCount === 1, 'still one session (no new session.created)', createdCount);

  step('WebRTC: disconnect');
  await page.click('[data-testid="connect"]');
  await until(page, 'state "idle"', () => window.duet.state === 'idle', null, 5000);
  for (let i = 0; i < 20 && !requests.some((r) => r.includes(`/v1/realtime/calls/${callId}/hangup`)); i++) {
    await page.waitForTimeout(50);
  }
  ok(requests.some((r) => r === `POST 200 /v1/realtime/calls/${callId}/hangup`), `POST /v1/realtime/calls/${callId}/hangup answered 200`,
    requests.filter((r) => r.includes('/calls')));
  return { latencyMs: voiceTurn.latencyMs };
}

/** A server with the real speech models: the fake mic says a sentence (--mic-wav); the
 *  page shows the user's own words as they are transcribed, the echo model answers them, and
 *  the Speech meter showed Silero's probability. */
async function speechScenario(page, opts) {
  step('speech: open the page and connect over WebRTC');
  await page.goto(opts.url, { waitUntil: 'load', timeout: 10000 });
  await until(page, 'window.duet', () => !!window.duet, null, 5000);
  if (opts.semantic) {
    // The visitor picks the turn model and its eagerness before connecting.
    await page.selectOption('[data-testid="turn-detection"]', 'semantic_vad');
    await page.selectOption('[data-testid="eagerness"]', opts.semantic);
  }
  await page.click('[data-testid="connect"]');
  await until(page, 'state "connected"', () => window.duet.state === 'connected' || (window.duet.state === 'failed' && 'failed'), null, 10000)
    .then((v) => ok(v === true, 'state is connected', v));
  const update = await waitEvent(page, 'session.update', { dir: 'out' }, 5000);
  ok(update.event.session.audio.input.transcription != null, 'the page asks for input transcription', update.event.session);
  const updated = await waitEvent(page, 'session.updated', {}, 5000);
  if (opts.semantic) {
    const td = update.event.session.audio.input.turn_detection;
    ok(td.type === 'semantic_vad' && td.eagerness === opts.semantic, `the page asks for semantic_vad ${opts.semantic}`, td);
    const eff = updated.event.session.audio.input.turn_detection;
    ok(eff.type === 'semantic_vad' && eff.eagerness === opts.semantic && eff.interruption.mode === 'adaptive',
      'the server runs it, with adaptive interruption', eff);
    const mode = await page.locator('[data-testid="turn-mode"]').innerText();
    ok(mode.includes(`semantic_vad (${opts.semantic})`), 'the page names the turn detection in use', mode);
  }

  step('speech: the fake mic says a sentence');
  const stopped = await waitEvent(page, 'input_audio_buffer.speech_stopped', {}, 15000);
  if (opts.semantic) {
    // The turn model judged the pause before the turn ended, and the page shows it.
    const scored = await page.evaluate(() => window.duet.log.filter((e) => e.type === 'turn.scored'));
    ok(scored.length >= 1 && scored.some((e) => e.t <= stopped.t), 'turn.scored came before speech_stopped', scored.map((e) => e.event));
    const last = scored.filter((e) => e.t <= stopped.t).pop().event;
    ok(last.item_id === stopped.event.item_id, 'for the same item', [last.item_id, stopped.event.item_id]);
    ok(typeof last.probability === 'number' && ['end', 'wait', 'fallback'].includes(last.decision), 'with a probability and a decision', last);
    const shown = await page.locator('[data-testid="decisions"]').innerText();
    ok(shown.includes('p(done)') && shown.includes('pause at'), 'the Turn detector panel shows the score', shown);
  }
  const completed = await waitEvent(page, 'conversation.item.input_audio_transcription.completed', { since: stopped.t }, 15000);
  const heard = completed.event.transcript;
  for (const w of opts.words) ok(heard.toLowerCase().includes(w), `the transcript has "${w}"`, heard);
  const user = await until(page, 'the user bubble with the words',
    (id) => (window.duet.transcripts.find((t) => t.role === 'user' && t.itemId === id) || window.duet.transcripts.find((t) => t.role === 'user')) || null,
    completed.event.item_id, 5000);
  ok(user.text.includes(heard.trim()), 'the conversation shows the user\'s words', user);
  const done = await waitEvent(page, 'response.done', { since: stopped.t }, 15000);
  const said = done.event.response.output[0].content[0].transcript;
  ok(said === `You said: ${heard.trim()}`, 'the echo model answers the words', said);
  const meters = await page.evaluate(() => window.duet.log.filter((e) => e.type === 'input_audio_buffer.speech_probability').map((e) => e.event));
  ok(meters.length > 10 && meters.every((m) => m.detector === 'silero'), `Silero speech probability events (${meters.length})`);
  ok(Math.max(...meters.map((m) => m.probability)) > 0.8, 'the probability rose with the speech', Math.max(...meters.map((m) => m.probability)));
  const meterWidth = await page.evaluate(() => document.querySelector('[data-testid="meter-vad"] span').style.width);
  ok(/%$/.test(meterWidth), `the Speech meter is drawn (${meterWidth})`);
  ok((await page.locator('[data-testid="vad-detector"]').innerText()).includes('silero'), 'the meter names its detector');
  const transcript = await page.locator('[data-testid="transcript"]').innerText();
  ok(transcript.includes(heard.trim()), 'the words are on the page', transcript.slice(0, 300));
  mkdirSync(opts.artifacts, { recursive: true });
  const shot = join(opts.artifacts, 'demo-speech.png');
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`  screenshot: ${shot}`);
  return { heard, latencyMs: Math.round(completed.t - stopped.t) };
}

async function assistantScenario(page, opts) {
  step('assistant: instructions, connect, a typed question the cascade answers with a tool');
  await page.goto(opts.url, { waitUntil: 'load', timeout: 10000 });
  await until(page, 'window.duet', () => !!window.duet, null, 5000);
  await page.fill('[data-testid="instructions"]', 'You tell the time.');
  await page.click('[data-testid="connect"]');
  await until(page, 'state "connected"', () => window.duet.state === 'connected' || (window.duet.state === 'failed' && 'failed'), null, 10000)
    .then((v) => ok(v === true, 'state is connected', v));
  const update = await waitEvent(page, 'session.update', { dir: 'out' }, 5000);
  const s = update.event.session;
  ok(s.instructions === 'You tell the time.', 'the page sends the instructions', s.instructions);
  ok((s.tools || []).map((t) => t.name).join() === 'get_time', 'the page offers its get_time tool to the cascade', s.tools);
  const updated = await waitEvent(page, 'session.updated', {}, 5000);
  ok((updated.event.session.tools || []).length === 1, 'the session has the tool', updated.event.session.tools);

  await page.fill('[data-testid="text"]', 'What time is it?');
  await page.click('[data-testid="send"]');
  const call = await waitEvent(page, 'response.function_call_arguments.done', {}, 15000);
  ok(call.event.name === 'get_time', 'the model calls get_time', call.event);
  const output = await waitEvent(page, 'conversation.item.create', { dir: 'out', since: call.t, where: { 'item.type': 'function_call_output' } }, 5000);
  const result = JSON.parse(output.event.item.output);
  ok(output.event.item.call_id === call.event.call_id && typeof result.time === 'string' && typeof result.time_zone === 'string',
    "the page answers the call with the browser's time", result);
  await waitEvent(page, 'response.create', { dir: 'out', since: output.t }, 5000);
  const done = await waitEvent(page, 'response.done', { since: output.t, where: { 'response.status': 'completed' } }, 20000);
  const said = done.event.response.output[0].content[0].transcript;
  ok(said === "It is ten o'clock.", 'the assistant answers from the tool result', said);
  const transcript = await page.locator('[data-testid="transcript"]').innerText();
  ok(transcript.includes('get_time() →'), 'the conversation shows the tool call', transcript.slice(0, 400));
  ok(transcript.includes("It is ten o'clock."), "the conversation shows the assistant's words", transcript.slice(0, 400));
  mkdirSync(opts.artifacts, { recursive: true });
  const shot = join(opts.artifacts, 'demo-assistant.png');
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`  screenshot: ${shot}`);
  return { toolResult: result };
}

async function websocketScenario(page, opts) {
  step('WebSocket: open the page, pick the fallback, connect');
  await page.goto(opts.url, { waitUntil: 'load', timeout: 10000 });
  await until(page, 'window.duet', () => !!window.duet, null, 5000);
  await page.check('[data-testid="transport-websocket"]');
  await page.click('[data-testid="connect"]');
  await until(page, 'state "connected"', () => window.duet.state === 'connected' || (window.duet.state === 'failed' && 'failed'), null, 10000)
    .then((v) => ok(v === true, 'WebSocket: state is connected', v));
  await waitEvent(page, 'session.created', {}, 5000);
  ok((await page.evaluate(() => window.duet.transport)) === 'websocket', 'WebSocket: transport is websocket');

  const speechStopped = await waitEvent(page, 'input_audio_buffer.speech_stopped', {}, 12000);
  const appends = await page.evaluate(() => window.duet.log.filter((e) => e.dir === 'out' && e.type === 'input_audio_buffer.append').length);
  ok(appends > 20, `WebSocket: mic streamed as input_audio_buffer.append (${appends} so far)`);
  const firstDelta = await waitEvent(page, 'response.output_audio.delta', { since: speechStopped.t }, 8000);
  const done = await waitEvent(page, 'response.done', { since: speechStopped.t }, 10000);
  ok(done.event.response.status === 'completed', 'WebSocket: response.done completed', done.event.response.status);
  await until(page, 'WebSocket playback to finish', () => window.duet.activity !== 'speaking', null, 8000);
  const stats = await page.evaluate(() => window.duet.stats());
  const answerRms = maxRmsBetween(stats.output.history, firstDelta.t, done.t + 3000);
  ok(answerRms > 0.01, `WebSocket: the answer played through Web Audio (max output RMS ${answerRms.toFixed(4)})`);
  const turns = await page.evaluate(() => window.duet.turns);
  const voiceTurn = turns.find((t) => t.kind === 'voice');
  ok(voiceTurn && voiceTurn.latencyMs > 0 && voiceTurn.latencyMs < 3000,
    `WebSocket: per-turn latency measured (speech end → first delta ${voiceTurn && voiceTurn.latencyMs} ms)`);
  const transcript = await page.locator('[data-testid="transcript"]').innerText();
  ok(/echo of \d/.test(transcript), 'WebSocket: transcript shows "echo of …"');

  step('WebSocket: type a message, interrupt its answer (local flush + truncate)');
  await page.fill('[data-testid="text"]', TEXT_MESSAGE);
  await page.click('[data-testid="send"]');
  const created = await waitEvent(page, 'response.created', { since: done.t }, 5000);
  const textDelta = await waitEvent(page, 'response.output_audio.delta', { since: created.t }, 5000);
  await page.waitForTimeout(600);
  await page.click('[data-testid="interrupt"]');
  const truncate = await waitEvent(page, 'conversation.item.truncate', { dir: 'out', since: created.t }, 3000);
  const wall = truncate.t - textDelta.t;
  ok(truncate.event.audio_end_ms > 100 && truncate.event.audio_end_ms <= wall,
    `WebSocket: truncate sent with what was heard (${truncate.event.audio_end_ms} ms of ${Math.round(wall)} ms since the first delta)`);
  const truncated = await waitEvent(page, 'conversation.item.truncated', { since: truncate.t }, 5000);
  ok(truncated.event.audio_end_ms === truncate.event.audio_end_ms, 'WebSocket: conversation.item.truncated');
  const cancelled = await waitEvent(page, 'response.done', { since: created.t, where: { 'response.id': created.event.response.id } }, 5000);
  ok(['cancelled', 'completed'].includes(cancelled.event.response.status), `WebSocket: response.done ${cancelled.event.response.status}`);
  await page.click('[data-testid="connect"]');
  await until(page, 'state "idle"', () => window.duet.state === 'idle', null, 5000);
  return { latencyMs: voiceTurn.latencyMs };
}

async function moshiScenario(page, opts, requests) {
  step('moshi (WebRTC): open the page and connect');
  await page.goto(opts.url, { waitUntil: 'load', timeout: 10000 });
  await until(page, 'window.duet', () => !!window.duet, null, 5000);
  // The user wears headphones: with the browser's echo canceller on, Chromium suppresses the
  // (fake) microphone while the model's voice plays, and the user could not barge in.
  await page.uncheck('[data-testid="aec"]');
  await page.click('[data-testid="connect"]');
  await until(page, 'state "connected"', () => window.duet.state === 'connected' || (window.duet.state === 'failed' && 'failed'), null, 10000)
    .then((v) => ok(v === true, 'moshi: state is connected', v));
  const created = await waitEvent(page, 'session.created', {}, 5000);
  ok(created.event.session.model === 'moshi', 'moshi: session.created names the model', created.event.session.model);
  const callId = await page.evaluate(() => window.duet.callId);

  step('moshi: the model speaks on its own');
  const speak = await waitEvent(page, 'response.speak', {}, 10000);
  const rid = speak.event.response_id;
  await until(page, 'the page to show "speaking"', () => window.duet.activity === 'speaking', null, 3000);
  ok(await page.evaluate(() => window.duet.duplex === true), 'moshi: the page knows the model is full duplex');
  const activityText = await page.locator('[data-testid="activity"]').innerText();
  ok(/speaking/i.test(activityText), 'moshi: the activity line says the model is speaking', activityText);
  await waitEvent(page, 'response.output_audio_transcript.delta', { where: { response_id: rid } }, 5000);
  const said = await until(page, "the model's words in its transcript bubble",
    (r) => (window.duet.transcripts.find((t) => t.role === 'assistant' && t.text.trim().length > 0) || {}).text, rid, 5000);
  ok(said.length > 0, `moshi: the assistant bubble shows the model's text (${JSON.stringify(said.slice(0, 40))})`);
  const started = await waitEvent(page, 'output_audio_buffer.started', { where: { response_id: rid } }, 5000);
  const audibleAt = await until(page, "the model's speech to be audible on the remote track",
    (since) => (window.duet.stats().output.history.find(([t, r]) => t >= since && r > 0.01) || [null])[0],
    started.t, 5000);
  ok(audibleAt >= started.t, `moshi: the model's speech is audible ${Math.round(audibleAt - started.t)} ms after output_audio_buffer.started`);
  mkdirSync(opts.artifacts, { recursive: true });
  await page.screenshot({ path: join(opts.artifacts, 'demo-moshi.png'), fullPage: true });

  step('moshi: the user talks over it; then the page listens');
  const speechStarted = await waitEvent(page, 'input_audio_buffer.speech_started', {}, 10000);
  const done = await waitEvent(page, 'response.done', { since: started.t, where: { 'response.id': rid } }, 5000);
  ok(done.event.response.status === 'cancelled', 'moshi: barge-in ends the model response cancelled', done.event.response);
  ok(done.t >= speechStarted.t, 'moshi: the response ended after the user started speaking');
  const speechStopped = await waitEvent(page, 'input_audio_buffer.speech_stopped', { since: speechStarted.t }, 8000);
  const after = await page.evaluate((t) => {
    const later = window.duet.log.filter((e) => e.dir === 'in' && e.t > t).map((e) => e.type);
    return { activity: window.duet.activity, later };
  }, speechStopped.t);
  // Unless the model has already started a new response, the page is back to listening.
  ok(after.activity === 'listening' || after.later.includes('response.speak'),
    'moshi: after the user stops, the page says "listening", not "thinking"', after);
  const speaks = await page.evaluate(() => window.duet.log.filter((e) => e.type === 'response.speak').length);

  step('moshi: disconnect');
  await page.click('[data-testid="connect"]');
  await until(page, 'state "idle"', () => window.duet.state === 'idle', null, 5000);
  for (let i = 0; i < 20 && !requests.some((r) => r.includes(`/v1/realtime/calls/${callId}/hangup`)); i++) {
    await page.waitForTimeout(50);
  }
  ok(requests.some((r) => r === `POST 200 /v1/realtime/calls/${callId}/hangup`), `moshi: POST /v1/realtime/calls/${callId}/hangup answered 200`);
  return { speaks, speakMs: Math.round(speak.t - created.t) };
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const opts = parseArgs(process.argv);
  if (!existsSync(opts.chromium)) {
    console.error(`demo.mjs: no chromium at ${opts.chromium}: install it with \`apt-get install -y chromium\` (or run .ci/run), or pass --chromium PATH`);
    process.exit(3);
  }
  let playwright;
  try {
    playwright = await import('playwright-core');
  } catch (e) {
    console.error(`demo.mjs: playwright-core is not installed: run \`npm ci\` in ${here} (${e.message})`);
    process.exit(3);
  }
  const { chromium } = playwright.default || playwright;

  const tmp = mkdtempSync(join(tmpdir(), 'duet-browser-'));
  const wavPath = join(tmp, 'mic.wav');
  writeFileSync(wavPath, opts.micWav ? readFileSync(opts.micWav) : micWav());
  const profile = join(tmp, 'profile');
  mkdirSync(profile);

  const watchdog = setTimeout(() => {
    console.error(`demo.mjs: FAILED: the whole test ran past ${opts.timeout} s`);
    process.exit(1);
  }, opts.timeout * 1000);
  watchdog.unref();

  const args = [
    '--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--use-fake-ui-for-media-stream', '--use-fake-device-for-media-stream',
    `--use-file-for-fake-audio-capture=${wavPath}%noloop`,
    '--allow-loopback-in-peer-connection', '--autoplay-policy=no-user-gesture-required',
    ...(opts.chromiumArgs || []),
  ];
  step(`launching ${opts.chromium}`);
  let context;
  try {
    // headless: false here because --headless=new is passed explicitly (Playwright would add its own).
    context = await chromium.launchPersistentContext(profile, {
      executablePath: opts.chromium, headless: false, args,
      viewport: { width: 1440, height: 900 }, timeout: 20000,
    });
  } catch (e) {
    console.error(`demo.mjs: FAILED to launch chromium: ${e.message}`);
    rmSync(tmp, { recursive: true, force: true });
    process.exit(1);
  }
  const version = context.browser() ? context.browser().version() : '?';
  console.log(`  chromium ${version}, playwright-core ${(await import('playwright-core/package.json', { with: { type: 'json' } }).catch(() => ({ default: {} }))).default.version || '?'}`);

  const consoleLines = [];
  const requests = [];
  const watch = (page) => {
    page.on('console', (m) => consoleLines.push(`[${m.type()}] ${m.text()}`));
    page.on('pageerror', (e) => consoleLines.push(`[pageerror] ${e.message}`));
    page.on('response', (r) => {
      const u = new URL(r.url());
      requests.push(`${r.request().method()} ${r.status()} ${u.pathname}`);
    });
  };

  let page = context.pages()[0] || await context.newPage();
  watch(page);
  let code = 0;
  const summary = {};
  try {
    if (opts.scenario === 'moshi') {
      summary.moshi = await moshiScenario(page, opts, requests);
    } else if (opts.scenario === 'speech') {
      summary.speech = await speechScenario(page, opts);
    } else if (opts.scenario === 'assistant') {
      summary.assistant = await assistantScenario(page, opts);
    } else {
      summary.webrtc = await webrtcScenario(page, opts, requests);
    }
    if (opts.scenario === 'echo' && opts.websocket) {
      await page.close();
      page = await context.newPage();
      watch(page);
      summary.websocket = await websocketScenario(page, opts);
    }
    const pageErrors = consoleLines.filter((l) => l.startsWith('[pageerror]'));
    ok(pageErrors.length === 0, 'no uncaught page errors', pageErrors);
    if (summary.assistant) {
      console.log(`PASS: ${results.length} checks in ${elapsed()}; the page answered get_time with ${JSON.stringify(summary.assistant.toolResult)}`);
    } else if (summary.speech) {
      console.log(`PASS: ${results.length} checks in ${elapsed()}; heard ${JSON.stringify(summary.speech.heard)}, transcript ${summary.speech.latencyMs} ms after speech_stopped`);
    } else if (summary.moshi) {
      console.log(`PASS: ${results.length} checks in ${elapsed()}; the model spoke ${summary.moshi.speakMs} ms after session.created, ${summary.moshi.speaks} response.speak`);
    } else {
      console.log(`PASS: ${results.length} checks in ${elapsed()}; voice-turn latency WebRTC ${summary.webrtc.latencyMs} ms`
        + `${summary.websocket ? `, WebSocket ${summary.websocket.latencyMs} ms` : ''}`);
    }
  } catch (e) {
    code = 1;
    console.error(`\ndemo.mjs: FAILED after ${elapsed()}: ${e instanceof Check ? e.message : (e && e.stack) || e}`);
    try {
      const info = await page.evaluate(() => ({
        state: window.duet && window.duet.state,
        notices: window.duet && window.duet.notices,
        events: window.duet && window.duet.log.map((x) => `${Math.round(x.t)} ${x.dir === 'out' ? '→' : '←'} ${x.type}`)
          .filter((l, i, a) => !(l.endsWith('input_audio_buffer.append') && i > 0 && a[i - 1].endsWith('input_audio_buffer.append'))),
        stats: window.duet && (({ events, sent, received, input, output }) => ({ events, sent, received, inputMax: input.maxRms, outputMax: output.maxRms }))(window.duet.stats()),
      }));
      console.error(`page state: ${info.state}; notices: ${JSON.stringify(info.notices)}; stats: ${JSON.stringify(info.stats)}`);
      console.error(`events (ms since load):\n  ${(info.events || []).slice(-80).join('\n  ')}`);
    } catch (_) { /* the page may be gone */ }
    if (consoleLines.length) console.error(`browser console:\n  ${consoleLines.slice(-40).join('\n  ')}`);
    console.error(`HTTP: ${requests.join(', ')}`);
    try {
      mkdirSync(opts.artifacts, { recursive: true });
      await page.screenshot({ path: join(opts.artifacts, 'demo-failure.png'), fullPage: true });
      console.error(`screenshot: ${join(opts.artifacts, 'demo-failure.png')}`);
    } catch (_) { /* no page */ }
  } finally {
    await context.close().catch(() => {});
    rmSync(tmp, { recursive: true, force: true });
  }
  process.exit(code);
}

main().catch((e) => {
  console.error(`demo.mjs: FAILED: ${(e && e.stack) || e}`);
  process.exit(1);
});
