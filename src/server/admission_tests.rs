use super::*;

#[test]
fn caps_and_release() {
    let a = Admissions::new(2, 1, 0);
    let s1 = a.admit(Kind::Session, None).unwrap();
    let _s2 = a.admit(Kind::Session, None).unwrap();
    let e = a.admit(Kind::Session, None).unwrap_err();
    assert_eq!((e.status.as_u16(), e.code.as_str()), (503, "server_busy"));
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
    assert_eq!(e.status.as_u16(), 429);
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
    assert_eq!(SidebandSlot::take(&n).unwrap_err().status.as_u16(), 409);
    drop(slots);
    assert_eq!(n.load(Ordering::Acquire), 0);
}
