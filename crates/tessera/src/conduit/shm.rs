//! Shared-memory machinery common to the `smp` and `threads` conduits.
//!
//! Every rank owns one *region* of memory that every other rank of the node maps:
//!
//! ```text
//! offset 0            RegionHeader (one cache line): magic, attach count, job shape
//! DOORBELLS_OFFSET    per class, a bitmap of the senders that may have left frames
//! rings_offset        2·P active-message rings, ring (s, c) carries class c from rank s
//! segment_offset      the rank's segment: the part the global address space covers
//! ```
//!
//! The two conduits differ only in how regions come to exist (POSIX shared-memory objects
//! mapped by processes, or anonymous memory in one process); once every region is
//! mapped, `ShmConduit` implements [`Conduit`] for both.
//!
//! ## Memory ordering of the cross-rank words
//! - `RegionHeader::magic` is stored with `Release` by the owner after it has written the
//!   rest of the header, and loaded with `Acquire` by attaching peers.
//! - `RegionHeader::attached` is incremented (`AcqRel`) by each rank once it has mapped
//!   the region; the owner reads it with `Acquire` to decide when to unlink the name.
//! - The rings follow `protocol::ring` (header word published with `Release` and
//!   polled with `Acquire`; `head` released by the consumer, acquired by the producer),
//!   and, in jobs of more than `DOORBELLS_FROM` (32) ranks, the doorbells
//!   `protocol::doorbell` (a sender's bit set with `Release` after its frame is
//!   published, taken by the receiver with `Acquire`); both are model-checked with loom.
//!   There a poll reads one doorbell word per 64 senders and only the rings it names, so
//!   its cost and the pages it touches do not grow with the job. In smaller jobs a poll
//!   looks at every ring, which costs less than the doorbell's two extra cache-line
//!   transfers per message (an active-message round trip between 2 ranks took 0.52 µs
//!   with doorbells, 0.34 without).
//!
//! This module must never block: rings report "full" and the caller decides how to wait.

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::{AmClass, Conduit, ConduitKind, Processes};
use crate::error::ConduitError;
use crate::protocol::doorbell;
use crate::protocol::ring::{Ring, RingMemory, FRAME_HEADER, SLOT};

/// Value of [`RegionHeader::magic`] once the owner has initialised its region.
pub(crate) const MAGIC: u64 = 0x5445_5353_4552_4131; // "TESSERA1"
/// Offset of the doorbells: the header takes one cache line.
const DOORBELLS_OFFSET: usize = 64;
/// Jobs of more ranks than this announce frames in doorbells; smaller ones poll every
/// ring (see the module documentation).
pub(crate) const DOORBELLS_FROM: usize = 32;
const _: () = assert!(std::mem::size_of::<RegionHeader>() <= DOORBELLS_OFFSET);
/// Segments start on a 64 KiB boundary so users can rely on generous alignment.
const SEGMENT_ALIGN: usize = 64 * 1024;

/// Default capacity of one active-message ring in bytes. With P ranks a region holds 2·P
/// rings; the default shrinks for large jobs so that rings never dominate memory.
pub(crate) fn default_ring_capacity(ranks: usize) -> usize {
    let per_ring = (4 << 20) / (2 * ranks.max(1));
    per_ring.clamp(8 << 10, 64 << 10).next_power_of_two()
}

/// The first words of every region.
#[repr(C)]
pub(crate) struct RegionHeader {
    /// [`MAGIC`] once initialised (Release by the owner, Acquire by peers).
    pub magic: AtomicU64,
    /// Number of ranks that have mapped this region (AcqRel increments).
    pub attached: AtomicU64,
    /// Number of ranks the owner was started with.
    pub ranks: AtomicU64,
    /// Size of the owner's segment.
    pub segment_len: AtomicU64,
    /// Capacity of each ring.
    pub ring_capacity: AtomicU64,
}

/// Control words of one ring, each on its own cache line so producer and consumer do not
/// false-share.
#[repr(C, align(64))]
struct RingControl {
    /// Bytes ever published by the producer (Release store, Acquire load).
    tail: AtomicU64,
    _pad_tail: [u8; 56],
    /// Bytes ever consumed by the consumer (Release store, Acquire load).
    head: AtomicU64,
    _pad_head: [u8; 56],
}

const RING_CONTROL: usize = std::mem::size_of::<RingControl>();

/// Where everything lives inside a region; identical on every rank of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegionLayout {
    /// Ranks in the job.
    pub ranks: usize,
    /// Capacity of each ring (a power of two).
    pub ring_capacity: usize,
    /// Words of one class's doorbell bitmap, rounded up to whole cache lines; 0 where
    /// the job polls every ring instead.
    doorbell_words: usize,
    /// Offset of the first ring (page aligned).
    rings_offset: usize,
    /// Segment size.
    pub segment_len: usize,
    /// Offset of the segment in the region.
    pub segment_offset: usize,
    /// Total region size.
    pub region_len: usize,
}

impl RegionLayout {
    /// The layout for `ranks` ranks, `segment_len`-byte segments and rings of
    /// `ring_capacity` bytes (rounded up to a power of two, at least 1 KiB).
    pub(crate) fn new(ranks: usize, segment_len: usize, ring_capacity: usize) -> Self {
        let ring_capacity = ring_capacity.max(1024).next_power_of_two();
        let doorbell_words = if ranks > DOORBELLS_FROM {
            doorbell::words(ranks).next_multiple_of(SLOT / 8)
        } else {
            0
        };
        let rings_offset = (DOORBELLS_OFFSET + 2 * doorbell_words * 8).next_multiple_of(4096);
        let rings_end = rings_offset + 2 * ranks * (RING_CONTROL + ring_capacity);
        let segment_offset = rings_end.div_ceil(SEGMENT_ALIGN) * SEGMENT_ALIGN;
        let segment_len = segment_len.div_ceil(4096) * 4096;
        RegionLayout {
            ranks,
            ring_capacity,
            doorbell_words,
            rings_offset,
            segment_len,
            segment_offset,
            region_len: segment_offset + segment_len,
        }
    }

    fn ring_offset(&self, sender: usize, class: AmClass) -> usize {
        self.rings_offset + (2 * sender + class as usize) * (RING_CONTROL + self.ring_capacity)
    }

    fn doorbell_offset(&self, class: AmClass) -> usize {
        DOORBELLS_OFFSET + class as usize * self.doorbell_words * 8
    }

    /// Largest payload one frame can carry: a quarter of a ring, so that several frames
    /// are in flight per pair and a wrap never starves a sender.
    pub(crate) fn max_frame(&self) -> usize {
        self.ring_capacity / 4 - FRAME_HEADER
    }

    /// Initialise a freshly zeroed region (header fields, then `magic` with Release).
    ///
    /// # Safety
    /// `base` must point to a mapping of at least `region_len` writable bytes that no other
    /// rank reads yet (peers only read it after observing `magic`).
    pub(crate) unsafe fn init_region(&self, base: NonNull<u8>) {
        // SAFETY: the caller guarantees the mapping is large enough and page aligned, so the
        // header is aligned and in bounds. Rings need no initialisation: zero is empty.
        let header = unsafe { header(base) };
        header.ranks.store(self.ranks as u64, Ordering::Relaxed);
        header
            .segment_len
            .store(self.segment_len as u64, Ordering::Relaxed);
        header
            .ring_capacity
            .store(self.ring_capacity as u64, Ordering::Relaxed);
        header.magic.store(MAGIC, Ordering::Release);
    }

    /// Check that a peer's initialised header describes the same job shape as ours.
    pub(crate) fn check_peer(
        &self,
        peer: usize,
        header: &RegionHeader,
    ) -> Result<(), ConduitError> {
        let fields = [
            (
                "the number of ranks",
                header.ranks.load(Ordering::Relaxed),
                self.ranks,
            ),
            (
                "the segment size (--segment / TESSERA_SEGMENT)",
                header.segment_len.load(Ordering::Relaxed),
                self.segment_len,
            ),
            (
                "the active-message queue size (TESSERA_AM_QUEUE)",
                header.ring_capacity.load(Ordering::Relaxed),
                self.ring_capacity,
            ),
        ];
        for (what, theirs, ours) in fields {
            if theirs != ours as u64 {
                return Err(ConduitError::Mismatch {
                    rank: peer,
                    what,
                    detail: format!("it has {theirs}, this rank has {ours}"),
                });
            }
        }
        Ok(())
    }
}

/// The header of the region at `base`.
///
/// # Safety
/// `base` must be the start of a live, page-aligned region mapping of at least one page
/// that outlives the returned reference.
pub(crate) unsafe fn header<'a>(base: NonNull<u8>) -> &'a RegionHeader {
    // SAFETY: per the contract the page is mapped and aligned; RegionHeader holds only
    // atomics, so shared references to it are fine even while other ranks update it.
    unsafe { &*(base.as_ptr() as *const RegionHeader) }
}

/// The memory of one ring inside a mapped region (see [`crate::protocol::ring`] for the
/// protocol and its memory ordering).
struct ShmRing {
    control: NonNull<RingControl>,
    data: NonNull<u8>,
    capacity: usize,
}

impl ShmRing {
    /// # Safety
    /// `region` must be a live mapping of a region with layout `layout`.
    unsafe fn at(
        region: NonNull<u8>,
        layout: &RegionLayout,
        sender: usize,
        class: AmClass,
    ) -> Ring<ShmRing> {
        let offset = layout.ring_offset(sender, class);
        // SAFETY: ring_offset lies inside the rings area of the region (sender < ranks) and
        // is 64-byte aligned because rings_offset, RING_CONTROL and the capacity are.
        unsafe {
            let control = NonNull::new_unchecked(region.as_ptr().add(offset) as *mut RingControl);
            let data = NonNull::new_unchecked(region.as_ptr().add(offset + RING_CONTROL));
            Ring(ShmRing {
                control,
                data,
                capacity: layout.ring_capacity,
            })
        }
    }

    fn control(&self) -> &RingControl {
        // SAFETY: `control` points into a live mapping (ShmRing::at) and holds only atomics.
        unsafe { self.control.as_ref() }
    }
}

impl RingMemory for ShmRing {
    type Word = AtomicU64;
    fn capacity(&self) -> usize {
        self.capacity
    }
    fn head(&self) -> &AtomicU64 {
        &self.control().head
    }
    fn tail(&self) -> &AtomicU64 {
        &self.control().tail
    }
    fn slot(&self, pos: usize) -> &AtomicU64 {
        debug_assert!(pos.is_multiple_of(SLOT) && pos < self.capacity);
        // SAFETY: pos is a slot boundary inside the data area (8-byte aligned, in bounds);
        // slot first words are accessed atomically whenever they can hold a header.
        unsafe { AtomicU64::from_ptr(self.data.as_ptr().add(pos) as *mut u64) }
    }
    unsafe fn write(&self, pos: usize, parts: &[&[u8]]) {
        // SAFETY: the caller owns [pos, pos + Σ len) inside the data area (protocol contract).
        unsafe {
            let mut at = self.data.as_ptr().add(pos);
            for part in parts {
                std::ptr::copy_nonoverlapping(part.as_ptr(), at, part.len());
                at = at.add(part.len());
            }
        }
    }
    unsafe fn read<R>(&self, pos: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> R {
        // SAFETY: the caller guarantees a published, unreleased frame covers the bytes.
        f(unsafe { std::slice::from_raw_parts(self.data.as_ptr().add(pos), len) })
    }
}

/// Abort state shared by the ranks of one process (the threads conduit). Processes of the
/// smp conduit are ended by the launcher instead.
#[derive(Default)]
pub(crate) struct AbortFlag {
    aborted: AtomicBool,
    /// The first rank that failed and why.
    first: Mutex<Option<(usize, String)>>,
}

impl AbortFlag {
    pub(crate) fn raise(&self, rank: usize, reason: &str) {
        let mut first = self.first.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some((rank, reason.to_string()));
        }
        // Release: pairs with the Acquire in `check` so the reason is visible.
        self.aborted.store(true, Ordering::Release);
    }

    pub(crate) fn check(&self) -> Result<(), ConduitError> {
        if self.aborted.load(Ordering::Acquire) {
            return Err(ConduitError::Aborted(match self.first() {
                Some((rank, why)) => format!("rank {rank} failed: {why}"),
                None => String::new(),
            }));
        }
        Ok(())
    }

    /// The first failure, if any.
    pub(crate) fn first(&self) -> Option<(usize, String)> {
        self.first.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Keeps the mappings of a job alive for as long as any rank's conduit uses them.
pub(crate) trait KeepAlive {}
impl<T> KeepAlive for T {}

/// Where this rank's own segment begins in its address space: a multiple of this, so that
/// a symmetric offset aligned to any power of two up to it gives an address aligned to it
/// in every rank (OpenSHMEM's `shmem_align`). The placement reserves this much more
/// address space for a moment and returns it at once; it costs no memory.
pub const SEGMENT_ADDRESS_ALIGN: usize = 1 << 30;

/// A mapping placed at an address of our choosing; unmapped when dropped.
pub(crate) struct AlignedMap {
    base: NonNull<u8>,
    len: usize,
}

impl AlignedMap {
    /// Map `len` bytes of `fd` from `offset` (shared), or of fresh zeroed memory without a
    /// file (private to this process), writable, so that `base + at` is a multiple of
    /// [`SEGMENT_ADDRESS_ALIGN`].
    pub(crate) fn map(
        fd: Option<std::os::fd::BorrowedFd<'_>>,
        offset: u64,
        len: usize,
        at: usize,
    ) -> std::io::Result<AlignedMap> {
        use std::os::fd::AsRawFd;
        let align = SEGMENT_ADDRESS_ALIGN;
        let span = len
            .checked_add(align)
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
        // SAFETY: a fresh anonymous reservation without access, owned by this function;
        // the file is then mapped over part of it with MAP_FIXED (replacing only our own
        // reservation), and the rest of the reservation is returned.
        unsafe {
            let reserved = libc::mmap(
                std::ptr::null_mut(),
                span,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            );
            if reserved == libc::MAP_FAILED {
                return Err(std::io::Error::last_os_error());
            }
            let start = reserved as usize;
            let target = (start + at).next_multiple_of(align) - at;
            let (flags, raw_fd) = match fd {
                Some(fd) => (libc::MAP_SHARED, fd.as_raw_fd()),
                None => (
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                ),
            };
            let mapped = libc::mmap(
                target as *mut libc::c_void,
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags | libc::MAP_FIXED,
                raw_fd,
                offset as libc::off_t,
            );
            if mapped == libc::MAP_FAILED {
                let e = std::io::Error::last_os_error();
                libc::munmap(reserved, span);
                return Err(e);
            }
            if target > start {
                libc::munmap(reserved, target - start);
            }
            let end = target + len;
            if start + span > end {
                libc::munmap(end as *mut libc::c_void, start + span - end);
            }
            Ok(AlignedMap {
                base: NonNull::new(mapped.cast()).expect("mmap never returns null"),
                len,
            })
        }
    }

    /// The first byte.
    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }
}

impl Drop for AlignedMap {
    fn drop(&mut self) {
        // SAFETY: base..base+len is the mapping this value owns; nothing refers to it once
        // the conduit that kept it alive is gone.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

// SAFETY: the mapping is shared memory reached only through the conduit's own
// synchronisation; the value itself is just an address and a length.
unsafe impl Send for AlignedMap {}
// SAFETY: as above.
unsafe impl Sync for AlignedMap {}

/// The conduit over mapped regions; built by [`super::smp`] and [`super::threads`].
pub(crate) struct ShmConduit {
    kind: ConduitKind,
    rank: usize,
    layout: RegionLayout,
    /// Region base of every rank, mapped in this process.
    regions: Vec<NonNull<u8>>,
    /// Producer-side cached `head` of our ring in each destination, per class.
    head_cache: Vec<[Cell<u64>; 2]>,
    /// Destinations sent to whose rings may not be drained yet (see `am_all_consumed`),
    /// and a flag per destination saying it is in that list.
    undrained: RefCell<Vec<usize>>,
    undrained_flag: Vec<Cell<bool>>,
    abort: Option<Arc<AbortFlag>>,
    /// Report every peer's segment as unmapped, so that data moves as active messages, as
    /// with a conduit across hosts that has no one-sided operations of its own (a testing
    /// aid: it drives the core's paths for unmapped peers on one machine).
    hide_peers: bool,
    /// The file this rank's region is mapped from and the region's offset in it.
    region_file: Option<(std::os::fd::OwnedFd, u64)>,
    _mappings: Arc<dyn KeepAlive>,
}

impl ShmConduit {
    /// # Safety
    /// Every pointer in `regions` must be the base of a live mapping of an initialised region
    /// with `layout`, kept alive by `mappings` for the life of the conduit.
    pub(crate) unsafe fn new(
        kind: ConduitKind,
        rank: usize,
        layout: RegionLayout,
        regions: Vec<NonNull<u8>>,
        abort: Option<Arc<AbortFlag>>,
        mappings: Arc<dyn KeepAlive>,
    ) -> Self {
        let head_cache = (0..layout.ranks)
            .map(|_| [Cell::new(0), Cell::new(0)])
            .collect();
        ShmConduit {
            kind,
            rank,
            layout,
            regions,
            head_cache,
            undrained: RefCell::new(Vec::new()),
            undrained_flag: (0..layout.ranks).map(|_| Cell::new(false)).collect(),
            abort,
            hide_peers: false,
            region_file: None,
            _mappings: mappings,
        }
    }

    /// The same conduit, its own region mapped from `file` at `offset`.
    pub(crate) fn with_region_file(mut self, file: std::os::fd::OwnedFd, offset: u64) -> Self {
        self.region_file = Some((file, offset));
        self
    }

    /// The same conduit reporting another kind (the mpi conduit's host-local part).
    #[cfg(feature = "mpi")]
    pub(crate) fn with_kind(mut self, kind: ConduitKind) -> Self {
        self.kind = kind;
        self
    }

    /// Treat every peer as unmapped (see the field `hide_peers`).
    pub(crate) fn hide_peers(mut self, hide: bool) -> Self {
        self.hide_peers = hide;
        self
    }

    /// `rank`'s segment through its mapping, whether or not peers are hidden.
    fn mapped_segment(&self, rank: usize) -> NonNull<u8> {
        // SAFETY: segment_offset < region_len, inside the live mapping of a valid rank
        // (callers pass ranks the core checked).
        unsafe {
            NonNull::new_unchecked(self.regions[rank].as_ptr().add(self.layout.segment_offset))
        }
    }

    /// Word `word` of `owner`'s doorbell bitmap for `class`.
    fn doorbell(&self, owner: usize, class: AmClass, word: usize) -> &AtomicU64 {
        debug_assert!(word < self.layout.doorbell_words);
        // SAFETY: the bitmap lies between the header and the rings of a live region
        // (constructor contract), 8-byte aligned, and holds only atomic words.
        unsafe {
            AtomicU64::from_ptr(
                self.regions[owner]
                    .as_ptr()
                    .add(self.layout.doorbell_offset(class) + 8 * word)
                    .cast(),
            )
        }
    }

    fn ring(&self, owner: usize, sender: usize, class: AmClass) -> Ring<ShmRing> {
        // SAFETY: regions[owner] is a live region with `layout` (constructor contract).
        unsafe { ShmRing::at(self.regions[owner], &self.layout, sender, class) }
    }
}

impl Conduit for ShmConduit {
    fn kind(&self) -> ConduitKind {
        self.kind
    }
    fn ranks_are_threads(&self) -> bool {
        self.kind.processes() == Processes::OneForAll
    }
    fn rank(&self) -> usize {
        self.rank
    }
    fn ranks(&self) -> usize {
        self.layout.ranks
    }
    fn segment_len(&self) -> usize {
        self.layout.segment_len
    }
    fn segment_base(&self, rank: usize) -> Option<NonNull<u8>> {
        if rank >= self.regions.len() || (self.hide_peers && rank != self.rank) {
            return None;
        }
        Some(self.mapped_segment(rank))
    }
    fn segment_file(&self) -> Option<(std::os::fd::BorrowedFd<'_>, u64)> {
        use std::os::fd::AsFd;
        self.region_file
            .as_ref()
            .map(|(fd, off)| (fd.as_fd(), off + self.layout.segment_offset as u64))
    }
    fn am_max_frame(&self) -> usize {
        self.layout.max_frame()
    }
    fn am_try_send(
        &self,
        dest: usize,
        class: AmClass,
        parts: &[&[u8]],
    ) -> Result<bool, ConduitError> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.layout.max_frame() {
            return Err(ConduitError::FrameTooLarge {
                len,
                max: self.layout.max_frame(),
            });
        }
        let ring = self.ring(dest, self.rank, class);
        let pushed = ring.try_push(&self.head_cache[dest][class as usize], parts);
        if pushed {
            if self.layout.doorbell_words > 0 {
                let (word, bit) = doorbell::position(self.rank);
                doorbell::ring(self.doorbell(dest, class, word), bit);
            }
            if !self.undrained_flag[dest].get() {
                self.undrained_flag[dest].set(true);
                self.undrained.borrow_mut().push(dest);
            }
        }
        Ok(pushed)
    }
    fn am_all_consumed(&self) -> bool {
        let mut undrained = self.undrained.borrow_mut();
        undrained.retain(|&dest| {
            let drained = [AmClass::Request, AmClass::Reply]
                .into_iter()
                .all(|class| self.ring(dest, self.rank, class).drained());
            if drained {
                self.undrained_flag[dest].set(false);
            }
            !drained
        });
        undrained.is_empty()
    }
    fn am_poll(&self, class: AmClass, deliver: &mut dyn FnMut(usize, &[u8])) -> usize {
        let mut delivered = 0;
        let mut consume = |sender: usize| {
            delivered += self
                .ring(self.rank, sender, class)
                .consume(|frame| deliver(sender, frame));
        };
        if self.layout.doorbell_words == 0 {
            (0..self.layout.ranks).for_each(&mut consume);
            return delivered;
        }
        for word in 0..doorbell::words(self.layout.ranks) {
            let mut senders = doorbell::take(self.doorbell(self.rank, class, word));
            while senders != 0 {
                consume(word * 64 + senders.trailing_zeros() as usize);
                senders &= senders - 1;
            }
        }
        delivered
    }
    fn check_alive(&self) -> Result<(), ConduitError> {
        match &self.abort {
            Some(flag) => flag.check(),
            None => Ok(()),
        }
    }
    fn abort(&self, reason: &str) {
        if let Some(flag) = &self.abort {
            flag.raise(self.rank, reason);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A region in plain heap memory for single-process ring tests.
    fn region(layout: &RegionLayout) -> (Vec<u64>, NonNull<u8>) {
        let mut mem = vec![0u64; layout.region_len / 8];
        let base = NonNull::new(mem.as_mut_ptr() as *mut u8).unwrap();
        (mem, base)
    }

    #[test]
    fn ring_preserves_order_and_content_across_wraps() {
        let layout = RegionLayout::new(1, 4096, 1024);
        let (_mem, base) = region(&layout);
        // SAFETY: `_mem` outlives the ring and is large enough for the layout.
        let ring = unsafe { ShmRing::at(base, &layout, 0, AmClass::Request) };
        let cache = Cell::new(0);
        let mut next_expected = 0u32;
        let mut sent = 0u32;
        for round in 0..500u32 {
            // Frames of varying size force every wrap position.
            let len = (round as usize * 37) % 200;
            let body: Vec<u8> = (0..len).map(|i| (i as u32 ^ sent) as u8).collect();
            while !ring.try_push(&cache, &[&sent.to_le_bytes(), &body]) {
                ring.consume(|frame| {
                    let seq = u32::from_le_bytes(frame[..4].try_into().unwrap());
                    assert_eq!(seq, next_expected);
                    for (i, b) in frame[4..].iter().enumerate() {
                        assert_eq!(*b, (i as u32 ^ seq) as u8);
                    }
                    next_expected += 1;
                });
            }
            sent += 1;
        }
        ring.consume(|_| next_expected += 1);
        assert_eq!(next_expected, sent);
    }

    #[test]
    fn full_ring_refuses_instead_of_growing() {
        let layout = RegionLayout::new(1, 4096, 1024);
        let (_mem, base) = region(&layout);
        // SAFETY: as above.
        let ring = unsafe { ShmRing::at(base, &layout, 0, AmClass::Reply) };
        let cache = Cell::new(0);
        let body = [7u8; 100];
        let mut accepted = 0;
        while ring.try_push(&cache, &[&body]) {
            accepted += 1;
            assert!(accepted < 100, "ring never filled");
        }
        // 1024-byte ring, 108-byte frames take two 64-byte slots: 8 fit.
        assert_eq!(accepted, 1024 / 128);
        assert_eq!(ring.consume(|f| assert_eq!(f, &body[..])), accepted);
        assert!(ring.try_push(&cache, &[&body]));
    }
}
