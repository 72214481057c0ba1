//! The input side: wire audio in, the uncommitted input buffer on the session's input clock,
//! server VAD (speech start/stop, auto-commit, barge-in) and the stream to the model.

use std::sync::Arc;
use std::time::Duration;

use duet_media::{
    f32_to_i16, i16_to_f32, Adpcm, Denoiser, FrameAccumulator, SampleRing, VadConfig, VadEvent,
};
use duet_models::silero::SileroVad;

use super::audio_io::{clip_bytes, decoded_size, Decoder, RATE};
use super::conversation::{Placement, StoredItem};
use super::interrupt::{Overlap, WORDS_TIMEOUT};
use super::ledger::SAMPLES_PER_MS;
use super::memory::Metering;
use super::port::TurnPort;
use super::turn::{Judge, Preset, SCORED_SAMPLES};
use super::vad::Turns;
use super::Session;
use crate::protocol::session::INCLUDE_LOGPROBS;
use crate::protocol::AudioFormat;
use crate::protocol::ClientEvent;
use crate::protocol::InterruptionMode;
use crate::protocol::{
    codes, ids, Content, ErrorPayload, Item, ItemStatus, Role, ServerEventBody, SessionConfig,
    TurnDetection,
};

/// Shortest audio a manual commit accepts: 100 ms.
const MIN_COMMIT_SAMPLES: u64 = 100 * SAMPLES_PER_MS;
/// Extra audio kept before the VAD onset while idle (the onset is confirmed 30 ms late by
/// the energy detector, up to 64 ms by Silero).
const IDLE_MARGIN_SAMPLES: u64 = 200 * SAMPLES_PER_MS;
/// Silero's hysteresis: inside speech a chunk stays voiced down to `threshold - 0.15`.
/// Samples converted to PCM16 at a time on their way into the input buffer (40 ms).
const KEEP_FRAME: usize = 960;
/// `input_audio_buffer.speech_probability` covers at least this much input.
const METER_SAMPLES: u64 = 96 * SAMPLES_PER_MS;

/// What finds the user's turns: Silero VAD's weights (none: the energy detector), the
/// voiced input Silero needs in a row to start speech (`--vad-min-speech-ms`), and the turn
/// model that judges pauses under `semantic_vad` (none: fixed silence).
pub struct Detectors {
    /// Silero VAD (shared by every session), when loaded.
    pub vad_model: Option<SileroVad>,
    /// Voiced input Silero needs in a row to start speech.
    pub min_speech_ms: u32,
    /// The session's port on the turn loop, when a turn model is loaded.
    pub turn: Option<Arc<dyn TurnPort + Sync>>,
    /// Extension (`?turn_events=1`): the session reports the judge's verdicts.
    pub report: bool,
}

/// Input-side state of a session.
pub struct InputState {
    decoder: Decoder,
    /// Uncommitted audio at 24 kHz on the input clock (samples received since the session
    /// began), as PCM16: dropping its oldest audio costs nothing, however full it is.
    buffer: SampleRing<i16>,
    vad: Option<Turns>,
    detectors: Detectors,
    /// The judge of pauses, under `semantic_vad` with a turn model.
    pub(super) judge: Option<Judge>,
    /// Speech over an answer being judged (adaptive interruption).
    pub(super) overlap: Option<Overlap>,
    turn: Option<TurnDetection>,
    /// Item id announced by `speech_started`, committed at `speech_stopped`.
    speech_item: Option<String>,
    to_model: FrameAccumulator,
    /// Live input passed the buffer limit and its oldest audio is being dropped (reported
    /// once per episode; reset when the buffer is under the limit again).
    overflowing: bool,
    /// Live media was refused by the memory budget (reported once until it is taken again).
    memory_refused: bool,
    /// `audio.input.noise_reduction`: cleans the input before anything hears or keeps it.
    denoiser: Option<Denoiser>,
}

/// The detector's settings for `td`; with a judge, its silence window is the preset's
/// maximum pause (the judge ends the turn earlier when it can).
fn vad_config(td: &TurnDetection, judge: Option<&Judge>) -> VadConfig {
    let (threshold, prefix_padding_ms, silence_duration_ms) = td.vad_timing();
    let silence_duration_ms = judge.map_or(silence_duration_ms, |j| j.preset().max_pause_ms);
    VadConfig {
        threshold: threshold as f32,
        prefix_padding_ms,
        silence_duration_ms,
    }
}

impl InputState {
    /// Decodes an `input_audio_buffer.append`'s base64 `audio` in `format` to 24 kHz
    /// samples. Decoding holds the bytes and their f32 samples for a moment: charged to
    /// `meters` first (and given back when the meter settles after the event).
    fn decode_base64(
        &mut self,
        format: AudioFormat,
        audio: &str,
        meters: &mut Metering,
    ) -> Result<Vec<f32>, ErrorPayload> {
        let (decoded, samples) = decoded_size(format, audio);
        meters.reserve(decoded + samples * 4)?;
        let bytes = clip_bytes(audio).map_err(|e| e.with_param("audio"))?;
        let mut pcm = Vec::with_capacity(bytes.len());
        self.decoder.decode(&bytes, &mut pcm)?;
        Ok(pcm)
    }

    /// `input_audio_buffer.commit`: the item to commit the buffer as, and where it ends;
    /// refused below 100 ms of audio.
    fn manual_commit(&mut self) -> Result<(String, u64), ErrorPayload> {
        let have = self.buffer.len() as u64;
        if have < MIN_COMMIT_SAMPLES {
            return Err(ErrorPayload::invalid(
                codes::INPUT_AUDIO_BUFFER_COMMIT_EMPTY,
                format!(
                    "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, but buffer only has {:.2}ms of audio.",
                    have as f64 / SAMPLES_PER_MS as f64
                ),
            ));
        }
        let item_id = self.speech_item.take().unwrap_or_else(ids::item_id);
        Ok((item_id, self.clock()))
    }

    /// Takes `pcm` as heard: cleaned when noise reduction is on (then everything below, the
    /// VAD, the turn model, the transcriber, the model and the stored audio, hears the
    /// cleaned input), through the VAD, kept in the buffer, streamed to the transcriber and
    /// to `model` (none: a transcription session). Returns the VAD's events, where its clock
    /// starts on the input clock, and `input_audio_buffer.speech_probability` when `cfg`'s
    /// `include` asks for it.
    fn hear(
        &mut self,
        pcm: &[f32],
        transcripts: &super::transcripts::Transcripts,
        model: Option<&dyn super::ModelPort>,
        cfg: &SessionConfig,
    ) -> (Vec<VadEvent>, u64, Option<ServerEventBody>) {
        let mut cleaned = Vec::new();
        let pcm = self.denoised(pcm, &mut cleaned);
        let mut events = Vec::new();
        let offset = match &mut self.vad {
            Some(turns) => {
                turns.push(pcm, &mut events);
                turns.offset
            }
            None => 0,
        };
        self.keep(pcm);
        transcripts.live(pcm, cfg.includes(INCLUDE_LOGPROBS));
        self.to_model
            .push(pcm, |f| model.iter().for_each(|m| m.input(f)));
        let wanted = crate::protocol::session::INCLUDE_SPEECH_PROBABILITY;
        let probability = if cfg.includes(wanted) {
            self.speech_meter(offset)
        } else {
            None
        };
        (events, offset, probability)
    }

    /// Input state for a session config; `model_frame` is the model's step size, `max` the
    /// most uncommitted audio kept.
    pub fn new(cfg: &SessionConfig, model_frame: usize, max: u64, detectors: Detectors) -> Self {
        let mut s = Self {
            decoder: Decoder::new(cfg.audio.input.format),
            buffer: SampleRing::new(max as usize),
            vad: None,
            detectors,
            judge: None,
            overlap: None,
            turn: None,
            speech_item: None,
            to_model: FrameAccumulator::new(model_frame),
            overflowing: false,
            memory_refused: false,
            denoiser: None,
        };
        s.reconfigure(cfg);
        s
    }

    /// Applies a changed session config (format, turn detection).
    pub fn reconfigure(&mut self, cfg: &SessionConfig) {
        if self.decoder.format() != cfg.audio.input.format {
            self.decoder = Decoder::new(cfg.audio.input.format);
        }
        // A denoiser keeps its state while noise reduction stays on (both kinds are served
        // by the same one).
        match (&cfg.audio.input.noise_reduction, &self.denoiser) {
            (None, _) => self.denoiser = None,
            (Some(_), None) => self.denoiser = Some(Denoiser::new()),
            (Some(_), Some(_)) => {}
        }
        self.turn = cfg.audio.input.turn_detection.clone();
        self.judge = match (&self.turn, &self.detectors.turn) {
            (Some(TurnDetection::SemanticVad { eagerness, .. }), Some(port)) => {
                match self.judge.take() {
                    // Unchanged: a pause being judged stays judged.
                    Some(j) if *j.preset() == Preset::of(eagerness) => Some(j),
                    _ => Some(Judge::new(port.clone(), eagerness)),
                }
            }
            _ => None,
        };
        match (&self.turn, &mut self.vad) {
            (None, _) => {
                self.vad = None;
                self.speech_item = None;
            }
            (Some(td), Some(turns)) => turns.vad.set_config(vad_config(td, self.judge.as_ref())),
            (Some(td), None) => {
                let d = &self.detectors;
                let cfg = vad_config(td, self.judge.as_ref());
                let turns = Turns::new(cfg, d.vad_model.as_ref(), d.min_speech_ms, self.clock());
                self.vad = Some(turns);
            }
        }
    }

    /// Under `semantic_vad` with a turn model: the judge looks at the pause (asking for its
    /// score at the candidate pause) and, once it knows, ends the utterance; returns where
    /// it ends on the input clock. `words`: what the words heard so far say (the speculative
    /// transcript, on its way or in).
    pub(super) fn judge_pause(
        &mut self,
        now: std::time::Instant,
        words: super::turn::Words,
    ) -> Option<u64> {
        let (judge, turns) = (self.judge.as_mut()?, self.vad.as_mut()?);
        let silence = turns.vad.in_speech().then(|| turns.vad.trailing_silence());
        let (buffer, clock) = (&self.buffer, self.buffer.end());
        let turn_audio = || {
            let from = clock.saturating_sub(SCORED_SAMPLES).max(buffer.start());
            buffer.range(from, clock).map(|&s| i16_to_f32(s)).collect()
        };
        let look = judge.look(silence, now, words, turn_audio);
        // Speech over an answer is judged by its length and its words, not by whether it
        // finished a turn: it ends after the eagerness's fixed silence at the latest, so that
        // a backchannel's verdict (and a paused playout's resumption) never waits for the
        // maximum pause.
        let fallback = u64::from(judge.preset().fallback_ms) * SAMPLES_PER_MS;
        let need = match (look, &self.overlap, silence) {
            (Some(need), _, _) => need,
            (None, Some(_), Some(s)) if s >= fallback => fallback,
            _ => return None,
        };
        match turns.vad.end_speech_after(need)? {
            VadEvent::SpeechStopped { at_sample } => Some(at_sample + turns.offset),
            VadEvent::SpeechStarted { .. } => None,
        }
    }

    /// Extension (`?turn_events=1`): the judge's verdict on the pause it last scored, as
    /// `turn.scored` (taken once; none when not asked for or outside a turn).
    pub(super) fn turn_scored(&mut self) -> Option<crate::protocol::ServerEventBody> {
        let r = self.judge.as_mut()?.take_report()?;
        if !self.detectors.report {
            return None;
        }
        let paused_at = self.buffer.end().saturating_sub(r.silence);
        Some(crate::protocol::ServerEventBody::TurnScored {
            item_id: self.speech_item.clone()?,
            audio_end_ms: paused_at / SAMPLES_PER_MS,
            probability: r.probability,
            decision: r.decision,
            end_after_ms: r.end_after_ms,
            unfinished_words: r.unfinished_words,
        })
    }

    /// Whether the session reports the turn detector's decisions (`?turn_events=1`).
    pub(super) fn reports_turns(&self) -> bool {
        self.detectors.report
    }

    fn reset_speech(&mut self) {
        self.speech_item = None;
        self.overlap = None;
        if let Some(turns) = &mut self.vad {
            turns.reset();
        }
    }

    /// Speech over the answer was a backchannel or a noise: no turn, and its audio (up to
    /// `until`) is dropped.
    pub(super) fn end_backchannel(&mut self, until: u64) {
        self.speech_item = None;
        self.drop_before(until);
    }

    /// Under adaptive interruption: the samples of speech that interrupt whatever their
    /// words, and the prefix padding (`speech_started` names the onset with it).
    fn interruption(&self) -> Option<(u64, u64)> {
        let td = self.turn.as_ref()?;
        let i = td.interruption();
        (i.mode == InterruptionMode::Adaptive).then(|| {
            let padding = u64::from(td.vad_timing().1) * SAMPLES_PER_MS;
            (u64::from(i.min_duration_ms) * SAMPLES_PER_MS, padding)
        })
    }

    /// `pcm` cleaned by `audio.input.noise_reduction` into `out` (as many samples), or `pcm`
    /// itself when it is off.
    fn denoised<'a>(&mut self, pcm: &'a [f32], out: &'a mut Vec<f32>) -> &'a [f32] {
        match &mut self.denoiser {
            Some(d) => {
                out.reserve(pcm.len());
                d.process(pcm, out);
                out
            }
            None => pcm,
        }
    }

    /// Whether a server-VAD turn is under way.
    pub(super) fn in_turn(&self) -> bool {
        self.speech_item.is_some()
    }

    /// Whether server VAD answers each turn it ends (`create_response`).
    pub(super) fn creates_responses(&self) -> bool {
        self.turn
            .as_ref()
            .is_some_and(TurnDetection::create_response)
    }

    /// Under server VAD: whether the detector is inside an utterance, and the samples of
    /// silence since the voice was last heard in it.
    pub(super) fn silence(&self) -> Option<(bool, u64)> {
        let turns = self.vad.as_ref()?;
        Some((turns.vad.in_speech(), turns.vad.trailing_silence()))
    }

    /// The buffered (uncommitted) audio.
    pub(super) fn buffered(&self) -> Vec<i16> {
        self.buffer
            .range(self.buffer.start(), self.clock())
            .copied()
            .collect()
    }

    /// A copy of the buffered audio from input-clock position `at` on, as f32.
    pub(super) fn buffer_from(&self, at: u64) -> Arc<[f32]> {
        self.buffer
            .range(at, self.clock())
            .map(|&s| i16_to_f32(s))
            .collect()
    }

    /// Keeps `pcm` in the buffer as PCM16, converted a frame at a time on the stack (a long
    /// client append leaves no f32-sized scratch behind); past the limit the ring drops its
    /// oldest audio.
    fn keep(&mut self, pcm: &[f32]) {
        let mut frame = [0i16; KEEP_FRAME];
        for part in pcm.chunks(KEEP_FRAME) {
            let frame = &mut frame[..part.len()];
            for (d, &s) in frame.iter_mut().zip(part) {
                *d = f32_to_i16(s);
            }
            self.buffer.push(frame);
        }
    }

    /// Bytes the buffer has memory for.
    pub(super) fn allocated_bytes(&self) -> usize {
        self.buffer.allocated() * std::mem::size_of::<i16>()
    }

    /// Bytes the uncommitted samples take.
    #[cfg(test)]
    pub(super) fn buffered_bytes(&self) -> usize {
        self.buffer
            .range(0, u64::MAX)
            .map(std::mem::size_of_val)
            .sum()
    }

    /// Samples received since the session began.
    pub fn clock(&self) -> u64 {
        self.buffer.end()
    }

    /// Drops buffered audio before input-clock position `at`.
    /// The detector's own latency on the input clock: first voiced sample to
    /// `speech_started`, and at `speech_stopped` the audio past the configured silence.
    fn vad_latency(&self, ev: &VadEvent, offset: u64) {
        let Some(turns) = &self.vad else {
            return;
        };
        let clock = self.clock();
        let secs = |samples: u64| Duration::from_secs_f64(samples as f64 / f64::from(RATE));
        let m = &crate::metrics::METRICS;
        if self.judge.is_some() && matches!(ev, VadEvent::SpeechStopped { .. }) {
            m.turn_end("max_pause");
        }
        match ev {
            VadEvent::SpeechStarted { .. } => m
                .vad_onset
                .observe(secs(clock.saturating_sub(turns.vad.voice_began() + offset))),
            VadEvent::SpeechStopped { .. } => {
                let silence = u64::from(turns.vad.config().silence_duration_ms) * SAMPLES_PER_MS;
                let began = turns.vad.silence_began() + offset;
                m.vad_release
                    .observe(secs(clock.saturating_sub(began + silence)));
            }
        }
    }

    /// `input_audio_buffer.speech_probability` for the span the detector metered, if one
    /// is due (`offset`: where its clock starts on the input clock).
    fn speech_meter(&mut self, offset: u64) -> Option<ServerEventBody> {
        let turns = self.vad.as_mut()?;
        let detector = turns.detector();
        let span = turns.vad.take_meter(METER_SAMPLES)?;
        Some(ServerEventBody::InputAudioBufferSpeechProbability {
            audio_start_ms: ms(span.start + offset),
            audio_end_ms: ms(span.end + offset),
            probability: (span.probability * 1000.0).round() / 1000.0,
            detector,
        })
    }

    fn drop_before(&mut self, at: u64) {
        self.buffer.drop_before(at);
    }

    /// While nobody speaks under VAD, keep only what a coming onset could still claim.
    fn trim_idle(&mut self) {
        let Some(td) = &self.turn else { return };
        if self.speech_item.is_some() {
            return;
        }
        let keep = u64::from(td.vad_timing().1) * SAMPLES_PER_MS + IDLE_MARGIN_SAMPLES;
        self.drop_before(self.clock().saturating_sub(keep));
    }
}

fn ms(samples: u64) -> u64 {
    samples / SAMPLES_PER_MS
}

impl Session {
    /// `input_audio_buffer.{append,commit,clear}`.
    pub(super) fn input_event(&mut self, event: ClientEvent) -> Result<(), ErrorPayload> {
        match event {
            ClientEvent::InputAudioBufferAppend { audio } => {
                let format = self.cfg.audio.input.format;
                let pcm = self.input.decode_base64(format, &audio, &mut self.meters)?;
                self.append_pcm(&pcm, true)
            }
            ClientEvent::InputAudioBufferCommit => {
                let (item_id, end) = self.input.manual_commit()?;
                self.commit(item_id, end)?;
                self.input.reset_speech();
                Ok(())
            }
            _ => {
                self.reply.abandon_speculation(&self.transcripts);
                if self.input.overlap.is_some() {
                    if let Some(sink) = self.transport.sink() {
                        sink.pause(false);
                    }
                }
                self.input.buffer.clear();
                self.input.reset_speech();
                self.transcripts.abandon();
                self.out.emit(ServerEventBody::InputAudioBufferCleared {});
                Ok(())
            }
        }
    }

    /// Feeds 24 kHz input audio: buffer, VAD, model. `from_client`: an
    /// `input_audio_buffer.append` (else live transport media).
    ///
    /// The uncommitted buffer holds at most `max_input_samples`. A client append past that is
    /// refused whole (`input_audio_buffer_full`), as the client can commit or clear. Live
    /// media cannot be refused, and a full-duplex model listens all the time (nobody need
    /// ever commit): there the audio still reaches VAD and the model, and the buffer keeps
    /// its newest `max_input_samples`; live media on a turn-based model reports that once
    /// per episode.
    pub(super) fn append_pcm(
        &mut self,
        pcm: &[f32],
        from_client: bool,
    ) -> Result<(), ErrorPayload> {
        let max = self.limits.max_input_samples;
        let autonomous = self.reply.floor.autonomous;
        let report = check_room(&mut self.input, pcm.len(), max, from_client, autonomous)?;
        // The buffer's growth (none once it is full and drops its oldest) is charged first.
        let grow = (pcm.len() as u64).min(max.saturating_sub(self.input.buffer.len() as u64));
        if let Err(e) = self.meters.reserve(grow * 2) {
            // Live media is dropped while the budget is spent, reported once per episode.
            let first = !std::mem::replace(&mut self.input.memory_refused, true);
            return if from_client || first { Err(e) } else { Ok(()) };
        }
        self.input.memory_refused = false;
        // Taken (a refused append returned above).
        self.out.count(super::UsageEvent::AudioIn(pcm.len() as u64));
        // A transcription session has no conversation with the model.
        let model = self.reply.model.port.as_deref();
        let model = model.filter(|_| !self.cfg.is_transcription());
        let (events, offset, probability) =
            self.input.hear(pcm, &self.transcripts, model, &self.cfg);
        if let Some(ev) = probability {
            self.out.emit(ev);
        }
        // What the VAD found (`offset`: where its clock starts on the input clock).
        for ev in events {
            self.input.vad_latency(&ev, offset);
            match ev {
                VadEvent::SpeechStarted { at_sample } => {
                    self.speech_started(at_sample + offset, false)
                }
                VadEvent::SpeechStopped { at_sample } => self.speech_stopped(at_sample + offset),
            }
        }
        self.on_pause();
        self.input.trim_idle();
        report.map_or(Ok(()), Err)
    }

    /// Speech started at `at`. Over an answer under adaptive interruption it is judged
    /// first (unless `judged`: this is the verdict): the playout pauses and nothing is sent
    /// yet (see `interrupt`). A full-duplex model hears the overlap itself, so it is never
    /// judged there.
    pub(super) fn speech_started(&mut self, at: u64, judged: bool) {
        self.reply.abandon_speculation(&self.transcripts);
        self.timers.vad_idle = None;
        let item_id = ids::item_id();
        let responding = self.reply.responding();
        let answering = responding || self.reply.view.is_playing();
        let turn = self.input.turn.as_ref();
        let interrupts = turn.is_some_and(TurnDetection::interrupt_response);
        let judge = !judged
            && interrupts
            && answering
            && !self.cfg.is_transcription()
            && !self.reply.floor.autonomous;
        let adaptive = self.input.interruption().filter(|_| judge);
        let clock = self.input.clock();
        if let (Some(o), Some((_, padding))) = (&mut self.input.overlap, adaptive) {
            // The voice came back before the verdict ("Wait, what did you say?"): the same
            // speech goes on, judged from its first onset with its audio kept.
            o.resume((at + padding).min(clock));
            return;
        }
        self.input.drop_before(at);
        self.input.speech_item = Some(item_id.clone());
        if let Some((min, padding)) = adaptive {
            let voice = (at + padding).min(self.input.clock());
            self.input.overlap = Some(Overlap::new(at, voice, min));
            if let Some(sink) = self.transport.sink() {
                sink.pause(true);
            }
            return;
        }
        if self.reply.model.caps.transcribes(&self.cfg) {
            // A streaming transcriber hears the utterance from its start.
            let logprobs = self.cfg.includes(INCLUDE_LOGPROBS);
            let input = &self.input;
            self.transcripts
                .speech_start(&item_id, || input.buffer_from(at), logprobs);
        }
        self.out
            .emit(ServerEventBody::InputAudioBufferSpeechStarted {
                audio_start_ms: ms(at),
                item_id,
            });
        if self.cfg.is_transcription() {
            return; // nothing to interrupt
        }
        if interrupts && self.transport.is_webrtc() && answering {
            self.timers.stamps.barge_at = Some(self.out.now);
            self.answer(|r, cx| r.clear_output(cx, "turn_detected"));
        } else if interrupts && responding {
            self.answer(|r, cx| r.cancel_active(cx, "turn_detected"));
        }
    }

    pub(super) fn speech_stopped(&mut self, at: u64) {
        if let Some(onset) = self.input.overlap.as_ref().map(|o| o.onset) {
            // Short speech over the answer: its words judge it, when they can be had.
            let words = self.transcripts.can_send_whole().then(|| {
                let id: Arc<str> = Arc::from(format!("bc_{}", ids::item_id()));
                let audio = self.input.buffer_from(onset);
                self.transcripts.send_overlap(id.clone(), audio);
                (id, self.out.now + WORDS_TIMEOUT)
            });
            if let Some(o) = &mut self.input.overlap {
                o.stopped_at = Some(at);
                o.words = words;
            }
            return;
        }
        self.timers.stamps.turn_end = Some(self.out.now);
        let item_id = self.input.speech_item.take().unwrap_or_else(ids::item_id);
        self.out
            .emit(ServerEventBody::InputAudioBufferSpeechStopped {
                audio_end_ms: ms(at),
                item_id: item_id.clone(),
            });
        if let Some(s) = &mut self.reply.speculation {
            s.confirm();
        }
        if self.commit(item_id, at).is_err() {
            self.reply.abandon_speculation(&self.transcripts);
            return;
        }
        // An autonomous model decides itself when to answer: `create_response` does not
        // apply; a transcription session never answers.
        let create = !self.reply.floor.autonomous
            && !self.cfg.is_transcription()
            && self
                .input
                .turn
                .as_ref()
                .is_some_and(TurnDetection::create_response);
        if create && self.reply.active.is_none() {
            if let Err(e) = self.answer(|r, cx| r.response_create(cx, Default::default())) {
                self.out.error(e);
            }
        }
    }

    /// Server VAD's `idle_timeout_ms` passed without speech after a response: commit what
    /// the buffer holds (possibly nothing) and ask the model to respond (unless the model is
    /// autonomous and decides that itself).
    pub(super) fn idle_timeout(&mut self) {
        let Some((_, armed_at)) = self.timers.vad_idle.take() else {
            return;
        };
        if self.reply.active.is_some() || self.input.speech_item.is_some() {
            return;
        }
        let item_id = ids::item_id();
        let end = self.input.clock();
        self.out
            .emit(ServerEventBody::InputAudioBufferTimeoutTriggered {
                audio_start_ms: ms(armed_at),
                audio_end_ms: ms(end),
                item_id: item_id.clone(),
            });
        if self.commit(item_id, end).is_ok()
            && !self.reply.floor.autonomous
            && !self.cfg.is_transcription()
        {
            if let Err(e) = self.answer(|r, cx| r.response_create(cx, Default::default())) {
                self.out.error(e);
            }
        }
    }

    /// Turns the buffer up to input-clock position `end` into a user audio item.
    fn commit(&mut self, item_id: String, end: u64) -> Result<(), ErrorPayload> {
        let start = self.input.buffer.start();
        let audio: Vec<i16> = self.input.buffer.range(start, end).copied().collect();
        self.input.drop_before(end);
        let mut item = Item::Message {
            id: Some(item_id.clone()),
            object: None,
            status: None,
            role: Role::User,
            content: vec![Content::InputAudio {
                audio: None,
                transcript: None,
            }],
        };
        item.stamp(ids::item_id, ItemStatus::Completed);
        let stored = StoredItem::with_audio(item.clone(), Some(Arc::new(Adpcm::from_i16(&audio))));
        let evicted = self.conv.insert(Placement::End, stored)?;
        let previous_item_id = self.conv.previous_id(&item_id);
        self.out.emit(ServerEventBody::InputAudioBufferCommitted {
            previous_item_id: previous_item_id.clone(),
            item_id: item_id.clone(),
        });
        self.out.emit_all(super::conversation::item_added(
            previous_item_id,
            item,
            true,
            evicted,
        ));
        self.transcribe_committed(&item_id, &audio);
        Ok(())
    }
}

/// Whether `added` more samples fit the uncommitted buffer's `max`: past it, a client's
/// append on a turn-based model is refused (`Err`), and live media (or a full-duplex
/// model's input) is taken, with the overflow to report once per episode (`Ok(Some)`).
fn check_room(
    input: &mut InputState,
    added: usize,
    max: u64,
    from_client: bool,
    autonomous: bool,
) -> Result<Option<ErrorPayload>, ErrorPayload> {
    let pending = input.buffer.len() as u64 + added as u64;
    if pending <= max {
        input.overflowing = false;
        return Ok(None);
    }
    let full = ErrorPayload::invalid(
        codes::INPUT_AUDIO_BUFFER_FULL,
        format!(
            "the input audio buffer would hold {} ms, over the limit of {} ms; commit or clear it",
            ms(pending),
            ms(max)
        ),
    );
    if from_client && !autonomous {
        return Err(full);
    }
    let report = (!autonomous && !input.overflowing).then_some(full);
    input.overflowing = true;
    Ok(report)
}
