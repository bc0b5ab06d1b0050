//! Point-to-point synchronisation: semaphores, the signalling put, and global locks.
//!
//! A [`Semaphore`] is two 64-bit words in its owner's segment, on separate cache lines:
//! `posted`, which only grows (any rank may `post`: an atomic add with release semantics),
//! and `taken`, which only the owner touches. `wait(n)` (owner only) spins until
//! `posted − taken ≥ n` with acquire loads and then adds `n` to `taken`; the consumer's
//! path has no locked instruction and never writes the line producers write. The *signalling put*
//! ([`Context::put`] with [`Signal`](crate::Signal), Berkeley UPC's `bupc_memput_signal`) moves data and then
//! posts the target's semaphore: the consumer's `wait` returning proves the data arrived,
//! with no barrier and no flag round trip.
//!
//! A [`GlobalLock`] (UPC's `upc_lock_t`) is a word holding 0 when free and holder+1 when
//! held, taken with compare-and-swap (acquire) and released with a store (release). A
//! [`TicketLock`] is fair: a word of tickets taken and ticket served, taken in order.

use std::sync::atomic::AtomicU64;

use super::atomic::Remote;
use super::{Context, GlobalPtr};
use crate::error::CoreError;
use crate::{protocol, Blocking};
use crate::{AtomicOp, Result};

/// A counting semaphore with affinity to one rank. Copyable: hand it to other ranks (in
/// a put, an RPC, or by allocating collectively) so they can post to it.
///
/// ```no_run
/// # fn f(ctx: &tessera::Context) -> tessera::Result<()> {
/// let inbox = ctx.alloc_collective::<f64>(8)?;
/// let arrived = ctx.semaphore_collective()?;
/// let right = (ctx.rank() + 1) % ctx.ranks();
/// let signal = tessera::Signal::Post(arrived.on(right));
/// ctx.put(inbox.on(right), &[ctx.rank() as f64; 8], signal)?;
/// arrived.wait(ctx, 1)?; // our left neighbour's data is here
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Semaphore {
    /// `posted`; `taken` is 64 bytes (one cache line) further on.
    pub(super) counter: GlobalPtr<u64>,
}

/// Words per semaphore: `posted` and `taken` a cache line apart.
const SEMAPHORE_WORDS: usize = 16;
const TAKEN: usize = 8;

impl Semaphore {
    /// The rank that owns the semaphore (and may wait on it).
    pub fn owner(&self) -> usize {
        self.counter.rank()
    }

    /// For a semaphore from [`Context::semaphore_collective`]: the one owned by `rank`.
    pub fn on(self, rank: usize) -> Semaphore {
        Semaphore {
            counter: self.counter.on(rank),
        }
    }

    /// Add `n` to the counter (release: the caller's earlier puts are visible to the waiter).
    pub fn post(&self, ctx: &Context, n: u64) -> Result<()> {
        ctx.signal(None, self.counter, Remote::Rmw(AtomicOp::Add(n)))
    }

    /// Owner only: take `n` if at least `n` posts are available; never blocks.
    pub fn try_wait(&self, ctx: &Context, n: u64) -> Result<bool> {
        let (posted, taken) = self.owner_words(ctx)?;
        Ok(protocol::semaphore::try_take(posted, taken, n))
    }

    /// The owner's `posted` and `taken` words, as atomics in its own segment.
    fn owner_words<'a>(&self, ctx: &'a Context) -> Result<(&'a AtomicU64, &'a AtomicU64)> {
        if self.owner() != ctx.rank() {
            return Err(CoreError::NotOwner {
                what: "waiting on a semaphore",
                owner: self.owner(),
                caller: ctx.rank(),
            }
            .into());
        }
        let words = ctx
            .local_ptr(self.counter, SEMAPHORE_WORDS)?
            .ok_or_else(|| CoreError::Internal("a rank's own segment is not mapped".into()))?;
        // SAFETY: local_ptr checked that the SEMAPHORE_WORDS words are mapped, in bounds and
        // 8-byte aligned in this rank's segment, which lives as long as `ctx`; the words are
        // only ever accessed atomically (posts are remote atomic adds).
        Ok(unsafe {
            (
                AtomicU64::from_ptr(words),
                AtomicU64::from_ptr(words.add(TAKEN)),
            )
        })
    }

    /// Owner only: block until at least `n` posts are available, then take `n`.
    pub fn wait(&self, ctx: &Context, n: u64) -> Result<()> {
        let (posted, taken) = self.owner_words(ctx)?;
        ctx.wait_until(
            "a semaphore",
            || Ok(protocol::semaphore::try_take(posted, taken, n)),
            || {
                format!(
                    "needed {n} posts; {} are available",
                    self.value(ctx).unwrap_or(0)
                )
            },
        )
    }

    /// Posts available to `wait` now (for diagnostics; it may grow at once).
    pub fn value(&self, ctx: &Context) -> Result<u64> {
        let taken = ctx.atomic_load(self.counter.add(TAKEN))?;
        Ok(ctx.atomic_load(self.counter)?.wrapping_sub(taken))
    }
}

/// A lock any rank can take (UPC's `upc_lock`).
///
/// ```no_run
/// # fn f(ctx: &tessera::Context) -> tessera::Result<()> {
/// let lock = ctx.lock_collective()?;
/// lock.lock(ctx)?;
/// // ... exclusive section ...
/// lock.unlock(ctx)?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GlobalLock {
    word: GlobalPtr<u64>,
}

impl GlobalLock {
    /// Block until this rank holds the lock.
    pub fn lock(&self, ctx: &Context) -> Result<()> {
        ctx.wait_until(
            "a global lock",
            || self.try_lock(ctx),
            || self.describe(ctx),
        )
    }

    /// Take the lock if it is free; never blocks.
    pub fn try_lock(&self, ctx: &Context) -> Result<bool> {
        let me = ctx.rank() as u64 + 1;
        match ctx.atomic_compare_swap(self.word, 0, me)? {
            0 => Ok(true),
            holder if holder == me => Err(CoreError::OutOfOrder {
                call: "GlobalLock::lock",
                why: format!(
                "rank {} tried to take a global lock it already holds (locks are not re-entrant)",
                ctx.rank()
            ),
            }
            .into()),
            _ => Ok(false),
        }
    }

    /// Release the lock; only its holder may.
    pub fn unlock(&self, ctx: &Context) -> Result<()> {
        let me = ctx.rank() as u64 + 1;
        let found = ctx.atomic_compare_swap(self.word, me, 0)?;
        if found != me {
            return Err(CoreError::NotOwner {
                what: "releasing a global lock",
                owner: found.saturating_sub(1) as usize,
                caller: ctx.rank(),
            }
            .into());
        }
        Ok(())
    }

    fn describe(&self, ctx: &Context) -> String {
        match ctx.atomic_load(self.word) {
            Ok(0) => "the lock is free now".into(),
            Ok(holder) => format!("it is held by rank {}", holder - 1),
            Err(e) => e.to_string(),
        }
    }
}

/// A fair lock on any 64-bit word of the global address space (OpenSHMEM's
/// `shmem_set_lock` on a symmetric `long`): a ticket lock, so ranks get it in the order
/// they asked. The word's high half counts tickets taken, its low half the ticket now
/// served; a zeroed word is a free lock, so any zeroed memory can serve.
///
/// Taking it is one remote fetch-add and a wait for the served half; releasing it one
/// fetch-add. A wait polls the word with atomic loads (remote ones on another host), and
/// honours the watchdog.
///
/// ```
/// use tessera::{Job, TicketLock};
/// Job::threads(3).segment(1 << 20).run(|ctx| {
///     let words = ctx.alloc_collective::<u64>(2)?; // [lock, counter], zeroed
///     ctx.barrier()?;
///     let lock = TicketLock::at(words.on(0));
///     for _ in 0..10 {
///         lock.lock(ctx)?;
///         let v = ctx.get_value(words.on(0).add(1))?;
///         ctx.put(words.on(0).add(1), &[v + 1], tessera::Blocking)?;
///         lock.unlock(ctx)?;
///     }
///     ctx.barrier()?;
///     assert_eq!(ctx.get_value(words.on(0).add(1))?, 30);
///     Ok(())
/// }).unwrap();
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TicketLock {
    word: GlobalPtr<u64>,
}

const TICKET: u64 = 1 << 32;

impl TicketLock {
    /// The lock whose state is the word at `word` (zeroed means free).
    pub fn at(word: GlobalPtr<u64>) -> TicketLock {
        TicketLock { word }
    }

    /// Block until this rank holds the lock.
    pub fn lock(&self, ctx: &Context) -> Result<()> {
        let mine = ctx.atomic_fetch(self.word, AtomicOp::Add(TICKET))? >> 32;
        ctx.wait_until(
            "a lock",
            || Ok(ctx.atomic_load(self.word)? & 0xFFFF_FFFF == mine & 0xFFFF_FFFF),
            || match ctx.atomic_load(self.word) {
                Ok(w) => format!(
                    "holding ticket {mine}; ticket {} is being served, {} are waiting",
                    w & 0xFFFF_FFFF,
                    (w >> 32).wrapping_sub(w & 0xFFFF_FFFF)
                ),
                Err(e) => e.to_string(),
            },
        )
    }

    /// Take the lock if it is free now; never blocks.
    pub fn try_lock(&self, ctx: &Context) -> Result<bool> {
        let w = ctx.atomic_load(self.word)?;
        if (w >> 32) & 0xFFFF_FFFF != w & 0xFFFF_FFFF {
            return Ok(false);
        }
        Ok(ctx.atomic_compare_swap(self.word, w, w.wrapping_add(TICKET))? == w)
    }

    /// Release the lock (by the rank holding it).
    pub fn unlock(&self, ctx: &Context) -> Result<()> {
        let w = ctx.atomic_load(self.word)?;
        if (w >> 32) & 0xFFFF_FFFF == w & 0xFFFF_FFFF {
            return Err(CoreError::OutOfOrder {
                call: "GlobalLock::unlock",
                why: format!("rank {} released a lock that nobody holds", ctx.rank()),
            }
            .into());
        }
        // Advance the served half without carrying into the tickets (others may take
        // tickets meanwhile, so compare-and-swap until the word did not move).
        let mut w = w;
        loop {
            let next = (w & !0xFFFF_FFFF) | (w.wrapping_add(1) & 0xFFFF_FFFF);
            let found = ctx.atomic_compare_swap(self.word, w, next)?;
            if found == w {
                return Ok(());
            }
            w = found;
        }
    }
}

/// How a [`Signal::Flag`](crate::Signal::Flag) put updates its flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalOp {
    /// Store the value.
    Set(u64),
    /// Add the value.
    Add(u64),
}

impl SignalOp {
    /// The atomic operation that applies it to the flag.
    pub(crate) fn remote(self) -> Remote<u64> {
        match self {
            SignalOp::Set(v) => Remote::Store(v),
            SignalOp::Add(v) => Remote::Rmw(AtomicOp::Add(v)),
        }
    }
}

impl Context {
    /// A semaphore owned by this rank (starts at zero).
    pub fn semaphore_new(&self) -> Result<Semaphore> {
        let counter = self.alloc_local::<u64>(SEMAPHORE_WORDS)?;
        self.put(counter, &[0; SEMAPHORE_WORDS], Blocking)?;
        Ok(Semaphore { counter })
    }

    /// Collective: one semaphore per rank at the same offset; returns this rank's, and
    /// [`Semaphore::on`] names a peer's. Every rank's is zeroed and a barrier follows, so
    /// peers may post as soon as this returns (a post that raced with a peer's clearing
    /// would be lost and its waiter would hang).
    pub fn semaphore_collective(&self) -> Result<Semaphore> {
        let counter = self.alloc_collective::<u64>(SEMAPHORE_WORDS)?;
        self.put(counter, &[0; SEMAPHORE_WORDS], Blocking)?;
        self.barrier()?;
        Ok(Semaphore { counter })
    }

    /// Collective: a lock living on rank 0, the same on every rank (UPC's
    /// `upc_all_lock_alloc`). Rank 0 clears it; a barrier makes it usable everywhere.
    pub fn lock_collective(&self) -> Result<GlobalLock> {
        let word = self.alloc_collective::<u64>(1)?.on(0);
        if self.rank() == 0 {
            self.atomic_store(word, 0)?;
        }
        self.barrier()?;
        Ok(GlobalLock { word })
    }
}

#[cfg(test)]
mod tests {
    use crate::{Blocking, Compare, Job, Signal, SignalOp};

    /// To a peer that is not mapped, a put-with-signal whose data fits one message is one
    /// message (the seeds' signalling put): the owner runs one handler per signal, and
    /// when it sees the flag it sees the data.
    #[test]
    fn a_small_put_with_signal_to_an_unmapped_owner_is_one_message() {
        Job::threads(2)
            .segment(1 << 20)
            .hide_peers(true)
            .wait_timeout(std::time::Duration::from_secs(30))
            .run(|ctx| {
                let data = ctx.alloc_collective::<u64>(16)?;
                let flag = ctx.alloc_collective::<u64>(1)?;
                ctx.put(flag, &[0], Blocking)?;
                ctx.barrier()?;
                if ctx.rank() == 0 {
                    for round in 1..=10u64 {
                        ctx.put(
                            data.on(1),
                            &[round; 16],
                            Signal::Flag(flag.on(1), SignalOp::Add(1)),
                        )?;
                    }
                    ctx.sync_nbi()?;
                } else {
                    // Messages from one peer are handled in order, so once a signal is seen
                    // nothing sent before it (the barrier's) is still to come; the handlers
                    // run inside the wait, so the count read next matches the flag seen.
                    let seen = ctx.wait_value(flag, Compare::Ge, 1)?;
                    let handled = ctx.am.handled();
                    ctx.wait_value(flag, Compare::Eq, 10)?;
                    assert_eq!(
                        ctx.am.handled() - handled,
                        10 - seen,
                        "one message per signal"
                    );
                    let mut got = [0u64; 16];
                    ctx.get(data, &mut got, Blocking)?;
                    assert_eq!(got, [10; 16]);
                }
                Ok(ctx.barrier()?)
            })
            .unwrap();
    }
}
