use super::*;
use crate::protocol::ServerEventBody;

fn event(n: usize) -> Rendered {
    Rendered {
        json: Arc::new("x".repeat(n)),
        kind: "test",
        cause: None,
    }
}

fn take(rx: &mut EventReceiver) -> Delivery {
    match rx.try_recv() {
        Received::Delivery(d) => d,
        other => panic!("expected a delivery, got {other:?}"),
    }
}

#[test]
fn bytes_stay_counted_until_the_delivery_is_dropped() {
    let (tx, mut rx) = queue(100);
    tx.send(event(60)).unwrap();
    assert_eq!(tx.send(event(50)), Err(QueueError::Full));
    let d = take(&mut rx);
    assert_eq!(tx.queued_bytes(), 60, "still being written");
    assert_eq!(tx.send(event(50)), Err(QueueError::Full));
    drop(d);
    assert_eq!(tx.queued_bytes(), 0);
    tx.send(event(50)).unwrap();
    tx.send(event(50)).unwrap();
    assert_eq!(tx.send(event(1)), Err(QueueError::Full));
}

#[test]
fn close_is_ordered_and_abort_overtakes() {
    let (tx, mut rx) = queue(1000);
    tx.send(event(10)).unwrap();
    tx.close(1000, "bye");
    assert!(matches!(take(&mut rx), Delivery::Event(..)));
    assert!(matches!(take(&mut rx), Delivery::Close { code: 1000, .. }));
    tx.send(event(10)).unwrap();
    let err = ServerEvent::new(ServerEventBody::InputAudioBufferCleared {});
    tx.abort(Abort {
        code: 1008,
        reason: "full".into(),
        error: Some(Rendered::new(&err, None)),
    });
    assert!(matches!(
        rx.try_recv(),
        Received::Abort(Abort { code: 1008, .. })
    ));
    assert_eq!(tx.queued_bytes(), 0);
    assert_eq!(tx.send(event(1)), Err(QueueError::Gone));
    assert!(matches!(rx.try_recv(), Received::Closed));
}

#[test]
fn either_side_going_away_is_seen() {
    let (tx, rx) = queue(10);
    drop(rx);
    assert!(tx.is_gone());
    assert_eq!(tx.send(event(1)), Err(QueueError::Gone));
    let (tx, mut rx) = queue(10);
    tx.send(event(1)).unwrap();
    drop(tx);
    assert!(matches!(take(&mut rx), Delivery::Event(..)));
    assert!(matches!(rx.try_recv(), Received::Closed));
}

#[tokio::test]
async fn recv_wakes_on_send_and_on_abort() {
    let (tx, mut rx) = queue(100);
    let h = tokio::spawn(async move {
        let first = rx.recv().await;
        let second = rx.recv().await;
        (first.map(|r| r.is_ok()), second.map(|r| r.is_err()))
    });
    tokio::task::yield_now().await;
    tx.send(event(5)).unwrap();
    tokio::task::yield_now().await;
    tx.abort(Abort {
        code: 1001,
        reason: "drain".into(),
        error: None,
    });
    assert_eq!(h.await.unwrap(), (Some(true), Some(true)));
}
