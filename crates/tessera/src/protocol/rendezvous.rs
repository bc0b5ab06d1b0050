//! The rendezvous of a nonblocking schedule's long messages (see `model::team::schedule`):
//! the sender stages the data in its own segment and publishes a descriptor through the
//! team channel (the `mailbox` handshake, whose flag store is `Release`); each reader,
//! having loaded that flag with `Acquire`, copies the staged data and stores [`READ`] into
//! its own flag word with `Release` ([`mark_read`]); the sender frees the staging area only
//! once every reader's flag reads [`READ`], loaded with `Acquire` ([`all_read`]).
//!
//! The release of the descriptor's flag after the staging copy makes the data visible to
//! each reader; the reader's release after its copy, acquired by the sender before it
//! frees, orders the copy before any reuse of the memory. The model below checks the
//! first and the every-reader condition under loom (two readers; weakening the
//! descriptor's `Release` or freeing after one reader fails it). As for the mailbox, the
//! reader's copy before a later overwrite is a load-to-store ordering that loom does not
//! model, so it rests on the argument above.
//!
//! This module must never depend on the core or the conduits.

use std::sync::atomic::Ordering;

use super::Word;

/// A reader's flag once it has copied the staged data (the area starts zeroed).
pub(crate) const READ: u64 = 1;

/// Whether a reader's flag value (loaded with `Acquire`) says it has read.
pub(crate) fn has_read(flag: u64) -> bool {
    flag == READ
}

/// Sender: whether every reader's flag reads [`READ`].
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn all_read<W: Word>(flags: &[W]) -> bool {
    flags.iter().all(|f| has_read(f.load(Ordering::Acquire)))
}

/// Reader: the staged data has been copied out.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn mark_read<W: Word>(flag: &W) {
    flag.store(READ, Ordering::Release);
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::protocol::mailbox::{arrived, publish};
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;

    /// A sender stages a value for two readers, each of which looks once (a `test`): a
    /// reader that finds the descriptor sees the staged value, and the sender finds every
    /// flag set only if both readers have read.
    #[test]
    fn every_reader_sees_the_staged_data_before_the_area_is_freed() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(2);
        builder.check(|| {
            // (staged data, descriptor flag per reader, read flag per reader)
            let shared = Arc::new((
                AtomicU64::new(0),
                [AtomicU64::new(0), AtomicU64::new(0)],
                [AtomicU64::new(0), AtomicU64::new(0)],
            ));
            let readers: Vec<_> = (0..2)
                .map(|r| {
                    let s = shared.clone();
                    loom::thread::spawn(move || {
                        let (data, descriptors, read) = &*s;
                        if !arrived(&descriptors[r], 0) {
                            return false;
                        }
                        assert_eq!(data.load(Ordering::Relaxed), 42);
                        mark_read(&read[r]);
                        true
                    })
                })
                .collect();
            let (data, descriptors, read) = &*shared;
            data.store(42, Ordering::Relaxed);
            for d in descriptors {
                publish(d, 0);
            }
            let freed = all_read(read);
            let done: Vec<bool> = readers.into_iter().map(|r| r.join().unwrap()).collect();
            if freed {
                assert!(
                    done.iter().all(|&d| d),
                    "freed before every reader had read"
                );
            }
        });
    }
}
