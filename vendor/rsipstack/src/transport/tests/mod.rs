pub mod test_listener_api;
pub mod test_sipaddr;
pub mod test_stream_encoding;
pub mod test_stream_idle_timeout;
pub mod test_tls_reload;
pub mod test_udp;
pub mod test_via_received;
