use super::*;
use std::time::Duration;

#[test]
fn caps_and_release() {
    let a = Admissions::new(2, 1, 0);
    let s1 = a.admit(Kind::Session, None).unwrap();
    let _s2 = a.admit(Kind::Session, None).unwrap();
    let e = a.admit(Kind::Session, None).unwrap_err();
    assert_eq!((e.status().as_u16(), e.code.as_str()), (503, "server_busy"));
    let _c = a.admit(Kind::Call, None).unwrap();
    assert!(a.admit(Kind::Call, None).is_err());
    drop(s1);
    assert_eq!(a.sessions(), 1);
    assert!(a.admit(Kind::Session, None).is_ok());
}

#[test]
fn per_ip_cap_counts_sessions_and_calls() {
    let a = Admissions::new(10, 10, 2);
    let ip: IpAddr = "10.0.0.1".parse().unwrap();
    let s = a.admit(Kind::Session, Some(ip)).unwrap();
    let _c = a.admit(Kind::Call, Some(ip)).unwrap();
    let e = a.admit(Kind::Session, Some(ip)).unwrap_err();
    assert_eq!(e.status().as_u16(), 429);
    assert_eq!(a.sessions(), 1, "a refused admission gives its slot back");
    assert!(a
        .admit(Kind::Session, Some("10.0.0.2".parse().unwrap()))
        .is_ok());
    drop(s);
    assert!(a.admit(Kind::Session, Some(ip)).is_ok());
}

#[test]
fn sideband_slots() {
    let n = Arc::new(AtomicUsize::new(0));
    let slots: Vec<_> = (0..MAX_SIDEBANDS)
        .map(|_| SidebandSlot::take(&n).unwrap())
        .collect();
    assert_eq!(SidebandSlot::take(&n).unwrap_err().status().as_u16(), 409);
    drop(slots);
    assert_eq!(n.load(Ordering::Acquire), 0);
}

#[tokio::test]
async fn waiters_are_admitted_oldest_first_and_time_out_as_busy() {
    let a = Admissions::new(1, 1, 0);
    let held = a.admit(Kind::Session, None).unwrap();
    let wait = Duration::from_secs(5);
    let (a1, a2) = (a.clone(), a.clone());
    let first =
        tokio::spawn(async move { a1.admit_waiting(Kind::Session, None, None, wait).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    let second =
        tokio::spawn(async move { a2.admit_waiting(Kind::Session, None, None, wait).await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    drop(held);
    let got = first
        .await
        .unwrap()
        .expect("the oldest waiter gets the slot");
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!second.is_finished(), "the second still waits");
    drop(got);
    second.await.unwrap().expect("then the second");
    let _hold = a.admit(Kind::Session, None).unwrap();
    let e = a
        .admit_waiting(Kind::Session, None, None, Duration::from_millis(50))
        .await
        .unwrap_err();
    assert_eq!((e.status().as_u16(), e.code.as_str()), (503, "server_busy"));
}

#[test]
fn per_key_quota_counts_each_credential() {
    let a = Admissions::with_caps(Caps {
        sessions: 10,
        calls: 10,
        per_ip: 0,
        per_key: 1,
    });
    let s = a.admit_as(Kind::Session, None, Some("cred_a")).unwrap();
    let e = a.admit_as(Kind::Call, None, Some("cred_a")).unwrap_err();
    assert_eq!(
        (e.status().as_u16(), e.code.as_str()),
        (429, "too_many_sessions_for_key")
    );
    assert!(a.admit_as(Kind::Session, None, Some("cred_b")).is_ok());
    assert!(
        a.admit_as(Kind::Session, None, None).is_ok(),
        "the server key has its own"
    );
    drop(s);
    let _call = a.admit_as(Kind::Call, None, Some("cred_a")).unwrap();
    let _session = a.admit_as(Kind::Session, None, None).unwrap();
    assert_eq!(
        a.headroom(),
        (10, 9),
        "the headroom is in sessions (a call's session holds one)"
    );
}

#[test]
fn retry_after_follows_the_turnover() {
    let a = Admissions::new(100, 100, 0);
    assert_eq!(
        a.retry_after(),
        crate::error::RETRY_AFTER_SECS,
        "no data yet"
    );
    let slots: Vec<_> = (0..5)
        .map(|_| a.admit(Kind::Session, None).unwrap())
        .collect();
    drop(slots);
    assert_eq!(a.retry_after(), 1, "releases close together: retry soon");
}

#[test]
fn a_refusal_is_not_turnover() {
    let a = Admissions::with_caps(Caps {
        sessions: 10,
        calls: 10,
        per_ip: 1,
        per_key: 1,
    });
    let ip: IpAddr = "10.0.0.1".parse().unwrap();
    let _held = a.admit_as(Kind::Session, Some(ip), Some("cred_a")).unwrap();
    for _ in 0..5 {
        let e = a
            .admit_as(Kind::Session, Some(ip), Some("cred_b"))
            .unwrap_err();
        assert_eq!(e.code, "too_many_sessions_from_ip");
        let e = a.admit_as(Kind::Session, None, Some("cred_a")).unwrap_err();
        assert_eq!(e.code, "too_many_sessions_for_key");
    }
    assert_eq!(a.sessions(), 1, "every refusal undid its count");
    assert_eq!(
        a.retry_after(),
        crate::error::RETRY_AFTER_SECS,
        "ten refusals are no turnover: Retry-After keeps its default"
    );
    assert!(
        a.releases.lock().unwrap().is_empty(),
        "no release was recorded"
    );
}
