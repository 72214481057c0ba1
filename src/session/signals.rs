//! What the media engine tells a WebRTC session about playback: audio that left, responses
//! whose last sample left, purges done, the call's end. These must never be lost (a lost
//! purge leaves the item untruncated and no `output_audio_buffer.cleared`; a lost drain
//! leaves SDKs "speaking"; a lost end keeps the session alive), yet the engine thread can
//! never wait for a busy session. So they are coalesced under a lock, in constant space per
//! response, and the session is woken to take them all at once.

use std::sync::Mutex;

use tokio::sync::Notify;

use super::PlaybackTag;

/// Everything reported since the session last looked.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MediaReport {
    /// `(tag, samples at 24 kHz)` of response audio that left on RTP, one entry per tag.
    pub played: Vec<(PlaybackTag, u64)>,
    /// Tags whose last sample left (replies to `MediaSink::finish`), in order.
    pub drained: Vec<PlaybackTag>,
    /// Purges done (replies to `MediaSink::clear`).
    pub cleared: u32,
    /// The call ended.
    pub ended: bool,
    /// The client hung the call up (`POST …/hangup`): the session ends with it, even an
    /// opted-in one (which a plain end would detach).
    pub hung_up: bool,
}

impl MediaReport {
    fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// The engine's side writes, the session's side takes.
#[derive(Debug, Default)]
pub struct MediaSignals {
    pending: Mutex<MediaReport>,
    notify: Notify,
}

impl MediaSignals {
    fn update(&self, f: impl FnOnce(&mut MediaReport)) {
        if let Ok(mut r) = self.pending.lock() {
            f(&mut r);
        }
        self.notify.notify_one();
    }

    /// One tick's playback: audio of each tag that left, and tags that drained (the media
    /// pipeline's raw tags).
    pub fn played(&self, played: &[(u64, u64)], drained: &[u64]) {
        if played.is_empty() && drained.is_empty() {
            return;
        }
        self.update(|r| {
            for &(tag, n) in played {
                let tag = PlaybackTag(tag);
                match r.played.iter_mut().find(|(t, _)| *t == tag) {
                    Some((_, total)) => *total += n,
                    None => r.played.push((tag, n)),
                }
            }
            r.drained.extend(drained.iter().map(|&t| PlaybackTag(t)));
        });
    }

    /// The playback queue was purged.
    pub fn cleared(&self) {
        self.update(|r| r.cleared += 1);
    }

    /// The call ended.
    pub fn ended(&self) {
        self.update(|r| r.ended = true);
    }

    /// The client hung the call up. Set before the call is ended, so the session never
    /// mistakes an explicit hangup for a dropped transport; like every signal it cannot be
    /// lost to a full inbox.
    pub fn hung_up(&self) {
        self.update(|r| r.hung_up = true);
    }

    /// Moves everything reported so far into `out` (cleared first): the two reports swap
    /// buffers, so neither side allocates once both have held a report.
    pub fn take_into(&self, out: &mut MediaReport) {
        out.played.clear();
        out.drained.clear();
        out.cleared = 0;
        out.ended = false;
        out.hung_up = false;
        if let Ok(mut r) = self.pending.lock() {
            std::mem::swap(&mut *r, out);
        }
    }

    /// Takes everything reported so far.
    pub fn take(&self) -> MediaReport {
        self.pending
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default()
    }

    /// Waits until something was reported (returns at once if it already was).
    pub async fn changed(&self) {
        loop {
            let notified = self.notify.notified();
            if self.pending.lock().map_or(true, |r| !r.is_empty()) {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalesces_per_tag_and_keeps_every_signal() {
        let s = MediaSignals::default();
        for _ in 0..1000 {
            s.played(&[(1, 480)], &[]);
        }
        s.played(&[(1, 480), (2, 480)], &[1]);
        s.cleared();
        s.cleared();
        s.ended();
        let r = s.take();
        assert_eq!(
            r.played,
            vec![(PlaybackTag(1), 1001 * 480), (PlaybackTag(2), 480)]
        );
        assert_eq!(
            (r.drained, r.cleared, r.ended),
            (vec![PlaybackTag(1)], 2, true)
        );
        assert_eq!(s.take(), MediaReport::default());
    }

    #[tokio::test]
    async fn changed_does_not_miss_a_report_made_before_waiting() {
        let s = std::sync::Arc::new(MediaSignals::default());
        s.cleared();
        tokio::time::timeout(std::time::Duration::from_secs(1), s.changed())
            .await
            .expect("already reported");
        let _ = s.take();
        let w = s.clone();
        let h = tokio::spawn(async move { w.changed().await });
        tokio::task::yield_now().await;
        s.ended();
        tokio::time::timeout(std::time::Duration::from_secs(1), h)
            .await
            .expect("woken")
            .unwrap();
    }
}
