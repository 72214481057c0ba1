//! `/refer` with real phones: baresip (the caller) calls Duet, the app accepts, then refers
//! the call to a second baresip (the agent). The caller's phone takes the REFER, calls the
//! agent, who answers; its NOTIFY tells Duet the transfer worked, and Duet hangs up its leg
//! with every slot given back.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::sip::{accept, baresip_config, decide, sip_addr, sip_server, wav, webhook_app};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Starts baresip on the configuration in `dir`; `dial` is its first command.
fn phone(dir: &Path, dial: Option<&str>) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::new("/usr/bin/baresip");
    cmd.arg("-f").arg(dir).args(["-t", "30"]);
    if let Some(d) = dial {
        cmd.args(["-e", d]);
    }
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("baresip starts")
}

/// A phone's directory with 10 s of silence as its microphone.
fn phone_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("duet-{name}-{}", common::unique()));
    std::fs::create_dir_all(dir.join("rec")).expect("dir");
    wav(&dir.join("mic.wav"), &vec![0.0; 8_000 * 10], 8_000);
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refer_moves_a_real_caller_to_a_second_phone() {
    assert!(
        Path::new("/usr/bin/baresip").exists(),
        "install Debian's baresip-core"
    );
    let _alone = common::exclusive().await;
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let (caller_dir, agent_dir) = (phone_dir("caller"), phone_dir("agent"));
    let caller_port = baresip_config(&caller_dir, &caller_dir.join("rec"), "", &[]);
    let agent_port = baresip_config(&agent_dir, &agent_dir.join("rec"), "", &[]);
    let mut agent = phone(&agent_dir, None);
    let agent_log = agent.stdout.take().expect("stdout");
    let dial = format!("/dial sip:duet@{}", sip_addr(&server));
    let mut caller = phone(&caller_dir, Some(&dial));

    let call = app.next().await;
    accept(server.addr, &call.call_id).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The agent phone's account is `phone` too (baresip answers only its own user).
    let target = format!("sip:phone@127.0.0.1:{agent_port}");
    let (status, body) = decide(
        server.addr,
        &call.call_id,
        "refer",
        json!({"target_uri": target}),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    // The agent's phone rings and answers: the caller's phone called it.
    let mut lines = BufReader::new(agent_log).lines();
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        let left = Duration::from_secs(15).saturating_sub(start.elapsed());
        let line = tokio::time::timeout(left, lines.next_line()).await;
        let Ok(Ok(Some(line))) = line else {
            let _ = caller.start_kill();
            let mut out = String::new();
            if let Some(mut o) = caller.stdout.take() {
                use tokio::io::AsyncReadExt;
                let _ =
                    tokio::time::timeout(Duration::from_secs(2), o.read_to_string(&mut out)).await;
            }
            panic!(
                "the agent's phone never answered the transferred caller: {seen:#?}\ncaller: {out}"
            );
        };
        // "…: Call established: sip:phone@127.0.0.1:<the caller's port>"
        let from_caller = format!("established: sip:phone@127.0.0.1:{caller_port}");
        let established = line.contains(&from_caller);
        seen.push(line);
        if established {
            break;
        }
    }
    common::sip::assert_idle(&server, "Duet's leg ended after the transfer").await;
    let _ = std::fs::remove_dir_all(&caller_dir);
    let _ = std::fs::remove_dir_all(&agent_dir);
}
