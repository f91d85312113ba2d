//! TLS and plaintext on the front's one port, against a real tokio-rustls client (trusting tests/certs/ca.pem, the
//! CA of tests/certs/server.pem for localhost and 127.0.0.1): TLS 1.3 and 1.2 unary round trips with the real
//! client's peer address, plaintext beside them, a stalled TLS handshake dropped at the handshake timeout, garbage
//! first bytes closed, and PEM errors that name the PEM at fault.

#![cfg(unix)]

mod common;

use common::*;
use http::StatusCode;
use rmq_grpc::{wire, Front, FrontConfig, TlsConfig, TlsError, HANDSHAKE_TIMEOUT};
use std::collections::HashSet;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpStream;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, ClientConfig, RootCertStore, SupportedProtocolVersion};
use tokio_rustls::TlsConnector;

const CA: &[u8] = include_bytes!("certs/ca.pem");
const CA_KEY: &[u8] = include_bytes!("certs/ca-key.pem");
const CERT: &[u8] = include_bytes!("certs/server.pem");
const KEY: &[u8] = include_bytes!("certs/server-key.pem");

fn tls_front(handshake_timeout: Duration) -> Front {
    let config = FrontConfig {
        client_streaming: HashSet::new(),
        max_concurrent_streams: 16,
        max_message_bytes: 1024,
        worker_threads: 1,
        handshake_timeout,
        tls: Some(TlsConfig::from_pem(CERT, KEY).unwrap()),
    };
    Front::bind("127.0.0.1", 0, config).unwrap()
}

fn connector(version: &'static SupportedProtocolVersion) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(CA).unwrap())
        .unwrap();
    let mut config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_protocol_versions(&[version])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec()];
    TlsConnector::from(Arc::new(config))
}

/// One unary call over `tls` (None: plaintext) answered by this thread as the loop; returns the answer's message
/// and the peer the front saw, with the client's own local port.
fn round_trip(front: &Front, tls: Option<TlsConnector>) -> (Vec<u8>, String, u16) {
    let port = front.port();
    let rt = rt();
    std::thread::scope(|s| {
        let h = s.spawn(|| {
            rt.block_on(async {
                let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
                let local = tcp.local_addr().unwrap().port();
                let mut send = match tls {
                    Some(tls) => {
                        let name = ServerName::try_from("localhost").unwrap();
                        let stream = tls.connect(name, tcp).await.unwrap();
                        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
                        h2_over(stream).await
                    }
                    None => h2_over(tcp).await,
                };
                let answer = unary(
                    &mut send,
                    grpc_request("/t.S/Unary"),
                    &wire::frame_message(b"ping"),
                )
                .await;
                assert_eq!(answer.status, StatusCode::OK);
                assert_eq!(answer.grpc_status(), (0, String::new()));
                (answer.messages.concat(), local)
            })
        });
        let (id, start) = one_call(front);
        assert_eq!(start.request.as_deref(), Some(&b"ping"[..]));
        assert!(front.finish(id, 0, "", Some(b"pong")));
        let (message, local) = h.join().unwrap();
        (message, start.peer, local)
    })
}

#[test]
fn tls_and_plaintext_on_one_port_with_the_real_peer() {
    let front = tls_front(HANDSHAKE_TIMEOUT);
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let (message, peer, local) = round_trip(&front, Some(connector(version)));
        assert_eq!(message, b"pong");
        assert_eq!(peer, format!("ipv4:127.0.0.1:{local}"));
    }
    let (message, peer, local) = round_trip(&front, None);
    assert_eq!(message, b"pong");
    assert_eq!(peer, format!("ipv4:127.0.0.1:{local}"));
    assert_eq!(front.live_calls(), 0);
}

/// Reads until the front closes the connection; how long that took (panics after 5 s).
fn until_closed(sock: &mut std::net::TcpStream) -> Duration {
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t0 = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match sock.read(&mut buf) {
            Ok(0) => return t0.elapsed(),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return t0.elapsed(),
            Err(e) => panic!("still open after {:?}: {e}", t0.elapsed()),
        }
    }
}

#[test]
fn a_stalled_tls_handshake_is_dropped_at_the_handshake_timeout() {
    let front = tls_front(Duration::from_millis(300));
    let mut stalled = std::net::TcpStream::connect(("127.0.0.1", front.port())).unwrap();
    // a TLS record header announcing a ClientHello that never comes
    stalled.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00]).unwrap();
    let took = until_closed(&mut stalled);
    assert!(took >= Duration::from_millis(250), "{took:?}");
    // the port still serves both
    let (message, _, _) = round_trip(&front, Some(connector(&rustls::version::TLS13)));
    assert_eq!(message, b"pong");
}

#[test]
fn garbage_is_closed_and_the_port_goes_on_serving() {
    // a handshake timeout far longer than the wait below: the front closes these itself
    let front = tls_front(HANDSHAKE_TIMEOUT);
    // neither a TLS record nor the HTTP/2 preface: the HTTP/2 handshake refuses it
    let mut http1 = std::net::TcpStream::connect(("127.0.0.1", front.port())).unwrap();
    http1
        .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n")
        .unwrap();
    assert!(until_closed(&mut http1) < Duration::from_secs(2));
    // 0x16 then no TLS: rustls refuses the record (an alert, then the close)
    let mut bad_tls = std::net::TcpStream::connect(("127.0.0.1", front.port())).unwrap();
    bad_tls
        .write_all(&[0x16, 0xff, 0xff, 0x00, 0x05, 1, 2, 3, 4, 5])
        .unwrap();
    assert!(until_closed(&mut bad_tls) < Duration::from_secs(2));
    // a client that connects and leaves before its first byte
    drop(std::net::TcpStream::connect(("127.0.0.1", front.port())).unwrap());
    let (message, _, _) = round_trip(&front, None);
    assert_eq!(message, b"pong");
    let (message, _, _) = round_trip(&front, Some(connector(&rustls::version::TLS12)));
    assert_eq!(message, b"pong");
}

#[test]
fn pem_errors_name_the_pem_at_fault() {
    let err = |cert: &[u8], key: &[u8]| TlsConfig::from_pem(cert, key).err().unwrap();
    assert!(matches!(err(b"", KEY), TlsError::Cert(_)));
    assert!(
        matches!(err(KEY, KEY), TlsError::Cert(_)),
        "a key is no certificate"
    );
    let truncated = &CERT[..CERT.len() / 2];
    assert!(matches!(err(truncated, KEY), TlsError::Cert(_)));
    assert!(matches!(err(CERT, b""), TlsError::Key(_)));
    assert!(
        matches!(err(CERT, CERT), TlsError::Key(_)),
        "a certificate is no key"
    );
    let garbled = String::from_utf8(CA_KEY.to_vec())
        .unwrap()
        .replacen("MIG", "MIH", 1);
    assert!(matches!(err(CERT, garbled.as_bytes()), TlsError::Key(_)));
    assert_eq!(err(CERT, CA_KEY), TlsError::Mismatch);
    assert!(err(CERT, CA_KEY)
        .to_string()
        .contains("not the certificate's key"));
    // the CA's certificate with the CA's key (PKCS#8) is a usable pair; the server's (SEC1) too
    assert!(TlsConfig::from_pem(CA, CA_KEY).is_ok());
    assert!(TlsConfig::from_pem(CERT, KEY).is_ok());
}
