//! The front against a real h2 client over TCP on 127.0.0.1, with this test's thread as "the Python loop"
//! (waits on the eventfd, drains, answers): unary, server streaming, client streaming, cancel, oversize,
//! compressed, unknown content-type, two messages on a unary method, deadline, many streams, connection drop,
//! close with calls in flight, drop without close.

#![cfg(unix)]

mod common;

use common::*;

use bytes::{Bytes, BytesMut};
use http::StatusCode;
use rmq_grpc::{wire, Event, Front, FrontConfig, MetaValue};
use std::collections::HashSet;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

const BIDI: &str = "/t.S/Bidi";

fn front() -> Front {
    front_with(256, 1024)
}

fn front_with(max_streams: u32, max_message: usize) -> Front {
    let config = FrontConfig {
        client_streaming: HashSet::from([BIDI.to_owned()]),
        max_concurrent_streams: max_streams,
        max_message_bytes: max_message,
        worker_threads: 1,
        handshake_timeout: Duration::from_millis(300),
        tls: None,
    };
    Front::bind("127.0.0.1", 0, config).unwrap()
}

#[test]
fn unary_round_trip_with_metadata_peer_and_timeout() {
    let front = front();
    let port = front.port();
    let rt = rt();
    let mut req = grpc_request("/t.S/Unary");
    req.headers_mut().insert("x-key", "v1".parse().unwrap());
    req.headers_mut().insert("x-b-bin", "AAH/".parse().unwrap());
    req.headers_mut()
        .insert("grpc-timeout", "1500m".parse().unwrap());
    req.headers_mut()
        .insert("user-agent", "grpc-test".parse().unwrap());
    let answer = std::thread::scope(|s| {
        let h = s.spawn(|| {
            rt.block_on(async {
                let mut send = connect(port).await;
                unary(&mut send, req, &wire::frame_message(b"hello")).await
            })
        });
        let (id, start) = one_call(&front);
        assert_eq!(start.method, "/t.S/Unary");
        assert_eq!(start.request.as_deref(), Some(&b"hello"[..]));
        assert_eq!(start.timeout_s, Some(1.5));
        assert!(start.peer.starts_with("ipv4:127.0.0.1:"), "{}", start.peer);
        assert_eq!(
            start.metadata,
            vec![
                ("x-key".to_owned(), MetaValue::Text("v1".into())),
                ("x-b-bin".to_owned(), MetaValue::Binary(vec![0, 1, 255])),
            ]
        );
        assert!(front.finish(id, 0, "", Some(b"world")));
        assert!(!front.finish(id, 0, "", None), "a finished call is gone");
        assert!(!front.send_message(id, b"late"));
        h.join().unwrap()
    });
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.headers["content-type"], "application/grpc");
    assert_eq!(answer.messages, vec![Bytes::from_static(b"world")]);
    assert!(answer.trailers.is_some());
    assert_eq!(answer.grpc_status(), (0, String::new()));
    assert_eq!(front.live_calls(), 0);
}

#[test]
fn server_streaming_then_an_error_status_percent_encoded() {
    let front = front();
    let port = front.port();
    let rt = rt();
    let answer = std::thread::scope(|s| {
        let h = s.spawn(|| {
            rt.block_on(async {
                let mut send = connect(port).await;
                unary(
                    &mut send,
                    grpc_request("/t.S/Stream"),
                    &wire::frame_message(b"q"),
                )
                .await
            })
        });
        let (id, _) = one_call(&front);
        for i in 0..3u8 {
            assert!(front.send_message(id, &[i; 3]));
        }
        assert!(front.finish(id, 5, "no topic: é 50%", None));
        h.join().unwrap()
    });
    assert_eq!(
        answer.messages,
        vec![
            Bytes::from_static(&[0; 3]),
            Bytes::from_static(&[1; 3]),
            Bytes::from_static(&[2; 3])
        ]
    );
    assert_eq!(
        answer.grpc_status(),
        (5, "no topic: %C3%A9 50%25".to_owned())
    );
}

#[test]
fn trailers_only_answer() {
    let front = front();
    let port = front.port();
    let rt = rt();
    let answer = std::thread::scope(|s| {
        let h = s.spawn(|| {
            rt.block_on(async {
                let mut send = connect(port).await;
                unary(
                    &mut send,
                    grpc_request("/t.S/Nope"),
                    &wire::frame_message(b""),
                )
                .await
            })
        });
        let (id, start) = one_call(&front);
        assert_eq!(start.request.as_deref(), Some(&b""[..]));
        assert!(front.finish(id, 12, "unknown method", None));
        h.join().unwrap()
    });
    assert!(
        answer.trailers.is_none(),
        "trailers-only: the status is in the headers"
    );
    assert_eq!(answer.grpc_status(), (12, "unknown method".to_owned()));
}

#[test]
fn client_streaming_messages_one_by_one_then_half_close() {
    let front = front();
    let port = front.port();
    let rt = rt();
    let answer = std::thread::scope(|s| {
        let h = s.spawn(|| {
            rt.block_on(async {
                let mut send = connect(port).await;
                let (resp, mut stream) = send.send_request(grpc_request(BIDI), false).unwrap();
                // two messages in one DATA frame, the third split over two
                let mut two = BytesMut::new();
                two.extend_from_slice(&wire::frame_message(b"a"));
                two.extend_from_slice(&wire::frame_message(b"bb"));
                stream.send_data(two.freeze(), false).unwrap();
                let third = wire::frame_message(b"ccc");
                stream.send_data(third.slice(..4), false).unwrap();
                tokio::time::sleep(Duration::from_millis(50)).await;
                stream.send_data(third.slice(4..), true).unwrap();
                read_answer(resp).await
            })
        });
        let ev = events_until(&front, |e| matches!(e.last(), Some(Event::HalfClose(_))));
        let Event::Call(id, start) = &ev[0] else {
            panic!("{ev:?}")
        };
        assert!(start.request.is_none());
        let msgs: Vec<&[u8]> = ev[1..4]
            .iter()
            .map(|e| match e {
                Event::Message(i, m) if i == id => m.as_ref(),
                e => panic!("{e:?}"),
            })
            .collect();
        assert_eq!(msgs, vec![&b"a"[..], b"bb", b"ccc"]);
        assert_eq!(ev.len(), 5);
        assert!(front.send_message(*id, b"r1"));
        assert!(front.finish(*id, 0, "", Some(b"r2")));
        h.join().unwrap()
    });
    assert_eq!(
        answer.messages,
        vec![Bytes::from_static(b"r1"), Bytes::from_static(b"r2")]
    );
    assert_eq!(answer.grpc_status(), (0, String::new()));
}

#[test]
fn a_reset_stream_is_cancelled_once() {
    let front = front();
    let port = front.port();
    let rt = rt();
    std::thread::scope(|s| {
        let (reset_tx, reset_rx) = std::sync::mpsc::channel::<()>();
        let h = s.spawn(|| {
            rt.block_on(async move {
                let mut send = connect(port).await;
                let (_resp, mut stream) = send.send_request(grpc_request(BIDI), false).unwrap();
                stream.send_data(wire::frame_message(b"x"), false).unwrap();
                tokio::task::spawn_blocking(move || reset_rx.recv())
                    .await
                    .unwrap()
                    .unwrap();
                stream.send_reset(h2::Reason::CANCEL);
                tokio::time::sleep(Duration::from_millis(100)).await;
            })
        });
        let ev = events_until(&front, |e| e.len() >= 2);
        let Event::Call(id, _) = &ev[0] else {
            panic!("{ev:?}")
        };
        let id = *id;
        assert!(front.send_message(id, b"partial"));
        reset_tx.send(()).unwrap();
        let ev = events_until(&front, |e| !e.is_empty());
        assert!(matches!(ev[..], [Event::Cancelled(i)] if i == id), "{ev:?}");
        assert!(!front.send_message(id, b"x"));
        assert!(!front.finish(id, 0, "", None));
        h.join().unwrap();
    });
    assert_eq!(front.live_calls(), 0);
    assert!(
        front.drain(10).is_empty(),
        "one CANCELLED, nothing after it"
    );
}

#[test]
fn refusals_the_front_answers_itself() {
    let front = front_with(256, 1024);
    let port = front.port();
    let rt = rt();
    rt.block_on(async {
        let mut send = connect(port).await;
        // oversize: refused from the 5-byte prefix
        let a = unary(
            &mut send,
            grpc_request("/t.S/Unary"),
            &wire::frame_message(&[7; 1025]),
        )
        .await;
        assert_eq!(a.grpc_status().0, wire::RESOURCE_EXHAUSTED);
        // the largest allowed passes the front: answered by "Python" below
        // compressed
        let mut c = wire::frame_message(b"zz").to_vec();
        c[0] = 1;
        let a = unary(&mut send, grpc_request("/t.S/Unary"), &c).await;
        assert_eq!(a.grpc_status().0, wire::UNIMPLEMENTED);
        // two messages on a unary method
        let two = [wire::frame_message(b"1"), wire::frame_message(b"2")].concat();
        let a = unary(&mut send, grpc_request("/t.S/Unary"), &two).await;
        assert_eq!(
            a.grpc_status(),
            (
                wire::UNIMPLEMENTED,
                "more than one request message".to_owned()
            )
        );
        // a truncated message
        let a = unary(
            &mut send,
            grpc_request("/t.S/Unary"),
            &wire::frame_message(b"abc")[..6],
        )
        .await;
        assert_eq!(a.grpc_status().0, wire::INTERNAL);
        // not gRPC
        let mut req = grpc_request("/t.S/Unary");
        req.headers_mut()
            .insert("content-type", "application/json".parse().unwrap());
        let a = unary(&mut send, req, b"{}").await;
        assert_eq!(a.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        // not POST
        let mut req = grpc_request("/t.S/Unary");
        *req.method_mut() = http::Method::GET;
        let (resp, _) = send.send_request(req, true).unwrap();
        assert_eq!(resp.await.unwrap().status(), StatusCode::METHOD_NOT_ALLOWED);
        // a client-streaming method's oversize message ends the call
        let (resp, mut stream) = send.send_request(grpc_request(BIDI), false).unwrap();
        stream
            .send_data(wire::frame_message(&[1; 2000]), false)
            .unwrap();
        let a = read_answer(resp).await;
        assert_eq!(a.grpc_status().0, wire::RESOURCE_EXHAUSTED);
    });
    // the client-streaming call was opened, then cancelled for Python; none of the unary refusals reached Python
    let ev = events_until(&front, |e| e.len() >= 2);
    assert!(
        matches!(ev[..], [Event::Call(a, _), Event::Cancelled(b)] if a == b),
        "{ev:?}"
    );
    assert_eq!(front.live_calls(), 0);
}

#[test]
fn a_deadline_ends_the_call() {
    let front = front();
    let port = front.port();
    let rt = rt();
    let mut req = grpc_request("/t.S/Slow");
    req.headers_mut()
        .insert("grpc-timeout", "100m".parse().unwrap());
    let answer = std::thread::scope(|s| {
        let h = s.spawn(|| {
            rt.block_on(async {
                let mut send = connect(port).await;
                unary(&mut send, req, &wire::frame_message(b"q")).await
            })
        });
        let (id, _) = one_call(&front);
        let ev = events_until(&front, |e| !e.is_empty());
        assert!(matches!(ev[..], [Event::Cancelled(i)] if i == id), "{ev:?}");
        assert!(!front.finish(id, 0, "", Some(b"late")));
        h.join().unwrap()
    });
    assert_eq!(answer.grpc_status().0, wire::DEADLINE_EXCEEDED);
}

#[test]
fn many_streams_on_one_connection() {
    const N: usize = 600;
    let front = front_with(100, 1024);
    let port = front.port();
    let rt = rt();
    let answers = std::thread::scope(|s| {
        let h = s.spawn(|| {
            rt.block_on(async {
                let mut send = connect(port).await;
                // one call first: the client knows the server's SETTINGS (its stream limit) before the flood; earlier,
                // the streams past the limit are refused (REFUSED_STREAM, which grpc clients retry)
                let first = unary(
                    &mut send,
                    grpc_request("/t.S/Unary"),
                    &wire::frame_message(b"w"),
                )
                .await;
                assert_eq!(first.messages, vec![Bytes::from_static(b"w")]);
                let mut tasks = Vec::new();
                for i in 0..N {
                    let send = send.clone();
                    tasks.push(tokio::spawn(async move {
                        let mut send = send.ready().await.unwrap();
                        unary(
                            &mut send,
                            grpc_request("/t.S/Unary"),
                            &wire::frame_message(&(i as u32).to_be_bytes()),
                        )
                        .await
                    }));
                }
                let mut out = Vec::new();
                for t in tasks {
                    out.push(t.await.unwrap());
                }
                out
            })
        });
        let mut answered = 0;
        let until = Instant::now() + Duration::from_secs(20);
        while answered < N + 1 {
            assert!(Instant::now() < until);
            for e in events_until(&front, |e| !e.is_empty()) {
                let Event::Call(id, start) = e else {
                    panic!("{e:?}")
                };
                assert!(front.finish(id, 0, "", start.request.as_deref()));
                answered += 1;
            }
        }
        h.join().unwrap()
    });
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(
            a.messages,
            vec![Bytes::copy_from_slice(&(i as u32).to_be_bytes())]
        );
    }
}

#[test]
fn a_dropped_connection_cancels_its_calls() {
    let front = front();
    let port = front.port();
    let rt = rt();
    let (id_a, id_b) = std::thread::scope(|s| {
        let (drop_tx, drop_rx) = std::sync::mpsc::channel::<()>();
        let h = s.spawn(|| {
            rt.block_on(async move {
                let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
                let (send, conn) = h2::client::handshake(tcp).await.unwrap();
                let conn = tokio::spawn(async move {
                    let _ = conn.await;
                });
                let mut send = send.ready().await.unwrap();
                let (_r1, mut s1) = send.send_request(grpc_request(BIDI), false).unwrap();
                s1.send_data(wire::frame_message(b""), false).unwrap();
                let (_r2, mut s2) = send.send_request(grpc_request("/t.S/Long"), false).unwrap();
                s2.send_data(wire::frame_message(b""), true).unwrap();
                tokio::task::spawn_blocking(move || drop_rx.recv())
                    .await
                    .unwrap()
                    .unwrap();
                conn.abort(); // the connection's socket closes (once the aborted task is dropped)
                let _ = conn.await;
                drop((send, s1, s2));
            })
        });
        let ev = events_until(&front, |e| {
            e.iter().filter(|e| matches!(e, Event::Call(..))).count() == 2
        });
        let ids: Vec<u64> = ev
            .iter()
            .filter_map(|e| match e {
                Event::Call(id, _) => Some(*id),
                _ => None,
            })
            .collect();
        drop_tx.send(()).unwrap();
        h.join().unwrap();
        (ids[0], ids[1])
    });
    let ev = events_until(&front, |e| {
        e.iter()
            .filter(|e| matches!(e, Event::Cancelled(_)))
            .count()
            == 2
    });
    let mut cancelled: Vec<u64> = ev
        .iter()
        .filter_map(|e| match e {
            Event::Cancelled(id) => Some(*id),
            _ => None,
        })
        .collect();
    cancelled.sort();
    assert_eq!(cancelled, vec![id_a.min(id_b), id_a.max(id_b)]);
    assert_eq!(front.live_calls(), 0);
}

#[test]
fn close_lets_in_flight_calls_finish_then_cancels_the_rest() {
    let front = front();
    let port = front.port();
    let rt = rt();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            rt.block_on(async {
                let mut send = connect(port).await;
                let (r1, mut s1) = send
                    .send_request(grpc_request("/t.S/Unary"), false)
                    .unwrap();
                s1.send_data(wire::frame_message(b"1"), true).unwrap();
                let (r2, mut s2) = send
                    .send_request(grpc_request("/t.S/Unary"), false)
                    .unwrap();
                s2.send_data(wire::frame_message(b"2"), true).unwrap();
                let a1 = read_answer(r1).await;
                let a2 = r2.await; // never answered: reset or the connection closed
                (a1, a2.is_err())
            })
        });
        let ev = events_until(&front, |e| e.len() == 2);
        // by request ("1" first): the worker may start the two streams' tasks in either order
        let mut ids: Vec<(Vec<u8>, u64)> = ev
            .iter()
            .map(|e| match e {
                Event::Call(id, start) => (start.request.as_ref().unwrap().to_vec(), *id),
                e => panic!("{e:?}"),
            })
            .collect();
        ids.sort();
        let ids: Vec<u64> = ids.into_iter().map(|(_, id)| id).collect();
        // the first is answered during the grace period, from another thread
        let front = &front;
        let first = ids[0];
        s.spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            assert!(front.finish(first, 0, "", Some(b"ok")));
        });
        let t0 = Instant::now();
        front.close(Duration::from_millis(500));
        assert!(t0.elapsed() < Duration::from_secs(3));
        let ev = front.drain(10);
        assert!(
            matches!(ev[..], [Event::Cancelled(i)] if i == ids[1]),
            "{ev:?}"
        );
        let (a1, second_failed) = h.join().unwrap();
        assert_eq!(a1.messages, vec![Bytes::from_static(b"ok")]);
        assert!(second_failed);
    });
    // closed: nothing listens
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
    front.close(Duration::ZERO); // idempotent
}

#[test]
fn dropping_an_open_front_returns_at_once() {
    let front = front();
    let port = front.port();
    let rt = rt();
    let (_send, _r, _s) = rt.block_on(async {
        let mut send = connect(port).await;
        let (r, mut s) = send.send_request(grpc_request(BIDI), false).unwrap();
        s.send_data(wire::frame_message(b""), false).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await; // the client's connection task sends them
        (send, r, s)
    });
    let _ = events_until(&front, |e| !e.is_empty());
    let t0 = Instant::now();
    drop(front);
    assert!(t0.elapsed() < Duration::from_secs(1));
}

#[test]
fn a_taken_port_is_an_error() {
    let a = front();
    let config = FrontConfig {
        client_streaming: HashSet::new(),
        max_concurrent_streams: 1,
        max_message_bytes: 1,
        worker_threads: 1,
        handshake_timeout: Duration::from_millis(300),
        tls: None,
    };
    let e = Front::bind("127.0.0.1", a.port(), config)
        .err()
        .expect("taken");
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
}

#[test]
fn a_client_that_does_not_read_is_held_back_by_its_window() {
    const N: usize = 300;
    const FIRST: usize = 1;
    const ANSWER: usize = 64 * 1024; // one fills the client's 64 KiB stream window
    const SIZE: usize = 16 * 1024;
    let front = front_with(256, 1 << 20);
    let port = front.port();
    let rt = rt();
    let answer = std::thread::scope(|s| {
        let (read_tx, read_rx) = std::sync::mpsc::channel::<()>();
        let (rest_tx, rest_rx) = std::sync::mpsc::channel::<()>();
        let h = s.spawn(|| {
            rt.block_on(async move {
                let mut send = connect(port).await;
                let (resp, mut stream) = send.send_request(grpc_request(BIDI), false).unwrap();
                tokio::spawn(async move {
                    let mut rest_rx = Some(rest_rx);
                    for i in 0..N {
                        if let Some(rest_rx) = rest_rx.take_if(|_| i == FIRST) {
                            // the rest once the answers to the first fill this client's window
                            tokio::task::spawn_blocking(move || rest_rx.recv())
                                .await
                                .unwrap()
                                .unwrap();
                        }
                        stream
                            .send_data(wire::frame_message(&[i as u8; SIZE]), i == N - 1)
                            .unwrap();
                        // h2 buffers what the window does not let out: wait for capacity as a client does
                        stream.reserve_capacity(SIZE);
                        while stream.capacity() == 0 {
                            match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
                                Some(Ok(_)) => {}
                                _ => return,
                            }
                        }
                    }
                });
                tokio::task::spawn_blocking(move || read_rx.recv())
                    .await
                    .unwrap()
                    .unwrap();
                read_answer(resp).await
            })
        });
        let id = std::cell::Cell::new(0);
        let messages = std::cell::Cell::new(0);
        let answer = |front: &Front, events: Vec<Event>| -> bool {
            let mut half_closed = false;
            for e in events {
                match e {
                    Event::Call(i, _) => id.set(i),
                    Event::Message(i, m) => {
                        assert_eq!(i, id.get());
                        assert_eq!(m.len(), SIZE);
                        messages.set(messages.get() + 1);
                        assert!(front.send_message(id.get(), &[m[0]; ANSWER]));
                    }
                    Event::HalfClose(_) => half_closed = true,
                    e => panic!("{e:?}"),
                }
            }
            half_closed
        };
        // the first request answered (the answer fills the client's window), then the rest of the request comes
        while messages.get() < FIRST {
            let ev = events_until(&front, |e| !e.is_empty());
            assert!(!answer(&front, ev));
        }
        std::thread::sleep(Duration::from_millis(100));
        rest_tx.send(()).unwrap();
        // nothing more comes while the answers wait for the client's window
        let mut quiet_since = Instant::now();
        while quiet_since.elapsed() < Duration::from_millis(300) {
            std::thread::sleep(Duration::from_millis(20));
            let ev = front.drain(1024);
            if !ev.is_empty() {
                quiet_since = Instant::now();
                assert!(
                    !answer(&front, ev),
                    "the whole request went through a client that reads nothing"
                );
            }
        }
        assert!(
            messages.get() == FIRST,
            "{} requests read while the answers waited",
            messages.get()
        );
        read_tx.send(()).unwrap();
        loop {
            let ev = events_until(&front, |e| !e.is_empty());
            if answer(&front, ev) {
                break;
            }
        }
        assert_eq!(messages.get(), N);
        assert!(front.finish(id.get(), 0, "", None));
        h.join().unwrap()
    });
    assert_eq!(answer.messages.len(), N);
    for (i, m) in answer.messages.iter().enumerate() {
        assert_eq!(m.as_ref(), &[i as u8; ANSWER][..]);
    }
    assert_eq!(answer.grpc_status(), (0, String::new()));
}

#[test]
fn a_connection_that_never_speaks_http2_is_closed_after_the_handshake_timeout() {
    use std::io::Read;
    let front = front();
    let mut silent = std::net::TcpStream::connect(("127.0.0.1", front.port())).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let t0 = Instant::now();
    let mut buf = [0u8; 1024];
    // the server's SETTINGS may come first; then EOF once the 300 ms pass without a preface
    loop {
        match silent.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("still open after {:?}: {e}", t0.elapsed()),
        }
    }
    assert!(
        t0.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t0.elapsed()
    );
    // a client that speaks is served as before
    let rt = rt();
    rt.block_on(async {
        let _send = connect(front.port()).await;
    });
}

#[test]
fn the_longest_timeout_is_served_like_any_other() {
    let front = front();
    let port = front.port();
    let rt = rt();
    let mut req = grpc_request("/t.S/Unary");
    req.headers_mut()
        .insert("grpc-timeout", "99999999H".parse().unwrap());
    let answer = std::thread::scope(|s| {
        let h = s.spawn(|| {
            rt.block_on(async {
                let mut send = connect(port).await;
                unary(&mut send, req, &wire::frame_message(b"q")).await
            })
        });
        let (id, start) = one_call(&front);
        assert_eq!(start.timeout_s, Some(99999999.0 * 3600.0));
        std::thread::sleep(Duration::from_millis(50));
        assert!(front.finish(id, 0, "", Some(b"a")));
        h.join().unwrap()
    });
    assert_eq!(answer.messages, vec![Bytes::from_static(b"a")]);
}
