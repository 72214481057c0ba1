use super::*;
use crate::{ContextItem, TurnInput};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// An LLM whose answers are scripted: each `start` takes the next script; its events
/// arrive one per poll. Records the requests and counts the streams dropped.
#[derive(Clone, Default)]
struct ScriptedLlm {
    scripts: Arc<Mutex<VecDeque<Vec<LlmEvent>>>>,
    requests: Arc<Mutex<Vec<ChatRequest>>>,
    dropped: Arc<AtomicUsize>,
}

struct ScriptedStream(VecDeque<LlmEvent>, Arc<AtomicUsize>);

impl Drop for ScriptedStream {
    fn drop(&mut self) {
        self.1.fetch_add(1, Ordering::SeqCst);
    }
}

impl LlmStream for ScriptedStream {
    fn poll(&mut self, out: &mut Vec<LlmEvent>) {
        out.extend(self.0.pop_front());
    }

    fn wake_on(&mut self, waker: &std::task::Waker) {
        waker.wake_by_ref(); // its events are all there
    }
}

impl Llm for ScriptedLlm {
    fn start(&self, request: ChatRequest) -> Box<dyn LlmStream> {
        self.requests.lock().unwrap().push(request);
        let script = self.scripts.lock().unwrap().pop_front().unwrap_or_default();
        Box::new(ScriptedStream(script.into(), self.dropped.clone()))
    }
}

fn respond(modality: OutputModality) -> Request {
    Request::Respond {
        modality,
        instructions: "Be brief.".into(),
        input: vec![ContextItem::User(TurnInput::Text("time?".into()))],
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        voice: "alloy".into(),
        speed: 1.0,
    }
}

fn steps(m: &mut CascadeModel, slot: SlotId, n: usize) -> Vec<StepOutput> {
    let pcm = vec![0.0; FRAME];
    (0..n)
        .map(|_| {
            let mut out = Vec::new();
            m.step(&[StepInput { slot, pcm: &pcm }], &mut out);
            out.pop().unwrap().unwrap()
        })
        .collect()
}

fn piece(id: &str, name: &str, args: &str) -> LlmEvent {
    LlmEvent::ToolCall(ToolCallDelta {
        call_id: id.into(),
        name: name.into(),
        arguments: args.into(),
    })
}

#[test]
fn an_answer_streams_its_words_then_ends() {
    let llm = ScriptedLlm::default();
    llm.scripts.lock().unwrap().push_back(vec![
        LlmEvent::Text("It is ".into()),
        LlmEvent::Text("ten.".into()),
        LlmEvent::Done,
    ]);
    let mut m = CascadeModel::new(Box::new(llm.clone()), None, 4);
    let slot = m.open_slot().unwrap();
    m.request(slot, respond(OutputModality::Text)).unwrap();
    let out = steps(&mut m, slot, 4);
    let text: String = out.iter().map(|o| o.text.as_str()).collect();
    assert_eq!(text, "It is ten.");
    assert!(out[2].end_of_turn && !out[3].end_of_turn);
    assert!(out.iter().all(|o| o.audio.is_empty() && o.failed.is_none()));
    let req = &llm.requests.lock().unwrap()[0];
    assert_eq!(req.messages[0].content_text(), "Be brief.");
    assert_eq!(req.messages[1].content_text(), "time?");
}

#[test]
fn call_pieces_come_together_and_words_never_share_a_step_with_a_call() {
    let llm = ScriptedLlm::default();
    let mut m = CascadeModel::new(Box::new(llm.clone()), None, 4);
    let slot = m.open_slot().unwrap();
    m.request(slot, respond(OutputModality::Text)).unwrap();
    // Everything arrives before the first step (a fast upstream).
    let events = [
        LlmEvent::Text("One moment.".into()),
        piece("call_a", "get_time", "{\"tz\":"),
        piece("call_a", "", "\"UTC\"}"),
        piece("call_b", "get_date", "{}"),
        LlmEvent::Done,
    ];
    if let Some(Some(a)) = m.slots[slot].as_mut() {
        a.pending.extend(events);
    }
    let out = steps(&mut m, slot, 3);
    assert_eq!(out[0].text, "One moment.");
    assert!(out[0].tool_call.is_none());
    let a = out[1].tool_call.clone().unwrap();
    assert_eq!(
        (a.call_id.as_str(), a.arguments.as_str()),
        ("call_a", "{\"tz\":\"UTC\"}")
    );
    assert!(!out[1].end_of_turn);
    assert_eq!(out[2].tool_call.clone().unwrap().call_id, "call_b");
    assert!(out[2].end_of_turn);
}

#[test]
fn cancel_and_close_drop_the_upstream_answer() {
    let llm = ScriptedLlm::default();
    llm.scripts.lock().unwrap().extend([
        vec![LlmEvent::Text("a".into()); 10],
        vec![LlmEvent::Text("b".into()); 10],
    ]);
    let mut m = CascadeModel::new(Box::new(llm.clone()), None, 4);
    let slot = m.open_slot().unwrap();
    m.request(slot, respond(OutputModality::Text)).unwrap();
    steps(&mut m, slot, 2);
    m.request(slot, Request::Cancel).unwrap();
    assert_eq!(llm.dropped.load(Ordering::SeqCst), 1);
    assert!(steps(&mut m, slot, 2).iter().all(StepOutput::is_empty));
    m.request(slot, respond(OutputModality::Text)).unwrap();
    m.close_slot(slot);
    assert_eq!(llm.dropped.load(Ordering::SeqCst), 2);
}

#[test]
fn failures_end_the_answer_and_audio_is_refused_without_speech_synthesis() {
    let llm = ScriptedLlm::default();
    llm.scripts
        .lock()
        .unwrap()
        .push_back(vec![LlmEvent::Failed(AnswerFailure {
            code: LLM_UNAVAILABLE.into(),
            message: "connection refused".into(),
        })]);
    let mut m = CascadeModel::new(Box::new(llm.clone()), None, 1);
    let slot = m.open_slot().unwrap();
    assert!(matches!(m.open_slot(), Err(ModelError::SlotsExhausted(1))));
    m.request(slot, respond(OutputModality::Text)).unwrap();
    let out = steps(&mut m, slot, 1);
    assert_eq!(out[0].failed.as_ref().unwrap().code, LLM_UNAVAILABLE);
    assert!(out[0].end_of_turn);
    m.request(slot, respond(OutputModality::Audio)).unwrap();
    let out = steps(&mut m, slot, 1);
    assert_eq!(out[0].failed.as_ref().unwrap().code, TTS_UNAVAILABLE);
    assert_eq!(
        llm.requests.lock().unwrap().len(),
        1,
        "no LLM request for audio"
    );
}

/// A voice whose clause audio is 10 samples per character of text.
struct Counting;

impl Speaker for Counting {
    fn speak(&mut self, text: &str, _speed: f32) -> Result<Vec<f32>, ModelError> {
        Ok(vec![0.5; text.len() * 10])
    }
}

/// Steps until the answer ends (or `max` steps), sleeping a little so the speech thread runs.
fn until_end(m: &mut CascadeModel, slot: SlotId, max: usize) -> Vec<StepOutput> {
    let mut outs = Vec::new();
    for _ in 0..max {
        let o = steps(m, slot, 1).pop().unwrap();
        let end = o.end_of_turn;
        outs.push(o);
        if end {
            return outs;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    panic!(
        "no end in {max} steps: {:?}",
        outs.iter()
            .map(|o| (o.audio.len(), o.text.clone()))
            .collect::<Vec<_>>()
    );
}

/// A speech worker whose clauses are spoken on a thread of the test, as the server's driver
/// does.
fn speaking(speaker: impl Speaker + 'static) -> SpeechWorker {
    let (worker, mut synthesis) = SpeechWorker::new(Box::new(speaker));
    std::thread::spawn(move || while synthesis.speak_next() {});
    worker
}

#[test]
fn a_spoken_answer_plays_each_clause_with_its_words() {
    let llm = ScriptedLlm::default();
    llm.scripts.lock().unwrap().push_back(vec![
        LlmEvent::Text("Sure, it is ".into()),
        LlmEvent::Text("ten o'clock. Anything".into()),
        LlmEvent::Text(" else?".into()),
        LlmEvent::Done,
    ]);
    let mut m = CascadeModel::new(Box::new(llm.clone()), Some(speaking(Counting)), 2);
    let slot = m.open_slot().unwrap();
    m.request(slot, respond(OutputModality::Audio)).unwrap();
    let outs = until_end(&mut m, slot, 500);
    let clauses = ["Sure, it is ten o'clock.", "Anything else?"];
    let total: usize = outs.iter().map(|o| o.audio.len()).sum();
    assert_eq!(total, clauses.iter().map(|c| c.len() * 10).sum::<usize>());
    assert!(outs.iter().all(|o| o.audio.len() <= FRAME));
    // Each clause's words go out with its first audio; a clause that ends mid-frame lets
    // the next one fill the frame when it is ready.
    let text: String = outs.iter().map(|o| o.text.as_str()).collect();
    assert_eq!(text, "Sure, it is ten o'clock. Anything else?");
    let first = outs.iter().position(|o| !o.audio.is_empty()).unwrap();
    assert!(
        outs[first].text.starts_with("Sure"),
        "{:?}",
        outs[first].text
    );
    assert!(outs[..first].iter().all(|o| o.text.is_empty()));
}

#[test]
fn a_cancelled_spoken_answer_stops_and_the_next_one_speaks() {
    let llm = ScriptedLlm::default();
    llm.scripts.lock().unwrap().extend([
        vec![
            LlmEvent::Text("A long first answer that goes on. And on. And on.".into()),
            LlmEvent::Done,
        ],
        vec![LlmEvent::Text("Second.".into()), LlmEvent::Done],
    ]);
    let mut m = CascadeModel::new(Box::new(llm.clone()), Some(speaking(Counting)), 2);
    let slot = m.open_slot().unwrap();
    m.request(slot, respond(OutputModality::Audio)).unwrap();
    steps(&mut m, slot, 3);
    m.request(slot, Request::Cancel).unwrap();
    assert!(steps(&mut m, slot, 3).iter().all(StepOutput::is_empty));
    m.request(slot, respond(OutputModality::Audio)).unwrap();
    let outs = until_end(&mut m, slot, 500);
    let text: String = outs.iter().map(|o| o.text.as_str()).collect();
    assert_eq!(text, "Second.", "nothing of the cancelled answer");
    assert_eq!(outs.iter().map(|o| o.audio.len()).sum::<usize>(), 70);
}
