//! Opus encode/decode for Duet's WebRTC leg: mono, 20 ms frames, PCM at 48 kHz or at any
//! rate libopus takes (8, 12, 16, 24 kHz). The packets are the same Opus on an RTP clock of
//! 48 kHz whatever the PCM rate; a call runs its codec at the session's 24 kHz, so nothing
//! is resampled and the codec works on half the samples.
//!
//! [`OpusEncoder`] is tuned for speech over lossy links (VoIP mode, 32 kbps,
//! in-band FEC on, 10 % expected loss). [`OpusDecoder`] always produces mono
//! (libopus downmixes stereo packets) and exposes both loss repair paths:
//! [`OpusDecoder::conceal`] (PLC, nothing received) and
//! [`OpusDecoder::decode_fec`] (rebuild the lost frame from the FEC copy
//! carried in the next packet).

use opus::{Application, Bitrate, Channels, ErrorCode};
use thiserror::Error;

use crate::rtp_time::OPUS_RATE;

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
/// PLC and FEC durations must be multiples of 2.5 ms (this many per second).
const PLC_PER_SEC: usize = 400;

/// The PCM rates libopus encodes and decodes.
const RATES: [u32; 5] = [8_000, 12_000, 16_000, 24_000, 48_000];

fn check_rate(rate: u32) -> Result<(), CodecError> {
    if RATES.contains(&rate) {
        Ok(())
    } else {
        Err(CodecError::Init(format!(
            "Opus PCM rate {rate} Hz: use one of {RATES:?}"
        )))
    }
}

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

/// A mono Opus encoder for 20 ms frames (48 kHz PCM unless made [`OpusEncoder::with_rate`]).
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
        Self::with_rate(OPUS_RATE)
    }

    /// The same encoder fed PCM at `rate` Hz (frames of `rate / 50` samples).
    pub fn with_rate(rate: u32) -> Result<Self, CodecError> {
        check_rate(rate)?;
        let mut inner =
            opus::Encoder::new(rate, Channels::Mono, Application::Voip).map_err(init_err)?;
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
            pcm: vec![0.0; rate as usize / 50],
            packet: vec![0; MAX_PACKET],
        })
    }

    /// Encodes one frame of exactly [`Self::frame`] samples ([`crate::OPUS_FRAME`] at 48 kHz;
    /// nominal range -1..1; non-finite samples are encoded as 0).
    pub fn encode(&mut self, pcm: &[f32]) -> Result<Vec<u8>, CodecError> {
        let mut out = Vec::new();
        self.encode_into(pcm, &mut out)?;
        Ok(out)
    }

    /// [`Self::encode`] into `out` (cleared first), which keeps its capacity: no allocation
    /// once `out` has held a packet.
    pub fn encode_into(&mut self, pcm: &[f32], out: &mut Vec<u8>) -> Result<(), CodecError> {
        if pcm.len() != self.pcm.len() {
            return Err(CodecError::FrameSize {
                expected: self.pcm.len(),
                got: pcm.len(),
            });
        }
        for (dst, &src) in self.pcm.iter_mut().zip(pcm) {
            *dst = if src.is_finite() { src } else { 0.0 };
        }
        let n = self.encode_pcm()?;
        out.clear();
        out.extend_from_slice(&self.packet[..n]);
        Ok(())
    }

    /// Forgets the signal so far (libopus `OPUS_RESET_STATE`): the next frame is coded as
    /// the start of a stream, with no decay of what came before.
    pub fn reset(&mut self) -> Result<(), CodecError> {
        self.inner
            .reset_state()
            .map_err(|e| CodecError::Encode(e.to_string()))
    }

    /// Samples in one 20 ms frame at this encoder's rate.
    pub fn frame(&self) -> usize {
        self.pcm.len()
    }

    /// Encodes one frame of digital silence.
    pub fn encode_silence(&mut self) -> Result<Vec<u8>, CodecError> {
        self.pcm.fill(0.0);
        self.encode_scratch()
    }

    fn encode_scratch(&mut self) -> Result<Vec<u8>, CodecError> {
        let n = self.encode_pcm()?;
        Ok(self.packet[..n].to_vec())
    }

    /// Encodes the staged `pcm` into `packet`; the packet's length.
    fn encode_pcm(&mut self) -> Result<usize, CodecError> {
        let n = self
            .inner
            .encode_float(&self.pcm, &mut self.packet)
            .map_err(|e| CodecError::Encode(e.to_string()))?;
        Ok(n.min(self.packet.len()))
    }
}

/// A mono Opus decoder (stereo packets are downmixed) to 48 kHz PCM, unless made
/// [`OpusDecoder::with_rate`].
pub struct OpusDecoder {
    inner: opus::Decoder,
    scratch: Vec<f32>,
    /// Samples in 2.5 ms at the output rate (PLC and FEC come in multiples of it).
    quantum: usize,
}

impl std::fmt::Debug for OpusDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpusDecoder").finish_non_exhaustive()
    }
}

impl OpusDecoder {
    /// Creates a mono decoder at [`OPUS_RATE`].
    pub fn new() -> Result<Self, CodecError> {
        Self::with_rate(OPUS_RATE)
    }

    /// A decoder to PCM at `rate` Hz (libopus decodes at that rate directly).
    pub fn with_rate(rate: u32) -> Result<Self, CodecError> {
        check_rate(rate)?;
        let inner = opus::Decoder::new(rate, Channels::Mono).map_err(init_err)?;
        Ok(OpusDecoder {
            inner,
            scratch: vec![0.0; MAX_DECODE],
            quantum: rate as usize / PLC_PER_SEC,
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
            let ask = (want.div_ceil(self.quantum) * self.quantum).min(MAX_DECODE);
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
    /// `samples` must be a non-zero multiple of 2.5 ms (120 at 48 kHz), at most 5760.
    pub fn decode_fec(
        &mut self,
        next_packet: &[u8],
        samples: usize,
        out: &mut Vec<f32>,
    ) -> Result<usize, CodecError> {
        if next_packet.is_empty() {
            return Err(CodecError::EmptyPacket);
        }
        if samples == 0 || samples > MAX_DECODE || samples % self.quantum != 0 {
            return Err(CodecError::FrameSize {
                expected: self.quantum * 8,
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
#[path = "opus_codec_tests.rs"]
mod tests;
