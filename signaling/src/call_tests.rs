//! A whole call in memory: a str0m offerer (like a browser) and our [`Call`] exchange
//! datagrams through a simulated network on a simulated clock.

use core::net::SocketAddr;
use std::time::{Duration, Instant};

use str0m::change::SdpAnswer;
use str0m::media::{Direction, Frequency, MediaKind, MediaTime};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};

use super::*;
use crate::sdp::check_offer;

struct Client {
    rtc: Rtc,
    addr: SocketAddr,
    channel: Option<str0m::channel::ChannelId>,
    mid: str0m::media::Mid,
    got_text: Vec<String>,
    got_audio: usize,
    open: bool,
}

fn client(now: Instant) -> (Client, String) {
    let addr: SocketAddr = "127.0.0.1:5000".parse().unwrap();
    let mut rtc = Rtc::builder().build(now);
    rtc.add_local_candidate(Candidate::host(addr, "udp").unwrap());
    let mut api = rtc.sdp_api();
    let mid = api.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None);
    let channel = api.add_channel(EVENTS_LABEL.into());
    let (offer, pending) = api.apply().unwrap();
    let c = Client {
        rtc,
        addr,
        channel: Some(channel),
        mid,
        got_text: vec![],
        got_audio: 0,
        open: false,
    };
    PENDING.with(|p| *p.borrow_mut() = Some(pending));
    (c, offer.to_sdp_string())
}

thread_local! {
    static PENDING: std::cell::RefCell<Option<str0m::change::SdpPendingOffer>> = const { std::cell::RefCell::new(None) };
}

fn run(
    c: &mut Client,
    s: &mut Call,
    server: SocketAddr,
    now: &mut Instant,
    steps: usize,
    events: &mut Vec<CallEvent>,
) {
    for _ in 0..steps {
        let mut to_server = Vec::new();
        loop {
            match c.rtc.poll_output().unwrap() {
                Output::Timeout(_) => break,
                Output::Transmit(t) => to_server.push((t.source, t.contents.to_vec())),
                Output::Event(Event::ChannelOpen(_, _)) => c.open = true,
                Output::Event(Event::ChannelData(d)) => {
                    c.got_text.push(String::from_utf8(d.data).unwrap())
                }
                Output::Event(Event::MediaData(_)) => c.got_audio += 1,
                Output::Event(_) => {}
            }
        }
        for (src, bytes) in to_server {
            assert!(s.accepts(*now, src, server, &bytes));
            s.receive(*now, src, server, &bytes).unwrap();
        }
        let mut tx = Vec::new();
        s.poll(&mut tx, events).unwrap();
        for t in tx {
            let input = Input::Receive(
                *now,
                Receive {
                    proto: Protocol::Udp,
                    source: t.source,
                    destination: c.addr,
                    contents: t.contents.as_slice().try_into().unwrap(),
                },
            );
            c.rtc.handle_input(input).unwrap();
        }
        *now += Duration::from_millis(5);
        c.rtc.handle_input(Input::Timeout(*now)).unwrap();
        s.timeout(*now).unwrap();
    }
}

#[test]
fn in_memory_call_carries_audio_and_events() {
    let mut now = Instant::now();
    let server: SocketAddr = "127.0.0.1:6000".parse().unwrap();
    let cfg = AnswerConfig::new(vec![server]).unwrap();
    let (mut c, offer) = client(now);
    let summary = check_offer(&offer).unwrap();
    assert_eq!(
        summary,
        OfferSummary {
            codec: AudioCodec::Opus,
            has_data_channel: true
        }
    );
    let (mut s, answer) = Call::accept(&offer, summary, &cfg, now).unwrap();
    assert!(answer.contains("a=ice-lite"), "{answer}");
    assert!(answer.contains("opus/48000/2"));
    let pending = PENDING.with(|p| p.borrow_mut().take()).unwrap();
    c.rtc
        .sdp_api()
        .accept_answer(pending, SdpAnswer::from_sdp_string(&answer).unwrap())
        .unwrap();

    let mut events = Vec::new();
    run(&mut c, &mut s, server, &mut now, 200, &mut events);
    assert!(events.contains(&CallEvent::Connected), "{events:?}");
    assert!(c.open);
    assert!(events.contains(&CallEvent::ChannelOpen));
    assert!(s.channel_open() && s.can_send_audio());

    // Client -> server: text and audio.
    let id = c.channel.unwrap();
    c.rtc
        .channel(id)
        .unwrap()
        .write(false, br#"{"type":"response.create"}"#)
        .unwrap();
    let pt = c
        .rtc
        .writer(c.mid)
        .unwrap()
        .payload_params()
        .next()
        .unwrap()
        .pt();
    for i in 0..5u64 {
        c.rtc
            .writer(c.mid)
            .unwrap()
            .write(
                pt,
                now,
                MediaTime::new(i * 960, Frequency::FORTY_EIGHT_KHZ),
                vec![0xF8, 0xFF, 0xFE],
            )
            .unwrap();
        run(&mut c, &mut s, server, &mut now, 4, &mut events);
    }
    assert!(events.contains(&CallEvent::Text(r#"{"type":"response.create"}"#.into())));
    let seqs: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            CallEvent::Audio {
                seq,
                codec: AudioCodec::Opus,
                ..
            } => Some(*seq),
            _ => None,
        })
        .collect();
    assert!(
        seqs.len() >= 4 && seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "{seqs:?}"
    );

    // Server -> client.
    assert!(s.send_text(r#"{"type":"session.created"}"#));
    for _ in 0..5 {
        s.send_audio(now, &[0xF8, 0xFF, 0xFE]).unwrap();
        run(&mut c, &mut s, server, &mut now, 4, &mut events);
    }
    assert_eq!(
        c.got_text,
        vec![r#"{"type":"session.created"}"#.to_string()]
    );
    assert!(c.got_audio >= 4, "{}", c.got_audio);

    // The client vanishes without a word: ICE consent runs out on the server.
    drop(c);
    let mut alive_for = Duration::ZERO;
    while s.is_alive() && alive_for < Duration::from_secs(60) {
        now += Duration::from_millis(500);
        alive_for += Duration::from_millis(500);
        s.timeout(now).unwrap();
        let mut tx = Vec::new();
        s.poll(&mut tx, &mut events).unwrap();
    }
    eprintln!("server noticed the vanished peer after {alive_for:?}");
    assert!(!s.is_alive(), "consent timeout never fired");
    s.close();
    assert!(!s.is_alive());
}

#[test]
fn rejects_offer_str0m_cannot_parse() {
    let cfg = AnswerConfig::new(vec!["127.0.0.1:6000".parse().unwrap()]).unwrap();
    let summary = OfferSummary {
        codec: AudioCodec::Opus,
        has_data_channel: false,
    };
    let err = Call::accept(
        "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n",
        summary,
        &cfg,
        Instant::now(),
    )
    .err()
    .unwrap();
    assert!(
        matches!(err, SignalError::Malformed(_) | SignalError::Rejected(_)),
        "{err:?}"
    );
}

#[test]
fn a_panic_in_the_stack_ends_only_that_call() {
    let cfg = AnswerConfig::new(vec!["127.0.0.1:6000".parse().unwrap()]).unwrap();
    let (_c, offer) = client(Instant::now());
    let summary = check_offer(&offer).unwrap();
    let (mut s, _) = Call::accept(&offer, summary, &cfg, Instant::now()).unwrap();
    assert!(s.is_alive());
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r: Result<(), String> = s.guard(|_| panic!("crafted packet"));
    std::panic::set_hook(prev);
    assert!(r.is_err());
    assert!(!s.is_alive(), "the call is dead and will be reaped");
    assert!(s.timeout(Instant::now()).is_err());
}
