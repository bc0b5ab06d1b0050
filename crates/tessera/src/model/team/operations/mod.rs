//! Collectives as values: one entry point, [`Team::run`], takes an operation and a
//! completion, as [`Context::put`](crate::Context::put) takes a shape and a completion.
//!
//! An operation is built by its type: [`Barrier`], [`Broadcast`], [`Gather`],
//! [`Allgather`], [`Scatter`], [`Exchange`], [`Reduce`], [`Allreduce`], [`Scan`] and
//! [`Exscan`]. Where its output goes is part of the value:
//!
//! | the value | [`Blocking`] returns | [`Nonblocking`] returns |
//! |---|---|---|
//! | `Allreduce::new(&src, Op::Sum)` | `Vec<T>` (this member's output) | [`CollRequest`] (its `wait` gives the `Vec`) |
//! | `….to(&mut dst)` | `()`, the output in `dst` | [`Landing`] (its `wait` fills `dst`) |
//! | `Allreduce::value(x, Op::Sum)` | the value (`Option` where only some members get one) | does not compile |
//! | `….to_symmetric(&dsts)` (single-address forms) | `()`, the output put into each member's `dsts[i]` | [`CollHandle`] |
//!
//! A combination that does not exist (a value form without blocking, a single-address
//! reduction, a user operation borrowed by a nonblocking call) does not compile:
//!
//! ```compile_fail,E0277
//! use tessera::{coll::Allreduce, Job, Nonblocking, Op, Team};
//! Job::threads(2).run(|ctx| {
//!     let world = Team::world(ctx)?;
//!     let request = world.run(Allreduce::value(1u64, Op::Sum), Nonblocking)?;
//!     Ok(())
//! }).unwrap();
//! ```
//!
//! Every form of an operation runs the same implementation: the algorithm chosen by the
//! registry (forced, tuned, online or the cost model) over the team's channel, the
//! conduit's own collective where that is [`Algorithm::NATIVE`].
//!
//! This module must never implement an algorithm: it only routes a value to the team's
//! one implementation of its operation.

use super::*;
use crate::core::completion::{Blocking, Nonblocking};
use bytemuck::Zeroable;

pub use movement::{Allgather, Broadcast, Exchange, FromSymmetric, Gather, Scatter};
pub use reduction::{Allreduce, Exscan, Reduce, Scan};

mod sealed {
    pub trait Sealed {}
}

/// A collective operation that a team runs with completion `C` (see the
/// [module docs](self) for the forms and what each returns).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot run with completion `{C}`",
    label = "no such form of this collective",
    note = "value forms (`::value`) run `Blocking` only; single-address forms (`.to_symmetric`) exist for broadcast, gather, allgather, scatter and exchange; a nonblocking user reduction needs a `'static` closure"
)]
pub trait Operation<'a, C>: sealed::Sealed {
    /// What the team's [`run`](Team::run) returns.
    type Output;

    #[doc(hidden)]
    fn run_on(self, team: &Team<'a>, completion: C) -> Result<Self::Output>;
}

impl<'a> Team<'a> {
    /// Run the collective `op` on this team, complete as `completion` says: every member
    /// calls it with the same operation, in the same order as the team's other
    /// collectives. What it returns follows from the operation's form and the completion
    /// (see [`coll`](crate::coll)).
    ///
    /// ```
    /// use tessera::coll::{Allgather, Allreduce, Barrier, Broadcast};
    /// use tessera::{Blocking, Job, Nonblocking, Op, Team};
    /// Job::threads(3).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let me = ctx.rank() as u64;
    ///     // A value in, a value out.
    ///     assert_eq!(world.run(Allreduce::value(me, Op::Sum), Blocking)?, 3);
    ///     // Slices: the output lands in the caller's buffer.
    ///     let mut data = if me == 0 { [7, 8] } else { [0, 0] };
    ///     world.run(Broadcast::in_place(0, &mut data), Blocking)?;
    ///     assert_eq!(data, [7, 8]);
    ///     // Nonblocking: start, compute, wait.
    ///     let all = world.run(Allgather::new(&[me]), Nonblocking)?;
    ///     assert_eq!(all.wait()?, vec![0, 1, 2]);
    ///     world.run(Barrier, Blocking)?;
    ///     Ok(())
    /// }).unwrap();
    /// ```
    #[inline]
    pub fn run<C, O: Operation<'a, C>>(&self, op: O, completion: C) -> Result<O::Output> {
        op.run_on(self, completion)
    }
}

// ----- what every operation provides ------------------------------------------------------

/// The traits the forms route to; public in a private module, so nothing outside this
/// crate names or implements them.
mod kernel {
    use super::*;

    /// An operation whose output is this member's part of a vector of `Elem`.
    pub trait Kernel: Sized {
        /// The element type.
        type Elem: Pod;
        /// This member's output length.
        fn out_len(&self, team: &Team<'_>) -> usize;
        /// Run to completion with the output in `dst` (of `out_len` elements).
        fn blocking(self, team: &Team<'_>, dst: &mut [Self::Elem]) -> Result<()>;
        /// Run to completion into a vector of its own.
        fn owned(self, team: &Team<'_>) -> Result<Vec<Self::Elem>> {
            let mut out = vec![<Self::Elem as Zeroable>::zeroed(); self.out_len(team)];
            self.blocking(team, &mut out)?;
            Ok(out)
        }
    }

    /// An operation with a value form.
    pub trait ValueKernel: Kernel {
        /// What the value form returns.
        type Value;
        /// Run the value form.
        fn value(self, team: &Team<'_>) -> Result<Self::Value>;
    }

    /// An operation that starts without blocking. `dst` is the caller's output buffer
    /// where the form has one (an in-place broadcast reads its data there).
    pub trait Start: Kernel {
        fn start<'a>(
            self,
            team: &Team<'a>,
            dst: Option<&[Self::Elem]>,
        ) -> Result<CollRequest<'a, Self::Elem>>;
    }

    /// An operation with a single-address form: its output put straight into the
    /// members' symmetric destinations.
    pub trait SingleAddress: Kernel {
        fn single_address<'a>(
            self,
            team: &Team<'a>,
            dsts: &[GlobalPtr<Self::Elem>],
            nonblocking: bool,
        ) -> Result<Option<CollHandle<'a>>>;
    }
}
use kernel::{Kernel, SingleAddress, Start, ValueKernel};

// ----- the forms -----------------------------------------------------------------------------

/// An operation whose output lands in the caller's buffer (built by `.to(&mut dst)`).
pub struct To<'d, K, T> {
    kernel: K,
    dst: &'d mut [T],
}

/// An operation of one value in and one value out (built by `::value`).
pub struct Value<K>(K);

/// A single-address operation (built by `.to_symmetric(&dsts)`).
pub struct ToSymmetric<'d, K, T> {
    kernel: K,
    dsts: &'d [GlobalPtr<T>],
}

/// A nonblocking collective whose output lands in the caller's buffer when it is waited
/// on (what [`Nonblocking`] gives for a `.to(&mut dst)` operation). It borrows the buffer
/// until then; dropping it waits and fills the buffer.
///
/// ```
/// use tessera::coll::Allreduce;
/// use tessera::{Job, Nonblocking, Op, Team};
/// Job::threads(2).run(|ctx| {
///     let world = Team::world(ctx)?;
///     let mut sum = [0u32; 2];
///     let pending = world.run(Allreduce::new(&[1, 2], Op::Sum).to(&mut sum), Nonblocking)?;
///     // ... compute while it progresses ...
///     pending.wait()?;
///     assert_eq!(sum, [2, 4]);
///     Ok(())
/// }).unwrap();
/// ```
#[must_use = "the output is only in the buffer once the collective is waited on"]
pub struct Landing<'d, 'a, T: Pod> {
    request: Option<CollRequest<'a, T>>,
    dst: &'d mut [T],
}

impl<T: Pod> Landing<'_, '_, T> {
    /// Block until the collective is complete and its output is in the buffer.
    pub fn wait(mut self) -> Result<()> {
        self.land()
    }

    /// Progress the team's nonblocking collectives; `true` once this one is complete (its
    /// output lands at `wait`).
    pub fn test(&mut self) -> Result<bool> {
        match &mut self.request {
            Some(request) => request.test(),
            None => Ok(true),
        }
    }

    fn land(&mut self) -> Result<()> {
        let Some(request) = self.request.take() else {
            return Ok(());
        };
        let out = request.wait()?;
        crate::core::copy::copy_slice(self.dst, &out);
        Ok(())
    }
}

impl<T: Pod> Drop for Landing<'_, '_, T> {
    fn drop(&mut self) {
        let _ = self.land();
    }
}

impl<K: Kernel> sealed::Sealed for K {}
impl<K, T> sealed::Sealed for To<'_, K, T> {}
impl<K> sealed::Sealed for Value<K> {}
impl<K, T> sealed::Sealed for ToSymmetric<'_, K, T> {}
impl sealed::Sealed for Barrier {}

impl<'a, K: Kernel> Operation<'a, Blocking> for K {
    type Output = Vec<K::Elem>;
    #[inline]
    fn run_on(self, team: &Team<'a>, _: Blocking) -> Result<Self::Output> {
        self.owned(team)
    }
}

impl<'a, K: Start> Operation<'a, Nonblocking> for K {
    type Output = CollRequest<'a, K::Elem>;
    #[inline]
    fn run_on(self, team: &Team<'a>, _: Nonblocking) -> Result<Self::Output> {
        self.start(team, None)
    }
}

impl<'a, T: Pod, K: Kernel<Elem = T>> Operation<'a, Blocking> for To<'_, K, T> {
    type Output = ();
    #[inline]
    fn run_on(self, team: &Team<'a>, _: Blocking) -> Result<()> {
        self.kernel.blocking(team, self.dst)
    }
}

impl<'a, 'd, T: Pod, K: Start<Elem = T>> Operation<'a, Nonblocking> for To<'d, K, T> {
    type Output = Landing<'d, 'a, T>;
    fn run_on(self, team: &Team<'a>, _: Nonblocking) -> Result<Self::Output> {
        let want = self.kernel.out_len(team);
        if self.dst.len() != want {
            return Err(length_error(
                "a nonblocking collective",
                "dst",
                self.dst.len(),
                want,
            ));
        }
        let request = self.kernel.start(team, Some(self.dst))?;
        Ok(Landing {
            request: Some(request),
            dst: self.dst,
        })
    }
}

impl<'a, K: ValueKernel> Operation<'a, Blocking> for Value<K> {
    type Output = K::Value;
    #[inline]
    fn run_on(self, team: &Team<'a>, _: Blocking) -> Result<K::Value> {
        self.0.value(team)
    }
}

impl<'a, T: Pod, K: SingleAddress<Elem = T>> Operation<'a, Blocking> for ToSymmetric<'_, K, T> {
    type Output = ();
    fn run_on(self, team: &Team<'a>, _: Blocking) -> Result<()> {
        self.kernel.single_address(team, self.dsts, false).map(drop)
    }
}

impl<'a, T: Pod, K: SingleAddress<Elem = T>> Operation<'a, Nonblocking> for ToSymmetric<'_, K, T> {
    type Output = CollHandle<'a>;
    fn run_on(self, team: &Team<'a>, _: Nonblocking) -> Result<CollHandle<'a>> {
        Ok(self
            .kernel
            .single_address(team, self.dsts, true)?
            .expect("a nonblocking single-address call returns a handle"))
    }
}

/// `.to(&mut dst)` (and `.to_symmetric(&dsts)` where the operation has a single-address
/// form) on an operation type.
macro_rules! outputs {
    (impl[$($gen:tt)*] $ty:ty $(, $single:ident)?) => {
        impl<$($gen)*> $ty {
            /// Land this member's output in `dst` (as long as the output: see the type's
            /// docs) instead of returning it.
            pub fn to(self, dst: &mut [T]) -> To<'_, Self, T> {
                To { kernel: self, dst }
            }
            $(
            /// The single-address form: the output put straight into the members'
            /// symmetric destinations `dsts` (one per member, in team order; see
            /// [`Team::symmetric`]) instead of passing through the team's mailboxes.
            /// Completion and entry follow the team's [`SyncMode`]s ([`Team::with_sync`]).
            pub fn $single(self, dsts: &[GlobalPtr<T>]) -> ToSymmetric<'_, Self, T> {
                ToSymmetric { kernel: self, dsts }
            }
            )?
        }
    };
}

/// Run a value form whose output is at most one element: `None` where this member's
/// output is empty.
#[inline(always)]
fn one_value<K: Kernel>(kernel: K, team: &Team<'_>) -> Result<Option<K::Elem>> {
    let mut one = [<K::Elem as Zeroable>::zeroed()];
    let len = kernel.out_len(team).min(1);
    kernel.blocking(team, &mut one[..len])?;
    Ok((len == 1).then_some(one[0]))
}

/// An operation's input: the caller's slice or one value of its own.
enum Input<'s, T> {
    Slice(&'s [T]),
    One([T; 1]),
}

impl<T> Input<'_, T> {
    #[inline]
    fn get(&self) -> &[T] {
        match self {
            Input::Slice(s) => s,
            Input::One(v) => v,
        }
    }
}

/// A user reduction `combine(acc, other)` (associative and commutative) held by a
/// [`Reduce`], [`Allreduce`], [`Scan`] or [`Exscan`] built with `::with`. A nonblocking
/// call needs it `'static` (the team keeps it until the operation is done).
pub struct User<F>(F);

// ----- barrier ---------------------------------------------------------------------------------

/// Every member waits until all have entered. [`Blocking`] returns `()`, [`Nonblocking`] a
/// [`CollRequest`] whose output is empty.
///
/// ```
/// use tessera::coll::Barrier;
/// use tessera::{Blocking, Job, Nonblocking, Team};
/// Job::threads(2).run(|ctx| {
///     let world = Team::world(ctx)?;
///     world.run(Barrier, Blocking)?;
///     let request = world.run(Barrier, Nonblocking)?;
///     request.wait()?;
///     Ok(())
/// }).unwrap();
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct Barrier;

impl<'a> Operation<'a, Blocking> for Barrier {
    type Output = ();
    #[inline]
    fn run_on(self, team: &Team<'a>, _: Blocking) -> Result<()> {
        team.barrier()
    }
}

impl<'a> Operation<'a, Nonblocking> for Barrier {
    type Output = CollRequest<'a, u8>;
    fn run_on(self, team: &Team<'a>, _: Nonblocking) -> Result<Self::Output> {
        team.barrier_nb()
    }
}

// After the macros above, which they use.
mod movement;
mod reduction;
