// The turn detector: the visitor's choice of `server_vad` or `semantic_vad` (and its
// eagerness), sent at the start of the session and whenever it changes, and what the
// server decided (the `?turn_events=1` extension): each pause the turn model scored, with
// its probability and decision, and each time speech over the answer was judged a
// backchannel (kept) or an interruption.

import { el, duet, fmtMs } from './state.js';
import { send } from './log.js';

const MAX_DECISIONS = 8;

/** The `audio.input.turn_detection` the visitor picked. */
export function turnDetection() {
  if (el.turnDetection.value === 'semantic_vad') {
    return { type: 'semantic_vad', eagerness: el.eagerness.value };
  }
  return { type: 'server_vad' };
}

/** Sends the turn detection again when the visitor changes it during a session. */
export function watchTurnDetection(connected) {
  const changed = () => {
    el.eagerness.disabled = el.turnDetection.value !== 'semantic_vad';
    if (connected()) {
      send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: turnDetection() } } } });
    }
  };
  el.turnDetection.addEventListener('change', changed);
  el.eagerness.addEventListener('change', changed);
  el.eagerness.disabled = el.turnDetection.value !== 'semantic_vad';
}

/** The effective turn detection the server reported (session.created / .updated). */
export function showTurnDetection(session) {
  const td = session && session.audio && session.audio.input && session.audio.input.turn_detection;
  if (!td) {
    el.turnMode.textContent = 'manual turns';
    return;
  }
  const interruption = td.interruption ? `, ${td.interruption.mode} interruption` : '';
  el.turnMode.textContent = td.type === 'semantic_vad'
    ? `semantic_vad (${td.eagerness})${interruption}`
    : `server_vad ${td.silence_duration_ms} ms${interruption}`;
}

function describeScore(ev) {
  const p = ev.probability != null ? `p(done) ${ev.probability.toFixed(2)}` : 'no score';
  const why = ev.unfinished_words ? ' · words end mid-sentence' : '';
  switch (ev.decision) {
    case 'end': return [p, `end after ${fmtMs(ev.end_after_ms)} of silence${why}`];
    case 'wait': return [p, `wait: up to ${fmtMs(ev.end_after_ms)}${why}`];
    default: return [p, `fixed silence ${fmtMs(ev.end_after_ms)}`];
  }
}

/** turn.scored and turn.overlap: one line each in the "Turn detector" list. */
export function onTurnDecision(ev) {
  let entry;
  if (ev.type === 'turn.scored') {
    const [score, decision] = describeScore(ev);
    entry = { kind: 'pause', decision: ev.decision, probability: ev.probability ?? null, text: `pause at ${fmtMs(ev.audio_end_ms)}`, score, detail: decision };
  } else {
    const words = ev.transcript ? ` “${ev.transcript.trim()}”` : '';
    entry = {
      kind: ev.outcome,
      decision: ev.outcome,
      text: ev.outcome === 'backchannel' ? 'backchannel: the answer goes on' : 'interruption: the answer stops',
      score: `${fmtMs(ev.duration_ms)} of speech`,
      detail: words,
    };
  }
  duet.decisions.push(entry);
  renderDecisions();
}

function renderDecisions() {
  el.decisions.innerHTML = '';
  for (const d of duet.decisions.slice(-MAX_DECISIONS)) {
    const li = document.createElement('li');
    li.dataset.decision = d.decision;
    li.innerHTML = '<span class="decision-what"></span><span class="decision-score"></span><span class="decision-detail"></span>';
    li.querySelector('.decision-what').textContent = d.text;
    li.querySelector('.decision-score').textContent = d.score;
    li.querySelector('.decision-detail').textContent = d.detail;
    el.decisions.appendChild(li);
  }
}
