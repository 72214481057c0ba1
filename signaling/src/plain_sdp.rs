//! SDP for phone calls' plain RTP legs (RFC 3264 offer/answer in RFC 4566 syntax): a
//! trunk's offer read, one codec chosen, the answer written; and Duet's own offer when an
//! INVITE came without one (late offer: the offer goes in the 200 OK, the answer in the ACK).
//!
//! Rules:
//! - the first `m=audio` section with a non-zero port is the call's; every other section is
//!   answered with port 0 (declined) in its place, as RFC 3264 §6 requires;
//! - the codec is the offerer's first of PCMU/8000, PCMA/8000 and opus/48000/2 (static
//!   payload types 0 and 8 need no `a=rtpmap`), with the offer's payload type numbers kept
//!   (`telephone-event/8000` too: some trunks send DTMF on a fixed number);
//! - `RTP/AVP` is answered as such; `RTP/SAVP` needs an `a=crypto` line with a suite Duet
//!   speaks (SDES, RFC 4568), whose key the answer's own `a=crypto` line pairs with;
//! - the direction is mirrored (`sendonly` is answered `recvonly`, …).

use std::net::IpAddr;

use base64::Engine;

/// Largest SDP body read.
pub const MAX_PLAIN_SDP_BYTES: usize = 16 * 1024;

/// The audio codecs of a plain RTP leg.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlainCodec {
    /// G.711 μ-law, 8 kHz.
    Pcmu,
    /// G.711 A-law, 8 kHz.
    Pcma,
    /// Opus, 48 kHz RTP clock.
    Opus,
}

impl PlainCodec {
    fn rtpmap(self) -> &'static str {
        match self {
            PlainCodec::Pcmu => "PCMU/8000",
            PlainCodec::Pcma => "PCMA/8000",
            PlainCodec::Opus => "opus/48000/2",
        }
    }
}

/// The RTP profile of the audio section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Profile {
    /// `RTP/AVP`: plain RTP.
    Avp,
    /// `RTP/SAVP`: SRTP keyed by SDES (`a=crypto`).
    Savp,
}

impl Profile {
    fn as_str(self) -> &'static str {
        match self {
            Profile::Avp => "RTP/AVP",
            Profile::Savp => "RTP/SAVP",
        }
    }
}

/// Media direction (RFC 3264 §5.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Both ways (the default).
    SendRecv,
    /// The offerer only sends.
    SendOnly,
    /// The offerer only receives.
    RecvOnly,
    /// Neither (a call on hold).
    Inactive,
}

impl Direction {
    /// The answer's direction for an offer's.
    pub fn reversed(self) -> Self {
        match self {
            Direction::SendOnly => Direction::RecvOnly,
            Direction::RecvOnly => Direction::SendOnly,
            d => d,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Direction::SendRecv => "sendrecv",
            Direction::SendOnly => "sendonly",
            Direction::RecvOnly => "recvonly",
            Direction::Inactive => "inactive",
        }
    }
}

/// The SDES suites Duet speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CryptoSuite {
    /// AES-128 counter mode, 80-bit HMAC-SHA1 tag.
    AesCm128HmacSha1_80,
    /// AES-128 counter mode, 32-bit HMAC-SHA1 tag.
    AesCm128HmacSha1_32,
}

impl CryptoSuite {
    /// The suite's SDP name.
    pub fn name(self) -> &'static str {
        match self {
            CryptoSuite::AesCm128HmacSha1_80 => "AES_CM_128_HMAC_SHA1_80",
            CryptoSuite::AesCm128HmacSha1_32 => "AES_CM_128_HMAC_SHA1_32",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        [Self::AesCm128HmacSha1_80, Self::AesCm128HmacSha1_32]
            .into_iter()
            .find(|s| s.name() == name)
    }
}

/// Bytes of an SDES master key and salt (AES-128: 16 + 14).
pub const SDES_KEY_BYTES: usize = 30;

/// One side's SDES key: the suite and its master key followed by its salt.
#[derive(Clone, PartialEq, Eq)]
pub struct SdesKey {
    /// The `a=crypto` tag.
    pub tag: u32,
    /// The suite.
    pub suite: CryptoSuite,
    /// Master key (16 bytes) then master salt (14 bytes).
    pub key_salt: [u8; SDES_KEY_BYTES],
}

impl std::fmt::Debug for SdesKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself: offers and answers end up in logs.
        f.debug_struct("SdesKey")
            .field("tag", &self.tag)
            .field("suite", &self.suite)
            .finish_non_exhaustive()
    }
}

/// What a trunk's offer asks for, as far as the chosen audio goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlainOffer {
    /// Where the offerer receives audio (`None`: `0.0.0.0`, on hold, or none given).
    pub addr: Option<IpAddr>,
    /// Its RTP port.
    pub port: u16,
    /// The profile.
    pub profile: Profile,
    /// The chosen codec and the offer's payload type for it.
    pub codec: PlainCodec,
    /// Its payload type.
    pub payload_type: u8,
    /// The offer's `telephone-event/8000` payload type.
    pub telephone_event: Option<u8>,
    /// The offerer's SDES key (with `RTP/SAVP`).
    pub crypto: Option<SdesKey>,
    /// The offer's direction.
    pub direction: Direction,
    /// The offer's `a=ptime`, if any (Duet always sends 20 ms).
    pub ptime: Option<u32>,
    /// The offer's sections, to be echoed (declined but the chosen one) in the answer.
    sections: Vec<SectionLine>,
    /// Index of the chosen section.
    chosen: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct SectionLine {
    kind: String,
    proto: String,
    formats: String,
}

/// Why an offer cannot be answered (the SIP side answers 488 Not Acceptable Here, or 400
/// for a body that is not SDP).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlainSdpError {
    /// Over [`MAX_PLAIN_SDP_BYTES`].
    #[error("SDP of {0} bytes exceeds the limit of {MAX_PLAIN_SDP_BYTES} bytes")]
    TooLarge(usize),
    /// Not SDP.
    #[error("malformed SDP: {0}")]
    Malformed(&'static str),
    /// No active audio section.
    #[error("no audio m-line with a port")]
    NoAudio,
    /// A profile other than RTP/AVP and RTP/SAVP (WebRTC's, DTLS-SRTP).
    #[error("unsupported RTP profile {0}")]
    Profile(String),
    /// No PCMU, PCMA or Opus.
    #[error("no supported codec (PCMU/8000, PCMA/8000 or opus/48000/2)")]
    NoSupportedCodec,
    /// RTP/SAVP without an `a=crypto` line Duet can use.
    #[error("RTP/SAVP without a supported a=crypto suite (AES_CM_128_HMAC_SHA1_80 or _32)")]
    NoCryptoSuite,
}

/// The audio section being read.
#[derive(Default)]
struct Audio<'a> {
    index: usize,
    port: u16,
    proto: &'a str,
    formats: Vec<u8>,
    rtpmaps: Vec<(u8, String)>,
    addr: Option<&'a str>,
    direction: Option<Direction>,
    crypto: Vec<&'a str>,
    ptime: Option<u32>,
}

/// Reads an offer. Cheap and bounded: runs before anything is allocated for the call.
pub fn parse_offer(sdp: &str) -> Result<PlainOffer, PlainSdpError> {
    if sdp.len() > MAX_PLAIN_SDP_BYTES {
        return Err(PlainSdpError::TooLarge(sdp.len()));
    }
    if !sdp.trim_start().starts_with("v=0") {
        return Err(PlainSdpError::Malformed("it does not start with v=0"));
    }
    let mut sections = Vec::new();
    let mut session_addr = None;
    let mut session_dir = None;
    let mut audio: Option<Audio> = None;
    // Whether the lines being read belong to the chosen audio section.
    let mut in_audio = false;
    for line in sdp.lines().map(str::trim_end) {
        // A bare CR inside a line would be a line break to some peers, not to others.
        if line.bytes().any(|b| b.is_ascii_control() && b != b'\t') {
            return Err(PlainSdpError::Malformed(
                "a control character inside a line",
            ));
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key == "m" {
            let m = media_line(value)?;
            in_audio = audio.is_none() && m.kind == "audio" && m.port != 0;
            if in_audio {
                audio = Some(Audio {
                    index: sections.len(),
                    port: m.port,
                    proto: m.proto,
                    formats: m
                        .formats
                        .split(' ')
                        .filter_map(|f| f.parse().ok())
                        .collect(),
                    ..Audio::default()
                });
            }
            sections.push(SectionLine {
                kind: m.kind.to_string(),
                proto: m.proto.to_string(),
                formats: m.formats.to_string(),
            });
            continue;
        }
        match (sections.is_empty(), in_audio, audio.as_mut()) {
            (true, _, _) => session_line(key, value, &mut session_addr, &mut session_dir),
            (false, true, Some(a)) => audio_line(key, value, a),
            _ => {}
        }
    }
    let a = audio.ok_or(PlainSdpError::NoAudio)?;
    finish(a, sections, session_addr, session_dir)
}

struct MediaLine<'a> {
    kind: &'a str,
    port: u16,
    proto: &'a str,
    formats: &'a str,
}

fn media_line(value: &str) -> Result<MediaLine<'_>, PlainSdpError> {
    let mut parts = value.splitn(4, ' ');
    let kind = parts.next().unwrap_or_default();
    let port = parts.next().unwrap_or_default();
    // `port/count` (RFC 4566 §5.14): the first port is the RTP one.
    let port = port.split('/').next().unwrap_or_default();
    let port = port
        .parse()
        .map_err(|_| PlainSdpError::Malformed("an m= line's port is not a number"))?;
    let proto = parts
        .next()
        .ok_or(PlainSdpError::Malformed("an m= line without a protocol"))?;
    Ok(MediaLine {
        kind,
        port,
        proto,
        formats: parts.next().unwrap_or_default().trim(),
    })
}

/// `c=IN IP4 <addr>` (TTL or count suffixes dropped).
fn connection(value: &str) -> Option<&str> {
    let mut parts = value.split(' ');
    let (_net, _family) = (parts.next()?, parts.next()?);
    parts.next()?.split('/').next()
}

fn direction(key: &str, value: &str) -> Option<Direction> {
    if key != "a" {
        return None;
    }
    match value {
        "sendrecv" => Some(Direction::SendRecv),
        "sendonly" => Some(Direction::SendOnly),
        "recvonly" => Some(Direction::RecvOnly),
        "inactive" => Some(Direction::Inactive),
        _ => None,
    }
}

fn session_line<'a>(
    key: &str,
    value: &'a str,
    addr: &mut Option<&'a str>,
    dir: &mut Option<Direction>,
) {
    if key == "c" {
        *addr = connection(value);
    }
    if let Some(d) = direction(key, value) {
        *dir = Some(d);
    }
}

fn audio_line<'a>(key: &str, value: &'a str, a: &mut Audio<'a>) {
    if key == "c" {
        a.addr = connection(value);
    }
    if let Some(d) = direction(key, value) {
        a.direction = Some(d);
    }
    if key != "a" {
        return;
    }
    if let Some(map) = value.strip_prefix("rtpmap:") {
        if let Some((pt, codec)) = map.split_once(' ') {
            if let Ok(pt) = pt.parse() {
                a.rtpmaps.push((pt, codec.trim().to_ascii_lowercase()));
            }
        }
    } else if let Some(crypto) = value.strip_prefix("crypto:") {
        a.crypto.push(crypto);
    } else if let Some(ptime) = value.strip_prefix("ptime:") {
        a.ptime = ptime.trim().parse().ok();
    }
}

fn finish(
    a: Audio<'_>,
    sections: Vec<SectionLine>,
    session_addr: Option<&str>,
    session_dir: Option<Direction>,
) -> Result<PlainOffer, PlainSdpError> {
    let profile = match a.proto {
        "RTP/AVP" => Profile::Avp,
        "RTP/SAVP" => Profile::Savp,
        other => return Err(PlainSdpError::Profile(other.to_string())),
    };
    let rtpmap = |pt: u8| {
        a.rtpmaps
            .iter()
            .find(|(p, _)| *p == pt)
            .map(|(_, c)| c.as_str())
    };
    let codec_of = |pt: u8| match (pt, rtpmap(pt)) {
        (0, None) | (_, Some("pcmu/8000")) => Some(PlainCodec::Pcmu),
        (8, None) | (_, Some("pcma/8000")) => Some(PlainCodec::Pcma),
        (_, Some("opus/48000/2")) => Some(PlainCodec::Opus),
        _ => None,
    };
    let (payload_type, codec) = a
        .formats
        .iter()
        .find_map(|&pt| codec_of(pt).map(|c| (pt, c)))
        .ok_or(PlainSdpError::NoSupportedCodec)?;
    let telephone_event = a
        .formats
        .iter()
        .copied()
        .find(|&pt| rtpmap(pt) == Some("telephone-event/8000"));
    let crypto = match profile {
        Profile::Avp => None,
        Profile::Savp => Some(
            a.crypto
                .iter()
                .find_map(|c| parse_crypto(c))
                .ok_or(PlainSdpError::NoCryptoSuite)?,
        ),
    };
    let addr = a
        .addr
        .or(session_addr)
        .and_then(|s| s.parse::<IpAddr>().ok());
    Ok(PlainOffer {
        addr: addr.filter(|ip| !ip.is_unspecified()),
        port: a.port,
        profile,
        codec,
        payload_type,
        telephone_event,
        crypto,
        direction: a.direction.or(session_dir).unwrap_or(Direction::SendRecv),
        ptime: a.ptime,
        sections,
        chosen: a.index,
    })
}

/// `<tag> <suite> inline:<base64 key||salt>[|lifetime][|MKI:length] [session params]`
/// (RFC 4568 §9.1); `None` for suites Duet does not speak, session parameters it would
/// have to honour, or keys of the wrong length.
fn parse_crypto(line: &str) -> Option<SdesKey> {
    let mut parts = line.split_ascii_whitespace();
    let tag = parts.next()?.parse().ok()?;
    let suite = CryptoSuite::from_name(parts.next()?)?;
    let inline = parts.next()?.strip_prefix("inline:")?;
    if parts.next().is_some() {
        return None; // UNENCRYPTED_SRTP, KDR, …: not supported
    }
    let mut fields = inline.split('|');
    let key = base64::engine::general_purpose::STANDARD
        .decode(fields.next()?)
        .ok()?;
    // An MKI would have to be carried in every packet: not supported.
    if fields.any(|f| f.contains(':')) {
        return None;
    }
    Some(SdesKey {
        tag,
        suite,
        key_salt: key.try_into().ok()?,
    })
}

/// Duet's side of the session: what the answer (or a late offer) says.
#[derive(Clone, Debug)]
pub struct LocalMedia {
    /// The address media is received on (the public one behind NAT).
    pub addr: IpAddr,
    /// The RTP port.
    pub port: u16,
    /// The `o=` session id (and version).
    pub session_id: u64,
    /// Duet's SDES key, answering an `RTP/SAVP` offer with the offer's suite and tag.
    pub crypto: Option<SdesKey>,
}

fn family(ip: IpAddr) -> &'static str {
    if ip.is_ipv4() {
        "IP4"
    } else {
        "IP6"
    }
}

fn session_head(local: &LocalMedia, out: &mut String) {
    use std::fmt::Write;
    let (f, ip, id) = (family(local.addr), local.addr, local.session_id);
    let _ = write!(
        out,
        "v=0\r\no=duet {id} {id} IN {f} {ip}\r\ns=duet\r\nc=IN {f} {ip}\r\nt=0 0\r\n"
    );
}

fn audio_attributes(pt: u8, codec: PlainCodec, events: Option<u8>, out: &mut String) {
    use std::fmt::Write;
    let _ = write!(out, "a=rtpmap:{pt} {}\r\n", codec.rtpmap());
    if let Some(ev) = events {
        let _ = write!(
            out,
            "a=rtpmap:{ev} telephone-event/8000\r\na=fmtp:{ev} 0-16\r\n"
        );
    }
    out.push_str("a=ptime:20\r\n");
}

fn crypto_line(key: &SdesKey, out: &mut String) {
    use std::fmt::Write;
    let inline = base64::engine::general_purpose::STANDARD.encode(key.key_salt);
    let _ = write!(
        out,
        "a=crypto:{} {} inline:{inline}\r\n",
        key.tag,
        key.suite.name()
    );
}

/// The answer to `offer`: its chosen audio section accepted with one codec (and
/// `telephone-event` when offered), every other section declined.
pub fn write_answer(offer: &PlainOffer, local: &LocalMedia) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(512);
    session_head(local, &mut out);
    for (i, s) in offer.sections.iter().enumerate() {
        if i != offer.chosen {
            let _ = write!(out, "m={} 0 {} {}\r\n", s.kind, s.proto, s.formats);
            continue;
        }
        let pt = offer.payload_type;
        let _ = write!(
            out,
            "m=audio {} {} {pt}",
            local.port,
            offer.profile.as_str()
        );
        if let Some(ev) = offer.telephone_event {
            let _ = write!(out, " {ev}");
        }
        out.push_str("\r\n");
        audio_attributes(pt, offer.codec, offer.telephone_event, &mut out);
        let _ = write!(out, "a={}\r\n", offer.direction.reversed().as_str());
        if let Some(key) = &local.crypto {
            crypto_line(key, &mut out);
        }
    }
    out
}

/// The payload type of `telephone-event` in Duet's own offers.
pub const OFFER_TELEPHONE_EVENT: u8 = 101;
/// The payload type of Opus in Duet's own offers.
pub const OFFER_OPUS: u8 = 111;

/// Duet's offer for an INVITE that came without one (RFC 3261 §13.2.1: the answer comes in
/// the ACK, and [`parse_offer`] reads it too): PCMU, PCMA and then Opus (what phone networks
/// carry first; a trunk that prefers Opus may answer with it), with `telephone-event`,
/// plain `RTP/AVP`.
pub fn write_offer(local: &LocalMedia) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(448);
    session_head(local, &mut out);
    let (ev, opus) = (OFFER_TELEPHONE_EVENT, OFFER_OPUS);
    let _ = write!(
        out,
        "m=audio {} RTP/AVP 0 8 {opus} {ev}\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\n\
         a=rtpmap:{opus} opus/48000/2\r\na=fmtp:{opus} minptime=20;useinbandfec=1\r\n\
         a=rtpmap:{ev} telephone-event/8000\r\na=fmtp:{ev} 0-16\r\na=ptime:20\r\na=sendrecv\r\n",
        local.port
    );
    out
}

#[cfg(test)]
#[path = "plain_sdp_tests.rs"]
mod tests;
