//! A phone call's media: one task per SIP call that owns the call's UDP port and its
//! [`RtpLeg`], paced on an absolute 20 ms grid ([`FrameGrid`]; silence when nothing plays).
//! Caller audio and DTMF keys go to the session; the session's answer audio comes back
//! through [`SipSink`] (the same [`MediaSink`] port as a WebRTC call's), and what played is
//! reported in the call's [`MediaSignals`], so barge-in truncates to what the caller heard.
//!
//! Unlike WebRTC calls, which share the media engine's threads and sockets, each phone call
//! has a port of its own (its SDP names it) and a task on the runtime: the leg's decisions
//! (latching, resync, DTMF, inactivity) are the sans-IO [`RtpLeg`]'s.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use duet_media::rtp_leg::{Received, RtpLeg, RtpLegConfig};
use duet_media::FrameGrid;
use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use crate::session::{
    AttachmentId, Inbound, MediaSignals, MediaSink, Pcm, PcmPool, PlaybackTag, SessionInput,
};

/// The grid period.
const FRAME: Duration = Duration::from_millis(20);
/// Key presses kept while the session's inbox is full (retried at each tick).
const MAX_PENDING_KEYS: usize = 64;

/// What the session (through [`SipSink`]) and the call's signalling tell its media.
enum Command {
    Play { tag: u64, pcm: Pcm },
    Finish(u64),
    Clear,
    Pause(bool),
}

/// Why a call's media ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MediaEnd {
    /// No RTP or RTCP for too long.
    Inactive,
    /// The signalling ended the call (its handle dropped).
    Hangup,
    /// The session is gone.
    SessionGone,
    /// The UDP socket failed.
    Socket,
}

impl MediaEnd {
    /// For logs and the BYE's `Reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaEnd::Inactive => "rtp timeout",
            MediaEnd::Hangup => "hangup",
            MediaEnd::SessionGone => "session ended",
            MediaEnd::Socket => "socket error",
        }
    }
}

/// The session's side of a call's media: answer audio in, purges. Dropping every clone
/// of the call's command sender (this sink and [`MediaHandle`]) ends the media task.
pub struct SipSink {
    tx: mpsc::UnboundedSender<Command>,
    pool: Arc<PcmPool>,
}

impl MediaSink for SipSink {
    fn play(&self, tag: PlaybackTag, pcm: &[f32]) {
        let mut buf = self.pool.take(pcm.len());
        buf.samples_mut().extend_from_slice(pcm);
        let _ = self.tx.send(Command::Play {
            tag: tag.0,
            pcm: buf,
        });
    }

    fn finish(&self, tag: PlaybackTag) {
        let _ = self.tx.send(Command::Finish(tag.0));
    }

    fn clear(&self) {
        let _ = self.tx.send(Command::Clear);
    }

    fn pause(&self, paused: bool) {
        let _ = self.tx.send(Command::Pause(paused));
    }

    fn kind(&self) -> &'static str {
        "sip"
    }
}

/// What a call's media task needs.
pub struct MediaParams {
    /// `rtc_…`, for logs.
    pub id: String,
    /// The call's own port (named in its SDP).
    pub socket: UdpSocket,
    /// The negotiated leg.
    pub leg: RtpLegConfig,
    /// The session's inbox.
    pub session: mpsc::Sender<Inbound>,
    /// The call as the session's attachment.
    pub attachment: AttachmentId,
    /// Playback reports to the session.
    pub signals: Arc<MediaSignals>,
}

/// The signalling's handle on a running media task: ends it when dropped or told to.
pub struct MediaHandle {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// Resolves with why the media ended.
    pub ended: tokio::task::JoinHandle<MediaEnd>,
}

impl MediaHandle {
    /// Ends the media now.
    pub fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// Where the session's answer audio waits until the call's media starts.
pub struct MediaInbox(mpsc::UnboundedReceiver<Command>);

/// The session's sink and the inbox of the media task to come (a late offer's media
/// starts only once the ACK brought the answer, after the session opened).
pub fn channel() -> (SipSink, MediaInbox) {
    let (tx, rx) = mpsc::unbounded_channel();
    let sink = SipSink {
        tx,
        pool: PcmPool::new(),
    };
    (sink, MediaInbox(rx))
}

/// Starts a call's media on `inbox`; returns the signalling's handle.
pub fn start(p: MediaParams, inbox: MediaInbox) -> std::io::Result<MediaHandle> {
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let leg = RtpLeg::new(p.leg.clone(), Instant::now())
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let ended = tokio::spawn(run(p, leg, inbox.0, stopped));
    Ok(MediaHandle {
        stop: Some(stop),
        ended,
    })
}

/// The task's state besides the leg.
struct Task {
    p: MediaParams,
    leg: RtpLeg,
    pool: Arc<PcmPool>,
    out: Vec<u8>,
    /// Key presses the session's inbox had no room for yet, oldest first.
    keys: std::collections::VecDeque<(char, u64)>,
}

async fn run(
    p: MediaParams,
    leg: RtpLeg,
    mut rx: mpsc::UnboundedReceiver<Command>,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) -> MediaEnd {
    let mut grid = FrameGrid::new(Instant::now(), FRAME);
    let mut t = Task {
        p,
        leg,
        pool: PcmPool::new(),
        out: Vec::with_capacity(1500),
        keys: Default::default(),
    };
    let mut buf = vec![0u8; 2048];
    let end = loop {
        let deadline = tokio::time::Instant::from_std(grid.next_deadline());
        tokio::select! {
            biased;
            _ = &mut stopped => break MediaEnd::Hangup,
            _ = tokio::time::sleep_until(deadline) => {
                let now = Instant::now();
                if let Some(tick) = grid.tick(now) {
                    if let Err(end) = t.tick(tick.slot, now).await {
                        break end;
                    }
                }
            }
            got = t.p.socket.recv_from(&mut buf) => match got {
                Ok((n, from)) => {
                    if let Err(end) = t.datagram(from, &buf[..n]) {
                        break end;
                    }
                }
                Err(e) => {
                    tracing::debug!(call = %t.p.id, error = %e, "sip media: receive failed");
                    break MediaEnd::Socket;
                }
            },
            cmd = rx.recv() => match cmd {
                Some(cmd) => t.command(cmd),
                // The session dropped its sink: it is gone.
                None => break MediaEnd::SessionGone,
            },
        }
    };
    let s = t.leg.stats();
    tracing::info!(
        call = %t.p.id, reason = end.as_str(), packets_in = s.audio_in, packets_out = s.packets_out,
        ignored = s.ignored, relatched = s.relatched, "sip media ended"
    );
    t.p.signals.ended();
    end
}

impl Task {
    /// One slot: the packet out, playback reported, caller audio in, the inactivity check.
    async fn tick(&mut self, slot: u64, now: Instant) -> Result<(), MediaEnd> {
        match self.leg.next_packet(slot, &mut self.out) {
            Ok(frame) => self.p.signals.played(frame.played, frame.drained),
            Err(e) => tracing::warn!(call = %self.p.id, error = %e, "sip media: encoding failed"),
        }
        if let Some(remote) = self.leg.remote() {
            if let Err(e) = self.p.socket.send_to(&self.out, remote).await {
                tracing::debug!(call = %self.p.id, error = %e, "sip media: send failed");
            }
        }
        self.leg.audio().prepare();
        self.flush_keys()?;
        let mut pcm = self.pool.take(duet_media::SESSION_RATE as usize / 50);
        if self
            .leg
            .audio()
            .inbound_frame(now, pcm.samples_mut())
            .is_some()
        {
            self.hand_to_session(SessionInput::Media(pcm))?;
        }
        if self.leg.expired(now) {
            return Err(MediaEnd::Inactive);
        }
        Ok(())
    }

    fn datagram(&mut self, from: SocketAddr, bytes: &[u8]) -> Result<(), MediaEnd> {
        let now = Instant::now();
        match self.leg.receive(now, from, bytes) {
            Received::Audio => {
                let mut pcm = self.pool.take(duet_media::SESSION_RATE as usize / 50);
                if self
                    .leg
                    .audio()
                    .arrival_frame(now, pcm.samples_mut())
                    .is_some()
                {
                    self.hand_to_session(SessionInput::Media(pcm))?;
                }
            }
            Received::Dtmf(key) => {
                let received_at = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                if self.keys.len() < MAX_PENDING_KEYS {
                    self.keys.push_back((key, received_at));
                } else {
                    tracing::warn!(call = %self.p.id, %key, "session stuck; DTMF key dropped");
                }
                self.flush_keys()?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Key presses to the session, in order; what its inbox has no room for waits for the
    /// next tick (a key press is never dropped for a moment's backlog).
    fn flush_keys(&mut self) -> Result<(), MediaEnd> {
        while let Some(&(key, received_at)) = self.keys.front() {
            let input = Inbound {
                input: SessionInput::Dtmf { key, received_at },
                hold: None,
                from: self.p.attachment,
            };
            match self.p.session.try_send(input) {
                Ok(()) => {
                    self.keys.pop_front();
                }
                Err(mpsc::error::TrySendError::Closed(_)) => return Err(MediaEnd::SessionGone),
                Err(mpsc::error::TrySendError::Full(_)) => return Ok(()),
            }
        }
        Ok(())
    }

    /// Caller audio to the session: lossy by design (a busy session loses a frame, never
    /// the call its pace).
    fn hand_to_session(&mut self, input: SessionInput) -> Result<(), MediaEnd> {
        let frame = Inbound {
            input,
            hold: None,
            from: self.p.attachment,
        };
        match self.p.session.try_send(frame) {
            Err(mpsc::error::TrySendError::Closed(_)) => Err(MediaEnd::SessionGone),
            _ => Ok(()),
        }
    }

    fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Play { tag, pcm } => {
                if !self.leg.audio().play(tag, &pcm) {
                    tracing::warn!(call = %self.p.id, "playback queue full; audio dropped");
                }
            }
            Command::Finish(tag) => self.leg.audio().finish(tag),
            Command::Clear => {
                self.leg.audio().clear();
                self.p.signals.cleared();
            }
            Command::Pause(paused) => self.leg.audio().pause(paused),
        }
    }
}
