//! The response in progress and its behaviour: what one model step adds to it (deltas,
//! ledger, audio to play), the done chain, usage. Its methods return the events to send, so
//! the session emits them after the response's own work is done.

use base64::Engine;
use duet_models::{ContextItem, StepOutput, TurnInput};

use duet_media::Adpcm;

use super::audio_io::Encoder;
use super::ledger::PlaybackLedger;
use super::{Epoch, MediaSink, PlaybackTag};
use crate::protocol::response::StatusError;
use crate::protocol::server::SpeakMetadata;
use crate::protocol::{
    AudioFormat, Content, ContentRef, Item, ItemStatus, Modality, Part, Response, ResponseStatus,
    Role, ServerEventBody, StatusDetails, Usage,
};

/// Samples per audio token (20 ms).
const SAMPLES_PER_TOKEN: u64 = 480;

/// The response being generated.
pub struct ActiveResponse {
    pub(super) response: Response,
    pub(super) in_conversation: bool,
    pub(super) item_id: String,
    /// Tag of this response's audio in the media engine (WebRTC).
    pub(super) tag: PlaybackTag,
    pub(super) modality: Modality,
    pub(super) ledger: PlaybackLedger,
    text: String,
    /// The audio kept for the stored item (at most one item's worth), as ADPCM.
    audio: Adpcm,
    encoder: Encoder,
    input_tokens: (u64, u64),
    max_tokens: Option<u64>,
    /// Autonomous models: `response.speak` went out (the model's speech fills this response).
    pub(super) spoke: bool,
    /// The message item opens only with the model's first words or audio (a response that
    /// may call a tool); otherwise it opened with the response.
    pub(super) defer_message: bool,
    /// The message item's place in the output, once it is open.
    pub(super) message_index: Option<u32>,
    /// The function calls it made, in order.
    pub(super) calls: Vec<FunctionCall>,
    /// The next item's place in the output.
    pub(super) next_index: u32,
}

/// A function call a response made.
#[derive(Debug)]
pub(super) struct FunctionCall {
    pub(super) item_id: String,
    pub(super) call_id: String,
    pub(super) name: String,
    pub(super) arguments: String,
    pub(super) output_index: u32,
    /// Its arguments are complete.
    pub(super) done: bool,
    /// Completed once its arguments are; incomplete when the response ended first.
    pub(super) status: ItemStatus,
}

impl FunctionCall {
    /// Its `function_call` item.
    pub(super) fn item(&self, status: ItemStatus) -> Item {
        Item::FunctionCall {
            id: Some(self.item_id.clone()),
            object: Some("realtime.item".into()),
            status: Some(status),
            name: self.name.clone(),
            call_id: Some(self.call_id.clone()),
            arguments: self.arguments.clone(),
        }
    }
}

/// Room the stored answer audio grows by at least: one second at 24 kHz.
const ANSWER_AUDIO_STEP: usize = 24_000;

/// What one model step produced.
pub(super) struct Streamed {
    /// Events to send.
    pub(super) events: Vec<ServerEventBody>,
    /// The response's first audio left now (WebSocket: handed to the socket).
    pub(super) first_audio: bool,
    /// The response's first audio was handed to the transport now (either transport).
    pub(super) first_handed: bool,
}

/// Input tokens of a response's context: words, and 20 ms audio tokens.
pub(super) fn input_tokens(items: &[ContextItem]) -> (u64, u64) {
    let words = |s: &str| s.split_whitespace().count() as u64;
    items.iter().fold((0, 0), |(t, a), item| match item {
        ContextItem::User(TurnInput::Audio(pcm) | TurnInput::Transcribed { audio: pcm, .. }) => {
            (t, a + (pcm.len() as u64).div_ceil(SAMPLES_PER_TOKEN))
        }
        ContextItem::User(TurnInput::Text(s))
        | ContextItem::System(s)
        | ContextItem::Assistant(s) => (t + words(s), a),
        ContextItem::ToolCall(c) => (t + 1 + words(&c.arguments), a),
        ContextItem::ToolResult { output, .. } => (t + words(output), a),
    })
}

impl ActiveResponse {
    /// A response about to start: `response` as announced, output in `modality` (audio in
    /// `format`), context of `input_tokens`, stopping at `max_tokens`.
    pub(super) fn new(
        response: Response,
        in_conversation: bool,
        format: AudioFormat,
        input_tokens: (u64, u64),
        max_tokens: Option<u64>,
    ) -> Self {
        Self {
            modality: response.output_modalities[0],
            response,
            in_conversation,
            item_id: crate::protocol::ids::item_id(),
            tag: PlaybackTag::default(),
            ledger: PlaybackLedger::default(),
            text: String::new(),
            audio: Adpcm::new(),
            encoder: Encoder::new(format),
            input_tokens,
            max_tokens,
            spoke: false,
            defer_message: false,
            message_index: None,
            calls: Vec::new(),
            next_index: 0,
        }
    }

    /// Places the message item in the output (it opens now).
    pub(super) fn open_message(&mut self) {
        self.message_index = Some(self.next_index);
        self.next_index += 1;
    }

    /// The function call still receiving its arguments, if any.
    pub(super) fn open_call(&mut self) -> Option<&mut FunctionCall> {
        self.calls.last_mut().filter(|c| !c.done)
    }

    /// Whether this step's output opens the message: words or audio the response keeps.
    pub(super) fn speaks(&self, out: &StepOutput) -> bool {
        match self.modality {
            Modality::Text => !out.text.is_empty(),
            Modality::Audio => !out.text.is_empty() || !out.audio.is_empty(),
        }
    }

    /// Where its streaming events point.
    pub(super) fn at(&self) -> ContentRef {
        ContentRef {
            response_id: self.response.id.clone(),
            item_id: self.item_id.clone(),
            output_index: self.message_index.unwrap_or(0),
            content_index: 0,
        }
    }

    /// Whether the output reached `max_output_tokens`.
    pub(super) fn over_limit(&self) -> bool {
        self.max_tokens.is_some_and(|max| {
            let (t, au) = self.output_tokens();
            t + au >= max
        })
    }

    fn output_tokens(&self) -> (u64, u64) {
        let words = |s: &str| s.split_whitespace().count() as u64;
        match self.modality {
            Modality::Audio => (
                words(self.ledger.transcript()),
                self.ledger.generated.div_ceil(SAMPLES_PER_TOKEN),
            ),
            Modality::Text => (words(&self.text), 0),
        }
    }

    /// Its assistant item, without content yet.
    pub(super) fn empty_item(&self) -> Item {
        Item::Message {
            id: Some(self.item_id.clone()),
            object: Some("realtime.item".into()),
            status: Some(ItemStatus::InProgress),
            role: Role::Assistant,
            content: vec![],
        }
    }

    /// Its assistant item as it stands.
    pub(super) fn item(&self, status: ItemStatus) -> Item {
        let content = match self.modality {
            Modality::Audio => Content::OutputAudio {
                audio: None,
                transcript: Some(self.ledger.transcript().to_string()),
            },
            Modality::Text => Content::OutputText {
                text: self.text.clone(),
            },
        };
        Item::Message {
            id: Some(self.item_id.clone()),
            object: Some("realtime.item".into()),
            status: Some(status),
            role: Role::Assistant,
            content: vec![content],
        }
    }

    /// Its content part as it stands.
    pub(super) fn part(&self) -> Part {
        match self.modality {
            Modality::Audio => Part::Audio {
                transcript: self.ledger.transcript().to_string(),
            },
            Modality::Text => Part::Text {
                text: self.text.clone(),
            },
        }
    }

    /// `response.speak`: the model's speech fills this response from now on.
    pub(super) fn speak(&mut self, session_id: &str, epoch: Epoch) -> ServerEventBody {
        self.spoke = true;
        ServerEventBody::ResponseSpeak {
            at: self.at(),
            metadata: SpeakMetadata {
                session_id: session_id.to_string(),
                epoch: epoch.0,
                model_speak: true,
            },
        }
    }

    /// One model step into the response: text, or audio with its transcript (a text
    /// response drops the audio). Audio goes to `sink` on WebRTC, into deltas on WebSocket;
    /// the stored item keeps at most `keep` samples.
    pub(super) fn stream(
        &mut self,
        out: &StepOutput,
        keep: u64,
        sink: Option<&dyn MediaSink>,
    ) -> Streamed {
        let mut streamed = Streamed {
            events: Vec::new(),
            first_audio: false,
            first_handed: false,
        };
        if self.modality == Modality::Text {
            if !out.text.is_empty() {
                self.text.push_str(&out.text);
                streamed
                    .events
                    .push(ServerEventBody::ResponseOutputTextDelta {
                        at: self.at(),
                        delta: out.text.clone(),
                    });
            }
            return streamed;
        }
        if !out.text.is_empty() {
            self.ledger.text(&out.text);
            streamed
                .events
                .push(ServerEventBody::ResponseOutputAudioTranscriptDelta {
                    at: self.at(),
                    delta: out.text.clone(),
                });
        }
        if !out.audio.is_empty() {
            self.stream_audio(&out.audio, keep, sink, &mut streamed);
        }
        streamed
    }

    fn stream_audio(
        &mut self,
        audio: &[f32],
        keep: u64,
        sink: Option<&dyn MediaSink>,
        streamed: &mut Streamed,
    ) {
        let n = audio.len() as u64;
        self.ledger.generated(n);
        let len = self.audio.len();
        if len as u64 + n <= keep {
            // Grow a second at a time (then doubling): a 20 ms step must not reallocate
            // the answer's audio every few frames. Never past `keep`: the answer holds at
            // most one item's worth of memory, as the budget counts it.
            if self.audio.capacity() - len < audio.len() {
                let room = ANSWER_AUDIO_STEP.max(len).min((keep - len as u64) as usize);
                self.audio.reserve_exact(room.max(audio.len()));
            }
            self.audio.push_f32(audio);
        }
        self.ledger.queued(n);
        streamed.first_handed = self.ledger.generated == n;
        if let Some(sink) = sink {
            // WebRTC: the engine reports what left.
            sink.play(self.tag, audio);
            return;
        }
        streamed.first_audio = self.ledger.generated == n;
        let bytes = self.encoder.encode(audio);
        if !bytes.is_empty() {
            let delta = base64::engine::general_purpose::STANDARD.encode(bytes);
            streamed
                .events
                .push(ServerEventBody::ResponseOutputAudioDelta {
                    at: self.at(),
                    delta,
                });
        }
        // WebSocket: handed to the socket is what the ledger counts as sent.
        self.ledger.sent(n);
    }

    /// Bytes the kept answer audio has memory for.
    pub(super) fn audio_bytes(&self) -> usize {
        self.audio.heap_bytes()
    }

    /// Marks the response failed with a server error `code`.
    pub(super) fn fail(&mut self, code: &str) {
        self.response.status_details = Some(StatusDetails {
            kind: ResponseStatus::Failed,
            reason: None,
            error: Some(StatusError {
                kind: "server_error".into(),
                code: code.to_string(),
            }),
        });
    }

    /// The done chain up to `response.output_item.done`, and the final item. On WebSocket a
    /// completed audio response first sends the encoder's tail.
    pub(super) fn done_chain(
        &mut self,
        status: ResponseStatus,
        webrtc: bool,
    ) -> (Vec<ServerEventBody>, Item) {
        let at = self.at();
        let mut events = Vec::new();
        match self.modality {
            Modality::Audio => {
                let tail = if webrtc {
                    Vec::new()
                } else {
                    self.encoder.finish()
                };
                if status == ResponseStatus::Completed && !tail.is_empty() {
                    let delta = base64::engine::general_purpose::STANDARD.encode(tail);
                    events.push(ServerEventBody::ResponseOutputAudioDelta {
                        at: at.clone(),
                        delta,
                    });
                }
                events.push(ServerEventBody::ResponseOutputAudioDone { at: at.clone() });
                events.push(ServerEventBody::ResponseOutputAudioTranscriptDone {
                    at: at.clone(),
                    transcript: self.ledger.transcript().to_string(),
                });
            }
            Modality::Text => events.push(ServerEventBody::ResponseOutputTextDone {
                at: at.clone(),
                text: self.text.clone(),
            }),
        }
        events.push(ServerEventBody::ResponseContentPartDone {
            at,
            part: self.part(),
        });
        let item_status = match status {
            ResponseStatus::Completed => ItemStatus::Completed,
            _ => ItemStatus::Incomplete,
        };
        let item = self.item(item_status);
        events.push(ServerEventBody::ResponseOutputItemDone {
            response_id: self.response.id.clone(),
            output_index: self.message_index.unwrap_or(0),
            item: Box::new(item.clone()),
        });
        (events, item)
    }

    /// The audio and ledger the stored item keeps (audio responses).
    pub(super) fn take_audio(&mut self) -> Option<(Adpcm, PlaybackLedger)> {
        (self.modality == Modality::Audio).then(|| {
            let mut audio = std::mem::take(&mut self.audio);
            audio.shrink_to_fit();
            (audio, self.ledger.clone())
        })
    }

    /// The finished response for `response.done`: status, details, output and usage.
    pub(super) fn into_done(
        self,
        status: ResponseStatus,
        reason: Option<&str>,
        message: Option<Item>,
    ) -> Response {
        let (out_text, out_audio) = self.output_tokens();
        let mut r = self.response;
        r.status = status;
        if r.status_details.is_none() {
            r.status_details = Some(StatusDetails {
                kind: status,
                reason: reason.map(str::to_string),
                error: None,
            });
        }
        let mut output: Vec<(u32, Item)> = self
            .calls
            .iter()
            .map(|c| (c.output_index, c.item(c.status)))
            .collect();
        if let (Some(at), Some(item)) = (self.message_index, message) {
            output.push((at, item));
        }
        output.sort_by_key(|(at, _)| *at);
        r.output = output.into_iter().map(|(_, item)| item).collect();
        r.usage = Some(Usage::new(
            self.input_tokens.0,
            self.input_tokens.1,
            out_text,
            out_audio,
        ));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::response::{ResponseAudio, ResponseAudioOutput};

    fn audio_response() -> ActiveResponse {
        let response = Response {
            id: "resp_test".into(),
            object: "realtime.response",
            status: ResponseStatus::InProgress,
            status_details: None,
            output: Vec::new(),
            conversation_id: None,
            output_modalities: vec![Modality::Audio],
            max_output_tokens: "inf".into(),
            audio: ResponseAudio {
                output: ResponseAudioOutput {
                    format: AudioFormat::default(),
                    voice: "alloy".into(),
                },
            },
            metadata: None,
            usage: None,
        };
        ActiveResponse::new(response, true, AudioFormat::default(), (0, 0), None)
    }

    #[test]
    fn the_kept_answer_is_adpcm_and_never_grows_past_one_item() {
        let mut a = audio_response();
        let keep = 100_000;
        let step = StepOutput {
            audio: vec![0.25; 480],
            ..StepOutput::default()
        };
        for _ in 0..300 {
            a.stream(&step, keep, None);
        }
        assert_eq!(a.ledger.generated, 300 * 480, "every step is counted");
        // Whole steps up to `keep`, in memory no larger than `keep` samples of ADPCM.
        assert_eq!(a.audio.len(), 208 * 480);
        assert!(
            a.audio.capacity() <= keep as usize,
            "{}",
            a.audio.capacity()
        );
        assert!(
            a.audio.heap_bytes() <= keep as usize / 2,
            "{}",
            a.audio.heap_bytes()
        );
        // A constant decodes to itself once the step has adapted.
        assert!(a.audio.samples().skip(480).all(|s| (s - 8_192).abs() < 64));
        let (audio, _) = a.take_audio().expect("audio");
        assert_eq!(audio.heap_bytes(), 208 * 480 / 2);
    }
}
