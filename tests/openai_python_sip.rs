//! A phone call app written on the official `openai` Python SDK against Duet
//! (`tests/python/sip_app.py`): it checks each `realtime.call.incoming` with
//! `client.webhooks.unwrap()` and decides with `client.realtime.calls.accept(...)` or
//! `.reject(..., status_code=486)`. sipp places one call it accepts (the caller hangs up)
//! and one from the number it rejects (486).

use crate::common;

use common::external;
use common::sip::{sip_addr, Sipp, SECRET};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_on_the_official_python_sdk_accepts_and_rejects_phone_calls() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/hook");
    let flags = [
        "--sip-listen",
        "127.0.0.1:0",
        "--sip-webhook-url",
        &url,
        "--sip-webhook-secret",
        SECRET,
    ];
    let server = common::start(&flags).await;

    let python = external::python();
    external::require_python_modules(
        &python,
        &["openai"],
        "run ./scripts/test (it installs .venv)",
    )
    .await;
    let mut cmd = python.command();
    cmd.arg(external::repo_path("tests/python/sip_app.py"))
        .args(["--base-url", &format!("http://{}/v1", server.addr)])
        .args(["--port", &port.to_string(), "--calls", "2"])
        .env("OPENAI_WEBHOOK_SECRET", SECRET)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut app = cmd.spawn().expect("python runs");
    let mut lines = BufReader::new(app.stdout.take().unwrap()).lines();
    let first = lines.next_line().await.unwrap().unwrap_or_default();
    assert!(first.starts_with("listening"), "{first}");

    let sip = sip_addr(&server);
    Sipp::start(sip, "call_dtmf.xml", &[("HOLD_MS", "500")], &[])
        .success()
        .await;
    let fill = [
        ("FINAL", "486"),
        ("CODECS", "0 8"),
        ("CALLER", "+15550000000"),
    ];
    Sipp::start(sip, "final.xml", &fill, &[]).success().await;

    let mut out = Vec::new();
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await
    {
        out.push(line);
    }
    let status = app.wait().await.unwrap();
    assert!(status.success(), "the app failed: {out:?}");
    assert!(
        out.iter().any(|l| l.starts_with("accepted rtc_")),
        "{out:?}"
    );
    assert!(
        out.iter().any(|l| l.starts_with("rejected rtc_")),
        "{out:?}"
    );
}
