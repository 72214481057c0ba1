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
    // The sender jumped far ahead: restart there, don't conceal up to it.
    assert_eq!(jb.push(5000, pkt(5000)), Push::Held);
    assert_eq!(jb.push(5001, pkt(5001)), Push::Resync);
    // The old region is now far behind: held, then refuted.
    assert_eq!(jb.push(100, pkt(100)), Push::Held);
    assert_eq!(jb.push(5002, pkt(5002)), Push::Accepted);
    for s in 5000..5003 {
        assert_eq!(jb.pop(), Playout::Packet(pkt(s)));
    }
    let st = jb.stats();
    assert_eq!((st.resyncs, st.flushed, st.stray), (1, 1, 1));
}

#[test]
fn zero_config_is_usable() {
    let mut jb = buf(0, 0);
    jb.push(7, pkt(7));
    assert_eq!(jb.pop(), Playout::Packet(pkt(7)));
    assert_eq!(jb.push(9, pkt(9)), Push::Accepted);
    assert_eq!(jb.push(u64::MAX - 1, pkt(1)), Push::Held);
    assert_eq!(jb.push(u64::MAX, pkt(2)), Push::Resync);
    assert_eq!(jb.pop(), Playout::Packet(pkt(2)));
    assert_eq!(jb.pop(), Playout::Lost);
}

/// One tick per packet of `seqs`: push it, then pop.
fn ticks(jb: &mut JitterBuffer, seqs: impl IntoIterator<Item = u64>) -> Vec<Playout> {
    seqs.into_iter()
        .map(|s| {
            jb.push(s, pkt(s));
            jb.pop()
        })
        .collect()
}

/// Pops until the first packet of the new stream (at most 5 = 100 ms of
/// 20 ms ticks), then checks that the rest play in order without loss.
fn assert_resumes(out: &[Playout], first: u64) {
    let at = out.iter().position(|p| *p == Playout::Packet(pkt(first)));
    let at = at.expect("the new stream plays");
    assert!(at < 5, "resumed after {} pops", at + 1);
    for (k, p) in out[at..].iter().enumerate() {
        assert_eq!(*p, Playout::Packet(pkt(first + k as u64)));
    }
}

/// A stream at 9_990.. restarting at `new`.., pushed and popped in real time.
fn restart_run(target: usize, new: u64) -> JitterBuffer {
    let mut jb = buf(target, 50);
    let old = ticks(&mut jb, 9_990..10_000);
    assert!(old[target..]
        .iter()
        .all(|p| matches!(p, Playout::Packet(_))));
    let out = ticks(&mut jb, new..new + 20);
    assert_resumes(&out, new);
    assert_eq!(jb.stats().resyncs, 1);
    jb
}

#[test]
fn backward_jump_resumes_within_100ms() {
    for target in 1..=2 {
        restart_run(target, 5);
    }
}

#[test]
fn forward_jump_resumes_within_100ms() {
    for target in 1..=2 {
        let jb = restart_run(target, 20_000);
        assert_eq!(jb.stats().lost, u64::from(target == 1));
    }
}

#[test]
fn restart_is_not_delayed_by_old_stragglers() {
    let mut jb = buf(2, 50);
    ticks(&mut jb, 9_990..10_000);
    assert_eq!(jb.push(5, pkt(5)), Push::Held);
    // A late packet of the old stream neither plays nor refutes the restart.
    assert_eq!(jb.push(9_995, pkt(9_995)), Push::Late);
    assert_eq!(jb.push(6, pkt(6)), Push::Resync);
    // The restart dropped the old stream's buffered 9_999.
    assert_eq!(jb.pop(), Playout::Packet(pkt(5)));
    assert_eq!(jb.stats().flushed, 1);
}

#[test]
fn stray_packets_do_not_disturb_playout() {
    for stray in [5, 4_000, 200_000, u64::MAX] {
        let mut jb = buf(2, 50);
        let mut out = ticks(&mut jb, 1_000..1_010);
        // A stray (twice: the network duplicated it) between two packets.
        assert_eq!(jb.push(stray, pkt(stray)), Push::Held);
        assert_eq!(jb.push(stray, pkt(stray)), Push::Duplicate);
        out.extend(ticks(&mut jb, 1_010..1_020));
        assert_eq!(out[0], Playout::Idle);
        for (k, p) in out[1..].iter().enumerate() {
            assert_eq!(*p, Playout::Packet(pkt(1_000 + k as u64)));
        }
        let st = jb.stats();
        assert_eq!((st.resyncs, st.stray, st.duplicate), (0, 1, 1));
    }
}

#[test]
fn held_packet_the_window_catches_up_with_is_kept() {
    let mut jb = buf(2, 10);
    ticks(&mut jb, 0..3);
    // 14 is past the window (newest 2 + 10); 12, just inside, widens it.
    assert_eq!(jb.push(14, pkt(14)), Push::Held);
    assert_eq!(jb.push(12, pkt(12)), Push::Overflow);
    assert_eq!(jb.len(), 2);
    assert_eq!(jb.stats().stray, 0);
}

#[test]
fn false_restart_recovers() {
    // Two agreeing strays pass for a restart; the real stream wins back.
    let mut jb = buf(2, 50);
    ticks(&mut jb, 1_000..1_010);
    jb.push(5, pkt(5));
    assert_eq!(jb.push(6, pkt(6)), Push::Resync);
    let out = ticks(&mut jb, 1_010..1_030);
    assert_eq!(jb.stats().resyncs, 2);
    let at = out.iter().position(|p| *p == Playout::Packet(pkt(1_010)));
    assert!(at.expect("the stream plays again") < 5);
}

#[test]
fn reset_forgets_packets_and_position() {
    let mut jb = buf(2, 50);
    ticks(&mut jb, 10_000..10_005);
    jb.push(20, pkt(20));
    jb.reset();
    assert!(jb.is_empty() && !jb.is_playing());
    assert_eq!(jb.pop(), Playout::Idle);
    // The new source starts anywhere, at once.
    assert_eq!(jb.push(7, pkt(7)), Push::Accepted);
    assert_eq!(jb.push(8, pkt(8)), Push::Accepted);
    assert_eq!(jb.pop(), Playout::Packet(pkt(7)));
    let st = jb.stats();
    assert_eq!((st.received, st.flushed, st.resyncs), (8, 1 + 1, 0));
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
    /// plays sequence numbers in strictly increasing order between resyncs.
    #[test]
    fn arbitrary_traffic_is_bounded_and_monotonic(
        max in 1usize..20,
        ops in proptest::collection::vec((any::<bool>(), 0u64..64), 1..400),
    ) {
        let mut jb = buf(2, max);
        let mut last: Option<u64> = None;
        for (is_push, seq) in ops {
            if is_push {
                if jb.push(seq, pkt(seq)) == Push::Resync {
                    last = None;
                }
                prop_assert!(jb.len() <= max.max(2));
            } else if let Playout::Packet(p) = jb.pop() {
                let s = seq_of(&p);
                prop_assert!(last.is_none_or(|l| s > l));
                last = Some(s);
            }
        }
    }

    /// Pushes across far-apart regions (restarts both ways, both ends of
    /// `u64`), pops and resets: never panics, stays within capacity, and
    /// every packet is accounted for exactly once.
    #[test]
    fn jumpy_traffic_is_bounded_and_accounted(
        target in 0usize..4,
        max in 0usize..20,
        ops in proptest::collection::vec(op(), 1..400),
    ) {
        let mut jb = buf(target, max);
        let cap = max.max(target).max(1);
        let mut played = 0u64;
        for op in ops {
            match op {
                Op::Push(seq) => {
                    jb.push(seq, pkt(seq));
                }
                Op::Pop => played += u64::from(matches!(jb.pop(), Playout::Packet(_))),
                Op::Reset => jb.reset(),
            }
            prop_assert!(jb.len() <= cap);
            let st = jb.stats();
            let gone = played + jb.len() as u64 + st.late + st.duplicate
                + st.overflow + st.flushed + st.stray;
            let held = st.received.checked_sub(gone);
            prop_assert!(held.is_some_and(|h| h < RESYNC_CONFIRM as u64), "{:?}", st);
        }
    }
}

fn seq_of(p: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(p);
    u64::from_le_bytes(b)
}

#[derive(Debug, Clone)]
enum Op {
    Push(u64),
    Pop,
    Reset,
}

/// Mostly traffic within a few regions far apart, so that pushes jump
/// between them, plus arbitrary values.
fn op() -> impl Strategy<Value = Op> {
    let seq = prop_oneof![
        3 => 0u64..40,
        3 => 10_000u64..10_040,
        2 => (u64::MAX - 40)..=u64::MAX,
        1 => any::<u64>(),
    ];
    prop_oneof![
        6 => seq.prop_map(Op::Push),
        4 => Just(Op::Pop),
        1 => Just(Op::Reset),
    ]
}
