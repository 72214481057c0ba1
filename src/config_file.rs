//! The config file (`--config duet.toml`, `DUET_CONFIG`) and `duet check-config`.
//!
//! Every `duet serve` flag is a key, spelled as the flag without its dashes in snake case
//! (`--max-sessions` → `max_sessions`; `max-sessions` is accepted too). Precedence: a flag
//! on the command line, then its `DUET_*` variable, then the file, then the default. The
//! file's values go through the flags' own parsers, so a bad value is the same error as on
//! the command line, naming the key and the file. Arrays are for the flags that take
//! several values (`cors_origins`, `sip_allow`) only, never empty; a syntax error names its line and
//! column, never the text there (it may be the API key).

use std::ffi::OsString;
use std::path::Path;

use anyhow::Context;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, CommandFactory, FromArgMatches};
use duet_config_file::{Flag, Kind};

use crate::config::{Cli, ServeArgs};

/// The subcommands that take `duet serve`'s flags (and so a config file).
const SERVE_LIKE: &[&str] = &["serve", "check-config"];

/// Parses the command line, with the config file named by `--config` / `DUET_CONFIG` as
/// the layer under the flags and the environment. Clap's own errors (and `--help`) exit as
/// clap does; a bad file is an error naming it.
pub fn parse(argv: Vec<OsString>) -> anyhow::Result<Cli> {
    let mut cli = parse_args(argv)?;
    match &mut cli.command {
        crate::config::Command::Serve(a) | crate::config::Command::CheckConfig(a) => {
            a.apply_models_dir()
        }
        _ => {}
    }
    Ok(cli)
}

fn parse_args(argv: Vec<OsString>) -> anyhow::Result<Cli> {
    let matches = Cli::command().get_matches_from(argv.clone());
    let Some((name, sub)) = matches.subcommand() else {
        return Ok(Cli::from_arg_matches(&matches)?);
    };
    if !SERVE_LIKE.contains(&name) {
        return Ok(Cli::from_arg_matches(&matches)?);
    }
    let Some(path) = sub.get_one::<std::path::PathBuf>("config").cloned() else {
        return Ok(Cli::from_arg_matches(&matches)?);
    };
    let extra = file_args(&path, sub)?;
    let mut all = argv;
    all.extend(extra.iter().map(|(_, v)| v.into()));
    Cli::command()
        .try_get_matches_from(all)
        .and_then(|m| Cli::from_arg_matches(&m))
        .map_err(|e| {
            let msg = e.to_string();
            let key = extra
                .iter()
                .map(|(k, _)| k)
                .find(|k| msg.contains(&format!("--{}", k.replace('_', "-"))));
            match key {
                Some(k) => anyhow::anyhow!("{}: key `{k}`: {}", path.display(), msg.trim()),
                None => anyhow::anyhow!("{}", msg.trim()),
            }
        })
}

/// The file's keys as command-line tokens `(key, token)`, for the flags that neither the
/// command line nor the environment set. The checks are `duet_config_file`'s (a crate of
/// its own so that the fuzz target runs them without the server); only the flags'
/// description comes from clap here.
fn file_args(path: &Path, m: &ArgMatches) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    let cmd = ServeArgs::command();
    let flags: Vec<Flag> = cmd
        .get_arguments()
        .filter_map(|a| {
            Some(Flag {
                id: a.get_id().as_str().to_string(),
                long: a.get_long()?.to_string(),
                kind: kind(a),
            })
        })
        .collect();
    let overridden = |id: &str| {
        matches!(
            m.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        )
    };
    let tokens = duet_config_file::tokens(&text, &flags, overridden)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    Ok(tokens.into_iter().map(|t| (t.key, t.arg)).collect())
}

/// How a flag takes its value: only the flags that take several values (a value delimiter,
/// or values that append) take a TOML array.
fn kind(a: &clap::Arg) -> Kind {
    match a.get_action() {
        ArgAction::SetTrue => Kind::Switch,
        action
            if matches!(action, ArgAction::Append)
                || a.get_value_delimiter().is_some()
                || a.get_num_args().is_some_and(|n| n.max_values() > 1) =>
        {
            Kind::List {
                delimiter: a.get_value_delimiter(),
            }
        }
        _ => Kind::One,
    }
}

/// The model, its files and the other model directories, the device.
fn model_problems(args: &ServeArgs) -> Vec<String> {
    let mut p = Vec::new();
    match args.backend.model.as_str() {
        "echo" => {}
        "moshi" => match &args.backend.model_dir {
            None => p.push("model_dir: required with model = \"moshi\"".into()),
            Some(dir) => {
                if let Err(e) = duet_models::moshi::ModelFiles::find(dir) {
                    p.push(format!("model_dir: {e}"));
                }
            }
        },
        "cascade" if args.llm.llm_url.is_none() && args.llm.llm_model_dir.is_none() => p.push(
            "llm_url: required with model = \"cascade\" (or llm_model_dir, an embedded LLM)".into(),
        ),
        "cascade" => {}
        other => p.push(format!(
            "model: unknown model {other:?} (echo, moshi or cascade)"
        )),
    }
    if let Some(url) = &args.llm.llm_url {
        if let Err(e) = crate::llm::chat_endpoint(url) {
            p.push(format!("llm_url: {e}"));
        }
    }
    if let Some(dir) = args
        .llm
        .llm_model_dir
        .as_ref()
        .filter(|_| args.llm.llm_url.is_none())
    {
        if let Err(e) = duet_models::llama::find_gguf(dir) {
            p.push(format!("llm_model_dir: {e}"));
        }
    }
    if let Some(dir) = args.speech.models_dir.as_ref().filter(|d| !d.is_dir()) {
        p.push(format!("models_dir: {} is not a directory", dir.display()));
    }
    speech_problems(args, &mut p);
    if let Err(e) = duet_models::moshi::DeviceSpec::parse(&args.backend.device) {
        p.push(format!("device: {e}"));
    }
    p
}

/// The speech model directories: the voice, Silero VAD, the turn model, the transcriber.
fn speech_problems(args: &ServeArgs, p: &mut Vec<String>) {
    if let Some(dir) = &args.speech.tts_model_dir {
        if let Err(e) = duet_models::piper::VoiceFiles::find(dir) {
            p.push(format!("tts_model_dir: {e}"));
        }
    }
    if let Some(dir) = &args.speech.vad_model_dir {
        if let Err(e) = duet_models::silero::SileroVad::load(dir) {
            p.push(format!("vad_model_dir: {e}"));
        }
    }
    if let Some(dir) = &args.speech.turn_model_dir {
        if let Err(e) = duet_models::smart_turn::TurnFiles::find(dir) {
            p.push(format!("turn_model_dir: {e}"));
        }
    }
    if let Some(dir) = &args.speech.transcription_model_dir {
        if let Err(e) = duet_models::transcriber_kind(dir) {
            p.push(format!("transcription_model_dir: {e}"));
        }
    }
    if let Some(url) = &args.speech.tts_url {
        if let Err(e) = crate::tts::endpoint(url) {
            p.push(format!("tts_url: {e}"));
        }
    }
    if let Some(url) = &args.speech.stt_url {
        if let Err(e) = crate::stt::RemoteStt::new(url, &args.speech.stt_model, None) {
            p.push(format!("stt_url: {e}"));
        }
    }
    if let (Some(cert), Some(key)) = (&args.http.tls_cert, &args.http.tls_key) {
        if let Err(e) = crate::server::check_tls(cert, key) {
            p.push(format!("{e:#}"));
        }
    }
}

/// Where each stage of a voice answer runs, one line each (what `duet check-config` says):
/// speech to text, the LLM, text to speech, each embedded, remote or absent.
pub fn stages(args: &ServeArgs) -> Vec<String> {
    let place = |remote: Option<&String>, model: &str, dir: Option<&std::path::PathBuf>| match (
        remote, dir,
    ) {
        (Some(url), _) => format!("remote, {url} (model {model})"),
        (None, Some(dir)) => format!("embedded, {}", dir.display()),
        (None, None) => "none".to_string(),
    };
    vec![
        format!(
            "speech to text: {}",
            place(
                args.speech.stt_url.as_ref(),
                &args.speech.stt_model,
                args.speech.transcription_model_dir.as_ref()
            )
        ),
        format!(
            "LLM: {}",
            place(
                args.llm.llm_url.as_ref(),
                &args.llm.llm_model,
                args.llm.llm_model_dir.as_ref()
            )
        ),
        format!(
            "text to speech: {}",
            place(
                args.speech.tts_url.as_ref(),
                &args.speech.tts_model,
                args.speech.tts_model_dir.as_ref()
            )
        ),
    ]
}

/// Everything `duet check-config` checks beyond what the flags' parsers did (each flag's
/// range is stated on the flag, [`crate::config::Bounded`]): the model and its files, the
/// device, the auth rules, addresses and the flags that must agree with each other. Each
/// problem is one line naming its key.
pub fn problems(args: &ServeArgs) -> Vec<String> {
    let mut p = model_problems(args);
    if let Err(e) = crate::server::check_auth(args) {
        p.push(format!("api_key: {e}"));
    }
    if args.media.udp_host.is_unspecified() && args.media.public_ip.is_none() {
        p.push(format!(
            "public_ip: required when udp_host is the wildcard {}",
            args.media.udp_host
        ));
    }
    let bound = std::net::SocketAddr::new(args.http.host, args.http.port);
    if let Err(e) =
        crate::cluster::ClusterSettings::from_args(&args.cluster, bound, args.media.public_ip)
    {
        p.push(format!("cluster_redis: {e:#}"));
    }
    if args.http.ws_idle_secs <= args.http.ws_ping_secs {
        p.push(format!(
            "ws_idle_secs: {} must be longer than ws_ping_secs ({}), or idle clients that answer pings are dropped",
            args.http.ws_idle_secs, args.http.ws_ping_secs
        ));
    }
    if args.limits.expiry_warning_secs >= args.limits.max_session_secs {
        p.push(format!(
            "expiry_warning_secs: {} must be shorter than max_session_secs ({})",
            args.limits.expiry_warning_secs, args.limits.max_session_secs
        ));
    }
    p
}

/// The effective configuration as TOML, the API key redacted (unset values are left out).
pub fn effective(args: &ServeArgs) -> anyhow::Result<String> {
    let mut shown = args.clone();
    if shown.auth.api_key.is_some() {
        shown.auth.api_key = Some("<redacted>".into());
    }
    if shown.llm.llm_api_key.is_some() {
        shown.llm.llm_api_key = Some("<redacted>".into());
    }
    Ok(toml::to_string(&shown)?)
}

#[cfg(test)]
#[path = "config_file_tests.rs"]
mod tests;
