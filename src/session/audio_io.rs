//! Wire audio <-> the session's internal audio (mono f32 at 24 kHz), one stateful resampler
//! per direction for the 8 kHz G.711 formats.

use duet_media::{
    decode_alaw, decode_ulaw, encode_alaw, encode_ulaw, f32_to_pcm16le, pcm16le_to_f32,
    StreamResampler,
};

use crate::protocol::{codes, AudioFormat, ErrorPayload};

/// Internal sample rate.
pub const RATE: u32 = duet_media::SESSION_RATE;

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
            AudioFormat::Pcm { .. } => pcm16le_to_f32(bytes).map_err(|e| {
                ErrorPayload::invalid(codes::INVALID_AUDIO, format!("audio/pcm: {e}"))
                    .with_param("audio")
            })?,
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

    /// Converts a whole standalone clip, e.g. an item's audio for `retrieve`.
    pub fn encode_clip(format: AudioFormat, samples: &[f32]) -> Vec<u8> {
        let mut e = Encoder::new(format);
        let mut bytes = e.encode(samples);
        bytes.extend(e.finish());
        bytes
    }
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
    fn odd_pcm_is_invalid_audio() {
        let err = Decoder::new(AudioFormat::default())
            .decode(&[1, 2, 3], &mut Vec::new())
            .unwrap_err();
        assert_eq!(err.code.as_deref(), Some(codes::INVALID_AUDIO));
    }
}
