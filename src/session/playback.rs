//! WebRTC playback: the session's view of the playback ledger. The media engine reports what
//! actually left on RTP; from that come `output_audio_buffer.started|stopped|cleared`, and on
//! interruption the assistant item is truncated to what the caller heard.

use super::conversation::Conversation;
use super::reply::{Cx, Reply};
use super::{MediaSink, PlaybackTag};
use crate::protocol::ServerEventBody;

/// One response's audio in the engine's playback queue.
#[derive(Debug)]
pub(super) struct Track {
    /// Response tag shared with the engine.
    tag: PlaybackTag,
    /// `resp_…`.
    response_id: String,
    /// The assistant item in the conversation (`None` for out-of-band responses).
    item_id: Option<String>,
    /// 24 kHz samples that left on RTP.
    sent: u64,
    /// Whether `output_audio_buffer.started` went out.
    started: bool,
}

/// What the session knows of the engine's playback queue.
#[derive(Debug)]
pub(super) struct PlaybackView {
    /// Tag of the next response.
    next: PlaybackTag,
    /// Responses whose audio the engine is playing, oldest first.
    tracks: Vec<Track>,
    /// A purge was requested and its report is pending.
    clearing: bool,
    /// The purge covers responses with tags below this (those started before it): audio
    /// sent to the engine after the purge command is queued after it and plays.
    clear_below: PlaybackTag,
    /// The most recent response's id (for `output_audio_buffer.cleared` when nothing plays).
    pub(super) last_response_id: Option<String>,
}

impl Default for PlaybackView {
    fn default() -> Self {
        Self {
            next: PlaybackTag(1),
            tracks: Vec::new(),
            clearing: false,
            clear_below: PlaybackTag(0),
            last_response_id: None,
        }
    }
}

impl PlaybackView {
    /// A fresh view for a new call that keeps numbering tags after `old`'s (nothing of the
    /// old call plays in the new one).
    pub(super) fn continuing(old: &Self) -> Self {
        Self {
            next: old.next,
            clear_below: old.next,
            last_response_id: old.last_response_id.clone(),
            ..Self::default()
        }
    }

    /// A tag for a new response.
    pub(super) fn next_tag(&mut self) -> PlaybackTag {
        let tag = self.next;
        self.next = PlaybackTag(tag.0 + 1);
        tag
    }

    /// Whether any response's audio is still playing.
    pub(super) fn is_playing(&self) -> bool {
        !self.tracks.is_empty()
    }

    /// Starts tracking a response's playback (WebRTC audio responses); its item stays in
    /// `conv` until its truncation to what was heard may no longer come.
    pub(super) fn track(
        &mut self,
        conv: &mut Conversation,
        tag: PlaybackTag,
        response_id: &str,
        item_id: Option<&str>,
    ) {
        if let Some(id) = item_id {
            conv.pin(id);
        }
        self.tracks.push(Track {
            tag,
            response_id: response_id.to_string(),
            item_id: item_id.map(str::to_string),
            sent: 0,
            started: false,
        });
    }

    /// The response finished generating: the engine (`sink`) reports when its last sample
    /// left.
    pub(super) fn finish(&self, sink: &dyn MediaSink, tag: PlaybackTag) {
        if self.tracks.iter().any(|t| t.tag == tag) {
            sink.finish(tag);
        }
    }

    fn track_of(&mut self, tag: PlaybackTag) -> Option<&mut Track> {
        self.tracks.iter_mut().find(|t| t.tag == tag)
    }

    /// A purge was sent: it covers the responses started so far.
    fn clear_requested(&mut self) {
        self.clearing = true;
        self.clear_below = self.next;
    }

    /// The purge was done: the tracks it interrupted (none when nothing was pending).
    fn cleared(&mut self) -> Option<Vec<Track>> {
        if !std::mem::take(&mut self.clearing) {
            return None;
        }
        // Responses started since the purge command (e.g. a `response.create` right after
        // the clear) play on: their audio reached the engine after the purge.
        let below = self.clear_below;
        let (interrupted, live) = std::mem::take(&mut self.tracks)
            .into_iter()
            .partition(|t| t.tag < below);
        self.tracks = live;
        Some(interrupted)
    }
}

impl Reply {
    /// The session leaves a WebRTC call (it dropped, or another transport took over): the
    /// answer that was playing is cancelled and its item truncated to what the caller heard,
    /// at once (the call's engine will not report a purge).
    pub(super) fn abandon_playback(&mut self, cx: &mut Cx<'_>) {
        if !cx.transport.is_webrtc() {
            return;
        }
        self.clear_output(cx, "client_cancelled");
        self.on_cleared(cx);
        self.view = PlaybackView::continuing(&self.view);
    }

    /// The engine sent `samples` of `tag`.
    pub(super) fn on_played(&mut self, cx: &mut Cx<'_>, tag: PlaybackTag, samples: u64) {
        if let Some(a) = self.active.as_mut().filter(|a| a.tag == tag) {
            a.ledger.sent(samples);
        }
        let Some(track) = self.view.track_of(tag) else {
            return;
        };
        track.sent += samples;
        if track.started {
            return;
        }
        track.started = true;
        let response_id = track.response_id.clone();
        if let Some(t) = cx.timers.stamps.turn_end.take() {
            crate::metrics::METRICS
                .speech_end_to_first_audio
                .observe(cx.out.now.saturating_duration_since(t));
        }
        cx.out
            .emit(ServerEventBody::OutputAudioBufferStarted { response_id });
    }

    /// The last sample of `tag` left: `output_audio_buffer.stopped`.
    pub(super) fn on_drained(&mut self, cx: &mut Cx<'_>, tag: PlaybackTag) {
        let Some(i) = self.view.tracks.iter().position(|t| t.tag == tag) else {
            return;
        };
        let track = self.view.tracks.remove(i);
        if let Some(id) = &track.item_id {
            cx.conv.unpin(id);
        }
        if track.started {
            cx.out.emit(ServerEventBody::OutputAudioBufferStopped {
                response_id: track.response_id,
            });
        }
    }

    /// `output_audio_buffer.clear`, or barge-in on WebRTC: cancel the response, purge the
    /// queue; [`Self::on_cleared`] finishes the job once the engine confirms.
    pub(super) fn clear_output(&mut self, cx: &mut Cx<'_>, reason: &str) {
        self.cancel_active(cx, reason);
        if let Some(sink) = cx.transport.sink() {
            sink.clear();
            self.view.clear_requested();
        }
    }

    /// The queue is empty: report `output_audio_buffer.cleared` and truncate each interrupted
    /// item to what was played.
    pub(super) fn on_cleared(&mut self, cx: &mut Cx<'_>) {
        let Some(interrupted) = self.view.cleared() else {
            return;
        };
        if let Some(t) = cx.timers.stamps.barge_at.take() {
            crate::metrics::METRICS
                .barge_in
                .observe(cx.out.now.saturating_duration_since(t));
        }
        if interrupted.is_empty() {
            // Nothing was playing (e.g. the answer already played out after a
            // `response.cancel`): the GA event still names a response, the latest one.
            let response_id = self.view.last_response_id.clone().unwrap_or_default();
            cx.out
                .emit(ServerEventBody::OutputAudioBufferCleared { response_id });
        }
        for track in interrupted {
            cx.out.emit(ServerEventBody::OutputAudioBufferCleared {
                response_id: track.response_id.clone(),
            });
            if let Some(item_id) = &track.item_id {
                if let Some(truncated) = cx.conv.truncate_to_played(item_id, track.sent) {
                    cx.out.emit(truncated);
                }
                cx.conv.unpin(item_id);
            }
        }
    }
}
