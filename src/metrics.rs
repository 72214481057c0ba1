//! Process-wide metrics in Prometheus text format (`GET /metrics`): lock-free histograms
//! and counters, written from the engine thread, the model loop and session actors.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

/// Bucket upper bounds in seconds shared by the latency histograms (fine below 2 ms, where
/// the media grid's figures live).
const BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00015, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.003, 0.005,
    0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0,
];

/// Quantiles every histogram also reports exactly (`…_exact_seconds{quantile=…}`).
const QUANTILES: &[f64] = &[0.5, 0.9, 0.99, 0.999, 1.0];

/// Sub-buckets per power of two in [`Exact`]: values below `2 * SUB` µs are counted at 1 µs,
/// larger ones within 1 part in `SUB`.
const SUB_BITS: u32 = 10;
const SUB: u64 = 1 << SUB_BITS;
/// Powers of two above the linear range (up to 2^27 µs, 134 s; larger values count there).
const OCTAVES: u64 = 27 - SUB_BITS as u64;

/// A log-linear histogram of microseconds (the HDR layout): exact to the microsecond below
/// 2.048 ms, within 0.1 % above, 18 432 counters, lock-free.
pub struct Exact {
    counts: Box<[AtomicU64]>,
}

impl Default for Exact {
    fn default() -> Self {
        Self::new()
    }
}

impl Exact {
    /// An empty histogram.
    pub fn new() -> Self {
        let n = (2 * SUB + (OCTAVES - 1) * SUB) as usize;
        Self {
            counts: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn index(us: u64) -> usize {
        if us < 2 * SUB {
            return us as usize;
        }
        let exp = u64::from(63 - us.leading_zeros()); // ≥ SUB_BITS + 1
        let shift = exp - u64::from(SUB_BITS);
        let sub = (us >> shift) - SUB;
        let i = 2 * SUB + (shift - 1) * SUB + sub;
        i.min(2 * SUB + (OCTAVES - 1) * SUB - 1) as usize
    }

    /// The smallest value counted in bucket `i`, and the bucket's width, in µs.
    fn bucket(i: usize) -> (u64, u64) {
        let i = i as u64;
        if i < 2 * SUB {
            return (i, 1);
        }
        let shift = (i - 2 * SUB) / SUB + 1;
        let sub = (i - 2 * SUB) % SUB;
        ((SUB + sub) << shift, 1 << shift)
    }

    /// Records `us` microseconds.
    pub fn record(&self, us: u64) {
        self.counts[Self::index(us)].fetch_add(1, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }

    /// Quantile `q` (0..=1) in µs, nearest rank (the middle of its bucket above 2 ms);
    /// `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        self.quantiles(&[q]).pop().flatten()
    }

    /// Several quantiles in one pass (`qs` ascending).
    pub fn quantiles(&self, qs: &[f64]) -> Vec<Option<u64>> {
        let counts: Vec<u64> = self
            .counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let mut out = Vec::with_capacity(qs.len());
        let (mut seen, mut i) = (0u64, 0usize);
        for &q in qs {
            if total == 0 {
                out.push(None);
                continue;
            }
            let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
            while i < counts.len() && seen + counts[i] < rank {
                seen += counts[i];
                i += 1;
            }
            let (low, width) = Self::bucket(i.min(counts.len() - 1));
            out.push(Some(low + (width - 1) / 2));
        }
        out
    }
}

/// A cumulative histogram of durations: Prometheus buckets plus an [`Exact`] record, whose
/// quantiles are rendered as a summary.
pub struct Histogram {
    name: &'static str,
    help: &'static str,
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
    exact: Exact,
}

impl Histogram {
    fn new(name: &'static str, help: &'static str) -> Self {
        Self {
            name,
            help,
            buckets: BUCKETS.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_ns: AtomicU64::new(0),
            max_ns: AtomicU64::new(0),
            exact: Exact::new(),
        }
    }

    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = BUCKETS.iter().position(|b| secs <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        let ns = d.as_nanos().min(u128::from(u64::MAX)) as u64;
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ns.fetch_add(ns, Ordering::Relaxed);
        self.max_ns.fetch_max(ns, Ordering::Relaxed);
        self.exact.record(ns / 1000);
    }

    /// Quantile `q` in seconds from the exact record (µs resolution); `None` when empty.
    pub fn exact_quantile(&self, q: f64) -> Option<f64> {
        self.exact.quantile(q).map(|us| us as f64 / 1e6)
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The upper bound of the bucket holding quantile `q` (0..=1); `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = (q * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            seen += b.load(Ordering::Relaxed);
            if seen >= rank {
                return Some(BUCKETS[i]);
            }
        }
        Some(f64::INFINITY)
    }

    fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP {} {}\n# TYPE {} histogram",
            self.name, self.help, self.name
        );
        let mut cumulative = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "{}_bucket{{le=\"{}\"}} {cumulative}",
                self.name, BUCKETS[i]
            );
        }
        let count = self.count();
        let sum = self.sum_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(
            out,
            "{}_bucket{{le=\"+Inf\"}} {count}\n{}_sum {sum}\n{}_count {count}",
            self.name, self.name, self.name
        );
        let max = self.max_ns.load(Ordering::Relaxed) as f64 / 1e9;
        let n = self.name;
        let _ = writeln!(
            out,
            "# HELP {n}_max Largest observation.\n# TYPE {n}_max gauge\n{n}_max {max}"
        );
        let exact = n.strip_suffix("_seconds").unwrap_or(n);
        let _ = writeln!(
            out,
            "# HELP {exact}_exact_seconds {} (quantiles to the microsecond below 2 ms, within 0.1 % above)\n# TYPE {exact}_exact_seconds summary",
            self.help
        );
        for (q, v) in QUANTILES.iter().zip(self.exact.quantiles(QUANTILES)) {
            if let Some(us) = v {
                let _ = writeln!(
                    out,
                    "{exact}_exact_seconds{{quantile=\"{q}\"}} {}",
                    us as f64 / 1e6
                );
            }
        }
        let _ = writeln!(
            out,
            "{exact}_exact_seconds_sum {sum}\n{exact}_exact_seconds_count {count}"
        );
    }
}

/// Every metric Duet exports.
pub struct Metrics {
    /// How late each RTP audio frame left against its 20 ms grid deadline.
    pub pacing_deviation: Histogram,
    /// Duration of one model step for the whole batch.
    pub model_step: Histogram,
    /// End of the caller's speech (VAD) to the first answer audio leaving.
    pub speech_end_to_first_audio: Histogram,
    /// Barge-in detected to the playback queue purged (the next frame is silence).
    pub barge_in: Histogram,
    /// `POST /v1/realtime/calls` handling time.
    pub call_setup: Histogram,
    /// A grid tick's start to its last audio packet sent: the deadline path's work.
    pub tick_work: Histogram,
    /// How late the media engine thread woke for a grid tick (the scheduler's share of the
    /// pacing deviation).
    pub tick_wake: Histogram,
    /// An RTP packet's arrival to its decoded audio handed to the session.
    pub inbound_wait: Histogram,
    /// Input audio time from the first voiced window to `speech_started` (the VAD's onset).
    pub vad_onset: Histogram,
    /// Input audio time past the configured silence at `speech_stopped` (the VAD's release
    /// beyond `silence_duration_ms`).
    pub vad_release: Histogram,
    /// `speech_stopped` to the answer's first audio handed to the transport (response
    /// creation, the model tick's phase and step, the hops).
    pub answer_start: Histogram,
    /// An answer's first audio handed to the media engine to its first frame sent.
    pub playout_wait: Histogram,
    /// One run of the turn model over the pauses that waited together.
    pub turn_batch: Histogram,
    /// The turn model's time per scored pause: one run over the pauses it scored.
    pub turn_pause: Histogram,
    /// A pause handed to the turn loop to its score sent back (queue and run): what a
    /// turn's end waits for the model.
    pub turn_wait: Histogram,
    /// Grid slots the media engine skipped after a stall.
    pub pacing_skipped: AtomicU64,
    /// Media frames sent.
    pub frames_sent: AtomicU64,
    /// Media frames that had to be encoded at their tick (not ahead of it).
    pub frames_inline: AtomicU64,
    /// Opted-in sessions with a transport attached.
    pub sessions_attached: AtomicI64,
    /// Opted-in sessions waiting for a resume.
    pub sessions_detached: AtomicI64,
    /// Bytes held by every session's replay journal.
    pub journal_bytes: AtomicI64,
    /// Resumes that took over a live transport.
    pub takeovers: AtomicU64,
    errors: Mutex<BTreeMap<String, u64>>,
    resumes: Mutex<BTreeMap<String, u64>>,
    expiries: Mutex<BTreeMap<String, u64>>,
    speculations: Mutex<BTreeMap<String, u64>>,
    sip_webhooks: Mutex<BTreeMap<String, u64>>,
    sip_calls: Mutex<BTreeMap<String, u64>>,
    cluster_routed: Mutex<BTreeMap<String, u64>>,
    sip_dropped: Mutex<BTreeMap<String, u64>>,
    turn_scores: Mutex<BTreeMap<String, u64>>,
    turn_ends: Mutex<BTreeMap<String, u64>>,
    interruptions: Mutex<BTreeMap<String, u64>>,
    upstream_tls: Mutex<BTreeMap<String, u64>>,
}

/// The process's metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    Metrics {
    pacing_deviation: Histogram::new("duet_pacing_deviation_seconds", "Lateness of each RTP audio frame leaving against its absolute 20 ms grid deadline."),
    model_step: Histogram::new("duet_model_step_seconds", "Time of one model step over every active session."),
    speech_end_to_first_audio: Histogram::new("duet_speech_end_to_first_audio_seconds", "Server VAD speech end to the first frame of the answer leaving (RTP) or being written (WebSocket)."),
    barge_in: Histogram::new("duet_barge_in_seconds", "Caller speech detected during an answer to the answer's playback purged (WebRTC)."),
    call_setup: Histogram::new("duet_call_setup_seconds", "Time to handle POST /v1/realtime/calls."),
    tick_work: Histogram::new("duet_tick_work_seconds", "Time from a media grid tick's start to its last audio packet sent."),
    tick_wake: Histogram::new("duet_tick_wake_seconds", "How late the media engine thread woke for a grid tick."),
    inbound_wait: Histogram::new("duet_inbound_wait_seconds", "RTP audio packet arrival to its decoded audio handed to the session (jitter buffer playout)."),
    vad_onset: Histogram::new("duet_vad_onset_seconds", "Input audio from the first voiced window to speech_started."),
    vad_release: Histogram::new("duet_vad_release_seconds", "Input audio past silence_duration_ms at speech_stopped."),
    turn_batch: Histogram::new("duet_turn_batch_seconds", "One run of the turn model (semantic_vad) over the pauses that waited together."),
    turn_pause: Histogram::new("duet_turn_pause_seconds", "The turn model's time per scored pause: one run divided by the pauses it scored."),
    turn_wait: Histogram::new("duet_turn_wait_seconds", "A pause handed to the turn model to its score sent back (queue and run)."),
    answer_start: Histogram::new("duet_answer_start_seconds", "speech_stopped to the answer's first audio handed to the transport."),
    playout_wait: Histogram::new("duet_playout_wait_seconds", "An answer's first audio handed to the media engine to its first RTP frame sent."),
    pacing_skipped: AtomicU64::new(0),
    frames_sent: AtomicU64::new(0),
    frames_inline: AtomicU64::new(0),
    sessions_attached: AtomicI64::new(0),
    sessions_detached: AtomicI64::new(0),
    journal_bytes: AtomicI64::new(0),
    takeovers: AtomicU64::new(0),
    errors: Mutex::new(BTreeMap::new()),
    resumes: Mutex::new(BTreeMap::new()),
    expiries: Mutex::new(BTreeMap::new()),
    speculations: Mutex::new(BTreeMap::new()),
    sip_webhooks: Mutex::new(BTreeMap::new()),
    sip_calls: Mutex::new(BTreeMap::new()),
    cluster_routed: Mutex::new(BTreeMap::new()),
    sip_dropped: Mutex::new(BTreeMap::new()),
    turn_scores: Mutex::new(BTreeMap::new()),
    turn_ends: Mutex::new(BTreeMap::new()),
    interruptions: Mutex::new(BTreeMap::new()),
    upstream_tls: Mutex::new(BTreeMap::new()),
}
});

/// Renders cluster mode's gauges: whether Redis answered the last heartbeat, and the live
/// nodes this node sees.
pub fn render_cluster(out: &mut String, redis_up: bool, nodes: usize) {
    render_values(
        out,
        [
            (
                "duet_cluster_redis_up",
                "gauge",
                "1 when the cluster's Redis answered the last heartbeat, else 0.",
                u64::from(redis_up),
            ),
            (
                "duet_cluster_nodes",
                "gauge",
                "Live nodes in this node's view of the cluster (itself included).",
                nodes as u64,
            ),
        ],
    );
}

/// Renders the memory budget's gauges: its limit and what is charged to it now.
pub fn render_memory(out: &mut String, limit: u64, used: u64) {
    render_values(
        out,
        [
            (
                "duet_memory_budget_bytes",
                "gauge",
                "The memory budget (--memory-budget-mib).",
                limit,
            ),
            (
                "duet_memory_used_bytes",
                "gauge",
                "Bytes charged to the memory budget now (every client-fillable buffer).",
                used,
            ),
        ],
    );
}

/// Single-value metrics: (name, type, help, value) each.
fn render_values<const N: usize>(out: &mut String, values: [(&str, &str, &str, u64); N]) {
    for (name, kind, help, v) in values {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
        );
    }
}

impl Metrics {
    /// Counts a speculative start by outcome.
    pub fn speculation(&self, outcome: &str) {
        bump(&self.speculations, outcome);
    }

    /// Counts a turn model's answer for a pause: `ok`, `failed`, `timeout`, `busy`.
    pub fn turn_score(&self, outcome: &str) {
        bump(&self.turn_scores, outcome);
    }

    /// Counts a turn that `semantic_vad` with a turn model ended, by what ended it:
    /// `immediate`, `confident` (the model's score), `fallback` (fixed silence: the model
    /// failed or was late), `max_pause`.
    pub fn turn_end(&self, by: &str) {
        bump(&self.turn_ends, by);
    }

    /// Counts speech over an answer that adaptive interruption judged: `interrupted` or
    /// `backchannel` (a backchannel, a noise, or short speech without words).
    pub fn interruption(&self, outcome: &str) {
        bump(&self.interruptions, outcome);
    }

    /// Counts a request to an `https://` server that failed its TLS handshake (an untrusted
    /// or expired certificate, a name it is not for), by upstream: `llm`, `webhook`, `stt`, `tts`.
    pub fn upstream_tls_failure(&self, upstream: &str) {
        bump(&self.upstream_tls, upstream);
    }

    /// Counts a failed webhook attempt or delivery: `retry` (an attempt that will be
    /// retried), `refused` (a 4xx), `gave_up` (every attempt failed).
    pub fn sip_webhook_failure(&self, kind: &str) {
        bump(&self.sip_webhooks, kind);
    }

    /// Counts a SIP call by how its INVITE ended: `accepted`, `rejected`, `cancelled`,
    /// `timeout`, `busy` (no slot at accept), `not_acceptable` (no common codec), `refused`,
    /// `webhook_failed`, `webhook_busy` (the webhook queue full), `ringing_full`.
    pub fn sip_call(&self, outcome: &str) {
        bump(&self.sip_calls, outcome);
    }

    /// Counts SIP input dropped unanswered, by reason: `refused_source` (a datagram or a TCP
    /// connection from outside `--sip-allow`), `invite_rate` (a new INVITE over
    /// `--sip-invite-rate`), `tcp_limit` (a TCP connection past `--sip-max-tcp` or
    /// `--sip-max-tcp-per-ip`), `tcp_silent` (no bytes within 10 s), `tcp_accept_error`.
    pub fn sip_dropped(&self, reason: &str) {
        bump(&self.sip_dropped, reason);
    }

    /// Counts a request cluster routing sent elsewhere or took, by outcome: `forwarded`,
    /// `proxied`, `refused` (the node answered 503), `unreachable`, `gone` (an id whose node
    /// is gone).
    pub fn cluster_routed(&self, outcome: &str) {
        bump(&self.cluster_routed, outcome);
    }

    /// Counts an error event by code.
    pub fn error(&self, code: &str) {
        bump(&self.errors, code);
    }

    /// Counts a resume by outcome (`ok` or its error code).
    pub fn resume(&self, outcome: &str) {
        bump(&self.resumes, outcome);
    }

    /// Counts a session expiry by reason.
    pub fn expiry(&self, reason: &str) {
        bump(&self.expiries, reason);
    }

    /// Renders everything, with the live gauges passed in.
    pub fn render(&self, calls: usize, sessions: usize, websockets: usize) -> String {
        let mut out = String::with_capacity(8 * 1024);
        for ((name, help), v) in LIVE_GAUGES.iter().zip([calls, sessions, websockets]) {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        let counters = [&self.pacing_skipped, &self.frames_sent, &self.frames_inline];
        for ((name, help), v) in COUNTERS.iter().zip(counters) {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Ordering::Relaxed)
            );
        }
        self.render_durable(&mut out);
        let maps = [
            &self.errors,
            &self.resumes,
            &self.expiries,
            &self.speculations,
            &self.sip_webhooks,
            &self.sip_calls,
            &self.sip_dropped,
            &self.cluster_routed,
            &self.turn_scores,
            &self.turn_ends,
            &self.interruptions,
            &self.upstream_tls,
        ];
        for ((name, help, label), map) in LABELLED.iter().zip(maps) {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            if let Ok(m) = map.lock() {
                for (key, n) in m.iter() {
                    let _ = writeln!(out, "{name}{{{label}=\"{key}\"}} {n}");
                }
            }
        }
        for h in [
            &self.pacing_deviation,
            &self.model_step,
            &self.speech_end_to_first_audio,
            &self.barge_in,
            &self.call_setup,
            &self.tick_work,
            &self.tick_wake,
            &self.inbound_wait,
            &self.vad_onset,
            &self.vad_release,
            &self.turn_batch,
            &self.turn_pause,
            &self.turn_wait,
            &self.answer_start,
            &self.playout_wait,
        ] {
            h.render(&mut out);
        }
        out
    }

    /// The durable sessions' takeovers, states and journal bytes.
    fn render_durable(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP duet_takeovers_total Resumes that took a session over from a live transport.\n# TYPE duet_takeovers_total counter\nduet_takeovers_total {}",
            self.takeovers.load(Ordering::Relaxed)
        );
        let _ = writeln!(out, "# HELP duet_durable_sessions Sessions that opted into the duplex extension, by state.\n# TYPE duet_durable_sessions gauge");
        for (state, v) in [
            ("attached", &self.sessions_attached),
            ("detached", &self.sessions_detached),
        ] {
            let _ = writeln!(
                out,
                "duet_durable_sessions{{state=\"{state}\"}} {}",
                v.load(Ordering::Relaxed).max(0)
            );
        }
        let _ = writeln!(
            out,
            "# HELP duet_journal_bytes Bytes held by the replay journals.\n# TYPE duet_journal_bytes gauge\nduet_journal_bytes {}",
            self.journal_bytes.load(Ordering::Relaxed).max(0)
        );
    }
}

/// The live gauges passed to [`Metrics::render`]: name and help, in argument order.
const LIVE_GAUGES: [(&str, &str); 3] = [
    ("duet_calls", "Live calls (WebRTC and SIP)."),
    (
        "duet_sessions",
        "Sessions holding a model slot (WebRTC and WebSocket).",
    ),
    (
        "duet_websocket_sessions",
        "Open WebSocket connections carrying a session or a sideband.",
    ),
];

/// The media counters: name and help, in the order [`Metrics::render`] reads them.
const COUNTERS: [(&str, &str); 3] = [
    (
        "duet_pacing_skipped_total",
        "Media grid slots skipped after a stall.",
    ),
    ("duet_frames_sent_total", "RTP audio frames sent."),
    (
        "duet_frames_inline_total",
        "RTP audio frames encoded at their tick rather than ahead of it (an answer that ran dry mid-frame).",
    ),
];

/// The counters by label: name, help and label, in the order [`Metrics::render`] reads them.
const LABELLED: [(&str, &str, &str); 12] = [
    (
        "duet_errors_total",
        "Error events sent to clients, by code.",
        "code",
    ),
    (
        "duet_resumes_total",
        "Session resumes, by outcome (ok or the error code).",
        "outcome",
    ),
    (
        "duet_session_expiries_total",
        "Opted-in sessions whose lease ran out, by reason.",
        "reason",
    ),
    (
        "duet_speculative_starts_total",
        "Answers started before the turn was confirmed (--speculative-start-ms), by outcome: started, adopted, abandoned.",
        "outcome",
    ),
    (
        "duet_sip_webhook_failures_total",
        "realtime.call.incoming deliveries that failed, by kind: retry (an attempt), refused (4xx), gave_up.",
        "kind",
    ),
    (
        "duet_sip_calls_total",
        "SIP INVITEs by outcome: accepted, rejected, cancelled, timeout, busy, not_acceptable, refused, webhook_failed, webhook_busy, ringing_full.",
        "outcome",
    ),
    (
        "duet_sip_dropped_total",
        "SIP input dropped unanswered, by reason: refused_source, invite_rate, tcp_limit, tcp_silent, tcp_accept_error.",
        "reason",
    ),
    (
        "duet_cluster_routed_total",
        "Requests cluster routing sent to another node, by outcome: forwarded, proxied, refused (503 there), unreachable, gone (the id's node is gone).",
        "outcome",
    ),
    (
        "duet_turn_scores_total",
        "Pauses the turn model judged (semantic_vad), by outcome: ok, failed, timeout, busy.",
        "outcome",
    ),
    (
        "duet_turn_ends_total",
        "Turns semantic_vad with a turn model ended, by what ended them: immediate, confident (the score), fallback (fixed silence: the model failed or was late), max_pause.",
        "by",
    ),
    (
        "duet_interruptions_total",
        "Speech over an answer that adaptive interruption judged, by outcome: interrupted, backchannel (a backchannel, a noise, or short speech without words; the answer went on).",
        "outcome",
    ),
    (
        "duet_upstream_tls_failures_total",
        "Requests to an https:// upstream whose TLS handshake failed (untrusted, expired or misnamed certificate), by upstream: llm, webhook, stt, tts.",
        "upstream",
    ),
];

fn bump(map: &Mutex<BTreeMap<String, u64>>, key: &str) {
    if let Ok(mut m) = map.lock() {
        // No allocation for a key seen before (some are counted per datagram).
        match m.get_mut(key) {
            Some(n) => *n += 1,
            None => {
                m.insert(key.to_string(), 1);
            }
        }
    }
}

/// The embedded LLM's counters (`--llm-model-dir`).
pub fn render_llm(out: &mut String, stats: &duet_models::llama::LlmStats) {
    use std::sync::atomic::Ordering::Relaxed;
    let values = [
        stats.answers.load(Relaxed),
        stats.cancelled.load(Relaxed),
        stats.prefill_tokens.load(Relaxed),
        stats.cached_tokens.load(Relaxed),
        stats.completion_tokens.load(Relaxed),
        stats.running.load(Relaxed) as u64,
        stats.waiting.load(Relaxed) as u64,
        stats.queue_full.load(Relaxed),
        stats.queue_timeouts.load(Relaxed),
        stats.kept_bytes.load(Relaxed) as u64,
    ];
    for ((name, kind, help), v) in LLM_VALUES.iter().zip(values) {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
        );
    }
}

/// The embedded LLM's figures: name, type and help, in the order [`render_llm`] reads them.
const LLM_VALUES: [(&str, &str, &str); 10] = [
    (
        "duet_llm_answers_total",
        "counter",
        "Answers asked of the embedded LLM.",
    ),
    (
        "duet_llm_cancelled_total",
        "counter",
        "Answers of the embedded LLM stopped before their end (barge-in, a client gone).",
    ),
    (
        "duet_llm_prefill_tokens_total",
        "counter",
        "Prompt tokens the embedded LLM ran.",
    ),
    (
        "duet_llm_cached_tokens_total",
        "counter",
        "Prompt tokens taken from the KV cache kept between turns.",
    ),
    (
        "duet_llm_completion_tokens_total",
        "counter",
        "Tokens the embedded LLM generated.",
    ),
    (
        "duet_llm_running",
        "gauge",
        "Answers of the embedded LLM in progress.",
    ),
    (
        "duet_llm_waiting",
        "gauge",
        "Answers of the embedded LLM waiting for a place (--llm-max-waiting).",
    ),
    (
        "duet_llm_queue_full_total",
        "counter",
        "Answers refused because --llm-max-waiting answers were waiting (llm_queue_full).",
    ),
    (
        "duet_llm_queue_timeouts_total",
        "counter",
        "Answers that found no place within --llm-max-wait-secs (llm_queue_timeout).",
    ),
    (
        "duet_llm_kept_cache_bytes",
        "gauge",
        "KV cache bytes kept between turns (--llm-cache-mib).",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_renders_cumulative_buckets() {
        let h = Histogram::new("x_seconds", "test");
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_millis(3));
        assert_eq!(h.quantile(0.5), Some(0.003));
        assert_eq!(h.quantile(0.01), Some(0.0003));
        let mut s = String::new();
        h.render(&mut s);
        assert!(s.contains("x_seconds_bucket{le=\"0.0005\"} 1\n"), "{s}");
        assert!(s.contains("x_seconds_bucket{le=\"0.005\"} 3\n"));
        assert!(
            s.contains("x_seconds_bucket{le=\"+Inf\"} 3\nx_seconds_sum 0.0063\nx_seconds_count 3"),
            "{s}"
        );
        assert!(s.contains("# TYPE x_exact_seconds summary\n"), "{s}");
        assert!(
            s.contains("x_exact_seconds{quantile=\"0.5\"} 0.003\n"),
            "{s}"
        );
        assert!(!s.contains("x_exact_seconds{quantile=\"0.001\"}"), "{s}");
        assert!(s.contains("x_exact_seconds{quantile=\"1\"} 0.003\n"), "{s}");
        assert!(s.contains("x_exact_seconds_count 3\n"), "{s}");
    }

    #[test]
    fn exact_histogram_is_exact_to_the_microsecond_below_2ms() {
        let h = Exact::new();
        for us in 1..=1000u64 {
            h.record(us);
        }
        assert_eq!(h.quantile(0.5), Some(500));
        assert_eq!(h.quantile(0.99), Some(990));
        assert_eq!(h.quantile(0.999), Some(999));
        assert_eq!(h.quantile(1.0), Some(1000));
        assert_eq!(h.quantile(0.0), Some(1));
        assert_eq!(h.count(), 1000);
        assert_eq!(Exact::new().quantile(0.5), None);
    }

    #[test]
    fn exact_histogram_is_within_a_thousandth_above() {
        for us in [
            2_048u64,
            2_049,
            3_000,
            12_345,
            999_999,
            60_000_000,
            134_000_000,
        ] {
            let h = Exact::new();
            h.record(us);
            let got = h.quantile(0.5).unwrap() as f64;
            assert!((got - us as f64).abs() / us as f64 <= 1e-3, "{us} -> {got}");
        }
        // Beyond the range: counted in the last bucket, never out of bounds.
        let h = Exact::new();
        h.record(u64::MAX);
        assert!(h.quantile(1.0).unwrap() > 100_000_000);
        // Every bucket's value maps back to it.
        for i in 0..h.counts.len() {
            let (low, width) = Exact::bucket(i);
            assert_eq!(Exact::index(low), i);
            assert_eq!(Exact::index(low + width - 1), i);
        }
    }
}
