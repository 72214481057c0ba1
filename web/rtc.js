// ---------------------------------------------------------------------------------------
// WebRTC.

import { el, duet, conn, UserError, apiKey } from './state.js';
import { setState, showNotice, showError, httpError, iceFailedError } from './ui.js';
import { outAnalyser, audioContext } from './audio.js';
import { onServerEvent } from './events.js';
import { teardown } from './session.js';

export function waitForIceGathering(pc, ms) {
  if (pc.iceGatheringState === 'complete') return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => { pc.removeEventListener('icegatheringstatechange', check); resolve(); };
    const check = () => { if (pc.iceGatheringState === 'complete') done(); };
    pc.addEventListener('icegatheringstatechange', check);
    setTimeout(done, ms);
  });
}

/** The remote track: play it in <audio> and tap it for the output meter. */
function playRemote(c, e) {
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
}

/** The peer connection's and the event channel's handlers. */
function wireCall(c, pc, dc) {
  pc.ontrack = (e) => playRemote(c, e);
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
    duet.iceRestarts.state = pc.connectionState;
    if (pc.connectionState === 'disconnected') {
      // The path went quiet (e.g. Wi-Fi to cellular): if it does not come back by itself
      // within 3 s, restart ICE on the same call; the session and the conversation go on.
      clearTimeout(c.restartTimer);
      c.restartTimer = setTimeout(() => {
        if (conn === c && pc.connectionState === 'disconnected') {
          restartIce(c).catch((e) => showNotice('warn', `Reconnecting failed: ${e.message}`));
        }
      }, 3000);
    } else if (pc.connectionState === 'failed') {
      showError(iceFailedError());
      teardown(c, { hangup: true, state: 'failed' });
    }
  };
}

/** An ICE restart on the live call: a new offer with new ICE credentials, sent with
 *  PATCH /v1/realtime/calls/{id}; media resumes on the new path in the same session. */
export async function restartIce(c) {
  const pc = c.pc;
  if (!pc || !c.callId) throw new UserError('No call to reconnect.');
  pc.restartIce();
  await pc.setLocalDescription(await pc.createOffer({ iceRestart: true }));
  await waitForIceGathering(pc, 500);
  const headers = { 'Content-Type': 'application/sdp' };
  if (apiKey()) headers.Authorization = `Bearer ${apiKey()}`;
  const res = await fetch(`/v1/realtime/calls/${c.callId}`, { method: 'PATCH', headers, body: pc.localDescription.sdp });
  if (!res.ok) throw await httpError(res);
  await pc.setRemoteDescription({ type: 'answer', sdp: await res.text() });
  duet.iceRestarts.count += 1;
  showNotice('info', 'Reconnected (ICE restart): the conversation goes on.');
}

/** POST /v1/realtime/calls with the offer; notes the call id, resolves to the answer SDP. */
async function postOffer(c, sdp) {
  const headers = { 'Content-Type': 'application/sdp' };
  if (apiKey()) headers.Authorization = `Bearer ${apiKey()}`;
  let res;
  try {
    // turn_events: the turn detector's decisions on the data channel (a Duet extension).
    res = await fetch('/v1/realtime/calls?turn_events=1', { method: 'POST', headers, body: sdp });
  } catch (e) {
    throw new UserError(`Could not reach the server: ${e.message}`);
  }
  if (res.status !== 201 && !res.ok) throw await httpError(res);
  const location = res.headers.get('Location') || '';
  c.callId = location.split('/').pop() || null;
  duet.callId = c.callId;
  return res.text();
}

export async function connectWebRtc(c) {
  const pc = new RTCPeerConnection();
  c.pc = pc;
  const track = c.mic.getAudioTracks()[0];
  c.sender = pc.addTrack(track, c.mic);
  const dc = pc.createDataChannel('oai-events');
  c.dc = dc;
  wireCall(c, pc, dc);

  await pc.setLocalDescription(await pc.createOffer());
  await waitForIceGathering(pc, 500);
  if (conn !== c) return;

  const answer = await postOffer(c, pc.localDescription.sdp);
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
