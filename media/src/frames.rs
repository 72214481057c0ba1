//! Fixed-size framing of a sample stream.

/// Cuts a stream of samples into frames of exactly `frame_len` samples,
/// keeping the incomplete tail until more samples arrive.
#[derive(Debug, Clone)]
pub struct FrameAccumulator {
    frame_len: usize,
    buf: Vec<f32>,
}

impl FrameAccumulator {
    /// Creates an accumulator for frames of `frame_len` samples
    /// (a length of 0 is treated as 1).
    pub fn new(frame_len: usize) -> Self {
        let frame_len = frame_len.max(1);
        FrameAccumulator {
            frame_len,
            buf: Vec::with_capacity(frame_len),
        }
    }

    /// The frame length in samples.
    pub fn frame_len(&self) -> usize {
        self.frame_len
    }

    /// Appends `samples`, calling `on_frame` once per completed frame, in
    /// stream order. Whole frames inside `samples` are passed without copying.
    pub fn push(&mut self, samples: &[f32], mut on_frame: impl FnMut(&[f32])) {
        let mut rest = samples;
        if !self.buf.is_empty() {
            let take = (self.frame_len - self.buf.len()).min(rest.len());
            self.buf.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
            if self.buf.len() < self.frame_len {
                return;
            }
            on_frame(&self.buf);
            self.buf.clear();
        }
        let mut frames = rest.chunks_exact(self.frame_len);
        for frame in &mut frames {
            on_frame(frame);
        }
        self.buf.extend_from_slice(frames.remainder());
    }

    /// Number of samples waiting for the next frame (always `< frame_len`).
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Returns and clears the incomplete tail.
    pub fn take_partial(&mut self) -> Vec<f32> {
        let mut tail = Vec::with_capacity(self.frame_len);
        std::mem::swap(&mut tail, &mut self.buf);
        tail
    }

    /// Drops the incomplete tail.
    pub fn clear(&mut self) {
        self.buf.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Rng;

    fn collect(acc: &mut FrameAccumulator, samples: &[f32], frames: &mut Vec<Vec<f32>>) {
        acc.push(samples, |f| frames.push(f.to_vec()));
    }

    #[test]
    fn frames_are_exact_and_in_order_for_any_chunking() {
        let stream: Vec<f32> = (0..10_000).map(|i| i as f32).collect();
        let mut rng = Rng(99);
        for frame_len in [1, 3, 160, 480, 960] {
            let mut acc = FrameAccumulator::new(frame_len);
            let (mut frames, mut pos) = (Vec::new(), 0);
            while pos < stream.len() {
                let n = rng.below(2 * frame_len + 3).min(stream.len() - pos);
                collect(&mut acc, &stream[pos..pos + n], &mut frames);
                pos += n;
                assert!(acc.pending() < frame_len);
            }
            assert!(frames.iter().all(|f| f.len() == frame_len));
            let flat: Vec<f32> = frames.concat();
            assert_eq!(flat.len(), stream.len() / frame_len * frame_len);
            assert_eq!(flat[..], stream[..flat.len()]);
            assert_eq!(acc.take_partial(), stream[flat.len()..].to_vec());
            assert_eq!(acc.pending(), 0);
        }
    }

    #[test]
    fn partial_tail_and_clear() {
        let mut acc = FrameAccumulator::new(4);
        let mut frames = Vec::new();
        collect(&mut acc, &[1.0, 2.0, 3.0], &mut frames);
        assert!(frames.is_empty());
        assert_eq!(acc.pending(), 3);
        collect(&mut acc, &[], &mut frames);
        assert_eq!(acc.pending(), 3);
        collect(&mut acc, &[4.0, 5.0], &mut frames);
        assert_eq!(frames, vec![vec![1.0, 2.0, 3.0, 4.0]]);
        assert_eq!(acc.take_partial(), vec![5.0]);
        assert!(acc.take_partial().is_empty());
        collect(&mut acc, &[6.0, 7.0], &mut frames);
        acc.clear();
        collect(&mut acc, &[8.0, 9.0, 10.0, 11.0], &mut frames);
        assert_eq!(frames[1], vec![8.0, 9.0, 10.0, 11.0]);
    }

    #[test]
    fn zero_frame_len_is_one() {
        let mut acc = FrameAccumulator::new(0);
        assert_eq!(acc.frame_len(), 1);
        let mut n = 0;
        acc.push(&[0.5; 5], |f| {
            assert_eq!(f.len(), 1);
            n += 1;
        });
        assert_eq!(n, 5);
    }
}
