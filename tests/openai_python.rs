//! The official OpenAI Python SDK against Duet: runs `tests/python/openai_realtime.py`
//! (session.update, error events, a full audio turn, a cancelled response) against an
//! in-process server.
//!
//! Python comes from `DUET_TEST_PYTHON`, else `.venv/bin/python` in the repository, else
//! `python3`. The `openai` package must be installed there (`./scripts/test` does it); a
//! missing SDK fails the test rather than skipping it.

use crate::common;

use common::external;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_sdk_realtime_session() {
    let addr = common::server(&[]).await;
    external::run_openai_python("openai_realtime.py", addr).await;
}
