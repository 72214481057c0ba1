use super::*;
use proptest::prelude::*;
use std::collections::HashMap;

fn ramp(from: usize, n: usize) -> Vec<f32> {
    (from..from + n).map(|v| v as f32).collect()
}

#[test]
fn frame_spans_two_tags_then_pads() {
    let mut q = PlaybackQueue::new(4, 100);
    q.push(1, &[1.0, 2.0, 3.0]).unwrap();
    q.push(2, &[4.0, 5.0, 6.0]).unwrap();
    assert_eq!((q.queued(), q.queued_for(1), q.queued_for(2)), (6, 3, 3));
    let (mut out, mut sent) = (Vec::new(), Vec::new());
    assert!(q.pop_frame(&mut out, &mut sent));
    assert_eq!(out, [1.0, 2.0, 3.0, 4.0]);
    assert_eq!(
        sent,
        [Sent { tag: 1, samples: 3 }, Sent { tag: 2, samples: 1 }]
    );
    assert!(q.pop_frame(&mut out, &mut sent));
    assert_eq!(out, [5.0, 6.0, 0.0, 0.0]);
    assert_eq!(sent, [Sent { tag: 2, samples: 2 }]);
    assert!(!q.pop_frame(&mut out, &mut sent));
    assert_eq!(out, [0.0; 4]);
    assert!(sent.is_empty() && q.is_empty());
}

#[test]
fn clear_makes_next_frame_silent() {
    let mut q = PlaybackQueue::new(960, 48_000);
    q.push(7, &vec![0.5; 2000]).unwrap();
    q.push(8, &vec![0.25; 100]).unwrap();
    q.push(7, &[0.5; 10]).unwrap();
    let (mut out, mut sent) = (Vec::new(), Vec::new());
    assert!(q.pop_frame(&mut out, &mut sent));
    assert_eq!(q.clear(), vec![(7, 1050), (8, 100)]);
    assert!(!q.pop_frame(&mut out, &mut sent));
    assert_eq!(out.len(), 960);
    assert!(out.iter().all(|&v| v == 0.0));
    assert!(sent.is_empty());
}

#[test]
fn clear_tag_removes_only_that_tag() {
    let mut q = PlaybackQueue::new(4, 100);
    q.push(1, &[1.0, 1.0]).unwrap();
    q.push(2, &[2.0, 2.0]).unwrap();
    q.push(1, &[1.0]).unwrap();
    assert_eq!(q.clear_tag(2), 2);
    assert_eq!(q.clear_tag(2), 0);
    let (mut out, mut sent) = (Vec::new(), Vec::new());
    q.pop_frame(&mut out, &mut sent);
    assert_eq!(out, [1.0, 1.0, 1.0, 0.0]);
    assert_eq!(sent, [Sent { tag: 1, samples: 3 }]);
}

#[test]
fn capacity_is_all_or_nothing() {
    let mut q = PlaybackQueue::new(4, 10);
    q.push(1, &[0.1; 8]).unwrap();
    let err = q.push(2, &[0.2; 3]).unwrap_err();
    assert_eq!(
        err,
        QueueFull {
            requested: 3,
            available: 2
        }
    );
    assert_eq!(err.code(), "playback_queue_full");
    assert_eq!((q.queued(), q.queued_for(2)), (8, 0));
    q.push(2, &[0.2; 2]).unwrap();
    assert_eq!(q.queued(), 10);
    assert!(q.push(3, &[]).is_ok());
    assert!(q.push(3, &[0.0]).is_err());
}

proptest! {
    /// Random pushes, frames and purges against a model: samples come
    /// out in order, and per tag pushed = sent + purged.
    #[test]
    fn accounting_matches_model(
        frame in 1usize..50,
        cap in 0usize..400,
        ops in proptest::collection::vec((0u8..5, 0u64..4, 0usize..120), 1..200),
    ) {
        let mut q = PlaybackQueue::new(frame, cap);
        let mut model: VecDeque<(u64, f32)> = VecDeque::new();
        let mut pushed: HashMap<u64, usize> = HashMap::new();
        let mut done: HashMap<u64, usize> = HashMap::new();
        let (mut out, mut sent) = (Vec::new(), Vec::new());
        let mut counter = 0usize;
        for (op, tag, n) in ops {
            match op {
                0 | 1 => {
                    let samples = ramp(counter, n);
                    counter += n;
                    if q.push(tag, &samples).is_ok() {
                        *pushed.entry(tag).or_default() += n;
                        model.extend(samples.iter().map(|&s| (tag, s)));
                    } else {
                        prop_assert!(model.len() + n > cap);
                    }
                }
                2 => {
                    let audio = q.pop_frame(&mut out, &mut sent);
                    prop_assert_eq!(out.len(), frame);
                    let k = frame.min(model.len());
                    prop_assert_eq!(audio, k > 0);
                    let mut want_sent: Vec<Sent> = Vec::new();
                    for (i, (t, s)) in model.drain(..k).enumerate() {
                        prop_assert_eq!(out[i], s);
                        match want_sent.last_mut() {
                            Some(l) if l.tag == t => l.samples += 1,
                            _ => want_sent.push(Sent { tag: t, samples: 1 }),
                        }
                    }
                    prop_assert!(out[k..].iter().all(|&v| v == 0.0));
                    for s in &sent {
                        *done.entry(s.tag).or_default() += s.samples;
                    }
                    prop_assert_eq!(&sent, &want_sent);
                }
                3 => {
                    let n = q.clear_tag(tag);
                    let before = model.len();
                    model.retain(|&(t, _)| t != tag);
                    prop_assert_eq!(n, before - model.len());
                    *done.entry(tag).or_default() += n;
                }
                _ => {
                    for (t, n) in q.clear() {
                        *done.entry(t).or_default() += n;
                    }
                    model.clear();
                }
            }
            prop_assert_eq!(q.queued(), model.len());
            prop_assert!(q.queued() <= cap);
            prop_assert_eq!(q.is_empty(), model.is_empty());
            for t in 0..4 {
                let m = model.iter().filter(|&&(x, _)| x == t).count();
                prop_assert_eq!(q.queued_for(t), m);
            }
        }
        for (t, n) in q.clear() {
            *done.entry(t).or_default() += n;
        }
        pushed.retain(|_, n| *n > 0);
        done.retain(|_, n| *n > 0);
        prop_assert_eq!(pushed, done);
    }
}
