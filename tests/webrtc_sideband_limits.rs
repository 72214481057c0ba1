//! Sidebands are bounded: at most 4 per call (the 5th gets 409), each counted in
//! `--max-sessions` beside the call's own session; and closing a sideband never ends or
//! hides its call, connected or not.

use crate::common;

use std::time::Duration;

use common::{handshake_status, offer_call, ready, Client};

#[tokio::test]
async fn four_sidebands_per_call_counted_as_sessions() {
    // The call's session holds one place, its four sidebands the others.
    let addr = common::server(&["--max-sessions", "5", "--call-connect-secs", "60"]).await;
    // A call whose ICE never completes.
    let call = offer_call(addr).await;
    let mut bands = Vec::new();
    for i in 0..4 {
        bands.push(
            Client::sideband(addr, &call)
                .await
                .unwrap_or_else(|e| panic!("sideband {i}: {e}")),
        );
    }
    let fifth = common::refused(Client::sideband(addr, &call).await);
    assert_eq!(handshake_status(&fifth), 409);
    // The call's session and its four sidebands fill --max-sessions: a plain session is
    // refused.
    let busy = common::refused(Client::connect_with(addr, &[]).await);
    assert_eq!(handshake_status(&busy), 503);
    // Closing them leaves the call as it was: still counted, still hung up by id.
    for b in bands.drain(..) {
        drop(b);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, v) = ready(addr).await;
    assert_eq!(v["calls"], 1, "{v}");
    assert_eq!(v["sessions"], 1, "{v}");
    // Places are free again: a sideband and a session both open.
    let _again = Client::sideband(addr, &call).await.expect("sideband again");
    let _session = Client::connect(addr).await;
    let r = duet_client::http::request(
        addr,
        "POST",
        &format!("/v1/realtime/calls/{call}/hangup"),
        &[],
        "",
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200, "{}", r.body);
}
