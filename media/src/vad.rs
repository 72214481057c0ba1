//! Energy-based voice activity detection on the session's input clock.
//!
//! The detector looks at consecutive 10 ms windows, maps each window's RMS
//! level to a "speech probability" with [`speech_probability`], and runs a
//! small state machine: 3 voiced windows in a row start speech, and
//! `silence_duration_ms` of unvoiced windows stop it. It is deterministic
//! and independent of how the input is split into pushes.

use crate::frames::FrameAccumulator;
use crate::pcm::rms_dbfs;

/// Analysis window length in milliseconds.
pub const WINDOW_MS: u32 = 10;
/// Consecutive voiced windows needed to start speech.
pub const START_WINDOWS: u32 = 3;

/// Tuning of the detector (mirrors the Realtime API's `server_vad` fields).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VadConfig {
    /// Speech probability (0.0..=1.0) a window needs to count as voiced.
    pub threshold: f32,
    /// Audio kept before the first voiced window when speech starts.
    pub prefix_padding_ms: u32,
    /// Silence needed to end speech.
    pub silence_duration_ms: u32,
}

impl Default for VadConfig {
    fn default() -> Self {
        VadConfig {
            threshold: 0.5,
            prefix_padding_ms: 300,
            silence_duration_ms: 500,
        }
    }
}

/// A speech boundary, in samples of the input stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VadEvent {
    /// Speech began; `at_sample` includes the prefix padding.
    SpeechStarted {
        /// First sample of the utterance (padding included).
        at_sample: u64,
    },
    /// Speech ended; `at_sample` is where the silence became long enough.
    SpeechStopped {
        /// The detection point.
        at_sample: u64,
    },
}

/// Maps a window level to a speech probability:
/// `clamp((dbfs + 60) / 40, 0, 1)`, so a threshold of 0.5 is -40 dBFS.
pub fn speech_probability(dbfs: f32) -> f32 {
    ((dbfs + 60.0) / 40.0).clamp(0.0, 1.0)
}

/// A stretch of input and the highest speech probability in it (for a level meter).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ProbabilitySpan {
    /// First sample of the stretch.
    pub start: u64,
    /// One past its last sample.
    pub end: u64,
    /// Highest window probability in it.
    pub probability: f32,
}

/// The per-window state machine, separate from the framing buffer.
#[derive(Debug, Clone)]
struct Detector {
    config: VadConfig,
    /// Voiced windows in a row that start speech.
    onset_windows: u32,
    /// Voiced input in a row that starts speech, in samples (to the nearest window): a
    /// single loud window, such as the edge of a noise burst, starts nothing.
    min_speech: u64,
    /// Inside speech a window stays voiced down to `threshold - release` (hysteresis).
    release: f32,
    /// The meter: the stretch since the last [`Vad::take_meter`].
    meter: Option<ProbabilitySpan>,
    sample_rate: u32,
    in_speech: bool,
    voiced_run: u32,
    voiced_run_start: u64,
    silence_run: u64,
    /// No utterance may start before this sample (last stop or reset point).
    floor: u64,
    /// The first voiced window of the last utterance that started.
    voice_began: u64,
    /// Where the silence that ended the last utterance began.
    silence_began: u64,
}

impl Detector {
    fn ms_to_samples(&self, ms: u32) -> u64 {
        u64::from(ms) * u64::from(self.sample_rate) / 1000
    }

    fn threshold(&self) -> f32 {
        let t = self.config.threshold;
        if t.is_nan() {
            VadConfig::default().threshold
        } else {
            t.clamp(0.0, 1.0)
        }
    }

    fn on_window(&mut self, window: &[f32], start: u64, events: &mut Vec<VadEvent>) {
        let probability = speech_probability(rms_dbfs(window));
        self.on_probability(start, window.len() as u64, probability, events);
    }

    fn on_probability(&mut self, start: u64, len: u64, p: f32, events: &mut Vec<VadEvent>) {
        let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 1.0) };
        let end = start + len;
        self.meter = Some(match self.meter {
            Some(m) => ProbabilitySpan {
                start: m.start,
                end,
                probability: m.probability.max(p),
            },
            None => ProbabilitySpan {
                start,
                end,
                probability: p,
            },
        });
        if self.in_speech {
            let voiced = p >= self.threshold() - self.release;
            self.track_silence(voiced, len, end, events);
        } else {
            self.track_voice(p >= self.threshold(), start, len, events);
        }
    }

    fn track_voice(&mut self, voiced: bool, start: u64, len: u64, events: &mut Vec<VadEvent>) {
        if !voiced {
            self.voiced_run = 0;
            return;
        }
        if self.voiced_run == 0 {
            self.voiced_run_start = start;
        }
        self.voiced_run += 1;
        // The run so far, counted to the nearest window.
        let run = start + len - self.voiced_run_start;
        if self.voiced_run >= self.onset_windows && run + len / 2 >= self.min_speech {
            let padding = self.ms_to_samples(self.config.prefix_padding_ms);
            let at_sample = self
                .voiced_run_start
                .saturating_sub(padding)
                .max(self.floor);
            events.push(VadEvent::SpeechStarted { at_sample });
            self.voice_began = self.voiced_run_start;
            self.in_speech = true;
            self.voiced_run = 0;
            self.silence_run = 0;
        }
    }

    fn track_silence(&mut self, voiced: bool, len: u64, end: u64, events: &mut Vec<VadEvent>) {
        if voiced {
            self.silence_run = 0;
            return;
        }
        self.silence_run += len;
        if self.silence_run >= self.ms_to_samples(self.config.silence_duration_ms) {
            events.push(VadEvent::SpeechStopped { at_sample: end });
            self.silence_began = end - self.silence_run;
            self.in_speech = false;
            self.silence_run = 0;
            self.floor = end;
        }
    }

    /// Ends the utterance `silence` samples into its trailing silence (at most the
    /// silence so far), as if the silence window had been that long; `now` is the next
    /// window's position.
    fn end_after(&mut self, silence: u64, now: u64) -> Option<VadEvent> {
        if !self.in_speech {
            return None;
        }
        let began = now - self.silence_run;
        let at_sample = began + silence.min(self.silence_run);
        self.silence_began = began;
        self.in_speech = false;
        self.silence_run = 0;
        self.floor = now;
        Some(VadEvent::SpeechStopped { at_sample })
    }

    fn reset(&mut self, floor: u64) {
        self.meter = None;
        self.in_speech = false;
        self.voiced_run = 0;
        self.silence_run = 0;
        self.floor = floor;
    }
}

/// Streaming voice activity detector for one mono input stream.
#[derive(Debug, Clone)]
pub struct Vad {
    frames: FrameAccumulator,
    detector: Detector,
    /// Samples pushed so far.
    position: u64,
    /// Stream position of the first sample of the next window.
    next_window: u64,
}

impl Vad {
    /// Creates a detector for audio at `sample_rate` Hz.
    pub fn new(config: VadConfig, sample_rate: u32) -> Self {
        let window = (u64::from(sample_rate) * u64::from(WINDOW_MS) / 1000) as usize;
        Self::with_detector(config, sample_rate, window, START_WINDOWS, 0.0)
    }

    /// A detector driven by an outside speech model through [`Vad::push_scored`] (the
    /// energy windows are not used): one window at or above the threshold starts speech,
    /// and inside speech a window counts as voiced down to `threshold - release` (Silero's
    /// own rule uses 0.15).
    pub fn scored(config: VadConfig, sample_rate: u32, release: f32) -> Self {
        Self::with_detector(config, sample_rate, 1, 1, release.max(0.0))
    }

    /// Speech starts only after `ms` of voiced input in a row (to the nearest window;
    /// Silero's `min_speech_duration_ms`): what a single loud window (a noise onset, a
    /// click) scores starts nothing. Speech is then reported as starting where the run
    /// began, `ms` later than it would be without (the cost in barge-in latency).
    pub fn with_min_speech_ms(mut self, ms: u32) -> Self {
        self.detector.min_speech = self.detector.ms_to_samples(ms);
        self
    }

    fn with_detector(
        config: VadConfig,
        sample_rate: u32,
        window: usize,
        onset_windows: u32,
        release: f32,
    ) -> Self {
        Vad {
            frames: FrameAccumulator::new(window),
            detector: Detector {
                config,
                onset_windows,
                min_speech: 0,
                release,
                meter: None,
                sample_rate,
                in_speech: false,
                voiced_run: 0,
                voiced_run_start: 0,
                silence_run: 0,
                floor: 0,
                voice_began: 0,
                silence_began: 0,
            },
            position: 0,
            next_window: 0,
        }
    }

    /// Replaces the configuration; it applies from the next window on.
    /// A NaN threshold behaves as 0.5, others are clamped to 0.0..=1.0.
    pub fn set_config(&mut self, config: VadConfig) {
        self.detector.config = config;
    }

    /// The current configuration.
    pub fn config(&self) -> VadConfig {
        self.detector.config
    }

    /// Feeds the next samples of the input stream (positions count from the
    /// first sample ever pushed, the session's input clock) and appends any
    /// speech boundaries they complete to `events`.
    pub fn push(&mut self, samples: &[f32], events: &mut Vec<VadEvent>) {
        let Vad {
            frames,
            detector,
            next_window,
            ..
        } = self;
        frames.push(samples, |window| {
            detector.on_window(window, *next_window, events);
            *next_window += window.len() as u64;
        });
        self.position += samples.len() as u64;
    }

    /// Feeds one window scored by an outside model: `len` samples from stream position
    /// `start` (positions on the same input clock as [`Vad::push`]) had speech probability
    /// `probability`. Windows must come in order; the position advances to their end.
    pub fn push_scored(
        &mut self,
        start: u64,
        len: u64,
        probability: f32,
        events: &mut Vec<VadEvent>,
    ) {
        let start = start.max(self.next_window);
        self.detector
            .on_probability(start, len, probability, events);
        self.next_window = start + len;
        self.position = self.position.max(self.next_window);
    }

    /// The stretch since the last call and its highest probability, once it spans at
    /// least `min_samples` (else `None`, and the stretch goes on).
    pub fn take_meter(&mut self, min_samples: u64) -> Option<ProbabilitySpan> {
        let m = self.detector.meter?;
        if m.end - m.start < min_samples {
            return None;
        }
        self.detector.meter = None;
        Some(m)
    }

    /// The first voiced sample of the last utterance that started: `speech_started` came at
    /// least the onset windows after it (the detector's own latency).
    pub fn voice_began(&self) -> u64 {
        self.detector.voice_began
    }

    /// Where the silence that ended the last utterance began: `speech_stopped` came
    /// `silence_duration_ms` (rounded up to whole windows) after it.
    pub fn silence_began(&self) -> u64 {
        self.detector.silence_began
    }

    /// Inside an utterance, the samples of silence since the voice last was heard (0
    /// outside one).
    pub fn trailing_silence(&self) -> u64 {
        if self.detector.in_speech {
            self.detector.silence_run
        } else {
            0
        }
    }

    /// Whether the detector is inside an utterance.
    pub fn in_speech(&self) -> bool {
        self.detector.in_speech
    }

    /// Samples pushed so far.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// Ends the utterance now, as another judge (a turn model) decided: `speech_stopped`
    /// at `silence` samples into its trailing silence (at most the silence heard so far).
    /// `None` outside an utterance. Like a stop of its own, no later utterance starts
    /// before the audio already pushed.
    pub fn end_speech_after(&mut self, silence: u64) -> Option<VadEvent> {
        self.detector.end_after(silence, self.next_window)
    }

    /// Forgets speech state and any partial window, keeping the position.
    /// Windows restart at the current position, and no later utterance is
    /// reported as starting before it.
    pub fn reset(&mut self) {
        self.frames.clear();
        self.next_window = self.position;
        self.detector.reset(self.position);
    }
}

#[cfg(test)]
#[path = "vad_tests.rs"]
mod tests;
