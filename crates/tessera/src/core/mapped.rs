//! Where every rank's segment is mapped in this process, the checks every access makes
//! (rank, bounds, alignment), and [`MappedSegments`]: direct access to the mapped ones
//! from any thread.
//!
//! A [`Context`](super::Context) belongs to one thread. A library whose callers are
//! several threads of one rank (OpenSHMEM's `SHMEM_THREAD_MULTIPLE`) still wants puts,
//! gets and atomics on mapped peers to run without a lock around the context: they are
//! loads, stores and CPU atomics on shared memory and need none of the context's
//! per-rank state. [`MappedSegments`] is that part: `Send + Sync`, borrowed from the
//! context, and honest about what it cannot reach (a peer only the conduit reaches),
//! which the caller then sends through the context.
//!
//! This module must never reach an unmapped peer, and never hold per-rank state: it is
//! shared by every thread of the process.

use std::ptr::NonNull;

use bytemuck::Pod;

use super::atomic::{AtomicInt, AtomicOp, Remote};
use super::gptr::GlobalPtr;
use super::stats::{SharedCounts, Traffic};
use super::sync::SignalOp;
use super::wait::WaitWord;
use super::Target;
use crate::error::CoreError;
use crate::Result;

/// The base address of every rank's segment mapped here (`None`: reach it through the
/// conduit), and the segment length.
pub(crate) struct SegmentMap {
    segment_len: usize,
    bases: Vec<Option<NonNull<u8>>>,
}

// SAFETY: the map is never written after construction; the addresses it holds are of
// shared mappings that stay mapped as long as the map's owner (the context) lives (see
// `SegmentMap::new`), and what is done through them is the callers' business, which
// every caller does with raw copies and atomics as between processes.
unsafe impl Send for SegmentMap {}
// SAFETY: as for Send: immutable, and the memory behind it is shared by design.
unsafe impl Sync for SegmentMap {}

impl SegmentMap {
    /// # Safety
    /// Every `Some` base must be the start of a mapping of at least `segment_len` bytes
    /// that stays mapped as long as the returned map is used.
    pub(crate) unsafe fn new(segment_len: usize, bases: Vec<Option<NonNull<u8>>>) -> SegmentMap {
        SegmentMap { segment_len, bases }
    }

    fn ranks(&self) -> usize {
        self.bases.len()
    }

    /// Whether `rank`'s segment is mapped here (false for a rank that does not exist).
    #[inline]
    pub(crate) fn is_mapped(&self, rank: usize) -> bool {
        self.bases.get(rank).is_some_and(Option::is_some)
    }

    /// Check an access of `len` bytes at `ptr` aligned to `align`, and say where it lives.
    #[inline(always)]
    pub(crate) fn target<T>(&self, ptr: GlobalPtr<T>, len: usize, align: usize) -> Result<Target> {
        // One test on the hot path; every refusal is worked out off it. An invalid pointer
        // has rank u32::MAX or offset u64::MAX, so it fails here too.
        let (rank, offset) = (ptr.rank(), ptr.offset());
        let fits = rank < self.ranks()
            && offset
                .checked_add(len as u64)
                .is_some_and(|end| end <= self.segment_len as u64)
            && offset.is_multiple_of(align as u64);
        if !fits {
            return Err(self.refusal(rank, offset, len, align, ptr.invalid_reason()));
        }
        Ok(match self.bases[rank] {
            // SAFETY: offset + len <= segment_len (checked above), inside the mapping.
            Some(base) => Target::Direct(unsafe {
                NonNull::new_unchecked(base.as_ptr().add(offset as usize))
            }),
            None => Target::Remote {
                rank,
                offset: offset as usize,
            },
        })
    }

    /// Why an access of `len` bytes at (`rank`, `offset`) aligned to `align` is refused.
    #[cold]
    #[inline(never)]
    fn refusal(
        &self,
        rank: usize,
        offset: u64,
        len: usize,
        align: usize,
        invalid: Option<String>,
    ) -> crate::Error {
        if let Some(why) = invalid {
            return CoreError::InvalidPointer { rank, why }.into();
        }
        if rank >= self.ranks() {
            return CoreError::NoSuchRank {
                rank,
                ranks: self.ranks(),
            }
            .into();
        }
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > self.segment_len as u64)
        {
            return CoreError::OutOfSegment {
                rank,
                offset,
                len: len as u64,
                segment: self.segment_len,
            }
            .into();
        }
        CoreError::Misaligned {
            rank,
            offset,
            align,
        }
        .into()
    }
}

/// Puts, gets, atomics and polled words on the segments mapped in this process, callable from any
/// thread at once (`Send + Sync`), with no lock. Every call checks its access as the
/// context does and returns `None` (or `false`) when the target is not mapped here; the
/// caller then makes the call through the [`Context`](super::Context) on the rank's own
/// thread (or under whatever lock guards it).
///
/// The memory model is the context's: puts and gets are relaxed byte moves, atomics are
/// sequentially consistent read-modify-writes (acquire loads, release stores), and a
/// signalling put's data is visible to whoever acquires its flag.
///
/// ```
/// use tessera::{AtomicOp, Job};
/// Job::threads(2).segment(1 << 20).run(|ctx| {
///     let counter = ctx.alloc_collective::<u64>(1)?;
///     ctx.put(counter, &[0], tessera::Blocking)?;
///     ctx.barrier()?;
///     let mapped = ctx.mapped_segments();
///     // Two threads of each rank add to rank 0's counter at once, without the context.
///     std::thread::scope(|s| {
///         for _ in 0..2 {
///             s.spawn(|| mapped.atomic_fetch(counter.on(0), AtomicOp::Add(1)).unwrap());
///         }
///     });
///     ctx.barrier()?;
///     if ctx.rank() == 0 {
///         assert_eq!(ctx.get_value(counter)?, 4);
///     }
///     Ok(())
/// }).unwrap();
/// ```
#[derive(Clone, Copy)]
pub struct MappedSegments<'ctx> {
    map: &'ctx SegmentMap,
    /// With statistics on: where every thread counts what it does through these.
    counts: Option<&'ctx SharedCounts>,
}

impl std::fmt::Debug for MappedSegments<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedSegments")
            .field("ranks", &self.map.ranks())
            .field(
                "mapped",
                &self.map.bases.iter().filter(|b| b.is_some()).count(),
            )
            .finish()
    }
}

impl<'ctx> MappedSegments<'ctx> {
    pub(crate) fn of(
        map: &'ctx SegmentMap,
        counts: Option<&'ctx SharedCounts>,
    ) -> MappedSegments<'ctx> {
        MappedSegments { map, counts }
    }

    /// Count one operation (statistics on) that reached `rank`'s mapped segment.
    #[inline(always)]
    fn count(&self, kind: Traffic, rank: usize, bytes: usize) {
        if let Some(counts) = self.counts {
            counts.add(kind, rank, bytes);
        }
    }

    /// Whether every rank's segment is mapped here (so that every call succeeds without
    /// the context: the `smp` and `threads` conduits, and `mpi` on one host).
    pub fn all_mapped(&self) -> bool {
        self.map.bases.iter().all(Option::is_some)
    }

    /// Whether `rank`'s segment is mapped here.
    #[inline]
    pub fn is_mapped(&self, rank: usize) -> bool {
        self.map.is_mapped(rank)
    }

    /// The address of the `count` elements at `ptr` when mapped here.
    #[inline(always)]
    fn direct<T>(&self, ptr: GlobalPtr<T>, count: usize, align: usize) -> Result<Option<*mut T>> {
        let len =
            std::mem::size_of::<T>()
                .checked_mul(count)
                .ok_or_else(|| CoreError::BadArgument {
                    call: "MappedSegments",
                    argument: "count",
                    why: format!("{count} elements overflow"),
                })?;
        Ok(match self.map.target(ptr, len, align)? {
            Target::Direct(p) => Some(p.as_ptr().cast()),
            Target::Remote { .. } => None,
        })
    }

    /// This process's address of the `len` elements at `ptr` when they are mapped here, as
    /// [`Context::local_ptr`](super::Context::local_ptr) gives it.
    #[inline]
    pub fn local_ptr<T: Pod>(&self, ptr: GlobalPtr<T>, len: usize) -> Result<Option<*mut T>> {
        self.direct(ptr, len, std::mem::align_of::<T>())
    }

    /// Copy `src` to `dst` if `dst` is mapped here (`Ok(false)` if it is not).
    #[inline(always)]
    pub fn put<T: Pod>(&self, dst: GlobalPtr<T>, src: &[T]) -> Result<bool> {
        if !self.copy_to(dst, src)? {
            return Ok(false);
        }
        self.count(Traffic::Put, dst.rank(), std::mem::size_of_val(src));
        Ok(true)
    }

    /// [`MappedSegments::put`] without counting it.
    #[inline(always)]
    fn copy_to<T: Pod>(&self, dst: GlobalPtr<T>, src: &[T]) -> Result<bool> {
        let Some(p) = self.direct(dst, src.len(), std::mem::align_of::<T>())? else {
            return Ok(false);
        };
        // SAFETY: `direct` checked that the src.len() elements at p are mapped, in bounds
        // and aligned; `copy` tolerates overlap (the source may be in a segment too).
        unsafe { super::copy::copy(src.as_ptr(), p, src.len()) };
        Ok(true)
    }

    /// Copy from `src` into `dst` if `src` is mapped here (`Ok(false)` if it is not).
    #[inline(always)]
    pub fn get<T: Pod>(&self, src: GlobalPtr<T>, dst: &mut [T]) -> Result<bool> {
        let Some(p) = self.direct(src, dst.len(), std::mem::align_of::<T>())? else {
            return Ok(false);
        };
        // SAFETY: as in `put`, for dst.len() elements read.
        unsafe { super::copy::copy(p.cast_const(), dst.as_mut_ptr(), dst.len()) };
        self.count(Traffic::Get, src.rank(), std::mem::size_of_val(dst));
        Ok(true)
    }

    /// Read the element at `src` and drop it, uncounted, if it is mapped here (`Ok(false)`
    /// if not): the runtime's own touch of a page it will use (`model::team::channel`
    /// maps a team's mailbox pages ahead), which is no communication of the program's.
    pub(crate) fn touch<T: Pod>(&self, src: GlobalPtr<T>) -> Result<bool> {
        let Some(p) = self.direct(src, 1, std::mem::align_of::<T>())? else {
            return Ok(false);
        };
        // SAFETY: `direct` checked that the element at p is mapped, in bounds and aligned;
        // a volatile read of a plain value, so that the load (the point) is kept.
        let _ = unsafe { std::ptr::read_volatile(p.cast_const()) };
        Ok(true)
    }

    /// Apply `op` to the mapped word at `ptr` (always inlined, so a constant `op` selects
    /// its instruction at compile time).
    #[inline(always)]
    fn atomic<T: AtomicInt>(&self, ptr: GlobalPtr<T>, op: Remote<T>) -> Result<Option<T>> {
        let size = std::mem::size_of::<T>();
        let Some(p) = self.direct(ptr, 1, size)? else {
            return Ok(None);
        };
        // SAFETY: `direct` checked that p is a mapped, in-bounds word aligned to its size.
        let old = unsafe { op.apply(p) };
        // As the context counts them: a read of the rank's own memory is a wait's poll,
        // not communication.
        let poll = matches!(op, Remote::Load) && self.counts.is_some_and(|c| c.me == ptr.rank());
        if !poll {
            self.count(Traffic::Atomic, ptr.rank(), size);
        }
        Ok(Some(old))
    }

    /// [`Context::atomic_fetch`](super::Context::atomic_fetch) on a mapped word: the old
    /// value, or `None` if the word is not mapped here.
    #[inline]
    pub fn atomic_fetch<T: AtomicInt>(
        &self,
        ptr: GlobalPtr<T>,
        op: AtomicOp<T>,
    ) -> Result<Option<T>> {
        self.atomic(ptr, Remote::Rmw(op))
    }

    /// [`Context::atomic_compare_swap`](super::Context::atomic_compare_swap) on a mapped
    /// word.
    #[inline]
    pub fn atomic_compare_swap<T: AtomicInt>(
        &self,
        ptr: GlobalPtr<T>,
        current: T,
        new: T,
    ) -> Result<Option<T>> {
        self.atomic(ptr, Remote::Cas(current, new))
    }

    /// [`Context::atomic_load`](super::Context::atomic_load) on a mapped word.
    #[inline]
    pub fn atomic_load<T: AtomicInt>(&self, ptr: GlobalPtr<T>) -> Result<Option<T>> {
        self.atomic(ptr, Remote::Load)
    }

    /// [`Context::atomic_store`](super::Context::atomic_store) on a mapped word
    /// (`Ok(false)` if it is not mapped here).
    #[inline]
    pub fn atomic_store<T: AtomicInt>(&self, ptr: GlobalPtr<T>, value: T) -> Result<bool> {
        Ok(self.atomic(ptr, Remote::Store(value))?.is_some())
    }

    /// A [`Signal::Flag`](crate::Signal::Flag) put when both `dst` and
    /// `flag` are mapped here (`Ok(false)`, having done nothing, otherwise).
    #[inline]
    pub fn put_with_signal<T: Pod>(
        &self,
        dst: GlobalPtr<T>,
        src: &[T],
        flag: GlobalPtr<u64>,
        op: SignalOp,
    ) -> Result<bool> {
        let Some(word) = self.direct(flag, 1, 8)? else {
            return Ok(false);
        };
        if !self.copy_to(dst, src)? {
            return Ok(false);
        }
        self.count(Traffic::SignalPut, dst.rank(), std::mem::size_of_val(src));
        // SAFETY: `direct` checked that word is a mapped, in-bounds, aligned u64. The
        // atomic is sequentially consistent, so the copy above is visible to whoever
        // acquires the new value.
        unsafe { op.remote().apply(word) };
        Ok(true)
    }

    /// The `len` words from `first` when they are mapped here, checked once, for polling
    /// from any thread (`Ok(None)` if they are not mapped).
    #[inline]
    pub fn words<T: WaitWord>(
        &self,
        first: GlobalPtr<T>,
        len: usize,
    ) -> Result<Option<MappedWords<'ctx, T>>> {
        Ok(self
            .direct(first, len.max(1), std::mem::align_of::<T>())?
            .map(|first| MappedWords {
                first,
                len,
                _segments: std::marker::PhantomData,
            }))
    }
}

/// `len` words of a mapped segment, checked once by [`MappedSegments::words`], each read
/// with `Acquire` when asked for: what a wait polls, from any thread.
///
/// ```
/// tessera::Job::threads(1).segment(1 << 20).run(|ctx| {
///     let flags = ctx.alloc_local::<u64>(2)?;
///     ctx.put(flags, &[0, 5], tessera::Blocking)?;
///     let words = ctx.mapped_segments().words(flags, 2)?.expect("own segment");
///     assert_eq!((words.get(0), words.get(1)), (0, 5));
///     Ok(())
/// }).unwrap();
/// ```
#[derive(Clone, Copy, Debug)]
pub struct MappedWords<'ctx, T> {
    first: *mut T,
    len: usize,
    _segments: std::marker::PhantomData<&'ctx SegmentMap>,
}

// SAFETY: the words are shared memory read only by atomic loads (`get`), which any thread
// may do; the borrow keeps the mapping alive.
unsafe impl<T: WaitWord> Send for MappedWords<'_, T> {}
// SAFETY: as for Send.
unsafe impl<T: WaitWord> Sync for MappedWords<'_, T> {}

impl<T: WaitWord> MappedWords<'_, T> {
    /// How many words.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Word `i`, loaded with `Acquire`. Panics if `i` is not below [`MappedWords::len`].
    #[inline]
    pub fn get(&self, i: usize) -> T {
        assert!(i < self.len, "word {i} of {}", self.len);
        // SAFETY: `MappedSegments::words` checked that the len words from `first` are
        // mapped, in bounds and aligned, and i is below len; waited-on words are written by
        // atomics or by stores published with release.
        unsafe { T::load_acquire(self.first.add(i)) }
    }
}
