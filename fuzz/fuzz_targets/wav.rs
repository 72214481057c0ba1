//! Fuzzes the WAV reader behind `POST /v1/audio/transcriptions` (`duet_media::parse_wav`):
//! never a panic, never more samples than the data could hold.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((rate, pcm)) = duet_media::parse_wav(data) {
        assert!(rate > 0);
        assert!(pcm.len() <= data.len() / 2);
        assert!(pcm.iter().all(|s| s.is_finite() && s.abs() <= 1.0));
    }
});
