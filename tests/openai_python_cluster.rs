//! The official clients against node A of a two-node cluster whose A is full (its one
//! model slot held): the `openai` Python SDK's WebSocket session and its WebRTC call (with
//! sideband and hangup, all sent to A) and `@openai/agents-realtime` over WebSocket land on
//! node B and work unchanged (the same scripts as against a single server).

use crate::common;

use std::time::Duration;

use common::cluster::{keyless_node, wait_nodes, Redis};
use common::external;
use serde_json::Value;

async fn usage(addr: std::net::SocketAddr) -> Value {
    let r = duet_client::http::request(addr, "GET", "/v1/usage", &[], "")
        .await
        .expect("usage");
    serde_json::from_str(&r.body).expect("json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_clients_reach_the_node_with_room_through_a_full_one() {
    let _one = common::exclusive().await;
    let redis = Redis::start().await;
    let a = keyless_node("a", &redis, &["--model-slots", "1"]);
    let b = keyless_node("b", &redis, &["--model-slots", "8"]);
    wait_nodes(a.addr, &["a", "b"], Duration::from_secs(10)).await;
    // A's only slot: a session pinned to A (a request that says it was forwarded is never
    // placed again, whatever its token).
    let hold = common::Client::open(
        &format!("ws://{}/v1/realtime?model=echo", a.addr),
        &[("x-duet-forwarded", "pin-to-this-node")],
    )
    .await
    .expect("A's slot");

    external::run_openai_python("openai_realtime.py", a.addr).await;
    external::run_agents_node("realtime_ws.mjs", a.addr).await;
    let python = external::python();
    external::require_python_modules(
        &python,
        &["openai", "aiortc", "av"],
        external::PYTHON_HOW_TO_INSTALL,
    )
    .await;
    let mut cmd = python.command();
    cmd.arg(external::repo_path("tests/python/openai_calls.py"))
        .arg("--base-url")
        .arg(format!("http://{}/v1", a.addr));
    external::run_script(cmd, Duration::from_secs(120)).await;

    // Everything the clients opened ran on B; A has only the session that holds its slot.
    let (on_a, on_b) = (usage(a.addr).await, usage(b.addr).await);
    assert_eq!(on_a["total"]["sessions"], 1, "{on_a}");
    assert_eq!(on_a["total"]["calls"], 0, "{on_a}");
    assert!(on_b["total"]["sessions"].as_u64() >= Some(2), "{on_b}");
    assert!(on_b["total"]["calls"].as_u64() >= Some(1), "{on_b}");
    drop(hold);
}
