//! The blocking reductions and scans: reduce, allreduce, scan and exscan, with built-in
//! operations or user ones, each in the algorithms the registry lists.
//!
//! This module must never touch another rank's memory except through the channel.

use super::*;

impl<'a> Team<'a> {
    // ----- reductions -------------------------------------------------------------------

    /// Reduce `src` over all members with `op` into `dst` on `root` (`dst` is untouched
    /// elsewhere and may be empty there).
    pub fn reduce<T: Reducible>(
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
    pub fn reduce_with<T: Pod>(
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
    /// algorithm is [`Algorithm::Native`].
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
        let n = self.size();
        let alg = self.choose(
            Collective::Reduce,
            std::mem::size_of_val(src),
            native.is_some(),
        );
        if let (Algorithm::Native, Some(reduction)) = (alg, native) {
            return self.native(
                NativeOp::Reduce { root, reduction },
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(dst),
            );
        }
        let tree = Knomial::new(radix_of(alg, n), n, (self.me + n - root) % n);
        let children: Vec<usize> = tree.children.iter().map(|&c| (c + root) % n).collect();
        let parent = tree.parent.map(|p| (p + root) % n);
        // Pipelined in segments of one mailbox chunk: a member receives segment k from
        // every child, combines it into its accumulator while it is in cache and passes it
        // up, so no member holds more than a segment per child beyond its accumulator.
        // The accumulator is `dst` on the root, `src` itself on a leaf, a copy elsewhere.
        let len = src.len();
        let seg = (DEFAULT_CHUNK / std::mem::size_of::<T>().max(1)).max(1);
        let mut segments = (0..len.div_ceil(seg).max(1)).map(|k| k * seg..((k + 1) * seg).min(len));
        if children.is_empty() {
            return match parent {
                Some(p) => segments.try_for_each(|r| self.send(p, &src[r])),
                None => {
                    dst.copy_from_slice(src); // a team of one
                    Ok(())
                }
            };
        }
        // The accumulator: `dst` on the root, a copy of `src` on an inner member.
        let mut own = Vec::new();
        let acc: &mut [T] = if parent.is_none() {
            dst.copy_from_slice(src);
            dst
        } else {
            own.extend_from_slice(src);
            &mut own
        };
        let width = seg.min(len).max(1);
        let mut scratch = vec![T::zeroed(); width * children.len()];
        for range in segments {
            let part = range.len();
            let mut recvs: Vec<Incoming> = children
                .iter()
                .zip(scratch.chunks_mut(width))
                .map(|(&c, b)| Incoming::new(c, bytemuck::cast_slice_mut(&mut b[..part])))
                .collect();
            self.channel.transfer(self.ctx, &mut [], &mut recvs)?;
            drop(recvs);
            for b in scratch.chunks(width) {
                combine(&mut acc[range.clone()], &b[..part])?;
            }
            if let Some(p) = parent {
                self.send(p, &acc[range])?;
            }
        }
        Ok(())
    }

    /// Reduce one value to `root`: `Some(result)` there, `None` elsewhere.
    pub fn reduce_value<T: Reducible>(&self, root: usize, value: T, op: Op) -> Result<Option<T>> {
        let mut out = [value];
        let dst: &mut [T] = if self.me == root { &mut out } else { &mut [] };
        self.reduce(root, &[value], dst, op)?;
        Ok((self.me == root).then_some(out[0]))
    }

    /// Reduce `src` over all members with `op`; every member gets the result in `dst`.
    pub fn allreduce<T: Reducible>(&self, src: &[T], dst: &mut [T], op: Op) -> Result<()> {
        let _call = self.enter_reduction::<T>(Collective::Allreduce, None, src.len(), op)?;
        let combine = |a: &mut [T], b: &[T]| T::reduce(op, a, b);
        self.allreduce_impl(src, dst, &combine, native_reduction::<T>(op))
    }

    /// [`Team::allreduce`] with a user operation.
    pub fn allreduce_with<T: Pod>(
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
        match self.choose(Collective::Allreduce, bytes, native.is_some()) {
            Algorithm::Native => self.native(
                NativeOp::Allreduce {
                    reduction: native.expect("choose allows native only with a reduction"),
                },
                bytemuck::cast_slice(src),
                bytemuck::cast_slice_mut(dst),
            ),
            Algorithm::ReduceBroadcast => {
                let single = self.with_forced(&[
                    (Collective::Reduce, Algorithm::Binomial),
                    (Collective::Broadcast, Algorithm::Binomial),
                ]);
                single.reduce_with(0, src, dst, combine)?;
                single.broadcast(0, dst)
            }
            Algorithm::Ring if src.len() >= n => self.allreduce_ring(src, dst, combine),
            _ => self.allreduce_recursive_doubling(src, dst, combine),
        }
    }

    /// The same team with some algorithms forced, for composed algorithms.
    pub(super) fn with_forced(&self, pairs: &[(Collective, Algorithm)]) -> Team<'a> {
        let mut forced = self.forced;
        for &(op, alg) in pairs {
            forced[op.index()] = Some(alg);
        }
        Team {
            forced,
            ..self.clone()
        }
    }

    pub(super) fn allreduce_recursive_doubling<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let n = self.size();
        let me = self.me;
        let pow = if n.is_power_of_two() {
            n
        } else {
            n.next_power_of_two() / 2
        };
        let rem = n - pow;
        dst.copy_from_slice(src);
        let mut other = vec![T::zeroed(); src.len()];
        // Fold the first 2·rem members pairwise so that `pow` members remain.
        let vrank = if me < 2 * rem {
            if me.is_multiple_of(2) {
                self.send(me + 1, dst)?;
                None
            } else {
                self.recv(me - 1, &mut other)?;
                combine(dst, &other)?;
                Some(me / 2)
            }
        } else {
            Some(me - rem)
        };
        if let Some(v) = vrank {
            let real = |v: usize| if v < rem { 2 * v + 1 } else { v + rem };
            let mut mask = 1;
            while mask < pow {
                let partner = real(v ^ mask);
                self.sendrecv(partner, dst, partner, &mut other)?;
                combine(dst, &other)?;
                mask *= 2;
            }
        }
        if me < 2 * rem {
            if me.is_multiple_of(2) {
                self.recv(me + 1, dst)?;
            } else {
                self.send(me - 1, dst)?;
            }
        }
        Ok(())
    }

    pub(super) fn allreduce_ring<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let n = self.size();
        let me = self.me;
        let (right, left) = ((me + 1) % n, (me + n - 1) % n);
        let block = |b: usize| split_range(src.len(), n, b % n);
        dst.copy_from_slice(src);
        let mut incoming = vec![T::zeroed(); src.len().div_ceil(n)];
        // Reduce-scatter: after n − 1 steps, block (me + 1) % n is complete here.
        for s in 0..n - 1 {
            let out = block(me + n - s);
            let inb = block(me + 2 * n - s - 1);
            let tmp = &mut incoming[..inb.len()];
            self.sendrecv(right, &dst[out], left, tmp)?;
            combine(&mut dst[inb], tmp)?;
        }
        // Allgather of the completed blocks.
        for s in 0..n - 1 {
            let out = block(me + 1 + n - s);
            let inb = block(me + n - s);
            self.sendrecv_within(right, left, dst, out, inb)?;
        }
        Ok(())
    }

    /// Reduce one value over all members; every member gets the result
    /// (Berkeley UPC's `bupc_allv_reduce`).
    pub fn allreduce_value<T: Reducible>(&self, value: T, op: Op) -> Result<T> {
        let mut out = [value];
        self.allreduce(&[value], &mut out, op)?;
        Ok(out[0])
    }

    // ----- scans ------------------------------------------------------------------------

    /// Inclusive prefix reduction: member `i` gets `src₀ op … op srcᵢ` in `dst`.
    pub fn scan<T: Reducible>(&self, src: &[T], dst: &mut [T], op: Op) -> Result<()> {
        let _call = self.enter_reduction::<T>(Collective::Scan, None, src.len(), op)?;
        let combine = |a: &mut [T], b: &[T]| T::reduce(op, a, b);
        self.scan_impl(src, dst, false, &combine, native_reduction::<T>(op))
    }

    /// Exclusive prefix reduction: member `i > 0` gets `src₀ op … op srcᵢ₋₁`; member 0's
    /// `dst` is set to zeros.
    pub fn exscan<T: Reducible>(&self, src: &[T], dst: &mut [T], op: Op) -> Result<()> {
        let _call = self.enter_reduction::<T>(Collective::Scan, None, src.len(), op)?;
        let combine = |a: &mut [T], b: &[T]| T::reduce(op, a, b);
        self.scan_impl(src, dst, true, &combine, native_reduction::<T>(op))
    }

    /// Inclusive (or exclusive) scan with a user operation.
    pub fn scan_with<T: Pod>(
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
        match self.choose(
            Collective::Scan,
            std::mem::size_of_val(src),
            native.is_some(),
        ) {
            Algorithm::Native => {
                self.native(
                    NativeOp::Scan {
                        reduction: native.expect("choose allows native only with a reduction"),
                        exclusive,
                    },
                    bytemuck::cast_slice(src),
                    bytemuck::cast_slice_mut(dst),
                )?;
                if exclusive && me == 0 {
                    dst.fill(T::zeroed()); // MPI leaves it undefined; ours is zeros
                }
                Ok(())
            }
            Algorithm::Linear => {
                // prefix = src₀ … srcₘₑ₋₁ arrives from the left; pass prefix op src right.
                let mut inclusive = src.to_vec();
                let mut prefix = vec![T::zeroed(); len];
                if me > 0 {
                    self.recv(me - 1, &mut prefix)?;
                    let mut p = prefix.clone();
                    combine(&mut p, src)?;
                    inclusive = p;
                }
                if me + 1 < n {
                    self.send(me + 1, &inclusive)?;
                }
                dst.copy_from_slice(if exclusive { &prefix } else { &inclusive });
                Ok(())
            }
            _ => {
                // Hillis–Steele: after round k, `inclusive` covers 2ᵏ⁺¹ members ending at me.
                let mut inclusive = src.to_vec();
                let mut exclusive_acc: Option<Vec<T>> = None;
                let mut incoming = vec![T::zeroed(); len];
                let mut dist = 1;
                while dist < n {
                    let to = (me + dist < n).then_some(me + dist);
                    let from = (me >= dist).then(|| me - dist);
                    let mut sends: Vec<Outgoing> = to
                        .map(|t| Outgoing::new(t, bytemuck::cast_slice(&inclusive)))
                        .into_iter()
                        .collect();
                    let mut recvs: Vec<Incoming> = from
                        .map(|f| Incoming::new(f, bytemuck::cast_slice_mut(&mut incoming)))
                        .into_iter()
                        .collect();
                    self.channel.transfer(self.ctx, &mut sends, &mut recvs)?;
                    drop(sends);
                    if from.is_some() {
                        combine(&mut inclusive, &incoming)?;
                        match exclusive_acc.as_mut() {
                            Some(e) => combine(e, &incoming)?,
                            None => exclusive_acc = Some(incoming.clone()),
                        }
                    }
                    dist *= 2;
                }
                if exclusive {
                    match exclusive_acc {
                        Some(e) => dst.copy_from_slice(&e),
                        None => dst.fill(T::zeroed()),
                    }
                } else {
                    dst.copy_from_slice(&inclusive);
                }
                Ok(())
            }
        }
    }

    /// Inclusive scan of one value.
    pub fn scan_value<T: Reducible>(&self, value: T, op: Op) -> Result<T> {
        let mut out = [value];
        self.scan(&[value], &mut out, op)?;
        Ok(out[0])
    }

    /// Exclusive scan of one value: `None` on member 0.
    pub fn exscan_value<T: Reducible>(&self, value: T, op: Op) -> Result<Option<T>> {
        let mut out = [value];
        self.exscan(&[value], &mut out, op)?;
        Ok((self.me > 0).then_some(out[0]))
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
