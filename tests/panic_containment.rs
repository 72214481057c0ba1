//! Panics are contained: one in a call's media work ends that call, one in the media engine
//! thread ends its calls, releases their slots and turns `/ready` to 503 while new calls go
//! to a live engine, one in a model step fails only that batch's sessions, and a dead model
//! thread turns `/ready` to 503.

use crate::common;

use std::time::{Duration, Instant};

use common::{ready, wait_released, Client};
use duet::engine::Fault;
use duet::model_loop::ModelFault;
use duet_client::rtc::{ClientOptions, RtcClient};

async fn connected_call(addr: std::net::SocketAddr) -> RtcClient {
    let mut c = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call");
    c.until("session.created", Duration::from_secs(10))
        .await
        .expect("session.created on the data channel");
    c
}

fn key_of(server: &duet::server::Server, call_id: &str) -> (usize, duet::engine::CallKey) {
    let e = server.state.calls.get(call_id).expect("registered");
    match &e.media {
        duet::server::CallMedia::Engine { engine, key } => (*engine, *key),
        duet::server::CallMedia::Sip(_) => panic!("a WebRTC call"),
    }
}

async fn ready_status(addr: std::net::SocketAddr) -> u16 {
    ready(addr).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_call_ends_alone() {
    let server = common::start(&["--media-threads", "1"]).await;
    let addr = server.addr;
    let victim = connected_call(addr).await;
    let mut other = connected_call(addr).await;
    let (engine, key) = key_of(&server, &victim.call_id);
    server
        .state
        .calls
        .engines
        .get(engine)
        .unwrap()
        .inject_fault(Fault::PanicCall(key));
    wait_released(addr, 1, 1, Duration::from_secs(3)).await;
    assert_eq!(ready_status(addr).await, 200, "the engine lives on");
    // The other call still flows, and a new one connects.
    let before = other.stats().frames.len();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        other.stats().frames.len() >= before + 20,
        "the other call keeps receiving"
    );
    let _next = connected_call(addr).await;
    other.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_engine_releases_its_calls_and_is_not_picked() {
    let server = common::start(&["--media-threads", "2"]).await;
    let addr = server.addr;
    let first = connected_call(addr).await;
    let (engine, _) = key_of(&server, &first.call_id);
    let started = Instant::now();
    server
        .state
        .calls
        .engines
        .get(engine)
        .unwrap()
        .inject_fault(Fault::PanicThread);
    while ready_status(addr).await != 503 {
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "/ready still 200 after 1 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, body) = ready(addr).await;
    assert_eq!(body["error"]["code"], "not_ready", "{body}");
    // The dead engine's call gave its call and model slots back.
    let start = Instant::now();
    while server.state.sessions.admissions.calls() > 0
        || server.state.backends.model.active_sessions() > 0
    {
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "slots not released"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(server.state.calls.is_empty());
    // The pool picks only the live engine: the next call connects there.
    let next = connected_call(addr).await;
    assert_ne!(key_of(&server, &next.call_id).0, engine);
    drop(first);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_model_step_fails_only_its_batch() {
    let server = common::start(&[]).await;
    let addr = server.addr;
    let mut a = Client::connect(addr).await;
    server
        .state
        .backends
        .model
        .inject_fault(ModelFault::PanicStep);
    let err = a.until("error").await;
    assert_eq!(err["error"]["code"], "model_error", "{err}");
    wait_released(addr, 0, 0, Duration::from_secs(3)).await;
    assert_eq!(ready_status(addr).await, 200, "the model loop lives on");
    let mut b = Client::connect(addr).await;
    b.manual_turns().await;
    b.append(&common::voiced(0.5)).await;
    b.send(serde_json::json!({"type":"input_audio_buffer.commit"}))
        .await;
    b.send(serde_json::json!({"type":"response.create"})).await;
    let done = b.until("response.done").await;
    assert_eq!(done["response"]["status"], "completed", "{done}");
}

#[tokio::test]
async fn a_dead_model_thread_turns_ready_off() {
    let server = common::start(&[]).await;
    let addr = server.addr;
    let started = Instant::now();
    server
        .state
        .backends
        .model
        .inject_fault(ModelFault::PanicThread);
    while ready_status(addr).await != 503 {
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "/ready still 200 after 1 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (s, _) = common::get(addr, "/v1/realtime?model=echo", &[]).await;
    assert!(s == 503 || s == 400, "{s}");
}
