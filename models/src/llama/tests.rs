use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use candle::quantized::gguf_file;
use candle::{Device, Tensor};
use serde_json::json;

use super::*;
use crate::ToolChoice;

const ARCHS: [Arch; 3] = [Arch::Llama, Arch::Qwen2, Arch::Qwen3];

/// The embedded LLM run the way the server's driver runs it: the engine on one thread, the
/// prompt side on [`PREP_THREADS`] others (threads of this test, not of the crate).
fn start_llm(loaded: LoadedLlama, options: LlamaOptions) -> EmbeddedLlm {
    let (llm, mut engine, prep) = EmbeddedLlm::new(loaded, options);
    std::thread::spawn(move || {
        while engine.receive() {
            engine.step();
        }
    });
    for _ in 0..PREP_THREADS {
        let prep = prep.clone();
        std::thread::spawn(move || while prep.render_next() {});
    }
    llm
}

fn load(format: WeightFormat) -> (tempfile::TempDir, LoadedLlama) {
    load_arch(format, Arch::Llama)
}

/// A tiny model of `arch` (Qwen3's heads do not tile its embedding).
fn load_arch(format: WeightFormat, arch: Arch) -> (tempfile::TempDir, LoadedLlama) {
    let dir = tempfile::tempdir().unwrap();
    random::write_random_gguf(dir.path(), &random::RandomShape::tiny_of(arch), 7).unwrap();
    let llm = LoadedLlama::load(dir.path(), format, &Device::Cpu).unwrap();
    (dir, llm)
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

fn prompt(n: usize) -> Vec<u32> {
    (0..n as u32).map(|i| 3 + (i * 37) % 250).collect()
}

#[test]
fn a_prompt_run_in_pieces_gives_the_logits_of_one_pass() {
    for (arch, format) in ARCHS
        .iter()
        .flat_map(|&a| [(a, WeightFormat::Quantized), (a, WeightFormat::F16)])
    {
        let (_dir, llm) = load_arch(format, arch);
        let tokens = prompt(45);
        let mut whole = KvCache::default();
        let all = llm.model.forward(&tokens, &mut whole).unwrap();
        let mut pieces = KvCache::default();
        llm.model.forward(&tokens[..17], &mut pieces).unwrap();
        llm.model.forward(&tokens[17..40], &mut pieces).unwrap();
        let mut last = None;
        for t in &tokens[40..] {
            last = Some(llm.model.forward(&[*t], &mut pieces).unwrap());
        }
        assert_eq!(pieces.len(), 45);
        let d = max_diff(&all, &last.unwrap());
        // f16 matmuls round differently with fewer rows (one f16 ulp of the logits).
        let tolerance = if format == WeightFormat::F16 {
            1e-2
        } else {
            1e-3
        };
        assert!(d < tolerance, "{arch:?} {format:?}: logits differ by {d}");
        // A prefix copy continues exactly as the original would.
        let mut copy = whole.prefix(30).unwrap();
        let again = llm.model.forward(&tokens[30..], &mut copy).unwrap();
        assert!(max_diff(&all, &again) < 1e-3);
        assert_eq!(
            whole.len(),
            45,
            "copying a prefix leaves the original alone"
        );
    }
}

#[test]
fn conversations_run_together_give_the_logits_they_give_alone() {
    for (arch, format) in ARCHS
        .iter()
        .flat_map(|&a| [(a, WeightFormat::Quantized), (a, WeightFormat::F16)])
    {
        let (_dir, llm) = load_arch(format, arch);
        let m = &llm.model;
        // Three conversations at different lengths: one prefilling, two decoding.
        let (a, b, c) = (prompt(9), prompt(20), prompt(33));
        let (mut ca, mut cb, mut cc) = (KvCache::default(), KvCache::default(), KvCache::default());
        m.forward(&b[..19], &mut cb).unwrap();
        m.forward(&c[..32], &mut cc).unwrap();
        let alone: Vec<Tensor> = {
            let (mut xa, mut xb, mut xc) = (
                ca.prefix(0).unwrap(),
                cb.prefix(19).unwrap(),
                cc.prefix(32).unwrap(),
            );
            vec![
                m.forward(&a, &mut xa).unwrap(),
                m.forward(&b[19..], &mut xb).unwrap(),
                m.forward(&c[32..], &mut xc).unwrap(),
            ]
        };
        let together = m
            .forward_many(&mut [(&a[..], &mut ca), (&b[19..], &mut cb), (&c[32..], &mut cc)])
            .unwrap();
        assert_eq!((ca.len(), cb.len(), cc.len()), (9, 20, 33));
        // f16 matmuls round differently with more rows (one f16 ulp of the logits).
        let tolerance = if format == WeightFormat::F16 {
            1e-2
        } else {
            1e-3
        };
        for (x, y) in alone.iter().zip(&together) {
            let d = max_diff(x, y);
            assert!(d < tolerance, "{arch:?} {format:?}: differs by {d}");
        }
    }
}

/// The logits of 20 prompt tokens and then of 3 more one at a time: ours against
/// `reference`, which runs a GGUF file with its own KV cache.
fn matches_candle(arch: Arch, mut reference: impl FnMut(&Tensor, usize) -> Tensor) {
    let (_d, ours) = load_arch(WeightFormat::Quantized, arch);
    let tokens = prompt(23);
    let mut cache = KvCache::default();
    let input = |t: &[u32]| Tensor::new(t, &Device::Cpu).unwrap().unsqueeze(0).unwrap();
    let mut steps = vec![(0, 20)];
    steps.extend((20..23).map(|i| (i, i + 1)));
    for (from, to) in steps {
        let expected = reference(&input(&tokens[from..to]), from)
            .flatten_all()
            .unwrap();
        let got = ours.model.forward(&tokens[from..to], &mut cache).unwrap();
        let d = max_diff(&expected, &got);
        assert!(
            d < 1e-3,
            "{arch:?}: differs from candle's model by {d} at {from}..{to}"
        );
    }
}

/// The file [`load_arch`] writes for `arch`, as candle reads it.
fn candle_content(arch: Arch) -> (tempfile::TempDir, std::fs::File, gguf_file::Content) {
    let dir = tempfile::tempdir().unwrap();
    random::write_random_gguf(dir.path(), &random::RandomShape::tiny_of(arch), 7).unwrap();
    let mut f = std::fs::File::open(dir.path().join("random.gguf")).unwrap();
    let content = gguf_file::Content::read(&mut f).unwrap();
    (dir, f, content)
}

#[test]
fn the_logits_match_candles_own_quantized_llama() {
    let (_dir, mut f, content) = candle_content(Arch::Llama);
    let mut theirs = candle_transformers::models::quantized_llama::ModelWeights::from_gguf(
        content,
        &mut f,
        &Device::Cpu,
    )
    .unwrap();
    matches_candle(Arch::Llama, |x, at| theirs.forward(x, at).unwrap());
}

#[test]
fn the_logits_match_candles_own_quantized_qwen2() {
    let (_dir, mut f, content) = candle_content(Arch::Qwen2);
    let mut theirs = candle_transformers::models::quantized_qwen2::ModelWeights::from_gguf(
        content,
        &mut f,
        &Device::Cpu,
    )
    .unwrap();
    matches_candle(Arch::Qwen2, |x, at| theirs.forward(x, at).unwrap());
}

#[test]
fn the_logits_match_candles_own_quantized_qwen3() {
    let (_dir, mut f, mut content) = candle_content(Arch::Qwen3);
    // candle's Qwen3 keeps its rope tables in f16 unless the file says f32 (0).
    content
        .metadata
        .insert("general.dtype".into(), gguf_file::Value::U32(0));
    let mut theirs = candle_transformers::models::quantized_qwen3::ModelWeights::from_gguf(
        content,
        &mut f,
        &Device::Cpu,
    )
    .unwrap();
    matches_candle(Arch::Qwen3, |x, at| theirs.forward(x, at).unwrap());
}

#[test]
fn qwen_prompts_spell_tags_as_their_tokens_and_qwen3_answers_without_thinking() {
    let tool = crate::Tool {
        name: "get_time".into(),
        description: "now".into(),
        parameters: r#"{"type":"object","properties":{"tz":{"type":"string"}}}"#.into(),
    };
    let conversation = msgs(vec![
        json!({"role": "user", "content": "What time is it in Paris?"}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "get_time", "arguments": "{\"tz\":\"Europe/Paris\"}"}}]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "12:00"}),
    ]);
    for arch in [Arch::Qwen2, Arch::Qwen3] {
        let (_dir, llm) = load_arch(WeightFormat::F16, arch);
        let t = &llm.tokenizer;
        assert_eq!(
            t.pre_tokenizer(),
            tokenizer::PreTokenizer::Qwen2,
            "{arch:?}: tokenizer.ggml.pre"
        );
        let open = t.encode("<tool_call>");
        assert_eq!(open.len(), 1, "{arch:?}: <tool_call> is one token");
        let p = llm
            .template
            .render(
                t,
                &conversation,
                std::slice::from_ref(&tool),
                &ToolChoice::Auto,
                2048,
            )
            .unwrap();
        // The tools block, the earlier call and the result, each tag one token.
        let count = |id: u32| p.tokens.iter().filter(|&&x| x == id).count();
        assert_eq!(
            count(open[0]),
            3,
            "{arch:?}: in the tools block's instructions and the call"
        );
        let text = t.decode(&p.tokens);
        assert!(
            text.contains("<tool_call>\n{\"arguments\":{\"tz\":\"Europe/Paris\"},\"name\":\"get_time\"}\n</tool_call>"),
            "{text}"
        );
        assert!(
            text.contains("user\n<tool_response>\n12:00\n</tool_response>"),
            "{text}"
        );
        // What the model writes back in the same format comes out as the same call.
        let mut parser = ToolCallParser::new("q".into());
        let mut events = Vec::new();
        let mut stream = tokenizer::TextStream::default();
        let written = t.encode("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"Europe/Paris\"}}\n</tool_call>");
        for id in written {
            parser.push(&stream.push(t, id), &mut events).unwrap();
        }
        parser.finish(&mut events).unwrap();
        assert!(
            matches!(&events[..], [LlmEvent::ToolCall(c)] if c.name == "get_time" && c.arguments == r#"{"tz":"Europe/Paris"}"#),
            "{arch:?}: {events:?}"
        );
        let thinking_off = text.ends_with("assistant\n<think>\n\n</think>\n\n");
        assert_eq!(thinking_off, arch == Arch::Qwen3, "{arch:?}: {text:?}");
    }
}

fn collect(stream: &mut Box<dyn LlmStream>) -> Vec<LlmEvent> {
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        stream.poll(&mut out);
        if matches!(out.last(), Some(LlmEvent::Done | LlmEvent::Failed(_))) {
            return out;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    panic!("no end: {out:?}");
}

/// Chat messages written as JSON.
fn msgs(messages: Vec<serde_json::Value>) -> Vec<duet_protocol::chat::ChatMessage> {
    serde_json::from_value(serde_json::Value::Array(messages)).expect("chat messages")
}

fn request(messages: Vec<serde_json::Value>, max_tokens: u32) -> ChatRequest {
    ChatRequest {
        messages: msgs(messages),
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens: Some(max_tokens),
        temperature: None,
    }
}

fn usage(events: &[LlmEvent]) -> (usize, usize) {
    events
        .iter()
        .find_map(|e| match e {
            LlmEvent::Usage {
                prompt_tokens,
                completion_tokens,
                ..
            } => Some((*prompt_tokens, *completion_tokens)),
            _ => None,
        })
        .expect("a usage event")
}

fn cached(events: &[LlmEvent]) -> usize {
    events
        .iter()
        .find_map(|e| match e {
            LlmEvent::Usage { cached_tokens, .. } => Some(*cached_tokens),
            _ => None,
        })
        .unwrap()
}

fn answer_text(events: &[LlmEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            LlmEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_next_turn_prefills_only_what_is_new() {
    for arch in ARCHS {
        next_turn_prefills_only_what_is_new(arch);
    }
}

fn next_turn_prefills_only_what_is_new(arch: Arch) {
    let (_dir, llm) = load_arch(WeightFormat::F16, arch);
    // Qwen3's answer opens with an empty <think> block that its template leaves out of the
    // history (as Qwen's own template does): the cache is reused up to it.
    let unthought = match arch {
        Arch::Qwen3 => llm.tokenizer.encode("<think>\n\n</think>\n\n").len(),
        Arch::Llama | Arch::Qwen2 => 0,
    };
    let engine = start_llm(llm, LlamaOptions::default());
    let first = vec![json!({"role": "user", "content": "hello world"})];
    let events = collect(&mut engine.start(request(first.clone(), 6)));
    assert!(matches!(events.last(), Some(LlmEvent::Done)), "{events:?}");
    let (prompt_tokens, completion) = usage(&events);
    assert!(completion <= 6);
    assert_eq!(cached(&events), 0);
    // The same conversation one turn on: the first turn's prompt is reused from the cache.
    let mut next = first;
    next.push(json!({"role": "assistant", "content": answer_text(&events)}));
    next.push(json!({"role": "user", "content": "and again"}));
    let events = collect(&mut engine.start(request(next, 4)));
    let reused = cached(&events);
    assert!(
        reused >= prompt_tokens - unthought,
        "{arch:?}: reused {reused} of the first turn's {prompt_tokens} prompt tokens"
    );
    assert!(usage(&events).0 > reused);
}

#[test]
fn a_dropped_stream_stops_its_answer_and_others_go_on() {
    let (_dir, llm) = load(WeightFormat::F16);
    let engine = start_llm(llm, LlamaOptions::default());
    let long = engine.start(request(
        vec![json!({"role": "user", "content": "hello"})],
        200,
    ));
    drop(long);
    let events = collect(&mut engine.start(request(
        vec![json!({"role": "user", "content": "hello"})],
        3,
    )));
    assert!(matches!(events.last(), Some(LlmEvent::Done)));
    assert!(usage(&events).1 <= 3);
}

#[test]
fn a_conversation_too_long_for_the_context_drops_its_oldest_turns() {
    let (_dir, llm) = load(WeightFormat::F16);
    let engine = start_llm(llm, LlamaOptions::default());
    let mut messages = vec![json!({"role": "system", "content": "Be brief."})];
    for i in 0..40 {
        messages.push(json!({"role": "user", "content": format!("message number {i} is here")}));
    }
    let events = collect(&mut engine.start(request(messages, 8)));
    assert!(matches!(events.last(), Some(LlmEvent::Done)), "{events:?}");
    let (prompt_tokens, _) = usage(&events);
    assert!(prompt_tokens <= 512 - 8, "{prompt_tokens}");
    // One message alone longer than the context fails clearly.
    let huge = "x ".repeat(600);
    let events =
        collect(&mut engine.start(request(vec![json!({"role": "system", "content": huge})], 8)));
    assert!(
        matches!(events.last(), Some(LlmEvent::Failed(f)) if f.code == CONTEXT_LENGTH_EXCEEDED && f.message.contains("tokens")),
        "{events:?}"
    );
}

#[test]
fn the_template_keeps_the_models_default_system_message() {
    let (_dir, llm) = load(WeightFormat::F16);
    let p = llm
        .template
        .render(
            &llm.tokenizer,
            &msgs(vec![json!({"role": "user", "content": "hi"})]),
            &[],
            &ToolChoice::Auto,
            512,
        )
        .unwrap();
    let text = llm.tokenizer.decode(&p.tokens);
    assert_eq!(text, "system\nYou are tiny.\nuser\nhi\nassistant\n");
    // Forcing a named tool opens its call in the answer.
    let tool = crate::Tool {
        name: "get_time".into(),
        description: "now".into(),
        parameters: "{}".into(),
    };
    let p = llm
        .template
        .render(
            &llm.tokenizer,
            &msgs(vec![json!({"role": "user", "content": "hi"})]),
            &[tool],
            &ToolChoice::Function("get_time".into()),
            4096,
        )
        .unwrap();
    assert_eq!(
        p.answer_prefix,
        "<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
    );
    assert!(llm.tokenizer.decode(&p.tokens).contains("<tools>"));
}

#[test]
fn answers_beyond_the_running_cap_wait_their_turn() {
    let (_dir, llm) = load(WeightFormat::F16);
    let options = LlamaOptions {
        max_running: 1,
        ..LlamaOptions::default()
    };
    let engine = start_llm(llm, options);
    let ask = |text: &str, n| request(vec![json!({"role": "user", "content": text})], n);
    let mut first = engine.start(ask("hello", 50));
    let mut second = engine.start(ask("world", 4));
    assert!(matches!(collect(&mut first).last(), Some(LlmEvent::Done)));
    assert!(matches!(collect(&mut second).last(), Some(LlmEvent::Done)));
    assert_eq!(engine.stats().answers.load(Ordering::Relaxed), 2);
}

#[test]
fn a_last_message_longer_than_the_context_fails_and_is_never_dropped() {
    let (_dir, llm) = load(WeightFormat::F16);
    let engine = start_llm(llm, LlamaOptions::default());
    // One user message of 6 000 letters: it was left out and the answer was to nothing.
    let huge = "abcdefghij".repeat(600);
    let alone = vec![json!({"role": "user", "content": huge.clone()})];
    let events = collect(&mut engine.start(request(alone, 8)));
    assert!(
        matches!(events.last(), Some(LlmEvent::Failed(f)) if f.code == CONTEXT_LENGTH_EXCEEDED && f.message.contains("the last message")),
        "{events:?}"
    );
    // After a history: still an error, not an answer to the history.
    let after = vec![
        json!({"role": "user", "content": "hello"}),
        json!({"role": "assistant", "content": "hi"}),
        json!({"role": "user", "content": huge.clone()}),
    ];
    let events = collect(&mut engine.start(request(after, 8)));
    assert!(
        matches!(events.last(), Some(LlmEvent::Failed(f)) if f.code == CONTEXT_LENGTH_EXCEEDED),
        "{events:?}"
    );
    // A huge old message is what gets left out.
    let before = vec![
        json!({"role": "user", "content": huge}),
        json!({"role": "assistant", "content": "hi"}),
        json!({"role": "user", "content": "hello"}),
    ];
    let events = collect(&mut engine.start(request(before, 8)));
    assert!(matches!(events.last(), Some(LlmEvent::Done)), "{events:?}");
    assert!(usage(&events).0 < 100, "{:?}", usage(&events));
}

#[test]
fn the_template_does_not_tokenize_what_cannot_fit() {
    let (_dir, llm) = load(WeightFormat::F16);
    // 15 MiB in one message: refused from its length, and the older messages are never read.
    let huge = "q".repeat(15 << 20);
    let messages = msgs(vec![
        json!({"role": "system", "content": "Be brief."}),
        json!({"role": "user", "content": "hello"}),
        json!({"role": "user", "content": huge}),
    ]);
    let started = Instant::now();
    let err = llm
        .template
        .render(&llm.tokenizer, &messages, &[], &ToolChoice::Auto, 500)
        .unwrap_err();
    assert!(err.contains("at least"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// Polls every stream until all ended; the order in which they ended (by index).
fn finish_order(streams: &mut [Box<dyn LlmStream>]) -> (Vec<usize>, Vec<Vec<LlmEvent>>) {
    let mut events: Vec<Vec<LlmEvent>> = streams.iter().map(|_| Vec::new()).collect();
    let mut order = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while order.len() < streams.len() && Instant::now() < deadline {
        for (i, s) in streams.iter_mut().enumerate() {
            if order.contains(&i) {
                continue;
            }
            s.poll(&mut events[i]);
            if matches!(events[i].last(), Some(LlmEvent::Done | LlmEvent::Failed(_))) {
                order.push(i);
            }
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(order.len(), streams.len(), "not all ended: {order:?}");
    (order, events)
}

#[test]
fn a_voice_answer_goes_ahead_of_waiting_completions() {
    let (_dir, llm) = load(WeightFormat::F16);
    let options = LlamaOptions {
        max_running: 2,
        ..LlamaOptions::default()
    };
    let engine = start_llm(llm, options);
    let ask = |n| request(vec![json!({"role": "user", "content": "hello there"})], n);
    let mut streams: Vec<Box<dyn LlmStream>> = (0..12)
        .map(|_| engine.submit(ask(40), Priority::Batch).unwrap())
        .collect();
    let asked = Instant::now();
    streams.push(engine.start(ask(3))); // the cascade's: a voice answer
    let (order, events) = finish_order(&mut streams);
    let voice = order.iter().position(|&i| i == 12).unwrap();
    println!(
        "voice answer finished {} of 13 ({} ms after it was asked)",
        voice + 1,
        asked.elapsed().as_millis()
    );
    assert!(
        matches!(events[12].last(), Some(LlmEvent::Done)),
        "{:?}",
        events[12]
    );
    // Two places: batch answers take one, so the voice answer starts at once and ends
    // before all but the first completions.
    assert!(
        voice <= 2,
        "the voice answer ended {}th: {order:?}",
        voice + 1
    );
}

#[test]
fn the_wait_queue_is_bounded_and_has_a_deadline() {
    let (_dir, llm) = load(WeightFormat::F16);
    let options = LlamaOptions {
        max_running: 1,
        max_waiting: 3,
        max_wait: Duration::from_millis(150),
        // A clock 50 times as fast as the wall's: the 150 ms wait is 3 ms of real time,
        // shorter than any answer takes, however fast tiny weights answer.
        clock: Some(Clock(Arc::new(move || {
            static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            let start = *START.get_or_init(Instant::now);
            start + start.elapsed() * 50
        }))),
        ..LlamaOptions::default()
    };
    let engine = start_llm(llm, options);
    let long = "hello there, how are you ".repeat(8);
    let ask = |n| request(vec![json!({"role": "user", "content": long.clone()})], n);
    // Submitted at once (tiny weights answer in milliseconds, so a pause between them would
    // let the queue drain): at most one runs, three wait, the rest are refused at once.
    let mut streams: Vec<Box<dyn LlmStream>> = Vec::new();
    let mut refused = 0;
    for _ in 0..5 {
        match engine.submit(ask(250), Priority::Batch) {
            Ok(s) => streams.push(s),
            Err(QueueFull(m)) => {
                assert!(m.contains("waiting"), "{m}");
                refused += 1;
            }
        }
    }
    assert!(refused >= 1, "nothing refused");
    // A voice answer is not refused for the completions that fill the queue.
    let started = Instant::now();
    streams.push(engine.start(ask(2)));
    let (_, events) = finish_order(&mut streams);
    let codes: Vec<String> = events
        .iter()
        .map(|e| match e.last() {
            Some(LlmEvent::Failed(f)) => f.code.clone(),
            Some(LlmEvent::Done) => "done".into(),
            other => format!("{other:?}"),
        })
        .collect();
    println!("{codes:?} after {} ms", started.elapsed().as_millis());
    assert!(
        codes.iter().any(|c| c == LLM_QUEUE_TIMEOUT),
        "no answer hit the wait deadline: {codes:?}"
    );
    assert!(!codes.iter().any(|c| c == LLM_QUEUE_FULL), "{codes:?}");
    assert_eq!(engine.waiting(), 0);
    let stats = engine.stats();
    assert_eq!(stats.waiting.load(Ordering::Relaxed), 0);
    assert!(stats.queue_full.load(Ordering::Relaxed) >= 1);
    assert!(stats.queue_timeouts.load(Ordering::Relaxed) >= 1);
}
