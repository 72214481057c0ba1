//! External clients for the tests that run real SDKs and browsers against Duet: picking the
//! interpreter (Python, Node) or browser, checking that what a script needs is installed (a
//! missing piece fails the test with directions, it never skips it), and running the script
//! with a time limit, its whole output shown when it fails.
//!
//! The `require_*` functions print what they found (versions, where an interpreter came
//! from), so a failing test's captured output names what it ran with.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::task::JoinHandle;

/// How long a check such as `node --version` or a Python import may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(120);

/// An external program a test runs, and where the choice of it came from.
pub struct Program {
    pub path: PathBuf,
    /// The environment variable that named it, `.venv`, `PATH` or `default`.
    pub source: &'static str,
    /// Set in the environment of every command made by [`Program::command`].
    env: &'static [(&'static str, &'static str)],
}

impl Program {
    /// `name`, looked up on PATH.
    pub fn on_path(name: &str) -> Self {
        Self::new(PathBuf::from(name), "PATH")
    }

    fn new(path: PathBuf, source: &'static str) -> Self {
        Self {
            path,
            source,
            env: &[],
        }
    }

    /// "path (from source)", for messages.
    pub fn label(&self) -> String {
        format!("{} (from {})", self.path.display(), self.source)
    }

    /// A command that runs this program (arguments still to add).
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.path);
        cmd.envs(self.env.iter().copied());
        cmd
    }
}

/// A path in the repository, given relative to its root.
pub fn repo_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// The value of the environment variable `var` as a program, unless it is unset or empty.
fn from_env(var: &'static str) -> Option<Program> {
    std::env::var_os(var)
        .filter(|p| !p.is_empty())
        .map(|p| Program::new(PathBuf::from(p), var))
}

/// Directions for when [`python`] lacks a module the Python tests need.
pub const PYTHON_HOW_TO_INSTALL: &str =
    "run ./scripts/test (it creates .venv with the test dependencies), or pip install -r \
     tests/python/requirements.txt into the Python named by DUET_TEST_PYTHON";

/// Python: `DUET_TEST_PYTHON`, else `.venv/bin/python` in the repository, else `python3` on
/// PATH. Its commands run with `PYTHONDONTWRITEBYTECODE=1` and `PYTHONUNBUFFERED=1`.
pub fn python() -> Program {
    let venv = repo_path(".venv/bin/python");
    let mut python = from_env("DUET_TEST_PYTHON").unwrap_or_else(|| {
        if venv.exists() {
            Program::new(venv, ".venv")
        } else {
            Program::on_path("python3")
        }
    });
    python.env = &[("PYTHONDONTWRITEBYTECODE", "1"), ("PYTHONUNBUFFERED", "1")];
    python
}

/// Node: `DUET_TEST_NODE`, else `node` on PATH.
pub fn node() -> Program {
    from_env("DUET_TEST_NODE").unwrap_or_else(|| Program::on_path("node"))
}

/// Chromium: the environment variable `var`, else `/usr/bin/chromium` (Debian's `chromium`).
pub fn chromium(var: &'static str) -> Program {
    from_env(var).unwrap_or_else(|| Program::new(PathBuf::from("/usr/bin/chromium"), "default"))
}

/// Python source run by [`require_python_modules`]: imports each `module` or `module:name`
/// in argv (getting `name` from the module) and prints "module version" for top-level ones.
const IMPORT_PROBE: &str = r#"
import importlib, sys
found = []
for spec in sys.argv[1:]:
    name, _, attr = spec.partition(":")
    module = importlib.import_module(name)
    if attr:
        getattr(module, attr)
    elif "." not in name:
        found.append(f"{name} {getattr(module, '__version__', '?')}")
print(", ".join(found))
"#;

/// Fails, with `hint` and Python's error, unless `python` imports every one of `modules`
/// (`"aiortc"`, or `"openai.types.realtime:RealtimeServerEvent"` for a name in a module);
/// returns (and prints) "module version, …" for the top-level ones.
pub async fn require_python_modules(python: &Program, modules: &[&str], hint: &str) -> String {
    let mut probe = python.command();
    probe.arg("-c").arg(IMPORT_PROBE).args(modules);
    let out = probe_output(probe, python, hint).await;
    assert!(
        out.status.success(),
        "the Python modules {} are not all importable by {}: {hint}\n--- stderr ---\n{}",
        modules.join(", "),
        python.label(),
        text(&out.stderr)
    );
    let versions = text(&out.stdout).trim().to_string();
    println!("{versions} via {}", python.label());
    versions
}

/// Fails, with `hint` and the program's error, unless `program --version` succeeds; returns
/// (and prints) the version it reports.
pub async fn require_version(program: &Program, hint: &str) -> String {
    let mut probe = program.command();
    probe.arg("--version");
    let out = probe_output(probe, program, hint).await;
    assert!(
        out.status.success(),
        "{} --version failed: {hint}\n{}",
        program.label(),
        text(&out.stderr)
    );
    let version = text(&out.stdout).trim().to_string();
    println!("{version} via {}", program.label());
    version
}

/// Fails, with `hint`, unless every dependency that `dir/package.json` pins is installed in
/// `dir/node_modules` at its pinned version; returns (and prints) "name@version" for each.
pub fn require_node_packages(dir: &Path, hint: &str) -> Vec<String> {
    let shown = dir.strip_prefix(repo_path("")).unwrap_or(dir).display();
    let manifest: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("package.json"))
            .unwrap_or_else(|e| panic!("{shown}/package.json: {e}")),
    )
    .expect("package.json is JSON");
    let deps = manifest["dependencies"].as_object().expect("dependencies");
    let mut out = Vec::new();
    for (name, want) in deps {
        let path = dir.join("node_modules").join(name).join("package.json");
        let have = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v["version"].as_str().map(str::to_string));
        match have {
            Some(v) if Some(v.as_str()) == want.as_str() => out.push(format!("{name}@{v}")),
            Some(v) => panic!("{name} {v} is installed in {shown}, but {want} is pinned: {hint}"),
            None => panic!("{name} is not installed in {shown}/node_modules: {hint}"),
        }
    }
    println!("{}", out.join(", "));
    out
}

/// Runs a probe of `program`; one that cannot start fails with `hint`.
async fn probe_output(probe: Command, program: &Program, hint: &str) -> Output {
    output(probe, PROBE_TIMEOUT)
        .await
        .unwrap_or_else(|e| panic!("cannot start {}: {e}; {hint}", program.label()))
}

/// An SDK script bounds itself at 60 s; this leaves room for the interpreter's start.
const SDK_SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `tests/python/<script> --base-url http://{addr}/v1`, a driver of the official `openai`
/// SDK's Realtime client; the SDK (with its realtime extra) must be importable.
pub async fn run_openai_python(script: &str, addr: SocketAddr) -> String {
    run_openai_python_env(script, addr, &[]).await
}

/// [`run_openai_python`] with extra environment variables for the script (set on its
/// command, never on this process: the other tests of the binary run beside it).
pub async fn run_openai_python_env(script: &str, addr: SocketAddr, env: &[(&str, &str)]) -> String {
    run_openai_python_at(script, &format!("http://{addr}/v1"), env).await
}

/// [`run_openai_python_env`] against `base_url` (an `https://` one, say).
pub async fn run_openai_python_at(script: &str, base_url: &str, env: &[(&str, &str)]) -> String {
    let python = python();
    require_python_modules(
        &python,
        &[
            "openai",
            "websockets",
            "openai.types.realtime:RealtimeServerEvent",
        ],
        PYTHON_HOW_TO_INSTALL,
    )
    .await;
    let mut cmd = python.command();
    cmd.arg(repo_path("tests/python").join(script))
        .arg("--base-url")
        .arg(base_url)
        .envs(env.iter().copied());
    run_script(cmd, SDK_SCRIPT_TIMEOUT).await
}

/// Runs `tests/python/<script> --base-url http://{addr}/v1` with Pipecat's own
/// `OpenAIRealtimeLLMService` (`pipecat-ai[openai]`, installed into the venv by
/// `./scripts/test`).
pub async fn run_pipecat_python(script: &str, addr: SocketAddr) -> String {
    let python = python();
    require_python_modules(
        &python,
        &[
            "pipecat",
            "pipecat.services.openai.realtime.llm:OpenAIRealtimeLLMService",
        ],
        PYTHON_HOW_TO_INSTALL,
    )
    .await;
    let mut cmd = python.command();
    cmd.arg(repo_path("tests/python").join(script))
        .arg("--base-url")
        .arg(format!("http://{addr}/v1"));
    run_script(cmd, SDK_SCRIPT_TIMEOUT).await
}

const AGENTS_HOW_TO_INSTALL: &str = "run ./scripts/test (it runs `npm ci --prefix tests/sdk-js`), \
     or run that command yourself; Node.js >= 20 must be on PATH or named by DUET_TEST_NODE";

/// Runs `tests/sdk-js/<script> --base-url http://{addr}` in Node, a driver of
/// `@openai/agents-realtime`; Node and `tests/sdk-js/node_modules` must be there.
pub async fn run_agents_node(script: &str, addr: SocketAddr) -> String {
    let dir = repo_path("tests/sdk-js");
    let node = node();
    require_version(&node, AGENTS_HOW_TO_INSTALL).await;
    require_node_packages(&dir, AGENTS_HOW_TO_INSTALL);
    let mut cmd = node.command();
    cmd.arg(dir.join(script))
        .arg("--base-url")
        .arg(format!("http://{addr}"))
        .current_dir(&dir);
    run_script(cmd, SDK_SCRIPT_TIMEOUT).await
}

/// Runs a client script to completion and returns its stdout. Panics, with the command, its
/// exit status and its whole stdout and stderr, when it fails or is still running after
/// `timeout` (it is killed then); prints that output and how long it took when it succeeds.
pub async fn run_script(cmd: Command, timeout: Duration) -> String {
    let what = describe(&cmd);
    let started = Instant::now();
    let out = output(cmd, timeout)
        .await
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(
        out.status.success(),
        "{what} failed ({})\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}",
        out.status
    );
    println!("{what}: {:.1} s\n{stdout}", started.elapsed().as_secs_f64());
    if !stderr.trim().is_empty() {
        println!("--- stderr ---\n{stderr}");
    }
    stdout
}

/// Runs `cmd` with stdin closed and its stdout and stderr captured; an error only when it
/// cannot be started. Panics, with what it printed so far, when it is still running after
/// `timeout` (it is killed then).
pub async fn output(mut cmd: Command, timeout: Duration) -> std::io::Result<Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let what = describe(&cmd);
    let mut child = cmd.spawn()?;
    let mut stdout = Capture::start(child.stdout.take());
    let mut stderr = Capture::start(child.stderr.take());
    // Like `wait_with_output`: the exit and both pipes' ends, all within the limit.
    let finished = tokio::time::timeout(timeout, async {
        let status = child.wait().await;
        stdout.finish().await;
        stderr.finish().await;
        status
    })
    .await;
    match finished {
        Ok(status) => Ok(Output {
            status: status.unwrap_or_else(|e| panic!("{what}: {e}")),
            stdout: stdout.take(),
            stderr: stderr.take(),
        }),
        Err(_) => {
            let _ = child.start_kill();
            // What is still in the pipes, unless something the program started holds them.
            let _ = tokio::time::timeout(Duration::from_secs(1), async {
                stdout.finish().await;
                stderr.finish().await;
            })
            .await;
            panic!(
                "{what} did not finish within {timeout:?} (killed)\n\
                 --- stdout ---\n{}\n--- stderr ---\n{}",
                text(&stdout.take()),
                text(&stderr.take())
            )
        }
    }
}

/// A child's pipe, read to its end in the background into a buffer that can be taken
/// before then.
struct Capture {
    buf: Arc<Mutex<Vec<u8>>>,
    /// The reader, until it has been seen to finish.
    task: Option<JoinHandle<()>>,
}

impl Capture {
    fn start(pipe: Option<impl AsyncRead + Unpin + Send + 'static>) -> Self {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = buf.clone();
        let task = tokio::spawn(async move {
            let Some(mut pipe) = pipe else { return };
            let mut chunk = [0u8; 8192];
            while let Ok(n @ 1..) = pipe.read(&mut chunk).await {
                sink.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        Self {
            buf,
            task: Some(task),
        }
    }

    /// Waits for the end of the pipe.
    async fn finish(&mut self) {
        if let Some(task) = &mut self.task {
            let _ = task.await;
            self.task = None;
        }
    }

    /// What was read so far.
    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut *self.buf.lock().unwrap())
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// Text of captured output.
fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The program and its arguments, for messages.
fn describe(cmd: &Command) -> String {
    let cmd = cmd.as_std();
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
