use super::*;

fn record(secret: &str, expires_at: u64) -> SecretRecord {
    let d = digest(secret);
    SecretRecord {
        id: credential_id(&d),
        digest: d,
        expires_at,
        session: None,
        session_json: None,
        demo: None,
    }
}

#[test]
fn the_store_finds_live_secrets_by_digest_only() {
    let store = LocalSecrets::new(10);
    assert!(store.insert(record("ek_a", 100), 50).is_ok());
    assert!(store.get(&digest("ek_a"), 99).is_some());
    assert!(
        store.get(&digest("ek_a"), 100).is_none(),
        "expired at expires_at"
    );
    assert!(store.get(&digest("ek_b"), 50).is_none());
    let now = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
        .block_on(lookup(&store, "ek_a"));
    assert_eq!(
        now.map(|r| r.is_none()),
        Ok(true),
        "lookup uses the wall clock: long expired"
    );
}

#[test]
fn a_full_store_drops_expired_secrets_first_and_then_refuses() {
    let store = LocalSecrets::new(2);
    assert!(store.insert(record("ek_1", 10), 0).is_ok());
    assert!(store.insert(record("ek_2", 1_000), 0).is_ok());
    assert!(
        store.insert(record("ek_3", 1_000), 20).is_ok(),
        "ek_1 expired and made room"
    );
    assert_eq!(
        store.insert(record("ek_4", 1_000), 20),
        Err(StoreFull::Secrets),
        "full of live secrets"
    );
}

#[test]
fn secrets_are_random_and_named_without_revealing_them() {
    let (a, da) = new_secret();
    let (b, _) = new_secret();
    assert_ne!(a, b);
    assert!(a.starts_with("ek_") && a.len() == 3 + 32, "{a}");
    let id = credential_id(&da);
    assert!(id.starts_with("cred_") && id.len() == 21, "{id}");
    assert!(!a.contains(&id[5..]));
    assert_eq!(id, credential_id(&digest(&a)), "the id is stable");
}

#[test]
fn a_secret_reaches_only_what_it_opened() {
    let r = Arc::new(record("ek_a", u64::MAX));
    let c = Credential::Secret(r.clone());
    assert!(c.reaches(Some(&r.id)));
    assert!(!c.reaches(Some("cred_other")));
    assert!(!c.reaches(None), "not what the server key opened");
    assert!(Credential::Server.reaches(Some(&r.id)));
    assert!(Credential::Server.reaches(None));
}

#[test]
fn demo_secrets_have_their_own_pool_and_a_share_per_address() {
    let store = LocalSecrets::with_caps(SecretCaps {
        secrets: 2,
        demo: 3,
        demo_per_ip: 2,
    });
    let demo = |s: &str, ip: [u8; 4]| SecretRecord {
        demo: Some(IpAddr::from(ip)),
        ..record(s, 1_000)
    };
    assert!(store.insert(demo("ek_d1", [10, 0, 0, 1]), 0).is_ok());
    assert!(store.insert(demo("ek_d2", [10, 0, 0, 1]), 0).is_ok());
    assert_eq!(
        store.insert(demo("ek_d3", [10, 0, 0, 1]), 0),
        Err(StoreFull::DemoPerIp)
    );
    assert!(store.insert(demo("ek_d4", [10, 0, 0, 2]), 0).is_ok());
    assert_eq!(
        store.insert(demo("ek_d5", [10, 0, 0, 3]), 0),
        Err(StoreFull::Demo),
        "the demo pool is full"
    );
    // The server key's secrets never compete with them.
    assert!(store.insert(record("ek_a1", 1_000), 0).is_ok());
    assert!(store.insert(record("ek_a2", 1_000), 0).is_ok());
    assert!(store.get(&digest("ek_d1"), 0).is_some());
    assert!(store.get(&digest("ek_a2"), 0).is_some());
    // Expired demo secrets give their address its share back.
    assert!(store.insert(demo("ek_d6", [10, 0, 0, 1]), 1_000).is_ok());
}
