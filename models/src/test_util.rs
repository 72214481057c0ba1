//! Helpers the model tests share.

use std::path::PathBuf;

use crate::moshi::FRAME_SAMPLES;

/// A fresh directory under the system's temporary one (`duet-{tag}-…`), removed on drop.
pub(crate) struct TempDir(pub PathBuf);

impl TempDir {
    pub(crate) fn new(tag: &str) -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("duet-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        Self(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Deterministic "speech": a gliding tone with a seeded hiss, different per `voice`.
pub(crate) fn input(voice: u32, frame: usize) -> Vec<f32> {
    (0..FRAME_SAMPLES)
        .map(|i| {
            let t = (frame * FRAME_SAMPLES + i) as f32 / 24_000.0;
            let f = 150.0 + 60.0 * voice as f32 + 40.0 * (t * 2.0).sin();
            let hiss = (((i as u32).wrapping_mul(2_654_435_761) ^ voice) % 1000) as f32 / 1e5;
            0.3 * (std::f32::consts::TAU * f * t).sin() + hiss
        })
        .collect()
}
