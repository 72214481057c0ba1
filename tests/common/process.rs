//! A `duet serve` child process (for what an in-process server cannot show: its own memory,
//! signals, exiting).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `duet serve`; killed on drop.
pub struct ServerProcess {
    pub child: Child,
    pub addr: SocketAddr,
}

impl ServerProcess {
    /// Starts `duet serve --port 0 <extra>` and waits for its address.
    pub fn spawn(extra: &[&str]) -> Self {
        Self::spawn_env(extra, &[])
    }

    /// [`ServerProcess::spawn`] with extra environment variables for the child.
    pub fn spawn_env(extra: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_duet"))
            .args(["serve", "--port", "0"])
            .args(extra)
            .env("DUET_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("duet serve starts");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("duet prints its address");
        let addr = line
            .trim()
            .rsplit("://")
            .next()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        Self { child, addr }
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// The most resident memory so far (high-water mark) in KiB.
    pub fn peak_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    fn status_kib(&self, key: &str) -> u64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).expect("proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .expect("a memory figure")
    }

    /// Sends a signal (e.g. `libc::SIGTERM`).
    pub fn signal(&self, sig: i32) {
        let pid = libc::pid_t::try_from(self.pid()).expect("pid");
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let r = unsafe { libc::kill(pid, sig) };
        assert_eq!(r, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Waits up to `limit` for the process to exit; returns how long it took.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<Duration> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Ok(Some(_)) = self.child.try_wait() {
                return Some(start.elapsed());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
