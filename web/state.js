// Shared state of the demo page: the elements, the `window.duet` test hook, the live
// connection and small helpers.

export const $ = (id) => document.getElementById(id);
export const T0 = performance.now();
/** Milliseconds since the page loaded: the clock of the log, the turns and the levels. */
export const now = () => Math.round((performance.now() - T0) * 10) / 10;

export const RATE = 24000; // the Realtime API's PCM rate
export const APPEND_SAMPLES = 960; // 40 ms at 24 kHz per input_audio_buffer.append
export const MAX_LOG_ROWS = 600;
export const MAX_HOOK_LOG = 50000; // window.duet.log keeps this many events
export const LEVEL_EVERY_MS = 50;
export const MAX_LEVELS = 4000;

export const el = {
  connect: $('connect'), interrupt: $('interrupt'), mute: $('mute'), mic: $('mic'), aec: $('aec'),
  key: $('api-key'), state: $('state'), stateText: $('state-text'), model: $('model'),
  activity: $('activity'), meterIn: $('meter-in'), meterOut: $('meter-out'),
  meterVad: $('meter-vad'), vadDetector: $('vad-detector'),
  turns: $('turns'), latencySummary: $('latency-summary'), notice: $('notice'),
  transcript: $('transcript'), composer: $('composer'), text: $('text'), send: $('send'),
  levels: $('levels'), log: $('log'), eventCount: $('event-count'), follow: $('follow'), audio: $('remote-audio'),
  clearLog: $('clear-log'), clearTranscript: $('clear-transcript'), instructions: $('instructions'),
  turnDetection: $('turn-detection'), eagerness: $('eagerness'), turnMode: $('turn-mode'), decisions: $('decisions'),
};

// ---------------------------------------------------------------------------------------
// The test hook and the page's state.

export const levels = { input: [], output: [], inputMax: 0, outputMax: 0 };
export const counts = { in: 0, out: 0 };
export const duet = {
  /** 'idle' | 'connecting' | 'connected' | 'closing' | 'failed' */
  state: 'idle',
  /** 'webrtc' | 'websocket' while connected */
  transport: null,
  /** what the conversation is doing: 'idle' | 'listening' | 'user-speaking' | 'thinking' | 'speaking' */
  activity: 'idle',
  callId: null,
  session: null,
  activeResponse: null,
  /** true once the model opened a response by itself (`response.speak`): a full-duplex model
   *  that decides when to speak, so the end of the user's speech does not mean "thinking" */
  duplex: false,
  /** every event: { dir: 'out' | 'in', t (ms since load), type, event (audio payloads elided) } */
  log: [],
  /** one entry per bubble: { role, itemId, kind: 'audio' | 'text', text, status } */
  transcripts: [],
  /** one entry per turn: { n, kind: 'voice' | 'text', userItemId, responseId, t0, firstAudioAt, latencyMs, status } */
  turns: [],
  /** notices shown: { kind, text, t } */
  notices: [],
  /** the turn detector's decisions (turn.scored, turn.overlap): { kind: 'pause' | 'backchannel' | 'interruption', decision, probability, text, score, detail } */
  decisions: [],
  /** whether the page uses a client secret the server minted for it (--demo-mint-secrets) */
  demoSecret: false,
  /** ICE restarts of the live call (PATCH): how many, and the peer connection's state */
  iceRestarts: { count: 0, state: null },
  /** Restarts ICE on the live WebRTC call now (test hook; the page also does it by itself
   *  when the connection stays `disconnected` for 3 s). */
  restartIce: null,
  stats() {
    const hist = (h) => h.map((p) => [p.t, p.rms]);
    return {
      events: counts.in + counts.out,
      sent: counts.out,
      received: counts.in,
      input: { maxRms: levels.inputMax, history: hist(levels.input) },
      output: { maxRms: levels.outputMax, history: hist(levels.output) },
      turns: this.turns.length,
      latencies: this.turns.filter((t) => t.latencyMs != null).map((t) => t.latencyMs),
    };
  },
};
window.duet = duet;

/** The live connection (null when idle). */
export let conn = null;

/** Replaces the live connection (the binding above is read-only to importers). */
export function setConn(c) {
  conn = c;
}

export class UserError extends Error {
  constructor(message, { html = null, kind = 'error', focus = null } = {}) {
    super(message);
    this.html = html;
    this.kind = kind;
    this.focus = focus;
  }
}

export const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => (
  { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

export function fmtClock(ms) {
  const s = ms / 1000;
  const m = Math.floor(s / 60);
  return `${String(m).padStart(2, '0')}:${(s - m * 60).toFixed(3).padStart(6, '0')}`;
}

export function fmtMs(ms) {
  return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
}

export function transportChoice() {
  return document.querySelector('input[name="transport"]:checked').value;
}

/** A client secret the server minted for this page (`--demo-mint-secrets`). */
let demoKey = null;

export function setDemoKey(k) {
  demoKey = k;
}

/** The key the page uses: the one typed in the box, else the demo's minted secret. */
export function apiKey() {
  return el.key.value.trim() || demoKey || '';
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}
