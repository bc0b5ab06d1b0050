//! Which senders may have left active-message frames for a receiver: one bit per sender.
//!
//! A receiver has a ring per sender and class. Looking at every ring on every poll costs
//! two cache lines per sender, on pages of their own: at a thousand ranks a poll would read
//! thousands of lines and keep every ring's page mapped. Instead each receiver keeps, per
//! class, a bitmap of senders (64 to a word). A sender publishes its frame in its ring and
//! then sets its bit ([`ring`]); the receiver takes a word's bits, clearing them
//! ([`take`]), and consumes only the rings of the senders it found.
//!
//! ## Memory ordering
//! - The sender's `fetch_or` is `Release`, after the frame's header was published (itself
//!   `Release`); the receiver's `swap` is `Acquire`. A receiver that takes a bit therefore
//!   sees every frame published before that bit was set, and a frame published after the
//!   take sets the bit again for the next poll. No frame is left in a ring with its bit
//!   clear, which the loom model below checks (with `Relaxed` in place of either ordering,
//!   it fails).
//! - The sender always sets its bit (a read-modify-write; a load that found the bit
//!   already set could have raced with a take and left a frame unannounced).
//! - The receiver loads a word before swapping it, so that a poll that finds nothing writes
//!   nothing.
//!
//! This module must never block or look at a ring: it only says which rings to look at.

use std::sync::atomic::Ordering;

use super::Word;

/// The word and bit of `sender` in a bitmap.
pub(crate) fn position(sender: usize) -> (usize, u64) {
    (sender / 64, 1u64 << (sender % 64))
}

/// Words a bitmap of `senders` needs.
pub(crate) fn words(senders: usize) -> usize {
    senders.div_ceil(64)
}

/// Sender side, after publishing a frame: announce it.
pub(crate) fn ring<W: Word>(word: &W, bit: u64) {
    word.fetch_or(bit, Ordering::Release);
}

/// Receiver side: the bits set in `word` since the last take, now cleared.
pub(crate) fn take<W: Word>(word: &W) -> u64 {
    if word.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    word.swap(0, Ordering::Acquire)
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::super::ring::loom_tests::loom_ring;
    use super::*;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;
    use std::cell::Cell;

    /// Two senders, two frames each, each announced on one bitmap word; the receiver polls
    /// twice while they send and once after they are done, looking only at the rings whose
    /// bits it took. Every frame arrives, in order per sender: none is left in a ring with
    /// its bit cleared.
    #[test]
    fn no_frame_is_left_unannounced() {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let rings = Arc::new([loom_ring(4), loom_ring(4)]);
            let bitmap = Arc::new(AtomicU64::new(0));
            let senders: Vec<_> = (0..2)
                .map(|s| {
                    let rings = rings.clone();
                    let bitmap = bitmap.clone();
                    loom::thread::spawn(move || {
                        let cache = Cell::new(0);
                        for k in 0..2u8 {
                            assert!(rings[s].try_push(&cache, &[&[s as u8 * 10 + k + 1]]));
                            ring(&*bitmap, position(s).1);
                        }
                    })
                })
                .collect();
            let mut got: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
            let poll = |got: &mut [Vec<u8>; 2]| {
                let mut bits = take(&*bitmap);
                while bits != 0 {
                    let s = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    rings[s].consume(|frame| got[s].push(frame[0]));
                }
            };
            poll(&mut got);
            poll(&mut got);
            for sender in senders {
                sender.join().unwrap();
            }
            poll(&mut got);
            assert_eq!(got, [vec![1, 2], vec![11, 12]]);
        });
    }
}
