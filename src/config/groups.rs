//! The groups of `duet serve`'s flags, one struct per subsystem, flattened into
//! [`super::ServeArgs`]: on the command line, in `DUET_*` variables and in the config file
//! they stay one flat list; in the code each subsystem takes its own group.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use super::{at_least, Bounded, LlmWeights, Toggle};

/// HTTP and WebSocket: where Duet listens, its TLS, and the limits on its connections.
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
#[command(next_help_heading = "HTTP")]
pub struct HttpArgs {
    /// Address to listen on. Use 0.0.0.0 to accept connections from other machines.
    #[arg(long, env = "DUET_HOST", default_value = "127.0.0.1")]
    pub host: IpAddr,

    /// TCP port for HTTP and WebSocket (0 picks a free port and prints it).
    #[arg(long, env = "DUET_PORT", default_value_t = 8080)]
    pub port: u16,

    /// Browser origins allowed to call the API (comma-separated, e.g.
    /// `https://app.example.com`): other origins get no CORS headers and their WebSocket
    /// upgrades get 403. Default: any origin.
    #[arg(long, env = "DUET_CORS_ORIGINS", value_delimiter = ',')]
    pub cors_origins: Vec<String>,

    /// Serve HTTPS (and `wss://`) on --port with this certificate chain (PEM, the server's
    /// certificate first); needs --tls-key. A plain-HTTP request to the port is answered
    /// `400` in clear and served nothing. Both files are read again on SIGHUP: a renewed
    /// certificate needs no restart and drops no connection.
    #[arg(long, env = "DUET_TLS_CERT", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "DUET_TLS_KEY", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Open HTTP connections (WebSockets included); further ones get a bare 503.
    #[arg(long, env = "DUET_MAX_CONNECTIONS", default_value_t = 4096, value_parser = at_least::<usize>(1))]
    pub max_connections: usize,

    /// A new connection's first request head must arrive within this many seconds.
    #[arg(long, env = "DUET_HTTP_HEAD_TIMEOUT_SECS", default_value_t = 10, value_parser = at_least::<u64>(1))]
    pub http_head_timeout_secs: u64,

    /// A request's whole body (`Content-Length` or chunked) must arrive within this many
    /// seconds of its head; past it the request gets 408 `request_timeout` and the
    /// connection closes.
    #[arg(long, env = "DUET_HTTP_BODY_TIMEOUT_SECS", default_value_t = 10, value_parser = at_least::<u64>(1))]
    pub http_body_timeout_secs: u64,

    /// An idle keep-alive connection is closed after this many seconds.
    #[arg(long, env = "DUET_HTTP_IDLE_SECS", default_value_t = 60, value_parser = at_least::<u64>(1))]
    pub http_idle_secs: u64,

    /// The server pings every WebSocket this often, in seconds.
    #[arg(long, env = "DUET_WS_PING_SECS", default_value_t = 20, value_parser = at_least::<u64>(1))]
    pub ws_ping_secs: u64,

    /// A WebSocket with no inbound frame (pongs included) for this many seconds is closed
    /// and its session released.
    #[arg(long, env = "DUET_WS_IDLE_SECS", default_value_t = 60, value_parser = at_least::<u64>(1))]
    pub ws_idle_secs: u64,

    /// A WebSocket whose writer has been blocked this many seconds (the client stopped
    /// reading) is closed and its session released.
    #[arg(long, env = "DUET_WS_WRITE_TIMEOUT_SECS", default_value_t = 30, value_parser = at_least::<u64>(1))]
    pub ws_write_timeout_secs: u64,
}

/// Who may call: the API key and client secrets.
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
#[command(next_help_heading = "Authentication")]
pub struct AuthArgs {
    /// When set, every API route (not /health, not the demo page's files) requires
    /// `Authorization: Bearer <key>`
    /// (browsers may send the WebSocket subprotocol `openai-insecure-api-key.<key>` instead).
    /// An empty key is a startup error.
    #[arg(long, env = "DUET_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,

    /// Serve without an API key on a non-loopback --host (refused otherwise): anyone who
    /// reaches the port can open sessions.
    #[arg(long, env = "DUET_INSECURE_NO_AUTH")]
    pub insecure_no_auth: bool,

    /// Let the demo page mint its own client secret (`POST /demo/client_secret`, no key
    /// needed), so that it works on a server with --api-key without holding the key. Anyone
    /// who reaches the server can then open sessions: for demos only.
    #[arg(long, env = "DUET_DEMO_MINT_SECRETS")]
    pub demo_mint_secrets: bool,

    /// Live client secrets (`POST /v1/realtime/client_secrets`) kept at once; minting more
    /// gets 503 until some expire.
    #[arg(long, env = "DUET_MAX_CLIENT_SECRETS", default_value_t = 10_000, value_parser = at_least::<usize>(1))]
    pub max_client_secrets: usize,

    /// With --demo-mint-secrets: live secrets the demo page may mint at once, in a pool of
    /// their own (they never take the places of --max-client-secrets); more get 503.
    #[arg(long, env = "DUET_MAX_DEMO_SECRETS", default_value_t = 100)]
    pub max_demo_secrets: usize,

    /// With --demo-mint-secrets: live demo secrets one client IP address may hold; more get
    /// 429 `too_many_demo_secrets_from_ip`.
    #[arg(long, env = "DUET_MAX_DEMO_SECRETS_PER_IP", default_value_t = 10)]
    pub max_demo_secrets_per_ip: usize,
}

/// The model served and the device it runs on.
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
#[command(next_help_heading = "Model")]
pub struct BackendArgs {
    /// Model to serve. `echo` is built in: no weights, CPU, speaks your words back.
    /// `moshi` is Kyutai's full-duplex model (needs --model-dir). `cascade` answers with a
    /// text LLM (needs --llm-url; what users say reaches it through the transcriber, so give
    /// --transcription-model-dir for speech).
    #[arg(long, env = "DUET_MODEL", default_value = "echo")]
    pub model: String,

    /// Directory with the model's files, for `--model moshi`: Kyutai's candle release
    /// (`model.safetensors` or `model.q8.gguf`, `tokenizer-e351c8d8-checkpoint125.safetensors`,
    /// `tokenizer_spm_32k_3.model`, optional `duet-moshi.toml`) or a directory written by
    /// `duet moshi-tiny`. Duet never downloads weights.
    #[arg(long, env = "DUET_MODEL_DIR")]
    pub model_dir: Option<PathBuf>,

    /// Device the model runs on: `cpu`, `cuda` or `cuda:N` (CUDA needs a binary built with
    /// `--features cuda`).
    #[arg(long, env = "DUET_DEVICE", default_value = "cpu")]
    pub device: String,

    /// Moshi preset (`moshiko` or `moshika`) when the directory has no `duet-moshi.toml`.
    #[arg(long, env = "DUET_MOSHI_PRESET", default_value = "moshiko")]
    pub moshi_preset: String,

    /// Sessions the model serves at once (Moshi steps them together in one batch and
    /// reserves KV-cache memory for every slot up front). Sessions beyond it are refused
    /// with `model_slots_exhausted`. Default: 8 for Moshi, 1024 for echo, 256 for the cascade.
    #[arg(long, env = "DUET_MODEL_SLOTS", value_parser = at_least::<usize>(1))]
    pub model_slots: Option<usize>,

    /// Decode Moshi's audio for all sessions in one batched Mimi pass: `auto` (on CUDA yes,
    /// on the CPU no, where candle 0.9.2 gets batched transposed convolutions wrong), `on`,
    /// `off`. `moshi_bench --check` compares the two on a device.
    #[arg(
        long,
        env = "DUET_MIMI_BATCHED_DECODE",
        value_enum,
        default_value = "auto"
    )]
    pub mimi_batched_decode: Toggle,

    /// Sampling seed for reproducible model output; random when unset.
    #[arg(long, env = "DUET_MODEL_SEED")]
    pub model_seed: Option<u64>,

    /// How many nice levels lower the bulk model threads run than the threads a turn or a
    /// frame waits on (media, sessions, the model loop, the turn model): transcription, the
    /// embedded LLM, speech synthesis and the math pool they share (not with Moshi on the CPU,
    /// whose frames wait on it). On busy cores a turn's score then does not wait out a Whisper
    /// pass. 0 to 19; 0: all alike.
    #[arg(long, env = "DUET_BULK_NICE", default_value_t = crate::cpu_share::DEFAULT_BULK_NICE, value_parser = Bounded::<u8>::new(0, 19, "Linux's lowest priority"))]
    pub bulk_nice: u8,
}

/// The cascade's LLM: a remote chat-completions server or an embedded GGUF.
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
#[command(next_help_heading = "LLM")]
pub struct LlmArgs {
    /// The cascade's LLM: an OpenAI-compatible base URL (`http://127.0.0.1:8000/v1`,
    /// `https://api.openai.com/v1`), asked with streaming `POST {url}/chat/completions` on
    /// pooled connections; `https://` is checked against the system's roots or
    /// `SSL_CERT_FILE`.
    #[arg(long, env = "DUET_LLM_URL")]
    pub llm_url: Option<String>,

    /// The `model` the cascade names in its LLM requests.
    #[arg(long, env = "DUET_LLM_MODEL", default_value = "default")]
    pub llm_model: String,

    /// The LLM's API key (`Authorization: Bearer …` to the upstream), held by the server
    /// and never sent to clients.
    #[arg(long, env = "DUET_LLM_API_KEY", hide_env_values = true)]
    pub llm_api_key: Option<String>,

    /// The cascade's embedded LLM, used when --llm-url is not given: a directory with one
    /// GGUF chat model (Llama, Qwen2/Qwen2.5 or Qwen3 architecture, ChatML template), as
    /// `scripts/install-models DIR` writes DIR/smollm2-135m-instruct. It also serves `POST /v1/chat/completions`.
    #[arg(long, env = "DUET_LLM_MODEL_DIR")]
    pub llm_model_dir: Option<PathBuf>,

    /// How the embedded LLM holds its weights: `f16` (dequantized at load: twice the memory
    /// of the file, and faster on CPUs) or `quantized` (as the file has them).
    #[arg(long, env = "DUET_LLM_WEIGHTS", value_enum, default_value = "f16")]
    pub llm_weights: LlmWeights,

    /// The embedded LLM's longest answer, in tokens, when a request does not say.
    #[arg(long, env = "DUET_LLM_MAX_TOKENS", default_value_t = 256, value_parser = at_least::<usize>(1))]
    pub llm_max_tokens: usize,

    /// Longest conversation the embedded LLM answers on, in tokens (prompt and answer; the
    /// oldest messages are left out beyond it; the model's own context when that is
    /// smaller). Each answer in progress holds a KV cache this long at most (SmolLM2-135M:
    /// 46 KiB a token, 92 MiB at 2048); 8 answers run at once, later ones wait.
    #[arg(long, env = "DUET_LLM_CONTEXT", default_value_t = 2048)]
    pub llm_context: usize,

    /// KV cache the embedded LLM keeps between turns (so a turn prefills only its new
    /// words), in MiB over all conversations; the least recently used goes first.
    #[arg(long, env = "DUET_LLM_CACHE_MIB", default_value_t = 256)]
    pub llm_cache_mib: usize,

    /// Answers the embedded LLM lets wait for a place (8 run at once); past it an
    /// `/v1/chat/completions` request gets `429 llm_queue_full` and a voice answer fails
    /// with `llm_queue_full` (voice answers count only each other and go first).
    #[arg(long, env = "DUET_LLM_MAX_WAITING", default_value_t = 32, value_parser = at_least::<usize>(1))]
    pub llm_max_waiting: usize,

    /// Longest wait of an embedded LLM answer for a place; past it the answer fails with
    /// `llm_queue_timeout` (`503` on `/v1/chat/completions`).
    #[arg(long, env = "DUET_LLM_MAX_WAIT_SECS", default_value_t = 20, value_parser = at_least::<u64>(1))]
    pub llm_max_wait_secs: u64,

    /// Longest wait for the LLM's first response and between two pieces of its stream;
    /// past it the answer fails with `llm_unavailable`.
    #[arg(long, env = "DUET_LLM_TIMEOUT_SECS", default_value_t = 30, value_parser = at_least::<u64>(1))]
    pub llm_timeout_secs: u64,

    /// Longest a cascade answer from `--llm-url` may take, from its request to its end
    /// (an upstream that keeps the stream alive with pieces that say nothing is cut off
    /// here); past it the answer fails with `llm_unavailable`.
    #[arg(long, env = "DUET_LLM_ANSWER_SECS", default_value_t = 120, value_parser = at_least::<u64>(1))]
    pub llm_answer_secs: u64,
}

/// Speech in and out: VAD, the turn model, the transcriber and the voice, embedded or remote.
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
#[command(next_help_heading = "Speech")]
pub struct SpeechArgs {
    /// The cascade's voice: a Piper voice directory (`<voice>.onnx`, `<voice>.onnx.json` and
    /// `libonnxruntime.so`, as `scripts/install-models DIR` writes DIR/piper-en_US-joe-medium).
    /// Without it the cascade answers in text only. Needs the `espeak-ng` program.
    #[arg(long, env = "DUET_TTS_MODEL_DIR")]
    pub tts_model_dir: Option<PathBuf>,

    /// The cascade's voice from an OpenAI-compatible speech server (OpenAI, Kokoro-FastAPI,
    /// speaches, LocalAI): its base URL; each clause is POSTed to `{url}/audio/speech` with
    /// the session's `audio.output.voice` and `speed`, and its PCM plays as it streams in.
    /// It wins over --tts-model-dir.
    #[arg(long, env = "DUET_TTS_URL")]
    pub tts_url: Option<String>,

    /// The `model` named in every --tts-url request.
    #[arg(long, env = "DUET_TTS_MODEL", default_value = "tts-1")]
    pub tts_model: String,

    /// The --tts-url server's API key (`Authorization: Bearer …`), held by the server.
    #[arg(long, env = "DUET_TTS_API_KEY", hide_env_values = true)]
    pub tts_api_key: Option<String>,

    /// A directory made by `scripts/install-models DIR`: each standard model directory in it
    /// (`silero-vad`, `smart-turn-v3.2`, `whisper-tiny.en`, `piper-en_US-joe-medium`,
    /// `smollm2-135m-instruct`) is used for the flag that was not given (`--vad-model-dir`,
    /// `--turn-model-dir`, `--transcription-model-dir`, `--tts-model-dir`,
    /// `--llm-model-dir`).
    #[arg(long, env = "DUET_MODELS_DIR")]
    pub models_dir: Option<PathBuf>,

    /// Directory with Silero VAD (`silero_vad_16k.safetensors`, made by
    /// `scripts/install-models DIR` as `DIR/silero-vad`): server VAD then detects speech, not
    /// loudness. Without it the energy detector runs.
    #[arg(long, env = "DUET_VAD_MODEL_DIR")]
    pub vad_model_dir: Option<PathBuf>,

    /// With --vad-model-dir: voiced input Silero needs in a row, in milliseconds (to the
    /// nearest 32 ms chunk), before speech starts a turn or interrupts an answer, so that a
    /// noise onset or a click does not; it adds about this much to barge-in latency.
    #[arg(long, env = "DUET_VAD_MIN_SPEECH_MS", default_value_t = 100)]
    pub vad_min_speech_ms: u32,

    /// Directory with the Smart Turn v3.2 turn model (`smart-turn-v3.2-cpu.onnx`, made by
    /// `scripts/install-models DIR` as `DIR/smart-turn-v3.2`; the ONNX Runtime is found in it
    /// or beside it): `semantic_vad` then ends a turn when the model judges it complete.
    /// Without it `semantic_vad` ends turns after a fixed silence.
    #[arg(long, env = "DUET_TURN_MODEL_DIR")]
    pub turn_model_dir: Option<PathBuf>,

    /// Threads scoring pauses with the turn model, each with its own copy (about 9 MB and
    /// its working memory): pauses of different sessions that come together are scored side
    /// by side, one core each. Default: half the cores (1 to 4), so the turn model never takes
    /// every core from the transcriber whose words the same turn end waits for.
    #[arg(long, env = "DUET_TURN_THREADS", value_parser = at_least::<usize>(1))]
    pub turn_threads: Option<usize>,

    /// Models that read words (the cascade): after this much silence inside a server-VAD
    /// turn, in milliseconds, the audio so far is transcribed and the answer started before
    /// the silence window confirms the turn; its output is held back, played at once when
    /// the turn is confirmed with the same words, discarded if the user goes on. 0: never.
    #[arg(long, env = "DUET_SPECULATIVE_START_MS", default_value_t = 200)]
    pub speculative_start_ms: u32,

    /// Directory with a transcription model: Whisper converted by `duet convert-whisper`
    /// (`scripts/install-models DIR` makes `DIR/whisper-tiny.en`), or Kyutai STT's candle
    /// release. Enables `audio.input.transcription` and transcription sessions.
    #[arg(long, env = "DUET_TRANSCRIPTION_MODEL_DIR")]
    pub transcription_model_dir: Option<PathBuf>,

    /// Transcription streams open at once (one per session; sessions beyond it get
    /// `transcription_unavailable` failures, not a refusal). Default: 256 for Whisper, 8 for
    /// Kyutai STT (which reserves a KV cache per stream).
    #[arg(long, env = "DUET_TRANSCRIPTION_STREAMS")]
    pub transcription_streams: Option<usize>,

    /// Speech to text from an OpenAI-compatible server (OpenAI, Groq, vLLM, speaches,
    /// LocalAI): its base URL (`https://api.openai.com/v1`); each committed utterance is
    /// POSTed to `{url}/audio/transcriptions` as a WAV. Serves whatever a loaded transcriber
    /// serves, in its place (it wins over --transcription-model-dir).
    #[arg(long, env = "DUET_STT_URL")]
    pub stt_url: Option<String>,

    /// The `model` named in every --stt-url request (a session's own transcription model
    /// name is not forwarded).
    #[arg(long, env = "DUET_STT_MODEL", default_value = "whisper-1")]
    pub stt_model: String,

    /// The --stt-url server's API key (`Authorization: Bearer …`), held by the server.
    #[arg(long, env = "DUET_STT_API_KEY", hide_env_values = true)]
    pub stt_api_key: Option<String>,
}

/// WebRTC calls: their UDP socket, the media engine and the calls' timers.
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
#[command(next_help_heading = "WebRTC calls")]
pub struct MediaArgs {
    /// Address of the UDP socket that carries every WebRTC call's media.
    #[arg(long, env = "DUET_UDP_HOST", default_value = "127.0.0.1")]
    pub udp_host: IpAddr,

    /// UDP port of the first media thread; each further thread takes the next port (0 picks
    /// free ports). Open them all in firewalls.
    #[arg(long, env = "DUET_UDP_PORT", default_value_t = 0)]
    pub udp_port: u16,

    /// Address advertised to callers in ICE candidates, for a NAT 1:1 setup (e.g. a cloud
    /// VM's public IP). Required when --udp-host is 0.0.0.0.
    #[arg(long, env = "DUET_PUBLIC_IP")]
    pub public_ip: Option<IpAddr>,

    /// Concurrent WebRTC calls; further offers get 503 with Retry-After. Accepted SIP calls
    /// take a slot too, and ringing ones count against it (an INVITE gets 503 past it).
    #[arg(long, env = "DUET_MAX_CALLS", default_value_t = 100)]
    pub max_calls: usize,

    /// Media threads, each with its own UDP socket (ports --udp-port, +1, …) and a share of
    /// the calls. Default: the number of cores, at most 4.
    #[arg(long, env = "DUET_MEDIA_THREADS", value_parser = at_least::<usize>(1))]
    pub media_threads: Option<usize>,

    /// A WebRTC call that receives no packet for this many seconds is ended.
    #[arg(long, env = "DUET_CALL_INACTIVITY_SECS", default_value_t = 30, value_parser = at_least::<u64>(1))]
    pub call_inactivity_secs: u64,

    /// A WebRTC call whose ICE and DTLS are not connected this many seconds after the
    /// offer is ended, releasing its call and model slots.
    #[arg(long, env = "DUET_CALL_CONNECT_SECS", default_value_t = 10, value_parser = at_least::<u64>(1))]
    pub call_connect_secs: u64,
}

/// Sessions: how many, how long, and what each may hold in memory; resumption and admission.
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
#[command(next_help_heading = "Session limits")]
pub struct LimitsArgs {
    /// Concurrent sessions accepted: WebSocket sessions, every call's session (attached or
    /// detached) and sideband sockets; further ones get 503.
    #[arg(long, env = "DUET_MAX_SESSIONS", default_value_t = 256, value_parser = at_least::<usize>(1))]
    pub max_sessions: usize,

    /// Longest session in seconds; the session then gets `session_expired` and is closed.
    #[arg(long, env = "DUET_MAX_SESSION_SECS", default_value_t = 3600, value_parser = at_least::<u64>(1))]
    pub max_session_secs: u64,

    /// A session with no client event and no audio for this many seconds is closed
    /// (`session_idle`).
    #[arg(long, env = "DUET_SESSION_IDLE_SECS", default_value_t = 300, value_parser = at_least::<u64>(1))]
    pub session_idle_secs: u64,

    /// Sessions (a call's included, attached or detached) and sidebands one client IP
    /// address may hold at once (0: no cap).
    #[arg(long, env = "DUET_MAX_PER_IP", default_value_t = 0)]
    pub max_per_ip: usize,

    /// Unsent events a session may queue for one connection, in MiB; past it the session
    /// closes (`event_queue_full`, WebSocket close 1008).
    #[arg(long, env = "DUET_MAX_OUTBOUND_MIB", default_value_t = 32, value_parser = at_least::<usize>(1))]
    pub max_outbound_mib: usize,

    /// Client events a WebSocket or data channel may have waiting for its session, in MiB
    /// (at least 16: one event may be 15 MiB); the reader waits beyond it.
    #[arg(long, env = "DUET_MAX_INBOUND_MIB", default_value_t = 16, value_parser = at_least::<usize>(16))]
    pub max_inbound_mib: usize,

    /// Longest audio one `conversation.item.create` may carry, in seconds.
    #[arg(long, env = "DUET_MAX_ITEM_AUDIO_SECS", default_value_t = 300, value_parser = at_least::<u64>(1))]
    pub max_item_audio_secs: u64,

    /// Text a session's conversation keeps (messages, transcripts, function arguments and
    /// outputs), in MiB; past it the oldest items are evicted, and one item larger than this
    /// is refused (`item_text_too_long`).
    #[arg(long, env = "DUET_MAX_CONVERSATION_TEXT_MIB", default_value_t = 8, value_parser = at_least::<usize>(1))]
    pub max_conversation_text_mib: usize,

    /// Longest `instructions` (session or response), in KiB; longer is refused
    /// (`invalid_value`).
    #[arg(long, env = "DUET_MAX_INSTRUCTIONS_KIB", default_value_t = 256, value_parser = at_least::<usize>(1))]
    pub max_instructions_kib: usize,

    /// Largest `tools` array (session or response, as JSON), in KiB; larger is refused
    /// (`invalid_value`).
    #[arg(long, env = "DUET_MAX_TOOLS_KIB", default_value_t = 1024, value_parser = at_least::<usize>(1))]
    pub max_tools_kib: usize,

    /// Duplex extension: a session whose transport dropped waits this many seconds for a
    /// resume, keeping its conversation and model slot, then expires.
    #[arg(long, env = "DUET_DISCONNECT_GRACE_SECS", default_value_t = 30)]
    pub disconnect_grace_secs: u64,

    /// Duplex extension: bytes of events (compact JSON) a session keeps for replay; past
    /// it the client gets `session.resync_required` and events go on without a seq.
    #[arg(long, env = "DUET_RESUME_JOURNAL_BYTES", default_value_t = 8 << 20, value_parser = at_least::<usize>(1024))]
    pub resume_journal_bytes: usize,

    /// Duplex extension: seconds an event stays in the replay journal.
    #[arg(long, env = "DUET_RESUME_JOURNAL_SECS", default_value_t = 60)]
    pub resume_journal_secs: u64,

    /// At capacity (calls, sessions or model slots), hold a new call or WebSocket upgrade up
    /// to this many milliseconds for a slot to free (oldest first) before `503 server_busy`;
    /// 0 refuses at once.
    #[arg(long, env = "DUET_ADMISSION_WAIT_MS", default_value_t = 0, value_parser = Bounded::<u64>::new(0, 600_000, "10 minutes"))]
    pub admission_wait_ms: u64,

    /// Sessions (a call's included, attached or detached) and sidebands one credential (the
    /// server key, or one client secret) may hold at once (0: no cap); more get 429
    /// `too_many_sessions_for_key`.
    #[arg(long, env = "DUET_MAX_SESSIONS_PER_KEY", default_value_t = 0)]
    pub max_sessions_per_key: usize,

    /// The server's memory budget in MiB: every buffer a client can fill (input and
    /// conversation audio, responses, event queues, journals, retrieve caches, transcription
    /// queues, client secrets, a call's media) is charged to one account, and a request past
    /// it is refused with `server_memory_exhausted`. Default: three quarters of the
    /// machine's memory (or of its cgroup limit), logged at start. At least 32 (one call
    /// with its session reserves about 16 MiB).
    #[arg(long, env = "DUET_MEMORY_BUDGET_MIB", value_parser = at_least::<u64>(32))]
    pub memory_budget_mib: Option<u64>,

    /// Duplex extension: seconds before --max-session-secs that `session.expiring` is sent.
    #[arg(long, env = "DUET_EXPIRY_WARNING_SECS", default_value_t = 60)]
    pub expiry_warning_secs: u64,
}

/// Phone calls (SIP): the listener, the webhook, and the limits that keep a flood out.
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
#[command(next_help_heading = "Phone calls (SIP)")]
pub struct SipArgs {
    /// Phone calls: answer SIP on this address (UDP and TCP, e.g. `0.0.0.0:5060`). Each
    /// INVITE becomes a pending call `rtc_…` announced to --sip-webhook-url, which the app
    /// accepts or rejects (docs/phone-calls.md). Off when not given.
    #[arg(long, env = "DUET_SIP_LISTEN")]
    pub sip_listen: Option<SocketAddr>,

    /// Phone calls: the address trunks reach this server on, put in Contact headers and in
    /// SDP (behind NAT, the public one). Default: --sip-listen's address (required when that
    /// is a wildcard).
    #[arg(long, env = "DUET_SIP_PUBLIC_ADDR")]
    pub sip_public_addr: Option<IpAddr>,

    /// Phone calls: where `realtime.call.incoming` is POSTed for each INVITE (`http://` or
    /// `https://`). Required with --sip-listen.
    #[arg(long, env = "DUET_SIP_WEBHOOK_URL")]
    pub sip_webhook_url: Option<String>,

    /// Phone calls: the webhook signing secret (`whsec_` and base64, as OpenAI's): the app
    /// checks `webhook-signature` with it (the official SDKs' `webhooks.unwrap()`). Required
    /// with --sip-listen.
    #[arg(long, env = "DUET_SIP_WEBHOOK_SECRET", hide_env_values = true)]
    pub sip_webhook_secret: Option<String>,

    /// Phone calls: seconds the app has to accept or reject a call; then the caller gets
    /// `480 Temporarily Unavailable`.
    #[arg(long, env = "DUET_SIP_DECISION_SECS", default_value_t = 10, value_parser = at_least::<u64>(1))]
    pub sip_decision_secs: u64,

    /// Phone calls: source networks allowed to send SIP (comma-separated CIDRs, e.g.
    /// `10.0.0.0/8,192.0.2.7/32`); others get `403 Forbidden`. Default: any source.
    #[arg(long, env = "DUET_SIP_ALLOW", value_delimiter = ',')]
    pub sip_allow: Vec<crate::cidr::Cidr>,

    /// Phone calls: an RTP leg that receives nothing for this many seconds is hung up (30 s
    /// are given before its first packet).
    #[arg(long, env = "DUET_SIP_RTP_TIMEOUT_SECS", default_value_t = 15, value_parser = at_least::<u64>(1))]
    pub sip_rtp_timeout_secs: u64,

    /// Phone calls: the UDP ports of their RTP legs, `LOW-HIGH` (one port per call, so the
    /// range caps the calls: an accept with none free gets 503 and the caller 486). Default:
    /// the operating system's ephemeral ports.
    #[arg(long, env = "DUET_SIP_RTP_PORTS")]
    pub sip_rtp_ports: Option<crate::cidr::PortRange>,

    /// Phone calls: new INVITEs a second from one source address (a burst of one second's
    /// worth, then this rate); more are dropped unanswered, before any transaction.
    #[arg(long, env = "DUET_SIP_INVITE_RATE", default_value_t = 20, value_parser = at_least::<u32>(1))]
    pub sip_invite_rate: u32,

    /// Phone calls: calls ringing at once (announced, not yet decided); further INVITEs get
    /// `503 Service Unavailable` at once, as they do while ringing calls and --max-calls's
    /// calls together fill --max-calls.
    #[arg(long, env = "DUET_SIP_MAX_RINGING", default_value_t = 100, value_parser = at_least::<usize>(1))]
    pub sip_max_ringing: usize,

    /// Phone calls: SIP TCP connections held at once; further ones are closed at accept.
    #[arg(long, env = "DUET_SIP_MAX_TCP", default_value_t = 256, value_parser = at_least::<usize>(1))]
    pub sip_max_tcp: usize,

    /// Phone calls: SIP TCP connections held at once from one source address.
    #[arg(long, env = "DUET_SIP_MAX_TCP_PER_IP", default_value_t = 16, value_parser = at_least::<usize>(1))]
    pub sip_max_tcp_per_ip: usize,
}

/// Cluster mode: the shared Redis and this node's name and address.
#[derive(Clone, Debug, clap::Args, serde::Serialize)]
#[command(next_help_heading = "Cluster")]
pub struct ClusterArgs {
    /// Cluster mode: the Redis that nodes share (`redis://[:password@]host:port[/db]`, or
    /// `rediss://` for TLS). Calls and sessions are then placed on the node with the most
    /// free model slots and routed to their owner by id (docs/cluster.md). Off
    /// when not given: a single node, as without it.
    #[arg(long, env = "DUET_CLUSTER_REDIS", hide_env_values = true)]
    pub cluster_redis: Option<String>,

    /// Cluster mode: this node's id, part of every call and session id it owns (1 to 32 of
    /// `a-z`, `0-9`, `-`). Default: the host name.
    #[arg(long, env = "DUET_NODE_ID")]
    pub node_id: Option<String>,

    /// Cluster mode: the internal `http://` base URL other nodes forward requests to.
    /// Default: `http://--host:--port` (required when --host is a wildcard).
    #[arg(long, env = "DUET_NODE_URL")]
    pub node_url: Option<String>,

    /// Cluster mode: the base URL clients reach this node on (shown in the cluster view).
    /// Default: `http://--host:--port` (required when --host is a wildcard).
    #[arg(long, env = "DUET_PUBLIC_URL")]
    pub public_url: Option<String>,
}
