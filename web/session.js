// The live connection's end: hang up the call and release everything it holds.

import { el, duet, conn, setConn, apiKey, sleep } from './state.js';
import { setState } from './ui.js';
import { setMeter } from './audio.js';

/** POST /v1/realtime/calls/{id}/hangup; resolves when answered (or after `waitMs`). */
export function hangup(c, keepalive, waitMs = 1500) {
  if (!c.callId) return Promise.resolve();
  const headers = apiKey() ? { Authorization: `Bearer ${apiKey()}` } : {};
  const req = fetch(`/v1/realtime/calls/${encodeURIComponent(c.callId)}/hangup`, { method: 'POST', headers, keepalive })
    .catch(() => {});
  c.callId = null;
  return Promise.race([req, sleep(waitMs)]);
}

export function teardown(c, { hangup: doHangup = true, state = 'idle' } = {}) {
  if (conn !== c) return;
  setConn(null);
  if (doHangup) hangup(c, true);
  if (c.player) c.player.flush();
  try { if (c.dc) c.dc.close(); } catch (_) { /* closed */ }
  try { if (c.pc) c.pc.close(); } catch (_) { /* closed */ }
  try { if (c.ws && c.ws.readyState <= WebSocket.OPEN) c.ws.close(1000); } catch (_) { /* closed */ }
  if (c.mic) c.mic.getTracks().forEach((t) => t.stop());
  for (const n of [c.micSource, c.capture, c.sink, c.outGain, c.outSource]) {
    try { if (n) n.disconnect(); } catch (_) { /* gone */ }
  }
  el.audio.srcObject = null;
  setMeter(el.meterIn, 0);
  setMeter(el.meterOut, 0);
  el.meterVad.firstElementChild.style.width = '0%';
  el.meterVad.setAttribute('aria-valuenow', '0');
  duet.activeResponse = null;
  setState(state);
  el.mute.setAttribute('aria-pressed', 'false');
  el.mute.textContent = 'Mute mic';
}
