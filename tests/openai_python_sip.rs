//! A phone call app written on the official `openai` Python SDK against Duet
//! (`tests/python/sip_app.py`): it checks each `realtime.call.incoming` with
//! `client.webhooks.unwrap()` and decides with `client.realtime.calls.accept(...)` or
//! `.reject(..., status_code=486)`. sipp places one call it accepts (the caller hangs up)
//! and one from the number it rejects (486); then a real phone, baresip, calls: the app
//! accepts it, and the phone hangs up when its 2 s microphone file ends.

use crate::common;

use common::external;
use common::sip::{baresip_config, phone_dir, sip_addr, start_phone, Sipp, SECRET};
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
        .args(["--port", &port.to_string(), "--calls", "3"])
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
    let dir = phone_dir("sdk-phone", &vec![0.0; 8_000 * 2]);
    baresip_config(&dir, &dir.join("rec"), "", &[]);
    let _phone = start_phone(&dir, 10, Some(&format!("/dial sip:duet@{sip}")));

    let mut out = Vec::new();
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await
    {
        out.push(line);
    }
    let status = app.wait().await.unwrap();
    assert!(status.success(), "the app failed: {out:?}");
    let accepted = out
        .iter()
        .filter(|l| l.starts_with("accepted rtc_"))
        .count();
    assert_eq!(accepted, 2, "sipp's call and baresip's: {out:?}");
    assert!(
        out.iter().any(|l| l.starts_with("rejected rtc_")),
        "{out:?}"
    );
    common::sip::assert_idle(&server, "the phone hung up when its file ended").await;
}
