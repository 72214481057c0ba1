//! `GET /metrics`: Prometheus text with the pacing, model-step, latency and barge-in
//! histograms, live gauges and error counters, fed by real calls.

use crate::common;
use common::*;
use duet_client::rtc::{ClientOptions, RtcClient};
use serde_json::json;
use std::time::Duration;

fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

#[tokio::test]
async fn metrics_reflect_calls() {
    let addr = server(&[]).await;
    let mut c = RtcClient::connect(addr, ClientOptions::default())
        .await
        .unwrap();
    c.until("session.created", Duration::from_secs(10))
        .await
        .unwrap();
    c.send(json!({"type":"no.such"}));
    let mut turn = voiced48(2.0);
    turn.extend(vec![0.0; 48_000 * 6 / 10]);
    c.speak(&turn);
    c.until("output_audio_buffer.started", Duration::from_secs(10))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    c.speak(&voiced48(0.4));
    c.until("output_audio_buffer.cleared", Duration::from_secs(10))
        .await
        .unwrap();

    let (status, text) = get(addr, "/metrics", &[]).await;
    assert_eq!(status, 200);
    assert!(
        text.contains("content-type: text/plain; version=0.0.4"),
        "{text}"
    );
    assert_eq!(value(&text, "duet_calls "), 1.0);
    assert_eq!(value(&text, "duet_sessions "), 1.0);
    assert!(value(&text, "duet_pacing_deviation_seconds_count ") > 50.0);
    assert!(value(&text, "duet_model_step_seconds_count ") > 50.0);
    assert!(value(&text, "duet_speech_end_to_first_audio_seconds_count ") >= 1.0);
    assert!(value(&text, "duet_barge_in_seconds_count ") >= 1.0);
    assert!(value(&text, "duet_call_setup_seconds_count ") >= 1.0);
    assert!(value(&text, "duet_frames_sent_total ") > 50.0);
    assert!(value(&text, "duet_errors_total{code=\"unknown_event_type\"} ") >= 1.0);
    // Pacing on an idle-ish box: the median tick is within 2 ms of its deadline.
    let within_2ms = value(&text, "duet_pacing_deviation_seconds_bucket{le=\"0.002\"} ");
    let all = value(&text, "duet_pacing_deviation_seconds_count ");
    let within_1ms = value(&text, "duet_pacing_deviation_seconds_bucket{le=\"0.001\"} ");
    eprintln!("pacing: {within_1ms} of {all} ticks within 1 ms, {within_2ms} within 2 ms");
    assert!(
        within_2ms / all > 0.5,
        "{within_2ms} of {all} ticks within 2 ms"
    );
}
