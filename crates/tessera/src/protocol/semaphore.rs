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
}
