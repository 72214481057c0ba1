// ---------------------------------------------------------------------------------------
// PCM codec: resampling to the Realtime API's rate and PCM16 <-> base64 (pure functions,
// no imports).

/** Streaming linear resampler with a light anti-alias filter when decimating. */
export class Resampler {
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

export function pcm16Base64(samples) {
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

export function base64Pcm16(b64) {
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
