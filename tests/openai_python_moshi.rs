//! The official OpenAI Python SDK against the full-duplex model: `duet moshi-tiny` writes tiny
//! Moshi weights, the server runs `--model moshi` on them, and `tests/python/openai_moshi.py`
//! streams silence through `client.realtime.connect(model="moshi")`. The model speaks on its
//! own: the SDK receives the GA response lifecycle with Duet's `response.speak` (outside the
//! SDK's event union, still readable through it), the model's audio and words; then the SDK's
//! `response.cancel` fences it.
//!
//! Python and the `openai` package as for `openai_python.rs`; a missing SDK fails the test.

use crate::common;

use common::external;
use common::moshi::tiny_moshi_server;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_sdk_on_a_full_duplex_model() {
    let moshi = tiny_moshi_server("openai-python").await;
    let addr = moshi.addr;
    external::run_openai_python("openai_moshi.py", addr).await;
}
