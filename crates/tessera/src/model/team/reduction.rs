//! The blocking reductions and scans: reduce, allreduce, scan and exscan, with built-in
//! operations or user ones, each in the algorithms the registry lists.
//!
//! This module must never touch another rank's memory except through the channel.

use super::*;

/// Largest blocking allreduce (bytes per member) that a power-of-two team runs straight
/// on its channel rather than as a schedule.
const ON_CHANNEL_UP_TO: usize = 256;

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
        self.blocking(
            Collective::Reduce,
            bytes,
            Some(CallShape::rooted(root, len)),
            native,
            src,
            dst,
            reducer,
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
        self.chosen(
            Collective::Allreduce,
            bytes,
            native.is_some(),
            true,
            |alg| {
                match (alg, native) {
                    (Algorithm::NATIVE, Some(call)) => self.native(
                        call,
                        bytemuck::cast_slice(src),
                        bytemuck::cast_slice_mut(dst),
                    ),
                    // Small calls on a power-of-two team: the rounds straight on the channel,
                    // as the blocking barrier's (the schedule's fixed work is most of an
                    // 8-byte allreduce's own time; docs/PERFORMANCE.md, "Collectives").
                    (Algorithm::RECURSIVE_DOUBLING, _)
                        if n.is_power_of_two()
                            && bytes <= ON_CHANNEL_UP_TO
                            && std::mem::size_of::<T>() > 0 =>
                    {
                        self.allreduce_on_channel(src, dst, combine)
                    }
                    (alg, _) => self.planned(
                        Collective::Allreduce,
                        alg,
                        bytes,
                        Some(CallShape::of(len)),
                        src,
                        dst,
                        Some(Reducer::Borrowed(combine)),
                        |b, alg| {
                            algorithms::rounds(Collective::Allreduce, b, Call::new(alg, n, me, len))
                        },
                    ),
                }
            },
        )
    }

    /// Recursive doubling on a power-of-two team straight on the channel: at distances 1,
    /// 2, 4, … each member swaps its partial result with `me ^ distance` and combines the
    /// partner's into its own, as the schedule's rounds do (the same partners, the same
    /// order of operands, so the same result).
    fn allreduce_on_channel<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        /// The partner's partial result: a cache-line-aligned stack buffer.
        #[repr(C, align(64))]
        struct Scratch([u8; ON_CHANNEL_UP_TO]);
        let mut scratch = Scratch([0; ON_CHANNEL_UP_TO]);
        let theirs: &mut [T] =
            bytemuck::cast_slice_mut(&mut scratch.0[..std::mem::size_of_val(src)]);
        dst.copy_from_slice(src);
        let mut distance = 1;
        while distance < self.size() {
            let partner = self.me ^ distance;
            self.sendrecv(partner, dst, partner, theirs)?;
            combine(dst, theirs)?;
            distance *= 2;
        }
        Ok(())
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
        self.blocking(
            Collective::Scan,
            bytes,
            Some(CallShape::scan(len, exclusive)),
            native,
            src,
            &mut *dst,
            reducer,
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
