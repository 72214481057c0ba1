//! A jitter buffer for 20 ms audio packets keyed by extended sequence number.
//!
//! Packets come in via [`JitterBuffer::push`] in any order; once per 20 ms
//! tick [`JitterBuffer::pop`] says what to play for the next sequence number:
//! the packet, an FEC recovery from the following packet, concealment, or
//! silence while idle. Playout starts only once `target_frames` packets are
//! buffered, and after a run of missing slots with nothing buffered (a
//! talkspurt pause / DTX) the buffer goes idle and re-buffers, so each
//! talkspurt starts with the configured delay.

use std::collections::BTreeMap;

/// Consecutive `Lost` slots (with nothing buffered) after which playout
/// stops and the buffer re-buffers.
pub const IDLE_AFTER_LOST: usize = 5;

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
    /// Older than the next sequence number to play; dropped.
    Late,
    /// Buffered, but the buffer would have spanned more than `max_frames`
    /// sequence numbers, so the oldest packets (possibly this one) were
    /// dropped.
    Overflow,
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
}

/// The jitter buffer. Sans-IO: the caller drives `pop` once per frame.
#[derive(Debug, Clone)]
pub struct JitterBuffer {
    target: usize,
    max: usize,
    slots: BTreeMap<u64, Vec<u8>>,
    /// Next sequence number to play; anything older is late. `None` until
    /// playout first starts.
    next: Option<u64>,
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
            slots: BTreeMap::new(),
            next: None,
            playing: false,
            missing_run: 0,
            stats: JitterStats::default(),
        }
    }

    /// Offers the packet with extended sequence number `seq`.
    pub fn push(&mut self, seq: u64, payload: Vec<u8>) -> Push {
        self.stats.received += 1;
        if self.next.is_some_and(|next| seq < next) {
            self.stats.late += 1;
            return Push::Late;
        }
        if self.slots.contains_key(&seq) {
            self.stats.duplicate += 1;
            return Push::Duplicate;
        }
        self.slots.insert(seq, payload);
        let newest = self.slots.last_key_value().map_or(seq, |(&k, _)| k);
        let floor = newest.saturating_sub(self.max as u64 - 1);
        let mut dropped = 0u64;
        while let Some(entry) = self.slots.first_entry() {
            if *entry.key() >= floor {
                break;
            }
            entry.remove();
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
            let Some((&first, _)) = self.slots.first_key_value() else {
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
        if let Some(packet) = self.slots.remove(&seq) {
            self.missing_run = 0;
            return Playout::Packet(packet);
        }
        if let Some(packet) = self.slots.get(&after) {
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
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pkt(seq: u64) -> Vec<u8> {
        seq.to_le_bytes().to_vec()
    }

    fn buf(target: usize, max: usize) -> JitterBuffer {
        JitterBuffer::new(JitterConfig {
            target_frames: target,
            max_frames: max,
        })
    }

    #[test]
    fn waits_for_target_then_plays_in_order() {
        let mut jb = JitterBuffer::new(JitterConfig::default());
        assert_eq!(jb.push(10, pkt(10)), Push::Accepted);
        assert_eq!(jb.pop(), Playout::Idle);
        jb.push(11, pkt(11));
        assert_eq!(jb.pop(), Playout::Packet(pkt(10)));
        jb.push(12, pkt(12));
        assert_eq!(jb.pop(), Playout::Packet(pkt(11)));
        assert_eq!(jb.pop(), Playout::Packet(pkt(12)));
        assert!(jb.is_empty() && jb.is_playing());
    }

    #[test]
    fn missing_slot_uses_fec_when_next_is_here() {
        let mut jb = buf(2, 50);
        for s in [0, 2, 3] {
            jb.push(s, pkt(s));
        }
        assert_eq!(jb.pop(), Playout::Packet(pkt(0)));
        assert_eq!(jb.pop(), Playout::Fec(pkt(2)));
        assert_eq!(jb.pop(), Playout::Packet(pkt(2)));
        assert_eq!(jb.pop(), Playout::Packet(pkt(3)));
        assert_eq!(jb.stats().fec, 1);
        assert_eq!(jb.stats().lost, 0);
    }

    #[test]
    fn late_and_duplicate_are_dropped() {
        let mut jb = buf(2, 50);
        jb.push(5, pkt(5));
        assert_eq!(jb.push(5, pkt(5)), Push::Duplicate);
        jb.push(6, pkt(6));
        assert_eq!(jb.pop(), Playout::Packet(pkt(5)));
        assert_eq!(jb.push(5, pkt(5)), Push::Late);
        assert_eq!(jb.push(4, pkt(4)), Push::Late);
        let st = jb.stats();
        assert_eq!((st.received, st.late, st.duplicate), (5, 2, 1));
    }

    #[test]
    fn goes_idle_after_five_lost_and_rebuffers() {
        let mut jb = buf(2, 50);
        jb.push(0, pkt(0));
        jb.push(1, pkt(1));
        assert_eq!(jb.pop(), Playout::Packet(pkt(0)));
        assert_eq!(jb.pop(), Playout::Packet(pkt(1)));
        for _ in 0..IDLE_AFTER_LOST {
            assert_eq!(jb.pop(), Playout::Lost);
        }
        assert!(!jb.is_playing());
        assert_eq!(jb.pop(), Playout::Idle);
        // A straggler from before the pause is late.
        assert_eq!(jb.push(3, pkt(3)), Push::Late);
        // The next talkspurt re-buffers to the target before playing.
        jb.push(20, pkt(20));
        assert_eq!(jb.pop(), Playout::Idle);
        jb.push(21, pkt(21));
        assert_eq!(jb.pop(), Playout::Packet(pkt(20)));
        assert_eq!(jb.stats().lost, 5);
    }

    #[test]
    fn keeps_playing_through_loss_while_packets_are_buffered() {
        let mut jb = buf(1, 50);
        jb.push(0, pkt(0));
        jb.push(8, pkt(8));
        assert_eq!(jb.pop(), Playout::Packet(pkt(0)));
        for _ in 1..7 {
            assert_eq!(jb.pop(), Playout::Lost);
        }
        assert_eq!(jb.pop(), Playout::Fec(pkt(8)));
        assert_eq!(jb.pop(), Playout::Packet(pkt(8)));
    }

    #[test]
    fn overflow_drops_oldest() {
        let mut jb = buf(2, 4);
        for s in 0..4 {
            assert_eq!(jb.push(s, pkt(s)), Push::Accepted);
        }
        assert_eq!(jb.push(4, pkt(4)), Push::Overflow);
        assert_eq!(jb.push(5, pkt(5)), Push::Overflow);
        assert_eq!(jb.len(), 4);
        assert_eq!(jb.stats().overflow, 2);
        for s in 2..6 {
            assert_eq!(jb.pop(), Playout::Packet(pkt(s)));
        }
    }

    #[test]
    fn far_jump_while_playing_resyncs() {
        let mut jb = buf(2, 10);
        jb.push(0, pkt(0));
        jb.push(1, pkt(1));
        assert_eq!(jb.pop(), Playout::Packet(pkt(0)));
        // The sender jumped far ahead: skip to the window, don't play
        // thousands of Lost slots.
        assert_eq!(jb.push(5000, pkt(5000)), Push::Overflow);
        assert_eq!(jb.push(100, pkt(100)), Push::Late);
        jb.push(4991, pkt(4991));
        assert_eq!(jb.pop(), Playout::Packet(pkt(4991)));
    }

    #[test]
    fn zero_config_is_usable() {
        let mut jb = buf(0, 0);
        jb.push(7, pkt(7));
        assert_eq!(jb.pop(), Playout::Packet(pkt(7)));
        assert_eq!(jb.push(9, pkt(9)), Push::Accepted);
        assert_eq!(jb.push(u64::MAX, pkt(1)), Push::Overflow);
        assert_eq!(jb.pop(), Playout::Packet(pkt(1)));
        assert_eq!(jb.pop(), Playout::Lost);
    }

    /// Arrival order: packet `i` sorted by `i + delay[i]`.
    fn arrival_order(delays: &[u64]) -> Vec<u64> {
        let mut order: Vec<u64> = (0..delays.len() as u64).collect();
        order.sort_by_key(|&i| (i + delays[i as usize], i));
        order
    }

    proptest! {
        /// Packet `k` arriving no later than tick `k + target - 1` (any
        /// reordering within a window of `target` packets) plays in order
        /// with no loss.
        #[test]
        fn reordering_within_window_plays_in_order(
            target in 1usize..8,
            base in 0u64..1_000_000,
            raw in proptest::collection::vec(0u64..8, 8..300),
        ) {
            let delays: Vec<u64> = raw.iter().map(|d| d % target as u64).collect();
            let n = delays.len() as u64;
            let mut jb = buf(target, 50);
            let mut played = Vec::new();
            for (tick, &i) in arrival_order(&delays).iter().enumerate() {
                prop_assert_eq!(jb.push(base + i, pkt(base + i)), Push::Accepted);
                prop_assert!(jb.len() <= 50);
                match jb.pop() {
                    Playout::Packet(p) => played.push(p),
                    Playout::Idle => prop_assert!(tick + 1 < target),
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
            }
            while (played.len() as u64) < n {
                match jb.pop() {
                    Playout::Packet(p) => played.push(p),
                    other => prop_assert!(false, "unexpected {:?}", other),
                }
            }
            let want: Vec<Vec<u8>> = (0..n).map(|i| pkt(base + i)).collect();
            prop_assert_eq!(played, want);
            prop_assert_eq!(jb.pop(), Playout::Lost);
            let st = jb.stats();
            prop_assert_eq!((st.late, st.duplicate, st.overflow, st.fec), (0, 0, 0, 0));
        }

        /// Arbitrary pushes and pops: never panics, respects capacity, and
        /// plays sequence numbers in strictly increasing order.
        #[test]
        fn arbitrary_traffic_is_bounded_and_monotonic(
            max in 1usize..20,
            ops in proptest::collection::vec((any::<bool>(), 0u64..64), 1..400),
        ) {
            let mut jb = buf(2, max);
            let mut last: Option<u64> = None;
            for (is_push, seq) in ops {
                if is_push {
                    jb.push(seq, pkt(seq));
                    prop_assert!(jb.len() <= max.max(2));
                } else if let Playout::Packet(p) = jb.pop() {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&p);
                    let s = u64::from_le_bytes(b);
                    prop_assert!(last.is_none_or(|l| s > l));
                    last = Some(s);
                }
            }
        }
    }
}
