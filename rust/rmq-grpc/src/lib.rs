//! rmq-grpc: HTTP/2 + gRPC framing of one listening port on the front's own tokio threads, so the broker's Python
//! loop only sees complete calls. `Front::bind` starts a multi-thread runtime (`worker_threads` threads named
//! `rmq-grpc`), an accept loop and, per connection, an `h2` server (SETTINGS_MAX_CONCURRENT_STREAMS, 1 MiB stream /
//! 4 MiB connection windows, PINGs and flow control by h2) whose streams are served by `stream::serve`. Python
//! takes the calls' events in batches (`drain`, woken by the eventfd of `events::Events`) and answers with
//! `send_message` / `finish`, which never block (an unbounded channel per call that the stream's task drains).
//! `close` stops accepting, sends GOAWAY, gives in-flight calls a grace period, then drops the runtime (its threads
//! joined); dropping a Front without `close` shuts the runtime down in the background. With a `TlsConfig` the port
//! serves TLS and plaintext alike: the accept path peeks each connection's first byte (`tls.rs`). No Python here:
//! the bindings are rmq-py's `grpc_front.rs`.

mod events;
mod notify;
mod stream;
pub mod tls;
pub mod wire;

pub use events::{CallStart, Event, MetaValue};
use events::{Events, Outbound};
use std::collections::HashSet;
use std::future::{poll_fn, Future};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};
use stream::Shared;
pub use tls::{TlsConfig, TlsError};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::runtime::Runtime;
use tokio::sync::watch;
use tokio::time::Sleep;
use tokio_rustls::TlsAcceptor;

/// A stream's receive window (grpc servers use 1 MiB-ish BDP-probed windows; h2's default 64 KiB would make a
/// 4 MiB message cost dozens of WINDOW_UPDATE round trips).
const STREAM_WINDOW: u32 = 1024 * 1024;
const CONNECTION_WINDOW: u32 = 4 * 1024 * 1024;
/// The longest header list accepted (grpc's default max metadata size is 8 KiB; Java's 8 KiB too; a bit more here).
const MAX_HEADER_LIST: u32 = 16 * 1024;

/// grpc-core's server handshake timeout (GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS, 120 s): a connection that never
/// speaks HTTP/2 (nor ends its TLS handshake) holds a socket and a task that long at most.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(120);

/// Connections the kernel queues before the accept loop takes them (grpc listens with SOMAXCONN; Linux caps it).
const LISTEN_BACKLOG: u32 = 1024;

pub struct FrontConfig {
    /// Full method paths whose request messages arrive one by one (MESSAGE events).
    pub client_streaming: HashSet<String>,
    pub max_concurrent_streams: u32,
    pub max_message_bytes: usize,
    pub worker_threads: usize,
    /// A connection whose TLS handshake, HTTP/2 preface and SETTINGS have not come by then is closed
    /// (`HANDSHAKE_TIMEOUT`).
    pub handshake_timeout: Duration,
    /// TLS beside plaintext on the port (a first byte 0x16 is a TLS handshake); None: plaintext only.
    pub tls: Option<TlsConfig>,
}

pub struct Front {
    shared: Arc<Shared>,
    runtime: Mutex<Option<Runtime>>,
    port: u16,
    shutdown: watch::Sender<bool>,
    connections: Arc<AtomicUsize>,
}

impl Front {
    /// Binds `host:port` (port 0: a free one) and starts serving.
    pub fn bind(host: &str, port: u16, config: FrontConfig) -> io::Result<Front> {
        let addr: SocketAddr = (host, port)
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::AddrNotAvailable, "no address"))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.worker_threads.max(1))
            .thread_name("rmq-grpc")
            .enable_io()
            .enable_time()
            .build()?;
        let listener = {
            let _guard = runtime.enter();
            let socket = if addr.is_ipv4() {
                TcpSocket::new_v4()?
            } else {
                TcpSocket::new_v6()?
            };
            // a restarted broker binds its port again at once (TIME_WAIT connections of the last run)
            #[cfg(unix)]
            socket.set_reuseaddr(true)?;
            socket.bind(addr)?;
            socket.listen(LISTEN_BACKLOG)?
        };
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            events: Events::new()?,
            client_streaming: config.client_streaming,
            max_message_bytes: config.max_message_bytes,
            next_id: AtomicU64::new(1),
        });
        let (shutdown, shutdown_rx) = watch::channel(false);
        let connections = Arc::new(AtomicUsize::new(0));
        let mut builder = h2::server::Builder::new();
        builder
            .initial_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .max_concurrent_streams(config.max_concurrent_streams)
            .max_header_list_size(MAX_HEADER_LIST)
            .max_send_buffer_size(STREAM_WINDOW as usize);
        runtime.spawn(accept_loop(
            listener,
            builder,
            shared.clone(),
            shutdown_rx,
            connections.clone(),
            config.handshake_timeout,
            config.tls.map(|t| t.acceptor),
        ));
        Ok(Front {
            shared,
            runtime: Mutex::new(Some(runtime)),
            port,
            shutdown,
            connections,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The descriptor (Linux: an eventfd; elsewhere a socket) readable while events wait.
    pub fn event_fd(&self) -> i64 {
        self.shared.events.fd()
    }

    pub fn drain(&self, max_events: usize) -> Vec<Event> {
        self.shared.events.drain(max_events)
    }

    /// One response message for a live call (its response headers go first); false when the call is gone.
    pub fn send_message(&self, call_id: u64, data: &[u8]) -> bool {
        self.shared
            .events
            .send(call_id, Outbound::Message(wire::frame_message(data)))
    }

    /// Ends a live call with `code` / `message`, after `data` as its last message when given; false when gone.
    pub fn finish(&self, call_id: u64, code: u32, message: &str, data: Option<&[u8]>) -> bool {
        let out = Outbound::Finish {
            code,
            message: message.to_owned(),
            data: data.map(wire::frame_message),
        };
        self.shared.events.finish(call_id, out)
    }

    /// Calls Python has not finished (nor the front cancelled).
    pub fn live_calls(&self) -> usize {
        self.shared.events.live_calls()
    }

    /// Stops accepting, sends GOAWAY, waits up to `grace` for the connections' calls to end, then drops the rest
    /// (their calls CANCELLED) and joins the threads. Blocks: call it without the GIL. Idempotent.
    pub fn close(&self, grace: Duration) {
        let Some(runtime) = self.runtime.lock().unwrap().take() else {
            return;
        };
        let _ = self.shutdown.send(true);
        let until = Instant::now() + grace;
        while self.connections.load(Ordering::Acquire) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        runtime.shutdown_timeout(Duration::from_secs(1));
        self.shared.events.cancel_all();
    }
}

impl Drop for Front {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.lock().unwrap().take() {
            runtime.shutdown_background();
        }
    }
}

async fn shutdown_signalled(mut rx: watch::Receiver<bool>) {
    while !*rx.borrow_and_update() {
        if rx.changed().await.is_err() {
            return;
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    builder: h2::server::Builder,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    connections: Arc<AtomicUsize>,
    handshake_timeout: Duration,
    tls: Option<TlsAcceptor>,
) {
    let mut stop = std::pin::pin!(shutdown_signalled(shutdown.clone()));
    loop {
        let accepted = poll_fn(|cx| {
            if stop.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            listener.poll_accept(cx).map(Some)
        })
        .await;
        match accepted {
            None => return,
            Some(Ok((sock, peer))) => {
                let _ = sock.set_nodelay(true);
                connections.fetch_add(1, Ordering::AcqRel);
                let (b, s, rx, n, t) = (
                    builder.clone(),
                    shared.clone(),
                    shutdown.clone(),
                    connections.clone(),
                    tls.clone(),
                );
                tokio::spawn(async move {
                    serve_connection(sock, peer, b, s, rx, handshake_timeout, t).await;
                    n.fetch_sub(1, Ordering::AcqRel);
                });
            }
            // EMFILE and the like: wait a little rather than spin
            Some(Err(_)) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

/// `work`'s output, or None once the front stops or the handshake timeout passes first.
async fn before_deadline<F: Future>(
    stop: Pin<&mut impl Future<Output = ()>>,
    too_late: Pin<&mut Sleep>,
    work: F,
) -> Option<F::Output> {
    let (mut stop, mut too_late, mut work) = (stop, too_late, std::pin::pin!(work));
    poll_fn(|cx| {
        if stop.as_mut().poll(cx).is_ready() || too_late.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        work.as_mut().poll(cx).map(Some)
    })
    .await
}

async fn serve_connection(
    sock: TcpStream,
    peer: SocketAddr,
    builder: h2::server::Builder,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
    handshake_timeout: Duration,
    tls: Option<TlsAcceptor>,
) {
    let mut stop = std::pin::pin!(shutdown_signalled(shutdown));
    let mut too_late = std::pin::pin!(tokio::time::sleep(handshake_timeout));
    let peer: Arc<str> = wire::peer_text(peer).into();
    let Some(tls) = tls else {
        return serve_h2(sock, peer, builder, shared, stop, too_late).await;
    };
    let mut first = [0u8; 1];
    match before_deadline(stop.as_mut(), too_late.as_mut(), sock.peek(&mut first)).await {
        Some(Ok(1)) if first[0] == tls::TLS_HANDSHAKE => {
            let accepted =
                before_deadline(stop.as_mut(), too_late.as_mut(), tls.accept(sock)).await;
            if let Some(Ok(sock)) = accepted {
                serve_h2(sock, peer, builder, shared, stop, too_late).await;
            }
        }
        // anything else is plaintext HTTP/2 (or garbage, which its handshake refuses)
        Some(Ok(1)) => serve_h2(sock, peer, builder, shared, stop, too_late).await,
        _ => {}
    }
}

/// One connection's HTTP/2 (over TCP or TLS): the handshake before the deadline, then its streams until it ends.
async fn serve_h2<T: AsyncRead + AsyncWrite + Unpin>(
    io: T,
    peer: Arc<str>,
    builder: h2::server::Builder,
    shared: Arc<Shared>,
    mut stop: Pin<&mut impl Future<Output = ()>>,
    too_late: Pin<&mut Sleep>,
) {
    let handshake = builder.handshake::<_, bytes::Bytes>(io);
    let Some(Ok(mut conn)) = before_deadline(stop.as_mut(), too_late, handshake).await else {
        return;
    };
    let mut stopping = false;
    loop {
        let next = poll_fn(|cx| {
            if !stopping && stop.as_mut().poll(cx).is_ready() {
                return Poll::Ready(None);
            }
            conn.poll_accept(cx).map(Some)
        })
        .await;
        match next {
            None => {
                stopping = true;
                conn.graceful_shutdown();
            }
            Some(Some(Ok((req, respond)))) => {
                tokio::spawn(stream::serve(shared.clone(), req, respond, peer.clone()));
            }
            Some(Some(Err(_))) | Some(None) => return,
        }
    }
}
