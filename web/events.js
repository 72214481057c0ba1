// ---------------------------------------------------------------------------------------
// Server events.

import { now, el, duet, conn } from './state.js';
import { setActivity, showNotice, bubbles, bubble, setBubbleText, addBadge, newTurn, firstAudio, renderTurns, speechSecs } from './ui.js';
import { logEvent } from './log.js';
import { interruptPlayback } from './ws.js';

// The model has nothing more to say for now (response.done, response.listen).
function backToListening(c) {
  if (duet.activity === 'thinking') setActivity('listening');
  // On WebSocket there is no playback event from the server: the queue tells.
  if (c && c.kind === 'websocket' && c.player && !c.player.busy() && duet.activity === 'speaking') setActivity('listening');
}

export function onServerEvent(ev) {
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
      // A duplex model may answer, or may go on listening: it does not owe a response.
      setActivity(duet.duplex ? 'listening' : 'thinking');
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
      backToListening(c);
      break;
    }
    // Duplex extension: the model started speaking by itself / fell silent.
    case 'response.speak':
      duet.duplex = true;
      if (duet.activity !== 'user-speaking') setActivity('speaking');
      break;
    case 'response.listen':
      backToListening(c);
      break;
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
