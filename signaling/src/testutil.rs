//! A whole call in memory, for tests and fuzzing: a str0m offerer (like a browser) and our
//! [`Call`] exchange datagrams through a simulated network on a simulated clock.
//!
//! Always compiled (it is small) so that the fuzz crate can drive a connected call without a
//! feature flag; hidden from the docs and not part of the API.

use core::net::SocketAddr;
use std::time::{Duration, Instant};

use str0m::change::{SdpAnswer, SdpPendingOffer};
use str0m::channel::ChannelId;
use str0m::media::{Direction, MediaKind, Mid};
use str0m::net::{Protocol, Receive};
use str0m::{Candidate, Event, Input, Output, Rtc};

use crate::call::{AnswerConfig, Call, CallEvent, Transmit, EVENTS_LABEL};
use crate::sdp::check_offer;

/// How far the simulated clock moves per [`Pair::step`].
pub const STEP: Duration = Duration::from_millis(5);

/// The browser side.
pub struct Peer {
    /// Its WebRTC stack.
    pub rtc: Rtc,
    /// Its address.
    pub addr: SocketAddr,
    /// Its `oai-events` channel.
    pub channel: ChannelId,
    /// Its audio m-line.
    pub mid: Mid,
    /// Text messages it received.
    pub got_text: Vec<String>,
    /// Audio frames it received.
    pub got_audio: usize,
    /// Their RTP times, in clock-rate units.
    pub audio_times: Vec<u64>,
    /// Whether its channel opened.
    pub open: bool,
}

/// A peer and our call, wired together.
pub struct Pair {
    /// The browser side.
    pub peer: Peer,
    /// Our side.
    pub call: Call,
    /// Our address.
    pub server: SocketAddr,
    /// The simulated clock.
    pub now: Instant,
    /// What the call reported so far.
    pub events: Vec<CallEvent>,
    /// Our answer SDP.
    pub answer: String,
    /// Datagrams on their way to the call.
    to_call: Vec<Vec<u8>>,
    /// Datagrams on their way to the peer.
    to_peer: Vec<Transmit>,
}

/// A peer with an audio track and `oai-events`, its pending offer and the offer SDP.
pub fn offer(now: Instant) -> (Peer, SdpPendingOffer, String) {
    let addr: SocketAddr = "127.0.0.1:5000".parse().expect("address");
    let mut rtc = Rtc::builder().build(now);
    let host = Candidate::host(addr, "udp").expect("host candidate");
    rtc.add_local_candidate(host);
    let mut api = rtc.sdp_api();
    let mid = api.add_media(MediaKind::Audio, Direction::SendRecv, None, None, None);
    let channel = api.add_channel(EVENTS_LABEL.into());
    let (offer, pending) = api.apply().expect("an offer");
    let peer = Peer {
        rtc,
        addr,
        channel,
        mid,
        got_text: vec![],
        got_audio: 0,
        audio_times: Vec::new(),
        open: false,
    };
    (peer, pending, offer.to_sdp_string())
}

impl Pair {
    /// Offer and answer, not yet connected. `edit` may change the offer our side sees.
    pub fn new(
        cfg: &AnswerConfig,
        now: Instant,
        edit: impl FnOnce(String) -> String,
    ) -> Result<Self, String> {
        let (mut peer, pending, offer) = offer(now);
        let offer = edit(offer);
        let summary = check_offer(&offer).map_err(|e| e.to_string())?;
        let (call, answer) = Call::accept(&offer, summary, cfg, now).map_err(|e| e.to_string())?;
        let parsed = SdpAnswer::from_sdp_string(&answer).map_err(|e| e.to_string())?;
        peer.rtc
            .sdp_api()
            .accept_answer(pending, parsed)
            .map_err(|e| e.to_string())?;
        let server = cfg.candidates().first().copied().ok_or("no candidate")?;
        Ok(Self {
            peer,
            call,
            server,
            now,
            events: Vec::new(),
            answer,
            to_call: Vec::new(),
            to_peer: Vec::new(),
        })
    }

    /// Steps until both sides see `oai-events` open; false if that takes over `max_steps`.
    pub fn connect(&mut self, max_steps: usize) -> Result<bool, String> {
        for _ in 0..max_steps {
            self.step()?;
            if self.peer.open && self.call.channel_open() && self.call.can_send_audio() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Runs `n` steps.
    pub fn run(&mut self, n: usize) -> Result<(), String> {
        (0..n).try_for_each(|_| self.step())
    }

    /// One round trip: the peer's datagrams to the call (each must be accepted), the call's
    /// back to the peer, then the clock moves by [`STEP`]. Each side is polled after every
    /// datagram, as the engine does (DTLS queues only a few unread records).
    pub fn step(&mut self) -> Result<(), String> {
        for bytes in self.peer_output()? {
            self.deliver(&bytes)?;
        }
        self.call_to_peer()?;
        self.tick()
    }

    /// Feeds one datagram from the peer to the call, which must accept it, and polls the call.
    pub fn deliver(&mut self, bytes: &[u8]) -> Result<(), String> {
        let (now, src, dst) = (self.now, self.peer.addr, self.server);
        if !self.call.accepts(now, src, dst, bytes) {
            return Err("the call did not accept a datagram from its peer".into());
        }
        self.call
            .receive(now, src, dst, bytes)
            .map_err(|e| e.to_string())?;
        self.poll_call()
    }

    /// Moves the clock by [`STEP`] on both sides.
    pub fn tick(&mut self) -> Result<(), String> {
        self.now += STEP;
        let timeout = Input::Timeout(self.now);
        self.peer
            .rtc
            .handle_input(timeout)
            .map_err(|e| e.to_string())?;
        self.call.timeout(self.now).map_err(|e| e.to_string())
    }

    /// Polls the call and delivers its datagrams to the peer.
    pub fn call_to_peer(&mut self) -> Result<(), String> {
        self.poll_call()?;
        for t in std::mem::take(&mut self.to_peer) {
            let contents = t
                .contents
                .as_slice()
                .try_into()
                .map_err(|_| "bad datagram")?;
            let receive = Receive {
                proto: Protocol::Udp,
                source: t.source,
                destination: self.peer.addr,
                contents,
            };
            let input = Input::Receive(self.now, receive);
            self.peer
                .rtc
                .handle_input(input)
                .map_err(|e| e.to_string())?;
            self.poll_peer()?;
        }
        Ok(())
    }

    /// The peer's datagrams for the call (polling it first).
    pub fn peer_output(&mut self) -> Result<Vec<Vec<u8>>, String> {
        self.poll_peer()?;
        Ok(std::mem::take(&mut self.to_call))
    }

    fn poll_call(&mut self) -> Result<(), String> {
        let polled = self.call.poll(&mut self.to_peer, &mut self.events);
        polled.map(|_| ()).map_err(|e| e.to_string())
    }

    /// Drains the peer: records its events, queues its datagrams.
    fn poll_peer(&mut self) -> Result<(), String> {
        loop {
            match self.peer.rtc.poll_output().map_err(|e| e.to_string())? {
                Output::Timeout(_) => return Ok(()),
                Output::Transmit(t) => self.to_call.push(t.contents.to_vec()),
                Output::Event(Event::ChannelOpen(_, _)) => self.peer.open = true,
                Output::Event(Event::ChannelData(d)) => {
                    let text = String::from_utf8_lossy(&d.data).into_owned();
                    self.peer.got_text.push(text);
                }
                Output::Event(Event::MediaData(d)) => {
                    self.peer.got_audio += 1;
                    self.peer.audio_times.push(d.time.numer());
                }
                Output::Event(_) => {}
            }
        }
    }
}
