use super::*;

fn now() -> Instant {
    Instant::now()
}

/// A frame, owned: payload, played, drained, inline.
type Frame = (Vec<u8>, Vec<(u64, u64)>, Vec<u64>, bool);

/// The next frame.
fn next(p: &mut CallAudio) -> Frame {
    let f = p.next_frame().unwrap();
    (
        f.payload.to_vec(),
        f.played.to_vec(),
        f.drained.to_vec(),
        f.inline,
    )
}

fn inbound(p: &mut CallAudio) -> Option<Vec<f32>> {
    let mut out = Vec::new();
    p.inbound_frame(now(), &mut out).map(|_| out)
}

fn tone(n: usize) -> Vec<f32> {
    (0..n).map(|i| 0.3 * (i as f32 * 0.05).sin()).collect()
}

#[test]
fn outbound_accounting_and_drain() {
    for codec in [CallCodec::Opus, CallCodec::Pcmu] {
        let mut p = CallAudio::new(codec).unwrap();
        assert!(p.play(7, &tone(4_800)));
        p.finish(7);
        let mut sent = 0;
        let mut drained_at = None;
        for i in 0..20 {
            let (payload, played, drained, _) = next(&mut p);
            assert!(!payload.is_empty());
            sent += played.iter().map(|(_, n)| n).sum::<u64>();
            if drained.contains(&7) && drained_at.is_none() {
                drained_at = Some(i);
            }
            p.prepare();
        }
        // 200 ms queued (minus what the resampler still holds) leaves within ~10 frames.
        assert!((4_400..=4_800).contains(&sent), "{codec:?}: {sent}");
        assert!(
            drained_at.is_some_and(|i| i <= 10),
            "{codec:?}: {drained_at:?}"
        );
    }
}

#[test]
fn clear_makes_next_frame_silent() {
    let mut p = CallAudio::new(CallCodec::Pcmu).unwrap();
    p.play(1, &tone(24_000));
    next(&mut p);
    assert_eq!(p.ready_frames(), 1, "encoded ahead");
    p.clear();
    assert_eq!(p.ready_frames(), 0, "the frames encoded ahead are purged too");
    let (payload, played, _, _) = next(&mut p);
    assert!(played.is_empty());
    assert!(payload.iter().all(|&b| b == 0xFF), "μ-law silence");
    assert_eq!(p.queued(), 0);
}

#[test]
fn a_stall_does_not_become_permanent_latency() {
    let mut p = CallAudio::new(CallCodec::Pcmu).unwrap();
    p.receive(7, 0, vec![0xFF; 160], now());
    p.receive(7, 1, vec![0xFF; 160], now());
    inbound(&mut p);
    // The peer stalled, then delivered 30 frames at once and keeps sending in real time.
    for seq in 2..32 {
        p.receive(7, seq, vec![0xFF; 160], now());
    }
    for seq in 32..80 {
        p.receive(7, seq, vec![0xFF; 160], now());
        inbound(&mut p);
    }
    assert!(
        p.jitter.len() <= MAX_DEPTH_FRAMES,
        "{} frames still buffered",
        p.jitter.len()
    );
}

#[test]
fn inbound_opus_roundtrip_and_silence_before_rtp() {
    let mut p = CallAudio::new(CallCodec::Opus).unwrap();
    assert!(inbound(&mut p).is_none());
    let mut enc = OpusEncoder::new().unwrap();
    for seq in 0..10u64 {
        let pcm: Vec<f32> = (0..960)
            .map(|i| {
                0.3 * ((seq * 960 + i) as f32 * 2.0 * std::f32::consts::PI * 440.0 / 48_000.0).sin()
            })
            .collect();
        p.receive(7, seq, enc.encode(&pcm).unwrap(), now());
    }
    let mut total = 0;
    for _ in 0..10 {
        total += inbound(&mut p).unwrap().len();
    }
    assert!((4_500..=4_800).contains(&total), "{total}");
}

#[test]
fn frames_are_encoded_ahead_and_the_tick_only_takes_them() {
    let mut p = CallAudio::new(CallCodec::Opus).unwrap();
    // Settle the encoder on silence first (the settling frames are encoded ahead too).
    for _ in 0..SILENCE_SETTLE_FRAMES + 2 {
        let (_, played, _, inline) = next(&mut p);
        assert!(played.is_empty());
        assert!(!inline || p.silent_frames <= 1, "only the very first frame may be inline");
        p.prepare();
    }
    assert_eq!(p.ready_frames(), 0, "settled: nothing to encode ahead");
    // 20 ms of answer arrive: encoded at once, not at the tick.
    assert!(p.play(3, &tone(480)));
    let ahead = p.ready_frames();
    // The resampler holds back its lead-in: the first whole frame may need the second chunk.
    assert!(p.play(3, &tone(480)));
    assert!(p.ready_frames() >= 1 && p.ready_frames() >= ahead);
    let (payload, played, _, inline) = next(&mut p);
    assert!(!inline, "the tick found its frame ready");
    assert!(payload.len() > 20, "speech, not the silent packet");
    assert_eq!(played.iter().map(|(_, n)| n).sum::<u64>(), 480);
    // A long answer queued at once is encoded a few frames at a time.
    assert!(p.play(3, &tone(24_000)));
    assert_eq!(p.ready_frames(), AHEAD_FRAMES);
    p.finish(3);
    let mut drained = false;
    for _ in 0..60 {
        let (_, _, d, inline) = next(&mut p);
        assert!(!inline);
        drained |= d.contains(&3);
        p.prepare();
    }
    assert!(drained);
}

#[test]
fn an_answer_that_starts_after_silence_is_not_delayed() {
    let mut p = CallAudio::new(CallCodec::Opus).unwrap();
    for _ in 0..SILENCE_SETTLE_FRAMES + 2 {
        next(&mut p);
        p.prepare();
    }
    // Two chunks, then the tick: the answer's first frame is the next one out.
    p.play(1, &tone(480));
    p.play(1, &tone(480));
    let (_, played, _, _) = next(&mut p);
    assert!(!played.is_empty(), "no silence frame ahead of the answer");
    p.prepare();
    // While it streams, no silence is encoded between its chunks.
    for _ in 0..20 {
        p.play(1, &tone(480));
        let (_, played, _, inline) = next(&mut p);
        assert!(!played.is_empty() && !inline);
        p.prepare();
    }
}

#[test]
fn finish_reports_a_tag_whose_audio_is_all_encoded() {
    let mut p = CallAudio::new(CallCodec::Pcmu).unwrap();
    p.play(5, &tone(480 * 3));
    let ahead = p.ready_frames();
    assert!(ahead >= 1);
    p.finish(5);
    let mut drained = Vec::new();
    for _ in 0..8 {
        let (_, _, d, _) = next(&mut p);
        drained.extend(d);
        p.prepare();
    }
    assert_eq!(drained, vec![5], "reported once");
    // A tag with no audio at all drains with the next frame.
    p.finish(9);
    let (_, _, d, _) = next(&mut p);
    assert_eq!(d, vec![9]);
}

#[test]
fn inbound_wait_is_measured_from_arrival() {
    let mut p = CallAudio::new(CallCodec::Pcmu).unwrap();
    let t0 = Instant::now();
    p.receive(7, 0, vec![0xFF; 160], t0);
    let mut out = Vec::new();
    let f = p
        .inbound_frame(t0 + Duration::from_millis(7), &mut out)
        .unwrap();
    assert_eq!(f.waited, Some(Duration::from_millis(7)));
    assert!(!out.is_empty());
    // Nothing arrived for the next slot: concealment, no wait.
    let f = p
        .inbound_frame(t0 + Duration::from_millis(27), &mut out)
        .unwrap();
    assert_eq!(f.waited, None);
}

#[test]
fn after_an_answer_the_encoder_settles_and_its_silent_packet_is_replayed() {
    let mut p = CallAudio::new(CallCodec::Opus).unwrap();
    p.play(1, &tone(4_800));
    p.finish(1);
    let mut frames = 0;
    while !p.played_out_and_settled() {
        next(&mut p);
        p.prepare();
        frames += 1;
        assert!(frames < 40, "never settled");
    }
    // 10 frames of answer, then the silence that settles the encoder (encoded ahead).
    assert_eq!(frames - 10, SILENCE_SETTLE_FRAMES as usize);
    // From then on the same packet is replayed and nothing is encoded.
    let (a, _, _, _) = next(&mut p);
    p.prepare();
    let (b, _, _, inline) = next(&mut p);
    assert_eq!(a, b);
    assert!(!inline);
    assert_eq!(p.ready_frames(), 0);
}
