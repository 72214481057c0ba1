//! A WebRTC client for Duet built on str0m as the offerer: it POSTs its offer to
//! `/v1/realtime/calls`, sends Opus on a 20 ms grid (silence, or audio you queue), decodes
//! what it receives, and exchanges JSON events on `oai-events`. Used by the examples and the
//! integration tests (the load generator, [`crate::load`], drives its many calls itself).
//! Loopback/LAN only: no STUN/TURN. With [`ClientOptions::impair`] its media goes through a
//! loss and jitter relay ([`crate::impair`]).

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use duet_media::{FrameGrid, OpusDecoder, OpusEncoder};
use serde_json::Value;
use str0m::change::{SdpAnswer, SdpPendingOffer};
use str0m::channel::ChannelId;
use str0m::media::{Direction, Frequency, MediaKind, MediaTime, Mid};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};
use tokio::sync::mpsc;

use crate::http::post_offer;
use crate::impair::{Impairment, Relay, RelayStats};

const FRAME: usize = 960;

/// What the client measured.
#[derive(Clone, Debug, Default)]
pub struct ClientStats {
    /// When the offer was POSTed.
    pub started: Option<Instant>,
    /// When ICE+DTLS connected.
    pub connected: Option<Instant>,
    /// Audio frames received, with arrival time and RMS level.
    pub frames: Vec<(Instant, f32)>,
    /// The RTP sequence number of each frame in `frames`, same order.
    pub seqs: Vec<u64>,
    /// Frames sent.
    pub sent: u64,
    /// Grid slots this client sent nothing for because its thread woke more than a slot late
    /// (the queued microphone audio is then late, not lost).
    pub send_skipped: u64,
}

impl ClientStats {
    /// Frames received in `[from, to)`.
    pub fn frames_between(&self, from: Instant, to: Instant) -> usize {
        self.frames
            .iter()
            .filter(|(t, _)| *t >= from && *t < to)
            .count()
    }

    /// Arrival of the first frame after `from` louder than `rms`.
    pub fn first_loud_after(&self, from: Instant, rms: f32) -> Option<Instant> {
        self.frames
            .iter()
            .find(|(t, r)| *t >= from && *r > rms)
            .map(|(t, _)| *t)
    }

    /// Arrival of the last frame louder than `rms`.
    pub fn last_loud(&self, rms: f32) -> Option<Instant> {
        self.frames
            .iter()
            .rev()
            .find(|(_, r)| *r > rms)
            .map(|(t, _)| *t)
    }
}

struct Shared {
    mic: VecDeque<f32>,
    outbox: VecDeque<String>,
    stats: ClientStats,
    stop: bool,
    audio: Vec<f32>,
    keep_audio: bool,
    /// The network is down until then ([`RtcClient::go_offline`]).
    offline_until: Option<Instant>,
    ctl: VecDeque<Ctl>,
}

/// A connected (or connecting) call.
pub struct RtcClient {
    shared: Arc<Mutex<Shared>>,
    events: mpsc::UnboundedReceiver<Value>,
    thread: Option<JoinHandle<()>>,
    /// `rtc_…` from the `Location` header.
    pub call_id: String,
    /// The server's base URL (`http://host:port`).
    pub base: SocketAddr,
    /// The impairment relay, when [`ClientOptions::impair`] asked for one.
    relay: Option<Relay>,
    api_key: Option<String>,
}

/// Options for [`RtcClient::connect`].
#[derive(Clone, Debug, Default)]
pub struct ClientOptions {
    /// Offer PCMU only (a SIP gateway) instead of Opus.
    pub pcmu_only: bool,
    /// Keep every decoded sample (for pitch analysis in tests).
    pub keep_audio: bool,
    /// Bearer token.
    pub api_key: Option<String>,
    /// Lose and delay packets both ways through a relay (see [`crate::impair`]).
    pub impair: Option<Impairment>,
    /// Opt into the duplex extension (`?duplex=1`).
    pub duplex: bool,
    /// Ask for the turn-detection events (`?turn_events=1`; with a `session` part).
    pub turn_events: bool,
    /// Resume this session instead of opening one: the multipart `resume` part
    /// (`{session_id, resume_token, last_received_server_event_seq}`; implies `duplex`).
    pub resume: Option<Value>,
    /// The multipart `session` part: the call's session configuration (as the official
    /// SDKs send it).
    pub session: Option<Value>,
}

/// What the caller asks of the media thread.
enum Ctl {
    /// Make an ICE-restart offer and send its SDP back.
    RestartOffer(tokio::sync::oneshot::Sender<String>),
    /// The answer to the restart offer.
    Answer(String),
}

impl RtcClient {
    /// Offers a call to the server at `base` (e.g. 127.0.0.1:8080) and starts the media thread.
    pub async fn connect(base: SocketAddr, opts: ClientOptions) -> anyhow::Result<Self> {
        let socket = UdpSocket::bind(SocketAddr::new(base.ip(), 0))?;
        socket.set_nonblocking(true)?;
        let local = socket.local_addr()?;
        let now = Instant::now();
        duet_signaling::dtls::install();
        let mut config = Rtc::builder()
            .clear_codecs()
            .enable_opus(!opts.pcmu_only, false)
            .enable_pcmu(opts.pcmu_only, false);
        if let Some(imp) = opts.impair {
            config = config.set_reordering_size_audio(reorder_window(&imp));
        }
        let mut rtc = config.build(now);
        rtc.add_local_candidate(Candidate::host(local, "udp")?);
        let mut api = rtc.sdp_api();
        let mid = api.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None);
        let channel = api.add_channel("oai-events".into());
        let (offer, pending) = api.apply().ok_or_else(|| anyhow!("no offer"))?;
        let (call_id, answer) = offer_call(base, &offer.to_sdp_string(), &opts).await?;
        let (answer, relay) = via_relay(answer, opts.impair)?;
        accept(&mut rtc, pending, &answer)?;
        let (tx, events) = mpsc::unbounded_channel();
        let shared = Arc::new(Mutex::new(Shared {
            mic: VecDeque::new(),
            outbox: VecDeque::new(),
            stats: ClientStats {
                started: Some(now),
                ..Default::default()
            },
            stop: false,
            audio: Vec::new(),
            keep_audio: opts.keep_audio,
            offline_until: None,
            ctl: VecDeque::new(),
        }));
        let media = Media {
            rtc,
            socket,
            local,
            mid,
            channel,
            tx,
            shared: shared.clone(),
            pcmu: opts.pcmu_only,
            pending: None,
        };
        let thread = std::thread::Builder::new()
            .name("rtc-client".into())
            .spawn(move || media.run())?;
        Ok(Self {
            shared,
            events,
            thread: Some(thread),
            call_id,
            base,
            relay,
            api_key: opts.api_key,
        })
    }

    /// The network goes silent both ways for `d` (nothing sent, everything received
    /// dropped), as when a phone loses its Wi-Fi.
    pub fn go_offline(&self, d: Duration) {
        if let Ok(mut s) = self.shared.lock() {
            s.offline_until = Some(Instant::now() + d);
        }
    }

    /// An ICE restart on the same call (a browser's `restartIce()`): a new offer with new
    /// ICE credentials, `PATCH /v1/realtime/calls/{call_id}`, and its answer applied.
    pub async fn restart_ice(&mut self) -> anyhow::Result<()> {
        let (reply, offer) = tokio::sync::oneshot::channel();
        self.control(Ctl::RestartOffer(reply));
        let offer = offer
            .await
            .context("the media thread made no restart offer")?;
        let answer =
            crate::http::patch_offer(self.base, &self.call_id, &offer, self.api_key.as_deref())
                .await?;
        self.control(Ctl::Answer(answer));
        Ok(())
    }

    fn control(&self, ctl: Ctl) {
        if let Ok(mut s) = self.shared.lock() {
            s.ctl.push_back(ctl);
        }
    }

    /// What the impairment relay forwarded and dropped, when there is one.
    pub fn relay_stats(&self) -> Option<RelayStats> {
        self.relay.as_ref().map(Relay::stats)
    }

    /// Queues 48 kHz audio to send (after what is queued).
    pub fn speak(&self, samples: &[f32]) {
        if let Ok(mut s) = self.shared.lock() {
            s.mic.extend(samples);
        }
    }

    /// Sends a JSON event on `oai-events` (queued until the channel is open).
    pub fn send(&self, event: Value) {
        if let Ok(mut s) = self.shared.lock() {
            s.outbox.push_back(event.to_string());
        }
    }

    /// The next event within `timeout`.
    pub async fn next(&mut self, timeout: Duration) -> Option<Value> {
        tokio::time::timeout(timeout, self.events.recv())
            .await
            .ok()
            .flatten()
    }

    /// Waits for an event of type `kind`, returning it and those skipped.
    pub async fn until(
        &mut self,
        kind: &str,
        timeout: Duration,
    ) -> anyhow::Result<(Value, Vec<Value>)> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut skipped = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let ev = self.next(left).await.with_context(|| {
                format!("no {kind} within {timeout:?}; saw {:?}", types(&skipped))
            })?;
            if ev["type"] == kind {
                return Ok((ev, skipped));
            }
            skipped.push(ev);
        }
    }

    /// A copy of the measurements.
    pub fn stats(&self) -> ClientStats {
        self.shared
            .lock()
            .map(|s| s.stats.clone())
            .unwrap_or_default()
    }

    /// Every decoded sample so far (when `keep_audio`).
    pub fn audio(&self) -> Vec<f32> {
        self.shared
            .lock()
            .map(|s| s.audio.clone())
            .unwrap_or_default()
    }

    /// Whether the queued microphone audio has all been sent.
    pub fn done_speaking(&self) -> bool {
        self.shared.lock().map(|s| s.mic.is_empty()).unwrap_or(true)
    }

    /// Stops the media thread (closing the peer connection).
    pub fn close(&mut self) {
        if let Ok(mut s) = self.shared.lock() {
            s.stop = true;
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for RtcClient {
    fn drop(&mut self) {
        self.close();
    }
}

/// A WebRTC offer (Opus and the `oai-events` channel, one host candidate at `candidate`)
/// from a peer that never starts ICE: for signalling-only tests and benchmarks.
pub fn offer_only(candidate: SocketAddr) -> anyhow::Result<String> {
    duet_signaling::dtls::install();
    let mut rtc = Rtc::builder()
        .clear_codecs()
        .enable_opus(true, false)
        .build(Instant::now());
    rtc.add_local_candidate(Candidate::host(candidate, "udp")?);
    let mut api = rtc.sdp_api();
    api.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None);
    api.add_channel("oai-events".into());
    let (offer, _) = api.apply().ok_or_else(|| anyhow!("no offer"))?;
    Ok(offer.to_sdp_string())
}

/// Event types, for messages.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// With an impairment, starts a relay to the answer's media address and points the answer
/// at the relay instead.
fn via_relay(answer: String, imp: Option<Impairment>) -> anyhow::Result<(String, Option<Relay>)> {
    let Some(imp) = imp else {
        return Ok((answer, None));
    };
    let media = crate::impair::candidate_addr(&answer).context("no UDP candidate in answer")?;
    let relay = Relay::start(media, imp)?;
    Ok((crate::impair::redirect(&answer, relay.addr()), Some(relay)))
}

/// Packets str0m holds back for a missing one before it gives up on it: enough to cover
/// `jitter`'s reordering (20 ms a packet), not str0m's default 15 (300 ms), which would turn
/// every lost packet into a 300 ms stall and a burst, as no real receiver does.
pub(crate) fn reorder_window(imp: &Impairment) -> usize {
    imp.jitter.as_millis() as usize / 20 + 2
}

/// POSTs the offer as [`ClientOptions`] ask: plain SDP, `?duplex=1`, a multipart resume or
/// a multipart session.
async fn offer_call(
    base: SocketAddr,
    sdp: &str,
    opts: &ClientOptions,
) -> anyhow::Result<(String, String)> {
    let key = opts.api_key.as_deref();
    match (&opts.resume, opts.duplex) {
        (Some(resume), _) => {
            let resume = resume.to_string();
            let (ctype, body) = crate::http::multipart(&[
                ("sdp", "application/sdp", sdp),
                ("resume", "application/json", &resume),
            ]);
            crate::http::post_call(base, "?duplex=1", &ctype, &body, key).await
        }
        (None, duplex) if opts.session.is_some() => {
            let session = opts
                .session
                .as_ref()
                .map(Value::to_string)
                .unwrap_or_default();
            let (ctype, body) = crate::http::multipart(&[
                ("sdp", "application/sdp", sdp),
                ("session", "application/json", &session),
            ]);
            let query = match (duplex, opts.turn_events) {
                (true, true) => "?duplex=1&turn_events=1",
                (true, false) => "?duplex=1",
                (false, true) => "?turn_events=1",
                (false, false) => "",
            };
            crate::http::post_call(base, query, &ctype, &body, key).await
        }
        (None, true) => {
            crate::http::post_call(base, "?duplex=1", "application/sdp", sdp, key).await
        }
        (None, false) => post_offer(base, sdp, key).await,
    }
}

fn accept(rtc: &mut Rtc, pending: SdpPendingOffer, answer: &str) -> anyhow::Result<()> {
    let answer = SdpAnswer::from_sdp_string(answer)?;
    rtc.sdp_api().accept_answer(pending, answer)?;
    Ok(())
}

struct Media {
    rtc: Rtc,
    socket: UdpSocket,
    local: SocketAddr,
    mid: Mid,
    channel: ChannelId,
    tx: mpsc::UnboundedSender<Value>,
    shared: Arc<Mutex<Shared>>,
    pcmu: bool,
    /// An ICE-restart offer waiting for its answer.
    pending: Option<SdpPendingOffer>,
}

impl Media {
    /// Whether the network is down now.
    fn offline(&self) -> bool {
        self.shared
            .lock()
            .map(|s| s.offline_until.is_some_and(|t| Instant::now() < t))
            .unwrap_or(false)
    }

    /// Runs what the caller asked for.
    fn control(&mut self) {
        let ctls: Vec<Ctl> = match self.shared.lock() {
            Ok(mut s) => s.ctl.drain(..).collect(),
            Err(_) => return,
        };
        for ctl in ctls {
            match ctl {
                Ctl::RestartOffer(reply) => {
                    let mut api = self.rtc.sdp_api();
                    api.ice_restart(true);
                    if let Some((offer, pending)) = api.apply() {
                        self.pending = Some(pending);
                        let _ = reply.send(offer.to_sdp_string());
                    }
                }
                Ctl::Answer(answer) => {
                    if let Some(pending) = self.pending.take() {
                        let _ = accept(&mut self.rtc, pending, &answer);
                    }
                }
            }
        }
    }

    fn run(mut self) {
        let (Ok(mut enc), Ok(mut dec)) = (OpusEncoder::new(), OpusDecoder::new()) else {
            return;
        };
        let mut grid = FrameGrid::new(Instant::now(), Duration::from_millis(20));
        let mut buf = vec![0u8; 2048];
        let mut ts = 0u64;
        let mut open = false;
        let mut next = Instant::now();
        loop {
            if self.shared.lock().map(|s| s.stop).unwrap_or(true) {
                self.hang_up();
                return;
            }
            self.control();
            let now = Instant::now();
            if let Some(tick) = grid.tick(now) {
                if tick.skipped > 0 {
                    if let Ok(mut s) = self.shared.lock() {
                        s.stats.send_skipped += tick.skipped;
                    }
                }
                self.send_frame(now, &mut enc, &mut ts);
                if open {
                    self.flush_outbox();
                }
            }
            if next <= now {
                let _ = self.rtc.handle_input(Input::Timeout(now));
            }
            let Some(timeout) = self.drain(&mut dec, &mut open) else {
                return;
            };
            next = timeout;
            let wait = next
                .min(grid.next_deadline())
                .saturating_duration_since(Instant::now())
                .max(Duration::from_micros(200));
            if crate::poll::wait_readable(&self.socket, wait) && !self.receive(&mut buf) {
                return;
            }
        }
    }

    /// Sends what str0m transmits and handles its events until it names its next timeout;
    /// `None` when str0m failed.
    fn drain(&mut self, dec: &mut OpusDecoder, open: &mut bool) -> Option<Instant> {
        loop {
            match self.rtc.poll_output() {
                Ok(Output::Timeout(t)) => return Some(t),
                Ok(Output::Transmit(t)) => {
                    if !self.offline() {
                        let _ = self.socket.send_to(&t.contents, t.destination);
                    }
                }
                Ok(Output::Event(e)) => self.event(e, dec, open),
                Err(_) => return None,
            }
        }
    }

    /// Reads one datagram (if one is there) into str0m; false when the socket failed.
    fn receive(&mut self, buf: &mut [u8]) -> bool {
        match self.socket.recv_from(buf) {
            Ok(_) if self.offline() => true,
            Ok((n, source)) => {
                if let Ok(contents) = buf[..n].try_into() {
                    let input = Input::Receive(
                        Instant::now(),
                        Receive {
                            proto: Protocol::Udp,
                            source,
                            destination: self.local,
                            contents,
                        },
                    );
                    let _ = self.rtc.handle_input(input);
                }
                true
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => true,
            Err(_) => false,
        }
    }

    /// Closes gracefully (DTLS close_notify and friends reach the server) and returns.
    fn hang_up(&mut self) {
        if self.rtc.close().is_err() {
            return;
        }
        while let Ok(out) = self.rtc.poll_output() {
            match out {
                Output::Transmit(t) => {
                    let _ = self.socket.send_to(&t.contents, t.destination);
                }
                Output::Timeout(_) => return,
                Output::Event(_) => {}
            }
        }
    }

    fn send_frame(&mut self, now: Instant, enc: &mut OpusEncoder, ts: &mut u64) {
        if !self.rtc.is_connected() {
            return;
        }
        let pcm: Vec<f32> = match self.shared.lock() {
            Ok(mut s) => {
                let n = FRAME.min(s.mic.len());
                let mut v: Vec<f32> = s.mic.drain(..n).collect();
                v.resize(FRAME, 0.0);
                s.stats.sent += 1;
                v
            }
            Err(_) => return,
        };
        let (payload, freq, step) = if self.pcmu {
            let narrow: Vec<f32> = pcm.iter().step_by(6).copied().collect();
            (duet_media::encode_ulaw(&narrow), Frequency::EIGHT_KHZ, 160)
        } else {
            (
                enc.encode(&pcm).unwrap_or_default(),
                Frequency::FORTY_EIGHT_KHZ,
                960,
            )
        };
        let Some(writer) = self.rtc.writer(self.mid) else {
            return;
        };
        let Some(pt) = writer.payload_params().next().map(|p| p.pt()) else {
            return;
        };
        let _ = writer.write(pt, now, MediaTime::new(*ts, freq), payload);
        *ts += step;
    }

    fn flush_outbox(&mut self) {
        let msgs: Vec<String> = match self.shared.lock() {
            Ok(mut s) => s.outbox.drain(..).collect(),
            Err(_) => return,
        };
        if let Some(mut ch) = self.rtc.channel(self.channel) {
            for m in msgs {
                let _ = ch.write(false, m.as_bytes());
            }
        }
    }

    fn event(&mut self, e: Event, dec: &mut OpusDecoder, open: &mut bool) {
        match e {
            Event::Connected => {
                if let Ok(mut s) = self.shared.lock() {
                    s.stats.connected = Some(Instant::now());
                }
            }
            Event::ChannelOpen(_, _) => *open = true,
            Event::ChannelData(d) => {
                if let Ok(v) = serde_json::from_slice::<Value>(&d.data) {
                    let _ = self.tx.send(v);
                }
            }
            Event::MediaData(d) => {
                let mut pcm = Vec::with_capacity(FRAME);
                if self.pcmu {
                    pcm = duet_media::decode_ulaw(&d.data);
                } else if dec.decode(&d.data, &mut pcm).is_err() {
                    return;
                }
                let rms = (pcm.iter().map(|x| x * x).sum::<f32>() / pcm.len().max(1) as f32).sqrt();
                if let Ok(mut s) = self.shared.lock() {
                    s.stats.frames.push((Instant::now(), rms));
                    s.stats.seqs.push(**d.seq_range.end());
                    if s.keep_audio {
                        s.audio.extend_from_slice(&pcm);
                    }
                }
            }
            _ => {}
        }
    }
}
