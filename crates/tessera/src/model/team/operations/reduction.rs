//! The reductions and scans as values: reduce, allreduce, scan and exscan, with a
//! built-in operation or a user one, each routed to the team's one implementation of it.
//!
//! This module must never implement an algorithm.

use super::*;

// ----- reductions and scans ------------------------------------------------------------------

/// The constructors every reduction shares: a built-in [`Op`] on a [`Reducible`] type, or
/// a user operation on any plain-old-data type.
macro_rules! reduction {
    ($(#[$doc:meta])* $name:ident { $($root:ident)? } value $value:ty, $($what:literal),*) => {
        $(#[$doc])*
        pub struct $name<'s, T, H = Op> {
            $($root: usize,)?
            src: Input<'s, T>,
            how: H,
        }

        impl<'s, T: Pod> $name<'s, T> {
            #[doc = concat!($($what),*, " with the built-in `op`.")]
            pub fn new($($root: usize,)? src: &'s [T], op: Op) -> Self
            where
                T: Reducible,
            {
                $name { $($root,)? src: Input::Slice(src), how: op }
            }

            #[doc = concat!($($what),*, " with a user operation `combine(acc, other)` (associative and commutative).")]
            pub fn with<F>($($root: usize,)? src: &'s [T], combine: F) -> $name<'s, T, User<F>>
            where
                F: Fn(&mut [T], &[T]) -> Result<()>,
            {
                $name { $($root,)? src: Input::Slice(src), how: User(combine) }
            }

            #[doc = concat!("One value per member; returns `", stringify!($value), "`.")]
            pub fn value($($root: usize,)? value: T, op: Op) -> Value<Self>
            where
                T: Reducible,
            {
                Value($name { $($root,)? src: Input::One([value]), how: op })
            }
        }

        outputs!(impl[T: Pod, H] $name<'_, T, H>);
    };
}

reduction! {
    /// Member `root` gets the reduction over every member's `src` (as long as `src`); the
    /// others' output is empty.
    ///
    /// - `Reduce::new(root, &src, op)`, `Reduce::with(root, &src, combine)`: returned, or
    ///   landed with `.to(&mut dst)` (the others may pass an empty `dst`).
    /// - `Reduce::value(root, x, op)`: `Some(result)` on the root, `None` elsewhere.
    ///
    /// ```
    /// use tessera::coll::Reduce;
    /// use tessera::{Blocking, Job, Nonblocking, Op, Team};
    /// Job::threads(3).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let me = ctx.rank() as u32;
    ///     let largest = world.run(Reduce::value(1, me, Op::Max), Blocking)?;
    ///     assert_eq!(largest, (me == 1).then_some(2));
    ///     // (sum, largest) over pairs, a user operation, nonblocking.
    ///     let pair = [me + 1, 10 * me];
    ///     let request = world.run(Reduce::with(0, &[pair], |acc: &mut [[u32; 2]], x: &[[u32; 2]]| {
    ///         acc[0] = [acc[0][0] + x[0][0], acc[0][1].max(x[0][1])];
    ///         Ok(())
    ///     }), Nonblocking)?;
    ///     let out = request.wait()?;
    ///     if me == 0 {
    ///         assert_eq!(out, [[6, 20]]);
    ///     }
    ///     Ok(())
    /// }).unwrap();
    /// ```
    Reduce { root } value Option<T>, "Reduce this member's `src` to `root`"
}

reduction! {
    /// Every member gets the reduction over every member's `src` (as long as `src`).
    ///
    /// - `Allreduce::new(&src, op)`, `Allreduce::with(&src, combine)`: returned, or landed
    ///   with `.to(&mut dst)`.
    /// - `Allreduce::value(x, op)`: the result (Berkeley UPC's `bupc_allv_reduce`).
    ///
    /// ```
    /// use tessera::coll::Allreduce;
    /// use tessera::{Blocking, Job, Op, Team};
    /// Job::threads(3).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let me = ctx.rank() as f64;
    ///     assert_eq!(world.run(Allreduce::value(me, Op::Sum), Blocking)?, 3.0);
    ///     let mut out = [0.0; 2];
    ///     let max_abs = |acc: &mut [f64], x: &[f64]| {
    ///         acc.iter_mut().zip(x).for_each(|(a, b)| *a = a.abs().max(b.abs()));
    ///         Ok(())
    ///     };
    ///     world.run(Allreduce::with(&[-me, me / 2.0], max_abs).to(&mut out), Blocking)?;
    ///     assert_eq!(out, [2.0, 1.0]);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    Allreduce {} value T, "Reduce this member's `src` with every member's"
}

reduction! {
    /// Inclusive prefix reduction: member `i` gets `src₀ op … op srcᵢ`.
    ///
    /// - `Scan::new(&src, op)`, `Scan::with(&src, combine)`: returned, or landed with
    ///   `.to(&mut dst)`.
    /// - `Scan::value(x, op)`: this member's prefix.
    ///
    /// ```
    /// use tessera::coll::Scan;
    /// use tessera::{Blocking, Job, Op, Team};
    /// Job::threads(3).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let me = ctx.rank() as u64;
    ///     assert_eq!(world.run(Scan::value(me + 1, Op::Sum), Blocking)?, (me + 1) * (me + 2) / 2);
    ///     Ok(())
    /// }).unwrap();
    /// ```
    Scan {} value T, "Scan this member's `src`"
}

reduction! {
    /// Exclusive prefix reduction: member `i > 0` gets `src₀ op … op srcᵢ₋₁`; member 0's
    /// output is zeros.
    ///
    /// - `Exscan::new(&src, op)`, `Exscan::with(&src, combine)`: returned, or landed with
    ///   `.to(&mut dst)`.
    /// - `Exscan::value(x, op)`: this member's prefix, `None` on member 0.
    ///
    /// ```
    /// use tessera::coll::Exscan;
    /// use tessera::{Blocking, Job, Op, Team};
    /// Job::threads(3).run(|ctx| {
    ///     let world = Team::world(ctx)?;
    ///     let me = ctx.rank() as u64;
    ///     let before = world.run(Exscan::value(me + 1, Op::Sum), Blocking)?;
    ///     assert_eq!(before, (me > 0).then_some(me * (me + 1) / 2));
    ///     Ok(())
    /// }).unwrap();
    /// ```
    Exscan {} value Option<T>, "Scan this member's `src`, each member's prefix without its own"
}

impl<T, H> Reduce<'_, T, H> {
    fn out_len_on(&self, team: &Team<'_>) -> usize {
        if team.rank() == self.root {
            self.src.get().len()
        } else {
            0
        }
    }
}

impl<T: Reducible> Kernel for Reduce<'_, T, Op> {
    type Elem = T;
    fn out_len(&self, team: &Team<'_>) -> usize {
        self.out_len_on(team)
    }
    #[inline]
    fn blocking(self, team: &Team<'_>, dst: &mut [T]) -> Result<()> {
        team.reduce(self.root, self.src.get(), dst, self.how)
    }
}

impl<T: Pod, F: Fn(&mut [T], &[T]) -> Result<()>> Kernel for Reduce<'_, T, User<F>> {
    type Elem = T;
    fn out_len(&self, team: &Team<'_>) -> usize {
        self.out_len_on(team)
    }
    fn blocking(self, team: &Team<'_>, dst: &mut [T]) -> Result<()> {
        team.reduce_with(self.root, self.src.get(), dst, &self.how.0)
    }
}

impl<T: Reducible> ValueKernel for Reduce<'_, T, Op> {
    type Value = Option<T>;
    #[inline]
    fn value(self, team: &Team<'_>) -> Result<Option<T>> {
        one_value(self, team)
    }
}

impl<T: Reducible> Start for Reduce<'_, T, Op> {
    fn start<'a>(self, team: &Team<'a>, _: Option<&[T]>) -> Result<CollRequest<'a, T>> {
        team.reduce_nb(self.root, self.src.get(), self.how)
    }
}

impl<T: Pod, F: Fn(&mut [T], &[T]) -> Result<()> + 'static> Start for Reduce<'_, T, User<F>> {
    fn start<'a>(self, team: &Team<'a>, _: Option<&[T]>) -> Result<CollRequest<'a, T>> {
        team.reduce_nb_with(self.root, self.src.get(), Box::new(self.how.0))
    }
}

/// Allreduce, scan and exscan: every member's output is as long as its input.
macro_rules! every_member_reduction {
    ($name:ident, $value:ty, |$me:ident, $one:ident| $value_of:expr,
     $blocking:ident, $user_blocking:ident, $start:ident, $user_start:ident $(, $exclusive:expr)?) => {
        impl<T: Reducible> Kernel for $name<'_, T, Op> {
            type Elem = T;
            fn out_len(&self, _: &Team<'_>) -> usize {
                self.src.get().len()
            }
            #[inline]
            fn blocking(self, team: &Team<'_>, dst: &mut [T]) -> Result<()> {
                team.$blocking(self.src.get(), dst, self.how)
            }
        }

        impl<T: Pod, F: Fn(&mut [T], &[T]) -> Result<()>> Kernel for $name<'_, T, User<F>> {
            type Elem = T;
            fn out_len(&self, _: &Team<'_>) -> usize {
                self.src.get().len()
            }
            fn blocking(self, team: &Team<'_>, dst: &mut [T]) -> Result<()> {
                team.$user_blocking(self.src.get(), dst, $($exclusive,)? &self.how.0)
            }
        }

        impl<T: Reducible> ValueKernel for $name<'_, T, Op> {
            type Value = $value;
            #[inline]
            fn value(self, team: &Team<'_>) -> Result<$value> {
                let $me = team.rank();
                let $one = one_value(self, team)?.expect("every member gets one element");
                Ok($value_of)
            }
        }

        impl<T: Reducible> Start for $name<'_, T, Op> {
            fn start<'a>(self, team: &Team<'a>, _: Option<&[T]>) -> Result<CollRequest<'a, T>> {
                team.$start(self.src.get(), self.how)
            }
        }

        impl<T: Pod, F: Fn(&mut [T], &[T]) -> Result<()> + 'static> Start for $name<'_, T, User<F>> {
            fn start<'a>(self, team: &Team<'a>, _: Option<&[T]>) -> Result<CollRequest<'a, T>> {
                team.$user_start(self.src.get(), Box::new(self.how.0))
            }
        }
    };
}

every_member_reduction!(
    Allreduce,
    T,
    |_me, one| one,
    allreduce,
    allreduce_with,
    allreduce_nb,
    allreduce_nb_with
);
every_member_reduction!(
    Scan,
    T,
    |_me, one| one,
    scan,
    scan_with,
    scan_nb,
    scan_nb_with,
    false
);
every_member_reduction!(
    Exscan,
    Option<T>,
    |me, one| (me > 0).then_some(one),
    exscan,
    scan_with,
    exscan_nb,
    exscan_nb_with,
    true
);
