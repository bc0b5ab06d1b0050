//! Cross-rank synchronisation protocols in their in-process form.
//!
//! The bounded active-message ring and the semaphore are written once here, generic over
//! the memory they live in and the atomic word type; the team channel's handshake
//! (`mailbox`), the rendezvous of long nonblocking messages (`rendezvous`) and the
//! barrier's rounds (`barrier`) keep their decisions here, which the
//! model layer's channel and the core's barrier call on the values their global-pointer
//! loads return. The conduits instantiate them over
//! shared-memory mappings with `std` atomics. Under `--cfg loom` the tests instantiate them
//! over [loom](https://docs.rs/loom) atomics, which check every interleaving, and every
//! weak-memory outcome loom models, of producers and consumers.
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" cargo test -p tessera --lib --release protocol
//! ```
//!
//! This module sits below the conduit and core layers and must never depend on them.

pub(crate) mod barrier;
pub(crate) mod mailbox;
pub(crate) mod rendezvous;
pub(crate) mod ring;
pub(crate) mod semaphore;

use std::sync::atomic::Ordering;

/// A 64-bit atomic word: `std`'s in production, loom's under model checking.
pub(crate) trait Word {
    fn load(&self, order: Ordering) -> u64;
    fn store(&self, value: u64, order: Ordering);
    #[cfg_attr(not(all(test, loom)), allow(dead_code))]
    fn fetch_add(&self, value: u64, order: Ordering) -> u64;
}

impl Word for std::sync::atomic::AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        std::sync::atomic::AtomicU64::load(self, order)
    }
    fn store(&self, value: u64, order: Ordering) {
        std::sync::atomic::AtomicU64::store(self, value, order)
    }
    fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
        std::sync::atomic::AtomicU64::fetch_add(self, value, order)
    }
}

#[cfg(loom)]
impl Word for loom::sync::atomic::AtomicU64 {
    fn load(&self, order: Ordering) -> u64 {
        loom::sync::atomic::AtomicU64::load(self, order)
    }
    fn store(&self, value: u64, order: Ordering) {
        loom::sync::atomic::AtomicU64::store(self, value, order)
    }
    fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
        loom::sync::atomic::AtomicU64::fetch_add(self, value, order)
    }
}
