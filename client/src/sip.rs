//! A minimal SIP caller over UDP, as a trunk places a call: INVITE with a G.711 offer
//! (PCMU, telephone-event 101), the provisional answers, the final one and its ACK, RTP both
//! ways on a port of its own (PCMU, 20 ms, paced in real time), BYE either way. Enough to
//! drive Duet's phone calls in tests and benchmarks; not a SIP stack (no retransmissions:
//! loopback does not lose datagrams, no authentication, no re-INVITE).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use base64::Engine;
use duet_media::dtmf::TelephoneEvent;
use duet_media::g711::{decode_ulaw, encode_ulaw};
use duet_media::rtp::{self, RtpHeader};
use duet_media::srtp::{Srtp, SrtpSuite, MASTER_BYTES};
use tokio::net::UdpSocket;

/// A SIP response as read.
#[derive(Clone, Debug)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// The headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: String,
}

impl Response {
    /// The first header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A SIP message read off the socket: a response, or a request from the server.
enum Message {
    Response(Response),
    Request {
        method: String,
        headers: Vec<(String, String)>,
    },
}

fn parse(text: &str) -> Option<Message> {
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
    let mut lines = head.split("\r\n");
    let first = lines.next()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    if let Some(rest) = first.strip_prefix("SIP/2.0 ") {
        let status = rest.split(' ').next()?.parse().ok()?;
        return Some(Message::Response(Response {
            status,
            headers,
            body: body.to_string(),
        }));
    }
    let method = first.split(' ').next()?.to_string();
    Some(Message::Request { method, headers })
}

/// The address of an SDP body's audio: `c=` and the `m=audio` port.
pub fn sdp_audio(sdp: &str) -> Option<SocketAddr> {
    let ip = sdp
        .lines()
        .find_map(|l| l.strip_prefix("c=IN IP4 ").or(l.strip_prefix("c=IN IP6 ")))?
        .trim()
        .parse()
        .ok()?;
    let port = sdp
        .lines()
        .find_map(|l| l.strip_prefix("m=audio "))?
        .split(' ')
        .next()?
        .parse()
        .ok()?;
    Some(SocketAddr::new(ip, port))
}

/// One call placed to a SIP server.
pub struct Caller {
    sig: UdpSocket,
    server: SocketAddr,
    call_id: String,
    from: String,
    /// `To` as the final answer gave it (with the server's tag).
    to: String,
    /// The INVITE's Via (a non-2xx ACK reuses its branch).
    invite_via: String,
    cseq: u32,
    /// The call's RTP socket.
    pub rtp: UdpSocket,
    /// Where the server wants RTP (its answer's SDP).
    pub remote_rtp: Option<SocketAddr>,
    out_seq: u16,
    out_ts: u32,
    /// SDES-SRTP: what we send (our key) and, once answered, what arrives (the server's).
    srtp: Option<(Srtp, Option<Srtp>)>,
    /// The INVITE as sent (for [`Caller::retransmit_invite`]).
    invite: String,
}

/// The key of an SDP body's first `a=crypto` line with `AES_CM_128_HMAC_SHA1_80`.
pub fn sdp_crypto(sdp: &str) -> Option<[u8; MASTER_BYTES]> {
    let line = sdp
        .lines()
        .find(|l| l.starts_with("a=crypto:") && l.contains("AES_CM_128_HMAC_SHA1_80"))?;
    let inline = line.split("inline:").nth(1)?.split(['|', ' ']).next()?;
    let key = base64::engine::general_purpose::STANDARD
        .decode(inline.trim())
        .ok()?;
    key.try_into().ok()
}

impl Caller {
    /// Sends an INVITE from `user` (a G.711 offer with telephone-event) to `server`.
    pub async fn invite(server: SocketAddr, user: &str) -> std::io::Result<Self> {
        Self::invite_with(server, user, None).await
    }

    /// Like [`Self::invite`], offering `RTP/SAVP` with `key` (SDES,
    /// `AES_CM_128_HMAC_SHA1_80`): the media both ways is SRTP.
    pub async fn invite_srtp(
        server: SocketAddr,
        user: &str,
        key: [u8; MASTER_BYTES],
    ) -> std::io::Result<Self> {
        Self::invite_with(server, user, Some(key)).await
    }

    async fn invite_with(
        server: SocketAddr,
        user: &str,
        key: Option<[u8; MASTER_BYTES]>,
    ) -> std::io::Result<Self> {
        let sig = UdpSocket::bind("127.0.0.1:0").await?;
        let rtp = UdpSocket::bind("127.0.0.1:0").await?;
        let (local, media) = (sig.local_addr()?, rtp.local_addr()?);
        let n = rand_u32();
        let call_id = format!("uac-{n:08x}@127.0.0.1");
        let from = format!("<sip:{user}@{local}>;tag=uac{n:08x}");
        let invite_via = format!("SIP/2.0/UDP {local};branch=z9hG4bK-uac-{n:08x};rport");
        let (profile, crypto) = match key {
            Some(k) => (
                "RTP/SAVP",
                format!(
                    "a=crypto:1 AES_CM_128_HMAC_SHA1_80 inline:{}\r\n",
                    base64::engine::general_purpose::STANDARD.encode(k)
                ),
            ),
            None => ("RTP/AVP", String::new()),
        };
        let sdp = format!(
            "v=0\r\no=uac 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
             m=audio {} {profile} 0 101\r\na=rtpmap:0 PCMU/8000\r\n\
             a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\na=sendrecv\r\n{crypto}",
            media.port()
        );
        let c = Self {
            sig,
            server,
            call_id,
            from,
            to: format!("<sip:duet@{server}>"),
            invite_via,
            cseq: 1,
            rtp,
            remote_rtp: None,
            out_seq: 1,
            out_ts: 0,
            srtp: key.map(|k| (Srtp::new(SrtpSuite::AesCm128HmacSha1_80, &k), None)),
            invite: String::new(),
        };
        let mut c = c;
        c.invite = c.request("INVITE", &c.invite_via.clone(), 1, "application/sdp", &sdp);
        c.sig.send_to(c.invite.as_bytes(), server).await?;
        Ok(c)
    }

    fn request(&self, method: &str, via: &str, cseq: u32, ctype: &str, body: &str) -> String {
        let local = self
            .sig
            .local_addr()
            .map_or_else(|_| "127.0.0.1:0".into(), |a| a.to_string());
        let ctype = if body.is_empty() {
            String::new()
        } else {
            format!("Content-Type: {ctype}\r\n")
        };
        format!(
            "{method} sip:duet@{server} SIP/2.0\r\nVia: {via}\r\nFrom: {from}\r\nTo: {to}\r\n\
             Call-ID: {id}\r\nCSeq: {cseq} {method}\r\nContact: <sip:caller@{local}>\r\n\
             Max-Forwards: 70\r\n{ctype}Content-Length: {len}\r\n\r\n{body}",
            server = self.server,
            from = self.from,
            to = self.to,
            id = self.call_id,
            len = body.len(),
        )
    }

    async fn read(&self, until: Instant) -> std::io::Result<Message> {
        let mut buf = vec![0u8; 8192];
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let (n, _) = tokio::time::timeout(left, self.sig.recv_from(&mut buf))
                .await
                .map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::TimedOut, "no SIP message")
                })??;
            if let Some(m) = parse(&String::from_utf8_lossy(&buf[..n])) {
                return Ok(m);
            }
        }
    }

    /// Sends the INVITE again, byte for byte (as a caller does when no answer came yet).
    pub async fn retransmit_invite(&self) -> std::io::Result<()> {
        self.sig
            .send_to(self.invite.as_bytes(), self.server)
            .await?;
        Ok(())
    }

    /// The next response (a provisional one is not acknowledged: see [`Self::answer`]).
    pub async fn next_response(&mut self, within: Duration) -> std::io::Result<Response> {
        let until = Instant::now() + within;
        loop {
            if let Message::Response(r) = self.read(until).await? {
                return Ok(r);
            }
        }
    }

    /// Waits for the INVITE's final answer (provisional ones are skipped, `on_provisional`
    /// sees their status) and ACKs it; a 2xx's SDP gives [`Self::remote_rtp`].
    pub async fn answer(
        &mut self,
        within: Duration,
        mut on_provisional: impl FnMut(u16),
    ) -> std::io::Result<Response> {
        let until = Instant::now() + within;
        loop {
            let Message::Response(r) = self.read(until).await? else {
                continue;
            };
            if r.status < 200 {
                on_provisional(r.status);
                continue;
            }
            if let Some(to) = r.header("To") {
                self.to = to.to_string();
            }
            let via = if r.status < 300 {
                self.remote_rtp = sdp_audio(&r.body);
                if let (Some((_, rx)), Some(key)) = (&mut self.srtp, sdp_crypto(&r.body)) {
                    *rx = Some(Srtp::new(SrtpSuite::AesCm128HmacSha1_80, &key));
                }
                let local = self.sig.local_addr()?;
                format!("SIP/2.0/UDP {local};branch=z9hG4bK-ack-{:08x}", rand_u32())
            } else {
                self.invite_via.clone() // a non-2xx ACK is part of the INVITE transaction
            };
            let ack = self.request("ACK", &via, 1, "", "");
            self.sig.send_to(ack.as_bytes(), self.server).await?;
            return Ok(r);
        }
    }

    /// Sends BYE and waits for its answer's status.
    pub async fn bye(&mut self) -> std::io::Result<u16> {
        self.cseq += 1;
        let n = rand_u32();
        let local = self.sig.local_addr()?;
        let via = format!("SIP/2.0/UDP {local};branch=z9hG4bK-bye-{n:08x}");
        let bye = self.request("BYE", &via, self.cseq, "", "");
        self.sig.send_to(bye.as_bytes(), self.server).await?;
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            if let Message::Response(r) = self.read(until).await? {
                if r.header("CSeq").is_some_and(|c| c.ends_with("BYE")) {
                    return Ok(r.status);
                }
            }
        }
    }

    /// Waits for the server's BYE and answers it `200`.
    pub async fn wait_bye(&mut self, within: Duration) -> std::io::Result<()> {
        let until = Instant::now() + within;
        loop {
            if let Message::Request { method, headers } = self.read(until).await? {
                if method != "BYE" {
                    continue;
                }
                let mut ok = String::from("SIP/2.0 200 OK\r\n");
                for name in ["Via", "From", "To", "Call-ID", "CSeq"] {
                    if let Some(v) = header(&headers, name) {
                        ok.push_str(&format!("{name}: {v}\r\n"));
                    }
                }
                ok.push_str("Content-Length: 0\r\n\r\n");
                self.sig.send_to(ok.as_bytes(), self.server).await?;
                return Ok(());
            }
        }
    }

    /// Presses `keys` (`0`–`9`, `*`, `#`, `A`–`D`) as RFC 4733 telephone-events (payload
    /// type 101): per key, four updates 20 ms apart (the first with the marker bit) and the
    /// end packet three times with one sequence number, as phones send them; 100 ms between
    /// keys.
    pub async fn press(&mut self, keys: &str) -> std::io::Result<()> {
        let remote = self
            .remote_rtp
            .ok_or_else(|| std::io::Error::other("no answer SDP"))?;
        let mut packet = Vec::new();
        for key in keys.chars() {
            let event = "0123456789*#ABCD"
                .find(key)
                .ok_or_else(|| std::io::Error::other(format!("no DTMF key {key:?}")))?;
            self.out_ts = self.out_ts.wrapping_add(1_600);
            for i in 0..7u16 {
                let end = i >= 4;
                let ev = TelephoneEvent {
                    event: event as u8,
                    end,
                    volume: 10,
                    duration: 160 * (i.min(4) + 1),
                };
                let header = RtpHeader {
                    marker: i == 0,
                    payload_type: 101,
                    seq: self.out_seq,
                    timestamp: self.out_ts,
                    ssrc: 0x5151,
                };
                rtp::write(&header, &ev.to_bytes(), &mut packet);
                if let Some((tx, _)) = &mut self.srtp {
                    let _ = tx.protect(&mut packet);
                }
                self.rtp.send_to(&packet, remote).await?;
                // The end packet's repeats keep its sequence number.
                if i < 4 {
                    self.out_seq = self.out_seq.wrapping_add(1);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            self.out_seq = self.out_seq.wrapping_add(1);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Talks and listens for `listen`: sends `speech` (8 kHz) as PCMU, 20 ms a packet on an
    /// absolute grid, then silence; returns what arrived, 8 kHz, one entry per packet with
    /// its arrival time since the start.
    pub async fn talk_and_listen(
        &mut self,
        speech: &[f32],
        listen: Duration,
    ) -> std::io::Result<Vec<(Duration, Vec<f32>)>> {
        let remote = self
            .remote_rtp
            .ok_or_else(|| std::io::Error::other("no answer SDP"))?;
        let start = Instant::now();
        let mut heard = Vec::new();
        let mut buf = vec![0u8; 2048];
        let mut frames = speech.chunks(160);
        let mut next = tokio::time::Instant::from_std(start);
        let mut packet = Vec::new();
        let mut plain = Vec::new();
        while start.elapsed() < listen {
            tokio::select! {
                () = tokio::time::sleep_until(next) => {
                    let pcm = frames.next().map_or_else(|| vec![0.0; 160], <[f32]>::to_vec);
                    let header = RtpHeader {
                        marker: false,
                        payload_type: 0,
                        seq: self.out_seq,
                        timestamp: self.out_ts,
                        ssrc: 0x5151,
                    };
                    rtp::write(&header, &encode_ulaw(&pcm), &mut packet);
                    if let Some((tx, _)) = &mut self.srtp {
                        let _ = tx.protect(&mut packet);
                    }
                    self.rtp.send_to(&packet, remote).await?;
                    self.out_seq = self.out_seq.wrapping_add(1);
                    self.out_ts = self.out_ts.wrapping_add(160);
                    next += Duration::from_millis(20);
                }
                got = self.rtp.recv_from(&mut buf) => {
                    let (n, _) = got?;
                    let bytes = match &mut self.srtp {
                        Some((_, Some(rx))) => match rx.unprotect(&buf[..n], &mut plain) {
                            Ok(()) => &plain[..],
                            Err(_) => continue,
                        },
                        Some((_, None)) => continue,
                        None => &buf[..n],
                    };
                    if let Ok(p) = rtp::parse(bytes) {
                        heard.push((start.elapsed(), decode_ulaw(p.payload)));
                    }
                }
            }
        }
        Ok(heard)
    }
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish() as u32
}
