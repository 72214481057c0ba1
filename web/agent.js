// ---------------------------------------------------------------------------------------
// The assistant: the instructions box, and a demo tool the page runs itself through the
// Realtime tool loop (the time, from this browser's clock), offered to a model that can
// call tools (the cascade).

import { el } from './state.js';
import { send } from './log.js';
import { bubble, setBubbleText, addBadge } from './ui.js';

/** The demo tool: the page answers it, so a visitor sees a tool call happen. */
export const TIME_TOOL = {
  type: 'function',
  name: 'get_time',
  description: "The current local time and time zone of the user's browser.",
  parameters: { type: 'object', properties: {} },
};

/** Models that can call tools (the others refuse `tools` with tools_unsupported). */
const TOOL_MODELS = new Set(['cascade']);

/** What the page adds to its first session.update for `model`. */
export function assistantSession(model) {
  const extra = {};
  const instructions = el.instructions.value.trim();
  if (instructions) extra.instructions = instructions;
  if (TOOL_MODELS.has(model)) {
    extra.tools = [TIME_TOOL];
    extra.tool_choice = 'auto';
  }
  return extra;
}

/** Sends the instructions again when the box changes during a session. */
export function watchInstructions(connected) {
  el.instructions.addEventListener('change', () => {
    const instructions = el.instructions.value.trim();
    if (connected() && instructions) send({ type: 'session.update', session: { type: 'realtime', instructions } });
  });
}

/** The browser's answer to a get_time call. */
function localTime() {
  const now = new Date();
  return {
    time: now.toLocaleTimeString(),
    date: now.toLocaleDateString(),
    time_zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    iso: now.toISOString(),
  };
}

/**
 * Runs the function calls of a finished response: shows each, sends its output, and asks
 * for the answer that uses them (one response.create for all of them).
 */
export function runToolCalls(response) {
  if (!response || response.status !== 'completed') return;
  const calls = (response.output || []).filter((o) => o.type === 'function_call' && o.status === 'completed');
  for (const call of calls) {
    const b = bubble(call.id, 'assistant', 'tool');
    let output;
    if (call.name === TIME_TOOL.name) {
      output = localTime();
      setBubbleText(b, `${call.name}() → ${output.time} (${output.time_zone})`);
    } else {
      output = { error: `the page has no tool named ${call.name}` };
      setBubbleText(b, `${call.name}(${call.arguments}) → not a tool of this page`);
    }
    addBadge(b, 'note', 'tool call', `call_id ${call.call_id}`);
    b.entry.status = 'completed';
    send({ type: 'conversation.item.create', item: { type: 'function_call_output', call_id: call.call_id, output: JSON.stringify(output) } });
  }
  if (calls.length) send({ type: 'response.create' });
}
