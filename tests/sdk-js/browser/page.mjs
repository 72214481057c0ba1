// Runs in headless Chromium (bundled by realtime_webrtc.mjs with esbuild): the official
// @openai/agents-realtime WebRTC transport, as a web page would use it, against Duet.
//
// The page is served from its own origin (another port on 127.0.0.1), so the POST to
// `/v1/realtime/calls` is a cross-origin request with a CORS preflight (the SDK sends
// Authorization and X-OpenAI-Agents-SDK), and reading `Location` needs Expose-Headers.
// The microphone is Chromium's fake capture device playing the driver's WAV once:
// 1 s silence, 1.5 s synthetic voice, 6 s silence.

import { OpenAIRealtimeWebRTC, RealtimeAgent, RealtimeSession } from '@openai/agents-realtime';

import { Abort, Checks, EventLog, compact, now, sleep, watchSession } from '../checks.mjs';

/** Polls the inbound audio's playout energy (getStats) so the page can tell sound from silence. */
class Meter {
  constructor(pc) {
    this.pc = pc;
    this.samples = []; // [{t, energy, duration}]
    this.timer = null;
  }
  start() {
    const poll = async () => {
      try {
        const stats = await this.pc.getStats();
        for (const r of stats.values()) {
          if (r.type === 'inbound-rtp' && r.kind === 'audio') {
            this.samples.push({ t: now(), energy: r.totalAudioEnergy ?? 0, duration: r.totalSamplesDuration ?? 0, packets: r.packetsReceived ?? 0, level: r.audioLevel, jb: r.jitterBufferDelay ?? 0, jbn: r.jitterBufferEmittedCount ?? 0, jbt: r.jitterBufferTargetDelay ?? 0, conceal: r.concealedSamples ?? 0, total: r.totalSamplesReceived ?? 0, ins: r.insertedSamplesForDeceleration ?? 0, rem: r.removedSamplesForAcceleration ?? 0 });
          }
        }
      } catch {
        // the connection is closing
      }
    };
    this.timer = setInterval(poll, 50);
    return poll();
  }
  stop() {
    clearInterval(this.timer);
  }
  /** Mean level in dBFS of the audio played out between t1 and t2 (null if unknown). */
  dbfs(t1, t2) {
    const a = this.samples.filter((s) => s.t <= t1).at(-1) ?? this.samples[0];
    const b = this.samples.filter((s) => s.t <= t2).at(-1);
    if (!a || !b || b.duration - a.duration <= 0) return null;
    const power = (b.energy - a.energy) / (b.duration - a.duration);
    return power > 0 ? Math.round(10 * Math.log10(power) * 10) / 10 : -200;
  }
  /** Time of the first poll after `t` whose interval was louder than `db` dBFS. */
  firstAbove(t, db) {
    return this.#first(t, (p) => p > 10 ** (db / 10));
  }
  /** Time of the first poll after `t` whose interval was quieter than `db` dBFS. */
  firstBelow(t, db) {
    return this.#first(t, (p) => p < 10 ** (db / 10));
  }
  #first(t, pred) {
    for (let i = 1; i < this.samples.length; i++) {
      const a = this.samples[i - 1];
      const b = this.samples[i];
      const d = b.duration - a.duration;
      if (b.t < t || d <= 0) continue;
      if (pred((b.energy - a.energy) / d)) return b.t;
    }
    return null;
  }
  /** [ms relative to `ref`, dBFS of the interval before, audioLevel] every poll in [t1, t2]. */
  trace(t1, t2, ref) {
    const out = [];
    for (let i = 1; i < this.samples.length; i++) {
      const a = this.samples[i - 1];
      const b = this.samples[i];
      if (b.t < t1 || b.t > t2) continue;
      const d = b.duration - a.duration;
      const p = d > 0 ? (b.energy - a.energy) / d : 0;
      out.push(`${Math.round(b.t - ref)}:${p > 0 ? Math.round(10 * Math.log10(p)) : '-inf'}dB/${d.toFixed(2)}s/pk+${b.packets - a.packets}/conceal+${b.conceal - a.conceal}`);
    }
    return out.join(' ');
  }
  /** Mean jitter-buffer delay (ms) over the call, and its target, from the last poll. */
  jitterBuffer() {
    const b = this.samples.at(-1);
    if (!b || !b.jbn) return null;
    return `mean ${Math.round((1000 * b.jb) / b.jbn)} ms, target ${Math.round((1000 * b.jbt) / b.jbn)} ms, concealed ${(100 * b.conceal / Math.max(1, b.total)).toFixed(1)}%, stretched +${(100 * b.ins / Math.max(1, b.total)).toFixed(1)}% / -${(100 * b.rem / Math.max(1, b.total)).toFixed(1)}% of samples`;
  }
  packets() {
    return this.samples.at(-1)?.packets ?? 0;
  }
}

window.duetRun = async (base, opts = {}) => {
  const C = new Checks((m) => console.log(m));
  const F = C.figures;
  const ev = new EventLog();
  const sdkErrors = [];
  const sessionEvents = [];
  let meter = null;
  let session = null;
  const callsUrl = `${base}/v1/realtime/calls`;
  F.page_origin = location.origin;
  F.calls_url = callsUrl;

  // What the SDK sends on the data channel.
  const sent = [];
  const origSend = RTCDataChannel.prototype.send;
  RTCDataChannel.prototype.send = function send(data) {
    try {
      sent.push({ t: now(), ev: JSON.parse(data) });
    } catch {
      sent.push({ t: now(), ev: { type: '(not JSON)' } });
    }
    return origSend.call(this, data);
  };

  try {
    // With an ephemeral client secret (ek_) the SDK needs no useInsecureApiKey: that is the
    // production path for a browser.
    const transport = opts.clientSecret
      ? new OpenAIRealtimeWebRTC({ baseUrl: callsUrl })
      : new OpenAIRealtimeWebRTC({ baseUrl: callsUrl, useInsecureApiKey: true });
    const agent = new RealtimeAgent({ name: 'Duet compatibility test', instructions: 'Repeat what the user says.' });
    session = new RealtimeSession(agent, { transport, model: 'gpt-realtime' });
    transport.on('*', (raw) => ev.record(raw));
    session.on('error', (e) => {
      const err = e?.error;
      if (err && typeof err === 'object' && err.type === 'error' && err.event_id) return; // server error, counted from the log
      sdkErrors.push(err instanceof Error ? `${err.name}: ${err.message}` : String(err?.message ?? JSON.stringify(err)).slice(0, 300));
    });
    const history = watchSession(session, sessionEvents);

    // a. connect
    console.log('== a. connect');
    const t0 = now();
    ev.t0 = t0;
    await session.connect({ apiKey: opts.clientSecret ?? 'sk-duet-test' });
    F.connect_ms = Math.round(now() - t0);
    C.check(transport.status === 'connected', 'a. transport status connected', transport.status);
    F.call_id = transport.callId;
    C.check(/^rtc_[A-Za-z0-9_-]+$/.test(transport.callId ?? ''), "a. the SDK's callId (from Location) is rtc_…", String(transport.callId));
    const created = await ev.waitFor('session.created', { timeout: 5000 });
    C.check(created.index === 0, 'a. session.created is the first event', JSON.stringify(ev.types().slice(0, 3)));
    const updated = await ev.waitFor('session.updated', { pred: (e) => e.session?.audio !== undefined, timeout: 5000 });
    F.session_updated_ms = Math.round(updated.t - t0);
    C.check(updated.t - t0 <= 5000, 'a. session.updated within 5 s of connect', `${F.session_updated_ms} ms`);
    C.check(F.connect_ms < 5000, 'a. connect() resolved on session.updated, not on its 5 s timeout', `${F.connect_ms} ms`);
    const s = updated.ev.session;
    const td = s.audio?.input?.turn_detection;
    F.session_updated = compact({ model: s.model, output_modalities: s.output_modalities, turn_detection: td, input_format: s.audio?.input?.format });
    C.check(td?.type === 'semantic_vad', "a. session.updated keeps the SDK's semantic_vad", JSON.stringify(td));
    const sdkUpdate = sent.find((x) => x.ev.type === 'session.update' && x.ev.session?.audio);
    F.sdk_session_update = sdkUpdate ? compact(sdkUpdate.ev, 600) : 'none';
    const pc = transport.connectionState.peerConnection;
    F.ice_connection_state = pc.iceConnectionState;
    meter = new Meter(pc);
    await meter.start();

    // b. one turn: the WAV's voice starts ~1 s after getUserMedia.
    console.log('== b. one turn (the fake microphone speaks 1.5 s)');
    const st = await ev.waitFor('input_audio_buffer.speech_started', { timeout: 10_000 });
    F.turn1_speech_started_after_connect_ms = Math.round(st.t - t0);
    const sp = await ev.waitFor('input_audio_buffer.speech_stopped', { from: st.index, timeout: 5000 });
    F.turn1_speech_ms = sp.ev.audio_end_ms - st.ev.audio_start_ms;
    const rc = await ev.waitFor('response.created', { from: st.index, timeout: 5000 });
    const rid1 = rc.ev.response.id;
    const ob = await ev.waitFor('output_audio_buffer.started', { from: rc.index, timeout: 5000 });
    C.check(ob.ev.response_id === rid1, 'b. output_audio_buffer.started names the response', compact(ob.ev));
    const done1 = await ev.waitFor('response.done', { from: rc.index, pred: (e) => e.response?.id === rid1, timeout: 10_000 });
    C.check(done1.ev.response.status === 'completed', 'b. response.done completed', `${done1.ev.response.status} ${JSON.stringify(done1.ev.response.status_details)}`);
    const stopped = await ev.waitFor('output_audio_buffer.stopped', { from: rc.index, pred: (e) => e.response_id === rid1, timeout: 5000 });
    F.turn1_playout_ms = Math.round(stopped.t - ob.t);
    C.check(stopped.t - ob.t >= 1000 && stopped.t - ob.t <= 2500, 'b. started→stopped spans the ~1.5 s answer', `${F.turn1_playout_ms} ms`);
    const tdone = ev.find(rc.index, 'response.output_audio_transcript.done', (e) => e.response_id === rid1);
    F.turn1_transcript = tdone?.ev.transcript;
    C.check(/^echo of 1\.[3-7] s$/.test(tdone?.ev.transcript ?? ''), 'b. transcript "echo of ~1.5 s"', JSON.stringify(tdone?.ev.transcript));
    const audioDeltas = ev.since(0, 'response.output_audio.delta');
    C.check(audioDeltas.length === 0, 'b. no response.output_audio.delta on the data channel (audio is on RTP)', `${audioDeltas.length}`);
    await sleep(600);
    const loud = meter.dbfs(ob.t + 200, stopped.t - 200);
    F.turn1_level_dbfs = `answer ${loud}`;
    C.check(loud !== null && loud > -40, 'b. the answer is audible in the browser (> -40 dBFS)', `${loud} dBFS`);
    const names = sessionEvents.map((e) => e.name);
    C.check(names.includes('agent_start') && names.includes('agent_end'), 'b. RealtimeSession agent_start / agent_end', JSON.stringify(names));
    const assistants = history().filter((i) => i.type === 'message' && i.role === 'assistant');
    const atext = assistants.at(-1)?.content?.map((c) => c.transcript ?? c.text ?? '').join('');
    F.turn1_history = `${history().length} items; assistant says ${JSON.stringify(atext)}`;
    C.check(atext === tdone?.ev.transcript, "b. the SDK's history holds the transcript", JSON.stringify(history()).slice(0, 300));

    // c. interrupt(): a text turn (answered with one tone burst per word), interrupted.
    console.log('== c. interrupt');
    await sleep(300);
    const mC = ev.length;
    const sC = sent.length;
    session.sendMessage('one two three four five six seven eight nine ten eleven twelve thirteen fourteen');
    const rc2 = await ev.waitFor('response.created', { from: mC, timeout: 5000 });
    const rid2 = rc2.ev.response.id;
    const ob2 = await ev.waitFor('output_audio_buffer.started', { from: rc2.index, pred: (e) => e.response_id === rid2, timeout: 5000 });
    await sleep(500);
    const sBefore = sent.length;
    const mBefore = ev.length;
    const tInterrupt = now();
    const audioDoneBefore = ev.find(rc2.index, 'response.output_audio.done', (e) => e.response_id === rid2) !== undefined;
    const doneBefore = ev.find(rc2.index, 'response.done', (e) => e.response?.id === rid2) !== undefined;
    F.interrupt_state = `response.output_audio.done before interrupt: ${audioDoneBefore}, response.done before: ${doneBefore}`;
    if (opts.clearOnly) {
      // Diagnostics (--clear-only): what a bare output_audio_buffer.clear does, without the
      // SDK's response.cancel in front of it.
      transport.sendEvent({ type: 'output_audio_buffer.clear' });
    } else {
      session.interrupt();
    }
    const sdkSent = sent.slice(sBefore).map((x) => x.ev);
    F.interrupt_sdk_sent = compact(sdkSent);
    C.check(sdkSent.some((e) => e.type === 'output_audio_buffer.clear'), 'c. interrupt() sent output_audio_buffer.clear', F.interrupt_sdk_sent);
    if (!audioDoneBefore) {
      C.check(sdkSent.some((e) => e.type === 'response.cancel'), 'c. interrupt() sent response.cancel (response still generating)', F.interrupt_sdk_sent);
    }
    const cleared = await ev.waitFor('output_audio_buffer.cleared', { from: mBefore, timeout: 3000 });
    F.cleared_after_interrupt_ms = Math.round(cleared.t - tInterrupt);
    C.check(cleared.ev.response_id === rid2, 'c. output_audio_buffer.cleared names the response', compact(cleared.ev));
    const done2 = await ev.waitFor('response.done', { from: rc2.index, pred: (e) => e.response?.id === rid2, timeout: 3000 });
    const r2 = done2.ev.response;
    F.interrupt_response_done = `${r2.status} ${JSON.stringify(r2.status_details)}`;
    if (!doneBefore) {
      C.check(r2.status === 'cancelled', 'c. response.done cancelled', F.interrupt_response_done);
      C.check(r2.status_details?.reason === 'client_cancelled', 'c. status_details.reason client_cancelled', F.interrupt_response_done);
    }
    const tr = await ev.waitFor('conversation.item.truncated', { from: mBefore, timeout: 2000 }).catch(() => null);
    F.truncated = tr ? compact(tr.ev) : 'none';
    if (tr) {
      const ret = await ev.waitFor('conversation.item.retrieved', { from: tr.index, timeout: 3000 }).catch(() => null);
      C.check(ret !== null, "c. the SDK's conversation.item.retrieve after truncated is answered", '');
      F.truncated_item = ret ? compact({ status: ret.ev.item?.status, transcript: ret.ev.item?.content?.[0]?.transcript }) : 'none';
    }
    // The uninterrupted answer ("You said: " + 14 words, ~220 ms a word) would play ~3 s
    // more; a purged queue is silent well before that. Headless Chromium's own receive path
    // lags (~100-250 ms onset) and fades a stopped sound out over ~600 ms (-10 dB per 100 ms;
    // the same between two Chromium peers, so not the server's doing), hence the window.
    await sleep(1700);
    const during = meter.dbfs(ob2.t + 100, tInterrupt);
    const after = meter.dbfs(cleared.t + 1200, cleared.t + 1600);
    const onset = meter.firstAbove(ob2.t, -30);
    const silent = meter.firstBelow(cleared.t, -50);
    F.answer_onset_in_browser_ms = onset === null ? null : Math.round(onset - ob2.t);
    F.cleared_to_silence_in_browser_ms = silent === null ? null : Math.round(silent - cleared.t);
    F.interrupt_level_dbfs = `answer ${during}, 1200-1600 ms after cleared ${after}`;
    C.check(during !== null && during > -40, 'c. the second answer was audible before interrupt()', `${during} dBFS`);
    if (!C.check(after !== null && after < -50, 'c. silent 1.2-1.6 s after output_audio_buffer.cleared, ~1.5 s before the answer would have ended (< -50 dBFS)', `${after} dBFS`)) {
      F.level_trace = meter.trace(tInterrupt - 600, tInterrupt + 1700, tInterrupt);
    }
    const late = ev.log.slice(done2.index + 1).filter((e) => (e.ev.response_id === rid2 || e.ev.response?.id === rid2) && e.ev.type !== 'output_audio_buffer.cleared');
    C.check(late.length === 0, 'c. nothing of the interrupted response after its response.done', JSON.stringify(late.map((e) => e.ev.type)));
    const ints = sessionEvents.filter((e) => e.t >= tInterrupt).map((e) => e.name);
    F.session_events_after_interrupt = JSON.stringify(ints);
    F.interrupt_sdk_sent_all = JSON.stringify(sent.slice(sC).map((x) => x.ev.type));

    // d. close
    console.log('== d. close');
    F.rtp_packets_received = meter.packets();
    F.browser_jitter_buffer = meter.jitterBuffer();
    meter.stop();
    session.close();
    C.check(transport.status === 'disconnected', 'd. transport disconnected after close()', transport.status);
  } catch (e) {
    C.check(false, 'scenario', e instanceof Abort ? e.message : `${e?.name}: ${e?.message}\n${e?.stack ?? ''}`);
    try {
      meter?.stop();
      session?.close();
    } catch {
      // already closed
    }
  }
  C.check(ev.problems.length === 0, "every server event parses with the SDK's schema", ev.problems.join('\n    '));
  const errs = ev.errors();
  C.check(errs.length === 0, 'no server error events', errs.map((e) => compact(e)).join('\n    '));
  C.check(sdkErrors.length === 0, 'no SDK errors', sdkErrors.join('\n    '));
  if (ev.unknownTypes.size) F.types_unknown_to_sdk = [...ev.unknownTypes].join(', ');
  F.events_received = ev.length;
  F.events_sent = sent.length;
  return { passed: C.passed, failed: C.failed, figures: F, events: ev.dump() };
};

window.duetReady = true;
