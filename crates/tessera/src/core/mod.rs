//! The core layer: what programs use to communicate.
//!
//! A [`Context`] is one rank's handle on the job: its identity, its segment and allocator,
//! and every communication operation. There are no global statics; a program running as
//! threads has one `Context` per thread.
//!
//! Sub-modules, each adding methods to [`Context`]:
//! - [`gptr`]: [`GlobalPtr`], addresses in the global address space;
//! - [`alloc`]: collective and local allocation in the segment;
//! - [`rma`]: put and get: blocking, with handles, implicit; bulk, strided and indexed;
//! - [`atomic`]: remote atomics on 32- and 64-bit integers;
//! - [`sync`]: semaphores, signalling put, global locks (and fair ticket locks);
//! - [`wait`]: waiting on a word of the rank's own segment until it compares true;
//! - [`barrier`]: the dissemination barrier, split-phase and labelled;
//! - `direct`: single-copy reads of a peer's private memory on the same host (through a
//!   buffer of the thread's where the two ends lie at a gap the processor copies slowly);
//! - [`am`]: active messages; [`rpc`]: remote procedure calls on top of them;
//! - [`huge_pages`]: [`HugePageArray`](huge_pages::HugePageArray), private arrays on huge
//!   pages, the buffers to give long messages (a peer reads from one twice as fast).
//!
//! ## Memory model
//! Puts and gets are *relaxed*: they move bytes, and nothing orders them with respect to
//! other ranks by itself. Every *synchronising* operation orders them: barrier, semaphore
//! post/wait, signalling puts, lock acquire/release, remote atomics, active-message
//! send/delivery, [`Context::sync_nbi`]. A synchronising operation has *release*
//! semantics for the caller's earlier puts (they are visible to whoever observes the
//! synchronisation) and *acquire* semantics for what it observes (data put by others before
//! their release is visible to the caller's later gets and loads). Within one rank, puts
//! and gets to the same bytes happen in program order. [`Context::fence`] is a full fence
//! for programs that build their own flag protocols from atomics.
//!
//! This layer must never assume shared memory: every access to a peer goes through
//! `Context::target`, which falls back to the conduit when a peer is not mapped.

pub mod alloc;
pub mod am;
pub mod atomic;
pub mod barrier;
pub mod completion;
pub(crate) mod copy;
pub(crate) mod direct;
pub mod gptr;
pub mod huge_pages;
pub mod mapped;
pub(crate) mod native;
pub mod report;
pub mod rma;
pub mod rpc;
pub mod stats;
pub mod sync;
pub(crate) mod transfer;
pub mod wait;

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytemuck::Pod;

use crate::board;
use crate::conduit::{Conduit, ConduitKind};
use crate::error::CoreError;
use crate::{Blocking, Result};
use alloc::{Arena, SegmentHeap};
pub use gptr::GlobalPtr;
use mapped::SegmentMap;
pub use mapped::{MappedSegments, MappedWords};

/// Where the bytes of a checked access live.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target {
    /// Mapped in this process: load and store directly.
    Direct(NonNull<u8>),
    /// Only reachable through the conduit.
    Remote {
        /// Owner.
        rank: usize,
        /// Byte offset in its segment.
        offset: usize,
    },
}

/// Run-time options of a rank, from the environment contract or the job builder.
#[derive(Clone, Default)]
pub(crate) struct Options {
    /// Watchdog for blocking waits.
    pub wait_timeout: Option<Duration>,
    /// Checked mode: verify collective calls match across ranks.
    pub checked: bool,
    /// The job's status board, where long waits are published.
    pub board: Option<Arc<board::Board>>,
    /// Where the rank's communication statistics go, when they are on.
    pub stats: Option<crate::core::report::Sink>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("wait_timeout", &self.wait_timeout)
            .field("checked", &self.checked)
            .field("board", &self.board.as_ref().map(|b| b.ranks()))
            .field("stats", &self.stats)
            .finish()
    }
}

/// One blocking wait in progress (see [`Context::wait_begin`]).
#[derive(Debug)]
pub struct Wait {
    what: &'static str,
    /// When it began, if statistics are on.
    since: Option<Instant>,
    /// Set once the wait has run past its first spins.
    watch: Option<WaitWatch>,
}

/// The state of one blocking wait once it has run past its first spins.
#[derive(Debug)]
struct WaitWatch {
    started: Instant,
    started_ms: u64,
    /// On the board as waiting.
    published: bool,
    /// With its description (after [`board::PUBLISH_AFTER`]).
    described: bool,
    /// When the published description was last written (time into the wait).
    refreshed: Duration,
    deadlock: board::DeadlockDetector,
}

impl WaitWatch {
    fn start() -> WaitWatch {
        WaitWatch {
            started: Instant::now(),
            started_ms: board::now_ms(),
            published: false,
            described: false,
            refreshed: Duration::ZERO,
            deadlock: board::DeadlockDetector::default(),
        }
    }
}

/// One rank's handle on the job. See the [crate documentation](crate) for an example.
///
/// A `Context` belongs to one thread (it is neither `Send` nor `Sync`); every operation
/// that can fail returns a [`Result`].
pub struct Context {
    conduit: Box<dyn Conduit>,
    rank: usize,
    ranks: usize,
    segment_len: usize,
    /// Where every rank's segment is mapped here, and the checks of every access.
    segments: SegmentMap,
    heap: RefCell<SegmentHeap>,
    options: Options,
    /// Depth of active-message handler execution (handlers must not block).
    in_handler: Cell<u32>,
    /// Cores of this machine (for the wait policy).
    cores: usize,
    /// Polls between yields where ranks outnumber cores, learnt from this rank's recent
    /// waits ([`Context::learn_from_wait`]).
    crowded_spins: Cell<u32>,
    am: am::AmState,
    barrier: barrier::BarrierState,
    rpc: rpc::RpcState,
    remote_atomics: atomic::RemoteAtomics,
    /// Communication statistics, when they are on.
    stats: Option<Box<stats::Recorder>>,
    /// Checks to run after the end-of-job barrier, when everything any rank sent is
    /// visible (the model layer leaves one per team).
    end_checks: RefCell<Vec<EndCheck>>,
    /// Messages the model layer's waits took in ([`Context::note_progress`]).
    progress: Cell<u64>,
    /// Transfers to unmapped peers moving as active messages (last: rarely used, so it
    /// stays off the lines the mapped paths read).
    am_transfers: transfer::AmTransfers,
}

/// A check run after the end-of-job barrier.
pub(crate) type EndCheck = Box<dyn FnOnce(&Context) -> Result<()>>;

impl Context {
    /// Build the rank's context over a connected conduit. Collective: every rank of the job
    /// calls it, and it ends with a barrier.
    pub(crate) fn new(conduit: Box<dyn Conduit>, options: Options) -> Result<Context> {
        let rank = conduit.rank();
        let ranks = conduit.ranks();
        let segment_len = conduit.segment_len();
        let bases = (0..ranks).map(|r| conduit.segment_base(r)).collect();
        // SAFETY: the conduit keeps every segment it reports mapped until it is dropped; the
        // context owns both, and every view of the map borrows the context.
        let segments = unsafe { SegmentMap::new(segment_len, bases) };
        // Counting starts once the context is built: start-up is the runtime's, not the
        // program's.
        let counting = options.stats.is_some();
        let mut ctx = Context {
            conduit,
            rank,
            ranks,
            segment_len,
            segments,
            heap: RefCell::new(SegmentHeap::new(segment_len)),
            options,
            in_handler: Cell::new(0),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            crowded_spins: Cell::new(CROWDED_MOST_SPINS),
            am: am::AmState::default(),
            barrier: barrier::BarrierState::default(),
            rpc: rpc::RpcState::default(),
            remote_atomics: atomic::RemoteAtomics::default(),
            am_transfers: transfer::AmTransfers::default(),
            stats: None,
            end_checks: RefCell::new(Vec::new()),
            progress: Cell::new(0),
        };
        atomic::register_handlers(&ctx)?;
        transfer::register_handlers(&ctx)?;
        ctx.barrier = barrier::BarrierState::new(&ctx)?;
        rpc::register_handlers(&ctx)?;
        ctx.barrier()?;
        rpc::check_same_binary(&ctx)?;
        if counting {
            ctx.stats = Some(Box::new(stats::Recorder::new(rank, ranks)));
        }
        Ok(ctx)
    }

    /// This rank, in `0..ranks()`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of ranks in the job.
    pub fn ranks(&self) -> usize {
        self.ranks
    }

    /// The conduit this job runs on.
    pub fn conduit_kind(&self) -> ConduitKind {
        self.conduit.kind()
    }

    /// Size in bytes of every rank's segment.
    pub fn segment_len(&self) -> usize {
        self.segment_len
    }

    /// Whether checked mode (`TESSERA_CHECK=1`, [`crate::Job::checked`]) is on.
    pub fn checked_mode(&self) -> bool {
        self.options.checked
    }

    /// The memory file holding this rank's segment and the segment's offset in it, when
    /// the conduit maps segments from files (`smp`, and each host of `mpi`); `None`
    /// otherwise (`threads`). Mapping the file's pages a second time elsewhere is how the
    /// OpenSHMEM layer makes a program's global variables part of the segment.
    pub fn segment_file(&self) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        self.conduit.segment_file()
    }

    pub(crate) fn conduit(&self) -> &dyn Conduit {
        &*self.conduit
    }

    // ----- allocation ---------------------------------------------------------------

    fn alloc_in<T: Pod>(&self, arena: Arena, count: usize) -> Result<GlobalPtr<T>> {
        Ok(self.alloc_block::<T>(arena, count)?.0)
    }

    /// Allocate `count` elements in `arena`, cleared: only the part an earlier allocation
    /// handed out is written, so that pages never used stay untouched (a team's mailboxes
    /// for every member, of which a rank may only ever hear from a few).
    pub(crate) fn alloc_zeroed<T: Pod>(&self, arena: Arena, count: usize) -> Result<GlobalPtr<T>> {
        let (ptr, reused) = self.alloc_block::<T>(arena, count)?;
        let zeros = vec![0u8; reused.len().min(1 << 20)];
        let mut at = reused.start;
        while at < reused.end {
            let n = (reused.end - at).min(zeros.len());
            self.put(
                GlobalPtr::<u8>::new(self.rank, at as u64),
                &zeros[..n],
                Blocking,
            )?;
            at += n;
        }
        Ok(ptr)
    }

    /// Allocate `count` elements in `arena`: the block and the byte range of it that an
    /// earlier allocation handed out.
    fn alloc_block<T: Pod>(
        &self,
        arena: Arena,
        count: usize,
    ) -> Result<(GlobalPtr<T>, std::ops::Range<usize>)> {
        let bytes =
            count
                .checked_mul(std::mem::size_of::<T>())
                .ok_or_else(|| CoreError::BadArgument {
                    call: "alloc",
                    argument: "count",
                    why: format!("allocation of {count} elements overflows"),
                })?;
        let mut heap = self.heap.borrow_mut();
        let block = heap
            .alloc(arena, bytes)
            .map_err(|e| CoreError::SegmentExhausted {
                rank: self.rank,
                requested: bytes,
                kind: arena.name(),
                segment: heap.len(),
                largest_free: e.largest_free,
            })?;
        if arena == Arena::Collective {
            self.barrier
                .note_collective(block.offset as u64, bytes.max(1) as u64);
        }
        Ok((GlobalPtr::new(self.rank, block.offset as u64), block.reused))
    }

    /// Allocate `count` elements in every rank's segment at the same offset. Every rank
    /// must make the same sequence of collective allocations, with the same sizes, between
    /// the same barriers: the offsets are computed, not communicated, so this does not
    /// synchronise, but every barrier compares a digest of the allocations made so far and
    /// fails on every rank, naming each rank's count and last size, when they differ (in
    /// checked mode, `TESSERA_CHECK=1`, a barrier follows each allocation, so the mismatch
    /// is caught at once). Returns this rank's block; use
    /// [`GlobalPtr::on`] for a peer's. Memory is not zeroed when it is reused.
    ///
    /// ```no_run
    /// # fn f(ctx: &tessera::Context) -> tessera::Result<()> {
    /// let counts = ctx.alloc_collective::<u32>(16)?;
    /// ctx.put(counts.on(0).add(ctx.rank()), &[1], tessera::Blocking)?;
    /// # Ok(()) }
    /// ```
    pub fn alloc_collective<T: Pod>(&self, count: usize) -> Result<GlobalPtr<T>> {
        let ptr = self.alloc_in(Arena::Collective, count)?;
        if self.options.checked {
            // Every barrier compares the ranks' collective allocations; checked mode runs
            // one at once, so a mismatch is reported at the allocation that caused it.
            self.barrier()?;
        }
        Ok(ptr)
    }

    /// Allocate `count` elements in this rank's segment only (UPC's `upc_alloc`). Other
    /// ranks can reach the memory once they are given the pointer.
    pub fn alloc_local<T: Pod>(&self, count: usize) -> Result<GlobalPtr<T>> {
        self.alloc_in(Arena::Local, count)
    }

    /// Free a block from [`Context::alloc_collective`]; every rank frees the same blocks
    /// in the same order.
    pub fn free_collective<T>(&self, ptr: GlobalPtr<T>) -> Result<()> {
        self.free_in(Arena::Collective, ptr)
    }

    /// Free a block from [`Context::alloc_local`] on this rank.
    pub fn free_local<T>(&self, ptr: GlobalPtr<T>) -> Result<()> {
        self.free_in(Arena::Local, ptr)
    }

    fn free_in<T>(&self, arena: Arena, ptr: GlobalPtr<T>) -> Result<()> {
        if ptr.rank() != self.rank {
            return Err(CoreError::NotOwner {
                what: "free",
                owner: ptr.rank(),
                caller: self.rank,
            }
            .into());
        }
        if arena == Arena::Collective {
            self.barrier.note_collective(ptr.offset(), 0);
        }
        if !self.heap.borrow_mut().free(arena, ptr.offset() as usize) {
            return Err(CoreError::BadFree {
                rank: self.rank,
                offset: ptr.offset(),
                kind: arena.name(),
            }
            .into());
        }
        Ok(())
    }

    // ----- checked addressing ---------------------------------------------------------

    /// Check an access of `len` bytes at `ptr` aligned to `align`, and say where it lives.
    #[inline]
    pub(crate) fn target<T>(&self, ptr: GlobalPtr<T>, len: usize, align: usize) -> Result<Target> {
        self.segments.target(ptr, len, align)
    }

    /// The segments mapped in this process, for direct access from any thread (see
    /// [`MappedSegments`]).
    pub fn mapped_segments(&self) -> MappedSegments<'_> {
        MappedSegments::of(&self.segments, self.stats.as_ref().map(|r| &r.shared))
    }

    /// Whether `ptr`'s target is mapped in this process, so that [`Context::local_ptr`]
    /// gives a usable address (Titanium's `isLocal`).
    pub fn is_addressable<T>(&self, ptr: GlobalPtr<T>) -> bool {
        // An invalid pointer's rank or offset is out of range: `target` refuses it.
        self.segments.is_mapped(ptr.rank())
    }

    /// A raw pointer to the `len` elements at `ptr` when they are mapped in this process
    /// (Titanium's `local`): `Ok(None)` when they are not, an error when the range is not a
    /// valid, aligned part of a segment. Dereferencing is up to the caller, who must not
    /// race with other ranks' puts to the same bytes (synchronise first).
    pub fn local_ptr<T: Pod>(&self, ptr: GlobalPtr<T>, len: usize) -> Result<Option<*mut T>> {
        match self.target(
            ptr,
            len * std::mem::size_of::<T>(),
            std::mem::align_of::<T>(),
        )? {
            Target::Direct(p) => Ok(Some(p.as_ptr() as *mut T)),
            Target::Remote { .. } => Ok(None),
        }
    }

    /// The `len` elements at `ptr` as a shared slice when they are mapped here (for reading
    /// data that other ranks put into this rank's segment, once they have signalled).
    ///
    /// # Safety
    /// For the lifetime of the slice, no rank may put to these bytes: the caller's
    /// synchronisation (barriers, semaphores) must guarantee that every writer has finished
    /// and that none starts again until the slice is dropped.
    ///
    /// ```
    /// # tessera::Job::threads(2).run(|ctx| {
    /// let inbox = ctx.alloc_collective::<u32>(4)?;
    /// let arrived = ctx.semaphore_collective()?;
    /// let right = (ctx.rank() + 1) % ctx.ranks();
    /// ctx.put(inbox.on(right), &[7; 4], tessera::Signal::Post(arrived.on(right)))?;
    /// arrived.wait(ctx, 1)?;
    /// // SAFETY: the only writer has signalled and writes nothing more.
    /// let got = unsafe { ctx.local_slice(inbox, 4)? }.expect("own segment is mapped");
    /// assert_eq!(got, &[7; 4]);
    /// # Ok(()) }).unwrap();
    /// ```
    pub unsafe fn local_slice<T: Pod>(
        &self,
        ptr: GlobalPtr<T>,
        len: usize,
    ) -> Result<Option<&[T]>> {
        Ok(self.local_ptr(ptr, len)?.map(|p| {
            // SAFETY: p is aligned, in bounds and mapped (checked by target); the absence of
            // writers is the caller's contract above.
            unsafe { std::slice::from_raw_parts(p as *const T, len) }
        }))
    }

    /// The `len` elements at `ptr` as a mutable slice when they are mapped here.
    ///
    /// # Safety
    /// For the lifetime of the slice, no other rank may put to or get from these bytes and
    /// this rank must not create another reference to them: the caller's synchronisation
    /// (barriers, semaphores) must guarantee exclusive access.
    // A mutable slice from `&self` is the point: segment memory is shared with other ranks,
    // and exclusivity comes from the caller's synchronisation, as the contract says.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn local_slice_mut<T: Pod>(
        &self,
        ptr: GlobalPtr<T>,
        len: usize,
    ) -> Result<Option<&mut [T]>> {
        Ok(self.local_ptr(ptr, len)?.map(|p| {
            // SAFETY: p is aligned, in bounds and mapped (checked by target); exclusivity is
            // the caller's contract above.
            unsafe { std::slice::from_raw_parts_mut(p, len) }
        }))
    }

    // ----- waiting and progress -----------------------------------------------------

    /// Make progress: run the handlers of incoming active messages. Every wait calls it;
    /// call it in long computations that other ranks may be waiting on.
    pub fn poll(&self) -> Result<()> {
        if self.in_handler.get() > 0 {
            return Ok(());
        }
        am::poll(self, crate::conduit::AmClass::Reply)?;
        am::poll(self, crate::conduit::AmClass::Request)?;
        Ok(())
    }

    /// Block until `done` returns true, making progress meanwhile. Spins, then yields the
    /// processor (see [`Context::spins_per_yield`]), so oversubscribed jobs stay fast.
    ///
    /// A wait that lasts [`board::PUBLISH_AFTER`] is published on the job's status board
    /// (`what` and `describe()`), where the launcher and the other ranks can see it; from
    /// then ranks 0 and 1 also watch the board for a deadlock (every rank waiting, nothing
    /// moving) and fail with the wait-for graph when they find one. The watchdog
    /// (`TESSERA_WAIT_TIMEOUT`) fails a wait that takes longer, naming what was awaited and
    /// the ranks that are not waiting (the ones holding everybody up).
    pub(crate) fn wait_until(
        &self,
        what: &'static str,
        mut done: impl FnMut() -> Result<bool>,
        describe: impl Fn() -> String,
    ) -> Result<()> {
        let mut wait = self.wait_begin(what)?;
        // The first look before the policy is read: a wait that is already satisfied (a
        // channel message that has landed, a flag already set) costs that look and nothing
        // else.
        let outcome = match done() {
            Ok(false) => self.wait_loop(&mut wait, done, describe),
            first => first.map(|_| ()),
        };
        self.wait_end(wait, &outcome);
        outcome
    }

    /// The loop of [`Context::wait_until`] after a first look that found `done` false.
    fn wait_loop(
        &self,
        wait: &mut Wait,
        mut done: impl FnMut() -> Result<bool>,
        describe: impl Fn() -> String,
    ) -> Result<()> {
        let spins_per_yield = self.spins_before_yield();
        let mut spins = 0u32;
        let mut yielded = false;
        loop {
            match done() {
                Ok(true) => {
                    self.learn_from_wait(yielded);
                    break Ok(());
                }
                Ok(false) => {}
                Err(e) => break Err(e),
            }
            spins += 1;
            // Active messages every few spins and before every yield: in between, the
            // condition (most often another rank's store) is all the loop looks at, so it
            // sees the store sooner.
            if spins.is_multiple_of(POLLS_EVERY) || spins >= spins_per_yield {
                let handled = self.am.handled();
                if let Err(e) = self.poll() {
                    break Err(e);
                }
                // A handler ran: it may have satisfied the wait, so look at once (on
                // recent Intel cores `pause` alone takes about 140 cycles).
                if self.am.handled() != handled && spins < spins_per_yield {
                    continue;
                }
            }
            if spins < spins_per_yield {
                std::hint::spin_loop();
                continue;
            }
            spins = 0;
            yielded = true;
            if let Err(e) = self.watch_step(wait, &describe) {
                break Err(e);
            }
            std::thread::yield_now();
        }
    }

    /// Start a wait whose condition the caller polls itself, for a library whose other
    /// threads keep using the context while this thread waits (OpenSHMEM's
    /// `SHMEM_THREAD_MULTIPLE`): between yields, with the context in hand, call
    /// [`Context::wait_step`]; at the end, [`Context::wait_end`]. The wait then makes
    /// progress, goes on the job's board and honours the watchdog like every other.
    ///
    /// ```
    /// use tessera::Job;
    /// Job::threads(1).segment(1 << 20).run(|ctx| {
    ///     let word = ctx.alloc_local::<u64>(1)?;
    ///     ctx.put(word, &[0], tessera::Blocking)?;
    ///     let mapped = ctx.mapped_segments();
    ///     let polled = mapped.words(word, 1)?.expect("own segment");
    ///     let mut wait = ctx.wait_begin("a word another thread sets")?;
    ///     let outcome: tessera::Result<()> = std::thread::scope(|s| {
    ///         s.spawn(|| mapped.atomic_store(word, 1u64).unwrap());
    ///         while polled.get(0) != 1 {
    ///             ctx.wait_step(&mut wait, &|| "word still 0".into())?;
    ///             std::thread::yield_now();
    ///         }
    ///         Ok(())
    ///     });
    ///     ctx.wait_end(wait, &outcome);
    ///     Ok(outcome?)
    /// }).unwrap();
    /// ```
    #[inline]
    pub fn wait_begin(&self, what: &'static str) -> Result<Wait> {
        if self.in_handler.get() > 0 {
            return Err(CoreError::InHandler(what).into());
        }
        Ok(Wait {
            what,
            since: self.stats_clock(),
            watch: None,
        })
    }

    /// One step of a wait begun with [`Context::wait_begin`], once per yield: make
    /// progress, check the peers are alive, publish the wait and enforce the watchdog.
    /// An error ends the wait (pass it to [`Context::wait_end`]).
    pub fn wait_step(&self, wait: &mut Wait, describe: &dyn Fn() -> String) -> Result<()> {
        self.poll()?;
        self.watch_step(wait, describe)
    }

    /// End a wait begun with [`Context::wait_begin`] with its outcome (taken off the
    /// board, or failed there).
    #[inline]
    pub fn wait_end(&self, wait: Wait, outcome: &Result<()>) {
        // Nothing to record: statistics off and the wait never went on the board.
        if wait.since.is_none() && wait.watch.is_none() {
            return;
        }
        self.record_wait_end(wait, outcome);
    }

    /// What [`Context::wait_end`] records: the time blocked, and the board's entry.
    #[inline(never)]
    fn record_wait_end(&self, wait: Wait, outcome: &Result<()>) {
        self.count_blocked(wait.what, wait.since);
        if let (Some(board), Some(watch)) = (&self.options.board, wait.watch) {
            match outcome {
                Ok(()) if watch.published => board.record(self.rank).end_wait(),
                Ok(()) => {}
                // Failed at once on the board, so that no other rank takes this one for a
                // rank that is still running and reports the same stuck job again.
                Err(e) => board.record(self.rank).fail(&e.to_string()),
            }
        }
    }

    /// The part of a wait step after polling: liveness, the board and the watchdog.
    fn watch_step(&self, wait: &mut Wait, describe: &dyn Fn() -> String) -> Result<()> {
        self.conduit.check_alive()?;
        let watch = wait.watch.get_or_insert_with(WaitWatch::start);
        self.watch_wait(watch, wait.what, describe)
    }

    /// The slow part of a wait, once per yield: publish it, keep the heartbeat, look for a
    /// deadlock, and enforce the watchdog.
    fn watch_wait(
        &self,
        watch: &mut WaitWatch,
        what: &'static str,
        describe: &dyn Fn() -> String,
    ) -> Result<()> {
        let elapsed = watch.started.elapsed();
        if let Some(board) = &self.options.board {
            let record = board.record(self.rank);
            // Progress as the board sees it: handlers run, and messages a wait's own
            // steps took in (a ring allgather's rounds all inside one wait).
            let handled = self.am.handled() + self.progress.get();
            if !watch.published {
                // At once (a clock read and a few stores: the wait is about to yield the
                // processor anyway), so that no other rank takes this one for running.
                record.begin_wait(watch.started_ms, handled);
                watch.published = true;
                self.publish_counts();
            } else {
                record.beat(handled);
            }
            if !watch.described && elapsed >= board::PUBLISH_AFTER
                || watch.described && elapsed - watch.refreshed >= Duration::from_secs(1)
            {
                record.refresh_wait(&format!("{what} ({})", describe()));
                watch.described = true;
                watch.refreshed = elapsed;
            }
            if watch.described
                && board.ranks() == self.ranks
                && board::watches_for_deadlock(self.rank)
            {
                if let Some(report) = watch.deadlock.observe(board, board::now_ms()) {
                    // One report is enough: the watcher waiting longest gives it, the
                    // others keep waiting until the job ends them.
                    if board::reports_deadlock(board, self.rank) {
                        return Err(CoreError::Deadlock(report).into());
                    }
                }
            }
        }
        if let Some(limit) = self.options.wait_timeout {
            if elapsed > limit {
                let (plainly, others) = match &self.options.board {
                    Some(board) if board.ranks() == self.ranks => {
                        // One report: the rank waiting longest gives it (and anyone
                        // who has waited twice the limit, whatever the board says).
                        if elapsed < 2 * limit && !board::reports_first(board, self.rank) {
                            return Ok(());
                        }
                        let plainly =
                            board::running_holdouts(board, self.rank, what, elapsed.as_secs_f64())
                                .map(|s| format!("{s}. "))
                                .unwrap_or_default();
                        (plainly, board::describe_others(board, self.rank))
                    }
                    _ => (String::new(), String::new()),
                };
                return Err(CoreError::WaitTimeout {
                    plainly,
                    rank: self.rank,
                    secs: limit.as_secs_f64(),
                    what,
                    detail: format!(
                        "{}); raise TESSERA_WAIT_TIMEOUT, or set it to `off`, if such waits are legitimate{others}",
                        describe()
                    ),
                }
                .into());
            }
        }
        Ok(())
    }

    /// Note that a wait made progress without an active message: a team message arrived.
    /// The deadlock detector takes a job whose every rank waits, with neither handlers
    /// run nor progress noted for half a second, for stuck; a wait that receives message
    /// after message (a ring's rounds) must say so.
    pub(crate) fn note_progress(&self) {
        self.progress.set(self.progress.get() + 1);
    }

    /// A full memory fence (sequentially consistent) for hand-built flag protocols.
    pub fn fence(&self) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    }

    /// End the rank's part in the job: a final barrier so no rank leaves while others may
    /// still reach its segment.
    pub(crate) fn finish(&self) -> Result<()> {
        self.sync_nbi()?;
        self.barrier_end_of_job()?;
        let checks = std::mem::take(&mut *self.end_checks.borrow_mut());
        for check in checks {
            check(self)?;
        }
        self.conduit.job_done();
        Ok(())
    }

    /// Run `check` after the end-of-job barrier (an error there fails the rank).
    pub(crate) fn at_end_of_job(&self, check: EndCheck) {
        self.end_checks.borrow_mut().push(check);
    }
}

/// Rank threads alive in this process, over every threads-conduit job (tests run several
/// jobs at once); see [`Context::spins_per_yield`].
static RANK_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Counts a rank thread as alive while it exists.
pub(crate) struct RankThread(());

impl RankThread {
    pub(crate) fn enter() -> RankThread {
        RANK_THREADS.fetch_add(1, Ordering::Relaxed);
        RankThread(())
    }
}

impl Drop for RankThread {
    fn drop(&mut self) {
        RANK_THREADS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A wait looks at its condition this many times for each poll of active messages.
const POLLS_EVERY: u32 = 4;

/// Polls between yields with at least one core per busy rank: tens of microseconds, so a
/// waiting rank answers within a poll.
const DEDICATED_SPINS: u32 = 4096;

/// The most polls between yields where ranks outnumber cores: enough for a store to cross
/// between two running cores (a two-rank ping-pong beside idle ranks stays at 0.13-0.14 µs
/// a hop on a 2-core Intel Xeon, where 4 polls made it 0.88-0.91).
const CROWDED_MOST_SPINS: u32 = 16;

/// The fewest polls between yields where ranks outnumber cores: where the rank waited on
/// needs this rank's core, every poll before the yield is lost (4 ranks on a 2-core Intel
/// Xeon: OpenSHMEM all-to-all 2.6-2.7 µs at 16 polls, 2.2 at 4).
const CROWDED_FEWEST_SPINS: u32 = 4;

/// [`Context::learn_from_wait`]'s rule: the polls before the next yield, after a wait
/// with `spins` that had to yield or not.
fn next_crowded_spins(spins: u32, yielded: bool) -> u32 {
    if yielded {
        (spins / 2).max(CROWDED_FEWEST_SPINS)
    } else {
        (spins * 2).min(CROWDED_MOST_SPINS)
    }
}

impl Context {
    /// The wait policy's polls between yields, at most: with at least one core per busy
    /// rank about 4096 (tens of microseconds), so a waiting rank answers within a poll;
    /// when ranks outnumber cores (this job's processes, or every rank thread of this
    /// process) 16, so that the rank being waited on gets a core. Where ranks outnumber
    /// cores a wait yields sooner when this rank's recent waits have needed a yield (down
    /// to 4 polls).
    ///
    /// ```
    /// use tessera::Job;
    /// Job::threads(1).run(|ctx| {
    ///     assert!(ctx.spins_per_yield() >= 16);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn spins_per_yield(&self) -> u32 {
        if self.has_core_per_rank() {
            DEDICATED_SPINS
        } else {
            CROWDED_MOST_SPINS
        }
    }

    /// Polls before the next wait yields: [`DEDICATED_SPINS`] with a core per rank, else
    /// what this rank's recent waits taught ([`Context::learn_from_wait`]).
    fn spins_before_yield(&self) -> u32 {
        if self.has_core_per_rank() {
            DEDICATED_SPINS
        } else {
            self.crowded_spins.get()
        }
    }

    /// Where ranks outnumber cores, halve the polls before a yield after a wait that had
    /// to yield (the rank it waited on was likely waiting for this rank's core) and double
    /// them after one that ended while polling (that rank was running on another core),
    /// between [`CROWDED_FEWEST_SPINS`] and [`CROWDED_MOST_SPINS`]. A rank in a loop of
    /// collectives with a partner on its own core soon yields after 4 polls; the two ranks
    /// of a ping-pong beside idle ones keep polling 16 times and answer without a yield.
    fn learn_from_wait(&self, yielded: bool) {
        self.crowded_spins
            .set(next_crowded_spins(self.crowded_spins.get(), yielded));
    }

    /// Whether this host has a core for each of its busy ranks (this job's processes on
    /// it, or every rank thread of this process): not where ranks wait for a core.
    pub(crate) fn has_core_per_rank(&self) -> bool {
        let busy = if self.conduit.ranks_are_threads() {
            RANK_THREADS.load(Ordering::Relaxed).max(self.ranks)
        } else {
            self.conduit.host_ranks()
        };
        busy <= self.cores
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A run of waits that yield takes the budget down to the fewest polls and no further;
    /// a run that ends while polling takes it back up to the most.
    #[test]
    fn the_crowded_budget_halves_after_yields_and_doubles_after_polls() {
        let after = |from: u32, waits: &[bool]| {
            waits
                .iter()
                .fold(from, |spins, &yielded| next_crowded_spins(spins, yielded))
        };
        assert_eq!(after(CROWDED_MOST_SPINS, &[true]), 8);
        assert_eq!(
            after(CROWDED_MOST_SPINS, &[true, true]),
            CROWDED_FEWEST_SPINS
        );
        assert_eq!(after(CROWDED_MOST_SPINS, &[true; 10]), CROWDED_FEWEST_SPINS);
        assert_eq!(after(CROWDED_FEWEST_SPINS, &[false]), 8);
        assert_eq!(
            after(CROWDED_FEWEST_SPINS, &[false; 10]),
            CROWDED_MOST_SPINS
        );
        // A partner on another core half the time: the budget stays between the bounds.
        let mixed = after(CROWDED_MOST_SPINS, &[true, false, true, true, false]);
        assert!((CROWDED_FEWEST_SPINS..=CROWDED_MOST_SPINS).contains(&mixed));
        assert_eq!(mixed, 8);
    }

    /// In a job with more ranks than processors, a wait for a rank that sleeps has to
    /// yield, and the waiting rank's next wait polls half as long before its first yield.
    #[test]
    fn a_crowded_wait_that_yields_halves_the_next_polls() {
        let ranks = std::thread::available_parallelism().map_or(1, |n| n.get()) + 1;
        crate::Job::threads(ranks)
            .segment(1 << 20)
            .run(|ctx| {
                let flag = ctx.alloc_collective::<u64>(1)?;
                ctx.barrier()?;
                if ctx.rank() == 1 {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    ctx.atomic_store(flag.on(0), 1)?;
                } else if ctx.rank() == 0 {
                    assert!(!ctx.has_core_per_rank());
                    ctx.crowded_spins.set(CROWDED_MOST_SPINS);
                    ctx.wait_value(flag, crate::Compare::Eq, 1)?;
                    assert_eq!(ctx.spins_before_yield(), CROWDED_MOST_SPINS / 2);
                }
                ctx.barrier()?;
                Ok(())
            })
            .unwrap();
    }
}
