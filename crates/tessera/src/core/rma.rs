//! One-sided put and get: the paths behind [`Context::put`] and [`Context::get`].
//!
//! How a caller learns that a transfer is complete is a value it passes (see
//! `core::completion`, GASNet's three styles plus the signalling put): blocking, an
//! explicit [`Handle`] that borrows the local buffer, or implicit (complete at
//! [`Context::sync_nbi`]; a put copies its source before returning, an implicit get lands
//! in segment memory).
//!
//! Shapes: bulk slices, strided (N-d counts and strides) and indexed (lists of offsets).
//! Strided and indexed transfers move one contiguous run per copy, never one element at a
//! time when the layout has runs.
//!
//! On a mapped peer every transfer is a `memmove` into or out of the peer's segment (no
//! lock, no system call, no allocation, no message): that is what makes same-node puts as
//! fast as memcpy. On an unmapped peer it goes through the conduit. This module is the one
//! place that decides which; nothing above it may decide again.

use crate::error::CoreError;
use bytemuck::Pod;

use super::stats::Traffic;
use super::{Context, GlobalPtr, Target};
use crate::conduit::{Finish, GetInto, Transfer, Which};
use crate::{Blocking, Result};

/// Completion handle of a nonblocking transfer. It borrows the local buffer of the
/// transfer, so the buffer cannot be touched before completion. Dropping a handle waits.
///
/// ```no_run
/// # fn f(ctx: &tessera::Context, dst: tessera::GlobalPtr<f64>) -> tessera::Result<()> {
/// let data = vec![1.0; 1024];
/// let h = ctx.put(dst, &data, tessera::Nonblocking)?;
/// // ... compute while the transfer proceeds ...
/// h.wait()?;
/// # Ok(()) }
/// ```
#[must_use = "a transfer is only known complete once its handle is waited on"]
pub struct Handle<'a> {
    ctx: &'a Context,
    complete: bool,
    /// The conduit's transfer still in flight (unmapped peers).
    transfer: Option<u64>,
    /// Where a get's bytes land when its transfer completes (also what ties the handle to
    /// the borrowed buffer's lifetime).
    landing: Option<&'a mut [u8]>,
}

impl<'a> Handle<'a> {
    pub(crate) fn completed(ctx: &'a Context) -> Self {
        Handle {
            ctx,
            complete: true,
            transfer: None,
            landing: None,
        }
    }

    /// A handle on the conduit's transfer `transfer` (complete already when `None`); a
    /// get's bytes land in `landing`.
    fn pending(ctx: &'a Context, transfer: Option<u64>, landing: Option<&'a mut [u8]>) -> Self {
        Handle {
            ctx,
            complete: transfer.is_none(),
            transfer,
            landing,
        }
    }

    /// Block until the transfer is complete.
    #[inline]
    pub fn wait(mut self) -> Result<()> {
        self.finish()
    }

    /// Whether the transfer is complete, making progress once if it is not.
    pub fn test(&mut self) -> Result<bool> {
        if !self.complete {
            self.ctx.poll()?;
            if let Some(id) = self.transfer {
                let landing = self.landing.as_deref_mut().unwrap_or_default();
                if self.ctx.transfer_complete(Which::One(id), false, landing)? {
                    self.transfer = None;
                    self.complete = true;
                }
            }
        }
        Ok(self.complete)
    }

    #[inline]
    fn finish(&mut self) -> Result<()> {
        // Transfers to mapped peers complete before their handle exists; a conduit's
        // transfer to an unmapped peer completes here.
        if let Some(id) = self.transfer.take() {
            let landing = self.landing.as_deref_mut().unwrap_or_default();
            self.ctx.transfer_complete(Which::One(id), true, landing)?;
        }
        self.complete = true;
        Ok(())
    }
}

impl Drop for Handle<'_> {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// A checked N-d strided shape: dimensions with their counts and the strides (in elements)
/// on both sides, normalised so that each contiguous run is one copy.
struct Shape {
    /// (count, stride on side a, stride on side b), slowest dimension first, innermost run
    /// excluded.
    outer: Vec<(usize, usize, usize)>,
    /// Elements per contiguous run.
    run: usize,
    /// Elements spanned on each side (0 when the shape is empty).
    span_a: usize,
    span_b: usize,
}

impl Shape {
    /// Elements the shape moves.
    fn elements(&self) -> usize {
        if self.span_a == 0 {
            return 0;
        }
        self.run * self.outer.iter().map(|&(n, _, _)| n).product::<usize>()
    }

    fn new(counts: &[usize], a: &[usize], b: &[usize]) -> Result<Shape> {
        if a.len() != counts.len() || b.len() != counts.len() {
            return Err(CoreError::BadArgument { call: "strided transfer", argument: "strides", why: format!(
                "strided transfer: {} counts but {} and {} strides; give one stride per dimension on each side",
                counts.len(),
                a.len(),
                b.len()
            ) }.into());
        }
        let empty = counts.contains(&0);
        let span = |s: &[usize]| -> usize {
            if empty {
                0
            } else {
                1 + counts
                    .iter()
                    .zip(s)
                    .map(|(c, s)| (c - 1) * s)
                    .sum::<usize>()
            }
        };
        let (span_a, span_b) = (span(a), span(b));
        // Drop unit dimensions, then merge a dimension into its outer neighbour when both
        // sides are contiguous across the boundary.
        let mut dims: Vec<(usize, usize, usize)> = Vec::new();
        for ((&c, &sa), &sb) in counts.iter().zip(a).zip(b) {
            if c == 1 {
                continue;
            }
            dims.push((c, sa, sb));
        }
        let mut merged: Vec<(usize, usize, usize)> = Vec::new();
        for (c, sa, sb) in dims.into_iter().rev() {
            match merged.last_mut() {
                Some(inner) if sa == inner.0 * inner.1 && sb == inner.0 * inner.2 => inner.0 *= c,
                _ => merged.push((c, sa, sb)),
            }
        }
        merged.reverse();
        let run = match merged.last() {
            Some(&(c, 1, 1)) => {
                merged.pop();
                c
            }
            _ => 1,
        };
        Ok(Shape {
            outer: merged,
            run: if empty { 0 } else { run },
            span_a,
            span_b,
        })
    }

    /// Call `f(offset_a, offset_b)` (in elements) for the start of every run. The
    /// innermost outer dimension is a tight loop (a face of single elements is thousands of
    /// runs).
    fn for_each_run(&self, mut f: impl FnMut(usize, usize) -> Result<()>) -> Result<()> {
        if self.run == 0 {
            return Ok(());
        }
        let Some((&(count, step_a, step_b), rest)) = self.outer.split_last() else {
            return f(0, 0);
        };
        let mut index = vec![0usize; rest.len()];
        loop {
            let (mut oa, mut ob) = (0, 0);
            for (i, &(_, sa, sb)) in index.iter().zip(rest) {
                oa += i * sa;
                ob += i * sb;
            }
            for _ in 0..count {
                f(oa, ob)?;
                oa += step_a;
                ob += step_b;
            }
            // Odometer over the other outer dimensions, fastest last.
            let mut d = rest.len();
            loop {
                if d == 0 {
                    return Ok(());
                }
                d -= 1;
                index[d] += 1;
                if index[d] < rest[d].0 {
                    break;
                }
                index[d] = 0;
            }
        }
    }

    /// The same shape with sides a and b swapped.
    fn flipped(&self) -> Shape {
        Shape {
            outer: self.outer.iter().map(|&(c, a, b)| (c, b, a)).collect(),
            run: self.run,
            span_a: self.span_b,
            span_b: self.span_a,
        }
    }

    /// Copy every run from side b (`src`) to side a (`dst`) by direct loads and stores: a
    /// single-element run is one typed move, a longer one a `memmove`.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `span_a` elements and `src` for reads of `span_b`
    /// elements, both aligned for `T`, and nothing else may access those elements during
    /// the call except through other raw copies (the segment-sharing model of the core).
    unsafe fn copy_runs<T: Pod>(&self, dst: *mut T, src: *const T) {
        let run = self.run;
        let _ = self.for_each_run(|oa, ob| {
            // SAFETY: every run of the shape lies inside its side's span (Shape::new computes
            // the spans from the same counts and strides), and the caller vouches for the
            // spans. A single element is read whole before it is written, and ptr::copy
            // tolerates overlap, so a source inside the destination span is fine too.
            unsafe {
                if run == 1 {
                    dst.add(oa).write(src.add(ob).read());
                } else {
                    super::copy::copy(src.add(ob), dst.add(oa), run);
                }
            }
            Ok(())
        });
    }
}

impl Context {
    /// Store `src` at the checked target.
    pub(crate) fn store_bytes(&self, target: Target, src: &[u8]) -> Result<()> {
        match target {
            // SAFETY: `target` came from Context::target for src.len() bytes, so the
            // destination is mapped and in bounds; `copy` tolerates overlap (the source may
            // itself live in a segment).
            Target::Direct(p) => unsafe {
                super::copy::copy_bytes(src.as_ptr(), p.as_ptr(), src.len())
            },
            Target::Remote { rank, offset } => self.store_remote(rank, offset, src)?,
        }
        Ok(())
    }

    /// [`Context::store_bytes`] to an unmapped peer: kept out of line, so that the mapped
    /// path stays a check and a copy.
    #[cold]
    #[inline(never)]
    fn store_remote(&self, rank: usize, offset: usize, src: &[u8]) -> Result<()> {
        self.complete_implicit()?;
        self.transfer(Transfer::Put { rank, offset, src }, Finish::Now)
            .map(drop)
    }

    /// Load `dst.len()` bytes from the checked target.
    pub(crate) fn load_bytes(&self, target: Target, dst: &mut [u8]) -> Result<()> {
        match target {
            // SAFETY: as in store_bytes, for dst.len() bytes.
            Target::Direct(p) => unsafe {
                super::copy::copy_bytes(p.as_ptr(), dst.as_mut_ptr(), dst.len())
            },
            Target::Remote { rank, offset } => self.load_remote(rank, offset, dst)?,
        }
        Ok(())
    }

    /// [`Context::load_bytes`] from an unmapped peer (out of line, as `store_remote`).
    #[cold]
    #[inline(never)]
    fn load_remote(&self, rank: usize, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.complete_implicit()?;
        let len = dst.len();
        let into = GetInto::Buffer(dst);
        self.transfer(
            Transfer::Get {
                rank,
                offset,
                len,
                into,
            },
            Finish::Now,
        )
        .map(drop)
    }

    fn target_of<T: Pod>(&self, ptr: GlobalPtr<T>, count: usize) -> Result<Target> {
        self.target(
            ptr,
            std::mem::size_of::<T>() * count,
            std::mem::align_of::<T>(),
        )
    }

    /// The blocking contiguous put ([`Context::put`] with [`Blocking`](super::Blocking)).
    #[inline(always)]
    pub(super) fn put_blocking<T: Pod>(&self, dst: GlobalPtr<T>, src: &[T]) -> Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(src);
        // Matched in place rather than through `?` and `store_bytes`: the mapped path then
        // keeps the address in a register (a copy of the checked target through the stack
        // had cost a failed store-to-load forwarding, 5 ns of a 5 ns put).
        match self.target_of(dst, src.len()) {
            Ok(Target::Direct(p)) => {
                self.count(Traffic::Put, dst.rank(), bytes.len());
                match src {
                    // One element is one typed store, not a call to copy bytes (where the
                    // slice is written as one element its length is known, so the choice
                    // costs nothing).
                    // SAFETY: `target_of` checked the destination for one T: mapped, in
                    // bounds and aligned for T.
                    [value] => unsafe { p.cast::<T>().as_ptr().write(*value) },
                    // SAFETY: `target_of` checked the destination for src.len() elements:
                    // mapped and in bounds; `copy` tolerates overlap (the source may be in a
                    // segment).
                    _ => unsafe {
                        super::copy::copy_bytes(bytes.as_ptr(), p.as_ptr(), bytes.len())
                    },
                }
                Ok(())
            }
            Ok(remote) => {
                self.count(Traffic::Put, dst.rank(), bytes.len());
                self.store_bytes(remote, bytes)
            }
            Err(e) => Err(e),
        }
    }

    /// The blocking contiguous get.
    #[inline]
    pub(super) fn get_blocking<T: Pod>(&self, src: GlobalPtr<T>, dst: &mut [T]) -> Result<()> {
        let (count, len) = (dst.len(), std::mem::size_of_val(dst));
        // Matched in place, as in `put_blocking`.
        match self.target_of(src, count) {
            Ok(Target::Direct(p)) => {
                self.count(Traffic::Get, src.rank(), len);
                match dst {
                    // One element is one typed load, as in `put_blocking`.
                    // SAFETY: `target_of` checked the source for one T: mapped, in bounds
                    // and aligned for T.
                    [value] => *value = unsafe { p.cast::<T>().as_ptr().read() },
                    // SAFETY: as in put_blocking, for the bytes read.
                    _ => unsafe {
                        super::copy::copy_bytes(p.as_ptr(), dst.as_mut_ptr().cast(), len)
                    },
                }
                Ok(())
            }
            Ok(remote) => {
                self.count(Traffic::Get, src.rank(), len);
                self.load_bytes(remote, bytemuck::cast_slice_mut(dst))
            }
            Err(e) => Err(e),
        }
    }

    /// Get one value (a blocking get of one element, returning it).
    ///
    /// ```
    /// use tessera::{Blocking, Job};
    /// Job::threads(2).run(|ctx| {
    ///     let word = ctx.alloc_collective::<u64>(1)?;
    ///     ctx.put(word, &[ctx.rank() as u64 + 10], Blocking)?;
    ///     ctx.barrier()?;
    ///     assert_eq!(ctx.get_value(word.on(1))?, 11);
    ///     ctx.barrier()?;
    ///     Ok(())
    /// }).unwrap();
    /// ```
    #[inline]
    pub fn get_value<T: Pod>(&self, src: GlobalPtr<T>) -> Result<T> {
        let mut value = T::zeroed();
        self.get_blocking(src, std::slice::from_mut(&mut value))?;
        Ok(value)
    }

    /// Start a put; `src` stays borrowed until the handle completes.
    #[inline]
    pub(super) fn put_handle<'a, T: Pod>(
        &'a self,
        dst: GlobalPtr<T>,
        src: &'a [T],
    ) -> Result<Handle<'a>> {
        let target = self.target_of(dst, src.len())?;
        self.count(Traffic::Put, dst.rank(), std::mem::size_of_val(src));
        match target {
            Target::Remote { rank, offset } => {
                let src = bytemuck::cast_slice(src);
                let transfer =
                    self.transfer(Transfer::Put { rank, offset, src }, Finish::Ticket)?;
                Ok(Handle::pending(self, transfer, None))
            }
            direct => {
                self.store_bytes(direct, bytemuck::cast_slice(src))?;
                Ok(Handle::completed(self))
            }
        }
    }

    /// Start a get; `dst` stays borrowed until the handle completes.
    #[inline]
    pub(super) fn get_handle<'a, T: Pod>(
        &'a self,
        src: GlobalPtr<T>,
        dst: &'a mut [T],
    ) -> Result<Handle<'a>> {
        let target = self.target_of(src, dst.len())?;
        self.count(Traffic::Get, src.rank(), std::mem::size_of_val(dst));
        match target {
            Target::Remote { rank, offset } => {
                let landing: &'a mut [u8] = bytemuck::cast_slice_mut(dst);
                let len = landing.len();
                let into = GetInto::Buffer(&mut *landing);
                let transfer = self.transfer(
                    Transfer::Get {
                        rank,
                        offset,
                        len,
                        into,
                    },
                    Finish::Ticket,
                )?;
                Ok(Handle::pending(self, transfer, Some(landing)))
            }
            direct => {
                self.load_bytes(direct, bytemuck::cast_slice_mut(dst))?;
                Ok(Handle::completed(self))
            }
        }
    }

    /// Start a put completed by the next [`Context::sync_nbi`]. `src` may be reused as
    /// soon as this returns.
    pub(super) fn put_implicit<T: Pod>(&self, dst: GlobalPtr<T>, src: &[T]) -> Result<()> {
        let target = self.target_of(dst, src.len())?;
        self.count(Traffic::Put, dst.rank(), std::mem::size_of_val(src));
        match target {
            Target::Remote { rank, offset } => {
                let src = bytemuck::cast_slice(src);
                self.transfer(Transfer::Put { rank, offset, src }, Finish::Quiet)
                    .map(drop)
            }
            direct => self.store_bytes(direct, bytemuck::cast_slice(src)),
        }
    }

    /// Start a get of `count` elements from `src` into `dst`, which must be in this rank's
    /// own segment; complete at the next [`Context::sync_nbi`].
    pub(super) fn get_implicit<T: Pod>(
        &self,
        src: GlobalPtr<T>,
        dst: GlobalPtr<T>,
        count: usize,
    ) -> Result<()> {
        if dst.rank() != self.rank() {
            return Err(crate::error::CoreError::NotOwner {
                what: "the destination of an implicit get",
                owner: dst.rank(),
                caller: self.rank(),
            }
            .into());
        }
        let from = self.target_of(src, count)?;
        let to = self.target_of(dst, count)?;
        self.count(Traffic::Get, src.rank(), count * std::mem::size_of::<T>());
        match (from, to) {
            (Target::Direct(s), Target::Direct(d)) => {
                // SAFETY: both ranges were checked for count elements and are mapped.
                unsafe {
                    super::copy::copy_bytes(
                        s.as_ptr(),
                        d.as_ptr(),
                        count * std::mem::size_of::<T>(),
                    )
                };
                Ok(())
            }
            (Target::Remote { rank, offset }, Target::Direct(_)) => {
                let len = count * std::mem::size_of::<T>();
                let into = GetInto::Segment(dst.offset() as usize);
                self.transfer(
                    Transfer::Get {
                        rank,
                        offset,
                        len,
                        into,
                    },
                    Finish::Quiet,
                )
                .map(drop)
            }
            (_, Target::Remote { .. }) => Err(self
                .conduit()
                .unsupported("an implicit get into an unmapped segment")
                .into()),
        }
    }

    /// Complete every implicit (`*_nbi`) operation this rank has started.
    pub fn sync_nbi(&self) -> Result<()> {
        self.complete_signals()
    }

    /// Complete the conduit's implicit transfers: every ordering operation (signals,
    /// remote atomics, blocking transfers to unmapped peers, barriers) does this first, so
    /// they order `*_nbi` transfers started before them.
    pub(crate) fn complete_implicit(&self) -> Result<()> {
        self.transfer_complete(Which::All, true, &mut []).map(drop)
    }

    /// Strided put ([`Strided`](super::Strided)): for every index `i` of the N-d box
    /// `counts` (slowest dimension first), copy `src[Σ i_d·src_strides[d]]` to
    /// `dst + Σ i_d·dst_strides[d]`. Strides and counts are in elements. Contiguous runs move
    /// as one copy each.
    pub(super) fn put_strided<T: Pod>(
        &self,
        dst: GlobalPtr<T>,
        dst_strides: &[usize],
        src: &[T],
        src_strides: &[usize],
        counts: &[usize],
    ) -> Result<()> {
        let (shape, base) = self.plan_strided(
            dst,
            dst_strides,
            src.len(),
            src_strides,
            counts,
            "put reads",
        )?;
        let bytes = shape.elements() * std::mem::size_of::<T>();
        self.count(Traffic::StridedPut, dst.rank(), bytes);
        if let Target::Direct(p) = base {
            // SAFETY: plan_strided checked the remote span (in bounds, mapped, aligned) and
            // that the local span fits in `src`.
            unsafe { shape.copy_runs(p.as_ptr() as *mut T, src.as_ptr()) };
            return Ok(());
        }
        let size = std::mem::size_of::<T>();
        shape.for_each_run(|oa, ob| {
            let bytes = bytemuck::cast_slice(&src[ob..ob + shape.run]);
            self.store_bytes(offset_target(base, oa * size), bytes)
        })
    }

    /// Strided get: the mirror of `put_strided`.
    pub(super) fn get_strided<T: Pod>(
        &self,
        src: GlobalPtr<T>,
        src_strides: &[usize],
        dst: &mut [T],
        dst_strides: &[usize],
        counts: &[usize],
    ) -> Result<()> {
        let (shape, base) = self.plan_strided(
            src,
            src_strides,
            dst.len(),
            dst_strides,
            counts,
            "get writes",
        )?;
        let bytes = shape.elements() * std::mem::size_of::<T>();
        self.count(Traffic::StridedGet, src.rank(), bytes);
        if let Target::Direct(p) = base {
            // SAFETY: as in put_strided, with the sides swapped: `dst` is exclusively
            // borrowed and holds the local span.
            unsafe {
                shape
                    .flipped()
                    .copy_runs(dst.as_mut_ptr(), p.as_ptr() as *const T)
            };
            return Ok(());
        }
        let size = std::mem::size_of::<T>();
        shape.for_each_run(|oa, ob| {
            let bytes = bytemuck::cast_slice_mut(&mut dst[ob..ob + shape.run]);
            self.load_bytes(offset_target(base, oa * size), bytes)
        })
    }

    /// Strided copy between two global addresses (UPC's shared-to-shared `upc_memcpy`,
    /// N-dimensional): for every index `i` of the box `counts`, copy
    /// `src + Σ i_d·src_strides[d]` to `dst + Σ i_d·dst_strides[d]`. Either side may be on any
    /// rank, this one included. When both are mapped here, each contiguous run is one
    /// `memmove`; otherwise each run goes through a bounce buffer (get, then put). When
    /// source and destination overlap, the result is as if the whole source had been read
    /// first.
    ///
    /// ```
    /// # tessera::Job::threads(2).run(|ctx| {
    /// // A 4×4 matrix and a row of 4 on every rank.
    /// let a = ctx.alloc_collective::<u32>(16 + 4)?;
    /// ctx.put(a, &(0..16).collect::<Vec<u32>>(), tessera::Blocking)?;
    /// ctx.barrier()?;
    /// // Column 1 of the peer's matrix into our row.
    /// let peer = (ctx.rank() + 1) % ctx.ranks();
    /// ctx.copy_strided(a.add(16), &[1], a.on(peer).add(1), &[4], &[4])?;
    /// assert_eq!(ctx.get_value(a.add(16 + 2))?, 9);
    /// # ctx.barrier()?; Ok(()) }).unwrap();
    /// ```
    pub fn copy_strided<T: Pod>(
        &self,
        dst: GlobalPtr<T>,
        dst_strides: &[usize],
        src: GlobalPtr<T>,
        src_strides: &[usize],
        counts: &[usize],
    ) -> Result<()> {
        let shape = Shape::new(counts, dst_strides, src_strides)?;
        let (to, from) = (
            self.target_of(dst, shape.span_a)?,
            self.target_of(src, shape.span_b)?,
        );
        // A copy from this rank is a put, to it a get; between two others, both.
        let bytes = shape.elements() * std::mem::size_of::<T>();
        if src.rank() != self.rank {
            self.count(Traffic::StridedGet, src.rank(), bytes);
        }
        if dst.rank() != self.rank || src.rank() == self.rank {
            self.count(Traffic::StridedPut, dst.rank(), bytes);
        }
        let size = std::mem::size_of::<T>();
        let (dst_bytes, src_bytes) = (
            dst.offset()..dst.offset() + (shape.span_a * size) as u64,
            src.offset()..src.offset() + (shape.span_b * size) as u64,
        );
        if dst.rank() == src.rank()
            && dst_bytes.start < src_bytes.end
            && src_bytes.start < dst_bytes.end
        {
            // The spans overlap: read the whole source first, so the result is as if it
            // had been (run-by-run order would otherwise show through).
            let len: usize = counts.iter().product();
            let mut bounce = vec![T::zeroed(); len];
            let packed = packed_strides(counts);
            // Counted above, as one copy.
            return self.uncounted(|| {
                self.get_strided(src, src_strides, &mut bounce, &packed, counts)?;
                self.put_strided(dst, dst_strides, &bounce, &packed, counts)
            });
        }
        let run_bytes = shape.run * size;
        match (to, from) {
            (Target::Direct(d), Target::Direct(s)) => {
                // SAFETY: both spans were checked by target_of (in bounds, mapped, aligned).
                unsafe { shape.copy_runs(d.as_ptr() as *mut T, s.as_ptr() as *const T) };
                Ok(())
            }
            _ => {
                let mut bounce = vec![0u8; run_bytes];
                shape.for_each_run(|oa, ob| {
                    self.load_bytes(offset_target(from, ob * size), &mut bounce)?;
                    self.store_bytes(offset_target(to, oa * size), &bounce)
                })
            }
        }
    }

    /// Check a strided transfer: the shape, the local slice's length, the remote span.
    fn plan_strided<T: Pod>(
        &self,
        remote: GlobalPtr<T>,
        remote_strides: &[usize],
        local_len: usize,
        local_strides: &[usize],
        counts: &[usize],
        what: &str,
    ) -> Result<(Shape, Target)> {
        let shape = Shape::new(counts, remote_strides, local_strides)?;
        if shape.span_b > local_len {
            return Err(CoreError::BadArgument {
                call: "strided transfer",
                argument: "local",
                why: format!(
                    "strided {what} {} elements but the local slice has {local_len}",
                    shape.span_b
                ),
            }
            .into());
        }
        let base = self.target_of(remote, shape.span_a)?;
        Ok((shape, base))
    }

    /// Indexed put: chunk `k` of `src` (`run` elements) goes to `dst + dst_offsets[k]`.
    pub(super) fn put_indexed<T: Pod>(
        &self,
        dst: GlobalPtr<T>,
        dst_offsets: &[usize],
        src: &[T],
        run: usize,
    ) -> Result<()> {
        check_indexed(dst_offsets.len(), run, src.len())?;
        let bytes = dst_offsets.len() * run * std::mem::size_of::<T>();
        self.counted(Traffic::StridedPut, dst.rank(), bytes, || {
            for (chunk, &off) in src.chunks_exact(run.max(1)).zip(dst_offsets) {
                self.put(dst.add(off), chunk, Blocking)?;
            }
            Ok(())
        })
    }

    /// Indexed get: `run` elements from `src + src_offsets[k]` into chunk `k` of `dst`.
    pub(super) fn get_indexed<T: Pod>(
        &self,
        src: GlobalPtr<T>,
        src_offsets: &[usize],
        dst: &mut [T],
        run: usize,
    ) -> Result<()> {
        check_indexed(src_offsets.len(), run, dst.len())?;
        let bytes = src_offsets.len() * run * std::mem::size_of::<T>();
        self.counted(Traffic::StridedGet, src.rank(), bytes, || {
            for (chunk, &off) in dst.chunks_exact_mut(run.max(1)).zip(src_offsets) {
                self.get(src.add(off), chunk, Blocking)?;
            }
            Ok(())
        })
    }
}

fn check_indexed(offsets: usize, run: usize, len: usize) -> Result<()> {
    if offsets * run != len {
        return Err(CoreError::BadArgument { call: "indexed transfer", argument: "local", why: format!(
            "indexed transfer: {offsets} offsets × run {run} = {} elements, but the local slice has {len}",
            offsets * run
        ) }.into());
    }
    Ok(())
}

/// Row-major strides of a dense box with these counts.
fn packed_strides(counts: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; counts.len()];
    for d in (0..counts.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * counts[d + 1];
    }
    strides
}

/// `base` moved `bytes` further; the caller has checked the whole span.
fn offset_target(base: Target, bytes: usize) -> Target {
    match base {
        Target::Direct(p) => {
            // SAFETY: the caller checked the full span starting at `base`, which contains
            // this offset, so the pointer stays inside the mapping (and is not null).
            Target::Direct(unsafe { std::ptr::NonNull::new_unchecked(p.as_ptr().add(bytes)) })
        }
        Target::Remote { rank, offset } => Target::Remote {
            rank,
            offset: offset + bytes,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::Shape;

    #[test]
    fn contiguous_dimensions_merge_into_one_run() {
        let s = Shape::new(&[4, 8], &[8, 1], &[8, 1]).unwrap();
        assert_eq!((s.outer.len(), s.run), (0, 32));
        let s = Shape::new(&[4, 8], &[100, 1], &[8, 1]).unwrap();
        assert_eq!((s.outer.len(), s.run), (1, 8));
        let s = Shape::new(&[3, 1, 5], &[10, 99, 2], &[5, 77, 1]).unwrap();
        assert_eq!((s.outer.len(), s.run), (1, 1));
        assert_eq!((s.span_a, s.span_b), (29, 15));
    }

    #[test]
    fn empty_shape_moves_nothing() {
        let s = Shape::new(&[3, 0], &[1, 1], &[1, 1]).unwrap();
        let mut calls = 0;
        s.for_each_run(|_, _| {
            calls += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(calls, 0);
    }
}
