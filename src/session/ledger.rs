//! The playback ledger of one assistant audio item: how many samples the model generated,
//! how many were queued for the transport, and how many actually left (RTP) or were handed
//! to the socket (WebSocket), with the transcript positioned on the same sample clock so that
//! a truncation cuts text and audio at the same point.

/// Samples per millisecond at 24 kHz.
pub const SAMPLES_PER_MS: u64 = duet_media::SESSION_RATE as u64 / 1000;

/// Ledger and transcript of one assistant audio item.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlaybackLedger {
    /// Samples produced by the model.
    pub generated: u64,
    /// Samples handed to the transport's queue.
    pub queued: u64,
    /// Samples that left: sent on RTP, or written to the WebSocket.
    pub sent: u64,
    transcript: String,
    /// `(sample offset, transcript length after this piece)`, in order.
    marks: Vec<(u64, usize)>,
}

impl PlaybackLedger {
    /// Bytes its timed transcript takes.
    pub fn text_bytes(&self) -> usize {
        self.transcript.len() + self.marks.len() * std::mem::size_of::<(u64, usize)>()
    }

    /// Records generated audio.
    pub fn generated(&mut self, samples: u64) {
        self.generated += samples;
    }

    /// Records audio handed to the transport queue.
    pub fn queued(&mut self, samples: u64) {
        self.queued = (self.queued + samples).min(self.generated);
    }

    /// Records audio that left.
    pub fn sent(&mut self, samples: u64) {
        self.sent = (self.sent + samples).min(self.queued);
    }

    /// Appends transcript text spoken from the current generated position on.
    pub fn text(&mut self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        self.transcript.push_str(piece);
        self.marks.push((self.generated, self.transcript.len()));
    }

    /// The transcript so far.
    pub fn transcript(&self) -> &str {
        &self.transcript
    }

    /// Milliseconds that left (what the caller heard), rounded down.
    pub fn sent_ms(&self) -> u64 {
        self.sent / SAMPLES_PER_MS
    }

    /// Milliseconds generated.
    pub fn generated_ms(&self) -> u64 {
        self.generated / SAMPLES_PER_MS
    }

    /// The transcript of the text whose audio started before `samples`.
    pub fn transcript_until(&self, samples: u64) -> &str {
        let len = self
            .marks
            .iter()
            .take_while(|(at, _)| *at < samples)
            .last()
            .map_or(0, |(_, len)| *len);
        &self.transcript[..len]
    }

    /// Cuts everything after `samples`: counters and transcript. Returns the kept transcript.
    pub fn truncate(&mut self, samples: u64) -> String {
        let kept = self.transcript_until(samples).to_string();
        self.marks.retain(|(_, len)| *len <= kept.len());
        self.transcript = kept.clone();
        self.generated = self.generated.min(samples);
        self.queued = self.queued.min(samples);
        self.sent = self.sent.min(samples);
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger() -> PlaybackLedger {
        let mut l = PlaybackLedger::default();
        l.text("echo");
        l.generated(4800);
        l.text(" of");
        l.generated(4800);
        l.text(" 1.4 s");
        l.generated(4800);
        l
    }

    #[test]
    fn counts_are_monotonic_and_bounded() {
        let mut l = ledger();
        l.queued(10_000);
        l.sent(20_000);
        assert_eq!((l.generated, l.queued, l.sent), (14_400, 10_000, 10_000));
        l.queued(100_000);
        assert_eq!(l.queued, 14_400);
        assert_eq!(l.sent_ms(), 416);
    }

    #[test]
    fn transcript_follows_audio() {
        let l = ledger();
        assert_eq!(l.transcript_until(0), "");
        assert_eq!(l.transcript_until(1), "echo");
        assert_eq!(l.transcript_until(4800), "echo");
        assert_eq!(l.transcript_until(4801), "echo of");
        assert_eq!(l.transcript_until(14_400), "echo of 1.4 s");
    }

    #[test]
    fn truncate_cuts_audio_and_text_together() {
        let mut l = ledger();
        l.queued(14_400);
        l.sent(12_000);
        assert_eq!(l.truncate(6_000), "echo of");
        assert_eq!((l.generated, l.queued, l.sent), (6_000, 6_000, 6_000));
        assert_eq!(l.transcript(), "echo of");
        l.text(" more");
        assert_eq!(l.transcript(), "echo of more");
    }
}
