use super::*;

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
            let f = p.outbound_frame().unwrap();
            assert!(!f.payload.is_empty());
            sent += f.played.iter().map(|(_, n)| n).sum::<u64>();
            if f.drained.contains(&7) && drained_at.is_none() {
                drained_at = Some(i);
            }
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
    p.outbound_frame().unwrap();
    p.clear();
    let f = p.outbound_frame().unwrap();
    assert!(f.played.is_empty());
    assert!(f.payload.iter().all(|&b| b == 0xFF), "μ-law silence");
    assert_eq!(p.queued(), 0);
}

#[test]
fn a_stall_does_not_become_permanent_latency() {
    let mut p = CallAudio::new(CallCodec::Pcmu).unwrap();
    p.receive(7, 0, vec![0xFF; 160]);
    p.receive(7, 1, vec![0xFF; 160]);
    p.inbound_frame();
    // The peer stalled, then delivered 30 frames at once and keeps sending in real time.
    for seq in 2..32 {
        p.receive(7, seq, vec![0xFF; 160]);
    }
    for seq in 32..80 {
        p.receive(7, seq, vec![0xFF; 160]);
        p.inbound_frame();
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
    assert!(p.inbound_frame().is_none());
    let mut enc = OpusEncoder::new().unwrap();
    for seq in 0..10u64 {
        let pcm: Vec<f32> = (0..960)
            .map(|i| {
                0.3 * ((seq * 960 + i) as f32 * 2.0 * std::f32::consts::PI * 440.0 / 48_000.0).sin()
            })
            .collect();
        p.receive(7, seq, enc.encode(&pcm).unwrap());
    }
    let mut total = 0;
    for _ in 0..10 {
        total += p.inbound_frame().unwrap().len();
    }
    assert!((4_500..=4_800).contains(&total), "{total}");
}
