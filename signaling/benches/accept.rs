//! What answering an offer costs: `cargo bench -p duet-signaling`.
//!
//! `call_accept` is `Call::accept` on an offer as a browser sends it (SDP parse, a str0m
//! `Rtc` with its DTLS instance, the answer). `dtls_instance_stock` / `_cached` is the DTLS
//! instance alone from str0m's stock provider (a dimpl configuration built, and the crypto
//! backend validated, per call) and from Duet's (built once per process).

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use duet_signaling::{check_offer, testutil, AnswerConfig, Call};
use str0m::crypto::dtls::DtlsVersion;

fn accept(c: &mut Criterion) {
    let cfg = AnswerConfig::new(vec!["127.0.0.1:6000".parse().expect("address")]).expect("cfg");
    let now = Instant::now();
    let offer = testutil::offer(now).2;
    let summary = check_offer(&offer).expect("offer");
    c.bench_function("call_accept", |b| {
        b.iter(|| black_box(Call::accept(&offer, summary, &cfg, now).expect("answer")))
    });
}

fn dtls(c: &mut Criterion) {
    for (name, p) in [
        ("dtls_instance_stock", str0m::crypto::from_feature_flags()),
        ("dtls_instance_cached", duet_signaling::dtls::provider()),
    ] {
        let cert = p.dtls_provider.generate_certificate().expect("certificate");
        c.bench_function(name, |b| {
            b.iter(|| {
                black_box(
                    p.dtls_provider
                        .new_dtls(&cert, Instant::now(), DtlsVersion::Auto, Some(1150))
                        .expect("dtls"),
                )
            })
        });
    }
}

criterion_group!(benches, accept, dtls);
criterion_main!(benches);
