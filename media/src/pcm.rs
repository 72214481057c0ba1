//! Linear PCM conversions and level measurement.
//!
//! Samples inside Duet are mono `f32` in `[-1.0, 1.0]`; on the wire they are
//! 16-bit signed little-endian integers. The scale is 1/32768 both ways, so
//! `i16::MIN` maps to exactly `-1.0` and `i16::MAX` to just below `1.0`.

use thiserror::Error;

/// Scale between `i16` sample values and `f32` full scale.
const SCALE: f32 = 32768.0;

/// The floor reported by [`rms_dbfs`] for empty or silent input.
pub const SILENCE_DBFS: f32 = -120.0;

/// Errors from decoding raw PCM bytes.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PcmError {
    /// 16-bit PCM needs an even number of bytes.
    #[error("PCM16 data has an odd length of {len} bytes")]
    OddLength {
        /// The offending byte count.
        len: usize,
    },
}

impl PcmError {
    /// A stable machine-readable code for this error.
    pub fn code(&self) -> &'static str {
        match self {
            PcmError::OddLength { .. } => "pcm_odd_length",
        }
    }
}

/// Converts one `f32` sample to `i16`: scales by 32768, rounds, clamps.
/// NaN becomes 0.
pub fn f32_to_i16(x: f32) -> i16 {
    if x.is_nan() {
        return 0;
    }
    (x * SCALE).round().clamp(i16::MIN as f32, i16::MAX as f32) as i16
}

/// Converts one `i16` sample to `f32` (divides by 32768).
pub fn i16_to_f32(x: i16) -> f32 {
    f32::from(x) / SCALE
}

/// Decodes 16-bit little-endian PCM bytes into `f32` samples.
///
/// Fails with [`PcmError::OddLength`] when `bytes` has an odd length.
pub fn pcm16le_to_f32(bytes: &[u8]) -> Result<Vec<f32>, PcmError> {
    if bytes.len() % 2 != 0 {
        return Err(PcmError::OddLength { len: bytes.len() });
    }
    Ok(bytes
        .chunks_exact(2)
        .map(|b| i16_to_f32(i16::from_le_bytes([b[0], b[1]])))
        .collect())
}

/// Encodes `f32` samples as 16-bit little-endian PCM (clamped and rounded).
pub fn f32_to_pcm16le(samples: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(samples.len() * 2);
    for &s in samples {
        out.extend_from_slice(&f32_to_i16(s).to_le_bytes());
    }
    out
}

/// Why bytes are not a WAV file this crate reads.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WavError {
    /// Not RIFF/WAVE.
    #[error("not a WAV file (no RIFF/WAVE header)")]
    NotWav,
    /// A chunk runs past the end, or `fmt ` / `data` is missing.
    #[error("the WAV file is truncated or has no fmt and data chunks")]
    Truncated,
    /// Not 16-bit integer or 32-bit float PCM.
    #[error("the WAV file holds {0}; send 16-bit PCM or 32-bit float WAV")]
    Unsupported(String),
}

/// Reads a WAV file of 16-bit integer or 32-bit float PCM (plain or `WAVE_FORMAT_EXTENSIBLE`),
/// any rate and channel count: its rate and its samples mixed down to mono.
pub fn parse_wav(bytes: &[u8]) -> Result<(u32, Vec<f32>), WavError> {
    if bytes.len() < 12 || &bytes[..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return Err(WavError::NotWav);
    }
    let (mut fmt, mut data) = (None, None);
    let mut at = 12usize;
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let len = u32::from_le_bytes([bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]]);
        let start = at + 8;
        // A data chunk that says more than there is (a stream written before its length was
        // known) runs to the end.
        let end = start.saturating_add(len as usize).min(bytes.len());
        match id {
            b"fmt " => fmt = Some(&bytes[start..end]),
            b"data" => data = Some(&bytes[start..end]),
            _ => {}
        }
        at = end + (end - start) % 2; // chunks are padded to even lengths
    }
    let (Some(fmt), Some(data)) = (fmt, data) else {
        return Err(WavError::Truncated);
    };
    let (rate, channels, bits, sample) = wav_format(fmt)?;
    let width = usize::from(bits / 8) * channels;
    let mono = data
        .chunks_exact(width)
        .map(|frame| {
            let sum: f32 = frame.chunks_exact(usize::from(bits / 8)).map(sample).sum();
            sum / channels as f32
        })
        .collect();
    Ok((rate, mono))
}

/// A sample's bytes to a float sample.
type SampleReader = fn(&[u8]) -> f32;

/// A `fmt ` chunk's rate, channels, bits a sample and how to read a sample.
fn wav_format(fmt: &[u8]) -> Result<(u32, usize, u16, SampleReader), WavError> {
    if fmt.len() < 16 {
        return Err(WavError::Truncated);
    }
    let u16_at = |i: usize| u16::from_le_bytes([fmt[i], fmt[i + 1]]);
    let mut format = u16_at(0);
    let channels = usize::from(u16_at(2).max(1));
    let rate = u32::from_le_bytes([fmt[4], fmt[5], fmt[6], fmt[7]]);
    let bits = u16_at(14);
    if format == 0xFFFE && fmt.len() >= 26 {
        format = u16_at(24); // the sub-format's first two bytes
    }
    let sample: SampleReader = match (format, bits) {
        (1, 16) => |b| i16_to_f32(i16::from_le_bytes([b[0], b[1]])),
        (3, 32) => |b| {
            let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            if v.is_finite() {
                v.clamp(-1.0, 1.0)
            } else {
                0.0
            }
        },
        _ => {
            return Err(WavError::Unsupported(format!(
                "format {format} with {bits} bits"
            )))
        }
    };
    if rate == 0 {
        return Err(WavError::Unsupported("a rate of 0 Hz".into()));
    }
    Ok((rate, channels, bits, sample))
}

/// A WAV file (RIFF, PCM16 mono at `rate`) of `samples` ([-1, 1], clamped).
pub fn wav_pcm16(samples: &[f32], rate: u32) -> Vec<u8> {
    let data = f32_to_pcm16le(samples);
    let mut out = Vec::with_capacity(44 + data.len());
    let len = u32::try_from(data.len()).unwrap_or(u32::MAX - 36);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + len).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes()); // bytes a second
    out.extend_from_slice(&2u16.to_le_bytes()); // bytes a frame
    out.extend_from_slice(&16u16.to_le_bytes()); // bits a sample
    out.extend_from_slice(b"data");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&data);
    out
}

/// Root-mean-square level in dB relative to full scale (an RMS of 1.0 is
/// 0 dBFS, so a full-scale sine reads about -3 dBFS).
///
/// Returns [`SILENCE_DBFS`] (-120) for empty, all-zero or NaN input and never
/// less than that.
pub fn rms_dbfs(samples: &[f32]) -> f32 {
    if samples.is_empty() {
        return SILENCE_DBFS;
    }
    let energy: f64 = samples.iter().map(|&s| f64::from(s) * f64::from(s)).sum();
    let rms = (energy / samples.len() as f64).sqrt();
    let db = (20.0 * rms.log10()) as f32;
    if db > SILENCE_DBFS {
        db
    } else {
        SILENCE_DBFS
    }
}

/// Synthetic voiced audio at 24 kHz for tests, examples and load generation: a 140 Hz
/// glottal-like harmonic series with slow vibrato and syllable-rate amplitude modulation,
/// about -18 dBFS. Energy VADs take it for speech.
pub fn synthetic_voice(secs: f32) -> Vec<f32> {
    use std::f32::consts::PI;
    let n = (secs * 24_000.0) as usize;
    let mut phase = 0.0f32;
    (0..n)
        .map(|i| {
            let t = i as f32 / 24_000.0;
            let f0 = 140.0 + 8.0 * (2.0 * PI * 5.0 * t).sin();
            phase += 2.0 * PI * f0 / 24_000.0;
            let syllable = 0.75 + 0.25 * (2.0 * PI * 4.0 * t).sin();
            let s: f32 = (1..=8).map(|h| (phase * h as f32).sin() / h as f32).sum();
            0.12 * syllable * s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wav_is_read_back_and_bad_ones_are_named() {
        let wav = wav_pcm16(&[0.0, 0.5, -0.5], 16_000);
        let (rate, pcm) = parse_wav(&wav).unwrap();
        assert_eq!(rate, 16_000);
        assert_eq!(pcm.len(), 3);
        assert!((pcm[1] - 0.5).abs() < 1e-3);
        assert_eq!(parse_wav(b"ID3 mp3 bytes"), Err(WavError::NotWav));
        assert_eq!(parse_wav(&wav[..30]), Err(WavError::Truncated));
        // Stereo is mixed down; an unsupported width is named.
        let mut stereo = wav.clone();
        stereo[22] = 2;
        let (_, mixed) = parse_wav(&stereo).unwrap();
        assert_eq!(mixed.len(), 1);
        let mut eight = wav;
        eight[34] = 8;
        assert!(matches!(parse_wav(&eight), Err(WavError::Unsupported(_))));
    }

    #[test]
    fn a_wav_has_its_header_and_samples() {
        let wav = wav_pcm16(&[0.0, 0.5, -1.0], 24_000);
        assert_eq!(wav.len(), 44 + 6);
        assert_eq!(&wav[..4], b"RIFF");
        assert_eq!(u32::from_le_bytes(wav[4..8].try_into().unwrap()), 36 + 6);
        assert_eq!(&wav[8..16], b"WAVEfmt ");
        assert_eq!(u32::from_le_bytes(wav[24..28].try_into().unwrap()), 24_000);
        assert_eq!(&wav[36..40], b"data");
        assert_eq!(u32::from_le_bytes(wav[40..44].try_into().unwrap()), 6);
        assert_eq!(pcm16le_to_f32(&wav[44..]).unwrap()[2], -1.0);
    }

    #[test]
    fn odd_length_is_rejected_with_code() {
        let err = pcm16le_to_f32(&[0, 1, 2]).unwrap_err();
        assert_eq!(err, PcmError::OddLength { len: 3 });
        assert_eq!(err.code(), "pcm_odd_length");
        assert!(err.to_string().contains('3'));
    }

    #[test]
    fn decodes_little_endian_with_exact_scale() {
        let bytes = [0x00, 0x80, 0xff, 0x7f, 0x00, 0x40, 0xff, 0xff, 0, 0];
        let s = pcm16le_to_f32(&bytes).unwrap();
        assert_eq!(s, vec![-1.0, 32767.0 / 32768.0, 0.5, -1.0 / 32768.0, 0.0]);
        assert!(pcm16le_to_f32(&[]).unwrap().is_empty());
    }

    #[test]
    fn encode_clamps_and_rounds() {
        assert_eq!(f32_to_i16(2.0), i16::MAX);
        assert_eq!(f32_to_i16(-2.0), i16::MIN);
        assert_eq!(f32_to_i16(f32::NAN), 0);
        assert_eq!(f32_to_i16(f32::INFINITY), i16::MAX);
        assert_eq!(f32_to_i16(0.4 / 32768.0), 0);
        assert_eq!(f32_to_i16(0.6 / 32768.0), 1);
        assert_eq!(f32_to_i16(-0.6 / 32768.0), -1);
        assert_eq!(f32_to_pcm16le(&[0.5, -1.0]), vec![0x00, 0x40, 0x00, 0x80]);
    }

    #[test]
    fn every_i16_round_trips_exactly() {
        for v in i16::MIN..=i16::MAX {
            assert_eq!(f32_to_i16(i16_to_f32(v)), v);
        }
        let all: Vec<i16> = (i16::MIN..=i16::MAX).collect();
        let bytes: Vec<u8> = all.iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(f32_to_pcm16le(&pcm16le_to_f32(&bytes).unwrap()), bytes);
    }

    #[test]
    fn rms_levels() {
        assert_eq!(rms_dbfs(&[]), SILENCE_DBFS);
        assert_eq!(rms_dbfs(&[0.0; 100]), SILENCE_DBFS);
        assert_eq!(rms_dbfs(&[f32::NAN; 4]), SILENCE_DBFS);
        assert!((rms_dbfs(&[1.0, -1.0]) - 0.0).abs() < 1e-4);
        assert!((rms_dbfs(&[0.1; 10]) + 20.0).abs() < 1e-4);
        let sine: Vec<f32> = (0..1600)
            .map(|i| (i as f32 * 2.0 * std::f32::consts::PI / 16.0).sin())
            .collect();
        assert!((rms_dbfs(&sine) + 3.0103).abs() < 0.01);
        assert_eq!(rms_dbfs(&[1e-9]), SILENCE_DBFS);
    }
}
