#!/usr/bin/env node
// @openai/agents-realtime (Node) over WebSocket against `duet serve --model cascade`, whose
// LLM is a scripted OpenAI-compatible server the Rust test started (tests/agents_realtime_tools.rs):
//
//   node tests/sdk-js/tools_ws.mjs --base-url http://127.0.0.1:PORT
//
//   a. connect: session.updated carries the agent's function tool and its handoff tool;
//   b. a typed question: the LLM calls get_time; the SDK runs the tool (its execute sees
//      {tz: "UTC"}), sends the function_call_output and a response.create; the answer is
//      spoken (audio events) with the transcript "It is ten o'clock.";
//   c. a second question: the LLM calls the handoff tool; the SDK hands off to the Spanish
//      agent (agent_handoff, a session.update with its instructions), and its answer is
//      "Hola.".
// Any `error` event, any event the SDK's schema rejects, or an SDK `error` fails the run.

import { Abort, Checks, EventLog, sleep, watchSession } from './checks.mjs';
import { checkWholeRun, runScenario, scriptArgs } from './run.mjs';

let sdk;
let z;
try {
  sdk = await import('@openai/agents-realtime');
  z = (await import('zod')).z;
} catch (e) {
  console.error(`error: ${e.message}\n@openai/agents-realtime is needed: npm ci --prefix tests/sdk-js`);
  process.exit(2);
}
const { RealtimeAgent, RealtimeSession, OpenAIRealtimeWebSocket, tool } = sdk;

const { wsUrl, dumpEvents } = scriptArgs('tools_ws.mjs');
const C = new Checks();
const F = C.figures;
const ev = new EventLog();

/** After event index `from`: the model's call, then the spoken answer that follows it. */
async function callThenAnswer(from) {
  const call = await ev.waitFor('response.function_call_arguments.done', { from, timeout: 10_000 });
  const answer = await ev.waitFor('response.done', {
    from: call.index + 2,
    pred: (e) => (e.response.output ?? []).some((o) => o.type === 'message'),
    timeout: 15_000,
  });
  const said = answer.ev.response.output.find((o) => o.type === 'message').content[0].transcript;
  return { call: call.ev, said };
}

async function scenario() {
  const sdkErrors = [];
  const toolArgs = [];
  const sessionEvents = [];
  const getTime = tool({
    name: 'get_time',
    description: 'The time now in a time zone',
    parameters: z.object({ tz: z.string() }),
    execute: async ({ tz }) => {
      toolArgs.push(tz);
      return { time: '10:00', tz };
    },
  });
  const spanish = new RealtimeAgent({
    name: 'Spanish',
    instructions: 'Habla solo español.',
    handoffDescription: 'Speaks Spanish',
  });
  const agent = new RealtimeAgent({
    name: 'Clock',
    instructions: 'You tell the time.',
    tools: [getTime],
    handoffs: [spanish],
  });
  const transport = new OpenAIRealtimeWebSocket({ url: wsUrl });
  const session = new RealtimeSession(agent, { transport, model: 'gpt-realtime' });
  transport.on('*', (raw) => ev.record(raw));
  session.on('error', (e) => {
    const err = e?.error;
    if (err && typeof err === 'object' && err.type === 'error' && err.event_id) return;
    sdkErrors.push(err instanceof Error ? `${err.name}: ${err.message}` : JSON.stringify(err)?.slice(0, 300));
  });
  let handoffTo = null;
  session.on('agent_handoff', (_ctx, _from, to) => {
    handoffTo = to.name;
  });
  let audioBytes = 0;
  session.on('audio', (e) => {
    audioBytes += e.data.byteLength;
  });
  watchSession(session, sessionEvents);

  console.log('== a. connect');
  await session.connect({ apiKey: 'sk-duet-test' });
  const updated = await ev.waitFor('session.updated', {
    pred: (e) => (e.session?.tools ?? []).length > 0,
    timeout: 5000,
  });
  const names = updated.ev.session.tools.map((t) => t.name).sort();
  C.check(JSON.stringify(names) === '["get_time","transfer_to_Spanish"]', 'a. the tool and the handoff are the session tools', JSON.stringify(names));

  console.log('== b. a tool call');
  const b0 = ev.length;
  session.sendMessage('What time is it in UTC?');
  const { call, said } = await callThenAnswer(b0);
  C.check(call.name === 'get_time', 'b. the model calls get_time', call.name);
  C.check(JSON.stringify(toolArgs) === '["UTC"]', "b. the SDK ran the tool with the model's arguments", JSON.stringify(toolArgs));
  C.check(said === "It is ten o'clock.", 'b. the answer speaks from the tool result', JSON.stringify(said));
  C.check(audioBytes > 24_000, 'b. the answer is audio (the SDK got at least 0.5 s)', `${audioBytes} bytes`);

  console.log('== c. a handoff');
  const c0 = ev.length;
  session.sendMessage('Please switch to Spanish.');
  const { call: handoff, said: hablo } = await callThenAnswer(c0);
  C.check(handoff.name === 'transfer_to_Spanish', 'c. the model calls the handoff tool', handoff.name);
  C.check(handoffTo === 'Spanish', 'c. the SDK handed off to the Spanish agent', String(handoffTo));
  C.check(hablo === 'Hola.', 'c. the Spanish agent answers', JSON.stringify(hablo));
  await sleep(200);
  checkWholeRun(C, ev, sdkErrors);
  session.close();
  if (C.failed.length) throw new Abort('checks failed');
}

await runScenario(scenario, { C, ev, timeoutMs: 60_000, dumpEvents });
