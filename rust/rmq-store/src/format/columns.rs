//! Columnar decode: concatenated CommitLog records (a pull body or a store read) straight into Arrow-layout
//! column buffers, one row per record, no per-message objects (docs/SPARK_DESIGN.md, `decode_columns`).
//!
//! Columns (row i = the i-th record kept by the filter):
//!   topic, msg_id, tags?, keys?       utf8      — i32 offsets (rows + 1) + data (+ validity bitmap when nullable)
//!   body                              binary    — i32 offsets + data; inflated (zlib) when COMPRESSED is set
//!   queue_id, reconsume_times         i32       — little-endian when handed to Arrow
//!   queue_offset, commitlog_offset,
//!   born_timestamp, store_timestamp   i64 (ms)
//!   properties                        map<utf8, utf8> = list<struct<key, value>>: list offsets (rows + 1) and the
//!                                     key / value utf8 children (entries never null)
//!
//! Decisions (the Python twin `rmq_core._reference.format.columns` matches them byte for byte):
//!   * Rows are exactly what `rmq_core.message.decode_messages` gives for the same bytes: `msg_id` is the offset msg
//!     id (store host + commitlog offset, uppercase hex); `tags`/`keys` are the TAGS/KEYS properties (null when
//!     absent); `properties` holds EVERY property (TAGS, KEYS, UNIQ_KEY, WAIT, … — nothing excluded), in order of
//!     first appearance, a later duplicate overwriting the value (Java's HashMap / Python dict semantics).
//!   * Strings are UTF-8 with U+FFFD for invalid bytes (`String::from_utf8_lossy`, like Python's "replace").
//!   * Filters: `tag_filter` keeps rows whose TAGS is one of the given strings (rows without TAGS are dropped: the
//!     client-side re-filter of RocketMQ's `PullAPIWrapper`); `None` keeps all, an empty set keeps none.
//!     `min_queue_offset` drops rows with `queue_offset < min`. Dropped rows are still checked structurally (a
//!     corrupt record anywhere is an error) but their bodies are not inflated.
//!   * Errors: a record that does not decode (BLANK, bad magic, truncated, inconsistent lengths) or a compressed body
//!     that does not inflate → `Error::Corrupt { offset: <index of the record in buf> }`; a compression type other
//!     than ZLIB (or the legacy 0) → `Error::InvalidArgument`; a column whose data would pass 2 GiB (i32 offsets)
//!     → `Error::InvalidArgument`. Nothing is returned on error.
//!   * Validity bitmaps (Arrow: LSB first, 1 = valid) exist only for columns that hold at least one null.
//!
//! Thread-safety: pure functions over borrowed bytes (callers release the GIL around them).

use std::borrow::Cow;
use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::format::message::{
    compression_type, decode_record, for_each_property, COMPRESSED_FLAG, COMPRESSION_CODE_ZLIB,
    IPV6_HOST_LEN,
};

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// A variable-width (utf8 or binary) Arrow column: `offsets[i]..offsets[i+1]` is row i in `data`.
#[derive(Debug, Clone, Default)]
pub struct VarColumn {
    name: &'static str,
    pub offsets: Vec<i32>,
    pub data: Vec<u8>,
    /// Arrow validity bitmap (LSB first); `None` while every row is valid.
    pub validity: Option<Vec<u8>>,
    pub null_count: usize,
}

impl VarColumn {
    fn new(name: &'static str, rows_hint: usize, data_hint: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows_hint + 1);
        offsets.push(0);
        VarColumn {
            name,
            offsets,
            data: Vec::with_capacity(data_hint),
            validity: None,
            null_count: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    fn end_row(&mut self) -> Result<()> {
        let end = self.data.len();
        if end > i32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "column {} holds more than 2 GiB (i32 Arrow offsets): decode a smaller buffer",
                self.name
            )));
        }
        self.offsets.push(end as i32);
        if let Some(bits) = &mut self.validity {
            set_bit(bits, self.offsets.len() - 2, true);
        }
        Ok(())
    }

    #[inline]
    fn push(&mut self, v: &[u8]) -> Result<()> {
        self.data.extend_from_slice(v);
        self.end_row()
    }

    #[inline]
    fn push_null(&mut self) {
        let row = self.len();
        let bits = self.validity.get_or_insert_with(|| {
            let mut b = vec![0u8; row.div_ceil(8)];
            for i in 0..row {
                set_bit(&mut b, i, true);
            }
            b
        });
        set_bit(bits, row, false);
        self.null_count += 1;
        self.offsets.push(self.data.len() as i32);
    }

    /// Row i, `None` when null.
    pub fn value(&self, i: usize) -> Option<&[u8]> {
        if let Some(bits) = &self.validity {
            if bits[i / 8] & (1 << (i % 8)) == 0 {
                return None;
            }
        }
        Some(&self.data[self.offsets[i] as usize..self.offsets[i + 1] as usize])
    }
}

#[inline]
fn set_bit(bits: &mut Vec<u8>, i: usize, valid: bool) {
    if bits.len() <= i / 8 {
        bits.push(0);
    }
    if valid {
        bits[i / 8] |= 1 << (i % 8);
    } else {
        bits[i / 8] &= !(1 << (i % 8));
    }
}

/// `map<utf8, utf8>`: row i's entries are `offsets[i]..offsets[i+1]` of `keys` / `values` (never null).
#[derive(Debug, Clone, Default)]
pub struct MapColumn {
    pub offsets: Vec<i32>,
    pub keys: VarColumn,
    pub values: VarColumn,
}

impl MapColumn {
    /// Row i as (key, value) pairs.
    pub fn entries(&self, i: usize) -> Vec<(&[u8], &[u8])> {
        (self.offsets[i] as usize..self.offsets[i + 1] as usize)
            .map(|e| (self.keys.value(e).unwrap(), self.values.value(e).unwrap()))
            .collect()
    }
}

/// The decoded rows, column by column (see the module header).
#[derive(Debug, Clone, Default)]
pub struct Columns {
    pub num_rows: usize,
    pub topic: VarColumn,
    pub queue_id: Vec<i32>,
    pub queue_offset: Vec<i64>,
    pub commitlog_offset: Vec<i64>,
    pub msg_id: VarColumn,
    pub tags: VarColumn,
    pub keys: VarColumn,
    pub body: VarColumn,
    pub properties: MapColumn,
    pub born_timestamp: Vec<i64>,
    pub store_timestamp: Vec<i64>,
    pub reconsume_times: Vec<i32>,
}

/// Which rows to keep (the readers' client-side re-filter and start offset).
#[derive(Debug, Clone, Default)]
pub struct ColumnFilter {
    /// Keep rows whose TAGS is in the set; `None` = keep all.
    pub tags: Option<HashSet<Vec<u8>>>,
    /// Drop rows with `queue_offset < min_queue_offset`.
    pub min_queue_offset: Option<i64>,
}

impl ColumnFilter {
    pub fn with_tags<I, S>(tags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        ColumnFilter {
            tags: Some(
                tags.into_iter()
                    .map(|t| t.as_ref().as_bytes().to_vec())
                    .collect(),
            ),
            min_queue_offset: None,
        }
    }
}

#[inline]
fn lossy(raw: &[u8]) -> Cow<'_, [u8]> {
    match String::from_utf8_lossy(raw) {
        Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
        Cow::Owned(s) => Cow::Owned(s.into_bytes()),
    }
}

/// Decodes every record of `buf` (concatenated, no padding) into columns, keeping the rows `filter` accepts.
/// One decoded property, borrowed from the record or inflated into an owned buffer.
type PropertyPair<'a> = (Cow<'a, [u8]>, Cow<'a, [u8]>);

pub fn decode_columns(buf: &[u8], filter: &ColumnFilter) -> Result<Columns> {
    // ~ rows for 100-byte bodies with a few properties; only a capacity hint
    let rows_hint = (buf.len() / 256).min(1 << 20);
    let mut c = Columns {
        num_rows: 0,
        topic: VarColumn::new("topic", rows_hint, rows_hint * 8),
        queue_id: Vec::with_capacity(rows_hint),
        queue_offset: Vec::with_capacity(rows_hint),
        commitlog_offset: Vec::with_capacity(rows_hint),
        msg_id: VarColumn::new("msg_id", rows_hint, rows_hint * 32),
        tags: VarColumn::new("tags", rows_hint, rows_hint * 4),
        keys: VarColumn::new("keys", rows_hint, rows_hint * 4),
        body: VarColumn::new("body", rows_hint, buf.len() / 2),
        properties: MapColumn {
            offsets: {
                let mut o = Vec::with_capacity(rows_hint + 1);
                o.push(0);
                o
            },
            keys: VarColumn::new("properties.key", rows_hint * 4, rows_hint * 24),
            values: VarColumn::new("properties.value", rows_hint * 4, rows_hint * 48),
        },
        born_timestamp: Vec::with_capacity(rows_hint),
        store_timestamp: Vec::with_capacity(rows_hint),
        reconsume_times: Vec::with_capacity(rows_hint),
    };
    // per-record scratch: deduplicated (key, value) in first-appearance order
    let mut props: Vec<PropertyPair<'_>> = Vec::with_capacity(16);
    let mut pos = 0usize;
    while pos < buf.len() {
        let rec =
            decode_record(&buf[pos..]).map_err(|reason| Error::corrupt(pos as i64, reason))?;
        let at = pos;
        pos += rec.total_size as usize;
        if let Some(min) = filter.min_queue_offset {
            if rec.queue_offset < min {
                continue;
            }
        }
        props.clear();
        // one UTF-8 check for the whole string: the separators are ASCII, so every piece of a valid one is valid
        let props_utf8 = std::str::from_utf8(rec.properties).is_ok();
        for_each_property(rec.properties, |k, v| {
            let (k, v) = if props_utf8 {
                (Cow::Borrowed(k), Cow::Borrowed(v))
            } else {
                (lossy(k), lossy(v))
            };
            match props.iter_mut().find(|(ek, _)| *ek == k) {
                Some(e) => e.1 = v,
                None => props.push((k, v)),
            }
        });
        let find = |name: &[u8]| {
            props
                .iter()
                .find(|(k, _)| k.as_ref() == name)
                .map(|(_, v)| v.as_ref())
        };
        let tags = find(b"TAGS");
        if let Some(set) = &filter.tags {
            match tags {
                Some(t) if set.contains(t) => {}
                _ => continue,
            }
        }
        // body first: the only step that can still fail for this row
        if rec.sys_flag & COMPRESSED_FLAG != 0 {
            let kind = compression_type(rec.sys_flag);
            if kind != 0 && kind != COMPRESSION_CODE_ZLIB {
                return Err(Error::InvalidArgument(format!(
                    "record at offset {at}: unsupported compression type {kind} (sys_flag {:#x}); only ZLIB is built in",
                    rec.sys_flag
                )));
            }
            let inflated = miniz_oxide::inflate::decompress_to_vec_zlib(rec.body).map_err(|e| {
                Error::corrupt(
                    at as i64,
                    format!("compressed body does not inflate (zlib): {:?}", e.status),
                )
            })?;
            c.body.push(&inflated)?;
        } else {
            c.body.push(rec.body)?;
        }
        match tags {
            Some(t) => c.tags.push(t)?,
            None => c.tags.push_null(),
        }
        match find(b"KEYS") {
            Some(k) => c.keys.push(k)?,
            None => c.keys.push_null(),
        }
        for (k, v) in &props {
            c.properties.keys.push(k)?;
            c.properties.values.push(v)?;
        }
        c.properties.offsets.push(c.properties.keys.len() as i32);
        c.topic.push(&lossy(rec.topic))?;
        // offset msg id: hex of store ip + port + commitlog offset, written in place
        let mut raw = [0u8; IPV6_HOST_LEN + 8];
        let n = rec.store_host.encode(&mut raw);
        raw[n..n + 8].copy_from_slice(&rec.physical_offset.to_be_bytes());
        let mut hex = [0u8; 2 * (IPV6_HOST_LEN + 8)];
        for (i, &b) in raw[..n + 8].iter().enumerate() {
            hex[2 * i] = HEX[(b >> 4) as usize];
            hex[2 * i + 1] = HEX[(b & 0xF) as usize];
        }
        c.msg_id.push(&hex[..2 * (n + 8)])?;
        c.queue_id.push(rec.queue_id);
        c.queue_offset.push(rec.queue_offset);
        c.commitlog_offset.push(rec.physical_offset);
        c.born_timestamp.push(rec.born_timestamp);
        c.store_timestamp.push(rec.store_timestamp);
        c.reconsume_times.push(rec.reconsume_times);
        c.num_rows += 1;
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::message::{
        create_offset_msg_id, encode_record, Host, RecordFields, STOREHOSTADDRESS_V6_FLAG,
    };

    fn record(
        qo: i64,
        phys: i64,
        sys_flag: i32,
        body: &[u8],
        props: &[u8],
        store: &Host,
    ) -> Vec<u8> {
        let born = Host::v4([10, 0, 0, 1], 1234);
        let f = RecordFields {
            queue_id: 2,
            flag: 0,
            queue_offset: qo,
            physical_offset: phys,
            sys_flag,
            born_timestamp: 1000 + qo,
            born_host: &born,
            store_timestamp: 2000 + qo,
            store_host: store,
            reconsume_times: 3,
            prepared_transaction_offset: 0,
            body,
            topic: b"T",
            properties: props,
        };
        let mut v = vec![0u8; f.encoded_len()];
        encode_record(&mut v, &f);
        v
    }

    #[test]
    fn rows_nulls_properties_and_filters() {
        let h = Host::v4([127, 0, 0, 1], 10911);
        let mut buf = record(
            5,
            100,
            0,
            b"a",
            b"TAGS\x01x\x02KEYS\x01k1 k2\x02U\x01u\x02TAGS\x01y\x02",
            &h,
        );
        buf.extend(record(6, 200, 0, b"", b"", &h));
        buf.extend(record(7, 300, 0, b"ccc", b"TAGS\x01x\x02", &h));
        let c = decode_columns(&buf, &ColumnFilter::default()).unwrap();
        assert_eq!(c.num_rows, 3);
        assert_eq!(c.queue_offset, vec![5, 6, 7]);
        assert_eq!(c.commitlog_offset, vec![100, 200, 300]);
        assert_eq!(c.born_timestamp, vec![1005, 1006, 1007]);
        assert_eq!(c.store_timestamp, vec![2005, 2006, 2007]);
        assert_eq!(c.tags.value(0), Some(&b"y"[..]));
        assert_eq!(c.tags.value(1), None);
        assert_eq!(c.tags.value(2), Some(&b"x"[..]));
        assert_eq!(c.tags.validity.as_deref(), Some(&[0b101u8][..]));
        assert_eq!(c.keys.value(0), Some(&b"k1 k2"[..]));
        assert_eq!(c.keys.null_count, 2);
        assert!(c.topic.validity.is_none());
        assert_eq!(c.body.value(1), Some(&b""[..]));
        assert_eq!(
            c.properties.entries(0),
            vec![
                (&b"TAGS"[..], &b"y"[..]),
                (&b"KEYS"[..], &b"k1 k2"[..]),
                (&b"U"[..], &b"u"[..])
            ]
        );
        assert!(c.properties.entries(1).is_empty());
        assert_eq!(
            c.msg_id.value(2).unwrap(),
            create_offset_msg_id(&h, 300).as_bytes()
        );

        let f = ColumnFilter {
            min_queue_offset: Some(6),
            ..ColumnFilter::with_tags(["x"])
        };
        let c = decode_columns(&buf, &f).unwrap();
        assert_eq!((c.num_rows, c.queue_offset.clone()), (1, vec![7]));
        assert!(c.tags.validity.is_none());
        assert_eq!(
            decode_columns(&buf, &ColumnFilter::with_tags(Vec::<String>::new()))
                .unwrap()
                .num_rows,
            0
        );
    }

    #[test]
    fn compressed_ipv6_and_errors() {
        let h6 = Host::parse("fe80::1", 9).unwrap();
        let z = miniz_oxide::deflate::compress_to_vec_zlib(b"hello hello hello", 6);
        let buf = record(
            0,
            0,
            COMPRESSED_FLAG | STOREHOSTADDRESS_V6_FLAG,
            &z,
            b"",
            &h6,
        );
        let c = decode_columns(&buf, &ColumnFilter::default()).unwrap();
        assert_eq!(c.body.value(0), Some(&b"hello hello hello"[..]));
        assert_eq!(c.msg_id.value(0).unwrap().len(), 56);

        let h4 = Host::v4([1, 2, 3, 4], 5);
        let bad = record(0, 0, COMPRESSED_FLAG, b"not zlib", b"", &h4);
        let mut two = record(0, 0, 0, b"ok", b"", &h4);
        let at = two.len();
        two.extend(&bad);
        match decode_columns(&two, &ColumnFilter::default()) {
            Err(Error::Corrupt { offset, .. }) => assert_eq!(offset, at as i64),
            other => panic!("{other:?}"),
        }
        let lz4 = record(0, 0, COMPRESSED_FLAG | 0x200, b"x", b"", &h4);
        assert!(matches!(
            decode_columns(&lz4, &ColumnFilter::default()),
            Err(Error::InvalidArgument(_))
        ));
        let mut trunc = record(0, 0, 0, b"abc", b"", &h4);
        trunc.pop();
        assert!(matches!(
            decode_columns(&trunc, &ColumnFilter::default()),
            Err(Error::Corrupt { offset: 0, .. })
        ));
        assert_eq!(
            decode_columns(b"", &ColumnFilter::default())
                .unwrap()
                .num_rows,
            0
        );
    }
}

#[cfg(all(test, unix))]
mod timing {
    use super::*;
    use crate::format::message::{encode_record, Host, RecordFields};

    fn minflt() -> i64 {
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
        u.ru_minflt
    }

    /// `cargo test --release -p rmq-store columns::timing -- --ignored --nocapture`: the pure walk, no Python.
    #[test]
    #[ignore]
    fn decode_100k_x_100b() {
        let born = Host::v4([10, 0, 0, 7], 53211);
        let store = Host::v4([10, 0, 0, 1], 10911);
        let body: Vec<u8> = (0..100u8).collect();
        let mut buf = Vec::new();
        for i in 0..100_000i64 {
            let props = format!("TAGS\x01Tag{}\x02KEYS\x01order-{i}\x02UNIQ_KEY\x010A00000700002A9F{i:016X}\x02WAIT\x01true\x02", i % 10);
            let f = RecordFields {
                queue_id: (i % 8) as i32,
                flag: 0,
                queue_offset: i / 8,
                physical_offset: buf.len() as i64,
                sys_flag: 0,
                born_timestamp: i,
                born_host: &born,
                store_timestamp: i,
                store_host: &store,
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: &body,
                topic: b"BenchTopic",
                properties: props.as_bytes(),
            };
            let at = buf.len();
            buf.resize(at + f.encoded_len(), 0);
            encode_record(&mut buf[at..], &f);
        }
        for filter in [
            ColumnFilter::default(),
            ColumnFilter::with_tags(Vec::<String>::new()),
        ] {
            let mut best = f64::MAX;
            let mut faults_per_call = 0;
            for _ in 0..20 {
                let faults = minflt();
                let t = std::time::Instant::now();
                let c = decode_columns(&buf, &filter).unwrap();
                best = best.min(t.elapsed().as_secs_f64());
                faults_per_call = minflt() - faults;
                std::hint::black_box(c);
            }
            eprintln!(
                "tag filter {:?}: best {:.2} ms, {faults_per_call} page faults per call",
                filter.tags.as_ref().map(|t| t.len()),
                best * 1e3
            );
        }
    }
}
