//! The session's shell: one task per session with one `select!` over its channels (the
//! transport's inbox, the model's events, the media engine's signals, the server's
//! lifecycle) and one timer, [`Session::next_deadline`]. It is the only part of the session
//! that reads a clock.

use std::time::Instant;

use tokio::sync::{mpsc, watch};

use super::{Inbound, Lifecycle, MediaSignals, ModelEvent, Session};

/// The time, for the session (tokio's clock, so a paused runtime pauses it too).
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Runs `session` until it closes: its transport closes, it expires, idles or is drained,
/// or the model fails.
pub async fn run(
    mut session: Session,
    mut inbox: mpsc::Receiver<Inbound>,
    mut model_rx: mpsc::Receiver<ModelEvent>,
    mut lifecycle: watch::Receiver<Lifecycle>,
) {
    let signals = session.signals();
    session.start(now());
    let mut lifecycle_open = true;
    if let Lifecycle::Draining { deadline } = *lifecycle.borrow_and_update() {
        session.drain(deadline, now());
    }
    while !session.is_closed() {
        let wake = tokio::time::Instant::from_std(session.next_deadline());
        tokio::select! {
            biased;
            () = media_signal(signals.as_deref()) => {
                if let Some(s) = &signals {
                    session.on_media(s.take(), now());
                }
            }
            msg = inbox.recv() => match msg {
                Some(Inbound { input, hold }) => {
                    session.handle(input, now());
                    drop(hold);
                }
                None => break,
            },
            ev = model_rx.recv() => match ev {
                Some(ev) => session.on_model(ev, now()),
                None => session.model_gone(now()),
            },
            changed = lifecycle.changed(), if lifecycle_open => match changed {
                Ok(()) => {
                    if let Lifecycle::Draining { deadline } = *lifecycle.borrow_and_update() {
                        session.drain(deadline, now());
                    }
                }
                Err(_) => lifecycle_open = false,
            },
            () = tokio::time::sleep_until(wake) => session.on_timeout(now()),
        }
    }
    tracing::debug!(session = %session.id(), "session ended");
}

/// Resolves when the media engine reported something (never on WebSocket).
async fn media_signal(signals: Option<&MediaSignals>) {
    match signals {
        Some(s) => s.changed().await,
        None => std::future::pending().await,
    }
}
