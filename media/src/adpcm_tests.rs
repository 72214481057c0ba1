use super::*;
use crate::testutil::Rng;
use proptest::prelude::*;

/// A voiced, speech-like signal at 24 kHz: a 120–180 Hz gliding pitch with decaying
/// harmonics, syllable-rate amplitude modulation, and a little breath noise.
fn voiced(secs: f32, peak: f32, seed: u64) -> Vec<i16> {
    let rate = 24_000.0f64;
    let n = (secs as f64 * rate) as usize;
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut phase = 0.0f64;
    (0..n)
        .map(|i| {
            let t = i as f64 / rate;
            let f0 = 150.0 + 30.0 * (2.0 * std::f64::consts::PI * 0.7 * t).sin();
            phase += 2.0 * std::f64::consts::PI * f0 / rate;
            let mut v = 0.0;
            for h in 1..=20 {
                v += (phase * h as f64).sin() / h as f64;
            }
            let syllable = (0.5 - 0.5 * (2.0 * std::f64::consts::PI * 4.0 * t).cos()).powi(2);
            let breath = rng.unit() as f64 * 0.025;
            ((v * 0.5 * syllable + breath) * peak as f64 * 32_767.0) as i16
        })
        .collect()
}

/// Signal to error ratio in dB.
fn snr_db(original: &[i16], decoded: &[i16]) -> f64 {
    let signal: f64 = original.iter().map(|&s| (s as f64).powi(2)).sum();
    let error: f64 = original
        .iter()
        .zip(decoded)
        .map(|(&a, &b)| (a as f64 - b as f64).powi(2))
        .sum();
    10.0 * (signal / error.max(1.0)).log10()
}

#[test]
fn speech_like_audio_keeps_twenty_five_db_at_every_level() {
    for (peak, seed) in [(0.9, 1), (0.3, 2), (0.05, 3), (0.01, 4)] {
        let x = voiced(2.0, peak, seed);
        let a = Adpcm::from_i16(&x);
        let snr = snr_db(&x, &a.to_i16());
        eprintln!("peak {peak}: SNR {snr:.1} dB");
        assert!(snr > 25.0, "peak {peak}: SNR {snr:.1} dB");
    }
}

#[test]
fn a_quarter_of_the_bytes() {
    for n in [0, 1, 2, 3, 24_000, 24_001] {
        let a = Adpcm::from_i16(&vec![100; n]);
        assert_eq!(a.len(), n);
        assert_eq!(a.heap_bytes(), n.div_ceil(2), "{n} samples");
        assert_eq!(Adpcm::bytes_for(n), n.div_ceil(2));
    }
}

#[test]
fn silence_stays_near_silent_and_full_scale_does_not_overflow() {
    let a = Adpcm::from_i16(&[0; 4_800]);
    assert!(a.samples().all(|s| s.abs() <= 8), "{:?}", &a.to_i16()[..8]);
    let square: Vec<i16> = (0..4_800)
        .map(|i| {
            if (i / 12) % 2 == 0 {
                i16::MAX
            } else {
                i16::MIN
            }
        })
        .collect();
    let d = Adpcm::from_i16(&square).to_i16();
    assert_eq!(d.len(), square.len());
    // It follows the swing (the step adapts within a few periods).
    assert!(d[2_400..].iter().any(|&s| s > 30_000) && d[2_400..].iter().any(|&s| s < -30_000));
}

#[test]
fn f32_input_is_its_pcm16() {
    let x: Vec<f32> = (0..1_000)
        .map(|i| ((i as f32) * 0.05).sin() * 0.4)
        .collect();
    let pcm: Vec<i16> = x.iter().map(|&s| crate::f32_to_i16(s)).collect();
    let mut a = Adpcm::new();
    a.push_f32(&x);
    assert_eq!(a, Adpcm::from_i16(&pcm));
    let f = a.to_f32();
    assert_eq!(f.len(), 1_000);
    assert!(f
        .iter()
        .zip(a.samples())
        .all(|(&f, s)| f == crate::i16_to_f32(s)));
}

proptest! {
    /// Appending in pieces is encoding at once; a cut keeps exactly the decoded prefix, and
    /// appending after a cut is encoding the kept prefix and the rest at once.
    #[test]
    fn pieces_cuts_and_prefixes_agree(
        x in proptest::collection::vec(any::<i16>(), 0..600),
        split in 0usize..600,
        cut in 0usize..700,
        tail in proptest::collection::vec(any::<i16>(), 0..50),
    ) {
        let split = split.min(x.len());
        let whole = Adpcm::from_i16(&x);
        let mut pieces = Adpcm::new();
        pieces.push_i16(&x[..split]);
        pieces.push_i16(&x[split..]);
        prop_assert_eq!(&pieces, &whole);

        let decoded = whole.to_i16();
        let mut cut_one = whole.clone();
        cut_one.truncate(cut);
        let kept = cut.min(x.len());
        prop_assert_eq!(cut_one.len(), kept);
        prop_assert_eq!(cut_one.heap_bytes() >= Adpcm::bytes_for(kept), true);
        prop_assert_eq!(cut_one.to_i16(), decoded[..kept].to_vec());

        cut_one.push_i16(&tail);
        let mut again = Adpcm::from_i16(&x[..kept]);
        again.push_i16(&tail);
        prop_assert_eq!(cut_one.to_i16(), again.to_i16());
    }
}
