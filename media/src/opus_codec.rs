//! Opus encode/decode for Duet's WebRTC leg: 48 kHz mono, 20 ms frames.
//!
//! [`OpusEncoder`] is tuned for speech over lossy links (VoIP mode, 32 kbps,
//! in-band FEC on, 10 % expected loss). [`OpusDecoder`] always produces mono
//! (libopus downmixes stereo packets) and exposes both loss repair paths:
//! [`OpusDecoder::conceal`] (PLC, nothing received) and
//! [`OpusDecoder::decode_fec`] (rebuild the lost frame from the FEC copy
//! carried in the next packet).

use opus::{Application, Bitrate, Channels, ErrorCode};
use thiserror::Error;

use crate::rtp_time::{OPUS_FRAME, OPUS_RATE};

/// Encoder bitrate (bits per second).
pub const OPUS_BITRATE: i32 = 32_000;
/// Expected packet loss the encoder sizes its FEC for (percent).
pub const OPUS_LOSS_PERC: i32 = 10;
/// Encoder complexity (0–10). libopus defaults to 10, which cost ~340 µs per 20 ms frame on
/// the 2-core benchmark box; 5 costs ~155 µs (`cargo bench -p duet-media -- opus_encode`), fine for speech at 32 kbps.
pub const OPUS_COMPLEXITY: i32 = 5;
/// Largest encoded packet we produce (bytes; libopus' recommended bound).
const MAX_PACKET: usize = 4000;
/// Longest frame an Opus packet can hold: 120 ms at 48 kHz.
const MAX_DECODE: usize = 5760;
/// PLC and FEC durations must be multiples of 2.5 ms (120 samples at 48 kHz).
const PLC_QUANTUM: usize = 120;

/// Errors from the Opus wrapper.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CodecError {
    /// The PCM frame (or requested FEC duration) has the wrong length.
    #[error("invalid frame size: expected {expected} samples, got {got}")]
    FrameSize {
        /// The length required.
        expected: usize,
        /// The length given.
        got: usize,
    },
    /// An empty packet was passed where real data is required.
    #[error("empty opus packet")]
    EmptyPacket,
    /// libopus rejected the packet as corrupt.
    #[error("invalid opus packet")]
    InvalidPacket,
    /// Creating or configuring the encoder or decoder failed.
    #[error("opus setup failed: {0}")]
    Init(String),
    /// libopus failed while encoding.
    #[error("opus encode failed: {0}")]
    Encode(String),
    /// libopus failed while decoding (other than a corrupt packet).
    #[error("opus decode failed: {0}")]
    Decode(String),
}

impl CodecError {
    /// A stable machine-readable code for this error.
    pub fn code(&self) -> &'static str {
        match self {
            CodecError::FrameSize { .. } => "opus_frame_size",
            CodecError::EmptyPacket => "opus_empty_packet",
            CodecError::InvalidPacket => "opus_invalid_packet",
            CodecError::Init(_) => "opus_init",
            CodecError::Encode(_) => "opus_encode",
            CodecError::Decode(_) => "opus_decode",
        }
    }

    fn decode(e: opus::Error) -> Self {
        if e.code() == ErrorCode::InvalidPacket {
            CodecError::InvalidPacket
        } else {
            CodecError::Decode(e.to_string())
        }
    }
}

fn init_err(e: opus::Error) -> CodecError {
    CodecError::Init(e.to_string())
}

/// A 48 kHz mono Opus encoder for 20 ms frames.
pub struct OpusEncoder {
    inner: opus::Encoder,
    pcm: Vec<f32>,
    packet: Vec<u8>,
}

impl std::fmt::Debug for OpusEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpusEncoder").finish_non_exhaustive()
    }
}

impl OpusEncoder {
    /// Creates an encoder: VoIP mode, [`OPUS_BITRATE`], in-band FEC on,
    /// [`OPUS_LOSS_PERC`] expected loss, complexity [`OPUS_COMPLEXITY`], voice signal.
    pub fn new() -> Result<Self, CodecError> {
        let mut inner =
            opus::Encoder::new(OPUS_RATE, Channels::Mono, Application::Voip).map_err(init_err)?;
        inner
            .set_bitrate(Bitrate::Bits(OPUS_BITRATE))
            .map_err(init_err)?;
        inner.set_inband_fec(true).map_err(init_err)?;
        inner.set_complexity(OPUS_COMPLEXITY).map_err(init_err)?;
        inner.set_signal(opus::Signal::Voice).map_err(init_err)?;
        inner
            .set_packet_loss_perc(OPUS_LOSS_PERC)
            .map_err(init_err)?;
        Ok(OpusEncoder {
            inner,
            pcm: vec![0.0; OPUS_FRAME],
            packet: vec![0; MAX_PACKET],
        })
    }

    /// Encodes one frame of exactly [`OPUS_FRAME`] samples (nominal range
    /// -1..1; non-finite samples are encoded as 0).
    pub fn encode(&mut self, pcm: &[f32]) -> Result<Vec<u8>, CodecError> {
        if pcm.len() != OPUS_FRAME {
            return Err(CodecError::FrameSize {
                expected: OPUS_FRAME,
                got: pcm.len(),
            });
        }
        for (dst, &src) in self.pcm.iter_mut().zip(pcm) {
            *dst = if src.is_finite() { src } else { 0.0 };
        }
        self.encode_scratch()
    }

    /// Encodes one frame of digital silence.
    pub fn encode_silence(&mut self) -> Result<Vec<u8>, CodecError> {
        self.pcm.fill(0.0);
        self.encode_scratch()
    }

    fn encode_scratch(&mut self) -> Result<Vec<u8>, CodecError> {
        let n = self
            .inner
            .encode_float(&self.pcm, &mut self.packet)
            .map_err(|e| CodecError::Encode(e.to_string()))?;
        let n = n.min(self.packet.len());
        Ok(self.packet[..n].to_vec())
    }
}

/// A 48 kHz mono Opus decoder (stereo packets are downmixed).
pub struct OpusDecoder {
    inner: opus::Decoder,
    scratch: Vec<f32>,
}

impl std::fmt::Debug for OpusDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpusDecoder").finish_non_exhaustive()
    }
}

impl OpusDecoder {
    /// Creates a mono decoder at [`OPUS_RATE`].
    pub fn new() -> Result<Self, CodecError> {
        let inner = opus::Decoder::new(OPUS_RATE, Channels::Mono).map_err(init_err)?;
        Ok(OpusDecoder {
            inner,
            scratch: vec![0.0; MAX_DECODE],
        })
    }

    /// Decodes `packet`, appending the samples to `out`; returns how many
    /// were appended. An empty packet is an error (use [`Self::conceal`]).
    pub fn decode(&mut self, packet: &[u8], out: &mut Vec<f32>) -> Result<usize, CodecError> {
        if packet.is_empty() {
            return Err(CodecError::EmptyPacket);
        }
        let n = self
            .inner
            .decode_float(packet, &mut self.scratch, false)
            .map_err(CodecError::decode)?;
        let n = n.min(self.scratch.len());
        out.extend_from_slice(&self.scratch[..n]);
        Ok(n)
    }

    /// Appends exactly `samples` samples of packet-loss concealment to `out`.
    /// Where libopus cannot conceal (e.g. a length that is not a multiple of
    /// 2.5 ms is rounded up internally and trimmed), failures append zeros.
    pub fn conceal(&mut self, samples: usize, out: &mut Vec<f32>) {
        let mut left = samples;
        while left > 0 {
            let want = left.min(MAX_DECODE);
            let ask = want.div_ceil(PLC_QUANTUM) * PLC_QUANTUM;
            match self
                .inner
                .decode_float(&[], &mut self.scratch[..ask], false)
            {
                Ok(n) => {
                    let n = n.min(want);
                    out.extend(self.scratch[..n].iter().map(|&v| sanitize(v)));
                    out.extend(std::iter::repeat_n(0.0, want - n));
                }
                Err(_) => out.extend(std::iter::repeat_n(0.0, want)),
            }
            left -= want;
        }
    }

    /// Recovers a lost frame of `samples` samples from the in-band FEC of
    /// `next_packet` (the packet that followed the lost one), appending it
    /// to `out`. Afterwards decode `next_packet` itself normally. If the
    /// packet carries no FEC, libopus falls back to concealment.
    /// `samples` must be a non-zero multiple of 120 (2.5 ms), at most 5760.
    pub fn decode_fec(
        &mut self,
        next_packet: &[u8],
        samples: usize,
        out: &mut Vec<f32>,
    ) -> Result<usize, CodecError> {
        if next_packet.is_empty() {
            return Err(CodecError::EmptyPacket);
        }
        if samples == 0 || samples > MAX_DECODE || samples % PLC_QUANTUM != 0 {
            return Err(CodecError::FrameSize {
                expected: OPUS_FRAME,
                got: samples,
            });
        }
        let n = self
            .inner
            .decode_float(next_packet, &mut self.scratch[..samples], true)
            .map_err(CodecError::decode)?;
        let n = n.min(samples);
        out.extend_from_slice(&self.scratch[..n]);
        Ok(n)
    }
}

fn sanitize(v: f32) -> f32 {
    if v.is_finite() {
        v
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{dominant_freq, goertzel_amp, rms, sine};

    fn tone_frames(n: usize) -> Vec<Vec<f32>> {
        let s = sine(440.0, OPUS_RATE, 0.5, n * OPUS_FRAME);
        s.chunks(OPUS_FRAME).map(<[f32]>::to_vec).collect()
    }

    #[test]
    fn sine_round_trips_with_frequency_and_level() {
        let mut enc = OpusEncoder::new().unwrap();
        let mut dec = OpusDecoder::new().unwrap();
        let mut out = Vec::new();
        for frame in tone_frames(50) {
            let pkt = enc.encode(&frame).unwrap();
            assert_eq!(dec.decode(&pkt, &mut out).unwrap(), OPUS_FRAME);
        }
        assert_eq!(out.len(), 50 * OPUS_FRAME);
        // Skip 200 ms: codec lookahead and encoder convergence.
        let tail = &out[10 * OPUS_FRAME..];
        let f = dominant_freq(tail, OPUS_RATE, 200.0, 1000.0, 2.0);
        assert!((f - 440.0).abs() <= 6.0, "dominant {f}");
        let amp = goertzel_amp(tail, 440.0, OPUS_RATE);
        let db = 20.0 * (amp / 0.5).log10();
        assert!(db.abs() < 3.0, "level off by {db} dB");
    }

    #[test]
    fn silence_is_a_small_packet() {
        // libopus 1.3.1 picks fullband hybrid at 32 kbps, whose CELT layer
        // keeps steady-state silence at ~21 bytes (SILK-only would be ~8);
        // speech-like frames are ~100 bytes.
        let mut enc = OpusEncoder::new().unwrap();
        for _ in 0..30 {
            let pkt = enc.encode_silence().unwrap();
            assert!(!pkt.is_empty() && pkt.len() <= 24, "{} bytes", pkt.len());
        }
        let tone = enc.encode(&tone_frames(1)[0]).unwrap();
        assert!(tone.len() > 40, "tone packet {} bytes", tone.len());
    }

    #[test]
    fn wrong_frame_size_errors() {
        let mut enc = OpusEncoder::new().unwrap();
        for len in [0, 959, 961, 480, 1920] {
            let err = enc.encode(&vec![0.0; len]).unwrap_err();
            assert_eq!(
                err,
                CodecError::FrameSize {
                    expected: 960,
                    got: len
                }
            );
            assert_eq!(err.code(), "opus_frame_size");
        }
    }

    #[test]
    fn non_finite_input_is_sanitized() {
        let mut enc = OpusEncoder::new().unwrap();
        let mut dec = OpusDecoder::new().unwrap();
        let mut frame = vec![f32::NAN; OPUS_FRAME];
        frame[1] = f32::INFINITY;
        let pkt = enc.encode(&frame).unwrap();
        let mut out = Vec::new();
        dec.decode(&pkt, &mut out).unwrap();
        assert!(out.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn plc_produces_finite_samples() {
        let mut enc = OpusEncoder::new().unwrap();
        let mut dec = OpusDecoder::new().unwrap();
        let mut out = Vec::new();
        for frame in tone_frames(5) {
            dec.decode(&enc.encode(&frame).unwrap(), &mut out).unwrap();
        }
        out.clear();
        dec.conceal(OPUS_FRAME, &mut out);
        assert_eq!(out.len(), OPUS_FRAME);
        assert!(out.iter().all(|v| v.is_finite()));
        // Odd lengths still append exactly what was asked.
        out.clear();
        dec.conceal(1000, &mut out);
        assert_eq!(out.len(), 1000);
        out.clear();
        dec.conceal(7000, &mut out);
        assert_eq!(out.len(), 7000);
        assert!(out.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn fec_recovers_a_lost_tone_frame() {
        let mut enc = OpusEncoder::new().unwrap();
        let mut dec = OpusDecoder::new().unwrap();
        let pkts: Vec<Vec<u8>> = tone_frames(20)
            .iter()
            .map(|f| enc.encode(f).unwrap())
            .collect();
        let mut out = Vec::new();
        for pkt in &pkts[..12] {
            dec.decode(pkt, &mut out).unwrap();
        }
        // Packet 12 is lost; 13 arrives and carries its FEC.
        let mut fec = Vec::new();
        let n = dec.decode_fec(&pkts[13], OPUS_FRAME, &mut fec).unwrap();
        assert_eq!(n, OPUS_FRAME);
        assert!(rms(&fec) > 0.05, "FEC output rms {}", rms(&fec));
        assert!(dec.decode(&pkts[13], &mut out).unwrap() == OPUS_FRAME);
    }

    #[test]
    fn fec_rejects_bad_arguments() {
        let mut dec = OpusDecoder::new().unwrap();
        let mut out = Vec::new();
        assert_eq!(
            dec.decode_fec(&[], OPUS_FRAME, &mut out),
            Err(CodecError::EmptyPacket)
        );
        for bad in [0, 100, 6000] {
            let err = dec.decode_fec(&[0xF8, 0xFF, 0xFE], bad, &mut out);
            assert!(matches!(err, Err(CodecError::FrameSize { .. })));
        }
        assert!(out.is_empty());
    }

    #[test]
    fn decodes_stereo_packets_to_mono() {
        let mut enc = opus::Encoder::new(OPUS_RATE, Channels::Stereo, Application::Voip).unwrap();
        let mono = sine(440.0, OPUS_RATE, 0.5, 20 * OPUS_FRAME);
        let mut dec = OpusDecoder::new().unwrap();
        let mut out = Vec::new();
        for frame in mono.chunks(OPUS_FRAME) {
            let inter: Vec<f32> = frame.iter().flat_map(|&v| [v, v]).collect();
            let pkt = enc.encode_vec_float(&inter, 4000).unwrap();
            assert_eq!(dec.decode(&pkt, &mut out).unwrap(), OPUS_FRAME);
        }
        let tail = &out[5 * OPUS_FRAME..];
        let f = dominant_freq(tail, OPUS_RATE, 200.0, 1000.0, 2.0);
        assert!((f - 440.0).abs() <= 6.0, "dominant {f}");
    }

    #[test]
    fn garbage_and_empty_packets_error() {
        let mut dec = OpusDecoder::new().unwrap();
        let mut out = Vec::new();
        assert_eq!(dec.decode(&[], &mut out), Err(CodecError::EmptyPacket));
        // Code 3 (arbitrary frame count) with a zero frame count is invalid.
        let err = dec.decode(&[0x03, 0x00], &mut out).unwrap_err();
        assert_eq!(err, CodecError::InvalidPacket);
        assert_eq!(err.code(), "opus_invalid_packet");
        assert!(out.is_empty());
    }
}
