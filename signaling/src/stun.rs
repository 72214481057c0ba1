//! A sans-IO peek into STUN datagrams, so the engine can route an ICE check from an unknown
//! address to its call by our ufrag (one map lookup) instead of asking every call.
//!
//! Only framing is checked (RFC 8489 §5-§6: header, magic cookie, length, attribute TLVs); the
//! call's own stack still verifies MESSAGE-INTEGRITY when the datagram is fed to it.

/// The RFC 8489 magic cookie.
const MAGIC_COOKIE: [u8; 4] = [0x21, 0x12, 0xA4, 0x42];
/// Fixed STUN header length.
const HEADER: usize = 20;
/// The USERNAME attribute type.
const USERNAME: u16 = 0x0006;
/// The MESSAGE-INTEGRITY attribute type: attributes after it are ignored (RFC 8489 §14.5).
const MESSAGE_INTEGRITY: u16 = 0x0008;

/// Whether `datagram` is framed as a STUN message: a first byte in RFC 7983's STUN range
/// (0 to 3, so never DTLS, RTP or RTCP), the magic cookie, and a length field (a multiple of
/// 4) that matches the datagram.
pub fn is_stun(datagram: &[u8]) -> bool {
    attributes(datagram).is_some()
}

/// The recipient's ufrag from a STUN message's USERNAME (`recipient:sender`). In an ICE
/// binding request to us that is our local ufrag. `None` when the datagram is not STUN, the
/// attributes are malformed, or USERNAME is missing, not UTF-8 or has no `:`.
///
/// Picks the USERNAME str0m's parser would: the last one before MESSAGE-INTEGRITY.
pub fn stun_username_local(datagram: &[u8]) -> Option<&str> {
    let mut attrs = attributes(datagram)?;
    let mut username = None;
    while attrs.len() >= 4 {
        let kind = u16::from_be_bytes([attrs[0], attrs[1]]);
        let len = usize::from(u16::from_be_bytes([attrs[2], attrs[3]]));
        let value = attrs.get(4..4 + len)?;
        match kind {
            USERNAME => username = Some(value),
            MESSAGE_INTEGRITY => break,
            _ => {}
        }
        // Values are padded to a multiple of 4 (the length field keeps that in bounds).
        let next = (4 + len).next_multiple_of(4).min(attrs.len());
        attrs = &attrs[next..];
    }
    let username = core::str::from_utf8(username?).ok()?;
    username.split_once(':').map(|(local, _)| local)
}

/// The attribute bytes of a well-framed STUN message.
fn attributes(datagram: &[u8]) -> Option<&[u8]> {
    let header = datagram.get(..HEADER)?;
    if header[0] > 3 || header[4..8] != MAGIC_COOKIE {
        return None;
    }
    let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
    (len % 4 == 0 && HEADER + len == datagram.len()).then(|| &datagram[HEADER..])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5769 §2.1 sample request: USERNAME "evtj:h6vY", SOFTWARE, PRIORITY,
    /// ICE-CONTROLLED, MESSAGE-INTEGRITY and FINGERPRINT.
    const RFC5769_REQUEST: [u8; 108] = [
        0x00, 0x01, 0x00, 0x58, 0x21, 0x12, 0xa4, 0x42, 0xb7, 0xe7, 0xa7, 0x01, 0xbc, 0x34, 0xd6,
        0x86, 0xfa, 0x87, 0xdf, 0xae, 0x80, 0x22, 0x00, 0x10, 0x53, 0x54, 0x55, 0x4e, 0x20, 0x74,
        0x65, 0x73, 0x74, 0x20, 0x63, 0x6c, 0x69, 0x65, 0x6e, 0x74, 0x00, 0x24, 0x00, 0x04, 0x6e,
        0x00, 0x01, 0xff, 0x80, 0x29, 0x00, 0x08, 0x93, 0x2f, 0xf9, 0xb1, 0x51, 0x26, 0x3b, 0x36,
        0x00, 0x06, 0x00, 0x09, 0x65, 0x76, 0x74, 0x6a, 0x3a, 0x68, 0x36, 0x76, 0x59, 0x20, 0x20,
        0x20, 0x00, 0x08, 0x00, 0x14, 0x9a, 0xea, 0xa7, 0x0c, 0xbf, 0xd8, 0xcb, 0x56, 0x78, 0x1e,
        0xf2, 0xb5, 0xb2, 0xd3, 0xf2, 0x49, 0xc1, 0xb5, 0x71, 0xa2, 0x80, 0x28, 0x00, 0x04, 0xe5,
        0x7a, 0x3b, 0xcf,
    ];

    /// A binding request with the given attributes (type, value), padded as on the wire.
    fn message(attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (kind, value) in attrs {
            body.extend_from_slice(&kind.to_be_bytes());
            body.extend_from_slice(&(value.len() as u16).to_be_bytes());
            body.extend_from_slice(value);
            body.resize(body.len().next_multiple_of(4), 0);
        }
        let mut m = vec![0x00, 0x01];
        m.extend_from_slice(&(body.len() as u16).to_be_bytes());
        m.extend_from_slice(&MAGIC_COOKIE);
        m.extend_from_slice(&[7; 12]);
        m.extend_from_slice(&body);
        m
    }

    #[test]
    fn reads_the_rfc5769_sample_request() {
        assert!(is_stun(&RFC5769_REQUEST));
        assert_eq!(stun_username_local(&RFC5769_REQUEST), Some("evtj"));
    }

    #[test]
    fn finds_username_among_other_attributes() {
        let m = message(&[
            (0x0024, &[0, 0, 1, 0]),
            (0x8022, b"x"),
            (USERNAME, b"ab:cd"),
        ]);
        assert_eq!(stun_username_local(&m), Some("ab"));
        let first = message(&[(USERNAME, b"q:r"), (0x0008, &[0; 20])]);
        assert_eq!(stun_username_local(&first), Some("q"));
        let empty_local = message(&[(USERNAME, b":r")]);
        assert_eq!(stun_username_local(&empty_local), Some(""));
    }

    #[test]
    fn picks_the_username_str0m_would() {
        let twice = message(&[(USERNAME, b"a:b"), (USERNAME, b"c:d")]);
        assert_eq!(stun_username_local(&twice), Some("c"), "the last one");
        let after_mi = message(&[(USERNAME, b"a:b"), (0x0008, &[0; 20]), (USERNAME, b"c:d")]);
        assert_eq!(
            stun_username_local(&after_mi),
            Some("a"),
            "ignored after integrity"
        );
        let only_after = message(&[(0x0008, &[0; 20]), (USERNAME, b"c:d")]);
        assert_eq!(stun_username_local(&only_after), None);
    }

    #[test]
    fn no_username_without_a_colon_or_utf8() {
        assert_eq!(stun_username_local(&message(&[(USERNAME, b"abcd")])), None);
        assert_eq!(
            stun_username_local(&message(&[(USERNAME, b"\xff:a")])),
            None
        );
        assert_eq!(stun_username_local(&message(&[(0x0024, &[0; 4])])), None);
        assert_eq!(stun_username_local(&message(&[])), None);
        assert!(is_stun(&message(&[])));
    }

    #[test]
    fn rejects_bad_framing() {
        let good = message(&[(USERNAME, b"ab:cd")]);
        for n in 0..good.len() {
            assert!(!is_stun(&good[..n]), "truncated to {n}");
            assert_eq!(stun_username_local(&good[..n]), None);
        }
        for first in [0x04, 0x16, 0x80, 0xff] {
            let mut other = good.clone();
            other[0] = first;
            assert!(
                !is_stun(&other),
                "first byte {first:#x} is not STUN (RFC 7983)"
            );
        }
        let mut cookie = good.clone();
        cookie[5] ^= 1;
        assert!(!is_stun(&cookie));
        let mut longer = good.clone();
        longer.extend_from_slice(&[0; 4]);
        assert!(!is_stun(&longer), "length field no longer matches");
        let mut odd = good.clone();
        odd[3] += 1;
        odd.push(0);
        assert!(!is_stun(&odd), "length not a multiple of 4");
    }

    #[test]
    fn attribute_overrunning_the_message_is_malformed() {
        let mut m = message(&[(0x0024, &[0; 4]), (USERNAME, b"ab:cd")]);
        m[22..24].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(stun_username_local(&m), None);
        let mut user = message(&[(USERNAME, b"ab:cd")]);
        user[22..24].copy_from_slice(&9u16.to_be_bytes());
        assert_eq!(stun_username_local(&user), None);
    }

    /// Where str0m reads a username, the peek reads the same recipient ufrag (str0m's parser
    /// ignores the first two bits; its demultiplexer only passes first bytes 0 and 1).
    fn agrees_with_str0m(d: &[u8]) {
        if d.first().is_none_or(|&b| b > 3) {
            return;
        }
        if let Ok(m) = str0m::ice::StunMessage::parse(d) {
            if let Some((local, _)) = m.split_username() {
                assert_eq!(stun_username_local(d), Some(local), "{d:02x?}");
            }
        }
    }

    #[test]
    fn agrees_with_str0ms_parser() {
        agrees_with_str0m(&RFC5769_REQUEST);
        let mut x: u32 = 0x9e37_79b9;
        for _ in 0..20_000 {
            let mut m = RFC5769_REQUEST;
            for _ in 0..3 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                m[20 + (x as usize >> 8) % 88] = x as u8;
            }
            agrees_with_str0m(&m);
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut x: u32 = 0x1234_5678;
        for len in 0..600 {
            let mut buf = vec![0u8; len];
            for b in &mut buf {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            if len >= 8 {
                buf[0] &= 0x3f;
                buf[4..8].copy_from_slice(&MAGIC_COOKIE);
                let body = (len.saturating_sub(HEADER) & !3) as u16;
                buf[2..4].copy_from_slice(&body.to_be_bytes());
            }
            let _ = stun_username_local(&buf);
        }
    }
}
