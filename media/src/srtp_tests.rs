use super::*;
use crate::rtp::{write, RtpHeader};

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn the_keystream_is_rfc_3711_aes_cm() {
    // RFC 3711 B.2.
    let key: [u8; 16] = hex("2B7E151628AED2A6ABF7158809CF4F3C").try_into().unwrap();
    let iv: [u8; 16] = hex("F0F1F2F3F4F5F6F7F8F9FAFBFCFD0000").try_into().unwrap();
    let mut out = [0u8; 48];
    keystream(&key, &iv, &mut out);
    assert_eq!(
        out.to_vec(),
        hex(
            "E03EAD0935C95E80E166B16DD92B4EB4 D23513162B02D0F72A43A2FE4A5F97AB \
             41E95B3BB0A2E8DD477901E4FCA894C0"
        )
    );
}

#[test]
fn session_keys_derive_as_rfc_3711_says() {
    // RFC 3711 B.3.
    let mk: [u8; 16] = hex("E1F97A0D3E018BE0D64FA32C06DE4139").try_into().unwrap();
    let ms: [u8; 14] = hex("0EC675AD498AFEEBB6960B3AABE6").try_into().unwrap();
    let (mut key, mut salt, mut auth) = ([0u8; 16], [0u8; 14], [0u8; 20]);
    derive(&mk, &ms, 0, &mut key);
    derive(&mk, &ms, 2, &mut salt);
    derive(&mk, &ms, 1, &mut auth);
    assert_eq!(key.to_vec(), hex("C61E7A93744F39EE10734AFE3FF7A087"));
    assert_eq!(salt.to_vec(), hex("30CBBC08863D8C85D49DB34A9AE1"));
    assert_eq!(
        auth.to_vec(),
        hex("CEBE321F6FF7716B6FD4AB49AF256A156D38BAA4")
    );
}

fn packet(seq: u16, ssrc: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let h = RtpHeader {
        marker: false,
        payload_type: 0,
        seq,
        timestamp: u32::from(seq) * 160,
        ssrc,
    };
    write(&h, payload, &mut out);
    out
}

fn pair(suite: SrtpSuite) -> (Srtp, Srtp) {
    let master = [7u8; MASTER_BYTES];
    (Srtp::new(suite, &master), Srtp::new(suite, &master))
}

#[test]
fn protected_packets_unprotect_to_themselves_across_the_rollover() {
    for suite in [
        SrtpSuite::AesCm128HmacSha1_80,
        SrtpSuite::AesCm128HmacSha1_32,
    ] {
        let (mut tx, mut rx) = pair(suite);
        let mut out = Vec::new();
        for seq in (65_530u16..=65_535).chain(0..6) {
            let plain = packet(seq, 0xabc, &[seq as u8; 160]);
            let mut p = plain.clone();
            tx.protect(&mut p).unwrap();
            assert_eq!(p.len(), plain.len() + suite.tag_len());
            assert_eq!(p[..12], plain[..12], "the header stays in the clear");
            assert_ne!(p[12..172], plain[12..], "the payload is encrypted");
            rx.unprotect(&p, &mut out).unwrap();
            assert_eq!(out, plain, "seq {seq}");
        }
        assert_eq!(
            rx.streams[0].roc, 1,
            "the rollover counter followed the wrap"
        );
    }
}

#[test]
fn tampered_replayed_and_foreign_packets_are_refused() {
    let (mut tx, mut rx) = pair(SrtpSuite::AesCm128HmacSha1_80);
    let mut out = Vec::new();
    let mut p = packet(10, 1, &[1; 160]);
    tx.protect(&mut p).unwrap();
    let mut bad = p.clone();
    bad[40] ^= 1;
    assert_eq!(rx.unprotect(&bad, &mut out), Err(SrtpError::Auth));
    rx.unprotect(&p, &mut out).unwrap();
    assert_eq!(rx.unprotect(&p, &mut out), Err(SrtpError::Replay));
    // Reordered but new: fine; far too old: refused.
    let mut early = packet(9, 1, &[1; 160]);
    let mut tx2 = Srtp::new(SrtpSuite::AesCm128HmacSha1_80, &[7; MASTER_BYTES]);
    tx2.protect(&mut early).unwrap();
    rx.unprotect(&early, &mut out).unwrap();
    // Another key is noise.
    let mut other = Srtp::new(SrtpSuite::AesCm128HmacSha1_80, &[8; MASTER_BYTES]);
    let mut q = packet(11, 1, &[1; 160]);
    other.protect(&mut q).unwrap();
    assert_eq!(rx.unprotect(&q, &mut out), Err(SrtpError::Auth));
    assert_eq!(rx.unprotect(&q[..14], &mut out), Err(SrtpError::Malformed));
    assert_eq!(rx.unprotect(b"junk", &mut out), Err(SrtpError::Malformed));
}

#[test]
fn arbitrary_packets_never_panic() {
    use proptest::prelude::*;
    proptest!(|(bytes in proptest::collection::vec(any::<u8>(), 0..200))| {
        let (mut tx, mut rx) = pair(SrtpSuite::AesCm128HmacSha1_32);
        let mut out = Vec::new();
        let _ = rx.unprotect(&bytes, &mut out);
        let mut p = bytes.clone();
        if tx.protect(&mut p).is_ok() {
            prop_assert!(rx.unprotect(&p, &mut out).is_ok());
        }
    });
}
