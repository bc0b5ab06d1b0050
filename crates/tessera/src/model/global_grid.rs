//! Grids in the global address space (Titanium's global arrays), and one-sided copies of
//! the intersection of two grids wherever they live.
//!
//! A [`GlobalGrid`] owns a grid's storage in this rank's segment. Its [`GridRef`] is a
//! plain-old-data reference (a global pointer and an index mapping) that any rank may hold:
//! send it in a put, or collect everyone's with [`GlobalGrid::exchange`] (Titanium's
//! `blocks.exchange(myBlock)`), which is how distributed grids are built. A reference can
//! be restricted, translated, shrunk and sliced like a local view, without communicating.
//!
//! [`GridRef::copy_from`] copies exactly the intersection of its domain with a source's,
//! for any source: a local view, or another reference on any rank. It moves one strided
//! transfer, so a contiguous run is one copy, never one element at a time
//! ([`Context::put`] of a [`Strided`] shape, [`Context::copy_strided`]). [`GridViewMut::copy_from_ref`]
//! is the reverse direction (remote → local view).
//!
//! Each large grid's storage starts a quarter page further into a 4 KiB page than the
//! large grid made before it (`page_stagger`), so that grids made one after another, which
//! a stencil sweeps together (its input, its output, its right-hand side), start at
//! different places in a page. Where they started 64 bytes apart, stores into one grid's
//! row were followed by loads from the others' rows at nearly the same address modulo
//! 4 KiB, which the processor takes for possibly the same address and holds until the
//! store is done: MG class C on 2 ranks spent a fifth of its time there (PERFORMANCE.md,
//! "Grids a quarter page apart").
//!
//! Every access goes through the core's checked transfers: a stale or forged reference
//! gets an error (outside a segment, no such rank), never undefined behaviour. This module
//! never touches another rank's memory any other way.
//!
//! ```
//! use tessera::{GlobalGrid, Point, RectDomain, Team};
//! tessera::Job::threads(2).run(|ctx| {
//!     let me = ctx.rank() as i64;
//!     // Rank r owns columns 4r..4r+3 of an 4×8 grid, with one ghost column each side.
//!     let interior = RectDomain::new(Point([0, 4 * me]), Point([3, 4 * me + 3]));
//!     let mine = GlobalGrid::from_fn(ctx, interior.grow(1), |p| (10 * p[0] + p[1]) as f64)?;
//!     let blocks = mine.exchange(&Team::world(ctx)?)?;
//!     ctx.barrier()?;
//!     // Pull the neighbour's edge column into our ghost column: copy the intersection of
//!     // our storage with the other block's interior.
//!     let other = blocks[1 - ctx.rank()];
//!     let moved = mine.reference().copy_from(ctx, &other.restrict(&other.domain().shrink(1)))?;
//!     assert_eq!(moved, 4);
//!     ctx.barrier()?;
//!     Ok(())
//! }).unwrap();
//! ```

use crate::coll::Allgather;
use crate::error::CoreError;
use bytemuck::{Pod, Zeroable};

use crate::core::alloc::{ALLOC_ALIGN, PAGE};
use crate::core::Context;
use crate::model::domain::{Point, RectDomain};
use crate::model::grid::{layout_methods, GridView, GridViewMut, Layout};
use crate::model::team::Team;
use crate::{Blocking, GlobalPtr, Handle, Result, Strided, StridedMut};

/// A reference to a grid stored in some rank's segment: where the storage is and how the
/// visible points map onto it. Plain old data (copy it, put it, gather it); only an
/// address, so every access is checked.
///
/// ```no_run
/// # fn f(ctx: &tessera::Context, r: tessera::GridRef<f64, 3>) -> tessera::Result<()> {
/// use tessera::Point;
/// let face = r.restrict(&r.domain().side_face(0, tessera::Side::Low, 1));
/// let x = face.get(ctx, face.domain().lo())?;
/// # Ok(()) }
/// ```
#[repr(C)]
pub struct GridRef<T, const N: usize> {
    storage: GlobalPtr<T>,
    layout: Layout<N>,
}

impl<T, const N: usize> Clone for GridRef<T, N> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T, const N: usize> Copy for GridRef<T, N> {}

impl<T, const N: usize> std::fmt::Debug for GridRef<T, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GridRef(rank {}, {})",
            self.storage.rank(),
            self.layout.domain()
        )
    }
}

// SAFETY: GridRef is repr(C): a GlobalPtr (16 bytes of integers, itself Pod, align 8)
// followed by a repr(C) Layout made only of i64 arrays and one i64 (align 8), so there is no
// padding and every bit pattern is a valid value. A pattern that means nothing (zero
// strides, a foreign offset) is caught when it is used: index arithmetic panics on a zero
// stride, and every memory access goes through the core's bounds checks.
unsafe impl<T: 'static, const N: usize> Zeroable for GridRef<T, N> {}
// SAFETY: see Zeroable; the type is Copy and 'static.
unsafe impl<T: 'static, const N: usize> Pod for GridRef<T, N> {}

layout_methods!(GridRef, storage, []);

impl<T: Pod, const N: usize> GridRef<T, N> {
    /// A reference to row-major storage for `domain` at `storage`.
    pub(crate) fn packed(storage: GlobalPtr<T>, domain: RectDomain<N>) -> Self {
        GridRef {
            storage,
            layout: Layout::packed(domain),
        }
    }

    /// The rank whose segment holds the storage.
    pub fn rank(&self) -> usize {
        self.storage.rank()
    }

    /// The strided box of `region` (a subdomain of this reference's domain): its first
    /// element's address, the strides and the counts.
    fn region(&self, region: &RectDomain<N>) -> (GlobalPtr<T>, [usize; N], [usize; N]) {
        let (offset, strides, counts) = self.layout.strided(region);
        (self.storage.add(offset), strides, counts)
    }

    fn element(&self, p: Point<N>) -> Result<GlobalPtr<T>> {
        if !self.layout.domain().contains(p) {
            return Err(CoreError::BadArgument {
                call: "GridRef",
                argument: "point",
                why: format!(
                    "point {p} is outside the referenced grid's domain {}",
                    self.layout.domain()
                ),
            }
            .into());
        }
        Ok(self.storage.add(self.layout.offset_of(p)))
    }

    /// Read one element (one get).
    pub fn get(&self, ctx: &Context, p: Point<N>) -> Result<T> {
        ctx.get_value(self.element(p)?)
    }

    /// Write one element (one put).
    pub fn put(&self, ctx: &Context, p: Point<N>, value: T) -> Result<()> {
        ctx.put(self.element(p)?, &[value], Blocking)
    }

    /// Copy the elements of `src` at the points both domains share into this grid, wherever
    /// either lives; returns how many. One strided transfer: contiguous runs move as one
    /// copy each.
    pub fn copy_from(&self, ctx: &Context, src: &impl GridSource<T, N>) -> Result<usize> {
        let src = src.source();
        let common = self.layout.domain().intersect(&src.layout.domain());
        if common.is_empty() {
            return Ok(0);
        }
        let (dst, dst_strides, counts) = self.region(&common);
        let (offset, src_strides, _) = src.layout.strided(&common);
        match src.place {
            Place::Local(data) => ctx.put(
                dst,
                Strided {
                    local: &data[offset..],
                    local_strides: &src_strides,
                    remote_strides: &dst_strides,
                    counts: &counts,
                },
                Blocking,
            )?,
            Place::Global(storage) => ctx.copy_strided(
                dst,
                &dst_strides,
                storage.add(offset),
                &src_strides,
                &counts,
            )?,
        }
        Ok(common.len())
    }

    /// Start a [`GridRef::copy_from`]; the source stays borrowed until the handle completes.
    pub fn copy_from_nb<'a, S: GridSource<T, N>>(
        &self,
        ctx: &'a Context,
        src: &'a S,
    ) -> Result<(usize, Handle<'a>)> {
        // Strided transfers complete on issue on the conduits built so far; the handle is
        // where a conduit with asynchronous transfers would complete them.
        let moved = self.copy_from(ctx, src)?;
        Ok((moved, Handle::completed(ctx)))
    }
}

impl<T: Pod, const N: usize> GridViewMut<'_, T, N> {
    /// Copy the elements of the (possibly remote) grid `src` at the points both domains
    /// share into this view; returns how many. One strided get.
    pub fn copy_from_ref(&mut self, ctx: &Context, src: &GridRef<T, N>) -> Result<usize> {
        let common = self.domain().intersect(&src.domain());
        if common.is_empty() {
            return Ok(0);
        }
        let (from, src_strides, counts) = src.region(&common);
        let (offset, dst_strides, _) = self.layout().strided(&common);
        ctx.get(
            from,
            StridedMut {
                local: &mut self.data_mut()[offset..],
                local_strides: &dst_strides,
                remote_strides: &src_strides,
                counts: &counts,
            },
            Blocking,
        )?;
        Ok(common.len())
    }
}

/// Where a copy's source elements are.
#[doc(hidden)]
pub enum Place<'a, T> {
    Local(&'a [T]),
    Global(GlobalPtr<T>),
}

/// A copy source: its index mapping and where its storage is.
#[doc(hidden)]
pub struct Source<'a, T, const N: usize> {
    layout: Layout<N>,
    place: Place<'a, T>,
}

/// Anything [`GridRef::copy_from`] can copy from: local views and references to grids on
/// any rank.
pub trait GridSource<T, const N: usize> {
    /// The source's index mapping and storage.
    #[doc(hidden)]
    fn source(&self) -> Source<'_, T, N>;
}

impl<T, const N: usize> GridSource<T, N> for GridView<'_, T, N> {
    fn source(&self) -> Source<'_, T, N> {
        Source {
            layout: self.layout(),
            place: Place::Local(self.data()),
        }
    }
}

impl<T, const N: usize> GridSource<T, N> for GridRef<T, N> {
    fn source(&self) -> Source<'_, T, N> {
        Source {
            layout: self.layout,
            place: Place::Global(self.storage),
        }
    }
}

/// A grid whose storage is in this rank's segment, so other ranks can reach it through its
/// [`GridRef`]. Freed when dropped (references to it then dangle: accesses through them
/// are still checked, but read whatever the segment holds).
pub struct GlobalGrid<'ctx, T: Pod, const N: usize> {
    ctx: &'ctx Context,
    reference: GridRef<T, N>,
    /// The block allocated for it, which the storage starts in (at its start for a small
    /// grid, up to a page past it for a large one).
    block: GlobalPtr<T>,
}

/// Grids of at least this many bytes are staggered within a page ([`page_stagger`]);
/// smaller ones stay in the cache whatever their place.
const STAGGER_FROM: usize = 64 << 10;

/// Where in a 4 KiB page the next large grid of this process starts, in bytes: 0, 1024,
/// 2048, 3072, 0, … in the order the grids are made. Quarter pages apart, two grids
/// swept side by side keep their accesses at least 1 KiB apart modulo a page, more than
/// the span of stores a core has in flight. A count shared by the process (the threads
/// conduit's ranks share it too): which grid gets which quarter only needs to differ
/// between grids made one after another.
fn page_stagger() -> usize {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static MADE: AtomicUsize = AtomicUsize::new(0);
    // Relaxed: the count only spreads grids; no other memory is ordered by it.
    MADE.fetch_add(1, Ordering::Relaxed) % 4 * (PAGE / 4)
}

/// Where in a page a grid of `len` elements of `T` is to start (a [`page_stagger`] step),
/// and how many elements to allocate so that it fits past that place in its block: a page
/// more. `None` for a small grid, and for an element size that does not divide the
/// allocator's 64-byte alignment (the skip would not be whole elements). Segments start on
/// a page in every conduit that maps them, so a place in the segment is a place in a page.
fn staggered<T>(len: usize) -> (Option<usize>, usize) {
    let size = size_of::<T>();
    if !ALLOC_ALIGN.is_multiple_of(size) || len.saturating_mul(size) < STAGGER_FROM {
        return (None, len);
    }
    (Some(page_stagger()), len + PAGE / size)
}

impl<'ctx, T: Pod, const N: usize> GlobalGrid<'ctx, T, N> {
    /// A grid over `domain` in this rank's segment, element `p` set to `f(p)`.
    pub fn from_fn(
        ctx: &'ctx Context,
        domain: RectDomain<N>,
        mut f: impl FnMut(Point<N>) -> T,
    ) -> Result<Self> {
        let (place, allocate) = staggered::<T>(domain.len());
        let block = ctx.alloc_local::<T>(allocate)?;
        let storage = match place {
            // The block starts on the allocator's alignment, a multiple of the element
            // size, as is the quarter page: the skip is whole elements.
            Some(at) => {
                let skip = (at + PAGE - block.offset() as usize % PAGE) % PAGE;
                block.add(skip / size_of::<T>())
            }
            None => block,
        };
        // SAFETY: the block was just allocated and its address has not been given to
        // anyone, so no other rank can access it while this slice lives; the storage's
        // `domain.len()` elements lie inside it.
        let data = unsafe { ctx.local_slice_mut(storage, domain.len())? }
            .expect("a rank's own segment is always mapped");
        for (e, p) in data.iter_mut().zip(domain.iter()) {
            *e = f(p);
        }
        Ok(GlobalGrid {
            ctx,
            reference: GridRef::packed(storage, domain),
            block,
        })
    }

    /// A grid over `domain` with every element `value`.
    pub fn filled(ctx: &'ctx Context, domain: RectDomain<N>, value: T) -> Result<Self> {
        Self::from_fn(ctx, domain, |_| value)
    }

    /// The domain of the whole grid.
    pub fn domain(&self) -> RectDomain<N> {
        self.reference.domain()
    }

    /// A reference other ranks can use.
    pub fn reference(&self) -> GridRef<T, N> {
        self.reference
    }

    /// Every rank of `team` contributes its grid's reference and receives all of them, in
    /// team rank order (collective over `team`).
    pub fn exchange(&self, team: &Team<'_>) -> Result<Vec<GridRef<T, N>>>
    where
        T: 'static,
    {
        let mut all = vec![GridRef::zeroed(); team.size()];
        team.run(Allgather::new(&[self.reference]).to(&mut all), Blocking)?;
        Ok(all)
    }

    fn data(&self) -> *mut T {
        self.ctx
            .local_ptr(self.reference.storage, self.domain().len())
            .expect("the grid's own storage is a valid part of the segment")
            .expect("a rank's own segment is always mapped")
    }

    /// A local view of the grid's elements.
    ///
    /// # Safety
    /// While the view lives no rank may write to this grid through a [`GridRef`] (the
    /// program's synchronisation must guarantee that every such write has completed and
    /// none starts before the view is dropped).
    pub unsafe fn view(&self) -> GridView<'_, T, N> {
        // SAFETY: data() is this grid's aligned, in-bounds, mapped storage of exactly
        // domain().len() elements; the absence of writers is the caller's contract.
        let data = unsafe { std::slice::from_raw_parts(self.data(), self.domain().len()) };
        GridView::from_parts(data, self.reference.layout)
    }

    /// A mutable local view of the grid's elements.
    ///
    /// # Safety
    /// While the view lives no rank may read or write this grid through a [`GridRef`].
    pub unsafe fn view_mut(&mut self) -> GridViewMut<'_, T, N> {
        // SAFETY: as in view(); exclusivity against other ranks is the caller's contract,
        // and `&mut self` excludes other views on this rank.
        let data = unsafe { std::slice::from_raw_parts_mut(self.data(), self.domain().len()) };
        GridViewMut::from_parts(data, self.reference.layout)
    }
}

impl<T: Pod, const N: usize> Drop for GlobalGrid<'_, T, N> {
    fn drop(&mut self) {
        // Freeing our own block cannot fail; if it did, leaking it is the safe outcome.
        let _ = self.ctx.free_local(self.block);
    }
}
