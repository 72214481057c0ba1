//! Offer checks done before anything is allocated: size, structure, an audio m-line with a
//! codec we speak, ICE credentials and a DTLS fingerprint.

/// Largest offer accepted.
pub const MAX_OFFER_BYTES: usize = 16 * 1024;

/// The peer's data channel message limit when its offer has no `a=max-message-size`
/// (RFC 8841 §6.1).
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 64 * 1024;

/// The audio codec a call uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AudioCodec {
    /// Opus/48000/2 (browsers).
    Opus,
    /// G.711 μ-law (SIP gateways).
    Pcmu,
    /// G.711 A-law (SIP gateways).
    Pcma,
}

impl AudioCodec {
    /// RTP clock rate.
    pub fn clock_rate(self) -> u32 {
        match self {
            AudioCodec::Opus => 48_000,
            AudioCodec::Pcmu | AudioCodec::Pcma => 8_000,
        }
    }
}

/// What the checks learned about an offer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OfferSummary {
    /// The codec Duet will send: Opus when offered, else PCMU, else PCMA.
    pub codec: AudioCodec,
    /// Whether the offer has a data channel section (events need one).
    pub has_data_channel: bool,
    /// The largest data channel message the peer can receive, from `a=max-message-size` in
    /// its application section: [`DEFAULT_MAX_MESSAGE_SIZE`] when absent (or unreadable, as
    /// str0m treats it), `None` when the peer advertised 0 (no limit).
    pub max_message_size: Option<usize>,
}

/// Why an offer (or an answer) failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SignalError {
    /// Over [`MAX_OFFER_BYTES`].
    #[error("SDP offer of {0} bytes exceeds the limit of {MAX_OFFER_BYTES} bytes")]
    TooLarge(usize),
    /// Not SDP.
    #[error("malformed SDP: {0}")]
    Malformed(String),
    /// No `m=audio` section.
    #[error("the offer has no audio m-line")]
    NoAudio,
    /// Audio, but no codec Duet speaks.
    #[error("the offer's audio has no supported codec (opus/48000/2, PCMU/8000 or PCMA/8000)")]
    NoSupportedCodec,
    /// Missing `a=ice-ufrag` / `a=ice-pwd`.
    #[error("the offer has no ICE credentials (a=ice-ufrag and a=ice-pwd)")]
    MissingIceCredentials,
    /// Missing `a=fingerprint`.
    #[error("the offer has no DTLS fingerprint (a=fingerprint)")]
    MissingFingerprint,
    /// The WebRTC stack refused the offer.
    #[error("the offer was rejected: {0}")]
    Rejected(String),
}

impl SignalError {
    /// Stable snake_case code.
    pub fn code(&self) -> &'static str {
        match self {
            SignalError::TooLarge(_) => "sdp_too_large",
            SignalError::Malformed(_) => "invalid_sdp",
            SignalError::NoAudio => "sdp_no_audio",
            SignalError::NoSupportedCodec => "sdp_no_supported_codec",
            SignalError::MissingIceCredentials => "sdp_missing_ice_credentials",
            SignalError::MissingFingerprint => "sdp_missing_fingerprint",
            SignalError::Rejected(_) => "sdp_rejected",
        }
    }
}

#[derive(Default)]
struct Section<'a> {
    kind: &'a str,
    formats: Vec<&'a str>,
    rtpmaps: Vec<(&'a str, String)>,
    ice_ufrag: bool,
    ice_pwd: bool,
    fingerprint: bool,
    proto: &'a str,
    max_message_size: Option<usize>,
}

/// Checks an offer. Cheap and allocation-light: runs before any call state exists.
pub fn check_offer(sdp: &str) -> Result<OfferSummary, SignalError> {
    if sdp.len() > MAX_OFFER_BYTES {
        return Err(SignalError::TooLarge(sdp.len()));
    }
    let (session, media) = sections(sdp)?;
    let audio = media
        .iter()
        .find(|m| m.kind == "audio")
        .ok_or(SignalError::NoAudio)?;
    let codec = pick_codec(audio).ok_or(SignalError::NoSupportedCodec)?;
    for m in &media {
        if !(session.ice_ufrag || m.ice_ufrag) || !(session.ice_pwd || m.ice_pwd) {
            return Err(SignalError::MissingIceCredentials);
        }
        if !(session.fingerprint || m.fingerprint) {
            return Err(SignalError::MissingFingerprint);
        }
    }
    let has_data_channel = media
        .iter()
        .any(|m| m.kind == "application" && m.proto.contains("DTLS/SCTP"));
    // The first application section, as str0m picks it for the SCTP send limit.
    let advertised = media
        .iter()
        .find(|m| m.kind == "application")
        .and_then(|m| m.max_message_size);
    Ok(OfferSummary {
        codec,
        has_data_channel,
        max_message_size: peer_message_limit(advertised),
    })
}

/// RFC 8841 §6.1: absent means 64 KiB, 0 means no limit.
fn peer_message_limit(advertised: Option<usize>) -> Option<usize> {
    match advertised {
        None => Some(DEFAULT_MAX_MESSAGE_SIZE),
        Some(0) => None,
        Some(n) => Some(n),
    }
}

fn sections(sdp: &str) -> Result<(Section<'_>, Vec<Section<'_>>), SignalError> {
    let mut lines = sdp
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.is_empty());
    if lines.next() != Some("v=0") {
        return Err(SignalError::Malformed("the first line must be v=0".into()));
    }
    let mut session = Section::default();
    let mut media: Vec<Section<'_>> = Vec::new();
    for line in lines {
        let (key, value) = line
            .split_once('=')
            .filter(|(k, _)| k.len() == 1)
            .ok_or_else(|| {
                SignalError::Malformed(format!("not a <type>=<value> line: {:.40}", line))
            })?;
        if key == "m" {
            media.push(media_line(value)?);
            continue;
        }
        let target = media.last_mut().unwrap_or(&mut session);
        if key == "a" {
            attribute(target, value);
        }
    }
    if media.is_empty() {
        return Err(SignalError::NoAudio);
    }
    Ok((session, media))
}

fn media_line(value: &str) -> Result<Section<'_>, SignalError> {
    let mut parts = value.split_whitespace();
    let kind = parts.next().unwrap_or_default();
    let port = parts.next().unwrap_or_default();
    let proto = parts.next().unwrap_or_default();
    if kind.is_empty() || port.parse::<u32>().is_err() || proto.is_empty() {
        return Err(SignalError::Malformed(format!("bad m-line: m={value:.60}")));
    }
    Ok(Section {
        kind,
        proto,
        formats: parts.collect(),
        ..Section::default()
    })
}

fn attribute<'a>(s: &mut Section<'a>, value: &'a str) {
    let (name, rest) = value.split_once(':').unwrap_or((value, ""));
    match name {
        "ice-ufrag" => s.ice_ufrag = !rest.trim().is_empty(),
        "ice-pwd" => s.ice_pwd = !rest.trim().is_empty(),
        "fingerprint" => s.fingerprint = rest.split_whitespace().count() == 2,
        "max-message-size" => s.max_message_size = rest.trim().parse().ok(),
        "rtpmap" => {
            if let Some((pt, enc)) = rest.split_once(' ') {
                s.rtpmaps.push((pt, enc.trim().to_ascii_lowercase()));
            }
        }
        _ => {}
    }
}

fn pick_codec(audio: &Section<'_>) -> Option<AudioCodec> {
    let offered = |pt: &str| audio.formats.contains(&pt);
    let by_name = |name: &str| {
        audio
            .rtpmaps
            .iter()
            .any(|(pt, enc)| offered(pt) && enc.starts_with(name))
    };
    if by_name("opus/48000") {
        Some(AudioCodec::Opus)
    } else if by_name("pcmu/8000")
        || (offered("0") && !audio.rtpmaps.iter().any(|(pt, _)| *pt == "0"))
    {
        Some(AudioCodec::Pcmu)
    } else if by_name("pcma/8000")
        || (offered("8") && !audio.rtpmaps.iter().any(|(pt, _)| *pt == "8"))
    {
        Some(AudioCodec::Pcma)
    } else {
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A Chrome-like offer: Opus + PCMU + PCMA audio and a data channel.
    pub const OFFER: &str = "v=0\r\no=- 4611731400430051336 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\na=msid-semantic: WMS\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111 0 8\r\nc=IN IP4 0.0.0.0\r\na=rtcp:9 IN IP4 0.0.0.0\r\na=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuvwx\r\na=ice-options:trickle\r\na=fingerprint:sha-256 AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89\r\na=setup:actpass\r\na=mid:0\r\na=sendrecv\r\na=rtcp-mux\r\na=rtpmap:111 opus/48000/2\r\na=fmtp:111 minptime=10;useinbandfec=1\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\na=ssrc:1001 cname:x\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=ice-ufrag:abcd\r\na=ice-pwd:abcdefghijklmnopqrstuvwx\r\na=fingerprint:sha-256 AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89\r\na=setup:actpass\r\na=mid:1\r\na=sctp-port:5000\r\n";

    #[test]
    fn accepts_browser_offer() {
        assert_eq!(
            check_offer(OFFER),
            Ok(OfferSummary {
                codec: AudioCodec::Opus,
                has_data_channel: true,
                max_message_size: Some(DEFAULT_MAX_MESSAGE_SIZE),
            })
        );
    }

    #[test]
    fn reads_the_peers_max_message_size() {
        let limit = |attr: &str| {
            let sdp = OFFER.replace(
                "a=sctp-port:5000\r\n",
                &format!("a=sctp-port:5000\r\n{attr}"),
            );
            check_offer(&sdp).map(|s| s.max_message_size)
        };
        assert_eq!(limit(""), Ok(Some(65536)), "absent: RFC 8841 default");
        assert_eq!(limit("a=max-message-size:262144\r\n"), Ok(Some(262_144)));
        assert_eq!(
            limit("a=max-message-size:1073741823\r\n"),
            Ok(Some(1_073_741_823))
        );
        assert_eq!(limit("a=max-message-size:0\r\n"), Ok(None), "0: no limit");
        assert_eq!(limit("a=max-message-size:lots\r\n"), Ok(Some(65536)));
        // Only the application section counts.
        let on_audio = OFFER.replace("a=mid:0\r\n", "a=mid:0\r\na=max-message-size:1\r\n");
        assert_eq!(
            check_offer(&on_audio).map(|s| s.max_message_size),
            Ok(Some(65536))
        );
    }

    #[test]
    fn picks_g711_without_opus() {
        let pcmu = OFFER
            .replace("111 0 8", "0 8")
            .replace("a=rtpmap:111 opus/48000/2\r\n", "");
        assert_eq!(check_offer(&pcmu).map(|s| s.codec), Ok(AudioCodec::Pcmu));
        let pcma = OFFER.replace("111 0 8", "8");
        assert_eq!(check_offer(&pcma).map(|s| s.codec), Ok(AudioCodec::Pcma));
        let static_pt = OFFER
            .replace("111 0 8", "0")
            .replace("a=rtpmap:0 PCMU/8000\r\n", "");
        assert_eq!(
            check_offer(&static_pt).map(|s| s.codec),
            Ok(AudioCodec::Pcmu)
        );
    }

    #[test]
    fn rejects_bad_offers() {
        assert_eq!(
            check_offer(""),
            Err(SignalError::Malformed("the first line must be v=0".into()))
        );
        assert!(matches!(
            check_offer("v=0\r\nthis is not sdp"),
            Err(SignalError::Malformed(_))
        ));
        assert_eq!(
            check_offer(&"v=0\r\n".repeat(4000)),
            Err(SignalError::TooLarge(20_000))
        );
        let video = OFFER.replace("m=audio", "m=video");
        assert_eq!(check_offer(&video), Err(SignalError::NoAudio));
        let g722 = OFFER.replace("111 0 8", "9");
        assert_eq!(check_offer(&g722), Err(SignalError::NoSupportedCodec));
        let no_ice = OFFER.replace("a=ice-pwd:abcdefghijklmnopqrstuvwx\r\n", "");
        assert_eq!(
            check_offer(&no_ice),
            Err(SignalError::MissingIceCredentials)
        );
        let no_fp = OFFER
            .lines()
            .filter(|l| !l.starts_with("a=fingerprint"))
            .collect::<Vec<_>>()
            .join("\r\n");
        assert_eq!(check_offer(&no_fp), Err(SignalError::MissingFingerprint));
        assert!(matches!(
            check_offer("v=0\r\nm=audio x RTP 0\r\n"),
            Err(SignalError::Malformed(_))
        ));
        assert_eq!(SignalError::NoAudio.code(), "sdp_no_audio");
    }
}
