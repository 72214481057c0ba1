//! Test certificates and the TLS front of scripted upstreams: `duet_client::tls`.

pub use duet_client::tls::{certificates, certificates_of, tls_front};
