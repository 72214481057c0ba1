//! A WebRTC caller for Duet (str0m as the offerer): connects, says something (a sentence
//! from espeak-ng when it is installed, which the cascade's Silero VAD hears as speech; else
//! a synthetic voiced tone of the given length, which the energy VAD of `--model echo`
//! hears), prints every event and the audio it got back, then hangs up.
//!
//! ```sh
//! cargo run --release -- serve &
//! cargo run --release --example webrtc_client -- 127.0.0.1:8080 1.5
//! ```

use std::time::Duration;

use duet_client::http::hangup;
use duet_client::rtc::{ClientOptions, RtcClient};

/// 48 kHz voiced synthetic speech: a 140 Hz harmonic series with vibrato.
fn voiced(secs: f32) -> Vec<f32> {
    let n = (secs * 48_000.0) as usize;
    let mut phase = 0.0f32;
    (0..n)
        .map(|i| {
            let t = i as f32 / 48_000.0;
            phase += 2.0
                * std::f32::consts::PI
                * (140.0 + 8.0 * (2.0 * std::f32::consts::PI * 5.0 * t).sin())
                / 48_000.0;
            0.12 * (1..=8)
                .map(|h| (phase * h as f32).sin() / h as f32)
                .sum::<f32>()
        })
        .collect()
}

/// "Hello, can you hear me?" from espeak-ng at 48 kHz, when espeak-ng runs here.
fn spoken() -> Option<Vec<f32>> {
    let runs = std::process::Command::new("espeak-ng")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    runs.then(|| {
        let pcm = duet_client::speech::espeak("Hello, can you hear me?");
        duet_client::speech::resample_linear(&pcm, duet_client::speech::RATE, 48_000)
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let server = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:8080".into())
        .parse()?;
    let secs: f32 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1.5);
    let mut call = RtcClient::connect(server, ClientOptions::default()).await?;
    println!("call {}", call.call_id);
    call.until("session.created", Duration::from_secs(10))
        .await?;
    let mut audio = spoken().unwrap_or_else(|| voiced(secs));
    audio.extend(vec![0.0; 48_000]);
    call.speak(&audio);
    let (_, seen) = call
        .until("output_audio_buffer.stopped", Duration::from_secs(30))
        .await?;
    for ev in &seen {
        let extra = ev
            .get("delta")
            .or(ev.get("transcript"))
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        println!("<- {}{extra}", ev["type"].as_str().unwrap_or("?"));
    }
    let stats = call.stats();
    if let (Some(s), Some(c)) = (stats.started, stats.connected) {
        println!("connected in {:?}", c - s);
    }
    let loud = stats.frames.iter().filter(|(_, r)| *r > 0.02).count();
    println!(
        "received {} frames, {} with speech ({} ms)",
        stats.frames.len(),
        loud,
        loud * 20
    );
    let status = hangup(server, &call.call_id, None).await?;
    println!("hangup: {status}");
    call.close();
    Ok(())
}
