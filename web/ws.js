// ---------------------------------------------------------------------------------------
// WebSocket: capture, resampling, playback.

import { RATE, APPEND_SAMPLES, duet, conn, UserError, apiKey } from './state.js';
import { setState, setActivity, showNotice, httpError } from './ui.js';
import { outAnalyser, audioContext } from './audio.js';
import { send } from './log.js';
import { onServerEvent } from './events.js';
import { teardown } from './session.js';

/** Streaming linear resampler with a light anti-alias filter when decimating. */
export class Resampler {
  constructor(inRate, outRate) {
    this.step = inRate / outRate;
    this.pos = 0; // position of the next output, in input samples, relative to `last`
    this.last = 0;
    this.z1 = 0;
    this.z2 = 0;
  }

  process(input) {
    let x = input;
    if (this.step >= 1.5) { // [1/4, 1/2, 1/4] low-pass, zero at the input's Nyquist
      x = new Float32Array(input.length);
      for (let i = 0; i < input.length; i++) {
        x[i] = 0.25 * this.z2 + 0.5 * this.z1 + 0.25 * input[i];
        this.z2 = this.z1;
        this.z1 = input[i];
      }
    }
    const out = [];
    let t = this.pos;
    // buf[0] = last, buf[k] = x[k-1]
    while (true) {
      const i = Math.floor(t);
      if (i + 1 > x.length) break;
      const a = i === 0 ? this.last : x[i - 1];
      const b = x[i];
      const f = t - i;
      out.push(a + (b - a) * f);
      t += this.step;
    }
    this.pos = t - x.length;
    if (x.length) this.last = x[x.length - 1];
    return out;
  }
}

export function pcm16Base64(samples) {
  const bytes = new Uint8Array(samples.length * 2);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < samples.length; i++) {
    const s = Math.max(-1, Math.min(1, samples[i]));
    view.setInt16(i * 2, s < 0 ? s * 0x8000 : s * 0x7fff, true);
  }
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

export function base64Pcm16(b64) {
  const bin = atob(b64);
  const n = bin.length >> 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let v = bin.charCodeAt(2 * i) | (bin.charCodeAt(2 * i + 1) << 8);
    if (v >= 0x8000) v -= 0x10000;
    out[i] = v / 32768;
  }
  return out;
}

export const CAPTURE_WORKLET = `
  class DuetCapture extends AudioWorkletProcessor {
    constructor() { super(); this.size = Math.round(sampleRate / 50); this.buf = new Float32Array(this.size); this.n = 0; }
    process(inputs) {
      const ch = inputs[0] && inputs[0][0];
      if (ch) {
        for (let i = 0; i < ch.length; i++) {
          this.buf[this.n++] = ch[i];
          if (this.n === this.size) { this.port.postMessage(this.buf, [this.buf.buffer]); this.buf = new Float32Array(this.size); this.n = 0; }
        }
      }
      return true;
    }
  }
  registerProcessor('duet-capture', DuetCapture);`;

export async function captureNode(ac, onSamples) {
  if (ac.audioWorklet && window.AudioWorkletNode) {
    try {
      if (!ac.duetWorklet) {
        const url = URL.createObjectURL(new Blob([CAPTURE_WORKLET], { type: 'text/javascript' }));
        await ac.audioWorklet.addModule(url);
        URL.revokeObjectURL(url);
        ac.duetWorklet = true;
      }
      const node = new AudioWorkletNode(ac, 'duet-capture', { numberOfInputs: 1, numberOfOutputs: 1, channelCount: 1 });
      node.port.onmessage = (m) => onSamples(m.data);
      return node;
    } catch (e) {
      console.warn('AudioWorklet unavailable, using ScriptProcessor', e);
    }
  }
  const node = ac.createScriptProcessor(2048, 1, 1);
  node.onaudioprocess = (e) => onSamples(new Float32Array(e.inputBuffer.getChannelData(0)));
  return node;
}

/** Plays PCM16 24 kHz chunks back to back; knows how much of each item was heard. */
export class Player {
  constructor(ac, dest) {
    this.ac = ac;
    this.dest = dest;
    this.segments = []; // { src, itemId, contentIndex, start, dur, offsetMs }
    this.nextTime = 0;
    this.itemMs = new Map(); // item id -> ms of audio queued so far
  }

  enqueue(itemId, contentIndex, b64) {
    const pcm = base64Pcm16(b64);
    if (!pcm.length) return;
    const buf = this.ac.createBuffer(1, pcm.length, RATE);
    buf.copyToChannel(pcm, 0);
    const src = this.ac.createBufferSource();
    src.buffer = buf;
    src.connect(this.dest);
    const start = Math.max(this.ac.currentTime + 0.04, this.nextTime);
    src.start(start);
    this.nextTime = start + buf.duration;
    const offsetMs = this.itemMs.get(itemId) || 0;
    this.itemMs.set(itemId, offsetMs + (pcm.length * 1000) / RATE);
    const seg = { src, itemId, contentIndex, start, dur: buf.duration, offsetMs };
    this.segments.push(seg);
    src.onended = () => {
      const i = this.segments.indexOf(seg);
      if (i >= 0) this.segments.splice(i, 1);
      if (!this.busy() && duet.activity === 'speaking' && !duet.activeResponse) setActivity('listening');
    };
  }

  busy() {
    return this.segments.length > 0;
  }

  /** Stops everything queued; returns what was heard of the item playing, or null. */
  flush() {
    if (!this.segments.length) return null;
    const t = this.ac.currentTime;
    const first = this.segments[0];
    let heard = first.offsetMs; // everything before the oldest queued chunk has played
    for (const s of this.segments) {
      if (s.itemId !== first.itemId || t < s.start) continue;
      heard = Math.max(heard, s.offsetMs + Math.min(s.dur, t - s.start) * 1000);
    }
    for (const s of this.segments) {
      s.src.onended = null;
      try { s.src.stop(); } catch (_) { /* not started */ }
      s.src.disconnect();
    }
    this.segments = [];
    this.nextTime = 0;
    return { itemId: first.itemId, contentIndex: first.contentIndex, playedMs: Math.floor(heard) };
  }
}

/** WebSocket interruption: stop local audio and tell the server what was heard. */
export function interruptPlayback() {
  if (!conn || !conn.player) return;
  if (duet.activeResponse) conn.silenced = duet.activeResponse;
  const cut = conn.player.flush();
  if (cut) {
    send({ type: 'conversation.item.truncate', item_id: cut.itemId, content_index: cut.contentIndex, audio_end_ms: cut.playedMs });
  }
}

export async function diagnoseWebSocket() {
  // The browser hides the HTTP status of a refused WebSocket; ask a plain route instead.
  try {
    const headers = apiKey() ? { Authorization: `Bearer ${apiKey()}` } : {};
    const res = await fetch('/ready', { headers });
    if (res.status === 401) return httpError(res);
    if (res.status === 503) return new UserError('The server is not ready yet (the model is warming up); try again shortly.', { kind: 'warn' });
  } catch (_) {
    return new UserError('Could not reach the server.');
  }
  return new UserError('The WebSocket was refused or closed before it opened (the server may be at --max-sessions).');
}

export async function connectWebSocket(c) {
  const ac = audioContext();
  const resampler = new Resampler(ac.sampleRate, RATE);
  let pending = [];
  c.capture = await captureNode(ac, (samples) => {
    if (!c.ws || c.ws.readyState !== WebSocket.OPEN) return;
    const out = resampler.process(c.muted ? new Float32Array(samples.length) : samples);
    for (let i = 0; i < out.length; i++) pending.push(out[i]);
    while (pending.length >= APPEND_SAMPLES) {
      const chunk = pending.slice(0, APPEND_SAMPLES);
      pending = pending.slice(APPEND_SAMPLES);
      send({ type: 'input_audio_buffer.append', audio: pcm16Base64(chunk) });
    }
  });
  c.sink = ac.createGain();
  c.sink.gain.value = 0; // the capture node must be pulled, but must not be heard
  c.capture.connect(c.sink);
  c.sink.connect(ac.destination);
  c.micSource.connect(c.capture);

  c.outGain = ac.createGain();
  c.outGain.connect(outAnalyser);
  c.outGain.connect(ac.destination);
  c.outConnected = true;
  c.player = new Player(ac, c.outGain);

  const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
  const model = (duet.modelId || 'echo');
  const protocols = ['realtime'];
  if (apiKey()) protocols.push(`openai-insecure-api-key.${apiKey()}`);
  const ws = new WebSocket(`${scheme}://${location.host}/v1/realtime?model=${encodeURIComponent(model)}`, protocols);
  c.ws = ws;
  await new Promise((resolve, reject) => {
    ws.onopen = () => resolve();
    ws.onerror = () => {};
    ws.onclose = async () => reject(await diagnoseWebSocket());
  });
  if (conn !== c) { ws.close(); return; }
  setState('connected', 'WebSocket');
  ws.onmessage = (m) => {
    let ev;
    try { ev = JSON.parse(m.data); } catch (_) { return; }
    if (conn === c) onServerEvent(ev);
  };
  ws.onclose = (e) => {
    if (conn !== c) return;
    const why = e.code === 1000 ? 'The server closed the session.' : `The connection closed (code ${e.code}${e.reason ? `: ${e.reason}` : ''}).`;
    showNotice(e.code === 1000 ? 'info' : 'error', why);
    teardown(c, { hangup: false });
  };
}
