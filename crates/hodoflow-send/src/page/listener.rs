//! The status page's connections: how many, and for how long.
//!
//! A client that opens a connection and sends its request slowly, or never finishes it, or
//! never reads the answer, holds a connection and a file descriptor; enough of them and the
//! page (and `/ready`) stop answering, and the store may run out of descriptors. So:
//!
//! | Limit | Default | Flag | What happens |
//! | --- | --- | --- | --- |
//! | header-read timeout | 10 s | `--admin-header-timeout` | the request line and headers must arrive within it, counted from the connection's start or the end of the previous answer (so it also ends a kept-alive connection that sends nothing more): else the connection is closed |
//! | idle timeout | 60 s | `--admin-idle-timeout` | no byte read or written for this long (a body that stalls, an answer not read): the connection is closed |
//! | request timeout | 30 s | - | a request not read and answered within it gets `408` |
//! | connections | 256 | `--admin-max-connections` | at most this many at once; further ones wait in the listen queue until one closes |
//!
//! # Why these crates
//!
//! `axum::serve` sets none of these: it offers no header-read timeout (hyper's needs a timer it
//! does not give), no idle timeout and no cap. tower-http's `TimeoutLayer` bounds a request
//! once its head was read, which is the request timeout here, not the head or the idle
//! connection. So this module accepts connections itself, with what the tree already holds:
//! hyper's HTTP/1 connection (`header_read_timeout`, with hyper-util's `TokioTimer`), a Tokio
//! semaphore for the cap, a watch of the bytes each connection moves for the idle timeout,
//! and tower's `oneshot` to hand each request to the axum router. Nothing is added to the
//! build.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

/// The default header-read timeout.
pub(crate) const HEADER_READ: Duration = Duration::from_secs(10);

/// The default idle timeout.
pub(crate) const IDLE: Duration = Duration::from_secs(60);

/// The request timeout.
pub(crate) const REQUEST: Duration = Duration::from_secs(30);

/// The default cap on connections at once.
pub(crate) const MAX_CONNECTIONS: usize = 256;

/// The limits of one page's connections.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) header_read: Duration,
    pub(crate) idle: Duration,
    pub(crate) max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_read: HEADER_READ,
            idle: IDLE,
            max_connections: MAX_CONNECTIONS,
        }
    }
}

/// Where a request came from, and the address it came in on: read by the `Host` check and the
/// throttle of guesses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer {
    pub(crate) remote: SocketAddr,
    pub(crate) local: SocketAddr,
}

/// Serves `router` on `listener` within `limits` until `stop` resolves; then stops accepting,
/// lets each open connection finish the request it is in (bounded by the timeouts), and
/// returns once all are closed.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stop: impl Future<Output = ()>,
) -> io::Result<()> {
    let max = limits.max_connections.clamp(1, u32::MAX as usize);
    let permits = Arc::new(Semaphore::new(max));
    let (closing, closed) = watch::channel(false);
    let mut stop = std::pin::pin!(stop);
    loop {
        let permit = tokio::select! {
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            () = &mut stop => break,
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    refused(&error).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let Ok(local) = stream.local_addr() else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let peer = Peer { remote, local };
        tokio::spawn(connection(
            stream,
            peer,
            router.clone(),
            limits,
            closed.clone(),
            permit,
        ));
    }
    drop(listener);
    let _ = closing.send(true);
    // Each connection holds a permit until it closes: all back, all closed.
    let _ = permits.acquire_many(max as u32).await;
    Ok(())
}

/// After an accept that failed: a connection that failed alone is skipped; anything else (no
/// descriptor left) waits a second, as `axum::serve` does, rather than spin.
async fn refused(error: &io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if !matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        tracing::debug!(error = %error, "the status page could not accept a connection");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Serves one connection until it ends, is idle for `limits.idle`, or the server stops.
async fn connection(
    stream: TcpStream,
    peer: Peer,
    router: Router,
    limits: Limits,
    mut closing: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let moved = Arc::new(Moved::new());
    let io = TokioIo::new(Watched {
        stream,
        moved: Arc::clone(&moved),
    });
    let service = hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
        request.extensions_mut().insert(peer);
        tower::ServiceExt::oneshot(router.clone(), request)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .keep_alive(true);
    let mut served = std::pin::pin!(builder.serve_connection(io, service));
    let mut idle = std::pin::pin!(idle(&moved, limits.idle));
    let mut stopping = *closing.borrow();
    if stopping {
        served.as_mut().graceful_shutdown();
    }
    loop {
        tokio::select! {
            _ = served.as_mut() => return,
            // Dropping the connection closes it.
            () = idle.as_mut() => return,
            changed = closing.changed(), if !stopping => {
                stopping = true;
                if changed.is_ok() {
                    served.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// When a connection last moved a byte, in milliseconds since it opened.
struct Moved {
    opened: Instant,
    last: AtomicU64,
}

impl Moved {
    fn new() -> Self {
        Self {
            opened: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    fn now(&self) {
        let since = self.opened.elapsed().as_millis();
        self.last
            .store(u64::try_from(since).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    fn still_for(&self) -> Duration {
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        self.opened.elapsed().saturating_sub(last)
    }
}

/// Resolves once the connection has moved no byte for `limit`.
async fn idle(moved: &Moved, limit: Duration) {
    loop {
        let still = moved.still_for();
        if still >= limit {
            return;
        }
        tokio::time::sleep(limit - still).await;
    }
}

/// A connection's stream, noting each time a byte is read or written.
struct Watched {
    stream: TcpStream,
    moved: Arc<Moved>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.moved.now();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.moved.now();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(written)) if written > 0) {
            self.moved.now();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
