//! SIP over TCP is bounded: 400 connections from a source `--sip-allow` refuses are closed at
//! once (the server holds no descriptor for them, `/health` answers throughout, and the log
//! stays small); an allowed source gets at most `--sip-max-tcp-per-ip` connections held;
//! an allowed but silent connection is closed after the 10 s first-bytes deadline.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::sip::SECRET;
use crate::sip_flood_kit::{fds, health_ms};

const REFUSED: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const ALLOWED: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
const REFUSED_CONNECTIONS: usize = 400;
const PER_IP: usize = 8;

/// A `duet serve` child whose log goes to a file; killed on drop.
struct Logged(Child);

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A TCP connection from `ip` to `to` (std, blocking, with a read timeout).
async fn connect_from(ip: IpAddr, to: SocketAddr) -> TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(SocketAddr::new(ip, 0)).unwrap();
    let stream = sock.connect(to).await.unwrap().into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    stream
}

/// Whether the server closed `stream` (EOF or reset) within `wait`.
fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    let until = Instant::now() + wait;
    let mut buf = [0u8; 512];
    while Instant::now() < until {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return true,
        }
    }
    false
}

/// `duet serve` with SIP on a free port and `extra` flags, its log in a file, its open files
/// limited to `nofile`: the child, its HTTP and SIP addresses, and the log's path.
fn spawn_logged(extra: &[&str], nofile: u32) -> (Logged, SocketAddr, SocketAddr, PathBuf) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let sip = SocketAddr::from(([127, 0, 0, 1], port));
    let log_path =
        std::env::temp_dir().join(format!("duet-sip-tcp-{}-{port}.log", std::process::id()));
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new("sh")
        .args(["-c", &format!("ulimit -n {nofile} && exec \"$0\" \"$@\"")])
        .arg(env!("CARGO_BIN_EXE_duet"))
        .args(["serve", "--port", "0", "--sip-listen", &sip.to_string()])
        .args(["--sip-webhook-url", "http://127.0.0.1:9/hook"])
        .args(["--sip-webhook-secret", SECRET])
        .args(extra)
        .env("DUET_LOG", "info,rsipstack=warn")
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .expect("duet serve starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("duet prints its address");
    let addr: SocketAddr = line
        .trim()
        .rsplit("http://")
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    (Logged(child), addr, sip, log_path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sip_tcp_connections_are_capped_and_refused_ones_closed() {
    let per_ip = PER_IP.to_string();
    let (server, addr, sip, log_path) = spawn_logged(
        &[
            "--sip-allow",
            "127.0.0.2/32",
            "--sip-max-tcp-per-ip",
            &per_ip,
        ],
        4096,
    );
    let pid = server.0.id();
    let baseline = fds(pid);

    let mut refused = Vec::new();
    for _ in 0..REFUSED_CONNECTIONS {
        refused.push(connect_from(REFUSED, sip).await);
    }
    let mut still_open = 0;
    for mut s in refused.into_iter().take(20) {
        if !closed_within(&mut s, Duration::from_secs(2)) {
            still_open += 1;
        }
    }
    assert_eq!(still_open, 0, "refused connections are closed at accept");
    let held = fds(pid).saturating_sub(baseline);
    let health = health_ms(addr).await;
    assert!(health.is_some_and(|ms| ms < 1000), "/health: {health:?}");
    assert!(held < 20, "the server holds {held} more descriptors");

    // An allowed source: PER_IP connections that spoke are held, more are closed at once.
    let mut spoke: Vec<TcpStream> = Vec::new();
    for _ in 0..PER_IP + 4 {
        let mut s = connect_from(ALLOWED, sip).await;
        s.write_all(b"\r\n\r\n").unwrap();
        spoke.push(s);
    }
    let closed = spoke
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_millis(600)))
        .filter(|&c| c)
        .count();
    assert_eq!(
        closed, 4,
        "past --sip-max-tcp-per-ip {PER_IP}, closed at once"
    );
    drop(spoke);

    // An allowed but silent connection: closed after the 10 s deadline.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut silent = connect_from(ALLOWED, sip).await;
    let start = Instant::now();
    assert!(
        closed_within(&mut silent, Duration::from_secs(15)),
        "a silent connection is closed"
    );
    let after = start.elapsed();
    assert!(after >= Duration::from_secs(8), "closed after {after:?}");

    let log_bytes = std::fs::metadata(&log_path).map_or(0, |m| m.len());
    eprintln!("held +{held} fds; silent closed after {after:?}; log {log_bytes} bytes");
    let _ = std::fs::remove_file(&log_path);
    assert!(log_bytes < 64 * 1024, "the log grew to {log_bytes} bytes");
}

/// Out of file descriptors (`ulimit -n 64`, 64 SIP TCP connections from four allowed
/// sources, each under the per-source cap): accepting fails with `EMFILE`; the loop backs off
/// and logs it once, not once per failure (rsipstack's own loop spun, writing 100–200 MB of
/// log a second), and once the connections close `/health` answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_descriptors_the_sip_accept_loop_backs_off_quietly() {
    let (_server, addr, sip, log_path) = spawn_logged(&["--sip-allow", "127.0.0.0/8"], 64);
    let mut held = Vec::new();
    for source in 2..6u8 {
        for _ in 0..PER_IP * 2 {
            let mut s = connect_from(IpAddr::V4(Ipv4Addr::new(127, 0, 0, source)), sip).await;
            let _ = s.write_all(b"\r\n\r\n");
            held.push(s);
        }
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let log_bytes = std::fs::metadata(&log_path).map_or(0, |m| m.len());
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    drop(held);
    let mut health = None;
    for _ in 0..50 {
        health = health_ms(addr).await;
        if health.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = std::fs::remove_file(&log_path);
    eprintln!("log {log_bytes} bytes after 3 s out of descriptors; /health then {health:?} ms");
    assert!(log_bytes < 64 * 1024, "the log grew to {log_bytes} bytes");
    assert_eq!(
        log.matches("SIP TCP accept failed").count(),
        1,
        "out of descriptors, said once: {log}"
    );
    assert!(
        health.is_some(),
        "/health answers once the connections close"
    );
}
