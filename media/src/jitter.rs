//! A jitter buffer for 20 ms audio packets keyed by extended sequence number.
//!
//! Packets come in via [`JitterBuffer::push`] in any order; once per 20 ms
//! tick [`JitterBuffer::pop`] says what to play for the next sequence number:
//! the packet, an FEC recovery from the following packet, concealment, or
//! silence while idle. Playout starts only once `target_frames` packets are
//! buffered, and after a run of missing slots with nothing buffered (a
//! talkspurt pause / DTX) the buffer goes idle and re-buffers, so each
//! talkspurt starts with the configured delay.
//!
//! A packet far outside the current sequence window (more than `max_frames`
//! behind the next slot or ahead of the newest packet) is not a reordered
//! one: the source restarted (a new SSRC after a re-INVITE or transfer, a
//! sender restart) or jumped. One such packet is only held aside, so a stray
//! old duplicate cannot disturb playout; when the next packet agrees with it
//! (see [`RESYNC_CONFIRM`]) the buffer restarts at the new region and plays
//! it after the normal playout delay. A playable packet of the current
//! stream in between refutes the restart; a late one (dropped anyway) does
//! not, so stragglers of the old stream cannot delay it.

use std::collections::VecDeque;

/// Consecutive `Lost` slots (with nothing buffered) after which playout
/// stops and the buffer re-buffers.
pub const IDLE_AFTER_LOST: usize = 5;

/// Consecutive far-away packets, each within `max_frames` of the first and
/// all distinct, that confirm a stream restart. Two: one stray is ignored,
/// and audio resumes one packet after the jump.
pub const RESYNC_CONFIRM: usize = 2;

/// Jitter buffer sizing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JitterConfig {
    /// Packets buffered before playout starts (the playout delay in frames);
    /// 0 is treated as 1.
    pub target_frames: usize,
    /// Capacity: the buffer spans at most this many consecutive sequence
    /// numbers (raised to `target_frames` if smaller).
    pub max_frames: usize,
}

impl Default for JitterConfig {
    fn default() -> Self {
        JitterConfig {
            target_frames: 2,
            max_frames: 50,
        }
    }
}

/// Outcome of [`JitterBuffer::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Push {
    /// Buffered.
    Accepted,
    /// The same sequence number is already buffered; dropped.
    Duplicate,
    /// Older than the next sequence number to play (by at most
    /// `max_frames`); dropped.
    Late,
    /// Buffered, but the buffer would have spanned more than `max_frames`
    /// sequence numbers, so the oldest packets (possibly this one) were
    /// dropped.
    Overflow,
    /// Far outside the current sequence window: held aside until the next
    /// packet confirms a restart (see [`RESYNC_CONFIRM`]) or refutes it.
    Held,
    /// Confirmed a restart: everything buffered was dropped and playout
    /// restarts, after the playout delay, with this and the held packets.
    Resync,
}

/// What to play for one 20 ms tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Playout {
    /// The packet for this slot.
    Packet(Vec<u8>),
    /// This slot's packet is missing but the next one is here: decode its
    /// FEC for this slot (the packet itself is returned again next tick).
    Fec(Vec<u8>),
    /// This slot's packet is missing: conceal.
    Lost,
    /// Nothing buffered and not playing: output silence.
    Idle,
}

/// Counters kept by a [`JitterBuffer`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JitterStats {
    /// Packets pushed (every call to `push`).
    pub received: u64,
    /// Packets dropped as late.
    pub late: u64,
    /// Packets dropped as duplicates.
    pub duplicate: u64,
    /// Slots played as [`Playout::Lost`].
    pub lost: u64,
    /// Slots played as [`Playout::Fec`].
    pub fec: u64,
    /// Packets dropped because the buffer was full.
    pub overflow: u64,
    /// Restarts at a new sequence region ([`Push::Resync`]).
    pub resyncs: u64,
    /// Packets dropped by a resync or [`JitterBuffer::reset`].
    pub flushed: u64,
    /// Held far-away packets that no following packet confirmed.
    pub stray: u64,
}

/// Where a pushed sequence number lies relative to the current window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Playable, or at least plausibly part of the current stream.
    Near,
    /// Behind the next slot, but within the span: a late reordered packet.
    Late,
    /// More than the span away: a restart candidate.
    Far,
}

/// Buffered packets in sequence order: a deque whose capacity is kept, so steady-state
/// playout allocates nothing (a map would allocate a node whenever it goes from empty to
/// one packet, i.e. per packet at a one-frame playout delay).
#[derive(Debug, Clone, Default)]
struct Slots(VecDeque<(u64, Vec<u8>)>);

impl Slots {
    fn with_capacity(n: usize) -> Self {
        Self(VecDeque::with_capacity(n))
    }
    fn first(&self) -> Option<u64> {
        self.0.front().map(|(k, _)| *k)
    }
    fn last(&self) -> Option<u64> {
        self.0.back().map(|(k, _)| *k)
    }
    fn find(&self, seq: u64) -> Result<usize, usize> {
        self.0.binary_search_by_key(&seq, |(k, _)| *k)
    }
    fn contains(&self, seq: u64) -> bool {
        self.find(seq).is_ok()
    }
    fn get(&self, seq: u64) -> Option<&Vec<u8>> {
        self.find(seq).ok().map(|i| &self.0[i].1)
    }
    fn insert(&mut self, seq: u64, payload: Vec<u8>) {
        match self.find(seq) {
            Ok(i) => self.0[i].1 = payload,
            Err(i) => self.0.insert(i, (seq, payload)),
        }
    }
    fn remove(&mut self, seq: u64) -> Option<Vec<u8>> {
        let i = self.find(seq).ok()?;
        self.0.remove(i).map(|(_, p)| p)
    }
    fn pop_first(&mut self) {
        self.0.pop_front();
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    fn clear(&mut self) {
        self.0.clear();
    }
}

/// The jitter buffer. Sans-IO: the caller drives `pop` once per frame.
#[derive(Debug, Clone)]
pub struct JitterBuffer {
    target: usize,
    max: usize,
    slots: Slots,
    /// Next sequence number to play; anything older is late. `None` until
    /// playout first starts.
    next: Option<u64>,
    /// Far-away packets awaiting confirmation of a restart.
    held: Vec<(u64, Vec<u8>)>,
    playing: bool,
    missing_run: usize,
    stats: JitterStats,
}

impl JitterBuffer {
    /// Creates an empty, idle buffer.
    pub fn new(cfg: JitterConfig) -> Self {
        let target = cfg.target_frames.max(1);
        JitterBuffer {
            target,
            max: cfg.max_frames.max(target),
            slots: Slots::with_capacity(cfg.max_frames.max(target) + 1),
            next: None,
            held: Vec::new(),
            playing: false,
            missing_run: 0,
            stats: JitterStats::default(),
        }
    }

    /// Offers the packet with extended sequence number `seq`.
    pub fn push(&mut self, seq: u64, payload: Vec<u8>) -> Push {
        self.stats.received += 1;
        match self.place(seq) {
            Place::Late => {
                self.stats.late += 1;
                Push::Late
            }
            Place::Far => self.push_far(seq, payload),
            Place::Near => {
                let out = self.insert(seq, payload);
                self.settle_held();
                out
            }
        }
    }

    /// Forgets all packets and the sequence position, for a new source
    /// (SSRC); the next packet starts a fresh stream. Stats are kept.
    pub fn reset(&mut self) {
        self.stats.flushed += (self.slots.len() + self.held.len()) as u64;
        self.slots.clear();
        self.held.clear();
        self.restart();
    }

    /// Places `seq` against the window `[next - max, newest + max]` (with
    /// the oldest buffered packet for `next` before playout first starts).
    fn place(&self, seq: u64) -> Place {
        let first = self.slots.first();
        let last = self.slots.last();
        let (Some(low), Some(high)) = (self.next.or(first), last.or(self.next)) else {
            return Place::Near;
        };
        let span = self.max as u64;
        if seq < low {
            if low - seq > span {
                Place::Far
            } else if self.next.is_some() {
                Place::Late
            } else {
                Place::Near
            }
        } else if seq > high && seq - high > span {
            Place::Far
        } else {
            Place::Near
        }
    }

    /// A far-away packet: hold it, and restart once it is confirmed.
    fn push_far(&mut self, seq: u64, payload: Vec<u8>) -> Push {
        if self.held.iter().any(|&(s, _)| s == seq) {
            self.stats.duplicate += 1;
            return Push::Duplicate;
        }
        // Agreeing with the first held packet: within one buffer span of it.
        let span = self.max as u64;
        let agrees = self
            .held
            .first()
            .is_some_and(|&(s, _)| s.abs_diff(seq) <= span);
        if !agrees {
            self.stats.stray += self.held.len() as u64;
            self.held.clear();
        }
        self.held.push((seq, payload));
        if self.held.len() < RESYNC_CONFIRM {
            return Push::Held;
        }
        self.stats.resyncs += 1;
        self.stats.flushed += self.slots.len() as u64;
        self.slots.clear();
        self.restart();
        for (s, p) in std::mem::take(&mut self.held) {
            self.insert(s, p);
        }
        Push::Resync
    }

    /// After a packet inside the window: held packets that the window now
    /// covers are buffered, the rest were strays.
    fn settle_held(&mut self) {
        for (seq, payload) in std::mem::take(&mut self.held) {
            if self.place(seq) == Place::Near {
                self.insert(seq, payload);
            } else {
                self.stats.stray += 1;
            }
        }
    }

    /// Back to buffering with no sequence position.
    fn restart(&mut self) {
        self.next = None;
        self.playing = false;
        self.missing_run = 0;
    }

    /// Buffers a packet that is not late, trimming to the span.
    fn insert(&mut self, seq: u64, payload: Vec<u8>) -> Push {
        if self.slots.contains(seq) {
            self.stats.duplicate += 1;
            return Push::Duplicate;
        }
        self.slots.insert(seq, payload);
        let newest = self.slots.last().unwrap_or(seq);
        let floor = newest.saturating_sub(self.max as u64 - 1);
        let mut dropped = 0u64;
        while let Some(first) = self.slots.first() {
            if first >= floor {
                break;
            }
            self.slots.pop_first();
            dropped += 1;
        }
        if let Some(next) = self.next.as_mut() {
            *next = (*next).max(floor);
        }
        if dropped > 0 {
            self.stats.overflow += dropped;
            Push::Overflow
        } else {
            Push::Accepted
        }
    }

    /// What to play for the next 20 ms slot. Call once per tick.
    pub fn pop(&mut self) -> Playout {
        if !self.playing {
            if self.slots.len() < self.target {
                return Playout::Idle;
            }
            let Some(first) = self.slots.first() else {
                return Playout::Idle;
            };
            self.playing = true;
            self.missing_run = 0;
            self.next = Some(first);
        }
        let Some(seq) = self.next else {
            self.playing = false;
            return Playout::Idle;
        };
        let after = seq.saturating_add(1);
        self.next = Some(after);
        if let Some(packet) = self.slots.remove(seq) {
            self.missing_run = 0;
            return Playout::Packet(packet);
        }
        if let Some(packet) = self.slots.get(after) {
            self.missing_run = 0;
            self.stats.fec += 1;
            return Playout::Fec(packet.clone());
        }
        self.stats.lost += 1;
        self.missing_run += 1;
        if self.missing_run >= IDLE_AFTER_LOST && self.slots.is_empty() {
            self.playing = false;
            self.missing_run = 0;
        }
        Playout::Lost
    }

    /// The sequence number the next [`Self::pop`] plays, when playout is running or would
    /// start now.
    pub fn next_seq(&self) -> Option<u64> {
        if self.playing {
            self.next
        } else if self.slots.len() >= self.target {
            self.slots.first()
        } else {
            None
        }
    }

    /// Whether the packet `seq` is buffered.
    pub fn has(&self, seq: u64) -> bool {
        self.slots.contains(seq)
    }

    /// Packets buffered.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Whether playout is running (as opposed to idle / buffering).
    pub fn is_playing(&self) -> bool {
        self.playing
    }

    /// Counters so far.
    pub fn stats(&self) -> JitterStats {
        self.stats
    }
}

#[cfg(test)]
#[path = "jitter_tests.rs"]
mod tests;
