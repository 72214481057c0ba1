pub mod channel;
pub mod connection;
pub mod sip_addr;
#[cfg(feature = "platform-tokio")]
pub mod stream;
#[cfg(feature = "platform-tokio")]
pub mod tcp;
#[cfg(feature = "platform-tokio")]
pub mod tcp_listener;
#[cfg(all(feature = "platform-tokio", feature = "rustls"))]
pub mod tls;
pub mod tls_platform;
pub mod transport_layer;
pub mod udp;
#[cfg(all(feature = "platform-tokio", feature = "websocket"))]
pub mod websocket;
pub use connection::SipConnection;
pub use connection::TransportEvent;
pub use sip_addr::SipAddr;
#[cfg(feature = "platform-tokio")]
pub use tcp_listener::TcpListenerConnection;
#[cfg(all(feature = "platform-tokio", feature = "rustls"))]
pub use tls::{TlsConfig, TlsListenerConnection};
pub use tls_platform::PlatformTlsConnection;
pub use transport_layer::TransportLayer;
pub use transport_layer::TransportWhitelist;
#[cfg(all(feature = "platform-tokio", feature = "websocket"))]
pub use websocket::WebSocketListenerConnection;

#[cfg(all(test, feature = "platform-tokio"))]
pub mod tests;
