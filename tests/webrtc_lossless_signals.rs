//! Control signals are never lost: a sideband flooding the call's session with 5,000 items
//! during a barge-in does not cost `output_audio_buffer.cleared` or the truncation; and an
//! event too large for the data channel is replaced by an error naming the client event,
//! never dropped silently.

use crate::common;

use std::time::Duration;

use base64::Engine;
use common::{voiced48, Client};
use duet_client::rtc::{ClientOptions, RtcClient};
use serde_json::json;

const T: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_during_barge_in_loses_no_control_signal() {
    let addr = common::server(&[]).await;
    let mut c = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call");
    c.until("session.created", T).await.unwrap();
    let mut side = Client::sideband(addr, &c.call_id).await.expect("sideband");
    let mut audio = voiced48(2.5);
    audio.extend(vec![0.0; 48_000 * 7 / 10]);
    c.speak(&audio);
    c.until("output_audio_buffer.started", T).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Barge in, and flood the session from the sideband at the same time.
    c.speak(&voiced48(0.6));
    for i in 0..5_000 {
        side.send(json!({"type":"conversation.item.create","item":{"type":"message","role":"user","content":[{"type":"input_text","text":format!("flood {i}")}]}})).await;
    }
    let (done, _) = c.until("response.done", T).await.unwrap();
    assert_eq!(done["response"]["status"], "cancelled", "{done}");
    let item_id = done["response"]["output"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.until("output_audio_buffer.cleared", T).await.unwrap();
    let (trunc, _) = c.until("conversation.item.truncated", T).await.unwrap();
    assert_eq!(trunc["item_id"], item_id.as_str());
    c.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retrieving_a_long_item_over_webrtc_answers_the_item_or_an_error() {
    let addr = common::server(&[]).await;
    let mut c = RtcClient::connect(addr, ClientOptions::default())
        .await
        .expect("call");
    c.until("session.created", T).await.unwrap();
    let mut side = Client::sideband(addr, &c.call_id).await.expect("sideband");
    for (id, secs) in [("item_ten", 10usize), ("item_one", 1)] {
        let pcm = base64::engine::general_purpose::STANDARD.encode(vec![0u8; secs * 48_000]);
        side.send(json!({"type":"conversation.item.create","item":{"id":id,"type":"message","role":"user","content":[{"type":"input_audio","audio":pcm}]}})).await;
        side.until("conversation.item.added").await;
    }
    for (id, bytes) in [("item_ten", 480_000), ("item_one", 48_000)] {
        let event_id = format!("evt_{id}");
        c.send(json!({"type":"conversation.item.retrieve","item_id":id,"event_id":event_id}));
        let answer = loop {
            let ev = c.next(T).await.expect("an answer to the retrieve");
            match ev["type"].as_str() {
                Some("conversation.item.retrieved") | Some("error") => break ev,
                _ => {}
            }
        };
        if answer["type"] == "error" {
            assert_eq!(
                answer["error"]["code"], "event_too_large_for_transport",
                "{answer}"
            );
            assert_eq!(answer["error"]["event_id"], event_id.as_str());
            eprintln!("{id}: {}", answer["error"]["message"]);
        } else {
            let audio = answer["item"]["content"][0]["audio"].as_str().unwrap();
            assert_eq!(common::b64_len(audio), bytes, "{id}");
        }
    }
    c.close();
}
