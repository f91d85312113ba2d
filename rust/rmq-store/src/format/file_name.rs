//! Mapped file names: the file's global start byte offset, decimal, zero-padded to 20 digits (`UtilAll.offset2FileName`).
//!
//! Owns: `offset_to_file_name`, `parse_file_name`, `infer_mapped_file_size` (a directory's mapped file size
//! from its files, for readers that are not given it: `store_reader`, `rmq-core store verify|inspect`).
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

/// The mapped file size of one directory of store files, from `(start, length on disk)` pairs sorted by start:
/// the smallest gap between consecutive names (files roll at exactly the file size and only the oldest are
/// deleted, so neighbours differ by one size), else the one file's length. None when nothing tells (no file, or
/// one file of length 0: being created).
pub fn infer_mapped_file_size(files: &[(u64, u64)]) -> Option<u64> {
    files
        .windows(2)
        .map(|w| w[1].0.saturating_sub(w[0].0))
        .filter(|&gap| gap > 0)
        .min()
        .or_else(|| files.iter().map(|f| f.1).max().filter(|&len| len > 0))
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

    #[test]
    fn file_size_from_names_then_lengths() {
        assert_eq!(infer_mapped_file_size(&[]), None);
        assert_eq!(infer_mapped_file_size(&[(0, 0)]), None);
        assert_eq!(infer_mapped_file_size(&[(0, 4096)]), Some(4096));
        // the newest file may still be growing: names decide
        assert_eq!(
            infer_mapped_file_size(&[(4096, 4096), (8192, 0)]),
            Some(4096)
        );
        assert_eq!(
            infer_mapped_file_size(&[(0, 100), (100, 100), (200, 7)]),
            Some(100)
        );
    }
}
