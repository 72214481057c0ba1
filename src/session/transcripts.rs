//! Input transcription in the session: committed user items go to the session's
//! [`TranscriberPort`] (whole, or as the speech arrives for a streaming transcriber), and
//! what comes back becomes `conversation.item.input_audio_transcription.delta`,
//! `.completed` (the item's `transcript` filled) or `.failed`.
//!
//! A response created right after a commit (server VAD) waits for that item's transcript
//! before its request goes to the model, at most [`TRANSCRIPT_WAIT`], so the model answers
//! the words and not only the sound; its events go out at once as before.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use duet_media::Adpcm;
use duet_models::{ContextItem, Request, TokenLogprob, TranscribeOutput, TurnInput};

use super::audio_io::to_f32;
use super::conversation::Conversation;
use super::interrupt::OVERLAP_PROMPT;
use super::reply::{Cx, Reply};
use super::{Epoch, Session, TranscriberPort, TranscriptEvent, TranscriptionHints};
use crate::protocol::server::{LogProb, TranscriptionError, TranscriptionUsage};
use crate::protocol::session::INCLUDE_LOGPROBS;
use crate::protocol::{codes, ServerEventBody};

/// Longest a response's model request waits for its user item's transcript.
pub(super) const TRANSCRIPT_WAIT: Duration = Duration::from_secs(3);
/// Items whose transcription may be outstanding at once; older ones are forgotten (their
/// late answers are dropped).
const MAX_PENDING: usize = 64;

/// The session's transcription state.
#[derive(Default)]
pub struct Transcripts {
    port: Option<Box<dyn TranscriberPort>>,
    /// Items sent for transcription and not answered yet, oldest first, with whether a
    /// delta went out (at most [`MAX_PENDING`], so a scan is cheap).
    pending: VecDeque<(Arc<str>, bool)>,
    /// A response's model request waiting for its user item's transcript.
    deferred: Option<Deferred>,
    /// Streaming transcriber: the item whose speech is being sent as it arrives.
    streaming: Option<Arc<str>>,
    /// The session's language and prompt, given with every utterance's end.
    hints: TranscriptionHints,
}

struct Deferred {
    epoch: Epoch,
    request: Request,
    item_id: Arc<str>,
    deadline: Instant,
}

impl Transcripts {
    /// Transcription through `port` (none: transcription is unavailable).
    pub fn new(port: Option<Box<dyn TranscriberPort>>) -> Self {
        Self {
            port,
            ..Self::default()
        }
    }

    /// Whether there is no stream to transcribe on.
    pub(super) fn lacks_port(&self) -> bool {
        self.port.is_none()
    }

    /// The stream to transcribe on, opened after the session.
    pub(super) fn set_port(&mut self, port: Box<dyn TranscriberPort>) {
        self.port = Some(port);
    }

    /// Whether whole utterances can be sent (a transcriber that is not streaming).
    pub(super) fn can_send_whole(&self) -> bool {
        self.port.as_ref().is_some_and(|p| !p.streaming())
    }

    /// Sends a whole utterance under `id` (a speculation's, not an item's).
    pub(super) fn send_whole(&self, id: Arc<str>, pcm: Arc<[f32]>, logprobs: bool) {
        if let Some(port) = &self.port {
            self.end(port.as_ref(), id, pcm, logprobs);
        }
    }

    /// Sends speech over an answer (`id`) whole, to be judged by its words: read after
    /// [`OVERLAP_PROMPT`], the spellings of the backchannels it may be, in the session's
    /// language.
    pub(super) fn send_overlap(&self, id: Arc<str>, pcm: Arc<[f32]>) {
        if let Some(port) = &self.port {
            port.hints(&TranscriptionHints {
                language: self.hints.language.clone(),
                prompt: Some(OVERLAP_PROMPT.to_string()),
            });
            port.send(id, pcm, true, true);
        }
    }

    /// The speculation `id` was given up before its transcript came: the transcriber drops
    /// it if it has not started on it.
    pub(super) fn give_up(&self, id: &Arc<str>) {
        if let Some(port) = &self.port {
            port.forget(id);
        }
    }

    /// Ends utterance `id` with `pcm`, the session's hints first.
    fn end(&self, port: &dyn TranscriberPort, id: Arc<str>, pcm: Arc<[f32]>, logprobs: bool) {
        port.hints(&self.hints);
        port.send(id, pcm, true, logprobs);
    }

    /// The session's `audio.input.transcription` changed (or was first set).
    pub(super) fn set_hints(&mut self, transcription: Option<&serde_json::Value>) {
        self.hints = TranscriptionHints::of(transcription);
    }

    /// An item whose transcript will come (from a speculation's transcription).
    pub(super) fn expect(&mut self, item_id: Arc<str>) {
        self.remember(item_id);
    }

    /// When a deferred request must go anyway.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.deferred.as_ref().map(|d| d.deadline)
    }

    fn remember(&mut self, item_id: Arc<str>) {
        if self.delta_sent(&item_id).is_none() {
            self.pending.push_back((item_id, false));
        }
        while self.pending.len() > MAX_PENDING {
            self.pending.pop_front();
        }
    }

    fn forget(&mut self, item_id: &str) {
        self.pending.retain(|(i, _)| &**i != item_id);
    }

    /// Whether a delta went out for a pending item (`None`: not pending).
    fn delta_sent(&self, item_id: &str) -> Option<bool> {
        self.pending
            .iter()
            .find(|(i, _)| &**i == item_id)
            .map(|&(_, sent)| sent)
    }

    /// Speech started under server VAD: a streaming transcriber starts hearing the
    /// utterance `item_id` from `pcm` (the speech so far, asked for only when it streams).
    pub(super) fn speech_start(
        &mut self,
        item_id: &str,
        pcm: impl FnOnce() -> Arc<[f32]>,
        logprobs: bool,
    ) {
        let Some(port) = self.port.as_ref().filter(|p| p.streaming()) else {
            return;
        };
        let id: Arc<str> = Arc::from(item_id);
        port.send(id.clone(), pcm(), false, logprobs);
        self.streaming = Some(id);
    }

    /// More live speech for a streaming transcriber.
    pub(super) fn live(&self, pcm: &[f32], logprobs: bool) {
        if let (Some(id), Some(port)) = (&self.streaming, &self.port) {
            port.send(id.clone(), Arc::from(pcm), false, logprobs);
        }
    }

    /// The speech being streamed was dropped (input cleared, session reset).
    pub(super) fn abandon(&mut self) {
        if let Some(id) = self.streaming.take() {
            if let Some(port) = &self.port {
                // Ends the utterance on the transcriber; its answer finds no pending item.
                port.send(id, Arc::from([]), true, false);
            }
        }
    }

    /// The item a deferred request waits for, once its wait is over at `now`.
    fn overdue(&self, now: Instant) -> Option<Arc<str>> {
        let d = self.deferred.as_ref()?;
        (now >= d.deadline).then(|| d.item_id.clone())
    }

    /// The transcript a deferred request waited for came (or failed, or took too long):
    /// the request goes now (returned, with its epoch), with the transcript in its context.
    /// Nothing goes when the response was cancelled meanwhile (`epoch` moved on, or no
    /// response is `active`).
    fn release(
        &mut self,
        item_id: &str,
        transcript: Option<String>,
        epoch: Epoch,
        active: bool,
        conv: &Conversation,
    ) -> Option<(Epoch, Request)> {
        if self
            .deferred
            .as_ref()
            .is_none_or(|d| &*d.item_id != item_id)
        {
            return None;
        }
        let d = self.deferred.take()?;
        if d.epoch != epoch || !active {
            return None; // cancelled meanwhile: nothing to ask for
        }
        let mut request = d.request;
        if let (Some(transcript), Request::Respond { input, .. }) = (transcript, &mut request) {
            let audio = conv.get(item_id).and_then(|s| s.audio.clone());
            for turn in input.iter_mut() {
                if let (ContextItem::User(TurnInput::Audio(pcm)), Some(a)) = (&*turn, &audio) {
                    if is_audio_of(pcm, a) {
                        *turn = ContextItem::User(TurnInput::Transcribed {
                            audio: pcm.clone(),
                            transcript: transcript.clone(),
                        });
                    }
                }
            }
        }
        Some((d.epoch, request))
    }

    /// More text of `item_id` (its delta event goes to `events`).
    fn delta(
        &mut self,
        item_id: &Arc<str>,
        text: String,
        logprobs: Option<Vec<LogProb>>,
        events: &mut Vec<ServerEventBody>,
    ) -> Heard {
        if text.is_empty() {
            return Heard::Unknown;
        }
        if let Some(p) = self.pending.iter_mut().find(|(i, _)| i == item_id) {
            p.1 = true;
        }
        events.push(ServerEventBody::InputAudioTranscriptionDelta {
            item_id: item_id.to_string(),
            content_index: 0,
            delta: text,
            logprobs,
        });
        Heard::Partial
    }

    /// What the transcriber answered for `item_id`: the events it makes go to `events`
    /// (`logprobs`: with log probabilities).
    fn on_output(
        &mut self,
        item_id: &Arc<str>,
        output: Result<TranscribeOutput, String>,
        logprobs: bool,
        events: &mut Vec<ServerEventBody>,
    ) -> Heard {
        let Some(delta_sent) = self.delta_sent(item_id) else {
            return Heard::Unknown;
        };
        match output {
            Ok(TranscribeOutput::NotYet) => Heard::Partial,
            Ok(TranscribeOutput::Delta { text, logprobs: lp }) => {
                let lp = self::logprobs(lp, logprobs);
                self.delta(item_id, text, lp, events)
            }
            Ok(TranscribeOutput::Completed {
                text,
                logprobs: lp,
                audio_seconds,
                ..
            }) => {
                self.forget(item_id);
                let text = text.trim().to_string();
                completed_events(
                    item_id,
                    &text,
                    lp,
                    logprobs,
                    audio_seconds,
                    delta_sent,
                    events,
                );
                Heard::Done(Some(text))
            }
            Err(message) => {
                self.forget(item_id);
                events.push(ServerEventBody::InputAudioTranscriptionFailed {
                    item_id: item_id.to_string(),
                    content_index: 0,
                    error: TranscriptionError {
                        kind: "server_error".into(),
                        code: codes::TRANSCRIPTION_FAILED.into(),
                        message,
                    },
                });
                Heard::Done(None)
            }
        }
    }
}

/// The events of a finished transcript `text` of `item_id`: the whole text as one delta
/// first when no delta went out (an utterance transcriber answers at once), then the
/// completed event.
fn completed_events(
    item_id: &str,
    text: &str,
    lp: Vec<duet_models::TokenLogprob>,
    want_logprobs: bool,
    audio_seconds: f64,
    delta_sent: bool,
    events: &mut Vec<ServerEventBody>,
) {
    if !delta_sent && !text.is_empty() {
        events.push(ServerEventBody::InputAudioTranscriptionDelta {
            item_id: item_id.to_string(),
            content_index: 0,
            delta: text.to_string(),
            logprobs: logprobs(lp.clone(), want_logprobs),
        });
    }
    events.push(ServerEventBody::InputAudioTranscriptionCompleted {
        item_id: item_id.to_string(),
        content_index: 0,
        transcript: text.to_string(),
        usage: TranscriptionUsage::Duration {
            seconds: (audio_seconds * 1000.0).round() / 1000.0,
        },
        logprobs: logprobs(lp, want_logprobs),
    });
}

/// What an answer of the transcriber came to.
enum Heard {
    /// Nothing: not an item waiting for its transcript (or an empty delta).
    Unknown,
    /// More of the transcript, or nothing yet.
    Partial,
    /// The transcript (none: it failed): the item is no longer pending.
    Done(Option<String>),
}

/// Whether a context turn's audio `pcm` is the stored item audio `stored` (the turn was
/// converted from it: the same samples, exactly).
fn is_audio_of(pcm: &[f32], stored: &Adpcm) -> bool {
    pcm.len() == stored.len()
        && pcm
            .iter()
            .zip(stored.samples())
            .all(|(&f, s)| f == duet_media::i16_to_f32(s))
}

fn logprobs(list: Vec<TokenLogprob>, wanted: bool) -> Option<Vec<LogProb>> {
    wanted.then(|| {
        list.into_iter()
            .map(|t| LogProb {
                token: t.token,
                logprob: t.logprob,
                bytes: t.bytes,
            })
            .collect()
    })
}

impl Session {
    /// A user audio item was committed: transcribe it (or report why not). The transcriber
    /// takes f32: the stored PCM16 is converted only when it is sent.
    pub(super) fn transcribe_committed(&mut self, item_id: &str, audio: &[i16]) {
        let streamed = self.transcripts.streaming.take();
        if !self.reply.model.caps.transcribes(&self.cfg) {
            return;
        }
        let logprobs = self.cfg.includes(INCLUDE_LOGPROBS);
        if self.transcripts.port.is_some() && self.adopt_transcription(&Arc::from(item_id)) {
            return; // the speculation's transcription is this item's
        }
        let Some(port) = &self.transcripts.port else {
            self.out
                .emit(ServerEventBody::InputAudioTranscriptionFailed {
                    item_id: item_id.to_string(),
                    content_index: 0,
                    error: TranscriptionError {
                        kind: "server_error".into(),
                        code: codes::TRANSCRIPTION_UNAVAILABLE.into(),
                        message: "no transcriber for this session: the server has no \
                              transcription model (start it with --transcription-model-dir DIR, \
                              see scripts/install-models, or --stt-url), or every \
                              --transcription-streams stream is in use"
                            .into(),
                    },
                });
            return;
        };
        let id: Arc<str> = Arc::from(item_id);
        let pcm = match streamed {
            // The transcriber heard it as it came: only the end is news.
            Some(s) if s == id => Arc::from([]),
            _ => to_f32(audio),
        };
        self.transcripts
            .end(port.as_ref(), id.clone(), pcm, logprobs);
        self.transcripts.remember(id);
    }

    /// What the transcriber answered.
    pub fn on_transcript(&mut self, ev: TranscriptEvent, now: Instant) {
        self.out.now = now;
        let Some(ev) = self.on_speculative_transcript(ev) else {
            return;
        };
        let TranscriptEvent { item_id, output } = ev;
        let logprobs = self.cfg.includes(INCLUDE_LOGPROBS);
        let mut events = Vec::new();
        let heard = self
            .transcripts
            .on_output(&item_id, output, logprobs, &mut events);
        if let Heard::Done(Some(text)) = &heard {
            // Kept for `conversation.item.retrieve` and as model context.
            self.conv.set_transcript(&item_id, text);
        }
        self.out.emit_all(events);
        if let Heard::Done(transcript) = heard {
            self.answer(|r, cx| r.release_deferred(cx, &item_id, transcript));
        }
    }
}

impl Reply {
    /// Sends a response's model request, or holds it while the transcript of the user item
    /// it answers is on its way.
    pub(super) fn request_model(&mut self, cx: &mut Cx<'_>, request: Request) {
        let waits_for = cx
            .conv
            .last_user_audio_id()
            .filter(|id| cx.transcripts.delta_sent(id).is_some())
            .map(Arc::<str>::from);
        match waits_for {
            Some(item_id) => {
                cx.transcripts.deferred = Some(Deferred {
                    epoch: self.model.epoch,
                    request,
                    item_id,
                    deadline: cx.out.now + TRANSCRIPT_WAIT,
                });
            }
            None => self.model.request(self.model.epoch, request),
        }
    }

    /// The transcript of `item_id` came (or failed, or took too long): a request that
    /// waited for it goes now.
    fn release_deferred(&mut self, cx: &mut Cx<'_>, item_id: &str, transcript: Option<String>) {
        let (epoch, active) = (self.model.epoch, self.active.is_some());
        let released = cx
            .transcripts
            .release(item_id, transcript, epoch, active, cx.conv);
        if let Some((epoch, request)) = released {
            self.model.request(epoch, request);
        }
    }

    /// The deferred request's wait is over at `now`: it goes without its transcript.
    pub(super) fn transcript_wait_over(&mut self, cx: &mut Cx<'_>, now: Instant) {
        if let Some(id) = cx.transcripts.overdue(now) {
            tracing::debug!(session = %cx.cfg.id, item = %id, "transcript late; the response goes without it");
            self.release_deferred(cx, &id, None);
        }
    }
}
