use std::path::PathBuf;

use super::*;
use crate::config::Command;

/// What duet.example.toml must say: every flag, its help as comments and a commented
/// `key = value` line with its default (or an example where it has none).
fn example() -> String {
    let cmd = ServeArgs::command();
    let mut out = String::from(
        "# duet.example.toml: every `duet serve` option as a config-file key, commented out.\n\
         # Use it with `duet serve --config duet.toml` (or DUET_CONFIG); flags and DUET_*\n\
         # variables win over the file. `duet check-config --config duet.toml` checks it.\n\
         # Written by `DUET_WRITE_EXAMPLE=1 cargo test --lib example`; a test keeps it in sync.\n",
    );
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if id == "config" || arg.get_long().is_none() {
            continue;
        }
        out.push('\n');
        let help = arg
            .get_long_help()
            .or(arg.get_help())
            .map(ToString::to_string)
            .unwrap_or_default();
        for line in textwrap(&help, 88) {
            out.push_str(&format!("# {line}\n").replace("# \n", "#\n"));
        }
        if let Some(env) = arg.get_env() {
            out.push_str(&format!("# (env {})\n", env.to_string_lossy()));
        }
        out.push_str(&format!("# {id} = {}\n", example_value(arg)));
    }
    out
}

fn example_value(arg: &clap::Arg) -> String {
    let id = arg.get_id().as_str();
    let default: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().to_string())
        .collect();
    if matches!(arg.get_action(), ArgAction::SetTrue) {
        return "false".into();
    }
    let quoted = |s: &str| {
        if s.parse::<f64>().is_ok() {
            s.to_string()
        } else {
            format!("\"{s}\"")
        }
    };
    match (id, default.first()) {
        (_, Some(d)) => quoted(d),
        ("model_dir", None) => "\"/srv/models/moshi\"".into(),
        ("api_key", None) => "\"change-me\"".into(),
        ("public_ip", None) => "\"203.0.113.10\"".into(),
        ("cors_origins", None) => "[\"https://app.example.com\"]".into(),
        ("tls_cert", None) => "\"/etc/duet/tls/fullchain.pem\"".into(),
        ("tls_key", None) => "\"/etc/duet/tls/privkey.pem\"".into(),
        ("model_slots", None) => "8".into(),
        ("model_seed", None) => "42".into(),
        ("media_threads", None) => "2".into(),
        ("vad_model_dir", None) => "\"/srv/models/silero-vad\"".into(),
        ("turn_model_dir", None) => "\"/srv/models/smart-turn-v3.2\"".into(),
        ("turn_threads", None) => "2".into(),
        ("transcription_model_dir", None) => "\"/srv/models/whisper-tiny.en\"".into(),
        ("transcription_streams", None) => "256".into(),
        ("memory_budget_mib", None) => "16384".into(),
        ("llm_url", None) => "\"http://127.0.0.1:8000/v1\"".into(),
        ("stt_url", None) => "\"https://api.openai.com/v1\"".into(),
        ("tts_url", None) => "\"https://api.openai.com/v1\"".into(),
        ("tts_api_key", None) => "\"change-me\"".into(),
        ("stt_api_key", None) => "\"change-me\"".into(),
        ("llm_api_key", None) => "\"change-me\"".into(),
        ("tts_model_dir", None) => "\"/srv/models/piper-en_US-joe-medium\"".into(),
        ("models_dir", None) => "\"/srv/models\"".into(),
        ("llm_model_dir", None) => "\"/srv/models/smollm2-135m-instruct\"".into(),
        ("sip_listen", None) => "\"127.0.0.1:5060\"".into(),
        ("sip_public_addr", None) => "\"203.0.113.10\"".into(),
        ("sip_webhook_url", None) => "\"http://127.0.0.1:8080/sip\"".into(),
        ("sip_webhook_secret", None) => "\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"".into(),
        ("sip_allow", None) => "[\"10.0.0.0/8\"]".into(),
        ("sip_rtp_ports", None) => "\"40000-40999\"".into(),
        ("cluster_redis", None) => "\"redis://:change-me@10.0.0.5:6379\"".into(),
        ("node_id", None) => "\"duet-0\"".into(),
        ("node_url", None) => "\"http://10.0.1.7:8080\"".into(),
        ("public_url", None) => "\"https://duet-0.example.com\"".into(),
        (other, None) => panic!("no example value for {other}"),
    }
}

fn textwrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    for para in text.split("\n\n") {
        let mut line = String::new();
        for word in para.split_whitespace() {
            if !line.is_empty() && line.len() + 1 + word.len() > width {
                lines.push(std::mem::take(&mut line));
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        lines.push(line);
        lines.push(String::new());
    }
    lines.pop();
    lines
}

fn example_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("duet.example.toml")
}

#[test]
fn example_lists_every_flag_as_it_is() {
    let want = example();
    if std::env::var_os("DUET_WRITE_EXAMPLE").is_some() {
        std::fs::write(example_path(), &want).expect("write the example");
    }
    let got = std::fs::read_to_string(example_path()).expect("duet.example.toml");
    assert_eq!(
        got, want,
        "duet.example.toml is out of date: DUET_WRITE_EXAMPLE=1 cargo test --lib example"
    );
}

fn temp(name: &str, text: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("duet-config-{}-{name}.toml", std::process::id()));
    std::fs::write(&p, text).expect("write");
    p
}

fn serve_with(path: &Path, flags: &[&str]) -> anyhow::Result<ServeArgs> {
    let mut argv: Vec<OsString> = vec!["duet".into(), "serve".into()];
    argv.extend(flags.iter().map(OsString::from));
    argv.push(format!("--config={}", path.display()).into());
    match parse(argv)?.command {
        Command::Serve(a) => Ok(a),
        _ => panic!("serve"),
    }
}

#[test]
fn models_dir_fills_the_model_flags_not_given() {
    let root = std::env::temp_dir().join(format!("duet-models-dir-{}", std::process::id()));
    for d in ["silero-vad", "piper-en_US-joe-medium"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let root_s = root.display().to_string();
    let cli = parse(
        [
            "duet",
            "serve",
            "--models-dir",
            &root_s,
            "--tts-model-dir",
            "/elsewhere/voice",
        ]
        .map(OsString::from)
        .to_vec(),
    )
    .unwrap();
    let Command::Serve(a) = cli.command else {
        panic!("serve")
    };
    assert_eq!(a.speech.vad_model_dir, Some(root.join("silero-vad")));
    assert_eq!(a.speech.transcription_model_dir, None, "absent: left unset");
    assert_eq!(
        a.speech.tts_model_dir,
        Some(PathBuf::from("/elsewhere/voice")),
        "given: kept"
    );
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn the_example_uncommented_is_a_valid_configuration() {
    let text = std::fs::read_to_string(example_path()).expect("example");
    let keys: String = text
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| l.contains(" = ") && !l.starts_with('('))
        .map(|l| format!("{l}\n"))
        .collect();
    let p = temp("example", &keys);
    let a = serve_with(&p, &[]).expect("the example parses");
    assert_eq!(a.limits.max_sessions, 256);
    assert_eq!(a.auth.api_key.as_deref(), Some("change-me"));
    assert_eq!(
        a.http.cors_origins,
        vec!["https://app.example.com".to_string()]
    );
    // The example's model directories are placeholders: checked, and only they are missing.
    let (dirs, others): (Vec<String>, Vec<String>) = problems(&a).into_iter().partition(|p| {
        p.starts_with("vad_model_dir:")
            || p.starts_with("turn_model_dir:")
            || p.starts_with("transcription_model_dir:")
            || p.starts_with("tts_model_dir:")
            || p.starts_with("models_dir:")
            || p.starts_with("tls_cert")
    });
    assert!(others.is_empty(), "{others:?}");
    assert_eq!(dirs.len(), 6, "{dirs:?}");
}

#[test]
fn flags_win_over_the_file_and_the_file_over_defaults() {
    let p = temp("layers", "max_sessions = 7\nport = 9999\ninsecure-no-auth = true\ncors_origins = [\"https://a\", \"https://b\"]\n");
    let a = serve_with(&p, &["--port", "1234"]).expect("parses");
    assert_eq!(a.http.port, 1234, "the flag wins");
    assert_eq!(a.limits.max_sessions, 7, "the file beats the default");
    assert!(a.auth.insecure_no_auth);
    assert_eq!(a.http.cors_origins.len(), 2);
    assert_eq!(a.media.max_calls, 100, "the default");
}

#[test]
fn bad_files_name_the_key() {
    for (text, want) in [
        ("max_sessions = \"lots\"\n", "max_sessions"),
        ("no_such_option = 1\n", "no_such_option"),
        ("insecure_no_auth = 3\n", "insecure_no_auth"),
        ("port = 70000\n", "port"),
        ("log_format = \"xml\"\n", "log_format"),
        ("max_sessions = \n", "not valid TOML"),
        // Ranges are stated on the flags: the file's value goes through the same parser.
        ("max_inbound_mib = 4\n", "4 is below the minimum of 16"),
        ("memory_budget_mib = 16\n", "16 is below the minimum of 32"),
        ("ws_ping_secs = 0\n", "0 is below the minimum of 1"),
        ("admission_wait_ms = 600001\n", "over the maximum of 600000"),
    ] {
        let p = temp("bad", text);
        let e = format!("{:#}", serve_with(&p, &[]).expect_err(text));
        assert!(e.contains(want), "{text}: {e}");
        assert!(
            e.contains(&p.display().to_string()) || want == "port" || want == "log_format",
            "{text}: {e}"
        );
    }
}

#[test]
fn check_config_names_each_problem() {
    let p = temp("problems", "model = \"moshi\"\nws_idle_secs = 10\nws_ping_secs = 20\nexpiry_warning_secs = 4000\nhost = \"0.0.0.0\"\ndevice = \"tpu\"\n");
    let a = serve_with(&p, &[]).expect("parses");
    let found = problems(&a).join("\n");
    for key in [
        "model_dir:",
        "ws_idle_secs:",
        "expiry_warning_secs:",
        "api_key:",
        "device:",
    ] {
        assert!(found.contains(key), "{key} in {found}");
    }
    let mut with_key = a;
    with_key.auth.api_key = Some("secret-value".into());
    let shown = effective(&with_key).expect("toml");
    assert!(shown.contains("api_key = \"<redacted>\""), "{shown}");
    assert!(!shown.contains("secret-value"));
    assert!(shown.contains("max_sessions = 256"));
}

#[test]
fn a_syntax_error_gives_line_and_column_never_the_text() {
    for (text, at) in [
        // An unquoted value: the toml crate's own message quotes the line.
        (
            "port = 8080\napi_key = sk-live-abc123\n",
            "line 2, column 11",
        ),
        (
            "api_key = \"sk-live-abc123\nport = 1\n",
            "line 1, column 26",
        ),
        (
            "api_key = 'sk-live-abc123' sk-live-abc123\n",
            "line 1, column 28",
        ),
        // A key defined twice: the message would name it.
        (
            "\"sk-live-abc123\" = 1\n\"sk-live-abc123\" = 2\n",
            "line 2, column 1",
        ),
    ] {
        let p = temp("syntax", text);
        let e = format!("{:#}", serve_with(&p, &[]).expect_err(text));
        assert!(!e.contains("sk-live"), "{text:?}: {e}");
        assert!(e.contains(at), "{text:?}: {e}");
        assert!(e.contains(&p.display().to_string()), "{text:?}: {e}");
        assert!(e.contains("not valid TOML"), "{text:?}: {e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

#[test]
fn arrays_only_for_list_flags() {
    for (text, want) in [
        ("api_key = [\"a\", \"b\"]\n", "api_key"),
        ("max_sessions = [7]\n", "max_sessions"),
        ("model = []\n", "model"),
    ] {
        let p = temp("array-scalar", text);
        let e = format!("{:#}", serve_with(&p, &[]).expect_err(text));
        assert!(e.contains(&format!("key `{want}`")), "{text}: {e}");
        assert!(e.contains("one value, not a list"), "{text}: {e}");
        assert!(e.contains(&p.display().to_string()), "{text}: {e}");
    }
    // A list flag takes an array, each element a value of its own, or one string as on the
    // command line.
    let p = temp(
        "array-list",
        "cors_origins = [\"https://a\", \"https://b\"]\n",
    );
    let a = serve_with(&p, &[]).expect("a list");
    assert_eq!(a.http.cors_origins, ["https://a", "https://b"]);
    let p = temp("scalar-list", "cors_origins = \"https://a,https://b\"\n");
    let a = serve_with(&p, &[]).expect("one string");
    assert_eq!(a.http.cors_origins, ["https://a", "https://b"]);
}

#[test]
fn an_empty_list_is_refused_not_one_empty_value() {
    let p = temp("empty-list", "cors_origins = []\n");
    let e = format!("{:#}", serve_with(&p, &[]).expect_err("empty"));
    assert!(e.contains("key `cors_origins`"), "{e}");
    assert!(e.contains(&p.display().to_string()), "{e}");
    assert!(e.contains("empty list"), "{e}");
    assert!(e.contains("leave the key out for the default"), "{e}");
}

#[test]
fn list_elements_are_non_empty_scalars() {
    for (text, want) in [
        ("cors_origins = [\"\"]\n", "element 1 is an empty string"),
        (
            "cors_origins = [\"https://a\", \"\"]\n",
            "element 2 is an empty string",
        ),
        (
            "cors_origins = [\"https://a\", [\"https://b\"]]\n",
            "element 2 is an array",
        ),
        (
            "cors_origins = [{ origin = \"https://a\" }]\n",
            "element 1 is a table",
        ),
        ("cors_origins = [1979-05-27]\n", "element 1 is a datetime"),
        // The flag splits each value at commas: an element with one would be two values
        // (or an empty one).
        (
            "cors_origins = [\"https://a,\"]\n",
            "element 1 contains `,`",
        ),
        ("cors_origins = \"\"\n", "an empty value"),
        ("cors_origins = \"https://a,\"\n", "an empty value"),
        (
            "cors_origins = \"https://a,,https://b\"\n",
            "an empty value",
        ),
    ] {
        let p = temp("elements", text);
        let e = format!("{:#}", serve_with(&p, &[]).expect_err(text));
        assert!(e.contains("key `cors_origins`"), "{text}: {e}");
        assert!(e.contains(want), "{text}: {want} in {e}");
        assert!(e.contains(&p.display().to_string()), "{text}: {e}");
    }
}

#[test]
fn a_key_in_both_spellings_is_refused() {
    // A list flag's values would be appended to each other unseen.
    for (text, key) in [
        (
            "cors_origins = [\"https://a\"]\ncors-origins = [\"https://b\"]\n",
            "cors_origins",
        ),
        ("max_sessions = 7\nmax-sessions = 8\n", "max_sessions"),
    ] {
        let p = temp("spellings", text);
        let e = format!("{:#}", serve_with(&p, &[]).expect_err(text));
        assert!(e.contains(&format!("key `{key}`")), "{e}");
        assert!(e.contains("given twice"), "{e}");
    }
}

#[test]
fn an_overridden_key_is_not_read_from_the_file() {
    // The flag wins before the file's value is looked at, as for every key.
    let p = temp(
        "overridden",
        "max_sessions = 7\ncors_origins = [\"https://a\"]\n",
    );
    let a = serve_with(&p, &["--cors-origins", "https://b,https://c"]).expect("parses");
    assert_eq!(a.http.cors_origins, ["https://b", "https://c"]);
    assert_eq!(a.limits.max_sessions, 7);
}

#[test]
fn only_list_flags_take_arrays() {
    let cmd = ServeArgs::command();
    let kinds: Vec<(&str, Kind)> = cmd
        .get_arguments()
        .map(|a| (a.get_id().as_str(), kind(a)))
        .collect();
    let of = |id: &str| kinds.iter().find(|(i, _)| *i == id).map(|(_, k)| *k);
    assert_eq!(
        of("cors_origins"),
        Some(Kind::List {
            delimiter: Some(',')
        })
    );
    assert_eq!(of("insecure_no_auth"), Some(Kind::Switch));
    assert_eq!(of("api_key"), Some(Kind::One));
    let lists: Vec<&str> = kinds
        .iter()
        .filter(|(_, k)| matches!(k, Kind::List { .. }))
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(
        lists,
        ["cors_origins", "sip_allow"],
        "a new list flag: add it to the fuzz target's kinds"
    );
}

/// The user documentation: `README.md` and every page under `docs/`.
fn user_docs() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut text = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    if let Ok(pages) = std::fs::read_dir(root.join("docs")) {
        for page in pages.flatten() {
            if page.path().extension().is_some_and(|e| e == "md") {
                text += &std::fs::read_to_string(page.path()).unwrap_or_default();
            }
        }
    }
    text
}

#[test]
fn every_serve_flag_and_its_variable_are_documented() {
    let docs = user_docs();
    let mut missing = Vec::new();
    for arg in ServeArgs::command().get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if !docs.contains(&format!("`--{long}")) {
            missing.push(format!("--{long}"));
        }
        if let Some(env) = arg.get_env() {
            let env = env.to_string_lossy();
            if !docs.contains(&format!("`{env}`")) {
                missing.push(env.to_string());
            }
        }
    }
    assert!(missing.is_empty(), "not in the docs: {missing:?}");
}

#[test]
fn every_error_code_is_in_the_docs_error_table() {
    // The codes the protocol crate defines, and those the models' answers fail with
    // (`pub const NAME: &str = "code";`; file names beside them are not codes).
    let sources = [
        include_str!("../protocol/src/error.rs"),
        include_str!("../models/src/llama/mod.rs"),
        include_str!("../models/src/cascade/mod.rs"),
    ];
    let is_code =
        |v: &&str| !v.is_empty() && v.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    let codes: Vec<&str> = sources
        .iter()
        .flat_map(|source| source.lines())
        .filter(|l| l.trim_start().starts_with("pub const ") && l.contains(": &str = "))
        .filter_map(|l| l.split('"').nth(1))
        .filter(is_code)
        .collect();
    assert!(codes.len() > 37, "{codes:?}");
    assert!(
        codes.contains(&"llm_queue_full") && codes.contains(&"tts_error"),
        "{codes:?}"
    );
    let docs = user_docs();
    // A row of an error table names its codes in its first cell.
    let rows: Vec<&str> = docs
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split(" | ").next())
        .collect();
    let missing: Vec<&&str> = codes
        .iter()
        .filter(|c| !rows.iter().any(|r| r.contains(&format!("`{c}`"))))
        .collect();
    assert!(
        missing.is_empty(),
        "error codes not in an error table: {missing:?}"
    );
}

#[test]
fn every_http_error_code_is_in_the_api_error_table() {
    let api = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/api.md"),
    )
    .expect("docs/api.md");
    // A row of an error table names its codes in its first cell.
    let rows: Vec<&str> = api
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| l.split(" | ").next())
        .collect();
    let missing: Vec<&str> = crate::error::Code::ALL
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !rows.iter().any(|r| r.contains(&format!("`{c}`"))))
        .collect();
    assert!(
        missing.is_empty(),
        "HTTP error codes not in docs/api.md's error tables: {missing:?}"
    );
}

#[test]
fn serve_refuses_a_value_outside_a_flags_range() {
    use clap::Parser;
    for (flag, value, want) in [
        ("--ws-ping-secs", "0", "0 is below the minimum of 1"),
        ("--max-sessions", "0", "0 is below the minimum of 1"),
        ("--sip-decision-secs", "0", "0 is below the minimum of 1"),
        ("--llm-max-tokens", "0", "0 is below the minimum of 1"),
        (
            "--resume-journal-bytes",
            "100",
            "100 is below the minimum of 1024",
        ),
        ("--model-slots", "0", "0 is below the minimum of 1"),
        (
            "--admission-wait-ms",
            "700000",
            "over the maximum of 600000",
        ),
        ("--max-sessions", "many", "not a whole number"),
    ] {
        let e = crate::config::Cli::try_parse_from(["duet", "serve", flag, value])
            .expect_err(flag)
            .to_string();
        assert!(e.contains(want) && e.contains(flag), "{flag} {value}: {e}");
    }
    let ok = crate::config::Cli::try_parse_from(["duet", "serve", "--model-slots", "1"]);
    assert!(ok.is_ok());
}
