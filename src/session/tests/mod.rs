//! Session actor tests with full-duplex (autonomous) models: a scripted model runs on the
//! real model loop and the session is driven through its inbox, as a transport would.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use duet_models::{
    DuplexModel, EchoModel, ModelError, ModelInfo, Request, SlotId, StepInput, StepOutput,
};
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::{
    queue, Delivery, EventReceiver, Lifecycle, Limits, MediaSignals, MediaSink, Session,
    SessionInput, SessionParams, Transport,
};
use crate::model_loop::ModelLoop;
use crate::protocol::strict::forbidden_nulls;

/// 20 ms steps.
const FRAME: usize = 480;
/// Amplitude of the scripted model's speech.
const LEVEL: f32 = 0.25;
/// How long a test waits for any one event.
const EVENT_WAIT: Duration = Duration::from_secs(10);

/// What the scripted model recorded: the requests it got.
type Requests = Arc<Mutex<Vec<Request>>>;

/// A scripted full-duplex model: it speaks during the given ranges of its own step clock
/// (audio of level [`LEVEL`] every frame, a text piece every third speaking frame) and
/// listens otherwise (silence, `speaking: false`). The clock runs once the gate is open.
/// It ignores requests (like Moshi) and records them.
struct Scripted {
    info: ModelInfo,
    speech: Vec<Range<u64>>,
    clocks: Vec<Option<u64>>,
    gate: Arc<AtomicBool>,
    requests: Requests,
}

impl Scripted {
    fn new(speech: Vec<Range<u64>>, gate: Arc<AtomicBool>, requests: Requests) -> Self {
        Self {
            info: ModelInfo {
                name: "scripted".into(),
                frame_samples: FRAME,
                max_slots: 4,
                autonomous: true,
            },
            speech,
            clocks: Vec::new(),
            gate,
            requests,
        }
    }

    /// The text piece spoken at step `n`, if any.
    fn piece(n: u64, range: &Range<u64>) -> String {
        if (n - range.start) % 3 == 0 {
            format!(" w{n}")
        } else {
            String::new()
        }
    }

    /// The full transcript of one speech range.
    fn transcript(range: Range<u64>) -> String {
        range.clone().map(|n| Self::piece(n, &range)).collect()
    }
}

impl DuplexModel for Scripted {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    fn warmup(&mut self) -> Result<(), ModelError> {
        Ok(())
    }

    fn open_slot(&mut self) -> Result<SlotId, ModelError> {
        self.clocks.push(Some(0));
        Ok(self.clocks.len() - 1)
    }

    fn close_slot(&mut self, slot: SlotId) {
        self.clocks[slot] = None;
    }

    fn request(&mut self, _slot: SlotId, request: Request) -> Result<(), ModelError> {
        self.requests.lock().unwrap().push(request);
        Ok(())
    }

    fn step(&mut self, batch: &[StepInput<'_>], out: &mut Vec<Result<StepOutput, ModelError>>) {
        let open = self.gate.load(Ordering::Acquire);
        for input in batch {
            let Some(Some(clock)) = self.clocks.get_mut(input.slot) else {
                out.push(Err(ModelError::UnknownSlot(input.slot)));
                continue;
            };
            let n = *clock;
            if open {
                *clock += 1;
            }
            let range = self.speech.iter().find(|r| open && r.contains(&n));
            out.push(Ok(StepOutput {
                audio: vec![if range.is_some() { LEVEL } else { 0.0 }; FRAME],
                text: range.map(|r| Self::piece(n, r)).unwrap_or_default(),
                end_of_turn: false,
                speaking: range.is_some(),
            }));
        }
    }
}

/// What the fake media engine was asked to do.
#[derive(Clone, Default)]
struct SinkLog(Arc<Mutex<Vec<String>>>);

impl MediaSink for SinkLog {
    fn play(&self, tag: u64, pcm: Vec<f32>) {
        self.0
            .lock()
            .unwrap()
            .push(format!("play {tag} {}", pcm.len()));
    }
    fn finish(&self, tag: u64) {
        self.0.lock().unwrap().push(format!("finish {tag}"));
    }
    fn clear(&self) {
        self.0.lock().unwrap().push("clear".into());
    }
}

/// A running session on its own model loop.
struct Harness {
    inbox: mpsc::Sender<super::Inbound>,
    out: EventReceiver,
    /// What the fake media engine reports (WebRTC).
    signals: Arc<MediaSignals>,
    gate: Arc<AtomicBool>,
    requests: Requests,
    /// Every event received so far.
    seen: Vec<Value>,
    _model: ModelLoop,
}

struct Setup {
    speech: Vec<Range<u64>>,
    gate_open: bool,
    webrtc: Option<SinkLog>,
    session: Value,
    speak_timeout: Option<Duration>,
    echo: bool,
    /// `Limits::max_input_samples` in ms (default: the production limit).
    max_input_ms: Option<u64>,
    /// `Limits::max_outbound_bytes` (default: the production limit).
    max_outbound_bytes: Option<usize>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            speech: Vec::new(),
            gate_open: true,
            webrtc: None,
            session: json!({}),
            speak_timeout: None,
            echo: false,
            max_input_ms: None,
            max_outbound_bytes: None,
        }
    }
}

async fn harness(setup: Setup) -> Harness {
    let gate = Arc::new(AtomicBool::new(setup.gate_open));
    let requests = Requests::default();
    let model: Box<dyn DuplexModel> = if setup.echo {
        Box::new(EchoModel::new())
    } else {
        Box::new(Scripted::new(setup.speech, gate.clone(), requests.clone()))
    };
    let model_loop = ModelLoop::spawn(model, "test").expect("model loop");
    while !model_loop.is_ready() {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let (model, model_rx) = model_loop.open().await.expect("slot");
    let limits = Limits {
        max_input_samples: setup
            .max_input_ms
            .map_or(Limits::default().max_input_samples, |ms| ms * 24),
        max_outbound_bytes: setup
            .max_outbound_bytes
            .unwrap_or(Limits::default().max_outbound_bytes),
        ..Limits::default()
    };
    let (out_tx, out) = queue(limits.max_outbound_bytes);
    let signals = Arc::new(MediaSignals::default());
    let transport = match setup.webrtc {
        Some(sink) => Transport::WebRtc {
            sink: Box::new(sink),
            signals: signals.clone(),
        },
        None => Transport::WebSocket,
    };
    let mut session = Session::new(SessionParams {
        transport,
        model_name: "scripted".into(),
        model,
        model_frame: FRAME,
        limits,
        out: out_tx,
        lifecycle: tokio::sync::watch::channel(Lifecycle::Running).1,
    });
    session
        .configure(serde_json::from_value(setup.session).expect("session patch"))
        .expect("configure");
    if let Some(t) = setup.speak_timeout {
        session.speak_timeout = t;
    }
    let (inbox, inbox_rx) = mpsc::channel(256);
    tokio::spawn(session.run(inbox_rx, model_rx));
    let mut h = Harness {
        inbox,
        out,
        signals,
        gate,
        requests,
        seen: Vec::new(),
        _model: model_loop,
    };
    h.until("session.created").await;
    h
}

impl Harness {
    /// Opens the scripted model's gate: its script clock starts.
    fn go(&self) {
        self.gate.store(true, Ordering::Release);
    }

    async fn send(&self, event: Value) {
        self.input(SessionInput::Text(event.to_string())).await;
    }

    async fn input(&self, input: SessionInput) {
        self.inbox.send(input.into()).await.expect("session alive");
    }

    async fn recv(&mut self, wait: Duration) -> Option<Value> {
        match tokio::time::timeout(wait, self.out.recv()).await {
            Ok(Some(Ok(Delivery::Event(ev, _)))) => {
                let v: Value = serde_json::from_str(&ev.json).expect("JSON");
                assert_eq!(forbidden_nulls(&v), Vec::<String>::new(), "{v}");
                self.seen.push(v.clone());
                Some(v)
            }
            Ok(Some(Ok(Delivery::Close { code, reason }))) => {
                panic!("session closed: {code} {reason}; seen {:#?}", self.types())
            }
            Ok(Some(Err(abort))) => panic!("session aborted: {abort:?}"),
            Ok(None) => panic!("session ended"),
            Err(_) => None,
        }
    }

    /// Events up to and including the first of `kind`.
    async fn until(&mut self, kind: &str) -> Vec<Value> {
        let mut got = Vec::new();
        loop {
            let Some(v) = self.recv(EVENT_WAIT).await else {
                panic!("no {kind} within {EVENT_WAIT:?}; seen {:#?}", self.types());
            };
            let done = v["type"] == kind;
            got.push(v);
            if done {
                return got;
            }
        }
    }

    /// Events until nothing arrived for `quiet`.
    async fn drain(&mut self, quiet: Duration) -> Vec<Value> {
        let mut got = Vec::new();
        while let Some(v) = self.recv(quiet).await {
            got.push(v);
        }
        got
    }

    fn types(&self) -> Vec<String> {
        types(&self.seen)
    }

    /// The PCM16 bytes of the user item that `committed` (events up to its
    /// `conversation.item.added`) added, through `conversation.item.retrieve`.
    async fn retrieve_audio(&mut self, committed: &[Value]) -> Vec<u8> {
        let item_id = last(committed, "conversation.item.added")["item"]["id"].clone();
        self.send(json!({"type":"conversation.item.retrieve","item_id":item_id}))
            .await;
        let got = self.until("conversation.item.retrieved").await;
        let audio = last(&got, "conversation.item.retrieved")["item"]["content"][0]["audio"]
            .as_str()
            .expect("audio")
            .to_string();
        base64::engine::general_purpose::STANDARD
            .decode(audio)
            .expect("base64")
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

/// A script with one stretch of speech.
fn once(speech: Range<u64>) -> Vec<Range<u64>> {
    std::iter::once(speech).collect()
}

fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|v| v["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn last<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    events
        .iter()
        .rev()
        .find(|v| v["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {:#?}", types(events)))
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|v| v["type"] == kind).count()
}

/// The events of one model-initiated response on WebSocket, from `response.created` to
/// `response.listen`, for the speech of the script steps in `range`.
fn expected_ws(range: Range<u64>) -> Vec<String> {
    let mut want: Vec<String> = [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.speak",
        "response.content_part.added",
    ]
    .map(String::from)
    .to_vec();
    for n in range.clone() {
        if !Scripted::piece(n, &range).is_empty() {
            want.push("response.output_audio_transcript.delta".into());
        }
        want.push("response.output_audio.delta".into());
    }
    want.extend(
        [
            "response.output_audio.done",
            "response.output_audio_transcript.done",
            "response.content_part.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
            "response.listen",
        ]
        .map(String::from),
    );
    want
}

fn pcm16_b64(samples: &[f32]) -> String {
    let bytes: Vec<u8> = samples
        .iter()
        .flat_map(|s| ((s.clamp(-1.0, 1.0) * 32767.0) as i16).to_le_bytes())
        .collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Synthetic voiced audio at 24 kHz.
fn voiced(secs: f32) -> Vec<f32> {
    duet_media::pcm::synthetic_voice(secs)
}

mod input_and_playback;
mod lifecycle;
mod outbound_limits;
