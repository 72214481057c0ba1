//! Session tests on the sans-IO core: a scripted full-duplex model (or the echo model) is
//! stepped by a small simulation of the model loop, and the whole session runs on a
//! virtual clock: no threads, no sleeps, every test deterministic.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use duet_models::{
    DuplexModel, EchoModel, ModelError, ModelInfo, Request, SlotId, StepInput, StepOutput,
};
use serde_json::{json, Value};

use super::{
    queue, AttachmentId, Delivery, Epoch, EventReceiver, Limits, MediaSignals, MediaSink,
    ModelEvent, ModelPort, PlaybackTag, Received, Session, SessionInput, SessionParams, Transport,
};
use crate::protocol::strict::forbidden_nulls;

/// 20 ms steps.
const FRAME: usize = 480;
/// Amplitude of the scripted model's speech.
const LEVEL: f32 = 0.25;
/// Longest virtual time a test waits for any one event.
const EVENT_WAIT: Duration = Duration::from_secs(30);
/// The simulated loop's step period (20 ms frames).
const STEP: Duration = Duration::from_millis(20);
/// Extra steps per tick a backlog may take, as in the model loop.
const MAX_STEPS_PER_TICK: usize = 4;

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
    gate: Arc<Mutex<bool>>,
    requests: Requests,
}

impl Scripted {
    fn new(speech: Vec<Range<u64>>, gate: Arc<Mutex<bool>>, requests: Requests) -> Self {
        Self {
            info: ModelInfo {
                name: "scripted".into(),
                frame_samples: FRAME,
                max_slots: 4,
                autonomous: true,
                tools: false,
                reads_text: false,
            },
            speech,
            clocks: Vec::new(),
            gate,
            requests,
        }
    }

    /// The text piece spoken at step `n`, if any.
    fn piece(n: u64, range: &Range<u64>) -> String {
        if (n - range.start).is_multiple_of(3) {
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
        let open = *self.gate.lock().unwrap();
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
                tool_call: None,
                failed: None,
                end_of_turn: false,
                speaking: range.is_some(),
            }));
        }
    }
}

/// What the session asked of its model port, applied at the next simulated step.
#[derive(Default)]
struct PortState {
    frames: VecDeque<Vec<f32>>,
    requests: VecDeque<(Epoch, Request)>,
}

/// The session's model port in tests: it queues what the session sends.
struct TestPort {
    state: Arc<Mutex<PortState>>,
    autonomous: bool,
}

impl ModelPort for TestPort {
    fn autonomous(&self) -> bool {
        self.autonomous
    }

    fn input(&self, pcm: &[f32]) {
        let mut s = self.state.lock().unwrap();
        s.frames.extend(pcm.chunks(FRAME).map(<[f32]>::to_vec));
    }

    fn request(&self, epoch: Epoch, request: Request) {
        self.state
            .lock()
            .unwrap()
            .requests
            .push_back((epoch, request));
    }
}

/// The model loop, simulated: one slot, stepped every [`STEP`], requests applied first,
/// backlog caught up, outputs stamped with the epoch of the last request and filtered as
/// the loop does.
struct ModelSim {
    model: Box<dyn DuplexModel>,
    slot: SlotId,
    port: Arc<Mutex<PortState>>,
    epoch: Epoch,
    silence: Vec<f32>,
}

impl ModelSim {
    /// One tick: the events the session receives.
    fn tick(&mut self) -> Vec<ModelEvent> {
        let requests: Vec<_> = self.port.lock().unwrap().requests.drain(..).collect();
        for (epoch, request) in requests {
            self.epoch = epoch;
            self.model.request(self.slot, request).expect("request");
        }
        let mut events = Vec::new();
        for round in 0..MAX_STEPS_PER_TICK {
            let frame = {
                let mut s = self.port.lock().unwrap();
                if round > 0 && s.frames.len() <= 1 {
                    break;
                }
                s.frames.pop_front()
            };
            let pcm = frame.unwrap_or_else(|| self.silence.clone());
            let mut out = Vec::new();
            self.model.step(
                &[StepInput {
                    slot: self.slot,
                    pcm: &pcm,
                }],
                &mut out,
            );
            let output = out.pop().expect("one output").expect("model step");
            let autonomous = self.model.info().autonomous;
            if autonomous || !output.is_empty() {
                events.push(ModelEvent::Output {
                    epoch: self.epoch,
                    output,
                });
            }
        }
        events
    }
}

/// What the fake media engine was asked to do.
#[derive(Clone, Default)]
struct SinkLog(Arc<Mutex<Vec<String>>>);

impl MediaSink for SinkLog {
    fn play(&self, tag: PlaybackTag, pcm: &[f32]) {
        self.0
            .lock()
            .unwrap()
            .push(format!("play {} {}", tag.0, pcm.len()));
    }
    fn finish(&self, tag: PlaybackTag) {
        self.0.lock().unwrap().push(format!("finish {}", tag.0));
    }
    fn clear(&self) {
        self.0.lock().unwrap().push("clear".into());
    }
    fn pause(&self, paused: bool) {
        let what = if paused { "pause" } else { "resume" };
        self.0.lock().unwrap().push(what.into());
    }
}

/// A session, its model and its transport queue, on a virtual clock.
struct Harness {
    session: Session,
    out: EventReceiver,
    /// What the fake media engine reports (WebRTC).
    signals: Arc<MediaSignals>,
    sim: ModelSim,
    gate: Arc<Mutex<bool>>,
    requests: Requests,
    /// The virtual time.
    now: Instant,
    /// When the simulated model loop steps next.
    next_step: Instant,
    /// Events received and not yet returned by `until`/`drain`.
    pending: VecDeque<Value>,
    /// Every event received so far.
    seen: Vec<Value>,
    /// The transport's queue was closed or aborted.
    closed: Option<String>,
    /// Whether the transport reads its queue (a client that stopped reading: false).
    reading: bool,
    /// Its audio arrives as the caller's media (WebRTC), not client appends.
    media_input: bool,
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
    /// Opted into the duplex extension.
    duplex: bool,
    /// Limits for the duplex extension and the lifetime (default: production).
    limits: Option<Limits>,
    /// A transcriber port whose sends the test sees (and answers with `transcript`).
    transcriber: Option<Sent>,
    /// That transcriber is a streaming one.
    streaming: bool,
    /// Opens as a transcription session.
    transcription_session: bool,
    /// A memory budget of this many bytes, with no reserve (none: unmetered).
    memory: Option<u64>,
    /// The model is [`tools::ToolScript`], which calls tools.
    tool_model: bool,
    /// A turn model whose requests the test sees (and answers through the harness).
    turn: Option<TurnAsked>,
    /// Asked for the turn detector's decisions (`?turn_events=1`).
    turn_events: bool,
    /// The model reads words (as the cascade does): answers may start early.
    reads_text: bool,
}

/// What the session asked its turn model: `(pause, samples)`.
type TurnAsked = Arc<Mutex<Vec<(u64, usize)>>>;

/// A turn port that records what it was asked.
struct TestTurn(TurnAsked);

impl super::TurnPort for TestTurn {
    fn score(&self, pause: u64, pcm: Arc<[f32]>) {
        self.0.lock().unwrap().push((pause, pcm.len()));
    }
}

/// What the session sent its transcriber: `(item, samples, end)`; an utterance it gave up
/// is recorded as `("forget ITEM", 0, false)`.
type Sent = Arc<Mutex<Vec<(String, usize, bool)>>>;

/// A transcriber port (streaming or not) that records what it was sent.
struct TestTranscriber(Sent, bool);

impl super::TranscriberPort for TestTranscriber {
    fn name(&self) -> &str {
        "scripted-stt"
    }
    fn streaming(&self) -> bool {
        self.1
    }
    fn send(&self, item_id: Arc<str>, pcm: Arc<[f32]>, end: bool, _logprobs: bool) {
        self.0
            .lock()
            .unwrap()
            .push((item_id.to_string(), pcm.len(), end));
    }
    fn forget(&self, item_id: &Arc<str>) {
        self.0
            .lock()
            .unwrap()
            .push((format!("forget {item_id}"), 0, false));
    }
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
            duplex: false,
            limits: None,
            transcriber: None,
            streaming: false,
            transcription_session: false,
            memory: None,
            tool_model: false,
            turn: None,
            turn_events: false,
            reads_text: false,
        }
    }
}

fn limits(setup: &Setup) -> Limits {
    let d = setup.limits.clone().unwrap_or_default();
    Limits {
        max_input_samples: setup.max_input_ms.map_or(d.max_input_samples, |ms| ms * 24),
        max_outbound_bytes: setup.max_outbound_bytes.unwrap_or(d.max_outbound_bytes),
        speak_timeout: setup.speak_timeout.unwrap_or(d.speak_timeout),
        ..d
    }
}

fn harness(setup: Setup) -> Harness {
    let gate = Arc::new(Mutex::new(setup.gate_open));
    let requests = Requests::default();
    let mut model: Box<dyn DuplexModel> = if setup.echo {
        Box::new(EchoModel::new())
    } else if setup.tool_model {
        Box::new(tools::ToolScript::new(requests.clone()))
    } else {
        Box::new(Scripted::new(
            setup.speech.clone(),
            gate.clone(),
            requests.clone(),
        ))
    };
    let slot = model.open_slot().expect("slot");
    let port = Arc::new(Mutex::new(PortState::default()));
    let limits = limits(&setup);
    let (out_tx, out) = queue(limits.max_outbound_bytes);
    let signals = Arc::new(MediaSignals::default());
    let media_input = setup.webrtc.is_some();
    let transport = match setup.webrtc {
        Some(sink) => Transport::WebRtc {
            sink: Box::new(sink),
            signals: signals.clone(),
        },
        None => Transport::WebSocket,
    };
    let now = Instant::now();
    let params = SessionParams {
        transport,
        session_id: crate::protocol::ids::session_id(),
        model: Some(Box::new(TestPort {
            state: port.clone(),
            autonomous: model.info().autonomous,
        })),
        model_info: ModelInfo {
            name: "scripted".into(),
            frame_samples: FRAME,
            reads_text: setup.reads_text || model.info().reads_text,
            ..model.info().clone()
        },
        limits,
        out: out_tx,
        duplex: setup.duplex,
        attachment: AttachmentId(1),
        headroom: Some(Arc::new(|| (356, 300))),
        usage: None,
        transcriber: setup.transcriber.clone().map(|sent| {
            Box::new(TestTranscriber(sent, setup.streaming)) as Box<dyn super::TranscriberPort>
        }),
        can_transcribe: false,
        vad_model: None,
        turn: setup
            .turn
            .clone()
            .map(|asked| Arc::new(TestTurn(asked)) as Arc<dyn super::TurnPort + Sync>),
        transcription_session: setup.transcription_session,
        turn_events: setup.turn_events,
        memory: setup.memory.map(|budget| {
            let account = crate::memory::MemoryAccount::new(budget);
            super::SessionMemory {
                meter: crate::memory::Meter::unreserved(&account),
                fixed: account.charge(0).expect("nothing"),
            }
        }),
    };
    let mut session = Session::new(params, now, 1_700_000_000);
    session
        .configure(serde_json::from_value(setup.session).expect("session patch"))
        .expect("configure");
    let sim = ModelSim {
        model,
        slot,
        port,
        epoch: Epoch::default(),
        silence: vec![0.0; FRAME],
    };
    let mut h = Harness {
        session,
        out,
        signals,
        sim,
        gate,
        requests,
        now,
        next_step: now + STEP,
        pending: VecDeque::new(),
        seen: Vec::new(),
        closed: None,
        reading: true,
        media_input,
    };
    h.session.start(now);
    h.until("session.created");
    h
}

impl Harness {
    /// Opens the scripted model's gate: its script clock starts.
    fn go(&self) {
        *self.gate.lock().unwrap() = true;
    }

    fn send(&mut self, event: Value) {
        self.input(SessionInput::Text(event.to_string()));
    }

    fn input(&mut self, input: SessionInput) {
        self.session.handle(input, self.now);
        self.collect();
    }

    /// What the fake media engine reported, taken by the session now.
    fn media(&mut self) {
        let report = self.signals.take();
        self.session.on_media(&report, self.now);
        self.collect();
    }

    /// Advances the virtual clock by `d`: the session's timers and the model loop run.
    fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            let deadline = self.session.next_deadline();
            let next = self.next_step.min(deadline);
            if next > end || self.session.is_closed() {
                break;
            }
            self.now = next;
            if deadline <= next {
                self.session.on_timeout(next);
            }
            if self.next_step <= next {
                self.next_step += STEP;
                for ev in self.sim.tick() {
                    self.session.on_model(ev, self.now);
                }
            }
            self.collect();
        }
        self.now = end;
        self.collect();
    }

    /// The transcriber answers for `item_id`.
    fn transcript(&mut self, item_id: &str, output: Result<duet_models::TranscribeOutput, String>) {
        let ev = super::TranscriptEvent {
            item_id: Arc::from(item_id),
            output,
        };
        self.session.on_transcript(ev, self.now);
        self.collect();
    }

    /// Moves what the transport queue holds into `pending` (the meter settles first, as the
    /// shell does after every input).
    fn collect(&mut self) {
        self.session.settle();
        while self.reading {
            match self.out.try_recv() {
                Received::Delivery(Delivery::Event(ev, _)) => {
                    let v: Value = serde_json::from_str(&ev.json).expect("JSON");
                    assert_eq!(forbidden_nulls(&v), Vec::<String>::new(), "{v}");
                    self.seen.push(v.clone());
                    self.pending.push_back(v);
                }
                Received::Delivery(Delivery::Close { code, reason }) => {
                    self.closed = Some(format!("{code} {reason}"));
                }
                Received::Abort(a) => self.closed = Some(format!("aborted {a:?}")),
                Received::Empty | Received::Closed => return,
            }
        }
    }

    fn next_event(&mut self, wait: Duration) -> Option<Value> {
        let end = self.now + wait;
        while self.pending.is_empty() && self.now < end && self.closed.is_none() {
            self.advance(STEP);
        }
        self.pending.pop_front()
    }

    /// Events up to and including the first of `kind` (within [`EVENT_WAIT`] of virtual time).
    fn until(&mut self, kind: &str) -> Vec<Value> {
        let mut got = Vec::new();
        loop {
            let Some(v) = self.next_event(EVENT_WAIT) else {
                panic!(
                    "no {kind} within {EVENT_WAIT:?} (closed: {:?}); seen {:#?}",
                    self.closed,
                    self.types()
                );
            };
            let done = v["type"] == kind;
            got.push(v);
            if done {
                return got;
            }
        }
    }

    /// Events until nothing arrived for `quiet` of virtual time.
    fn drain(&mut self, quiet: Duration) -> Vec<Value> {
        let mut got = Vec::new();
        while let Some(v) = self.next_event(quiet) {
            got.push(v);
        }
        got
    }

    fn types(&self) -> Vec<String> {
        types(&self.seen)
    }

    /// The PCM16 bytes of the user item that `committed` (events up to its
    /// `conversation.item.added`) added, through `conversation.item.retrieve`.
    fn retrieve_audio(&mut self, committed: &[Value]) -> Vec<u8> {
        let item_id = last(committed, "conversation.item.added")["item"]["id"].clone();
        self.send(json!({"type":"conversation.item.retrieve","item_id":item_id}));
        let got = self.until("conversation.item.retrieved");
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

mod durable;
mod input_and_playback;
mod interruptions;
mod judge;
mod lifecycle;
mod memory;
mod noise;
mod outbound_limits;
mod overlap;
mod shape;
mod tools;
mod transcription;
mod turns;
