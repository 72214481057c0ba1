//! Pooled 24 kHz sample buffers for the per-frame hand-offs between the media engine and a
//! session (caller audio in, answer audio out): a buffer goes back to its call's pool when
//! the receiver drops it, so steady-state frames allocate nothing.

use std::ops::Deref;
use std::sync::{Arc, Mutex};

/// Buffers a pool keeps (more come back only after a burst; those are freed).
const POOL_BUFFERS: usize = 16;

/// Spare buffers of one call.
#[derive(Debug, Default)]
pub struct PcmPool {
    free: Mutex<Vec<Vec<f32>>>,
}

impl PcmPool {
    /// An empty pool.
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            free: Mutex::new(Vec::with_capacity(POOL_BUFFERS)),
        })
    }

    /// An empty buffer with room for `capacity` samples, from the pool when it has one.
    pub fn take(self: &Arc<Self>, capacity: usize) -> Pcm {
        let mut samples = self
            .free
            .lock()
            .ok()
            .and_then(|mut f| f.pop())
            .unwrap_or_default();
        samples.reserve(capacity);
        Pcm {
            samples,
            pool: Some(self.clone()),
        }
    }

    /// Buffers waiting to be reused.
    pub fn spare(&self) -> usize {
        self.free.lock().map_or(0, |f| f.len())
    }
}

/// Samples handed from one side to the other; back to the pool on drop.
#[derive(Debug, Default)]
pub struct Pcm {
    samples: Vec<f32>,
    pool: Option<Arc<PcmPool>>,
}

impl Pcm {
    /// The samples to fill.
    pub fn samples_mut(&mut self) -> &mut Vec<f32> {
        &mut self.samples
    }
}

impl From<Vec<f32>> for Pcm {
    fn from(samples: Vec<f32>) -> Self {
        Self {
            samples,
            pool: None,
        }
    }
}

impl Deref for Pcm {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.samples
    }
}

impl Drop for Pcm {
    fn drop(&mut self) {
        let Some(pool) = self.pool.take() else {
            return;
        };
        let mut samples = std::mem::take(&mut self.samples);
        samples.clear();
        if let Ok(mut free) = pool.free.lock() {
            if free.len() < POOL_BUFFERS {
                free.push(samples);
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_and_are_reused() {
        let pool = PcmPool::new();
        let mut a = pool.take(480);
        a.samples_mut().extend_from_slice(&[0.5; 480]);
        let ptr = a.as_ptr();
        assert_eq!(a.len(), 480);
        drop(a);
        assert_eq!(pool.spare(), 1);
        let b = pool.take(480);
        assert_eq!(b.as_ptr(), ptr, "the same allocation");
        assert!(b.is_empty(), "handed out empty");
        // A plain Vec has no pool: dropping it returns nothing.
        drop(Pcm::from(vec![1.0; 4]));
        assert_eq!(pool.spare(), 0);
        drop(b);
        // The pool is bounded.
        let many: Vec<Pcm> = (0..2 * POOL_BUFFERS).map(|_| pool.take(8)).collect();
        drop(many);
        assert_eq!(pool.spare(), POOL_BUFFERS);
    }
}
