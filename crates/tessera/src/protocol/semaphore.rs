//! The semaphore protocol.
//!
//! Two words on the owner: `posted`, which only grows, and `taken`, which only the owner
//! writes. A post is `posted.fetch_add(n, AcqRel)` (release: the poster's earlier writes,
//! such as the data of a signalling put, become visible to whoever acquires the new value).
//! The owner takes `n` when `posted − taken ≥ n`, reading `posted` with `Acquire`, and then
//! records the take in `taken`.

use std::sync::atomic::Ordering;

use super::Word;

/// The ordering of a post: what `Context::atomic_apply(.., AtomicOp::Add(n))` does.
#[cfg_attr(not(all(test, loom)), allow(dead_code))]
pub(crate) fn post<W: Word>(posted: &W, n: u64) {
    posted.fetch_add(n, Ordering::AcqRel);
}

/// Owner only: take `n` posts if that many are available.
pub(crate) fn try_take<W: Word>(posted: &W, taken: &W, n: u64) -> bool {
    // Only the owner writes `taken`: Relaxed reads back its own last value.
    let done = taken.load(Ordering::Relaxed);
    if posted.load(Ordering::Acquire).wrapping_sub(done) < n {
        return false;
    }
    taken.store(done.wrapping_add(n), Ordering::Relaxed);
    true
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::atomic::AtomicU64;
    use loom::sync::Arc;

    /// Two producers each write a data word and post; once the owner has taken both posts,
    /// it must see both data words.
    #[test]
    fn data_before_a_post_is_visible_after_the_take() {
        loom::model(|| {
            let shared = Arc::new((
                AtomicU64::new(0),
                AtomicU64::new(0),
                [AtomicU64::new(0), AtomicU64::new(0)],
            ));
            let producers: Vec<_> = (0..2)
                .map(|i| {
                    let s = shared.clone();
                    loom::thread::spawn(move || {
                        s.2[i].store(10 + i as u64, Ordering::Relaxed);
                        post(&s.0, 1);
                    })
                })
                .collect();
            let (posted, taken, data) = &*shared;
            let mut got = 0;
            while got < 2 {
                if try_take(posted, taken, 1) {
                    got += 1;
                } else {
                    loom::thread::yield_now();
                }
            }
            assert_eq!(data[0].load(Ordering::Relaxed), 10);
            assert_eq!(data[1].load(Ordering::Relaxed), 11);
            assert!(!try_take(posted, taken, 1), "a third post appeared");
            for p in producers {
                p.join().unwrap();
            }
        });
    }

    /// Spin (yielding to loom) until `n` posts can be taken.
    fn take(posted: &AtomicU64, taken: &AtomicU64, n: u64) {
        while !try_take(posted, taken, n) {
            loom::thread::yield_now();
        }
    }

    /// `model::mailbox`'s protocol between two partners, each a thread: per exchange,
    /// write the partner's next half and post its arrival semaphore, take its own arrival,
    /// and read its own half, which stays lent until the next exchange. The half must hold
    /// the partner's message for this exchange when read, and still hold it at the next
    /// exchange (never overwritten while lent). With one half instead of two it fails.
    #[test]
    fn mailbox_halves_are_never_overwritten_while_lent() {
        const HALVES: u64 = 2;
        let mut builder = loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            /// One rank's words: arrival (posted, taken) and inbox halves.
            struct Rank {
                arrival: [AtomicU64; 2],
                halves: [AtomicU64; 2],
            }
            let rank = || Rank {
                arrival: [AtomicU64::new(0), AtomicU64::new(0)],
                halves: [AtomicU64::new(0), AtomicU64::new(0)],
            };
            let ranks = Arc::new([rank(), rank()]);
            const EXCHANGES: u64 = 4;
            let run = |me: usize, ranks: Arc<[Rank; 2]>| {
                let (mine, theirs) = (&ranks[me], &ranks[1 - me]);
                let message = |from: usize, use_: u64| 100 * from as u64 + use_ + 1;
                let half = |use_: u64| (use_ % HALVES) as usize;
                let mut lent: Option<u64> = None;
                for use_ in 0..EXCHANGES {
                    if let Some(previous) = lent.take() {
                        // The last exchange's slice lives until this call begins (the call
                        // takes `&mut self`): check it was intact until here.
                        let still = mine.halves[half(previous)].load(Ordering::Relaxed);
                        assert_eq!(still, message(1 - me, previous), "overwritten while lent");
                    }
                    theirs.halves[half(use_)].store(message(me, use_), Ordering::Relaxed);
                    post(&theirs.arrival[0], 1);
                    take(&mine.arrival[0], &mine.arrival[1], 1);
                    let got = mine.halves[half(use_)].load(Ordering::Relaxed);
                    assert_eq!(got, message(1 - me, use_), "rank {me}, exchange {use_}");
                    lent = Some(use_);
                }
            };
            let other = {
                let ranks = ranks.clone();
                loom::thread::spawn(move || run(1, ranks))
            };
            run(0, ranks);
            other.join().unwrap();
        });
    }
}
