//! The SEND_BATCH_MESSAGE body and the records a batch becomes: 4.9's `MessageDecoder.encodeMessages` layout read
//! block by block, and each block's stored properties as 4.9.7's `CommitLog.MessageExtBatchEncoder` writes them (the
//! block's own property string byte for byte, a `\x02` when it is non-empty and does not end with one, then the
//! batch's property string: header properties + CLUSTER). Twin: `python/rmq_core/format/batch.py`.
//!
//! Format (per block, big-endian): TOTALSIZE i32 · MAGIC i32 · BODYCRC i32 · FLAG i32 · BODYLEN i32 + BODY ·
//! PROPLEN i16 + PROPERTIES. MAGIC and BODYCRC are not read (4.9's encoder recomputes the CRC; so does ours).
//!
//! `append_block` writes a block as 4.9's `MessageDecoder.encodeMessage` does (a producer's batch body, block by block).
//!
//! Invariants:
//! 1. `split_batch` returns every block or the reason the body is malformed (naming the block and its byte
//!    position), never part of it. Stricter than Java's `decodeMessages`, which trusts the lengths: TOTALSIZE must
//!    equal the block's real size, no length may be negative or run past the body, the properties must be UTF-8.
//! 2. `BatchRecords::build` gives each block the properties `append_batch_properties` writes, and a block whose
//!    stored properties hold no UNIQ_KEY (as the map a reader decodes would) the caller's next id appended last (as
//!    the store's facade assigns one on every put).
//!
//! Thread-safety: pure functions; `BatchRecords` is plain data.

use crate::format::index::PROPERTY_UNIQ_KEY;
use crate::format::message::{
    append_property, be_i32, create_offset_msg_id, for_each_property, Host, MAX_PROPERTIES_SIZE,
    PROPERTY_SEPARATOR,
};

/// TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN.
pub const BATCH_BLOCK_HEAD: usize = 20;
/// The bytes of a block besides its body and properties (the head and PROPLEN).
pub const BATCH_BLOCK_OVERHEAD: usize = BATCH_BLOCK_HEAD + 2;

/// One block of a batch body, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchBlock<'a> {
    pub flag: i32,
    pub body: &'a [u8],
    pub properties: &'a [u8],
}

/// The blocks of a SEND_BATCH_MESSAGE body in order, or why it is malformed (invariant 1).
pub fn split_batch(body: &[u8]) -> Result<Vec<BatchBlock<'_>>, String> {
    let n = body.len();
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < n {
        let index = out.len();
        if n - pos < BATCH_BLOCK_OVERHEAD {
            return Err(format!(
                "batch block {index} at byte {pos} is truncated: {} bytes left, a block needs at least \
                 {BATCH_BLOCK_OVERHEAD}",
                n - pos
            ));
        }
        let total = be_i32(body, pos) as i64;
        let flag = be_i32(body, pos + 12);
        let body_len = be_i32(body, pos + 16);
        if body_len < 0 {
            return Err(format!(
                "batch block {index} at byte {pos} has a negative body length {body_len}"
            ));
        }
        let body_pos = pos + BATCH_BLOCK_HEAD;
        let prop_len_pos = body_pos + body_len as usize;
        if prop_len_pos + 2 > n {
            return Err(format!(
                "batch block {index} at byte {pos}: body of {body_len} bytes runs past the {n}-byte batch"
            ));
        }
        let prop_len = i16::from_be_bytes([body[prop_len_pos], body[prop_len_pos + 1]]);
        if prop_len < 0 {
            return Err(format!(
                "batch block {index} at byte {pos} has a negative properties length {prop_len}"
            ));
        }
        let props_pos = prop_len_pos + 2;
        let end = props_pos + prop_len as usize;
        if end > n {
            return Err(format!(
                "batch block {index} at byte {pos}: properties of {prop_len} bytes run past the {n}-byte batch"
            ));
        }
        if total != (end - pos) as i64 {
            return Err(format!(
                "batch block {index} at byte {pos}: TOTALSIZE {total} does not match its {} bytes (body \
                 {body_len}, properties {prop_len})",
                end - pos
            ));
        }
        let properties = &body[props_pos..end];
        if let Err(e) = std::str::from_utf8(properties) {
            return Err(format!(
                "batch block {index} at byte {pos}: properties are not UTF-8 (invalid byte at {})",
                e.valid_up_to()
            ));
        }
        out.push(BatchBlock {
            flag,
            body: &body[body_pos..prop_len_pos],
            properties,
        });
        pos = end;
    }
    Ok(out)
}

/// What 4.9.7's batch encoder stores for a block: `block`, a `\x02` when `block` is non-empty, `batch` is non-empty
/// and `block` does not end with one, then `batch`.
pub fn append_batch_properties(out: &mut Vec<u8>, block: &[u8], batch: &[u8]) {
    out.extend_from_slice(block);
    if !batch.is_empty() {
        if !block.is_empty() && block.last() != Some(&PROPERTY_SEPARATOR) {
            out.push(PROPERTY_SEPARATOR);
        }
        out.extend_from_slice(batch);
    }
}

/// Whether a reader's map of `properties` holds `name`.
pub fn has_property(properties: &[u8], name: &[u8]) -> bool {
    let mut found = false;
    for_each_property(properties, |k, _| found |= k == name);
    found
}

/// The records of a batch: each block's flag and body (borrowed from the batch body) and its stored properties
/// (in one arena), see invariant 2.
#[derive(Debug)]
pub struct BatchRecords<'a> {
    pub blocks: Vec<BatchBlock<'a>>,
    arena: Vec<u8>,
    ends: Vec<usize>,
}

impl<'a> BatchRecords<'a> {
    /// The records of `body` with `batch_properties` appended to each block's; `next_uniq_id(&mut id)` writes the
    /// UNIQ_KEY of a block that has none and says whether to append it (an `Err` from it is returned as it is).
    /// `Ok(Err(reason))`: the body is malformed (`split_batch`), or holds no block.
    pub fn build<E>(
        body: &'a [u8],
        batch_properties: &[u8],
        mut next_uniq_id: impl FnMut(&mut String) -> Result<bool, E>,
    ) -> Result<Result<BatchRecords<'a>, String>, E> {
        let blocks = match split_batch(body) {
            Ok(b) if b.is_empty() => return Ok(Err("the batch body holds no message".into())),
            Ok(b) => b,
            Err(reason) => return Ok(Err(reason)),
        };
        let mut arena = Vec::with_capacity(
            blocks.iter().map(|b| b.properties.len()).sum::<usize>()
                + blocks.len() * (batch_properties.len() + 1),
        );
        let mut ends = Vec::with_capacity(blocks.len());
        let mut id = String::new();
        for b in &blocks {
            let start = arena.len();
            append_batch_properties(&mut arena, b.properties, batch_properties);
            if !has_property(&arena[start..], PROPERTY_UNIQ_KEY) && next_uniq_id(&mut id)? {
                append_property(&mut arena, start, PROPERTY_UNIQ_KEY, id.as_bytes());
            }
            ends.push(arena.len());
        }
        Ok(Ok(BatchRecords {
            blocks,
            arena,
            ends,
        }))
    }

    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The stored properties of record `i`.
    pub fn properties(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.arena[start..self.ends[i]]
    }
}

/// 4.9's batch answer msgId: the offset msg ids of `offsets` joined with ','.
pub fn join_offset_msg_ids(host: &Host, offsets: impl IntoIterator<Item = i64>) -> String {
    let mut out = String::new();
    for (i, off) in offsets.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&create_offset_msg_id(host, off));
    }
    out
}

/// Appends one block of a batch body as a client encodes it (4.9's `MessageDecoder.encodeMessage`; MAGIC and BODYCRC
/// written as 0, which the store does not read). The caller keeps `properties` within `MAX_PROPERTIES_SIZE` and
/// `body` within an i32 (a block over either is not a block).
pub fn append_block(out: &mut Vec<u8>, flag: i32, body: &[u8], properties: &[u8]) {
    debug_assert!(properties.len() <= MAX_PROPERTIES_SIZE);
    let total = (BATCH_BLOCK_OVERHEAD + body.len() + properties.len()) as i32;
    out.reserve(BATCH_BLOCK_OVERHEAD + body.len() + properties.len());
    for x in [total, 0, 0, flag, body.len() as i32] {
        out.extend_from_slice(&x.to_be_bytes());
    }
    out.extend_from_slice(body);
    out.extend_from_slice(&(properties.len() as i16).to_be_bytes());
    out.extend_from_slice(properties);
}

/// One block alone (`append_block`): the tests' batches.
#[cfg(test)]
pub(crate) fn block(flag: i32, body: &[u8], props: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    append_block(&mut v, flag, body, props);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_their_properties_as_4_9_7_stores_them() {
        let mut body = block(7, b"hello", b"UNIQ_KEY\x01u1\x02WAIT\x01true");
        body.extend(block(0, b"", b""));
        body.extend(block(1, b"x", b"UNIQ_KEY\x01u3\x02"));
        let mut ids = 0;
        let recs = BatchRecords::build(
            &body,
            b"WAIT\x01true\x02CLUSTER\x01c", // as the processor writes it: no \x02 after the last entry
            |id: &mut String| -> Result<bool, ()> {
                ids += 1;
                id.clear();
                id.push_str("NEW");
                Ok(true)
            },
        )
        .unwrap()
        .unwrap();
        assert_eq!(recs.len(), 3);
        assert_eq!(
            recs.properties(0),
            b"UNIQ_KEY\x01u1\x02WAIT\x01true\x02WAIT\x01true\x02CLUSTER\x01c"
        );
        assert_eq!(
            recs.properties(1),
            b"WAIT\x01true\x02CLUSTER\x01c\x02UNIQ_KEY\x01NEW" // a \x02 before the id, none after
        );
        assert_eq!(
            recs.properties(2),
            b"UNIQ_KEY\x01u3\x02WAIT\x01true\x02CLUSTER\x01c"
        );
        assert_eq!(ids, 1);
        assert_eq!(
            (recs.blocks[0].flag, recs.blocks[0].body),
            (7, &b"hello"[..])
        );
    }

    #[test]
    fn malformed_bodies_are_named() {
        let one = block(0, b"abc", b"A\x01b");
        let mut two = one.clone();
        two.extend_from_slice(&one[..one.len() - 2]);
        let err = split_batch(&two).unwrap_err();
        assert!(
            err.contains(&format!("block 1 at byte {}", one.len())),
            "{err}"
        );
        let mut bad = one.clone();
        bad[0..4].copy_from_slice(&99i32.to_be_bytes());
        assert!(split_batch(&bad).unwrap_err().contains("TOTALSIZE"));
        let mut bad = one.clone();
        *bad.last_mut().unwrap() = 0xFF;
        assert!(split_batch(&bad)
            .unwrap_err()
            .contains("not UTF-8 (invalid byte at 2)"));
        let none =
            BatchRecords::build(b"", b"", |_: &mut String| -> Result<bool, ()> { Ok(false) });
        assert_eq!(
            none.unwrap().unwrap_err(),
            "the batch body holds no message"
        );
        assert_eq!(split_batch(b"").unwrap(), vec![]);
    }

    #[test]
    fn separators() {
        let mut out = Vec::new();
        append_batch_properties(&mut out, b"A\x011", b"C\x01c\x02");
        assert_eq!(out, b"A\x011\x02C\x01c\x02");
        out.clear();
        append_batch_properties(&mut out, b"A\x011\x02", b"C\x01c");
        assert_eq!(out, b"A\x011\x02C\x01c");
        out.clear();
        append_batch_properties(&mut out, b"A\x011", b"");
        assert_eq!(out, b"A\x011");
    }
}
