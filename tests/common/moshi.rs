//! A tiny Moshi directory written by the real `duet moshi-tiny` command.

use std::path::PathBuf;

/// Runs `duet moshi-tiny --out <tmp>/<tag> --seed 42` and returns the directory.
pub fn tiny_moshi_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("duet-tiny-moshi-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(["moshi-tiny", "--out"])
        .arg(&dir)
        .args(["--seed", "42"])
        .output()
        .expect("duet moshi-tiny runs");
    assert!(
        out.status.success(),
        "duet moshi-tiny failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("--model moshi --model-dir"));
    dir
}

/// An in-process `duet serve --model moshi` on a fresh tiny directory (removed on drop).
pub struct TinyMoshiServer {
    pub addr: std::net::SocketAddr,
    pub dir: PathBuf,
}

impl Drop for TinyMoshiServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Writes a tiny Moshi directory (`tag` names it) and starts a server on it.
pub async fn tiny_moshi_server(tag: &str) -> TinyMoshiServer {
    let dir = tiny_moshi_dir(tag);
    let flags = moshi_flags(&dir);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let addr = super::server(&flags).await;
    TinyMoshiServer { addr, dir }
}

/// `duet serve` flags for that directory.
fn moshi_flags(dir: &std::path::Path) -> Vec<String> {
    [
        "--model",
        "moshi",
        "--model-dir",
        dir.to_str().expect("utf-8 temp path"),
        "--model-seed",
        "1",
        "--model-slots",
        "2",
    ]
    .map(String::from)
    .to_vec()
}
