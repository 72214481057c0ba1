// ---------------------------------------------------------------------------------------
// Server events: one handler per event type (or group of types), looked up in HANDLERS.

import { now, el, duet, conn } from './state.js';
import { setActivity, showNotice, bubbles, bubble, setBubbleText, addBadge, newTurn, firstAudio, renderTurns, speechSecs } from './ui.js';
import { logEvent, send } from './log.js';
import { interruptPlayback } from './playback.js';
import { assistantSession, runToolCalls } from './agent.js';
import { turnDetection, showTurnDetection, onTurnDecision } from './turn.js';

// The model has nothing more to say for now (response.done, response.listen).
function backToListening(c) {
  if (duet.activity === 'thinking') setActivity('listening');
  // On WebSocket there is no playback event from the server: the queue tells.
  if (c && c.kind === 'websocket' && c.player && !c.player.busy() && duet.activity === 'speaking') setActivity('listening');
}

// ---------------------------------------------------------------------------------------
// Session and user input.

function onSession(ev) {
  duet.session = ev.session;
  if (ev.session && ev.session.model) el.model.textContent = `model: ${ev.session.model}`;
  showTurnDetection(ev.session);
  if (ev.type === 'session.created') {
    setActivity('listening');
    // Your words in the transcript, and the server's speech probability on the meter. A
    // server without a transcription model answers `.failed` once: then stop asking.
    send({
      type: 'session.update',
      session: {
        type: 'realtime',
        audio: { input: { transcription: { model: 'whisper-1' }, turn_detection: turnDetection() } },
        include: ['input_audio_buffer.speech_probability'],
        ...assistantSession(ev.session && ev.session.model),
      },
    });
  }
}

function onSpeechProbability(ev) {
  const pct = Math.max(0, Math.min(100, Math.round((ev.probability || 0) * 100)));
  el.meterVad.firstElementChild.style.width = `${pct}%`;
  el.meterVad.setAttribute('aria-valuenow', String(pct));
  el.vadDetector.textContent = ev.detector || '';
}

function onSpeechStarted(ev, c) {
  const b = bubble(ev.item_id, 'user', 'audio');
  b.startMs = ev.audio_start_ms;
  setBubbleText(b, '…', { placeholder: true });
  setActivity('user-speaking');
  if (c && c.kind === 'websocket') interruptPlayback(); // server VAD barge-in: flush + truncate
}

function onSpeechStopped(ev) {
  const b = bubble(ev.item_id, 'user', 'audio');
  b.endMs = ev.audio_end_ms;
  if (!b.transcribed) {
    const secs = speechSecs(b.startMs, ev.audio_end_ms);
    setBubbleText(b, secs != null ? `${secs.toFixed(1)} s of speech` : 'speech', { placeholder: true });
    b.textEl.title = `audio_start_ms ${b.startMs} → audio_end_ms ${ev.audio_end_ms}`;
  }
  const turn = newTurn('voice', now(), ev.item_id);
  turn.status = 'waiting';
  // A duplex model may answer, or may go on listening: it does not owe a response.
  setActivity(duet.duplex ? 'listening' : 'thinking');
}

function onInputCommitted(ev) {
  if (!bubbles.has(ev.item_id)) setBubbleText(bubble(ev.item_id, 'user', 'audio'), 'speech', { placeholder: true });
}

function onItemAdded(ev) {
  const it = ev.item || {};
  if (it.type === 'message' && it.role === 'user') {
    const textPart = (it.content || []).find((p) => p.type === 'input_text');
    if (textPart) setBubbleText(bubble(it.id, 'user', 'text'), textPart.text);
    else if (!bubbles.has(it.id)) setBubbleText(bubble(it.id, 'user', 'audio'), 'speech', { placeholder: true });
  }
}

function onTranscriptionDelta(ev) {
  const b = bubble(ev.item_id, 'user', 'audio');
  if (!b.transcribed) { b.transcribed = true; b.entry.text = ''; }
  setBubbleText(b, b.entry.text + (ev.delta || ''));
}

function onTranscriptionCompleted(ev) {
  const b = bubble(ev.item_id, 'user', 'audio');
  b.transcribed = true;
  setBubbleText(b, ev.transcript || '');
  b.entry.status = 'completed';
}

function onTranscriptionFailed(ev) {
  const b = bubbles.get(ev.item_id);
  if (b) addBadge(b, 'note', 'no ASR', (ev.error && ev.error.message) || 'transcription failed');
  if (ev.error && ev.error.code === 'transcription_unavailable') {
    send({ type: 'session.update', session: { type: 'realtime', audio: { input: { transcription: null } } } });
  }
}

// ---------------------------------------------------------------------------------------
// Responses.

function onResponseCreated(ev) {
  const id = ev.response && ev.response.id;
  duet.activeResponse = id;
  // A voice turn (speech_stopped) or a text turn (response.create) waiting for its answer.
  const turn = [...duet.turns].reverse().find((t) => !t.responseId && t.status === 'waiting');
  if (turn) turn.responseId = id;
  if (duet.activity !== 'user-speaking') setActivity('thinking');
}

function onOutputItemAdded(ev) {
  const it = ev.item || {};
  if (it.type === 'message' && it.role === 'assistant') {
    const b = bubble(it.id, 'assistant', 'audio');
    b.responseId = ev.response_id;
    setBubbleText(b, '');
  }
}

// response.output_audio_transcript.delta, response.output_text.delta
function onOutputTextDelta(ev) {
  const b = bubble(ev.item_id, 'assistant', ev.type.includes('text.') ? 'text' : 'audio');
  if (!b.responseId) b.responseId = ev.response_id;
  setBubbleText(b, b.entry.text + (ev.delta || ''));
  if (ev.type === 'response.output_text.delta') setActivity('speaking');
}

// response.output_audio_transcript.done, response.output_text.done
function onOutputTextDone(ev) {
  const b = bubble(ev.item_id, 'assistant', 'audio');
  const full = ev.type === 'response.output_text.done' ? ev.text : ev.transcript;
  if (typeof full === 'string') setBubbleText(b, full);
}

function onOutputAudioDelta(ev, c) {
  if (!c || !c.player || ev.response_id === c.silenced) return; // interrupted: drop the rest
  c.player.enqueue(ev.item_id, ev.content_index || 0, ev.delta);
  firstAudio(ev.response_id);
  setActivity('speaking');
}

function onResponseDone(ev, c) {
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
  backToListening(c);
  runToolCalls(r);
}

// Duplex extension: the model started speaking by itself / fell silent.
function onSpeak() {
  duet.duplex = true;
  if (duet.activity !== 'user-speaking') setActivity('speaking');
}

function onListen(ev, c) {
  backToListening(c);
}

// ---------------------------------------------------------------------------------------
// WebRTC playback, truncation and errors.

function onPlaybackStarted(ev) {
  firstAudio(ev.response_id);
  setActivity('speaking');
}

// output_audio_buffer.stopped, output_audio_buffer.cleared
function onPlaybackEnded(ev) {
  if (duet.activity === 'speaking') setActivity('listening');
  if (ev.type === 'output_audio_buffer.cleared') {
    const b = [...bubbles.values()].find((x) => x.responseId === ev.response_id);
    if (b) addBadge(b, 'cut', 'interrupted');
  }
}

function onItemTruncated(ev) {
  const b = bubbles.get(ev.item_id);
  if (b) addBadge(b, 'cut', `interrupted at ${(ev.audio_end_ms / 1000).toFixed(1)} s`, 'conversation.item.truncated: the audio heard so far');
}

function onError(ev) {
  const e = ev.error || {};
  if (e.code === 'response_cancel_not_active') return; // a harmless race with Interrupt
  showNotice(e.code === 'session_expired' ? 'error' : 'warn', `Server error ${e.code || e.type}: ${e.message}`);
}

/** Event type -> handler(ev, conn); types not listed are only logged. */
const HANDLERS = new Map([
  ['session.created', onSession],
  ['session.updated', onSession],
  ['input_audio_buffer.speech_started', onSpeechStarted],
  ['input_audio_buffer.speech_stopped', onSpeechStopped],
  ['input_audio_buffer.committed', onInputCommitted],
  ['input_audio_buffer.speech_probability', onSpeechProbability],
  ['turn.scored', onTurnDecision],
  ['turn.overlap', onTurnDecision],
  ['conversation.item.added', onItemAdded],
  ['conversation.item.input_audio_transcription.delta', onTranscriptionDelta],
  ['conversation.item.input_audio_transcription.completed', onTranscriptionCompleted],
  ['conversation.item.input_audio_transcription.failed', onTranscriptionFailed],
  ['response.created', onResponseCreated],
  ['response.output_item.added', onOutputItemAdded],
  ['response.output_audio_transcript.delta', onOutputTextDelta],
  ['response.output_text.delta', onOutputTextDelta],
  ['response.output_audio_transcript.done', onOutputTextDone],
  ['response.output_text.done', onOutputTextDone],
  ['response.output_audio.delta', onOutputAudioDelta],
  ['output_audio_buffer.started', onPlaybackStarted],
  ['output_audio_buffer.stopped', onPlaybackEnded],
  ['output_audio_buffer.cleared', onPlaybackEnded],
  ['response.done', onResponseDone],
  ['response.speak', onSpeak],
  ['response.listen', onListen],
  ['conversation.item.truncated', onItemTruncated],
  ['error', onError],
]);

export function onServerEvent(ev) {
  logEvent('in', ev);
  const handler = HANDLERS.get(ev.type);
  if (handler) handler(ev, conn);
}
