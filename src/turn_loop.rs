//! The turn loop: one thread (`duet-turn`) that owns the turn model (Smart Turn) and scores
//! every session's pauses, those that wait together in one batch, off the session tasks
//! (as transcription runs). Its skeleton is the other loops' ([`DeviceThread`]: ready once
//! started, not alive once it ended); a panic inside a batch fails that batch's pauses (the
//! sessions fall back to fixed silence for them) and the loop goes on.
//!
//! Sessions hold a [`TurnSession`] (their [`TurnPort`]): a pause's audio goes in at 24 kHz
//! (at most its last 8 s), is resampled to the model's 16 kHz here, and the score comes back
//! on the session's channel. The queue is bounded; a pause that finds it full is answered
//! `busy` at once (the session falls back to fixed silence).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Instant;

use duet_models::smart_turn::{SmartTurn, RATE};
use tokio::sync::mpsc;

use crate::model_loop::DeviceThread;
use crate::session::{TurnPort, TurnScore};

/// Pauses waiting for the model, from every session together: past it a pause is answered
/// `busy` (each holds at most 8 s of audio, 768 KB as f32).
pub const MAX_QUEUED: usize = 64;
/// Pauses scored in one run of the model.
pub const MAX_BATCH: usize = 8;
/// Scores a session may have unread (it reads each at once; it asks one per pause).
const SESSION_CHANNEL: usize = 4;

/// One pause to score.
struct Job {
    pause: u64,
    pcm: Arc<[f32]>,
    reply: mpsc::Sender<TurnScore>,
}

/// Cloneable handle to the running turn loop.
#[derive(Clone)]
pub struct TurnLoop {
    tx: std_mpsc::SyncSender<Job>,
    thread: DeviceThread,
}

impl TurnLoop {
    /// Starts the loop's thread with `model`.
    pub fn spawn(model: SmartTurn) -> std::io::Result<Self> {
        let (tx, rx) = std_mpsc::sync_channel(MAX_QUEUED);
        let thread = DeviceThread::spawn(
            "duet-turn".into(),
            "the turn model's thread died; semantic_vad falls back to fixed silence",
            move |ready| {
                ready.store(true, Ordering::Release);
                run(model, rx);
            },
        )?;
        Ok(Self { tx, thread })
    }

    /// A new session's port and the channel its scores come back on.
    pub fn open(&self) -> (Arc<dyn TurnPort + Sync>, mpsc::Receiver<TurnScore>) {
        let (reply, rx) = mpsc::channel(SESSION_CHANNEL);
        let port = TurnSession {
            tx: self.tx.clone(),
            reply,
        };
        (Arc::new(port), rx)
    }

    /// False once the thread ended.
    pub fn is_alive(&self) -> bool {
        self.thread.is_alive()
    }
}

/// A session's port on the turn loop.
struct TurnSession {
    tx: std_mpsc::SyncSender<Job>,
    reply: mpsc::Sender<TurnScore>,
}

impl TurnPort for TurnSession {
    fn score(&self, pause: u64, pcm: Arc<[f32]>) {
        let job = Job {
            pause,
            pcm,
            reply: self.reply.clone(),
        };
        let refused = match self.tx.try_send(job) {
            Ok(()) => return,
            Err(std_mpsc::TrySendError::Full(_)) => "the turn model is busy",
            Err(std_mpsc::TrySendError::Disconnected(_)) => "the turn model stopped",
        };
        crate::metrics::METRICS.turn_score("busy");
        let _ = self.reply.try_send(TurnScore {
            pause,
            complete: Err(refused.into()),
        });
    }
}

/// The loop: waits for a pause, takes every other one waiting (up to [`MAX_BATCH`]),
/// scores them in one run and answers each.
fn run(mut model: SmartTurn, rx: std_mpsc::Receiver<Job>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut to_16k = To16k::new();
    while let Ok(job) = rx.recv() {
        batch.push(job);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let started = Instant::now();
        let audio: Vec<Vec<f32>> = batch.iter().map(|j| to_16k.convert(&j.pcm)).collect();
        let turns: Vec<&[f32]> = audio.iter().map(Vec::as_slice).collect();
        let scored = catch_unwind(AssertUnwindSafe(|| model.score(&turns)));
        crate::metrics::METRICS
            .turn_batch
            .observe(started.elapsed());
        let scores: Vec<Result<f32, String>> = match scored {
            Ok(Ok(p)) => p.into_iter().map(Ok).collect(),
            Ok(Err(e)) => vec![Err(e.to_string()); batch.len()],
            Err(_) => {
                tracing::error!("the turn model panicked; its pauses fall back to fixed silence");
                vec![Err("the turn model failed (a panic)".into()); batch.len()]
            }
        };
        for (job, complete) in batch.drain(..).zip(scores) {
            let _ = job.reply.try_send(TurnScore {
                pause: job.pause,
                complete,
            });
        }
    }
}

/// 24 kHz to the model's 16 kHz with the streaming resampler the transcriber uses (reset
/// for each pause, its lead-in dropped and its tail flushed).
struct To16k(Option<duet_media::StreamResampler>);

impl To16k {
    fn new() -> Self {
        let r = duet_media::StreamResampler::new(duet_media::SESSION_RATE, RATE as u32);
        if let Err(e) = &r {
            tracing::error!("turn model resampler: {e}");
        }
        Self(r.ok())
    }

    fn convert(&mut self, pcm: &[f32]) -> Vec<f32> {
        let Some(r) = &mut self.0 else {
            return Vec::new();
        };
        r.reset();
        let mut out = Vec::with_capacity(pcm.len() * 2 / 3 + 256);
        r.process(pcm, &mut out);
        r.flush(&mut out);
        let lead_in = r.delay_samples().min(out.len());
        out.drain(..lead_in);
        out.truncate(pcm.len() * 2 / 3);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resampling_keeps_the_length_ratio_and_a_tone() {
        let tone = |rate: f32, n: usize| -> Vec<f32> {
            (0..n)
                .map(|i| (2.0 * std::f32::consts::PI * 440.0 * i as f32 / rate).sin() * 0.5)
                .collect()
        };
        let mut r = To16k::new();
        let out = r.convert(&tone(24_000.0, 24_000));
        assert_eq!(out.len(), 16_000);
        // The tone sampled at 16 kHz, away from the edges.
        let want = tone(16_000.0, 16_000);
        let err: f32 = out[1_000..15_000]
            .iter()
            .zip(&want[1_000..15_000])
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f32::max);
        assert!(err < 0.02, "{err}");
        // Each pause starts afresh.
        assert_eq!(r.convert(&tone(24_000.0, 24_000)), out);
    }
}
