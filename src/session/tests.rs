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

use super::{Limits, MediaSink, Outbound, Session, SessionInput, SessionParams, Transport};
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
    inbox: mpsc::Sender<SessionInput>,
    out: mpsc::Receiver<Outbound>,
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
    let (out_tx, out) = mpsc::channel(8192);
    let transport = match setup.webrtc {
        Some(sink) => Transport::WebRtc(Box::new(sink)),
        None => Transport::WebSocket,
    };
    let mut session = Session::new(SessionParams {
        transport,
        model_name: "scripted".into(),
        model,
        model_frame: FRAME,
        limits: Limits {
            max_input_samples: setup
                .max_input_ms
                .map_or(Limits::default().max_input_samples, |ms| ms * 24),
            ..Limits::default()
        },
        out: out_tx,
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
        self.inbox
            .send(SessionInput::Text(event.to_string()))
            .await
            .expect("session alive");
    }

    async fn input(&self, input: SessionInput) {
        self.inbox.send(input).await.expect("session alive");
    }

    async fn recv(&mut self, wait: Duration) -> Option<Value> {
        match tokio::time::timeout(wait, self.out.recv()).await {
            Ok(Some(Outbound::Event(ev))) => {
                let v: Value = serde_json::from_str(&ev.to_json()).expect("JSON");
                assert_eq!(forbidden_nulls(&v), Vec::<String>::new(), "{v}");
                self.seen.push(v.clone());
                Some(v)
            }
            Ok(Some(Outbound::Close { code, reason })) => {
                panic!("session closed: {code} {reason}; seen {:#?}", self.types())
            }
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

#[tokio::test]
async fn model_initiated_response_runs_the_full_lifecycle() {
    let mut h = harness(Setup {
        speech: vec![3..13, 30..35],
        ..Setup::default()
    })
    .await;

    let events = h.until("response.listen").await;
    assert_eq!(types(&events), expected_ws(3..13));
    let created = &events[0];
    let id = created["response"]["id"].as_str().unwrap().to_string();
    assert_eq!(created["response"]["status"], "in_progress");
    let item_id = events[1]["item"]["id"].as_str().unwrap().to_string();

    let speak = last(&events, "response.speak");
    assert_eq!(speak["response_id"], id.as_str());
    assert_eq!(speak["item_id"], item_id.as_str());
    assert_eq!(speak["output_index"], 0);
    assert_eq!(speak["content_index"], 0);
    assert_eq!(
        speak["metadata"],
        json!({"session_id": created_session(&h), "epoch": 0, "model_speak": true})
    );

    let audio_bytes: usize = events
        .iter()
        .filter(|v| v["type"] == "response.output_audio.delta")
        .map(|v| {
            base64::engine::general_purpose::STANDARD
                .decode(v["delta"].as_str().unwrap())
                .unwrap()
                .len()
        })
        .sum();
    assert_eq!(
        audio_bytes,
        10 * FRAME * 2,
        "every speaking frame, as pcm16"
    );

    let done = last(&events, "response.done");
    let transcript = Scripted::transcript(3..13);
    assert_eq!(done["response"]["id"], id.as_str());
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["transcript"],
        transcript.as_str()
    );
    assert_eq!(
        done["response"]["usage"]["output_token_details"]["audio_tokens"],
        10
    );
    assert_eq!(
        last(&events, "response.output_audio_transcript.done")["transcript"],
        transcript.as_str()
    );

    let listen = last(&events, "response.listen");
    assert_eq!(listen["response_id"], id.as_str());
    assert_eq!(listen["session_id"], created_session(&h).as_str());
    assert_eq!(listen["epoch"], 0);
    assert_eq!(
        listen["response"],
        json!({"object": "realtime.response", "status": "listening", "id": id, "metadata": {"reason": "model_listen"}})
    );

    // The model speaks again later: a second response of its own.
    let second = h.until("response.listen").await;
    assert_eq!(types(&second), expected_ws(30..35));
    assert_ne!(second[0]["response"]["id"], id.as_str());
    assert_eq!(
        last(&second, "response.done")["response"]["status"],
        "completed"
    );
    // The conversation holds both assistant items in order.
    assert_eq!(
        last(&second, "conversation.item.added")["previous_item_id"],
        item_id.as_str()
    );
    // Nothing was asked of the model.
    assert_eq!(h.requests(), vec![]);
}

fn created_session(h: &Harness) -> String {
    h.seen[0]["session"]["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn echo_never_sees_speak_or_listen() {
    let mut h = harness(Setup {
        echo: true,
        ..Setup::default()
    })
    .await;
    h.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":"hello there"}]}}))
        .await;
    h.send(json!({"type":"response.create"})).await;
    let events = h.until("response.done").await;
    assert_eq!(
        last(&events, "response.done")["response"]["status"],
        "completed"
    );
    h.drain(Duration::from_millis(300)).await;
    let all = h.types();
    assert!(
        !all.iter()
            .any(|t| t == "response.speak" || t == "response.listen"),
        "{all:#?}"
    );
    let expected = [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
    ];
    let start = all.iter().position(|t| t == "response.created").unwrap();
    assert_eq!(all[start..start + 4], expected.map(String::from));
}

#[tokio::test]
async fn cancel_mid_speech_waits_for_the_model_to_fall_silent() {
    let mut h = harness(Setup {
        speech: vec![3..40, 60..66],
        ..Setup::default()
    })
    .await;
    let opening = h.until("response.output_audio.delta").await;
    let id = opening[0]["response"]["id"].as_str().unwrap().to_string();
    h.send(json!({"type":"response.cancel"})).await;
    let events = h.until("response.done").await;
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["id"], id.as_str());
    assert_eq!(done["response"]["status"], "cancelled");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "client_cancelled"
    );

    // The model keeps talking until step 40: no response opens on that speech, nothing of
    // the cancelled one arrives; when it falls silent, a bare `response.listen`.
    let gap = h.until("response.listen").await;
    assert_eq!(types(&gap), ["response.listen"], "{gap:#?}");
    let listen = &gap[0];
    assert!(listen.get("response_id").is_none(), "{listen}");
    assert!(listen["response"].get("id").is_none(), "{listen}");
    assert_eq!(listen["epoch"], 1);

    // Its next speech opens a new response, under the new epoch.
    let second = h.until("response.listen").await;
    assert_eq!(types(&second), expected_ws(60..66));
    assert_eq!(last(&second, "response.speak")["metadata"]["epoch"], 1);
    assert_eq!(
        last(&second, "response.listen")["response_id"],
        second[0]["response"]["id"]
    );
    assert_eq!(h.requests(), vec![Request::Cancel]);
}

#[tokio::test]
async fn client_response_is_filled_by_the_models_speech() {
    let mut h = harness(Setup {
        speech: once(5..12),
        gate_open: false,
        ..Setup::default()
    })
    .await;
    h.send(json!({"type":"response.create","response":{"metadata":{"k":"v"}}}))
        .await;
    let opening = h.until("response.content_part.added").await;
    assert_eq!(
        types(&opening),
        [
            "response.created",
            "response.output_item.added",
            "conversation.item.added",
            "response.content_part.added"
        ]
    );
    let id = opening[0]["response"]["id"].as_str().unwrap().to_string();
    assert!(h.drain(Duration::from_millis(200)).await.is_empty());
    h.go();
    let events = h.until("response.listen").await;
    let mut want = expected_ws(5..12);
    want.drain(..5);
    want.insert(0, "response.speak".into());
    assert_eq!(types(&events), want);
    assert_eq!(events[0]["response_id"], id.as_str());
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["id"], id.as_str());
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(done["response"]["metadata"], json!({"k": "v"}));
    assert_eq!(
        done["response"]["output"][0]["content"][0]["transcript"],
        Scripted::transcript(5..12).as_str()
    );
    assert_eq!(last(&events, "response.listen")["response_id"], id.as_str());
    // One response only, and no request the model cannot meet.
    assert!(h.drain(Duration::from_millis(200)).await.is_empty());
    assert_eq!(count(&h.seen, "response.created"), 1);
    assert_eq!(h.requests(), vec![]);
}

#[tokio::test]
async fn text_response_streams_the_models_text_and_drops_its_audio() {
    let mut h = harness(Setup {
        speech: once(5..12),
        gate_open: false,
        ..Setup::default()
    })
    .await;
    h.send(json!({"type":"response.create","response":{"output_modalities":["text"]}}))
        .await;
    h.until("response.content_part.added").await;
    h.go();
    let events = h.until("response.listen").await;
    let text = Scripted::transcript(5..12);
    assert_eq!(count(&events, "response.output_audio.delta"), 0);
    assert_eq!(count(&events, "response.speak"), 1);
    let deltas: String = events
        .iter()
        .filter(|v| v["type"] == "response.output_text.delta")
        .map(|v| v["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, text);
    assert_eq!(
        last(&events, "response.output_text.done")["text"],
        text.as_str()
    );
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["text"],
        text.as_str()
    );
}

#[tokio::test]
async fn client_response_without_speech_completes_empty_after_the_timeout() {
    let mut h = harness(Setup {
        speak_timeout: Some(Duration::from_millis(300)),
        ..Setup::default()
    })
    .await;
    let sent = Instant::now();
    h.send(json!({"type":"response.create"})).await;
    let events = h.until("response.listen").await;
    assert!(sent.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        types(&events),
        [
            "response.created",
            "response.output_item.added",
            "conversation.item.added",
            "response.content_part.added",
            "response.output_audio.done",
            "response.output_audio_transcript.done",
            "response.content_part.done",
            "response.output_item.done",
            "conversation.item.done",
            "response.done",
            "response.listen"
        ]
    );
    let id = events[0]["response"]["id"].as_str().unwrap();
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(
        done["response"]["output"][0]["content"][0]["transcript"],
        ""
    );
    let listen = last(&events, "response.listen");
    assert_eq!(listen["response_id"], id);
    assert_eq!(listen["response"]["id"], id);
    assert_eq!(listen["response"]["metadata"]["reason"], "model_listen");
}

#[test]
fn the_default_speak_timeout_is_four_seconds() {
    assert_eq!(super::SPEAK_TIMEOUT, Duration::from_secs(4));
}

#[tokio::test]
async fn server_vad_commits_but_leaves_the_answer_to_the_model() {
    let mut h = harness(Setup::default()).await;
    let mut audio = vec![0.0; 12_000];
    audio.extend(voiced(1.0));
    audio.extend(vec![0.0; 24_000]);
    for chunk in audio.chunks(2_400) {
        h.send(json!({"type":"input_audio_buffer.append","audio": pcm16_b64(chunk)}))
            .await;
    }
    let events = h.until("input_audio_buffer.committed").await;
    assert_eq!(count(&events, "input_audio_buffer.speech_started"), 1);
    assert_eq!(count(&events, "input_audio_buffer.speech_stopped"), 1);
    let rest = h.drain(Duration::from_millis(400)).await;
    assert_eq!(
        types(&rest),
        ["conversation.item.added", "conversation.item.done"]
    );
    assert_eq!(count(&h.seen, "response.created"), 0);
    assert_eq!(h.requests(), vec![]);
}

#[tokio::test]
async fn manual_commit_makes_the_user_item_and_the_model_answers_itself() {
    let mut h = harness(Setup {
        speech: once(10..15),
        gate_open: false,
        session: json!({"audio":{"input":{"turn_detection": null}}}),
        ..Setup::default()
    })
    .await;
    h.send(json!({"type":"input_audio_buffer.append","audio": pcm16_b64(&voiced(0.3))}))
        .await;
    h.send(json!({"type":"input_audio_buffer.commit"})).await;
    let events = h.until("conversation.item.done").await;
    assert_eq!(
        types(&events),
        [
            "input_audio_buffer.committed",
            "conversation.item.added",
            "conversation.item.done"
        ]
    );
    let user_item = events[0]["item_id"].as_str().unwrap().to_string();
    assert!(h.drain(Duration::from_millis(200)).await.is_empty());
    h.go();
    let answer = h.until("response.listen").await;
    assert_eq!(types(&answer), expected_ws(10..15));
    assert_eq!(answer[2]["previous_item_id"], user_item.as_str());
    // The answer counts the user's audio as its input.
    assert_eq!(
        last(&answer, "response.done")["response"]["usage"]["input_token_details"]["audio_tokens"],
        15
    );
}

#[tokio::test]
async fn barge_in_cancels_and_suppresses_until_silence() {
    let mut h = harness(Setup {
        speech: once(3..60),
        ..Setup::default()
    })
    .await;
    let opening = h.until("response.output_audio.delta").await;
    let id = opening[0]["response"]["id"].as_str().unwrap().to_string();
    let mut audio = voiced(0.6);
    audio.extend(vec![0.0; 2_400]);
    h.send(json!({"type":"input_audio_buffer.append","audio": pcm16_b64(&audio)}))
        .await;
    let events = h.until("response.done").await;
    assert!(types(&events).contains(&"input_audio_buffer.speech_started".to_string()));
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["id"], id.as_str());
    assert_eq!(done["response"]["status"], "cancelled");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
    // The model talks on until step 60 and then listens: no new response meanwhile.
    h.until("response.listen").await;
    h.drain(Duration::from_millis(300)).await;
    assert_eq!(count(&h.seen, "response.created"), 1, "{:#?}", h.types());
    assert_eq!(count(&h.seen, "response.listen"), 1);
    assert!(last(&h.seen, "response.listen")
        .get("response_id")
        .is_none());
}

#[tokio::test]
async fn max_output_tokens_ends_a_model_response_incomplete() {
    let mut h = harness(Setup {
        speech: vec![3..30, 45..48],
        session: json!({"max_output_tokens": 5}),
        ..Setup::default()
    })
    .await;
    let events = h.until("response.done").await;
    let done = last(&events, "response.done");
    assert_eq!(done["response"]["status"], "incomplete");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "max_output_tokens"
    );
    // The rest of that speech is dropped; the model's next speech is a new response.
    let gap = h.until("response.listen").await;
    assert_eq!(types(&gap), ["response.listen"]);
    let next = h.until("response.created").await;
    assert_eq!(types(&next), ["response.created"]);
    assert_eq!(h.requests(), vec![Request::Cancel]);
}

#[tokio::test]
async fn webrtc_playback_clear_truncates_and_suppresses() {
    let sink = SinkLog::default();
    let mut h = harness(Setup {
        speech: once(3..40),
        webrtc: Some(sink.clone()),
        ..Setup::default()
    })
    .await;
    let opening = h.until("response.speak").await;
    let id = opening[0]["response"]["id"].as_str().unwrap().to_string();
    let item_id = opening[1]["item"]["id"].as_str().unwrap().to_string();
    // Audio goes to the media engine, not into events.
    h.until("response.content_part.added").await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(sink.0.lock().unwrap().iter().any(|c| c == "play 1 480"));
    h.input(SessionInput::Media {
        audio: None,
        played: vec![(1, 960)],
        drained: vec![],
    })
    .await;
    let started = h.until("output_audio_buffer.started").await;
    assert_eq!(
        last(&started, "output_audio_buffer.started")["response_id"],
        id.as_str()
    );
    assert_eq!(count(&started, "response.output_audio.delta"), 0);

    h.send(json!({"type":"output_audio_buffer.clear"})).await;
    let events = h.until("response.done").await;
    assert_eq!(
        last(&events, "response.done")["response"]["status"],
        "cancelled"
    );
    assert!(sink.0.lock().unwrap().iter().any(|c| c == "clear"));
    h.input(SessionInput::Cleared).await;
    let cleared = h.until("conversation.item.truncated").await;
    assert_eq!(
        last(&cleared, "output_audio_buffer.cleared")["response_id"],
        id.as_str()
    );
    let truncated = last(&cleared, "conversation.item.truncated");
    assert_eq!(truncated["item_id"], item_id.as_str());
    assert_eq!(truncated["audio_end_ms"], 40);

    h.until("response.listen").await;
    h.drain(Duration::from_millis(200)).await;
    assert_eq!(count(&h.seen, "response.created"), 1, "{:#?}", h.types());
}

#[tokio::test]
async fn a_client_response_after_a_cancel_waits_for_new_speech() {
    let mut h = harness(Setup {
        speech: vec![3..40, 60..66],
        ..Setup::default()
    })
    .await;
    h.until("response.output_audio.delta").await;
    h.send(json!({"type":"response.cancel"})).await;
    h.until("response.done").await;
    // The model goes on with the cancelled speech until step 40; a response the client
    // creates now is not filled with that, but with the speech after the silence.
    h.send(json!({"type":"response.create"})).await;
    let created = h.until("response.created").await;
    let id = last(&created, "response.created")["response"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let filled = h.until("response.done").await;
    let done = last(&filled, "response.done");
    assert_eq!(done["response"]["id"], id.as_str());
    assert_eq!(done["response"]["status"], "completed");
    assert_eq!(
        last(&filled, "response.output_audio_transcript.done")["transcript"],
        Scripted::transcript(60..66),
        "{filled:#?}"
    );
    let first_words = filled
        .iter()
        .find(|v| v["type"] == "response.output_audio_transcript.delta")
        .expect("words");
    assert_eq!(first_words["delta"], " w60");
}

#[tokio::test]
async fn a_full_duplex_model_keeps_hearing_past_the_input_buffer_limit() {
    // No turn detection: nobody commits, the model listens all the time.
    let mut h = harness(Setup {
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":null}}}),
        max_input_ms: Some(1000),
        ..Setup::default()
    })
    .await;
    let chunk = pcm16_b64(&voiced(0.5));
    for _ in 0..5 {
        h.send(json!({"type":"input_audio_buffer.append","audio":chunk}))
            .await;
    }
    h.send(json!({"type":"input_audio_buffer.commit"})).await;
    let committed = h.until("conversation.item.added").await;
    assert_eq!(count(&committed, "error"), 0, "{committed:#?}");
    // The buffer kept the newest second.
    let bytes = h.retrieve_audio(&committed).await;
    assert_eq!(bytes.len(), 2 * 24_000);
}

#[tokio::test]
async fn live_media_past_the_buffer_limit_is_reported_once_and_keeps_the_newest() {
    // A turn-based model on WebRTC with manual turns: the caller's audio cannot be refused.
    let mut h = harness(Setup {
        echo: true,
        webrtc: Some(SinkLog::default()),
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":null}}}),
        max_input_ms: Some(1000),
        ..Setup::default()
    })
    .await;
    for _ in 0..100 {
        h.input(SessionInput::Media {
            audio: Some(vec![0.1; 480]),
            played: vec![],
            drained: vec![],
        })
        .await;
    }
    let events = h.drain(Duration::from_millis(300)).await;
    assert_eq!(types(&events), ["error"], "{events:#?}");
    assert_eq!(events[0]["error"]["code"], "input_audio_buffer_full");
    h.send(json!({"type":"input_audio_buffer.commit"})).await;
    h.until("input_audio_buffer.committed").await;
    // Under the limit again, a new overflow is a new report.
    for _ in 0..60 {
        h.input(SessionInput::Media {
            audio: Some(vec![0.1; 480]),
            played: vec![],
            drained: vec![],
        })
        .await;
    }
    let again = h.drain(Duration::from_millis(300)).await;
    assert_eq!(count(&again, "error"), 1, "{again:#?}");
}

#[tokio::test]
async fn a_clear_only_covers_responses_started_before_it() {
    let sink = SinkLog::default();
    let mut h = harness(Setup {
        speech: vec![3..20, 30..36],
        webrtc: Some(sink.clone()),
        ..Setup::default()
    })
    .await;
    let opening = h.until("response.speak").await;
    let old = opening[0]["response"]["id"].as_str().unwrap().to_string();
    h.send(json!({"type":"output_audio_buffer.clear"})).await;
    // Before the engine confirms the purge, the client asks for a new response.
    h.send(json!({"type":"response.create"})).await;
    let created = h.until("response.created").await;
    let new = last(&created, "response.created")["response"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(new, old);
    h.input(SessionInput::Cleared).await;
    let cleared = h.until("output_audio_buffer.cleared").await;
    assert_eq!(
        last(&cleared, "output_audio_buffer.cleared")["response_id"],
        old.as_str()
    );
    // The new response is still tracked: its audio starting on RTP is reported.
    let speak = h.until("response.speak").await;
    assert_eq!(last(&speak, "response.speak")["response_id"], new.as_str());
    let tag = 2;
    h.input(SessionInput::Media {
        audio: None,
        played: vec![(tag, 480)],
        drained: vec![],
    })
    .await;
    let started = h.until("output_audio_buffer.started").await;
    assert_eq!(
        last(&started, "output_audio_buffer.started")["response_id"],
        new.as_str()
    );
    assert_eq!(count(&h.seen, "output_audio_buffer.cleared"), 1);
}

#[tokio::test]
async fn no_idle_timeout_prompts_on_a_full_duplex_model() {
    let mut h = harness(Setup {
        speech: once(3..8),
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":{"type":"server_vad","idle_timeout_ms":5000}}}}),
        ..Setup::default()
    })
    .await;
    h.until("response.listen").await;
    // Server VAD's idle timeout (5 s at least) would fire 5 s after that response, commit
    // an empty user item and prompt a model that decides itself when to speak.
    tokio::time::sleep(Duration::from_millis(5600)).await;
    let quiet = h.drain(Duration::from_millis(100)).await;
    assert_eq!(types(&quiet), Vec::<String>::new(), "{quiet:#?}");
}

#[tokio::test]
async fn a_client_append_past_the_limit_is_refused_whole() {
    let mut h = harness(Setup {
        echo: true,
        session: json!({"type":"realtime","audio":{"input":{"turn_detection":null}}}),
        max_input_ms: Some(1000),
        ..Setup::default()
    })
    .await;
    let chunk = pcm16_b64(&voiced(0.4));
    for _ in 0..3 {
        h.send(json!({"type":"input_audio_buffer.append","audio":chunk}))
            .await;
    }
    let refused = h.until("error").await;
    assert_eq!(types(&refused), ["error"]);
    assert_eq!(refused[0]["error"]["code"], "input_audio_buffer_full");
    h.send(json!({"type":"input_audio_buffer.commit"})).await;
    let committed = h.until("conversation.item.added").await;
    let bytes = h.retrieve_audio(&committed).await;
    assert_eq!(bytes.len(), 2 * 2 * 9_600, "the first two appends, 0.8 s");
}
