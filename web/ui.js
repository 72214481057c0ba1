// The page's visible state: connection state, activity, notices, transcripts, turns
// (latency) and the error messages shown for HTTP and ICE failures.

// Inline icons (no emoji font needed).
import { now, el, duet, UserError, escapeHtml, fmtMs } from './state.js';

export const ICON = {
  mic: '<svg class="icon" viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M12 14.5a3.5 3.5 0 0 0 3.5-3.5V5a3.5 3.5 0 0 0-7 0v6a3.5 3.5 0 0 0 3.5 3.5zm6-3.5a6 6 0 0 1-12 0H4.2a7.8 7.8 0 0 0 6.9 7.75V21h1.8v-2.25A7.8 7.8 0 0 0 19.8 11H18z"/></svg>',
  keyboard: '<svg class="icon" viewBox="0 0 24 24" aria-hidden="true"><path fill="currentColor" d="M3 6.5A1.5 1.5 0 0 1 4.5 5h15A1.5 1.5 0 0 1 21 6.5v11a1.5 1.5 0 0 1-1.5 1.5h-15A1.5 1.5 0 0 1 3 17.5v-11zM6 8v2h2V8H6zm3.5 0v2h2V8h-2zM13 8v2h2V8h-2zm3.5 0v2h2V8h-2zM6 11.5v2h2v-2H6zm3.5 0v2h2v-2h-2zm3.5 0v2h2v-2h-2zm3.5 0v2h2v-2h-2zM7.5 15v1.8h9V15h-9z"/></svg>',
};

// ---------------------------------------------------------------------------------------
// Connection state, activity, notices.

export const STATE_TEXT = {
  idle: 'Disconnected', connecting: 'Connecting…', connected: 'Connected',
  closing: 'Disconnecting…', failed: 'Connection failed',
};

export function setState(state, detail) {
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

export const ACTIVITY_TEXT = {
  idle: 'Not connected', listening: 'Listening — say something',
  'user-speaking': 'Hearing you…', thinking: 'Thinking…', speaking: 'Duet is speaking — talk over it to interrupt',
};

export function setActivity(a) {
  if (a !== 'idle' && duet.state !== 'connected') return;
  duet.activity = a;
  el.activity.textContent = ACTIVITY_TEXT[a];
  document.body.dataset.activity = a;
  el.interrupt.classList.toggle('attention', a === 'speaking');
}

export function showNotice(kind, text, html) {
  duet.notices.push({ kind, text, t: now() });
  el.notice.hidden = false;
  el.notice.dataset.kind = kind;
  el.notice.innerHTML = `<div class="notice-body">${html || escapeHtml(text)}</div>`
    + '<button type="button" class="notice-close" aria-label="Dismiss">×</button>';
  el.notice.querySelector('.notice-close').onclick = hideNotice;
}

export function hideNotice() {
  el.notice.hidden = true;
  el.notice.innerHTML = '';
}

export function showError(err) {
  if (err instanceof UserError) {
    showNotice(err.kind, err.message, err.html);
    if (err.focus) err.focus.focus();
  } else {
    showNotice('error', String(err && err.message ? err.message : err));
  }
  console.error(err);
}

// ---------------------------------------------------------------------------------------
// Transcripts (bubbles) and turns (latency).

export const bubbles = new Map(); // item id -> { entry, node, textEl, metaEl }

export function bubble(itemId, role, kind) {
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
export function setBubbleText(b, text, { placeholder = false } = {}) {
  b.entry.text = placeholder ? `🎤 ${text}` : text;
  if (placeholder) b.textEl.innerHTML = `${ICON.mic}<span></span>`;
  else b.textEl.innerHTML = '<span></span>';
  b.textEl.lastElementChild.textContent = text;
  b.node.classList.toggle('placeholder', placeholder);
  el.transcript.scrollTop = el.transcript.scrollHeight;
}

export function addBadge(b, cls, text, title) {
  let s = b.badges.querySelector(`.${cls}`);
  if (!s) {
    s = document.createElement('span');
    s.className = `badge ${cls}`;
    b.badges.appendChild(s);
  }
  s.textContent = text;
  if (title) s.title = title;
}

export function newTurn(kind, t0, userItemId) {
  const turn = {
    n: duet.turns.length + 1, kind, userItemId: userItemId || null, responseId: null,
    t0, firstAudioAt: null, latencyMs: null, status: 'waiting',
  };
  duet.turns.push(turn);
  renderTurns();
  return turn;
}

export function firstAudio(responseId) {
  const turn = duet.turns.find((t) => t.responseId === responseId);
  if (!turn || turn.firstAudioAt != null) return;
  turn.firstAudioAt = now();
  turn.latencyMs = Math.round(turn.firstAudioAt - turn.t0);
  turn.status = 'answered';
  renderTurns();
  const b = [...bubbles.values()].find((x) => x.responseId === responseId);
  if (b) addBadge(b, 'latency', `⚡ ${fmtMs(turn.latencyMs)}`, turn.kind === 'voice' ? 'speech end → first audio' : 'send → first audio');
}

export function renderTurns() {
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
export function speechSecs(startMs, endMs) {
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
// HTTP errors from POST /v1/realtime/calls.

export async function httpError(res) {
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

export function iceFailedError() {
  return new UserError('ICE failed: the browser could not reach the server over UDP.', {
    html: '<strong>ICE failed:</strong> the browser could not reach the server\'s UDP port. If the server runs '
      + 'on another machine, start it with <code>--udp-host 0.0.0.0 --public-ip &lt;its address&gt;</code> and '
      + 'open that UDP port (<code>--udp-port</code>) in the firewall; VPNs and strict networks can block UDP too. '
      + 'The <em>WebSocket</em> transport works over plain HTTP(S).',
  });
}
