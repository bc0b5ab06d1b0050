//! The per-rank segment allocator.
//!
//! Two arenas share a segment. *Collective* allocations (made by every rank in the same
//! order) grow up from offset 0, so the same sequence of calls yields the same offsets on
//! every rank; *local* allocations (UPC's `upc_alloc`) grow down from the end, so they can
//! never perturb collective offsets. Each arena keeps a first-fit list of holes below its
//! frontier; freeing next to the frontier moves it back. The allocator only does
//! arithmetic: it never touches segment memory. It remembers how far each arena ever
//! reached, so that it can say which part of a new block was handed out before: the rest
//! is still as the operating system mapped it, zero, and need not be cleared (clearing
//! it would touch every page of a thousand-rank team's mailboxes, whether or not a
//! message ever arrives).

use std::collections::BTreeMap;

/// Alignment of every allocation: a cache line, so that separately allocated objects
/// never share one between ranks.
pub(crate) const ALLOC_ALIGN: usize = 64;

/// The smallest page (4 KiB): segments and their arenas start on one, the operating
/// system backs memory one at a time, and the processor compares a load's address with
/// those of earlier stores by the offset within one first.
pub(crate) const PAGE: usize = 4096;

/// Which arena an allocation comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arena {
    /// Same offsets on every rank.
    Collective,
    /// This rank only.
    Local,
}

impl Arena {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Arena::Collective => "collective",
            Arena::Local => "local",
        }
    }
}

#[derive(Default, Debug)]
struct Pool {
    /// Free holes strictly inside the arena: offset -> length.
    holes: BTreeMap<usize, usize>,
    /// Live allocations: offset -> length.
    live: BTreeMap<usize, usize>,
}

/// Why an allocation failed: the largest block that would have fitted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Exhausted {
    pub largest_free: usize,
}

/// A block handed out by [`SegmentHeap::alloc`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Block {
    /// Where it starts.
    pub offset: usize,
    /// The part of it that earlier allocations handed out (empty when none did): bytes
    /// outside it have never been handed out, so they are still zero unless someone wrote
    /// outside an allocation.
    pub reused: std::ops::Range<usize>,
}

/// Allocator state of one segment.
#[derive(Debug)]
pub(crate) struct SegmentHeap {
    len: usize,
    /// Collective frontier: `[0, low)` belongs to the collective arena.
    low: usize,
    /// Local frontier: `[high, len)` belongs to the local arena.
    high: usize,
    /// The highest `low` and the lowest `high` ever: `[0, peak_low)` and
    /// `[floor_high, len)` have been handed out, the rest never has.
    peak_low: usize,
    floor_high: usize,
    collective: Pool,
    local: Pool,
}

impl SegmentHeap {
    pub(crate) fn new(len: usize) -> Self {
        let len = len / ALLOC_ALIGN * ALLOC_ALIGN;
        SegmentHeap {
            len,
            low: 0,
            high: len,
            peak_low: 0,
            floor_high: len,
            collective: Pool::default(),
            local: Pool::default(),
        }
    }

    fn pool(&mut self, arena: Arena) -> &mut Pool {
        match arena {
            Arena::Collective => &mut self.collective,
            Arena::Local => &mut self.local,
        }
    }

    /// Allocate `bytes` (rounded up to [`ALLOC_ALIGN`]).
    pub(crate) fn alloc(&mut self, arena: Arena, bytes: usize) -> Result<Block, Exhausted> {
        let size = bytes.max(1).next_multiple_of(ALLOC_ALIGN);
        let offset = self.place(arena, size)?;
        let end = offset + size;
        // The covering range of the block's overlap with [0, peak_low) and
        // [floor_high, len).
        let below = offset..end.min(self.peak_low);
        let above = offset.max(self.floor_high)..end;
        let reused = match (below.is_empty(), above.is_empty()) {
            (true, true) => offset..offset,
            (false, true) => below,
            (true, false) => above,
            (false, false) => offset..end,
        };
        self.peak_low = self.peak_low.max(self.low);
        self.floor_high = self.floor_high.min(self.high);
        Ok(Block { offset, reused })
    }

    /// Find room for `size` bytes and record them live; returns the offset.
    fn place(&mut self, arena: Arena, size: usize) -> Result<usize, Exhausted> {
        let pool = self.pool(arena);
        if let Some((&at, &hole)) = pool.holes.iter().find(|(_, &hole)| hole >= size) {
            pool.holes.remove(&at);
            let offset = match arena {
                Arena::Collective => {
                    if hole > size {
                        pool.holes.insert(at + size, hole - size);
                    }
                    at
                }
                Arena::Local => {
                    if hole > size {
                        pool.holes.insert(at, hole - size);
                    }
                    at + hole - size
                }
            };
            pool.live.insert(offset, size);
            return Ok(offset);
        }
        if self.high - self.low < size {
            let largest_hole = self.pool(arena).holes.values().copied().max().unwrap_or(0);
            return Err(Exhausted {
                largest_free: largest_hole.max(self.high - self.low),
            });
        }
        let offset = match arena {
            Arena::Collective => {
                self.low += size;
                self.low - size
            }
            Arena::Local => {
                self.high -= size;
                self.high
            }
        };
        self.pool(arena).live.insert(offset, size);
        Ok(offset)
    }

    /// Free the allocation starting at `offset`. `false` if there is none.
    pub(crate) fn free(&mut self, arena: Arena, offset: usize) -> bool {
        let pool = self.pool(arena);
        let Some(size) = pool.live.remove(&offset) else {
            return false;
        };
        let (mut start, mut end) = (offset, offset + size);
        if let Some((&prev, &prev_len)) = pool.holes.range(..start).next_back() {
            if prev + prev_len == start {
                pool.holes.remove(&prev);
                start = prev;
            }
        }
        if let Some(next_len) = pool.holes.remove(&end) {
            end += next_len;
        }
        match arena {
            Arena::Collective if end == self.low => self.low = start,
            Arena::Local if start == self.high => self.high = end,
            _ => {
                self.pool(arena).holes.insert(start, end - start);
            }
        }
        true
    }

    /// Bytes still available to either arena at the frontier.
    #[cfg(test)]
    pub(crate) fn unclaimed(&self) -> usize {
        self.high - self.low
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn collective_offsets_ignore_local_traffic() {
        let mut a = SegmentHeap::new(1 << 20);
        let mut b = SegmentHeap::new(1 << 20);
        a.alloc(Arena::Local, 5000).unwrap();
        b.alloc(Arena::Local, 12).unwrap();
        let x = b.alloc(Arena::Local, 700).unwrap();
        b.free(Arena::Local, x.offset);
        for size in [8, 100, 4096, 3] {
            assert_eq!(
                a.alloc(Arena::Collective, size),
                b.alloc(Arena::Collective, size)
            );
        }
    }

    #[test]
    fn exhaustion_reports_largest_block() {
        let mut h = SegmentHeap::new(4096);
        h.alloc(Arena::Collective, 1024).unwrap();
        let err = h.alloc(Arena::Local, 8192).unwrap_err();
        assert_eq!(err.largest_free, 3072);
    }

    proptest! {
        /// Random alloc/free sequences: live blocks never overlap, stay in bounds, are
        /// aligned, and freeing everything returns the whole segment. Every byte of a
        /// block outside its `reused` range was never handed out before (checked against a
        /// record of every line ever handed out), and `reused` starts and ends on lines
        /// that were.
        #[test]
        fn blocks_never_overlap(ops in proptest::collection::vec((any::<bool>(), any::<bool>(), 1usize..5000), 1..200)) {
            let len = 256 * 1024;
            let mut h = SegmentHeap::new(len);
            let mut live: Vec<(Arena, usize, usize)> = Vec::new();
            let mut handed_out = vec![false; len / ALLOC_ALIGN];
            for (collective, free, size) in ops {
                let arena = if collective { Arena::Collective } else { Arena::Local };
                if free && !live.is_empty() {
                    let (arena, off, _) = live.remove(size % live.len());
                    prop_assert!(h.free(arena, off));
                    prop_assert!(!h.free(arena, off));
                } else if let Ok(block) = h.alloc(arena, size) {
                    let off = block.offset;
                    prop_assert_eq!(off % ALLOC_ALIGN, 0);
                    let lines = off / ALLOC_ALIGN..(off + size).div_ceil(ALLOC_ALIGN);
                    let r = &block.reused;
                    prop_assert!(r.start >= off && r.end <= off + size.next_multiple_of(ALLOC_ALIGN));
                    for line in lines.clone() {
                        let inside = (r.start..r.end).contains(&(line * ALLOC_ALIGN));
                        prop_assert!(inside || !handed_out[line], "line {} reused but not said", line);
                    }
                    if !r.is_empty() {
                        prop_assert!(handed_out[r.start / ALLOC_ALIGN]);
                        prop_assert!(handed_out[(r.end - 1) / ALLOC_ALIGN]);
                    }
                    for line in lines {
                        handed_out[line] = true;
                    }
                    prop_assert!(off + size <= len);
                    for &(_, o, s) in &live {
                        prop_assert!(off + size <= o || o + s <= off, "overlap");
                    }
                    live.push((arena, off, size));
                }
            }
            for (arena, off, _) in live {
                prop_assert!(h.free(arena, off));
            }
            prop_assert_eq!(h.unclaimed(), len);
        }
    }
}
