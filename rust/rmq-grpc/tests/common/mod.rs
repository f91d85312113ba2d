//! What the integration tests share: a current-thread runtime for the client side, waiting on the front's
//! descriptor as the Python loop does, an h2 client over TCP or TLS, gRPC requests and their answers.

#![allow(dead_code)]

use bytes::Bytes;
use h2::client::SendRequest;
use http::{HeaderMap, Request, StatusCode};
use rmq_grpc::{wire, CallStart, Event, Front};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;

pub fn rt() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Events until `pred` holds of what was gathered (or 5 s pass: panics), waiting on the eventfd as the loop does.
pub fn events_until(front: &Front, pred: impl Fn(&[Event]) -> bool) -> Vec<Event> {
    let mut got = Vec::new();
    let until = Instant::now() + Duration::from_secs(5);
    while !pred(&got) {
        assert!(Instant::now() < until, "timed out; got {got:?}");
        let mut pfd = libc::pollfd {
            fd: front.event_fd() as i32,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd
        unsafe { libc::poll(&mut pfd, 1, 50) };
        got.extend(front.drain(1024));
    }
    got
}

pub fn one_call(front: &Front) -> (u64, Box<CallStart>) {
    let mut ev = events_until(front, |e| !e.is_empty());
    assert_eq!(ev.len(), 1, "{ev:?}");
    match ev.pop().unwrap() {
        Event::Call(id, start) => (id, start),
        e => panic!("not a call: {e:?}"),
    }
}

pub async fn connect(port: u16) -> SendRequest<Bytes> {
    h2_over(TcpStream::connect(("127.0.0.1", port)).await.unwrap()).await
}

/// An HTTP/2 client over `io` (TCP, TLS), its connection driven by a task of the current runtime.
pub async fn h2_over<T: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    io: T,
) -> SendRequest<Bytes> {
    let (send, conn) = h2::client::handshake(io).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send.ready().await.unwrap()
}

pub fn grpc_request(path: &str) -> Request<()> {
    Request::builder()
        .method("POST")
        .uri(format!("http://127.0.0.1{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap()
}

/// A finished response: HTTP status, headers, the gRPC messages, trailers (None for trailers-only).
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub messages: Vec<Bytes>,
    pub trailers: Option<HeaderMap>,
}

impl Answer {
    pub fn grpc_status(&self) -> (u32, String) {
        let h = self.trailers.as_ref().unwrap_or(&self.headers);
        let code = h
            .get("grpc-status")
            .expect("grpc-status")
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        let msg = h
            .get("grpc-message")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (code, msg)
    }
}

pub async fn read_answer(resp: h2::client::ResponseFuture) -> Answer {
    let resp = resp.await.unwrap();
    let (parts, mut body) = resp.into_parts();
    let mut dec = wire::Decoder::new(usize::MAX);
    let mut messages = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        dec.push(&chunk);
        while let Some(m) = dec.next_message() {
            messages.push(m.unwrap());
        }
    }
    let trailers = body.trailers().await.unwrap();
    Answer {
        status: parts.status,
        headers: parts.headers,
        messages,
        trailers,
    }
}

/// Sends one request (its messages framed, END_STREAM after them) and returns the pending answer.
pub async fn unary(send: &mut SendRequest<Bytes>, req: Request<()>, body: &[u8]) -> Answer {
    let (resp, mut stream) = send.send_request(req, false).unwrap();
    stream
        .send_data(Bytes::copy_from_slice(body), true)
        .unwrap();
    read_answer(resp).await
}
