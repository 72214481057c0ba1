//! Fuzzes the inbound jitter buffer with arbitrary RTP traffic: in-order runs, reordering,
//! duplicates, restarts far behind or ahead (down to 0 and up to u64::MAX), pops and
//! resets. It must never panic, stay within its span, account for every packet exactly
//! once, and play each stream's packets in increasing order.
#![no_main]

use duet_media::jitter::RESYNC_CONFIRM;
use duet_media::{JitterBuffer, JitterConfig, Playout, Push};
use libfuzzer_sys::fuzz_target;

/// The buffer under test and what the checks know about its traffic.
struct Harness {
    jb: JitterBuffer,
    cap: usize,
    /// Next in-order sequence number of the simulated sender.
    cursor: u64,
    last_pushed: u64,
    pushes: u64,
    played: u64,
    lost: u64,
    fec: u64,
    /// Last sequence number played in the current stream.
    last_played: Option<u64>,
}

impl Harness {
    fn new(target: usize, max: usize) -> Self {
        Harness {
            jb: JitterBuffer::new(JitterConfig {
                target_frames: target,
                max_frames: max,
            }),
            cap: max.max(target).max(1),
            cursor: 0,
            last_pushed: 0,
            pushes: 0,
            played: 0,
            lost: 0,
            fec: 0,
            last_played: None,
        }
    }

    fn push(&mut self, seq: u64) {
        self.pushes += 1;
        self.last_pushed = seq;
        if self.jb.push(seq, seq.to_le_bytes().to_vec()) == Push::Resync {
            self.last_played = None;
        }
    }

    fn pop(&mut self) {
        match self.jb.pop() {
            Playout::Packet(p) => {
                let seq = u64::from_le_bytes(p.try_into().expect("8-byte payload"));
                // Past u64::MAX the next slot saturates, so only below it is order strict.
                if let Some(last) = self.last_played.filter(|&l| l < u64::MAX) {
                    assert!(seq > last, "played {seq} after {last}");
                }
                self.last_played = Some(seq);
                self.played += 1;
            }
            Playout::Fec(p) => {
                assert_eq!(p.len(), 8);
                self.fec += 1;
            }
            Playout::Lost => self.lost += 1,
            Playout::Idle => assert!(!self.jb.is_playing()),
        }
    }

    fn reset(&mut self) {
        self.jb.reset();
        self.last_played = None;
        assert!(self.jb.is_empty() && !self.jb.is_playing());
    }

    fn check(&self) {
        assert!(
            self.jb.len() <= self.cap,
            "{} > {}",
            self.jb.len(),
            self.cap
        );
        let st = self.jb.stats();
        assert_eq!(st.received, self.pushes);
        assert_eq!((st.lost, st.fec), (self.lost, self.fec));
        assert!(st.resyncs * RESYNC_CONFIRM as u64 <= st.received);
        let gone = self.played
            + self.jb.len() as u64
            + st.late
            + st.duplicate
            + st.overflow
            + st.flushed
            + st.stray;
        let held = st.received.checked_sub(gone);
        assert!(
            held.is_some_and(|h| h < RESYNC_CONFIRM as u64),
            "unaccounted: {st:?}, played {}, len {}",
            self.played,
            self.jb.len()
        );
    }
}

/// Takes `n` bytes (zero-padded) as a little-endian number.
fn take(data: &mut &[u8], n: usize) -> u64 {
    let k = n.min(data.len());
    let mut b = [0u8; 8];
    b[..k].copy_from_slice(&data[..k]);
    *data = &data[k..];
    u64::from_le_bytes(b)
}

/// Runs one operation from the front of `data`.
fn step(h: &mut Harness, data: &mut &[u8]) {
    let op = take(data, 1) as u8;
    match op % 10 {
        0..=2 => {
            h.cursor = h.cursor.wrapping_add(1);
            h.push(h.cursor);
        }
        3 => {
            let delta = take(data, 1) as u8 as i8;
            h.push(h.cursor.wrapping_add_signed(i64::from(delta)));
        }
        4 => h.push(h.last_pushed),
        5 => {
            // A jump anywhere: the sender restarted or a stray arrived.
            h.cursor = take(data, 8);
            h.push(h.cursor);
        }
        6 => {
            // Near either end of u64.
            let off = take(data, 1);
            h.cursor = if op & 0x80 == 0 { off } else { u64::MAX - off };
            h.push(h.cursor);
        }
        7 | 8 => h.pop(),
        _ => h.reset(),
    }
    h.check();
}

fuzz_target!(|data: &[u8]| {
    let mut data = data;
    let target = take(&mut data, 1) as usize % 8;
    let max = take(&mut data, 1) as usize % 64;
    let mut h = Harness::new(target, max);
    while !data.is_empty() {
        step(&mut h, &mut data);
    }
});
