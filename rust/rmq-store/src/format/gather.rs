//! Gathering byte runs of one buffer into one contiguous buffer: the CommitLog records of a ConsumeQueue range,
//! which sit in the CommitLog in write order, interleaved with other queues' records (a read-only store reader
//! copies them out of a mapped file in one pass).
//!
//! Owns: `gather_runs` and its error.
//!
//! Invariants: the output is the runs `src[starts[i]..ends[i]]` concatenated in the given order; nothing is
//! copied unless every run is within `src` (0 ≤ start ≤ end ≤ len) and there are as many starts as ends.
//!
//! Thread-safety: a pure function.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatherError {
    /// `starts` and `ends` differ in length.
    LengthMismatch { starts: usize, ends: usize },
    /// Run `index` is not within the source.
    OutOfRange {
        index: usize,
        start: i64,
        end: i64,
        len: usize,
    },
}

impl fmt::Display for GatherError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatherError::LengthMismatch { starts, ends } => {
                write!(f, "{starts} run starts but {ends} run ends")
            }
            GatherError::OutOfRange {
                index,
                start,
                end,
                len,
            } => {
                write!(
                    f,
                    "run {index} [{start}, {end}) is outside the {len}-byte source"
                )
            }
        }
    }
}

impl std::error::Error for GatherError {}

/// `src[starts[i]..ends[i]]` for every i, concatenated.
pub fn gather_runs(src: &[u8], starts: &[i64], ends: &[i64]) -> Result<Vec<u8>, GatherError> {
    if starts.len() != ends.len() {
        return Err(GatherError::LengthMismatch {
            starts: starts.len(),
            ends: ends.len(),
        });
    }
    let mut total = 0usize;
    for (index, (&start, &end)) in starts.iter().zip(ends).enumerate() {
        if start < 0 || end < start || end as u64 > src.len() as u64 {
            return Err(GatherError::OutOfRange {
                index,
                start,
                end,
                len: src.len(),
            });
        }
        total += (end - start) as usize;
    }
    let mut out = Vec::with_capacity(total);
    for (&start, &end) in starts.iter().zip(ends) {
        out.extend_from_slice(&src[start as usize..end as usize]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concatenates_runs_in_order() {
        let src = b"0123456789";
        assert_eq!(
            gather_runs(src, &[7, 0, 3, 5], &[10, 2, 3, 6]).unwrap(),
            b"789015".to_vec()
        );
        assert_eq!(gather_runs(src, &[], &[]).unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn refuses_bad_runs_before_copying() {
        let src = b"abc";
        assert_eq!(
            gather_runs(src, &[0], &[]),
            Err(GatherError::LengthMismatch { starts: 1, ends: 0 })
        );
        let err = GatherError::OutOfRange {
            index: 1,
            start: 2,
            end: 4,
            len: 3,
        };
        assert_eq!(gather_runs(src, &[0, 2], &[1, 4]), Err(err));
        assert!(gather_runs(src, &[-1], &[1]).is_err());
        assert!(gather_runs(src, &[2], &[1]).is_err());
    }
}
