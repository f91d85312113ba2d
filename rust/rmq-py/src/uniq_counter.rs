//! `UniqCounter`: the default UNIQ_KEY generator's counter (RocketMQ's `MessageClientIDSetter` counter, whose low 16
//! bits end every id), as a native iterator: the engine's UNIQ_KEY pass (`codec::uniq_keys::UniqIds`) takes the next
//! value with one atomic add instead of a Python `int` per id.
//!
//! Owns: the counter's value. Format: none (the id layout is `codec::uniq_keys::UniqIds` and `rmq_core.message`).
//!
//! Invariants: `next()` gives `start`, `start + 1`, … — what `itertools.count(start)` gives (the twin), modulo 2^64,
//! which the ids' `& 0xFFFF` cannot tell apart; each value is given once.
//!
//! Thread-safety: `Sync` (a frozen class around an `AtomicU64`): concurrent `next()` from several threads, with or
//! without the GIL, never give the same value twice.

use std::sync::atomic::{AtomicU64, Ordering};

use pyo3::prelude::*;

#[pyclass(module = "rmq_core._core", frozen)]
pub struct UniqCounter {
    next: AtomicU64,
}

impl UniqCounter {
    /// The next value (what `__next__` returns).
    #[inline]
    pub fn take(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

#[pymethods]
impl UniqCounter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self) -> u64 {
        self.take()
    }

    fn __repr__(&self) -> String {
        format!("UniqCounter({})", self.next.load(Ordering::Relaxed))
    }
}

/// A counter starting at `start` (the twin: `itertools.count(start)`).
#[pyfunction]
pub fn uniq_counter(start: u64) -> UniqCounter {
    UniqCounter {
        next: AtomicU64::new(start),
    }
}
