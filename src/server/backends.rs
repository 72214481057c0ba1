//! The backends a server starts from its flags: the LLM (remote or embedded), the model
//! (echo, Moshi, or the cascade on the LLM and the voice), the voice, and the speech stages
//! (VAD, transcriber, turn model), each behind the port its sessions use.

use std::sync::Arc;

use crate::config::ServeArgs;
use crate::model_loop::ModelLoop;

use super::Speech;

/// The LLM of `--llm-url`, or else the embedded one of `--llm-model-dir`, when either is
/// given.
pub(super) async fn llm_backend(
    args: &ServeArgs,
) -> anyhow::Result<Option<crate::llm::LlmBackend>> {
    if let Some(url) = args.llm.llm_url.clone() {
        let cfg = crate::llm::LlmConfig {
            url,
            model: args.llm.llm_model.clone(),
            api_key: args.llm.llm_api_key.clone(),
            timeout: std::time::Duration::from_secs(args.llm.llm_timeout_secs),
            answer_timeout: std::time::Duration::from_secs(args.llm.llm_answer_secs),
        };
        let upstream = crate::llm::Upstream::new(cfg)?;
        return Ok(Some(crate::llm::LlmBackend::Remote(upstream)));
    }
    let Some(dir) = args.llm.llm_model_dir.clone() else {
        return Ok(None);
    };
    let device =
        duet_models::moshi::DeviceSpec::parse(&args.backend.device).map_err(anyhow::Error::msg)?;
    let options = duet_models::llama::LlamaOptions {
        format: args.llm.llm_weights.format(),
        max_tokens: args.llm.llm_max_tokens,
        cache_bytes: args.llm.llm_cache_mib << 20,
        context: args.llm.llm_context,
        max_waiting: args.llm.llm_max_waiting,
        max_wait: std::time::Duration::from_secs(args.llm.llm_max_wait_secs),
        clock: Some(duet_models::llama::Clock(Arc::new(std::time::Instant::now))),
        seed: args
            .backend
            .model_seed
            .unwrap_or(duet_models::llama::LlamaOptions::default().seed),
        ..Default::default()
    };
    let name = dir
        .file_name()
        .map_or_else(|| "embedded".into(), |n| n.to_string_lossy().into_owned());
    let started = std::time::Instant::now();
    let loaded = tokio::task::spawn_blocking(move || {
        duet_models::llama::LoadedLlama::load(&dir, options.format, &device.open()?)
            .map(|loaded| duet_models::llama::EmbeddedLlm::new(loaded, options))
    })
    .await??;
    let (llm, engine, prep) = loaded;
    let threads = crate::llm_loop::LlmLoop::spawn(engine, prep)?;
    tracing::info!(
        model = %name,
        context = llm.context(),
        load_ms = started.elapsed().as_millis() as u64,
        "embedded LLM loaded"
    );
    Ok(Some(crate::llm::LlmBackend::Embedded(
        crate::llm::Embedded {
            llm: std::sync::Arc::new(llm),
            name,
            threads,
        },
    )))
}

pub(super) async fn start_model(
    args: &ServeArgs,
    llm: Option<crate::llm::LlmBackend>,
    voice: Option<crate::tts::Voice>,
) -> anyhow::Result<ModelLoop> {
    let device =
        duet_models::moshi::DeviceSpec::parse(&args.backend.device).map_err(anyhow::Error::msg)?;
    let moshi_defaults = duet_models::moshi::MoshiOptions::default();
    let opts = duet_models::LoadOptions {
        model_dir: args.backend.model_dir.clone(),
        moshi: duet_models::moshi::MoshiOptions {
            preset: args.backend.moshi_preset.clone(),
            device,
            max_slots: args.backend.model_slots.unwrap_or(moshi_defaults.max_slots),
            seed: args.backend.model_seed,
            per_session_depformer: false,
            batched_decode: args.backend.mimi_batched_decode.choice(),
        },
        echo_slots: args.backend.model_slots,
    };
    if args.backend.model == "cascade" {
        return start_cascade(args, llm, voice).await;
    }
    let name = args.backend.model.clone();
    // Loading may map gigabytes of weights: keep it off the async workers.
    let model = tokio::task::spawn_blocking(move || duet_models::load(&name, &opts)).await??;
    Ok(ModelLoop::spawn(model, &args.backend.device)?)
}

/// The cascade on the remote LLM of `--llm-url` or the embedded one of `--llm-model-dir`.
async fn start_cascade(
    args: &ServeArgs,
    llm: Option<crate::llm::LlmBackend>,
    voice: Option<crate::tts::Voice>,
) -> anyhow::Result<ModelLoop> {
    let llm: Box<dyn duet_models::cascade::Llm> = match llm {
        Some(crate::llm::LlmBackend::Remote(upstream)) => Box::new(crate::llm::RemoteLlm::new(
            upstream,
            tokio::runtime::Handle::current(),
        )),
        Some(crate::llm::LlmBackend::Embedded(e)) => Box::new(e.llm),
        None => anyhow::bail!(
            "--model cascade needs an LLM: --llm-url (an OpenAI-compatible base URL) or \
             --llm-model-dir (a GGUF chat model; scripts/install-models DIR writes \
             DIR/smollm2-135m-instruct)"
        ),
    };
    let speech = match voice {
        Some(voice) => {
            let (worker, sides) = duet_models::cascade::SpeechWorker::pool(voice.speakers());
            // Ends with the worker, when the model is dropped.
            crate::speech_loop::SpeechLoop::spawn(sides)?;
            Some(worker)
        }
        None => {
            tracing::warn!(
                "--model cascade without --tts-model-dir or --tts-url: answers in text only"
            );
            None
        }
    };
    let slots = args.backend.model_slots.unwrap_or(256);
    let model = duet_models::cascade::CascadeModel::new(llm, speech, slots);
    Ok(ModelLoop::spawn(Box::new(model), &args.backend.device)?)
}

/// The voice of `--tts-url` (a remote speech server) or `--tts-model-dir` (Piper), shared
/// by the cascade and `/v1/audio/speech`.
pub(super) async fn start_voice(args: &ServeArgs) -> anyhow::Result<Option<crate::tts::Voice>> {
    if let Some(url) = &args.speech.tts_url {
        let runtime = tokio::runtime::Handle::current();
        let key = args.speech.tts_api_key.clone();
        let remote = crate::tts::RemoteVoice::new(url, &args.speech.tts_model, key, runtime)?;
        tracing::info!(url = %url, model = %args.speech.tts_model, "voice: remote");
        return Ok(Some(crate::tts::Voice::Remote(remote)));
    }
    let Some(dir) = args.speech.tts_model_dir.clone() else {
        return Ok(None);
    };
    let voice = tokio::task::spawn_blocking(move || {
        duet_models::piper::PiperVoice::load(&dir, Box::new(crate::espeak::EspeakNg))
    })
    .await??;
    tracing::info!(voice = voice.name(), "voice loaded");
    let name = voice.name().to_string();
    Ok(Some(crate::tts::Voice::embedded(Box::new(voice), &name)))
}

/// Loads the VAD and transcription models named by `--vad-model-dir` and
/// `--transcription-model-dir` (each optional) and starts the transcription loop.
pub(super) async fn start_speech(args: &ServeArgs) -> anyhow::Result<Speech> {
    let mut speech = Speech::default();
    if let Some(dir) = args.speech.vad_model_dir.clone() {
        let vad = tokio::task::spawn_blocking(move || duet_models::silero::SileroVad::load(&dir))
            .await??;
        tracing::info!("server VAD: Silero");
        speech.vad = Some(vad);
    }
    speech.turn = start_turn_model(args).await?;
    if let Some(url) = &args.speech.stt_url {
        let remote = crate::stt::RemoteStt::new(
            url,
            &args.speech.stt_model,
            args.speech.stt_api_key.clone(),
        )?;
        tracing::info!(url = %url, model = %args.speech.stt_model, "speech to text: remote");
        speech.transcriber = Some(crate::stt::Stt::Remote(Arc::new(remote)));
    } else if let Some(dir) = args.speech.transcription_model_dir.clone() {
        let device = duet_models::moshi::DeviceSpec::parse(&args.backend.device)
            .map_err(anyhow::Error::msg)?;
        let slots = args.speech.transcription_streams;
        let transcriber = tokio::task::spawn_blocking(move || {
            duet_models::load_transcriber(&dir, &device, slots)
        })
        .await??;
        speech.transcriber = Some(crate::stt::Stt::Embedded(
            crate::transcribe_loop::TranscribeLoop::spawn(transcriber, &args.backend.device)?,
        ));
    }
    Ok(speech)
}

/// The math pool's share of a busy CPU: bulk, unless the frame-paced model does its math
/// there (Moshi on the CPU).
pub(super) fn math_pool_share(args: &ServeArgs) -> crate::cpu_share::Share {
    if args.backend.model == "moshi" && args.backend.device == "cpu" {
        crate::cpu_share::Share::Prompt
    } else {
        crate::cpu_share::Share::Bulk
    }
}

/// Loads the turn model of `--turn-model-dir` and starts its loop; says once, without one,
/// what `semantic_vad` does then.
async fn start_turn_model(args: &ServeArgs) -> anyhow::Result<Option<crate::turn_loop::TurnLoop>> {
    let Some(dir) = args.speech.turn_model_dir.clone() else {
        tracing::info!("semantic_vad: no turn model (--turn-model-dir); turns end after a fixed silence (300/700/1200 ms for high/medium/low eagerness)");
        return Ok(None);
    };
    let threads = args.speech.turn_threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).clamp(1, 4))
    });
    let models = tokio::task::spawn_blocking(move || {
        (0..threads)
            .map(|_| duet_models::smart_turn::SmartTurn::load(&dir))
            .collect::<Result<Vec<_>, _>>()
    })
    .await??;
    tracing::info!(
        threads,
        "semantic_vad: Smart Turn v3.2 judges the end of turns"
    );
    Ok(Some(crate::turn_loop::TurnLoop::spawn(models)?))
}
