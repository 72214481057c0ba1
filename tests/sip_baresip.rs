//! A real SIP phone, baresip (Debian's `baresip-core`), calls Duet with SDES-SRTP required
//! (`mediaenc=srtp-mand`), PCMU, and a spoken WAV as its microphone; the app accepts, the
//! echo model answers, and baresip's recording of what it heard holds the answer. baresip
//! hangs up when its WAV ends (its BYE ends the call and frees every slot).

use crate::common;

use common::sip::{
    accept, baresip_config, phone_dir, sip_addr, sip_server, start_phone, webhook_app,
};
use common::Client;
use std::path::Path;
use std::time::Duration;

/// The samples of a 16-bit WAV (after its `data` tag).
fn read_wav(path: &Path) -> Vec<f32> {
    let bytes = std::fs::read(path).unwrap();
    let at = bytes
        .windows(4)
        .position(|w| w == b"data")
        .expect("a data chunk")
        + 8;
    bytes[at..]
        .chunks_exact(2)
        .map(|b| f32::from(i16::from_le_bytes([b[0], b[1]])) / 32768.0)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baresip_calls_over_srtp_and_hears_the_answer() {
    let _alone = common::exclusive().await; // real-time audio both ways
    let mut app = webhook_app().await;
    let server = sip_server(&app, &[]).await;
    // 2 s of voice, then silence long enough to hear the whole answer.
    let mut mic: Vec<f32> = common::voiced(2.0).iter().step_by(3).copied().collect();
    mic.extend(vec![0.0; 8_000 * 5]);
    let dir = phone_dir("baresip", &mic);
    let rec = dir.join("rec");
    let (port, _) = baresip_config(&dir, &rec, "mediaenc=srtp-mand", &["srtp.so"]);
    let from = format!("sip:phone@127.0.0.1:{port}");

    let dial = format!("/dial sip:duet@{}", sip_addr(&server));
    let mut phone = start_phone(&dir, 15, Some(&dial));
    let call = app.next().await;
    assert!(
        call.header("From").unwrap().contains(&from),
        "{:?}",
        call.event
    );
    accept(server.addr, &call.call_id).await;
    let mut sideband = Client::sideband(server.addr, &call.call_id).await.unwrap();
    sideband.until("input_audio_buffer.speech_stopped").await;
    sideband.until("output_audio_buffer.started").await;

    let out = tokio::time::timeout(Duration::from_secs(30), phone.wait())
        .await
        .expect("baresip ends when its WAV does")
        .unwrap();
    let mut log = String::new();
    if let Some(mut s) = phone.stdout.take() {
        use tokio::io::AsyncReadExt;
        let _ = s.read_to_string(&mut log).await;
    }
    assert!(out.success(), "baresip failed: {log}");
    assert!(log.contains("SRTP is Enabled"), "SRTP in use: {log}");
    let heard = std::fs::read_dir(&rec)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with("-dec.wav"))
        .map(|e| read_wav(&e.path()))
        .expect("baresip's recording of what it heard");
    let loud = heard
        .chunks(160)
        .filter(|f| duet_media::pcm::rms_dbfs(f) > -30.0)
        .count();
    assert!(loud >= 40, "{loud} loud 20 ms frames in what baresip heard");
    let _ = std::fs::remove_dir_all(&dir);

    common::sip::assert_idle(&server, "baresip's BYE ended the call").await;
}
