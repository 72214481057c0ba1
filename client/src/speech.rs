//! A speaking caller for tests and benchmarks: sentences synthesised by `espeak-ng` (the
//! Debian package; no neural weights), noise and tones to surround them, the model files
//! `scripts/install-models` made, and the word error rate of what came back.

use std::path::{Path, PathBuf};
use std::process::Command;

use duet_media::pcm::{rms_dbfs, SILENCE_DBFS};

/// Rate of the audio returned here: the session rate.
pub const RATE: u32 = 24_000;

/// Plain sentences espeak-ng's default voice says clearly enough for Whisper tiny.en (some
/// it does not: "The weather is nice today" comes back as "But whether is ice today").
pub const SENTENCES: [&str; 5] = [
    "Please open the door for me.",
    "We are going to the park this afternoon.",
    "Thank you very much for your help.",
    "I need to buy some bread and milk.",
    "Turn off the lights when you leave the room.",
];

/// Sentences in French, Spanish and German, three each: (ISO-639-1 code, Whisper's name of
/// the language, the sentence); what espeak-ng's voice of that language says for the
/// multilingual tests and `whisper_bench --model whisper-base`.
pub const MULTILINGUAL_SENTENCES: [(&str, &str, &str); 9] = [
    (
        "fr",
        "french",
        "Le chat dort sur le canapé depuis ce matin.",
    ),
    (
        "fr",
        "french",
        "Bonjour, je voudrais réserver une table pour deux personnes ce soir.",
    ),
    ("fr", "french", "Il fait très beau aujourd'hui à Paris."),
    ("es", "spanish", "Mañana vamos a la playa con mis amigos."),
    (
        "es",
        "spanish",
        "Buenos días, quiero reservar una mesa para dos personas.",
    ),
    ("es", "spanish", "El tren sale de la estación a las ocho."),
    ("de", "german", "Ich trinke jeden Morgen eine Tasse Kaffee."),
    (
        "de",
        "german",
        "Guten Morgen, ich möchte bitte einen Tisch für zwei Personen reservieren.",
    ),
    ("de", "german", "Das Wetter ist heute sehr schön in Berlin."),
];

/// The directory `scripts/install-models DIR` wrote (`$DUET_TEST_MODELS`, which
/// `scripts/test` sets); fails with the command to run when it is missing or incomplete.
pub fn models_dir() -> PathBuf {
    let hint =
        "run `scripts/install-models DIR` and set DUET_TEST_MODELS=DIR (./scripts/test does both)";
    let dir = std::env::var_os("DUET_TEST_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("DUET_TEST_MODELS is not set: {hint}"));
    for file in [
        "silero-vad/silero_vad_16k.safetensors",
        "whisper-tiny.en/model.safetensors",
        "whisper-tiny.en/tokenizer.json",
        "whisper-tiny.en/config.json",
    ] {
        assert!(
            dir.join(file).is_file(),
            "{} has no {file}: {hint}",
            dir.display()
        );
    }
    dir
}

/// `duet serve` flags for the real speech models in [`models_dir`].
pub fn serve_args(dir: &Path) -> Vec<String> {
    vec![
        "--vad-model-dir".into(),
        dir.join("silero-vad").display().to_string(),
        "--transcription-model-dir".into(),
        dir.join("whisper-tiny.en").display().to_string(),
    ]
}

/// `text` spoken by espeak-ng (its default English voice and speed), mono at [`RATE`].
pub fn espeak(text: &str) -> Vec<f32> {
    espeak_with(&[], text)
}

/// `text` spoken by espeak-ng's `voice` (a language: `fr`, `es`, `de`, …), mono at [`RATE`].
pub fn espeak_voice(voice: &str, text: &str) -> Vec<f32> {
    espeak_with(&["-v", voice], text)
}

/// `text` spoken by espeak-ng's `voice` at `wpm` words a minute, mono at [`RATE`].
pub fn espeak_as(voice: &str, wpm: u32, text: &str) -> Vec<f32> {
    espeak_with(&["-v", voice, "-s", &wpm.to_string()], text)
}

/// `ssml` (espeak-ng's SSML subset: `<speak>…<prosody rate="x-slow">word</prosody></speak>`)
/// spoken by `voice` at `wpm` words a minute, mono at [`RATE`].
pub fn espeak_ssml(voice: &str, wpm: u32, ssml: &str) -> Vec<f32> {
    espeak_with(&["-m", "-v", voice, "-s", &wpm.to_string()], ssml)
}

fn espeak_with(args: &[&str], text: &str) -> Vec<f32> {
    // Unique per call: tests in one process may say the same text at once.
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!(
        "duet-espeak-{}-{n}-{:x}.wav",
        std::process::id(),
        fnv(text)
    ));
    let status = Command::new("espeak-ng")
        .args(args)
        .arg("-w")
        .arg(&path)
        .arg(text)
        .status()
        .unwrap_or_else(|e| {
            panic!("espeak-ng did not run ({e}): install the Debian package espeak-ng")
        });
    assert!(status.success(), "espeak-ng failed: {status}");
    let bytes = std::fs::read(&path).expect("espeak-ng wrote its WAV");
    let _ = std::fs::remove_file(&path);
    let (rate, pcm) = parse_wav(&bytes).expect("a mono 16-bit WAV from espeak-ng");
    resample_linear(&pcm, rate, RATE)
}

/// espeak-ng's IPA for `input` (`-q --ipa -v VOICE`, the clauses on standard input): the
/// phonemes a test's Piper voice speaks (the server runs its own, `duet::espeak`).
pub fn espeak_ipa(voice: &str, input: &str) -> Result<String, String> {
    use std::io::Write;
    let mut child = Command::new("espeak-ng")
        .args(["-q", "--ipa", "-v", voice])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(|e| e.to_string())?;
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(out.status.to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// A mono 16-bit PCM WAV: its rate and samples.
pub fn parse_wav(bytes: &[u8]) -> Option<(u32, Vec<f32>)> {
    if bytes.len() < 12 || &bytes[..4] != b"RIFF" || &bytes[8..12] != b"WAVE" {
        return None;
    }
    let (mut at, mut rate, mut bits, mut channels) = (12, 0u32, 0u16, 0u16);
    while at + 8 <= bytes.len() {
        let id = &bytes[at..at + 4];
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().ok()?) as usize;
        let body = at + 8;
        // espeak-ng streams to a file: its data chunk may say 0 or too much.
        let end = body.saturating_add(len).min(bytes.len());
        if id == b"fmt " && len >= 16 {
            channels = u16::from_le_bytes([bytes[body + 2], bytes[body + 3]]);
            rate = u32::from_le_bytes(bytes[body + 4..body + 8].try_into().ok()?);
            bits = u16::from_le_bytes([bytes[body + 14], bytes[body + 15]]);
        } else if id == b"data" {
            if channels != 1 || bits != 16 || rate == 0 {
                return None;
            }
            let end = if len == 0 { bytes.len() } else { end };
            let pcm = bytes[body..end]
                .chunks_exact(2)
                .map(|c| f32::from(i16::from_le_bytes([c[0], c[1]])) / 32768.0)
                .collect();
            return Some((rate, pcm));
        }
        at = body + len + (len & 1);
    }
    None
}

/// A mono 16-bit PCM WAV file of `pcm` at `rate` (a fake microphone's input).
pub fn wav(pcm: &[f32], rate: u32) -> Vec<u8> {
    let data = (pcm.len() * 2) as u32;
    let mut out = Vec::with_capacity(44 + pcm.len() * 2);
    out.extend(b"RIFF");
    out.extend((36 + data).to_le_bytes());
    out.extend(b"WAVEfmt ");
    out.extend(16u32.to_le_bytes());
    out.extend(1u16.to_le_bytes()); // PCM
    out.extend(1u16.to_le_bytes()); // mono
    out.extend(rate.to_le_bytes());
    out.extend((rate * 2).to_le_bytes());
    out.extend(2u16.to_le_bytes());
    out.extend(16u16.to_le_bytes());
    out.extend(b"data");
    out.extend(data.to_le_bytes());
    for s in pcm {
        out.extend(((s.clamp(-1.0, 1.0) * 32767.0).round() as i16).to_le_bytes());
    }
    out
}

/// Linear-interpolation resampling (enough for test speech).
pub fn resample_linear(pcm: &[f32], from: u32, to: u32) -> Vec<f32> {
    if from == to || pcm.is_empty() {
        return pcm.to_vec();
    }
    let n = (pcm.len() as u64 * u64::from(to) / u64::from(from)) as usize;
    let step = f64::from(from) / f64::from(to);
    (0..n)
        .map(|i| {
            let x = i as f64 * step;
            let k = x as usize;
            let frac = (x - k as f64) as f32;
            let a = pcm[k.min(pcm.len() - 1)];
            let b = pcm[(k + 1).min(pcm.len() - 1)];
            a + (b - a) * frac
        })
        .collect()
}

/// `secs` of silence at [`RATE`].
pub fn silence(secs: f32) -> Vec<f32> {
    vec![0.0; (secs * RATE as f32) as usize]
}

/// xorshift64 noise, uniform in [-1, 1); `seed | 1` so that no seed gives the stuck state 0.
struct Xorshift(u64);

impl Xorshift {
    /// A generator per seed: odd seeds start from themselves (as they always have, so the
    /// tests' signals stay what they were measured on), even ones from an odd mix of
    /// themselves, so that `2k` and `2k + 1` are not the same noise.
    fn new(seed: u64) -> Self {
        if seed & 1 == 1 {
            Xorshift(seed)
        } else {
            Xorshift((seed ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9) | 1)
        }
    }

    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
    }
}

/// `secs` of white noise at `dbfs` RMS (seeded, so the same every run).
pub fn noise(secs: f32, dbfs: f32, seed: u64) -> Vec<f32> {
    let mut rng = Xorshift::new(seed);
    let amp = 10f32.powf(dbfs / 20.0) * 3f32.sqrt();
    (0..(secs * RATE as f32) as usize)
        .map(|_| rng.next() * amp)
        .collect()
}

/// `secs` of pink (1/f) noise at `dbfs` RMS, seeded: white noise through Paul Kellet's
/// filter, then scaled with [`scale_to_dbfs`].
pub fn pink_noise(secs: f32, dbfs: f32, seed: u64) -> Vec<f32> {
    let mut rng = Xorshift::new(seed);
    let mut b = [0.0f32; 7];
    let mut pcm: Vec<f32> = (0..(secs * RATE as f32) as usize)
        .map(|_| {
            let w = rng.next();
            b[0] = 0.99886 * b[0] + w * 0.0555179;
            b[1] = 0.99332 * b[1] + w * 0.0750759;
            b[2] = 0.96900 * b[2] + w * 0.153852;
            b[3] = 0.86650 * b[3] + w * 0.3104856;
            b[4] = 0.55000 * b[4] + w * 0.5329522;
            b[5] = -0.7616 * b[5] - w * 0.0168980;
            let y = b.iter().sum::<f32>() + w * 0.5362;
            b[6] = w * 0.115926;
            y
        })
        .collect();
    scale_to_dbfs(&mut pcm, dbfs);
    pcm
}

/// Scales `pcm` in place so that its RMS level is `dbfs` (digital silence stays silent).
pub fn scale_to_dbfs(pcm: &mut [f32], dbfs: f32) {
    let level = rms_dbfs(pcm);
    if level <= SILENCE_DBFS {
        return;
    }
    let gain = 10f32.powf((dbfs - level) / 20.0);
    pcm.iter_mut().for_each(|v| *v *= gain);
}

/// `secs` of a music-like chord (three sines with a slow tremolo) at `dbfs` RMS.
pub fn chord(secs: f32, dbfs: f32) -> Vec<f32> {
    let amp = 10f32.powf(dbfs / 20.0) * 2f32.sqrt() / 3f32.sqrt();
    (0..(secs * RATE as f32) as usize)
        .map(|i| {
            let t = i as f32 / RATE as f32;
            let tremolo = 0.8 + 0.2 * (2.0 * std::f32::consts::PI * 4.0 * t).sin();
            let tone = [261.6f32, 329.6, 392.0]
                .iter()
                .map(|f| (2.0 * std::f32::consts::PI * f * t).sin())
                .sum::<f32>();
            amp * tremolo * tone / 3f32.sqrt()
        })
        .collect()
}

/// Words of `text`, lowercased, punctuation dropped.
pub fn words(text: &str) -> Vec<String> {
    text.split_whitespace()
        .map(|w| {
            w.chars()
                .filter(|c| c.is_alphanumeric() || *c == '\'')
                .collect::<String>()
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Word-level edit distance between a reference and a hypothesis (substitutions, deletions,
/// insertions), and the reference's word count: WER = errors / words.
pub fn word_errors(reference: &str, hypothesis: &str) -> (usize, usize) {
    let (r, h) = (words(reference), words(hypothesis));
    let mut row: Vec<usize> = (0..=h.len()).collect();
    for (i, rw) in r.iter().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, hw) in h.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if rw == hw {
                prev
            } else {
                1 + prev.min(row[j]).min(cur)
            };
            prev = cur;
        }
    }
    (row[h.len()], r.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_errors_count_edits() {
        assert_eq!(word_errors("the cat sat", "the cat sat"), (0, 3));
        assert_eq!(word_errors("the cat sat", "The cat, sat."), (0, 3));
        assert_eq!(word_errors("the cat sat", "the bat sat down"), (2, 3));
        assert_eq!(word_errors("the cat sat", ""), (3, 3));
    }

    #[test]
    fn noise_has_its_level_and_seed() {
        let white = noise(1.0, -30.0, 7);
        assert_eq!(white.len(), RATE as usize);
        assert!(
            (rms_dbfs(&white) + 30.0).abs() < 0.2,
            "{}",
            rms_dbfs(&white)
        );
        assert_eq!(white, noise(1.0, -30.0, 7));
        assert_ne!(white, noise(1.0, -30.0, 9));
        // Neighbouring seeds are different noises (2 and 3 once were one).
        assert_ne!(noise(1.0, -30.0, 2), noise(1.0, -30.0, 3));
        assert_ne!(noise(1.0, -30.0, 0), noise(1.0, -30.0, 1));
        let pink = pink_noise(1.0, -35.0, 7);
        assert_eq!(pink.len(), RATE as usize);
        assert!((rms_dbfs(&pink) + 35.0).abs() < 0.01, "{}", rms_dbfs(&pink));
        assert_eq!(pink, pink_noise(1.0, -35.0, 7));
        // Pink: more energy in the low band than white noise of the same level has.
        let low = |x: &[f32]| {
            rms_dbfs(
                &x.chunks(24)
                    .map(|c| c.iter().sum::<f32>() / 24.0)
                    .collect::<Vec<_>>(),
            )
        };
        let white = noise(1.0, -35.0, 7);
        assert!(
            low(&pink) > low(&white) + 10.0,
            "{} vs {}",
            low(&pink),
            low(&white)
        );
    }

    #[test]
    fn silence_stays_silent_when_scaled() {
        let mut quiet = silence(0.1);
        scale_to_dbfs(&mut quiet, -20.0);
        assert!(quiet.iter().all(|&v| v == 0.0));
        let mut loud = chord(0.5, -10.0);
        scale_to_dbfs(&mut loud, -26.0);
        assert!((rms_dbfs(&loud) + 26.0).abs() < 0.01);
    }

    #[test]
    fn a_wav_parses_and_resamples() {
        let mut wav = b"RIFF\0\0\0\0WAVEfmt ".to_vec();
        wav.extend(16u32.to_le_bytes());
        wav.extend(1u16.to_le_bytes());
        wav.extend(1u16.to_le_bytes());
        wav.extend(22_050u32.to_le_bytes());
        wav.extend((22_050u32 * 2).to_le_bytes());
        wav.extend(2u16.to_le_bytes());
        wav.extend(16u16.to_le_bytes());
        wav.extend(b"data");
        wav.extend(0u32.to_le_bytes()); // streamed: unknown length
        wav.extend((0..2205).flat_map(|i| ((i % 100) as i16 * 100).to_le_bytes()));
        let (rate, pcm) = parse_wav(&wav).expect("parses");
        assert_eq!((rate, pcm.len()), (22_050, 2205));
        let again = parse_wav(&super::wav(&pcm, rate)).expect("our own WAV parses");
        assert_eq!(again, (rate, pcm.clone()));
        assert_eq!(resample_linear(&pcm, 22_050, 24_000).len(), 2400);
    }
}
