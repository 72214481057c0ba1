//! Process-wide metrics in Prometheus text format (`GET /metrics`): lock-free histograms
//! and counters, written from the engine thread, the model loop and session actors.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

/// Bucket upper bounds in seconds shared by the latency histograms.
const BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2,
    0.3, 0.5, 1.0, 2.0, 5.0,
];

/// A cumulative histogram of durations.
pub struct Histogram {
    name: &'static str,
    help: &'static str,
    buckets: Vec<AtomicU64>,
    count: AtomicU64,
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
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
    /// Grid slots the media engine skipped after a stall.
    pub pacing_skipped: AtomicU64,
    /// Media frames sent.
    pub frames_sent: AtomicU64,
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
}

/// The process's metrics.
pub static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    Metrics {
    pacing_deviation: Histogram::new("duet_pacing_deviation_seconds", "Lateness of each RTP audio frame leaving against its absolute 20 ms grid deadline."),
    model_step: Histogram::new("duet_model_step_seconds", "Time of one model step over every active session."),
    speech_end_to_first_audio: Histogram::new("duet_speech_end_to_first_audio_seconds", "Server VAD speech end to the first frame of the answer leaving (RTP) or being written (WebSocket)."),
    barge_in: Histogram::new("duet_barge_in_seconds", "Caller speech detected during an answer to the answer's playback purged (WebRTC)."),
    call_setup: Histogram::new("duet_call_setup_seconds", "Time to handle POST /v1/realtime/calls."),
    pacing_skipped: AtomicU64::new(0),
    frames_sent: AtomicU64::new(0),
    sessions_attached: AtomicI64::new(0),
    sessions_detached: AtomicI64::new(0),
    journal_bytes: AtomicI64::new(0),
    takeovers: AtomicU64::new(0),
    errors: Mutex::new(BTreeMap::new()),
    resumes: Mutex::new(BTreeMap::new()),
    expiries: Mutex::new(BTreeMap::new()),
}
});

impl Metrics {
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
        for (name, help, v) in [
            ("duet_calls", "Live WebRTC calls.", calls),
            (
                "duet_sessions",
                "Sessions holding a model slot (WebRTC and WebSocket).",
                sessions,
            ),
            (
                "duet_websocket_sessions",
                "Open WebSocket sessions.",
                websockets,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        for (name, help, v) in [
            (
                "duet_pacing_skipped_total",
                "Media grid slots skipped after a stall.",
                &self.pacing_skipped,
            ),
            (
                "duet_frames_sent_total",
                "RTP audio frames sent.",
                &self.frames_sent,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                v.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP duet_takeovers_total Resumes that took a session over from a live transport.\n# TYPE duet_takeovers_total counter\nduet_takeovers_total {}",
            self.takeovers.load(Ordering::Relaxed)
        );
        for (state, v) in [
            ("attached", &self.sessions_attached),
            ("detached", &self.sessions_detached),
        ] {
            if state == "attached" {
                let _ = writeln!(out, "# HELP duet_durable_sessions Sessions that opted into the duplex extension, by state.\n# TYPE duet_durable_sessions gauge");
            }
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
        for (name, help, label, map) in [
            (
                "duet_errors_total",
                "Error events sent to clients, by code.",
                "code",
                &self.errors,
            ),
            (
                "duet_resumes_total",
                "Session resumes, by outcome (ok or the error code).",
                "outcome",
                &self.resumes,
            ),
            (
                "duet_session_expiries_total",
                "Opted-in sessions whose lease ran out, by reason.",
                "reason",
                &self.expiries,
            ),
        ] {
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
        ] {
            h.render(&mut out);
        }
        out
    }
}

fn bump(map: &Mutex<BTreeMap<String, u64>>, key: &str) {
    if let Ok(mut m) = map.lock() {
        *m.entry(key.to_string()).or_default() += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_renders_cumulative_buckets() {
        let h = Histogram::new("x_seconds", "test");
        h.observe(Duration::from_micros(300));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_millis(3));
        assert_eq!(h.quantile(0.5), Some(0.005));
        assert_eq!(h.quantile(0.01), Some(0.0005));
        let mut s = String::new();
        h.render(&mut s);
        assert!(s.contains("x_seconds_bucket{le=\"0.0005\"} 1\n"), "{s}");
        assert!(s.contains("x_seconds_bucket{le=\"0.005\"} 3\n"));
        assert!(
            s.contains("x_seconds_bucket{le=\"+Inf\"} 3\nx_seconds_sum 0.0063\nx_seconds_count 3"),
            "{s}"
        );
    }
}
