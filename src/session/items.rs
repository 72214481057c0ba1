//! Client item operations: create, retrieve, truncate, delete.

use std::sync::Arc;

use base64::Engine;

use duet_media::Adpcm;

use super::audio_io::{Encoder, RATE};
use super::conversation::{Conversation, Placement, StoredItem};
use super::ledger::SAMPLES_PER_MS;
use super::memory::Metering;
use super::Rendered;
use super::Session;
use crate::protocol::AudioFormat;
use crate::protocol::{
    codes, ids, ClientEvent, Content, ErrorPayload, Item, ItemStatus, Role, ServerEvent,
    ServerEventBody,
};

/// Replaces every `"marker"` string in `json` with `"value"`, in one exact-size buffer.
/// (`value` is base64: nothing to escape.)
fn splice(json: &str, marker: &str, value: &str) -> String {
    let quoted = format!("\"{marker}\"");
    let n = json.matches(quoted.as_str()).count();
    let mut out = String::with_capacity(json.len() + n * value.len());
    let mut rest = json;
    while let Some(at) = rest.find(quoted.as_str()) {
        out.push_str(&rest[..at]);
        out.push('"');
        out.push_str(value);
        out.push('"');
        rest = &rest[at + quoted.len()..];
    }
    out.push_str(rest);
    out
}

/// An unknown `item_id` in `conversation.item.{retrieve,truncate,delete}`, with OpenAI's code
/// and message for each (`verb`: "retrieving", "truncating", "deleting").
fn not_found(code: &'static str, verb: &str, item_id: &str) -> ErrorPayload {
    ErrorPayload::invalid(
        code,
        format!("Error {verb} item: the item with id '{item_id}' does not exist."),
    )
    .with_param("item_id")
}

impl Session {
    /// `conversation.item.{create,retrieve,truncate,delete}`: the conversation does them
    /// and returns the events to send. An item the active response is generating can be
    /// neither truncated nor deleted.
    pub(super) fn item_event(&mut self, event: ClientEvent) -> Result<(), ErrorPayload> {
        let busy = self.reply.active.as_ref().map(|a| a.item_id.as_str());
        let formats = (self.cfg.audio.input.format, self.cfg.audio.output.format);
        match event {
            ClientEvent::ConversationItemCreate {
                previous_item_id,
                item,
            } => {
                let rules = (formats.0, self.limits.max_item_samples);
                let events =
                    self.conv
                        .create_item(previous_item_id, *item, rules, &mut self.meters)?;
                self.out.emit_all(events);
            }
            ClientEvent::ConversationItemRetrieve { item_id } => {
                let cause = self.out.cause.clone();
                let event = self
                    .conv
                    .retrieve_item(&item_id, formats, &mut self.meters, cause)?;
                self.out.emit_rendered(event);
            }
            ClientEvent::ConversationItemTruncate {
                item_id,
                content_index,
                audio_end_ms,
            } => {
                let event = self
                    .conv
                    .truncate_item(&item_id, content_index, audio_end_ms, busy)?;
                self.out.emit(event);
            }
            ClientEvent::ConversationItemDelete { item_id } => {
                let event = self.conv.delete_item(&item_id, busy)?;
                self.out.emit(event);
            }
            _ => {}
        }
        Ok(())
    }
}

impl Conversation {
    /// `conversation.item.create`: the events to send. `rules`: the input audio format and
    /// the most samples one item's audio may have.
    pub(super) fn create_item(
        &mut self,
        previous: Option<String>,
        mut item: Item,
        rules: (AudioFormat, u64),
        meters: &mut Metering,
    ) -> Result<Vec<ServerEventBody>, ErrorPayload> {
        // The text first (it is cheap to measure; the audio is decoded below).
        let text = item.text_bytes() as u64;
        let max = self.max_text_bytes() as u64;
        if text > max {
            return Err(ErrorPayload::invalid(
                codes::ITEM_TEXT_TOO_LONG,
                format!(
                    "the item holds {text} bytes of text; the conversation keeps at most {max} (--max-conversation-text-mib {})",
                    max >> 20
                ),
            )
            .with_param("item.content"));
        }
        // Room for the text and for its echoes in `conversation.item.added` and `.done` (the
        // event queue charges those itself, and could only close the transport if it found
        // no room): their share is handed back at once.
        meters.reserve(3 * text)?;
        meters.give_back(2 * text);
        let audio = self.item_audio(&mut item, rules, meters)?;
        item.stamp(ids::item_id, ItemStatus::Completed);
        let id = item.id().unwrap_or_default().to_string();
        let placement = Placement::from_previous(previous);
        let stored = StoredItem::with_audio(item.clone(), audio);
        let evicted = self.insert(placement, stored)?;
        let previous_item_id = self.previous_id(&id);
        Ok(super::conversation::item_added(
            previous_item_id,
            item,
            true,
            evicted,
        ))
    }

    /// Validates a created item's content and decodes the audio of a user `input_audio` part
    /// (which then leaves the rendered item).
    fn item_audio(
        &self,
        item: &mut Item,
        (format, max_item_samples): (AudioFormat, u64),
        meters: &mut Metering,
    ) -> Result<Option<Arc<Adpcm>>, ErrorPayload> {
        let Item::Message { role, content, .. } = item else {
            return Ok(None);
        };
        let mut audio = None;
        for part in content.iter_mut() {
            match (*role, part) {
                (Role::Assistant, Content::OutputAudio { .. }) => {
                    return Err(ErrorPayload::invalid(
                        codes::INVALID_VALUE,
                        "assistant audio messages cannot be created; use output_text",
                    )
                    .with_param("item.content"))
                }
                (Role::User, Content::InputAudio { audio: data, .. }) => {
                    if let Some(b64) = data.take() {
                        if audio.is_some() {
                            return Err(ErrorPayload::invalid(
                                codes::UNSUPPORTED,
                                "one input_audio part per item",
                            )
                            .with_param("item.content"));
                        }
                        let max = max_item_samples.min(self.max_audio_samples());
                        let samples = check_item_audio(format, max, &b64)?;
                        // The stored ADPCM, and for a moment the decoded bytes and PCM16.
                        let (decoded, _) = super::audio_io::decoded_size(format, &b64);
                        meters.reserve(samples / 2 + 1 + samples * 2 + decoded)?;
                        let pcm = super::audio_io::decode_clip_pcm16(format, &b64)
                            .map_err(|e| e.with_param("item.content.audio"))?;
                        audio = Some(Arc::new(Adpcm::from_i16(&pcm)));
                    }
                }
                (Role::User | Role::System, Content::InputText { .. }) => {}
                (Role::Assistant, Content::OutputText { .. }) => {}
                (role, _) => {
                    return Err(ErrorPayload::invalid(
                        codes::INVALID_VALUE,
                        format!("content type not allowed for role {role:?}").to_lowercase(),
                    )
                    .with_param("item.content"))
                }
            }
        }
        Ok(audio)
    }

    /// `conversation.item.retrieve`: the item with its audio (base64, in the session's
    /// format). The audio is decoded and encoded once per format and cached, and spliced into
    /// the rendered event: a long item costs one buffer of its size, not several copies.
    /// Stored audio goes out as PCM16 without a pass through f32.
    pub(super) fn retrieve_item(
        &mut self,
        item_id: &str,
        (input, output): (AudioFormat, AudioFormat),
        meters: &mut Metering,
        cause: Option<Arc<str>>,
    ) -> Result<Rendered, ErrorPayload> {
        let stored = self.get(item_id).ok_or_else(|| {
            not_found(codes::ITEM_RETRIEVE_INVALID_ITEM_ID, "retrieving", item_id)
        })?;
        let mut item = stored.item.clone();
        // The encoding the cache may keep (settled away again when it was cached already),
        // and the decoded PCM16 for a moment.
        let samples = stored.audio.as_ref().map_or(0, |a| a.len() as u64);
        meters.reserve(samples * 8 / 3 + samples * 2)?;
        let format = match &item {
            Item::Message {
                role: Role::Assistant,
                ..
            } => output,
            _ => input,
        };
        let encode = |audio: &Adpcm| {
            base64::engine::general_purpose::STANDARD
                .encode(Encoder::encode_clip_pcm16(format, &audio.to_i16()))
        };
        let b64 = self.audio_base64(item_id, format, encode);
        let marker = format!("duet-audio-{}", ids::event_id());
        if let (Some(_), Item::Message { content, .. }) = (&b64, &mut item) {
            for part in content.iter_mut() {
                if let Content::InputAudio { audio, .. } | Content::OutputAudio { audio, .. } = part
                {
                    *audio = Some(marker.clone());
                }
            }
        }
        let event = ServerEvent::new(ServerEventBody::ConversationItemRetrieved {
            item: Box::new(item),
        });
        let json = match &b64 {
            Some(b64) => splice(&event.to_json(), &marker, b64),
            None => event.to_json(),
        };
        Ok(Rendered::from_json(json, event.kind(), cause))
    }

    /// `conversation.item.truncate`: cuts an assistant audio item (audio and transcript) to
    /// `audio_end_ms`.
    /// `busy`: the item the active response is generating.
    pub(super) fn truncate_item(
        &mut self,
        item_id: &str,
        content_index: u32,
        audio_end_ms: u64,
        busy: Option<&str>,
    ) -> Result<ServerEventBody, ErrorPayload> {
        if busy == Some(item_id) {
            return Err(ErrorPayload::invalid(
                codes::INVALID_VALUE,
                "the item is still being generated; cancel the response first",
            )
            .with_param("item_id"));
        }
        let stored = self.get(item_id).ok_or_else(|| {
            not_found(codes::ITEM_TRUNCATE_INVALID_ITEM_ID, "truncating", item_id)
        })?;
        let (
            Item::Message {
                role: Role::Assistant,
                content,
                ..
            },
            Some(ledger),
        ) = (&stored.item, &stored.ledger)
        else {
            return Err(ErrorPayload::invalid(
                codes::INVALID_VALUE,
                "only assistant audio items can be truncated",
            )
            .with_param("item_id"));
        };
        let Some(Content::OutputAudio { .. }) = content.get(content_index as usize) else {
            return Err(ErrorPayload::invalid(
                codes::INVALID_VALUE,
                format!("content_index {content_index} is not an audio part"),
            )
            .with_param("content_index"));
        };
        let have_ms = ledger.generated_ms();
        if audio_end_ms > have_ms {
            return Err(ErrorPayload::invalid(
                codes::INVALID_VALUE,
                format!("audio_end_ms {audio_end_ms} is beyond the item's audio of {have_ms} ms"),
            )
            .with_param("audio_end_ms"));
        }
        self.cut_audio(
            item_id,
            content_index as usize,
            audio_end_ms * SAMPLES_PER_MS,
        );
        Ok(ServerEventBody::ConversationItemTruncated {
            item_id: item_id.to_string(),
            content_index,
            audio_end_ms,
        })
    }

    /// `conversation.item.delete`.
    pub(super) fn delete_item(
        &mut self,
        item_id: &str,
        busy: Option<&str>,
    ) -> Result<ServerEventBody, ErrorPayload> {
        if busy == Some(item_id) {
            return Err(ErrorPayload::invalid(
                codes::INVALID_VALUE,
                "the item belongs to the active response; cancel it first",
            )
            .with_param("item_id"));
        }
        self.remove(item_id)
            .ok_or_else(|| not_found(codes::ITEM_DELETE_INVALID_ITEM_ID, "deleting", item_id))?;
        Ok(ServerEventBody::ConversationItemDeleted {
            item_id: item_id.to_string(),
        })
    }
}

/// Refuses, before decoding, base64 audio longer than one item may hold (or than the
/// whole conversation stores: the new item is never evicted to make room for itself).
/// `max`: the most 24 kHz samples it may hold. Returns its length in 24 kHz samples
/// (about).
fn check_item_audio(format: AudioFormat, max: u64, b64: &str) -> Result<u64, ErrorPayload> {
    let bytes = b64.len() as u64 / 4 * 3;
    let samples = bytes / u64::from(format.bytes_per_sample()) * u64::from(RATE)
        / u64::from(format.sample_rate());
    if samples <= max {
        return Ok(samples);
    }
    Err(ErrorPayload::invalid(
        codes::ITEM_AUDIO_TOO_LONG,
        format!(
            "the item's audio is about {} s long; one item holds at most {} s",
            samples / u64::from(RATE),
            max / u64::from(RATE)
        ),
    )
    .with_param("item.content.audio"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn splice_replaces_every_marker_once() {
        let json = r#"{"a":"m1","b":["m1","x"],"c":"m1x"}"#;
        assert_eq!(
            super::splice(json, "m1", "QUJD"),
            r#"{"a":"QUJD","b":["QUJD","x"],"c":"m1x"}"#
        );
        assert_eq!(super::splice("{}", "m1", "Q"), "{}");
    }
}
