//! The conversation: items in order, with the audio behind them, bounded in item count and
//! stored audio. When a bound is exceeded the oldest items are evicted (the caller reports
//! them as `conversation.item.deleted`), as `truncation: "auto"` would.

use std::sync::Arc;

use duet_media::Adpcm;
use duet_models::{ContextItem, ToolCall, TurnInput};

use super::ledger::PlaybackLedger;
use crate::protocol::{codes, AudioFormat, Content, ErrorPayload, Item, Role, ServerEventBody};

/// One item and what stays server-side: its audio (24 kHz, IMA ADPCM) and, for assistant
/// audio, the ledger.
#[derive(Clone, Debug)]
pub struct StoredItem {
    /// The item without audio bytes.
    pub item: Item,
    /// The item's audio, if it has an audio part: 4-bit ADPCM, a quarter of PCM16's bytes.
    pub audio: Option<Arc<Adpcm>>,
    /// Assistant audio: what was generated and heard, and the timed transcript.
    pub ledger: Option<PlaybackLedger>,
    /// The audio as base64 in the format it was last retrieved in: retrieving a long item
    /// again costs a copy, not a resample and an encode of every sample.
    encoded: Option<(AudioFormat, Arc<String>)>,
}

impl StoredItem {
    /// An item without audio.
    pub fn plain(item: Item) -> Self {
        Self::with_audio(item, None)
    }

    /// An item with its audio (if any).
    pub fn with_audio(item: Item, audio: Option<Arc<Adpcm>>) -> Self {
        Self {
            item,
            audio,
            ledger: None,
            encoded: None,
        }
    }

    fn id(&self) -> &str {
        self.item.id().unwrap_or_default()
    }

    fn audio_len(&self) -> u64 {
        self.audio.as_ref().map_or(0, |a| a.len() as u64)
    }

    /// Bytes its stored audio takes.
    pub fn audio_bytes(&self) -> usize {
        self.audio.as_deref().map_or(0, Adpcm::heap_bytes)
    }

    /// Bytes its cached retrieve encoding takes.
    fn encoded_bytes(&self) -> usize {
        self.encoded.as_ref().map_or(0, |(_, b64)| b64.len())
    }

    /// Bytes it holds besides audio (its text, ids, the ledger's timed transcript).
    pub fn text_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.item.text_bytes()
            + self.ledger.as_ref().map_or(0, PlaybackLedger::text_bytes)
    }
}

/// Where a new item goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// After the last item.
    End,
    /// Before every item (`previous_item_id: "root"`).
    Root,
    /// After the item with this id.
    After(String),
}

impl Placement {
    /// From a client's `previous_item_id`.
    pub fn from_previous(previous: Option<String>) -> Self {
        match previous.as_deref() {
            None => Placement::End,
            Some("root") => Placement::Root,
            Some(_) => Placement::After(previous.unwrap_or_default()),
        }
    }
}

/// `conversation.item.added` (and, when `done`, `conversation.item.done`) for `item`, then
/// `conversation.item.deleted` for each of the items its insertion `evicted`.
pub(super) fn item_added(
    previous_item_id: Option<String>,
    item: Item,
    done: bool,
    evicted: Vec<String>,
) -> Vec<ServerEventBody> {
    let mut events = vec![ServerEventBody::ConversationItemAdded {
        previous_item_id: previous_item_id.clone(),
        item: Box::new(item.clone()),
    }];
    if done {
        events.push(ServerEventBody::ConversationItemDone {
            previous_item_id,
            item: Box::new(item),
        });
    }
    events.extend(deleted(evicted));
    events
}

/// `conversation.item.deleted` for each evicted item.
pub(super) fn deleted(evicted: Vec<String>) -> impl Iterator<Item = ServerEventBody> {
    evicted
        .into_iter()
        .map(|item_id| ServerEventBody::ConversationItemDeleted { item_id })
}

/// The items of one conversation.
#[derive(Debug)]
pub struct Conversation {
    /// `conv_…`, for the responses in it.
    pub id: String,
    items: Vec<StoredItem>,
    audio_samples: u64,
    /// Bytes the stored audio takes.
    audio_bytes: usize,
    /// Bytes of the one cached retrieve encoding (0: none).
    encoded_bytes: usize,
    /// Bytes the items hold besides audio ([`StoredItem::text_bytes`]).
    text_bytes: usize,
    max_items: usize,
    max_audio_samples: u64,
    max_text_bytes: usize,
    /// Items that are never evicted while pinned: assistant items whose audio is still
    /// playing (their truncation to what was heard is still to come).
    pinned: Vec<String>,
}

impl Conversation {
    /// An empty conversation with limits.
    pub fn new(max_items: usize, max_audio_samples: u64) -> Self {
        Self {
            id: crate::protocol::ids::conversation_id(),
            items: Vec::new(),
            audio_samples: 0,
            audio_bytes: 0,
            encoded_bytes: 0,
            text_bytes: 0,
            max_items: max_items.max(2),
            max_audio_samples,
            max_text_bytes: usize::MAX,
            pinned: Vec::new(),
        }
    }

    /// The same, keeping at most `bytes` of text ([`StoredItem::text_bytes`]) before the
    /// oldest items are evicted.
    pub fn with_max_text(mut self, bytes: usize) -> Self {
        self.max_text_bytes = bytes;
        self
    }

    /// Appends `item`: the events that report it (`conversation.item.added`, then the items
    /// evicted to make room as deleted).
    pub fn append(&mut self, item: Item) -> Result<Vec<ServerEventBody>, ErrorPayload> {
        let id = item.id().unwrap_or_default().to_string();
        let evicted = self.insert(Placement::End, StoredItem::plain(item.clone()))?;
        let prev = self.previous_id(&id);
        Ok(item_added(prev, item, false, evicted))
    }

    /// The finished assistant item `id` takes its final form, its audio and ledger: the
    /// events that report it (`conversation.item.done`, then the items evicted as deleted;
    /// none when the item is gone).
    pub fn finish_answer(
        &mut self,
        id: &str,
        item: Item,
        audio: Option<(Adpcm, PlaybackLedger)>,
    ) -> Vec<ServerEventBody> {
        if !self.finish_item(id, item.clone(), audio) {
            return Vec::new();
        }
        let evicted = self.evict_except(id);
        let mut events = vec![ServerEventBody::ConversationItemDone {
            previous_item_id: self.previous_id(id),
            item: Box::new(item),
        }];
        events.extend(deleted(evicted));
        events
    }

    /// Cuts the assistant item `id` to the `sent` samples the caller heard: the
    /// `conversation.item.truncated` that reports it, even when everything generated was
    /// heard (the caller learns exactly where the item ends). None when it has no audio.
    pub fn truncate_to_played(&mut self, id: &str, sent: u64) -> Option<ServerEventBody> {
        let generated = self
            .get(id)
            .and_then(|s| s.ledger.as_ref())
            .map_or(0, |l| l.generated);
        if generated == 0 {
            return None;
        }
        self.cut_audio(id, 0, sent)?;
        Some(ServerEventBody::ConversationItemTruncated {
            item_id: id.to_string(),
            content_index: 0,
            audio_end_ms: sent / super::ledger::SAMPLES_PER_MS,
        })
    }

    /// The most text the conversation keeps, in bytes.
    pub fn max_text_bytes(&self) -> usize {
        self.max_text_bytes
    }

    /// Keeps `id` from eviction until [`Self::unpin`].
    pub fn pin(&mut self, id: &str) {
        self.pinned.push(id.to_string());
    }

    /// Lets `id` be evicted again.
    pub fn unpin(&mut self, id: &str) {
        if let Some(i) = self.pinned.iter().position(|p| p == id) {
            self.pinned.swap_remove(i);
        }
    }

    fn position(&self, id: &str) -> Option<usize> {
        self.items.iter().position(|s| s.id() == id)
    }

    /// The item with `id`.
    pub fn get(&self, id: &str) -> Option<&StoredItem> {
        self.position(id).map(|i| &self.items[i])
    }

    /// The item with `id`, mutably (private: its audio and text change only through this
    /// type's methods, which keep the counts).
    fn get_mut(&mut self, id: &str) -> Option<&mut StoredItem> {
        self.position(id).map(|i| &mut self.items[i])
    }

    /// Fills a user audio item's `transcript`. `false` when there is no such item.
    pub fn set_transcript(&mut self, id: &str, text: &str) -> bool {
        let Some(stored) = self.get_mut(id) else {
            return false;
        };
        let before = stored.text_bytes();
        if let Item::Message { content, .. } = &mut stored.item {
            if let Some(Content::InputAudio { transcript, .. }) = content.first_mut() {
                *transcript = Some(text.to_string());
            }
        }
        // Only this item's text changed: the total follows it (no pass over the others).
        let after = stored.text_bytes();
        self.text_bytes = self.text_bytes - before + after;
        true
    }

    /// The most audio the conversation stores, in samples.
    pub fn max_audio_samples(&self) -> u64 {
        self.max_audio_samples
    }

    /// The item's audio as base64 in `format`, encoded by `encode` on the first request for
    /// that format and cached until the audio changes or another item is encoded.
    pub fn audio_base64(
        &mut self,
        id: &str,
        format: AudioFormat,
        encode: impl FnOnce(&Adpcm) -> String,
    ) -> Option<Arc<String>> {
        let i = self.position(id)?;
        let audio = self.items[i].audio.clone()?;
        if let Some((f, b64)) = &self.items[i].encoded {
            if *f == format {
                return Some(b64.clone());
            }
        }
        // One cached encoding per conversation: memory stays one item's worth.
        for s in &mut self.items {
            s.encoded = None;
        }
        let b64 = Arc::new(encode(&audio));
        self.encoded_bytes = b64.len();
        self.items[i].encoded = Some((format, b64.clone()));
        Some(b64)
    }

    /// Finishes a response's item in place: its final rendering, audio and ledger.
    pub fn finish_item(
        &mut self,
        id: &str,
        item: Item,
        audio: Option<(Adpcm, PlaybackLedger)>,
    ) -> bool {
        let Some(stored) = self.get_mut(id) else {
            return false;
        };
        stored.item = item;
        if let Some((audio, ledger)) = audio {
            stored.audio = Some(Arc::new(audio));
            stored.ledger = Some(ledger);
            stored.encoded = None;
        }
        self.recount();
        true
    }

    /// Cuts an assistant audio item's audio, ledger and the transcript of content part
    /// `content_index` to its first `samples`. `None` when the item has no ledger or no such
    /// part (nothing changed).
    pub fn cut_audio(&mut self, id: &str, content_index: usize, samples: u64) -> Option<()> {
        let stored = self.get_mut(id)?;
        let (Item::Message { content, .. }, Some(ledger)) = (&mut stored.item, &mut stored.ledger)
        else {
            return None;
        };
        let Some(Content::OutputAudio { transcript, .. }) = content.get_mut(content_index) else {
            return None;
        };
        *transcript = Some(ledger.truncate(samples));
        if let Some(audio) = &mut stored.audio {
            let audio = Arc::make_mut(audio);
            audio.truncate(usize::try_from(samples).unwrap_or(usize::MAX));
            audio.shrink_to_fit();
        }
        stored.encoded = None;
        self.recount();
        Some(())
    }

    /// Whether an item with `id` exists.
    pub fn contains(&self, id: &str) -> bool {
        self.position(id).is_some()
    }

    /// The id of the item before `id` (`None` for the first).
    pub fn previous_id(&self, id: &str) -> Option<String> {
        let i = self.position(id)?;
        i.checked_sub(1).map(|p| self.items[p].id().to_string())
    }

    /// Inserts an item. Returns the ids of items evicted to stay within the limits.
    pub fn insert(&mut self, at: Placement, item: StoredItem) -> Result<Vec<String>, ErrorPayload> {
        if self.contains(item.id()) {
            return Err(ErrorPayload::invalid(
                codes::INVALID_VALUE,
                format!("an item with id {:?} already exists", item.id()),
            )
            .with_param("item.id"));
        }
        let index = match at {
            Placement::End => self.items.len(),
            Placement::Root => 0,
            Placement::After(prev) => self.position(&prev).map(|i| i + 1).ok_or_else(|| {
                ErrorPayload::invalid(
                    codes::PREVIOUS_ITEM_NOT_FOUND,
                    format!("previous_item_id {prev:?} does not exist in the conversation"),
                )
                .with_param("previous_item_id")
            })?,
        };
        let id = item.id().to_string();
        self.audio_samples += item.audio_len();
        self.audio_bytes += item.audio_bytes();
        self.text_bytes += item.text_bytes();
        self.items.insert(index, item);
        Ok(self.evict_except(&id))
    }

    /// Removes an item.
    pub fn remove(&mut self, id: &str) -> Option<StoredItem> {
        let i = self.position(id)?;
        let item = self.items.remove(i);
        self.uncount(&item);
        Some(item)
    }

    /// Recomputes the totals after an item's audio changed.
    fn recount(&mut self) {
        self.audio_samples = self.items.iter().map(StoredItem::audio_len).sum();
        self.audio_bytes = self.items.iter().map(StoredItem::audio_bytes).sum();
        self.encoded_bytes = self.items.iter().map(StoredItem::encoded_bytes).sum();
        self.text_bytes = self.items.iter().map(StoredItem::text_bytes).sum();
    }

    /// An item left: its audio, and the cached encoding if it was its.
    fn uncount(&mut self, gone: &StoredItem) {
        self.audio_samples -= gone.audio_len();
        self.audio_bytes -= gone.audio_bytes();
        self.encoded_bytes -= gone.encoded_bytes();
        self.text_bytes -= gone.text_bytes();
    }

    /// Evicts the oldest items (never `keep`, nor a pinned one) until the limits (items,
    /// audio, text) hold.
    pub fn evict_except(&mut self, keep: &str) -> Vec<String> {
        let mut evicted = Vec::new();
        while self.items.len() > self.max_items
            || self.audio_samples > self.max_audio_samples
            || self.text_bytes > self.max_text_bytes
        {
            let evictable =
                |s: &StoredItem| s.id() != keep && !self.pinned.iter().any(|p| p == s.id());
            let Some(i) = self.items.iter().position(evictable) else {
                break;
            };
            let gone = self.items.remove(i);
            self.uncount(&gone);
            evicted.push(gone.id().to_string());
        }
        evicted
    }

    /// The newest user item with audio, if it is the newest user item.
    pub fn last_user_audio_id(&self) -> Option<&str> {
        let last = self.items.iter().rev().find(|s| {
            matches!(
                s.item,
                Item::Message {
                    role: Role::User,
                    ..
                }
            )
        })?;
        last.audio.as_ref().map(|_| last.id())
    }

    /// The whole conversation as model context, oldest first: every item the model can
    /// read, user audio as its transcript, assistant audio as the transcript of what was
    /// heard (a truncated item keeps only that). The newest `audio_turns` user audio items
    /// also carry their audio (decoded, for models that listen to it); older ones without a
    /// transcript have nothing a model can read and are left out.
    pub fn context(&self, audio_turns: usize) -> Vec<ContextItem> {
        let mut audio_left = audio_turns;
        let mut out: Vec<ContextItem> = self
            .items
            .iter()
            .rev()
            .filter_map(|s| {
                let with_audio = audio_left > 0 && s.audio.is_some() && is_user(&s.item);
                audio_left -= usize::from(with_audio);
                context_item(s, with_audio)
            })
            .collect();
        out.reverse();
        out
    }

    /// Total stored audio in samples.
    #[cfg(test)]
    pub fn audio_samples(&self) -> u64 {
        self.audio_samples
    }

    /// Bytes the stored audio takes.
    #[cfg(test)]
    pub fn audio_bytes(&self) -> usize {
        debug_assert_eq!(
            self.audio_bytes,
            self.items
                .iter()
                .map(StoredItem::audio_bytes)
                .sum::<usize>()
        );
        self.audio_bytes
    }

    /// Bytes the items hold besides audio.
    #[cfg(test)]
    pub fn text_bytes(&self) -> usize {
        self.text_bytes
    }

    /// Bytes the stored audio, the cached retrieve encoding and the items' text take (kept
    /// as totals: the session reads them after every step).
    pub fn held_bytes(&self) -> usize {
        self.audio_bytes + self.encoded_bytes + self.text_bytes
    }
}

fn is_user(item: &Item) -> bool {
    matches!(
        item,
        Item::Message {
            role: Role::User,
            ..
        }
    )
}

/// A stored item as model context (`with_audio`: a user item's audio goes too).
pub fn context_item(s: &StoredItem, with_audio: bool) -> Option<ContextItem> {
    match &s.item {
        Item::Message {
            role: Role::User, ..
        } => {
            let audio = || {
                with_audio
                    .then(|| s.audio.as_deref().map(|a| Arc::from(a.to_f32())))
                    .flatten()
            };
            user_turn_of(&s.item, audio).map(ContextItem::User)
        }
        Item::Message {
            role: Role::System,
            content,
            ..
        } => some_text(content).map(ContextItem::System),
        Item::Message {
            role: Role::Assistant,
            content,
            ..
        } => some_text(content).map(ContextItem::Assistant),
        Item::FunctionCall {
            name,
            call_id,
            arguments,
            ..
        } => Some(ContextItem::ToolCall(ToolCall {
            call_id: call_id.clone().unwrap_or_default(),
            name: name.clone(),
            arguments: arguments.clone(),
        })),
        Item::FunctionCallOutput {
            call_id, output, ..
        } => Some(ContextItem::ToolResult {
            call_id: call_id.clone(),
            output: output.clone(),
        }),
    }
}

/// The words of a message's parts (text, transcripts), joined; `None` when it has none.
fn some_text(content: &[Content]) -> Option<String> {
    let parts: Vec<&str> = content
        .iter()
        .filter_map(|c| match c {
            Content::InputText { text } | Content::OutputText { text } => Some(text.as_str()),
            Content::InputAudio {
                transcript: Some(t),
                ..
            }
            | Content::OutputAudio {
                transcript: Some(t),
                ..
            } => Some(t.as_str()),
            _ => None,
        })
        .filter(|t| !t.trim().is_empty())
        .collect();
    (!parts.is_empty()).then(|| parts.join(" "))
}

/// A user message `item` as model input, with its audio from `audio` (asked for only when
/// `item` is a user message).
pub fn user_turn_of(item: &Item, audio: impl FnOnce() -> Option<Arc<[f32]>>) -> Option<TurnInput> {
    let Item::Message {
        role: Role::User,
        content,
        ..
    } = item
    else {
        return None;
    };
    if let Some(audio) = audio() {
        let transcript = content.iter().find_map(|c| match c {
            Content::InputAudio {
                transcript: Some(t),
                ..
            } => Some(t.clone()),
            _ => None,
        });
        return Some(match transcript {
            Some(transcript) => TurnInput::Transcribed { audio, transcript },
            None => TurnInput::Audio(audio),
        });
    }
    let text: Vec<&str> = content
        .iter()
        .filter_map(|c| match c {
            Content::InputText { text } => Some(text.as_str()),
            Content::InputAudio {
                transcript: Some(t),
                ..
            } => Some(t.as_str()),
            _ => None,
        })
        .collect();
    (!text.is_empty()).then(|| TurnInput::Text(text.join(" ")))
}

#[cfg(test)]
#[path = "conversation_tests.rs"]
mod tests;
