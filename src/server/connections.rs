//! Serving a router on a TCP listener with the limits a server facing untrusted
//! clients needs, which `axum::serve` does not set: a connection that sends
//! its request head too slowly, sits idle between requests, or stops reading
//! its response is closed, and at most so many connections are open at once.
//!
//! The decision — which deadline a connection is under, and when it passes —
//! is a pure function of what the connection is doing ([`Snapshot::expiry`]);
//! the driver around it reads the clock and closes the connection.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, Response};
use bytes::Bytes;
use futures::future::BoxFuture;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tower::{Service, ServiceExt};

/// The limits on a server's connections (see [`serve`]).
///
/// | limit | default | what it bounds |
/// |---|--:|---|
/// | [`header_timeout`](Self::header_timeout) | 30 s | from a connection's start, or from the first byte of a later request, to the end of the request's head |
/// | [`idle_timeout`](Self::idle_timeout) | 90 s | a kept-alive connection's wait for its next request, and a response that the client does not read on |
/// | [`max_connections`](Self::max_connections) | 1024 | connections open at once; past it, new ones wait in the listener's backlog |
///
/// The time to a request's whole *body* is the gateway's
/// ([`Gateway::body_timeout`](super::Gateway::body_timeout)), so that it
/// holds however the router is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// The longest a request's head may take to arrive.
    pub header_timeout: Duration,
    /// The longest a connection may sit idle between requests, or wait for
    /// its client to read the response.
    pub idle_timeout: Duration,
    /// The most connections open at once.
    pub max_connections: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_timeout: Self::DEFAULT_HEADER_TIMEOUT,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
        }
    }
}

impl ConnectionLimits {
    /// The default header timeout: 30 s.
    pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);
    /// The default idle timeout: 90 s.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(90);
    /// The default cap on open connections: 1024.
    pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

    /// Sets the header timeout.
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// Sets the idle timeout.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// Sets the most connections open at once (at least 1).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }
}

/// Serves `router` on `listener` (HTTP/1.1, `TCP_NODELAY` on every connection)
/// within `limits`, until `shutdown` resolves; then stops accepting, lets the
/// requests in flight finish, closes every connection that is not answering
/// one (idle, or part-way through a request's head) at once, and returns when
/// the last is closed. Bound the drain with a timeout of your own.
///
/// ```no_run
/// use lmstack::server::{ConnectionLimits, Gateway, serve};
/// use lmstack::testing::ScriptedModel;
/// use std::time::Duration;
///
/// # async fn run() -> std::io::Result<()> {
/// let model = ScriptedModel::new().reply("Hello from the gateway.");
/// let router = Gateway::new().model("demo", "scripted", model, 8).router();
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let limits = ConnectionLimits::default().header_timeout(Duration::from_secs(10));
/// serve(listener, router, limits, async { let _ = tokio::signal::ctrl_c().await; }).await
/// # }
/// ```
pub async fn serve<F>(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: F,
) -> io::Result<()>
where
    F: Future<Output = ()> + Send,
{
    let max = limits
        .max_connections
        .clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
    let slots = Arc::new(Semaphore::new(max));
    let (stop, stopping) = watch::channel(false);
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = slots.clone().acquire_owned() => slot,
            () = &mut shutdown => break,
        };
        let Ok(slot) = slot else { break };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut shutdown => break,
        };
        match accepted {
            Ok((tcp, _)) => {
                if let Err(error) = tcp.set_nodelay(true) {
                    tracing::debug!("TCP_NODELAY not set: {error}");
                }
                let connection = connection(tcp, router.clone(), limits, stopping.clone(), slot);
                tokio::spawn(connection);
            }
            // The peer gave up before it was accepted: nothing to do.
            Err(error) if is_peer_gone(&error) => {}
            Err(error) => {
                // Out of file descriptors, or of memory: wait for some to be
                // freed instead of spinning.
                tracing::warn!("accepting a connection: {error}");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
    drop(listener);
    stop.send_replace(true);
    // Every connection holds a slot until it closes.
    let _ = slots.acquire_many(max as u32).await;
    Ok(())
}

/// How long the accept loop waits after an error such as `EMFILE`.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

fn is_peer_gone(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    )
}

/// Serves one connection until it ends, its deadline passes or the server
/// stops; `slot` is freed when it closes.
async fn connection(
    tcp: TcpStream,
    router: Router,
    limits: ConnectionLimits,
    mut stopping: watch::Receiver<bool>,
    slot: OwnedSemaphorePermit,
) {
    let _slot = slot;
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Tracked {
        io: tcp,
        activity: activity.clone(),
    });
    let service = TowerToHyperService::new(Requests {
        router,
        activity: activity.clone(),
    });
    let connection = hyper::server::conn::http1::Builder::new().serve_connection(io, service);
    tokio::pin!(connection);
    let expired = activity.expired(limits);
    tokio::pin!(expired);
    let mut draining = false;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(error) = result {
                    tracing::debug!("connection closed: {error}");
                }
                return;
            }
            reason = &mut expired => {
                tracing::debug!("connection closed: {reason}");
                return;
            }
            changed = stopping.wait_for(|stop| *stop), if !draining => {
                draining = true;
                if changed.is_ok() {
                    connection.as_mut().graceful_shutdown();
                    activity.drain();
                }
            }
        }
    }
}

/// When a time is not set.
const UNSET: u64 = u64::MAX;

/// What a connection is doing, kept by its IO and its requests and read by its
/// watchdog: times in milliseconds since `epoch`.
struct Activity {
    epoch: Instant,
    /// Since when the connection has waited for a request: its start, or the
    /// end of its last response.
    waiting_since: AtomicU64,
    /// When the first byte of the next request came (`UNSET`: none yet).
    head_since: AtomicU64,
    /// Since when a write has waited for the client to read (`UNSET`: none has).
    stalled_since: AtomicU64,
    /// Requests being answered.
    busy: AtomicUsize,
    /// Whether a request has been answered.
    served: AtomicBool,
    /// Whether the server is stopping.
    draining: AtomicBool,
    /// Wakes the watchdog when a deadline may have come nearer.
    changed: Notify,
}

impl Activity {
    fn new() -> Self {
        Activity {
            epoch: Instant::now(),
            waiting_since: AtomicU64::new(0),
            head_since: AtomicU64::new(UNSET),
            stalled_since: AtomicU64::new(UNSET),
            busy: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            changed: Notify::new(),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(UNSET - 1)
    }

    /// Bytes came from the client.
    fn read(&self) {
        if self.busy.load(Ordering::Relaxed) == 0
            && self.head_since.load(Ordering::Relaxed) == UNSET
        {
            self.head_since.store(self.now(), Ordering::Relaxed);
            self.changed.notify_one();
        }
    }

    /// A write waits for the client to read (`true`), or went through.
    fn stalled(&self, stalled: bool) {
        let since = self.stalled_since.load(Ordering::Relaxed);
        if stalled && since == UNSET {
            self.stalled_since.store(self.now(), Ordering::Relaxed);
            self.changed.notify_one();
        } else if !stalled && since != UNSET {
            self.stalled_since.store(UNSET, Ordering::Relaxed);
        }
    }

    /// A request's head was read.
    fn begin(&self) {
        self.busy.fetch_add(1, Ordering::Relaxed);
        self.head_since.store(UNSET, Ordering::Relaxed);
    }

    /// A request's response ended (or was dropped).
    fn end(&self) {
        self.waiting_since.store(self.now(), Ordering::Relaxed);
        self.served.store(true, Ordering::Relaxed);
        self.busy.fetch_sub(1, Ordering::Relaxed);
        self.changed.notify_one();
    }

    fn drain(&self) {
        self.draining.store(true, Ordering::Relaxed);
        self.changed.notify_one();
    }

    fn snapshot(&self) -> Snapshot {
        let time = |at: &AtomicU64| Some(at.load(Ordering::Relaxed)).filter(|&t| t != UNSET);
        Snapshot {
            waiting_since: self.waiting_since.load(Ordering::Relaxed),
            head_since: time(&self.head_since),
            stalled_since: time(&self.stalled_since),
            busy: self.busy.load(Ordering::Relaxed) > 0,
            served: self.served.load(Ordering::Relaxed),
            draining: self.draining.load(Ordering::Relaxed),
        }
    }

    /// Resolves when the connection's deadline has passed, with why.
    async fn expired(&self, limits: ConnectionLimits) -> Expired {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            match self.snapshot().expiry(&limits) {
                Some((at, why)) if at <= self.now() => return why,
                Some((at, _)) => {
                    let when = self.epoch + Duration::from_millis(at);
                    tokio::select! {
                        () = tokio::time::sleep_until(when.into()) => {}
                        () = changed => {}
                    }
                }
                None => changed.await,
            }
        }
    }
}

/// What a connection is doing at one moment (times in milliseconds).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Snapshot {
    waiting_since: u64,
    head_since: Option<u64>,
    stalled_since: Option<u64>,
    busy: bool,
    served: bool,
    draining: bool,
}

/// Why a connection was closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expired {
    /// Its request head did not come whole within the header timeout.
    Header,
    /// It sat idle between requests past the idle timeout.
    Idle,
    /// Its client did not read the response for the idle timeout.
    Stalled,
    /// The server is stopping and it was answering no request.
    Draining,
}

impl std::fmt::Display for Expired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Expired::Header => "the request head did not arrive within the header timeout",
            Expired::Idle => "idle past the idle timeout",
            Expired::Stalled => "the client did not read the response within the idle timeout",
            Expired::Draining => "the server is stopping",
        })
    }
}

impl Snapshot {
    /// The time at which the connection is to be closed, and why; `None` while
    /// it answers a request that the client reads on.
    fn expiry(&self, limits: &ConnectionLimits) -> Option<(u64, Expired)> {
        let after = |since: u64, limit: Duration| {
            since.saturating_add(u64::try_from(limit.as_millis()).unwrap_or(UNSET))
        };
        let stalled = self
            .stalled_since
            .map(|since| (after(since, limits.idle_timeout), Expired::Stalled));
        let waiting = match (self.busy, self.draining, self.head_since) {
            (true, _, _) => None,
            (false, true, _) => Some((0, Expired::Draining)),
            (false, false, Some(since)) => {
                Some((after(since, limits.header_timeout), Expired::Header))
            }
            (false, false, None) if !self.served => Some((
                after(self.waiting_since, limits.header_timeout),
                Expired::Header,
            )),
            (false, false, None) => Some((
                after(self.waiting_since, limits.idle_timeout),
                Expired::Idle,
            )),
        };
        match (stalled, waiting) {
            (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
            (a, b) => a.or(b),
        }
    }
}

/// A connection's IO, noting what its [`Activity`] needs: bytes read, writes
/// that wait.
struct Tracked {
    io: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Tracked {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let read = Pin::new(&mut self.io).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        read
    }
}

impl AsyncWrite for Tracked {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write(cx, buf);
        self.activity.stalled(written.is_pending());
        written
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.activity.stalled(written.is_pending());
        written
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// The router, noting in its connection's [`Activity`] when each request
/// begins and when its response ends.
#[derive(Clone)]
struct Requests {
    router: Router,
    activity: Arc<Activity>,
}

impl Service<Request<Incoming>> for Requests {
    type Response = Response<TrackedBody>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        self.activity.begin();
        let answering = Answering(self.activity.clone());
        let response = self.router.clone().oneshot(request.map(Body::new));
        Box::pin(async move {
            let response = response.await?;
            Ok(response.map(|body| TrackedBody {
                body,
                _answering: answering,
            }))
        })
    }
}

/// A request being answered, until dropped (with its response's body, or
/// with the handler when the connection goes first).
struct Answering(Arc<Activity>);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// A response's body, which ends the request's [`Answering`] when it is done.
struct TrackedBody {
    body: Body,
    _answering: Answering,
}

impl hyper::body::Body for TrackedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits::default()
            .header_timeout(Duration::from_millis(30))
            .idle_timeout(Duration::from_millis(90))
    }

    #[test]
    fn each_state_is_under_its_own_deadline() {
        let limits = limits();
        let fresh = Snapshot::default();
        assert_eq!(fresh.expiry(&limits), Some((30, Expired::Header)));
        let heading = Snapshot {
            head_since: Some(50),
            served: true,
            waiting_since: 10,
            ..fresh
        };
        assert_eq!(heading.expiry(&limits), Some((80, Expired::Header)));
        let idle = Snapshot {
            served: true,
            waiting_since: 10,
            ..fresh
        };
        assert_eq!(idle.expiry(&limits), Some((100, Expired::Idle)));
        let busy = Snapshot {
            busy: true,
            head_since: None,
            ..idle
        };
        assert_eq!(busy.expiry(&limits), None, "a request is being answered");
        let stalled = Snapshot {
            stalled_since: Some(5),
            ..busy
        };
        assert_eq!(stalled.expiry(&limits), Some((95, Expired::Stalled)));
        let stalled_idle = Snapshot {
            stalled_since: Some(100),
            ..idle
        };
        assert_eq!(
            stalled_idle.expiry(&limits),
            Some((100, Expired::Idle)),
            "the nearer deadline"
        );
        let draining = Snapshot {
            draining: true,
            head_since: Some(50),
            ..idle
        };
        assert_eq!(draining.expiry(&limits), Some((0, Expired::Draining)));
        let draining_busy = Snapshot {
            draining: true,
            ..busy
        };
        assert_eq!(draining_busy.expiry(&limits), None, "it finishes");
    }

    #[test]
    fn limits_past_any_clock_never_overflow() {
        let limits = ConnectionLimits::default()
            .header_timeout(Duration::MAX)
            .idle_timeout(Duration::MAX);
        let snapshot = Snapshot {
            waiting_since: 7,
            ..Snapshot::default()
        };
        assert_eq!(snapshot.expiry(&limits), Some((UNSET, Expired::Header)));
    }
}
