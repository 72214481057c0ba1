//! `duet check-config` as a user runs it: the effective configuration from flags, `DUET_*`
//! variables and `--config FILE` in that order of precedence (the API key redacted), and
//! exit codes with messages naming the key for every kind of mistake.

use std::process::Command;

fn duet(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_duet"));
    cmd.args(args);
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("DUET_")) {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn file(name: &str, text: &str) -> String {
    let p = std::env::temp_dir().join(format!("duet-check-{}-{name}.toml", std::process::id()));
    std::fs::write(&p, text).expect("write");
    p.display().to_string()
}

#[test]
fn flag_beats_env_beats_file_beats_default() {
    let f = file(
        "layers",
        "max_sessions = 7\nmax_calls = 9\nws_idle_secs = 90\napi_key = \"s3cret\"\n",
    );
    let (code, out, err) = duet(
        &["check-config", "--config", &f, "--max-calls", "3"],
        &[("DUET_MAX_SESSIONS", "5"), ("DUET_WS_IDLE_SECS", "61")],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("max_calls = 3\n"), "the flag: {out}");
    assert!(out.contains("max_sessions = 5\n"), "the env: {out}");
    assert!(out.contains("ws_idle_secs = 61\n"), "the env: {out}");
    assert!(
        out.contains("max_connections = 4096\n"),
        "the default: {out}"
    );
    assert!(out.contains("api_key = \"<redacted>\""), "{out}");
    assert!(!out.contains("s3cret"));
    // DUET_CONFIG names the file too.
    let (code, out, _) = duet(&["check-config"], &[("DUET_CONFIG", &f)]);
    assert_eq!(code, 0);
    assert!(out.contains("max_sessions = 7\n"), "{out}");
}

#[test]
fn every_kind_of_mistake_is_named() {
    for (text, code, want) in [
        (
            "model = \"moshi\"\nmodel_dir = \"/nonexistent/dir\"\n",
            1,
            "model_dir:",
        ),
        ("host = \"0.0.0.0\"\n", 1, "api_key:"),
        ("udp_host = \"0.0.0.0\"\n", 1, "public_ip:"),
        ("api_key = \"\"\n", 1, "api_key:"),
        ("ws_idle_secs = 5\n", 1, "ws_idle_secs:"),
        ("max_sessions = \"many\"\n", 2, "max_sessions"),
        ("colour = \"blue\"\n", 2, "colour"),
        ("[section]\n", 2, "section"),
        ("cors_origins = []\n", 2, "cors_origins"),
        ("cors_origins = [\"\"]\n", 2, "cors_origins"),
        ("api_key = [\"a\", \"b\"]\n", 2, "api_key"),
    ] {
        let f = file("mistake", text);
        let (got, _, err) = duet(&["check-config", "--config", &f], &[]);
        assert_eq!(got, code, "{text}: {err}");
        assert!(err.contains(want), "{text}: {err}");
    }
    let (code, _, err) = duet(&["check-config", "--config", "/nonexistent.toml"], &[]);
    assert_eq!(code, 2);
    assert!(err.contains("/nonexistent.toml"), "{err}");
}

#[test]
fn speech_model_directories_are_checked_and_name_the_command_that_makes_them() {
    let empty = std::env::temp_dir().join(format!("duet-check-{}-empty", std::process::id()));
    std::fs::create_dir_all(&empty).expect("mkdir");
    let empty = empty.display().to_string();
    let (code, _, err) = duet(
        &[
            "check-config",
            "--vad-model-dir",
            &empty,
            "--transcription-model-dir",
            &empty,
        ],
        &[],
    );
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("vad_model_dir:") && err.contains("silero_vad_16k.safetensors"),
        "{err}"
    );
    assert!(
        err.contains("transcription_model_dir:") && err.contains("tokenizer.json"),
        "{err}"
    );
    assert!(err.contains("scripts/install-models"), "{err}");
}

#[test]
fn a_syntax_error_names_line_and_column_never_the_secret() {
    let f = file("syntax", "port = 0\napi_key = sk-live-abc123\n");
    for cmd in ["check-config", "serve"] {
        let (code, out, err) = duet(&[cmd, "--config", &f], &[]);
        assert_eq!(code, 2, "{cmd}: {err}");
        assert!(
            !err.contains("sk-live") && !out.contains("sk-live"),
            "{cmd}: {err}"
        );
        assert!(err.contains(&f), "{cmd}: {err}");
        assert!(err.contains("line 2, column 11"), "{cmd}: {err}");
    }
}

#[test]
fn it_says_where_each_stage_runs() {
    let (code, _, err) = duet(
        &[
            "check-config",
            "--model",
            "cascade",
            "--llm-url",
            "https://api.openai.com/v1",
            "--llm-model",
            "gpt-4o-mini",
            "--stt-url",
            "https://api.groq.com/openai/v1",
            "--stt-model",
            "whisper-large-v3",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "speech to text: remote, https://api.groq.com/openai/v1 (model whisper-large-v3)"
        ),
        "{err}"
    );
    assert!(
        err.contains("LLM: remote, https://api.openai.com/v1 (model gpt-4o-mini)"),
        "{err}"
    );
    assert!(err.contains("text to speech: none"), "{err}");
    let (code, _, err) = duet(&["check-config", "--tts-url", "ftp://voice"], &[]);
    assert_eq!(code, 1);
    assert!(err.contains("tts_url:"), "{err}");
}
