//! The blocking reductions and scans: reduce, allreduce, scan and exscan, with built-in
//! operations or user ones, each in the algorithms the registry lists.
//!
//! This module must never touch another rank's memory except through the channel.

use super::*;

impl<'a> Team<'a> {
    // ----- reductions -------------------------------------------------------------------

    /// Reduce `src` over all members with `op` into `dst` on `root` (`dst` is untouched
    /// elsewhere and may be empty there).
    pub(super) fn reduce<T: Reducible>(
        &self,
        root: usize,
        src: &[T],
        dst: &mut [T],
        op: Op,
    ) -> Result<()> {
        let _call = self.enter_reduction::<T>(Collective::Reduce, Some(root), src.len(), op)?;
        let combine = |a: &mut [T], b: &[T]| T::reduce(op, a, b);
        self.reduce_impl(root, src, dst, &combine, native_reduction::<T>(op))
    }

    /// [`Team::reduce`] with a user operation `combine(acc, other)` (associative and
    /// commutative) over any plain-old-data type.
    pub(super) fn reduce_with<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let _call = self.begin_user::<T>(Collective::Reduce, Some(root), src.len());
        self.reduce_impl(root, src, dst, combine, None)
    }

    /// Reduce with `combine`, or with the conduit's own reduction `native` where the
    /// algorithm is [`Algorithm::NATIVE`].
    pub(super) fn reduce_impl<T: Pod>(
        &self,
        root: usize,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
        native: Option<Reduction>,
    ) -> Result<()> {
        self.check_root(root)?;
        if self.me == root && dst.len() != src.len() {
            return Err(length_error("reduce", "dst", dst.len(), src.len()));
        }
        let (n, me, len, bytes) = (self.size(), self.me, src.len(), std::mem::size_of_val(src));
        let native = native.map(|reduction| NativeOp::Reduce { root, reduction });
        let reducer = Some(Reducer::Borrowed(combine));
        // Every reduction row is a k-nomial tree, which runs on the channel when small.
        let small = |alg, src: &[T], dst: &mut [T]| {
            small::fits(bytes).then(|| self.reduce_small(alg, root, src, dst, combine))
        };
        self.blocking(
            Collective::Reduce,
            bytes,
            Some(CallShape::rooted(root, len)),
            native,
            src,
            dst,
            reducer,
            small,
            |b, alg| {
                algorithms::rounds(
                    Collective::Reduce,
                    b,
                    Call::new(alg, n, me, len).rooted(root),
                )
            },
        )
    }

    /// Reduce `src` over all members with `op`; every member gets the result in `dst`.
    pub(super) fn allreduce<T: Reducible>(&self, src: &[T], dst: &mut [T], op: Op) -> Result<()> {
        let _call = self.enter_reduction::<T>(Collective::Allreduce, None, src.len(), op)?;
        let combine = |a: &mut [T], b: &[T]| T::reduce(op, a, b);
        self.allreduce_impl(src, dst, &combine, native_reduction::<T>(op))
    }

    /// [`Team::allreduce`] with a user operation.
    pub(super) fn allreduce_with<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let _call = self.begin_user::<T>(Collective::Allreduce, None, src.len());
        self.allreduce_impl(src, dst, combine, None)
    }

    pub(super) fn allreduce_impl<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
        native: Option<Reduction>,
    ) -> Result<()> {
        if dst.len() != src.len() {
            return Err(length_error("allreduce", "dst", dst.len(), src.len()));
        }
        let n = self.size();
        let bytes = std::mem::size_of_val(src);
        let (me, len) = (self.me, src.len());
        let native = native.map(|reduction| NativeOp::Allreduce { reduction });
        // Recursive doubling on a power-of-two team, and the all-at-once form, run on the
        // channel when small.
        let small = |alg, src: &[T], dst: &mut [T]| {
            if !small::fits(bytes) {
                None
            } else if alg == Algorithm::RECURSIVE_DOUBLING && n.is_power_of_two() {
                Some(self.allreduce_small(src, dst, combine))
            } else if alg == Algorithm::ALL_BROADCAST {
                Some(self.allreduce_all_small(src, dst, combine))
            } else {
                None
            }
        };
        self.blocking(
            Collective::Allreduce,
            bytes,
            Some(CallShape::of(len)),
            native,
            src,
            dst,
            Some(Reducer::Borrowed(combine)),
            small,
            |b, alg| algorithms::rounds(Collective::Allreduce, b, Call::new(alg, n, me, len)),
        )
    }

    // ----- scans ------------------------------------------------------------------------

    /// Inclusive prefix reduction: member `i` gets `src₀ op … op srcᵢ` in `dst`.
    pub(super) fn scan<T: Reducible>(&self, src: &[T], dst: &mut [T], op: Op) -> Result<()> {
        let _call = self.enter_reduction::<T>(Collective::Scan, None, src.len(), op)?;
        let combine = |a: &mut [T], b: &[T]| T::reduce(op, a, b);
        self.scan_impl(src, dst, false, &combine, native_reduction::<T>(op))
    }

    /// Exclusive prefix reduction: member `i > 0` gets `src₀ op … op srcᵢ₋₁`; member 0's
    /// `dst` is set to zeros.
    pub(super) fn exscan<T: Reducible>(&self, src: &[T], dst: &mut [T], op: Op) -> Result<()> {
        let _call = self.enter_reduction::<T>(Collective::Scan, None, src.len(), op)?;
        let combine = |a: &mut [T], b: &[T]| T::reduce(op, a, b);
        self.scan_impl(src, dst, true, &combine, native_reduction::<T>(op))
    }

    /// Inclusive (or exclusive) scan with a user operation.
    pub(super) fn scan_with<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        exclusive: bool,
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let _call = self.begin_user::<T>(Collective::Scan, None, src.len());
        self.scan_impl(src, dst, exclusive, combine, None)
    }

    pub(super) fn scan_impl<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        exclusive: bool,
        combine: &Combine<'_, T>,
        native: Option<Reduction>,
    ) -> Result<()> {
        if dst.len() != src.len() {
            return Err(length_error("scan", "dst", dst.len(), src.len()));
        }
        let n = self.size();
        let me = self.me;
        let len = src.len();
        let bytes = std::mem::size_of_val(src);
        let native = native.map(|reduction| NativeOp::Scan {
            reduction,
            exclusive,
        });
        let reducer = Some(Reducer::Borrowed(combine));
        let small = |alg, src: &[T], dst: &mut [T]| {
            let small = small::fits(bytes) && alg == Algorithm::LINEAR;
            small.then(|| self.scan_small(exclusive, src, dst, combine))
        };
        self.blocking(
            Collective::Scan,
            bytes,
            Some(CallShape::scan(len, exclusive)),
            native,
            src,
            &mut *dst,
            reducer,
            small,
            |b, alg| {
                let call = Call::new(alg, n, me, len).exclusive(exclusive);
                algorithms::rounds(Collective::Scan, b, call)
            },
        )?;
        if exclusive && me == 0 {
            // MPI leaves it undefined; ours is zeros (the rounds' already are).
            dst.fill(T::zeroed());
        }
        Ok(())
    }
}

/// The conduit's own form of the built-in reduction `op` on `T`, if `T` has one (the
/// operations that apply to primitive numbers are all MPI's too).
pub(super) fn native_reduction<T: Reducible>(op: Op) -> Option<Reduction> {
    Some(Reduction {
        elem: T::NATIVE?,
        op,
    })
}
