// ---------------------------------------------------------------------------------------
// The event log (folded deltas) and sending.

import { now, MAX_LOG_ROWS, MAX_HOOK_LOG, el, counts, duet, conn, fmtClock } from './state.js';

export let logRows = 0;
export let lastRow = null;
export let openAppendRow = null;
export let rowsSinceAppend = 0;
// The speech meter's events fold into one row that does not interrupt other folds.
const METER = 'input_audio_buffer.speech_probability';
let openMeterRow = null;
let rowsSinceMeter = 0;

/** Copies an event with audio payloads replaced by their size, so the log stays small. */
export function slim(ev) {
  const out = { ...ev };
  if (typeof out.audio === 'string' && out.audio.length > 64) out.audio = `<base64 ${out.audio.length} chars>`;
  if (ev.type === 'response.output_audio.delta' && typeof out.delta === 'string') {
    out.delta = `<base64 ${out.delta.length} chars>`;
  }
  return out;
}

export function foldKey(dir, ev) {
  const t = ev.type || '';
  if (!t.endsWith('.delta') && t !== 'input_audio_buffer.append') return null;
  return `${dir} ${t} ${ev.item_id || ev.response_id || ''}`;
}

export function brief(ev) {
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
    case 'input_audio_buffer.speech_probability': return `${ev.detector} ${ev.probability}`;
    default: return '';
  }
}

export function category(type) {
  if (type === 'error') return 'error';
  if (type.startsWith('input_audio_buffer.')) return 'input';
  if (type.startsWith('output_audio_buffer.')) return 'output';
  if (type.startsWith('response.')) return 'response';
  if (type.startsWith('session.')) return 'session';
  return 'item';
}

export function logEvent(dir, ev) {
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
  else if (ev.type === METER && openMeterRow && rowsSinceMeter < 40) row = openMeterRow;
  if (dir === 'out' && ev.type !== 'input_audio_buffer.append') openAppendRow = null;

  if (row) {
    row.count += 1;
    row.last = s;
    if (typeof ev.delta === 'string' && ev.type !== 'response.output_audio.delta') row.text += ev.delta;
    row.countEl.textContent = `×${row.count}`;
    row.briefEl.textContent = row.text ? row.text.slice(-90) : brief(ev);
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
  if (ev.type === METER) {
    openMeterRow = r;
    rowsSinceMeter = 0;
  } else {
    lastRow = r;
    rowsSinceMeter += 1;
  }
  if (ev.type === 'input_audio_buffer.append') { openAppendRow = r; rowsSinceAppend = 0; } else rowsSinceAppend += 1;
  logRows += 1;
  if (logRows > MAX_LOG_ROWS) { el.log.firstElementChild.remove(); logRows -= 1; }
  if (el.follow.checked) el.log.scrollTop = el.log.scrollHeight;
}

export function renderJson(r) {
  if (!r.pre) {
    r.pre = document.createElement('pre');
    r.details.appendChild(r.pre);
  }
  const note = r.count > 1 ? `// ${r.count} events folded; the last one:\n` : '';
  const text = r.text && r.count > 1 ? `// text so far: ${JSON.stringify(r.text)}\n` : '';
  r.pre.textContent = note + text + JSON.stringify(r.last, null, 2);
}

export function send(ev) {
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

/** Empties the event log (the Clear button). */
export function clearLog() {
  el.log.innerHTML = '';
  logRows = 0;
  lastRow = null;
  openAppendRow = null;
  openMeterRow = null;
}
