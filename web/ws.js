// ---------------------------------------------------------------------------------------
// WebSocket transport: capture, the socket and its events (the PCM codec is in pcm.js,
// playback in playback.js).

import { RATE, APPEND_SAMPLES, duet, conn, UserError, apiKey } from './state.js';
import { setState, showNotice, httpError } from './ui.js';
import { outAnalyser, audioContext } from './audio.js';
import { send } from './log.js';
import { onServerEvent } from './events.js';
import { teardown } from './session.js';
import { Resampler, pcm16Base64 } from './pcm.js';
import { Player } from './playback.js';

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
  const ws = new WebSocket(`${scheme}://${location.host}/v1/realtime?model=${encodeURIComponent(model)}&turn_events=1`, protocols);
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
