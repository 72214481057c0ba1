//! WebSocket load: N sessions on `GET /v1/realtime`, each streaming 20 ms
//! `input_audio_buffer.append` events at real time (a spoken turn, then silence) and reading
//! the answers' `response.output_audio.delta` events, all on one thread (a current-thread
//! runtime), as [`crate::load`] runs its WebRTC callers. Events are told apart by scanning
//! for their `type`, and audio deltas are measured by their length, so nothing is parsed or
//! decoded on the receiving side.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

use crate::load::voiced_at;

/// The session audio rate (`audio/pcm`, 24 kHz mono).
const RATE: u32 = 24_000;

/// WebSocket load settings.
#[derive(Clone, Debug)]
pub struct WsLoadConfig {
    /// Server HTTP address.
    pub server: SocketAddr,
    /// Concurrent sessions.
    pub sessions: usize,
    /// How long every session streams after connecting.
    pub duration: Duration,
    /// Sessions opened per second during ramp-up.
    pub ramp_per_sec: f64,
    /// Spoken turn length.
    pub turn: Duration,
    /// Silence after an answer began before the next turn.
    pub pause: Duration,
}

/// What a WebSocket run measured (durations in milliseconds).
#[derive(Clone, Debug, Default)]
pub struct WsLoadReport {
    /// Sessions that got `session.created`.
    pub connected: usize,
    /// Failures (connect, protocol, server `error` events).
    pub errors: Vec<String>,
    /// Connect → `session.created`.
    pub setup_ms: Vec<f64>,
    /// Last speech append sent → the answer's first audio delta.
    pub latency_ms: Vec<f64>,
    /// |gap between consecutive audio deltas of an answer − the previous delta's duration|.
    pub delta_jitter_ms: Vec<f64>,
    /// Seconds of answer audio received per second of answering, per session.
    pub audio_rate: Vec<f64>,
    /// Audio deltas received.
    pub deltas: u64,
}

/// The append events every session sends: a spoken turn, and silence.
struct Appends {
    turn: Vec<Utf8Bytes>,
    silence: Utf8Bytes,
}

fn append(pcm: &[f32]) -> Utf8Bytes {
    let bytes: Vec<u8> = pcm
        .iter()
        .flat_map(|s| ((s.clamp(-1.0, 1.0) * 32767.0) as i16).to_le_bytes())
        .collect();
    let audio = base64::engine::general_purpose::STANDARD.encode(bytes);
    format!(r#"{{"type":"input_audio_buffer.append","audio":"{audio}"}}"#).into()
}

impl Appends {
    fn new(turn: Duration) -> Self {
        let frames = (turn.as_millis() / 20).max(1) as usize;
        let voice = voiced_at(frames, RATE);
        let frame = RATE as usize / 50;
        Self {
            turn: voice.chunks(frame).map(append).collect(),
            silence: append(&vec![0.0; frame]),
        }
    }
}

/// The `type` of a server event (the first `"type":"…"` in it).
fn event_type(text: &str) -> &str {
    let Some(at) = text.find(r#""type":""#) else {
        return "";
    };
    let rest = &text[at + 8..];
    rest.find('"').map_or("", |end| &rest[..end])
}

/// Audio seconds in an audio delta (its base64 `delta` of 16-bit samples).
fn delta_secs(text: &str) -> f64 {
    let Some(at) = text.find(r#""delta":""#) else {
        return 0.0;
    };
    let rest = &text[at + 9..];
    let b64 = rest.find('"').unwrap_or(rest.len());
    (b64 * 3 / 4 / 2) as f64 / f64::from(RATE)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// One session's measurements.
#[derive(Default)]
struct Stats {
    connected: bool,
    errors: Vec<String>,
    setup_ms: Option<f64>,
    latency_ms: Vec<f64>,
    delta_jitter_ms: Vec<f64>,
    deltas: u64,
    audio_secs: f64,
    answering_secs: f64,
}

/// Where a session is in its turn-taking.
enum Phase {
    /// Silence until then.
    Idle(Instant),
    /// Sending the turn's frame `n`.
    Speaking(usize),
    /// The turn ended at `since`; silence until the answer's first delta.
    Waiting(Instant),
    /// The answer plays; the next turn starts at `next` (silence meanwhile).
    Answer { next: Instant },
}

/// Runs the load on the calling thread and returns what it measured.
pub fn run_ws(cfg: &WsLoadConfig) -> anyhow::Result<WsLoadReport> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let appends = Arc::new(Appends::new(cfg.turn));
    let cfg = cfg.clone();
    rt.block_on(async move {
        let start = Instant::now();
        let ramp = cfg.ramp_per_sec.max(0.1);
        let tasks: Vec<_> = (0..cfg.sessions)
            .map(|i| {
                let opens = start + Duration::from_secs_f64(i as f64 / ramp);
                tokio::spawn(session(cfg.clone(), appends.clone(), opens))
            })
            .collect();
        let mut report = WsLoadReport::default();
        for t in tasks {
            match t.await {
                Ok(s) => merge(&mut report, s),
                Err(e) => report.errors.push(format!("session task: {e}")),
            }
        }
        Ok(report)
    })
}

fn merge(r: &mut WsLoadReport, s: Stats) {
    r.connected += usize::from(s.connected);
    r.errors.extend(s.errors);
    r.setup_ms.extend(s.setup_ms);
    r.latency_ms.extend(s.latency_ms);
    r.delta_jitter_ms.extend(s.delta_jitter_ms);
    r.deltas += s.deltas;
    if s.answering_secs > 1.0 {
        r.audio_rate.push(s.audio_secs / s.answering_secs);
    }
}

/// A session's WebSocket.
type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// One session: opens at `opens`, streams for `cfg.duration`, closes.
async fn session(cfg: WsLoadConfig, appends: Arc<Appends>, opens: Instant) -> Stats {
    let mut st = Stats::default();
    tokio::time::sleep_until(opens.into()).await;
    let t0 = Instant::now();
    let mut ws = match open(cfg.server).await {
        Ok(ws) => ws,
        Err(e) => {
            st.errors.push(e);
            return st;
        }
    };
    st.connected = true;
    st.setup_ms = Some(ms(t0.elapsed()));
    let st = converse(&mut ws, &cfg, appends, st).await;
    let _ = ws.close(None).await;
    st
}

/// Connects to `server`'s realtime endpoint and waits for `session.created` (skipping any
/// other message before it).
async fn open(server: SocketAddr) -> Result<Ws, String> {
    let url = format!("ws://{server}/v1/realtime?model=echo");
    let (mut ws, _) = tokio_tungstenite::connect_async(url)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    loop {
        match ws.next().await {
            Some(Ok(Message::Text(t))) if event_type(&t) == "session.created" => return Ok(ws),
            Some(Ok(_)) => {}
            other => return Err(format!("before session.created: {other:?}")),
        }
    }
}

/// Sends an append every 20 ms and reads the server's events for `cfg.duration`, or until
/// the socket fails or closes; returns `st` with what was measured added.
async fn converse(ws: &mut Ws, cfg: &WsLoadConfig, appends: Arc<Appends>, st: Stats) -> Stats {
    let end = Instant::now() + cfg.duration;
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut s = Turns {
        appends,
        turn: cfg.turn,
        pause: cfg.pause,
        phase: Phase::Idle(Instant::now() + Duration::from_millis(500)),
        last_delta: None,
        answer_began: None,
        st,
    };
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                let msg = s.next_append(now);
                if let Err(e) = ws.send(Message::Text(msg)).await {
                    s.st.errors.push(format!("send: {e}"));
                    break;
                }
            }
            msg = ws.next() => {
                if !s.receive(msg, Instant::now()) {
                    break;
                }
            }
        }
    }
    s.st
}

/// One session's turn-taking and what it measured.
struct Turns {
    appends: Arc<Appends>,
    /// Spoken turn length.
    turn: Duration,
    /// Silence after an answer began before the next turn (after `turn`).
    pause: Duration,
    phase: Phase,
    /// The previous delta of the current answer: when it came, and its audio length.
    last_delta: Option<(Instant, f64)>,
    answer_began: Option<Instant>,
    st: Stats,
}

impl Turns {
    /// The append to send at `now` (a turn's next frame or silence), stepping the phase.
    fn next_append(&mut self, now: Instant) -> Utf8Bytes {
        match self.phase {
            Phase::Idle(until) => {
                if now >= until {
                    self.phase = Phase::Speaking(0);
                }
                self.appends.silence.clone()
            }
            Phase::Speaking(n) => {
                self.phase = if n + 1 >= self.appends.turn.len() {
                    Phase::Waiting(now + Duration::from_millis(20))
                } else {
                    Phase::Speaking(n + 1)
                };
                self.appends.turn[n].clone()
            }
            Phase::Waiting(_) | Phase::Answer { .. } => {
                if let Phase::Answer { next } = self.phase {
                    if now >= next {
                        self.phase = Phase::Speaking(0);
                    }
                }
                self.appends.silence.clone()
            }
        }
    }

    /// Takes in the socket's next message, received at `now`; false when the session ends
    /// (closed, failed or gone).
    fn receive(
        &mut self,
        msg: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
        now: Instant,
    ) -> bool {
        let text = match msg {
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(Message::Close(c))) => {
                self.st.errors.push(format!("closed by the server: {c:?}"));
                return false;
            }
            Some(Ok(_)) => return true,
            Some(Err(e)) => {
                self.st.errors.push(format!("receive: {e}"));
                return false;
            }
            None => return false,
        };
        self.event(&text, now);
        true
    }

    /// Measures one server event received at `now`: audio deltas, the end of a response,
    /// and `error` events (the first few).
    fn event(&mut self, text: &str, now: Instant) {
        match event_type(text) {
            "response.output_audio.delta" => self.delta(text, now),
            "response.done" => {
                if let (Some(began), Some((at, dur))) =
                    (self.answer_began.take(), self.last_delta.take())
                {
                    self.st.answering_secs += (at - began).as_secs_f64() + dur;
                }
            }
            "error" if self.st.errors.len() < 8 => {
                let head: String = text.chars().take(300).collect();
                self.st.errors.push(format!("error event: {head}"));
            }
            _ => {}
        }
    }

    /// An audio delta received at `now`: its audio, the answer's latency when it is the
    /// first, and its gap to the previous one.
    fn delta(&mut self, text: &str, now: Instant) {
        let secs = delta_secs(text);
        self.st.deltas += 1;
        self.st.audio_secs += secs;
        if let Phase::Waiting(since) = self.phase {
            self.st
                .latency_ms
                .push(ms(now.saturating_duration_since(since)));
            self.phase = Phase::Answer {
                next: now + self.turn + self.pause,
            };
        }
        if let Some((at, dur)) = self.last_delta {
            self.st
                .delta_jitter_ms
                .push((ms(now - at) - dur * 1000.0).abs());
        }
        self.answer_began.get_or_insert(now);
        self.last_delta = Some((now, secs));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_told_apart_without_parsing() {
        let delta = r#"{"type":"response.output_audio.delta","event_id":"e","delta":"AAAAAAAA"}"#;
        assert_eq!(event_type(delta), "response.output_audio.delta");
        // 8 base64 chars = 6 bytes = 3 samples.
        assert!((delta_secs(delta) - 3.0 / 24_000.0).abs() < 1e-12);
        assert_eq!(event_type("{}"), "");
        assert_eq!(delta_secs(r#"{"type":"x"}"#), 0.0);
    }

    #[test]
    fn a_turn_is_twenty_millisecond_appends() {
        let a = Appends::new(Duration::from_millis(1000));
        assert_eq!(a.turn.len(), 50);
        // 480 samples = 960 bytes = 1280 base64 characters.
        assert_eq!(
            a.silence.len(),
            r#"{"type":"input_audio_buffer.append","audio":""}"#.len() + 1280
        );
    }
}
