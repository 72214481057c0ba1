//! The turn-taking set that the repository generates with espeak-ng (several voices and
//! speeds): finished questions and statements, and unfinished sentences broken by a
//! hesitation pause where a person pauses mid-thought, bare, with the hesitation sounds
//! people make (", um,", ", uh,") or with the last word drawn out, then finished. `examples/turn_eval.rs` scores its renderings
//! offline; `examples/turn_end_bench.rs` and the WebRTC test speak them in real time.

use crate::speech::{espeak_as, espeak_ssml, silence, RATE};

/// Finished questions and statements.
pub const FINISHED: &[&str] = &[
    "Tell me a story.",
    "What time is it?",
    "Book a table for four people.",
    "Can you help me with my order?",
    "Thanks, that's all.",
    "Please call me back tomorrow morning.",
    "How is the weather in Paris?",
    "Set an alarm for seven.",
    "Where is the nearest station?",
    "I would like to book a table for four people tonight.",
];

/// Unfinished sentences, each with the words that finish it after the pause.
pub const BROKEN: &[(&str, &str)] = &[
    ("I would like to book a table for", "four people."),
    ("So the problem with my order is that", "it never arrived."),
    ("Could you please remind me to", "call my mother."),
    ("I need a room with", "a view of the sea."),
    ("My name is John and", "I live in Leeds."),
    ("The thing I wanted to ask about is the", "delivery date."),
];

/// espeak-ng voices and speeds (words a minute).
pub const VOICES: &[(&str, u32)] = &[
    ("en-us", 150),
    ("en-us", 175),
    ("en-gb", 150),
    ("en-gb", 175),
];

/// How a broken sentence hesitates before its pause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hesitation {
    /// The words stop ("… a table for").
    Bare,
    /// ", um," before the pause.
    Um,
    /// ", uh," before the pause.
    Uh,
    /// The last word drawn out (espeak-ng's slowest rate for it).
    Drawn,
}

impl Hesitation {
    /// Every kind, in table order.
    pub const ALL: [Hesitation; 4] = [Self::Bare, Self::Um, Self::Uh, Self::Drawn];

    /// Its name in tables.
    pub fn label(self) -> &'static str {
        match self {
            Self::Bare => "bare",
            Self::Um => "um",
            Self::Uh => "uh",
            Self::Drawn => "drawn-out",
        }
    }

    /// `head` spoken with this hesitation, and how it is written.
    fn speak(self, head: &str, voice: (&str, u32)) -> (Vec<f32>, String) {
        let said = match self {
            Self::Bare => head.to_string(),
            Self::Um => format!("{head}, um,"),
            Self::Uh => format!("{head}, uh,"),
            Self::Drawn => {
                let (first, last) = head.rsplit_once(' ').unwrap_or(("", head));
                let ssml =
                    format!("<speak>{first} <prosody rate=\"x-slow\">{last}</prosody></speak>");
                let mut pcm = espeak_ssml(voice.0, voice.1, &ssml);
                pcm.truncate(voice_end(&pcm));
                return (pcm, format!("{first} {last}~"));
            }
        };
        (render(&said, voice), said)
    }
}

/// Lead silence before every clip's voice.
const LEAD_S: f32 = 0.3;

/// `text` in `voice`, 24 kHz, without espeak-ng's trailing silence.
pub fn render(text: &str, (voice, wpm): (&str, u32)) -> Vec<f32> {
    let mut pcm = espeak_as(voice, wpm, text);
    pcm.truncate(voice_end(&pcm));
    pcm
}

/// The sample after the last one that is not near silence.
pub fn voice_end(pcm: &[f32]) -> usize {
    pcm.iter()
        .rposition(|s| s.abs() > 0.01)
        .map_or(0, |i| i + 1)
}

/// One utterance of the set, at [`RATE`], starting with 0.3 s of silence.
pub struct Clip {
    /// What is said (the pause written as `…`).
    pub text: String,
    /// The audio, up to the end of the voice (the caller adds the silence after it).
    pub audio: Vec<f32>,
    /// Where the sentence is resumed after its pause, in samples (`None`: finished).
    pub resumes_at: Option<usize>,
    /// The hesitation pause (0 for a finished sentence).
    pub pause_ms: u32,
    /// How it hesitates (`None`: finished).
    pub hesitation: Option<Hesitation>,
}

impl Clip {
    /// A finished sentence.
    pub fn finished(text: &str, voice: (&str, u32)) -> Self {
        let mut audio = silence(LEAD_S);
        audio.extend(render(text, voice));
        Self {
            text: text.to_string(),
            audio,
            resumes_at: None,
            pause_ms: 0,
            hesitation: None,
        }
    }

    /// `head` with `hesitation`, a pause of `pause_ms`, then `tail`.
    pub fn broken(
        head: &str,
        tail: &str,
        hesitation: Hesitation,
        pause_ms: u32,
        voice: (&str, u32),
    ) -> Self {
        let (spoken, said) = hesitation.speak(head, voice);
        let mut audio = silence(LEAD_S);
        audio.extend(spoken);
        audio.extend(silence(pause_ms as f32 / 1000.0));
        let resumes_at = audio.len();
        audio.extend(render(tail, voice));
        Self {
            text: format!("{said} … {tail}"),
            audio,
            resumes_at: Some(resumes_at),
            pause_ms,
            hesitation: Some(hesitation),
        }
    }

    /// Where the voice ends, in milliseconds of the clip.
    pub fn voice_end_ms(&self) -> u64 {
        self.audio.len() as u64 * 1000 / u64::from(RATE)
    }

    /// Where the sentence resumes, in milliseconds of the clip.
    pub fn resumes_at_ms(&self) -> Option<u64> {
        self.resumes_at.map(|n| n as u64 * 1000 / u64::from(RATE))
    }
}

/// Every finished sentence and every broken one (each of `hesitations`) with each pause of
/// `pauses_ms`, in each of `voices`.
pub fn clips(voices: &[(&str, u32)], pauses_ms: &[u32], hesitations: &[Hesitation]) -> Vec<Clip> {
    let mut out = Vec::new();
    for &voice in voices {
        out.extend(FINISHED.iter().map(|t| Clip::finished(t, voice)));
        for &(head, tail) in BROKEN {
            for &pause in pauses_ms {
                for &h in hesitations {
                    out.push(Clip::broken(head, tail, h, pause, voice));
                }
            }
        }
    }
    out
}
