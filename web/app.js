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
// Test hook: window.duet = { state, log, transcripts, turns, stats() }.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const T0 = performance.now();
  /** Milliseconds since the page loaded: the clock of the log, the turns and the levels. */
  const now = () => Math.round((performance.now() - T0) * 10) / 10;

  const RATE = 24000; // the Realtime API's PCM rate
  const APPEND_SAMPLES = 960; // 40 ms at 24 kHz per input_audio_buffer.append
  const MAX_LOG_ROWS = 600;
  const MAX_HOOK_LOG = 50000; // window.duet.log keeps this many events
  const LEVEL_EVERY_MS = 50;
  const MAX_LEVELS = 4000;

  const el = {
    connect: $('connect'), interrupt: $('interrupt'), mute: $('mute'), mic: $('mic'),
    key: $('api-key'), state: $('state'), stateText: $('state-text'), model: $('model'),
    activity: $('activity'), meterIn: $('meter-in'), meterOut: $('meter-out'),
    turns: $('turns'), latencySummary: $('latency-summary'), notice: $('notice'),
    transcript: $('transcript'), composer: $('composer'), text: $('text'), send: $('send'),
    levels: $('levels'), log: $('log'), eventCount: $('event-count'), follow: $('follow'), audio: $('remote-audio'),
    clearLog: $('clear-log'), clearTranscript: $('clear-transcript'),
  };

  // ---------------------------------------------------------------------------------------
  // The test hook and the page's state.

  const levels = { input: [], output: [], inputMax: 0, outputMax: 0 };
  const counts = { in: 0, out: 0 };
  const duet = {
    /** 'idle' | 'connecting' | 'connected' | 'closing' | 'failed' */
    state: 'idle',
    /** 'webrtc' | 'websocket' while connected */
    transport: null,
    /** what the conversation is doing: 'idle' | 'listening' | 'user-speaking' | 'thinking' | 'speaking' */
    activity: 'idle',
    callId: null,
    session: null,
    activeResponse: null,
    /** every event: { dir: 'out' | 'in', t (ms since load), type, event (audio payloads elided) } */
    log: [],
    /** one entry per bubble: { role, itemId, kind: 'audio' | 'text', text, status } */
    transcripts: [],
    /** one entry per turn: { n, kind: 'voice' | 'text', userItemId, responseId, t0, firstAudioAt, latencyMs, status } */
    turns: [],
    /** notices shown: { kind, text, t } */
    notices: [],
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
  let conn = null;
  /** One AudioContext for the page, created on the first Connect (a user gesture). */
  let ctx = null;
  let inAnalyser = null;
  let outAnalyser = null;

  // ---------------------------------------------------------------------------------------
  // Small helpers.

  // Inline icons (no emoji font needed).
  const ICON = {
    mic: '<svg class="icon" viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M12 14.5a3.5 3.5 0 0 0 3.5-3.5V5a3.5 3.5 0 0 0-7 0v6a3.5 3.5 0 0 0 3.5 3.5zm6-3.5a6 6 0 0 1-12 0H4.2a7.8 7.8 0 0 0 6.9 7.75V21h1.8v-2.25A7.8 7.8 0 0 0 19.8 11H18z"/></svg>',
    keyboard: '<svg class="icon" viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M3 6.5A1.5 1.5 0 0 1 4.5 5h15A1.5 1.5 0 0 1 21 6.5v11a1.5 1.5 0 0 1-1.5 1.5h-15A1.5 1.5 0 0 1 3 17.5v-11zM6 8v2h2V8H6zm3.5 0v2h2V8h-2zM13 8v2h2V8h-2zm3.5 0v2h2V8h-2zM6 11.5v2h2v-2H6zm3.5 0v2h2v-2h-2zm3.5 0v2h2v-2h-2zm3.5 0v2h2v-2h-2zM7.5 15v1.8h9V15h-9z"/></svg>',
  };

  class UserError extends Error {
    constructor(message, { html = null, kind = 'error', focus = null } = {}) {
      super(message);
      this.html = html;
      this.kind = kind;
      this.focus = focus;
    }
  }

  const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => (
    { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

  function fmtClock(ms) {
    const s = ms / 1000;
    const m = Math.floor(s / 60);
    return `${String(m).padStart(2, '0')}:${(s - m * 60).toFixed(3).padStart(6, '0')}`;
  }

  function fmtMs(ms) {
    return ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${Math.round(ms)} ms`;
  }

  function transportChoice() {
    return document.querySelector('input[name="transport"]:checked').value;
  }

  function apiKey() {
    return el.key.value.trim();
  }

  function sleep(ms) {
    return new Promise((r) => setTimeout(r, ms));
  }

  // ---------------------------------------------------------------------------------------
  // Connection state, activity, notices.

  const STATE_TEXT = {
    idle: 'Disconnected', connecting: 'Connecting…', connected: 'Connected',
    closing: 'Disconnecting…', failed: 'Connection failed',
  };

  function setState(state, detail) {
    duet.state = state;
    el.state.dataset.state = state;
    el.stateText.textContent = detail ? `${STATE_TEXT[state]} · ${detail}` : STATE_TEXT[state];
    const live = state === 'connected';
    const busy = state === 'connecting' || state === 'closing';
    el.connect.disabled = state === 'closing';
    el.connect.classList.toggle('danger', live || state === 'connecting');
    el.connect.querySelector('.btn-label').textContent = live || state === 'connecting' ? 'Disconnect' : 'Connect';
    el.connect.setAttribute('aria-pressed', String(live));
    el.interrupt.disabled = !live;
    el.mute.disabled = !live;
    el.text.disabled = !live;
    el.send.disabled = !live;
    document.querySelectorAll('input[name="transport"]').forEach((r) => { r.disabled = live || busy; });
    if (!live) setActivity('idle');
    document.body.dataset.state = state;
  }

  const ACTIVITY_TEXT = {
    idle: 'Not connected', listening: 'Listening — say something',
    'user-speaking': 'Hearing you…', thinking: 'Thinking…', speaking: 'Duet is speaking — talk over it to interrupt',
  };

  function setActivity(a) {
    if (a !== 'idle' && duet.state !== 'connected') return;
    duet.activity = a;
    el.activity.textContent = ACTIVITY_TEXT[a];
    document.body.dataset.activity = a;
    el.interrupt.classList.toggle('attention', a === 'speaking');
  }

  function showNotice(kind, text, html) {
    duet.notices.push({ kind, text, t: now() });
    el.notice.hidden = false;
    el.notice.dataset.kind = kind;
    el.notice.innerHTML = `<div class="notice-body">${html || escapeHtml(text)}</div>`
      + '<button type="button" class="notice-close" aria-label="Dismiss">×</button>';
    el.notice.querySelector('.notice-close').onclick = hideNotice;
  }

  function hideNotice() {
    el.notice.hidden = true;
    el.notice.innerHTML = '';
  }

  function showError(err) {
    if (err instanceof UserError) {
      showNotice(err.kind, err.message, err.html);
      if (err.focus) err.focus.focus();
    } else {
      showNotice('error', String(err && err.message ? err.message : err));
    }
    console.error(err);
  }

  // ---------------------------------------------------------------------------------------
  // Audio: context, meters, level history.

  function audioContext() {
    if (!ctx) {
      const AC = window.AudioContext || window.webkitAudioContext;
      ctx = new AC();
      inAnalyser = ctx.createAnalyser();
      inAnalyser.fftSize = 1024;
      outAnalyser = ctx.createAnalyser();
      outAnalyser.fftSize = 1024;
    }
    if (ctx.state === 'suspended') ctx.resume().catch(() => {});
    return ctx;
  }

  const scratch = new Float32Array(1024);
  function rmsOf(analyser) {
    analyser.getFloatTimeDomainData(scratch);
    let sum = 0;
    for (let i = 0; i < scratch.length; i++) sum += scratch[i] * scratch[i];
    return Math.sqrt(sum / scratch.length);
  }

  function setMeter(meter, rms) {
    // -60 dBFS .. 0 dBFS onto 0..100 %.
    const db = 20 * Math.log10(Math.max(rms, 1e-6));
    const pct = Math.max(0, Math.min(100, ((db + 60) / 60) * 100));
    meter.firstElementChild.style.width = `${pct.toFixed(1)}%`;
    meter.setAttribute('aria-valuenow', String(Math.round(pct)));
  }

  function sampleLevels() {
    if (!ctx || !conn) return;
    const t = now();
    const rin = conn.micSource ? rmsOf(inAnalyser) : 0;
    const rout = conn.outConnected ? rmsOf(outAnalyser) : 0;
    levels.input.push({ t, rms: Math.round(rin * 1e5) / 1e5 });
    levels.output.push({ t, rms: Math.round(rout * 1e5) / 1e5 });
    if (levels.input.length > MAX_LEVELS) levels.input.shift();
    if (levels.output.length > MAX_LEVELS) levels.output.shift();
    levels.inputMax = Math.max(levels.inputMax, rin);
    levels.outputMax = Math.max(levels.outputMax, rout);
    setMeter(el.meterIn, conn.muted ? 0 : rin);
    setMeter(el.meterOut, rout);
    drawLevels(t);
  }

  /** The level history as a mirrored strip: you above the centre line, Duet below. */
  const HISTORY_MS = 15000;
  function drawLevels(tNow) {
    const canvas = el.levels;
    const dpr = window.devicePixelRatio || 1;
    const w = Math.max(1, Math.round(canvas.clientWidth * dpr));
    const h = Math.max(1, Math.round(canvas.clientHeight * dpr));
    if (canvas.width !== w) canvas.width = w;
    if (canvas.height !== h) canvas.height = h;
    const g = canvas.getContext('2d');
    const css = getComputedStyle(document.documentElement);
    g.clearRect(0, 0, w, h);
    g.fillStyle = css.getPropertyValue('--border').trim() || '#ccc';
    g.fillRect(0, Math.floor(h / 2), w, Math.max(1, Math.round(dpr)));
    const level = (rms) => Math.max(0, Math.min(1, (20 * Math.log10(Math.max(rms, 1e-6)) + 60) / 60));
    const strip = (hist, color, up) => {
      g.fillStyle = color;
      const barW = Math.max(1, (w * LEVEL_EVERY_MS) / HISTORY_MS);
      for (let i = hist.length - 1; i >= 0; i--) {
        const p = hist[i];
        const x = w - ((tNow - p.t) / HISTORY_MS) * w;
        if (x < -barW) break;
        const bh = level(p.rms) * (h / 2 - 2 * dpr);
        if (bh < 0.5) continue;
        g.fillRect(x, up ? h / 2 - bh : h / 2 + dpr, barW + 0.5, bh);
      }
    };
    strip(levels.input, css.getPropertyValue('--accent').trim(), true);
    strip(levels.output, css.getPropertyValue('--accent-2').trim(), false);
  }
  setInterval(sampleLevels, LEVEL_EVERY_MS);

  // ---------------------------------------------------------------------------------------
  // Microphone and the device picker.

  const MIC_CONSTRAINTS = { echoCancellation: true, noiseSuppression: true, autoGainControl: true, channelCount: 1 };

  async function openMic(deviceId) {
    if (!window.isSecureContext || !navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      const host = escapeHtml(location.host);
      throw new UserError('The microphone needs HTTPS or localhost.', {
        html: '<strong>The microphone needs a secure page.</strong> Browsers only allow it on HTTPS or on '
          + '<code>http://localhost</code>. Open this page as <code>http://localhost:PORT/</code>, for example '
          + `through an SSH tunnel (<code>ssh -L 8080:127.0.0.1:8080 ${host.split(':')[0]}</code>), or put the `
          + 'server behind TLS.',
      });
    }
    const audio = { ...MIC_CONSTRAINTS };
    if (deviceId) audio.deviceId = { exact: deviceId };
    try {
      return await navigator.mediaDevices.getUserMedia({ audio });
    } catch (e) {
      if (e.name === 'NotAllowedError' || e.name === 'SecurityError') {
        throw new UserError('Microphone access was denied.', {
          html: '<strong>Microphone access was denied.</strong> Click the microphone (or lock) icon in the '
            + 'address bar, allow the microphone for this site, then press Connect again. If no prompt '
            + 'appears, check the browser\'s site settings and your system\'s privacy settings.',
        });
      }
      if (e.name === 'NotFoundError' || e.name === 'OverconstrainedError') {
        throw new UserError('No microphone was found.', {
          html: '<strong>No microphone was found.</strong> Plug one in (or pick another in the list) and press Connect again.',
        });
      }
      if (e.name === 'NotReadableError') {
        throw new UserError('The microphone is busy or failed to start (another application may hold it).');
      }
      throw e;
    }
  }

  async function refreshDevices() {
    if (!navigator.mediaDevices || !navigator.mediaDevices.enumerateDevices) return;
    const devices = (await navigator.mediaDevices.enumerateDevices()).filter((d) => d.kind === 'audioinput');
    if (!devices.length || !devices[0].label) return; // labels appear only after permission
    const current = conn && conn.mic ? conn.mic.getAudioTracks()[0].getSettings().deviceId : el.mic.value;
    el.mic.innerHTML = '';
    devices.forEach((d, i) => {
      const o = document.createElement('option');
      o.value = d.deviceId;
      o.textContent = d.label || `Microphone ${i + 1}`;
      if (d.deviceId === current) o.selected = true;
      el.mic.appendChild(o);
    });
    el.mic.disabled = false;
  }
  if (navigator.mediaDevices && navigator.mediaDevices.addEventListener) {
    navigator.mediaDevices.addEventListener('devicechange', () => refreshDevices().catch(() => {}));
  }

  /** Routes the mic into the input meter (and, on WebSocket, into the capture node). */
  function attachMic(c, stream) {
    const ac = audioContext();
    if (c.micSource) c.micSource.disconnect();
    c.micSource = ac.createMediaStreamSource(stream);
    c.micSource.connect(inAnalyser);
    if (c.capture) c.micSource.connect(c.capture);
  }

  async function switchMic(deviceId) {
    if (!conn || !conn.mic) return; // used on the next Connect
    const fresh = await openMic(deviceId);
    const track = fresh.getAudioTracks()[0];
    track.enabled = !conn.muted;
    if (conn.sender) await conn.sender.replaceTrack(track);
    conn.mic.getTracks().forEach((t) => t.stop());
    conn.mic = fresh;
    attachMic(conn, fresh);
  }

  // ---------------------------------------------------------------------------------------
  // The event log (folded deltas) and sending.

  let logRows = 0;
  let lastRow = null;
  let openAppendRow = null;
  let rowsSinceAppend = 0;

  /** Copies an event with audio payloads replaced by their size, so the log stays small. */
  function slim(ev) {
    const out = { ...ev };
    if (typeof out.audio === 'string' && out.audio.length > 64) out.audio = `<base64 ${out.audio.length} chars>`;
    if (ev.type === 'response.output_audio.delta' && typeof out.delta === 'string') {
      out.delta = `<base64 ${out.delta.length} chars>`;
    }
    return out;
  }

  function foldKey(dir, ev) {
    const t = ev.type || '';
    if (!t.endsWith('.delta') && t !== 'input_audio_buffer.append') return null;
    return `${dir} ${t} ${ev.item_id || ev.response_id || ''}`;
  }

  function brief(ev) {
    switch (ev.type) {
      case 'session.created': case 'session.updated':
        return ev.session ? `${ev.session.model || ''} ${(ev.session.output_modalities || []).join('+')}` : '';
      case 'error': return ev.error ? `${ev.error.code || ev.error.type}: ${ev.error.message}` : '';
      case 'input_audio_buffer.speech_started': return `at ${ev.audio_start_ms} ms`;
      case 'input_audio_buffer.speech_stopped': return `at ${ev.audio_end_ms} ms`;
      case 'response.done': {
        const r = ev.response || {};
        const why = r.status_details && r.status_details.reason ? ` (${r.status_details.reason})` : '';
        return `${r.status}${why}`;
      }
      case 'response.output_audio_transcript.done': return ev.transcript || '';
      case 'response.output_text.done': return ev.text || '';
      case 'conversation.item.added': case 'conversation.item.done': case 'conversation.item.create': {
        const it = ev.item || {};
        return [it.role || it.type, it.id].filter(Boolean).join(' ');
      }
      case 'conversation.item.truncate': case 'conversation.item.truncated': return `at ${ev.audio_end_ms} ms`;
      case 'conversation.item.input_audio_transcription.completed': return ev.transcript || '';
      default: return '';
    }
  }

  function category(type) {
    if (type === 'error') return 'error';
    if (type.startsWith('input_audio_buffer.')) return 'input';
    if (type.startsWith('output_audio_buffer.')) return 'output';
    if (type.startsWith('response.')) return 'response';
    if (type.startsWith('session.')) return 'session';
    return 'item';
  }

  function logEvent(dir, ev) {
    const t = now();
    const s = slim(ev);
    duet.log.push({ dir, t, type: ev.type, event: s });
    if (duet.log.length > MAX_HOOK_LOG) duet.log.splice(0, duet.log.length - MAX_HOOK_LOG);
    counts[dir] += 1;
    el.eventCount.textContent = `${counts.in + counts.out} events`;

    const key = foldKey(dir, ev);
    let row = null;
    if (key && lastRow && lastRow.key === key) row = lastRow;
    else if (ev.type === 'input_audio_buffer.append' && openAppendRow && rowsSinceAppend < 40) row = openAppendRow;
    if (dir === 'out' && ev.type !== 'input_audio_buffer.append') openAppendRow = null;

    if (row) {
      row.count += 1;
      row.last = s;
      if (typeof ev.delta === 'string' && ev.type !== 'response.output_audio.delta') row.text += ev.delta;
      row.countEl.textContent = `×${row.count}`;
      row.briefEl.textContent = row.text ? row.text.slice(-90) : '';
      if (row.details.open) renderJson(row);
      return;
    }

    const li = document.createElement('li');
    li.className = `ev ${dir} cat-${category(ev.type || '')}`;
    li.dataset.type = ev.type || '?';
    li.dataset.dir = dir;
    const details = document.createElement('details');
    const summary = document.createElement('summary');
    const arrow = dir === 'out' ? '→' : '←';
    summary.innerHTML = `<span class="dir" title="${dir === 'out' ? 'sent' : 'received'}">${arrow}</span>`
      + `<time>${fmtClock(t)}</time><span class="type"></span><span class="count"></span><span class="brief"></span>`;
    summary.querySelector('.type').textContent = ev.type || '?';
    details.appendChild(summary);
    li.appendChild(details);
    const r = {
      key, li, details, count: 1, first: s, last: s,
      text: typeof ev.delta === 'string' && ev.type !== 'response.output_audio.delta' ? ev.delta : '',
      countEl: summary.querySelector('.count'), briefEl: summary.querySelector('.brief'), pre: null,
    };
    r.briefEl.textContent = r.text || brief(ev);
    details.addEventListener('toggle', () => { if (details.open) renderJson(r); });
    el.log.appendChild(li);
    lastRow = r;
    if (ev.type === 'input_audio_buffer.append') { openAppendRow = r; rowsSinceAppend = 0; } else rowsSinceAppend += 1;
    logRows += 1;
    if (logRows > MAX_LOG_ROWS) { el.log.firstElementChild.remove(); logRows -= 1; }
    if (el.follow.checked) el.log.scrollTop = el.log.scrollHeight;
  }

  function renderJson(r) {
    if (!r.pre) {
      r.pre = document.createElement('pre');
      r.details.appendChild(r.pre);
    }
    const note = r.count > 1 ? `// ${r.count} events folded; the last one:\n` : '';
    const text = r.text && r.count > 1 ? `// text so far: ${JSON.stringify(r.text)}\n` : '';
    r.pre.textContent = note + text + JSON.stringify(r.last, null, 2);
  }

  function send(ev) {
    if (!conn) return false;
    const text = JSON.stringify(ev);
    if (conn.kind === 'webrtc') {
      if (!conn.dc || conn.dc.readyState !== 'open') return false;
      conn.dc.send(text);
    } else {
      if (!conn.ws || conn.ws.readyState !== WebSocket.OPEN) return false;
      conn.ws.send(text);
    }
    logEvent('out', ev);
    return true;
  }

  // ---------------------------------------------------------------------------------------
  // Transcripts (bubbles) and turns (latency).

  const bubbles = new Map(); // item id -> { entry, node, textEl, metaEl }

  function bubble(itemId, role, kind) {
    let b = bubbles.get(itemId);
    if (b) return b;
    const empty = el.transcript.querySelector('.empty');
    if (empty) empty.remove();
    const node = document.createElement('div');
    node.className = `msg ${role}`;
    node.dataset.itemId = itemId;
    node.dataset.role = role;
    node.innerHTML = '<div class="meta"><span class="who"></span><time></time><span class="badges"></span></div><p class="text"></p>';
    node.querySelector('.who').textContent = role === 'user' ? 'You' : 'Duet';
    node.querySelector('time').textContent = new Date().toLocaleTimeString();
    const entry = { role, itemId, kind, text: '', status: 'in_progress' };
    duet.transcripts.push(entry);
    b = { entry, node, textEl: node.querySelector('.text'), badges: node.querySelector('.badges') };
    bubbles.set(itemId, b);
    el.transcript.appendChild(node);
    el.transcript.scrollTop = el.transcript.scrollHeight;
    return b;
  }

  /** Sets a bubble's text; a placeholder (a user turn without transcript) gets a mic icon. */
  function setBubbleText(b, text, { placeholder = false } = {}) {
    b.entry.text = placeholder ? `🎤 ${text}` : text;
    if (placeholder) b.textEl.innerHTML = `${ICON.mic}<span></span>`;
    else b.textEl.innerHTML = '<span></span>';
    b.textEl.lastElementChild.textContent = text;
    b.node.classList.toggle('placeholder', placeholder);
    el.transcript.scrollTop = el.transcript.scrollHeight;
  }

  function addBadge(b, cls, text, title) {
    let s = b.badges.querySelector(`.${cls}`);
    if (!s) {
      s = document.createElement('span');
      s.className = `badge ${cls}`;
      b.badges.appendChild(s);
    }
    s.textContent = text;
    if (title) s.title = title;
  }

  function newTurn(kind, t0, userItemId) {
    const turn = {
      n: duet.turns.length + 1, kind, userItemId: userItemId || null, responseId: null,
      t0, firstAudioAt: null, latencyMs: null, status: 'waiting',
    };
    duet.turns.push(turn);
    renderTurns();
    return turn;
  }

  function firstAudio(responseId) {
    const turn = duet.turns.find((t) => t.responseId === responseId);
    if (!turn || turn.firstAudioAt != null) return;
    turn.firstAudioAt = now();
    turn.latencyMs = Math.round(turn.firstAudioAt - turn.t0);
    turn.status = 'answered';
    renderTurns();
    const b = [...bubbles.values()].find((x) => x.responseId === responseId);
    if (b) addBadge(b, 'latency', `⚡ ${fmtMs(turn.latencyMs)}`, turn.kind === 'voice' ? 'speech end → first audio' : 'send → first audio');
  }

  function renderTurns() {
    el.turns.innerHTML = '';
    for (const t of duet.turns.slice(-8)) {
      const li = document.createElement('li');
      li.dataset.turn = String(t.n);
      const icon = t.kind === 'voice' ? ICON.mic : ICON.keyboard;
      const what = t.kind === 'voice' ? 'speech end → first audio' : 'send → first audio';
      const value = t.latencyMs != null ? fmtMs(t.latencyMs) : (t.status === 'cancelled' ? 'cancelled' : '…');
      li.innerHTML = `<span class="turn-n">#${t.n}</span><span class="turn-kind" title="${what}">${icon} ${t.kind}</span>`
        + `<span class="turn-ms${t.latencyMs != null ? '' : ' pending'}"></span>`;
      li.querySelector('.turn-ms').textContent = value;
      el.turns.appendChild(li);
    }
    const voice = duet.turns.filter((t) => t.kind === 'voice' && t.latencyMs != null).map((t) => t.latencyMs);
    if (!voice.length) {
      el.latencySummary.textContent = duet.turns.length ? 'Waiting for a spoken turn…' : 'No turns yet';
      return;
    }
    const sorted = [...voice].sort((a, b) => a - b);
    const median = sorted[Math.floor(sorted.length / 2)];
    el.latencySummary.innerHTML = `<span class="big">${fmtMs(voice[voice.length - 1])}</span>`
      + `last spoken turn · median ${fmtMs(median)} over ${voice.length}`;
  }

  /**
   * Seconds of speech in a VAD turn. audio_start_ms includes the prefix padding and
   * audio_end_ms the trailing silence the VAD waited for, so both are taken off when the
   * session says how long they are.
   */
  function speechSecs(startMs, endMs) {
    if (startMs == null || endMs == null) return null;
    let ms = endMs - startMs;
    const td = duet.session && duet.session.audio && duet.session.audio.input && duet.session.audio.input.turn_detection;
    if (td && td.type === 'server_vad') {
      const net = ms - (td.prefix_padding_ms || 0) - (td.silence_duration_ms || 0);
      if (net >= 100) ms = net;
    }
    return ms / 1000;
  }

  // ---------------------------------------------------------------------------------------
  // Server events.

  function onServerEvent(ev) {
    logEvent('in', ev);
    const c = conn;
    switch (ev.type) {
      case 'session.created':
      case 'session.updated':
        duet.session = ev.session;
        if (ev.session && ev.session.model) el.model.textContent = `model: ${ev.session.model}`;
        if (ev.type === 'session.created') setActivity('listening');
        break;

      case 'input_audio_buffer.speech_started': {
        const b = bubble(ev.item_id, 'user', 'audio');
        b.startMs = ev.audio_start_ms;
        setBubbleText(b, '…', { placeholder: true });
        setActivity('user-speaking');
        if (c && c.kind === 'websocket') interruptPlayback(); // server VAD barge-in: flush + truncate
        break;
      }
      case 'input_audio_buffer.speech_stopped': {
        const b = bubble(ev.item_id, 'user', 'audio');
        b.endMs = ev.audio_end_ms;
        if (!b.transcribed) {
          const secs = speechSecs(b.startMs, ev.audio_end_ms);
          setBubbleText(b, secs != null ? `${secs.toFixed(1)} s of speech` : 'speech', { placeholder: true });
          b.textEl.title = `audio_start_ms ${b.startMs} → audio_end_ms ${ev.audio_end_ms}`;
        }
        const turn = newTurn('voice', now(), ev.item_id);
        turn.status = 'waiting';
        setActivity('thinking');
        break;
      }
      case 'input_audio_buffer.committed': {
        if (!bubbles.has(ev.item_id)) setBubbleText(bubble(ev.item_id, 'user', 'audio'), 'speech', { placeholder: true });
        break;
      }
      case 'conversation.item.added': {
        const it = ev.item || {};
        if (it.type === 'message' && it.role === 'user') {
          const textPart = (it.content || []).find((p) => p.type === 'input_text');
          if (textPart) setBubbleText(bubble(it.id, 'user', 'text'), textPart.text);
          else if (!bubbles.has(it.id)) setBubbleText(bubble(it.id, 'user', 'audio'), 'speech', { placeholder: true });
        }
        break;
      }
      case 'conversation.item.input_audio_transcription.delta': {
        const b = bubble(ev.item_id, 'user', 'audio');
        if (!b.transcribed) { b.transcribed = true; b.entry.text = ''; }
        setBubbleText(b, b.entry.text + (ev.delta || ''));
        break;
      }
      case 'conversation.item.input_audio_transcription.completed': {
        const b = bubble(ev.item_id, 'user', 'audio');
        b.transcribed = true;
        setBubbleText(b, ev.transcript || '');
        b.entry.status = 'completed';
        break;
      }
      case 'conversation.item.input_audio_transcription.failed': {
        const b = bubbles.get(ev.item_id);
        if (b) addBadge(b, 'note', 'no ASR', (ev.error && ev.error.message) || 'transcription failed');
        break;
      }

      case 'response.created': {
        const id = ev.response && ev.response.id;
        duet.activeResponse = id;
        // A voice turn (speech_stopped) or a text turn (response.create) waiting for its answer.
        const turn = [...duet.turns].reverse().find((t) => !t.responseId && t.status === 'waiting');
        if (turn) turn.responseId = id;
        if (duet.activity !== 'user-speaking') setActivity('thinking');
        break;
      }
      case 'response.output_item.added': {
        const it = ev.item || {};
        if (it.type === 'message' && it.role === 'assistant') {
          const b = bubble(it.id, 'assistant', 'audio');
          b.responseId = ev.response_id;
          setBubbleText(b, '');
        }
        break;
      }
      case 'response.output_audio_transcript.delta':
      case 'response.output_text.delta': {
        const b = bubble(ev.item_id, 'assistant', ev.type.includes('text.') ? 'text' : 'audio');
        if (!b.responseId) b.responseId = ev.response_id;
        setBubbleText(b, b.entry.text + (ev.delta || ''));
        if (ev.type === 'response.output_text.delta') setActivity('speaking');
        break;
      }
      case 'response.output_audio_transcript.done':
      case 'response.output_text.done': {
        const b = bubble(ev.item_id, 'assistant', 'audio');
        const full = ev.type === 'response.output_text.done' ? ev.text : ev.transcript;
        if (typeof full === 'string') setBubbleText(b, full);
        break;
      }
      case 'response.output_audio.delta': {
        if (!c || !c.player || ev.response_id === c.silenced) break; // interrupted: drop the rest
        c.player.enqueue(ev.item_id, ev.content_index || 0, ev.delta);
        firstAudio(ev.response_id);
        setActivity('speaking');
        break;
      }
      case 'output_audio_buffer.started':
        firstAudio(ev.response_id);
        setActivity('speaking');
        break;
      case 'output_audio_buffer.stopped':
      case 'output_audio_buffer.cleared':
        if (duet.activity === 'speaking') setActivity('listening');
        if (ev.type === 'output_audio_buffer.cleared') {
          const b = [...bubbles.values()].find((x) => x.responseId === ev.response_id);
          if (b) addBadge(b, 'cut', 'interrupted');
        }
        break;
      case 'response.done': {
        const r = ev.response || {};
        if (duet.activeResponse === r.id) duet.activeResponse = null;
        const turn = duet.turns.find((t) => t.responseId === r.id);
        if (turn && turn.latencyMs == null) { turn.status = r.status; renderTurns(); }
        for (const b of bubbles.values()) {
          if (b.responseId !== r.id) continue;
          b.entry.status = r.status;
          if (r.status === 'cancelled') {
            const why = r.status_details && r.status_details.reason;
            addBadge(b, 'cut', 'interrupted', why ? `cancelled: ${why}` : 'cancelled');
            b.node.classList.add('cancelled');
          }
        }
        if (duet.activity === 'thinking') setActivity('listening');
        // On WebSocket there is no playback event from the server: the queue tells.
        if (c && c.kind === 'websocket' && c.player && !c.player.busy() && duet.activity === 'speaking') setActivity('listening');
        break;
      }
      case 'conversation.item.truncated': {
        const b = bubbles.get(ev.item_id);
        if (b) addBadge(b, 'cut', `interrupted at ${(ev.audio_end_ms / 1000).toFixed(1)} s`, 'conversation.item.truncated: the audio heard so far');
        break;
      }
      case 'error': {
        const e = ev.error || {};
        if (e.code === 'response_cancel_not_active') break; // a harmless race with Interrupt
        showNotice(e.code === 'session_expired' ? 'error' : 'warn', `Server error ${e.code || e.type}: ${e.message}`);
        break;
      }
      default:
        break;
    }
  }

  // ---------------------------------------------------------------------------------------
  // HTTP errors from POST /v1/realtime/calls.

  async function httpError(res) {
    let message = '';
    try {
      const body = await res.json();
      message = (body && body.error && body.error.message) || '';
    } catch (_) {
      message = '';
    }
    if (res.status === 401) {
      return new UserError('This server needs an API key.', {
        html: `<strong>This server needs an API key.</strong> Type it in the <em>API key</em> field and press Connect again.${message ? ` <span class="detail">(${escapeHtml(message)})</span>` : ''}`,
        focus: el.key,
      });
    }
    if (res.status === 503) {
      const after = res.headers.get('Retry-After');
      return new UserError(`The server is busy${after ? `: retry in ${after} s` : ''}.`, {
        html: `<strong>The server is busy</strong> (every call slot is taken).${after ? ` Retry in <strong>${escapeHtml(after)} s</strong>.` : ' Retry in a moment.'}${message ? ` <span class="detail">${escapeHtml(message)}</span>` : ''}`,
        kind: 'warn',
      });
    }
    return new UserError(`HTTP ${res.status}: ${message || res.statusText}`, {
      html: `<strong>The server refused the call</strong> (HTTP ${res.status}): ${escapeHtml(message || res.statusText)}`,
    });
  }

  function iceFailedError() {
    return new UserError('ICE failed: the browser could not reach the server over UDP.', {
      html: '<strong>ICE failed:</strong> the browser could not reach the server\'s UDP port. If the server runs '
        + 'on another machine, start it with <code>--udp-host 0.0.0.0 --public-ip &lt;its address&gt;</code> and '
        + 'open that UDP port (<code>--udp-port</code>) in the firewall; VPNs and strict networks can block UDP too. '
        + 'The <em>WebSocket</em> transport works over plain HTTP(S).',
    });
  }

  // ---------------------------------------------------------------------------------------
  // WebRTC.

  function waitForIceGathering(pc, ms) {
    if (pc.iceGatheringState === 'complete') return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => { pc.removeEventListener('icegatheringstatechange', check); resolve(); };
      const check = () => { if (pc.iceGatheringState === 'complete') done(); };
      pc.addEventListener('icegatheringstatechange', check);
      setTimeout(done, ms);
    });
  }

  async function connectWebRtc(c) {
    const pc = new RTCPeerConnection();
    c.pc = pc;
    const track = c.mic.getAudioTracks()[0];
    c.sender = pc.addTrack(track, c.mic);
    const dc = pc.createDataChannel('oai-events');
    c.dc = dc;

    pc.ontrack = (e) => {
      const stream = e.streams[0] || new MediaStream([e.track]);
      el.audio.srcObject = stream;
      el.audio.play().catch(() => {
        showNotice('warn', 'The browser blocked audio playback: click anywhere on the page to hear Duet.');
        document.addEventListener('click', () => el.audio.play().catch(() => {}), { once: true });
      });
      // The meter taps the same stream (Chrome needs it attached to a media element too).
      const src = audioContext().createMediaStreamSource(stream);
      src.connect(outAnalyser);
      c.outSource = src;
      c.outConnected = true;
    };
    dc.onopen = () => { if (conn === c) setState('connected', 'WebRTC'); };
    dc.onmessage = (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch (_) { return; }
      if (conn === c) onServerEvent(ev);
    };
    dc.onclose = () => {
      if (conn === c && duet.state === 'connected') {
        showNotice('info', 'The server ended the call.');
        teardown(c, { hangup: false });
      }
    };
    pc.onconnectionstatechange = () => {
      if (conn !== c) return;
      if (pc.connectionState === 'failed') {
        showError(iceFailedError());
        teardown(c, { hangup: true, state: 'failed' });
      }
    };

    await pc.setLocalDescription(await pc.createOffer());
    await waitForIceGathering(pc, 500);
    if (conn !== c) return;

    const headers = { 'Content-Type': 'application/sdp' };
    if (apiKey()) headers.Authorization = `Bearer ${apiKey()}`;
    let res;
    try {
      res = await fetch('/v1/realtime/calls', { method: 'POST', headers, body: pc.localDescription.sdp });
    } catch (e) {
      throw new UserError(`Could not reach the server: ${e.message}`);
    }
    if (res.status !== 201 && !res.ok) throw await httpError(res);
    const location = res.headers.get('Location') || '';
    c.callId = location.split('/').pop() || null;
    duet.callId = c.callId;
    const answer = await res.text();
    if (conn !== c) return;
    await pc.setRemoteDescription({ type: 'answer', sdp: answer });

    // ICE + DTLS + SCTP must finish in a few seconds on any sane path.
    setTimeout(() => {
      if (conn === c && duet.state === 'connecting') {
        showError(pc.connectionState === 'connected'
          ? new UserError('The call connected but the event channel did not open.')
          : iceFailedError());
        teardown(c, { hangup: true, state: 'failed' });
      }
    }, 10000);
  }

  // ---------------------------------------------------------------------------------------
  // WebSocket: capture, resampling, playback.

  /** Streaming linear resampler with a light anti-alias filter when decimating. */
  class Resampler {
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

  function pcm16Base64(samples) {
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

  function base64Pcm16(b64) {
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

  const CAPTURE_WORKLET = `
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

  async function captureNode(ac, onSamples) {
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
  class Player {
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
  function interruptPlayback() {
    if (!conn || !conn.player) return;
    if (duet.activeResponse) conn.silenced = duet.activeResponse;
    const cut = conn.player.flush();
    if (cut) {
      send({ type: 'conversation.item.truncate', item_id: cut.itemId, content_index: cut.contentIndex, audio_end_ms: cut.playedMs });
    }
  }

  async function diagnoseWebSocket() {
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

  async function connectWebSocket(c) {
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

  // ---------------------------------------------------------------------------------------
  // Connect / disconnect.

  async function connect() {
    hideNotice();
    const kind = transportChoice();
    const c = { kind, muted: false, outConnected: false };
    conn = c;
    duet.transport = kind;
    duet.callId = null;
    duet.activeResponse = null;
    setState('connecting', kind === 'webrtc' ? 'WebRTC' : 'WebSocket');
    try {
      audioContext();
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

  /** POST /v1/realtime/calls/{id}/hangup; resolves when answered (or after `waitMs`). */
  function hangup(c, keepalive, waitMs = 1500) {
    if (!c.callId) return Promise.resolve();
    const headers = apiKey() ? { Authorization: `Bearer ${apiKey()}` } : {};
    const req = fetch(`/v1/realtime/calls/${encodeURIComponent(c.callId)}/hangup`, { method: 'POST', headers, keepalive })
      .catch(() => {});
    c.callId = null;
    return Promise.race([req, sleep(waitMs)]);
  }

  function teardown(c, { hangup: doHangup = true, state = 'idle' } = {}) {
    if (conn !== c) return;
    conn = null;
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
    duet.activeResponse = null;
    setState(state);
    el.mute.setAttribute('aria-pressed', 'false');
    el.mute.textContent = 'Mute mic';
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
  el.composer.addEventListener('submit', (e) => {
    e.preventDefault();
    const text = el.text.value.trim();
    if (!text) return;
    el.text.value = '';
    sendText(text).catch(showError);
  });
  el.clearLog.addEventListener('click', () => {
    el.log.innerHTML = '';
    logRows = 0;
    lastRow = null;
    openAppendRow = null;
  });
  el.clearTranscript.addEventListener('click', () => {
    el.transcript.innerHTML = '';
    bubbles.clear();
  });
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
})();
