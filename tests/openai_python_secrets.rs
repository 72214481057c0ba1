//! Ephemeral client secrets through the official OpenAI Python SDK: runs
//! `tests/python/openai_secrets.py` (mint with the server key, a session opened with the
//! `ek_` key starting from the secret's session, a secret that cannot mint, a lifetime out of
//! range, an unknown secret refused) against an in-process server with `--api-key`.

use crate::common;

use common::external;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_sdk_client_secrets() {
    let addr = common::server(&["--api-key", "test-key"]).await;
    external::run_openai_python_env(
        "openai_secrets.py",
        addr,
        &[("DUET_TEST_API_KEY", "test-key")],
    )
    .await;
}
