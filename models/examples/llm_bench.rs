//! The embedded LLM's speed on this machine: prefill and decode tokens per second of
//! SmolLM2-135M-Instruct (the GGUF of `scripts/install-models DIR`), with its weights as
//! shipped (Q4_1, Q8_0 embeddings) and dequantized to f16, and the time to the first token of
//! a voice turn (the next turn of a conversation, its earlier turns in the kept KV cache).
//! Build it with and without `-C target-cpu` to see what the CPU's instructions are worth:
//!
//! ```text
//! cargo run --release -p duet-models --example llm_bench -- DIR [--rounds 3]
//! RUSTFLAGS="-C target-cpu=x86-64-v3" CARGO_TARGET_DIR=target/v3 \
//!     cargo run --release -p duet-models --example llm_bench -- DIR
//! ```
//!
//! `--random-full-size` runs a random model of SmolLM2-135M's exact shape and format instead
//! of DIR's (speeds only: the output is noise), and `--device cuda:0` runs it on a GPU (a build
//! with `--features cuda`; `scripts/gpu-bench.sh`). `--random-arch qwen2|qwen3` runs that
//! random model as a Qwen2 (q/k/v biases) or a Qwen3 (q/k norms) of the same shape: what the
//! Qwen paths cost against the Llama one; `--random-qwen2.5-0.5b` a random model of
//! Qwen2.5-0.5B-Instruct's shape (Q8_0, a vocabulary of 151,936): what a real one would
//! cost here.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use duet_models::cascade::{ChatRequest, Llm, LlmEvent};
use duet_models::llama::{
    random::RandomShape, Arch, EmbeddedLlm, KvCache, LlamaOptions, LoadedLlama, WeightFormat,
    PREP_THREADS,
};
use duet_models::ToolChoice;
use serde_json::json;

const PROMPT: &str = "The lighthouse keeper lived alone on a rock far out at sea. Every night \
he climbed the stairs, trimmed the wick and lit the lamp, and every morning he wrote in his \
log what ships had passed. One winter a storm came that lasted nine days.";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Prefill of `prompt` from an empty cache, then `decode` greedy tokens one at a time:
/// tokens per second of each.
fn speeds(llm: &LoadedLlama, prompt: &[u32], decode: usize) -> (f64, f64) {
    let mut cache = KvCache::default();
    let t = Instant::now();
    let mut logits = llm.model.forward(prompt, &mut cache).expect("prefill");
    let prefill = prompt.len() as f64 / t.elapsed().as_secs_f64();
    let t = Instant::now();
    for _ in 0..decode {
        let next = logits.argmax(0).unwrap().to_scalar::<u32>().unwrap();
        logits = llm.model.forward(&[next], &mut cache).expect("decode");
    }
    (prefill, decode as f64 / t.elapsed().as_secs_f64())
}

/// `n` conversations decoding together, a token each per pass (`forward_many`): tokens per
/// second over all of them.
fn batched_decode(llm: &LoadedLlama, prompt: &[u32], n: usize, steps: usize) -> f64 {
    let mut caches: Vec<KvCache> = (0..n).map(|_| KvCache::default()).collect();
    for c in &mut caches {
        llm.model.forward(prompt, c).expect("prefill");
    }
    let t = Instant::now();
    for step in 0..steps {
        let token = [prompt[step % prompt.len()]];
        let mut seqs: Vec<(&[u32], &mut KvCache)> =
            caches.iter_mut().map(|c| (&token[..], c)).collect();
        llm.model.forward_many(&mut seqs).expect("decode");
    }
    (n * steps) as f64 / t.elapsed().as_secs_f64()
}

/// Time to the first token of the answer to `messages`.
fn first_token(llm: &EmbeddedLlm, messages: Vec<serde_json::Value>) -> (Duration, usize, String) {
    let t = Instant::now();
    let mut stream = llm.start(ChatRequest {
        messages: serde_json::from_value(serde_json::Value::Array(messages))
            .expect("chat messages"),
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        max_tokens: Some(24),
        temperature: None,
    });
    let (mut first, mut cached, mut text) = (None, 0, String::new());
    let mut events = Vec::new();
    loop {
        stream.poll(&mut events);
        for ev in events.drain(..) {
            match ev {
                LlmEvent::Text(s) => {
                    first.get_or_insert_with(|| t.elapsed());
                    text.push_str(&s);
                }
                LlmEvent::Usage { cached_tokens, .. } => cached = cached_tokens,
                LlmEvent::Done => return (first.unwrap_or_default(), cached, text),
                LlmEvent::Failed(f) => panic!("{f:?}"),
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

const USAGE: &str = "usage: llm_bench (DIR | --random-full-size | --random-arch llama|qwen2|qwen3 \
     | --random-qwen2.5-0.5b) [--rounds N] [--device cpu|cuda:N]";

fn main() {
    let (mut dir, mut rounds, mut device) = (None, 3usize, "cpu".to_string());
    let mut random = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--rounds" => rounds = args.next().and_then(|n| n.parse().ok()).expect(USAGE),
            "--device" => device = args.next().expect(USAGE),
            "--random-full-size" => {
                random = Some((RandomShape::smollm2_135m(), "SmolLM2-135M-Instruct"))
            }
            "--random-arch" => {
                let arch = args.next().as_deref().and_then(Arch::named).expect(USAGE);
                let shape = RandomShape {
                    arch,
                    ..RandomShape::smollm2_135m()
                };
                random = Some((shape, "SmolLM2-135M-Instruct"));
            }
            "--random-qwen2.5-0.5b" => {
                random = Some((RandomShape::qwen2_5_0_5b(), "Qwen2.5-0.5B-Instruct"))
            }
            other => dir = Some(PathBuf::from(other).join("smollm2-135m-instruct")),
        }
    }
    let random = random.map(|(shape, name)| {
        let tmp = std::env::temp_dir().join(format!("duet-llm-bench-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).expect("temp dir");
        duet_models::llama::random::write_random_gguf(&tmp, &shape, 1).expect("random GGUF");
        (tmp, shape.arch, name)
    });
    let dir = random
        .as_ref()
        .map(|(tmp, _, _)| tmp.clone())
        .or(dir)
        .expect(USAGE);
    let device = duet_models::moshi::DeviceSpec::parse(&device)
        .expect(USAGE)
        .open()
        .expect("device");
    println!(
        "{} on {device:?}, {} threads; target features: avx2 {}, fma {}, f16c {}",
        match &random {
            Some((_, arch, name)) => format!("random {} of the shape of {name}", arch.name()),
            None => "SmolLM2-135M-Instruct".into(),
        },
        candle::utils::get_num_threads(),
        cfg!(target_feature = "avx2"),
        cfg!(target_feature = "fma"),
        cfg!(target_feature = "f16c"),
    );
    println!();
    println!("| weights | load ms | prefill tok/s (prompt of N) | decode tok/s (64 tokens) |");
    println!("|---|---|---|---|");
    for format in [WeightFormat::Quantized, WeightFormat::F16] {
        let t = Instant::now();
        let llm = LoadedLlama::load(&dir, format, &device).expect("load");
        let load = t.elapsed().as_secs_f64() * 1e3;
        let prompt = llm.tokenizer.encode(PROMPT);
        speeds(&llm, &prompt, 4); // warm-up
        let (mut p, mut d) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            let (pf, dc) = speeds(&llm, &prompt, 64);
            p.push(pf);
            d.push(dc);
        }
        println!(
            "| {format:?} | {load:.0} | {:.0} (N = {}) | {:.1} |",
            median(p),
            prompt.len(),
            median(d)
        );
    }

    let llm = LoadedLlama::load(&dir, WeightFormat::F16, &device).expect("load");
    let prompt = llm.tokenizer.encode(PROMPT);
    println!();
    println!("| conversations decoding together (f16) | tokens/s over all | per conversation |");
    println!("|---|---|---|");
    for n in [1, 2, 4, 8] {
        let total = median(
            (0..rounds)
                .map(|_| batched_decode(&llm, &prompt, n, 32))
                .collect(),
        );
        println!("| {n} | {total:.0} | {:.1} |", total / n as f64);
    }
    drop(llm);

    if let Some((tmp, _, _)) = random {
        let _ = std::fs::remove_dir_all(tmp);
        return; // noise has no turns worth timing
    }
    // A voice conversation's turns: the first from nothing, the next ones on the kept cache.
    let loaded = LoadedLlama::load(&dir, WeightFormat::F16, &device).expect("load");
    let llm = start_llm(loaded, LlamaOptions::default());
    let mut messages = vec![json!({"role": "system",
        "content": "You are a helpful voice assistant. Keep your answers short."})];
    println!();
    println!("| turn (f16) | first token ms | prompt tokens from the kept cache |");
    println!("|---|---|---|");
    for (i, q) in [
        "What is the capital of France?",
        "And what is it famous for?",
        "How tall is the Eiffel Tower?",
        "Thank you. What should I visit first?",
    ]
    .iter()
    .enumerate()
    {
        messages.push(json!({"role": "user", "content": q}));
        let (first, cached, text) = first_token(&llm, messages.clone());
        println!(
            "| {} | {:.0} | {cached} |",
            i + 1,
            first.as_secs_f64() * 1e3
        );
        messages.push(json!({"role": "assistant", "content": text}));
    }
}

/// The embedded LLM run the way the server's driver runs it: the engine on one thread, the
/// prompt side on [`PREP_THREADS`] others (threads of this benchmark, not of the crate).
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
