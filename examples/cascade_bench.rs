//! Voice-to-voice latency of the cascade on this machine: a question spoken by espeak-ng is
//! sent in real time (20 ms chunks) to `--model cascade` with the real speech models (Silero
//! VAD, Whisper tiny.en, the Piper voice) and a fast scripted OpenAI-compatible LLM on
//! loopback (its first token at once), over WebSocket; the time from the end of the speech
//! to the first answer audio is measured, and broken down from the events' arrival times.
//! Several sessions at once show where the 2 cores run out. With `--llm embedded` the LLM is
//! the embedded SmolLM2-135M-Instruct instead (answers capped at 40 tokens), so the LLM's
//! own time is in the figures. With `--speech remote` the transcriber and the voice are
//! OpenAI-compatible servers on loopback instead (`--stt-url`, `--tts-url`: scripted, in the
//! shapes of `/v1/audio/transcriptions` and `/v1/audio/speech`, answering at once), so the
//! difference from the embedded figures is what the HTTP hops cost. `--semantic EAGERNESS`
//! runs each session on `semantic_vad` with that eagerness and the Smart Turn model of the
//! models directory (the turn ends when the model is confident, not after a fixed 500 ms).
//!
//! ```sh
//! scripts/install-models /tmp/duet-models
//! cargo run --release --example cascade_bench -- --models /tmp/duet-models --rounds 8 --sessions 1,2,4
//! cargo run --release --example cascade_bench -- --models /tmp/duet-models --llm embedded
//! cargo run --release --example cascade_bench -- --models /tmp/duet-models --speculative-start-ms 0
//! cargo run --release --example cascade_bench -- --models /tmp/duet-models --speech remote
//! cargo run --release --example cascade_bench -- --models /tmp/duet-models --semantic high
//! ```

use std::collections::HashMap;
use std::time::{Duration, Instant};

use base64::Engine;
use clap::Parser;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use duet_client::speech::{espeak, silence};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;

struct Args {
    models: Option<std::path::PathBuf>,
    rounds: usize,
    sessions: Vec<usize>,
    /// `scripted` (a fast scripted LLM on loopback) or `embedded` (SmolLM2 in the server).
    llm: String,
    /// `--speculative-start-ms` of the server (0: off).
    speculative_ms: String,
    /// The transcriber and the voice: `embedded` (Whisper, Piper) or `remote` (scripted
    /// servers on loopback).
    speech: String,
    /// `semantic_vad` with this eagerness and Smart Turn (none: server VAD, 500 ms).
    semantic: Option<String>,
}

fn args() -> anyhow::Result<Args> {
    let mut a = Args {
        models: None,
        rounds: 8,
        sessions: vec![1, 2, 4],
        llm: "scripted".into(),
        speculative_ms: "200".into(),
        speech: "embedded".into(),
        semantic: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))?;
        match flag.as_str() {
            "--models" => a.models = Some(value.into()),
            "--rounds" => a.rounds = value.parse()?,
            "--llm" if value == "scripted" || value == "embedded" => a.llm = value,
            "--speculative-start-ms" => a.speculative_ms = value.parse::<u32>()?.to_string(),
            "--speech" if value == "embedded" || value == "remote" => a.speech = value,
            "--semantic" if ["low", "medium", "high", "auto"].contains(&value.as_str()) => {
                a.semantic = Some(value)
            }
            "--sessions" => {
                a.sessions = value.split(',').map(str::parse).collect::<Result<_, _>>()?
            }
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    Ok(a)
}

/// When each stage was seen in one turn, from the end of the speech.
#[derive(Default)]
struct Turn {
    stages: HashMap<&'static str, Duration>,
}

const STAGES: [(&str, &str); 5] = [
    (
        "input_audio_buffer.speech_stopped",
        "VAD release (incl. the silence window)",
    ),
    (
        "conversation.item.input_audio_transcription.completed",
        "transcript",
    ),
    ("response.created", "response created"),
    (
        "response.output_audio_transcript.delta",
        "first clause's words",
    ),
    ("response.output_audio.delta", "first answer audio"),
];

/// One session's turns: speaks the question `rounds` times, each after the last answer.
async fn session(
    addr: std::net::SocketAddr,
    question: &[f32],
    speech_end: usize,
    rounds: usize,
    semantic: Option<&str>,
) -> anyhow::Result<Vec<Turn>> {
    let url = format!("ws://{addr}/v1/realtime?model=cascade");
    let (ws, _) = tokio_tungstenite::connect_async(url).await?;
    let (mut tx, mut rx) = ws.split();
    if let Some(eagerness) = semantic {
        let update = json!({"type":"session.update","session":{"type":"realtime",
            "audio":{"input":{"turn_detection":{"type":"semantic_vad","eagerness":eagerness}}}}});
        tx.send(Message::Text(update.to_string().into())).await?;
        while let Some(msg) = rx.next().await {
            if let Message::Text(t) = msg? {
                if t.contains("\"session.updated\"") {
                    break;
                }
            }
        }
    }
    let mut turns = Vec::new();
    for _ in 0..rounds {
        let chunks: Vec<String> = question
            .chunks(480)
            .map(|c| {
                let bytes: Vec<u8> = c.iter().flat_map(|&s| ((s * 32767.0) as i16).to_le_bytes()).collect();
                json!({"type":"input_audio_buffer.append","audio":base64::engine::general_purpose::STANDARD.encode(bytes)}).to_string()
            })
            .collect();
        let start = Instant::now();
        let end = start + Duration::from_secs_f64(speech_end as f64 / 24_000.0);
        let writer = async {
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            for c in chunks {
                tick.tick().await;
                tx.send(Message::Text(c.into())).await?;
            }
            anyhow::Ok(())
        };
        let reader = async {
            let mut turn = Turn::default();
            while let Some(msg) = rx.next().await {
                let Message::Text(t) = msg? else { continue };
                let ev: Value = serde_json::from_str(&t)?;
                let kind = ev["type"].as_str().unwrap_or_default().to_string();
                if let Some((k, _)) = STAGES.iter().find(|(k, _)| *k == kind) {
                    turn.stages
                        .entry(k)
                        .or_insert_with(|| Instant::now().saturating_duration_since(end));
                }
                if kind == "response.done" {
                    break;
                }
            }
            anyhow::Ok(turn)
        };
        let (w, turn) = tokio::join!(writer, reader);
        w?;
        turns.push(turn?);
    }
    Ok(turns)
}

fn percentile(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// A cascade server with the real models in `models`, `llm` as its LLM (none: the embedded
/// one), `speech` as its transcriber and voice (none: the embedded ones) and the turn model
/// when `semantic`; ready.
async fn start_server(
    models: &std::path::Path,
    llm: Option<&ScriptedLlm>,
    speech: Option<(&ScriptedLlm, &ScriptedLlm)>,
    (speculative_ms, semantic): (&str, bool),
) -> anyhow::Result<std::net::SocketAddr> {
    let dir = |d: &str| models.join(d).display().to_string();
    let mut argv: Vec<String> = ["serve", "--port", "0", "--model", "cascade"]
        .map(String::from)
        .to_vec();
    argv.extend(["--speculative-start-ms".into(), speculative_ms.into()]);
    match llm {
        Some(llm) => argv.extend(["--llm-url".into(), llm.url.clone()]),
        None => argv.extend([
            "--llm-model-dir".into(),
            dir("smollm2-135m-instruct"),
            "--llm-max-tokens".into(),
            "40".into(),
        ]),
    }
    argv.extend(["--vad-model-dir".into(), dir("silero-vad")]);
    if semantic {
        argv.extend(["--turn-model-dir".into(), dir("smart-turn-v3.2")]);
    }
    match speech {
        Some((stt, tts)) => argv.extend([
            "--stt-url".into(),
            stt.url.clone(),
            "--tts-url".into(),
            tts.url.clone(),
        ]),
        None => argv.extend([
            "--transcription-model-dir".into(),
            dir("whisper-tiny.en"),
            "--tts-model-dir".into(),
            dir("piper-en_US-joe-medium"),
        ]),
    }
    let server = duet::server::start(&duet::config::ServeArgs::parse_from(argv)).await?;
    for _ in 0..500 {
        let ready = duet_client::http::request(server.addr, "GET", "/ready", &[], "").await?;
        if ready.status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(server.addr)
}

/// The question in real-time chunks, and where its voiced speech ends (espeak-ng pads its
/// clips: the end is the last sample above -40 dBFS).
fn question() -> (Vec<f32>, usize) {
    let mut question = silence(0.3);
    let spoken = espeak("What time is it?");
    let voiced = spoken
        .iter()
        .rposition(|s| s.abs() > 0.01)
        .map_or(0, |i| i + 1);
    question.extend(&spoken[..voiced]);
    let speech_end = question.len();
    question.extend(silence(1.5));
    (question, speech_end)
}

/// One table row: each stage's p50 / p99 over `turns`.
fn row(sessions: usize, turns: &[Turn]) -> String {
    let mut out = format!("| {sessions} |");
    for (k, _) in STAGES {
        let mut v: Vec<Duration> = turns
            .iter()
            .filter_map(|t| t.stages.get(k).copied())
            .collect();
        if v.is_empty() {
            out.push_str(" — |");
            continue;
        }
        let (p50, p99) = (percentile(&mut v, 0.5), percentile(&mut v, 0.99));
        out.push_str(&format!(" {} / {} |", p50.as_millis(), p99.as_millis()));
    }
    out
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let a = args()?;
    let llm = ScriptedLlm::start(Vec::new()).await;
    *llm.default_reply.lock().unwrap() =
        Some(Reply::text(&["It is ten o'clock. ", "Have a nice day."]));
    let models = a
        .models
        .clone()
        .unwrap_or_else(duet_client::speech::models_dir);
    let embedded = a.llm == "embedded";
    // Remote speech: a transcriber that hears the question and a voice that streams 1 s of
    // 24 kHz PCM, both at once.
    let stt = ScriptedLlm::start(Vec::new()).await;
    *stt.default_reply.lock().unwrap() = Some(Reply::Status(
        200,
        json!({"text": "What time is it?"}).to_string(),
    ));
    let tts = ScriptedLlm::start(Vec::new()).await;
    let pcm: Vec<u8> = (0..24_000)
        .map(|i| ((i as f32 * 0.06).sin() * 8_000.0) as i16)
        .flat_map(i16::to_le_bytes)
        .collect();
    *tts.default_reply.lock().unwrap() = Some(Reply::Bytes {
        content_type: "audio/pcm".into(),
        parts: pcm.chunks(4_800).map(<[u8]>::to_vec).collect(),
        gap: Duration::ZERO,
    });
    let remote = a.speech == "remote";
    let addr = start_server(
        &models,
        (!embedded).then_some(&llm),
        remote.then_some((&stt, &tts)),
        (&a.speculative_ms, a.semantic.is_some()),
    )
    .await?;
    let (question, speech_end) = question();
    // One turn first, not counted: the models' first runs are slower.
    let semantic = a.semantic.as_deref();
    session(addr, &question, speech_end, 1, semantic).await?;
    let which = if embedded {
        "the embedded SmolLM2-135M-Instruct (f16, answers of at most 40 tokens)"
    } else {
        "a fast scripted LLM"
    };
    let speech = if remote {
        "remote transcriber and voice (scripted, loopback)"
    } else {
        "Whisper tiny.en and Piper embedded"
    };
    let turns = match semantic {
        Some(e) => format!("semantic_vad {e} (Smart Turn)"),
        None => "server_vad 500 ms".into(),
    };
    println!(
        "cascade voice-to-voice: end of the voiced speech → each stage seen by the client (p50 / p99 ms), {} rounds per session, {which}, {speech}, {turns}, --speculative-start-ms {}",
        a.rounds, a.speculative_ms
    );
    println!();
    let names: String = STAGES
        .iter()
        .map(|(_, name)| format!(" {name} |"))
        .collect();
    println!("| sessions |{names}\n|---|{}", "---|".repeat(STAGES.len()));
    for &n in &a.sessions {
        let runs = (0..n).map(|i| {
            let q = question.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(137 * i as u64)).await;
                session(addr, &q, speech_end, a.rounds, semantic).await
            }
        });
        let all: Vec<Turn> = futures_util::future::join_all(runs)
            .await
            .into_iter()
            .collect::<anyhow::Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        println!("{}", row(n, &all));
    }
    Ok(())
}
