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
}

impl PlaybackQueue {
    /// A queue producing frames of `frame` samples (0 is treated as 1) and
    /// holding at most `max_samples` samples.
    pub fn new(frame: usize, max_samples: usize) -> Self {
        PlaybackQueue {
            frame: frame.max(1),
            max_samples,
            runs: VecDeque::new(),
            queued: 0,
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
        self.runs.push_back(Run {
            tag,
            data: samples.to_vec(),
            pos: 0,
        });
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
                self.runs.pop_front();
            }
        }
        let audio = !out.is_empty();
        out.resize(self.frame, 0.0);
        audio
    }

    /// Drops everything queued; returns the purged sample count per tag,
    /// in queue order of each tag's first appearance.
    pub fn clear(&mut self) -> Vec<(u64, usize)> {
        let mut purged: Vec<(u64, usize)> = Vec::new();
        for run in self.runs.drain(..) {
            match purged.iter_mut().find(|(t, _)| *t == run.tag) {
                Some((_, n)) => *n += run.left(),
                None => purged.push((run.tag, run.left())),
            }
        }
        self.queued = 0;
        purged
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
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn ramp(from: usize, n: usize) -> Vec<f32> {
        (from..from + n).map(|v| v as f32).collect()
    }

    #[test]
    fn frame_spans_two_tags_then_pads() {
        let mut q = PlaybackQueue::new(4, 100);
        q.push(1, &[1.0, 2.0, 3.0]).unwrap();
        q.push(2, &[4.0, 5.0, 6.0]).unwrap();
        assert_eq!((q.queued(), q.queued_for(1), q.queued_for(2)), (6, 3, 3));
        let (mut out, mut sent) = (Vec::new(), Vec::new());
        assert!(q.pop_frame(&mut out, &mut sent));
        assert_eq!(out, [1.0, 2.0, 3.0, 4.0]);
        assert_eq!(
            sent,
            [Sent { tag: 1, samples: 3 }, Sent { tag: 2, samples: 1 }]
        );
        assert!(q.pop_frame(&mut out, &mut sent));
        assert_eq!(out, [5.0, 6.0, 0.0, 0.0]);
        assert_eq!(sent, [Sent { tag: 2, samples: 2 }]);
        assert!(!q.pop_frame(&mut out, &mut sent));
        assert_eq!(out, [0.0; 4]);
        assert!(sent.is_empty() && q.is_empty());
    }

    #[test]
    fn clear_makes_next_frame_silent() {
        let mut q = PlaybackQueue::new(960, 48_000);
        q.push(7, &vec![0.5; 2000]).unwrap();
        q.push(8, &vec![0.25; 100]).unwrap();
        q.push(7, &[0.5; 10]).unwrap();
        let (mut out, mut sent) = (Vec::new(), Vec::new());
        assert!(q.pop_frame(&mut out, &mut sent));
        assert_eq!(q.clear(), vec![(7, 1050), (8, 100)]);
        assert!(!q.pop_frame(&mut out, &mut sent));
        assert_eq!(out.len(), 960);
        assert!(out.iter().all(|&v| v == 0.0));
        assert!(sent.is_empty());
    }

    #[test]
    fn clear_tag_removes_only_that_tag() {
        let mut q = PlaybackQueue::new(4, 100);
        q.push(1, &[1.0, 1.0]).unwrap();
        q.push(2, &[2.0, 2.0]).unwrap();
        q.push(1, &[1.0]).unwrap();
        assert_eq!(q.clear_tag(2), 2);
        assert_eq!(q.clear_tag(2), 0);
        let (mut out, mut sent) = (Vec::new(), Vec::new());
        q.pop_frame(&mut out, &mut sent);
        assert_eq!(out, [1.0, 1.0, 1.0, 0.0]);
        assert_eq!(sent, [Sent { tag: 1, samples: 3 }]);
    }

    #[test]
    fn capacity_is_all_or_nothing() {
        let mut q = PlaybackQueue::new(4, 10);
        q.push(1, &[0.1; 8]).unwrap();
        let err = q.push(2, &[0.2; 3]).unwrap_err();
        assert_eq!(
            err,
            QueueFull {
                requested: 3,
                available: 2
            }
        );
        assert_eq!(err.code(), "playback_queue_full");
        assert_eq!((q.queued(), q.queued_for(2)), (8, 0));
        q.push(2, &[0.2; 2]).unwrap();
        assert_eq!(q.queued(), 10);
        assert!(q.push(3, &[]).is_ok());
        assert!(q.push(3, &[0.0]).is_err());
    }

    proptest! {
        /// Random pushes, frames and purges against a model: samples come
        /// out in order, and per tag pushed = sent + purged.
        #[test]
        fn accounting_matches_model(
            frame in 1usize..50,
            cap in 0usize..400,
            ops in proptest::collection::vec((0u8..5, 0u64..4, 0usize..120), 1..200),
        ) {
            let mut q = PlaybackQueue::new(frame, cap);
            let mut model: VecDeque<(u64, f32)> = VecDeque::new();
            let mut pushed: HashMap<u64, usize> = HashMap::new();
            let mut done: HashMap<u64, usize> = HashMap::new();
            let (mut out, mut sent) = (Vec::new(), Vec::new());
            let mut counter = 0usize;
            for (op, tag, n) in ops {
                match op {
                    0 | 1 => {
                        let samples = ramp(counter, n);
                        counter += n;
                        if q.push(tag, &samples).is_ok() {
                            *pushed.entry(tag).or_default() += n;
                            model.extend(samples.iter().map(|&s| (tag, s)));
                        } else {
                            prop_assert!(model.len() + n > cap);
                        }
                    }
                    2 => {
                        let audio = q.pop_frame(&mut out, &mut sent);
                        prop_assert_eq!(out.len(), frame);
                        let k = frame.min(model.len());
                        prop_assert_eq!(audio, k > 0);
                        let mut want_sent: Vec<Sent> = Vec::new();
                        for (i, (t, s)) in model.drain(..k).enumerate() {
                            prop_assert_eq!(out[i], s);
                            match want_sent.last_mut() {
                                Some(l) if l.tag == t => l.samples += 1,
                                _ => want_sent.push(Sent { tag: t, samples: 1 }),
                            }
                        }
                        prop_assert!(out[k..].iter().all(|&v| v == 0.0));
                        for s in &sent {
                            *done.entry(s.tag).or_default() += s.samples;
                        }
                        prop_assert_eq!(&sent, &want_sent);
                    }
                    3 => {
                        let n = q.clear_tag(tag);
                        let before = model.len();
                        model.retain(|&(t, _)| t != tag);
                        prop_assert_eq!(n, before - model.len());
                        *done.entry(tag).or_default() += n;
                    }
                    _ => {
                        for (t, n) in q.clear() {
                            *done.entry(t).or_default() += n;
                        }
                        model.clear();
                    }
                }
                prop_assert_eq!(q.queued(), model.len());
                prop_assert!(q.queued() <= cap);
                prop_assert_eq!(q.is_empty(), model.is_empty());
                for t in 0..4 {
                    let m = model.iter().filter(|&&(x, _)| x == t).count();
                    prop_assert_eq!(q.queued_for(t), m);
                }
            }
            for (t, n) in q.clear() {
                *done.entry(t).or_default() += n;
            }
            pushed.retain(|_, n| *n > 0);
            done.retain(|_, n| *n > 0);
            prop_assert_eq!(pushed, done);
        }
    }
}
