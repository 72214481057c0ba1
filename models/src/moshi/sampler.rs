//! Seeded top-k / temperature sampling on host logits.
//!
//! Logits come back from the device once per batch (one copy for every active slot), so
//! sampling runs on the CPU with a per-slot seeded generator: the same seed and the same
//! logits always give the same token.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Sampling settings for one stream (text or audio).
#[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize)]
pub struct Sampling {
    /// Softmax temperature; `0` means greedy (argmax).
    pub temperature: f32,
    /// Keep only the `top_k` most likely tokens (`0` keeps all).
    pub top_k: usize,
}

/// A seeded sampler for one slot's stream.
#[derive(Clone, Debug)]
pub struct Sampler {
    cfg: Sampling,
    rng: ChaCha8Rng,
    scratch: Vec<(f32, u32)>,
}

impl Sampler {
    /// A sampler with its own deterministic random stream.
    pub fn new(cfg: Sampling, seed: u64) -> Self {
        Self {
            cfg,
            rng: ChaCha8Rng::seed_from_u64(seed),
            scratch: Vec::new(),
        }
    }

    /// Picks a token id from one row of logits. `None` when no logit is finite.
    pub fn sample(&mut self, logits: &[f32]) -> Option<u32> {
        let argmax = logits
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i as u32)?;
        if self.cfg.temperature <= 0.0 {
            return Some(argmax);
        }
        self.scratch.clear();
        self.scratch.extend(
            logits
                .iter()
                .enumerate()
                .filter(|(_, v)| v.is_finite())
                .map(|(i, &v)| (v, i as u32)),
        );
        let k = match self.cfg.top_k {
            0 => self.scratch.len(),
            k => k.min(self.scratch.len()),
        };
        if k < self.scratch.len() {
            self.scratch
                .select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
            self.scratch.truncate(k);
        }
        let max = self.scratch.iter().map(|p| p.0).fold(f32::MIN, f32::max);
        let inv_t = 1.0 / self.cfg.temperature;
        let mut total = 0.0f32;
        for p in self.scratch.iter_mut() {
            p.0 = ((p.0 - max) * inv_t).exp();
            total += p.0;
        }
        if !(total.is_finite() && total > 0.0) {
            return Some(argmax);
        }
        // Walk in id order so the result does not depend on the partition's arrangement.
        self.scratch.sort_unstable_by_key(|p| p.1);
        let mut x = self.rng.random::<f32>() * total;
        for &(w, id) in &self.scratch {
            if x < w {
                return Some(id);
            }
            x -= w;
        }
        self.scratch.last().map(|p| p.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_is_argmax_and_skips_nan() {
        let mut s = Sampler::new(
            Sampling {
                temperature: 0.0,
                top_k: 0,
            },
            1,
        );
        assert_eq!(s.sample(&[0.1, f32::NAN, 3.0, 2.0]), Some(2));
        assert_eq!(s.sample(&[f32::NAN, f32::INFINITY]), None);
    }

    #[test]
    fn top_k_never_picks_outside_the_k_best() {
        let mut s = Sampler::new(
            Sampling {
                temperature: 1.0,
                top_k: 2,
            },
            7,
        );
        let logits = [0.0, 5.0, 1.0, 4.9, -3.0];
        for _ in 0..500 {
            let t = s.sample(&logits).unwrap();
            assert!(t == 1 || t == 3, "{t}");
        }
    }

    #[test]
    fn same_seed_same_tokens() {
        let logits: Vec<f32> = (0..50).map(|i| (i as f32 * 0.37).sin()).collect();
        let run = |seed| {
            let mut s = Sampler::new(
                Sampling {
                    temperature: 0.8,
                    top_k: 10,
                },
                seed,
            );
            (0..40)
                .map(|_| s.sample(&logits).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }
}
