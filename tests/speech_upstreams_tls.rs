//! `--stt-url https://…` and `--tts-url https://…`: the speech upstreams (scripted in the
//! shapes of OpenAI's `POST /v1/audio/transcriptions` and `/v1/audio/speech`, each behind a
//! TLS front whose certificate a test CA signed) are reached over TLS, trusting the CA that
//! `SSL_CERT_FILE` names: `/v1/audio/transcriptions` and `/v1/audio/speech`, which go through
//! the same remote transcriber and voice as the cascade, answer. A server that does not trust
//! the CA fails each with the TLS problem named (`502 transcription_failed`, `502
//! speech_failed`) and counts it in `duet_upstream_tls_failures_total{upstream}`.

use crate::common;
use common::process::ServerProcess;
use common::tls::{plain_addr, tls_front, trusting_only, two_cas};
use common::*;
use duet_client::scripted_llm::{Reply, ScriptedLlm};
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;

/// A server with both remote speech stages on `stt`/`tts`, trusting only the CA in `ca`.
fn speech_server(stt: &str, tts: &str, ca: &std::path::Path) -> ServerProcess {
    let flags = [
        "--stt-url",
        stt,
        "--stt-model",
        "whisper-large-v3",
        "--tts-url",
        tts,
        "--tts-model",
        "kokoro",
    ];
    let env = trusting_only(ca);
    let env = env.each_ref().map(|(k, v)| (*k, v.as_str()));
    ServerProcess::spawn_env(&flags, &env)
}

/// `POST /v1/audio/transcriptions` of half a second of a tone: (status, body).
async fn transcribe(addr: SocketAddr) -> (u16, String) {
    let tone: Vec<f32> = (0..12_000).map(|i| (i as f32 * 0.05).sin() * 0.3).collect();
    let audio = duet_client::speech::wav(&tone, 24_000);
    let boundary = "duet-tls-test";
    let (content_type, body) = duet_signaling::multipart::write(
        boundary,
        &[
            ("file", Some("a.wav"), Some("audio/wav"), &audio),
            ("model", None, None, b"whisper-1"),
        ],
    );
    let r = duet_client::http::request_bytes(
        addr,
        "POST",
        "/v1/audio/transcriptions",
        &[("Content-Type", &content_type)],
        &body,
    )
    .await
    .expect("answered");
    (r.status, r.text())
}

/// `POST /v1/audio/speech` as PCM: (status, the de-chunked body's length, the response as
/// text).
async fn speak(addr: SocketAddr) -> (u16, usize, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = json!({"model":"tts-1","input":"Hello over TLS.","voice":"af_bella",
        "response_format":"pcm"})
    .to_string();
    let request = format!(
        "POST /v1/audio/speech HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connects");
    s.write_all(request.as_bytes()).await.expect("sent");
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.expect("read");
    let r = duet_client::http::Response::parse(&raw);
    let at = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let chunked = r
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let len = if chunked {
        dechunked_len(&raw[at..])
    } else {
        raw.len() - at
    };
    (r.status, len, r.text())
}

/// The length of a chunked body's data.
fn dechunked_len(mut body: &[u8]) -> usize {
    let mut total = 0;
    loop {
        let line_end = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a size line");
        let size = std::str::from_utf8(&body[..line_end]).expect("hex");
        let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).expect("hex");
        if size == 0 {
            return total;
        }
        total += size;
        body = &body[line_end + 2 + size + 2..];
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speech_upstreams_answer_over_tls_and_an_untrusted_one_fails_clearly() {
    let (dir, other) = two_cas("speech-tls");
    let pcm: Vec<u8> = (0..24_000)
        .map(|i| ((i as f32 * 0.05).sin() * 8_000.0) as i16)
        .flat_map(i16::to_le_bytes)
        .collect();
    let stt = ScriptedLlm::start(vec![Reply::Status(
        200,
        json!({"text": "Heard over TLS."}).to_string(),
    )])
    .await;
    let tts = ScriptedLlm::start(vec![Reply::Bytes {
        content_type: "audio/pcm".into(),
        parts: pcm.chunks(4_001).map(<[u8]>::to_vec).collect(),
        gap: Duration::from_millis(5),
    }])
    .await;
    let stt_url = format!("https://{}/v1", tls_front(&dir, plain_addr(&stt.url)).await);
    let tts_url = format!("https://{}/v1", tls_front(&dir, plain_addr(&tts.url)).await);

    // Trusted: the CA that signed the fronts' certificate.
    let server = speech_server(&stt_url, &tts_url, &dir.join("ca.pem"));
    let (status, body) = transcribe(server.addr).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("Heard over TLS."), "{body}");
    let (status, bytes, text) = speak(server.addr).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(bytes, pcm.len(), "the upstream's PCM, whole");
    assert!(stt.raw.lock().unwrap()[0]
        .0
        .starts_with("POST /v1/audio/transcriptions "));
    assert!(tts.raw.lock().unwrap()[0]
        .0
        .starts_with("POST /v1/audio/speech "));

    // Untrusted: another CA. Nothing reaches the upstreams; each failure names TLS.
    let server = speech_server(&stt_url, &tts_url, &other.join("ca.pem"));
    let (status, body) = transcribe(server.addr).await;
    assert_eq!(status, 502, "{body}");
    assert!(
        body.contains("transcription_failed") && body.contains("certificate"),
        "{body}"
    );
    let (status, _, body) = speak(server.addr).await;
    assert_eq!(status, 502, "{body}");
    assert!(
        body.contains("speech_failed") && body.contains("certificate"),
        "{body}"
    );
    println!("untrusted: {body}");
    assert_eq!(stt.raw.lock().unwrap().len(), 1);
    assert_eq!(tts.raw.lock().unwrap().len(), 1);
    let (_, metrics) = get(server.addr, "/metrics", &[]).await;
    for upstream in ["stt", "tts"] {
        let line = format!("duet_upstream_tls_failures_total{{upstream=\"{upstream}\"}} 1");
        assert!(metrics.contains(&line), "{line}: {metrics}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
