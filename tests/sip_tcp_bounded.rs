//! SIP over TCP is bounded: 400 connections from a source `--sip-allow` refuses are closed at
//! once (the server holds no descriptor for them, `/health` answers throughout, and the log
//! stays small); an allowed source gets at most `--sip-max-tcp-per-ip` connections held;
//! an allowed but silent connection is closed after the 10 s first-bytes deadline.

use std::io::{BufRead, BufReader, Read};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sip_tcp_connections_are_capped_and_refused_ones_closed() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let sip = SocketAddr::from(([127, 0, 0, 1], port));
    let log_path = std::env::temp_dir().join(format!("duet-sip-tcp-{}.log", std::process::id()));
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_duet"))
        .args(["serve", "--port", "0", "--sip-listen", &sip.to_string()])
        .args(["--sip-webhook-url", "http://127.0.0.1:9/hook"])
        .args([
            "--sip-webhook-secret",
            SECRET,
            "--sip-allow",
            "127.0.0.2/32",
        ])
        .args(["--sip-max-tcp-per-ip", &PER_IP.to_string()])
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
    let pid = child.id();
    let _server = Logged(child);
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
        std::io::Write::write_all(&mut s, b"\r\n\r\n").unwrap();
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
