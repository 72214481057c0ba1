//! The server's memory budget: what one session can hold at worst under the configured
//! limits, and what `--max-sessions` and `--max-calls` of them add up to. Logged at start-up
//! (with a warning when it exceeds the machine's memory) and documented in the README, so
//! an operator can size the limits to the machine.

use std::fmt;

use crate::config::ServeArgs;

/// Bytes per sample of the audio a session keeps for its life (PCM16): the input buffer,
/// the conversation, the response being generated.
const PCM16: u64 = std::mem::size_of::<i16>() as u64;
/// Bytes per sample of audio on its way (f32): the model's and the transcriber's queues, a
/// call's playback queue.
const F32: u64 = std::mem::size_of::<f32>() as u64;
/// Session audio rate.
const RATE: u64 = duet_media::SESSION_RATE as u64;
/// A call's media state at worst: 30 s of 48 kHz playback queue, jitter buffer, codecs.
const CALL_MEDIA: u64 = 30 * 48_000 * F32 + (1 << 20);
/// The model loop's input queue per session at worst (500 frames of 80 ms, Moshi's frame).
const MODEL_QUEUE: u64 = 500 * 1_920 * F32;

/// Worst cases, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// One session.
    pub per_session: u64,
    /// Added by a WebRTC call (media state; its session is counted as a session).
    pub per_call: u64,
    /// Held by the server itself: the live client secrets (`--max-client-secrets`, and
    /// `--max-demo-secrets` with `--demo-mint-secrets`).
    pub shared: u64,
    /// `--max-sessions` sessions (a call's session is one of them) and `--max-calls` calls'
    /// media, plus `shared`.
    pub total: u64,
}

/// The largest client secret record (its session object).
const SECRET: u64 = 32 * 1024;

impl Budget {
    /// The budget for `args`.
    pub fn of(args: &ServeArgs) -> Self {
        let item = args.max_item_audio_secs * RATE;
        let per_session = 300 * RATE * PCM16 // input buffer
            + 900 * RATE * PCM16 // conversation audio
            + item * PCM16 // the response being generated
            + item * PCM16 * 4 / 3 // one cached retrieve encoding (PCM16, base64)
            + ((args.max_outbound_mib as u64) << 20)
            + ((args.max_inbound_mib.max(16) as u64) << 20)
            + args.resume_journal_bytes as u64 // replay journal (opted-in sessions)
            + MODEL_QUEUE
            + if args.transcription_model_dir.is_some() {
                crate::transcribe_loop::MAX_QUEUED_SAMPLES as u64 * F32 // audio waiting for the transcriber
            } else {
                0
            };
        let per_call = CALL_MEDIA;
        let sessions = args.max_sessions as u64;
        let demo = if args.demo_mint_secrets {
            args.max_demo_secrets as u64
        } else {
            0
        };
        let shared = (args.max_client_secrets as u64 + demo) * SECRET;
        Self {
            per_session,
            per_call,
            shared,
            total: sessions * per_session + args.max_calls as u64 * per_call + shared,
        }
    }

    /// The machine's memory, from `/proc/meminfo` (Linux), in bytes.
    pub fn machine() -> Option<u64> {
        let info = std::fs::read_to_string("/proc/meminfo").ok()?;
        let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib * 1024)
    }
}

fn mib(bytes: u64) -> u64 {
    bytes >> 20
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "worst case {} MiB per session + {} MiB per call + {} MiB of client secrets; {} MiB at the session and call caps",
            mib(self.per_session),
            mib(self.per_call),
            mib(self.shared),
            mib(self.total)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn defaults_add_up() {
        let args = ServeArgs::parse_from(["serve"]);
        let b = Budget::of(&args);
        assert_eq!(
            b.total,
            256 * b.per_session + 100 * b.per_call + 10_000 * SECRET,
            "{b}"
        );
        let small = ServeArgs::parse_from([
            "serve",
            "--max-sessions",
            "1",
            "--max-calls",
            "0",
            "--max-client-secrets",
            "1",
        ]);
        assert_eq!(Budget::of(&small).total, b.per_session + SECRET);
        let demo = ServeArgs::parse_from(["serve", "--demo-mint-secrets"]);
        assert_eq!(Budget::of(&demo).shared, (10_000 + 100) * SECRET);
    }

    #[test]
    fn stored_audio_counts_two_bytes_a_sample() {
        let args = |secs: &str| ServeArgs::parse_from(["serve", "--max-item-audio-secs", secs]);
        let (one, two) = (Budget::of(&args("1")), Budget::of(&args("2")));
        // A second more of item audio: the response being generated (PCM16) and its cached
        // retrieve encoding (base64 of PCM16).
        assert_eq!(two.per_session - one.per_session, 48_000 + 64_000);
        // With no item audio at all, the audio kept is the input buffer's 300 s and the
        // conversation's 900 s, at 48 000 bytes a second.
        let zero = Budget::of(&args("0"));
        let queues = (32 << 20) + (16 << 20) + (8 << 20) + MODEL_QUEUE;
        assert_eq!(zero.per_session - queues, (300 + 900) * 48_000);
        // The defaults: the README's "≈ 147 MiB" per session.
        let defaults = Budget::of(&ServeArgs::parse_from(["serve"]));
        assert_eq!(defaults.per_session, 153_760_256, "{defaults}");
    }
}
