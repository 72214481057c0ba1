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
    assert_eq!(
        p.ready_frames(),
        0,
        "the frames encoded ahead are purged too"
    );
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
        assert!(
            !inline || p.silent_frames <= 1,
            "only the very first frame may be inline"
        );
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
    // 10 frames of answer, then two frames of its decay, encoded ahead; then the encoder
    // starts over and the fresh encoder's silent packet is replayed.
    assert_eq!(frames - 10, OPUS_DECAY_FRAMES as usize);
    // From then on the same packet is replayed and nothing is encoded.
    let (a, _, _, _) = next(&mut p);
    p.prepare();
    let (b, _, _, inline) = next(&mut p);
    assert_eq!(a, b);
    assert_eq!(a, opus_silence());
    assert!(!inline);
    assert_eq!(p.ready_frames(), 0);
    // The next answer starts from the fresh encoder and decodes.
    let mut dec = OpusDecoder::with_rate(SESSION_RATE).unwrap();
    p.play(2, &tone(960));
    let (payload, played, _, _) = next(&mut p);
    assert!(!played.is_empty());
    let mut out = Vec::new();
    assert_eq!(dec.decode(&payload, &mut out).unwrap(), 480);
}

#[test]
fn an_opus_call_starts_settled_and_encodes_nothing_while_idle() {
    let mut p = CallAudio::new(CallCodec::Opus).unwrap();
    for _ in 0..5 {
        let (payload, played, _, inline) = next(&mut p);
        assert!(played.is_empty() && !inline);
        assert_eq!(payload, opus_silence());
        p.prepare();
        assert_eq!(p.ready_frames(), 0, "nothing encoded ahead while idle");
    }
    assert!(!opus_silence().is_empty() && opus_silence().len() < 40);
}

#[test]
fn a_packet_in_order_is_delivered_on_arrival_and_its_tick_plays_nothing() {
    let mut p = CallAudio::new(CallCodec::Pcmu).unwrap();
    let t0 = Instant::now();
    let mut out = Vec::new();
    for seq in 0..5u64 {
        let at = t0 + Duration::from_millis(20 * seq + 3);
        p.receive(7, seq, vec![0xFF; 160], at);
        out.clear();
        let f = p.arrival_frame(at, &mut out).expect("delivered on arrival");
        assert_eq!(f.waited, Some(Duration::ZERO));
        assert!(!out.is_empty());
        // Its tick, 17 ms later: nothing more for this slot.
        let mut tick = Vec::new();
        assert!(p
            .inbound_frame(at + Duration::from_millis(17), &mut tick)
            .is_none());
        assert!(tick.is_empty());
    }
    // Out of order: 6 before 5. 6 waits; 5 goes at once, and 6 is its tick's after.
    p.receive(7, 6, vec![0xFF; 160], t0);
    assert!(p.arrival_frame(t0, &mut out).is_none(), "not the next one");
    p.receive(7, 5, vec![0xFF; 160], t0);
    assert!(p.arrival_frame(t0, &mut out).is_some());
    assert!(p.arrival_frame(t0, &mut out).is_none(), "one ahead at most");
    assert!(p.inbound_frame(t0, &mut out).is_none(), "5's tick");
    let f = p.inbound_frame(t0, &mut out).expect("6 at its tick");
    assert!(f.waited.is_some());
    // A lost packet is still concealed at its tick.
    let f = p.inbound_frame(t0, &mut out).expect("a frame");
    assert_eq!(f.waited, None);
}

#[test]
fn after_a_clear_the_next_frame_is_silence_not_the_encoders_decay() {
    fn rms(v: &[f32]) -> f32 {
        (v.iter().map(|x| x * x).sum::<f32>() / v.len().max(1) as f32).sqrt()
    }
    let mut p = CallAudio::new(CallCodec::Opus).unwrap();
    let mut dec = OpusDecoder::with_rate(SESSION_RATE).unwrap();
    let mut loud = 0.0f32;
    p.play(1, &tone(24_000));
    for _ in 0..20 {
        let (payload, _, _, _) = next(&mut p);
        let mut out = Vec::new();
        dec.decode(&payload, &mut out).unwrap();
        loud = loud.max(rms(&out));
        p.prepare();
    }
    p.clear();
    let mut after = Vec::new();
    for _ in 0..3 {
        let (payload, played, _, _) = next(&mut p);
        assert!(played.is_empty());
        assert!(
            payload.len() < 40,
            "a small silent packet: {}",
            payload.len()
        );
        let mut out = Vec::new();
        dec.decode(&payload, &mut out).unwrap();
        after.push(rms(&out));
        p.prepare();
    }
    // The first frame carries at most the codec's 2.5 ms overlap; then silence.
    assert!(after[0] < loud * 0.5, "{after:?} vs {loud}");
    assert!(
        after[1] < loud * 0.01 && after[2] < loud * 0.01,
        "{after:?} vs {loud}"
    );
}

#[test]
fn a_paused_answer_sends_silence_and_resumes_where_it_paused() {
    for codec in [CallCodec::Opus, CallCodec::Pcmu] {
        let mut p = CallAudio::new(codec).unwrap();
        p.play(3, &tone(4_800));
        p.finish(3);
        let (_, first, _, _) = next(&mut p);
        p.prepare();
        assert!(!first.is_empty(), "{codec:?}: the answer started");
        p.pause(true);
        let (queued, ready) = (p.queued(), p.ready_frames());
        for _ in 0..10 {
            let (payload, played, drained, _) = next(&mut p);
            p.prepare();
            assert!(
                played.is_empty() && drained.is_empty(),
                "{codec:?}: silence"
            );
            assert!(!payload.is_empty());
            if codec == CallCodec::Pcmu {
                assert!(payload.iter().all(|&b| b == 0xFF), "μ-law silence");
            }
        }
        assert_eq!(
            (p.queued(), p.ready_frames()),
            (queued, ready),
            "{codec:?}: waits"
        );
        // Resumed: the rest of the answer, every sample of it, then its drain.
        p.pause(false);
        let mut sent: u64 = first.iter().map(|(_, n)| n).sum();
        let mut drained = false;
        for _ in 0..20 {
            let (_, played, d, _) = next(&mut p);
            p.prepare();
            sent += played.iter().map(|(_, n)| n).sum::<u64>();
            drained |= d.contains(&3);
        }
        assert!((4_400..=4_800).contains(&sent), "{codec:?}: {sent}");
        assert!(drained, "{codec:?}");
        // A clear ends a pause.
        p.play(4, &tone(4_800));
        p.pause(true);
        p.clear();
        p.play(5, &tone(960));
        let (_, played, _, _) = next(&mut p);
        assert!(
            played.iter().any(|(t, _)| *t == 5),
            "{codec:?}: not paused after a clear"
        );
    }
}
