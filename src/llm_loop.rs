//! The embedded LLM's loops: the engine ([`LlmEngine`], a stepped core in `duet-models`) on
//! one thread (`duet-llm`), its prompt side ([`LlmPrep`]) on [`PREP_THREADS`] others
//! (`duet-llm-prep`), beside the model and transcription loops and with their skeleton: a
//! [`DeviceThread`] that is ready once started and not alive once it ended, the same verbs
//! (`receive` what came in, `step` once), and a panic inside a step contained: the answers
//! of that round fail with `llm_error` and the loop goes on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;

use duet_models::llama::{LlmEngine, LlmPrep, PREP_THREADS};

use crate::cpu_share::Share;
use crate::model_loop::DeviceThread;

/// The running embedded LLM's threads, as `/ready` sees them.
#[derive(Clone)]
pub struct LlmLoop {
    thread: DeviceThread,
}

impl LlmLoop {
    /// Starts the engine's thread and the prompt threads; they end once the
    /// [`duet_models::llama::EmbeddedLlm`] they serve is dropped.
    pub fn spawn(mut engine: LlmEngine, prep: LlmPrep) -> std::io::Result<Self> {
        let thread = DeviceThread::spawn(
            "duet-llm".into(),
            Share::Bulk,
            "the embedded LLM's thread died; its answers fail with llm_unavailable",
            move |ready| {
                ready.store(true, Ordering::Release);
                while engine.receive() {
                    if catch_unwind(AssertUnwindSafe(|| engine.step())).is_err() {
                        tracing::error!("the embedded LLM panicked in a step; its answers failed");
                        engine.fail_running("the embedded LLM failed (a panic in its step)");
                    }
                }
            },
        )?;
        for _ in 0..PREP_THREADS {
            let prep = prep.clone();
            std::thread::Builder::new()
                .name("duet-llm-prep".into())
                .spawn(move || while prep.render_next() {})?;
        }
        Ok(Self { thread })
    }

    /// False once the engine's thread ended (it no longer answers).
    pub fn is_alive(&self) -> bool {
        self.thread.is_alive()
    }
}
