//! Phone call test kit: the app's webhook endpoint (checks each `realtime.call.incoming`
//! signature and hands the calls to the test, which decides them over the HTTP API, or
//! accepts them itself), a server answering SIP on loopback, and sipp (Debian's
//! `sip-tester`) running the scenarios of `tests/sip/`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use duet_signaling::webhook::WebhookSecret;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::external;

/// The webhook secret of the test servers.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

const HOW_TO_INSTALL: &str =
    "install Debian's sip-tester (apt-get install sip-tester; .ci/run does)";

/// A `realtime.call.incoming` the app received, its signature checked.
#[derive(Debug)]
pub struct Incoming {
    /// `rtc_…`.
    pub call_id: String,
    /// The whole event.
    pub event: Value,
}

impl Incoming {
    /// The value of SIP header `name` in the event.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.event["data"]["sip_headers"]
            .as_array()?
            .iter()
            .find(|h| {
                h["name"]
                    .as_str()
                    .is_some_and(|n| n.eq_ignore_ascii_case(name))
            })?["value"]
            .as_str()
    }
}

/// The app's webhook endpoint.
pub struct WebhookApp {
    /// Where the server posts.
    pub url: String,
    calls: mpsc::UnboundedReceiver<Incoming>,
}

impl WebhookApp {
    /// The next call announced (fails the test after 10 s).
    pub async fn next(&mut self) -> Incoming {
        tokio::time::timeout(Duration::from_secs(10), self.calls.recv())
            .await
            .expect("a webhook within 10 s")
            .expect("the webhook app runs")
    }
}

/// Starts the app on loopback: each webhook's signature is verified with [`SECRET`] (a bad
/// one fails the test), answered `200`, and handed to [`WebhookApp::next`].
pub async fn webhook_app() -> WebhookApp {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, calls) = mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
            let tx = tx.clone();
            async move {
                let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("");
                let secret = WebhookSecret::parse(SECRET).unwrap();
                let ts: u64 = h("webhook-timestamp").parse().expect("a timestamp");
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_secs();
                let ok = secret.verify(
                    h("webhook-id"),
                    ts,
                    body.as_bytes(),
                    h("webhook-signature"),
                    now,
                );
                assert!(ok, "the webhook's signature verifies: {headers:?}");
                let event: Value = serde_json::from_str(&body).expect("JSON");
                assert_eq!(event["type"], "realtime.call.incoming");
                assert_eq!(event["id"], h("webhook-id"));
                let call_id = event["data"]["call_id"].as_str().unwrap().to_string();
                let _ = tx.send(Incoming { call_id, event });
                axum::http::StatusCode::OK
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    WebhookApp { url, calls }
}

/// A server (model `echo`) answering SIP on a free loopback port, announcing calls to `app`.
pub async fn sip_server(app: &WebhookApp, extra: &[&str]) -> duet::server::Server {
    let mut flags = vec![
        "--sip-listen",
        "127.0.0.1:0",
        "--sip-webhook-url",
        &app.url,
        "--sip-webhook-secret",
        SECRET,
    ];
    flags.extend_from_slice(extra);
    super::start(&flags).await
}

/// Where `server` answers SIP.
pub fn sip_addr(server: &duet::server::Server) -> SocketAddr {
    server.sip.as_ref().expect("SIP is on").local
}

/// `POST /v1/realtime/calls/{id}/{action}` with `body`: the status and the body.
pub async fn decide(addr: SocketAddr, call_id: &str, action: &str, body: Value) -> (u16, Value) {
    let r = duet_client::http::request(
        addr,
        "POST",
        &format!("/v1/realtime/calls/{call_id}/{action}"),
        &[("content-type", "application/json")],
        &body.to_string(),
    )
    .await
    .expect("the API answers");
    (
        r.status,
        serde_json::from_str(&r.body).unwrap_or(Value::Null),
    )
}

/// Asserts that `decide(addr, call_id, action, body)` is refused with `status` and the
/// error's `field` (`code` or `param`) equal to `value`.
pub async fn assert_refused(
    addr: SocketAddr,
    call_id: &str,
    (action, body): (&str, Value),
    (status, field, value): (u16, &str, &str),
) {
    let (got, answer) = decide(addr, call_id, action, body).await;
    assert_eq!(
        (got, answer["error"][field].as_str()),
        (status, Some(value)),
        "{action}: {answer}"
    );
}

/// Accepts `call_id` with a realtime session; asserts `200`.
pub async fn accept(addr: SocketAddr, call_id: &str) {
    let (status, body) = decide(addr, call_id, "accept", json!({"type": "realtime"})).await;
    assert_eq!(status, 200, "accept: {body}");
}

/// Waits (up to 3 s) until `server` holds no call and no session, then asserts it: every
/// slot came back when the calls ended.
pub async fn assert_idle(server: &duet::server::Server, what: &str) {
    let a = &server.state.sessions.admissions;
    for _ in 0..150 {
        if a.calls() == 0 && a.sessions() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!((a.calls(), a.sessions()), (0, 0), "{what}");
}

/// A call from [`duet_client::sip::Caller`] that the app accepts: announced, accepted and
/// answered `200 OK` (its ACK sent). Returns the caller and the webhook's call.
pub async fn answered_call(
    server: &duet::server::Server,
    app: &mut WebhookApp,
) -> (duet_client::sip::Caller, Incoming) {
    let mut caller = duet_client::sip::Caller::invite(sip_addr(server), "+15551230000")
        .await
        .expect("the INVITE leaves");
    let call = app.next().await;
    accept(server.addr, &call.call_id).await;
    let ok = caller
        .answer(Duration::from_secs(5), |_| {})
        .await
        .expect("a final answer");
    assert_eq!(ok.status, 200, "{ok:?}");
    (caller, call)
}

/// `duet_sip_calls_total{outcome}` now. The metrics are the process's: other tests' servers
/// in this test binary count there too, so compare with at least, never exactly.
pub async fn sip_calls_total(addr: SocketAddr, outcome: &str) -> u64 {
    let (_, text) = super::get(addr, "/metrics", &[]).await;
    let key = format!("duet_sip_calls_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// A free UDP port on loopback (for sipp's signalling and media).
pub fn free_port() -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap().port()
}

/// A running sipp: `tests/sip/<scenario>` (its `@KEY@` placeholders filled from `fill`), or
/// sipp's own `uac`, against `target`, with `extra` arguments (one call unless they say
/// `-m N`).
pub struct Sipp {
    child: tokio::process::Child,
    dir: std::path::PathBuf,
}

impl Sipp {
    /// Starts sipp (fails the test when it is not installed).
    pub fn start(
        target: SocketAddr,
        scenario: &str,
        fill: &[(&str, &str)],
        extra: &[&str],
    ) -> Self {
        assert!(
            std::path::Path::new("/usr/bin/sipp").exists(),
            "no sipp: {HOW_TO_INSTALL}"
        );
        let dir = std::env::temp_dir().join(format!("duet-sipp-{}", super::unique()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut xml = match scenario {
            "uac" => String::new(),
            name => std::fs::read_to_string(external::repo_path("tests/sip").join(name))
                .expect("the scenario file"),
        };
        for (k, v) in fill {
            xml = xml.replace(&format!("@{k}@"), v);
        }
        let mut cmd = tokio::process::Command::new("/usr/bin/sipp");
        cmd.arg(target.to_string());
        if scenario == "uac" {
            cmd.args(["-sn", "uac"]);
        } else {
            let path = dir.join(scenario);
            std::fs::write(&path, xml).unwrap();
            cmd.arg("-sf").arg(path);
        }
        let (port, media) = (free_port().to_string(), free_port().to_string());
        if !extra.contains(&"-m") {
            cmd.args(["-m", "1"]);
        }
        cmd.args(["-i", "127.0.0.1", "-p", &port, "-mp", &media, "-nostdin"])
            .args(["-timeout", "30s", "-timeout_error", "-trace_err"])
            .args(extra)
            .current_dir(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        Self {
            child: cmd.spawn().expect("sipp starts"),
            dir,
        }
    }

    /// Waits for sipp to end; fails the test unless every call succeeded (its error log is
    /// in the message).
    pub async fn success(mut self) {
        let status = tokio::time::timeout(Duration::from_secs(60), self.child.wait())
            .await
            .expect("sipp ends within 60 s")
            .expect("sipp runs");
        let errors: String = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("errors"))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .collect();
        let _ = std::fs::remove_dir_all(&self.dir);
        assert!(status.success(), "sipp failed ({status}):\n{errors}");
    }
}

/// A 16-bit mono WAV of `pcm` at `rate`.
pub fn wav(path: &Path, pcm: &[f32], rate: u32) {
    let data: Vec<u8> = pcm
        .iter()
        .flat_map(|s| ((s.clamp(-1.0, 1.0) * 32767.0) as i16).to_le_bytes())
        .collect();
    let mut out = Vec::with_capacity(44 + data.len());
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data.len() as u32).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&16u16.to_le_bytes());
    out.extend_from_slice(b"data");
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(&data);
    std::fs::write(path, out).unwrap();
}

/// Writes a baresip configuration into `dir` (its microphone `dir/mic.wav`, its recordings
/// into `rec`, ctrl_tcp, G.711, and `modules` too; ten RTP ports, for a call and a transfer)
/// and one auto-answering account with `account_params` (e.g. `mediaenc=srtp-mand`);
/// returns its SIP and ctrl_tcp ports.
pub fn baresip_config(
    dir: &Path,
    rec: &Path,
    account_params: &str,
    modules: &[&str],
) -> (u16, u16) {
    // ctrl_tcp is TCP: its port is probed as one.
    let (port, ctrl, rtp) = (free_port(), super::cluster::free_tcp_port(), free_port());
    let extra: String = modules.iter().map(|m| format!("module {m}\n")).collect();
    let config = format!(
        "sip_listen 127.0.0.1:{port}\nnet_interface 127.0.0.1\nrtp_ports {rtp}-{}\n\
         audio_source aufile,{mic}\naudio_player aubridge,nil\naudio_alert aubridge,nil\n\
         snd_path {rec}\nmodule_path /usr/lib/baresip/modules\nmodule ctrl_tcp.so\n\
         {extra}module account.so\nmodule g711.so\nmodule aufile.so\n\
         module aubridge.so\nmodule sndfile.so\nmodule_app menu.so\nctrl_tcp_listen 127.0.0.1:{ctrl}\n",
        rtp + 9,
        mic = dir.join("mic.wav").display(),
        rec = rec.display(),
    );
    std::fs::write(dir.join("config"), config).expect("baresip config");
    let account =
        format!("<sip:phone@127.0.0.1:{port}>;regint=0;answermode=auto;{account_params}\n");
    std::fs::write(dir.join("accounts"), account).expect("baresip accounts");
    (port, ctrl)
}

/// Sends `command` (with `params`) to a baresip's ctrl_tcp port (a netstring of JSON).
pub async fn baresip_command(ctrl: u16, command: &str, params: &str) {
    use tokio::io::AsyncWriteExt;
    let json = json!({"command": command, "params": params, "token": "t"}).to_string();
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", ctrl))
        .await
        .expect("baresip's ctrl_tcp");
    s.write_all(format!("{}:{json},", json.len()).as_bytes())
        .await
        .expect("command sent");
    // Its answer (a netstring too) means the command ran.
    let mut buf = [0u8; 512];
    let _ = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::io::AsyncReadExt::read(&mut s, &mut buf),
    )
    .await;
}

/// A fresh directory for a baresip phone: `rec/` for its recordings and `mic.wav` (8 kHz)
/// as its microphone.
pub fn phone_dir(name: &str, mic: &[f32]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("duet-{name}-{}", super::unique()));
    std::fs::create_dir_all(dir.join("rec")).expect("phone dir");
    wav(&dir.join("mic.wav"), mic, 8_000);
    dir
}

/// Starts baresip on the configuration in `dir` (see [`baresip_config`]) for at most `secs`,
/// with `dial` as its first command; its stdout is piped (its log), killed on drop.
pub fn start_phone(dir: &Path, secs: u32, dial: Option<&str>) -> tokio::process::Child {
    assert!(
        Path::new("/usr/bin/baresip").exists(),
        "no baresip: install Debian's baresip-core (apt-get install baresip-core; .ci/run does)"
    );
    let mut cmd = tokio::process::Command::new("/usr/bin/baresip");
    cmd.arg("-f").arg(dir).args(["-t", &secs.to_string()]);
    if let Some(d) = dial {
        cmd.args(["-e", d]);
    }
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("baresip starts")
}

/// A call from the baresip phone configured in `dir` to `server`, accepted by `app`: the
/// phone (killed on drop), the call's id and its sideband.
pub async fn accepted_phone_call(
    server: &duet::server::Server,
    app: &mut WebhookApp,
    dir: &Path,
) -> (tokio::process::Child, String, super::Client) {
    let dial = format!("/dial sip:duet@{}", sip_addr(server));
    let phone = start_phone(dir, 30, Some(&dial));
    let call = app.next().await;
    accept(server.addr, &call.call_id).await;
    let sideband = super::Client::sideband(server.addr, &call.call_id)
        .await
        .expect("sideband");
    (phone, call.call_id, sideband)
}
