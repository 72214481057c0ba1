//! WebRTC playback: the session's view of the playback ledger. The media engine reports what
//! actually left on RTP; from that come `output_audio_buffer.started|stopped|cleared`, and on
//! interruption the assistant item is truncated to what the caller heard.

use super::ledger::SAMPLES_PER_MS;
use super::{Session, Transport};
use crate::protocol::ServerEventBody;

/// One response's audio in the engine's playback queue.
#[derive(Debug)]
pub struct Playback {
    /// Response tag shared with the engine.
    pub tag: u64,
    /// `resp_…`.
    pub response_id: String,
    /// The assistant item in the conversation (`None` for out-of-band responses).
    pub item_id: Option<String>,
    /// 24 kHz samples that left on RTP.
    pub sent: u64,
    /// Whether `output_audio_buffer.started` went out.
    pub started: bool,
}

impl Session {
    /// Hands response audio to the media engine (WebRTC); returns false on WebSocket.
    pub(super) fn play(&mut self, tag: u64, pcm: &[f32]) -> bool {
        let Transport::WebRtc { sink, .. } = &self.transport else {
            return false;
        };
        sink.play(tag, pcm.to_vec());
        true
    }

    /// Starts tracking a response's playback (WebRTC audio responses).
    pub(super) fn track_playback(&mut self, tag: u64, response_id: &str, item_id: Option<&str>) {
        if self.transport.is_webrtc() {
            self.playback.push(Playback {
                tag,
                response_id: response_id.to_string(),
                item_id: item_id.map(str::to_string),
                sent: 0,
                started: false,
            });
        }
    }

    /// The response finished generating: the engine reports when its last sample left.
    pub(super) fn finish_playback(&mut self, tag: u64) {
        if let Transport::WebRtc { sink, .. } = &self.transport {
            if self.playback.iter().any(|p| p.tag == tag) {
                sink.finish(tag);
            }
        }
    }

    /// The engine sent `samples` of `tag`.
    pub(super) fn on_played(&mut self, tag: u64, samples: u64) {
        if let Some(a) = self.active.as_mut().filter(|a| a.tag == tag) {
            a.ledger.sent(samples);
        }
        let Some(pb) = self.playback.iter_mut().find(|p| p.tag == tag) else {
            return;
        };
        pb.sent += samples;
        if !pb.started {
            pb.started = true;
            if let Some(t) = self.turn_end.take() {
                crate::metrics::METRICS
                    .speech_end_to_first_audio
                    .observe(t.elapsed());
            }
            let response_id = pb.response_id.clone();
            self.emit(ServerEventBody::OutputAudioBufferStarted { response_id });
        }
    }

    /// The last sample of `tag` left: `output_audio_buffer.stopped`.
    pub(super) fn on_drained(&mut self, tag: u64) {
        let Some(i) = self.playback.iter().position(|p| p.tag == tag) else {
            return;
        };
        let pb = self.playback.remove(i);
        if pb.started {
            self.emit(ServerEventBody::OutputAudioBufferStopped {
                response_id: pb.response_id,
            });
        }
    }

    /// `output_audio_buffer.clear`, or barge-in on WebRTC: cancel the response, purge the
    /// queue; [`Self::on_cleared`] finishes the job once the engine confirms.
    pub(super) fn clear_output(&mut self, reason: &str) {
        self.cancel_active(reason);
        if let Transport::WebRtc { sink, .. } = &self.transport {
            sink.clear();
            self.clearing = true;
            self.clear_below = self.next_tag;
        }
    }

    /// The queue is empty: report `output_audio_buffer.cleared` and truncate each interrupted
    /// item to what was played.
    pub(super) fn on_cleared(&mut self) {
        if !std::mem::take(&mut self.clearing) {
            return;
        }
        if let Some(t) = self.barge_at.take() {
            crate::metrics::METRICS.barge_in.observe(t.elapsed());
        }
        // Responses started since the purge command (e.g. a `response.create` right after
        // the clear) play on: their audio reached the engine after the purge.
        let below = self.clear_below;
        let (interrupted, live): (Vec<_>, Vec<_>) = std::mem::take(&mut self.playback)
            .into_iter()
            .partition(|p| p.tag < below);
        self.playback = live;
        if interrupted.is_empty() {
            // Nothing was playing (e.g. the answer already played out after a
            // `response.cancel`): the GA event still names a response, the latest one.
            let response_id = self.last_response_id.clone().unwrap_or_default();
            self.emit(ServerEventBody::OutputAudioBufferCleared { response_id });
        }
        for pb in interrupted {
            self.emit(ServerEventBody::OutputAudioBufferCleared {
                response_id: pb.response_id.clone(),
            });
            if let Some(item_id) = &pb.item_id {
                self.truncate_to_played(item_id, pb.sent);
            }
        }
    }

    /// Cuts a stored assistant item to the `sent` samples the caller heard. Reported even
    /// when everything generated was heard: the caller learns exactly where the item ends.
    fn truncate_to_played(&mut self, item_id: &str, sent: u64) {
        let generated = self
            .conv
            .get(item_id)
            .and_then(|s| s.ledger.as_ref())
            .map_or(0, |l| l.generated);
        if generated == 0 || self.conv.cut_audio(item_id, 0, sent).is_none() {
            return;
        }
        self.emit(ServerEventBody::ConversationItemTruncated {
            item_id: item_id.to_string(),
            content_index: 0,
            audio_end_ms: sent / SAMPLES_PER_MS,
        });
    }
}
