// Duet demo page: a Realtime API client in plain browser JavaScript (no build step, no network
// resources besides this server).
//
// WebRTC (default): one RTCPeerConnection with the mic track and the `oai-events` data channel;
// the offer goes to POST /v1/realtime/calls, the answer's Location names the call. The model's
// audio arrives on the remote track and plays in <audio autoplay>.
// WebSocket (fallback): /v1/realtime; the mic is captured with an AudioWorklet, resampled to
// 24 kHz PCM16 and sent as input_audio_buffer.append every 40 ms; response.output_audio.delta
// is played through a scheduled Web Audio queue, flushed and truncated on interruption.
//
// Test hook: window.duet = { state, log, transcripts, turns, stats() } (see state.js).
//
// This is the entry module; the concerns live in state.js, ui.js, audio.js, log.js, events.js,
// rtc.js, ws.js (the WebSocket transport), playback.js (its audio queue and interruption),
// pcm.js (resampling and PCM16 <-> base64) and session.js.

import { $, now, el, duet, conn, setConn, transportChoice, sleep, setDemoKey } from './state.js';
import { setState, setActivity, hideNotice, showError, bubbles, newTurn } from './ui.js';
import { audioContext, openMic, refreshDevices, attachMic, switchMic } from './audio.js';
import { send, clearLog } from './log.js';
import { hangup, teardown } from './session.js';
import { connectWebRtc, restartIce } from './rtc.js';
import { connectWebSocket } from './ws.js';
import { interruptPlayback } from './playback.js';
import { watchInstructions } from './agent.js';
import { watchTurnDetection } from './turn.js';

// ---------------------------------------------------------------------------------------
// Connect / disconnect.

async function connect() {
  hideNotice();
  const kind = transportChoice();
  const c = { kind, muted: false, outConnected: false };
  setConn(c);
  duet.transport = kind;
  duet.callId = null;
  duet.activeResponse = null;
  duet.duplex = false;
  setState('connecting', kind === 'webrtc' ? 'WebRTC' : 'WebSocket');
  try {
    audioContext();
    if (!el.key.value.trim()) await mintDemoSecret();
    c.mic = await openMic(el.mic.value || undefined);
    if (conn !== c) { c.mic.getTracks().forEach((t) => t.stop()); return; }
    attachMic(c, c.mic);
    refreshDevices().catch(() => {});
    if (kind === 'webrtc') await connectWebRtc(c);
    else await connectWebSocket(c);
  } catch (e) {
    if (conn !== c) return;
    showError(e);
    teardown(c, { hangup: true, state: 'failed' });
  }
}

/** With `--demo-mint-secrets` the server mints this page a client secret (the page never
 *  holds the server key); elsewhere the endpoint is 404 and the key box is used as typed. */
async function mintDemoSecret() {
  try {
    const res = await fetch('/demo/client_secret', { method: 'POST' });
    if (!res.ok) { setDemoKey(null); return; }
    const body = await res.json();
    setDemoKey(body.value || null);
    duet.demoSecret = !!body.value;
  } catch (_) {
    setDemoKey(null);
  }
}

async function disconnect() {
  const c = conn;
  if (!c) return;
  setState('closing');
  // Hang up first: closing the peer connection first would end the call before the
  // server sees the hangup (which then answers 404).
  if (c.kind === 'webrtc') await hangup(c, false);
  teardown(c, { hangup: true });
}

async function interrupt() {
  if (!conn) return;
  if (duet.activeResponse) send({ type: 'response.cancel' });
  if (conn.kind === 'webrtc') send({ type: 'output_audio_buffer.clear' });
  else interruptPlayback();
  if (duet.activity === 'speaking' || duet.activity === 'thinking') setActivity('listening');
}

async function sendText(text) {
  if (!conn || !text) return;
  if (duet.activeResponse) {
    // One response at a time: stop the current one, then wait for its response.done.
    await interrupt();
    for (let i = 0; i < 30 && duet.activeResponse; i++) await sleep(50);
  }
  const ok = send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
  if (!ok) return;
  newTurn('text', now());
  send({ type: 'response.create' });
}

// ---------------------------------------------------------------------------------------
// Wiring.

el.connect.addEventListener('click', () => {
  if (conn) disconnect();
  else connect();
});
el.interrupt.addEventListener('click', () => { interrupt(); });
el.mute.addEventListener('click', () => {
  if (!conn || !conn.mic) return;
  conn.muted = !conn.muted;
  conn.mic.getAudioTracks().forEach((t) => { t.enabled = !conn.muted; });
  el.mute.setAttribute('aria-pressed', String(conn.muted));
  el.mute.textContent = conn.muted ? 'Unmute mic' : 'Mute mic';
});
$('settings').addEventListener('submit', (e) => {
  e.preventDefault(); // Enter in the key field connects
  if (!conn) connect();
});
el.mic.addEventListener('change', () => { switchMic(el.mic.value).catch(showError); });
watchInstructions(() => conn !== null && duet.state === 'connected');
watchTurnDetection(() => conn !== null && duet.state === 'connected');
el.aec.addEventListener('change', () => { switchMic(el.mic.value).catch(showError); });
el.composer.addEventListener('submit', (e) => {
  e.preventDefault();
  const text = el.text.value.trim();
  if (!text) return;
  el.text.value = '';
  sendText(text).catch(showError);
});
el.clearLog.addEventListener('click', () => { clearLog(); });
el.clearTranscript.addEventListener('click', () => {
  el.transcript.innerHTML = '';
  bubbles.clear();
});
duet.restartIce = () => (conn && conn.kind === 'webrtc' ? restartIce(conn) : Promise.reject(new Error('no WebRTC call')));
window.addEventListener('pagehide', () => { if (conn) teardown(conn, { hangup: true }); });
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && conn && duet.activity === 'speaking') interrupt();
});

// The served model, for the header (and the WebSocket URL).
(async () => {
  try {
    const res = await fetch('/v1/models');
    if (res.status === 401) { el.model.textContent = 'model: (API key needed)'; return; }
    const body = await res.json();
    const id = body && body.data && body.data[0] && body.data[0].id;
    if (id) { duet.modelId = id; el.model.textContent = `model: ${id}`; }
  } catch (_) {
    el.model.textContent = 'model: ?';
  }
})();

setState('idle');
// Permission may already be granted (a reload): then the picker can list devices now.
refreshDevices().catch(() => {});
