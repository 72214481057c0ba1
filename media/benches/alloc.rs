//! Allocations on the per-frame media path, counted by a global allocator:
//! `cargo bench -p duet-media --bench alloc`.
//!
//! 100 Opus calls run on a virtual 20 ms clock for 12 s. Each caller speaks all the time
//! (an Opus packet in per tick), and each call plays a 2 s answer as the echo model sends
//! it (20 ms of 24 kHz audio per tick), then 1 s of silence; every third answer is cut
//! short by a barge-in (`clear`). Only the pipeline's own calls are counted (a packet's
//! payload arrives allocated by the network stack, as from str0m). The first 3 s warm
//! every buffer up; the figure is allocations per call-second after that, target 0.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use duet_media::{CallAudio, CallCodec, OpusEncoder};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
}

fn count(size: usize) {
    if ON.with(Cell::get) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(size as u64, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator; the counting touches only atomics and a
// const-initialised thread-local (no allocation of its own).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        count(new);
        System.realloc(ptr, layout, new)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` with allocations counted.
fn counted<T>(f: impl FnOnce() -> T) -> T {
    ON.with(|on| on.set(true));
    let v = f();
    ON.with(|on| on.set(false));
    v
}

const CALLS: usize = 100;
const SECS: u64 = 12;
const WARM_SECS: u64 = 3;
const TICKS_PER_SEC: u64 = 50;

fn main() {
    let mut enc = OpusEncoder::new().expect("encoder");
    let voice: Vec<Vec<u8>> = (0..50)
        .map(|k| {
            let pcm: Vec<f32> = (0..960)
                .map(|i| {
                    let t = (k * 960 + i) as f32 / 48_000.0;
                    0.2 * (2.0 * std::f32::consts::PI * 180.0 * t).sin()
                })
                .collect();
            enc.encode(&pcm).expect("encode")
        })
        .collect();
    let answer: Vec<f32> = (0..480)
        .map(|i| 0.2 * (2.0 * std::f32::consts::PI * 300.0 * i as f32 / 24_000.0).sin())
        .collect();
    let mut calls: Vec<CallAudio> = (0..CALLS)
        .map(|_| CallAudio::new(CallCodec::Opus).expect("call"))
        .collect();
    let mut inbound: Vec<Vec<f32>> = (0..CALLS).map(|_| Vec::with_capacity(480)).collect();
    let t0 = Instant::now();
    let (mut warm_allocs, mut warm_bytes) = (0, 0);
    let mut work = Duration::ZERO;
    let mut frames = 0u64;
    for tick in 0..SECS * TICKS_PER_SEC {
        if tick == WARM_SECS * TICKS_PER_SEC {
            warm_allocs = ALLOCS.load(Ordering::Relaxed);
            warm_bytes = BYTES.load(Ordering::Relaxed);
        }
        let now = t0 + Duration::from_millis(20 * tick);
        for (i, call) in calls.iter_mut().enumerate() {
            // The caller's packet, allocated by the network stack.
            let payload = voice[(tick as usize + i) % voice.len()].clone();
            // The answer: 2 s playing, then 1 s of silence (150 ticks per cycle).
            let phase = (tick + i as u64 * 7) % 150;
            let tag = (tick + i as u64 * 7) / 150;
            let started = Instant::now();
            counted(|| {
                call.receive(1, tick, payload, now);
                if phase < 100 {
                    call.play(tag, &answer);
                }
                if phase == 100 {
                    call.finish(tag);
                }
                if phase == 60 && tag % 3 == 0 {
                    call.clear();
                }
                let f = call.next_frame().expect("frame");
                std::hint::black_box(f.payload);
                call.prepare();
                inbound[i].clear();
                call.inbound_frame(now, &mut inbound[i]);
            });
            work += started.elapsed();
            frames += 1;
        }
    }
    let allocs = ALLOCS.load(Ordering::Relaxed) - warm_allocs;
    let bytes = BYTES.load(Ordering::Relaxed) - warm_bytes;
    let call_secs = (CALLS as u64 * (SECS - WARM_SECS)) as f64;
    println!(
        "media path, {CALLS} Opus calls × {SECS} s (first {WARM_SECS} s warm-up): {} allocations during warm-up; after it {allocs} allocations ({bytes} bytes) = {:.3} per call-second",
        warm_allocs,
        allocs as f64 / call_secs
    );
    println!(
        "work per call per 20 ms (receive + play + next frame + prepare + inbound frame): {:.1} µs",
        work.as_secs_f64() * 1e6 / frames as f64
    );
}
