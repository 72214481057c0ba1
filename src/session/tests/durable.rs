//! The duplex extension's durable sessions: sequenced events, detach, resume with the
//! journal's replay, takeover, the lease's timers and the extension commands.

use super::*;
use crate::session::EventSender;

fn duplex(speech: Vec<Range<u64>>) -> Harness {
    harness(Setup {
        speech,
        duplex: true,
        ..Setup::default()
    })
}

fn token(v: &Value) -> String {
    v["resume_token"]
        .as_str()
        .expect("resume_token")
        .to_string()
}

fn seqs(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .filter_map(|v| v["server_event_seq"].as_u64())
        .collect()
}

/// Everything a queue holds now, and how it was closed.
fn take_all(rx: &mut EventReceiver) -> (Vec<Value>, Option<String>) {
    let mut got = Vec::new();
    loop {
        match rx.try_recv() {
            Received::Delivery(Delivery::Event(ev, _)) => {
                got.push(serde_json::from_str(&ev.json).expect("JSON"))
            }
            Received::Delivery(Delivery::Close { code, reason }) => {
                return (got, Some(format!("{code} {reason}")))
            }
            Received::Abort(a) => return (got, Some(format!("aborted {a:?}"))),
            Received::Empty | Received::Closed => return (got, None),
        }
    }
}

impl Harness {
    fn session_id(&self) -> String {
        self.seen[0]["session"]["id"]
            .as_str()
            .expect("id")
            .to_string()
    }

    /// The transport (attachment `from`) dropped.
    fn detach(&mut self, from: u64) {
        self.session
            .handle_from(AttachmentId(from), SessionInput::Detach, self.now);
        self.collect();
    }

    /// A new connection (attachment `from`) sends `session.resume`; its queue.
    fn resume(&mut self, from: u64, token: &str, last: u64) -> EventReceiver {
        let (out, rx): (EventSender, EventReceiver) = queue(32 << 20);
        let request = crate::protocol::duplex::ResumeRequest {
            session_id: self.session_id(),
            resume_token: token.to_string(),
            last_received_server_event_seq: last,
        };
        let input = SessionInput::Resume {
            request,
            out,
            attachment: AttachmentId(from),
            transport: Transport::WebSocket,
            reply: None,
        };
        self.session
            .handle_from(AttachmentId(from), input, self.now);
        rx
    }

    /// The resumed connection becomes the one the harness reads.
    fn switch_to(&mut self, rx: EventReceiver) {
        self.out = rx;
        self.closed = None;
        self.pending.clear();
        self.collect();
    }
}

#[test]
fn an_opted_in_session_is_created_with_a_token_and_capabilities_and_sequences_what_follows() {
    let mut h = duplex(once(3..8));
    let created = h.seen[0].clone();
    assert_eq!(created["type"], "session.created");
    assert!(
        created.get("server_event_seq").is_none(),
        "session.created is not journaled"
    );
    assert_eq!(created["attachment_generation"], 1);
    let t = token(&created);
    assert_eq!(
        t.len(),
        43,
        "32 bytes, URL-safe base64 without padding: {t}"
    );
    assert!(t
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    let caps = &created["session"]["capabilities"];
    assert_eq!(caps["supports_session_resume"], true);
    assert_eq!(caps["implementation_level"], "model_native_duplex");
    assert_eq!(caps["chunk_period_ms"], 20);
    let events = h.until("response.done");
    let s = seqs(&events);
    assert_eq!(
        s.len(),
        events.len(),
        "every event after session.created has a seq"
    );
    assert_eq!(s, (1..=s.len() as u64).collect::<Vec<_>>());
}

#[test]
fn a_ga_session_has_no_seq_no_token_and_no_extension_commands() {
    let mut h = harness(Setup {
        speech: once(3..8),
        ..Setup::default()
    });
    assert!(h.seen[0].get("resume_token").is_none());
    assert!(h.seen[0]["session"].get("capabilities").is_none());
    let events = h.until("response.done");
    assert!(seqs(&events).is_empty());
    h.send(json!({"type":"session.heartbeat"}));
    let err = last(&h.until("error"), "error").clone();
    assert_eq!(err["error"]["code"], "unknown_event_type");
}

#[test]
fn a_dropped_transport_detaches_and_a_resume_replays_from_the_last_seq_received() {
    let mut h = duplex(once(10..20));
    let t = token(&h.seen[0]);
    h.send(json!({"type":"session.update","session":{"instructions":"x"}}));
    let before = h.until("session.updated");
    let last_seen = *seqs(&before).last().expect("seq");
    h.detach(1);
    assert!(h.closed.is_some(), "the old connection is closed");
    assert_eq!(
        h.session.state(),
        Some(crate::session::SessionState::Detached)
    );
    // The model speaks while nobody is attached: journaled.
    h.advance(Duration::from_secs(1));
    let rx = h.resume(2, &t, last_seen);
    h.switch_to(rx);
    let resumed = h.pending.pop_front().expect("session.resumed");
    assert_eq!(resumed["type"], "session.resumed");
    assert!(resumed.get("server_event_seq").is_none());
    assert_eq!(resumed["attachment_generation"], 2);
    assert_eq!(resumed["session_id"], h.session_id().as_str());
    let new_token = token(&resumed);
    assert_ne!(new_token, t, "the token rotates");
    let replay = h.until("response.done");
    let s = seqs(&replay);
    assert_eq!(s.first(), Some(&(last_seen + 1)));
    assert_eq!(
        s,
        (last_seen + 1..=last_seen + s.len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(
        h.session.state(),
        Some(crate::session::SessionState::Attached)
    );
    // The old token no longer resumes.
    let mut bad = h.resume(3, &t, 0);
    let (got, closed) = take_all(&mut bad);
    assert_eq!(got[0]["error"]["code"], "invalid_resume_token");
    assert_eq!(closed.as_deref(), Some("1008 invalid_resume_token"));
}

#[test]
fn resumes_with_a_bad_token_or_a_seq_ahead_are_refused_and_leave_the_session_as_it_was() {
    let mut h = duplex(Vec::new());
    let t = token(&h.seen[0]);
    let mut bad = h.resume(2, "not-the-token", 0);
    assert_eq!(
        take_all(&mut bad).0[0]["error"]["code"],
        "invalid_resume_token"
    );
    let mut ahead = h.resume(3, &t, 99);
    assert_eq!(
        take_all(&mut ahead).0[0]["error"]["code"],
        "session_resume_conflict"
    );
    // Still attached to the first connection, which still works.
    assert!(h.closed.is_none());
    h.send(json!({"type":"session.heartbeat"}));
    let ack = last(&h.until("session.heartbeat_ack"), "session.heartbeat_ack").clone();
    assert_eq!(ack["session_id"], h.session_id().as_str());
}

#[test]
fn a_resume_while_attached_takes_over_and_the_old_connection_is_ignored() {
    let mut h = duplex(Vec::new());
    let t = token(&h.seen[0]);
    let rx = h.resume(2, &t, 0);
    h.collect();
    let replaced = last(&h.seen, "session.replaced").clone();
    assert_eq!(replaced["attachment_generation"], 1);
    assert!(replaced.get("server_event_seq").is_none());
    assert_eq!(h.closed.as_deref(), Some("1000 session_replaced"));
    // The old connection's input and its drop change nothing.
    h.session.handle_from(
        AttachmentId(1),
        SessionInput::Text(json!({"type":"session.close"}).to_string()),
        h.now,
    );
    h.detach(1);
    h.switch_to(rx);
    assert_eq!(
        h.pending.pop_front().expect("resumed")["type"],
        "session.resumed"
    );
    assert_eq!(
        h.session.state(),
        Some(crate::session::SessionState::Attached)
    );
    assert!(!h.session.is_closed());
}

#[test]
fn the_grace_runs_out_on_the_sessions_own_timer() {
    let mut h = duplex(Vec::new());
    let start = h.now;
    h.detach(1);
    h.advance(Duration::from_millis(29_900));
    assert!(!h.session.is_closed(), "still within the grace");
    h.advance(Duration::from_millis(200));
    assert!(h.session.is_closed(), "expired at 30 s");
    assert!(h.now - start <= Duration::from_millis(30_100));
}

#[test]
fn acks_trim_the_journal_and_bad_acks_are_errors() {
    let mut h = duplex(Vec::new());
    let t = token(&h.seen[0]);
    for _ in 0..3 {
        h.send(json!({"type":"session.heartbeat"}));
    }
    let got = h.until("session.heartbeat_ack");
    let head = *seqs(&got).last().expect("seq");
    h.drain(Duration::from_millis(100));
    h.send(json!({"type":"session.event_ack","server_event_seq":100}));
    let err = last(&h.until("error"), "error").clone();
    assert_eq!(err["error"]["code"], "invalid_event_ack");
    h.send(json!({"type":"session.event_ack","server_event_seq":-1}));
    assert_eq!(
        last(&h.until("error"), "error")["error"]["code"],
        "invalid_event_ack"
    );
    h.send(json!({"type":"session.event_ack","server_event_seq":head}));
    h.detach(1);
    // Events up to `head` are gone: resuming from before them is a gap.
    let mut rx = h.resume(2, &t, 0);
    let (got, closed) = take_all(&mut rx);
    assert_eq!(got[0]["type"], "session.resync_required");
    assert_eq!(got[0]["reason"], "journal_gap");
    assert_eq!(closed.as_deref(), Some("1000 journal_gap"));
}

#[test]
fn an_overflowing_journal_asks_for_a_resync_once_and_goes_on_without_seqs() {
    let mut h = harness(Setup {
        duplex: true,
        limits: Some(Limits {
            journal_bytes: 2_000,
            ..Limits::default()
        }),
        ..Setup::default()
    });
    for _ in 0..30 {
        h.send(json!({"type":"session.heartbeat"}));
    }
    let got = h.drain(Duration::from_millis(100));
    assert_eq!(count(&got, "session.resync_required"), 1);
    let at = got
        .iter()
        .position(|v| v["type"] == "session.resync_required")
        .expect("resync");
    assert_eq!(got[at]["reason"], "journal_overflow");
    assert!(got[..at]
        .iter()
        .all(|v| v.get("server_event_seq").is_some()));
    assert!(got[at..]
        .iter()
        .all(|v| v.get("server_event_seq").is_none()));
    assert_eq!(
        count(&got, "session.heartbeat_ack"),
        30,
        "live delivery goes on"
    );
}

#[test]
fn session_close_ends_with_session_closed() {
    let mut h = duplex(Vec::new());
    h.send(json!({"type":"session.close"}));
    let got = h.drain(Duration::from_millis(100));
    let closed = got.last().expect("an event");
    assert_eq!(closed["type"], "session.closed");
    assert_eq!(closed["reason"], "client_close");
    assert_eq!(h.closed.as_deref(), Some("1000 session closed"));
    assert!(h.session.is_closed());
}

#[test]
fn idle_ttl_and_the_expiry_warning() {
    let mut h = harness(Setup {
        duplex: true,
        limits: Some(Limits {
            idle: Duration::from_secs(100),
            max_session: Duration::from_secs(90),
            expiry_warning: Duration::from_secs(60),
            ..Limits::default()
        }),
        ..Setup::default()
    });
    h.advance(Duration::from_secs(31));
    let expiring = last(&h.until("session.expiring"), "session.expiring").clone();
    assert_eq!(expiring["seconds_left"], 60);
    assert_eq!(expiring["session_id"], h.session_id().as_str());
    let mut h = harness(Setup {
        duplex: true,
        limits: Some(Limits {
            idle: Duration::from_secs(10),
            ..Limits::default()
        }),
        ..Setup::default()
    });
    h.advance(Duration::from_secs(11));
    let expired = last(&h.drain(Duration::from_millis(100)), "session.expired").clone();
    assert_eq!(expired["reason"], "idle_ttl_expired");
    assert!(expired["server_event_seq"].as_u64().is_some(), "journaled");
    assert!(h.session.is_closed());
}

#[test]
fn playback_ack_truncates_a_websocket_answer_to_what_the_client_played() {
    let mut h = duplex(once(3..53));
    let started = h.until("response.output_audio.delta");
    let item_id = last(&started, "response.output_item.added")["item"]["id"]
        .as_str()
        .expect("item")
        .to_string();
    h.advance(Duration::from_millis(300));
    h.send(json!({"type":"playback.ack","played_ms":120,"truncate":true}));
    let got = h.until("playback.acknowledged");
    let truncated = last(&got, "conversation.item.truncated");
    assert_eq!(truncated["item_id"], item_id.as_str());
    assert_eq!(truncated["audio_end_ms"], 120);
    let ack = &last(&got, "playback.acknowledged")["event"];
    assert_eq!(ack["played_ms"], 120);
    assert_eq!(ack["committed_ms"], 120);
    assert_eq!(ack["truncate"], true);
    assert_eq!(ack["item_id"], item_id.as_str());
    assert_eq!(
        last(&got, "response.done")["response"]["status"],
        "cancelled"
    );
}

#[test]
fn barge_in_cancels_the_answer_and_advances_the_epoch() {
    let mut h = duplex(once(3..53));
    h.until("response.output_audio.delta");
    h.send(json!({"type":"barge_in"}));
    let got = h.until("response.done");
    assert_eq!(
        last(&got, "response.done")["response"]["status"],
        "cancelled"
    );
    h.advance(STEP * 2);
    assert_eq!(h.requests(), vec![Request::Cancel]);
    let listen = last(&h.until("response.listen"), "response.listen").clone();
    assert_eq!(listen["epoch"], 1, "the epoch advanced");
}

#[test]
fn a_dropped_call_truncates_the_answer_to_what_the_caller_heard_and_the_session_waits() {
    let mut h = harness(Setup {
        speech: once(3..40),
        webrtc: Some(SinkLog::default()),
        duplex: true,
        ..Setup::default()
    });
    let speak = h.until("response.speak");
    let item_id = last(&speak, "response.speak")["item_id"]
        .as_str()
        .expect("item")
        .to_string();
    h.advance(Duration::from_millis(200));
    // 40 ms of the answer left on RTP, then the call ended.
    h.signals.played(&[(1, 960)], &[]);
    h.media();
    let t = token(&h.seen[0]);
    let last_seen = *seqs(&h.seen).last().expect("seq");
    h.signals.ended();
    h.media();
    assert_eq!(
        h.session.state(),
        Some(crate::session::SessionState::Detached)
    );
    // What happened after the drop is journaled: a resume replays it.
    let rx = h.resume(2, &t, last_seen);
    h.switch_to(rx);
    let got = h.drain(Duration::from_millis(100));
    assert_eq!(got[0]["type"], "session.resumed");
    assert_eq!(
        last(&got, "response.done")["response"]["status"],
        "cancelled"
    );
    let truncated = last(&got, "conversation.item.truncated");
    assert_eq!(truncated["item_id"], item_id.as_str());
    assert_eq!(truncated["audio_end_ms"], 40, "what played");
    assert!(!h.session.is_closed());
}

#[test]
fn a_hangup_signal_ends_an_opted_in_session_instead_of_detaching_it() {
    let mut h = duplex(once(3..8));
    h.until("response.speak");
    // The hangup travels with the media signals (never through the bounded inbox, where a
    // full queue would lose it), set before the engine reports the call's end.
    h.signals.hung_up();
    h.signals.ended();
    h.media();
    let got = h.drain(Duration::from_millis(50));
    let closed = last(&got, "session.closed");
    assert_eq!(closed["reason"], "hangup");
    assert!(h.session.is_closed(), "ended, not detached");
}

#[test]
fn an_opted_in_session_reports_the_servers_headroom_after_each_response() {
    let mut h = duplex(once(3..8));
    let got = h.until("rate_limits.updated");
    assert_eq!(got[got.len() - 2]["type"], "response.done");
    let rl = &got.last().expect("rate_limits")["rate_limits"][0];
    assert_eq!(
        (
            rl["name"].as_str(),
            rl["limit"].as_u64(),
            rl["remaining"].as_u64()
        ),
        (Some("sessions"), Some(356), Some(300))
    );
}
