//! Communication statistics of one rank, on demand (`TESSERA_STATS`, `--stats FILE`).
//!
//! While statistics are on, every communication operation a rank starts is counted once,
//! at the public operation the program called: per peer and [`Traffic`] kind, the number of
//! operations and their bytes, and per kind a histogram of sizes in powers of two.
//! Collective calls are counted per operation and algorithm, and the bytes their messages
//! move are counted per peer as [`Traffic::Collective`] (sent) or
//! [`Traffic::CollectiveRead`] (read directly), whatever operations carry them; the core
//! barrier's signals as [`Traffic::Barrier`]. The time every blocking wait lasts is added
//! to its [`Blocked`] kind.
//!
//! The counters are plain per-rank memory ([`Cell`]s of a table allocated when the rank
//! starts): counting is a few loads and stores, no atomics, no system call and no
//! allocation. An operation made inside another counted one (the put inside a signalling
//! put, the active message carrying an atomic to an unmapped peer) is not counted again.
//! With statistics off, every counting site is one test of an empty `Option`. What any
//! thread of the rank does through `MappedSegments` is counted apart, in relaxed atomic
//! counters (`SharedCounts`) that a snapshot adds in.
//!
//! This module must never communicate or block: it only counts. Writing and merging the
//! counts is the job layer's (`core::report`).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::Context;
use crate::core::report::{BlockedTime, CollectiveCalls, PairTraffic, RankStats, SizeHistogram};

/// What a counted operation was, for the per-peer table. Bytes and operations are counted
/// at the rank that started the operation (the *origin*); the peer is its *target*. For
/// the read kinds ([`Traffic::Get`], [`Traffic::StridedGet`], [`Traffic::CollectiveRead`])
/// the data flows from the target to the origin, for every other kind from the origin to
/// the target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Traffic {
    /// Contiguous put: blocking, with a handle, or implicit (`*_nbi`).
    Put,
    /// Contiguous get.
    Get,
    /// Strided or indexed put (one operation however many runs it has).
    StridedPut,
    /// Strided or indexed get.
    StridedGet,
    /// Remote atomic (its operand's bytes), or a signal without data.
    Atomic,
    /// Signalling put: data and its signal (the data's bytes).
    SignalPut,
    /// Active-message request (its payload's bytes).
    ActiveMessage,
    /// Messages a collective sends (puts, signals and their headers).
    Collective,
    /// Long collective messages read directly from the sender's memory.
    CollectiveRead,
    /// The core barrier's signals.
    Barrier,
}

impl Traffic {
    /// Every kind, in table order.
    pub const ALL: [Traffic; 10] = [
        Traffic::Put,
        Traffic::Get,
        Traffic::StridedPut,
        Traffic::StridedGet,
        Traffic::Atomic,
        Traffic::SignalPut,
        Traffic::ActiveMessage,
        Traffic::Collective,
        Traffic::CollectiveRead,
        Traffic::Barrier,
    ];

    /// The name used in statistics files and reports.
    ///
    /// ```
    /// assert_eq!(tessera::Traffic::SignalPut.name(), "signal_put");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Traffic::Put => "put",
            Traffic::Get => "get",
            Traffic::StridedPut => "strided_put",
            Traffic::StridedGet => "strided_get",
            Traffic::Atomic => "atomic",
            Traffic::SignalPut => "signal_put",
            Traffic::ActiveMessage => "active_message",
            Traffic::Collective => "collective",
            Traffic::CollectiveRead => "collective_read",
            Traffic::Barrier => "barrier",
        }
    }

    /// Whether the data of this kind flows from the target to the origin (a read).
    ///
    /// ```
    /// assert!(tessera::Traffic::Get.is_read() && !tessera::Traffic::Put.is_read());
    /// ```
    pub fn is_read(self) -> bool {
        matches!(
            self,
            Traffic::Get | Traffic::StridedGet | Traffic::CollectiveRead
        )
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// What a blocked rank was waiting for, for the time-blocked table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Blocked {
    /// The core barrier (the end-of-job barrier included).
    Barrier,
    /// A semaphore, or a word of the rank's own segment to change (signals, flags).
    SignalWait,
    /// Inside a collective call (its messages, its partners).
    Collective,
    /// A lock.
    Lock,
    /// Completion: acknowledgements of signals, replies of remote atomics, implicit
    /// operations, active messages to be handled.
    Completion,
    /// A full active-message queue (backpressure), or a remote procedure call's result.
    ActiveMessage,
    /// Any other wait (a library's own, through [`Context::wait_begin`]).
    Other,
}

impl Blocked {
    /// Every kind, in table order.
    pub const ALL: [Blocked; 7] = [
        Blocked::Barrier,
        Blocked::SignalWait,
        Blocked::Collective,
        Blocked::Lock,
        Blocked::Completion,
        Blocked::ActiveMessage,
        Blocked::Other,
    ];

    /// The name used in statistics files and reports.
    ///
    /// ```
    /// assert_eq!(tessera::Blocked::SignalWait.name(), "signal_wait");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            Blocked::Barrier => "barrier",
            Blocked::SignalWait => "signal_wait",
            Blocked::Collective => "collective",
            Blocked::Lock => "lock",
            Blocked::Completion => "completion",
            Blocked::ActiveMessage => "active_message",
            Blocked::Other => "other",
        }
    }

    /// The kind of a wait outside any collective or barrier, from what it waits for (the
    /// `what` of [`Context::wait_begin`]).
    fn of_wait(what: &str) -> Blocked {
        match what {
            "a semaphore" | "a word to change" | "words to change" => Blocked::SignalWait,
            "a global lock" | "a lock" => Blocked::Lock,
            "acknowledgements of signals"
            | "a remote atomic"
            | "its active messages to be handled" => Blocked::Completion,
            "an rpc result" | "active-message replies" => Blocked::ActiveMessage,
            "team messages" | "a nonblocking collective" | "a native (MPI) collective" => {
                Blocked::Collective
            }
            _ if what == crate::board::END_OF_JOB_WAIT || what == "a barrier" => Blocked::Barrier,
            _ => Blocked::Other,
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Buckets of the size histograms: bucket 0 holds empty operations, bucket `k` sizes in
/// `[2^(k-1), 2^k)`.
const BUCKETS: usize = 65;

/// The histogram bucket of an operation of `bytes` bytes.
fn bucket(bytes: usize) -> usize {
    (usize::BITS - bytes.leading_zeros()) as usize
}

/// The smallest size bucket `k` holds.
pub(crate) fn bucket_floor(k: usize) -> u64 {
    if k == 0 {
        0
    } else {
        1u64 << (k - 1)
    }
}

/// What a rank is inside of, which decides the kind its traffic and waits count as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    Collective,
    Barrier,
}

/// Calls of one collective operation with one algorithm.
#[derive(Debug)]
struct CollectiveCount {
    op: &'static str,
    stem: &'static str,
    radix: u32,
    name: String,
    calls: u64,
    bytes: u64,
}

/// One rank's counters.
#[derive(Debug)]
pub(crate) struct Recorder {
    me: usize,
    ranks: usize,
    /// `[peer][kind] -> (operations, bytes)`.
    traffic: Box<[(Cell<u64>, Cell<u64>)]>,
    /// `[kind][bucket] -> operations`.
    sizes: Box<[Cell<u64>]>,
    /// `[kind] -> (waits, nanoseconds)`.
    blocked: [(Cell<u64>, Cell<u64>); Blocked::ALL.len()],
    collectives: RefCell<Vec<CollectiveCount>>,
    /// Shared with the scope guards, which restore it.
    scope: SharedScope,
    /// Depth of counted operations in progress (only the outermost counts).
    nested: Cell<u32>,
    /// Operations counted since the totals were last published to the job's board.
    unpublished: Cell<u32>,
    /// What the rank's threads do through [`MappedSegments`](super::MappedSegments), which
    /// any thread may use: atomic counters, added to the tables above in a snapshot.
    pub(crate) shared: SharedCounts,
    started: Instant,
}

/// Counters any thread of a rank may add to: its transfers and atomics through
/// [`MappedSegments`](super::MappedSegments) (an OpenSHMEM program at
/// `SHMEM_THREAD_MULTIPLE`, a Rust program's worker threads). `[peer][kind] -> (operations,
/// bytes)` and `[kind][bucket] -> operations`, as the recorder's own tables.
#[derive(Debug)]
pub(crate) struct SharedCounts {
    /// The rank whose counters these are.
    pub(crate) me: usize,
    ranks: usize,
    traffic: Box<[(AtomicU64, AtomicU64)]>,
    sizes: Box<[AtomicU64]>,
}

impl SharedCounts {
    fn new(me: usize, ranks: usize) -> SharedCounts {
        let kinds = Traffic::ALL.len();
        SharedCounts {
            me,
            ranks,
            traffic: (0..ranks * kinds).map(|_| Default::default()).collect(),
            sizes: (0..kinds * BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// One operation of `kind` to `peer` moving `bytes` bytes.
    #[inline(never)]
    pub(crate) fn add(&self, kind: Traffic, peer: usize, bytes: usize) {
        if peer >= self.ranks {
            return;
        }
        let (ops, total) = &self.traffic[peer * Traffic::ALL.len() + kind.index()];
        ops.fetch_add(1, Ordering::Relaxed);
        total.fetch_add(bytes as u64, Ordering::Relaxed);
        self.sizes[kind.index() * BUCKETS + bucket(bytes)].fetch_add(1, Ordering::Relaxed);
    }
}

/// Counted operations between publications of a rank's totals on the job's board (besides
/// the one at the start of every wait), so that `tessera status` shows a rank that keeps
/// communicating without waiting with counts a few thousand operations old at most.
const PUBLISH_EVERY: u32 = 4096;

impl Recorder {
    pub(crate) fn new(me: usize, ranks: usize) -> Recorder {
        let kinds = Traffic::ALL.len();
        Recorder {
            me,
            ranks,
            traffic: (0..ranks * kinds).map(|_| Default::default()).collect(),
            sizes: (0..kinds * BUCKETS).map(|_| Cell::new(0)).collect(),
            blocked: Default::default(),
            collectives: RefCell::new(Vec::new()),
            scope: Rc::new(Cell::new(None)),
            nested: Cell::new(0),
            unpublished: Cell::new(0),
            shared: SharedCounts::new(me, ranks),
            started: Instant::now(),
        }
    }

    /// The kind `kind` counts as inside the current scope.
    fn in_scope(&self, kind: Traffic) -> Traffic {
        match self.scope.get() {
            None => kind,
            Some(Scope::Collective) if kind.is_read() => Traffic::CollectiveRead,
            Some(Scope::Collective) => Traffic::Collective,
            Some(Scope::Barrier) => Traffic::Barrier,
        }
    }

    fn record(&self, kind: Traffic, peer: usize, bytes: usize) {
        if peer == self.me && self.scope.get().is_some() {
            // A collective's or the barrier's work in the rank's own memory is no message.
            return;
        }
        let kind = self.in_scope(kind);
        if peer < self.ranks {
            let (ops, total) = &self.traffic[peer * Traffic::ALL.len() + kind.index()];
            ops.set(ops.get() + 1);
            total.set(total.get() + bytes as u64);
        }
        let cell = &self.sizes[kind.index() * BUCKETS + bucket(bytes)];
        cell.set(cell.get() + 1);
    }

    /// [`Context::count`] with statistics on: out of line, so that the operations' own
    /// code stays as small as without statistics.
    /// Whether the totals are due for publication on the board.
    #[must_use]
    #[inline(never)]
    fn count(&self, kind: Traffic, peer: usize, bytes: usize) -> bool {
        if self.nested.get() != 0 {
            return false;
        }
        self.record(kind, peer, bytes);
        let unpublished = self.unpublished.get() + 1;
        let due = unpublished >= PUBLISH_EVERY;
        self.unpublished.set(if due { 0 } else { unpublished });
        due
    }

    #[inline(never)]
    fn add_blocked(&self, kind: Blocked, since: Instant) {
        let (waits, ns) = &self.blocked[kind.index()];
        waits.set(waits.get() + 1);
        ns.set(ns.get() + since.elapsed().as_nanos() as u64);
    }

    /// Enter a collective (`collective`) or the barrier (see [`Context::stats_scope`]).
    #[inline(never)]
    fn enter(&self, collective: bool) -> ScopeGuard {
        let before = self.scope.get();
        let scope = match (before, collective) {
            (Some(Scope::Collective), _) | (_, true) => Scope::Collective,
            _ => Scope::Barrier,
        };
        self.scope.set(Some(scope));
        ScopeGuard(Some((self.scope.clone(), before)))
    }

    /// The kind a wait for `what` counts as in the current scope.
    fn blocked_kind(&self, what: &str) -> Blocked {
        match self.scope.get() {
            Some(Scope::Collective) => Blocked::Collective,
            Some(Scope::Barrier) => Blocked::Barrier,
            None => Blocked::of_wait(what),
        }
    }

    fn collective(
        &self,
        op: &'static str,
        algorithm: (&'static str, u32),
        bytes: usize,
        name: impl FnOnce() -> String,
    ) {
        let mut calls = self.collectives.borrow_mut();
        let (stem, radix) = algorithm;
        let at = match calls
            .iter()
            .position(|c| c.op == op && c.stem == stem && c.radix == radix)
        {
            Some(at) => at,
            None => {
                calls.push(CollectiveCount {
                    op,
                    stem,
                    radix,
                    name: name(),
                    calls: 0,
                    bytes: 0,
                });
                calls.len() - 1
            }
        };
        calls[at].calls += 1;
        calls[at].bytes += bytes as u64;
    }

    /// The counts so far, as rank `rank`'s part of a statistics file.
    pub(crate) fn snapshot(&self, rank: usize) -> RankStats {
        let kinds = Traffic::ALL.len();
        let mut traffic = Vec::new();
        for peer in 0..self.ranks {
            for kind in Traffic::ALL {
                let at = peer * kinds + kind.index();
                let ((ops, bytes), (shared_ops, shared_bytes)) =
                    (&self.traffic[at], &self.shared.traffic[at]);
                let ops = ops.get() + shared_ops.load(Ordering::Relaxed);
                if ops > 0 {
                    traffic.push(PairTraffic {
                        target: peer,
                        kind,
                        ops,
                        bytes: bytes.get() + shared_bytes.load(Ordering::Relaxed),
                    });
                }
            }
        }
        let sizes = Traffic::ALL
            .iter()
            .filter_map(|&kind| {
                let buckets: Vec<(u64, u64)> = (0..BUCKETS)
                    .map(|k| {
                        let at = kind.index() * BUCKETS + k;
                        (
                            bucket_floor(k),
                            self.sizes[at].get() + self.shared.sizes[at].load(Ordering::Relaxed),
                        )
                    })
                    .filter(|&(_, n)| n > 0)
                    .collect();
                (!buckets.is_empty()).then_some(SizeHistogram { kind, buckets })
            })
            .collect();
        let collectives = self
            .collectives
            .borrow()
            .iter()
            .map(|c| CollectiveCalls {
                op: c.op.to_string(),
                algorithm: c.name.clone(),
                calls: c.calls,
                bytes: c.bytes,
            })
            .collect();
        let blocked = Blocked::ALL
            .iter()
            .filter_map(|&kind| {
                let (waits, ns) = &self.blocked[kind.index()];
                (waits.get() > 0).then(|| BlockedTime {
                    kind,
                    waits: waits.get(),
                    seconds: ns.get() as f64 * 1e-9,
                })
            })
            .collect();
        RankStats {
            rank,
            elapsed_s: self.started.elapsed().as_secs_f64(),
            traffic,
            sizes,
            collectives,
            blocked,
        }
    }
}

/// While alive, the rank is inside a collective call or the core barrier (see
/// [`Context::stats_scope`]); dropping it restores the scope it was in.
pub(crate) struct ScopeGuard(Option<(SharedScope, Option<Scope>)>);

/// The recorder's scope, shared with the guards that restore it.
type SharedScope = Rc<Cell<Option<Scope>>>;

impl Drop for ScopeGuard {
    #[inline]
    fn drop(&mut self) {
        if let Some((scope, before)) = &self.0 {
            scope.set(*before);
        }
    }
}

impl Context {
    /// Run `op`, counted as one operation of `kind` to `peer` moving `bytes` bytes (when
    /// statistics are on and no counted operation encloses it).
    #[inline]
    pub(crate) fn counted<R>(
        &self,
        kind: Traffic,
        peer: usize,
        bytes: usize,
        op: impl FnOnce() -> R,
    ) -> R {
        self.count(kind, peer, bytes);
        self.uncounted(op)
    }

    /// Count one operation of `kind` to `peer` moving `bytes` bytes, unless a counted
    /// operation encloses it (for operations that call no other counted one).
    #[inline(always)]
    pub(crate) fn count(&self, kind: Traffic, peer: usize, bytes: usize) {
        if let Some(recorder) = &self.stats {
            if recorder.count(kind, peer, bytes) {
                self.publish_counts();
            }
        }
    }

    /// Put this rank's totals so far on the job's board (`tessera status` reads them).
    #[cold]
    #[inline(never)]
    pub(crate) fn publish_counts(&self) {
        if let (Some(board), Some((ops, bytes))) = (&self.options.board, self.stats_totals()) {
            board.record(self.rank).publish_counts(ops, bytes);
        }
    }

    /// Count an atomic read of a word at `peer`, unless it is polling: a read of the rank's
    /// own segment, or one inside a collective or the barrier, whose waits read their
    /// partners' flags as often as the partners take (the counts would measure timing,
    /// not communication).
    #[inline(always)]
    pub(crate) fn count_word_read(&self, peer: usize, bytes: usize) {
        if let Some(recorder) = &self.stats {
            if peer != self.rank
                && recorder.scope.get().is_none()
                && recorder.count(Traffic::Atomic, peer, bytes)
            {
                self.publish_counts();
            }
        }
    }

    /// Run `op` without counting what it does (the messages that carry an operation
    /// already counted).
    #[inline]
    pub(crate) fn uncounted<R>(&self, op: impl FnOnce() -> R) -> R {
        match &self.stats {
            None => op(),
            Some(recorder) => {
                let depth = recorder.nested.get();
                recorder.nested.set(depth + 1);
                let result = op();
                recorder.nested.set(depth);
                result
            }
        }
    }

    /// Count one call of collective `op` with an algorithm (its name's stem and radix,
    /// `name` spelling it out) moving `bytes` per member.
    #[inline]
    pub(crate) fn count_collective(
        &self,
        op: &'static str,
        algorithm: (&'static str, u32),
        bytes: usize,
        name: impl FnOnce() -> String,
    ) {
        if let Some(recorder) = &self.stats {
            recorder.collective(op, algorithm, bytes, name);
        }
    }

    /// Enter a collective call (`collective`) or the core barrier: until the guard is
    /// dropped, traffic and waits count as the collective's or the barrier's. Inside a
    /// collective, a barrier stays the collective's.
    #[inline]
    pub(crate) fn stats_scope(&self, collective: bool) -> ScopeGuard {
        match &self.stats {
            None => ScopeGuard(None),
            Some(recorder) => recorder.enter(collective),
        }
    }

    /// When a wait starts, if statistics are on.
    #[inline]
    pub(crate) fn stats_clock(&self) -> Option<Instant> {
        self.stats.as_ref().map(|_| Instant::now())
    }

    /// Add the time since `since` to the blocked time of a wait for `what`.
    #[inline]
    pub(crate) fn count_blocked(&self, what: &str, since: Option<Instant>) {
        if let (Some(recorder), Some(since)) = (&self.stats, since) {
            recorder.add_blocked(recorder.blocked_kind(what), since);
        }
    }

    /// Add the time since `since` to the blocked time of `kind`.
    pub(crate) fn count_blocked_as(&self, kind: Blocked, since: Instant) {
        if let Some(recorder) = &self.stats {
            recorder.add_blocked(kind, since);
        }
    }

    /// Whether this rank counts communication (`TESSERA_STATS`, `--stats`): a library
    /// that moves data without the context's operations should then use them.
    ///
    /// ```
    /// tessera::Job::threads(1).segment(1 << 20).run(|ctx| {
    ///     assert!(!ctx.counts_communication());
    ///     Ok(())
    /// }).unwrap();
    /// ```
    #[inline]
    pub fn counts_communication(&self) -> bool {
        self.stats.is_some()
    }

    /// With statistics on: the operations this rank has started to other ranks so far and
    /// their bytes (for the status board).
    pub(crate) fn stats_totals(&self) -> Option<(u64, u64)> {
        let recorder = self.stats.as_ref()?;
        let kinds = Traffic::ALL.len();
        let (mut ops, mut bytes) = (0, 0);
        let shared = recorder.shared.traffic.iter();
        for (i, ((o, b), (so, sb))) in recorder.traffic.iter().zip(shared).enumerate() {
            if i / kinds != self.rank {
                ops += o.get() + so.load(Ordering::Relaxed);
                bytes += b.get() + sb.load(Ordering::Relaxed);
            }
        }
        Some((ops, bytes))
    }

    /// This rank's counts so far, when it counts communication (`TESSERA_STATS`,
    /// `--stats`).
    ///
    /// ```
    /// tessera::Job::threads(1).segment(1 << 20).run(|ctx| {
    ///     assert!(ctx.stats().is_none());
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn stats(&self) -> Option<RankStats> {
        self.stats.as_ref().map(|r| r.snapshot(self.rank))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 1);
        assert_eq!(bucket(2), 2);
        assert_eq!(bucket(3), 2);
        assert_eq!(bucket(4), 3);
        assert_eq!(bucket(4096), 13);
        assert_eq!(bucket_floor(13), 4096);
        assert_eq!(bucket(usize::MAX), 64);
    }

    #[test]
    fn nested_operations_count_once_and_scopes_rename_kinds() {
        let r = Recorder::new(0, 4);
        let _ = r.count(Traffic::SignalPut, 2, 64);
        r.nested.set(1);
        let _ = r.count(Traffic::Put, 2, 64);
        r.nested.set(0);
        r.scope.set(Some(Scope::Collective));
        let _ = r.count(Traffic::Get, 1, 8);
        let _ = r.count(Traffic::Put, 1, 8);
        let s = r.snapshot(0);
        let find = |peer, kind| {
            s.traffic
                .iter()
                .find(|t| t.target == peer && t.kind == kind)
                .map(|t| (t.ops, t.bytes))
        };
        assert_eq!(find(2, Traffic::SignalPut), Some((1, 64)));
        assert_eq!(find(2, Traffic::Put), None);
        assert_eq!(find(1, Traffic::CollectiveRead), Some((1, 8)));
        assert_eq!(find(1, Traffic::Collective), Some((1, 8)));
        assert_eq!(s.traffic.len(), 3);
    }

    #[test]
    fn waits_are_classified_by_what_they_wait_for() {
        assert_eq!(Blocked::of_wait("a semaphore"), Blocked::SignalWait);
        assert_eq!(Blocked::of_wait("a barrier"), Blocked::Barrier);
        assert_eq!(
            Blocked::of_wait(crate::board::END_OF_JOB_WAIT),
            Blocked::Barrier
        );
        assert_eq!(Blocked::of_wait("a lock"), Blocked::Lock);
        assert_eq!(Blocked::of_wait("a remote atomic"), Blocked::Completion);
        assert_eq!(Blocked::of_wait("something else"), Blocked::Other);
    }
}
