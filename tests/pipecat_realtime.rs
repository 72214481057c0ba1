//! Pipecat's own `OpenAIRealtimeLLMService` (pipecat-ai 1.14, unchanged) against Duet:
//! runs `tests/python/pipecat_realtime.py` against an in-process server. A retrieve of an
//! unknown item fails back to the caller (Pipecat routes only OpenAI's
//! `item_retrieve_invalid_item_id`; any other code made it stop reading the socket) and the
//! session reads on; ending the pipeline completes the WebSocket closing handshake (Duet
//! answers Pipecat's Close 1000, where Pipecat logged "no close frame received" at ERROR).

use crate::common;

use common::external;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipecats_realtime_service_retrieves_and_closes_cleanly() {
    let addr = common::server(&[]).await;
    let out = external::run_pipecat_python("pipecat_realtime.py", addr).await;
    assert!(
        out.contains("close sent 1000 (OK), received 1000 (OK)"),
        "{out}"
    );
}
