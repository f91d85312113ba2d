//! The CommitLog record: layout constants, encode, decode (v1 and v2 magic, IPv4/IPv6 hosts), the properties
//! string, the tags hash and the offset msg id.
//!
//! Format (big-endian; offsets for IPv4 hosts):
//!   0 TOTALSIZE i32 · 4 MAGIC i32 (v1 0xDAA320A7, v2 0xDAA320AB) · 8 BODYCRC i32 (crc32 & 0x7FFFFFFF) · 12 QUEUEID i32
//!   · 16 FLAG i32 · 20 QUEUEOFFSET i64 · 28 PHYSICALOFFSET i64 · 36 SYSFLAG i32 · 40 BORNTIMESTAMP i64
//!   · 48 BORNHOST (4|16 ip + i32 port) · STORETIMESTAMP i64 · STOREHOST (4|16 + 4) · RECONSUMETIMES i32
//!   · PREPARED_TX_OFFSET i64 · BODYLEN i32 + body · TOPICLEN (u8 v1 | i16 v2) + topic · PROPLEN i16 + properties.
//!   BLANK (end of a mapped file): TOTALSIZE = bytes left in the file, MAGIC 0xCBD43194; the rest stays zero.
//!
//! Invariants:
//!   1. A record decodes only if its magic is v1/v2 and every length fits and adds up to exactly TOTALSIZE.
//!   2. The engine writes v1 only (topics ≤ 127 bytes); v2 is read.
//!   3. Properties: `name \x01 value \x02` per entry; parsing follows `MessageDecoder.string2messageProperties`.
//!   4. tags hash = Java `String.hashCode` over UTF-16 code units, int32 wrap-around.
//!
//! Decisions where the contract is silent (the Python twin matches them):
//!   * IPv6 hosts are rendered with Rust's `Ipv6Addr` Display (RFC 5952, like `socket.inet_ntop`).
//!   * Invalid UTF-8 in topics/properties decodes with U+FFFD replacement (maximal-subpart, like Python "replace").
//!   * BODYCRC is not checked by `decode_record` (only recovery checks it, when `check_crc_on_recover`).
//!
//! Thread-safety: pure functions.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub const MAGIC_V1: i32 = 0xDAA320A7_u32 as i32;
pub const MAGIC_V2: i32 = 0xDAA320AB_u32 as i32;
pub const BLANK_MAGIC: i32 = 0xCBD43194_u32 as i32;
/// `END_FILE_MIN_BLANK_LENGTH`: a record is written only if `len + 8 <= bytes left`.
pub const END_FILE_MIN_BLANK_LENGTH: usize = 8;

pub const TOTALSIZE_POSITION: usize = 0;
pub const MAGIC_POSITION: usize = 4;
pub const BODYCRC_POSITION: usize = 8;
pub const QUEUEID_POSITION: usize = 12;
pub const FLAG_POSITION: usize = 16;
pub const QUEUE_OFFSET_POSITION: usize = 20;
pub const PHY_POS_POSITION: usize = 28;
pub const SYSFLAG_POSITION: usize = 36;
pub const BORN_TIMESTAMP_POSITION: usize = 40;
pub const BORNHOST_POSITION: usize = 48;

pub const IPV4_HOST_LEN: usize = 8;
pub const IPV6_HOST_LEN: usize = 20;
/// The fixed part of a v1 record with IPv4 hosts and empty body/topic/properties.
pub const MIN_RECORD_LEN_V1_IPV4: usize = 91;

pub const COMPRESSED_FLAG: i32 = 0x1;
pub const TRANSACTION_TYPE_MASK: i32 = 0xC;
pub const TRANSACTION_NOT_TYPE: i32 = 0x0;
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
pub const BORNHOST_V6_FLAG: i32 = 0x10;
pub const STOREHOSTADDRESS_V6_FLAG: i32 = 0x20;
/// The compression type: SYSFLAG bits 8..10 (Java's `COMPRESSION_TYPE_COMPARATOR`). Two views of ZLIB, two names:
pub const COMPRESSION_TYPE_MASK: i32 = 0x700;
pub const COMPRESSION_TYPE_SHIFT: u32 = 8;
/// ZLIB in the sys flag's bits (Java's `MessageSysFlag.COMPRESSION_ZLIB_TYPE`).
pub const SYSFLAG_COMPRESSION_ZLIB: i32 = 0x300;
/// ZLIB's type code once shifted down (`CompressionType.ZLIB`); code 0 (legacy) is ZLIB too.
pub const COMPRESSION_CODE_ZLIB: i32 = 3;

/// The compression type code of a sys flag (`COMPRESSION_CODE_ZLIB`, or 0: the legacy default, also ZLIB).
#[inline]
pub fn compression_type(sys_flag: i32) -> i32 {
    (sys_flag & COMPRESSION_TYPE_MASK) >> COMPRESSION_TYPE_SHIFT
}

pub const NAME_VALUE_SEPARATOR: u8 = 1;
pub const PROPERTY_SEPARATOR: u8 = 2;
/// Encoded properties above this are PROPERTIES_SIZE_EXCEEDED (Short.MAX_VALUE).
pub const MAX_PROPERTIES_SIZE: usize = 32767;
/// 4.9 topics: one length byte, at most 127 chars.
pub const MAX_TOPIC_LEN_V1: usize = 127;
pub const PROPERTY_TAGS: &[u8] = b"TAGS";

/// A born/store host: ip + port (RocketMQ writes the port as an int32).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Host {
    pub ip: IpAddr,
    pub port: i32,
}

impl Host {
    pub const fn v4(ip: [u8; 4], port: i32) -> Host {
        Host {
            ip: IpAddr::V4(Ipv4Addr::new(ip[0], ip[1], ip[2], ip[3])),
            port,
        }
    }

    /// Parses an ip literal; IPv6 iff it contains ':' (the contract's rule), no name resolution.
    pub fn parse(ip: &str, port: i64) -> Option<Host> {
        let port = i32::try_from(port).ok()?;
        let ip: IpAddr = if ip.contains(':') {
            IpAddr::V6(ip.parse::<Ipv6Addr>().ok()?)
        } else {
            IpAddr::V4(ip.parse::<Ipv4Addr>().ok()?)
        };
        Some(Host { ip, port })
    }

    #[inline]
    pub fn is_v6(&self) -> bool {
        self.ip.is_ipv6()
    }

    #[inline]
    pub fn encoded_len(&self) -> usize {
        if self.is_v6() {
            IPV6_HOST_LEN
        } else {
            IPV4_HOST_LEN
        }
    }

    /// Writes ip + port; `dst` must hold `encoded_len()` bytes. Returns the bytes written.
    #[inline]
    pub fn encode(&self, dst: &mut [u8]) -> usize {
        match self.ip {
            IpAddr::V4(v4) => {
                dst[0..4].copy_from_slice(&v4.octets());
                dst[4..8].copy_from_slice(&self.port.to_be_bytes());
                IPV4_HOST_LEN
            }
            IpAddr::V6(v6) => {
                dst[0..16].copy_from_slice(&v6.octets());
                dst[16..20].copy_from_slice(&self.port.to_be_bytes());
                IPV6_HOST_LEN
            }
        }
    }

    /// Reads ip + port from the front of `src` (16-byte ip when `v6`).
    #[inline]
    pub fn decode(src: &[u8], v6: bool) -> Host {
        if v6 {
            let ip: [u8; 16] = src[0..16].try_into().unwrap();
            Host {
                ip: IpAddr::V6(Ipv6Addr::from(ip)),
                port: be_i32(src, 16),
            }
        } else {
            let ip: [u8; 4] = src[0..4].try_into().unwrap();
            Host {
                ip: IpAddr::V4(Ipv4Addr::from(ip)),
                port: be_i32(src, 4),
            }
        }
    }
}

#[inline]
pub fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

#[inline]
pub fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

#[inline]
pub fn body_crc(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// `MessageExtEncoder.calMsgLength` for a v1 record.
#[inline]
pub fn record_len_v1(
    body_len: usize,
    topic_len: usize,
    props_len: usize,
    born_host_len: usize,
    store_host_len: usize,
) -> usize {
    4 + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + born_host_len
        + 8
        + store_host_len
        + 4
        + 8
        + 4
        + body_len
        + 1
        + topic_len
        + 2
        + props_len
}

/// Byte position of STORETIMESTAMP in a record with this sys flag.
#[inline]
pub fn store_timestamp_position(sys_flag: i32) -> usize {
    BORNHOST_POSITION
        + if sys_flag & BORNHOST_V6_FLAG != 0 {
            IPV6_HOST_LEN
        } else {
            IPV4_HOST_LEN
        }
}

/// The STORETIMESTAMP of the last whole record of concatenated records (a pull body), 0 when there is none.
/// Records are walked by TOTALSIZE while 4 bytes can be read and it is positive; the first record that runs past the
/// end stops the walk; 0 also when the last whole record is too short to hold its sys flag and store timestamp.
/// The broker's disk-fall-behind time (4.9's `readGetMessageResult`) reads it per pull.
pub fn last_store_timestamp(buf: &[u8]) -> i64 {
    let n = buf.len();
    let (mut pos, mut last) = (0usize, None);
    while pos + 4 <= n {
        let size = be_i32(buf, pos + TOTALSIZE_POSITION);
        if size <= 0 || pos + size as usize > n {
            break;
        }
        last = Some(pos);
        pos += size as usize;
    }
    let Some(last) = last else { return 0 };
    if last + SYSFLAG_POSITION + 4 > n {
        return 0;
    }
    let at = last + store_timestamp_position(be_i32(buf, last + SYSFLAG_POSITION));
    if at + 8 > n {
        return 0;
    }
    be_i64(buf, at)
}

/// Everything that goes into a v1 record.
#[derive(Debug, Clone, Copy)]
pub struct RecordFields<'a> {
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: &'a Host,
    pub store_timestamp: i64,
    pub store_host: &'a Host,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub topic: &'a [u8],
    pub properties: &'a [u8],
}

impl RecordFields<'_> {
    #[inline]
    pub fn encoded_len(&self) -> usize {
        record_len_v1(
            self.body.len(),
            self.topic.len(),
            self.properties.len(),
            self.born_host.encoded_len(),
            self.store_host.encoded_len(),
        )
    }
}

/// Encodes one v1 record into `dst` (exactly `f.encoded_len()` bytes) and returns its length.
/// Caller guarantees topic ≤ 255 and properties ≤ 32767 bytes; `body_crc` is computed here.
#[inline]
pub fn encode_record(dst: &mut [u8], f: &RecordFields<'_>) -> usize {
    let len = f.encoded_len();
    let dst = &mut dst[..len];
    dst[0..4].copy_from_slice(&(len as i32).to_be_bytes());
    dst[4..8].copy_from_slice(&MAGIC_V1.to_be_bytes());
    dst[8..12].copy_from_slice(&body_crc(f.body).to_be_bytes());
    dst[12..16].copy_from_slice(&f.queue_id.to_be_bytes());
    dst[16..20].copy_from_slice(&f.flag.to_be_bytes());
    dst[20..28].copy_from_slice(&f.queue_offset.to_be_bytes());
    dst[28..36].copy_from_slice(&f.physical_offset.to_be_bytes());
    dst[36..40].copy_from_slice(&f.sys_flag.to_be_bytes());
    dst[40..48].copy_from_slice(&f.born_timestamp.to_be_bytes());
    let mut p = BORNHOST_POSITION;
    p += f.born_host.encode(&mut dst[p..]);
    dst[p..p + 8].copy_from_slice(&f.store_timestamp.to_be_bytes());
    p += 8;
    p += f.store_host.encode(&mut dst[p..]);
    dst[p..p + 4].copy_from_slice(&f.reconsume_times.to_be_bytes());
    p += 4;
    dst[p..p + 8].copy_from_slice(&f.prepared_transaction_offset.to_be_bytes());
    p += 8;
    dst[p..p + 4].copy_from_slice(&(f.body.len() as i32).to_be_bytes());
    p += 4;
    dst[p..p + f.body.len()].copy_from_slice(f.body);
    p += f.body.len();
    dst[p] = f.topic.len() as u8;
    p += 1;
    dst[p..p + f.topic.len()].copy_from_slice(f.topic);
    p += f.topic.len();
    dst[p..p + 2].copy_from_slice(&(f.properties.len() as i16).to_be_bytes());
    p += 2;
    dst[p..p + f.properties.len()].copy_from_slice(f.properties);
    p += f.properties.len();
    debug_assert_eq!(p, len);
    len
}

/// Writes the 8-byte BLANK header (`remaining` = bytes left in the file, ≥ 8).
#[inline]
pub fn encode_blank(dst: &mut [u8], remaining: usize) {
    dst[0..4].copy_from_slice(&(remaining as i32).to_be_bytes());
    dst[4..8].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
}

/// Whether `record` (the `phy_size` bytes a ConsumeQueue unit points at) is the whole, intact record the unit
/// says: it decodes, its TOTALSIZE is all of `record`, its PHYSICALOFFSET, TOPIC, QUEUEID and QUEUEOFFSET are
/// the unit's queue's, and (`check_crc`) its BODYCRC matches its body. The read path serves nothing else. (The
/// format has no checksum over the other fields: a damaged property or host is not detectable.)
pub fn record_matches_unit(
    record: &[u8],
    phy_offset: i64,
    topic: &str,
    queue_id: i32,
    queue_offset: i64,
    check_crc: bool,
) -> bool {
    match decode_record(record) {
        Ok(r) => {
            r.total_size as usize == record.len()
                && r.physical_offset == phy_offset
                && r.topic == topic.as_bytes()
                && r.queue_id == queue_id
                && r.queue_offset == queue_offset
                && (!check_crc || body_crc(r.body) == r.body_crc)
        }
        Err(_) => false,
    }
}

/// One decoded record, borrowing its variable parts from the buffer.
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    pub total_size: i32,
    pub magic: i32,
    pub body_crc: i32,
    pub queue_id: i32,
    pub flag: i32,
    pub queue_offset: i64,
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: Host,
    pub store_timestamp: i64,
    pub store_host: Host,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: &'a [u8],
    pub topic: &'a [u8],
    pub properties: &'a [u8],
}

/// Decodes the record at the start of `buf` (which may hold more bytes after it).
/// Errors name what is wrong; BLANK is an error here (callers that accept BLANK check the magic first).
pub fn decode_record(buf: &[u8]) -> Result<Record<'_>, String> {
    if buf.len() < 8 {
        return Err(format!("truncated header: {} bytes left", buf.len()));
    }
    let total_size = be_i32(buf, TOTALSIZE_POSITION);
    let magic = be_i32(buf, MAGIC_POSITION);
    if magic == BLANK_MAGIC {
        return Err("BLANK (end-of-file padding) where a record was expected".into());
    }
    if magic != MAGIC_V1 && magic != MAGIC_V2 {
        return Err(format!("bad magic 0x{:08X}", magic as u32));
    }
    if total_size < MIN_RECORD_LEN_V1_IPV4 as i32 {
        return Err(format!("total size {total_size} below the fixed part"));
    }
    let total = total_size as usize;
    if total > buf.len() {
        return Err(format!(
            "truncated record: total size {total} but {} bytes left",
            buf.len()
        ));
    }
    let r = &buf[..total];
    let sys_flag = be_i32(r, SYSFLAG_POSITION);
    let born_len = if sys_flag & BORNHOST_V6_FLAG != 0 {
        IPV6_HOST_LEN
    } else {
        IPV4_HOST_LEN
    };
    let store_len = if sys_flag & STOREHOSTADDRESS_V6_FLAG != 0 {
        IPV6_HOST_LEN
    } else {
        IPV4_HOST_LEN
    };
    let mut p = BORNHOST_POSITION;
    // fixed fields up to and including BODYLEN
    let need = p + born_len + 8 + store_len + 4 + 8 + 4;
    if need > total {
        return Err(format!("total size {total} too small for the hosts"));
    }
    let born_host = Host::decode(&r[p..], born_len == IPV6_HOST_LEN);
    p += born_len;
    let store_timestamp = be_i64(r, p);
    p += 8;
    let store_host = Host::decode(&r[p..], store_len == IPV6_HOST_LEN);
    p += store_len;
    let reconsume_times = be_i32(r, p);
    p += 4;
    let prepared_transaction_offset = be_i64(r, p);
    p += 8;
    let body_len = be_i32(r, p);
    p += 4;
    if body_len < 0 || p + body_len as usize > total {
        return Err(format!(
            "body length {body_len} does not fit in total size {total}"
        ));
    }
    let body = &r[p..p + body_len as usize];
    p += body_len as usize;
    let topic_len_size = if magic == MAGIC_V2 { 2 } else { 1 };
    if p + topic_len_size > total {
        return Err("truncated topic length".into());
    }
    let topic_len = if magic == MAGIC_V2 {
        u16::from_be_bytes([r[p], r[p + 1]]) as usize
    } else {
        r[p] as usize
    };
    p += topic_len_size;
    if p + topic_len + 2 > total {
        return Err(format!(
            "topic length {topic_len} does not fit in total size {total}"
        ));
    }
    let topic = &r[p..p + topic_len];
    p += topic_len;
    let props_len = i16::from_be_bytes([r[p], r[p + 1]]);
    p += 2;
    if props_len < 0 || p + props_len as usize != total {
        return Err(format!(
            "lengths add up to {} but total size is {total}",
            p as i64 + props_len as i64
        ));
    }
    let properties = &r[p..p + props_len as usize];
    Ok(Record {
        total_size,
        magic,
        body_crc: be_i32(r, BODYCRC_POSITION),
        queue_id: be_i32(r, QUEUEID_POSITION),
        flag: be_i32(r, FLAG_POSITION),
        queue_offset: be_i64(r, QUEUE_OFFSET_POSITION),
        physical_offset: be_i64(r, PHY_POS_POSITION),
        sys_flag,
        born_timestamp: be_i64(r, BORN_TIMESTAMP_POSITION),
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic,
        properties,
    })
}

/// What recovery finds at a position (`CommitLog.checkMessageAndReturnSize`).
#[derive(Debug)]
pub enum RecordCheck<'a> {
    Record(Record<'a>),
    /// End-of-file padding: continue at the next file.
    Blank,
    /// Not a valid record (zeros, garbage, torn, bad CRC): the data ends here.
    Invalid(String),
}

pub fn check_record(buf: &[u8], check_crc: bool) -> RecordCheck<'_> {
    if buf.len() >= 8 && be_i32(buf, MAGIC_POSITION) == BLANK_MAGIC {
        return RecordCheck::Blank;
    }
    match decode_record(buf) {
        Ok(rec) => {
            if check_crc && body_crc(rec.body) != rec.body_crc {
                return RecordCheck::Invalid(format!(
                    "body CRC mismatch: stored {} computed {}",
                    rec.body_crc,
                    body_crc(rec.body)
                ));
            }
            RecordCheck::Record(rec)
        }
        Err(e) => RecordCheck::Invalid(e),
    }
}

#[inline]
pub fn is_tx_prepared_or_rollback(sys_flag: i32) -> bool {
    matches!(
        sys_flag & TRANSACTION_TYPE_MASK,
        TRANSACTION_PREPARED_TYPE | TRANSACTION_ROLLBACK_TYPE
    )
}

/// Topic rule of the contract (RocketMQ 4.9 `TopicValidator`): 1..=127 chars of `[A-Za-z0-9%|_-]`.
#[inline]
pub fn is_legal_topic(topic: &str) -> bool {
    !topic.is_empty()
        && topic.len() <= MAX_TOPIC_LEN_V1
        && topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-'))
}

/// Appends `name \x01 value \x02` for one entry.
#[inline]
pub fn encode_property_into(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.push(NAME_VALUE_SEPARATOR);
    out.extend_from_slice(value);
    out.push(PROPERTY_SEPARATOR);
}

/// Appends `name \x01 value` to the property string `out[start..]` as 4.9.7's `messageProperties2String` strings end
/// (no `\x02` after the last entry): a `\x02` first unless that string is empty or already ends with one.
pub fn append_property(out: &mut Vec<u8>, start: usize, name: &[u8], value: &[u8]) {
    if out.len() > start && out.last() != Some(&PROPERTY_SEPARATOR) {
        out.push(PROPERTY_SEPARATOR);
    }
    out.extend_from_slice(name);
    out.push(NAME_VALUE_SEPARATOR);
    out.extend_from_slice(value);
}

/// Whether `properties_to_string` (Python's `message_encoding`) writes `name \x01 value \x02` for this entry as it
/// is, rather than refusing it: a non-empty name without either separator, a non-empty value without `\x02`.
#[inline]
pub fn property_encodable(name: &[u8], value: &[u8]) -> bool {
    !name.is_empty()
        && !value.is_empty()
        && !name
            .iter()
            .any(|&b| b == NAME_VALUE_SEPARATOR || b == PROPERTY_SEPARATOR)
        && !value.contains(&PROPERTY_SEPARATOR)
}

/// Walks `string2messageProperties`: calls `f(name, value)` for each entry in order (duplicates included;
/// the caller lets later ones overwrite). Works on bytes: the separators are ASCII, so this equals splitting
/// the decoded string, and the "segment shorter than 3 chars" rule is implied by "separator at index > 0
/// and not last".
pub fn for_each_property<'a>(raw: &'a [u8], mut f: impl FnMut(&'a [u8], &'a [u8])) {
    for seg in raw.split(|&b| b == PROPERTY_SEPARATOR) {
        if seg.len() < 3 {
            continue;
        }
        if let Some(kv) = seg.iter().position(|&b| b == NAME_VALUE_SEPARATOR) {
            if kv > 0 && kv < seg.len() - 1 {
                f(&seg[..kv], &seg[kv + 1..]);
            }
        }
    }
}

/// The value of property `name` (the last occurrence wins, as a map would).
pub fn find_property<'a>(raw: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut found = None;
    for_each_property(raw, |k, v| {
        if k == name {
            found = Some(v);
        }
    });
    found
}

/// Decoded properties in first-appearance order, later duplicates overwriting earlier values.
pub fn decode_properties(raw: &[u8]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for_each_property(raw, |k, v| {
        let k = String::from_utf8_lossy(k).into_owned();
        let v = String::from_utf8_lossy(v).into_owned();
        match out.iter_mut().find(|(ek, _)| *ek == k) {
            Some(e) => e.1 = v,
            None => out.push((k, v)),
        }
    });
    out
}

/// Java `String.hashCode` over UTF-16 code units, int32 wrap.
pub fn tags_hash(tags: &str) -> i32 {
    let mut h: i32 = 0;
    for u in tags.encode_utf16() {
        h = h.wrapping_mul(31).wrapping_add(u as i32);
    }
    h
}

/// `java.util.HashMap`'s first table size, the chain length at which it treeifies a bin, and the table size below
/// which it doubles the table instead (Java 8+; 4.9.7 runs on Java 8 and later).
const JAVA_MAP_FIRST_TABLE: usize = 16;
const JAVA_MAP_TREEIFY_LENGTH: u32 = 9;
const JAVA_MAP_MIN_TREEIFY_TABLE: usize = 64;

/// The order in which a `java.util.HashMap<String, String>` made by `new HashMap<>()` iterates distinct names put
/// in the order of `hashes` (their `String.hashCode`, `tags_hash`): `order` (as long as `hashes`) is filled with
/// their indexes in that order. This is the order 4.9.7's `messageProperties2String` writes a map the broker filled
/// itself (a send's or a batch's properties: `string2messageProperties` of the header's, then CLUSTER, ...).
///
/// The table is 16 buckets, doubled when the entries exceed 3/4 of it, and doubled when a put makes a bucket's
/// chain 9 long while the table has fewer than 64 buckets (`treeifyBin`); a name's bucket is
/// `(h ^ (h >>> 16)) & (size - 1)`; iteration goes bucket by bucket, a bucket's names in the order they were put (a
/// resize splits chains keeping their order). Removing a name does not move the others, so the order of a map
/// that lost names is this order without them (the table keeps its size). Returns false when a put makes a
/// chain 9 long in a table of 64 or more: Java then turns that bin into a red-black tree, whose iteration order
/// (its root first, a later name after its tree parent) is not modelled; `order` is then the bucket order above.
pub fn java_hash_map_order(hashes: &[i32], order: &mut [usize]) -> bool {
    debug_assert_eq!(hashes.len(), order.len());
    let spread = |h: i32| (h as u32) ^ ((h as u32) >> 16);
    let mut table = JAVA_MAP_FIRST_TABLE;
    let mut exact = true;
    if hashes.len() >= JAVA_MAP_TREEIFY_LENGTH as usize {
        // chains can reach the treeify length: put the names one by one, counting each bucket's chain
        let mut chains = vec![0u32; table];
        let recount = |chains: &mut Vec<u32>, table: usize, upto: usize| {
            chains.clear();
            chains.resize(table, 0);
            for &h in &hashes[..upto] {
                chains[spread(h) as usize & (table - 1)] += 1;
            }
        };
        for (i, &h) in hashes.iter().enumerate() {
            let b = spread(h) as usize & (table - 1);
            chains[b] += 1;
            if chains[b] >= JAVA_MAP_TREEIFY_LENGTH {
                if table < JAVA_MAP_MIN_TREEIFY_TABLE {
                    table *= 2;
                    recount(&mut chains, table, i + 1);
                } else {
                    exact = false;
                }
            }
            if i + 1 > table / 4 * 3 {
                table *= 2;
                recount(&mut chains, table, i + 1);
            }
        }
    } else {
        while hashes.len() > table / 4 * 3 {
            table *= 2;
        }
    }
    let mask = table - 1;
    if hashes.len() <= 32 {
        // a send's few names: (bucket, index) keys sorted on the stack, no per-comparison hashing
        let mut keys = [0u32; 32];
        for (k, (i, &h)) in keys.iter_mut().zip(hashes.iter().enumerate()) {
            *k = ((spread(h) as usize & mask) as u32) << 5 | i as u32;
        }
        let keys = &mut keys[..hashes.len()];
        keys.sort_unstable(); // the keys are distinct: a bucket's names stay in put order
        for (o, k) in order.iter_mut().zip(keys.iter()) {
            *o = (k & 31) as usize;
        }
    } else {
        for (i, o) in order.iter_mut().enumerate() {
            *o = i;
        }
        order.sort_by_key(|&i| spread(hashes[i]) as usize & mask); // stable: a bucket's names in put order
    }
    exact
}

/// `tags_hash` of UTF-8 bytes (lossy for invalid UTF-8), with an ASCII fast path.
pub fn tags_hash_bytes(tags: &[u8]) -> i32 {
    if tags.is_ascii() {
        let mut h: i32 = 0;
        for &b in tags {
            h = h.wrapping_mul(31).wrapping_add(b as i32);
        }
        h
    } else {
        tags_hash(&String::from_utf8_lossy(tags))
    }
}

/// ConsumeQueue tagsCode of a record's properties: sign-extended hash of TAGS, 0 when absent.
#[inline]
pub fn tags_code_of_properties(properties: &[u8]) -> i64 {
    match find_property(properties, PROPERTY_TAGS) {
        Some(t) => tags_hash_bytes(t) as i64,
        None => 0,
    }
}

/// Offset msg id: uppercase hex of ip (4|16) + port i32 + commitlog offset i64.
pub fn create_offset_msg_id(host: &Host, offset: i64) -> String {
    let mut raw = [0u8; IPV6_HOST_LEN + 8];
    let n = host.encode(&mut raw);
    raw[n..n + 8].copy_from_slice(&offset.to_be_bytes());
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::with_capacity((n + 8) * 2);
    for &b in &raw[..n + 8] {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 0xF) as usize] as char);
    }
    s
}

// --- record accessors: one field of the record that starts at `rec[0]` (the record, or a buffer starting with it).
// The caller makes sure the bytes are there (`rec.len() >= MIN_RECORD_LEN_V1_IPV4` covers every fixed field of an
// IPv4 record; `store_timestamp_position(sys_flag) + 8` the store timestamp).

/// Bytes of the TOTALSIZE + MAGIC header that tells whether a record starts here.
pub const RECORD_HEADER_LEN: usize = 8;

#[inline]
pub fn record_total_size(rec: &[u8]) -> i32 {
    be_i32(rec, TOTALSIZE_POSITION)
}

#[inline]
pub fn record_magic(rec: &[u8]) -> i32 {
    be_i32(rec, MAGIC_POSITION)
}

/// A message record's magic (v1 or v2), not BLANK or anything else.
#[inline]
pub fn is_message_magic(magic: i32) -> bool {
    magic == MAGIC_V1 || magic == MAGIC_V2
}

#[inline]
pub fn record_queue_offset(rec: &[u8]) -> i64 {
    be_i64(rec, QUEUE_OFFSET_POSITION)
}

/// PHYSICALOFFSET: the record's own CommitLog offset (Java's `wroteOffset`).
#[inline]
pub fn record_physical_offset(rec: &[u8]) -> i64 {
    be_i64(rec, PHY_POS_POSITION)
}

#[inline]
pub fn record_sys_flag(rec: &[u8]) -> i32 {
    be_i32(rec, SYSFLAG_POSITION)
}

#[inline]
pub fn record_born_timestamp(rec: &[u8]) -> i64 {
    be_i64(rec, BORN_TIMESTAMP_POSITION)
}

#[inline]
pub fn record_born_host(rec: &[u8]) -> Host {
    Host::decode(
        &rec[BORNHOST_POSITION..],
        record_sys_flag(rec) & BORNHOST_V6_FLAG != 0,
    )
}

#[inline]
pub fn record_store_timestamp(rec: &[u8]) -> i64 {
    be_i64(rec, store_timestamp_position(record_sys_flag(rec)))
}

#[inline]
pub fn record_store_host(rec: &[u8]) -> Host {
    let sys_flag = record_sys_flag(rec);
    Host::decode(
        &rec[store_timestamp_position(sys_flag) + 8..],
        sys_flag & STOREHOSTADDRESS_V6_FLAG != 0,
    )
}

/// The offset msg id of the record (store host + PHYSICALOFFSET).
pub fn record_offset_msg_id(rec: &[u8]) -> String {
    create_offset_msg_id(&record_store_host(rec), record_physical_offset(rec))
}

/// Whether `rec` (exactly one record's bytes, read at CommitLog offset `phy_offset`) looks whole: TOTALSIZE equals
/// its length and is at least the fixed part, the magic is a message magic and PHYSICALOFFSET is `phy_offset`. No
/// CRC: what a reader beside a live writer checks before serving a record (a torn or not yet written one fails).
#[inline]
pub fn record_head_matches(rec: &[u8], phy_offset: i64) -> bool {
    rec.len() >= MIN_RECORD_LEN_V1_IPV4
        && record_total_size(rec) as i64 == rec.len() as i64
        && is_message_magic(record_magic(rec))
        && record_physical_offset(rec) == phy_offset
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java_order(names: &[&str]) -> (Vec<String>, bool) {
        let hashes: Vec<i32> = names.iter().map(|n| tags_hash(n)).collect();
        let mut order = vec![0; names.len()];
        let exact = java_hash_map_order(&hashes, &mut order);
        (order.iter().map(|&i| names[i].to_string()).collect(), exact)
    }

    /// `n` distinct names of one `String.hashCode` ("Aa" and "BB" hash alike).
    fn same_hash(n: u32) -> Vec<String> {
        (0..n)
            .map(|i| {
                (0..4)
                    .rev()
                    .map(|b| if i >> b & 1 == 0 { "Aa" } else { "BB" })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn java_hash_map_order_is_java_17s_hash_map() {
        // expected orders: `new HashMap<>()`, the names put in this order, `keySet()` (Java 17)
        let (o, exact) = java_order(&["TAGS", "WAIT", "CLUSTER"]);
        assert_eq!(
            (o.join(","), exact),
            ("CLUSTER,WAIT,TAGS".to_string(), true)
        );
        let many: Vec<String> = (0..14)
            .map(|i| format!("k{i}"))
            .chain(["UNIQ_KEY", "WAIT", "CLUSTER"].map(String::from))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            java_order(&many).0.join(","),
            "k0,k1,k2,k3,k4,k5,k11,k6,k10,k7,k13,k8,k12,k9,UNIQ_KEY,CLUSTER,WAIT"
        );
        // 9 names of one hash ("Aa" and "BB" hash alike): the 9th put doubles the table of 16 (treeifyBin below 64),
        // which moves "x" (bucket 8 of 16, 24 of 32) after them
        let same = same_hash(9);
        let names: Vec<&str> = ["x"]
            .into_iter()
            .chain(same.iter().map(String::as_str))
            .chain(["y"])
            .collect();
        let (o, exact) = java_order(&names);
        assert!(exact);
        assert_eq!(
            o.join(","),
            "AaAaAaAa,AaAaAaBB,AaAaBBAa,AaAaBBBB,AaBBAaAa,AaBBAaBB,AaBBBBAa,AaBBBBBB,BBAaAaAa,x,y"
        );
        // 11 of one hash: the 11th put treeifies the bin (the table is 64 by then): not modelled
        let same = same_hash(11);
        let names: Vec<&str> = same.iter().map(String::as_str).collect();
        assert!(!java_order(&names).1);
        assert!(java_order(&names[..10]).1);
    }

    #[test]
    fn property_encodable_is_what_properties_to_string_accepts() {
        assert!(property_encodable(b"TAGS", b"a"));
        assert!(property_encodable(b"K", b"v\x01w")); // \x01 in a value is kept
        for (k, v) in [
            (&b""[..], &b"v"[..]),
            (b"K", b""),
            (b"K\x01", b"v"),
            (b"K\x02", b"v"),
            (b"K", b"v\x02"),
        ] {
            assert!(!property_encodable(k, v), "{k:?}={v:?}");
        }
    }

    #[test]
    fn java_hash_code() {
        assert_eq!(tags_hash("TagA"), 2598919);
        assert_eq!(tags_hash(""), 0);
        assert_eq!(tags_hash_bytes(b"TagA"), 2598919);
        // U+1F600 is two UTF-16 code units (0xD83D, 0xDE00)
        assert_eq!(tags_hash("\u{1F600}"), 0xD83D * 31 + 0xDE00);
        assert_eq!(
            tags_hash_bytes("é\u{1F600}".as_bytes()),
            tags_hash("é\u{1F600}")
        );
        // wraps like int32
        let long = "x".repeat(100);
        let mut h: i32 = 0;
        for _ in 0..100 {
            h = h.wrapping_mul(31).wrapping_add(b'x' as i32);
        }
        assert_eq!(tags_hash(&long), h);
    }

    #[test]
    fn properties_parse_like_java() {
        let raw = b"TAGS\x01a\x02KEYS\x01k1 k2\x02\x01x\x02y\x01\x02ab\x02TAGS\x01b\x02";
        let p = decode_properties(raw);
        assert_eq!(
            p,
            vec![("TAGS".into(), "b".into()), ("KEYS".into(), "k1 k2".into())]
        );
        assert_eq!(find_property(raw, b"TAGS"), Some(&b"b"[..]));
        assert_eq!(decode_properties(b"k\x01v"), vec![("k".into(), "v".into())]);
        assert_eq!(
            decode_properties(b"k\x01\x01v\x02"),
            vec![("k".into(), "\x01v".into())]
        );
        assert_eq!(
            decode_properties(b"k\xff\x01v\x02"),
            vec![("k\u{FFFD}".into(), "v".into())]
        );
    }

    #[test]
    fn record_round_trip_v4_and_v6() {
        let born = Host::parse("10.0.0.1", 1234).unwrap();
        let store = Host::parse("::1", 10911).unwrap();
        let f = RecordFields {
            queue_id: 3,
            flag: 7,
            queue_offset: 42,
            physical_offset: 4096,
            sys_flag: STOREHOSTADDRESS_V6_FLAG,
            born_timestamp: 111,
            born_host: &born,
            store_timestamp: 222,
            store_host: &store,
            reconsume_times: 1,
            prepared_transaction_offset: 0,
            body: b"hello",
            topic: b"T",
            properties: b"TAGS\x01a\x02",
        };
        let mut buf = vec![0u8; f.encoded_len() + 3];
        let n = encode_record(&mut buf, &f);
        assert_eq!(n, 91 + 12 + 5 + 1 + 7);
        let r = decode_record(&buf).unwrap();
        assert_eq!(r.total_size as usize, n);
        assert_eq!(
            (r.queue_id, r.flag, r.queue_offset, r.physical_offset),
            (3, 7, 42, 4096)
        );
        assert_eq!((r.born_host, r.store_host), (born, store));
        assert_eq!(
            (r.store_timestamp, r.body, r.topic),
            (222, &b"hello"[..], &b"T"[..])
        );
        assert_eq!(r.body_crc, body_crc(b"hello"));
        assert!(matches!(check_record(&buf, true), RecordCheck::Record(_)));
        buf[BODYCRC_POSITION] ^= 0x01;
        assert!(matches!(check_record(&buf, true), RecordCheck::Invalid(_)));
        assert!(matches!(check_record(&buf, false), RecordCheck::Record(_)));
    }

    #[test]
    fn accessors_equal_decode_record() {
        for (born, store) in [("10.0.0.1", "::1"), ("fe80::2", "127.0.0.1")] {
            let born = Host::parse(born, 1234).unwrap();
            let store = Host::parse(store, 10911).unwrap();
            let mut sys_flag = TRANSACTION_PREPARED_TYPE;
            if born.is_v6() {
                sys_flag |= BORNHOST_V6_FLAG;
            }
            if store.is_v6() {
                sys_flag |= STOREHOSTADDRESS_V6_FLAG;
            }
            let f = RecordFields {
                queue_id: 3,
                flag: 7,
                queue_offset: 42,
                physical_offset: 8192,
                sys_flag,
                born_timestamp: 111,
                born_host: &born,
                store_timestamp: 222,
                store_host: &store,
                reconsume_times: 1,
                prepared_transaction_offset: 0,
                body: b"hello",
                topic: b"T",
                properties: b"",
            };
            let mut buf = vec![0u8; f.encoded_len()];
            encode_record(&mut buf, &f);
            let r = decode_record(&buf).unwrap();
            assert_eq!(record_total_size(&buf), r.total_size);
            assert_eq!(record_magic(&buf), MAGIC_V1);
            assert!(is_message_magic(record_magic(&buf)) && !is_message_magic(BLANK_MAGIC));
            assert_eq!(record_queue_offset(&buf), r.queue_offset);
            assert_eq!(record_physical_offset(&buf), r.physical_offset);
            assert_eq!(record_sys_flag(&buf), r.sys_flag);
            assert_eq!(record_born_timestamp(&buf), r.born_timestamp);
            assert_eq!(record_born_host(&buf), r.born_host);
            assert_eq!(record_store_timestamp(&buf), r.store_timestamp);
            assert_eq!(record_store_host(&buf), r.store_host);
            assert_eq!(
                record_offset_msg_id(&buf),
                create_offset_msg_id(&store, 8192)
            );
            assert!(record_head_matches(&buf, 8192));
            assert!(!record_head_matches(&buf, 8193));
            assert!(!record_head_matches(&buf[..buf.len() - 1], 8192));
        }
        assert_eq!(
            compression_type(COMPRESSED_FLAG | SYSFLAG_COMPRESSION_ZLIB),
            COMPRESSION_CODE_ZLIB
        );
        assert_eq!(compression_type(COMPRESSED_FLAG), 0);
    }

    #[test]
    fn v2_magic_two_byte_topic_len() {
        let h = Host::v4([1, 2, 3, 4], 5);
        let f = RecordFields {
            queue_id: 0,
            flag: 0,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: &h,
            store_timestamp: 0,
            store_host: &h,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"b",
            topic: b"topic",
            properties: b"",
        };
        let mut v1 = vec![0u8; f.encoded_len()];
        encode_record(&mut v1, &f);
        // rebuild as v2: one more byte for the topic length
        let topic_at = v1.len() - 2 - 5 - 1;
        let mut v2 = v1[..topic_at].to_vec();
        v2.extend_from_slice(&[0, 5]);
        v2.extend_from_slice(&v1[topic_at + 1..]);
        let total = v2.len() as i32;
        v2[0..4].copy_from_slice(&total.to_be_bytes());
        v2[4..8].copy_from_slice(&MAGIC_V2.to_be_bytes());
        let r = decode_record(&v2).unwrap();
        assert_eq!(r.topic, b"topic");
        assert_eq!(r.magic, MAGIC_V2);
    }

    #[test]
    fn offset_msg_id() {
        let h = Host::v4([127, 0, 0, 1], 10911);
        assert_eq!(
            create_offset_msg_id(&h, 0),
            "7F00000100002A9F0000000000000000"
        );
        let h6 = Host::parse("::1", 1).unwrap();
        assert_eq!(create_offset_msg_id(&h6, 1).len(), 56);
    }

    #[test]
    fn last_store_timestamp_of_a_pull_body() {
        let v4 = Host::parse("10.0.0.1", 1).unwrap();
        let v6 = Host::parse("::1", 2).unwrap();
        let mut body = Vec::new();
        for (ts, born, flag) in [(5i64, &v4, 0), (-7, &v6, BORNHOST_V6_FLAG), (9, &v4, 0)] {
            let f = RecordFields {
                queue_id: 0,
                flag: 0,
                queue_offset: 0,
                physical_offset: 0,
                sys_flag: flag,
                born_timestamp: 0,
                born_host: born,
                store_timestamp: ts,
                store_host: &v4,
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: b"b",
                topic: b"T",
                properties: b"",
            };
            let start = body.len();
            body.resize(start + f.encoded_len(), 0);
            encode_record(&mut body[start..], &f);
            assert_eq!(last_store_timestamp(&body), ts);
        }
        assert_eq!(last_store_timestamp(&body[..body.len() - 1]), -7); // the last one cut: the one before
        assert_eq!(last_store_timestamp(&[]), 0);
        assert_eq!(last_store_timestamp(&[0, 0, 0, 0, 1]), 0); // TOTALSIZE 0 ends the walk
        let mut short = 8i32.to_be_bytes().to_vec();
        short.extend_from_slice(&[0; 4]);
        assert_eq!(last_store_timestamp(&short), 0); // whole, but too short for its store timestamp
    }
}
