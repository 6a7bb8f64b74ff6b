//! The native binaries' allocator: mimalloc, told to keep the memory it frees.
//!
//! A training step allocates and frees the same tensors, hundreds of megabytes of them, every
//! step. glibc's malloc returns large blocks to the kernel at once and mimalloc after a second's
//! delay; either way the next step faults fresh pages in, and the kernel zeroes each (265,000
//! minor faults in 35 steps of a small model; keeping the pages made its step 1.36× faster:
//! docs/performance.md, "The CPU step"). Kept, the pages are reused, and the resident memory stays
//! at the step's peak.

// This crate is a thin safe face on mimalloc's C interface (workspace lint `unsafe_code`).
#![allow(unsafe_code)]

use libmimalloc_sys::{mi_option_get, mi_option_set, mi_option_t};

/// For `#[global_allocator]` in a binary.
pub use mimalloc::MiMalloc as Allocator;

/// mimalloc 3's `mi_option_purge_delay` (the bindings name mimalloc 2's options only), and its
/// default there, which identifies it.
const PURGE_DELAY: mi_option_t = 15;
const PURGE_DELAY_DEFAULT: std::ffi::c_long = 1000;

/// Stops mimalloc from returning freed pages to the kernel. Returns whether it did: it leaves the
/// setting alone when it is not the default it knows (another mimalloc version, or a
/// `MIMALLOC_PURGE_DELAY` the user set).
pub fn keep_freed_pages() -> bool {
    // SAFETY: reading and setting an option of the allocator in use; both are thread-safe.
    unsafe {
        if mi_option_get(PURGE_DELAY) != PURGE_DELAY_DEFAULT {
            return false;
        }
        mi_option_set(PURGE_DELAY, -1);
        mi_option_get(PURGE_DELAY) == -1
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_purge_delay_option_is_the_one_we_mean() {
        // mimalloc 3's default purge delay is 1000 ms; another option at this index would not
        // hold it (unless the environment sets it, which tests do not).
        assert!(super::keep_freed_pages(), "mimalloc's purge-delay option moved: update PURGE_DELAY");
    }
}
