//! Whole calls in memory (see [`crate::testutil`]): a str0m offerer (like a browser) and our
//! [`Call`] exchange datagrams through a simulated network on a simulated clock.

use core::net::SocketAddr;
use std::time::{Duration, Instant};

use str0m::media::{Frequency, MediaTime};

use super::*;
use crate::sdp::DEFAULT_MAX_MESSAGE_SIZE;
use crate::stun::{is_stun, stun_username_local};
use crate::testutil::Pair;

fn config() -> AnswerConfig {
    let server: SocketAddr = "127.0.0.1:6000".parse().unwrap();
    AnswerConfig::new(vec![server]).unwrap()
}

fn connected(edit: impl FnOnce(String) -> String) -> Pair {
    let mut p = Pair::new(&config(), Instant::now(), edit).unwrap();
    assert!(p.connect(400).unwrap(), "never connected: {:?}", p.events);
    p
}

/// Sends `texts` in order, keeping the rest on [`SendError::Full`] as the engine does, and
/// steps until the peer has them all (or `max_steps` ran out).
fn deliver_texts(p: &mut Pair, texts: &[String], max_steps: usize) -> usize {
    let (mut next, mut fulls) = (0, 0);
    for _ in 0..max_steps {
        while next < texts.len() {
            match p.call.send_text(&texts[next]) {
                Ok(()) => next += 1,
                Err(SendError::Full) => {
                    fulls += 1;
                    break;
                }
                Err(e) => panic!("send_text: {e}"),
            }
        }
        p.step().unwrap();
        if p.peer.got_text.len() == texts.len() {
            break;
        }
    }
    fulls
}

#[test]
fn in_memory_call_carries_audio_and_events() {
    let mut p = Pair::new(&config(), Instant::now(), |o| o).unwrap();
    assert!(p.answer.contains("a=ice-lite"), "{}", p.answer);
    assert!(p.answer.contains("opus/48000/2"));
    let ufrag_line = format!("a=ice-ufrag:{}\r\n", p.call.local_ufrag());
    assert!(!p.call.local_ufrag().is_empty() && p.answer.contains(&ufrag_line));

    // Every ICE check the peer sends names our ufrag first.
    let mut checks = 0;
    for _ in 0..400 {
        if p.call.channel_open() {
            break;
        }
        for d in p.peer_output().unwrap() {
            if is_stun(&d) {
                assert_eq!(stun_username_local(&d), Some(p.call.local_ufrag()));
                checks += 1;
            }
            p.deliver(&d).unwrap();
        }
        p.call_to_peer().unwrap();
        p.tick().unwrap();
    }
    assert!(checks > 0, "no STUN seen");
    p.run(20).unwrap();
    assert!(p.events.contains(&CallEvent::Connected), "{:?}", p.events);
    assert!(p.peer.open && p.events.contains(&CallEvent::ChannelOpen));
    assert!(p.call.channel_open() && p.call.can_send_audio());

    // Peer -> call: text and audio.
    let id = p.peer.channel;
    let event = br#"{"type":"response.create"}"#;
    assert!(p.peer.rtc.channel(id).unwrap().write(false, event).unwrap());
    let writer = p.peer.rtc.writer(p.peer.mid).unwrap();
    let pt = writer.payload_params().next().unwrap().pt();
    for i in 0..5u64 {
        let time = MediaTime::new(i * 960, Frequency::FORTY_EIGHT_KHZ);
        let writer = p.peer.rtc.writer(p.peer.mid).unwrap();
        writer
            .write(pt, p.now, time, vec![0xF8, 0xFF, 0xFE])
            .unwrap();
        p.run(4).unwrap();
    }
    assert!(p
        .events
        .contains(&CallEvent::Text(r#"{"type":"response.create"}"#.into())));
    let audio: Vec<(u32, u64)> = p
        .events
        .iter()
        .filter_map(|e| match e {
            CallEvent::Audio {
                seq,
                ssrc,
                codec: AudioCodec::Opus,
                ..
            } => Some((*ssrc, *seq)),
            _ => None,
        })
        .collect();
    let sent_ssrc = p
        .peer
        .rtc
        .direct_api()
        .stream_tx_by_mid(p.peer.mid, None)
        .unwrap()
        .ssrc();
    assert!(
        audio.iter().all(|(ssrc, _)| *ssrc == *sent_ssrc),
        "{audio:?}"
    );
    assert!(
        audio.len() >= 4 && audio.windows(2).all(|w| w[1].1 == w[0].1 + 1),
        "{audio:?}"
    );

    // Call -> peer.
    assert_eq!(p.call.send_text(r#"{"type":"session.created"}"#), Ok(()));
    for _ in 0..5 {
        let now = p.now;
        p.call.send_audio(now, &[0xF8, 0xFF, 0xFE]).unwrap();
        p.run(4).unwrap();
    }
    assert_eq!(
        p.peer.got_text,
        vec![r#"{"type":"session.created"}"#.to_string()]
    );
    assert!(p.peer.got_audio >= 4, "{}", p.peer.got_audio);
    p.run(100).unwrap(); // Past the delayed SACK.
    assert_eq!(p.call.buffered_amount(), 0, "acknowledged");

    // The peer vanishes without a word: ICE consent runs out on the call.
    let (mut s, mut now, mut events) = (p.call, p.now, p.events);
    let mut alive_for = Duration::ZERO;
    while s.is_alive() && alive_for < Duration::from_secs(60) {
        now += Duration::from_millis(500);
        alive_for += Duration::from_millis(500);
        s.timeout(now).unwrap();
        s.poll(&mut Vec::new(), &mut events).unwrap();
    }
    eprintln!("the call noticed the vanished peer after {alive_for:?}");
    assert!(!s.is_alive(), "consent timeout never fired");
    s.close();
    assert!(!s.is_alive());
}

#[test]
fn skipped_slots_move_the_rtp_clock_on() {
    let mut p = connected(|o| o);
    for skip in [0, 0, 3, 0] {
        p.call.skip_audio_frames(skip);
        let now = p.now;
        p.call.send_audio(now, &[0xF8, 0xFF, 0xFE]).unwrap();
        p.run(4).unwrap();
    }
    p.run(20).unwrap();
    let t = &p.peer.audio_times;
    let steps: Vec<u64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    // 20 ms frames at 48 kHz; the three skipped slots leave a 4-frame step in the timeline.
    assert_eq!(steps, [960, 960 * 4, 960], "{t:?}");
}

#[test]
fn large_texts_within_the_peers_limit_arrive_whole() {
    let mut p = connected(|o| o);
    // str0m's offerer advertises a=max-message-size:262144.
    assert_eq!(p.call.max_message_size(), 256 * 1024);
    let too_big = "x".repeat(300_000);
    assert_eq!(
        p.call.send_text(&too_big),
        Err(SendError::TooLarge {
            len: 300_000,
            max: 262_144
        })
    );
    let text: String = (0..200_000u32)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    deliver_texts(&mut p, std::slice::from_ref(&text), 2000);
    assert_eq!(p.peer.got_text.len(), 1, "not delivered");
    assert!(p.peer.got_text[0] == text, "changed on the way");
}

#[test]
fn a_full_send_buffer_asks_for_a_retry_and_keeps_order() {
    let mut p = connected(|o| o);
    let texts: Vec<String> = (0..8u8)
        .map(|i| char::from(b'a' + i).to_string().repeat(200_000))
        .collect();
    let fulls = deliver_texts(&mut p, &texts, 4000);
    assert!(
        fulls > 0,
        "1.6 MB should not fit a {SEND_BUFFER_BYTES}-byte buffer at once"
    );
    assert!(p.peer.got_text == texts, "lost or reordered");
}

#[test]
fn an_offer_without_max_message_size_allows_64_kib() {
    let mut p = connected(|o| o.replace("a=max-message-size:262144\r\n", ""));
    assert_eq!(p.call.max_message_size(), DEFAULT_MAX_MESSAGE_SIZE);
    let over = "y".repeat(DEFAULT_MAX_MESSAGE_SIZE + 1);
    assert_eq!(
        p.call.send_text(&over),
        Err(SendError::TooLarge {
            len: 65_537,
            max: 65_536
        })
    );
    // str0m applies the same default, so the largest allowed text goes through.
    let fits = "z".repeat(DEFAULT_MAX_MESSAGE_SIZE);
    deliver_texts(&mut p, std::slice::from_ref(&fits), 1000);
    assert!(p.peer.got_text == [fits]);
}

#[test]
fn texts_wait_for_the_channel() {
    let mut p = Pair::new(&config(), Instant::now(), |o| o).unwrap();
    assert_eq!(p.call.send_text("{}"), Err(SendError::NotOpen));
    assert_eq!(p.call.buffered_amount(), 0);
    assert_eq!(SendError::NotOpen.code(), "channel_not_open");
    assert_eq!(SendError::Call(CallError::CallFailed).code(), "call_failed");
}

#[test]
fn rejects_offer_str0m_cannot_parse() {
    let summary = OfferSummary {
        codec: AudioCodec::Opus,
        has_data_channel: false,
        max_message_size: Some(DEFAULT_MAX_MESSAGE_SIZE),
    };
    let offer = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n";
    let err = Call::accept(offer, summary, &config(), Instant::now())
        .err()
        .unwrap();
    assert!(
        matches!(err, SignalError::Malformed(_) | SignalError::Rejected(_)),
        "{err:?}"
    );
}

#[test]
fn garbage_datagrams_are_errors_not_panics() {
    let mut p = connected(|o| o);
    let (now, src, dst) = (p.now, p.peer.addr, p.server);
    assert_eq!(
        p.call.receive(now, src, dst, &[]),
        Err(CallError::NotWebrtc)
    );
    assert_eq!(CallError::NotWebrtc.code(), "not_webrtc");
    for first in [0u8, 1, 20, 23, 64, 128, 191, 255] {
        let d: Vec<u8> = (0..200u8).map(|i| i.wrapping_mul(31) ^ first).collect();
        let mut d = d;
        d[0] = first;
        let _ = p.call.accepts(now, src, dst, &d);
        let _ = p.call.receive(now, src, dst, &d);
        p.call.poll(&mut Vec::new(), &mut p.events).unwrap();
    }
    assert!(p.call.is_alive());
    deliver_texts(&mut p, &["still up".to_string()], 200);
    assert_eq!(p.peer.got_text, ["still up"]);
}

#[test]
fn a_panic_in_the_stack_ends_only_that_call() {
    let mut hit = connected(|o| o);
    let mut other = connected(|o| o);
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r: Result<(), CallError> = hit.call.guard(|_| panic!("crafted packet"));
    std::panic::set_hook(prev);
    assert_eq!(r, Err(CallError::StackPanicked("crafted packet".into())));
    assert_eq!(r.unwrap_err().code(), "stack_panicked");

    // The hit call is dead everywhere, without panicking again.
    let s = &mut hit.call;
    let (now, src, dst) = (hit.now, hit.peer.addr, hit.server);
    assert!(!s.is_alive(), "the call is dead and will be reaped");
    assert!(
        !s.accepts(now, src, dst, &[0; 20]),
        "a dead call claims nothing"
    );
    assert_eq!(
        s.receive(now, src, dst, &[0; 20]),
        Err(CallError::CallFailed)
    );
    assert_eq!(s.timeout(now), Err(CallError::CallFailed));
    assert_eq!(
        s.poll(&mut Vec::new(), &mut Vec::new()),
        Err(CallError::CallFailed)
    );
    assert_eq!(
        s.send_text("{}"),
        Err(SendError::Call(CallError::CallFailed))
    );
    assert_eq!(s.send_audio(now, &[0xF8]), Err(CallError::CallFailed));
    assert_eq!(s.buffered_amount(), 0);
    s.close();

    // The other call goes on.
    deliver_texts(&mut other, &["{}".to_string()], 200);
    assert_eq!(other.peer.got_text, ["{}"]);
    assert!(other.call.is_alive());
}

/// Calls move to the engine thread; `accepts` poisoning through `&self` keeps them `Sync`.
#[test]
fn calls_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Call>();
}
