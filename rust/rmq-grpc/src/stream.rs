//! One HTTP/2 stream as one gRPC call: checks the request headers (POST, `application/grpc*` content-type), reads
//! the request (the whole one-message request, or MESSAGE events as a client-streaming request's messages arrive),
//! then writes what Python sends (response headers with the first message, DATA, trailers or trailers-only) until
//! the call ends: finished by Python, reset by the client, its connection gone, or its deadline passed (the front
//! answers DEADLINE_EXCEEDED), each of the last three queued as one CANCELLED while the call is live.

use crate::events::{CallStart, Event, Events, MetaValue, Outbound};
use crate::wire::{self, Decoder, Refusal};
use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio::time::Sleep;

/// What every stream of one front shares.
pub struct Shared {
    pub events: Events,
    pub client_streaming: std::collections::HashSet<String>,
    pub max_message_bytes: usize,
    pub next_id: AtomicU64,
}

/// Headers the CALL event leaves out (transport-level, as grpc's `invocation_metadata()` does).
const HIDDEN: [&str; 6] = [
    "content-type",
    "te",
    "grpc-timeout",
    "user-agent",
    "grpc-accept-encoding",
    "grpc-encoding",
];

fn metadata(headers: &HeaderMap) -> Vec<(String, MetaValue)> {
    let mut out = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let key = name.as_str();
        if HIDDEN.contains(&key) {
            continue;
        }
        let value = if key.ends_with("-bin") {
            match wire::base64_decode(value.as_bytes()) {
                Some(v) => MetaValue::Binary(v),
                None => continue, // grpc drops a -bin value that is not base64
            }
        } else {
            MetaValue::Text(String::from_utf8_lossy(value.as_bytes()).into_owned())
        };
        out.push((key.to_owned(), value));
    }
    out
}

fn grpc_headers() -> Response<()> {
    let mut r = Response::new(());
    let h = r.headers_mut();
    h.insert("content-type", HeaderValue::from_static("application/grpc"));
    h.insert("grpc-accept-encoding", HeaderValue::from_static("identity"));
    r
}

fn put_status(h: &mut HeaderMap, code: u32, message: &str) {
    h.insert("grpc-status", HeaderValue::from(code));
    if !message.is_empty() {
        if let Ok(v) = HeaderValue::from_str(&wire::percent_encode(message)) {
            h.insert("grpc-message", v);
        }
    }
}

fn trailers_only(respond: &mut SendResponse<Bytes>, code: u32, message: &str) {
    let mut r = grpc_headers();
    put_status(r.headers_mut(), code, message);
    let _ = respond.send_response(r, true);
}

fn http_refusal(respond: &mut SendResponse<Bytes>, status: StatusCode) {
    let mut r = Response::new(());
    *r.status_mut() = status;
    let _ = respond.send_response(r, true);
}

/// Serves one stream to its end.
pub async fn serve(
    shared: Arc<Shared>,
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    peer: Arc<str>,
) {
    if req.method() != http::Method::POST {
        return http_refusal(&mut respond, StatusCode::METHOD_NOT_ALLOWED);
    }
    let grpc_type = req
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"application/grpc"));
    if !grpc_type {
        return http_refusal(&mut respond, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
    let (parts, mut body) = req.into_parts();
    let method = parts.uri.path().to_owned();
    let timeout_s = parts
        .headers
        .get("grpc-timeout")
        .and_then(|v| wire::parse_timeout(v.as_bytes()));
    let deadline = timeout_s.map(|t| tokio::time::sleep(Duration::from_secs_f64(t.min(1e9))));
    let mut deadline = deadline.map(Box::pin);
    let streaming = shared.client_streaming.contains(&method);
    let start = CallStart {
        method,
        metadata: metadata(&parts.headers),
        peer: peer.to_string(),
        timeout_s,
        request: None,
    };
    let mut decoder = Decoder::new(shared.max_message_bytes);
    let start = if streaming {
        start
    } else {
        match read_one(&mut body, &mut decoder, &mut deadline).await {
            ReadOne::Request(r) => CallStart {
                request: Some(r),
                ..start
            },
            ReadOne::Refused(r) => return trailers_only(&mut respond, r.code, &r.message),
            ReadOne::Gone => return,
        }
    };
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let (tx, rx) = unbounded_channel();
    shared.events.open_call(id, tx, start);
    let mut call = Call {
        shared,
        id,
        recv: if streaming { Some(body) } else { None },
        decoder,
        respond,
        send: None,
        rx,
        deadline,
        pending: VecDeque::new(),
        trailers: None,
    };
    poll_fn(|cx| call.poll_run(cx)).await;
}

enum ReadOne {
    Request(Bytes),
    Refused(Refusal),
    Gone,
}

/// A non-client-streaming request: its one message and END_STREAM.
async fn read_one(
    body: &mut RecvStream,
    decoder: &mut Decoder,
    deadline: &mut Option<Pin<Box<Sleep>>>,
) -> ReadOne {
    let mut request = None;
    loop {
        let chunk = poll_fn(|cx| {
            if let Some(d) = deadline.as_mut() {
                if d.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Err(()));
                }
            }
            body.poll_data(cx).map(Ok)
        })
        .await;
        match chunk {
            Err(()) => {
                return ReadOne::Refused(Refusal {
                    code: wire::DEADLINE_EXCEEDED,
                    message: "Deadline Exceeded".into(),
                })
            }
            Ok(Some(Ok(data))) => {
                let _ = body.flow_control().release_capacity(data.len());
                decoder.push(&data);
                while let Some(m) = decoder.next_message() {
                    match m {
                        Err(r) => return ReadOne::Refused(r),
                        Ok(_) if request.is_some() => {
                            return ReadOne::Refused(Refusal {
                                code: wire::UNIMPLEMENTED,
                                message: "more than one request message".into(),
                            })
                        }
                        Ok(m) => request = Some(m),
                    }
                }
            }
            Ok(Some(Err(_))) => return ReadOne::Gone,
            Ok(None) => break,
        }
    }
    match request {
        _ if decoder.has_partial() => ReadOne::Refused(Refusal {
            code: wire::INTERNAL,
            message: "incomplete request message".into(),
        }),
        Some(r) => ReadOne::Request(r),
        None => ReadOne::Refused(Refusal {
            code: wire::UNIMPLEMENTED,
            message: "no request message".into(),
        }),
    }
}

/// A live call: reads the rest of a client-streaming request, writes Python's answers as the client's flow-control
/// window lets them go (what does not fit waits in `pending`, not in h2; a client-streaming request is not read
/// while anything waits, so a client that never reads is held back by its own window, as grpc.aio's awaited
/// `write` holds it back).
struct Call {
    shared: Arc<Shared>,
    id: u64,
    recv: Option<RecvStream>,
    decoder: Decoder,
    respond: SendResponse<Bytes>,
    send: Option<SendStream<Bytes>>,
    rx: UnboundedReceiver<Outbound>,
    deadline: Option<Pin<Box<Sleep>>>,
    pending: VecDeque<Bytes>,
    /// The trailers of a finished call, sent once `pending` is out.
    trailers: Option<HeaderMap>,
}

enum Flush {
    Done,
    Blocked,
    Broken,
}

impl Call {
    /// Ends the call from the front's side: CANCELLED for Python (when still live), `code` to the client (a reset
    /// when answer bytes are still waiting for the client's window: trailers cannot overtake them).
    fn abort(&mut self, code: u32, message: &str) -> Poll<()> {
        self.shared.events.cancel(self.id);
        match self.send.as_mut() {
            Some(s) if !self.pending.is_empty() => s.send_reset(Reason::CANCEL),
            Some(s) => {
                let mut t = HeaderMap::new();
                put_status(&mut t, code, message);
                let _ = s.send_trailers(t);
            }
            None => trailers_only(&mut self.respond, code, message),
        }
        Poll::Ready(())
    }

    fn gone(&mut self) -> Poll<()> {
        self.shared.events.cancel(self.id);
        Poll::Ready(())
    }

    fn headers_sent(&mut self) -> Result<&mut SendStream<Bytes>, h2::Error> {
        if self.send.is_none() {
            self.send = Some(self.respond.send_response(grpc_headers(), false)?);
        }
        Ok(self.send.as_mut().unwrap())
    }

    /// Moves `pending` into h2 as far as the stream's send capacity goes.
    fn flush(&mut self, cx: &mut Context<'_>) -> Flush {
        let Some(s) = self.send.as_mut() else {
            return Flush::Done;
        };
        while let Some(front) = self.pending.front_mut() {
            if front.is_empty() {
                self.pending.pop_front();
                continue;
            }
            s.reserve_capacity(front.len());
            let mut cap = s.capacity();
            if cap == 0 {
                match s.poll_capacity(cx) {
                    Poll::Pending => return Flush::Blocked,
                    Poll::Ready(Some(Ok(_))) => cap = s.capacity(),
                    Poll::Ready(None) | Poll::Ready(Some(Err(_))) => return Flush::Broken,
                }
                if cap == 0 {
                    continue;
                }
            }
            let chunk = front.split_to(cap.min(front.len()));
            if s.send_data(chunk, false).is_err() {
                return Flush::Broken;
            }
        }
        if self.pending.is_empty() {
            s.reserve_capacity(0);
        }
        Flush::Done
    }

    fn poll_run(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        // Python's answers first: a finished call ends here whatever else happened
        while self.trailers.is_none() {
            match self.rx.poll_recv(cx) {
                Poll::Ready(Some(Outbound::Message(m))) => {
                    if self.headers_sent().is_err() {
                        return self.gone();
                    }
                    self.pending.push_back(m);
                }
                Poll::Ready(Some(Outbound::Finish {
                    code,
                    message,
                    data,
                })) => {
                    if data.is_none() && self.send.is_none() {
                        trailers_only(&mut self.respond, code, &message);
                        return Poll::Ready(());
                    }
                    if self.headers_sent().is_err() {
                        return Poll::Ready(());
                    }
                    self.pending.extend(data);
                    let mut t = HeaderMap::new();
                    put_status(&mut t, code, &message);
                    self.trailers = Some(t);
                }
                // the sender is gone without a finish: the front is closing
                Poll::Ready(None) => {
                    match self.send.as_mut() {
                        Some(s) => s.send_reset(Reason::CANCEL),
                        None => self.respond.send_reset(Reason::CANCEL),
                    }
                    return Poll::Ready(());
                }
                Poll::Pending => break,
            }
        }
        match self.flush(cx) {
            Flush::Broken => return self.gone(),
            Flush::Done => {
                if let Some(t) = self.trailers.take() {
                    if let Some(s) = self.send.as_mut() {
                        let _ = s.send_trailers(t);
                    }
                    return Poll::Ready(());
                }
            }
            Flush::Blocked => {}
        }
        if self.pending.is_empty() {
            if let Poll::Ready(()) = self.poll_request(cx) {
                return Poll::Ready(());
            }
        }
        if let Some(d) = self.deadline.as_mut() {
            if d.as_mut().poll(cx).is_ready() {
                if self.trailers.is_some() {
                    return Poll::Ready(()); // finished by Python; the client gave up waiting for it
                }
                return self.abort(wire::DEADLINE_EXCEEDED, "Deadline Exceeded");
            }
        }
        let reset = match self.send.as_mut() {
            Some(s) => s.poll_reset(cx),
            None => self.respond.poll_reset(cx),
        };
        if reset.is_ready() {
            return self.gone();
        }
        Poll::Pending
    }

    /// The rest of a client-streaming request: MESSAGE events, HALF_CLOSE at its end; Ready when the call ended.
    fn poll_request(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(recv) = self.recv.as_mut() else {
            return Poll::Pending;
        };
        loop {
            match recv.poll_data(cx) {
                Poll::Ready(Some(Ok(data))) => {
                    let _ = recv.flow_control().release_capacity(data.len());
                    self.decoder.push(&data);
                    while let Some(m) = self.decoder.next_message() {
                        match m {
                            Ok(m) => self.shared.events.push(Event::Message(self.id, m)),
                            Err(r) => return self.abort(r.code, &r.message),
                        }
                    }
                }
                Poll::Ready(Some(Err(_))) => return self.gone(),
                Poll::Ready(None) => {
                    if self.decoder.has_partial() {
                        return self.abort(wire::INTERNAL, "incomplete request message");
                    }
                    self.recv = None;
                    if self.shared.events.is_live(self.id) {
                        self.shared.events.push(Event::HalfClose(self.id));
                    }
                    return Poll::Pending;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
