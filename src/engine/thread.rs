//! The engine thread's loop.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use duet_media::pacer::FrameGrid;
use duet_signaling::{Call, CallEvent, Transmit};
use tokio::sync::mpsc;

use super::pipeline::Pipeline;
use super::{Command, NewCall};
use crate::metrics::METRICS;
use crate::net::Waker;
use crate::protocol::{codes, ErrorPayload};
use crate::session::{Outbound, SessionInput};

/// The outbound frame period.
const FRAME: Duration = Duration::from_millis(20);
/// Socket read timeouts are never shorter than this (avoids spinning).
const MIN_WAIT: Duration = Duration::from_micros(200);

struct Live {
    id: String,
    call: Call,
    media: Pipeline,
    session: mpsc::Sender<SessionInput>,
    events: mpsc::Receiver<Outbound>,
    has_dc: bool,
    on_end: Option<Box<dyn FnOnce() + Send>>,
    last_rx: Instant,
    next_timeout: Instant,
    created: Instant,
    connected: bool,
    closing: bool,
}

pub(super) struct EngineThread {
    socket: UdpSocket,
    local: SocketAddr,
    rx: std_mpsc::Receiver<Command>,
    waker: Arc<Waker>,
    inactivity: Duration,
    calls: HashMap<u64, Live>,
    by_addr: HashMap<SocketAddr, u64>,
    count: Arc<AtomicUsize>,
    transmits: Vec<Transmit>,
    events: Vec<CallEvent>,
    disconnected: bool,
}

impl EngineThread {
    pub(super) fn new(
        socket: UdpSocket,
        local: SocketAddr,
        rx: std_mpsc::Receiver<Command>,
        waker: Arc<Waker>,
        inactivity: Duration,
        count: Arc<AtomicUsize>,
    ) -> Self {
        Self {
            socket,
            local,
            rx,
            waker,
            inactivity,
            calls: HashMap::new(),
            by_addr: HashMap::new(),
            count,
            transmits: Vec::new(),
            events: Vec::new(),
            disconnected: false,
        }
    }

    pub(super) fn run(mut self) {
        let mut grid = FrameGrid::new(Instant::now(), FRAME);
        let mut buf = vec![0u8; 2048];
        loop {
            self.commands();
            if self.disconnected && self.calls.is_empty() {
                return;
            }
            let now = Instant::now();
            if let Some(tick) = grid.tick(now) {
                METRICS
                    .pacing_skipped
                    .fetch_add(tick.skipped, Ordering::Relaxed);
                self.tick(now, now - tick.lateness);
            }
            self.timeouts(Instant::now());
            let deadline = self
                .calls
                .values()
                .map(|c| c.next_timeout)
                .fold(grid.next_deadline(), Instant::min);
            let wait = deadline
                .saturating_duration_since(Instant::now())
                .max(MIN_WAIT);
            if !self.waker.wait(&self.socket, wait) {
                continue;
            }
            // Drain what arrived (non-blocking), then go back to the grid.
            loop {
                match self.socket.recv_from(&mut buf) {
                    Ok((n, source)) => self.datagram(source, &buf[..n]),
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                        break
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "udp receive failed");
                        break;
                    }
                }
                if Instant::now() >= grid.next_deadline() {
                    break;
                }
            }
        }
    }

    fn commands(&mut self) {
        loop {
            match self.rx.try_recv() {
                Ok(cmd) => self.command(cmd),
                Err(std_mpsc::TryRecvError::Empty) => return,
                Err(std_mpsc::TryRecvError::Disconnected) => {
                    self.disconnected = true;
                    return;
                }
            }
        }
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Add(new) => self.add(*new),
            Command::Hangup(key) => self.end(key, "hangup"),
            Command::Play { key, tag, pcm } => {
                if let Some(c) = self.calls.get_mut(&key) {
                    if !c.media.play(tag, &pcm) {
                        tracing::warn!(call = %c.id, "playback queue full; audio dropped");
                    }
                }
            }
            Command::Finish { key, tag } => {
                if let Some(c) = self.calls.get_mut(&key) {
                    c.media.finish(tag);
                }
            }
            Command::Clear(key) => {
                if let Some(c) = self.calls.get_mut(&key) {
                    c.media.clear();
                    let _ = c.session.try_send(SessionInput::Cleared);
                }
            }
        }
    }

    fn add(&mut self, new: NewCall) {
        let now = Instant::now();
        let media = match Pipeline::new(new.call.codec()) {
            Ok(m) => m,
            Err(e) => {
                tracing::error!(call = %new.id, error = %e, "media pipeline failed");
                (new.on_end)();
                return;
            }
        };
        tracing::info!(call = %new.id, codec = ?new.call.codec(), "call added to the media engine");
        self.calls.insert(
            new.key,
            Live {
                id: new.id,
                call: new.call,
                media,
                session: new.session,
                events: new.events,
                has_dc: new.has_data_channel,
                on_end: Some(new.on_end),
                last_rx: now,
                next_timeout: now,
                created: now,
                connected: false,
                closing: false,
            },
        );
        self.count.store(self.calls.len(), Ordering::Relaxed);
    }

    fn datagram(&mut self, source: SocketAddr, bytes: &[u8]) {
        let now = Instant::now();
        let key = match self.by_addr.get(&source) {
            Some(k)
                if self
                    .calls
                    .get(k)
                    .is_some_and(|c| c.call.accepts(now, source, self.local, bytes)) =>
            {
                Some(*k)
            }
            _ => self
                .calls
                .iter()
                .find(|(_, c)| c.call.accepts(now, source, self.local, bytes))
                .map(|(k, _)| *k),
        };
        // A new call's first ICE check can race the command that adds the call.
        let key = key.or_else(|| {
            self.commands();
            self.calls
                .iter()
                .find(|(_, c)| c.call.accepts(now, source, self.local, bytes))
                .map(|(k, _)| *k)
        });
        let Some(key) = key else { return };
        self.by_addr.insert(source, key);
        let Some(c) = self.calls.get_mut(&key) else {
            return;
        };
        c.last_rx = now;
        if let Err(e) = c.call.receive(now, source, self.local, bytes) {
            tracing::debug!(call = %c.id, error = %e, "datagram rejected");
        }
        self.drain(key);
    }

    /// Runs str0m timers that are due.
    fn timeouts(&mut self, now: Instant) {
        let due: Vec<u64> = self
            .calls
            .iter()
            .filter(|(_, c)| c.next_timeout <= now)
            .map(|(k, _)| *k)
            .collect();
        for key in due {
            if let Some(c) = self.calls.get_mut(&key) {
                let _ = c.call.timeout(now);
            }
            self.drain(key);
        }
    }

    /// One grid slot for every call. First every call's audio frame goes out (the timing
    /// critical part, measured per frame against the grid deadline), then the rest: events,
    /// caller audio in, timers, reaping.
    fn tick(&mut self, now: Instant, deadline: Instant) {
        let keys: Vec<u64> = self.calls.keys().copied().collect();
        let mut ticks = Vec::with_capacity(keys.len());
        for &key in &keys {
            if let Some(c) = self.calls.get_mut(&key) {
                ticks.push(c.send_frame(deadline));
            }
            self.drain(key);
            METRICS
                .pacing_deviation
                .observe(Instant::now().saturating_duration_since(deadline));
        }
        for (&key, (played, drained)) in keys.iter().zip(ticks) {
            if let Some(c) = self.calls.get_mut(&key) {
                c.receive_tick(played, drained);
                let _ = c.call.timeout(now);
            }
            self.drain(key);
            self.reap_if_dead(key, now);
        }
    }

    /// Sends what str0m wants sent and handles its events.
    fn drain(&mut self, key: u64) {
        let Some(c) = self.calls.get_mut(&key) else {
            return;
        };
        self.transmits.clear();
        self.events.clear();
        match c.call.poll(&mut self.transmits, &mut self.events) {
            Ok(at) => c.next_timeout = at,
            Err(e) => {
                tracing::debug!(call = %c.id, error = %e, "call failed");
                c.call.close();
                c.next_timeout = Instant::now();
            }
        }
        for t in self.transmits.drain(..) {
            if let Err(e) = self.socket.send_to(&t.contents, t.destination) {
                tracing::debug!(error = %e, dest = %t.destination, "udp send failed");
            }
        }
        for ev in self.events.drain(..) {
            c.event(ev);
        }
    }

    fn reap_if_dead(&mut self, key: u64, now: Instant) {
        let Some(c) = self.calls.get(&key) else {
            return;
        };
        let reason = if !c.call.is_alive() {
            Some("peer gone (DTLS close or ICE timeout)")
        } else if now.duration_since(c.last_rx) > self.inactivity {
            Some("inactivity timeout")
        } else if c.session.is_closed() {
            Some("session ended")
        } else if c.closing {
            Some("closed by the session")
        } else {
            None
        };
        if let Some(reason) = reason {
            self.end(key, reason);
        }
    }

    fn end(&mut self, key: u64, reason: &str) {
        // Close gracefully (RTCP BYE, SCTP shutdown, DTLS close_notify) so the peer learns
        // at once, and send what that produced before forgetting the call.
        if let Some(c) = self.calls.get_mut(&key) {
            c.call.close();
        }
        self.drain(key);
        let Some(mut c) = self.calls.remove(&key) else {
            return;
        };
        let _ = c.session.try_send(SessionInput::Ended);
        self.by_addr.retain(|_, k| *k != key);
        self.count.store(self.calls.len(), Ordering::Relaxed);
        tracing::info!(call = %c.id, reason, lived_ms = c.created.elapsed().as_millis() as u64, "call ended");
        if let Some(f) = c.on_end.take() {
            f();
        }
    }
}

impl Live {
    /// Encodes and sends this tick's frame; returns what of each response left.
    fn send_frame(&mut self, now: Instant) -> (Vec<(u64, u64)>, Vec<u64>) {
        match self.media.outbound_frame() {
            Ok(frame) => {
                if self.call.can_send_audio() && self.call.send_audio(now, &frame.payload).is_ok() {
                    METRICS.frames_sent.fetch_add(1, Ordering::Relaxed);
                }
                (frame.played, frame.drained)
            }
            Err(e) => {
                tracing::warn!(call = %self.id, error = %e, "encoding failed");
                (Vec::new(), Vec::new())
            }
        }
    }

    /// Events out, caller audio in, and the tick's report to the session.
    fn receive_tick(&mut self, played: Vec<(u64, u64)>, drained: Vec<u64>) {
        self.flush_events();
        let audio = self.media.inbound_frame();
        // One message per call per tick: each message can wake the session's task.
        if audio.is_some() || !played.is_empty() || !drained.is_empty() {
            let tick = SessionInput::Media {
                audio,
                played,
                drained,
            };
            if self.session.try_send(tick).is_err() {
                tracing::debug!(call = %self.id, "session inbox full; media tick dropped");
            }
        }
    }

    /// Writes the session's events to `oai-events` (held until it opens; dropped when the
    /// offer has no data channel).
    fn flush_events(&mut self) {
        if self.has_dc && !self.call.channel_open() {
            return;
        }
        while let Ok(out) = self.events.try_recv() {
            match out {
                Outbound::Event(ev) if self.has_dc => {
                    if !self.call.send_text(&ev.to_json()) {
                        tracing::warn!(call = %self.id, kind = ev.kind(), "data channel refused an event");
                    }
                }
                Outbound::Event(_) => {}
                Outbound::Close { .. } => self.closing = true,
            }
        }
    }

    fn event(&mut self, ev: CallEvent) {
        match ev {
            CallEvent::Connected => {
                self.connected = true;
                tracing::info!(call = %self.id, connect_ms = self.created.elapsed().as_millis() as u64, "call connected");
            }
            CallEvent::Audio {
                seq,
                payload,
                codec,
            } if codec == self.call.codec() => self.media.receive(seq, payload),
            CallEvent::Audio { .. } => {}
            CallEvent::ChannelOpen => self.flush_events(),
            CallEvent::Text(text) => {
                if self.session.try_send(SessionInput::Text(text)).is_err() {
                    tracing::warn!(call = %self.id, "session inbox full; client event dropped");
                }
            }
            CallEvent::Binary(n) => {
                let err = ErrorPayload::invalid(
                    codes::INVALID_JSON,
                    format!("binary message of {n} bytes on oai-events; send JSON text"),
                );
                let _ = self.session.try_send(SessionInput::Invalid(err));
            }
            CallEvent::ChannelClosed => {}
        }
    }
}
