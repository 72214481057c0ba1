//! Tests for [`super::Vad`].

use super::*;
use crate::testutil::{rms, Rng};
use VadEvent::{SpeechStarted, SpeechStopped};

/// A voiced-like signal: 140 Hz with 1/k harmonics, scaled to `dbfs` RMS.
fn voiced(rate: u32, secs: f64, dbfs: f32) -> Vec<f32> {
    let n = (f64::from(rate) * secs).round() as usize;
    let raw: Vec<f32> = (0..n)
        .map(|i| {
            let t = i as f64 / f64::from(rate);
            (1..=6)
                .map(|k| (2.0 * std::f64::consts::PI * 140.0 * k as f64 * t).sin() / k as f64)
                .sum::<f64>() as f32
        })
        .collect();
    let gain = 10f64.powf(f64::from(dbfs) / 20.0) / rms(&raw);
    raw.iter().map(|&v| (f64::from(v) * gain) as f32).collect()
}

fn silence(rate: u32, secs: f64) -> Vec<f32> {
    vec![0.0; (f64::from(rate) * secs).round() as usize]
}

fn run(config: VadConfig, rate: u32, signal: &[f32]) -> Vec<VadEvent> {
    let mut vad = Vad::new(config, rate);
    let mut events = Vec::new();
    vad.push(signal, &mut events);
    assert_eq!(vad.position(), signal.len() as u64);
    events
}

fn utterance(rate: u32, lead: f64) -> Vec<f32> {
    [
        silence(rate, lead),
        voiced(rate, 1.0, -20.0),
        silence(rate, 1.0),
    ]
    .concat()
}

#[test]
fn probability_mapping() {
    assert_eq!(speech_probability(-40.0), 0.5);
    assert_eq!(speech_probability(-60.0), 0.0);
    assert_eq!(speech_probability(-120.0), 0.0);
    assert_eq!(speech_probability(-20.0), 1.0);
    assert_eq!(speech_probability(0.0), 1.0);
    assert!((speech_probability(-30.0) - 0.75).abs() < 1e-6);
}

#[test]
fn one_utterance_gives_one_start_and_one_stop() {
    for rate in [8000, 16000, 24000, 48000] {
        let r = u64::from(rate);
        let events = run(VadConfig::default(), rate, &utterance(rate, 0.5));
        let start = r / 2 - r * 3 / 10;
        let stop = r * 3 / 2 + r / 2;
        assert_eq!(
            events,
            vec![
                SpeechStarted { at_sample: start },
                SpeechStopped { at_sample: stop }
            ],
            "{rate} Hz"
        );
    }
}

#[test]
fn unaligned_utterance_stops_within_one_window() {
    let rate = 16000;
    let events = run(VadConfig::default(), rate, &utterance(rate, 0.5037));
    let [SpeechStarted { at_sample: a }, SpeechStopped { at_sample: b }] = events[..] else {
        panic!("unexpected events {events:?}");
    };
    let window = 160;
    assert!(a.abs_diff(8059 - 4800) <= window, "start {a}");
    assert!(b.abs_diff(8059 + 16000 + 8000) <= window, "stop {b}");
}

#[test]
fn silence_and_quiet_noise_yield_nothing() {
    let rate = 16000;
    assert!(run(VadConfig::default(), rate, &silence(rate, 3.0)).is_empty());
    let mut rng = Rng(5);
    let amp = 10f32.powf(-70.0 / 20.0) * 3f32.sqrt(); // uniform noise at -70 dBFS
    let noise: Vec<f32> = (0..48000).map(|_| rng.unit() * amp).collect();
    assert!((crate::pcm::rms_dbfs(&noise) + 70.0).abs() < 1.0);
    assert!(run(VadConfig::default(), rate, &noise).is_empty());
}

#[test]
fn short_click_does_not_start_speech_but_longer_burst_does() {
    let rate = 16000;
    let burst = |ms: u32| {
        let n = (rate / 1000 * ms) as usize;
        [silence(rate, 0.5), vec![0.5; n], silence(rate, 1.0)].concat()
    };
    assert!(run(VadConfig::default(), rate, &burst(20)).is_empty());
    assert_eq!(run(VadConfig::default(), rate, &burst(30)).len(), 2);
}

#[test]
fn threshold_changes_behaviour() {
    let rate = 16000;
    let quiet = [
        silence(rate, 0.5),
        voiced(rate, 1.0, -30.0),
        silence(rate, 1.0),
    ]
    .concat();
    let with = |threshold| VadConfig {
        threshold,
        ..VadConfig::default()
    };
    assert_eq!(run(with(0.5), rate, &quiet).len(), 2);
    assert!(run(with(0.9), rate, &quiet).is_empty());
    let faint = [
        silence(rate, 0.5),
        voiced(rate, 1.0, -45.0),
        silence(rate, 1.0),
    ]
    .concat();
    assert!(run(with(0.5), rate, &faint).is_empty());
    assert_eq!(run(with(0.3), rate, &faint).len(), 2);
    assert_eq!(
        run(with(f32::NAN), rate, &faint),
        run(with(0.5), rate, &faint)
    );
}

#[test]
fn padding_and_silence_duration_are_honoured() {
    let rate = 16000;
    let config = VadConfig {
        threshold: 0.5,
        prefix_padding_ms: 100,
        silence_duration_ms: 200,
    };
    let events = run(config, rate, &utterance(rate, 0.5));
    assert_eq!(
        events,
        vec![
            SpeechStarted {
                at_sample: 8000 - 1600
            },
            SpeechStopped {
                at_sample: 24000 + 3200
            }
        ]
    );
    // Padding longer than the lead-in clamps at the start of the stream.
    assert_eq!(
        run(VadConfig::default(), rate, &utterance(rate, 0.1))[0],
        SpeechStarted { at_sample: 0 }
    );
}

#[test]
fn a_new_utterance_never_starts_before_the_previous_stop() {
    let rate = 16000;
    let signal = [
        silence(rate, 0.5),
        voiced(rate, 0.5, -20.0),
        silence(rate, 0.6),
        voiced(rate, 0.5, -20.0),
        silence(rate, 1.0),
    ]
    .concat();
    let events = run(VadConfig::default(), rate, &signal);
    assert_eq!(events.len(), 4, "{events:?}");
    // Stop at 1.0 s + 0.5 s; second voice at 1.6 s, padded back to 1.3 s -> floored.
    assert_eq!(events[1], SpeechStopped { at_sample: 24000 });
    assert_eq!(events[2], SpeechStarted { at_sample: 24000 });
}

#[test]
fn chunking_does_not_change_events() {
    let rate = 16000;
    let signal = [
        utterance(rate, 0.3),
        voiced(rate, 0.2, -25.0),
        utterance(rate, 0.7),
    ]
    .concat();
    let reference = run(VadConfig::default(), rate, &signal);
    assert_eq!(reference.len(), 6);
    let mut rng = Rng(0xDEAD_BEEF);
    for _ in 0..20 {
        let mut vad = Vad::new(VadConfig::default(), rate);
        let (mut events, mut pos) = (Vec::new(), 0);
        while pos < signal.len() {
            let n = rng.below(700).min(signal.len() - pos);
            vad.push(&signal[pos..pos + n], &mut events);
            pos += n;
        }
        assert_eq!(events, reference);
    }
}

#[test]
fn reset_forgets_speech_but_keeps_the_clock() {
    let rate = 16000;
    let mut vad = Vad::new(VadConfig::default(), rate);
    let mut events = Vec::new();
    vad.push(&silence(rate, 0.5), &mut events);
    vad.push(&voiced(rate, 0.5, -20.0), &mut events);
    assert!(vad.in_speech());
    vad.push(&[0.3; 55], &mut events); // a partial window
    vad.reset();
    assert!(!vad.in_speech());
    assert_eq!(vad.position(), 16055);
    vad.push(&voiced(rate, 0.5, -20.0), &mut events);
    vad.push(&silence(rate, 1.0), &mut events);
    assert_eq!(
        events,
        vec![
            SpeechStarted { at_sample: 3200 },
            SpeechStarted { at_sample: 16055 },
            SpeechStopped {
                at_sample: 16055 + 8000 + 8000
            },
        ]
    );
}

#[test]
fn set_config_applies_mid_stream() {
    let rate = 16000;
    let mut vad = Vad::new(VadConfig::default(), rate);
    let mut events = Vec::new();
    vad.push(
        &[silence(rate, 0.5), voiced(rate, 0.5, -20.0)].concat(),
        &mut events,
    );
    let short = VadConfig {
        silence_duration_ms: 100,
        ..VadConfig::default()
    };
    vad.set_config(short);
    assert_eq!(vad.config(), short);
    vad.push(&silence(rate, 0.5), &mut events);
    assert_eq!(
        events[1],
        SpeechStopped {
            at_sample: 16000 + 1600
        }
    );
}

#[test]
fn scored_windows_start_at_once_and_stop_with_hysteresis() {
    let cfg = VadConfig {
        threshold: 0.5,
        prefix_padding_ms: 0,
        silence_duration_ms: 64,
    };
    let mut vad = Vad::scored(cfg, 16_000, 0.15);
    let mut ev = Vec::new();
    vad.push_scored(0, 512, 0.1, &mut ev);
    assert!(ev.is_empty());
    vad.push_scored(512, 512, 0.9, &mut ev);
    assert_eq!(ev, vec![VadEvent::SpeechStarted { at_sample: 512 }]);
    ev.clear();
    // 0.4 is under the threshold but above threshold - release: still speech.
    for k in 2..6 {
        vad.push_scored(k * 512, 512, 0.4, &mut ev);
    }
    assert!(ev.is_empty() && vad.in_speech());
    vad.push_scored(6 * 512, 512, 0.2, &mut ev);
    vad.push_scored(7 * 512, 512, 0.2, &mut ev);
    assert_eq!(ev, vec![VadEvent::SpeechStopped { at_sample: 8 * 512 }]);
}

#[test]
fn the_meter_reports_the_peak_of_each_stretch() {
    let mut vad = Vad::scored(VadConfig::default(), 16_000, 0.15);
    let mut ev = Vec::new();
    vad.push_scored(0, 512, 0.2, &mut ev);
    assert_eq!(vad.take_meter(1024), None);
    vad.push_scored(512, 512, 0.7, &mut ev);
    let m = vad.take_meter(1024).expect("a stretch of 1024");
    assert_eq!((m.start, m.end, m.probability), (0, 1024, 0.7));
    assert_eq!(vad.take_meter(1), None);
    // The energy detector meters its windows the same way.
    let mut energy = Vad::new(VadConfig::default(), 16_000);
    energy.push(&vec![0.0; 1600], &mut ev);
    let m = energy.take_meter(1600).expect("100 ms of windows");
    assert_eq!((m.start, m.end, m.probability), (0, 1600, 0.0));
}

#[test]
fn a_minimum_speech_duration_ignores_a_single_loud_window() {
    let cfg = VadConfig {
        threshold: 0.5,
        prefix_padding_ms: 0,
        silence_duration_ms: 64,
    };
    // 100 ms at 16 kHz with 32 ms windows: three voiced windows in a row (96 ms).
    let mut vad = Vad::scored(cfg, 16_000, 0.15).with_min_speech_ms(100);
    let mut ev = Vec::new();
    // A noise onset: one window at the threshold, then low scores.
    vad.push_scored(0, 512, 0.5, &mut ev);
    for k in 1..10 {
        vad.push_scored(k * 512, 512, 0.2, &mut ev);
    }
    // Two loud windows are still too short.
    vad.push_scored(10 * 512, 512, 0.9, &mut ev);
    vad.push_scored(11 * 512, 512, 0.9, &mut ev);
    vad.push_scored(12 * 512, 512, 0.1, &mut ev);
    assert!(ev.is_empty(), "{ev:?}");
    // Speech: three voiced windows start it, dated from the first of them.
    for k in 13..16 {
        vad.push_scored(k * 512, 512, 0.9, &mut ev);
    }
    assert_eq!(
        ev,
        vec![VadEvent::SpeechStarted {
            at_sample: 13 * 512
        }]
    );
    assert!(vad.in_speech());
}

#[test]
fn without_a_minimum_one_scored_window_starts_speech() {
    let mut vad = Vad::scored(VadConfig::default(), 16_000, 0.15).with_min_speech_ms(0);
    let mut ev = Vec::new();
    vad.push_scored(0, 512, 0.5, &mut ev);
    assert_eq!(ev.len(), 1);
}

#[test]
fn a_judge_ends_the_utterance_inside_its_silence() {
    let cfg = VadConfig {
        threshold: 0.5,
        prefix_padding_ms: 0,
        silence_duration_ms: 2000,
    };
    let mut vad = Vad::scored(cfg, 16_000, 0.15);
    let mut ev = Vec::new();
    assert_eq!(vad.end_speech_after(0), None, "no utterance yet");
    vad.push_scored(0, 512, 0.9, &mut ev);
    for k in 1..11 {
        vad.push_scored(k * 512, 512, 0.1, &mut ev);
    }
    assert_eq!(ev, vec![SpeechStarted { at_sample: 0 }]);
    assert_eq!(vad.trailing_silence(), 10 * 512);
    // Ended 1000 samples into the 5120 of silence heard so far.
    assert_eq!(
        vad.end_speech_after(1000),
        Some(SpeechStopped {
            at_sample: 512 + 1000
        })
    );
    assert!(!vad.in_speech());
    assert_eq!(vad.silence_began(), 512);
    // Asked for more silence than was heard: it ends where the audio ends.
    ev.clear();
    vad.push_scored(11 * 512, 512, 0.9, &mut ev);
    vad.push_scored(12 * 512, 512, 0.1, &mut ev);
    assert_eq!(
        ev,
        vec![SpeechStarted {
            at_sample: 11 * 512
        }]
    );
    assert_eq!(
        vad.end_speech_after(u64::MAX),
        Some(SpeechStopped {
            at_sample: 13 * 512
        })
    );
    // The next utterance starts after the audio already judged.
    ev.clear();
    vad.push_scored(13 * 512, 512, 0.9, &mut ev);
    assert_eq!(
        ev,
        vec![SpeechStarted {
            at_sample: 13 * 512
        }]
    );
}
