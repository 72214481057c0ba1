//! Who gets a busy CPU first. The threads a turn or a frame waits on keep the process's own
//! priority: the async runtime (media pacing, sessions, Silero VAD), the media engines, the
//! duplex model loop and the turn model (`duet-turn-N`, whose score a turn's end waits for).
//! Bulk model work runs `--bulk-nice` lower (a higher nice value, 10 by default): the
//! transcription loop, the embedded LLM, speech synthesis, and the math pool (rayon's global
//! pool, where candle's matrix products run) their tensors use — unless the duplex model
//! runs on the CPU, whose frames wait on that pool.
//!
//! On idle cores this changes nothing. On busy ones it is the difference between a 35 ms
//! turn score and one that waits out a Whisper pass on both cores: Linux shares a busy core
//! by weight, and a thread ten nice levels lower weighs about a tenth as much, so a prompt
//! thread that wakes up runs nearly at once while the bulk work still gets every cycle the
//! prompt threads leave. Lowering one's own priority needs no privilege (raising it back
//! would, so a thread is made bulk once, when it starts, and stays so).
//!
//! Linux only; elsewhere every thread keeps the process's priority.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Once;

/// `--bulk-nice`'s default.
pub const DEFAULT_BULK_NICE: u8 = 10;

/// The highest nice value Linux has (the lowest priority).
const MAX_NICE: i32 = 19;

/// How much lower than the prompt threads the bulk threads run (nice levels; 0: the same).
static BULK_NICE: AtomicI32 = AtomicI32::new(DEFAULT_BULK_NICE as i32);

/// Which share of a busy CPU a thread gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Share {
    /// What a turn or a frame waits on: the process's own priority.
    Prompt,
    /// Bulk model work: `--bulk-nice` levels lower.
    Bulk,
}

/// Sets the bulk threads' nice offset (`--bulk-nice`) and starts the math pool with
/// `pool`'s share: bulk, unless the frame-paced model itself runs its math there (Moshi on
/// the CPU). Call it before any model loads: the pool is built once per process, by the
/// first call (a pool that something else started first keeps its priority, and a warning
/// says so); the offset applies to the bulk threads started after the call.
pub fn configure(bulk_nice: u8, pool: Share) {
    BULK_NICE.store(i32::from(bulk_nice).min(MAX_NICE), Ordering::Relaxed);
    static POOL: Once = Once::new();
    POOL.call_once(|| {
        if let Err(e) = math_pool(pool).build_global() {
            tracing::warn!("the math pool was started before its priority was set: {e}");
        }
    });
}

/// The math pool: workers with `share`, one per core (rayon's default).
fn math_pool(share: Share) -> rayon::ThreadPoolBuilder {
    rayon::ThreadPoolBuilder::new()
        .thread_name(|n| format!("duet-math-{n}"))
        .start_handler(move |_| enter(share))
}

/// Gives the calling thread `share`: a bulk thread's nice value rises by `--bulk-nice` over
/// what it inherited (to at most 19); a prompt thread is left as it is. A refusal is logged
/// and the thread runs on at its priority.
pub fn enter(share: Share) {
    if share == Share::Prompt {
        return;
    }
    let by = BULK_NICE.load(Ordering::Relaxed);
    if by == 0 {
        return;
    }
    if let Err(e) = lower_this_thread(by) {
        tracing::warn!("a bulk thread keeps its priority: {e}");
    }
}

/// The calling thread's nice value.
#[cfg(target_os = "linux")]
pub fn this_thread_nice() -> std::io::Result<i32> {
    // getpriority answers -1 for an error and for nice -1 alike: errno tells them apart.
    // SAFETY: errno is this thread's; getpriority only reads the scheduler's state.
    unsafe {
        *libc::__errno_location() = 0;
        let nice = libc::getpriority(libc::PRIO_PROCESS, this_thread());
        let err = std::io::Error::last_os_error();
        if nice == -1 && err.raw_os_error() != Some(0) {
            return Err(err);
        }
        Ok(nice)
    }
}

/// The calling thread's nice value (0: not Linux).
#[cfg(not(target_os = "linux"))]
pub fn this_thread_nice() -> std::io::Result<i32> {
    Ok(0)
}

/// Linux's nice value is a thread's own (`PRIO_PROCESS` with a thread id names the thread).
#[cfg(target_os = "linux")]
fn this_thread() -> libc::id_t {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as libc::id_t }
}

#[cfg(target_os = "linux")]
fn lower_this_thread(by: i32) -> std::io::Result<()> {
    let nice = (this_thread_nice()? + by).min(MAX_NICE);
    // SAFETY: setpriority changes only the calling thread's nice value.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, this_thread(), nice) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn lower_this_thread(_by: i32) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    fn nice_in(share: Share) -> i32 {
        std::thread::spawn(move || {
            enter(share);
            this_thread_nice().expect("nice")
        })
        .join()
        .expect("thread")
    }

    #[test]
    fn a_bulk_thread_runs_lower_than_a_prompt_one_and_leaves_its_parent_alone() {
        let parent = this_thread_nice().expect("nice");
        configure(DEFAULT_BULK_NICE, Share::Bulk);
        let prompt = nice_in(Share::Prompt);
        let bulk = nice_in(Share::Bulk);
        assert_eq!(prompt, parent);
        assert_eq!(bulk, (parent + i32::from(DEFAULT_BULK_NICE)).min(MAX_NICE));
        assert_eq!(
            this_thread_nice().expect("nice"),
            parent,
            "only the thread itself"
        );
        // The math pool's workers are bulk threads.
        let pool = math_pool(Share::Bulk).num_threads(1).build().expect("pool");
        let (name, math) = pool.install(|| {
            let name = std::thread::current().name().map(str::to_owned);
            (name, this_thread_nice().expect("nice"))
        });
        assert_eq!(name.as_deref(), Some("duet-math-0"));
        assert_eq!(math, bulk);
    }
}
