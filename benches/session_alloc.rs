//! Allocations per call-second in the session on a call's per-frame path, counted by a
//! global allocator: `cargo bench --bench session_alloc`.
//!
//! 20 WebRTC sessions (server VAD, the echo model) run on a virtual clock for 30 s. Each
//! caller speaks 1 s, is silent 2 s; the echo answers each turn (its audio goes to the
//! media sink, whose playback reports come back every 20 ms as the engine's would). Only
//! the session's own calls are counted (`handle`, `on_model`, `on_media`, `on_timeout`);
//! the first 6 s warm every buffer up. Printed: allocations per call-second after that on
//! the frames that sent no event (the per-frame path: target 0), and on the frames that
//! did (an event is rendered JSON: a turn's dozen events, each answer's transcript).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use duet::session::{
    queue, AttachmentId, Epoch, Limits, MediaSignals, MediaSink, ModelEvent, ModelPort,
    PlaybackTag, Received, Session, SessionInput, SessionParams, Transport,
};
use duet_models::{DuplexModel, EchoModel, ModelInfo, Request, SlotId, StepInput};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator; counting touches only an atomic and a
// const-initialised thread-local.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if ON.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        if ON.with(Cell::get) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        System.realloc(ptr, layout, new)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations `f` made, by the session alone.
fn counted(f: impl FnOnce()) -> u64 {
    let before = ALLOCS.load(Ordering::Relaxed);
    ON.with(|on| on.set(true));
    f();
    ON.with(|on| on.set(false));
    ALLOCS.load(Ordering::Relaxed) - before
}

const SESSIONS: usize = 20;
const SECS: u64 = 30;
const WARM_SECS: u64 = 6;
const FRAME: usize = 480;

/// The model port: input frames into reused buffers, requests kept for the loop.
#[derive(Default)]
struct Port {
    frames: VecDeque<Vec<f32>>,
    spare: Vec<Vec<f32>>,
    requests: Vec<(Epoch, Request)>,
}

struct BenchPort(Arc<Mutex<Port>>);

impl ModelPort for BenchPort {
    fn autonomous(&self) -> bool {
        false
    }
    fn input(&self, pcm: &[f32]) {
        let mut p = self.0.lock().unwrap();
        let mut buf = p.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(pcm);
        p.frames.push_back(buf);
    }
    fn request(&self, epoch: Epoch, request: Request) {
        self.0.lock().unwrap().requests.push((epoch, request));
    }
}

/// The media engine's side: what it was asked to play, reported as played a frame later.
#[derive(Default)]
struct Engine {
    queued: VecDeque<(u64, usize)>,
    finished: Vec<u64>,
}

struct BenchSink(Arc<Mutex<Engine>>);

impl MediaSink for BenchSink {
    fn play(&self, tag: PlaybackTag, pcm: &[f32]) {
        self.0.lock().unwrap().queued.push_back((tag.0, pcm.len()));
    }
    fn finish(&self, tag: PlaybackTag) {
        self.0.lock().unwrap().finished.push(tag.0);
    }
    fn clear(&self) {
        self.0.lock().unwrap().queued.clear();
    }
    fn pause(&self, _paused: bool) {}
}

struct Call {
    session: Session,
    out: duet::session::EventReceiver,
    port: Arc<Mutex<Port>>,
    engine: Arc<Mutex<Engine>>,
    signals: Arc<MediaSignals>,
    report: duet::session::MediaReport,
    slot: SlotId,
    epoch: Epoch,
}

fn voice(i: u64) -> Vec<f32> {
    (0..FRAME)
        .map(|n| {
            let t = (i * FRAME as u64 + n as u64) as f32 / 24_000.0;
            0.2 * (2.0 * std::f32::consts::PI * 160.0 * t).sin()
        })
        .collect()
}

fn main() {
    let mut model = EchoModel::new();
    let t0 = Instant::now();
    let mut calls: Vec<Call> = (0..SESSIONS)
        .map(|_| {
            let port = Arc::new(Mutex::new(Port::default()));
            let engine = Arc::new(Mutex::new(Engine::default()));
            let signals = Arc::new(MediaSignals::default());
            let limits = Limits::default();
            let (out_tx, out) = queue(limits.max_outbound_bytes);
            let params = SessionParams {
                session_id: duet_protocol::ids::session_id(),
                transport: Transport::WebRtc {
                    sink: Box::new(BenchSink(engine.clone())),
                    signals: signals.clone(),
                },
                model: Some(Box::new(BenchPort(port.clone()))),
                model_info: ModelInfo {
                    name: "echo".into(),
                    frame_samples: FRAME,
                    max_slots: 1,
                    autonomous: false,
                    tools: false,
                    reads_text: false,
                },
                limits,
                out: out_tx,
                duplex: false,
                attachment: AttachmentId(1),
                headroom: None,
                usage: None,
                transcriber: None,
                can_transcribe: false,
                vad_model: None,
                turn: None,
                transcription_session: false,
                turn_events: false,
                memory: None,
            };
            let mut session = Session::new(params, t0, 1_700_000_000);
            session.start(t0);
            Call {
                session,
                out,
                port,
                engine,
                signals,
                report: Default::default(),
                slot: model.open_slot().expect("slot"),
                epoch: Epoch::default(),
            }
        })
        .collect();
    let speech: Vec<Vec<f32>> = (0..50).map(voice).collect();
    let silence = vec![0.0f32; FRAME];
    // Allocations on frames that sent no event, and on those that did (and their events).
    let (mut quiet, mut quiet_frames, mut eventful, mut events) = (0u64, 0u64, 0u64, 0u64);
    let (mut played, mut drained) = (Vec::new(), Vec::new());
    for tick in 0..SECS * 50 {
        if tick == WARM_SECS * 50 {
            (quiet, quiet_frames, eventful, events) = (0, 0, 0, 0);
        }
        let now = t0 + Duration::from_millis(20 * tick);
        for (i, c) in calls.iter_mut().enumerate() {
            let mut allocs = 0;
            // The caller: 1 s of speech every 3 s (staggered).
            let phase = (tick + i as u64 * 13) % 150;
            let frame = if phase < 50 {
                &speech[phase as usize]
            } else {
                &silence
            };
            let pcm = duet::session::Pcm::from(frame.clone());
            allocs += counted(|| c.session.handle(SessionInput::Media(pcm), now));
            // The model loop: requests, then one step on the queued frame.
            let (requests, frame) = {
                let mut p = c.port.lock().unwrap();
                (std::mem::take(&mut p.requests), p.frames.pop_front())
            };
            for (epoch, r) in requests {
                c.epoch = epoch;
                model.request(c.slot, r).expect("request");
            }
            let pcm = frame.unwrap_or_else(|| silence.clone());
            let mut outs = Vec::new();
            model.step(
                &[StepInput {
                    slot: c.slot,
                    pcm: &pcm,
                }],
                &mut outs,
            );
            c.port.lock().unwrap().spare.push(pcm);
            for out in outs.into_iter().flatten() {
                if out.audio.is_empty() && out.text.is_empty() && !out.end_of_turn {
                    continue;
                }
                let ev = ModelEvent::Output {
                    epoch: c.epoch,
                    output: out,
                };
                allocs += counted(|| c.session.on_model(ev, now));
            }
            // The engine: a frame of what was queued left; finished answers drained.
            {
                let mut e = c.engine.lock().unwrap();
                let mut left = FRAME;
                played.clear();
                drained.clear();
                while left > 0 {
                    let Some((tag, n)) = e.queued.front_mut() else {
                        break;
                    };
                    let take = (*n).min(left);
                    played.push((*tag, take as u64));
                    *n -= take;
                    left -= take;
                    if *n == 0 {
                        e.queued.pop_front();
                    }
                }
                if e.queued.is_empty() {
                    drained.append(&mut e.finished);
                }
                c.signals.played(&played, &drained);
            }
            c.signals.take_into(&mut c.report);
            let report = &c.report;
            let session = &mut c.session;
            allocs += counted(|| session.on_media(report, now));
            if c.session.next_deadline() <= now {
                allocs += counted(|| c.session.on_timeout(now));
            }
            let mut sent = 0;
            while let Received::Delivery(_) = c.out.try_recv() {
                sent += 1;
            }
            if sent == 0 {
                quiet += allocs;
                quiet_frames += 1;
            } else {
                eventful += allocs;
                events += sent;
            }
        }
    }
    let call_secs = (SESSIONS as u64 * (SECS - WARM_SECS)) as f64;
    println!(
        "session, {SESSIONS} WebRTC sessions × {SECS} s (first {WARM_SECS} s warm-up): {:.3} allocations per call-second on the {quiet_frames} frames that sent no event ({quiet} in all); {:.1} per call-second on the frames that sent events ({events} events, {:.1} allocations per event)",
        quiet as f64 / call_secs,
        eventful as f64 / call_secs,
        eventful as f64 / events.max(1) as f64,
    );
}
