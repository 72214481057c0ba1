// Audio: the AudioContext, the level meters and history, the microphone and its picker.

import { now, LEVEL_EVERY_MS, MAX_LEVELS, el, levels, conn, UserError, escapeHtml } from './state.js';

/** One AudioContext for the page, created on the first Connect (a user gesture). */
export let ctx = null;
export let inAnalyser = null;
export let outAnalyser = null;

// ---------------------------------------------------------------------------------------
// Audio: context, meters, level history.

export function audioContext() {
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

export const scratch = new Float32Array(1024);
export function rmsOf(analyser) {
  analyser.getFloatTimeDomainData(scratch);
  let sum = 0;
  for (let i = 0; i < scratch.length; i++) sum += scratch[i] * scratch[i];
  return Math.sqrt(sum / scratch.length);
}

export function setMeter(meter, rms) {
  // -60 dBFS .. 0 dBFS onto 0..100 %.
  const db = 20 * Math.log10(Math.max(rms, 1e-6));
  const pct = Math.max(0, Math.min(100, ((db + 60) / 60) * 100));
  meter.firstElementChild.style.width = `${pct.toFixed(1)}%`;
  meter.setAttribute('aria-valuenow', String(Math.round(pct)));
}

export function sampleLevels() {
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
export const HISTORY_MS = 15000;
export function drawLevels(tNow) {
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

/** The constraints for the mic: the browser's echo canceller as the page's checkbox says. It
 *  is needed with speakers; with headphones it only hurts, since while the model talks it
 *  suppresses the user's voice too (full-duplex barge-in). */
export function micConstraints() {
  return { ...MIC_CONSTRAINTS, echoCancellation: el.aec.checked };
}

export async function openMic(deviceId) {
  if (!window.isSecureContext || !navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
    const host = escapeHtml(location.host);
    throw new UserError('The microphone needs HTTPS or localhost.', {
      html: '<strong>The microphone needs a secure page.</strong> Browsers only allow it on HTTPS or on '
        + '<code>http://localhost</code>. Open this page as <code>http://localhost:PORT/</code>, for example '
        + `through an SSH tunnel (<code>ssh -L 8080:127.0.0.1:8080 ${host.split(':')[0]}</code>), or put the `
        + 'server behind TLS.',
    });
  }
  const audio = micConstraints();
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

export async function refreshDevices() {
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
export function attachMic(c, stream) {
  const ac = audioContext();
  if (c.micSource) c.micSource.disconnect();
  c.micSource = ac.createMediaStreamSource(stream);
  c.micSource.connect(inAnalyser);
  if (c.capture) c.micSource.connect(c.capture);
}

export async function switchMic(deviceId) {
  if (!conn || !conn.mic) return; // used on the next Connect
  const fresh = await openMic(deviceId);
  const track = fresh.getAudioTracks()[0];
  track.enabled = !conn.muted;
  if (conn.sender) await conn.sender.replaceTrack(track);
  conn.mic.getTracks().forEach((t) => t.stop());
  conn.mic = fresh;
  attachMic(conn, fresh);
}
