//! The embedded LLM's engine, a stepped core: answers come in rendered, and each step admits
//! the waiting ones (voice first) and runs one round for every running answer (a prefill
//! chunk or one token), keeping the KV caches of finished conversations for the next turn.
//! The driver in `src/` owns the thread.

use super::*;

/// A kept KV cache and the tokens it holds.
struct Kept {
    tokens: Vec<u32>,
    cache: KvCache,
    /// The answer count when it was last used (least recently used goes first).
    used: u64,
}

/// An answer being computed.
struct Running {
    job: Job,
    cache: KvCache,
    /// Every token in the cache, then the one sampled next.
    tokens: Vec<u32>,
    /// Prompt tokens still to run.
    todo: Vec<u32>,
    prompt_tokens: usize,
    /// Prompt tokens taken from a kept cache.
    cached: usize,
    generated: usize,
    max_tokens: usize,
    logits: Option<Tensor>,
    sampler: LogitsProcessor,
    text: tokenizer::TextStream,
    parser: ToolCallParser,
    /// Set when the answer is over (sent its last event, or was cancelled).
    over: bool,
}

pub(super) struct Engine {
    model: Llama,
    text: Arc<TextSide>,
    options: LlamaOptions,
    kept: Vec<Kept>,
    answers: u64,
    stats: Arc<LlmStats>,
}

/// The embedded LLM's engine as a stepped core: answers rendered by [`LlmPrep`] come in
/// ([`LlmEngine::receive`]); each [`LlmEngine::step`] admits waiting answers (voice first,
/// within `max_running`) and runs one round, a prefill chunk or one token for each. The
/// driver owns the thread: `while engine.receive() { engine.step() }`.
pub struct LlmEngine {
    pub(super) engine: Engine,
    jobs: Receiver<Job>,
    running: Vec<Running>,
    /// Waiting for a place, by priority (voice first).
    waiting: [VecDeque<Job>; 2],
    max_running: usize,
    /// The places HTTP completions may take: they leave a quarter (at least one) to voice.
    max_batch: usize,
    round: u64,
}

impl LlmEngine {
    pub(super) fn new(engine: Engine, jobs: Receiver<Job>) -> Self {
        let max_running = engine.options.max_running.max(1);
        let max_batch = if max_running > 1 {
            max_running - (max_running / 4).max(1)
        } else {
            1
        };
        Self {
            engine,
            jobs,
            running: Vec::new(),
            waiting: Default::default(),
            max_running,
            max_batch,
            round: 0,
        }
    }

    /// Takes the answers handed over since the last call, waiting for one when none is
    /// running or waiting; `false` once the [`EmbeddedLlm`] and its prompt side are gone.
    pub fn receive(&mut self) -> bool {
        if self.running.is_empty() && self.waiting.iter().all(VecDeque::is_empty) {
            match self.jobs.recv() {
                Ok(job) => self.waiting[job.priority as usize].push_back(job),
                Err(_) => return false,
            }
        }
        for job in self.jobs.try_iter() {
            self.waiting[job.priority as usize].push_back(job);
        }
        true
    }

    /// Fails every running answer with `llm_error` (`message`) and forgets them: what a
    /// driver does when a step panicked, so the engine goes on with the next answers.
    pub fn fail_running(&mut self, message: &str) {
        for mut r in std::mem::take(&mut self.running) {
            if !r.over {
                fail(&mut r, message.to_string());
            }
        }
        self.engine.stats.running.store(0, Ordering::Relaxed);
    }

    /// One round: stale waiting answers dropped, waiting ones admitted while there is a
    /// place, then each running answer's next input through the model (on a CPU, while a
    /// voice answer runs, HTTP completions step every other round), and the answers that
    /// ended keep their caches.
    pub fn step(&mut self) {
        let max_wait = self.engine.options.max_wait;
        self.engine.drop_stale(&mut self.waiting, max_wait);
        while self.running.len() < self.max_running {
            let batch = self
                .running
                .iter()
                .filter(|r| r.job.priority == Priority::Batch)
                .count();
            let job = self.waiting[0].pop_front().or_else(|| {
                (batch < self.max_batch)
                    .then(|| self.waiting[1].pop_front())
                    .flatten()
            });
            let Some(job) = job else {
                break;
            };
            self.engine.admit(job, &mut self.running);
        }
        self.round = self.round.wrapping_add(1);
        let yield_to_voice = self.engine.model.device().is_cpu()
            && self.round % 2 == 1
            && self
                .running
                .iter()
                .any(|r| r.job.priority == Priority::Voice);
        self.engine.round(&mut self.running, yield_to_voice);
        let (over, going): (Vec<_>, Vec<_>) = std::mem::take(&mut self.running)
            .into_iter()
            .partition(|r| r.over);
        self.running = going;
        for r in over {
            self.engine.keep(r.tokens, r.cache);
        }
        let stats = &self.engine.stats;
        stats.running.store(self.running.len(), Ordering::Relaxed);
        stats
            .kept_bytes
            .store(self.engine.kept_bytes(), Ordering::Relaxed);
    }
}

/// Ends an answer with `llm_error`.
fn fail(r: &mut Running, message: String) {
    r.over = true;
    let _ = r.job.events.send(LlmEvent::Failed(AnswerFailure {
        code: LLM_ERROR.into(),
        message,
    }));
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Engine {
    pub(super) fn new(
        model: Llama,
        text: Arc<TextSide>,
        options: LlamaOptions,
        stats: Arc<LlmStats>,
    ) -> Self {
        Self {
            model,
            text,
            options,
            kept: Vec::new(),
            answers: 0,
            stats,
        }
    }

    /// One round: each running answer's next input (cancelled ones are marked over; HTTP
    /// completions sit it out when `yield_to_voice`), then one pass of the model.
    fn round(&mut self, running: &mut [Running], yield_to_voice: bool) {
        let mut inputs: Vec<(usize, Vec<u32>)> = Vec::new();
        for (i, r) in running.iter_mut().enumerate() {
            if r.job.cancelled.load(Ordering::Relaxed) {
                r.over = true;
                self.stats.cancelled.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if yield_to_voice && r.job.priority == Priority::Batch {
                continue;
            }
            match self.next_input(r) {
                Ok(Some(input)) => inputs.push((i, input)),
                Ok(None) => {}
                Err(message) => fail(r, message),
            }
        }
        if !inputs.is_empty() {
            self.run_inputs(running, inputs);
        }
    }

    /// Drops the waiting answers that were cancelled (they never start) and fails those
    /// past their wait deadline.
    fn drop_stale(&self, waiting: &mut [VecDeque<Job>; 2], max_wait: Duration) {
        for queue in waiting {
            queue.retain(|j| !j.cancelled.load(Ordering::Relaxed));
            while queue
                .front()
                .is_some_and(|j| j.expired(self.options.clock.as_ref()))
            {
                if let Some(job) = queue.pop_front() {
                    self.stats.queue_timeouts.fetch_add(1, Ordering::Relaxed);
                    job.fail(LLM_QUEUE_TIMEOUT, queue_timeout(max_wait));
                }
            }
        }
    }

    /// Starts a rendered job: finds the longest kept prefix of its prompt.
    fn admit(&mut self, mut job: Job, running: &mut Vec<Running>) {
        job.slot = None; // no longer waiting
        self.answers += 1;
        self.stats.answers.fetch_add(1, Ordering::Relaxed);
        let Some((prompt, max_tokens)) = job.prompt.take() else {
            return job.fail(LLM_ERROR, "the prompt was not rendered".into());
        };
        let req = &job.request;
        let Prompt {
            tokens,
            answer_prefix,
            ..
        } = prompt;
        let sampler = self.sampler(req.temperature);
        let cache = self.kept_prefix(&tokens);
        let reused = cache.len();
        let s = &self.stats;
        s.cached_tokens.fetch_add(reused as u64, Ordering::Relaxed);
        s.prefill_tokens
            .fetch_add((tokens.len() - reused) as u64, Ordering::Relaxed);
        let mut parser = ToolCallParser::new(format!("{:x}_", self.answers));
        let mut early = Vec::new();
        let _ = parser.push(&answer_prefix, &mut early); // opens the forced call
        running.push(Running {
            prompt_tokens: tokens.len(),
            cached: reused,
            todo: tokens[reused..].to_vec(),
            tokens: tokens[..reused].to_vec(),
            cache,
            generated: 0,
            max_tokens,
            logits: None,
            sampler,
            text: tokenizer::TextStream::default(),
            parser,
            over: false,
            job,
        });
    }

    /// The longest conversation an answer runs on.
    pub(super) fn context(&self) -> usize {
        let model = self.model.shape().context;
        model.min(self.options.context.max(64))
    }

    /// A copy of the longest kept cache that `tokens` start with, leaving at least one token
    /// to run for the logits (empty when none is worth copying).
    fn kept_prefix(&mut self, tokens: &[u32]) -> KvCache {
        let best = self
            .kept
            .iter_mut()
            .map(|k| (common_prefix(&k.tokens, tokens).min(tokens.len() - 1), k))
            .max_by_key(|(n, _)| *n);
        match best {
            Some((n, kept)) if n >= MIN_REUSE => {
                kept.used = self.answers;
                kept.cache.prefix(n).unwrap_or_default()
            }
            _ => KvCache::default(),
        }
    }

    /// The sampler of the next answer: greedy, or top-p at a request's `temperature`.
    fn sampler(&self, temperature: Option<f32>) -> LogitsProcessor {
        let temperature = temperature.map_or(self.options.temperature, f64::from);
        let sampling = if temperature <= 0.0 {
            Sampling::ArgMax
        } else {
            Sampling::TopP {
                p: 0.9,
                temperature,
            }
        };
        LogitsProcessor::from_sampling(self.options.seed.wrapping_add(self.answers), sampling)
    }

    /// An answer's next input: a prefill chunk, or the token it samples now (its events
    /// sent); none when it ended.
    fn next_input(&self, r: &mut Running) -> Result<Option<Vec<u32>>, String> {
        if !r.todo.is_empty() {
            let n = r.todo.len().min(PREFILL_CHUNK);
            return Ok(Some(r.todo.drain(..n).collect()));
        }
        let Some(logits) = r.logits.take() else {
            return Err("no logits to sample".into());
        };
        let logits = if self.options.repeat_penalty != 1.0 {
            let from = r
                .tokens
                .len()
                .saturating_sub(PENALTY_WINDOW)
                .max(r.prompt_tokens);
            candle_transformers::utils::apply_repeat_penalty(
                &logits,
                self.options.repeat_penalty,
                &r.tokens[from..],
            )
            .map_err(|e| e.to_string())?
        } else {
            logits
        };
        let next = r.sampler.sample(&logits).map_err(|e| e.to_string())?;
        let stop = self.text.template.stops().contains(&next)
            || self.text.tokenizer.token_bytes(next).is_empty();
        let mut events = Vec::new();
        if !stop {
            r.generated += 1;
            self.stats.completion_tokens.fetch_add(1, Ordering::Relaxed);
            let piece = r.text.push(&self.text.tokenizer, next);
            r.parser.push(&piece, &mut events)?;
        }
        let full = r.generated >= r.max_tokens || r.cache.len() + 1 >= self.context();
        if stop || full {
            r.parser.finish(&mut events)?;
            events.push(LlmEvent::Usage {
                prompt_tokens: r.prompt_tokens,
                completion_tokens: r.generated,
                cached_tokens: r.cached,
            });
            events.push(LlmEvent::Done);
            r.over = true;
        }
        for ev in events {
            if r.job.events.send(ev).is_err() {
                r.over = true; // nobody listens any more
            }
        }
        Ok((!r.over).then(|| vec![next]))
    }

    /// Runs the inputs of several answers through the model in one pass; their logits and
    /// caches are theirs again after it. A failed pass fails every answer in it.
    fn run_inputs(&self, running: &mut [Running], inputs: Vec<(usize, Vec<u32>)>) {
        let mut caches: Vec<KvCache> = inputs
            .iter()
            .map(|(i, _)| std::mem::take(&mut running[*i].cache))
            .collect();
        let mut seqs: Vec<(&[u32], &mut KvCache)> = inputs
            .iter()
            .map(|(_, t)| t.as_slice())
            .zip(caches.iter_mut())
            .collect();
        // On the CPU one pass per answer: candle's f16 matmul packs the whole weight matrix
        // for every call of more than one row, so a few rows together cost more than apart
        // (llm_bench: 2 conversations together 15 tok/s against 77 alone); on a GPU together.
        let result = if self.model.device().is_cpu() {
            seqs.iter_mut()
                .map(|(t, c)| self.model.forward(t, c))
                .collect::<candle::Result<Vec<_>>>()
        } else {
            self.model.forward_many(&mut seqs)
        };
        drop(seqs);
        match result {
            Ok(all) => {
                for (((i, input), cache), logits) in inputs.into_iter().zip(caches).zip(all) {
                    let r = &mut running[i];
                    r.cache = cache;
                    r.tokens.extend_from_slice(&input);
                    r.logits = Some(logits);
                }
            }
            Err(e) => {
                for ((i, _), cache) in inputs.into_iter().zip(caches) {
                    running[i].cache = cache;
                    fail(&mut running[i], e.to_string());
                }
            }
        }
    }

    /// Keeps an answer's cache for a later turn, within the byte budget.
    fn keep(&mut self, tokens: Vec<u32>, cache: KvCache) {
        let n = cache.len().min(tokens.len());
        if n < MIN_REUSE {
            return;
        }
        // A kept cache this one extends is no longer needed.
        self.kept.retain(|k| {
            !(k.tokens.len() <= n && common_prefix(&k.tokens, &tokens) == k.tokens.len())
        });
        let mut tokens = tokens;
        tokens.truncate(n);
        self.kept.push(Kept {
            tokens,
            cache,
            used: self.answers,
        });
        while self.kept_bytes() > self.options.cache_bytes && !self.kept.is_empty() {
            let oldest = (0..self.kept.len())
                .min_by_key(|&i| self.kept[i].used)
                .unwrap_or(0);
            self.kept.swap_remove(oldest);
        }
    }

    fn kept_bytes(&self) -> usize {
        self.kept.iter().map(|k| k.cache.bytes()).sum()
    }
}
