//! The ConsumeQueue unit: 20 bytes, `commitLogOffset i64 · msgSize i32 · tagsCode i64`, big-endian.
//!
//! Owns: the unit layout, its encode/decode, the pre-blank unit and the validity rule used by recovery.
//!
//! Format: unit N of a queue lives at byte N×20 of the queue's concatenated files.
//!
//! Invariants:
//!   1. A valid unit has `offset >= 0 && size > 0`; an all-zero unit ends the written data.
//!   2. The pre-blank unit `(0, i32::MAX, 0)` fills units before a queue's first real unit; it counts as valid.
//!   3. The tag filter compares `tags_code as i32`: only the low 4 bytes (unit bytes 16..20) matter.
//!
//! Thread-safety: pure functions.

pub const CQ_STORE_UNIT_SIZE: usize = 20;
/// Byte index of tagsCode inside a unit (`MSG_TAG_OFFSET_INDEX`).
pub const MSG_TAG_OFFSET_INDEX: usize = 12;
/// Byte index of the low 32 bits of tagsCode (what the int32 tag filter compares).
pub const MSG_TAG_LOW32_INDEX: usize = 16;
pub const PRE_BLANK_SIZE: i32 = i32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqUnit {
    pub offset: i64,
    pub size: i32,
    pub tags_code: i64,
}

impl CqUnit {
    pub const PRE_BLANK: CqUnit = CqUnit {
        offset: 0,
        size: PRE_BLANK_SIZE,
        tags_code: 0,
    };

    #[inline]
    pub fn encode(&self) -> [u8; CQ_STORE_UNIT_SIZE] {
        let mut b = [0u8; CQ_STORE_UNIT_SIZE];
        b[0..8].copy_from_slice(&self.offset.to_be_bytes());
        b[8..12].copy_from_slice(&self.size.to_be_bytes());
        b[12..20].copy_from_slice(&self.tags_code.to_be_bytes());
        b
    }

    /// `b` must hold at least 20 bytes.
    #[inline]
    pub fn decode(b: &[u8]) -> CqUnit {
        CqUnit {
            offset: i64::from_be_bytes(b[0..8].try_into().unwrap()),
            size: i32::from_be_bytes(b[8..12].try_into().unwrap()),
            tags_code: i64::from_be_bytes(b[12..20].try_into().unwrap()),
        }
    }

    #[inline]
    pub fn is_valid(&self) -> bool {
        self.offset >= 0 && self.size > 0
    }

    #[inline]
    pub fn is_pre_blank(&self) -> bool {
        *self == CqUnit::PRE_BLANK
    }
}
