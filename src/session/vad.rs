//! Server VAD's detector for one session: the speech state machine of `duet_media` on the
//! session's input clock, scored by Silero VAD when its weights are loaded, else by window
//! energy; a Silero failure degrades to the energy detector instead of failing the session.

use duet_media::{Vad, VadConfig, VadEvent};
use duet_models::silero::{SileroDetector, SileroVad};

use super::audio_io::RATE;

/// Silero's onset needs `--vad-min-speech-ms` of voiced chunks in a row (see [`Turns::new`]).
const SILERO_RELEASE: f32 = 0.15;

/// Server VAD's detector: the state machine on the input clock (`offset` is the clock when
/// it was made), scored by Silero when a VAD model is loaded, else by window energy.
pub(super) struct Turns {
    pub(super) vad: Vad,
    pub(super) offset: u64,
    silero: Option<SileroDetector>,
    /// Silero's scored chunks of one push (kept to reuse its allocation).
    chunks: Vec<duet_models::silero::ChunkProbability>,
}

impl Turns {
    /// A detector with `cfg`: Silero when `model` is loaded (speech confirmed after
    /// `min_speech_ms` of voiced chunks), else the energy detector.
    pub(super) fn new(
        cfg: VadConfig,
        model: Option<&SileroVad>,
        min_speech_ms: u32,
        clock: u64,
    ) -> Self {
        match model.map(|m| SileroDetector::new(m.clone())) {
            Some(Ok(silero)) => Self {
                vad: Vad::scored(cfg, RATE, SILERO_RELEASE).with_min_speech_ms(min_speech_ms),
                offset: clock,
                silero: Some(silero),
                chunks: Vec::new(),
            },
            other => {
                if let Some(Err(e)) = other {
                    tracing::warn!("Silero VAD unavailable, using the energy detector: {e}");
                }
                Self {
                    vad: Vad::new(cfg, RATE),
                    offset: clock,
                    silero: None,
                    chunks: Vec::new(),
                }
            }
        }
    }

    /// Feeds input; appends speech boundaries (on the detector's own clock) to `events`.
    pub(super) fn push(&mut self, pcm: &[f32], events: &mut Vec<VadEvent>) {
        let Some(silero) = &mut self.silero else {
            return self.vad.push(pcm, events);
        };
        self.chunks.clear();
        if let Err(e) = silero.push(pcm, &mut self.chunks) {
            // Degrade, never fail the session: the energy detector takes over from here.
            tracing::warn!("Silero VAD failed, using the energy detector: {e}");
            let cfg = self.vad.config();
            let at = self.offset + self.vad.position();
            self.silero = None;
            self.vad = Vad::new(cfg, RATE);
            self.offset = at;
            return;
        }
        for c in &self.chunks {
            self.vad.push_scored(c.start, c.len, c.probability, events);
        }
    }

    pub(super) fn reset(&mut self) {
        self.vad.reset();
        if let Some(s) = &mut self.silero {
            s.reset();
        }
    }

    /// `silero` or `energy`.
    pub(super) fn detector(&self) -> &'static str {
        if self.silero.is_some() {
            "silero"
        } else {
            "energy"
        }
    }
}
