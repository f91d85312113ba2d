//! gRPC-over-HTTP/2 wire details the front needs, free of I/O: the 5-byte length-prefixed message framing (a
//! request's messages may be split across DATA frames, or several share one), `grpc-timeout` parsing, the
//! percent-encoding of `grpc-message`, base64 of `-bin` metadata values, and grpc's `peer()` text.

use bytes::{Buf, Bytes, BytesMut};
use std::net::SocketAddr;

/// gRPC status codes the front answers itself.
pub const OK: u32 = 0;
pub const CANCELLED: u32 = 1;
pub const DEADLINE_EXCEEDED: u32 = 4;
pub const RESOURCE_EXHAUSTED: u32 = 8;
pub const UNIMPLEMENTED: u32 = 12;
pub const INTERNAL: u32 = 13;

/// Why a request's bytes cannot be handed on: the gRPC status and message the front answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: u32,
    pub message: String,
}

/// Splits a request body into gRPC messages: feed DATA chunks with `push`, take complete messages with `next`.
pub struct Decoder {
    buf: BytesMut,
    max_message_bytes: usize,
}

impl Decoder {
    pub fn new(max_message_bytes: usize) -> Self {
        Decoder {
            buf: BytesMut::new(),
            max_message_bytes,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// Whether bytes of an incomplete message are left (at END_STREAM: a truncated request).
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty()
    }

    /// The next complete message, None while one is incomplete, or the refusal of a compressed or oversize one
    /// (refused as soon as its 5-byte prefix is in, before its body is buffered).
    pub fn next_message(&mut self) -> Option<Result<Bytes, Refusal>> {
        if self.buf.len() < 5 {
            return None;
        }
        let flag = self.buf[0];
        let len = u32::from_be_bytes([self.buf[1], self.buf[2], self.buf[3], self.buf[4]]) as usize;
        if flag & 1 != 0 {
            return Some(Err(Refusal {
                code: UNIMPLEMENTED,
                message:
                    "compressed request messages are not supported (grpc-accept-encoding: identity)"
                        .into(),
            }));
        }
        if len > self.max_message_bytes {
            return Some(Err(Refusal {
                code: RESOURCE_EXHAUSTED,
                message: format!(
                    "Received message larger than max ({len} vs. {})",
                    self.max_message_bytes
                ),
            }));
        }
        if self.buf.len() < 5 + len {
            self.buf.reserve(5 + len - self.buf.len());
            return None;
        }
        self.buf.advance(5);
        Some(Ok(self.buf.split_to(len).freeze()))
    }
}

/// One response message with its 5-byte prefix (uncompressed), ready for a DATA frame.
pub fn frame_message(data: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + data.len());
    out.extend_from_slice(&[0]);
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(data);
    out.freeze()
}

/// The `grpc-timeout` header in seconds: up to 8 ASCII digits then a unit (H M S m u n); None when malformed.
pub fn parse_timeout(value: &[u8]) -> Option<f64> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: f64 = std::str::from_utf8(digits).ok()?.parse::<u64>().ok()? as f64;
    let scale = match unit[0] {
        b'H' => 3600.0,
        b'M' => 60.0,
        b'S' => 1.0,
        b'm' => 1e-3,
        b'u' => 1e-6,
        b'n' => 1e-9,
        _ => return None,
    };
    Some(n * scale)
}

/// `grpc-message` as gRPC requires it: bytes outside printable ASCII, and '%', as %XX of the UTF-8.
pub fn percent_encode(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for &b in message.as_bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A `-bin` metadata value: base64, padded or not (grpc clients send it unpadded); None when not base64.
pub fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    fn sextet(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        } as u32)
    }
    let text = match text.iter().position(|&c| c == b'=') {
        Some(p) if text[p..].iter().all(|&c| c == b'=') && text[p..].len() <= 2 => &text[..p],
        Some(_) => return None,
        None => text,
    };
    if text.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for chunk in text.chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= sextet(c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// The peer as grpc's `context.peer()` gives it: `ipv4:1.2.3.4:PORT`, `ipv6:[::1]:PORT` (an IPv4-mapped IPv6
/// address as its IPv4 address, as grpc normalises it).
pub fn peer_text(addr: SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => format!("ipv4:{}:{}", a.ip(), a.port()),
        SocketAddr::V6(a) => match a.ip().to_ipv4_mapped() {
            Some(v4) => format!("ipv4:{}:{}", v4, a.port()),
            None => format!("ipv6:[{}]:{}", a.ip(), a.port()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoder_splits_and_joins_chunks() {
        let mut d = Decoder::new(100);
        let a = frame_message(b"hello");
        let b = frame_message(b"");
        let all = [a.as_ref(), b.as_ref()].concat();
        d.push(&all[..3]);
        assert!(d.next_message().is_none());
        d.push(&all[3..8]);
        assert!(d.next_message().is_none());
        d.push(&all[8..]);
        assert_eq!(d.next_message(), Some(Ok(Bytes::from_static(b"hello"))));
        assert_eq!(d.next_message(), Some(Ok(Bytes::new())));
        assert!(d.next_message().is_none());
        assert!(!d.has_partial());
    }

    #[test]
    fn decoder_refuses_oversize_and_compressed_from_the_prefix() {
        let mut d = Decoder::new(4);
        d.push(&[0, 0, 0, 0, 5]);
        assert_eq!(
            d.next_message().unwrap().unwrap_err().code,
            RESOURCE_EXHAUSTED
        );
        let mut d = Decoder::new(4);
        d.push(&[1, 0, 0, 0, 1]);
        assert_eq!(d.next_message().unwrap().unwrap_err().code, UNIMPLEMENTED);
    }

    #[test]
    fn timeouts_in_every_unit() {
        assert_eq!(parse_timeout(b"2H"), Some(7200.0));
        assert_eq!(parse_timeout(b"3M"), Some(180.0));
        assert_eq!(parse_timeout(b"5S"), Some(5.0));
        assert_eq!(parse_timeout(b"250m"), Some(0.25));
        assert_eq!(parse_timeout(b"1500u"), Some(0.0015));
        assert!((parse_timeout(b"99999999n").unwrap() - 0.099999999).abs() < 1e-12);
        assert_eq!(parse_timeout(b"123456789S"), None);
        assert_eq!(parse_timeout(b"S"), None);
        assert_eq!(parse_timeout(b"10x"), None);
        assert_eq!(parse_timeout(b""), None);
        assert_eq!(parse_timeout(b"-1S"), None);
    }

    #[test]
    fn percent_encoding_keeps_printable_ascii() {
        assert_eq!(percent_encode("no topic: t1"), "no topic: t1");
        assert_eq!(percent_encode("50% ok\n"), "50%25 ok%0A");
        assert_eq!(percent_encode("é"), "%C3%A9");
    }

    #[test]
    fn base64_padded_and_unpadded() {
        assert_eq!(base64_decode(b"aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode(b"aGVsbG8").unwrap(), b"hello");
        assert_eq!(base64_decode(b"AAEC/w").unwrap(), [0, 1, 2, 255]);
        assert_eq!(base64_decode(b"").unwrap(), b"");
        assert!(base64_decode(b"a").is_none());
        assert!(base64_decode(b"a=b").is_none());
        assert!(base64_decode(b"**").is_none());
    }

    #[test]
    fn peers_as_grpc_writes_them() {
        assert_eq!(
            peer_text("127.0.0.1:5".parse().unwrap()),
            "ipv4:127.0.0.1:5"
        );
        assert_eq!(peer_text("[::1]:6".parse().unwrap()), "ipv6:[::1]:6");
        assert_eq!(
            peer_text("[::ffff:10.0.0.1]:7".parse().unwrap()),
            "ipv4:10.0.0.1:7"
        );
    }
}
