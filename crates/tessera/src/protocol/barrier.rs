//! The dissemination barrier's rounds (see `core::barrier`).
//!
//! In round k of epoch e, rank i stores what it has combined so far into the slot for
//! round k of the receiver (i + 2ᵏ) mod P, then the epoch number with `Release`; it waits
//! until its own slot of round k holds at least e, loaded with `Acquire`, and combines the
//! sender's words into its own. Slots alternate between two sets by the epoch's parity: a
//! rank can be at most one epoch ahead of any other (it cannot finish epoch e + 1 before
//! every rank has entered it), so a slot is never overwritten before its reader is done.
//! After ⌈log₂ P⌉ rounds every rank has, through a chain of release/acquire pairs, seen
//! every rank's entry: what any rank wrote before the barrier is visible to every rank
//! after it, and the combined words (labels, fingerprints) are every rank's.
//!
//! The model below runs three ranks through two epochs under loom. The barrier in the core
//! calls these functions.
//!
//! This module must never depend on the core or the conduits.

use std::sync::atomic::Ordering;

use super::Word;

/// Rounds for `ranks` ranks: ⌈log₂ ranks⌉.
pub(crate) fn rounds(ranks: usize) -> usize {
    ranks.next_power_of_two().trailing_zeros() as usize
}

/// The rank `rank` signals in `round`.
pub(crate) fn partner(rank: usize, round: usize, ranks: usize) -> usize {
    (rank + (1 << round)) % ranks
}

/// The rank that signals `rank` in `round`.
pub(crate) fn source(rank: usize, round: usize, ranks: usize) -> usize {
    (rank + ranks - (1 << round) % ranks) % ranks
}

/// The slot set epoch `epoch` uses.
pub(crate) fn parity(epoch: u64) -> usize {
    (epoch % 2) as usize
}

/// Whether a slot holding `slot_epoch` carries the signal of epoch `epoch`.
pub(crate) fn signalled(slot_epoch: u64, epoch: u64) -> bool {
    slot_epoch >= epoch
}

/// Combine the words received in a round (label min, label max, fingerprint min, max)
/// into `ours`.
pub(crate) fn combine(ours: [u64; 4], theirs: [u64; 4]) -> [u64; 4] {
    [
        ours[0].min(theirs[0]),
        ours[1].max(theirs[1]),
        ours[2].min(theirs[2]),
        ours[3].max(theirs[3]),
    ]
}

/// Signal: the combined words (`Relaxed`), then the epoch (`Release`).
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn signal<W: Word>(epoch_word: &W, words: &[W; 4], combined: [u64; 4], epoch: u64) {
    for (w, v) in words.iter().zip(combined) {
        w.store(v, Ordering::Relaxed);
    }
    epoch_word.store(epoch, Ordering::Release);
}

/// Receive: `Some(words)` once the slot carries epoch `epoch`'s signal.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn receive<W: Word>(epoch_word: &W, words: &[W; 4], epoch: u64) -> Option<[u64; 4]> {
    if !signalled(epoch_word.load(Ordering::Acquire), epoch) {
        return None;
    }
    Some(std::array::from_fn(|i| words[i].load(Ordering::Relaxed)))
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;

    struct Slot {
        epoch: AtomicU64,
        words: [AtomicU64; 4],
    }

    /// Per rank: slots[parity][round], and one data word per epoch written before the
    /// barrier.
    struct Rank {
        slots: [[Slot; 2]; 2],
        data: [AtomicU64; 3],
    }

    /// `ranks` ranks run `epochs` whole barriers; in each, every rank writes a data word before
    /// and, after, must see every rank's word of that epoch and the combined label range.
    fn run(ranks: usize, epochs: u64, preemptions: usize) {
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(preemptions);
        // Waiting ranks spin (yielding), which takes branches.
        builder.max_branches = 20_000;
        builder.check(move || {
            let all: Arc<Vec<Rank>> = Arc::new(
                (0..ranks)
                    .map(|_| Rank {
                        slots: std::array::from_fn(|_| {
                            std::array::from_fn(|_| Slot {
                                epoch: AtomicU64::new(0),
                                words: std::array::from_fn(|_| AtomicU64::new(0)),
                            })
                        }),
                        data: std::array::from_fn(|_| AtomicU64::new(0)),
                    })
                    .collect(),
            );
            let threads: Vec<_> = (0..ranks)
                .map(|me| {
                    let all = all.clone();
                    loom::thread::spawn(move || {
                        for epoch in 1..=epochs {
                            let value = 10 * epoch + me as u64;
                            all[me].data[epoch as usize - 1].store(value, Ordering::Relaxed);
                            let mut combined = [value, value, epoch, epoch];
                            for round in 0..rounds(ranks) {
                                let to =
                                    &all[partner(me, round, ranks)].slots[parity(epoch)][round];
                                signal(&to.epoch, &to.words, combined, epoch);
                                let mine = &all[me].slots[parity(epoch)][round];
                                let theirs = loop {
                                    match receive(&mine.epoch, &mine.words, epoch) {
                                        Some(w) => break w,
                                        None => loom::thread::yield_now(),
                                    }
                                };
                                combined = combine(combined, theirs);
                            }
                            let top = 10 * epoch + ranks as u64 - 1;
                            assert_eq!(combined, [10 * epoch, top, epoch, epoch]);
                            for (r, rank) in all.iter().enumerate() {
                                assert_eq!(
                                    rank.data[epoch as usize - 1].load(Ordering::Relaxed),
                                    10 * epoch + r as u64
                                );
                            }
                        }
                    })
                })
                .collect();
            for t in threads {
                t.join().unwrap();
            }
        });
    }

    /// The chain through a middle rank that carries a write to ranks two rounds away: rank
    /// 0 writes, signals rank 1 in round 0; rank 1, if it has the signal, combines and
    /// signals rank 2 in round 1; rank 2, if it has that signal, must see rank 0's write and
    /// label. Nobody spins (each looks once), so loom explores every interleaving quickly;
    /// the whole three-rank barrier has the same steps but its spinning takes loom hours.
    #[test]
    fn a_write_reaches_a_rank_two_rounds_away_through_the_middle_rank() {
        loom::model(|| {
            let slots: Arc<[Slot; 2]> = Arc::new(std::array::from_fn(|_| Slot {
                epoch: AtomicU64::new(0),
                words: std::array::from_fn(|_| AtomicU64::new(0)),
            }));
            let data = Arc::new(AtomicU64::new(0));
            let first = {
                let (slots, data) = (slots.clone(), data.clone());
                loom::thread::spawn(move || {
                    data.store(42, Ordering::Relaxed);
                    signal(&slots[0].epoch, &slots[0].words, [5, 5, 1, 1], 1);
                })
            };
            let middle = {
                let slots = slots.clone();
                loom::thread::spawn(move || {
                    if let Some(got) = receive(&slots[0].epoch, &slots[0].words, 1) {
                        let combined = combine([7, 7, 1, 1], got);
                        signal(&slots[1].epoch, &slots[1].words, combined, 1);
                    }
                })
            };
            if let Some(got) = receive(&slots[1].epoch, &slots[1].words, 1) {
                assert_eq!(combine([9, 9, 1, 1], got), [5, 9, 1, 1]);
                assert_eq!(data.load(Ordering::Relaxed), 42);
            }
            first.join().unwrap();
            middle.join().unwrap();
        });
    }

    /// Two ranks, three consecutive barriers: the two slot sets are reused without a signal
    /// of one epoch being taken for another's.
    #[test]
    fn consecutive_barriers_reuse_slots_safely() {
        run(2, 3, 2);
    }
}
