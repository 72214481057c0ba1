#!/usr/bin/env node
// @openai/agents-realtime (Node) over WebSocket against Duet.
//
//   node tests/sdk-js/realtime_ws.mjs --base-url http://127.0.0.1:PORT [--dump-events]
//
// The SDK's normal path: a RealtimeAgent in a RealtimeSession whose transport is
// `new OpenAIRealtimeWebSocket({ url: 'ws://127.0.0.1:PORT/v1/realtime?model=gpt-realtime' })`,
// connected with a plain API key (Node sends it as `Authorization: Bearer`), the SDK's
// default session config (semantic_vad, gpt-4o-mini-transcribe, audio/pcm 24 kHz).
//
//   a. connect: session.created, then the SDK's session.update -> session.updated within 5 s
//      (with interrupt_response: true, so the SDK leaves barge-in cancelling to the server);
//   b. one turn: a real-time "microphone" streams 24 kHz PCM16 through session.sendAudio:
//      silence, 1.5 s of synthetic voice, silence; server VAD ends the turn; the answer comes
//      as the SDK's `audio` events (about 1.5 s of PCM16) with transcript "echo of 1.5 s",
//      response.done completed, the SDK's history holds both items;
//   c. interrupt: a second spoken turn; 400 ms into its answer session.interrupt(); the SDK
//      sends response.cancel + conversation.item.truncate (audio_end_ms = what it received);
//      the server answers response.done cancelled, conversation.item.truncated, and the
//      SDK's follow-up conversation.item.retrieve gets the truncated item; nothing of the
//      cancelled response arrives after its response.done;
//   e. a backchannel (0.3 s of voice) over a third answer: semantic_vad's adaptive
//      interruption sends no speech_started, so the SDK does not cut its playback (no
//      audio_interrupted), and the answer completes;
//   f. 1.2 s of voice over a fourth answer: speech_started, the SDK cuts its playback
//      (audio_interrupted), the answer is cancelled (turn_detected);
//   g. close.
// Any `error` event, any event the SDK's schema rejects, or an SDK `error` fails the run.
// Exits 0 when every check passed, 1 otherwise, 2 when the SDK is not installed.

import { readFileSync } from 'node:fs';

import { Abort, Checks, EventLog, compact, now, sleep, watchSession } from './checks.mjs';
import { checkWholeRun, runScenario, scriptArgs } from './run.mjs';

let sdk;
let WebSocketImpl;
try {
  sdk = await import('@openai/agents-realtime');
  WebSocketImpl = (await import('ws')).WebSocket;
} catch (e) {
  console.error(
    `error: ${e.message}\n@openai/agents-realtime is needed: npm ci --prefix tests/sdk-js (./scripts/test does it)`,
  );
  process.exit(2);
}
const { RealtimeAgent, RealtimeSession, OpenAIRealtimeWebSocket } = sdk;
const SDK_VERSION = JSON.parse(
  readFileSync(new URL('./node_modules/@openai/agents-realtime/package.json', import.meta.url)),
).version;

const RATE = 24_000;
const CHUNK = 960; // 40 ms per sendAudio call
const OVERALL_TIMEOUT_MS = 60_000;

const { wsUrl, dumpEvents } = scriptArgs('realtime_ws.mjs');

const C = new Checks();
const F = C.figures;
F['@openai/agents-realtime'] = SDK_VERSION;
F.url = wsUrl;

// --- what the SDK sends: every frame through the `ws` package the SDK's Node shim uses -------
const sent = []; // [{t, ev}]
const origSend = WebSocketImpl.prototype.send;
WebSocketImpl.prototype.send = function send(data, ...rest) {
  try {
    sent.push({ t: now(), ev: JSON.parse(String(data)) });
  } catch {
    sent.push({ t: now(), ev: { type: '(not JSON)' } });
  }
  return origSend.call(this, data, ...rest);
};
const sentTypes = (from = 0) => sent.slice(from).map((s) => s.ev.type).filter((t) => t !== 'input_audio_buffer.append');

// --- synthetic microphone --------------------------------------------------------------------

/** 24 kHz voiced audio: 8 harmonics of ~140 Hz (5 Hz vibrato), 4 Hz syllable AM, ~-18 dBFS. */
function voiced(secs, state = { phase: 0, n: 0 }) {
  const n = Math.round(secs * RATE);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const t = (state.n + i) / RATE;
    const f0 = 140 + 8 * Math.sin(2 * Math.PI * 5 * t);
    state.phase += (2 * Math.PI * f0) / RATE;
    const syllable = 0.75 + 0.25 * Math.sin(2 * Math.PI * 4 * t);
    let s = 0;
    for (let h = 1; h <= 8; h++) s += Math.sin(state.phase * h) / h;
    out[i] = 0.12 * syllable * s;
  }
  state.n += n;
  return out;
}

function pcm16(samples) {
  const buf = new ArrayBuffer(samples.length * 2);
  const view = new DataView(buf);
  samples.forEach((s, i) => view.setInt16(2 * i, Math.round(Math.max(-1, Math.min(1, s)) * 32767), true));
  return buf;
}

/** Streams 40 ms chunks through session.sendAudio in real time: queued voice, else silence. */
class Mic {
  constructor(session) {
    this.session = session;
    this.queue = [];
    this.sentChunks = 0;
    this.running = false;
  }
  speak(secs) {
    const samples = voiced(secs);
    return new Promise((resolve) => {
      for (let i = 0; i < samples.length; i += CHUNK) {
        const last = i + CHUNK >= samples.length;
        const chunk = new Float32Array(CHUNK);
        chunk.set(samples.subarray(i, Math.min(i + CHUNK, samples.length)));
        this.queue.push({ chunk, done: last ? resolve : null });
      }
    });
  }
  async run() {
    this.running = true;
    const start = now();
    const silence = new Float32Array(CHUNK);
    while (this.running) {
      const due = start + (this.sentChunks * CHUNK * 1000) / RATE;
      const wait = due - now();
      if (wait > 0) await sleep(wait);
      if (!this.running) break;
      const next = this.queue.shift();
      this.session.sendAudio(pcm16(next ? next.chunk : silence));
      this.sentChunks++;
      if (next?.done) next.done(now());
    }
  }
  stop() {
    this.running = false;
  }
}

// --- the scenario ----------------------------------------------------------------------------

const ev = new EventLog();

async function scenario() {
  const sdkErrors = [];
  const audio = new Map(); // responseId -> {bytes, first, last, events}
  const audioLog = []; // [{t, responseId, bytes}]
  const sessionEvents = []; // RealtimeSession-level events, in order

  const transport = new OpenAIRealtimeWebSocket({ url: wsUrl });
  const agent = new RealtimeAgent({
    name: 'Duet compatibility test',
    instructions: 'Repeat what the user says.',
  });
  const session = new RealtimeSession(agent, { transport, model: 'gpt-realtime' });

  transport.on('*', (raw) => ev.record(raw));
  session.on('error', (e) => {
    const err = e?.error;
    // Server `error` events reach here too (as {type:'error', error: <event>}); they are
    // counted from the raw log. Everything else is the SDK's own complaint.
    if (err && typeof err === 'object' && err.type === 'error' && err.event_id) return;
    sdkErrors.push(err instanceof Error ? `${err.name}: ${err.message}` : JSON.stringify(err)?.slice(0, 300));
  });
  session.on('audio', (e) => {
    const t = now();
    const a = audio.get(e.responseId) ?? { bytes: 0, first: t, last: t, events: 0 };
    a.bytes += e.data.byteLength;
    a.last = t;
    a.events += 1;
    audio.set(e.responseId, a);
    audioLog.push({ t, responseId: e.responseId, bytes: e.data.byteLength });
  });
  const history = watchSession(session, sessionEvents);
  /** Speaks a turn of `secs` and waits for the SDK's first `audio` of its answer; returns
   * the event mark before the turn and the answer's response id. */
  const askAndHear = async (secs, what) => {
    const mark = ev.length;
    await mic.speak(secs);
    const rc = await ev.waitFor('response.created', { from: mark, timeout: 5000 });
    const rid = rc.ev.response.id;
    const deadline = now() + 5000;
    while (!audio.get(rid) && now() < deadline) await sleep(5);
    if (!audio.get(rid)) throw new Abort(`no audio events for the ${what} response`);
    return { mark, rid };
  };

  // a. connect
  console.log('== a. connect');
  const t0 = now();
  ev.t0 = t0;
  await session.connect({ apiKey: 'sk-duet-test' });
  F.connect_ms = Math.round(now() - t0);
  C.check(transport.status === 'connected', 'a. transport status connected', transport.status);
  const created = await ev.waitFor('session.created', { timeout: 5000 });
  C.check(created.index === 0, 'a. session.created is the first event', JSON.stringify(ev.types().slice(0, 3)));
  const sdkUpdate = sent.find((s) => s.ev.type === 'session.update' && s.ev.session?.audio);
  if (!sdkUpdate) throw new Abort("the SDK sent no full session.update on connect");
  F.sdk_session_update = compact(sdkUpdate.ev, 600);
  // Updates are answered in order: wait for the answer to the SDK's full update (the
  // tracing-only update it also sends may be answered first).
  const nth = sent.filter((x) => x.ev.type === 'session.update').indexOf(sdkUpdate) + 1;
  let seen = 0;
  const updated = await ev.waitFor('session.updated', {
    pred: () => ++seen === nth,
    timeout: 5000,
  });
  F.session_updated_ms = Math.round(updated.t - t0);
  C.check(updated.t - t0 <= 5000, 'a. session.updated within 5 s of connect', `${F.session_updated_ms} ms`);
  const s = updated.ev.session;
  const td = s.audio?.input?.turn_detection;
  F.session_updated = compact({ model: s.model, output_modalities: s.output_modalities, turn_detection: td, transcription: s.audio?.input?.transcription, tracing: s.tracing });
  C.check(td?.type === 'semantic_vad', "a. session.updated keeps the SDK's semantic_vad", JSON.stringify(td));
  C.check(td?.interrupt_response === true, 'a. session.updated reports interrupt_response: true', JSON.stringify(td));
  C.check(
    JSON.stringify(s.output_modalities) === '["audio"]',
    'a. output_modalities ["audio"]',
    JSON.stringify(s.output_modalities),
  );
  // After session.created the SDK also turns tracing on (session.update tracing:"auto").
  // Updates are answered one for one and in order, so the tracing update's answer is the
  // session.updated with the same ordinal; it may come before or after the full one.
  const updates = sent.filter((x) => x.ev.type === 'session.update');
  const tracingUpdate = updates.find((x) => x.ev.session?.tracing === 'auto');
  if (tracingUpdate) {
    const k = updates.indexOf(tracingUpdate) + 1;
    F.tracing_update = `session.update #${k} of ${updates.length}`;
    let n = 0;
    const answer = await ev
      .waitFor('session.updated', { pred: () => ++n === k, timeout: 5000 })
      .catch(() => null);
    C.check(answer !== null, 'a. the tracing session.update is answered', `update #${k} of ${updates.length}`);
  }

  // b. one turn
  console.log('== b. one turn');
  const mic = new Mic(session);
  const micDone = mic.run();
  await sleep(300);
  const mB = ev.length;
  const sentB = sent.length;
  const spoken = mic.speak(1.5);
  const speechEnd = await spoken;
  const started = await ev.waitFor('input_audio_buffer.speech_started', { from: mB, timeout: 5000 });
  await ev.waitFor('input_audio_buffer.speech_stopped', { from: mB, timeout: 5000 });
  await ev.waitFor('input_audio_buffer.committed', { from: mB, timeout: 5000 });
  const rc = await ev.waitFor('response.created', { from: mB, timeout: 5000 });
  const rid1 = rc.ev.response.id;
  F.turn1_response_created_after_speech_end_ms = Math.round(rc.t - speechEnd);
  const done1 = await ev.waitFor('response.done', { from: mB, pred: (e) => e.response?.id === rid1, timeout: 10_000 });
  const r1 = done1.ev.response;
  C.check(r1.status === 'completed', 'b. response.done completed', `${r1.status} ${JSON.stringify(r1.status_details)}`);
  const a1 = audio.get(rid1);
  const a1ms = a1 ? a1.bytes / 48 : 0;
  F.turn1_audio = a1 ? `${a1.events} audio events, ${a1.bytes} bytes (${Math.round(a1ms)} ms)` : 'none';
  C.check(a1 !== undefined, "b. the SDK emitted `audio` events for the response", JSON.stringify([...audio.keys()]));
  C.check(a1ms >= 1200 && a1ms <= 1900, 'b. about 1.5 s of answer audio', `${Math.round(a1ms)} ms`);
  const tdone = ev.find(mB, 'response.output_audio_transcript.done', (e) => e.response_id === rid1);
  F.turn1_transcript = tdone?.ev.transcript;
  C.check(/^echo of 1\.[3-7] s$/.test(tdone?.ev.transcript ?? ''), 'b. transcript "echo of ~1.5 s"', JSON.stringify(tdone?.ev.transcript));
  const deltasAfterDone = ev.since(done1.index + 1, 'response.output_audio.delta', (e) => e.response_id === rid1);
  C.check(deltasAfterDone.length === 0, 'b. no audio deltas after response.done', `${deltasAfterDone.length}`);
  F.turn1_first_audio_after_speech_end_ms = a1 ? Math.round(a1.first - speechEnd) : null;
  F.turn1_speech_started_after_voice_start_ms = Math.round(started.t - (speechEnd - 1500));
  await sleep(200);
  const names = sessionEvents.map((e) => e.name);
  C.check(names.includes('agent_start') && names.includes('agent_end'), 'b. RealtimeSession agent_start / agent_end', JSON.stringify(names));
  C.check(names.includes('audio_start') && names.includes('audio_stopped'), 'b. RealtimeSession audio_start / audio_stopped', JSON.stringify(names));
  const users = history().filter((i) => i.type === 'message' && i.role === 'user');
  const assistants = history().filter((i) => i.type === 'message' && i.role === 'assistant');
  const atext = assistants.at(-1)?.content?.map((c) => c.transcript ?? c.text ?? '').join('');
  F.turn1_history = `${history().length} items; assistant says ${JSON.stringify(atext)}`;
  C.check(users.length >= 1 && assistants.length >= 1, "b. the SDK's history has the user and assistant items", JSON.stringify(history()).slice(0, 400));
  C.check(atext === tdone?.ev.transcript, "b. the SDK's history holds the transcript", JSON.stringify(atext));
  F.turn1_sdk_sent = JSON.stringify(sentTypes(sentB));

  // c. interrupt during a second answer
  console.log('== c. interrupt');
  await sleep(500);
  const sentC = sent.length;
  const sessC = sessionEvents.length;
  // The SDK's first `audio` of the answer, then 400 ms of it.
  const { mark: mC, rid: rid2 } = await askAndHear(1.5, 'second');
  await sleep(400);
  const tInterrupt = now();
  const sentBefore = sent.length;
  const received2 = audio.get(rid2).bytes / 48;
  session.interrupt();
  const sdkSent = sent.slice(sentBefore).map((x) => x.ev);
  F.interrupt_sdk_sent = compact(sdkSent.filter((e) => e.type !== 'input_audio_buffer.append'));
  const cancel = sdkSent.find((e) => e.type === 'response.cancel');
  const truncate = sdkSent.find((e) => e.type === 'conversation.item.truncate');
  C.check(cancel !== undefined, 'c. interrupt() sent response.cancel', F.interrupt_sdk_sent);
  C.check(truncate !== undefined, 'c. interrupt() sent conversation.item.truncate', F.interrupt_sdk_sent);
  const done2 = await ev.waitFor('response.done', { from: mC, pred: (e) => e.response?.id === rid2, timeout: 3000 });
  const r2 = done2.ev.response;
  F.cancel_response_done_ms = Math.round(done2.t - tInterrupt);
  C.check(r2.status === 'cancelled', 'c. response.done cancelled', `${r2.status} ${JSON.stringify(r2.status_details)}`);
  F.cancel_reason = r2.status_details?.reason;
  C.check(r2.status_details?.reason === 'client_cancelled', 'c. status_details.reason client_cancelled', JSON.stringify(r2.status_details));
  const itemId = r2.output?.[0]?.id;
  if (truncate) {
    C.check(truncate.item_id === itemId, 'c. the SDK truncates the assistant item', `${truncate.item_id} vs ${itemId}`);
    F.truncate_audio_end_ms = truncate.audio_end_ms;
    F.audio_received_before_interrupt_ms = Math.round(received2);
    const tr = await ev.waitFor('conversation.item.truncated', { from: mC, timeout: 3000 }).catch((e) => {
      C.check(false, 'c. conversation.item.truncated', e.message);
      return null;
    });
    if (tr) {
      C.check(tr.ev.item_id === truncate.item_id && tr.ev.audio_end_ms === truncate.audio_end_ms,
        'c. conversation.item.truncated echoes the truncate', compact(tr.ev));
      // The SDK answers `truncated` with conversation.item.retrieve.
      const ret = await ev.waitFor('conversation.item.retrieved', { from: tr.index, timeout: 3000 }).catch((e) => {
        C.check(false, "c. the SDK's conversation.item.retrieve is answered", e.message);
        return null;
      });
      if (ret) {
        const part = ret.ev.item?.content?.[0] ?? {};
        F.truncated_item = compact({ status: ret.ev.item?.status, transcript: part.transcript, audio_b64_chars: part.audio?.length });
        C.check(
          sent.some((x) => x.ev.type === 'conversation.item.retrieve' && x.ev.item_id === truncate.item_id),
          'c. the SDK sent conversation.item.retrieve after truncated', '');
        C.check(typeof part.transcript === 'string' && 'echo of 1.5 s'.startsWith(part.transcript),
          'c. the retrieved transcript is cut to what was played (a prefix of the full one)', JSON.stringify(part.transcript));
      }
    }
  }
  const ints = sessionEvents.slice(sessC).map((e) => e.name);
  C.check(ints.includes('audio_interrupted'), 'c. RealtimeSession emitted audio_interrupted', JSON.stringify(ints));
  await sleep(1000);
  const late = ev.log.slice(done2.index + 1).filter((e) => e.ev.response_id === rid2 || e.ev.response?.id === rid2);
  C.check(late.length === 0, 'c. nothing of the cancelled response after its response.done', JSON.stringify(late.map((e) => e.ev.type)));
  const audioAfterInterrupt = audioLog.filter((a) => a.responseId === rid2 && a.t > tInterrupt);
  F.audio_events_after_interrupt = audioAfterInterrupt.length;
  const more = ev.since(done2.index + 1, 'response.created');
  C.check(more.length === 0, 'c. no new response while the user is silent', JSON.stringify(more.map((e) => e.ev.response?.id)));
  F.interrupt_sdk_sent_all = JSON.stringify(sentTypes(sentC));

  // e. a backchannel over an answer (semantic_vad: adaptive interruption), then a real
  // interruption: the SDK stops its playback on speech_started, so it must see none for
  // the backchannel.
  console.log('== e. backchannel');
  await sleep(800);
  const sessE = sessionEvents.length;
  const { mark: mE, rid: rid3 } = await askAndHear(1.5, 'third');
  await sleep(300);
  const tBackchannel = now();
  await mic.speak(0.3);
  const done3 = await ev.waitFor('response.done', { from: mE, pred: (e) => e.response?.id === rid3, timeout: 8000 });
  await sleep(1200); // the backchannel's silence: a verdict, and no turn of its own
  C.check(done3.ev.response.status === 'completed', 'e. the answer completes over a backchannel',
    `${done3.ev.response.status} ${JSON.stringify(done3.ev.response.status_details)}`);
  const startedE = ev.since(mE, 'input_audio_buffer.speech_started').filter((e) => e.t > tBackchannel);
  C.check(startedE.length === 0, 'e. no speech_started for the backchannel', JSON.stringify(startedE.map((e) => e.ev.audio_start_ms)));
  // From the backchannel on: the question before it may itself cut the SDK's playback of an
  // earlier answer still playing on the SDK's clock (seen under a loaded full run).
  const namesE = sessionEvents.slice(sessE).filter((e) => e.t > tBackchannel).map((e) => e.name);
  C.check(!namesE.includes('audio_interrupted'), 'e. the SDK did not cut its playback (no audio_interrupted)', JSON.stringify(namesE));
  const a3ms = (audio.get(rid3)?.bytes ?? 0) / 48;
  F.backchannel_answer_audio_ms = Math.round(a3ms);
  C.check(a3ms >= 1200, 'e. the whole answer came (about 1.5 s)', `${Math.round(a3ms)} ms`);
  const createdE = ev.since(done3.index + 1, 'response.created');
  C.check(createdE.length === 0, 'e. the backchannel created no response', JSON.stringify(createdE.map((e) => e.ev.response?.id)));

  console.log('== f. interruption');
  const sessF = sessionEvents.length;
  const { mark: mF, rid: rid4 } = await askAndHear(1.5, 'fourth');
  await sleep(300);
  const tOver = now();
  const mOver = ev.length;
  const spokenF = mic.speak(1.2);
  const startedF = await ev.waitFor('input_audio_buffer.speech_started', { from: mOver, timeout: 5000 });
  F.interruption_speech_started_after_onset_ms = Math.round(startedF.t - tOver);
  const done4 = await ev.waitFor('response.done', { from: mF, pred: (e) => e.response?.id === rid4, timeout: 5000 });
  await spokenF;
  C.check(done4.ev.response.status === 'cancelled' && done4.ev.response.status_details?.reason === 'turn_detected',
    'f. a long voice over the answer cancels it (turn_detected)', JSON.stringify(done4.ev.response.status_details));
  await sleep(200);
  const namesF = sessionEvents.slice(sessF).map((e) => e.name);
  C.check(namesF.includes('audio_interrupted'), 'f. the SDK cut its playback (audio_interrupted)', JSON.stringify(namesF));
  await ev.waitFor('response.done', { from: done4.index + 1, timeout: 8000 }).catch(() => null);

  // g. close
  console.log('== g. close');
  mic.stop();
  await micDone;
  session.close();
  await sleep(100);
  C.check(transport.status === 'disconnected', 'g. transport disconnected after close()', transport.status);

  // whole run
  checkWholeRun(C, ev, sdkErrors);
  if (ev.unknownTypes.size) F.types_unknown_to_sdk = [...ev.unknownTypes].join(', ');
  F.events_received = ev.length;
  F.events_sent = sent.length;
  F.mic_chunks_sent = mic.sentChunks;
}

await runScenario(scenario, { C, ev, timeoutMs: OVERALL_TIMEOUT_MS, dumpEvents });
