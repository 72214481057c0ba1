//! The outbound playback queue, with per-tag accounting for a ledger.
//!
//! Generated audio is pushed in tagged chunks (the tag identifies, e.g.,
//! a response item). [`PlaybackQueue::pop_frame`] hands out fixed-size
//! frames, reporting how many samples of each tag left in that frame, so
//! the caller can keep a ledger of what was actually played; `clear` and
//! `clear_tag` report what was purged instead (barge-in / truncation).
//! For every tag, samples pushed = samples sent + samples purged.

use std::collections::VecDeque;

use thiserror::Error;

/// Samples of one tag that left in a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sent {
    /// The tag the samples were pushed with.
    pub tag: u64,
    /// How many of its samples this frame carried.
    pub samples: usize,
}

/// A push that would exceed the queue's capacity (nothing was queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("playback queue full: {requested} samples requested, {available} free")]
pub struct QueueFull {
    /// Samples in the rejected push.
    pub requested: usize,
    /// Free space at the time.
    pub available: usize,
}

impl QueueFull {
    /// A stable machine-readable code for this error.
    pub fn code(&self) -> &'static str {
        "playback_queue_full"
    }
}

/// A contiguous run of samples with one tag; `pos` samples already sent.
#[derive(Debug, Clone)]
struct Run {
    tag: u64,
    data: Vec<f32>,
    pos: usize,
}

impl Run {
    fn left(&self) -> usize {
        self.data.len() - self.pos
    }
}

/// A bounded FIFO of tagged mono `f32` samples at a fixed rate, read out
/// in frames of a fixed size.
#[derive(Debug, Clone)]
pub struct PlaybackQueue {
    frame: usize,
    max_samples: usize,
    runs: VecDeque<Run>,
    queued: usize,
    /// Buffers of runs that played out, reused by the next runs (steady-state playout
    /// allocates nothing).
    spare: Vec<Vec<f32>>,
}

/// Played-out run buffers kept for reuse.
const SPARE_RUNS: usize = 4;
/// Largest buffer kept for reuse (a second at 48 kHz); larger ones are freed.
const MAX_SPARE_SAMPLES: usize = 48_000;

impl PlaybackQueue {
    /// A queue producing frames of `frame` samples (0 is treated as 1) and
    /// holding at most `max_samples` samples.
    pub fn new(frame: usize, max_samples: usize) -> Self {
        PlaybackQueue {
            frame: frame.max(1),
            max_samples,
            runs: VecDeque::with_capacity(SPARE_RUNS),
            queued: 0,
            spare: Vec::with_capacity(SPARE_RUNS),
        }
    }

    /// The frame size in samples.
    pub fn frame(&self) -> usize {
        self.frame
    }

    /// Appends `samples` under `tag`, all or nothing: if they do not fit,
    /// nothing is queued and [`QueueFull`] is returned.
    pub fn push(&mut self, tag: u64, samples: &[f32]) -> Result<(), QueueFull> {
        let available = self.max_samples.saturating_sub(self.queued);
        if samples.len() > available {
            return Err(QueueFull {
                requested: samples.len(),
                available,
            });
        }
        if samples.is_empty() {
            return Ok(());
        }
        self.queued += samples.len();
        if let Some(last) = self.runs.back_mut() {
            if last.tag == tag {
                if last.pos > 0 && last.pos >= last.data.len() / 2 {
                    last.data.drain(..last.pos);
                    last.pos = 0;
                }
                last.data.extend_from_slice(samples);
                return Ok(());
            }
        }
        let mut data = self.spare.pop().unwrap_or_default();
        data.extend_from_slice(samples);
        self.runs.push_back(Run { tag, data, pos: 0 });
        Ok(())
    }

    /// Produces the next frame: `out` is cleared and filled with exactly
    /// `frame` samples (queued audio, then zero padding), and `sent` is
    /// cleared and filled with how many samples of each tag the frame
    /// carried, in order (a frame may carry the end of one tag and the start
    /// of the next). Returns `true` if the frame holds any queued audio.
    pub fn pop_frame(&mut self, out: &mut Vec<f32>, sent: &mut Vec<Sent>) -> bool {
        out.clear();
        sent.clear();
        while out.len() < self.frame {
            let Some(run) = self.runs.front_mut() else {
                break;
            };
            let take = run.left().min(self.frame - out.len());
            out.extend_from_slice(&run.data[run.pos..run.pos + take]);
            run.pos += take;
            self.queued -= take;
            match sent.last_mut() {
                Some(last) if last.tag == run.tag => last.samples += take,
                _ => sent.push(Sent {
                    tag: run.tag,
                    samples: take,
                }),
            }
            if run.left() == 0 {
                if let Some(run) = self.runs.pop_front() {
                    self.recycle(run.data);
                }
            }
        }
        let audio = !out.is_empty();
        out.resize(self.frame, 0.0);
        audio
    }

    fn recycle(&mut self, mut data: Vec<f32>) {
        // A long answer's buffer is freed, not kept: an idle call holds little.
        if self.spare.len() < SPARE_RUNS && data.capacity() <= MAX_SPARE_SAMPLES {
            data.clear();
            self.spare.push(data);
        }
    }

    /// Drops everything queued; returns the purged sample count per tag,
    /// in queue order of each tag's first appearance.
    pub fn clear(&mut self) -> Vec<(u64, usize)> {
        let mut purged: Vec<(u64, usize)> = Vec::new();
        for run in &self.runs {
            match purged.iter_mut().find(|(t, _)| *t == run.tag) {
                Some((_, n)) => *n += run.left(),
                None => purged.push((run.tag, run.left())),
            }
        }
        self.purge();
        purged
    }

    /// Drops everything queued, without a report (allocates nothing).
    pub fn purge(&mut self) {
        while let Some(run) = self.runs.pop_front() {
            self.recycle(run.data);
        }
        self.queued = 0;
    }

    /// Drops all queued samples of `tag`; returns how many were purged.
    pub fn clear_tag(&mut self, tag: u64) -> usize {
        let mut purged = 0;
        self.runs.retain(|run| {
            if run.tag == tag {
                purged += run.left();
                false
            } else {
                true
            }
        });
        self.queued -= purged;
        purged
    }

    /// Samples queued in total.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Samples queued under `tag`.
    pub fn queued_for(&self, tag: u64) -> usize {
        self.runs
            .iter()
            .filter(|r| r.tag == tag)
            .map(Run::left)
            .sum()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }
}

#[cfg(test)]
#[path = "playback_tests.rs"]
mod tests;
