#!/usr/bin/env node
// @openai/agents-realtime (Node) over WebSocket against a full-duplex model (`--model moshi`).
//
//   node tests/sdk-js/realtime_ws_moshi.mjs --base-url http://127.0.0.1:PORT [--dump-events]
//
// A RealtimeAgent in a RealtimeSession on `OpenAIRealtimeWebSocket`, as in realtime_ws.mjs,
// with a "microphone" that streams silence in real time and never asks for a response. The
// model speaks on its own:
//   a. Duet's `response.speak` reaches the transport (a type outside the SDK's schema: the SDK
//      passes it on as a generic event) and the SDK raises no error for it;
//   b. the model's speech plays through the SDK: `audio` events for that response, the
//      session's agent_start / audio_start, the model's words as transcript deltas;
//   c. session.interrupt() during the speech: the SDK's response.cancel + truncate are
//      answered (response.done cancelled, conversation.item.truncated), no audio of that
//      response arrives after its response.done, and the SDK's history holds the model's
//      item with its words.
// Exits 0 when every check passed, 1 otherwise, 2 when the SDK is not installed.


import { Checks, EventLog, compact, now, sleep, watchSession } from './checks.mjs';
import { checkWholeRun, runScenario, scriptArgs } from './run.mjs';

let sdk;
try {
  sdk = await import('@openai/agents-realtime');
} catch (e) {
  console.error(
    `error: ${e.message}\n@openai/agents-realtime is needed: npm ci --prefix tests/sdk-js (./scripts/test does it)`,
  );
  process.exit(2);
}
const { RealtimeAgent, RealtimeSession, OpenAIRealtimeWebSocket } = sdk;

const CHUNK_MS = 40;
const EXTENSION_TYPES = new Set(['response.speak', 'response.listen']);
const OVERALL_TIMEOUT_MS = 60_000;

const { wsUrl, dumpEvents } = scriptArgs('realtime_ws_moshi.mjs');

const C = new Checks();
const F = C.figures;
const ev = new EventLog();

async function scenario() {
  const sdkErrors = [];
  const audio = []; // [{t, responseId, bytes}]
  const sessionEvents = [];
  const transport = new OpenAIRealtimeWebSocket({ url: wsUrl });
  const agent = new RealtimeAgent({ name: 'Duet duplex test', instructions: 'Talk.' });
  const session = new RealtimeSession(agent, { transport, model: 'gpt-realtime' });
  transport.on('*', (raw) => ev.record(raw));
  session.on('error', (e) => {
    const err = e?.error;
    if (err && typeof err === 'object' && err.type === 'error' && err.event_id) return; // counted from the log
    sdkErrors.push(err instanceof Error ? `${err.name}: ${err.message}` : JSON.stringify(err)?.slice(0, 300));
  });
  session.on('audio', (e) => audio.push({ t: now(), responseId: e.responseId, bytes: e.data.byteLength }));
  const history = watchSession(session, sessionEvents);

  console.log('== a. the model speaks on its own');
  await session.connect({ apiKey: 'sk-duet-test' });
  const created = await ev.waitFor('session.created', { timeout: 5000 });
  C.check(created.ev.session?.model === 'moshi', 'a. session.created names the model', created.ev.session?.model);
  let mic = true;
  const silence = new ArrayBuffer((24_000 * CHUNK_MS / 1000) * 2);
  const micDone = (async () => {
    const t0 = now();
    for (let n = 0; mic; n++) {
      session.sendAudio(silence);
      const wait = t0 + (n + 1) * CHUNK_MS - now();
      if (wait > 0) await sleep(wait);
    }
  })();
  const speak = await ev.waitFor('response.speak', { timeout: 10_000 });
  const rid = speak.ev.response_id;
  F.speak_after_connect_ms = Math.round(speak.t - created.t);
  C.check(typeof rid === 'string' && rid.startsWith('resp_'), 'a. response.speak names its response', compact(speak.ev));
  const rcAt = ev.log.findIndex((e) => e.ev.type === 'response.created' && e.ev.response?.id === rid);
  C.check(rcAt >= 0 && rcAt < speak.index, 'a. response.created came before response.speak', `at ${rcAt}, speak at ${speak.index}`);

  console.log("== b. the model's speech through the SDK");
  await ev.waitFor('response.output_audio.delta', { from: speak.index, pred: (e) => e.response_id === rid, timeout: 5000 });
  await sleep(800);
  const heard = audio.filter((a) => a.responseId === rid);
  const bytes = heard.reduce((s, a) => s + a.bytes, 0);
  F.sdk_audio = `${heard.length} audio events, ${bytes} bytes (${Math.round(bytes / 48)} ms)`;
  C.check(heard.length >= 5 && bytes >= 24_000, "b. the SDK's audio events carry the model's speech", F.sdk_audio);
  const names = sessionEvents.map((e) => e.name);
  C.check(names.includes('agent_start') && names.includes('audio_start'), 'b. RealtimeSession agent_start / audio_start', JSON.stringify(names));
  const itemId = speak.ev.item_id;
  const words = ev.since(speak.index, 'response.output_audio_transcript.delta', (e) => e.item_id === itemId)
    .map((e) => e.ev.delta)
    .join('');
  F.model_words = JSON.stringify(words.slice(0, 80));
  C.check(words.trim().length > 0, "b. the model's words arrive as transcript deltas", F.model_words);

  console.log('== c. interrupt');
  const mark = ev.length;
  session.interrupt();
  const done = await ev.waitFor('response.done', { from: mark, pred: (e) => e.response?.id === rid, timeout: 5000 });
  C.check(done.ev.response.status === 'cancelled', 'c. response.done cancelled', compact(done.ev.response));
  const truncated = await ev.waitFor('conversation.item.truncated', { from: mark, timeout: 5000 }).catch(() => null);
  C.check(truncated?.ev.item_id === itemId, "c. the SDK's truncate is answered for the model's item", compact(truncated?.ev ?? {}));
  await sleep(500);
  const late = ev.since(done.index + 1, 'response.output_audio.delta', (e) => e.response_id === rid);
  C.check(late.length === 0, 'c. no audio of the cancelled response after its response.done', `${late.length} deltas`);
  // The SDK fills its history item from the item events (done, retrieved after truncate).
  const item = history().find((h) => h.itemId === itemId);
  const transcript = item?.content?.find((p) => p.type === 'output_audio')?.transcript ?? '';
  F.history_item = JSON.stringify(item)?.slice(0, 200);
  C.check(item?.role === 'assistant' && transcript.trim().length > 0, "c. the SDK's history holds the model's item with its words", F.history_item);

  mic = false;
  await micDone;
  session.close();
  checkWholeRun(C, ev, sdkErrors);
  const unknown = [...ev.unknownTypes];
  F.types_unknown_to_sdk = unknown.join(', ');
  C.check(unknown.every((t) => EXTENSION_TYPES.has(t)), 'the only types unknown to the SDK are the duplex extension', F.types_unknown_to_sdk);
  F.events_received = ev.length;
}

await runScenario(scenario, { C, ev, timeoutMs: OVERALL_TIMEOUT_MS, dumpEvents });
