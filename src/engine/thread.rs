//! The engine thread's loop: commands, the 20 ms grid (in four phases 5 ms apart), datagram
//! routing, str0m timers and reaping. Datagrams are routed in O(1): by source address once known, and a new source's
//! STUN check by our ICE ufrag in its USERNAME; anything else from an unknown source is
//! dropped without looking at any call.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use duet_media::pacer::FrameGrid;
use duet_signaling::{is_stun, stun_username_local, CallEvent, Transmit};

use super::live::{guarded, LiveCall};
use super::net::Waker;
use super::{CallKey, Command, EngineConfig, Fault, NewCall};
use crate::metrics::METRICS;

/// The outbound frame period.
const FRAME: Duration = Duration::from_millis(20);
/// Each call's 20 ms grid is one of this many phases, 5 ms apart: a sub-tick serves one
/// phase's calls, so a tick's sends (and the work after them) are spread over the frame
/// instead of bunched at one deadline, and an answer's first frame waits at most 5 ms for
/// a slot (an idle call moves to the next phase when its answer starts).
const PHASES: u64 = 4;

/// Of the grid slots `[from, to)`, how many belong to `phase`.
fn slots_of_phase(from: u64, to: u64, phase: u64) -> u64 {
    let upto = |n: u64| (n + PHASES - 1 - phase) / PHASES;
    upto(to) - upto(from.min(to))
}
/// Socket read timeouts are never shorter than this (avoids spinning).
const MIN_WAIT: Duration = Duration::from_micros(200);

/// Marks the engine dead when its thread ends, by return or by panic.
pub(super) struct AliveFlag(pub(super) Arc<AtomicBool>);

impl Drop for AliveFlag {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
        if std::thread::panicking() {
            tracing::error!(
                "a media engine thread panicked; its calls were ended and it takes no new ones"
            );
        }
    }
}

pub(super) struct EngineThread {
    socket: UdpSocket,
    local: SocketAddr,
    rx: std_mpsc::Receiver<Command>,
    waker: Arc<Waker>,
    inactivity: Duration,
    connect_timeout: Duration,
    calls: HashMap<CallKey, LiveCall>,
    by_addr: HashMap<SocketAddr, CallKey>,
    by_ufrag: HashMap<String, CallKey>,
    count: Arc<AtomicUsize>,
    transmits: Vec<Transmit>,
    events: Vec<CallEvent>,
    /// The calls of the current tick (reused).
    keys: Vec<CallKey>,
    /// Calls per phase (new calls join the emptiest).
    phase_calls: [usize; PHASES as usize],
    /// The next grid slot to be served (its phase is the next one due).
    next_slot: u64,
    disconnected: bool,
}

impl EngineThread {
    pub(super) fn new(
        socket: UdpSocket,
        local: SocketAddr,
        rx: std_mpsc::Receiver<Command>,
        waker: Arc<Waker>,
        cfg: &EngineConfig,
        count: Arc<AtomicUsize>,
    ) -> Self {
        Self {
            socket,
            local,
            rx,
            waker,
            inactivity: cfg.inactivity,
            connect_timeout: cfg.connect_timeout,
            calls: HashMap::new(),
            by_addr: HashMap::new(),
            by_ufrag: HashMap::new(),
            count,
            transmits: Vec::new(),
            events: Vec::new(),
            keys: Vec::new(),
            phase_calls: [0; PHASES as usize],
            next_slot: 0,
            disconnected: false,
        }
    }

    pub(super) fn run(mut self, _alive: AliveFlag) {
        let mut grid = FrameGrid::new(Instant::now(), FRAME / PHASES as u32);
        let mut buf = vec![0u8; 2048];
        loop {
            // The deadline path first: a due tick only sends the frames encoded ahead.
            let now = Instant::now();
            let ticked = grid.tick(now).map(|tick| {
                METRICS
                    .pacing_skipped
                    .fetch_add(tick.skipped, Ordering::Relaxed);
                METRICS.tick_wake.observe(tick.lateness);
                self.send_tick(now, now - tick.lateness, tick.slot, tick.skipped);
                self.next_slot = grid.next_slot();
                now
            });
            // Then the sessions' commands (answer audio is encoded here, as it arrives),
            // never past the next deadline.
            self.commands(Some(grid.next_deadline()));
            if let Some(now) = ticked {
                self.after_tick(now);
            }
            if self.disconnected && self.calls.is_empty() {
                return;
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
            // Drain what arrived (non-blocking), then go back to the grid and the timers.
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
                if Instant::now() >= deadline {
                    break;
                }
            }
        }
    }

    /// Runs the commands waiting, until none is left or `until` passed.
    fn commands(&mut self, until: Option<Instant>) {
        loop {
            if until.is_some_and(|t| Instant::now() >= t) {
                return;
            }
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
            Command::Play { key, tag, pcm, at } => {
                self.on_call(key, |c| c.play(tag, &pcm, at));
                self.hop(key);
            }
            Command::Finish { key, tag } => self.on_call(key, |c| c.media.finish(tag)),
            Command::Clear(key) => self.on_call(key, LiveCall::clear),
            Command::Pause { key, paused } => self.on_call(key, |c| c.media.pause(paused)),
            Command::Renegotiate {
                key,
                offer,
                summary,
                reply,
            } => {
                let _ = reply.send(self.renegotiate(key, &offer, summary));
            }
            Command::Fault(Fault::PanicThread) => panic!("injected fault: media engine thread"),
            Command::Fault(Fault::PanicCall(key)) => self.on_call(key, |c| c.fault = true),
        }
    }

    /// Runs `f` on call `key` under its guard.
    fn on_call(&mut self, key: CallKey, f: impl FnOnce(&mut LiveCall)) {
        if let Some(c) = self.calls.get_mut(&key) {
            guarded(c, f);
        }
    }

    /// A new offer on a live call (an ICE restart): its checks now arrive under the new
    /// ufrag, so the routing learns it before the answer goes out.
    fn renegotiate(
        &mut self,
        key: CallKey,
        offer: &str,
        summary: duet_signaling::OfferSummary,
    ) -> Result<String, duet_signaling::SignalError> {
        let gone = || duet_signaling::SignalError::Rejected("the call has ended".into());
        let c = self.calls.get_mut(&key).ok_or_else(gone)?;
        let answer = guarded(c, |c| c.call.renegotiate(offer, summary)).ok_or_else(gone)?;
        match answer {
            Ok(answer) => {
                let ufrag = c.call.local_ufrag().to_string();
                self.by_ufrag.retain(|_, k| *k != key);
                self.by_ufrag.insert(ufrag, key);
                tracing::info!(call = %c.id, "call renegotiated (ICE restart)");
                self.drain(key);
                Ok(answer)
            }
            Err(e) if c.call.is_failed() => {
                self.end(key, "renegotiation failed");
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    fn add(&mut self, new: NewCall) {
        let key = new.key;
        let ufrag = new.call.local_ufrag().to_string();
        match LiveCall::new(new) {
            Ok(mut call) => {
                let phase = (0..PHASES)
                    .min_by_key(|p| self.phase_calls[*p as usize])
                    .unwrap_or(0);
                call.phase = phase;
                self.phase_calls[phase as usize] += 1;
                self.by_ufrag.insert(ufrag, key);
                self.calls.insert(key, call);
                self.count.store(self.calls.len(), Ordering::Relaxed);
            }
            Err(e) => tracing::error!(error = %e, "media pipeline failed; call dropped"),
        }
    }

    fn datagram(&mut self, source: SocketAddr, bytes: &[u8]) {
        let Some(key) = self.route(source, bytes) else {
            return;
        };
        let now = Instant::now();
        let local = self.local;
        let Some(c) = self.calls.get_mut(&key) else {
            return;
        };
        c.last_rx = now;
        if let Err(e) = c.call.receive(now, source, local, bytes) {
            tracing::debug!(call = %c.id, error = %e, "datagram rejected");
        }
        self.drain(key);
    }

    /// The call a datagram belongs to: a STUN check by the ufrag it names (which also
    /// learns or moves its source address), anything else by its known source address.
    fn route(&mut self, source: SocketAddr, bytes: &[u8]) -> Option<CallKey> {
        if !is_stun(bytes) {
            return self.by_addr.get(&source).copied();
        }
        let ufrag = stun_username_local(bytes)?;
        let key = match self.by_ufrag.get(ufrag) {
            Some(k) => *k,
            None => {
                // A new call's first ICE check can race the command that adds the call.
                self.commands(None);
                *self.by_ufrag.get(ufrag)?
            }
        };
        let now = Instant::now();
        let c = self.calls.get(&key)?;
        if !c.call.accepts(now, source, self.local, bytes) {
            return None;
        }
        self.by_addr.insert(source, key);
        Some(key)
    }

    /// Runs str0m timers that are due.
    fn timeouts(&mut self, now: Instant) {
        let due: Vec<CallKey> = self
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

    /// One grid slot: the frame of every call in its phase (after `skipped` slots that a
    /// stall made us skip: those slots' calls skip a frame each). The timing-critical
    /// part: every frame was encoded ahead, so this only stamps, encrypts and sends; each
    /// frame's lateness against the deadline is measured, and the whole pass (tick start to
    /// last packet sent).
    fn send_tick(&mut self, now: Instant, deadline: Instant, slot: u64, skipped: u64) {
        let phase = slot % PHASES;
        self.keys.clear();
        for (key, c) in &mut self.calls {
            if skipped > 0 {
                let missed = slots_of_phase(slot - skipped, slot, c.phase);
                if missed > 0 {
                    c.call.skip_audio_frames(missed);
                }
            }
            if c.phase == phase {
                self.keys.push(*key);
            }
        }
        for i in 0..self.keys.len() {
            let key = self.keys[i];
            self.on_call(key, |c| c.send_frame(deadline));
            self.drain(key);
            METRICS
                .pacing_deviation
                .observe(Instant::now().saturating_duration_since(deadline));
        }
        METRICS
            .tick_work
            .observe(Instant::now().saturating_duration_since(now));
    }

    /// The rest of a tick for the calls it served, off the deadline path: their next
    /// frames encoded ahead, caller audio in, events out, timers, reaping.
    fn after_tick(&mut self, now: Instant) {
        for i in 0..self.keys.len() {
            let key = self.keys[i];
            self.on_call(key, |c| {
                c.after_tick(now);
                let _ = c.call.timeout(now);
            });
            self.drain(key);
            self.reap_if_dead(key, now);
        }
    }

    /// A call whose answer starts while it idles moves to the phase due next, so the
    /// answer's first frame waits for that sub-tick, not for its own (one interval between
    /// its packets is then shorter than 20 ms; RTP timestamps stay contiguous).
    fn hop(&mut self, key: CallKey) {
        let next = self.next_slot % PHASES;
        let Some(c) = self.calls.get_mut(&key) else {
            return;
        };
        if !std::mem::take(&mut c.hop) || c.phase == next {
            return;
        }
        self.phase_calls[c.phase as usize] -= 1;
        self.phase_calls[next as usize] += 1;
        c.phase = next;
    }

    /// Sends what str0m wants sent and handles its events.
    fn drain(&mut self, key: CallKey) {
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
        let events = std::mem::take(&mut self.events);
        guarded(c, |c| {
            for ev in events {
                c.event(ev);
            }
        });
    }

    fn reap_if_dead(&mut self, key: CallKey, now: Instant) {
        let Some(c) = self.calls.get(&key) else {
            return;
        };
        let reason = if c.failed {
            Some("its media work panicked")
        } else if !c.call.is_alive() {
            Some("peer gone (DTLS close or ICE timeout)")
        } else if !c.connected && now.duration_since(c.created) > self.connect_timeout {
            Some("not connected in time (no ICE and DTLS)")
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

    /// Ends a call: closes it gracefully (RTCP BYE, SCTP shutdown, DTLS close_notify) so the
    /// peer learns at once, sends what that produced, then drops it (its guard releases the
    /// slots and tells the session).
    fn end(&mut self, key: CallKey, reason: &str) {
        if let Some(c) = self.calls.get_mut(&key) {
            c.call.close();
        }
        self.drain(key);
        let Some(c) = self.calls.remove(&key) else {
            return;
        };
        self.phase_calls[c.phase as usize] -= 1;
        self.by_addr.retain(|_, k| *k != key);
        self.by_ufrag.retain(|_, k| *k != key);
        self.count.store(self.calls.len(), Ordering::Relaxed);
        tracing::info!(call = %c.id, reason, lived_ms = c.created.elapsed().as_millis() as u64, "call ended");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skipped_slots_are_counted_per_phase() {
        // Slots 3..9 skipped: phases 3, 0, 1, 2, 3, 0 → phase 0 and 3 miss two frames.
        assert_eq!(slots_of_phase(3, 9, 0), 2);
        assert_eq!(slots_of_phase(3, 9, 1), 1);
        assert_eq!(slots_of_phase(3, 9, 2), 1);
        assert_eq!(slots_of_phase(3, 9, 3), 2);
        assert_eq!(slots_of_phase(5, 5, 1), 0);
        assert_eq!(slots_of_phase(0, 1, 0), 1);
        assert_eq!(slots_of_phase(0, 1, 1), 0);
        // A long stall: every phase misses its share.
        let total: u64 = (0..PHASES).map(|p| slots_of_phase(10, 1010, p)).sum();
        assert_eq!(total, 1000);
    }
}
