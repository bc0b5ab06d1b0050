//! How a caller learns that a one-sided transfer is complete, passed as a value.
//!
//! There is one [`Context::put`] and one [`Context::get`]. Each takes the transfer's
//! shape (what it moves) and a completion (how the caller learns it has moved); the return
//! type follows from the completion:
//!
//! | completion | returns | complete when |
//! |---|---|---|
//! | [`Blocking`] | `Result<()>` | the call returns |
//! | [`Nonblocking`] | `Result<`[`Handle`]`>` | [`Handle::wait`] returns or [`Handle::test`] says so; the handle borrows the local buffer |
//! | [`Implicit`] | `Result<()>` | the next [`Context::sync_nbi`], fence-free ordering operation or barrier; a put's source may be reused at once |
//! | [`Signal`] (put only) | `Result<()>` | the target sees the signal: whoever observes it also sees the data |
//!
//! Shapes: a contiguous slice (`&[T]`, `&Vec<T>`, `&[T; N]` for a put; `&mut` of those for a
//! get), [`Strided`]/[`StridedMut`] (N-d counts and strides), [`Indexed`]/[`IndexedMut`]
//! (a list of offsets), and for an implicit get a [`Span`] of this rank's own segment
//! (the bytes land in segment memory, since no Rust borrow outlives the call).
//!
//! A combination the product does not offer does not compile, with a message saying
//! which one to use instead:
//!
//! ```compile_fail,E0277
//! # fn f(ctx: &tessera::Context, src: tessera::GlobalPtr<u64>) -> tessera::Result<()> {
//! // An implicit get cannot land in a Rust buffer: nothing would keep it borrowed.
//! let mut local = [0u64; 4];
//! ctx.get(src, &mut local, tessera::Implicit)?;
//! # Ok(()) }
//! ```
//!
//! ```compile_fail,E0061
//! # fn f(ctx: &tessera::Context, dst: tessera::GlobalPtr<u64>) -> tessera::Result<()> {
//! // A put names its completion; there is no put without one.
//! ctx.put(dst, &[1u64, 2])?;
//! # Ok(()) }
//! ```
//!
//! This module must never decide mapped-or-not itself: every form calls the one path in
//! `core::rma` (or `core::atomic` for signals) that does.

use bytemuck::Pod;

use super::atomic::Remote;
use super::rma::Handle;
use super::sync::{Semaphore, SignalOp};
use super::{Context, GlobalPtr};
use crate::AtomicOp;
use crate::Result;

/// Complete when the call returns (at the target for a put, in the buffer for a get).
///
/// ```
/// use tessera::{Blocking, Job};
/// Job::threads(2).run(|ctx| {
///     let a = ctx.alloc_collective::<u32>(4)?;
///     ctx.barrier()?;
///     ctx.put(a.on((ctx.rank() + 1) % 2), &[1, 2, 3, 4], Blocking)?;
///     ctx.barrier()?;
///     let mut got = [0u32; 4];
///     ctx.get(a, &mut got, Blocking)?;
///     assert_eq!(got, [1, 2, 3, 4]);
///     Ok(())
/// }).unwrap();
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Blocking;

/// Return a [`Handle`] that borrows the local buffer until the transfer completes.
///
/// ```no_run
/// # fn f(ctx: &tessera::Context, dst: tessera::GlobalPtr<f64>) -> tessera::Result<()> {
/// let data = vec![1.0; 1024];
/// let handle = ctx.put(dst, &data, tessera::Nonblocking)?;
/// // ... compute while the transfer proceeds ...
/// handle.wait()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Nonblocking;

/// Complete at the next [`Context::sync_nbi`] (OpenSHMEM's `quiet`), ordering operation or
/// barrier. A put's source may be reused as soon as the call returns; a get lands in a
/// [`Span`] of this rank's segment.
///
/// ```
/// use tessera::{Blocking, Implicit, Job};
/// Job::threads(2).run(|ctx| {
///     let a = ctx.alloc_collective::<u64>(8)?;
///     ctx.put(a, &[ctx.rank() as u64; 8], Blocking)?;
///     ctx.barrier()?;
///     let peer = (ctx.rank() + 1) % 2;
///     // Fetch the peer's first four words into our last four.
///     ctx.get(a.on(peer), a.add(4).span(4), Implicit)?;
///     ctx.sync_nbi()?;
///     assert_eq!(ctx.get_value(a.add(7))?, peer as u64);
///     ctx.barrier()?;
///     Ok(())
/// }).unwrap();
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Implicit;

/// After the data, update a word at the target, as one signal: whoever observes the
/// update also sees the data (OpenSHMEM's put-with-signal, a signalling put). The source
/// may be reused on return. On a mapped owner it is a copy and a CPU atomic; on an
/// unmapped one, one message when the data fits one.
///
/// ```
/// use tessera::{Blocking, Compare, Job, Signal, SignalOp};
/// Job::threads(2).segment(1 << 20).run(|ctx| {
///     let data = ctx.alloc_collective::<u32>(4)?;
///     let flag = ctx.alloc_collective::<u64>(1)?;
///     ctx.put(flag, &[0], Blocking)?;
///     ctx.barrier()?;
///     if ctx.rank() == 0 {
///         ctx.put(data.on(1), &[1, 2, 3, 4], Signal::Flag(flag.on(1), SignalOp::Add(1)))?;
///     } else {
///         ctx.wait_value(flag, Compare::Eq, 1)?;
///         assert_eq!(ctx.get_value(data.add(3))?, 4);
///     }
///     Ok(())
/// }).unwrap();
/// ```
#[derive(Clone, Copy, Debug)]
pub enum Signal {
    /// Post the semaphore once: `sem.wait(n)` at the target returns when the data of `n`
    /// such puts is visible there.
    Post(Semaphore),
    /// Update the 64-bit flag (on the data's rank or any other) with the operation.
    Flag(GlobalPtr<u64>, SignalOp),
}

impl Signal {
    fn word_and_op(self) -> (GlobalPtr<u64>, Remote<u64>) {
        match self {
            Signal::Post(sem) => (sem.counter, Remote::Rmw(AtomicOp::Add(1))),
            Signal::Flag(flag, op) => (flag, op.remote()),
        }
    }
}

/// `len` elements of segment memory from `start`: where an [`Implicit`] get lands (in this
/// rank's own segment). Made by [`GlobalPtr::span`].
#[derive(Clone, Copy, Debug)]
pub struct Span<T> {
    /// The first element.
    pub start: GlobalPtr<T>,
    /// How many elements.
    pub len: usize,
}

impl<T> GlobalPtr<T> {
    /// The `len` elements from this address, as the landing place of an [`Implicit`] get.
    ///
    /// ```
    /// let p = tessera::GlobalPtr::<u64>::new(0, 64);
    /// assert_eq!(p.span(3).len, 3);
    /// ```
    pub const fn span(self, len: usize) -> Span<T> {
        Span { start: self, len }
    }
}

/// An N-d strided put's source: for every index `i` of the box `counts` (slowest
/// dimension first), element `local[Σ i_d·local_strides[d]]` goes to
/// `dst + Σ i_d·remote_strides[d]`. Strides and counts are in elements; contiguous runs
/// move as one copy each.
///
/// ```no_run
/// # fn f(ctx: &tessera::Context, dst: tessera::GlobalPtr<f64>) -> tessera::Result<()> {
/// use tessera::{Blocking, Strided};
/// // A 4×8 block of a 16-wide local matrix into rows of a 100-wide remote one.
/// let local = vec![0.0; 16 * 4];
/// let block = Strided { local: &local, local_strides: &[16, 1], remote_strides: &[100, 1], counts: &[4, 8] };
/// ctx.put(dst, block, Blocking)?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Strided<'s, T> {
    /// The local elements.
    pub local: &'s [T],
    /// Stride of each dimension in `local`.
    pub local_strides: &'s [usize],
    /// Stride of each dimension at the remote address.
    pub remote_strides: &'s [usize],
    /// Elements per dimension, slowest first.
    pub counts: &'s [usize],
}

/// An N-d strided get's destination: the mirror of [`Strided`].
///
/// ```no_run
/// # fn f(ctx: &tessera::Context, src: tessera::GlobalPtr<f64>) -> tessera::Result<()> {
/// use tessera::{Blocking, StridedMut};
/// // Column 0 of a remote 10×10 matrix into a local vector.
/// let mut column = vec![0.0; 10];
/// let shape = StridedMut { local: &mut column, local_strides: &[1], remote_strides: &[10], counts: &[10] };
/// ctx.get(src, shape, Blocking)?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct StridedMut<'s, T> {
    /// Where the elements land.
    pub local: &'s mut [T],
    /// Stride of each dimension in `local`.
    pub local_strides: &'s [usize],
    /// Stride of each dimension at the remote address.
    pub remote_strides: &'s [usize],
    /// Elements per dimension, slowest first.
    pub counts: &'s [usize],
}

/// An indexed put's source: chunk `k` of `local` (`run` elements) goes to
/// `dst + remote_offsets[k]` (in elements).
///
/// ```no_run
/// # fn f(ctx: &tessera::Context, dst: tessera::GlobalPtr<u32>) -> tessera::Result<()> {
/// use tessera::{Blocking, Indexed};
/// ctx.put(dst, Indexed { local: &[1, 2, 3, 4], remote_offsets: &[0, 10], run: 2 }, Blocking)?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Indexed<'s, T> {
    /// The local elements, `remote_offsets.len() * run` of them.
    pub local: &'s [T],
    /// Where each chunk goes, in elements from the remote address.
    pub remote_offsets: &'s [usize],
    /// Elements per chunk.
    pub run: usize,
}

/// An indexed get's destination: `run` elements from `src + remote_offsets[k]` into
/// chunk `k` of `local`.
///
/// ```no_run
/// # fn f(ctx: &tessera::Context, src: tessera::GlobalPtr<u32>) -> tessera::Result<()> {
/// use tessera::{Blocking, IndexedMut};
/// let mut local = [0u32; 4];
/// ctx.get(src, IndexedMut { local: &mut local, remote_offsets: &[0, 10], run: 2 }, Blocking)?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct IndexedMut<'s, T> {
    /// Where the chunks land, `remote_offsets.len() * run` elements.
    pub local: &'s mut [T],
    /// Where each chunk comes from, in elements from the remote address.
    pub remote_offsets: &'s [usize],
    /// Elements per chunk.
    pub run: usize,
}

mod sealed {
    pub trait Sealed {}
}

/// What a put moves, with the completions it can take (sealed: the shapes and completions
/// of this module are the only ones).
#[diagnostic::on_unimplemented(
    message = "a put of `{Self}` cannot complete as `{C}`",
    label = "no such put",
    note = "a contiguous slice takes Blocking, Nonblocking, Implicit or Signal; Strided and Indexed take Blocking"
)]
pub trait PutShape<'a, T: Pod, C>: sealed::Sealed {
    /// What the put returns under this completion.
    type Output;
    /// Start (and under [`Blocking`], finish) the put to `dst`.
    fn put_to(self, ctx: &'a Context, dst: GlobalPtr<T>, completion: C) -> Self::Output;
}

/// Where a get lands, with the completions it can take (sealed like [`PutShape`]).
#[diagnostic::on_unimplemented(
    message = "a get into `{Self}` cannot complete as `{C}`",
    label = "no such get",
    note = "a `&mut` slice takes Blocking or Nonblocking; an Implicit get lands in a Span of this rank's segment (`ptr.span(len)`); StridedMut and IndexedMut take Blocking"
)]
pub trait GetShape<'a, T: Pod, C>: sealed::Sealed {
    /// What the get returns under this completion.
    type Output;
    /// Start (and under [`Blocking`], finish) the get from `src`.
    fn get_from(self, ctx: &'a Context, src: GlobalPtr<T>, completion: C) -> Self::Output;
}

impl<S: ?Sized> sealed::Sealed for &S {}
impl<S: ?Sized> sealed::Sealed for &mut S {}
impl<T> sealed::Sealed for Span<T> {}
impl<T> sealed::Sealed for Strided<'_, T> {}
impl<T> sealed::Sealed for StridedMut<'_, T> {}
impl<T> sealed::Sealed for Indexed<'_, T> {}
impl<T> sealed::Sealed for IndexedMut<'_, T> {}

impl<'a, T: Pod, S: AsRef<[T]> + ?Sized> PutShape<'a, T, Blocking> for &S {
    type Output = Result<()>;
    #[inline(always)]
    fn put_to(self, ctx: &'a Context, dst: GlobalPtr<T>, _: Blocking) -> Result<()> {
        ctx.put_blocking(dst, self.as_ref())
    }
}

impl<'a, T: Pod, S: AsRef<[T]> + ?Sized> PutShape<'a, T, Nonblocking> for &'a S {
    type Output = Result<Handle<'a>>;
    #[inline]
    fn put_to(self, ctx: &'a Context, dst: GlobalPtr<T>, _: Nonblocking) -> Result<Handle<'a>> {
        ctx.put_handle(dst, self.as_ref())
    }
}

impl<'a, T: Pod, S: AsRef<[T]> + ?Sized> PutShape<'a, T, Implicit> for &S {
    type Output = Result<()>;
    #[inline]
    fn put_to(self, ctx: &'a Context, dst: GlobalPtr<T>, _: Implicit) -> Result<()> {
        ctx.put_implicit(dst, self.as_ref())
    }
}

impl<'a, T: Pod, S: AsRef<[T]> + ?Sized> PutShape<'a, T, Signal> for &S {
    type Output = Result<()>;
    #[inline]
    fn put_to(self, ctx: &'a Context, dst: GlobalPtr<T>, signal: Signal) -> Result<()> {
        let src = self.as_ref();
        // Checked as a typed transfer (alignment of T), then sent as bytes.
        ctx.target(dst, std::mem::size_of_val(src), std::mem::align_of::<T>())?;
        let (word, op) = signal.word_and_op();
        ctx.signal(
            Some((dst.cast::<u8>(), bytemuck::cast_slice(src))),
            word,
            op,
        )
    }
}

impl<'a, T: Pod> PutShape<'a, T, Blocking> for Strided<'_, T> {
    type Output = Result<()>;
    fn put_to(self, ctx: &'a Context, dst: GlobalPtr<T>, _: Blocking) -> Result<()> {
        ctx.put_strided(
            dst,
            self.remote_strides,
            self.local,
            self.local_strides,
            self.counts,
        )
    }
}

impl<'a, T: Pod> PutShape<'a, T, Blocking> for Indexed<'_, T> {
    type Output = Result<()>;
    fn put_to(self, ctx: &'a Context, dst: GlobalPtr<T>, _: Blocking) -> Result<()> {
        ctx.put_indexed(dst, self.remote_offsets, self.local, self.run)
    }
}

impl<'a, T: Pod, S: AsMut<[T]> + ?Sized> GetShape<'a, T, Blocking> for &mut S {
    type Output = Result<()>;
    #[inline(always)]
    fn get_from(self, ctx: &'a Context, src: GlobalPtr<T>, _: Blocking) -> Result<()> {
        ctx.get_blocking(src, self.as_mut())
    }
}

impl<'a, T: Pod, S: AsMut<[T]> + ?Sized> GetShape<'a, T, Nonblocking> for &'a mut S {
    type Output = Result<Handle<'a>>;
    #[inline]
    fn get_from(self, ctx: &'a Context, src: GlobalPtr<T>, _: Nonblocking) -> Result<Handle<'a>> {
        ctx.get_handle(src, self.as_mut())
    }
}

impl<'a, T: Pod> GetShape<'a, T, Implicit> for Span<T> {
    type Output = Result<()>;
    fn get_from(self, ctx: &'a Context, src: GlobalPtr<T>, _: Implicit) -> Result<()> {
        ctx.get_implicit(src, self.start, self.len)
    }
}

impl<'a, T: Pod> GetShape<'a, T, Blocking> for StridedMut<'_, T> {
    type Output = Result<()>;
    fn get_from(self, ctx: &'a Context, src: GlobalPtr<T>, _: Blocking) -> Result<()> {
        ctx.get_strided(
            src,
            self.remote_strides,
            self.local,
            self.local_strides,
            self.counts,
        )
    }
}

impl<'a, T: Pod> GetShape<'a, T, Blocking> for IndexedMut<'_, T> {
    type Output = Result<()>;
    fn get_from(self, ctx: &'a Context, src: GlobalPtr<T>, _: Blocking) -> Result<()> {
        ctx.get_indexed(src, self.remote_offsets, self.local, self.run)
    }
}

impl Context {
    /// Put `src` (a slice, or a [`Strided`] or [`Indexed`] shape) at `dst`, possibly on
    /// another rank, completing as `completion` says ([`Blocking`], [`Nonblocking`],
    /// [`Implicit`], [`Signal`]; the module docs list what each returns).
    ///
    /// ```no_run
    /// # fn f(ctx: &tessera::Context) -> tessera::Result<()> {
    /// let buf = ctx.alloc_collective::<u32>(4)?;
    /// ctx.put(buf.on((ctx.rank() + 1) % ctx.ranks()), &[1, 2, 3, 4], tessera::Blocking)?;
    /// # Ok(()) }
    /// ```
    // Always inlined, as the blocking shape's `put_to` is: where a caller kept it out of
    // line, `dst` went through the stack as two 8-byte words and came back as one 16-byte
    // load, a failed store forwarding on every put (an OpenSHMEM all-to-all of 8 bytes
    // per PE at 2 PEs took 70-90 ns longer a call).
    #[inline(always)]
    pub fn put<'a, T: Pod, S: PutShape<'a, T, C>, C>(
        &'a self,
        dst: GlobalPtr<T>,
        src: S,
        completion: C,
    ) -> S::Output {
        src.put_to(self, dst, completion)
    }

    /// Get from `src`, possibly on another rank, into `dst` (a `&mut` slice, a
    /// [`StridedMut`] or [`IndexedMut`] shape, or for [`Implicit`] a [`Span`] of this
    /// rank's segment), completing as `completion` says.
    ///
    /// ```no_run
    /// # fn f(ctx: &tessera::Context, src: tessera::GlobalPtr<u32>) -> tessera::Result<()> {
    /// let mut local = [0u32; 4];
    /// let handle = ctx.get(src, &mut local, tessera::Nonblocking)?;
    /// handle.wait()?;
    /// # Ok(()) }
    /// ```
    // Always inlined, for the reason `put` gives.
    #[inline(always)]
    pub fn get<'a, T: Pod, D: GetShape<'a, T, C>, C>(
        &'a self,
        src: GlobalPtr<T>,
        dst: D,
        completion: C,
    ) -> D::Output {
        dst.get_from(self, src, completion)
    }
}
