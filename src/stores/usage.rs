//! Usage since start, per credential (`GET /v1/usage`): sessions, calls, responses by status,
//! audio seconds in and out, text tokens, errors by code. Sessions count into their
//! credential's counters through a [`UsageSink`] (lock-free for audio); the ledger is behind
//! a small trait so that a shared store can replace the in-process one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::{StoreDown, StoreFuture};
use crate::session::{UsageEvent, UsageSink};

/// Credentials tracked one by one; beyond it new ones count under `other`.
const MAX_CREDENTIALS: usize = 100_000;

/// What usage is counted for.
#[derive(Clone, Copy, Debug)]
pub enum Opened {
    /// A WebSocket session was opened.
    Session,
    /// A WebRTC call was created (and its session).
    Call,
}

/// One proxied LLM request (`/v1/chat/completions`, `/v1/responses`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LlmCall {
    /// `2xx`, `429` (apart from the other 4xx), `4xx`, `5xx`, or `unavailable`.
    pub outcome: &'static str,
    /// Tokens the upstream reported.
    pub prompt_tokens: u64,
    /// Tokens the upstream reported.
    pub completion_tokens: u64,
}

impl LlmCall {
    /// The outcome of an upstream HTTP status.
    pub fn outcome_of(status: u16) -> &'static str {
        match status {
            200..=299 => "2xx",
            429 => "429",
            400..=499 => "4xx",
            _ => "5xx",
        }
    }
}

/// Usage accounting.
pub trait UsageLedger: Send + Sync {
    /// The sink a session opened with `credential` counts into.
    fn sink(&self, credential: &str) -> Arc<dyn UsageSink>;
    /// Counts a session or call opened with `credential`.
    fn opened(&self, credential: &str, what: Opened);
    /// Counts a proxied LLM request made with `credential`.
    fn llm(&self, credential: &str, call: LlmCall);
    /// `{since, total, credentials: {id: {...}}}`.
    fn report(&self) -> Value;
    /// The same across a cluster (`?scope=cluster`); in one process, [`UsageLedger::report`].
    fn cluster_report(&self) -> StoreFuture<'_, Result<Value, StoreDown>> {
        Box::pin(std::future::ready(Ok(self.report())))
    }
    /// Hands what was counted since the last flush to the shared store (cluster mode).
    fn flush(&self) -> StoreFuture<'_, ()> {
        Box::pin(std::future::ready(()))
    }
}

/// One credential's figures as flat counters (`sessions`, `audio_in_samples`,
/// `responses.completed`, …), as a shared store adds them up.
pub type Flat = BTreeMap<String, u64>;

/// One credential's counters.
#[derive(Default)]
struct Counters {
    sessions: AtomicU64,
    calls: AtomicU64,
    audio_in: AtomicU64,
    audio_out: AtomicU64,
    text_tokens: AtomicU64,
    responses: Mutex<BTreeMap<&'static str, u64>>,
    errors: Mutex<BTreeMap<String, u64>>,
    llm_requests: Mutex<BTreeMap<&'static str, u64>>,
    llm_prompt_tokens: AtomicU64,
    llm_completion_tokens: AtomicU64,
}

impl UsageSink for Counters {
    fn record(&self, event: UsageEvent) {
        match event {
            UsageEvent::AudioIn(n) => {
                self.audio_in.fetch_add(n, Ordering::Relaxed);
            }
            UsageEvent::AudioOut(n) => {
                self.audio_out.fetch_add(n, Ordering::Relaxed);
            }
            UsageEvent::Response {
                status,
                audio_out,
                text_tokens,
            } => {
                self.audio_out.fetch_add(audio_out, Ordering::Relaxed);
                self.text_tokens.fetch_add(text_tokens, Ordering::Relaxed);
                if let Ok(mut m) = self.responses.lock() {
                    *m.entry(status).or_default() += 1;
                }
            }
            UsageEvent::Error(code) => {
                if let Ok(mut m) = self.errors.lock() {
                    *m.entry(code).or_default() += 1;
                }
            }
        }
    }
}

/// The figures of one credential (or their total), as rendered.
#[derive(Default)]
struct Figures {
    sessions: u64,
    calls: u64,
    audio_in: u64,
    audio_out: u64,
    text_tokens: u64,
    responses: BTreeMap<String, u64>,
    errors: BTreeMap<String, u64>,
    llm_requests: BTreeMap<String, u64>,
    llm_prompt_tokens: u64,
    llm_completion_tokens: u64,
}

impl Figures {
    fn add(&mut self, c: &Counters) {
        self.sessions += c.sessions.load(Ordering::Relaxed);
        self.calls += c.calls.load(Ordering::Relaxed);
        self.audio_in += c.audio_in.load(Ordering::Relaxed);
        self.audio_out += c.audio_out.load(Ordering::Relaxed);
        self.text_tokens += c.text_tokens.load(Ordering::Relaxed);
        if let Ok(m) = c.responses.lock() {
            for (k, v) in m.iter() {
                *self.responses.entry((*k).to_string()).or_default() += v;
            }
        }
        if let Ok(m) = c.errors.lock() {
            for (k, v) in m.iter() {
                *self.errors.entry(k.clone()).or_default() += v;
            }
        }
        if let Ok(m) = c.llm_requests.lock() {
            for (k, v) in m.iter() {
                *self.llm_requests.entry((*k).to_string()).or_default() += v;
            }
        }
        self.llm_prompt_tokens += c.llm_prompt_tokens.load(Ordering::Relaxed);
        self.llm_completion_tokens += c.llm_completion_tokens.load(Ordering::Relaxed);
    }

    fn flat(&self) -> Flat {
        let mut m = Flat::new();
        let mut put = |k: String, v: u64| {
            if v > 0 {
                m.insert(k, v);
            }
        };
        put("sessions".into(), self.sessions);
        put("calls".into(), self.calls);
        put("audio_in_samples".into(), self.audio_in);
        put("audio_out_samples".into(), self.audio_out);
        put("text_tokens".into(), self.text_tokens);
        put("llm.prompt_tokens".into(), self.llm_prompt_tokens);
        put("llm.completion_tokens".into(), self.llm_completion_tokens);
        for (k, v) in &self.responses {
            put(format!("responses.{k}"), *v);
        }
        for (k, v) in &self.errors {
            put(format!("errors.{k}"), *v);
        }
        for (k, v) in &self.llm_requests {
            put(format!("llm.requests.{k}"), *v);
        }
        m
    }

    fn add_flat(&mut self, m: &Flat) {
        for (k, v) in m {
            let v = *v;
            match k.as_str() {
                "sessions" => self.sessions += v,
                "calls" => self.calls += v,
                "audio_in_samples" => self.audio_in += v,
                "audio_out_samples" => self.audio_out += v,
                "text_tokens" => self.text_tokens += v,
                "llm.prompt_tokens" => self.llm_prompt_tokens += v,
                "llm.completion_tokens" => self.llm_completion_tokens += v,
                _ => {
                    let (map, name) = if let Some(n) = k.strip_prefix("responses.") {
                        (&mut self.responses, n)
                    } else if let Some(n) = k.strip_prefix("errors.") {
                        (&mut self.errors, n)
                    } else if let Some(n) = k.strip_prefix("llm.requests.") {
                        (&mut self.llm_requests, n)
                    } else {
                        continue;
                    };
                    *map.entry(name.to_string()).or_default() += v;
                }
            }
        }
    }

    fn json(&self) -> Value {
        let secs = |samples: u64| samples as f64 / f64::from(duet_media::SESSION_RATE);
        json!({
            "sessions": self.sessions,
            "calls": self.calls,
            "responses": self.responses,
            "audio_in_seconds": secs(self.audio_in),
            "audio_out_seconds": secs(self.audio_out),
            "text_tokens": self.text_tokens,
            "errors": self.errors,
            "llm": {
                "requests": self.llm_requests,
                "prompt_tokens": self.llm_prompt_tokens,
                "completion_tokens": self.llm_completion_tokens,
            },
        })
    }
}

/// The usage of one process since it started.
pub struct LocalUsage {
    since: u64,
    creds: Mutex<BTreeMap<String, Arc<Counters>>>,
}

impl LocalUsage {
    /// Counting from `since` (unix seconds).
    pub fn new(since: u64) -> Self {
        Self {
            since,
            creds: Mutex::new(BTreeMap::new()),
        }
    }

    fn counters(&self, credential: &str) -> Arc<Counters> {
        let Ok(mut m) = self.creds.lock() else {
            return Arc::default();
        };
        if let Some(c) = m.get(credential) {
            return c.clone();
        }
        let key = if m.len() >= MAX_CREDENTIALS {
            "other"
        } else {
            credential
        };
        m.entry(key.to_string()).or_default().clone()
    }
}

impl LocalUsage {
    /// Every credential's figures, flat.
    pub fn flat(&self) -> BTreeMap<String, Flat> {
        let Ok(m) = self.creds.lock() else {
            return BTreeMap::new();
        };
        m.iter()
            .map(|(id, c)| {
                let mut f = Figures::default();
                f.add(c);
                (id.clone(), f.flat())
            })
            .collect()
    }

    /// When counting started (unix seconds).
    pub fn since(&self) -> u64 {
        self.since
    }
}

/// A usage report (as [`UsageLedger::report`]) of flat figures per credential.
pub fn report_of(since: u64, per: &BTreeMap<String, Flat>, scope: &str) -> Value {
    let mut total = Figures::default();
    let mut creds = serde_json::Map::new();
    for (id, flat) in per {
        let mut f = Figures::default();
        f.add_flat(flat);
        total.add_flat(flat);
        creds.insert(id.clone(), f.json());
    }
    json!({
        "object": "duet.usage",
        "scope": scope,
        "since": since,
        "total": total.json(),
        "credentials": creds,
    })
}

impl UsageLedger for LocalUsage {
    fn sink(&self, credential: &str) -> Arc<dyn UsageSink> {
        self.counters(credential)
    }

    fn opened(&self, credential: &str, what: Opened) {
        let c = self.counters(credential);
        match what {
            Opened::Session => c.sessions.fetch_add(1, Ordering::Relaxed),
            Opened::Call => c.calls.fetch_add(1, Ordering::Relaxed),
        };
    }

    fn llm(&self, credential: &str, call: LlmCall) {
        let c = self.counters(credential);
        if let Ok(mut m) = c.llm_requests.lock() {
            *m.entry(call.outcome).or_default() += 1;
        }
        c.llm_prompt_tokens
            .fetch_add(call.prompt_tokens, Ordering::Relaxed);
        c.llm_completion_tokens
            .fetch_add(call.completion_tokens, Ordering::Relaxed);
    }

    fn report(&self) -> Value {
        let mut total = Figures::default();
        let mut per = serde_json::Map::new();
        if let Ok(m) = self.creds.lock() {
            for (id, c) in m.iter() {
                let mut f = Figures::default();
                f.add(c);
                total.add(c);
                per.insert(id.clone(), f.json());
            }
        }
        json!({
            "object": "duet.usage",
            "since": self.since,
            "total": total.json(),
            "credentials": per,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_credential_and_in_total() {
        let u = LocalUsage::new(7);
        u.opened("server", Opened::Session);
        u.opened("cred_a", Opened::Call);
        let a = u.sink("cred_a");
        a.record(UsageEvent::AudioIn(24_000));
        a.record(UsageEvent::Response {
            status: "completed",
            audio_out: 12_000,
            text_tokens: 3,
        });
        a.record(UsageEvent::Error("invalid_value".into()));
        u.llm(
            "cred_a",
            LlmCall {
                outcome: LlmCall::outcome_of(429),
                prompt_tokens: 0,
                completion_tokens: 0,
            },
        );
        u.llm(
            "cred_a",
            LlmCall {
                outcome: LlmCall::outcome_of(200),
                prompt_tokens: 12,
                completion_tokens: 5,
            },
        );
        let r = u.report();
        assert_eq!(r["since"], 7);
        assert_eq!(r["total"]["sessions"], 1);
        assert_eq!(r["total"]["calls"], 1);
        let a = &r["credentials"]["cred_a"];
        assert_eq!(a["audio_in_seconds"], 1.0);
        assert_eq!(a["audio_out_seconds"], 0.5);
        assert_eq!(a["responses"]["completed"], 1);
        assert_eq!(a["text_tokens"], 3);
        assert_eq!(a["errors"]["invalid_value"], 1);
        assert_eq!(a["llm"]["requests"], json!({"2xx": 1, "429": 1}));
        assert_eq!(a["llm"]["prompt_tokens"], 12);
        assert_eq!(r["total"]["llm"]["completion_tokens"], 5);
        assert_eq!(r["credentials"]["server"]["calls"], 0);
        // Flat figures render to the same report.
        let again = report_of(7, &u.flat(), "cluster");
        assert_eq!(again["total"], r["total"]);
        assert_eq!(again["credentials"], r["credentials"]);
    }
}
