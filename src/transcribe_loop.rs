//! The transcription loop: one thread per device that owns a [`Transcriber`] and steps every
//! session's stream that has audio waiting, all of them in one batch, as the model loop steps
//! slots. Sessions talk to it through a [`TranscribeSession`] handle (their
//! [`TranscriberPort`]); answers come back on the session's channel, tagged with the item.
//!
//! It is its own thread, beside the model loop's: an utterance transcriber (Whisper on the
//! CPU) takes hundreds of milliseconds per item, which would stall every session's audio if
//! it ran between the model's 20 ms steps. A panic inside the transcriber fails that batch's
//! utterances and the loop goes on.

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use duet_models::{
    ModelError, StreamId, TranscribeInput, TranscribeOutput, Transcriber, TranscriberInfo,
};
use tokio::sync::{mpsc, oneshot};

use crate::cpu_share::Share;
use crate::memory::{Meter, MeterCharge};
use crate::model_loop::DeviceThread;
use crate::session::{TranscriberPort, TranscriptEvent};

/// Transcript events a session may have unread before the oldest are dropped.
pub const SESSION_CHANNEL: usize = 256;
/// Audio a stream may have queued and not transcribed, in 24 kHz samples (60 s): beyond it
/// the utterance fails instead of growing without bound.
pub const MAX_QUEUED_SAMPLES: usize = 60 * 24_000;
/// Longest wait for a stream.
const OPEN_TIMEOUT: Duration = Duration::from_secs(5);

enum Command {
    Open {
        events: mpsc::Sender<TranscriptEvent>,
        queued: Arc<AtomicUsize>,
        reply: oneshot::Sender<Result<StreamId, ModelError>>,
    },
    Audio {
        stream: StreamId,
        item_id: Arc<str>,
        pcm: Arc<[f32]>,
        end: bool,
        logprobs: bool,
        /// The text it follows (`prompt`), when it ends.
        prompt: Option<Arc<str>>,
        /// Its bytes on the session's memory meter, held until it is transcribed.
        charge: Option<MeterCharge>,
    },
    Close {
        stream: StreamId,
    },
    /// The session gave utterance `item_id` up: drop it if it is still queued.
    Forget {
        stream: StreamId,
        item_id: Arc<str>,
    },
    /// The language of the stream's next utterances (`None`: detected).
    Language {
        stream: StreamId,
        language: Option<String>,
    },
}

/// Cloneable handle to a running transcription loop.
#[derive(Clone)]
pub struct TranscribeLoop {
    tx: std_mpsc::Sender<Command>,
    info: Arc<TranscriberInfo>,
    thread: DeviceThread,
}

impl TranscribeLoop {
    /// Starts the loop thread for `transcriber`; it warms up, then reports ready.
    pub fn spawn(transcriber: Box<dyn Transcriber>, device: &str) -> std::io::Result<Self> {
        let (tx, rx) = std_mpsc::channel();
        let info = Arc::new(transcriber.info().clone());
        let thread = DeviceThread::spawn(
            format!("transcribe-{device}"),
            Share::Bulk,
            "the transcription loop thread panicked; transcription stops",
            move |ready| LoopThread::new(transcriber, rx).run(ready),
        )?;
        Ok(Self { tx, info, thread })
    }

    /// The transcriber's facts.
    pub fn info(&self) -> &TranscriberInfo {
        &self.info
    }

    /// True once warmup finished.
    pub fn is_ready(&self) -> bool {
        self.thread.is_ready()
    }

    /// False once the thread ended.
    pub fn is_alive(&self) -> bool {
        self.thread.is_alive()
    }

    /// Opens a stream for a new session, its queued audio charged to `meter`.
    pub async fn open(
        &self,
        meter: Option<Arc<Meter>>,
    ) -> Result<(TranscribeSession, mpsc::Receiver<TranscriptEvent>), ModelError> {
        let (events, rx) = mpsc::channel(SESSION_CHANNEL);
        let (reply, answer) = oneshot::channel();
        let gone = || ModelError::Failed("transcription loop stopped".into());
        let queued = Arc::new(AtomicUsize::new(0));
        self.tx
            .send(Command::Open {
                events: events.clone(),
                queued: queued.clone(),
                reply,
            })
            .map_err(|_| gone())?;
        let stream = tokio::time::timeout(OPEN_TIMEOUT, answer)
            .await
            .map_err(|_| ModelError::Failed("the transcriber did not open a stream".into()))?
            .map_err(|_| gone())??;
        Ok((
            TranscribeSession {
                stream,
                tx: self.tx.clone(),
                info: self.info.clone(),
                queued,
                events,
                meter,
                language: std::sync::Mutex::default(),
                prompt: std::sync::Mutex::default(),
            },
            rx,
        ))
    }
}

/// A session's stream on the transcription loop; closes it when dropped.
///
/// Its audio is counted before it is sent: `queued` holds the samples sent and not yet
/// transcribed (the loop uncounts them as it takes them), so the loop's channel and its
/// queue together never hold more than [`MAX_QUEUED_SAMPLES`] of one stream, whatever the
/// loop is busy with.
pub struct TranscribeSession {
    stream: StreamId,
    tx: std_mpsc::Sender<Command>,
    info: Arc<TranscriberInfo>,
    queued: Arc<AtomicUsize>,
    /// The session's answers (a refused utterance's failure goes here directly).
    events: mpsc::Sender<TranscriptEvent>,
    /// The session's share of the memory budget.
    meter: Option<Arc<Meter>>,
    /// The language last given to the loop.
    language: std::sync::Mutex<Option<String>>,
    /// The prompt of the utterances sent from now on.
    prompt: std::sync::Mutex<Option<Arc<str>>>,
}

impl TranscriberPort for TranscribeSession {
    fn hints(&self, hints: &crate::session::TranscriptionHints) {
        if let Ok(mut prompt) = self.prompt.lock() {
            if prompt.as_deref() != hints.prompt.as_deref() {
                *prompt = hints.prompt.as_deref().map(Arc::from);
            }
        }
        let Ok(mut last) = self.language.lock() else {
            return;
        };
        if *last != hints.language {
            last.clone_from(&hints.language);
            let _ = self.tx.send(Command::Language {
                stream: self.stream,
                language: hints.language.clone(),
            });
        }
    }

    fn name(&self) -> &str {
        &self.info.name
    }

    fn streaming(&self) -> bool {
        self.info.streaming
    }

    fn forget(&self, item_id: &Arc<str>) {
        let _ = self.tx.send(Command::Forget {
            stream: self.stream,
            item_id: item_id.clone(),
        });
    }

    fn send(&self, item_id: Arc<str>, pcm: Arc<[f32]>, end: bool, logprobs: bool) {
        let counted = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                (q + pcm.len() <= MAX_QUEUED_SAMPLES).then_some(q + pcm.len())
            });
        if let Err(queued) = counted {
            let output = Err(format!(
                "the transcriber is {} s behind; this utterance was dropped",
                queued / 24_000
            ));
            let _ = self.events.try_send(TranscriptEvent { item_id, output });
            return;
        }
        let bytes = std::mem::size_of_val(&*pcm) as u64;
        let charge = match self.meter.as_ref().map(|m| m.charge(bytes)).transpose() {
            Ok(charge) => charge,
            Err(e) => {
                self.queued.fetch_sub(pcm.len(), Ordering::AcqRel);
                let output = Err(format!("{e}; this utterance was dropped"));
                let _ = self.events.try_send(TranscriptEvent { item_id, output });
                return;
            }
        };
        // An utterance is read after the prompt the session gave with its end.
        let prompt = end
            .then(|| self.prompt.lock().ok().and_then(|p| p.clone()))
            .flatten();
        let _ = self.tx.send(Command::Audio {
            charge,
            stream: self.stream,
            item_id,
            pcm,
            end,
            logprobs,
            prompt,
        });
    }
}

impl Drop for TranscribeSession {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Close {
            stream: self.stream,
        });
    }
}

/// One utterance's audio waiting for the transcriber.
struct Segment {
    item_id: Arc<str>,
    pcm: Vec<f32>,
    end: bool,
    logprobs: bool,
    /// The text it follows, once it ends.
    prompt: Option<Arc<str>>,
    /// Its audio's bytes on the session's meter.
    charges: Vec<MeterCharge>,
}

struct Stream {
    events: mpsc::Sender<TranscriptEvent>,
    queue: VecDeque<Segment>,
    /// Samples sent to this stream and not yet taken (shared with its session's handle).
    queued: Arc<AtomicUsize>,
    /// The prompt last given to the transcriber for this stream.
    prompt: Option<Arc<str>>,
}

impl Stream {
    fn push(&mut self, seg: Segment) {
        // Audio of the same utterance joins the last segment until it ends.
        match self.queue.back_mut() {
            Some(last) if !last.end && last.item_id == seg.item_id => {
                last.pcm.extend_from_slice(&seg.pcm);
                last.end = seg.end;
                last.logprobs |= seg.logprobs;
                last.prompt = seg.prompt;
                last.charges.extend(seg.charges);
            }
            _ => self.queue.push_back(seg),
        }
    }

    /// Drops the queued segments of `item_id` (their audio uncounted, their charges
    /// released); one being transcribed is no longer in the queue.
    fn forget(&mut self, item_id: &str) {
        let before: usize = self.queue.iter().map(|seg| seg.pcm.len()).sum();
        self.queue.retain(|seg| &*seg.item_id != item_id);
        let after: usize = self.queue.iter().map(|seg| seg.pcm.len()).sum();
        self.taken(before - after);
    }

    /// `samples` were taken off the queue.
    fn taken(&self, samples: usize) {
        self.queued.fetch_sub(samples, Ordering::AcqRel);
    }

    fn send(&self, item_id: Arc<str>, output: Result<TranscribeOutput, String>) {
        // A full channel means the session stopped reading: its answers are dropped.
        let _ = self.events.try_send(TranscriptEvent { item_id, output });
    }
}

struct LoopThread {
    transcriber: Box<dyn Transcriber>,
    rx: std_mpsc::Receiver<Command>,
    streams: HashMap<StreamId, Stream>,
}

impl LoopThread {
    fn new(transcriber: Box<dyn Transcriber>, rx: std_mpsc::Receiver<Command>) -> Self {
        Self {
            transcriber,
            rx,
            streams: HashMap::new(),
        }
    }

    fn run(mut self, ready: &AtomicBool) {
        let started = std::time::Instant::now();
        if let Err(e) = self.transcriber.warmup() {
            tracing::error!("transcriber warmup failed: {e}");
            return;
        }
        tracing::info!(
            transcriber = %self.transcriber.info().name,
            warmup_ms = started.elapsed().as_millis() as u64,
            "transcriber ready"
        );
        ready.store(true, Ordering::Release);
        while let Ok(cmd) = self.rx.recv() {
            self.handle(cmd);
            // Everything that arrived meanwhile joins this batch.
            while let Ok(cmd) = self.rx.try_recv() {
                self.handle(cmd);
            }
            while self.step() {
                while let Ok(cmd) = self.rx.try_recv() {
                    self.handle(cmd);
                }
            }
        }
    }

    fn open(
        &mut self,
        events: mpsc::Sender<TranscriptEvent>,
        queued: Arc<AtomicUsize>,
        reply: oneshot::Sender<Result<StreamId, ModelError>>,
    ) {
        let opened = self.transcriber.open_stream();
        if let Ok(id) = opened {
            let queue = VecDeque::new();
            self.streams.insert(
                id,
                Stream {
                    events,
                    queue,
                    queued,
                    prompt: None,
                },
            );
        }
        if let Err(Ok(id)) = reply.send(opened) {
            // The session gave up waiting: free the stream again.
            self.streams.remove(&id);
            self.transcriber.close_stream(id);
        }
    }

    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Open {
                events,
                queued,
                reply,
            } => self.open(events, queued, reply),
            Command::Audio {
                stream,
                item_id,
                pcm,
                end,
                logprobs,
                prompt,
                charge,
            } => {
                // Counted by the session's handle when it was sent.
                let Some(s) = self.streams.get_mut(&stream) else {
                    return;
                };
                s.push(Segment {
                    item_id,
                    pcm: pcm.to_vec(),
                    end,
                    logprobs,
                    prompt,
                    charges: charge.into_iter().collect(),
                });
            }
            Command::Close { stream } => {
                if self.streams.remove(&stream).is_some() {
                    self.transcriber.close_stream(stream);
                }
            }
            Command::Forget { stream, item_id } => {
                if let Some(s) = self.streams.get_mut(&stream) {
                    s.forget(&item_id);
                }
            }
            Command::Language { stream, language } => {
                if self.streams.contains_key(&stream) {
                    self.transcriber.set_language(stream, language.as_deref());
                }
            }
        }
    }

    /// Steps every stream with a waiting segment once (the first segment of each); returns
    /// whether anything was stepped.
    fn step(&mut self) -> bool {
        let work = self.take_ready();
        if work.is_empty() {
            return false;
        }
        let batch: Vec<TranscribeInput<'_>> = work
            .iter()
            .map(|(id, seg)| TranscribeInput {
                stream: *id,
                pcm: &seg.pcm,
                end: seg.end,
                logprobs: seg.logprobs,
            })
            .collect();
        let mut out = Vec::with_capacity(batch.len());
        let stepped = catch_unwind(AssertUnwindSafe(|| {
            self.transcriber.step(&batch, &mut out);
        }));
        drop(batch);
        if stepped.is_err() || out.len() != work.len() {
            tracing::error!(
                "the transcriber failed a batch of {} utterances",
                work.len()
            );
            for (id, seg) in work {
                if let Some(s) = self.streams.get(&id) {
                    if seg.end {
                        s.send(seg.item_id, Err("the transcriber failed".into()));
                    }
                }
            }
            return true;
        }
        for ((id, seg), result) in work.into_iter().zip(out) {
            let Some(s) = self.streams.get(&id) else {
                continue;
            };
            match result {
                Ok(TranscribeOutput::NotYet) if !seg.end => {}
                Ok(out) => s.send(seg.item_id, Ok(out)),
                Err(e) => s.send(seg.item_id, Err(e.to_string())),
            }
        }
        true
    }

    /// Takes the first segment of every stream that has one ready: its end, or any audio
    /// for a streaming transcriber; gives the transcriber each ending utterance's prompt.
    fn take_ready(&mut self) -> Vec<(StreamId, Segment)> {
        let mut work: Vec<(StreamId, Segment)> = Vec::new();
        for (&id, s) in self.streams.iter_mut() {
            // A streaming transcriber hears partial segments; an utterance one needs the end.
            let ready = s
                .queue
                .front()
                .is_some_and(|seg| seg.end || self.transcriber.info().streaming);
            if ready {
                if let Some(seg) = s.queue.pop_front() {
                    s.taken(seg.pcm.len());
                    // The prompt is the utterance's: given as its end is stepped.
                    if seg.end && s.prompt != seg.prompt {
                        s.prompt.clone_from(&seg.prompt);
                        self.transcriber.set_prompt(id, seg.prompt.as_deref());
                    }
                    work.push((id, seg));
                }
            }
        }
        work
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transcriber whose steps wait for the test to let them go; it logs the prompts it
    /// is given and the utterances it ends.
    struct Gated {
        info: TranscriberInfo,
        gate: std_mpsc::Receiver<()>,
        log: Arc<std::sync::Mutex<Vec<String>>>,
    }

    impl Transcriber for Gated {
        fn info(&self) -> &TranscriberInfo {
            &self.info
        }
        fn warmup(&mut self) -> Result<(), ModelError> {
            Ok(())
        }
        fn open_stream(&mut self) -> Result<StreamId, ModelError> {
            Ok(0)
        }
        fn close_stream(&mut self, _: StreamId) {}
        fn set_prompt(&mut self, _: StreamId, prompt: Option<&str>) {
            self.log.lock().unwrap().push(format!("prompt {prompt:?}"));
        }
        fn step(
            &mut self,
            batch: &[TranscribeInput<'_>],
            out: &mut Vec<Result<TranscribeOutput, ModelError>>,
        ) {
            let ends = batch.iter().filter(|b| b.end).count();
            self.log.lock().unwrap().push(format!("end {ends}"));
            let _ = self.gate.recv();
            out.extend(batch.iter().map(|_| Ok(TranscribeOutput::NotYet)));
        }
    }

    /// A gated loop with one stream, stuck in the step of a first utterance (`item_0`, 1 s)
    /// until the test sends on the returned gate.
    async fn busy_loop() -> (
        std_mpsc::Sender<()>,
        TranscribeSession,
        mpsc::Receiver<TranscriptEvent>,
    ) {
        let (open, port, rx, _) = logged_busy_loop().await;
        (open, port, rx)
    }

    /// [`busy_loop`], with the transcriber's log.
    async fn logged_busy_loop() -> (
        std_mpsc::Sender<()>,
        TranscribeSession,
        mpsc::Receiver<TranscriptEvent>,
        Arc<std::sync::Mutex<Vec<String>>>,
    ) {
        let (open, gate) = std_mpsc::channel();
        let info = TranscriberInfo {
            name: "gated".into(),
            max_streams: 1,
            streaming: false,
        };
        let log = Arc::default();
        let gated = Gated {
            info,
            gate,
            log: Arc::clone(&log),
        };
        let lp = TranscribeLoop::spawn(Box::new(gated), "test").unwrap();
        let (port, rx) = lp.open(None).await.unwrap();
        port.send("item_0".into(), Arc::from(vec![0.0; 24_000]), true, false);
        while port.queued.load(Ordering::Acquire) != 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (open, port, rx, log)
    }

    #[tokio::test]
    async fn an_utterance_is_read_after_the_prompt_it_was_sent_with() {
        // Two utterances wait behind a busy step, sent with different prompts: each is
        // given its own as its end is stepped, not the last one the session set.
        let (open, port, mut rx, log) = logged_busy_loop().await;
        let hints = |prompt: Option<&str>| crate::session::TranscriptionHints {
            language: None,
            prompt: prompt.map(str::to_string),
        };
        port.hints(&hints(Some("Mm-hmm. Yeah.")));
        port.send("bc_1".into(), Arc::from(vec![0.0; 2_400]), true, true);
        port.hints(&hints(None));
        port.send("item_2".into(), Arc::from(vec![0.0; 2_400]), true, false);
        port.send("item_3".into(), Arc::from(vec![0.0; 2_400]), true, false);
        for _ in 0..4 {
            open.send(()).unwrap();
        }
        for _ in 0..4 {
            let ev = tokio::time::timeout(Duration::from_secs(2), rx.recv()).await;
            assert!(
                ev.is_ok(),
                "every utterance answered: {:?}",
                log.lock().unwrap()
            );
        }
        assert_eq!(
            *log.lock().unwrap(),
            [
                "end 1",
                "prompt Some(\"Mm-hmm. Yeah.\")",
                "end 1",
                "prompt None",
                "end 1",
                "end 1"
            ]
        );
        drop(open);
    }

    #[tokio::test]
    async fn a_forgotten_utterance_is_dropped_from_the_queue() {
        // The first utterance keeps the loop busy in its step; the second waits in the queue.
        let (open, port, mut rx) = busy_loop().await;
        port.send("spec_1".into(), Arc::from(vec![0.0; 24_000]), true, false);
        assert_eq!(port.queued.load(Ordering::Acquire), 24_000);
        port.forget(&Arc::from("spec_1"));
        // Two steps may go: the second would be the forgotten one's, had it stayed queued.
        open.send(()).unwrap();
        open.send(()).unwrap();
        let ev = tokio::time::timeout(Duration::from_secs(2), rx.recv())
            .await
            .expect("the first utterance's answer")
            .unwrap();
        assert_eq!(&*ev.item_id, "item_0");
        let next = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await;
        assert!(next.is_err(), "the forgotten utterance was transcribed");
        assert_eq!(
            port.queued.load(Ordering::Acquire),
            0,
            "its audio uncounted"
        );
        drop(open);
    }

    #[tokio::test]
    async fn a_busy_loop_queues_no_more_than_the_bound() {
        // The first utterance keeps the loop busy in its step.
        let (open, port, mut rx) = busy_loop().await;
        // 60 s more fit the bound while the loop cannot take any of it …
        for _ in 0..60 {
            port.send("item_1".into(), Arc::from(vec![0.0; 24_000]), false, false);
        }
        assert_eq!(port.queued.load(Ordering::Acquire), MAX_QUEUED_SAMPLES);
        // … and the next second is refused at once, with the loop still stuck.
        port.send("item_1".into(), Arc::from(vec![0.0; 24_000]), true, false);
        let ev = tokio::time::timeout(Duration::from_secs(2), rx.recv())
            .await
            .expect("refused while the loop is busy")
            .unwrap();
        assert_eq!(&*ev.item_id, "item_1");
        let err = ev.output.unwrap_err();
        assert!(err.contains("60 s behind"), "{err}");
        assert_eq!(port.queued.load(Ordering::Acquire), MAX_QUEUED_SAMPLES);
        drop(open);
    }
}
