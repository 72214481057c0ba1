use super::*;
use crate::dtmf::TelephoneEvent;
use crate::pacer::FrameGrid;
use crate::rtp::RtpHeader;

const PCMU: u8 = 0;
const EVENTS: u8 = 101;

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([192, 0, 2, 1], port))
}

fn config() -> RtpLegConfig {
    RtpLegConfig {
        codec: CallCodec::Pcmu,
        payload_type: PCMU,
        telephone_event: Some(EVENTS),
        remote: Some(addr(4000)),
        ssrc: 0x1111,
        first_seq: 65_534,
        first_timestamp: 4_294_967_000,
        first_packet_timeout: Duration::from_secs(30),
        inactivity: Duration::from_secs(15),
        srtp: None,
    }
}

fn packet(pt: u8, ssrc: u32, seq: u16, ts: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let h = RtpHeader {
        marker: false,
        payload_type: pt,
        seq,
        timestamp: ts,
        ssrc,
    };
    rtp::write(&h, payload, &mut out);
    out
}

/// A 20 ms μ-law packet of a loud square wave (never silence).
fn voice(ssrc: u32, seq: u16) -> Vec<u8> {
    let tone: Vec<u8> = (0..160)
        .map(|i| if i % 20 < 10 { 0x80 } else { 0x00 })
        .collect();
    packet(PCMU, ssrc, seq, u32::from(seq) * 160, &tone)
}

fn event(ssrc: u32, seq: u16, ts: u32, key: u8, end: bool, duration: u16) -> Vec<u8> {
    let ev = TelephoneEvent {
        event: key,
        end,
        volume: 10,
        duration,
    };
    packet(EVENTS, ssrc, seq, ts, &ev.to_bytes())
}

#[test]
fn the_signalled_address_is_heard_at_once() {
    let t0 = Instant::now();
    let mut leg = RtpLeg::new(config(), t0).unwrap();
    assert_eq!(leg.receive(t0, addr(4000), &voice(7, 1)), Received::Audio);
    assert_eq!(leg.remote(), Some(addr(4000)));
    assert_eq!(leg.stats().relatched, 0);
}

#[test]
fn a_caller_behind_nat_latches_after_a_run_of_packets() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut leg = RtpLeg::new(config(), t0).unwrap();
    assert_eq!(
        leg.remote(),
        Some(addr(4000)),
        "the offer's address until a source proves itself"
    );
    // The caller is behind NAT: its packets come from another address than its SDP said.
    let results: Vec<_> = (1..=RELATCH_PACKETS as u16)
        .map(|seq| leg.receive(ms(20 * u64::from(seq)), addr(6000), &voice(7, seq)))
        .collect();
    assert_eq!(
        results[..3],
        [Received::Ignored(Ignored::ForeignSource); 3],
        "on probation: neither heard nor answered"
    );
    assert_eq!(leg.remote(), Some(addr(6000)), "{results:?}");
    assert_eq!(results[3], Received::Audio);
    // The signalled address may always take the latch back.
    assert_eq!(
        leg.receive(ms(100), addr(4000), &voice(8, 1)),
        Received::Audio
    );
    assert_eq!(leg.remote(), Some(addr(4000)));
}

#[test]
fn a_strangers_first_packet_does_not_steal_the_call() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut leg = RtpLeg::new(config(), t0).unwrap();
    // A stranger's packet arrives before the caller's first one ...
    assert_eq!(
        leg.receive(t0, addr(9999), &voice(66, 1)),
        Received::Ignored(Ignored::ForeignSource)
    );
    assert_eq!(
        leg.remote(),
        Some(addr(4000)),
        "nothing goes to the stranger"
    );
    // ... then the caller talks at 50 packets/s and the stranger sends one every 0.5 s.
    let mut heard = 0;
    for n in 0..150u64 {
        if leg.receive(ms(20 * n), addr(4000), &voice(7, n as u16)) == Received::Audio {
            heard += 1;
        }
        if n % 25 == 0 {
            let r = leg.receive(ms(20 * n + 1), addr(9999), &voice(66, 2 + n as u16));
            assert_eq!(r, Received::Ignored(Ignored::ForeignSource));
        }
        assert_eq!(leg.remote(), Some(addr(4000)));
    }
    assert_eq!(heard, 150, "every packet of the caller is heard");
}

#[test]
fn a_new_source_takes_over_only_after_a_run_while_the_old_one_is_quiet() {
    let t0 = Instant::now();
    let mut leg = RtpLeg::new(config(), t0).unwrap();
    let ms = |n| t0 + Duration::from_millis(n);
    for seq in 0..5u16 {
        leg.receive(ms(20 * u64::from(seq)), addr(6000), &voice(7, seq));
    }
    assert_eq!(leg.remote(), Some(addr(6000)), "latched after its run");
    // A spoofer with a perfect run while the caller still talks: refused.
    for seq in 0..10u16 {
        let r = leg.receive(ms(100 + u64::from(seq)), addr(9999), &voice(66, seq));
        assert_eq!(r, Received::Ignored(Ignored::ForeignSource));
    }
    assert_eq!(leg.remote(), Some(addr(6000)));
    // The caller's NAT rebinds: its old port falls quiet, the new one sends in sequence.
    let quiet = 80 + RELATCH_QUIET.as_millis() as u64;
    let mut results = Vec::new();
    for (i, seq) in (5..9u16).enumerate() {
        results.push(leg.receive(ms(quiet + 20 * i as u64), addr(6002), &voice(7, seq)));
    }
    assert_eq!(results[..3], [Received::Ignored(Ignored::ForeignSource); 3]);
    assert_eq!(results[3], Received::Audio);
    assert_eq!(leg.remote(), Some(addr(6002)));
    assert_eq!(leg.stats().relatched, 1);
    // Out-of-sequence packets never add up to a run.
    let later = quiet + 2_000;
    for seq in [100u16, 50, 101, 7, 102] {
        leg.receive(ms(later), addr(7000), &voice(9, seq));
    }
    assert_eq!(leg.remote(), Some(addr(6002)));
}

#[test]
fn a_new_ssrc_or_a_sequence_jump_resyncs_the_audio() {
    let t0 = Instant::now();
    let mut leg = RtpLeg::new(config(), t0).unwrap();
    let mut grid = FrameGrid::new(t0, Duration::from_millis(20));
    let mut heard = Vec::new();
    let mut loud_frames = 0;
    // 10 packets of SSRC 7 from seq 40000, 10 of SSRC 8 from seq 3 (a transfer), then SSRC
    // 8 jumps to 30000 (a gateway restart): every stream is heard.
    let streams = [(7u32, 40_000u16), (8, 3), (8, 30_000)];
    let mut i = 0u64;
    for (ssrc, first) in streams {
        for k in 0..10u16 {
            let now = t0 + Duration::from_millis(20 * i + 5);
            assert_eq!(
                leg.receive(now, addr(4000), &voice(ssrc, first + k)),
                Received::Audio
            );
            heard.clear();
            leg.audio().arrival_frame(now, &mut heard);
            let tick_at = t0 + Duration::from_millis(20 * (i + 1));
            if grid.tick(tick_at).is_some() {
                leg.audio().inbound_frame(tick_at, &mut heard);
            }
            if heard.iter().any(|s| s.abs() > 0.1) {
                loud_frames += 1;
            }
            i += 1;
        }
    }
    assert_eq!(leg.stats().ssrc_changes, 1);
    assert_eq!(leg.stats().audio_in, 30);
    // A frame or two of each restart is the jitter buffer's playout delay.
    assert!(loud_frames >= 24, "heard {loud_frames} of 30 frames");
}

#[test]
fn dtmf_keys_arrive_once_each_as_rfc_4733_sends_them() {
    let t0 = Instant::now();
    let mut leg = RtpLeg::new(config(), t0).unwrap();
    leg.receive(t0, addr(4000), &voice(7, 1));
    let mut keys = String::new();
    let mut push = |leg: &mut RtpLeg, bytes: Vec<u8>| {
        if let Received::Dtmf(k) = leg.receive(t0, addr(4000), &bytes) {
            keys.push(k);
        }
    };
    // RFC 4733 §2.5.1.2 style: a key held for 400 ms at 8 kHz (updates every 50 ms, no
    // marker bit), the end packet three times with the same sequence number.
    let mut seq = 100;
    for key in [1u8, 2, 3, 11] {
        let ts = 8_000 * u32::from(key);
        for d in 1..=8u16 {
            push(&mut leg, event(7, seq, ts, key, false, 400 * d));
            seq += 1;
        }
        for _ in 0..3 {
            push(&mut leg, event(7, seq, ts, key, true, 3_200));
        }
        seq += 1;
    }
    // The trunk's own DTMF source: a second SSRC on the same address.
    push(&mut leg, event(0xabcd, 1, 50, 0, false, 160));
    push(&mut leg, event(0xabcd, 2, 50, 0, true, 800));
    assert_eq!(keys, "123#0");
    // Events from a foreign source are not the caller's keys.
    assert_eq!(
        leg.receive(t0, addr(9), &event(5, 1, 9, 9, false, 160)),
        Received::Ignored(Ignored::ForeignSource)
    );
}

#[test]
fn other_payload_types_and_junk_are_ignored() {
    let t0 = Instant::now();
    let mut leg = RtpLeg::new(config(), t0).unwrap();
    // Comfort noise (PT 13) and PCMA, which the answer did not choose.
    assert_eq!(
        leg.receive(t0, addr(6000), &packet(13, 7, 1, 0, &[40])),
        Received::Ignored(Ignored::PayloadType(13))
    );
    assert_eq!(
        leg.receive(t0, addr(6000), &packet(8, 7, 1, 0, &[0xd5; 160])),
        Received::Ignored(Ignored::PayloadType(8))
    );
    for junk in [&b""[..], b"\x00\x01", &[0x40; 20], b"STUN-like garbage!!"] {
        assert_eq!(
            leg.receive(t0, addr(6000), junk),
            Received::Ignored(Ignored::Malformed)
        );
    }
    // None of that latched the leg.
    assert_eq!(leg.remote(), Some(addr(4000)));
    assert_eq!(leg.stats().ignored, 6);
    assert!(
        leg.expired(t0 + Duration::from_secs(30)),
        "junk is not a sign of life"
    );
}

#[test]
fn silence_ends_the_call_and_rtcp_counts_as_life() {
    let t0 = Instant::now();
    let s = Duration::from_secs;
    let leg = RtpLeg::new(config(), t0).unwrap();
    assert!(!leg.expired(t0 + s(29)));
    assert_eq!(leg.expires_at(), t0 + s(30));
    assert!(leg.expired(t0 + s(30)), "no first packet in 30 s");

    let mut leg = RtpLeg::new(config(), t0).unwrap();
    leg.receive(t0 + s(1), addr(4000), &voice(7, 1));
    assert_eq!(leg.expires_at(), t0 + s(16));
    let rr = [0x80, 201, 0, 1, 0, 0, 0, 7];
    assert_eq!(leg.receive(t0 + s(10), addr(4000), &rr), Received::Rtcp);
    assert!(!leg.expired(t0 + s(24)));
    assert!(leg.expired(t0 + s(25)), "15 s after the last packet");
    // RTCP from elsewhere is not.
    assert_eq!(
        leg.receive(t0 + s(24), addr(1), &rr),
        Received::Ignored(Ignored::ForeignSource)
    );
    assert!(leg.expired(t0 + s(25)));
}

#[test]
fn packets_follow_the_grid_with_silence_between_answers() {
    let t0 = Instant::now();
    let mut leg = RtpLeg::new(config(), t0).unwrap();
    let mut grid = FrameGrid::new(t0, Duration::from_millis(20));
    let mut out = Vec::new();
    let mut sent = Vec::new();
    let mut at = |ms: u64, leg: &mut RtpLeg, sent: &mut Vec<(RtpHeader, Vec<u8>)>| {
        let tick = grid
            .tick(t0 + Duration::from_millis(ms))
            .expect("a slot is due");
        leg.audio().prepare();
        leg.next_packet(tick.slot, &mut out).unwrap();
        let p = rtp::parse(&out).unwrap();
        sent.push((p.header, p.payload.to_vec()));
    };
    at(20, &mut leg, &mut sent);
    at(40, &mut leg, &mut sent);
    // 40 ms of answer audio (24 kHz), then silence again.
    assert!(leg.audio().play(1, &vec![0.5; 960]));
    leg.audio().finish(1);
    at(60, &mut leg, &mut sent);
    at(80, &mut leg, &mut sent);
    // The driver stalled: woken at 130 ms, the grid serves slot 5 and skips slot 4; the
    // timestamp shows the gap.
    at(130, &mut leg, &mut sent);
    at(140, &mut leg, &mut sent);

    let seqs: Vec<u16> = sent.iter().map(|(h, _)| h.seq).collect();
    assert_eq!(
        seqs,
        [65_534, 65_535, 0, 1, 2, 3],
        "one sequence number per packet"
    );
    let base = config().first_timestamp;
    let ts: Vec<u32> = sent
        .iter()
        .map(|(h, _)| h.timestamp.wrapping_sub(base))
        .collect();
    assert_eq!(
        ts,
        [0, 160, 320, 480, 800, 960],
        "the slot's place on the grid"
    );
    let markers: Vec<bool> = sent.iter().map(|(h, _)| h.marker).collect();
    assert_eq!(
        markers,
        [false, false, true, false, false, false],
        "a talkspurt starts"
    );
    for (i, (h, payload)) in sent.iter().enumerate() {
        assert_eq!((h.payload_type, h.ssrc, payload.len()), (PCMU, 0x1111, 160));
        let silent = payload.iter().all(|&b| b == 0xff);
        assert_eq!(
            silent,
            !(2..4).contains(&i),
            "packet {i}: silence when idle"
        );
    }
    assert_eq!(leg.stats().packets_out, 6);
}

#[test]
fn arbitrary_datagrams_never_panic() {
    use proptest::prelude::*;
    let t0 = Instant::now();
    proptest!(|(bytes in proptest::collection::vec(any::<u8>(), 0..64), port in 1u16..4)| {
        let mut leg = RtpLeg::new(config(), t0).unwrap();
        let mut b = bytes.clone();
        if let Some(first) = b.first_mut() {
            *first = 0x80 | (*first & 0x3f); // mostly version 2
        }
        leg.receive(t0, addr(port), &bytes);
        leg.receive(t0, addr(port), &b);
        let mut heard = Vec::new();
        leg.audio().inbound_frame(t0, &mut heard);
    });
}
