//! One call's audio pipelines. Inbound: jitter buffer → Opus (PLC/FEC) or G.711 decode →
//! resample to the session rate (G.711 only: Opus runs at the session rate). Outbound:
//! session rate → resample to the codec rate (G.711) →
//! playback queue → encoded ahead, a few 20 ms frames at a time, when the audio arrives and
//! after each tick ([`CallAudio::prepare`]) → one ready packet per tick
//! ([`CallAudio::next_frame`]), so the media engine's deadline path only sends. Pure
//! computation, and after warm-up it allocates nothing per frame (every buffer is reused);
//! the media engine drives it with RTP payloads in and packets out.

use crate::jitter::{JitterBuffer, JitterConfig, Playout};
use crate::opus_codec::CodecError;
use crate::playback::{PlaybackQueue, Sent};
use crate::resample::ResampleError;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::g711::{decode_g711_into, encode_g711_into};
use crate::{OpusDecoder, OpusEncoder, StreamResampler, SESSION_RATE};

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
/// G.711: silent frames encoded before the silent packet is replayed.
const SILENCE_SETTLE_FRAMES: u32 = 10;
/// Opus: silent frames encoded for real after an answer (the decoder hears the answer's
/// own decay), after which the encoder starts over and a fresh encoder's settled silent
/// packet is replayed until the next answer, which then starts from a fresh state. (The
/// encoder never settles by itself: its silent packets keep cycling.)
const OPUS_DECAY_FRAMES: u32 = 2;

/// The silent packet a fresh Opus encoder settles on (computed once per process); empty if
/// no encoder could be made.
fn opus_silence() -> &'static [u8] {
    static SILENCE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    SILENCE.get_or_init(|| {
        let Ok(mut enc) = OpusEncoder::with_rate(SESSION_RATE) else {
            return Vec::new();
        };
        let mut packet = Vec::new();
        for _ in 0..SILENCE_SETTLE_FRAMES {
            packet = enc.encode_silence().unwrap_or_default();
        }
        packet
    })
}
/// Most audio the playback queue holds: 30 s.
const MAX_QUEUED_SECS: usize = 30;
/// Frames encoded ahead of their slot: enough that a tick always finds its packet ready,
/// few enough that a long answer queued at once is encoded a little per tick, never in one
/// burst on the engine thread.
pub const AHEAD_FRAMES: usize = 2;
/// Inbound packets whose arrival times are remembered (for the inbound wait).
const ARRIVALS: usize = 16;
/// Largest payload a reused packet buffer is sized for up front.
const PACKET_CAPACITY: usize = 1500;

/// Encoders/decoders for the negotiated codec.
enum Codec {
    Opus { enc: OpusEncoder, dec: OpusDecoder },
    Pcmu,
    Pcma,
}

/// One encoded frame and its accounting; its buffers are reused frame after frame.
#[derive(Debug, Default)]
struct Packet {
    payload: Vec<u8>,
    /// `(tag, 24 kHz samples)` of response audio it carries.
    played: Vec<(u64, u64)>,
    /// Tags whose last sample it carries.
    drains: Vec<u64>,
}

impl Packet {
    /// A packet whose buffers have room for any frame (no allocation when filled).
    fn with_room() -> Self {
        Self {
            payload: Vec::with_capacity(PACKET_CAPACITY),
            played: Vec::with_capacity(4),
            drains: Vec::with_capacity(4),
        }
    }

    fn reset(&mut self) {
        self.payload.clear();
        self.played.clear();
        self.drains.clear();
    }
}

/// One outbound frame and its accounting, borrowed until the next call.
#[derive(Debug)]
pub struct OutFrame<'a> {
    /// Encoded payload (silence when nothing plays).
    pub payload: &'a [u8],
    /// `(tag, 24 kHz samples)` of response audio this frame carried.
    pub played: &'a [(u64, u64)],
    /// Tags whose last sample has now left.
    pub drained: &'a [u64],
    /// Whether the frame had to be encoded now, on the deadline path (an underrun in the
    /// middle of an answer), rather than ahead of its slot.
    pub inline: bool,
}

/// What an inbound frame was made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InFrame {
    /// How long the packet played in it waited since it arrived (`None`: concealment,
    /// FEC or silence).
    pub waited: Option<Duration>,
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
    /// The PCM rate of the codec's side (24 kHz for Opus, 8 kHz for G.711).
    rate: u32,
    jitter: JitterBuffer,
    /// Whether any RTP arrived (before that nothing is fed to the session).
    receiving: bool,
    /// The next tick's inbound frame already left on its packet's arrival.
    early: bool,
    /// The SSRC of the inbound stream.
    ssrc: Option<u32>,
    /// `(seq, arrival)` of the last [`ARRIVALS`] packets, indexed by `seq % ARRIVALS`.
    arrivals: [(u64, Option<Instant>); ARRIVALS],
    in_rs: StreamResampler,
    out_rs: StreamResampler,
    playback: PlaybackQueue,
    /// Tags played and not finished yet (an answer still streaming).
    open: Vec<u64>,
    /// Tags whose last audio was queued and is still in the playback queue.
    finishing: Vec<u64>,
    /// Tags that ended with nothing left to send: reported with the next frame.
    drained_now: Vec<u64>,
    /// Encoded frames waiting for their slot, oldest first.
    ready: VecDeque<Packet>,
    /// Packet buffers to reuse.
    spare: Vec<Packet>,
    /// The frame handed out last ([`OutFrame`] borrows it).
    current: Packet,
    frame: Vec<f32>,
    sent: Vec<Sent>,
    /// Frames encoded in a row without response audio.
    silent_frames: u32,
    /// The encoder's settled silent packet.
    silence: Vec<u8>,
    /// The answer's playout is paused (speech over it is being judged): silence goes out,
    /// the queue and the frames encoded ahead wait.
    paused: bool,
    /// What goes out while paused: a fresh encoder's silent packet (Opus) or a silent
    /// frame (G.711).
    pause_silence: Vec<u8>,
    scratch: Vec<f32>,
    resampled: Vec<f32>,
}

/// The settled silent packet a call starts with, the packet sent while paused, and the
/// silent frames counted so far: an Opus call starts settled (a fresh encoder, the fresh
/// encoder's silent packet); G.711 settles on its own silence.
fn silences(c: &Codec, frame: usize) -> (Vec<u8>, Vec<u8>, u32) {
    let mut silence = Vec::with_capacity(PACKET_CAPACITY);
    let mut pause = Vec::with_capacity(PACKET_CAPACITY);
    match c {
        Codec::Opus { .. } => {
            silence.extend_from_slice(opus_silence());
            pause.extend_from_slice(opus_silence());
            (silence, pause, SILENCE_SETTLE_FRAMES)
        }
        Codec::Pcmu | Codec::Pcma => {
            encode_g711_into(&vec![0.0; frame], matches!(c, Codec::Pcma), &mut pause);
            (silence, pause, 0)
        }
    }
}

impl CallAudio {
    /// A pipeline for `codec`.
    pub fn new(codec: CallCodec) -> Result<Self, CallAudioError> {
        // Opus runs at the session rate itself (its RTP clock stays 48 kHz): no resampling,
        // and half the samples for the codec. G.711 is 8 kHz.
        let rate = match codec {
            CallCodec::Opus => SESSION_RATE,
            CallCodec::Pcmu | CallCodec::Pcma => codec.clock_rate(),
        };
        let c = match codec {
            CallCodec::Opus => Codec::Opus {
                enc: OpusEncoder::with_rate(rate)?,
                dec: OpusDecoder::with_rate(rate)?,
            },
            CallCodec::Pcmu => Codec::Pcmu,
            CallCodec::Pcma => Codec::Pcma,
        };
        let frame = rate as usize / 50;
        let (silence, pause_silence, silent_frames) = silences(&c, frame);
        Ok(Self {
            codec: c,
            rate,
            jitter: JitterBuffer::new(JitterConfig {
                target_frames: JITTER_TARGET_FRAMES,
                ..JitterConfig::default()
            }),
            receiving: false,
            early: false,
            ssrc: None,
            arrivals: [(u64::MAX, None); ARRIVALS],
            in_rs: StreamResampler::new(rate, SESSION_RATE)?,
            out_rs: StreamResampler::new(SESSION_RATE, rate)?,
            playback: PlaybackQueue::new(frame, rate as usize * MAX_QUEUED_SECS),
            open: Vec::with_capacity(4),
            finishing: Vec::with_capacity(4),
            drained_now: Vec::with_capacity(4),
            ready: VecDeque::with_capacity(AHEAD_FRAMES + 1),
            spare: (0..AHEAD_FRAMES + 1).map(|_| Packet::with_room()).collect(),
            current: Packet::with_room(),
            frame: Vec::with_capacity(frame),
            sent: Vec::with_capacity(4),
            silent_frames,
            silence,
            paused: false,
            pause_silence,
            scratch: Vec::with_capacity(frame.max(960)),
            resampled: Vec::with_capacity(2 * frame + 256),
        })
    }

    /// An inbound RTP payload, arrived at `now`. A new SSRC (a gateway's re-INVITE or
    /// transfer, a sender restart) starts its own sequence numbers: the jitter buffer
    /// starts over with it.
    pub fn receive(&mut self, ssrc: u32, seq: u64, payload: Vec<u8>, now: Instant) {
        if self.ssrc.replace(ssrc).is_some_and(|old| old != ssrc) {
            self.jitter.reset();
        }
        self.receiving = true;
        self.arrivals[(seq % ARRIVALS as u64) as usize] = (seq, Some(now));
        self.jitter.push(seq, payload);
    }

    /// Right after [`Self::receive`]: when the packet that arrived is the one the next tick
    /// would play, its 20 ms are decoded now and appended to `out`, and that tick plays
    /// nothing ([`Self::inbound_frame`] returns `None` once). A packet in order thus waits
    /// for no tick, and each call's decode happens when its packet comes, spread over the
    /// 20 ms; late, lost or reordered packets are left to the tick as before (the loss
    /// behaviour is the same: the ticks still pace playout).
    pub fn arrival_frame(&mut self, now: Instant, out: &mut Vec<f32>) -> Option<InFrame> {
        if self.early || !self.receiving {
            return None;
        }
        let seq = self.jitter.next_seq()?;
        if !self.jitter.has(seq) || self.jitter.len() > MAX_DEPTH_FRAMES {
            return None;
        }
        let frame = self.inbound_frame(now, out);
        self.early = frame.is_some();
        frame
    }

    /// The next 20 ms of caller audio at 24 kHz, appended to `out` (silence while the
    /// jitter buffer is idle), or `None` before any RTP arrived or when this tick's frame
    /// already left on arrival ([`Self::arrival_frame`]).
    pub fn inbound_frame(&mut self, now: Instant, out: &mut Vec<f32>) -> Option<InFrame> {
        if !self.receiving || std::mem::take(&mut self.early) {
            return None;
        }
        let n = self.rate as usize / 50;
        self.scratch.clear();
        // A stalled peer leaves a backlog behind; never let it become permanent latency.
        if self.jitter.len() > MAX_DEPTH_FRAMES {
            let _ = self.jitter.pop();
        }
        let arrived = self.jitter.next_seq().and_then(|s| self.arrival(s));
        let mut waited = None;
        match (self.jitter.pop(), &mut self.codec) {
            (Playout::Packet(p), codec) => {
                waited = arrived.map(|t| now.saturating_duration_since(t));
                match codec {
                    Codec::Opus { dec, .. } => {
                        let decoded = dec.decode(&p, &mut self.scratch).is_ok();
                        conceal_unless(decoded, dec, n, &mut self.scratch);
                    }
                    Codec::Pcmu => decode_g711_into(&p, false, &mut self.scratch),
                    Codec::Pcma => decode_g711_into(&p, true, &mut self.scratch),
                }
            }
            (Playout::Fec(next), Codec::Opus { dec, .. }) => {
                let decoded = dec.decode_fec(&next, n, &mut self.scratch).is_ok();
                conceal_unless(decoded, dec, n, &mut self.scratch);
            }
            (Playout::Lost, Codec::Opus { dec, .. }) => dec.conceal(n, &mut self.scratch),
            _ => {}
        }
        self.scratch.resize(n, 0.0);
        self.in_rs.process(&self.scratch, out);
        Some(InFrame { waited })
    }

    fn arrival(&self, seq: u64) -> Option<Instant> {
        match self.arrivals[(seq % ARRIVALS as u64) as usize] {
            (s, at) if s == seq => at,
            _ => None,
        }
    }

    /// Queues 24 kHz response audio and encodes what fills frames (up to [`AHEAD_FRAMES`]
    /// ahead). Returns false when the queue is full (audio dropped).
    pub fn play(&mut self, tag: u64, pcm: &[f32]) -> bool {
        self.resampled.clear();
        self.out_rs.process(pcm, &mut self.resampled);
        let ok = self.playback.push(tag, &self.resampled).is_ok();
        if !self.open.contains(&tag) {
            self.open.push(tag);
        }
        self.prepare();
        ok
    }

    /// No more audio of `tag` will be queued: its last partial frame is encoded (padded
    /// with silence), and the frame carrying its last sample reports it drained.
    pub fn finish(&mut self, tag: u64) {
        self.open.retain(|t| *t != tag);
        if self.playback.queued_for(tag) > 0 {
            if !self.finishing.contains(&tag) {
                self.finishing.push(tag);
            }
        } else if let Some(last) = self
            .ready
            .iter_mut()
            .rev()
            .find(|p| p.played.iter().any(|(t, _)| *t == tag))
        {
            last.drains.push(tag);
        } else {
            self.drained_now.push(tag);
        }
        self.prepare();
    }

    /// Purges the queue: the audio not yet sent, the frames encoded ahead, and the
    /// resampler's few buffered samples; the encoder starts over.
    pub fn clear(&mut self) {
        // A cut, not a fade: the encoder starts over, so the frame after a barge-in is
        // silence rather than two frames of the encoder's decaying state.
        self.silent_frames = 0;
        if let Codec::Opus { enc, .. } = &mut self.codec {
            if enc.reset().is_ok() {
                self.silent_frames = SILENCE_SETTLE_FRAMES;
            }
        }
        self.paused = false;
        self.playback.purge();
        self.out_rs.reset();
        self.open.clear();
        self.finishing.clear();
        self.drained_now.clear();
        while let Some(p) = self.ready.pop_front() {
            self.spare.push(p);
        }
    }

    /// Encodes ahead: every whole frame queued (and a finished answer's last partial one),
    /// up to [`AHEAD_FRAMES`] ready; with nothing left to play, the silence that settles the
    /// encoder after an answer. Call after each tick's sends; [`Self::play`] and
    /// [`Self::finish`] call it themselves.
    pub fn prepare(&mut self) {
        while self.ready.len() < AHEAD_FRAMES {
            let queued = self.playback.queued();
            let whole = queued >= self.playback.frame();
            let last_partial = queued > 0
                && self
                    .finishing
                    .iter()
                    .map(|t| self.playback.queued_for(*t))
                    .sum::<usize>()
                    == queued;
            // After an answer (nothing queued, nothing open), the settling silence is
            // encoded ahead too, one frame at a time (new audio waits at most that frame).
            let settle =
                queued == 0 && self.open.is_empty() && self.ready.is_empty() && !self.settled();
            if !(whole || last_partial || settle) {
                return;
            }
            let mut p = self.spare.pop().unwrap_or_else(Packet::with_room);
            match self.encode_next(&mut p) {
                Ok(()) => self.ready.push_back(p),
                Err(_) => {
                    self.spare.push(p);
                    return;
                }
            }
            if settle {
                return;
            }
        }
    }

    /// Whether the encoder has settled on silence (its silent packet can be replayed).
    fn settled(&self) -> bool {
        self.silent_frames >= SILENCE_SETTLE_FRAMES && !self.silence.is_empty()
    }

    /// Pops the next frame from the playback queue and encodes it into `p`.
    fn encode_next(&mut self, p: &mut Packet) -> Result<(), CallAudioError> {
        p.reset();
        self.playback.pop_frame(&mut self.frame, &mut self.sent);
        let (rate, session) = (u64::from(self.rate), u64::from(SESSION_RATE));
        p.played.extend(
            self.sent
                .iter()
                .map(|s| (s.tag, s.samples as u64 * session / rate)),
        );
        let silent = p.played.is_empty();
        match &mut self.codec {
            Codec::Opus { enc, .. } => enc.encode_into(&self.frame, &mut p.payload)?,
            Codec::Pcmu => encode_g711_into(&self.frame, false, &mut p.payload),
            Codec::Pcma => encode_g711_into(&self.frame, true, &mut p.payload),
        }
        if silent {
            self.silent_frames = self.silent_frames.saturating_add(1);
            match &mut self.codec {
                Codec::Opus { enc, .. } if self.silent_frames >= OPUS_DECAY_FRAMES => {
                    if enc.reset().is_ok() {
                        self.silent_frames = SILENCE_SETTLE_FRAMES;
                    }
                }
                Codec::Opus { .. } => {}
                Codec::Pcmu | Codec::Pcma => {
                    if self.silent_frames == SILENCE_SETTLE_FRAMES {
                        self.silence.clear();
                        self.silence.extend_from_slice(&p.payload);
                    }
                }
            }
        } else {
            self.silent_frames = 0;
        }
        let playback = &self.playback;
        let drains = &mut p.drains;
        self.finishing.retain(|t| {
            let done = playback.queued_for(*t) == 0;
            if done {
                drains.push(*t);
            }
            !done
        });
        Ok(())
    }

    /// Pauses the answer's playout (`true`: silence goes out from the next frame, and
    /// what is queued or encoded ahead waits) or resumes it where it paused. A
    /// [`Self::clear`] ends a pause too.
    pub fn pause(&mut self, paused: bool) {
        self.paused = paused;
    }

    /// The next frame for this tick: silence while paused; else the one encoded ahead, else
    /// the settled silent packet; only an answer that ran dry mid-frame is encoded now
    /// (`inline`).
    pub fn next_frame(&mut self) -> Result<OutFrame<'_>, CallAudioError> {
        let mut inline = false;
        if self.paused {
            self.current.reset();
            self.current.payload.extend_from_slice(&self.pause_silence);
        } else if let Some(p) = self.ready.pop_front() {
            let old = std::mem::replace(&mut self.current, p);
            self.spare.push(old);
        } else if self.playback.is_empty() && self.settled() {
            self.current.reset();
            self.current.payload.extend_from_slice(&self.silence);
        } else {
            inline = true;
            let mut p = std::mem::take(&mut self.current);
            let r = self.encode_next(&mut p);
            self.current = p;
            r?;
        }
        self.current.drains.append(&mut self.drained_now);
        Ok(OutFrame {
            payload: &self.current.payload,
            played: &self.current.played,
            drained: &self.current.drains,
            inline,
        })
    }

    /// Nothing to send but silence: no audio queued, no frame encoded ahead.
    pub fn is_idle(&self) -> bool {
        self.ready.is_empty() && self.playback.is_empty()
    }

    /// Frames encoded and waiting for their slot.
    pub fn ready_frames(&self) -> usize {
        self.ready.len()
    }

    /// Nothing queued or encoded ahead, and the encoder settled on silence.
    #[cfg(test)]
    fn played_out_and_settled(&self) -> bool {
        self.ready.is_empty() && self.playback.is_empty() && self.settled()
    }

    /// Samples queued for playout (not yet encoded).
    #[cfg(test)]
    pub fn queued(&self) -> usize {
        self.playback.queued()
    }
}

#[cfg(test)]
#[path = "call_audio_tests.rs"]
mod tests;
