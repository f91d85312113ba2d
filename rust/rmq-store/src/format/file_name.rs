//! Mapped file names: the file's global start byte offset, decimal, zero-padded to 20 digits (`UtilAll.offset2FileName`).
//!
//! Owns: `offset_to_file_name`, `parse_file_name`.
//!
//! Invariants: a name is exactly 20 ASCII digits; anything else is not a store file and is ignored by loaders.
//!
//! Thread-safety: pure functions.

pub const FILE_NAME_LEN: usize = 20;

pub fn offset_to_file_name(offset: u64) -> String {
    format!("{offset:020}")
}

pub fn parse_file_name(name: &str) -> Option<u64> {
    if name.len() != FILE_NAME_LEN || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(offset_to_file_name(1073741824), "00000000001073741824");
        assert_eq!(parse_file_name("00000000001073741824"), Some(1073741824));
        assert_eq!(parse_file_name("1073741824"), None);
        assert_eq!(parse_file_name("0000000000107374182x"), None);
    }
}
