//! The cascade's synthesis loop: [`Synthesis`] (in `duet-models`) speaks each queued clause
//! on a thread of its own (`cascade-tts`; a remote voice has several, `cascade-tts-N`, each
//! fetching a clause), so the model loop's 20 ms steps never wait for a voice. Its skeleton is the other loops' ([`DeviceThread`]: ready once started, not alive
//! once ended); a voice that panics fails its clause inside [`Synthesis::speak_next`].

use std::sync::atomic::Ordering;

use duet_models::cascade::Synthesis;

use crate::cpu_share::Share;
use crate::model_loop::DeviceThread;

/// The running synthesis threads, as `/ready` sees them.
#[derive(Clone)]
pub struct SpeechLoop {
    threads: Vec<DeviceThread>,
}

impl SpeechLoop {
    /// Starts a thread per speaking side; they end once the cascade's
    /// [`duet_models::cascade::SpeechWorker`] is dropped.
    pub fn spawn(sides: Vec<Synthesis>) -> std::io::Result<Self> {
        let many = sides.len() > 1;
        let mut threads = Vec::new();
        for (n, mut synthesis) in sides.into_iter().enumerate() {
            let name = if many {
                format!("cascade-tts-{n}")
            } else {
                "cascade-tts".into()
            };
            threads.push(DeviceThread::spawn(
                name,
                Share::Bulk,
                "the cascade's speech thread died; spoken answers fail",
                move |ready| {
                    ready.store(true, Ordering::Release);
                    while synthesis.speak_next() {}
                },
            )?);
        }
        Ok(Self { threads })
    }

    /// False once a thread ended.
    pub fn is_alive(&self) -> bool {
        self.threads.iter().all(DeviceThread::is_alive)
    }
}
