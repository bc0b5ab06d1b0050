//! UPC shared arrays: a one-dimensional array spread over the ranks' segments by a
//! block-cyclic distribution, addressed by global index.
//!
//! # The mapping
//! With block size `b` over `P` ranks, element `i` lies in block `k = ⌊i / b⌋`, which has
//! affinity to rank `k mod P`; that rank stores its blocks one after another, so the element
//! sits at local offset `⌊k / P⌋·b + i mod b`. The [`Distribution`]s are UPC's:
//!
//! | distribution | UPC | block size | element `i` on rank |
//! |---|---|---|---|
//! | `Cyclic` | `shared [1]` (default) | 1 | `i mod P` |
//! | `BlockCyclic(b)` | `shared [b]` | `b` | `⌊i / b⌋ mod P` |
//! | `Blocked` | `shared [*]` | `⌈n / P⌉` | `⌊i / b⌋` |
//! | `Indefinite` | `shared []` | ∞ | `0` |
//!
//! A multi-dimensional array is linearised in row-major order, as in UPC: element
//! `[i][j]` of an `R × C` array is element `i·C + j`, so `BlockCyclic(C)` deals out whole
//! rows and `Blocked` gives each rank a contiguous band of rows.
//!
//! Every rank's part starts at the same segment offset (the allocation is collective,
//! like `upc_all_alloc`), and every rank reserves the largest part: for `Indefinite` that
//! is the whole array on every rank, of which only rank 0's is used (pages never touched
//! are never backed on the `smp` conduit).
//!
//! *Phaseless* distributions (`Cyclic`, `Indefinite`) find an element with one division
//! (or none) instead of the three of the general formula; `tessera bench grid` measures
//! the difference. [`SharedArray::with_distribution`] views the same storage with another
//! block size, which only renumbers the elements (UPC's cast between block sizes).
//!
//! A `SharedArray` is a handle (like UPC's pointer-to-shared): `Copy`, valid on every
//! rank, and every access goes through the core's checked transfers. This module never
//! touches another rank's memory any other way.
//!
//! ```
//! use tessera::{Affinity, Distribution, SharedArray};
//! tessera::Job::threads(3).run(|ctx| {
//!     let a = SharedArray::<u64>::alloc(ctx, 10, Distribution::BlockCyclic(2))?;
//!     // Each rank writes the elements it owns (UPC's upc_forall with &a[i]).
//!     a.forall(ctx, 0..10, Affinity::Element, |i| a.put(ctx, i, 100 + i as u64))?;
//!     ctx.barrier()?;
//!     let mut all = vec![0; 10];
//!     a.get_range(ctx, 0, &mut all)?; // one strided get per rank
//!     assert_eq!(all, (100..110).collect::<Vec<_>>());
//!     assert_eq!(a.owner(5), 2); // block 2 of size 2
//!     ctx.barrier()?;
//!     a.free(ctx)?;
//!     Ok(())
//! }).unwrap();
//! ```

use std::ops::Range;

use bytemuck::Pod;

use crate::core::Context;
use crate::error::CoreError;
use crate::{Blocking, GlobalPtr, Result, Strided, StridedMut};

/// How a [`SharedArray`]'s elements are dealt to the ranks (see the
/// [module documentation](self) for the mapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// Element `i` on rank `i mod P` (block size 1; phaseless).
    Cyclic,
    /// Blocks of `b` elements dealt round-robin.
    BlockCyclic(usize),
    /// One contiguous block of `⌈n / P⌉` elements per rank.
    Blocked,
    /// Every element on rank 0 (phaseless).
    Indefinite,
}

/// Which rank runs iteration `i` of [`SharedArray::forall`] (UPC's affinity expression).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Affinity {
    /// Rank `i mod P` (an integer affinity expression).
    Index,
    /// The rank that owns element `i` (`&a[i]`).
    Element,
}

/// How indices become addresses: the phaseless distributions skip the block arithmetic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Map {
    Cyclic,
    Indefinite,
    Blocks(usize),
}

/// A part of an index range that one transfer moves (`index` counts from the range's
/// start).
enum Piece<T> {
    /// `len` consecutive elements, contiguous at `at`.
    Run {
        at: GlobalPtr<T>,
        index: usize,
        len: usize,
    },
    /// `count` whole blocks of one rank, contiguous at `at`, `P·block` apart in the range.
    Blocks {
        at: GlobalPtr<T>,
        index: usize,
        count: usize,
        block: usize,
    },
}

/// A distributed array of `len` elements of `T`; see the [module documentation](self).
#[derive(Debug)]
pub struct SharedArray<T> {
    base: GlobalPtr<T>,
    len: usize,
    ranks: usize,
    map: Map,
    /// Elements reserved on every rank.
    capacity: usize,
}

impl<T> Clone for SharedArray<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SharedArray<T> {}

/// Elements each rank must hold for `len` elements under `map` over `ranks` ranks.
fn capacity(map: Map, len: usize, ranks: usize) -> usize {
    match map {
        Map::Cyclic => len.div_ceil(ranks),
        Map::Indefinite => len,
        Map::Blocks(b) => len.div_ceil(b).div_ceil(ranks) * b,
    }
}

fn map_of(distribution: Distribution, len: usize, ranks: usize) -> Result<Map> {
    Ok(match distribution {
        Distribution::Cyclic => Map::Cyclic,
        Distribution::Indefinite => Map::Indefinite,
        Distribution::Blocked => Map::Blocks(len.div_ceil(ranks).max(1)),
        Distribution::BlockCyclic(0) => {
            return Err(CoreError::BadArgument {
                call: "SharedArray",
                argument: "distribution",
                why: "shared array: block size 0; use a block size of at least 1 (or Distribution::Indefinite)".into(),
            }
            .into())
        }
        Distribution::BlockCyclic(b) => Map::Blocks(b),
    })
}

impl<T: Pod> SharedArray<T> {
    /// Allocate `len` elements distributed by `distribution` (collective: every rank
    /// passes the same arguments; checked mode verifies it). Contents are not zeroed when
    /// the segment memory is reused.
    pub fn alloc(ctx: &Context, len: usize, distribution: Distribution) -> Result<Self> {
        let ranks = ctx.ranks();
        let map = map_of(distribution, len, ranks)?;
        let capacity = capacity(map, len, ranks);
        let base = ctx.alloc_collective::<T>(capacity)?;
        Ok(SharedArray {
            base,
            len,
            ranks,
            map,
            capacity,
        })
    }

    /// Free the array (collective, in the same order as the allocations on every rank).
    pub fn free(self, ctx: &Context) -> Result<()> {
        ctx.free_collective(self.base.on(ctx.rank()))
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements per block (`usize::MAX` for `Indefinite`).
    pub fn block_size(&self) -> usize {
        match self.map {
            Map::Cyclic => 1,
            Map::Indefinite => usize::MAX,
            Map::Blocks(b) => b,
        }
    }

    /// Rank and local offset of element `i` (no bounds check).
    #[inline]
    fn place(&self, i: usize) -> (usize, usize) {
        match self.map {
            Map::Cyclic => (i % self.ranks, i / self.ranks),
            Map::Indefinite => (0, i),
            Map::Blocks(b) => {
                let k = i / b;
                (k % self.ranks, k / self.ranks * b + i % b)
            }
        }
    }

    /// The rank with affinity to element `i` (UPC's `upc_threadof(&a[i])`).
    pub fn owner(&self, i: usize) -> usize {
        self.place(i).0
    }

    /// The global address of element `i`.
    pub fn address(&self, i: usize) -> Result<GlobalPtr<T>> {
        self.check(i..i + 1)?;
        let (rank, offset) = self.place(i);
        Ok(self.base.on(rank).add(offset))
    }

    fn check(&self, range: Range<usize>) -> Result<()> {
        if range.start > range.end || range.end > self.len {
            return Err(CoreError::BadArgument {
                call: "SharedArray",
                argument: "range",
                why: format!(
                    "shared array: elements {}..{} are outside the array's {} elements",
                    range.start, range.end, self.len
                ),
            }
            .into());
        }
        Ok(())
    }

    /// Read element `i`.
    pub fn get(&self, ctx: &Context, i: usize) -> Result<T> {
        ctx.get_value(self.address(i)?)
    }

    /// Write element `i`.
    pub fn put(&self, ctx: &Context, i: usize, value: T) -> Result<()> {
        ctx.put(self.address(i)?, &[value], Blocking)
    }

    /// The pieces of `range` that one transfer each can move: the partial blocks at either
    /// end, and for each rank all the whole blocks it owns in between (consecutive in its
    /// storage, `P·b` apart in index space).
    fn pieces(&self, range: Range<usize>) -> Result<Vec<Piece<T>>> {
        self.check(range.clone())?;
        let (start, end) = (range.start, range.end);
        let mut pieces = Vec::new();
        if start == end {
            return Ok(pieces);
        }
        let b = match self.map {
            Map::Indefinite => {
                pieces.push(Piece::Run {
                    at: self.base.on(0).add(start),
                    index: 0,
                    len: end - start,
                });
                return Ok(pieces);
            }
            Map::Cyclic => 1,
            Map::Blocks(b) => b,
        };
        let address = |i: usize| {
            let (rank, offset) = self.place(i);
            self.base.on(rank).add(offset)
        };
        // Whole blocks first_block..last_block; partial pieces outside them.
        let first_block = start.div_ceil(b);
        let last_block = (end / b).max(first_block);
        let head_end = (first_block * b).min(end);
        if start < head_end {
            pieces.push(Piece::Run {
                at: address(start),
                index: 0,
                len: head_end - start,
            });
        }
        let whole = last_block - first_block;
        for r in 0..self.ranks.min(whole) {
            let k = first_block + r;
            pieces.push(Piece::Blocks {
                at: address(k * b),
                index: k * b - start,
                count: (whole - r).div_ceil(self.ranks),
                block: b,
            });
        }
        let tail_start = (last_block * b).max(head_end);
        if tail_start < end {
            pieces.push(Piece::Run {
                at: address(tail_start),
                index: tail_start - start,
                len: end - tail_start,
            });
        }
        Ok(pieces)
    }

    /// Read elements `start..start + dst.len()` into `dst`: one transfer for each partial
    /// block at the ends and one strided transfer per rank for the whole blocks between.
    pub fn get_range(&self, ctx: &Context, start: usize, dst: &mut [T]) -> Result<()> {
        for piece in self.pieces(start..start + dst.len())? {
            match piece {
                Piece::Run { at, index, len } => {
                    ctx.get(at, &mut dst[index..index + len], Blocking)?
                }
                Piece::Blocks {
                    at,
                    index,
                    count,
                    block,
                } => ctx.get(
                    at,
                    StridedMut {
                        local: &mut dst[index..],
                        local_strides: &[self.ranks * block, 1],
                        remote_strides: &[block, 1],
                        counts: &[count, block],
                    },
                    Blocking,
                )?,
            }
        }
        Ok(())
    }

    /// Write `src` to elements `start..start + src.len()`, moved as in
    /// [`SharedArray::get_range`].
    pub fn put_range(&self, ctx: &Context, start: usize, src: &[T]) -> Result<()> {
        for piece in self.pieces(start..start + src.len())? {
            match piece {
                Piece::Run { at, index, len } => ctx.put(at, &src[index..index + len], Blocking)?,
                Piece::Blocks {
                    at,
                    index,
                    count,
                    block,
                } => ctx.put(
                    at,
                    Strided {
                        local: &src[index..],
                        local_strides: &[self.ranks * block, 1],
                        remote_strides: &[block, 1],
                        counts: &[count, block],
                    },
                    Blocking,
                )?,
            }
        }
        Ok(())
    }

    /// Run `f(i)` for every `i` in `range` whose affinity is this rank (UPC's
    /// `upc_forall`). Not collective and not synchronising: put a barrier after it when
    /// other ranks read what the iterations wrote.
    pub fn forall(
        &self,
        ctx: &Context,
        range: Range<usize>,
        affinity: Affinity,
        mut f: impl FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        let me = ctx.rank();
        match affinity {
            Affinity::Index => {
                let first = range.start + (me + self.ranks - range.start % self.ranks) % self.ranks;
                for i in (first..range.end).step_by(self.ranks) {
                    f(i)?;
                }
            }
            Affinity::Element => {
                self.check(range.clone())?;
                // Walk only this rank's blocks: O(own elements), not O(range).
                let b = self.block_size().min(self.len.max(1));
                let mut block = range.start / b;
                while block * b < range.end {
                    let (owner, _) = self.place(block * b);
                    if owner == me {
                        let lo = (block * b).max(range.start);
                        let hi = ((block + 1) * b).min(range.end);
                        for i in lo..hi {
                            f(i)?;
                        }
                        block += self.ranks;
                    } else {
                        block += (me + self.ranks - owner) % self.ranks;
                    }
                }
            }
        }
        Ok(())
    }

    /// How many elements rank `rank` holds.
    pub fn local_len(&self, rank: usize) -> usize {
        match self.map {
            Map::Indefinite => {
                if rank == 0 {
                    self.len
                } else {
                    0
                }
            }
            Map::Cyclic | Map::Blocks(_) => {
                let b = self.block_size();
                let blocks = self.len.div_ceil(b);
                if rank >= blocks {
                    return 0;
                }
                let mine = (blocks - rank).div_ceil(self.ranks);
                // Only the last block of the array may be short.
                let last_owner = (blocks - 1) % self.ranks;
                let short = blocks * b - self.len;
                mine * b - if rank == last_owner { short } else { 0 }
            }
        }
    }

    /// The elements this rank owns, in local order (UPC's cast of `&a[i]` to a local
    /// pointer): blocks in index order, each contiguous.
    ///
    /// # Safety
    /// While the slice lives no rank may write these elements (the program's
    /// synchronisation must guarantee it).
    pub unsafe fn local<'a>(&self, ctx: &'a Context) -> Result<&'a [T]> {
        let ptr = self.base.on(ctx.rank());
        // SAFETY: the caller guarantees the absence of writers; local_slice checks bounds.
        Ok(unsafe { ctx.local_slice(ptr, self.local_len(ctx.rank()))? }
            .expect("a rank's own segment is always mapped"))
    }

    /// The elements this rank owns, mutable.
    ///
    /// # Safety
    /// While the slice lives no rank may read or write these elements through the array,
    /// and this rank must hold no other reference to them.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn local_mut<'a>(&self, ctx: &'a Context) -> Result<&'a mut [T]> {
        let ptr = self.base.on(ctx.rank());
        // SAFETY: exclusivity is the caller's contract; local_slice_mut checks bounds.
        Ok(
            unsafe { ctx.local_slice_mut(ptr, self.local_len(ctx.rank()))? }
                .expect("a rank's own segment is always mapped"),
        )
    }

    /// The same storage seen with another distribution: only the numbering of elements
    /// changes (UPC's cast between block sizes). The new view has `len` elements, which
    /// must fit in what every rank reserved.
    ///
    /// ```
    /// use tessera::{Distribution, SharedArray};
    /// tessera::Job::threads(2).run(|ctx| {
    ///     let a = SharedArray::<u32>::alloc(ctx, 8, Distribution::Cyclic)?;
    ///     let b = a.with_distribution(8, Distribution::Blocked)?;
    ///     // Cyclic element 2 is rank 0's second element, which is element 1 of the
    ///     // blocked view.
    ///     assert_eq!(a.address(2)?, b.address(1)?);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    pub fn with_distribution(&self, len: usize, distribution: Distribution) -> Result<Self> {
        let map = map_of(distribution, len, self.ranks)?;
        let needed = capacity(map, len, self.ranks);
        if needed > self.capacity {
            return Err(CoreError::BadArgument { call: "SharedArray::view", argument: "len", why: format!(
                "shared array: {len} elements as {distribution:?} need {needed} per rank, but {} were reserved; view fewer elements",
                self.capacity
            ) }.into());
        }
        Ok(SharedArray { len, map, ..*self })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The mapping built the slow way: deal blocks round-robin and append each to its
    /// rank's storage.
    fn dealt(len: usize, b: usize, ranks: usize) -> Vec<(usize, usize)> {
        let mut filled = vec![0usize; ranks];
        let mut out = Vec::new();
        for (k, block) in (0..len).collect::<Vec<_>>().chunks(b).enumerate() {
            let r = k % ranks;
            for _ in block {
                out.push((r, filled[r]));
                filled[r] += 1;
            }
            // A short last block still reserves a whole block.
            filled[r] += b - block.len();
        }
        out
    }

    fn array(len: usize, ranks: usize, d: Distribution) -> SharedArray<u64> {
        let map = map_of(d, len, ranks).unwrap();
        SharedArray {
            base: GlobalPtr::new(0, 0),
            len,
            ranks,
            map,
            capacity: capacity(map, len, ranks),
        }
    }

    proptest! {
        #[test]
        fn places_match_dealing_blocks(len in 0usize..200, ranks in 1usize..9, b in 1usize..12) {
            for (d, block) in [
                (Distribution::BlockCyclic(b), b),
                (Distribution::Cyclic, 1),
                (Distribution::Blocked, len.div_ceil(ranks).max(1)),
                (Distribution::Indefinite, len.max(1)),
            ] {
                let a = array(len, ranks, d);
                let want = if d == Distribution::Indefinite {
                    (0..len).map(|i| (0, i)).collect()
                } else {
                    dealt(len, block, ranks)
                };
                let got: Vec<_> = (0..len).map(|i| a.place(i)).collect();
                prop_assert_eq!(&got, &want, "{:?}", d);
                for r in 0..ranks {
                    let held = want.iter().filter(|p| p.0 == r).count();
                    prop_assert_eq!(a.local_len(r), held, "{:?} rank {}", d, r);
                    let top = want.iter().filter(|p| p.0 == r).map(|p| p.1 + 1).max().unwrap_or(0);
                    prop_assert!(top <= a.capacity);
                }
            }
        }

        #[test]
        fn pieces_cover_a_range_once(len in 1usize..120, ranks in 1usize..6, b in 1usize..9, s in 0usize..120, n in 0usize..120) {
            let a = array(len, ranks, Distribution::BlockCyclic(b));
            let (s, e) = (s.min(len), (s + n).min(len));
            let mut hits = vec![0u32; e - s];
            let mut hit = |index: usize, ptr: GlobalPtr<u64>, local: usize| {
                let (r, o) = a.place(s + index);
                assert_eq!((ptr.rank(), ptr.offset() as usize / 8 + local), (r, o));
                hits[index] += 1;
            };
            for piece in a.pieces(s..e).unwrap() {
                match piece {
                    Piece::Run { at, index, len } => (0..len).for_each(|j| hit(index + j, at, j)),
                    Piece::Blocks { at, index, count, block } => {
                        for c in 0..count {
                            for j in 0..block {
                                hit(index + c * ranks * block + j, at, c * block + j);
                            }
                        }
                    }
                }
            }
            prop_assert!(hits.iter().all(|&h| h == 1), "{:?}", hits);
        }
    }

    #[test]
    fn bad_arguments_are_named() {
        let e = map_of(Distribution::BlockCyclic(0), 4, 2).unwrap_err();
        assert!(e.to_string().contains("block size 0"), "{e}");
        let a = array(8, 2, Distribution::Cyclic);
        let e = a.address(8).unwrap_err();
        assert!(
            e.to_string()
                .contains("elements 8..9 are outside the array's 8 elements"),
            "{e}"
        );
        let e = a.with_distribution(9, Distribution::Blocked).unwrap_err();
        assert!(
            e.to_string()
                .contains("need 5 per rank, but 4 were reserved"),
            "{e}"
        );
    }
}
