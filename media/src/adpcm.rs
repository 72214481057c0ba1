//! IMA ADPCM: 16-bit PCM stored in 4 bits a sample, a quarter of its bytes.
//!
//! The session keeps conversation audio this way (12 KB per second of 24 kHz audio instead of
//! 48 KB). Encoding costs a few nanoseconds a sample and needs no frames: samples are
//! appended one at a time, any prefix decodes on its own (truncation is a cut), and the
//! encoder tracks the decoder's state, so the error does not drift. The price is a lossy
//! copy: on speech the decoded audio is about 20–30 dB above its error (see the tests).

/// Step sizes of the standard IMA ADPCM quantizer.
const STEPS: [i32; 89] = [
    7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 19, 21, 23, 25, 28, 31, 34, 37, 41, 45, 50, 55, 60, 66,
    73, 80, 88, 97, 107, 118, 130, 143, 157, 173, 190, 209, 230, 253, 279, 307, 337, 371, 408, 449,
    494, 544, 598, 658, 724, 796, 876, 963, 1060, 1166, 1282, 1411, 1552, 1707, 1878, 2066, 2272,
    2499, 2749, 3024, 3327, 3660, 4026, 4428, 4871, 5358, 5894, 6484, 7132, 7845, 8630, 9493,
    10442, 11487, 12635, 13899, 15289, 16818, 18500, 20350, 22385, 24623, 27086, 29794, 32767,
];

/// How a code moves the step index.
const INDEX_MOVE: [i8; 8] = [-1, -1, -1, -1, 2, 4, 6, 8];

/// The coder's state: the last decoded sample and the step index. Encoder and decoder run the
/// same state machine on the same codes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct State {
    predicted: i32,
    index: u8,
}

impl State {
    /// Applies a 4-bit code, returning the decoded sample.
    fn apply(&mut self, code: u8) -> i16 {
        let step = STEPS[self.index as usize];
        let mut diff = step >> 3;
        if code & 4 != 0 {
            diff += step;
        }
        if code & 2 != 0 {
            diff += step >> 1;
        }
        if code & 1 != 0 {
            diff += step >> 2;
        }
        self.predicted = if code & 8 != 0 {
            self.predicted - diff
        } else {
            self.predicted + diff
        }
        .clamp(i16::MIN as i32, i16::MAX as i32);
        let index = self.index as i32 + INDEX_MOVE[(code & 7) as usize] as i32;
        self.index = index.clamp(0, STEPS.len() as i32 - 1) as u8;
        self.predicted as i16
    }

    /// The code for `sample` from this state, applied.
    fn encode(&mut self, sample: i16) -> u8 {
        let step = STEPS[self.index as usize];
        let mut delta = sample as i32 - self.predicted;
        let mut code = 0u8;
        if delta < 0 {
            code = 8;
            delta = -delta;
        }
        // Quantize delta / step to three bits (the decoder adds step / 8 back).
        let mut threshold = step;
        for bit in [4u8, 2, 1] {
            if delta >= threshold {
                code |= bit;
                delta -= threshold;
            }
            threshold >>= 1;
        }
        self.apply(code);
        code
    }
}

/// Mono audio stored as IMA ADPCM (two samples a byte), appended to and cut like a buffer of
/// PCM16 samples.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Adpcm {
    codes: Vec<u8>,
    len: usize,
    state: State,
}

impl Adpcm {
    /// Empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// `samples` encoded.
    pub fn from_i16(samples: &[i16]) -> Self {
        let mut a = Self::new();
        a.reserve_exact(samples.len());
        a.push_i16(samples);
        a
    }

    /// Samples held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds no sample.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of memory it holds (its allocation).
    pub fn heap_bytes(&self) -> usize {
        self.codes.capacity()
    }

    /// Bytes that `samples` samples take.
    pub const fn bytes_for(samples: usize) -> usize {
        samples.div_ceil(2)
    }

    /// Room for `samples` more samples without reallocating, and no more.
    pub fn reserve_exact(&mut self, samples: usize) {
        let need = Self::bytes_for(self.len + samples);
        self.codes
            .reserve_exact(need.saturating_sub(self.codes.len()));
    }

    /// Samples it has room for without reallocating.
    pub fn capacity(&self) -> usize {
        self.codes.capacity() * 2
    }

    /// Gives back memory it does not use.
    pub fn shrink_to_fit(&mut self) {
        self.codes.shrink_to_fit();
    }

    /// Appends one code.
    fn push_code(&mut self, code: u8) {
        if self.len % 2 == 0 {
            self.codes.push(code);
        } else if let Some(last) = self.codes.last_mut() {
            *last |= code << 4;
        }
        self.len += 1;
    }

    /// Appends PCM16 samples.
    pub fn push_i16(&mut self, samples: &[i16]) {
        for &s in samples {
            let code = self.state.encode(s);
            self.push_code(code);
        }
    }

    /// Appends `f32` samples (converted to PCM16 first, as [`crate::f32_to_i16`] does).
    pub fn push_f32(&mut self, samples: &[f32]) {
        for &s in samples {
            let code = self.state.encode(crate::f32_to_i16(s));
            self.push_code(code);
        }
    }

    /// The codes in order, one per sample.
    fn codes(&self) -> impl Iterator<Item = u8> + '_ {
        self.codes
            .iter()
            .flat_map(|&b| [b & 0x0f, b >> 4])
            .take(self.len)
    }

    /// The decoded samples, in order.
    pub fn samples(&self) -> impl Iterator<Item = i16> + '_ {
        let mut state = State::default();
        self.codes().map(move |c| state.apply(c))
    }

    /// Decodes every sample as PCM16.
    pub fn to_i16(&self) -> Vec<i16> {
        let mut out = Vec::with_capacity(self.len);
        out.extend(self.samples());
        out
    }

    /// Decodes every sample as `f32` (as [`crate::i16_to_f32`] does).
    pub fn to_f32(&self) -> Vec<f32> {
        let mut out = Vec::with_capacity(self.len);
        out.extend(self.samples().map(crate::i16_to_f32));
        out
    }

    /// Keeps the first `samples` samples (no-op when it holds fewer). Appending after a cut
    /// goes on from the last kept sample.
    pub fn truncate(&mut self, samples: usize) {
        if samples >= self.len {
            return;
        }
        let mut state = State::default();
        for c in self.codes().take(samples) {
            state.apply(c);
        }
        self.len = samples;
        self.codes.truncate(Self::bytes_for(samples));
        if samples % 2 == 1 {
            if let Some(last) = self.codes.last_mut() {
                *last &= 0x0f;
            }
        }
        self.state = state;
    }
}

#[cfg(test)]
#[path = "adpcm_tests.rs"]
mod tests;
