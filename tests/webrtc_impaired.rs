//! A WebRTC call through 5 % loss and 0..=30 ms jitter each way (the userspace relay of
//! `duet_client::impair`): ICE, DTLS and SCTP get through by retransmission, frames keep arriving
//! at about the rate the loss leaves, the echo answers and barge-in cancels. Also (ignored by
//! default) the relay alone at 100 calls' packet rate.

use crate::common;
use common::*;
use duet_client::impair::{Impairment, Relay};
use duet_client::poll::readable;
use duet_client::rtc::{ClientOptions, RtcClient};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

const LOSS: f64 = 0.05;
const JITTER: Duration = Duration::from_millis(30);
/// Events may wait for an SCTP retransmission (or a few) on top of the usual time.
const T: Duration = Duration::from_secs(20);
/// The frame count window. The server sends 50 frames/s and 5 % are lost, so a window of
/// n = 50·W frames receives Binomial(n, 0.95): mean 47.5·W, σ = √(0.0475·n), 0.2 frames/s
/// over 60 s. The assertion (≥ 46/s) sits 7.5 σ below that mean, so the seeded loss never
/// fails it, and leaves 1.5 s of the minute for a server that skips slots on a loaded
/// machine (its pacing is measured by the soak benchmark, not here); a stalled call (no
/// frames for seconds) still fails it, and so does any 10 s with under 400 frames.
const WINDOW: Duration = Duration::from_secs(60);

fn impaired() -> ClientOptions {
    ClientOptions {
        impair: Some(Impairment::new(LOSS, JITTER, 42)),
        ..Default::default()
    }
}

/// Speaks `secs` of voice then 0.8 s of silence; returns `response.created`.
async fn speak_turn(c: &mut RtcClient, secs: f32) -> serde_json::Value {
    let mut audio = voiced48(secs);
    audio.extend(vec![0.0; 48_000 * 8 / 10]);
    c.speak(&audio);
    c.until("input_audio_buffer.speech_started", T)
        .await
        .unwrap();
    c.until("response.created", T).await.unwrap().0
}

async fn echo_turn_is_answered(c: &mut RtcClient) {
    // From before speaking: the server sends silence while it listens, and events can lag
    // the audio by an SCTP retransmission.
    let from = Instant::now();
    let created = speak_turn(c, 1.5).await;
    let resp = created["response"]["id"].as_str().unwrap().to_string();
    c.until("output_audio_buffer.started", T).await.unwrap();
    let (done, _) = c.until("response.done", T).await.unwrap();
    assert_eq!(done["response"]["status"], "completed", "{done}");
    let (stopped, _) = c.until("output_audio_buffer.stopped", T).await.unwrap();
    assert_eq!(stopped["response_id"], resp.as_str());
    let stats = c.stats();
    let loud: Vec<u64> = stats
        .frames
        .iter()
        .zip(&stats.seqs)
        .filter(|((t, r), _)| *t >= from && *r > 0.02)
        .map(|(_, seq)| *seq)
        .collect();
    let (Some(first), Some(last)) = (loud.iter().min(), loud.iter().max()) else {
        panic!("no echo arrived");
    };
    // The echo's length as the server sent it, by sequence number: 1.5 s is 75 frames.
    let span = last - first + 1;
    let arrived = stats
        .seqs
        .iter()
        .filter(|seq| (*first..=*last).contains(*seq))
        .count() as u64;
    eprintln!(
        "echo: {span} frames sent, {arrived} arrived, {} loud; client skipped {} slots",
        loud.len(),
        stats.send_skipped
    );
    assert!(span >= 65, "the echo of 1.5 s was {span} frames long");
    // 5 % loss: ~4 of 75 (σ ≈ 1.9).
    assert!(
        span - arrived <= 12,
        "{} of the echo's {span} frames lost",
        span - arrived
    );
    // The server conceals (Opus PLC/FEC) caller packets more than a frame late rather than
    // wait for them, so what it echoes has quiet patches where the relay's jitter (0..=30 ms,
    // more while other tests load the machine) made its input late: most of the echo is
    // still voice, never silence.
    assert!(
        loud.len() as u64 * 2 >= span,
        "{} loud frames of the {span}-frame echo",
        loud.len()
    );
}

async fn barge_in_cancels(c: &mut RtcClient) {
    speak_turn(c, 2.5).await;
    c.until("output_audio_buffer.started", T).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    c.speak(&voiced48(0.6));
    let (done, _) = c.until("response.done", T).await.unwrap();
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    assert_eq!(
        done["response"]["status_details"]["reason"],
        "turn_detected"
    );
    c.until("output_audio_buffer.cleared", T).await.unwrap();
}

#[tokio::test]
async fn call_survives_loss_and_jitter() {
    // It counts frames per second in real time: not beside a browser or a model.
    let _one = exclusive().await;
    let addr = server(&[]).await;
    let mut c = RtcClient::connect(addr, impaired()).await.expect("call");
    c.until("session.created", T)
        .await
        .expect("ICE, DTLS and SCTP get through the loss");
    let s = c.stats();
    eprintln!("connect: {:?}", s.connected.unwrap() - s.started.unwrap());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let from = Instant::now();

    echo_turn_is_answered(&mut c).await;
    barge_in_cancels(&mut c).await;
    let left = (from + WINDOW).saturating_duration_since(Instant::now());
    tokio::time::sleep(left + Duration::from_millis(200)).await;

    let stats = c.stats();
    let got = stats.frames_between(from, from + WINDOW);
    let fps = got as f64 / WINDOW.as_secs_f64();
    let tens: Vec<usize> = (0..WINDOW.as_secs() / 10)
        .map(|i| {
            let t = from + Duration::from_secs(10 * i);
            stats.frames_between(t, t + Duration::from_secs(10))
        })
        .collect();
    eprintln!(
        "{got} frames in {WINDOW:?}: {fps:.2}/s; per 10 s: {tens:?}; relay {:?}",
        c.relay_stats()
    );
    assert!(fps >= 46.0, "{fps:.2} frames/s through 5 % loss");
    assert!(
        tens.iter().all(|&n| n >= 400),
        "a stall: {tens:?} frames per 10 s"
    );
    c.close();
}

/// Binds `n` non-blocking loopback sockets.
fn sockets(n: usize) -> Vec<UdpSocket> {
    (0..n)
        .map(|_| {
            let s = UdpSocket::bind("127.0.0.1:0").unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect()
}

/// A loopback server that answers every datagram to its source until `stop`.
fn echo(stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::net::SocketAddr {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let addr = s.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok((n, from)) = s.recv_from(&mut buf) {
                let _ = s.send_to(&buf[..n], from);
            }
        }
    });
    addr
}

/// Waits up to 1 ms for any socket; returns the readable ones.
fn poll(socks: &[UdpSocket]) -> Vec<usize> {
    let socks: Vec<&UdpSocket> = socks.iter().collect();
    let ready = readable(&socks, Duration::from_millis(1));
    (0..ready.len()).filter(|i| ready[*i]).collect()
}

/// CPU seconds the relay thread used (from /proc/self/task/*/stat).
fn relay_cpu_secs() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return f64::NAN;
    };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() == "impair-relay" {
            let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
            let f: Vec<u64> = stat
                .rsplit(')')
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect();
            return (f.get(10).unwrap_or(&0) + f.get(11).unwrap_or(&0)) as f64 / 100.0;
        }
    }
    f64::NAN
}

/// The relay alone at the load generator's worst case: 100 calls × 50 packets/s, echoed, so
/// 10 000 packets/s through the one relay thread, each jittered 0..=30 ms. Run with
/// `cargo test --release --test integration webrtc_impaired:: -- --ignored --nocapture`.
#[test]
#[ignore]
fn relay_keeps_up_with_100_calls() {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let relay = Relay::start(echo(stop.clone()), Impairment::new(0.0, JITTER, 1)).unwrap();
    let calls = sockets(100);
    let (origin, secs) = (Instant::now(), 10);
    let (mut slot, mut sent, mut rtt_us) = (0u64, 0u64, Vec::new());
    let mut buf = [0u8; 2048];
    let end = origin + Duration::from_secs(secs) + Duration::from_millis(200);
    while Instant::now() < end {
        let ms = origin.elapsed().as_millis() as u64;
        while slot <= ms && slot < secs * 1000 {
            for c in calls.iter().skip((slot % 20) as usize).step_by(20) {
                let mut p = (origin.elapsed().as_micros() as u64).to_le_bytes().to_vec();
                p.resize(100, 0);
                sent += u64::from(c.send_to(&p, relay.addr()).is_ok());
            }
            slot += 1;
        }
        for i in poll(&calls) {
            while let Ok((n, _)) = calls[i].recv_from(&mut buf) {
                let t0 = u64::from_le_bytes(buf[..8.min(n)].try_into().unwrap());
                rtt_us.push(origin.elapsed().as_micros() as u64 - t0);
            }
        }
    }
    let cpu = relay_cpu_secs();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    rtt_us.sort_unstable();
    let pct = |p: usize| rtt_us[(rtt_us.len() - 1) * p / 100] as f64 / 1000.0;
    let st = relay.stats();
    eprintln!(
        "sent {sent}, back {}, round trip (2 × 0..=30 ms jitter) p50 {:.1} / p99 {:.1} / max {:.1} ms; relay CPU {:.1} % of a core; {st:?}",
        rtt_us.len(),
        pct(50),
        pct(99),
        pct(100),
        cpu / secs as f64 * 100.0
    );
    assert_eq!(rtt_us.len() as u64, sent, "nothing lost without loss");
    assert_eq!(st.to_server.overflow + st.to_client.overflow, 0);
    assert!(pct(100) < 60.0 + 20.0, "deliveries on time");
    assert!(
        st.to_server.late + st.to_client.late <= sent / 1000,
        "{st:?}"
    );
}
