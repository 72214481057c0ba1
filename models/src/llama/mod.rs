//! The embedded LLM: a Llama, Qwen2 (Qwen2.5) or Qwen3 GGUF chat model with a ChatML
//! template (SmolLM2-135M-Instruct by default)
//! run by candle behind the cascade's [`Llm`] port, so the cascade needs no server beside
//! Duet.
//!
//! [`EmbeddedLlm::new`] gives three parts: the port ([`EmbeddedLlm`], which answers are
//! asked of), the stepped engine ([`LlmEngine`]: `receive`, then `step`, a round at a time)
//! and the prompt side ([`LlmPrep`]: `render_next`). This crate runs no thread: the driver
//! runs the engine on one thread and the prompt side on [`PREP_THREADS`] others.
//!
//! - The tokenizer and the chat template come from the GGUF ([`tokenizer`], [`template`]);
//!   tools are offered and parsed in the Hermes `<tool_call>` format.
//! - Each answer keeps its KV cache when it ends; the next request that starts with the same
//!   tokens (the next turn of that conversation: the same prompt plus the answer plus the
//!   new words) copies that prefix and prefills only what is new. The kept caches are
//!   bounded in bytes (least recently used dropped first).
//! - Answers in flight take turns a step at a time (a prefill chunk, or one token), so one
//!   long prompt does not stall every other conversation. Dropping an answer's stream
//!   cancels it before its next step.
//! - Prompts are rendered and tokenized by [`LlmPrep`], never by the engine: a long prompt
//!   delays only its own answer.
//! - The wait is bounded: at most `max_waiting` answers wait for a place (past it an answer
//!   is refused at once with [`LLM_QUEUE_FULL`]), none waits longer than `max_wait`, by the
//!   driver's [`Clock`] (then [`LLM_QUEUE_TIMEOUT`]), and voice answers ([`Priority::Voice`]) go ahead of HTTP
//!   completions ([`Priority::Batch`]), which never take the last quarter of the places
//!   and, on a CPU, step every other round while a voice answer runs.

mod engine;
pub mod model;
pub mod random;
pub mod template;
pub mod tokenizer;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use candle::quantized::gguf_file;
use candle::{Device, Tensor};
use candle_transformers::generation::{LogitsProcessor, Sampling};

use crate::cascade::{
    answer_channel, AnswerEvents, AnswerSender, ChatRequest, Llm, LlmEvent, LlmStream, LLM_ERROR,
    LLM_UNAVAILABLE,
};
use crate::{AnswerFailure, ModelError};
use engine::Engine;
pub use engine::LlmEngine;
pub use model::{Arch, KvCache, Llama, WeightFormat};
use template::{ChatMl, Prompt, ToolCallParser};
pub use tokenizer::Tokenizer;

/// The failure code of a conversation that cannot fit the model's context even with its
/// oldest messages left out (OpenAI's code for it).
pub const CONTEXT_LENGTH_EXCEEDED: &str = "context_length_exceeded";
/// The failure code of an answer refused because `max_waiting` answers already wait.
pub const LLM_QUEUE_FULL: &str = "llm_queue_full";
/// The failure code of an answer that waited `max_wait` without starting.
pub const LLM_QUEUE_TIMEOUT: &str = "llm_queue_timeout";

/// Whose answer it is: voice answers go first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Priority {
    /// A realtime session's (the cascade's) answer: someone is listening.
    Voice = 0,
    /// An HTTP request's (`/v1/chat/completions`).
    Batch = 1,
}

/// Threads the driver gives [`LlmPrep`] to render and tokenize prompts.
pub const PREP_THREADS: usize = 2;

/// Prompt tokens run in one step (a longer prompt takes several, between other answers').
const PREFILL_CHUNK: usize = 128;
/// Recent tokens the repetition penalty looks at.
const PENALTY_WINDOW: usize = 64;
/// A cached prefix shorter than this is not worth copying.
const MIN_REUSE: usize = 8;

/// How the embedded LLM runs.
#[derive(Clone, Debug)]
pub struct LlamaOptions {
    /// How the weights are held.
    pub format: WeightFormat,
    /// Tokens an answer may have when the request does not say.
    pub max_tokens: usize,
    /// Bytes of KV cache kept for later turns, over all conversations.
    pub cache_bytes: usize,
    /// Sampling temperature when the request does not say; 0 is greedy (deterministic).
    pub temperature: f64,
    /// Longest conversation an answer runs on, in tokens (prompt and answer; the oldest
    /// messages are left out beyond it); the model's own context when larger.
    pub context: usize,
    /// Answers computed at once (each holds its KV cache); later ones wait their turn.
    pub max_running: usize,
    /// Penalty on tokens of the last 64 (1.0: none); small models loop without it.
    pub repeat_penalty: f32,
    /// Seed of the sampler (answer n uses seed + n).
    pub seed: u64,
    /// Answers that may wait for a place (rendering, or for one of `max_running`); past it
    /// a new answer fails at once with [`LLM_QUEUE_FULL`] (a voice answer only when this
    /// many voice answers wait: HTTP completions never fill the queue for it).
    pub max_waiting: usize,
    /// Longest wait for a place; past it the answer fails with [`LLM_QUEUE_TIMEOUT`].
    pub max_wait: Duration,
    /// What tells the time for `max_wait`, given by the driver (`models/` reads no clock);
    /// without one, answers wait for a place without a deadline.
    pub clock: Option<Clock>,
}

/// A clock the driver lends the engine: the time now.
#[derive(Clone)]
pub struct Clock(pub Arc<dyn Fn() -> Instant + Send + Sync>);

impl Clock {
    fn now(&self) -> Instant {
        (self.0)()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

impl Default for LlamaOptions {
    fn default() -> Self {
        Self {
            format: WeightFormat::F16,
            max_tokens: 256,
            cache_bytes: 256 << 20,
            context: 2048,
            max_running: 8,
            temperature: 0.0,
            repeat_penalty: 1.1,
            seed: 299_792_458,
            max_waiting: 32,
            max_wait: Duration::from_secs(20),
            clock: None,
        }
    }
}

/// The GGUF file of a model directory: the one `*.gguf` in it.
pub fn find_gguf(dir: &Path) -> Result<PathBuf, ModelError> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| ModelError::Failed(format!("reading {}: {e}", dir.display())))?;
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "gguf"))
        .collect();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(ModelError::Failed(format!(
            "{} has no .gguf file (scripts/install-models DIR writes DIR/smollm2-135m-instruct)",
            dir.display()
        ))),
        n => Err(ModelError::Failed(format!(
            "{} has {n} .gguf files; keep one",
            dir.display()
        ))),
    }
}

/// A loaded model: weights, tokenizer and template.
pub struct LoadedLlama {
    /// The weights.
    pub model: Llama,
    /// The tokenizer of the GGUF.
    pub tokenizer: Tokenizer,
    /// The chat template.
    pub template: ChatMl,
    /// `general.name`, or the file name.
    pub name: String,
}

fn strings(md: &std::collections::HashMap<String, gguf_file::Value>, key: &str) -> Vec<String> {
    match md.get(key) {
        Some(gguf_file::Value::Array(items)) => items
            .iter()
            .map(|v| v.to_string().cloned().unwrap_or_default())
            .collect(),
        _ => Vec::new(),
    }
}

impl LoadedLlama {
    /// Loads the model of a directory with one `.gguf` file.
    pub fn load(dir: &Path, format: WeightFormat, device: &Device) -> Result<Self, ModelError> {
        let path = find_gguf(dir)?;
        let fail = |e: String| ModelError::Failed(format!("{}: {e}", path.display()));
        let mut file =
            std::io::BufReader::new(std::fs::File::open(&path).map_err(|e| fail(e.to_string()))?);
        let content = gguf_file::Content::read(&mut file).map_err(|e| fail(e.to_string()))?;
        let md = &content.metadata;
        let text = |k: &str| md.get(k).and_then(|v| v.to_string().ok()).cloned();
        let types: Vec<i32> = match md.get("tokenizer.ggml.token_type") {
            Some(gguf_file::Value::Array(items)) => {
                items.iter().map(|v| v.to_i32().unwrap_or(1)).collect()
            }
            _ => Vec::new(),
        };
        let tokens = strings(md, "tokenizer.ggml.tokens");
        if tokens.is_empty() {
            return Err(fail("no tokenizer.ggml.tokens".into()));
        }
        let tokenizer = Tokenizer::new(
            &text("tokenizer.ggml.model").unwrap_or_default(),
            &tokens,
            &types,
            &strings(md, "tokenizer.ggml.merges"),
        )
        .map_err(|e| fail(e.to_string()))?
        .with_pre_tokenizer(tokenizer::PreTokenizer::named(
            text("tokenizer.ggml.pre").as_deref(),
        ));
        let template = ChatMl::new(&tokenizer, text("tokenizer.chat_template").as_deref())
            .ok_or_else(|| fail("the model's chat template is not ChatML (<|im_start|>)".into()))?;
        let name = text("general.name").unwrap_or_else(|| {
            path.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
        let model =
            Llama::load(&content, &mut file, format, device).map_err(|e| fail(e.to_string()))?;
        Ok(Self {
            model,
            tokenizer,
            template,
            name,
        })
    }
}

/// What the engine has done since it started (for `/metrics` and tests).
#[derive(Debug, Default)]
pub struct LlmStats {
    /// Answers asked for.
    pub answers: AtomicU64,
    /// Answers whose stream was dropped before they ended (barge-in, a client gone).
    pub cancelled: AtomicU64,
    /// Prompt tokens run through the model (not those taken from a kept cache).
    pub prefill_tokens: AtomicU64,
    /// Prompt tokens taken from a kept cache.
    pub cached_tokens: AtomicU64,
    /// Answer tokens generated.
    pub completion_tokens: AtomicU64,
    /// Answers in progress now.
    pub running: AtomicUsize,
    /// Bytes of KV cache kept for later turns now.
    pub kept_bytes: AtomicUsize,
    /// Answers waiting for a place now.
    pub waiting: AtomicUsize,
    /// Answers refused because the queue was full ([`LLM_QUEUE_FULL`]).
    pub queue_full: AtomicU64,
    /// Answers that waited past the deadline ([`LLM_QUEUE_TIMEOUT`]).
    pub queue_timeouts: AtomicU64,
}

/// One answer's request: rendered by [`LlmPrep`], then run by [`LlmEngine`].
struct Job {
    request: ChatRequest,
    priority: Priority,
    /// When it stops waiting for a place (`None`: no clock was given).
    deadline: Option<Instant>,
    events: AnswerSender,
    cancelled: Arc<AtomicBool>,
    /// Its place among the waiting; given back when it starts or ends.
    slot: Option<WaitSlot>,
    /// The prompt and the answer's most tokens, once rendered.
    prompt: Option<(Prompt, usize)>,
}

impl Job {
    /// Ends the answer before it started.
    fn fail(mut self, code: &str, message: String) {
        self.slot = None;
        let _ = self.events.send(LlmEvent::Failed(AnswerFailure {
            code: code.into(),
            message,
        }));
    }

    /// Whether it waited past its deadline, by `clock`.
    fn expired(&self, clock: Option<&Clock>) -> bool {
        self.deadline
            .zip(clock)
            .is_some_and(|(deadline, clock)| clock.now() > deadline)
    }
}

/// A place among the waiting answers of one priority; given back on drop.
struct WaitSlot(Arc<AtomicUsize>, Arc<LlmStats>);

impl Drop for WaitSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
        self.1.waiting.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Answers waiting to be rendered, voice first.
#[derive(Default)]
struct PrepQueue {
    jobs: [VecDeque<Job>; 2],
    closed: bool,
}

/// What the prep threads share.
struct Prep {
    queue: Mutex<PrepQueue>,
    ready: Condvar,
    text: Arc<TextSide>,
    context: usize,
    max_tokens: usize,
    max_wait: Duration,
    clock: Option<Clock>,
    engine: Sender<Job>,
    stats: Arc<LlmStats>,
}

/// The tokenizer and the template, shared by the prep threads and the engine.
struct TextSide {
    tokenizer: Tokenizer,
    template: ChatMl,
}

/// Why an answer was refused at once.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct QueueFull(pub String);

/// The embedded LLM. See the module docs.
pub struct EmbeddedLlm {
    prep: Arc<Prep>,
    /// Answers waiting, by priority.
    waiting: [Arc<AtomicUsize>; 2],
    max_waiting: usize,
    name: String,
    context: usize,
    stats: Arc<LlmStats>,
}

impl EmbeddedLlm {
    /// The embedded LLM on a loaded model: the port, the engine and the prompt side, which
    /// the driver runs (`while engine.receive() { engine.step() }` on one thread, `while
    /// prep.render_next() {}` on [`PREP_THREADS`] others). Both end once the port is
    /// dropped.
    pub fn new(loaded: LoadedLlama, options: LlamaOptions) -> (Self, LlmEngine, LlmPrep) {
        let (tx, rx) = mpsc::channel();
        let LoadedLlama {
            model,
            tokenizer,
            template,
            name,
        } = loaded;
        let model_context = model.shape().context;
        let stats = Arc::new(LlmStats::default());
        let text = Arc::new(TextSide {
            tokenizer,
            template,
        });
        let engine = LlmEngine::new(
            Engine::new(model, text.clone(), options.clone(), stats.clone()),
            rx,
        );
        let prep = Arc::new(Prep {
            queue: Mutex::new(PrepQueue::default()),
            ready: Condvar::new(),
            text,
            context: engine.engine.context(),
            max_tokens: options.max_tokens,
            max_wait: options.max_wait,
            clock: options.clock.clone(),
            engine: tx,
            stats: stats.clone(),
        });
        let llm = Self {
            prep: prep.clone(),
            waiting: Default::default(),
            max_waiting: options.max_waiting.max(1),
            name,
            context: model_context,
            stats,
        };
        (llm, engine, LlmPrep(prep))
    }

    /// What the engine has done.
    pub fn stats(&self) -> &LlmStats {
        &self.stats
    }

    /// The model's name (`general.name` of the GGUF).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The model's context, in tokens.
    pub fn context(&self) -> usize {
        self.context
    }

    /// The longest an answer waits for a place.
    pub fn max_wait(&self) -> Duration {
        self.prep.max_wait
    }

    /// Answers waiting for a place now.
    pub fn waiting(&self) -> usize {
        self.waiting.iter().map(|w| w.load(Ordering::Acquire)).sum()
    }

    /// Starts an answer with `priority`, or refuses it at once when the queue is full.
    pub fn submit(
        &self,
        request: ChatRequest,
        priority: Priority,
    ) -> Result<Box<dyn LlmStream>, QueueFull> {
        let mine = &self.waiting[priority as usize];
        // Voice answers count only each other: HTTP completions never fill their queue.
        let count = match priority {
            Priority::Voice => mine.fetch_add(1, Ordering::AcqRel),
            Priority::Batch => {
                let voice = self.waiting[Priority::Voice as usize].load(Ordering::Acquire);
                mine.fetch_add(1, Ordering::AcqRel) + voice
            }
        };
        self.stats.waiting.fetch_add(1, Ordering::Relaxed);
        let slot = WaitSlot(mine.clone(), self.stats.clone());
        if count >= self.max_waiting {
            drop(slot);
            self.stats.queue_full.fetch_add(1, Ordering::Relaxed);
            return Err(QueueFull(format!(
                "the embedded LLM has {} answers waiting already, the most it queues",
                self.max_waiting
            )));
        }
        let (tx, rx) = answer_channel();
        let cancelled = Arc::new(AtomicBool::new(false));
        self.prep.push(Job {
            request,
            priority,
            deadline: self
                .prep
                .clock
                .as_ref()
                .map(|c| c.now() + self.prep.max_wait),
            events: tx,
            cancelled: cancelled.clone(),
            slot: Some(slot),
            prompt: None,
        });
        Ok(Box::new(EmbeddedStream {
            events: rx,
            cancelled,
            ended: false,
        }))
    }
}

impl Drop for EmbeddedLlm {
    fn drop(&mut self) {
        if let Ok(mut q) = self.prep.queue.lock() {
            q.closed = true;
        }
        self.prep.ready.notify_all();
    }
}

impl Prep {
    fn push(&self, job: Job) {
        match self.queue.lock() {
            Ok(mut q) => q.jobs[job.priority as usize].push_back(job),
            Err(_) => job.fail(LLM_UNAVAILABLE, "the embedded LLM stopped".into()),
        }
        self.ready.notify_one();
    }

    /// The next job to render, voice first (`None` when the LLM is gone).
    fn next(&self) -> Option<Job> {
        let mut q = self.queue.lock().ok()?;
        loop {
            if q.closed {
                return None;
            }
            if let Some(job) = q.jobs[0].pop_front().or_else(|| q.jobs[1].pop_front()) {
                return Some(job);
            }
            q = self.ready.wait(q).ok()?;
        }
    }

    /// Renders one prompt and hands it to the engine; `false` once the LLM or the engine
    /// is gone.
    fn render_next(&self) -> bool {
        let Some(mut job) = self.next() else {
            return false;
        };
        if job.cancelled.load(Ordering::Relaxed) {
            return true;
        }
        if job.expired(self.clock.as_ref()) {
            self.stats.queue_timeouts.fetch_add(1, Ordering::Relaxed);
            job.fail(LLM_QUEUE_TIMEOUT, queue_timeout(self.max_wait));
            return true;
        }
        let req = &job.request;
        let max_tokens = req
            .max_tokens
            .map_or(self.max_tokens, |n| n as usize)
            .clamp(1, self.context / 2);
        let prompt = self.text.template.render(
            &self.text.tokenizer,
            &req.messages,
            &req.tools,
            &req.tool_choice,
            self.context - max_tokens,
        );
        match prompt {
            Ok(p) => job.prompt = Some((p, max_tokens)),
            Err(message) => {
                job.fail(CONTEXT_LENGTH_EXCEEDED, message);
                return true;
            }
        }
        self.engine.send(job).is_ok()
    }
}

/// The prompt side of the embedded LLM: renders and tokenizes prompts, voice first, and
/// hands them to the engine. The driver calls [`LlmPrep::render_next`] in a loop on each of
/// [`PREP_THREADS`] threads (it waits while no prompt is queued).
#[derive(Clone)]
pub struct LlmPrep(Arc<Prep>);

impl LlmPrep {
    /// Waits for the next queued answer, renders its prompt and hands it to the engine;
    /// `false` once the LLM or the engine is gone (the driver's loop ends).
    pub fn render_next(&self) -> bool {
        self.0.render_next()
    }
}

fn queue_timeout(max_wait: Duration) -> String {
    format!(
        "the embedded LLM had no place for this answer within {} s",
        max_wait.as_secs_f32()
    )
}

/// A stream that has already failed.
struct Refused(Option<LlmEvent>);

impl LlmStream for Refused {
    fn poll(&mut self, out: &mut Vec<LlmEvent>) {
        out.extend(self.0.take());
    }

    fn wake_on(&mut self, waker: &std::task::Waker) {
        waker.wake_by_ref(); // its one event is there
    }
}

/// An answer's stream: the engine's events, in order.
struct EmbeddedStream {
    events: AnswerEvents,
    cancelled: Arc<AtomicBool>,
    ended: bool,
}

impl LlmStream for EmbeddedStream {
    fn poll(&mut self, out: &mut Vec<LlmEvent>) {
        while !self.ended {
            match self.events.try_recv() {
                Ok(ev) => {
                    self.ended = matches!(ev, LlmEvent::Done | LlmEvent::Failed(_));
                    out.push(ev);
                }
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Disconnected) => {
                    self.ended = true;
                    out.push(LlmEvent::Failed(AnswerFailure {
                        code: LLM_UNAVAILABLE.into(),
                        message: "the embedded LLM stopped".into(),
                    }));
                }
            }
        }
    }

    fn wake_on(&mut self, waker: &std::task::Waker) {
        self.events.wake_on(waker);
    }
}

impl Drop for EmbeddedStream {
    fn drop(&mut self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }
}

/// The cascade's answers are voice answers.
impl Llm for EmbeddedLlm {
    fn start(&self, request: ChatRequest) -> Box<dyn LlmStream> {
        self.submit(request, Priority::Voice)
            .unwrap_or_else(|QueueFull(message)| {
                Box::new(Refused(Some(LlmEvent::Failed(AnswerFailure {
                    code: LLM_QUEUE_FULL.into(),
                    message,
                }))))
            })
    }
}

#[cfg(test)]
mod tests;
