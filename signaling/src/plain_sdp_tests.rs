use super::*;

/// baresip's offer (G.711 only, telephone-event 101), as it sends it from 127.0.0.1.
const BARESIP: &str = "v=0\r\n\
o=- 1413254380 2840108785 IN IP4 127.0.0.1\r\n\
s=-\r\n\
c=IN IP4 127.0.0.1\r\n\
t=0 0\r\n\
m=audio 10002 RTP/AVP 0 8 101\r\n\
b=AS:80\r\n\
a=rtpmap:0 PCMU/8000\r\n\
a=rtpmap:8 PCMA/8000\r\n\
a=rtpmap:101 telephone-event/8000\r\n\
a=fmtp:101 0-15\r\n\
a=sendrecv\r\n\
a=label:1\r\n\
a=ssrc:1949418406 cname:0a2ffc55-c7a3-4b25-a60c-2ef64b6e9b68\r\n\
a=rtcp-rr:* nack\r\n\
a=ptime:20\r\n";

fn local() -> LocalMedia {
    LocalMedia {
        addr: "203.0.113.7".parse().unwrap(),
        port: 40_000,
        session_id: 1234,
        crypto: None,
    }
}

#[test]
fn a_trunks_offer_is_read_and_answered_with_one_codec() {
    let offer = parse_offer(BARESIP).unwrap();
    assert_eq!(offer.addr, Some("127.0.0.1".parse().unwrap()));
    assert_eq!(offer.port, 10_002);
    assert_eq!((offer.codec, offer.payload_type), (PlainCodec::Pcmu, 0));
    assert_eq!(offer.telephone_event, Some(101));
    assert_eq!(offer.profile, Profile::Avp);
    assert_eq!(offer.direction, Direction::SendRecv);
    assert_eq!(offer.ptime, Some(20));
    // The wire form of the answer (a snapshot: trunks parse it).
    assert_eq!(
        write_answer(&offer, &local()),
        "v=0\r\n\
         o=duet 1234 1234 IN IP4 203.0.113.7\r\n\
         s=duet\r\n\
         c=IN IP4 203.0.113.7\r\n\
         t=0 0\r\n\
         m=audio 40000 RTP/AVP 0 101\r\n\
         a=rtpmap:0 PCMU/8000\r\n\
         a=rtpmap:101 telephone-event/8000\r\n\
         a=fmtp:101 0-16\r\n\
         a=ptime:20\r\n\
         a=sendrecv\r\n"
    );
}

#[test]
fn the_offerers_first_supported_codec_and_its_numbers_are_kept() {
    // PCMA only, with telephone-event on 96 (sipp's PCMA scenario numbers it so).
    let pcma = "v=0\r\nc=IN IP4 10.0.0.9\r\nm=audio 6000 RTP/AVP 18 8 96\r\n\
                a=rtpmap:18 G729/8000\r\na=rtpmap:96 telephone-event/8000\r\n";
    let o = parse_offer(pcma).unwrap();
    assert_eq!(
        (o.codec, o.payload_type, o.telephone_event),
        (PlainCodec::Pcma, 8, Some(96))
    );
    assert!(write_answer(&o, &local()).contains("m=audio 40000 RTP/AVP 8 96\r\n"));
    // Opus on a dynamic number, first in the offer: chosen; no telephone-event offered.
    let opus = "v=0\r\nc=IN IP4 10.0.0.9\r\nm=audio 6000 RTP/AVP 111 0\r\n\
                a=rtpmap:111 OPUS/48000/2\r\n";
    let o = parse_offer(opus).unwrap();
    assert_eq!(
        (o.codec, o.payload_type, o.telephone_event),
        (PlainCodec::Opus, 111, None)
    );
    let answer = write_answer(&o, &local());
    assert!(answer.contains("m=audio 40000 RTP/AVP 111\r\na=rtpmap:111 opus/48000/2\r\n"));
    // A static number remapped by an rtpmap is what the rtpmap says.
    let remapped = "v=0\r\nc=IN IP4 10.0.0.9\r\nm=audio 6000 RTP/AVP 0 8\r\n\
                    a=rtpmap:0 G722/8000\r\n";
    assert_eq!(parse_offer(remapped).unwrap().codec, PlainCodec::Pcma);
    // Nothing Duet speaks: 488 on the SIP side.
    let g729 = "v=0\r\nc=IN IP4 10.0.0.9\r\nm=audio 6000 RTP/AVP 18\r\n";
    assert_eq!(parse_offer(g729), Err(PlainSdpError::NoSupportedCodec));
}

#[test]
fn other_sections_are_declined_in_place_and_directions_mirrored() {
    let sdp = "v=0\r\nc=IN IP4 0.0.0.0\r\na=sendonly\r\n\
               m=video 5000 RTP/AVP 31\r\n\
               m=audio 0 RTP/AVP 0\r\n\
               m=audio 6000 RTP/AVP 0\r\nc=IN IP4 198.51.100.2\r\n";
    let o = parse_offer(sdp).unwrap();
    assert_eq!(
        o.addr,
        Some("198.51.100.2".parse().unwrap()),
        "media-level c= wins"
    );
    assert_eq!(
        o.direction,
        Direction::SendOnly,
        "the session-level direction"
    );
    let answer = write_answer(&o, &local());
    let m: Vec<&str> = answer.lines().filter(|l| l.starts_with("m=")).collect();
    assert_eq!(
        m,
        [
            "m=video 0 RTP/AVP 31",
            "m=audio 0 RTP/AVP 0",
            "m=audio 40000 RTP/AVP 0"
        ]
    );
    assert!(answer.contains("a=recvonly\r\n"));
    // On hold: the session address 0.0.0.0 is no address.
    let hold = "v=0\r\nc=IN IP4 0.0.0.0\r\nm=audio 6000 RTP/AVP 0\r\na=inactive\r\n";
    let o = parse_offer(hold).unwrap();
    assert_eq!((o.addr, o.direction), (None, Direction::Inactive));
}

#[test]
fn sdes_offers_get_a_key_of_their_own_suite() {
    let key = base64::engine::general_purpose::STANDARD.encode([7u8; SDES_KEY_BYTES]);
    let sdp = format!(
        "v=0\r\nc=IN IP4 127.0.0.1\r\nm=audio 6000 RTP/SAVP 0\r\n\
         a=crypto:1 AES_256_CM_HMAC_SHA1_80 inline:{key}\r\n\
         a=crypto:2 AES_CM_128_HMAC_SHA1_32 inline:{key}|2^20|1:4\r\n\
         a=crypto:3 AES_CM_128_HMAC_SHA1_80 inline:{key}|2^31\r\n"
    );
    let o = parse_offer(&sdp).unwrap();
    let theirs = o.crypto.clone().unwrap();
    // The AES-256 suite is not spoken and the second line carries an MKI: the third.
    assert_eq!(
        (theirs.tag, theirs.suite),
        (3, CryptoSuite::AesCm128HmacSha1_80)
    );
    assert_eq!(theirs.key_salt, [7; SDES_KEY_BYTES]);
    assert!(
        !format!("{theirs:?}").contains("key_salt"),
        "keys stay out of logs"
    );
    let ours = SdesKey {
        key_salt: [9; SDES_KEY_BYTES],
        ..theirs
    };
    let answer = write_answer(
        &o,
        &LocalMedia {
            crypto: Some(ours),
            ..local()
        },
    );
    let inline = base64::engine::general_purpose::STANDARD.encode([9u8; SDES_KEY_BYTES]);
    assert!(answer.contains("m=audio 40000 RTP/SAVP 0\r\n"), "{answer}");
    assert!(answer.ends_with(&format!(
        "a=crypto:3 AES_CM_128_HMAC_SHA1_80 inline:{inline}\r\n"
    )));
    // SAVP without a usable key, and WebRTC's profiles, are refused.
    let bad =
        "v=0\r\nc=IN IP4 127.0.0.1\r\nm=audio 6000 RTP/SAVP 0\r\na=crypto:1 F8_128 inline:x\r\n";
    assert_eq!(parse_offer(bad), Err(PlainSdpError::NoCryptoSuite));
    let short = format!(
        "v=0\r\nm=audio 6000 RTP/SAVP 0\r\na=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{}\r\n",
        base64::engine::general_purpose::STANDARD.encode([1u8; 16])
    );
    assert_eq!(parse_offer(&short), Err(PlainSdpError::NoCryptoSuite));
    let webrtc = "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=rtpmap:111 opus/48000/2\r\n";
    assert_eq!(
        parse_offer(webrtc),
        Err(PlainSdpError::Profile("UDP/TLS/RTP/SAVPF".into()))
    );
}

#[test]
fn a_late_offer_is_ours_and_its_answer_reads_back() {
    let offer = write_offer(&local());
    assert_eq!(
        offer,
        "v=0\r\n\
         o=duet 1234 1234 IN IP4 203.0.113.7\r\n\
         s=duet\r\n\
         c=IN IP4 203.0.113.7\r\n\
         t=0 0\r\n\
         m=audio 40000 RTP/AVP 0 8 111 101\r\n\
         a=rtpmap:0 PCMU/8000\r\n\
         a=rtpmap:8 PCMA/8000\r\n\
         a=rtpmap:111 opus/48000/2\r\n\
         a=fmtp:111 minptime=20;useinbandfec=1\r\n\
         a=rtpmap:101 telephone-event/8000\r\n\
         a=fmtp:101 0-16\r\n\
         a=ptime:20\r\n\
         a=sendrecv\r\n"
    );
    // The caller's answer in the ACK picks PCMA.
    let answer = "v=0\r\nc=IN IP4 127.0.0.1\r\nm=audio 7000 RTP/AVP 8 101\r\n\
                  a=rtpmap:101 telephone-event/8000\r\n";
    let a = parse_offer(answer).unwrap();
    assert_eq!(
        (a.codec, a.telephone_event, a.port),
        (PlainCodec::Pcma, Some(101), 7000)
    );
    // Or Opus, on the payload type offered.
    let answer = "v=0\r\nc=IN IP4 127.0.0.1\r\nm=audio 7000 RTP/AVP 111 101\r\n\
                  a=rtpmap:111 opus/48000/2\r\na=rtpmap:101 telephone-event/8000\r\n";
    let a = parse_offer(answer).unwrap();
    assert_eq!((a.codec, a.payload_type), (PlainCodec::Opus, 111));
    // IPv6 media.
    let v6 = LocalMedia {
        addr: "::1".parse().unwrap(),
        ..local()
    };
    assert!(write_offer(&v6).contains("c=IN IP6 ::1\r\n"));
}

#[test]
fn malformed_and_oversized_bodies_are_errors() {
    assert_eq!(
        parse_offer(&"v=0\r\n".repeat(4000)),
        Err(PlainSdpError::TooLarge(20_000))
    );
    assert!(matches!(
        parse_offer("hello"),
        Err(PlainSdpError::Malformed(_))
    ));
    assert!(matches!(
        parse_offer("v=0\r\nm=audio x RTP/AVP 0\r\n"),
        Err(PlainSdpError::Malformed(_))
    ));
    assert!(matches!(
        parse_offer("v=0\r\nm=audio 5000\r\n"),
        Err(PlainSdpError::Malformed(_))
    ));
    assert_eq!(
        parse_offer("v=0\r\nm=video 5000 RTP/AVP 31\r\n"),
        Err(PlainSdpError::NoAudio)
    );
    assert_eq!(parse_offer("v=0\r\n"), Err(PlainSdpError::NoAudio));
}

#[test]
fn arbitrary_bodies_never_panic() {
    use proptest::prelude::*;
    proptest!(|(body in "v=0\r\n(([cmao]=[ -~]{0,40})\r\n){0,12}")| {
        if let Ok(o) = parse_offer(&body) {
            let answer = write_answer(&o, &local());
            prop_assert!(answer.starts_with("v=0\r\n"));
        }
    });
}
