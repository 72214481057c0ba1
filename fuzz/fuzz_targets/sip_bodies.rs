//! Fuzzes the bodies a phone call's dialog carries, through the decisions that read them:
//! SIP INFO `application/dtmf-relay` (the key), NOTIFY `message/sipfrag` (the transfer's
//! status), an INVITE's offer and an ACK's answer. They must never panic; a key is a DTMF
//! key, an INFO is answered `200` with its key or `400` without; a NOTIFY ends the call
//! exactly when its fragment's status is 2xx.
#![no_main]

use duet_signaling::sip_call::{
    ack_answer, dtmf_relay_key, in_dialog, read_offer, sipfrag_status, transfer_done, Method,
    Status, Then,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let key = dtmf_relay_key(data);
    if let Some(k) = key {
        assert!("0123456789*#ABCD".contains(k), "{k:?}");
    }
    let info = in_dialog(Method::Info, Some("application/dtmf-relay"), data).expect("answered");
    match key {
        Some(k) => assert_eq!((info.status, info.then), (Status::OK, Then::Key(k))),
        None => assert_eq!((info.status, info.then), (Status::BAD_REQUEST, Then::Nothing)),
    }

    let done = transfer_done(data);
    assert_eq!(done, sipfrag_status(data).is_some_and(|s| s.is_success()));
    let notify = in_dialog(Method::Notify, Some("message/sipfrag"), data).expect("answered");
    assert_eq!(notify.status, Status::OK);
    assert_eq!(matches!(notify.then, Then::End(_)), done);

    if let Err(refused) = read_offer(data) {
        let status = refused.status.expect("a refusal has a status");
        assert!(status == Status::BAD_REQUEST || status == Status::NOT_ACCEPTABLE_HERE);
    }
    let _ = ack_answer(data);
});
