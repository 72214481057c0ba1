//! The HTTP accept loop: hyper with a timer, so that no connection is held by a client that
//! does nothing. A connection's first request head must arrive within `head_timeout` of the
//! accept (slow-header clients), a keep-alive connection waiting for its next request closes
//! after `idle_timeout` (hyper's header-read timer, which also bounds later heads), and at most
//! `max_connections` are open at once (an upgraded WebSocket keeps its connection's place).
//! Beyond the cap a connection gets a bare 503 and is closed, so `/health` keeps answering.
//! A request's body must arrive within `body_timeout` of its head, whatever its framing
//! (`Content-Length` or chunked): a read past that fails with [`BodyTimeout`], which the
//! handlers answer with `408 request_timeout`, and the connection closes. With `--tls-cert`
//! every connection is TLS (see `tls.rs`).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tower::ServiceExt;

/// Connection-level limits.
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    /// Open connections, upgraded WebSockets included.
    pub max_connections: usize,
    /// The first request head must be complete this long after the accept.
    pub head_timeout: Duration,
    /// An idle keep-alive connection (or a later, slow head) is closed after this long.
    pub idle_timeout: Duration,
    /// A request's whole body must arrive this long after its head.
    pub body_timeout: Duration,
}

/// The answer to a connection over the cap (written without reading the request).
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\nContent-Length: 105\r\nConnection: close\r\n\r\n{\"error\":{\"message\":\"too many open connections\",\"type\":\"server_error\",\"code\":\"server_busy\",\"param\":null}}";

/// Serves `router` on `listener` (over TLS with `tls`) until `stop` resolves.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    tls: Option<super::tls::TlsConfig>,
    stop: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and friends: back off a little instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        match slots.clone().try_acquire_owned() {
            Ok(permit) => {
                let tls = tls.as_ref().map(super::tls::TlsConfig::acceptor);
                tokio::spawn(connection(
                    stream,
                    peer,
                    permit,
                    router.clone(),
                    limits,
                    tls,
                ));
            }
            Err(_) => {
                crate::metrics::METRICS.error("connection_limit");
                let _ = stream.try_write(BUSY);
            }
        }
    }
}

/// One accepted connection: over TLS when `tls` is given (the handshake, like the first
/// request head, must be done within `head_timeout`; plain HTTP gets `400 tls_required`).
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    router: Router,
    limits: HttpLimits,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    let Some(acceptor) = tls else {
        return http(stream, peer, permit, router, limits).await;
    };
    let mut first = [0u8; 1];
    match tokio::time::timeout(limits.head_timeout, stream.peek(&mut first)).await {
        Ok(Ok(1)) if first[0] == super::tls::HANDSHAKE => {}
        Ok(Ok(1)) => return refuse_plain_http(stream, limits.head_timeout).await,
        _ => return,
    }
    match tokio::time::timeout(limits.head_timeout, acceptor.accept(stream)).await {
        Ok(Ok(tls)) => http(tls, peer, permit, router, limits).await,
        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "tls handshake failed"),
        Err(_) => tracing::debug!(%peer, "no tls handshake within the timeout; connection closed"),
    }
}

/// Answers plain HTTP on the HTTPS port with `400 tls_required` and closes. What the
/// client sent is read and dropped meanwhile (at most `wait`), so that closing does not
/// reset the connection before the client has read the answer.
async fn refuse_plain_http(mut stream: TcpStream, wait: Duration) {
    crate::metrics::METRICS.error(crate::error::Code::TlsRequired.as_str());
    let mut sink = [0u8; 4096];
    let _ = stream.try_read(&mut sink);
    let answer = async {
        stream.write_all(super::tls::PLAIN_HTTP).await?;
        stream.shutdown().await?;
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), std::io::Error>(())
    };
    let _ = tokio::time::timeout(wait.min(Duration::from_secs(2)), answer).await;
}

/// Serves HTTP on `stream` (plain TCP or TLS) until the client or a timeout ends it.
async fn http<S>(
    stream: S,
    peer: SocketAddr,
    permit: OwnedSemaphorePermit,
    router: Router,
    limits: HttpLimits,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = TokioIo::new(Counted {
        stream,
        _permit: permit,
    });
    let first_head = Arc::new(AtomicBool::new(false));
    let seen = first_head.clone();
    let service = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
        seen.store(true, Ordering::Release);
        let mut req =
            req.map(|body| axum::body::Body::new(DeadlineBody::new(body, limits.body_timeout)));
        req.extensions_mut().insert(ConnectInfo(peer));
        router.clone().oneshot(req)
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.idle_timeout)
        .keep_alive(true)
        .serve_connection(io, service)
        .with_upgrades();
    tokio::select! {
        r = conn => {
            if let Err(e) = r {
                tracing::debug!(%peer, error = %e, "http connection ended");
            }
        }
        () = head_deadline(&first_head, limits.head_timeout) => {
            tracing::debug!(%peer, "no request head within the timeout; connection closed");
        }
    }
}

/// Resolves when `timeout` passed without a first request head; never once one came.
async fn head_deadline(first_head: &AtomicBool, timeout: Duration) {
    tokio::time::sleep(timeout).await;
    if first_head.load(Ordering::Acquire) {
        std::future::pending::<()>().await;
    }
}

/// A request body read past its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyTimeout;

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for BodyTimeout {}

impl BodyTimeout {
    /// Whether `e` (or what caused it) is a body deadline.
    pub fn caused(e: &(dyn std::error::Error + 'static)) -> bool {
        let mut next = Some(e);
        while let Some(e) = next {
            if e.is::<BodyTimeout>() {
                return true;
            }
            next = e.source();
        }
        false
    }
}

/// A request body that fails with [`BodyTimeout`] once its deadline (set when the head
/// arrived) passes; the timer is armed only if a read has to wait.
struct DeadlineBody {
    inner: Incoming,
    deadline: tokio::time::Instant,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl DeadlineBody {
    fn new(inner: Incoming, timeout: Duration) -> Self {
        Self {
            inner,
            deadline: tokio::time::Instant::now() + timeout,
            sleep: None,
        }
    }
}

impl http_body::Body for DeadlineBody {
    type Data = bytes::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let deadline = self.deadline;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// A connection's stream that holds its place among the open connections while it lives.
struct Counted<S> {
    stream: S,
    _permit: OwnedSemaphorePermit,
}

impl<S: AsyncRead + Unpin> AsyncRead for Counted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Counted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The error of a request body that could not be read (here, beside the body deadline it
/// recognises).
impl crate::error::ApiError {
    /// A request body that could not be read: past its deadline (`408 request_timeout`)
    /// or over `limit` bytes (`413 request_too_large`, naming `what`).
    pub fn body(e: &axum::Error, limit: usize, what: &str) -> Self {
        if BodyTimeout::caused(e) {
            return Self::new(
                crate::error::Code::RequestTimeout,
                format!("the {what} did not arrive within the request deadline (--http-body-timeout-secs)"),
            );
        }
        Self::new(
            crate::error::Code::RequestTooLarge,
            format!("{what} over {limit} bytes"),
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn busy_answer_is_well_formed() {
        let text = std::str::from_utf8(super::BUSY).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("Content-Length: {}", body.len())),
            "{head}"
        );
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["error"]["code"], "server_busy");
    }
}
