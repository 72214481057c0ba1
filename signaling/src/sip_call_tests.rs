use super::*;

const DECISION: Duration = Duration::from_secs(10);

/// A call that started ringing at `t0`.
fn ringing() -> (Ringing, Instant) {
    let t0 = Instant::now();
    (Ringing::start(t0, DECISION).0, t0)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn ended(
    status: Option<Status>,
    metric: Option<&'static str>,
    reply: Option<ControlReply>,
) -> Outcome {
    Outcome {
        next: Next::End,
        status,
        metric,
        reply,
    }
}

fn waiting() -> Outcome {
    Outcome {
        next: Next::Ring,
        status: None,
        metric: None,
        reply: None,
    }
}

#[test]
fn a_ringing_call_answers_180_at_once_and_then_every_minute() {
    let t0 = Instant::now();
    let (mut r, first) = Ringing::start(t0, secs(600));
    assert_eq!(first.status, Some(Status::RINGING));
    assert_eq!(first.next, Next::Ring);
    assert_eq!(r.next_timeout(), t0 + RING_EVERY);
    // Woken early: nothing to send.
    assert_eq!(r.on(t0 + secs(30), RingEvent::Timeout), waiting());
    let again = r.on(t0 + RING_EVERY, RingEvent::Timeout);
    assert_eq!(
        (again.next, again.status),
        (Next::Ring, Some(Status::RINGING))
    );
    assert_eq!(r.next_timeout(), t0 + 2 * RING_EVERY);
    // Late by more than a period: one 180, the next a period on (no burst).
    let late = t0 + 5 * RING_EVERY;
    assert_eq!(r.on(late, RingEvent::Timeout).status, Some(Status::RINGING));
    assert_eq!(r.next_timeout(), late + RING_EVERY);
}

#[test]
fn no_decision_in_time_is_480_timeout() {
    let (mut r, t0) = ringing();
    assert_eq!(
        r.next_timeout(),
        t0 + DECISION,
        "the deadline comes before the next 180"
    );
    let out = r.on(t0 + DECISION, RingEvent::Timeout);
    let want = ended(Some(Status::TEMPORARILY_UNAVAILABLE), Some("timeout"), None);
    assert_eq!(out, want);
    // Over: later events change nothing.
    assert_eq!(r.on(t0 + DECISION, RingEvent::Hangup).next, Next::End);
    assert_eq!(r.on(t0 + DECISION, RingEvent::Hangup).status, None);
}

#[test]
fn the_webhooks_fate() {
    let (mut r, t0) = ringing();
    assert!(r.awaits_webhook());
    assert_eq!(
        r.on(t0, RingEvent::Webhook(WebhookResult::Delivered)),
        waiting()
    );
    assert!(!r.awaits_webhook());

    let (mut r, t0) = ringing();
    let out = r.on(t0, RingEvent::Webhook(WebhookResult::Failed));
    assert_eq!(out, ended(Some(Status(480)), Some("webhook_failed"), None));
    assert!(!r.awaits_webhook());

    let (mut r, t0) = ringing();
    let out = r.on(t0, RingEvent::Webhook(WebhookResult::Busy));
    assert_eq!(out, ended(Some(Status(503)), Some("webhook_busy"), None));
}

#[test]
fn a_cancel_ends_the_call_with_nothing_sent() {
    let (mut r, t0) = ringing();
    let out = r.on(t0, RingEvent::Cancelled);
    assert_eq!(out, ended(None, Some("cancelled"), None));
}

#[test]
fn the_server_stopping_ends_the_call_silently() {
    let (mut r, t0) = ringing();
    assert_eq!(r.on(t0, RingEvent::ControlsClosed), ended(None, None, None));
}

#[test]
fn accept_opens_the_session_then_goes_live() {
    let (mut r, t0) = ringing();
    let open = r.on(t0, RingEvent::Accept);
    assert_eq!(
        open,
        Outcome {
            next: Next::Open,
            ..waiting()
        }
    );
    // A second accept while the session opens changes nothing.
    assert_eq!(r.on(t0, RingEvent::Accept).next, Next::Open);
    let live = r.on(t0, RingEvent::Opened);
    let want = Outcome {
        next: Next::Live,
        status: None,
        metric: Some("accepted"),
        reply: Some(ControlReply::Done),
    };
    assert_eq!(live, want);
    // Live: the ringing core is done.
    assert_eq!(r.on(t0 + DECISION, RingEvent::Timeout).next, Next::Live);
}

#[test]
fn an_accept_without_a_session_is_486_busy() {
    let (mut r, t0) = ringing();
    r.on(t0, RingEvent::Accept);
    let out = r.on(t0, RingEvent::OpenFailed);
    assert_eq!(
        out,
        ended(
            Some(Status::BUSY_HERE),
            Some("busy"),
            Some(ControlReply::Failed)
        )
    );
}

#[test]
fn an_open_nobody_asked_for_changes_nothing() {
    let (mut r, t0) = ringing();
    assert_eq!(r.on(t0, RingEvent::Opened), waiting());
    assert_eq!(r.on(t0, RingEvent::OpenFailed), waiting());
}

#[test]
fn reject_sends_the_apps_status_and_hangup_603() {
    let (mut r, t0) = ringing();
    let out = r.on(t0, RingEvent::Reject(486));
    assert_eq!(
        out,
        ended(
            Some(Status(486)),
            Some("rejected"),
            Some(ControlReply::Done)
        )
    );

    let (mut r, t0) = ringing();
    let out = r.on(t0, RingEvent::Hangup);
    assert_eq!(
        out,
        ended(
            Some(Status::DECLINE),
            Some("rejected"),
            Some(ControlReply::Done)
        )
    );
}

#[test]
fn refer_while_ringing_is_refused_and_the_call_rings_on() {
    let (mut r, t0) = ringing();
    let out = r.on(t0, RingEvent::Refer);
    let reply = ControlReply::NotAccepted("accept the call before transferring it");
    assert_eq!(
        out,
        Outcome {
            reply: Some(reply),
            ..waiting()
        }
    );
}

#[test]
fn offers_are_read_or_refused_with_their_status() {
    assert_eq!(read_offer(b""), Ok(None));
    assert_eq!(
        read_offer(b" \r\n\t"),
        Ok(None),
        "whitespace only: a late offer"
    );
    let refused = |body: &[u8]| read_offer(body).err().map(|o| (o.status, o.metric, o.next));
    let bad = Some((Some(Status::BAD_REQUEST), Some("not_acceptable"), Next::End));
    assert_eq!(refused(&[0xff, 0xfe]), bad, "not UTF-8");
    assert_eq!(refused(b"hello"), bad, "not SDP");
    let video = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
                 m=video 5000 RTP/AVP 96\r\na=rtpmap:96 VP8/90000\r\n";
    let not_here = Some((
        Some(Status::NOT_ACCEPTABLE_HERE),
        Some("not_acceptable"),
        Next::End,
    ));
    assert_eq!(refused(video.as_bytes()), not_here, "nothing to answer");
    let pcmu = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
                m=audio 5000 RTP/AVP 0\r\n";
    let offer = read_offer(pcmu.as_bytes()).unwrap().unwrap();
    assert_eq!(offer.port, 5000);
}

#[test]
fn the_webhook_gets_every_header_but_the_routing_ones() {
    let h = |n: &str, v: &str| (n.to_string(), v.to_string());
    let headers = vec![
        h("Via", "SIP/2.0/UDP 10.0.0.1"),
        h("From", "<sip:a@b>;tag=1"),
        h("ROUTE", "<sip:p>"),
        h("record-route", "<sip:p>"),
        h("Max-Forwards", "70"),
        h("To", "<sip:duet@c>"),
        h("Content-Length", "0"),
        h("X-Custom", "1"),
    ];
    let kept = webhook_headers(headers);
    let names: Vec<_> = kept.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["From", "To", "X-Custom"]);
    let many = (0..100).map(|i| h("X-N", &i.to_string()));
    let kept = webhook_headers(many);
    assert_eq!(kept.len(), MAX_WEBHOOK_HEADERS);
    assert_eq!(kept[63].1, "63", "the first ones, in order");
}

#[test]
fn requests_outside_a_dialog() {
    let options = out_of_dialog(Method::Options);
    assert_eq!(
        (options.status, options.allow, options.accept_sdp),
        (Status::OK, true, true)
    );
    assert_eq!(
        out_of_dialog(Method::Invite).status,
        Status::SERVICE_UNAVAILABLE
    );
    for m in [
        Method::Bye,
        Method::Info,
        Method::Update,
        Method::Notify,
        Method::Refer,
    ] {
        let a = out_of_dialog(m);
        assert_eq!((a.status, a.allow), (Status::NO_SUCH_CALL, false), "{m:?}");
    }
    for m in [
        Method::Message,
        Method::Publish,
        Method::Other,
        Method::Cancel,
    ] {
        let a = out_of_dialog(m);
        assert_eq!(
            (a.status, a.allow, a.accept_sdp),
            (Status(405), true, false),
            "{m:?}"
        );
    }
}

#[test]
fn info_hands_a_dtmf_relay_key_on() {
    let dtmf = Some("application/dtmf-relay");
    let reply = in_dialog(Method::Info, dtmf, b"Signal=5\r\nDuration=160\r\n").unwrap();
    assert_eq!(
        (reply.status, reply.sdp, reply.then),
        (Status::OK, false, Then::Key('5'))
    );
    let spaced = in_dialog(Method::Info, Some(" Application/DTMF-Relay "), b"Signal=#");
    assert_eq!(spaced.unwrap().then, Then::Key('#'));
    let bad = in_dialog(Method::Info, dtmf, b"Duration=160").unwrap();
    assert_eq!((bad.status, bad.then), (Status::BAD_REQUEST, Then::Nothing));
    // Any other INFO is taken and ignored.
    for ct in [None, Some("application/json"), Some("text/plain")] {
        let other = in_dialog(Method::Info, ct, b"Signal=5").unwrap();
        assert_eq!(
            (other.status, other.then),
            (Status::OK, Then::Nothing),
            "{ct:?}"
        );
    }
}

#[test]
fn a_session_refresh_is_answered_with_the_same_media() {
    for m in [Method::Invite, Method::Update] {
        let offer = in_dialog(m, Some("application/sdp"), b"v=0\r\n").unwrap();
        assert_eq!(
            (offer.status, offer.sdp, offer.then),
            (Status::OK, true, Then::Nothing)
        );
        let bare = in_dialog(m, None, b"").unwrap();
        assert_eq!(
            (bare.status, bare.sdp),
            (Status::OK, false),
            "no offer: no SDP"
        );
    }
}

#[test]
fn a_notify_of_a_done_transfer_ends_the_call() {
    let frag = Some("message/sipfrag");
    let trying = in_dialog(Method::Notify, frag, b"SIP/2.0 100 Trying\r\n").unwrap();
    assert_eq!((trying.status, trying.then), (Status::OK, Then::Nothing));
    let done = in_dialog(Method::Notify, frag, b"SIP/2.0 200 OK\r\n").unwrap();
    let transferred = Ending {
        reason: "transferred",
        bye: true,
    };
    assert_eq!(
        (done.status, done.then),
        (Status::OK, Then::End(transferred))
    );
    let failed = in_dialog(Method::Notify, frag, b"SIP/2.0 486 Busy Here").unwrap();
    assert_eq!(failed.then, Then::Nothing);
}

#[test]
fn other_requests_in_a_dialog() {
    let status = |m| in_dialog(m, None, b"").map(|r| (r.status, r.sdp, r.then));
    assert_eq!(
        status(Method::Refer),
        Some((Status::DECLINE, false, Then::Nothing))
    );
    assert_eq!(
        status(Method::Options),
        Some((Status::OK, false, Then::Nothing))
    );
    assert_eq!(
        status(Method::Message),
        Some((Status::OK, false, Then::Nothing))
    );
    let publish = Some((Status::METHOD_NOT_ALLOWED, false, Then::Nothing));
    assert_eq!(status(Method::Publish), publish);
    for m in [Method::Ack, Method::Bye, Method::Cancel, Method::Other] {
        assert_eq!(status(m), None, "{m:?}: the stack's business");
    }
}

#[test]
fn controls_of_a_live_call() {
    let hangup = live_control(LiveControl::Hangup);
    assert_eq!(
        hangup,
        (Some(ControlReply::Done), Some(Ending::ours("hangup")))
    );
    assert_eq!(live_control(LiveControl::Refer), (None, None));
    let accepted = ControlReply::AlreadyAccepted("the call was accepted already");
    assert_eq!(live_control(LiveControl::Accept), (Some(accepted), None));
    assert_eq!(live_control(LiveControl::Reject), (Some(accepted), None));
    let stopped = live_control(LiveControl::Closed);
    assert_eq!(stopped, (None, Some(Ending::ours("server stopped"))));
    assert!(refer_taken(Status(202)) && refer_taken(Status::OK));
    assert!(!refer_taken(Status(100)) && !refer_taken(Status::DECLINE));
}

#[test]
fn how_a_dialog_ends() {
    let end = |e| {
        let ending = dialog_ended(e);
        assert!(!ending.bye, "the dialog is over: no BYE");
        ending.reason
    };
    assert_eq!(end(DialogEnd::CallerBye), "caller hung up");
    assert_eq!(end(DialogEnd::OurBye), "hung up");
    assert_eq!(end(DialogEnd::NoAck), "no ACK");
    assert_eq!(end(DialogEnd::Other), "dialog ended");
}

#[test]
fn a_late_offers_answer_comes_in_the_ack() {
    let answer = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
                  m=audio 6000 RTP/AVP 8\r\n";
    let got = ack_answer(answer.as_bytes()).unwrap();
    assert_eq!(got.port, 6000);
    let none = Err(Ending::ours("no answer in the ACK"));
    assert_eq!(ack_answer(b"").map(|o| o.port), none);
    assert_eq!(ack_answer(&[0xff]).map(|o| o.port), none);
}

#[test]
fn dtmf_relay_bodies_give_their_key() {
    assert_eq!(dtmf_relay_key(b"Signal=5\r\nDuration=160\r\n"), Some('5'));
    assert_eq!(dtmf_relay_key(b"Signal= #\r\n"), Some('#'));
    assert_eq!(dtmf_relay_key(b"signal=a"), Some('A'));
    assert_eq!(dtmf_relay_key(b"Signal=10"), Some('*'));
    assert_eq!(dtmf_relay_key(b"Signal=11"), Some('#'));
    assert_eq!(dtmf_relay_key(b"Signal=E"), None);
    assert_eq!(dtmf_relay_key(b"Signal=55"), None);
    assert_eq!(dtmf_relay_key(b"Duration=160"), None);
    assert_eq!(dtmf_relay_key(&[0xff, 0xfe]), None);
}

#[test]
fn sipfrag_bodies_give_their_status() {
    assert_eq!(sipfrag_status(b"SIP/2.0 200 OK\r\n"), Some(Status::OK));
    assert_eq!(sipfrag_status(b"SIP/2.0 100 Trying"), Some(Status(100)));
    assert_eq!(sipfrag_status(b"SIP/2.0 OK"), None);
    assert_eq!(sipfrag_status(b""), None);
    assert!(transfer_done(b"SIP/2.0 202 Accepted\r\n"));
    assert!(!transfer_done(b"SIP/2.0 180 Ringing\r\n"));
    assert!(!transfer_done(b"SIP/2.0 300 Multiple Choices\r\n"));
    assert!(
        transfer_done(&[0xff, b' ', b'2', b'0', b'0']),
        "read lossily"
    );
}

#[test]
fn statuses() {
    assert!(Status::OK.is_success() && !Status::RINGING.is_success());
    assert!(Status::RINGING.is_provisional() && !Status::DECLINE.is_provisional());
    assert_eq!(Status::NO_SUCH_CALL.code(), 481);
    assert_eq!(Status::REQUEST_PENDING.code(), 491);
    assert_eq!(Status::FORBIDDEN.code(), 403);
    assert!(ALLOW.starts_with("INVITE, ACK, CANCEL, BYE"));
}
