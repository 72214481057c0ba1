//! Wire audio <-> the session's internal audio (mono f32 at 24 kHz), one stateful resampler
//! per direction for the 8 kHz G.711 formats; and the compact form audio is kept in for the
//! life of a session (PCM16 at 24 kHz: the input buffer, the conversation, the answer being
//! generated), converted from f32 once on the way in and back only where f32 is needed.

use std::sync::Arc;

use base64::Engine;

use duet_media::{
    decode_alaw, decode_ulaw, encode_alaw, encode_ulaw, f32_to_i16, f32_to_pcm16le, i16_to_f32,
    pcm16le_to_f32, PcmError, StreamResampler,
};

use crate::protocol::{codes, AudioFormat, ErrorPayload};

/// Internal sample rate.
pub const RATE: u32 = duet_media::SESSION_RATE;

/// Samples a stored clip is converted in at a time on its way to a resampling encoder (the
/// f32 copy stays this small however long the clip).
const CLIP_CHUNK: usize = 4_800;

/// Appends `samples` to `out` as stored PCM16: scaled by 32768, rounded, clamped (as on the
/// wire, so audio that came as PCM16 is kept exactly).
pub fn to_pcm16(samples: &[f32], out: &mut Vec<i16>) {
    out.extend(samples.iter().map(|&s| f32_to_i16(s)));
}

/// Stored PCM16 as f32, for a consumer that needs f32 (the model's context, the
/// transcriber).
pub fn to_f32(samples: &[i16]) -> Arc<[f32]> {
    samples.iter().map(|&s| i16_to_f32(s)).collect()
}

/// Whether `format` is PCM16 at the session rate: stored audio and its wire bytes are then
/// the same samples.
fn is_session_pcm(format: AudioFormat) -> bool {
    matches!(format, AudioFormat::Pcm { .. }) && format.sample_rate() == RATE
}

fn odd_pcm(len: usize) -> ErrorPayload {
    ErrorPayload::invalid(
        codes::INVALID_AUDIO,
        format!("audio/pcm: {}", PcmError::OddLength { len }),
    )
    .with_param("audio")
}

/// Decodes one direction of wire audio into 24 kHz f32.
pub struct Decoder {
    format: AudioFormat,
    resampler: Option<StreamResampler>,
}

/// Encodes 24 kHz f32 into one wire format.
pub struct Encoder {
    format: AudioFormat,
    resampler: Option<StreamResampler>,
}

fn resampler_for(format: AudioFormat, from: u32, to: u32) -> Option<StreamResampler> {
    if format.sample_rate() == RATE {
        return None;
    }
    // Rates are fixed (8 kHz <-> 24 kHz), which the resampler supports.
    StreamResampler::new(from, to).ok()
}

impl Decoder {
    /// A decoder for `format`.
    pub fn new(format: AudioFormat) -> Self {
        Self {
            format,
            resampler: resampler_for(format, format.sample_rate(), RATE),
        }
    }

    /// The wire format.
    pub fn format(&self) -> AudioFormat {
        self.format
    }

    /// Wire bytes to 24 kHz samples.
    pub fn decode(&mut self, bytes: &[u8], out: &mut Vec<f32>) -> Result<(), ErrorPayload> {
        let samples = match self.format {
            AudioFormat::Pcm { .. } => pcm16le_to_f32(bytes).map_err(|_| odd_pcm(bytes.len()))?,
            AudioFormat::Pcmu => decode_ulaw(bytes),
            AudioFormat::Pcma => decode_alaw(bytes),
        };
        match &mut self.resampler {
            Some(r) => r.process(&samples, out),
            None => out.extend_from_slice(&samples),
        }
        Ok(())
    }

    /// Converts a whole standalone clip (not part of the stream), e.g. an item's audio.
    pub fn decode_clip(format: AudioFormat, bytes: &[u8]) -> Result<Vec<f32>, ErrorPayload> {
        let mut d = Decoder::new(format);
        let mut out = Vec::new();
        d.decode(bytes, &mut out)?;
        if let Some(r) = &mut d.resampler {
            r.flush(&mut out);
        }
        Ok(out)
    }

    /// Converts a whole standalone clip into stored PCM16 (session-rate PCM16 is taken as
    /// it is, without a pass through f32).
    pub fn decode_clip_pcm16(format: AudioFormat, bytes: &[u8]) -> Result<Vec<i16>, ErrorPayload> {
        if !is_session_pcm(format) {
            let samples = Self::decode_clip(format, bytes)?;
            let mut out = Vec::with_capacity(samples.len());
            to_pcm16(&samples, &mut out);
            return Ok(out);
        }
        if !bytes.len().is_multiple_of(2) {
            return Err(odd_pcm(bytes.len()));
        }
        Ok(bytes
            .chunks_exact(2)
            .map(|b| i16::from_le_bytes([b[0], b[1]]))
            .collect())
    }
}

impl Encoder {
    /// An encoder for `format`.
    pub fn new(format: AudioFormat) -> Self {
        Self {
            format,
            resampler: resampler_for(format, RATE, format.sample_rate()),
        }
    }

    /// 24 kHz samples to wire bytes (G.711 output lags by the resampler's delay).
    pub fn encode(&mut self, samples: &[f32]) -> Vec<u8> {
        let mut resampled;
        let samples = match &mut self.resampler {
            Some(r) => {
                resampled = Vec::with_capacity(samples.len() / 3 + 64);
                r.process(samples, &mut resampled);
                &resampled[..]
            }
            None => samples,
        };
        self.to_wire(samples)
    }

    /// Flushes the resampler tail at the end of a response.
    pub fn finish(&mut self) -> Vec<u8> {
        let Some(r) = &mut self.resampler else {
            return Vec::new();
        };
        let mut tail = Vec::new();
        r.flush(&mut tail);
        self.to_wire(&tail)
    }

    fn to_wire(&self, samples: &[f32]) -> Vec<u8> {
        match self.format {
            AudioFormat::Pcm { .. } => f32_to_pcm16le(samples),
            AudioFormat::Pcmu => encode_ulaw(samples),
            AudioFormat::Pcma => encode_alaw(samples),
        }
    }

    /// Converts a whole standalone f32 clip (what [`Self::encode_clip_pcm16`] must match).
    #[cfg(test)]
    pub fn encode_clip(format: AudioFormat, samples: &[f32]) -> Vec<u8> {
        let mut e = Encoder::new(format);
        let mut bytes = e.encode(samples);
        bytes.extend(e.finish());
        bytes
    }

    /// Converts a whole stored clip, e.g. an item's audio for `retrieve`: session-rate PCM16
    /// is its samples' bytes; a resampled format goes through f32 a chunk at a time.
    pub fn encode_clip_pcm16(format: AudioFormat, samples: &[i16]) -> Vec<u8> {
        if is_session_pcm(format) {
            return samples.iter().flat_map(|s| s.to_le_bytes()).collect();
        }
        let mut e = Encoder::new(format);
        let mut bytes = Vec::new();
        let mut chunk = Vec::with_capacity(CLIP_CHUNK.min(samples.len()));
        for part in samples.chunks(CLIP_CHUNK) {
            chunk.clear();
            chunk.extend(part.iter().map(|&s| i16_to_f32(s)));
            bytes.extend(e.encode(&chunk));
        }
        bytes.extend(e.finish());
        bytes
    }
}

/// Decodes a standalone clip in `format` (the session's input format).
pub(super) fn decode_clip(format: AudioFormat, b64: &str) -> Result<Vec<f32>, ErrorPayload> {
    Decoder::decode_clip(format, &clip_bytes(b64)?)
}

/// About what base64 `audio` in `format` decodes to: bytes, and 24 kHz samples.
pub(super) fn decoded_size(format: AudioFormat, audio: &str) -> (u64, u64) {
    let bytes = audio.len() as u64 / 4 * 3;
    let samples =
        bytes / u64::from(format.bytes_per_sample()) * 24_000 / u64::from(format.sample_rate());
    (bytes, samples)
}

/// Decodes a standalone clip in `format` into stored PCM16.
pub(super) fn decode_clip_pcm16(format: AudioFormat, b64: &str) -> Result<Vec<i16>, ErrorPayload> {
    Decoder::decode_clip_pcm16(format, &clip_bytes(b64)?)
}

/// The bytes of base64 `b64` (`invalid_audio` when it is not base64).
pub(super) fn clip_bytes(b64: &str) -> Result<Vec<u8>, ErrorPayload> {
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| {
            ErrorPayload::invalid(
                codes::INVALID_AUDIO,
                format!("audio is not valid base64: {e}"),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_pcm_rate_is_the_session_rate() {
        // audio/pcm passes through without resampling only because these agree.
        assert_eq!(AudioFormat::default().sample_rate(), RATE);
    }

    #[test]
    fn pcm_roundtrip_is_exact_length() {
        let samples: Vec<f32> = (0..480).map(|i| (i as f32 / 480.0) - 0.5).collect();
        let bytes = Encoder::encode_clip(AudioFormat::default(), &samples);
        assert_eq!(bytes.len(), 960);
        let back = Decoder::decode_clip(AudioFormat::default(), &bytes).unwrap();
        assert_eq!(back.len(), 480);
        assert!((back[100] - samples[100]).abs() < 1e-4);
    }

    #[test]
    fn g711_is_8khz_on_the_wire() {
        let samples = vec![0.1f32; 24_000];
        let bytes = Encoder::encode_clip(AudioFormat::Pcmu, &samples);
        assert!((8_000..=8_200).contains(&bytes.len()), "{}", bytes.len());
        let back = Decoder::decode_clip(AudioFormat::Pcma, &vec![0xD5; 8_000]).unwrap();
        assert!((24_000..=24_600).contains(&back.len()), "{}", back.len());
    }

    #[test]
    fn stored_pcm16_keeps_wire_pcm16_exactly() {
        let all: Vec<i16> = (i16::MIN..=i16::MAX).collect();
        let bytes: Vec<u8> = all.iter().flat_map(|v| v.to_le_bytes()).collect();
        let pcm = AudioFormat::default();
        let stored = Decoder::decode_clip_pcm16(pcm, &bytes).unwrap();
        assert_eq!(stored, all);
        assert_eq!(Encoder::encode_clip_pcm16(pcm, &stored), bytes);
        // Live input is decoded to f32 first and kept as PCM16 after: the same samples.
        let live = Decoder::decode_clip(pcm, &bytes).unwrap();
        let mut kept = Vec::new();
        to_pcm16(&live, &mut kept);
        assert_eq!(kept, all);
        assert_eq!(&*to_f32(&stored), &live[..]);
    }

    #[test]
    fn to_pcm16_rounds_and_clamps() {
        let lsb = 1.0 / 32768.0;
        let mut out = vec![7];
        to_pcm16(
            &[0.4 * lsb, 0.6 * lsb, -0.6 * lsb, 0.5, 1.0, -1.5, f32::NAN],
            &mut out,
        );
        assert_eq!(out, [7, 0, 1, -1, 16_384, i16::MAX, i16::MIN, 0]);
    }

    #[test]
    fn a_stored_clip_encodes_as_its_f32_would() {
        // G.711 resamples a chunk at a time; the output is the whole clip's.
        let clip: Vec<i16> = (0..24_000 + 123)
            .map(|i: i32| ((i * 37) % 20_000 - 10_000) as i16)
            .collect();
        let f = to_f32(&clip);
        for format in [AudioFormat::default(), AudioFormat::Pcmu, AudioFormat::Pcma] {
            assert_eq!(
                Encoder::encode_clip_pcm16(format, &clip),
                Encoder::encode_clip(format, &f),
                "{format:?}"
            );
        }
        assert!(Encoder::encode_clip_pcm16(AudioFormat::Pcmu, &[]).is_empty());
    }

    #[test]
    fn an_odd_pcm_clip_fails_as_the_stream_does() {
        let pcm = AudioFormat::default();
        let err = Decoder::decode_clip_pcm16(pcm, &[1, 2, 3]).unwrap_err();
        assert_eq!(err, Decoder::decode_clip(pcm, &[1, 2, 3]).unwrap_err());
        assert_eq!(err.code.as_deref(), Some(codes::INVALID_AUDIO));
    }

    #[test]
    fn odd_pcm_is_invalid_audio() {
        let err = Decoder::new(AudioFormat::default())
            .decode(&[1, 2, 3], &mut Vec::new())
            .unwrap_err();
        assert_eq!(err.code.as_deref(), Some(codes::INVALID_AUDIO));
    }
}
