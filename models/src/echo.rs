//! The embedded default model, `echo`: no weights, CPU, deterministic.
//!
//! It listens all the time and, when asked to answer, speaks the user's last utterance back
//! pitch-shifted up by a major third (silence trimmed), with the transcript
//! `"echo of 1.4 s"`. Text turns get a text answer (`"You said: …"`), or in audio mode a
//! burst of tones per word with that transcript. A cancel stops it mid-answer.

use duet_media::pcm::rms_dbfs;
use duet_media::pitch::pitch_shift;

use crate::model::*;

/// Pitch factor of the echo (a major third up).
const PITCH_FACTOR: f32 = 1.25;
/// Longest answer the echo produces, in seconds.
const MAX_ANSWER_S: usize = 30;
/// Analysis window for silence trimming: 10 ms.
const TRIM_WINDOW: usize = MODEL_SAMPLE_RATE as usize / 100;
/// Windows quieter than this are trimmed from both ends.
const TRIM_DBFS: f32 = -45.0;
/// 20 ms frames.
const FRAME: usize = 480;
/// Less voiced audio than this (50 ms) counts as hearing nothing.
const MIN_VOICED: usize = 1200;
/// Slots per process.
const MAX_SLOTS: usize = 1024;

/// An answer being played out.
#[derive(Debug)]
struct Answer {
    audio: Vec<f32>,
    pos: usize,
    /// (sample offset, text) in offset order; for text answers offsets count steps.
    words: Vec<(usize, String)>,
    next_word: usize,
    modality: OutputModality,
}

/// The echo model.
#[derive(Debug)]
pub struct EchoModel {
    info: ModelInfo,
    slots: Vec<Option<Option<Answer>>>,
}

impl Default for EchoModel {
    fn default() -> Self {
        Self::new()
    }
}

impl EchoModel {
    /// A new echo model with 20 ms frames.
    pub fn new() -> Self {
        Self::with_slots(MAX_SLOTS)
    }

    /// An echo model that serves at most `slots` sessions at once (at least 1).
    pub fn with_slots(slots: usize) -> Self {
        Self {
            info: ModelInfo {
                name: "echo".into(),
                frame_samples: FRAME,
                max_slots: slots.max(1),
                autonomous: false,
                tools: false,
                reads_text: false,
            },
            slots: Vec::new(),
        }
    }

    fn slot_mut(&mut self, slot: SlotId) -> Result<&mut Option<Answer>, ModelError> {
        match self.slots.get_mut(slot) {
            Some(Some(state)) => Ok(state),
            _ => Err(ModelError::UnknownSlot(slot)),
        }
    }

    fn step_one(&mut self, input: &StepInput<'_>) -> Result<StepOutput, ModelError> {
        if input.pcm.len() != FRAME {
            return Err(ModelError::BadFrame {
                got: input.pcm.len(),
                expected: FRAME,
            });
        }
        let state = self.slot_mut(input.slot)?;
        let Some(answer) = state.as_mut() else {
            return Ok(StepOutput::default());
        };
        let out = answer.advance();
        if out.end_of_turn {
            *state = None;
        }
        Ok(out)
    }
}

impl Answer {
    fn advance(&mut self) -> StepOutput {
        let mut out = StepOutput::default();
        let total = match self.modality {
            OutputModality::Audio => self.audio.len(),
            OutputModality::Text => self.words.len(),
        };
        let until = match self.modality {
            OutputModality::Audio => {
                let end = (self.pos + FRAME).min(self.audio.len());
                out.audio.extend_from_slice(&self.audio[self.pos..end]);
                self.pos = end;
                end
            }
            OutputModality::Text => {
                self.pos += 1;
                self.pos
            }
        };
        // Words are due when their audio starts; at the end everything left is due.
        while let Some((at, word)) = self.words.get(self.next_word) {
            if *at >= until && self.pos < total {
                break;
            }
            out.text.push_str(word);
            self.next_word += 1;
        }
        out.end_of_turn = self.pos >= total && self.next_word >= self.words.len();
        out
    }
}

/// Splits `text` into words that keep their leading space, so their concatenation is `text`.
fn words_of(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for (i, w) in text.split(' ').enumerate() {
        words.push(if i == 0 {
            w.to_string()
        } else {
            format!(" {w}")
        });
    }
    words
}

/// Spreads words evenly over `len` samples.
fn schedule(words: Vec<String>, len: usize) -> Vec<(usize, String)> {
    let n = words.len().max(1);
    words
        .into_iter()
        .enumerate()
        .map(|(i, w)| (i * len / n, w))
        .collect()
}

/// The voiced part of `pcm`: trims quiet 10 ms windows from both ends.
fn trim_silence(pcm: &[f32]) -> &[f32] {
    let loud = |w: &[f32]| rms_dbfs(w) > TRIM_DBFS;
    let windows: Vec<&[f32]> = pcm.chunks(TRIM_WINDOW).collect();
    let first = windows.iter().position(|w| loud(w));
    let last = windows.iter().rposition(|w| loud(w));
    match (first, last) {
        (Some(f), Some(l)) => &pcm[f * TRIM_WINDOW..((l + 1) * TRIM_WINDOW).min(pcm.len())],
        _ => &[],
    }
}

/// A vowel-like tone burst per word: 160 ms of harmonics at a word-dependent pitch, 60 ms gap.
fn speak_words(words: &[String]) -> (Vec<f32>, Vec<(usize, String)>) {
    let rate = MODEL_SAMPLE_RATE as f32;
    let (burst, gap) = (3840usize, 1440usize);
    let mut audio = Vec::with_capacity(words.len() * (burst + gap));
    let mut timed = Vec::with_capacity(words.len());
    for word in words {
        timed.push((audio.len(), word.clone()));
        let f0 = 110.0 + (word.len() % 7) as f32 * 15.0;
        for n in 0..burst {
            let t = n as f32 / rate;
            let env = (std::f32::consts::PI * n as f32 / burst as f32).sin();
            let s: f32 = (1..=4)
                .map(|h| (2.0 * std::f32::consts::PI * f0 * h as f32 * t).sin() / h as f32)
                .sum();
            audio.push(0.15 * env * s);
        }
        audio.resize(audio.len() + gap, 0.0);
    }
    (audio, timed)
}

/// Builds the answer to a request.
fn answer(modality: OutputModality, input: &[ContextItem]) -> Answer {
    let last = input.iter().rev().find_map(ContextItem::user);
    let (audio, words) = match (modality, last) {
        (OutputModality::Audio, Some(TurnInput::Audio(pcm)))
            if trim_silence(pcm).len() >= MIN_VOICED =>
        {
            echo_audio(pcm, None)
        }
        (OutputModality::Audio, Some(TurnInput::Transcribed { audio, transcript }))
            if trim_silence(audio).len() >= MIN_VOICED =>
        {
            echo_audio(audio, Some(transcript))
        }
        (OutputModality::Audio, other) => speak_words(&words_of(&text_answer(other))),
        (OutputModality::Text, other) => {
            let words = words_of(&text_answer(other));
            (Vec::new(), words.into_iter().enumerate().collect())
        }
    };
    Answer {
        audio,
        pos: 0,
        words,
        next_word: 0,
        modality,
    }
}

/// The caller's voiced audio pitch-shifted, with the transcript "You said: …" when a
/// transcriber heard words in it, else "echo of N s".
fn echo_audio(pcm: &[f32], transcript: Option<&str>) -> (Vec<f32>, Vec<(usize, String)>) {
    let voiced = trim_silence(pcm);
    let voiced = &voiced[..voiced.len().min(MAX_ANSWER_S * MODEL_SAMPLE_RATE as usize)];
    let secs = voiced.len() as f32 / MODEL_SAMPLE_RATE as f32;
    let audio = pitch_shift(voiced, MODEL_SAMPLE_RATE, PITCH_FACTOR);
    let text = match transcript.map(str::trim) {
        Some(t) if !t.is_empty() => format!("You said: {t}"),
        _ => format!("echo of {secs:.1} s"),
    };
    let words = schedule(words_of(&text), audio.len());
    (audio, words)
}

/// The text answer to the last turn.
fn text_answer(last: Option<&TurnInput>) -> String {
    match last {
        Some(TurnInput::Text(t)) if !t.trim().is_empty() => format!("You said: {}", t.trim()),
        Some(TurnInput::Transcribed { transcript, .. }) if !transcript.trim().is_empty() => {
            format!("You said: {}", transcript.trim())
        }
        Some(TurnInput::Transcribed { audio, .. }) => {
            text_answer(Some(&TurnInput::Audio(audio.clone())))
        }
        Some(TurnInput::Audio(pcm)) if trim_silence(pcm).len() >= MIN_VOICED => {
            let secs = trim_silence(pcm).len() as f32 / MODEL_SAMPLE_RATE as f32;
            format!("I heard {secs:.1} s of audio.")
        }
        _ => "I did not hear anything.".into(),
    }
}

impl DuplexModel for EchoModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn warmup(&mut self) -> Result<(), ModelError> {
        let slot = self.open_slot()?;
        let pcm = vec![0.0; FRAME];
        let mut out = Vec::new();
        self.step(&[StepInput { slot, pcm: &pcm }], &mut out);
        self.close_slot(slot);
        out.pop()
            .unwrap_or(Err(ModelError::Failed("warmup produced nothing".into())))
            .map(|_| ())
    }

    fn open_slot(&mut self) -> Result<SlotId, ModelError> {
        crate::transcribe::take_slot(&mut self.slots, self.info.max_slots, None)
    }

    fn close_slot(&mut self, slot: SlotId) {
        if let Some(s) = self.slots.get_mut(slot) {
            *s = None;
        }
    }

    fn request(&mut self, slot: SlotId, request: Request) -> Result<(), ModelError> {
        let state = self.slot_mut(slot)?;
        *state = match request {
            Request::Respond {
                modality, input, ..
            } => Some(answer(modality, &input)),
            Request::Cancel => None,
        };
        Ok(())
    }

    fn step(&mut self, batch: &[StepInput<'_>], out: &mut Vec<Result<StepOutput, ModelError>>) {
        for input in batch {
            out.push(self.step_one(input));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn voiced(secs: f32) -> Vec<f32> {
        let n = (secs * MODEL_SAMPLE_RATE as f32) as usize;
        (0..n)
            .map(|i| 0.3 * (2.0 * std::f32::consts::PI * 150.0 * i as f32 / 24_000.0).sin())
            .collect()
    }

    fn run(model: &mut EchoModel, slot: SlotId, max_steps: usize) -> (Vec<f32>, String, usize) {
        let silence = vec![0.0; FRAME];
        let (mut audio, mut text) = (Vec::new(), String::new());
        for step in 0..max_steps {
            let mut out = Vec::new();
            model.step(
                &[StepInput {
                    slot,
                    pcm: &silence,
                }],
                &mut out,
            );
            let o = out.pop().expect("one output").expect("ok");
            audio.extend(o.audio);
            text.push_str(&o.text);
            if o.end_of_turn {
                return (audio, text, step + 1);
            }
        }
        panic!("no end of turn in {max_steps} steps");
    }

    #[test]
    fn echoes_trimmed_utterance_with_transcript() {
        let mut m = EchoModel::new();
        let slot = m.open_slot().unwrap();
        let mut pcm = vec![0.0; 12_000];
        pcm.extend(voiced(1.4));
        pcm.extend(vec![0.0; 12_000]);
        let req = Request::Respond {
            modality: OutputModality::Audio,
            instructions: String::new(),
            input: vec![ContextItem::User(TurnInput::Audio(Arc::from(pcm)))],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            voice: "alloy".into(),
            speed: 1.0,
        };
        m.request(slot, req).unwrap();
        let (audio, text, steps) = run(&mut m, slot, 200);
        assert_eq!(text, "echo of 1.4 s");
        assert_eq!(audio.len(), 33_600);
        assert_eq!(steps, 70);
        assert!(rms_dbfs(&audio) > -20.0);
    }

    #[test]
    fn cancel_stops_mid_answer() {
        let mut m = EchoModel::new();
        let slot = m.open_slot().unwrap();
        let req = Request::Respond {
            modality: OutputModality::Audio,
            instructions: String::new(),
            input: vec![ContextItem::User(TurnInput::Audio(Arc::from(voiced(1.0))))],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            voice: "alloy".into(),
            speed: 1.0,
        };
        m.request(slot, req).unwrap();
        let silence = vec![0.0; FRAME];
        let mut out = Vec::new();
        m.step(
            &[StepInput {
                slot,
                pcm: &silence,
            }],
            &mut out,
        );
        assert_eq!(out.pop().unwrap().unwrap().audio.len(), FRAME);
        m.request(slot, Request::Cancel).unwrap();
        m.step(
            &[StepInput {
                slot,
                pcm: &silence,
            }],
            &mut out,
        );
        assert_eq!(out.pop().unwrap().unwrap(), StepOutput::default());
    }

    #[test]
    fn text_turn_gets_text_answer() {
        let mut m = EchoModel::new();
        let slot = m.open_slot().unwrap();
        let req = Request::Respond {
            modality: OutputModality::Text,
            instructions: String::new(),
            input: vec![ContextItem::User(TurnInput::Text("hello there".into()))],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            voice: "alloy".into(),
            speed: 1.0,
        };
        m.request(slot, req).unwrap();
        let (audio, text, steps) = run(&mut m, slot, 50);
        assert!(audio.is_empty());
        assert_eq!(text, "You said: hello there");
        assert_eq!(steps, 4);
    }

    #[test]
    fn text_turn_in_audio_mode_speaks_words() {
        let mut m = EchoModel::new();
        let slot = m.open_slot().unwrap();
        let req = Request::Respond {
            modality: OutputModality::Audio,
            instructions: String::new(),
            input: vec![ContextItem::User(TurnInput::Text("hi".into()))],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            voice: "alloy".into(),
            speed: 1.0,
        };
        m.request(slot, req).unwrap();
        let (audio, text, _) = run(&mut m, slot, 200);
        assert_eq!(text, "You said: hi");
        assert_eq!(audio.len(), 3 * (3840 + 1440));
    }

    #[test]
    fn silence_gets_a_spoken_i_did_not_hear() {
        let mut m = EchoModel::new();
        let slot = m.open_slot().unwrap();
        let req = Request::Respond {
            modality: OutputModality::Audio,
            instructions: String::new(),
            input: vec![ContextItem::User(TurnInput::Audio(Arc::from(vec![
                0.0;
                4800
            ])))],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            voice: "alloy".into(),
            speed: 1.0,
        };
        m.request(slot, req).unwrap();
        let (audio, text, _) = run(&mut m, slot, 400);
        assert_eq!(text, "I did not hear anything.");
        assert_eq!(audio.len(), 5 * (3840 + 1440));
        let req = Request::Respond {
            modality: OutputModality::Audio,
            instructions: String::new(),
            input: vec![],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            voice: "alloy".into(),
            speed: 1.0,
        };
        m.request(slot, req).unwrap();
        assert_eq!(run(&mut m, slot, 400).1, "I did not hear anything.");
    }

    #[test]
    fn slots_are_isolated_and_reused() {
        let mut m = EchoModel::new();
        let a = m.open_slot().unwrap();
        let b = m.open_slot().unwrap();
        assert_ne!(a, b);
        let req = Request::Respond {
            modality: OutputModality::Text,
            instructions: String::new(),
            input: vec![ContextItem::User(TurnInput::Text("x".into()))],
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            voice: "alloy".into(),
            speed: 1.0,
        };
        m.request(a, req).unwrap();
        let silence = vec![0.0; FRAME];
        let mut out = Vec::new();
        m.step(
            &[
                StepInput {
                    slot: a,
                    pcm: &silence,
                },
                StepInput {
                    slot: b,
                    pcm: &silence,
                },
            ],
            &mut out,
        );
        assert!(!out[0].as_ref().unwrap().text.is_empty());
        assert_eq!(out[1].as_ref().unwrap(), &StepOutput::default());
        m.close_slot(a);
        assert_eq!(m.open_slot().unwrap(), a);
        assert!(matches!(
            m.request(99, Request::Cancel),
            Err(ModelError::UnknownSlot(99))
        ));
        m.step(
            &[StepInput {
                slot: b,
                pcm: &silence[..10],
            }],
            &mut out,
        );
        assert!(matches!(out.last(), Some(Err(ModelError::BadFrame { .. }))));
    }
}
