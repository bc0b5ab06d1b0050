//! Cross-rank synchronisation protocols in their in-process form.
//!
//! The bounded active-message ring, the doorbell that says which rings to look at, and
//! the semaphore are written once here, generic over the memory they live in and the
//! atomic word type; the team channel's handshake (`mailbox`), the rendezvous of long
//! nonblocking messages (`rendezvous`), the split copy of long directly read messages
//! (`split`) and the barrier's rounds (`barrier`) keep their decisions here, which the
//! model layer's channel and the core's barrier call on the values their global-pointer
//! loads return. The conduits instantiate them over shared-memory mappings with `std`
//! atomics. Under `--cfg loom` the tests instantiate them over
//! [loom](https://docs.rs/loom) atomics, which check every interleaving, and every
//! weak-memory outcome loom models, of producers and consumers.
//!
//! ```sh
//! RUSTFLAGS="--cfg loom" cargo test -p tessera --lib --release protocol
//! ```
//!
//! This module sits below the conduit and core layers and must never depend on them.

pub(crate) mod barrier;
pub(crate) mod doorbell;
pub(crate) mod mailbox;
pub(crate) mod rendezvous;
pub(crate) mod ring;
pub(crate) mod semaphore;
pub(crate) mod split;

use std::sync::atomic::Ordering;

/// A 64-bit atomic word: `std`'s in production, loom's under model checking.
pub(crate) trait Word {
    fn load(&self, order: Ordering) -> u64;
    fn store(&self, value: u64, order: Ordering);
    fn swap(&self, value: u64, order: Ordering) -> u64;
    fn fetch_or(&self, value: u64, order: Ordering) -> u64;
    #[cfg_attr(not(all(test, loom)), allow(dead_code))]
    fn fetch_add(&self, value: u64, order: Ordering) -> u64;
    #[cfg_attr(not(all(test, loom)), allow(dead_code))]
    fn compare_exchange(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64>;
}

/// [`Word`] for an atomic type with `std`'s methods.
macro_rules! word_for {
    ($atomic:ty) => {
        impl Word for $atomic {
            fn load(&self, order: Ordering) -> u64 {
                <$atomic>::load(self, order)
            }
            fn store(&self, value: u64, order: Ordering) {
                <$atomic>::store(self, value, order)
            }
            fn swap(&self, value: u64, order: Ordering) -> u64 {
                <$atomic>::swap(self, value, order)
            }
            fn fetch_or(&self, value: u64, order: Ordering) -> u64 {
                <$atomic>::fetch_or(self, value, order)
            }
            fn fetch_add(&self, value: u64, order: Ordering) -> u64 {
                <$atomic>::fetch_add(self, value, order)
            }
            fn compare_exchange(
                &self,
                current: u64,
                new: u64,
                success: Ordering,
                failure: Ordering,
            ) -> Result<u64, u64> {
                <$atomic>::compare_exchange(self, current, new, success, failure)
            }
        }
    };
}

word_for!(std::sync::atomic::AtomicU64);
#[cfg(loom)]
word_for!(loom::sync::atomic::AtomicU64);
