//! The cascade's synthesis loop: [`Synthesis`] (in `duet-models`) speaks each queued clause
//! on a thread of its own (`cascade-tts`), so the model loop's 20 ms steps never wait for a
//! voice. Its skeleton is the other loops' ([`DeviceThread`]: ready once started, not alive
//! once ended); a voice that panics fails its clause inside [`Synthesis::speak_next`].

use std::sync::atomic::Ordering;

use duet_models::cascade::Synthesis;

use crate::model_loop::DeviceThread;

/// The running synthesis thread, as `/ready` sees it.
#[derive(Clone)]
pub struct SpeechLoop {
    thread: DeviceThread,
}

impl SpeechLoop {
    /// Starts the thread; it ends once the cascade's [`duet_models::cascade::SpeechWorker`]
    /// is dropped.
    pub fn spawn(mut synthesis: Synthesis) -> std::io::Result<Self> {
        let thread = DeviceThread::spawn(
            "cascade-tts".into(),
            "the cascade's speech thread died; spoken answers fail",
            move |ready| {
                ready.store(true, Ordering::Release);
                while synthesis.speak_next() {}
            },
        )?;
        Ok(Self { thread })
    }

    /// False once the thread ended.
    pub fn is_alive(&self) -> bool {
        self.thread.is_alive()
    }
}
