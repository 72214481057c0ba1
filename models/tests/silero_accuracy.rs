//! Silero VAD accuracy with the real weights on synthetic 24 kHz audio: espeak-ng speech
//! with gaps, among noise, music-like chords and a noise burst.
//!
//! Needs `DUET_TEST_MODELS=DIR`, a directory made by `scripts/install-models DIR` (the test
//! loads `DIR/silero-vad/`), and `espeak-ng` on the PATH (the Debian package `espeak-ng`,
//! which CI installs). Without either the test fails: it never passes silently.
//!
//! Each 20 ms frame is labelled from the clean speech track: speech when its level is above
//! -40 dBFS, non-speech when there is no speech at all within 100 ms, otherwise unlabelled.
//! Silero must detect at least 90 % of the speech frames (probability >= 0.5) and reject at
//! least 95 % of the non-speech frames. The energy VAD's figures on the same frames are
//! printed for comparison.

use std::f32::consts::PI;

use duet_client::speech::{espeak, models_dir, noise, pink_noise, scale_to_dbfs};
use duet_media::pcm::rms_dbfs;
use duet_media::vad::speech_probability;
use duet_models::silero::{SileroDetector, SileroVad, DETECTOR_CHUNK};

const RATE: usize = duet_client::speech::RATE as usize;
/// 20 ms at 24 kHz.
const FRAME: usize = 480;

/// Music-like audio: a sequence of chords (three notes with a few harmonics each), each with
/// an attack-decay envelope, plus a soft arpeggio.
fn chords(secs: f32, dbfs: f32) -> Vec<f32> {
    let n = (secs * RATE as f32) as usize;
    let progression: [[f32; 3]; 4] = [
        [261.63, 329.63, 392.00],
        [349.23, 440.00, 523.25],
        [392.00, 493.88, 587.33],
        [220.00, 261.63, 329.63],
    ];
    let chord_len = RATE * 3 / 4;
    let mut x: Vec<f32> = (0..n)
        .map(|i| {
            let t = i as f32 / RATE as f32;
            let chord = &progression[(i / chord_len) % progression.len()];
            let local = (i % chord_len) as f32 / RATE as f32;
            let env = (local / 0.02).min(1.0) * (-local * 2.5).exp();
            let mut v = 0.0;
            for &f in chord {
                for h in 1..=4 {
                    v += (2.0 * PI * f * h as f32 * t).sin() / (h * h) as f32;
                }
            }
            let note = chord[(i / (RATE / 8)) % 3] * 2.0;
            let arp_local = (i % (RATE / 8)) as f32 / RATE as f32;
            v += 0.5 * (2.0 * PI * note * t).sin() * (-arp_local * 12.0).exp();
            v * env
        })
        .collect();
    scale_to_dbfs(&mut x, dbfs);
    x
}

/// The clean speech track and the non-speech track, same length.
struct Scene {
    speech: Vec<f32>,
    other: Vec<f32>,
}

impl Scene {
    fn silence(&mut self, secs: f32) {
        let n = (secs * RATE as f32) as usize;
        self.speech.resize(self.speech.len() + n, 0.0);
        self.other.resize(self.other.len() + n, 0.0);
    }

    fn noise(&mut self, x: Vec<f32>) {
        self.speech.resize(self.speech.len() + x.len(), 0.0);
        self.other.extend(x);
    }

    fn say(&mut self, x: &[f32]) {
        self.speech.extend_from_slice(x);
        self.other.resize(self.other.len() + x.len(), 0.0);
    }

    /// Adds `x` to the non-speech track from `at` samples on.
    fn overlay(&mut self, at: usize, x: &[f32]) {
        for (d, &v) in self.other[at..].iter_mut().zip(x) {
            *d += v;
        }
    }
}

fn percent(hit: usize, of: usize) -> f64 {
    100.0 * hit as f64 / of.max(1) as f64
}

#[test]
fn silero_detects_speech_and_rejects_noise_and_music() {
    let dir = models_dir().join("silero-vad");
    let vad = SileroVad::load(&dir).unwrap_or_else(|e| panic!("{e}"));

    let sentences = [
        "The quick brown fox jumps over the lazy dog.",
        "Please call me back when you get this message, it is about the meeting tomorrow.",
        "I would like two tickets for the evening show, if there are any left.",
        "Turn left at the second traffic light and the station is on your right.",
    ];
    let speech: Vec<Vec<f32>> = sentences
        .iter()
        .map(|s| {
            let mut x = espeak(s);
            // Speech at about -20 dBFS RMS over its voiced part.
            let voiced: Vec<f32> = x.iter().copied().filter(|v| v.abs() > 1e-3).collect();
            let gain = 10f32.powf((-20.0 - rms_dbfs(&voiced)) / 20.0);
            x.iter_mut().for_each(|v| *v *= gain);
            x
        })
        .collect();

    let mut scene = Scene {
        speech: Vec::new(),
        other: Vec::new(),
    };
    scene.noise(pink_noise(2.0, -35.0, 1));
    scene.say(&speech[0]);
    scene.silence(1.5);
    scene.noise(chords(3.0, -20.0));
    scene.say(&speech[1]);
    scene.silence(1.0);
    scene.noise(noise(1.0, -20.0, 2));
    scene.silence(1.0);
    scene.say(&speech[2]);
    scene.silence(2.0);
    scene.noise(noise(2.0, -35.0, 9));
    // The last sentence over pink noise.
    let at = scene.other.len();
    scene.say(&speech[3]);
    let secs = speech[3].len() as f32 / RATE as f32;
    scene.overlay(at, &pink_noise(secs, -35.0, 7));
    scene.noise(pink_noise(1.0, -35.0, 5));
    scene.silence(1.0);
    // A faint background everywhere.
    let secs = scene.other.len() as f32 / RATE as f32;
    let background = noise(secs, -60.0, 11);
    scene.overlay(0, &background);
    let mix: Vec<f32> = scene
        .speech
        .iter()
        .zip(&scene.other)
        .map(|(a, b)| a + b)
        .collect();

    // Silero over 20 ms pushes.
    let mut det = SileroDetector::new(vad).expect("detector");
    let mut chunks = Vec::new();
    for frame in mix.chunks(FRAME) {
        det.push(frame, &mut chunks).expect("silero");
    }
    for (k, c) in chunks.iter().enumerate() {
        assert_eq!(c.start, k as u64 * DETECTOR_CHUNK);
    }

    // Labels from the clean speech track.
    let frames = mix.len() / FRAME;
    let level: Vec<f32> = (0..frames)
        .map(|f| rms_dbfs(&scene.speech[f * FRAME..(f + 1) * FRAME]))
        .collect();
    let margin = 5; // frames: 100 ms
    let mut stats = [[0usize; 2]; 4]; // [silero speech, silero non, energy speech, energy non] x [hit, total]
    for f in 0..frames {
        let is_speech = level[f] > -40.0;
        let lo = f.saturating_sub(margin);
        let hi = (f + margin + 1).min(frames);
        let is_non = level[lo..hi].iter().all(|&l| l < -70.0);
        if !is_speech && !is_non {
            continue;
        }
        let center = (f * FRAME + FRAME / 2) as u64;
        let Some(chunk) = chunks.get((center / DETECTOR_CHUNK) as usize) else {
            continue;
        };
        let silero = chunk.probability >= 0.5;
        let energy = speech_probability(rms_dbfs(&mix[f * FRAME..(f + 1) * FRAME])) >= 0.5;
        let row = if is_speech { 0 } else { 1 };
        let right = |detected: bool| usize::from(detected == is_speech);
        stats[row][0] += right(silero);
        stats[row][1] += 1;
        stats[row + 2][0] += right(energy);
        stats[row + 2][1] += 1;
    }
    let [s_sp, s_non, e_sp, e_non] = stats.map(|[hit, total]| percent(hit, total));
    println!(
        "silero: speech {s_sp:.1}% detected, non-speech {s_non:.1}% rejected; \
         energy: speech {e_sp:.1}% detected, non-speech {e_non:.1}% rejected \
         ({} speech, {} non-speech frames of 20 ms)",
        stats[0][1], stats[1][1]
    );
    assert!(stats[0][1] > 200 && stats[1][1] > 300, "{stats:?}");
    assert!(
        s_sp >= 90.0,
        "silero detected only {s_sp:.1}% of speech frames"
    );
    assert!(
        s_non >= 95.0,
        "silero rejected only {s_non:.1}% of non-speech frames"
    );
}
