//! RTP packets (RFC 3550 §5.1) for the plain RTP leg of phone calls: the fixed header read
//! and written, CSRCs, header extensions and padding skipped, RTCP on the same port (RFC 5761
//! payload types 72–76 with the marker bit) told apart. WebRTC calls never come here: their
//! RTP is the WebRTC stack's.
//!
//! Every length is checked against the datagram before it is used: a malformed packet is an
//! error, never a panic or a read past the end.

/// The fixed RTP header fields Duet uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtpHeader {
    /// The M bit (the first packet of a talkspurt, for audio).
    pub marker: bool,
    /// The payload type (0–127).
    pub payload_type: u8,
    /// The sequence number.
    pub seq: u16,
    /// The RTP timestamp.
    pub timestamp: u32,
    /// The synchronisation source.
    pub ssrc: u32,
}

/// A parsed RTP packet, borrowing its payload from the datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtpPacket<'a> {
    /// The header.
    pub header: RtpHeader,
    /// The payload, without padding.
    pub payload: &'a [u8],
}

/// Why a datagram is not an RTP packet Duet can use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RtpError {
    /// Shorter than its header says (or than 12 bytes).
    #[error("RTP packet too short")]
    TooShort,
    /// Not RTP version 2.
    #[error("RTP version {0}, not 2")]
    Version(u8),
    /// A padding count of zero or longer than the payload.
    #[error("bad RTP padding")]
    Padding,
    /// An RTCP packet multiplexed on the RTP port (RFC 5761).
    #[error("RTCP, not RTP")]
    Rtcp,
}

/// The fixed header's length.
pub const HEADER_LEN: usize = 12;

/// Parses one datagram as an RTP packet.
pub fn parse(buf: &[u8]) -> Result<RtpPacket<'_>, RtpError> {
    let Some(fixed) = buf.get(..HEADER_LEN) else {
        return Err(RtpError::TooShort);
    };
    let version = fixed[0] >> 6;
    if version != 2 {
        return Err(RtpError::Version(version));
    }
    // RFC 5761 §4: RTCP packet types 192–223 put 64–95 in RTP's M|PT byte; only 72–76
    // (SR, RR, SDES, BYE, APP) are in use, and RTP avoids them.
    if (200..=204).contains(&fixed[1]) {
        return Err(RtpError::Rtcp);
    }
    let padded = fixed[0] & 0x20 != 0;
    let mut payload = &buf[header_len(buf)?..];
    if padded {
        let pad = usize::from(*payload.last().ok_or(RtpError::Padding)?);
        if pad == 0 || pad > payload.len() {
            return Err(RtpError::Padding);
        }
        payload = &payload[..payload.len() - pad];
    }
    Ok(RtpPacket {
        header: RtpHeader {
            marker: fixed[1] & 0x80 != 0,
            payload_type: fixed[1] & 0x7f,
            seq: u16::from_be_bytes([fixed[2], fixed[3]]),
            timestamp: u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]),
            ssrc: u32::from_be_bytes([fixed[8], fixed[9], fixed[10], fixed[11]]),
        },
        payload,
    })
}

/// The length of an RTP packet's header (fixed part, CSRCs, extension): where its payload
/// starts, which SRTP encrypts.
pub fn header_len(buf: &[u8]) -> Result<usize, RtpError> {
    let Some(&first) = buf.first() else {
        return Err(RtpError::TooShort);
    };
    if buf.len() < HEADER_LEN {
        return Err(RtpError::TooShort);
    }
    if first >> 6 != 2 {
        return Err(RtpError::Version(first >> 6));
    }
    let mut len = HEADER_LEN + 4 * usize::from(first & 0x0f);
    if first & 0x10 != 0 {
        let ext = buf.get(len..len + 4).ok_or(RtpError::TooShort)?;
        len += 4 + 4 * usize::from(u16::from_be_bytes([ext[2], ext[3]]));
    }
    if len > buf.len() {
        return Err(RtpError::TooShort);
    }
    Ok(len)
}

/// Whether a datagram on the RTP port is RTCP (RFC 5761 demultiplexing), which the leg
/// reads only as a sign of life.
pub fn is_rtcp(buf: &[u8]) -> bool {
    buf.len() >= 8 && buf[0] >> 6 == 2 && (200..=204).contains(&buf[1])
}

/// Writes `header` (version 2, no padding, extension or CSRC) and `payload` to `out`,
/// replacing what it held.
pub fn write(header: &RtpHeader, payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.reserve(HEADER_LEN + payload.len());
    out.push(0x80);
    out.push((u8::from(header.marker) << 7) | (header.payload_type & 0x7f));
    out.extend_from_slice(&header.seq.to_be_bytes());
    out.extend_from_slice(&header.timestamp.to_be_bytes());
    out.extend_from_slice(&header.ssrc.to_be_bytes());
    out.extend_from_slice(payload);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> RtpHeader {
        RtpHeader {
            marker: true,
            payload_type: 0,
            seq: 0xfffe,
            timestamp: 0x0102_0304,
            ssrc: 0xdead_beef,
        }
    }

    #[test]
    fn a_written_packet_reads_back() {
        let mut out = Vec::new();
        write(&header(), &[1, 2, 3], &mut out);
        assert_eq!(
            out,
            [0x80, 0x80, 0xff, 0xfe, 1, 2, 3, 4, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3]
        );
        let p = parse(&out).unwrap();
        assert_eq!(p.header, header());
        assert_eq!(p.payload, &[1, 2, 3]);
    }

    #[test]
    fn csrcs_extensions_and_padding_are_skipped() {
        // 2 CSRCs, a one-word extension, 3 bytes of padding.
        let mut buf = vec![0x80 | 0x20 | 0x10 | 2, 8, 0, 7, 0, 0, 0, 160, 0, 0, 0, 9];
        buf.extend_from_slice(&[0; 8]); // CSRCs
        buf.extend_from_slice(&[0xbe, 0xde, 0, 1, 0x10, 0xaa, 0, 0]); // extension
        buf.extend_from_slice(&[0xd5, 0xd5, 0, 0, 3]); // payload, padding
        let p = parse(&buf).unwrap();
        assert_eq!(p.header.payload_type, 8);
        assert_eq!(p.header.seq, 7);
        assert_eq!(p.header.timestamp, 160);
        assert_eq!(p.header.ssrc, 9);
        assert!(!p.header.marker);
        assert_eq!(p.payload, &[0xd5, 0xd5]);
    }

    #[test]
    fn malformed_datagrams_are_errors() {
        let mut ok = Vec::new();
        write(&header(), &[1], &mut ok);
        assert_eq!(parse(&ok[..11]), Err(RtpError::TooShort));
        let mut v1 = ok.clone();
        v1[0] = 0x40;
        assert_eq!(parse(&v1), Err(RtpError::Version(1)));
        let mut csrc = ok.clone();
        csrc[0] |= 0x0f; // 15 CSRCs that are not there
        assert_eq!(parse(&csrc), Err(RtpError::TooShort));
        let mut ext = ok.clone();
        ext[0] |= 0x10; // an extension header that is not there
        assert_eq!(parse(&ext), Err(RtpError::TooShort));
        let mut pad = ok.clone();
        pad[0] |= 0x20;
        *pad.last_mut().unwrap() = 9; // more padding than payload
        assert_eq!(parse(&pad), Err(RtpError::Padding));
        *pad.last_mut().unwrap() = 0;
        assert_eq!(parse(&pad), Err(RtpError::Padding));
        // An empty payload is fine (comfort noise aside, some peers send them).
        assert_eq!(parse(&ok[..12]).unwrap().payload, &[] as &[u8]);
    }

    #[test]
    fn rtcp_on_the_rtp_port_is_told_apart() {
        // A receiver report: V=2, RC=0, PT=201, length 1.
        let rr = [0x80, 201, 0, 1, 0, 0, 0, 9];
        assert!(is_rtcp(&rr));
        assert_eq!(parse(&[&rr[..], &[0; 4]].concat()), Err(RtpError::Rtcp));
        let mut rtp = Vec::new();
        write(&header(), &[], &mut rtp);
        assert!(!is_rtcp(&rtp));
    }
}
