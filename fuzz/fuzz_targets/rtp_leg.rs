//! Fuzzes the plain RTP leg of phone calls with arbitrary datagrams from a few sources: RTP
//! parsing, latching, SSRC resets, DTMF and the audio pipeline behind them. It must never
//! panic, only send to a source a packet came from (or the offer's address), and a packet
//! that parses must round-trip through the writer.
#![no_main]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use duet_media::rtp;
use duet_media::rtp_leg::{RtpLeg, RtpLegConfig};
use duet_media::CallCodec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let offer: SocketAddr = ([192, 0, 2, 1], 4000).into();
    let cfg = RtpLegConfig {
        codec: CallCodec::Pcmu,
        payload_type: 0,
        telephone_event: Some(101),
        remote: Some(offer),
        ssrc: 1,
        first_seq: 0,
        first_timestamp: 0,
        first_packet_timeout: Duration::from_secs(30),
        inactivity: Duration::from_secs(15),
        srtp: None,
    };
    let Ok(mut leg) = RtpLeg::new(cfg, t0) else {
        return;
    };
    let mut heard = Vec::new();
    let mut out = Vec::new();
    // Each datagram: a source byte, a time step byte, a length byte, then the bytes.
    let mut rest = data;
    let mut now = t0;
    let mut slot = 0;
    while let [src, step, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (datagram, next) = tail.split_at(n);
        rest = next;
        now += Duration::from_millis(u64::from(*step) * 8);
        let from: SocketAddr = ([192, 0, 2, 2], 5000 + u16::from(src % 3)).into();
        if let Ok(p) = rtp::parse(datagram) {
            let mut again = Vec::new();
            rtp::write(&p.header, p.payload, &mut again);
            let back = rtp::parse(&again).expect("a written packet parses");
            assert_eq!((back.header, back.payload), (p.header, p.payload));
        }
        leg.receive(now, from, datagram);
        let remote = leg.remote().expect("the offer named an address");
        assert!(remote == offer || remote.port() >= 5000);
        heard.clear();
        leg.audio().arrival_frame(now, &mut heard);
        leg.audio().inbound_frame(now, &mut heard);
        leg.audio().prepare();
        slot += 1;
        leg.next_packet(slot, &mut out).expect("G.711 never fails");
        assert!(rtp::parse(&out).is_ok());
    }
});
