//! The config file (`--config duet.toml`, `DUET_CONFIG`) and `duet check-config`.
//!
//! Every `duet serve` flag is a key, spelled as the flag without its dashes in snake case
//! (`--max-sessions` → `max_sessions`; `max-sessions` is accepted too). Precedence: a flag
//! on the command line, then its `DUET_*` variable, then the file, then the default. The
//! file's values go through the flags' own parsers, so a bad value is the same error as on
//! the command line, naming the key and the file.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{bail, Context};
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, CommandFactory, FromArgMatches};

use crate::config::{Cli, ServeArgs};

/// The subcommands that take `duet serve`'s flags (and so a config file).
const SERVE_LIKE: &[&str] = &["serve", "check-config"];

/// Parses the command line, with the config file named by `--config` / `DUET_CONFIG` as
/// the layer under the flags and the environment. Clap's own errors (and `--help`) exit as
/// clap does; a bad file is an error naming it.
pub fn parse(argv: Vec<OsString>) -> anyhow::Result<Cli> {
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
/// command line nor the environment set.
fn file_args(path: &Path, m: &ArgMatches) -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("{} is not valid TOML", path.display()))?;
    let cmd = ServeArgs::command();
    let mut out = Vec::new();
    for (key, value) in table {
        let id = key.replace('-', "_");
        let Some(arg) = cmd
            .get_arguments()
            .find(|a| a.get_id().as_str() == id && a.get_long().is_some())
        else {
            bail!(
                "{}: unknown key `{key}` (every key is a `duet serve` flag in snake case; see duet.example.toml)",
                path.display()
            );
        };
        if id == "config" {
            bail!("{}: `config` cannot name another file", path.display());
        }
        if matches!(
            m.value_source(&id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        ) {
            continue;
        }
        let long = format!("--{}", arg.get_long().unwrap_or_default());
        let flag = matches!(arg.get_action(), ArgAction::SetTrue);
        match (&value, flag) {
            (toml::Value::Boolean(true), true) => out.push((id.clone(), long)),
            (toml::Value::Boolean(false), true) => {}
            (_, true) => bail!("{}: key `{key}` must be true or false", path.display()),
            (toml::Value::Array(items), false) => {
                let items: Vec<String> = items
                    .iter()
                    .map(scalar)
                    .collect::<anyhow::Result<_>>()
                    .with_context(|| format!("{}: key `{key}`", path.display()))?;
                out.push((id.clone(), format!("{long}={}", items.join(","))));
            }
            (v, false) => {
                let v = scalar(v).with_context(|| format!("{}: key `{key}`", path.display()))?;
                out.push((id.clone(), format!("{long}={v}")));
            }
        }
    }
    Ok(out)
}

/// A TOML scalar as a flag's value.
fn scalar(v: &toml::Value) -> anyhow::Result<String> {
    Ok(match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        other => bail!("a {} is not a flag value", other.type_str()),
    })
}

/// Everything `duet check-config` checks beyond what the flags' parsers did: the model and
/// its files, the device, the auth rules, addresses and ranges. Each problem is one line
/// naming its key.
pub fn problems(args: &ServeArgs) -> Vec<String> {
    let mut p = Vec::new();
    match args.model.as_str() {
        "echo" => {}
        "moshi" => match &args.model_dir {
            None => p.push("model_dir: required with model = \"moshi\"".into()),
            Some(dir) => {
                if let Err(e) = duet_models::moshi::ModelFiles::find(dir) {
                    p.push(format!("model_dir: {e}"));
                }
            }
        },
        other => p.push(format!("model: unknown model {other:?} (echo or moshi)")),
    }
    if let Some(dir) = &args.vad_model_dir {
        if let Err(e) = duet_models::silero::SileroVad::load(dir) {
            p.push(format!("vad_model_dir: {e}"));
        }
    }
    if let Some(dir) = &args.transcription_model_dir {
        if let Err(e) = duet_models::transcriber_kind(dir) {
            p.push(format!("transcription_model_dir: {e}"));
        }
    }
    if let Err(e) = duet_models::moshi::DeviceSpec::parse(&args.device) {
        p.push(format!("device: {e}"));
    }
    if let Err(e) = crate::server::check_auth(args) {
        p.push(format!("api_key: {e}"));
    }
    if args.udp_host.is_unspecified() && args.public_ip.is_none() {
        p.push(format!(
            "public_ip: required when udp_host is the wildcard {}",
            args.udp_host
        ));
    }
    let at_least = |p: &mut Vec<String>, key: &str, v: u64, min: u64| {
        if v < min {
            p.push(format!("{key}: {v} is below the minimum of {min}"));
        }
    };
    at_least(&mut p, "max_sessions", args.max_sessions as u64, 1);
    at_least(&mut p, "max_session_secs", args.max_session_secs, 1);
    at_least(&mut p, "session_idle_secs", args.session_idle_secs, 1);
    at_least(&mut p, "max_outbound_mib", args.max_outbound_mib as u64, 1);
    at_least(&mut p, "max_inbound_mib", args.max_inbound_mib as u64, 16);
    at_least(&mut p, "max_item_audio_secs", args.max_item_audio_secs, 1);
    at_least(&mut p, "max_connections", args.max_connections as u64, 1);
    at_least(
        &mut p,
        "http_head_timeout_secs",
        args.http_head_timeout_secs,
        1,
    );
    at_least(&mut p, "http_idle_secs", args.http_idle_secs, 1);
    at_least(&mut p, "ws_ping_secs", args.ws_ping_secs, 1);
    at_least(&mut p, "ws_idle_secs", args.ws_idle_secs, 1);
    at_least(
        &mut p,
        "ws_write_timeout_secs",
        args.ws_write_timeout_secs,
        1,
    );
    at_least(
        &mut p,
        "resume_journal_bytes",
        args.resume_journal_bytes as u64,
        1024,
    );
    at_least(
        &mut p,
        "max_client_secrets",
        args.max_client_secrets as u64,
        1,
    );
    if args.media_threads == Some(0) {
        p.push("media_threads: 0 is below the minimum of 1".into());
    }
    if args.model_slots == Some(0) {
        p.push("model_slots: 0 is below the minimum of 1".into());
    }
    if args.ws_idle_secs <= args.ws_ping_secs {
        p.push(format!(
            "ws_idle_secs: {} must be longer than ws_ping_secs ({}), or idle clients that answer pings are dropped",
            args.ws_idle_secs, args.ws_ping_secs
        ));
    }
    if args.expiry_warning_secs >= args.max_session_secs {
        p.push(format!(
            "expiry_warning_secs: {} must be shorter than max_session_secs ({})",
            args.expiry_warning_secs, args.max_session_secs
        ));
    }
    if args.admission_wait_ms > 600_000 {
        p.push(format!(
            "admission_wait_ms: {} is over the maximum of 600000 (10 minutes)",
            args.admission_wait_ms
        ));
    }
    p
}

/// The effective configuration as TOML, the API key redacted (unset values are left out).
pub fn effective(args: &ServeArgs) -> anyhow::Result<String> {
    let mut shown = args.clone();
    if shown.api_key.is_some() {
        shown.api_key = Some("<redacted>".into());
    }
    Ok(toml::to_string(&shown)?)
}

#[cfg(test)]
#[path = "config_file_tests.rs"]
mod tests;
