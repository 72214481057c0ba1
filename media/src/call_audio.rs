//! One call's audio pipelines. Inbound: jitter buffer → Opus (PLC/FEC) or G.711 decode →
//! resample to the session rate. Outbound: session rate → resample to the codec rate →
//! playback queue → one 20 ms frame per tick → encode. Pure computation; the media engine
//! drives it with RTP payloads in and frames out.

use crate::jitter::{JitterBuffer, JitterConfig, Playout};
use crate::opus_codec::CodecError;
use crate::playback::{PlaybackQueue, Sent};
use crate::resample::ResampleError;
use crate::{
    decode_alaw, decode_ulaw, encode_alaw, encode_ulaw, OpusDecoder, OpusEncoder, StreamResampler,
    SESSION_RATE,
};

/// The codec a call's audio is carried in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallCodec {
    /// Opus at 48 kHz.
    Opus,
    /// G.711 μ-law at 8 kHz.
    Pcmu,
    /// G.711 A-law at 8 kHz.
    Pcma,
}

impl CallCodec {
    /// RTP clock rate.
    pub fn clock_rate(self) -> u32 {
        match self {
            CallCodec::Opus => 48_000,
            CallCodec::Pcmu | CallCodec::Pcma => 8_000,
        }
    }
}

/// Why a call's audio pipeline failed.
#[derive(Debug, thiserror::Error)]
pub enum CallAudioError {
    /// The Opus codec failed.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// A resampler could not be made.
    #[error(transparent)]
    Resample(#[from] ResampleError),
}
/// Inbound playout delay in frames. One frame (20 ms) keeps barge-in fast; packets later
/// than that are concealed (Opus PLC/FEC) rather than waited for.
const JITTER_TARGET_FRAMES: usize = 1;
/// Inbound frames buffered beyond this are dropped, one per tick.
const MAX_DEPTH_FRAMES: usize = 5;
/// Silent frames encoded for real before the settled silent packet is replayed.
const SILENCE_SETTLE_FRAMES: u32 = 10;
/// Most audio the playback queue holds: 30 s.
const MAX_QUEUED_SECS: usize = 30;

/// Encoders/decoders for the negotiated codec.
enum Codec {
    Opus { enc: OpusEncoder, dec: OpusDecoder },
    Pcmu,
    Pcma,
}

/// One outbound frame and its accounting.
pub struct OutFrame {
    /// Encoded payload (silence when nothing plays).
    pub payload: Vec<u8>,
    /// `(tag, 24 kHz samples)` of response audio this frame carried.
    pub played: Vec<(u64, u64)>,
    /// Tags whose last sample has now left.
    pub drained: Vec<u64>,
}

/// Packet-loss concealment when a decode failed.
fn conceal_unless(decoded: bool, dec: &mut OpusDecoder, n: usize, out: &mut Vec<f32>) {
    if !decoded {
        out.clear();
        dec.conceal(n, out);
    }
}

/// One call's media state.
pub struct CallAudio {
    codec: Codec,
    rate: u32,
    jitter: JitterBuffer,
    /// Whether any RTP arrived (before that nothing is fed to the session).
    receiving: bool,
    /// The SSRC of the inbound stream.
    ssrc: Option<u32>,
    in_rs: StreamResampler,
    out_rs: StreamResampler,
    playback: PlaybackQueue,
    /// Tags whose last audio was queued; reported once drained.
    finishing: Vec<u64>,
    frame: Vec<f32>,
    sent: Vec<Sent>,
    /// Consecutive frames without response audio.
    silent_frames: u32,
    /// The encoder's settled silent packet.
    silence: Vec<u8>,
    scratch: Vec<f32>,
}

impl CallAudio {
    /// A pipeline for `codec`.
    pub fn new(codec: CallCodec) -> Result<Self, CallAudioError> {
        let rate = codec.clock_rate();
        let c = match codec {
            CallCodec::Opus => Codec::Opus {
                enc: OpusEncoder::new()?,
                dec: OpusDecoder::new()?,
            },
            CallCodec::Pcmu => Codec::Pcmu,
            CallCodec::Pcma => Codec::Pcma,
        };
        let frame = rate as usize / 50;
        Ok(Self {
            codec: c,
            rate,
            jitter: JitterBuffer::new(JitterConfig {
                target_frames: JITTER_TARGET_FRAMES,
                ..JitterConfig::default()
            }),
            receiving: false,
            ssrc: None,
            in_rs: StreamResampler::new(rate, SESSION_RATE)?,
            out_rs: StreamResampler::new(SESSION_RATE, rate)?,
            playback: PlaybackQueue::new(frame, rate as usize * MAX_QUEUED_SECS),
            finishing: Vec::new(),
            frame: Vec::with_capacity(frame),
            sent: Vec::new(),
            silent_frames: 0,
            silence: Vec::new(),
            scratch: Vec::with_capacity(frame),
        })
    }

    /// An inbound RTP payload. A new SSRC (a gateway's re-INVITE or transfer, a sender
    /// restart) starts its own sequence numbers: the jitter buffer starts over with it.
    pub fn receive(&mut self, ssrc: u32, seq: u64, payload: Vec<u8>) {
        if self.ssrc.replace(ssrc).is_some_and(|old| old != ssrc) {
            self.jitter.reset();
        }
        self.receiving = true;
        self.jitter.push(seq, payload);
    }

    /// The next 20 ms of caller audio at 24 kHz (silence while the jitter buffer is idle),
    /// or `None` before any RTP arrived.
    pub fn inbound_frame(&mut self) -> Option<Vec<f32>> {
        if !self.receiving {
            return None;
        }
        let n = self.rate as usize / 50;
        self.scratch.clear();
        // A stalled peer leaves a backlog behind; never let it become permanent latency.
        if self.jitter.len() > MAX_DEPTH_FRAMES {
            let _ = self.jitter.pop();
        }
        match (self.jitter.pop(), &mut self.codec) {
            (Playout::Packet(p), Codec::Opus { dec, .. }) => {
                let decoded = dec.decode(&p, &mut self.scratch).is_ok();
                conceal_unless(decoded, dec, n, &mut self.scratch);
            }
            (Playout::Fec(next), Codec::Opus { dec, .. }) => {
                let decoded = dec.decode_fec(&next, n, &mut self.scratch).is_ok();
                conceal_unless(decoded, dec, n, &mut self.scratch);
            }
            (Playout::Lost, Codec::Opus { dec, .. }) => dec.conceal(n, &mut self.scratch),
            (Playout::Packet(p), Codec::Pcmu) => self.scratch = decode_ulaw(&p),
            (Playout::Packet(p), Codec::Pcma) => self.scratch = decode_alaw(&p),
            _ => {}
        }
        self.scratch.resize(n, 0.0);
        let mut out = Vec::with_capacity(SESSION_RATE as usize / 50);
        self.in_rs.process(&self.scratch, &mut out);
        Some(out)
    }

    /// Queues 24 kHz response audio. Returns false when the queue is full (audio dropped).
    pub fn play(&mut self, tag: u64, pcm: &[f32]) -> bool {
        let mut resampled =
            Vec::with_capacity(pcm.len() * self.rate as usize / SESSION_RATE as usize + 64);
        self.out_rs.process(pcm, &mut resampled);
        self.playback.push(tag, &resampled).is_ok()
    }

    /// No more audio of `tag` will be queued.
    pub fn finish(&mut self, tag: u64) {
        self.finishing.push(tag);
    }

    /// Purges the queue (the resampler's few buffered samples too).
    pub fn clear(&mut self) {
        self.playback.clear();
        self.out_rs.reset();
        self.finishing.clear();
    }

    /// Pops and encodes the next frame.
    pub fn outbound_frame(&mut self) -> Result<OutFrame, CallAudioError> {
        self.playback.pop_frame(&mut self.frame, &mut self.sent);
        let to_session = |n: usize| n as u64 * u64::from(SESSION_RATE) / u64::from(self.rate);
        let played: Vec<(u64, u64)> = self
            .sent
            .iter()
            .map(|s| (s.tag, to_session(s.samples)))
            .collect();
        let silent = played.is_empty();
        self.silent_frames = if silent { self.silent_frames + 1 } else { 0 };
        let payload = match &mut self.codec {
            // Idle calls are most calls: once the encoder has settled on silence, replay its
            // silent packet instead of running the encoder (~155 µs a frame) every 20 ms.
            Codec::Opus { .. }
                if self.silent_frames > SILENCE_SETTLE_FRAMES && !self.silence.is_empty() =>
            {
                self.silence.clone()
            }
            Codec::Opus { enc, .. } => {
                let p = enc.encode(&self.frame)?;
                if self.silent_frames == SILENCE_SETTLE_FRAMES {
                    self.silence = p.clone();
                }
                p
            }
            Codec::Pcmu => encode_ulaw(&self.frame),
            Codec::Pcma => encode_alaw(&self.frame),
        };
        let playback = &self.playback;
        let (done, waiting): (Vec<u64>, Vec<u64>) = self
            .finishing
            .iter()
            .partition(|t| playback.queued_for(**t) == 0);
        self.finishing = waiting;
        Ok(OutFrame {
            payload,
            played,
            drained: done,
        })
    }

    /// Samples queued for playout.
    #[cfg(test)]
    pub fn queued(&self) -> usize {
        self.playback.queued()
    }
}

#[cfg(test)]
#[path = "call_audio_tests.rs"]
mod tests;
