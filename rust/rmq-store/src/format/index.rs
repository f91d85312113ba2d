//! The index file layout (RocketMQ 4.9 `IndexFile`/`IndexHeader`/`IndexService`): `<root>/index/<yyyyMMddHHmmssSSS>`.
//!
//! Owns: the header, hash slot and entry layouts, the key hash (`topic#key`, Java `String.hashCode` made
//! non-negative as `IndexFile.indexKeyHashMethod` does), the file name, and which keys of a record are indexed.
//!
//! Format (all big-endian):
//!   header, 40 bytes: @0 beginTimestamp i64, @8 endTimestamp i64, @16 beginPhyOffset i64, @24 endPhyOffset i64,
//!                     @32 hashSlotCount i32, @36 indexCount i32 (starts at 1: entry 0 is never used);
//!   hashSlotNum slots of 4 bytes: i32 index of the newest entry of that slot (0 = empty);
//!   indexNum entries of 20 bytes: @0 keyHash i32, @4 phyOffset i64, @12 timeDiff i32 (seconds since
//!                     beginTimestamp), @16 prevIndex i32 (the slot's previous entry, 0 = end of chain).
//!   File size = 40 + 4 * hashSlotNum + 20 * indexNum (4.9's defaults: 5,000,000 and 20,000,000 → 420,000,040).
//!
//! Invariants: pure layout; the slot of a key is `hash % hashSlotNum`; an entry `i` is valid iff
//! `1 <= i < indexCount`.
//!
//! Thread-safety: pure functions and constants.

use crate::format::message::{for_each_property, TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK};

pub const INDEX_DIR: &str = "index";
pub const INDEX_HEADER_SIZE: usize = 40;
pub const HEADER_BEGIN_TIMESTAMP: usize = 0;
pub const HEADER_END_TIMESTAMP: usize = 8;
pub const HEADER_BEGIN_PHY_OFFSET: usize = 16;
pub const HEADER_END_PHY_OFFSET: usize = 24;
pub const HEADER_HASH_SLOT_COUNT: usize = 32;
pub const HEADER_INDEX_COUNT: usize = 36;
pub const HASH_SLOT_SIZE: usize = 4;
pub const INDEX_ENTRY_SIZE: usize = 20;
/// Slot value / prev index meaning "none".
pub const INVALID_INDEX: i32 = 0;
/// `MessageStoreConfig.maxHashSlotNum` / `maxIndexNum` defaults.
pub const DEFAULT_MAX_HASH_SLOT_NUM: u32 = 5_000_000;
pub const DEFAULT_MAX_INDEX_NUM: u32 = 20_000_000;
/// `MessageStoreConfig.maxMsgsNumBatch`: a query returns at most this many offsets.
pub const MAX_MSGS_NUM_BATCH: i32 = 64;
/// `MessageStoreConfig.defaultQueryMaxNum`: the broker's max for a `_UNIQUE_KEY_QUERY`.
pub const DEFAULT_QUERY_MAX_NUM: i32 = 32;
/// `DefaultMessageStore.queryMessage` retries the walk this many times with an earlier end time.
pub const QUERY_ROUNDS: usize = 3;
/// Property names (MessageConst.PROPERTY_KEYS / PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) and KEY_SEPARATOR.
pub const PROPERTY_KEYS: &[u8] = b"KEYS";
pub const PROPERTY_UNIQ_KEY: &[u8] = b"UNIQ_KEY";
pub const KEY_SEPARATOR: u8 = b' ';
/// File names are 17 digits: `UtilAll.timeMillisToHumanString` (local time).
pub const INDEX_FILE_NAME_LEN: usize = 17;

/// The header of one index file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexHeader {
    pub begin_timestamp: i64,
    pub end_timestamp: i64,
    pub begin_phy_offset: i64,
    pub end_phy_offset: i64,
    pub hash_slot_count: i32,
    pub index_count: i32,
}

impl Default for IndexHeader {
    fn default() -> Self {
        IndexHeader {
            begin_timestamp: 0,
            end_timestamp: 0,
            begin_phy_offset: 0,
            end_phy_offset: 0,
            hash_slot_count: 0,
            index_count: 1,
        }
    }
}

impl IndexHeader {
    /// `IndexHeader.load`: an index count <= 0 reads as 1.
    pub fn decode(b: &[u8]) -> IndexHeader {
        let l = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().unwrap());
        let i = |at: usize| i32::from_be_bytes(b[at..at + 4].try_into().unwrap());
        let count = i(HEADER_INDEX_COUNT);
        IndexHeader {
            begin_timestamp: l(HEADER_BEGIN_TIMESTAMP),
            end_timestamp: l(HEADER_END_TIMESTAMP),
            begin_phy_offset: l(HEADER_BEGIN_PHY_OFFSET),
            end_phy_offset: l(HEADER_END_PHY_OFFSET),
            hash_slot_count: i(HEADER_HASH_SLOT_COUNT),
            index_count: if count <= 0 { 1 } else { count },
        }
    }

    pub fn encode(&self, b: &mut [u8]) {
        b[HEADER_BEGIN_TIMESTAMP..HEADER_BEGIN_TIMESTAMP + 8]
            .copy_from_slice(&self.begin_timestamp.to_be_bytes());
        b[HEADER_END_TIMESTAMP..HEADER_END_TIMESTAMP + 8]
            .copy_from_slice(&self.end_timestamp.to_be_bytes());
        b[HEADER_BEGIN_PHY_OFFSET..HEADER_BEGIN_PHY_OFFSET + 8]
            .copy_from_slice(&self.begin_phy_offset.to_be_bytes());
        b[HEADER_END_PHY_OFFSET..HEADER_END_PHY_OFFSET + 8]
            .copy_from_slice(&self.end_phy_offset.to_be_bytes());
        b[HEADER_HASH_SLOT_COUNT..HEADER_HASH_SLOT_COUNT + 4]
            .copy_from_slice(&self.hash_slot_count.to_be_bytes());
        b[HEADER_INDEX_COUNT..HEADER_INDEX_COUNT + 4]
            .copy_from_slice(&self.index_count.to_be_bytes());
    }

    /// Why this header cannot belong to a file of this geometry, if it cannot.
    pub fn check(&self, hash_slot_num: u32, index_num: u32) -> Result<(), String> {
        if self.index_count as i64 > index_num as i64 + 1 {
            return Err(format!(
                "index count {} above maxIndexNum {}",
                self.index_count, index_num
            ));
        }
        if self.hash_slot_count < 0 || self.hash_slot_count as i64 > hash_slot_num as i64 {
            return Err(format!(
                "hash slot count {} outside [0, {}]",
                self.hash_slot_count, hash_slot_num
            ));
        }
        if self.end_phy_offset < self.begin_phy_offset || self.begin_phy_offset < 0 {
            return Err(format!(
                "phy offsets [{}, {}] out of order",
                self.begin_phy_offset, self.end_phy_offset
            ));
        }
        if self.end_timestamp < self.begin_timestamp {
            return Err(format!(
                "timestamps [{}, {}] out of order",
                self.begin_timestamp, self.end_timestamp
            ));
        }
        Ok(())
    }

    /// `IndexFile.isTimeMatched`.
    pub fn is_time_matched(&self, begin: i64, end: i64) -> bool {
        (begin < self.begin_timestamp && end > self.end_timestamp)
            || (begin >= self.begin_timestamp && begin <= self.end_timestamp)
            || (end >= self.begin_timestamp && end <= self.end_timestamp)
    }
}

/// One 20-byte entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    pub key_hash: i32,
    pub phy_offset: i64,
    pub time_diff: i32,
    pub prev_index: i32,
}

impl IndexEntry {
    pub fn encode(&self, b: &mut [u8]) {
        b[0..4].copy_from_slice(&self.key_hash.to_be_bytes());
        b[4..12].copy_from_slice(&self.phy_offset.to_be_bytes());
        b[12..16].copy_from_slice(&self.time_diff.to_be_bytes());
        b[16..20].copy_from_slice(&self.prev_index.to_be_bytes());
    }

    pub fn decode(b: &[u8]) -> IndexEntry {
        IndexEntry {
            key_hash: i32::from_be_bytes(b[0..4].try_into().unwrap()),
            phy_offset: i64::from_be_bytes(b[4..12].try_into().unwrap()),
            time_diff: i32::from_be_bytes(b[12..16].try_into().unwrap()),
            prev_index: i32::from_be_bytes(b[16..20].try_into().unwrap()),
        }
    }
}

pub fn index_file_size(hash_slot_num: u32, index_num: u32) -> usize {
    INDEX_HEADER_SIZE
        + hash_slot_num as usize * HASH_SLOT_SIZE
        + index_num as usize * INDEX_ENTRY_SIZE
}

pub fn slot_position(slot: u32) -> usize {
    INDEX_HEADER_SIZE + slot as usize * HASH_SLOT_SIZE
}

pub fn entry_position(hash_slot_num: u32, index: i32) -> usize {
    INDEX_HEADER_SIZE + hash_slot_num as usize * HASH_SLOT_SIZE + index as usize * INDEX_ENTRY_SIZE
}

/// `IndexFile.putKey`'s timeDiff: seconds since the file's begin timestamp, clamped to [0, i32::MAX]; 0 while
/// the file has no begin timestamp.
pub fn time_diff_seconds(store_timestamp: i64, begin_timestamp: i64) -> i32 {
    if begin_timestamp <= 0 {
        return 0;
    }
    let d = (store_timestamp - begin_timestamp) / 1000;
    d.clamp(0, i32::MAX as i64) as i32
}

/// `31^i` for i in 0..=8, wrapping (Java's int arithmetic).
const POW31: [i32; 9] = {
    let mut p = [1i32; 9];
    let mut i = 1;
    while i < 9 {
        p[i] = p[i - 1].wrapping_mul(31);
        i += 1;
    }
    p
};

/// Java's `h = 31 * h + c` over the chars of `s`, continuing from `h`. ASCII is hashed 8 bytes per step as
/// `h * 31^8 + Σ b_i * 31^(7-i)` — the same value (wrapping arithmetic is a ring), without the one-multiply-per-byte
/// dependency chain (a 32-digit UNIQ_KEY: ~3× faster in the put's index build).
#[inline]
fn java_hash_continue(mut h: i32, s: &[u8]) -> i32 {
    if s.is_ascii() {
        let mut chunks = s.chunks_exact(8);
        for c in &mut chunks {
            let mut acc = 0i32;
            for (i, &b) in c.iter().enumerate() {
                acc = acc.wrapping_add((b as i32).wrapping_mul(POW31[7 - i]));
            }
            h = h.wrapping_mul(POW31[8]).wrapping_add(acc);
        }
        for &b in chunks.remainder() {
            h = h.wrapping_mul(31).wrapping_add(b as i32);
        }
    } else {
        for u in String::from_utf8_lossy(s).encode_utf16() {
            h = h.wrapping_mul(31).wrapping_add(u as i32);
        }
    }
    h
}

/// `IndexFile.indexKeyHashMethod(IndexService.buildKey(topic, key))`: Java `String.hashCode` of `topic#key`
/// (UTF-16 code units; invalid UTF-8 decodes lossily), `Math.abs`, `Integer.MIN_VALUE` → 0. No allocation.
pub fn index_key_hash(topic: &[u8], key: &[u8]) -> i32 {
    index_key_hash_with_prefix(index_key_prefix_hash(topic), key)
}

/// The running Java hash of `topic#` (so a record's keys hash the topic once).
pub fn index_key_prefix_hash(topic: &[u8]) -> i32 {
    java_hash_continue(0, topic)
        .wrapping_mul(31)
        .wrapping_add(b'#' as i32)
}

/// `index_key_hash(topic, key)` from `index_key_prefix_hash(topic)`.
pub fn index_key_hash_with_prefix(prefix: i32, key: &[u8]) -> i32 {
    let h = java_hash_continue(prefix, key);
    let a = h.wrapping_abs();
    if a < 0 {
        0
    } else {
        a
    }
}

/// `IndexService.buildIndex`'s skip rule: rollback records are not indexed (NOT/PREPARED/COMMIT are).
pub fn is_indexed_sys_flag(sys_flag: i32) -> bool {
    sys_flag & TRANSACTION_TYPE_MASK != TRANSACTION_ROLLBACK_TYPE
}

/// The keys `IndexService.buildIndex` indexes for one record, in its order: UNIQ_KEY when the property is present
/// (even empty), then each non-empty space-separated part of KEYS.
pub fn for_each_index_key<'a>(properties: &'a [u8], mut f: impl FnMut(&'a [u8])) {
    if properties.is_empty() {
        return;
    }
    // one pass over the properties (the last occurrence of a name wins, as a map would)
    let (mut uniq, mut keys) = (None, None);
    for_each_property(properties, |name, value| {
        if name == PROPERTY_UNIQ_KEY {
            uniq = Some(value);
        } else if name == PROPERTY_KEYS {
            keys = Some(value);
        }
    });
    if let Some(u) = uniq {
        f(u);
    }
    if let Some(keys) = keys {
        for k in keys.split(|&b| b == KEY_SEPARATOR) {
            if !k.is_empty() {
                f(k);
            }
        }
    }
}

/// Whether `key` is one of the record's indexed keys (a query serves only records that carry the key).
pub fn record_has_index_key(properties: &[u8], key: &[u8]) -> bool {
    let mut found = false;
    for_each_index_key(properties, |k| found |= k == key);
    found
}

/// `UtilAll.timeMillisToHumanString(ms)`: `yyyyMMddHHmmssSSS` in local time (UTC where the C library has no
/// local time conversion).
pub fn index_file_name(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let (y, mo, d, h, mi, s) = local_civil(secs);
    format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}{millis:03}")
}

/// A 17-digit name is an index file; anything else in `index/` is ignored by the loader (as 4.9 skips names
/// `Long.parseLong` refuses).
pub fn is_index_file_name(name: &str) -> bool {
    name.len() == INDEX_FILE_NAME_LEN && name.bytes().all(|b| b.is_ascii_digit())
}

/// The next name after `name` (same length, +1 as a number): keeps names unique and ordered when two files are
/// created in the same millisecond.
pub fn next_index_file_name(name: &str) -> String {
    let v: u64 = name.parse().unwrap_or(0);
    format!("{:0width$}", v + 1, width = INDEX_FILE_NAME_LEN)
}

#[cfg(unix)]
fn local_civil(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let t: libc::time_t = secs as libc::time_t;
    // SAFETY: localtime_r writes only into `tm`, which we own.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let ok = unsafe { !libc::localtime_r(&t, &mut tm).is_null() };
    if !ok {
        return utc_civil(secs);
    }
    (
        tm.tm_year as i64 + 1900,
        tm.tm_mon as i64 + 1,
        tm.tm_mday as i64,
        tm.tm_hour as i64,
        tm.tm_min as i64,
        tm.tm_sec as i64,
    )
}

#[cfg(not(unix))]
fn local_civil(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    utc_civil(secs)
}

/// Days-from-civil inverse (Howard Hinnant's algorithm), UTC.
fn utc_civil(secs: i64) -> (i64, i64, i64, i64, i64, i64) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    (y, m, d, rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    #[test]
    fn java_hash_in_steps_of_eight_is_the_per_byte_hash() {
        let per_byte = |mut h: i32, s: &[u8]| {
            for &b in s {
                h = h.wrapping_mul(31).wrapping_add(b as i32);
            }
            h
        };
        let mut x = 0x9E37_79B9u32;
        for len in 0..70 {
            let s: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    (x % 128) as u8
                })
                .collect();
            for start in [0, 1, -7, i32::MAX, i32::MIN, x as i32] {
                assert_eq!(
                    super::java_hash_continue(start, &s),
                    per_byte(start, &s),
                    "{s:?}"
                );
            }
        }
    }

    use super::*;

    #[test]
    fn key_hash_matches_java() {
        // "T#k".hashCode() = ((84*31)+35)*31+107 = 81916
        assert_eq!(index_key_hash(b"T", b"k"), 81916);
        // non-ASCII goes through UTF-16: "é".hashCode() = 233
        assert_eq!(index_key_hash(b"", "é".as_bytes()), 35 * 31 + 233);
        // a negative hash is made positive
        let h = index_key_hash(b"TopicTest", b"polygenelubricants");
        assert!(h >= 0);
    }

    #[test]
    fn keys_in_build_index_order() {
        let mut p = Vec::new();
        crate::format::message::encode_property_into(&mut p, b"KEYS", b" a  b ");
        crate::format::message::encode_property_into(&mut p, b"UNIQ_KEY", b"U1");
        let mut seen = Vec::new();
        for_each_index_key(&p, |k| seen.push(k.to_vec()));
        assert_eq!(seen, vec![b"U1".to_vec(), b"a".to_vec(), b"b".to_vec()]);
        assert!(record_has_index_key(&p, b"b"));
        assert!(!record_has_index_key(&p, b"c"));
    }

    #[test]
    fn header_round_trip_and_names() {
        let h = IndexHeader {
            begin_timestamp: 1,
            end_timestamp: 2,
            begin_phy_offset: 3,
            end_phy_offset: 4,
            hash_slot_count: 5,
            index_count: 6,
        };
        let mut b = [0u8; INDEX_HEADER_SIZE];
        h.encode(&mut b);
        assert_eq!(IndexHeader::decode(&b), h);
        assert_eq!(utc_civil(0), (1970, 1, 1, 0, 0, 0));
        assert_eq!(utc_civil(1_700_000_000), (2023, 11, 14, 22, 13, 20));
        assert!(is_index_file_name(&index_file_name(1_700_000_000_123)));
        assert_eq!(
            next_index_file_name("20231114221320999"),
            "20231114221321000"
        );
        assert_eq!(index_file_size(5_000_000, 20_000_000), 420_000_040);
    }
}
