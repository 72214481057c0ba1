//! The model loop: one thread per device that owns a [`DuplexModel`] and steps every open
//! session once per frame period, on an absolute grid (deadline = start + n · period; after
//! a stall it skips slots instead of bursting). Sessions talk to it through a
//! [`ModelSession`] handle; outputs come back on the session's channel, stamped with the
//! epoch of the last request, so the session can fence off a cancelled response.
//!
//! A panic inside the model fails the sessions of that batch (their slots are closed) and
//! the loop goes on; if the thread dies anyway, [`ModelLoop::is_alive`] turns false (and
//! `/ready` with it), and opening a slot never waits more than [`OPEN_TIMEOUT`].

use std::collections::{HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use duet_models::{DuplexModel, ModelError, ModelInfo, Request, SlotId, StepInput, StepOutput};
use tokio::sync::{mpsc, oneshot};

use crate::cpu_share::Share;
use crate::session::{Epoch, ModelEvent, ModelPort};

/// Input frames a slot may queue (catch-up backlog) before the oldest are dropped: 500
/// frames, 10 s at echo's 20 ms, 40 s at Moshi's 80 ms.
const MAX_QUEUED_FRAMES: usize = 500;
/// Longest wait for a slot: a stalled model answers 503 instead of hanging every upgrade.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(5);
/// Extra steps per tick a slot with backlog may take, to catch up with faster-than-real-time input.
const MAX_STEPS_PER_TICK: usize = 4;
/// Model events a session may have unread before it is failed.
pub const SESSION_CHANNEL: usize = 4096;

enum Command {
    Open {
        events: mpsc::Sender<ModelEvent>,
        input: Arc<InputQueue>,
        reply: oneshot::Sender<Result<SlotId, ModelError>>,
    },
    Request {
        slot: SlotId,
        epoch: Epoch,
        request: Request,
    },
    Close {
        slot: SlotId,
    },
    Fault(ModelFault),
}

/// A fault to inject (tests of panic containment only).
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub enum ModelFault {
    /// The next batched step panics inside the model.
    PanicStep,
    /// The loop thread itself panics.
    PanicThread,
}

/// Cloneable handle to a running model loop.
#[derive(Clone)]
pub struct ModelLoop {
    tx: std_mpsc::Sender<Command>,
    info: Arc<ModelInfo>,
    thread: DeviceThread,
    active: Arc<AtomicUsize>,
}

/// A device's loop thread as its handles see it: ready once warmed up, dead once it ended.
#[derive(Clone)]
pub(crate) struct DeviceThread {
    ready: Arc<AtomicBool>,
    alive: Arc<AtomicBool>,
}

/// Marks the loop dead when its thread ends, by return or by panic.
struct AliveFlag(Arc<AtomicBool>, &'static str);

impl Drop for AliveFlag {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
        if thread::panicking() {
            tracing::error!("{}", self.1);
        }
    }
}

impl DeviceThread {
    /// Runs `body` on a thread named `name` with `share` of a busy CPU; it sets the flag it
    /// gets once it is ready. `on_panic` is logged if the thread dies by a panic.
    pub(crate) fn spawn(
        name: String,
        share: Share,
        on_panic: &'static str,
        body: impl FnOnce(&AtomicBool) + Send + 'static,
    ) -> std::io::Result<Self> {
        let ready = Arc::new(AtomicBool::new(false));
        let alive = Arc::new(AtomicBool::new(true));
        let (r, flag) = (ready.clone(), AliveFlag(alive.clone(), on_panic));
        thread::Builder::new().name(name).spawn(move || {
            let _alive = flag;
            crate::cpu_share::enter(share);
            body(&r)
        })?;
        Ok(Self { ready, alive })
    }

    /// True once warmup finished.
    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// False once the thread ended (a panic, or warmup failed).
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }
}

impl ModelLoop {
    /// Starts the loop thread for `model`; it warms the model up, then reports ready.
    pub fn spawn(model: Box<dyn DuplexModel>, device: &str) -> std::io::Result<Self> {
        let (tx, rx) = std_mpsc::channel();
        let info = Arc::new(model.info().clone());
        let active = Arc::new(AtomicUsize::new(0));
        let a = active.clone();
        let thread = DeviceThread::spawn(
            format!("model-{device}"),
            Share::Prompt,
            "the model loop thread panicked; every session on it fails",
            move |ready| LoopThread::new(model, rx, a).run(ready),
        )?;
        Ok(Self {
            tx,
            info,
            thread,
            active,
        })
    }

    /// False once the loop thread ended (a panic, or warmup failed).
    pub fn is_alive(&self) -> bool {
        self.thread.is_alive()
    }

    /// Injects a fault (panic-containment tests).
    #[doc(hidden)]
    pub fn inject_fault(&self, fault: ModelFault) {
        let _ = self.tx.send(Command::Fault(fault));
    }

    /// The model's declared facts.
    pub fn info(&self) -> &ModelInfo {
        &self.info
    }

    /// True once warmup finished.
    pub fn is_ready(&self) -> bool {
        self.thread.is_ready()
    }

    /// Sessions currently holding a slot.
    pub fn active_sessions(&self) -> usize {
        self.active.load(Ordering::Relaxed)
    }

    /// Opens a slot for a new session.
    pub async fn open(&self) -> Result<(ModelSession, mpsc::Receiver<ModelEvent>), ModelError> {
        let (events, rx) = mpsc::channel(SESSION_CHANNEL);
        let (reply, answer) = oneshot::channel();
        let gone = || ModelError::Failed("model loop stopped".into());
        let input = Arc::new(InputQueue::default());
        self.tx
            .send(Command::Open {
                events,
                input: input.clone(),
                reply,
            })
            .map_err(|_| gone())?;
        let slot = tokio::time::timeout(OPEN_TIMEOUT, answer)
            .await
            .map_err(|_| {
                ModelError::Failed(format!(
                    "the model did not open a slot within {} s",
                    OPEN_TIMEOUT.as_secs()
                ))
            })?
            .map_err(|_| gone())??;
        let frame = self.info.frame_samples;
        Ok((
            ModelSession {
                slot,
                tx: self.tx.clone(),
                input,
                frame,
                autonomous: self.info.autonomous,
            },
            rx,
        ))
    }
}

/// A session's slot in the model loop; closes the slot when dropped.
pub struct ModelSession {
    slot: SlotId,
    tx: std_mpsc::Sender<Command>,
    input: Arc<InputQueue>,
    frame: usize,
    autonomous: bool,
}

/// A slot's pending input frames, shared between its session (which pushes) and the loop
/// (which pops once per step). A lock instead of a channel: the loop needs no wake-up per
/// frame, which at 64 sessions was 3,200 futex wakes a second. Frame buffers are recycled
/// ([`InputQueue::recycle`]): steady-state input allocates nothing.
#[derive(Default)]
pub struct InputQueue(Mutex<Frames>);

#[derive(Default)]
struct Frames {
    queued: VecDeque<Vec<f32>>,
    spare: Vec<Vec<f32>>,
}

/// Frame buffers a slot keeps for reuse.
const SPARE_FRAMES: usize = 8;

impl InputQueue {
    fn push_frames(&self, pcm: &[f32], frame: usize) {
        let Ok(mut q) = self.0.lock() else { return };
        for f in pcm.chunks(frame).filter(|f| f.len() == frame) {
            if q.queued.len() >= MAX_QUEUED_FRAMES {
                if let Some(old) = q.queued.pop_front() {
                    q.spare.push(old);
                }
            }
            let mut buf = q.spare.pop().unwrap_or_default();
            buf.clear();
            buf.extend_from_slice(f);
            q.queued.push_back(buf);
        }
    }

    fn pop(&self) -> Option<Vec<f32>> {
        self.0.lock().ok()?.queued.pop_front()
    }

    /// A popped frame's buffer, back for the next push.
    fn recycle(&self, buf: Vec<f32>) {
        if let Ok(mut q) = self.0.lock() {
            if q.spare.len() < SPARE_FRAMES {
                q.spare.push(buf);
            }
        };
    }

    fn len(&self) -> usize {
        self.0.lock().map_or(0, |q| q.queued.len())
    }
}

impl ModelSession {
    /// The slot's id in the model loop.
    pub fn slot(&self) -> SlotId {
        self.slot
    }
}

impl ModelPort for ModelSession {
    fn autonomous(&self) -> bool {
        self.autonomous
    }

    fn input(&self, pcm: &[f32]) {
        self.input.push_frames(pcm, self.frame);
    }

    fn request(&self, epoch: Epoch, request: Request) {
        let _ = self.tx.send(Command::Request {
            slot: self.slot,
            epoch,
            request,
        });
    }
}

impl Drop for ModelSession {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Close { slot: self.slot });
    }
}

struct Slot {
    events: mpsc::Sender<ModelEvent>,
    queue: Arc<InputQueue>,
    epoch: Epoch,
}

struct LoopThread {
    model: Box<dyn DuplexModel>,
    /// Test hook: the next step panics.
    panic_next_step: bool,
    rx: std_mpsc::Receiver<Command>,
    slots: HashMap<SlotId, Slot>,
    period: Duration,
    active: Arc<AtomicUsize>,
    silence: Vec<f32>,
}

impl LoopThread {
    fn new(
        model: Box<dyn DuplexModel>,
        rx: std_mpsc::Receiver<Command>,
        active: Arc<AtomicUsize>,
    ) -> Self {
        let frame = model.info().frame_samples;
        let period = Duration::from_micros(model.info().frame_micros());
        Self {
            model,
            panic_next_step: false,
            rx,
            slots: HashMap::new(),
            period,
            active,
            silence: vec![0.0; frame],
        }
    }

    fn run(mut self, ready: &AtomicBool) {
        if let Err(e) = self.model.warmup() {
            tracing::error!(error = %e, "model warmup failed; the server will not report ready");
            return;
        }
        ready.store(true, Ordering::Release);
        tracing::info!(model = %self.model.info().name, "model ready");
        loop {
            // Idle: block until a session arrives, then start a fresh grid.
            if self.slots.is_empty() {
                match self.rx.recv() {
                    Ok(cmd) => self.handle(cmd),
                    Err(_) => return,
                }
                continue;
            }
            if !self.tick_loop() {
                return;
            }
        }
    }

    /// Steps on an absolute grid until no slot is left. Returns false when the handle is gone.
    fn tick_loop(&mut self) -> bool {
        let start = Instant::now();
        let mut n: u32 = 1;
        while !self.slots.is_empty() {
            let deadline = start + self.period * n;
            loop {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                match self.rx.recv_timeout(deadline - now) {
                    Ok(cmd) => self.handle(cmd),
                    Err(std_mpsc::RecvTimeoutError::Timeout) => break,
                    Err(std_mpsc::RecvTimeoutError::Disconnected) => return false,
                }
            }
            self.tick();
            n += 1;
            let behind = start.elapsed().as_micros() / self.period.as_micros().max(1);
            if behind as u32 >= n {
                tracing::warn!(
                    skipped = behind as u32 + 1 - n,
                    "model loop fell behind; skipping slots"
                );
                n = behind as u32 + 1;
            }
        }
        true
    }

    fn handle(&mut self, cmd: Command) {
        match cmd {
            Command::Open {
                events,
                input,
                reply,
            } => {
                let result = self.model.open_slot();
                if let Ok(slot) = result {
                    self.slots.insert(
                        slot,
                        Slot {
                            events,
                            queue: input,
                            epoch: Epoch::default(),
                        },
                    );
                    self.active.store(self.slots.len(), Ordering::Relaxed);
                }
                if let Err(Ok(slot)) = reply.send(result) {
                    self.close(slot);
                }
            }

            Command::Request {
                slot,
                epoch,
                request,
            } => {
                let respond = matches!(request, Request::Respond { .. });
                if let Some(s) = self.slots.get_mut(&slot) {
                    s.epoch = epoch;
                    if let Err(e) = self.model.request(slot, request) {
                        return self.fail(slot, e);
                    }
                }
                // A turn-based answer starts now, not at the grid's next tick: the slot
                // steps at once on the input it has (a frame it would step on next anyway),
                // so its first audio skips the batch's phase (0–20 ms). Later frames go with
                // the batch (a slot short of input steps on silence, then catches up).
                if respond
                    && !self.model.info().autonomous
                    && self.slots.get(&slot).is_some_and(|s| s.queue.len() > 0)
                {
                    self.step(&[slot]);
                }
            }
            Command::Close { slot } => self.close(slot),
            Command::Fault(ModelFault::PanicStep) => self.panic_next_step = true,
            Command::Fault(ModelFault::PanicThread) => panic!("injected fault: model loop thread"),
        }
    }

    fn close(&mut self, slot: SlotId) {
        if self.slots.remove(&slot).is_some() {
            // A model that panicked before may panic again here: the slot is gone either way.
            let model = &mut self.model;
            if catch_unwind(AssertUnwindSafe(|| model.close_slot(slot))).is_err() {
                tracing::error!(slot, "the model panicked closing a slot");
            }
            self.active.store(self.slots.len(), Ordering::Relaxed);
        }
    }

    fn fail(&mut self, slot: SlotId, e: ModelError) {
        tracing::warn!(slot, error = %e, "model failed for one session");
        if let Some(s) = self.slots.get(&slot) {
            let _ = s.events.try_send(ModelEvent::Failed {
                code: e.code(),
                message: e.to_string(),
            });
        }
        self.close(slot);
    }

    /// One grid slot: every session steps once; sessions with queued input may step again.
    fn tick(&mut self) {
        for round in 0..MAX_STEPS_PER_TICK {
            let mut ids: Vec<SlotId> = self
                .slots
                .iter()
                .filter(|(_, s)| round == 0 || s.queue.len() > 1)
                .map(|(id, _)| *id)
                .collect();
            if ids.is_empty() {
                break;
            }
            ids.sort_unstable();
            self.step(&ids);
        }
    }

    fn step(&mut self, ids: &[SlotId]) {
        let frames: Vec<Option<Vec<f32>>> = ids
            .iter()
            .map(|id| self.slots.get_mut(id).and_then(|s| s.queue.pop()))
            .collect();
        let batch: Vec<StepInput<'_>> = ids
            .iter()
            .zip(&frames)
            .map(|(&slot, f)| StepInput {
                slot,
                pcm: f.as_deref().unwrap_or(&self.silence),
            })
            .collect();
        let mut outputs = Vec::with_capacity(batch.len());
        let started = Instant::now();
        let (model, inject) = (&mut self.model, std::mem::take(&mut self.panic_next_step));
        let stepped = catch_unwind(AssertUnwindSafe(|| {
            if inject {
                panic!("injected fault: model step");
            }
            model.step(&batch, &mut outputs)
        }));
        crate::metrics::METRICS
            .model_step
            .observe(started.elapsed());
        drop(batch);
        for (id, frame) in ids.iter().zip(frames) {
            if let (Some(s), Some(buf)) = (self.slots.get(id), frame) {
                s.queue.recycle(buf);
            }
        }
        if stepped.is_err() {
            tracing::error!(
                sessions = ids.len(),
                "the model panicked in a step; that batch's sessions fail"
            );
            for &slot in ids {
                self.fail(slot, ModelError::Failed("the model panicked".into()));
            }
            return;
        }
        let mut results = outputs.into_iter();
        for &slot in ids {
            match results.next() {
                Some(Ok(output)) => self.deliver(slot, output),
                Some(Err(e)) => self.fail(slot, e),
                None => self.fail(slot, ModelError::Failed("model returned no output".into())),
            }
        }
    }

    fn deliver(&mut self, slot: SlotId, output: StepOutput) {
        // An autonomous model's every step counts: a silent one may carry the end of its speech.
        let autonomous = self.model.info().autonomous;
        if !autonomous && output.is_empty() {
            return;
        }
        let Some(s) = self.slots.get(&slot) else {
            return;
        };
        let event = ModelEvent::Output {
            epoch: s.epoch,
            output,
        };
        match s.events.try_send(event) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => self.fail(
                slot,
                ModelError::Failed("session is not reading model output".into()),
            ),
            Err(mpsc::error::TrySendError::Closed(_)) => self.close(slot),
        }
    }
}
