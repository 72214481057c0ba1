// ---------------------------------------------------------------------------------------
// WebSocket playback: the scheduled Web Audio queue of response.output_audio.delta and the
// local interruption (flush + conversation.item.truncate).

import { RATE, duet, conn } from './state.js';
import { setActivity } from './ui.js';
import { send } from './log.js';
import { base64Pcm16 } from './pcm.js';

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
