//! The turn loop: `--turn-threads` threads (`duet-turn-N`), each owning a copy of the turn
//! model (Smart Turn), that score every session's pauses off the session tasks (as
//! transcription runs). A pause goes to an idle thread; when every thread is busy, the pauses
//! that wait are scored together in one batch by the next thread free. Its skeleton is the
//! other loops' ([`DeviceThread`]: ready once started, not alive once it ended); a panic
//! inside a batch fails that batch's pauses (the sessions fall back to fixed silence for
//! them) and the thread goes on.
//!
//! Sessions hold a [`TurnSession`] (their [`TurnPort`]): a pause's audio goes in at 24 kHz
//! (at most its last 8 s), is resampled to the model's 16 kHz here, and the score comes back
//! on the session's channel. The queue is bounded; a pause that finds it full is answered
//! `busy` at once (the session falls back to fixed silence).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use duet_models::smart_turn::{SmartTurn, RATE};
use tokio::sync::mpsc;

use crate::cpu_share::Share;
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
    /// When the session handed it over.
    queued: Instant,
    pcm: Arc<[f32]>,
    reply: mpsc::Sender<TurnScore>,
}

/// What a thread scores with: the turn model (a stand-in in tests).
pub trait Scorer: Send + 'static {
    /// The probability that each turn (16 kHz audio) is complete, in one run.
    fn score(&mut self, turns: &[&[f32]]) -> Result<Vec<f32>, duet_models::ModelError>;
}

impl Scorer for SmartTurn {
    fn score(&mut self, turns: &[&[f32]]) -> Result<Vec<f32>, duet_models::ModelError> {
        SmartTurn::score(self, turns)
    }
}

/// Cloneable handle to the running turn loop.
#[derive(Clone)]
pub struct TurnLoop {
    tx: std_mpsc::SyncSender<Job>,
    threads: Vec<DeviceThread>,
}

/// The pauses waiting, as the threads share them.
struct Queue {
    rx: Mutex<std_mpsc::Receiver<Job>>,
    /// Threads waiting for a pause (for the queue's lock or in it): while one is, a thread
    /// that got a pause takes no more, so pauses that come together run side by side.
    idle: AtomicUsize,
}

impl TurnLoop {
    /// Starts a thread for each of `models` (copies of one turn model).
    pub fn spawn(models: Vec<impl Scorer>) -> std::io::Result<Self> {
        let (tx, rx) = std_mpsc::sync_channel(MAX_QUEUED);
        let queue = Arc::new(Queue {
            rx: Mutex::new(rx),
            idle: AtomicUsize::new(0),
        });
        let mut threads = Vec::new();
        for (n, model) in models.into_iter().enumerate() {
            let queue = queue.clone();
            threads.push(DeviceThread::spawn(
                format!("duet-turn-{n}"),
                Share::Prompt,
                "a turn model thread died; the others score on (none left: semantic_vad falls back to fixed silence)",
                move |ready| {
                    ready.store(true, Ordering::Release);
                    run(model, &queue);
                },
            )?);
        }
        Ok(Self { tx, threads })
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

    /// False once every thread ended.
    pub fn is_alive(&self) -> bool {
        self.threads.iter().any(DeviceThread::is_alive)
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
            queued: Instant::now(),
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

/// A thread's loop: waits for a pause, takes every other one waiting (up to [`MAX_BATCH`])
/// unless another thread is free to take them, scores them in one run and answers each.
fn run(mut model: impl Scorer, queue: &Queue) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut to_16k = To16k::new();
    while take(queue, &mut batch) {
        let started = Instant::now();
        let audio: Vec<Vec<f32>> = batch.iter().map(|j| to_16k.convert(&j.pcm)).collect();
        let turns: Vec<&[f32]> = audio.iter().map(Vec::as_slice).collect();
        let scored = catch_unwind(AssertUnwindSafe(|| model.score(&turns)));
        let metrics = &crate::metrics::METRICS;
        let run = started.elapsed();
        metrics.turn_batch.observe(run);
        let pauses = u32::try_from(batch.len()).unwrap_or(u32::MAX);
        for _ in 0..pauses {
            metrics.turn_pause.observe(run / pauses);
        }
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
            metrics.turn_wait.observe(job.queued.elapsed());
        }
    }
}

/// Waits for the next pause into `batch`, with the others waiting while no other thread is
/// free; false once the loop is closed.
fn take(queue: &Queue, batch: &mut Vec<Job>) -> bool {
    queue.idle.fetch_add(1, Ordering::AcqRel);
    let rx = queue
        .rx
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let first = rx.recv();
    queue.idle.fetch_sub(1, Ordering::AcqRel);
    let Ok(job) = first else { return false };
    batch.push(job);
    while batch.len() < MAX_BATCH && queue.idle.load(Ordering::Acquire) == 0 {
        match rx.try_recv() {
            Ok(job) => batch.push(job),
            Err(_) => break,
        }
    }
    true
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
    use std::time::Duration;

    /// Scores every turn 0.5 after `took`, and says which thread ran each run of how many.
    struct Slow {
        took: Duration,
        runs: std_mpsc::Sender<(String, usize, Instant)>,
    }

    impl Scorer for Slow {
        fn score(&mut self, turns: &[&[f32]]) -> Result<Vec<f32>, duet_models::ModelError> {
            let started = Instant::now();
            std::thread::sleep(self.took);
            let name = std::thread::current().name().unwrap_or_default().to_owned();
            let _ = self.runs.send((name, turns.len(), started));
            Ok(vec![0.5; turns.len()])
        }
    }

    fn slow_loop(threads: usize) -> (TurnLoop, std_mpsc::Receiver<(String, usize, Instant)>) {
        let (tx, runs) = std_mpsc::channel();
        let models = (0..threads)
            .map(|_| Slow {
                took: Duration::from_millis(150),
                runs: tx.clone(),
            })
            .collect();
        (TurnLoop::spawn(models).expect("spawn"), runs)
    }

    fn ask(turns: &TurnLoop, n: u64) -> Vec<mpsc::Receiver<TurnScore>> {
        (0..n)
            .map(|pause| {
                let (port, rx) = turns.open();
                port.score(pause, vec![0.0; 2400].into());
                rx
            })
            .collect()
    }

    fn scored(mut rxs: Vec<mpsc::Receiver<TurnScore>>) {
        for rx in &mut rxs {
            let score = rx.blocking_recv().expect("a score");
            assert_eq!(score.complete, Ok(0.5));
        }
    }

    #[test]
    fn pauses_that_come_together_are_scored_side_by_side_by_free_threads() {
        let (turns, runs) = slow_loop(2);
        while !turns.threads.iter().all(DeviceThread::is_ready) {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50)); // both threads waiting
        scored(ask(&turns, 2));
        let (a, b) = (runs.recv().expect("run"), runs.recv().expect("run"));
        assert_eq!((a.1, b.1), (1, 1), "one pause a run");
        assert_ne!(a.0, b.0, "on two threads");
        let apart = a.2.max(b.2) - a.2.min(b.2);
        assert!(
            apart < Duration::from_millis(100),
            "side by side: {apart:?} apart"
        );
    }

    #[test]
    fn pauses_that_wait_for_a_busy_thread_are_scored_in_one_run() {
        let (turns, runs) = slow_loop(1);
        let first = ask(&turns, 1);
        std::thread::sleep(Duration::from_millis(50)); // the thread is busy with it
        let waiting = ask(&turns, 3);
        scored(first);
        scored(waiting);
        let sizes: Vec<usize> = (0..2).map(|_| runs.recv().expect("run").1).collect();
        assert_eq!(sizes, [1, 3]);
    }

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
