//! `/refer` with real phones: baresip (the caller) calls Duet, the app accepts, then refers
//! the call to a second baresip (the agent). The caller's phone takes the REFER, calls the
//! agent, who answers; its NOTIFY tells Duet the transfer worked, and Duet hangs up its leg
//! with every slot given back.

use crate::common;

use std::time::{Duration, Instant};

use common::sip::{
    accept, baresip_config, decide, phone_dir, sip_addr, sip_server, start_phone, webhook_app,
};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refer_moves_a_real_caller_to_a_second_phone() {
    let _alone = common::exclusive().await;
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    let quiet = vec![0.0; 8_000 * 10];
    let (caller_dir, agent_dir) = (phone_dir("caller", &quiet), phone_dir("agent", &quiet));
    let (caller_port, _) = baresip_config(&caller_dir, &caller_dir.join("rec"), "", &[]);
    let (agent_port, _) = baresip_config(&agent_dir, &agent_dir.join("rec"), "", &[]);
    let mut agent = start_phone(&agent_dir, 30, None);
    let agent_log = agent.stdout.take().expect("stdout");
    let dial = format!("/dial sip:duet@{}", sip_addr(&server));
    let mut caller = start_phone(&caller_dir, 30, Some(&dial));

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
