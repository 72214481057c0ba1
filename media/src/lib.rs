//! Sans-IO audio building blocks for Duet.
//!
//! Everything here is pure computation on sample buffers: no I/O, no clocks,
//! no threads. Time is a sample count on the stream the caller feeds in.
//!
//! - [`adpcm`]: [`Adpcm`], PCM16 in 4 bits a sample (stored conversation audio).
//! - [`pcm`]: 16-bit little-endian PCM <-> `f32`, level in dBFS.
//! - [`g711`]: μ-law (PCMU) and A-law (PCMA) companding.
//! - [`resample`]: [`StreamResampler`], streaming rate conversion (rubato).
//! - [`frames`]: [`FrameAccumulator`], fixed-size framing of a stream.
//! - [`vad`]: [`Vad`], an energy-based voice activity detector.
//! - [`denoise`]: [`Denoiser`], noise suppression (RNNoise) for session audio.
//! - [`pitch`]: [`pitch_shift`], a granular pitch shifter.
//! - [`opus_codec`]: [`OpusEncoder`] / [`OpusDecoder`], 48 kHz mono Opus
//!   with PLC and in-band FEC.
//! - [`rtp`]: RTP packets read and written (the plain RTP leg of phone calls).
//! - [`rtp_leg`]: [`RtpLeg`], a phone call's plain RTP leg (latching, resets, DTMF,
//!   inactivity, one packet per 20 ms slot).
//! - [`dtmf`]: RFC 4733 telephone events and key presses.
//! - [`srtp`]: SRTP for SDES-keyed phone calls (AES-CM, HMAC-SHA1).
//! - [`rtp_time`]: RTP sequence/timestamp unwrapping and [`SampleCount`].
//! - [`jitter`]: [`JitterBuffer`], reordering and loss handling for 20 ms
//!   packets.
//! - [`pacer`]: [`FrameGrid`], an absolute frame deadline grid, and
//!   [`Histogram`] for pacing deviation.
//! - [`playback`]: [`PlaybackQueue`], the tagged outbound audio queue.
//! - [`call_audio`]: [`CallAudio`], one WebRTC call's audio both ways (jitter buffer,
//!   codec, resampling, playback queue), driven by the media engine.
//! - [`ring`]: [`SampleRing`], a bounded sample buffer on an absolute clock
//!   (the session's uncommitted input).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// The rate of session audio (mono f32), the OpenAI Realtime API's `audio/pcm` rate: every
/// transport converts to it, the session and the models work in it.
pub const SESSION_RATE: u32 = 24_000;

pub mod adpcm;
pub mod call_audio;
pub mod denoise;
pub mod dtmf;
pub mod frames;
pub mod g711;
pub mod jitter;
pub mod opus_codec;
pub mod pacer;
pub mod pcm;
pub mod pitch;
pub mod playback;
pub mod resample;
pub mod ring;
pub mod rtp;
pub mod rtp_leg;
pub mod rtp_time;
pub mod srtp;
pub mod vad;

#[cfg(test)]
mod testutil;

pub use adpcm::Adpcm;
pub use call_audio::{CallAudio, CallCodec};
pub use denoise::Denoiser;
pub use frames::FrameAccumulator;
pub use g711::{
    alaw_decode, alaw_encode, decode_alaw, decode_ulaw, encode_alaw, encode_ulaw, ulaw_decode,
    ulaw_encode,
};
pub use jitter::{JitterBuffer, JitterConfig, JitterStats, Playout, Push};
pub use opus_codec::{CodecError, OpusDecoder, OpusEncoder};
pub use pacer::{FrameGrid, Histogram, Tick};
pub use pcm::{
    f32_to_i16, f32_to_pcm16le, i16_to_f32, parse_wav, pcm16le_to_f32, rms_dbfs, wav_pcm16,
    PcmError, WavError,
};
pub use pitch::pitch_shift;
pub use playback::{PlaybackQueue, QueueFull, Sent};
pub use resample::{ResampleError, StreamResampler};
pub use ring::SampleRing;
pub use rtp_leg::{RtpLeg, RtpLegConfig};
pub use rtp_time::{SampleCount, SeqUnwrapper, TsUnwrapper, FRAME_MS, OPUS_FRAME, OPUS_RATE};
pub use vad::{speech_probability, ProbabilitySpan, Vad, VadConfig, VadEvent};
