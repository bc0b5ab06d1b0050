//! The blocking data-movement collectives: barrier, broadcast, gather, allgather, scatter,
//! exchange (all-to-all) and its variable form, each in the algorithms the registry lists.
//!
//! This module must never touch another rank's memory except through the channel.

use super::*;
use small::{cast, cast_mut};

impl<'a> Team<'a> {
    // ----- barrier ----------------------------------------------------------------------

    /// Block until every member has entered the barrier.
    pub(super) fn barrier(&self) -> Result<()> {
        let _call = self.check_call(Collective::Barrier, None, 0, 0, None)?;
        let (n, me) = (self.size(), self.me);
        self.chosen(Collective::Barrier, 0, true, true, |alg| match alg {
            Algorithm::NATIVE => self.native(NativeOp::Barrier, &[], &mut []),
            // Its rounds straight on the channel, without a schedule: a plan and its
            // sequence numbers cost a third of a 2-rank barrier (docs/PERFORMANCE.md,
            // "Collectives").
            Algorithm::DISSEMINATION => algorithms::dissemination(n, me)
                .try_for_each(|(to, from)| self.channel.sendrecv(self.ctx, to, &[], from, &mut [])),
            alg => self.planned::<u8>(
                Collective::Barrier,
                alg,
                0,
                Some(CallShape::of(0)),
                &[],
                &mut [],
                None,
                |b, alg| algorithms::rounds(Collective::Barrier, b, Call::new(alg, n, me, 0)),
            ),
        })
    }

    // ----- broadcast --------------------------------------------------------------------

    /// Copy `data` from member `root` to every member's `data`.
    pub(super) fn broadcast<T: Pod>(&self, root: usize, data: &mut [T]) -> Result<()> {
        let _call = self.enter_rooted::<T>(Collective::Broadcast, root, data.len())?;
        let n = self.size();
        if n == 1 {
            return Ok(());
        }
        let (me, len, bytes) = (self.me, data.len(), std::mem::size_of_val(data));
        let native = Some(NativeOp::Broadcast { root });
        // Every broadcast row is a tree or the chain, which run on the channel when small.
        let small = |alg, _: &[T], data: &mut [T]| {
            small::fits(bytes).then(|| self.broadcast_small(alg, root, cast_mut(data)))
        };
        self.blocking(
            Collective::Broadcast,
            bytes,
            Some(CallShape::rooted(root, len)),
            native,
            &[],
            data,
            None,
            small,
            |b, alg| {
                algorithms::rounds(
                    Collective::Broadcast,
                    b,
                    Call::new(alg, n, me, len).rooted(root),
                )
            },
        )
    }

    // ----- gather, allgather, scatter -------------------------------------------------

    /// Gather every member's `src` (all the same length) into `dst` on `root`, in rank order
    /// (`dst.len() == size · src.len()` there; untouched and possibly empty elsewhere).
    pub(super) fn gather<T: Pod>(&self, root: usize, src: &[T], dst: &mut [T]) -> Result<()> {
        let _call = self.enter_rooted::<T>(Collective::Gather, root, src.len())?;
        let n = self.size();
        let b = src.len();
        if self.me == root && dst.len() != n * b {
            return Err(length_error("gather", "dst", dst.len(), n * b));
        }
        let (me, bytes) = (self.me, std::mem::size_of_val(src));
        let native = Some(NativeOp::Gather { root });
        let small = |alg, src: &[T], dst: &mut [T]| match alg {
            _ if !small::fits(bytes) => None,
            Algorithm::FLAT => Some(self.gather_small(root, cast(src), cast_mut(dst))),
            Algorithm::BINOMIAL => Some(self.binomial_gather_small(root, cast(src), cast_mut(dst))),
            _ => None,
        };
        self.blocking(
            Collective::Gather,
            bytes,
            Some(CallShape::rooted(root, b)),
            native,
            src,
            dst,
            None,
            small,
            |bd, alg| {
                algorithms::rounds(
                    Collective::Gather,
                    bd,
                    Call::new(alg, n, me, b).rooted(root),
                )
            },
        )
    }

    /// Every member gets every member's `src` in rank order
    /// (`dst.len() == size · src.len()`).
    pub(super) fn allgather<T: Pod>(&self, src: &[T], dst: &mut [T]) -> Result<()> {
        let _call = self.check_call(
            Collective::Allgather,
            None,
            src.len(),
            std::mem::size_of::<T>(),
            None,
        )?;
        let n = self.size();
        let b = src.len();
        if dst.len() != n * b {
            return Err(length_error("allgather", "dst", dst.len(), n * b));
        }
        let (me, bytes) = (self.me, std::mem::size_of_val(src));
        let native = Some(NativeOp::Allgather);
        let small = |alg, src: &[T], dst: &mut [T]| {
            small::fits(bytes)
                .then(|| self.to_all_small(Collective::Allgather, alg, cast(src), cast_mut(dst)))?
        };
        self.blocking(
            Collective::Allgather,
            bytes,
            Some(CallShape::of(b)),
            native,
            src,
            dst,
            None,
            small,
            |bd, alg| algorithms::rounds(Collective::Allgather, bd, Call::new(alg, n, me, b)),
        )
    }

    /// Member `root` sends block `i` of `src` (`size · dst.len()` elements) to member `i`.
    pub(super) fn scatter<T: Pod>(&self, root: usize, src: &[T], dst: &mut [T]) -> Result<()> {
        let _call = self.enter_rooted::<T>(Collective::Scatter, root, dst.len())?;
        let n = self.size();
        let b = dst.len();
        if self.me == root && src.len() != n * b {
            return Err(length_error("scatter", "src", src.len(), n * b));
        }
        let (me, bytes) = (self.me, std::mem::size_of_val(dst));
        let native = Some(NativeOp::Scatter { root });
        let small = |alg, src: &[T], dst: &mut [T]| match alg {
            _ if !small::fits(bytes) => None,
            Algorithm::FLAT => Some(self.scatter_small(root, cast(src), cast_mut(dst))),
            Algorithm::BINOMIAL => {
                Some(self.binomial_scatter_small(root, cast(src), cast_mut(dst)))
            }
            _ => None,
        };
        self.blocking(
            Collective::Scatter,
            bytes,
            Some(CallShape::rooted(root, b)),
            native,
            src,
            dst,
            None,
            small,
            |bd, alg| {
                algorithms::rounds(
                    Collective::Scatter,
                    bd,
                    Call::new(alg, n, me, b).rooted(root),
                )
            },
        )
    }

    // ----- exchange ---------------------------------------------------------------------

    /// All-to-all: block `j` of `src` goes to member `j`, and block `i` of `dst` comes from
    /// member `i` (blocks of `src.len() / size` elements).
    pub(super) fn exchange<T: Pod>(&self, src: &[T], dst: &mut [T]) -> Result<()> {
        let _call = self.check_call(
            Collective::Exchange,
            None,
            src.len(),
            std::mem::size_of::<T>(),
            None,
        )?;
        let n = self.size();
        if !src.len().is_multiple_of(n) || dst.len() != src.len() {
            return Err(CoreError::BadArgument { call: "exchange", argument: "dst", why: format!(
                "exchange: src has {} elements and dst {}; both must be the same multiple of the team size {n}",
                src.len(),
                dst.len()
            ) }
            .into());
        }
        let b = src.len() / n;
        // Equal blocks: ranges computed, nothing allocated (this is the per-call cost of
        // small all-to-alls, OpenSHMEM's `alltoall` among them).
        let block = |j: usize| j * b..(j + 1) * b;
        self.exchange_blocks(src, block, dst, block, true)
    }

    /// Check an all-to-all with varying counts (one count per member each way, totals
    /// matching the buffers, this member's own block the same both ways) and return the
    /// offsets of the send and receive blocks.
    pub(super) fn exchange_v_layout(
        &self,
        src_len: usize,
        send_counts: &[usize],
        dst_len: usize,
        recv_counts: &[usize],
    ) -> Result<(Vec<usize>, Vec<usize>)> {
        let n = self.size();
        if send_counts.len() != n || recv_counts.len() != n {
            return Err(CoreError::BadArgument {
                call: "exchange_v",
                argument: "counts",
                why: format!("exchange_v: counts need one entry per member ({n})"),
            }
            .into());
        }
        let (send_total, recv_total): (usize, usize) =
            (send_counts.iter().sum(), recv_counts.iter().sum());
        if send_total != src_len || recv_total != dst_len {
            return Err(CoreError::BadArgument { call: "exchange_v", argument: "counts", why: format!(
                "exchange_v: counts add up to {send_total} sent and {recv_total} received, but src has {src_len} and dst {dst_len}"
            ) }
            .into());
        }
        let me = self.me;
        if recv_counts[me] != send_counts[me] {
            return Err(length_error(
                "exchange_v (own block)",
                "recv_counts[me]",
                recv_counts[me],
                send_counts[me],
            ));
        }
        let offsets = |counts: &[usize]| -> Vec<usize> {
            counts
                .iter()
                .scan(0, |acc, &c| {
                    let start = *acc;
                    *acc += c;
                    Some(start)
                })
                .collect()
        };
        Ok((offsets(send_counts), offsets(recv_counts)))
    }

    /// All-to-all with varying counts: `send_counts[j]` elements (consecutive in `src`) go
    /// to member `j`; `recv_counts[i]` elements (consecutive in `dst`) come from member `i`.
    pub(super) fn exchange_v<T: Pod>(
        &self,
        src: &[T],
        send_counts: &[usize],
        dst: &mut [T],
        recv_counts: &[usize],
    ) -> Result<()> {
        // Counts differ between members here, so the signature leaves them out.
        let _call = self.begin_call(Signature::new(
            Collective::Exchange,
            Form::Blocking,
            None,
            0,
            std::mem::size_of::<T>(),
            None,
        ));
        let (so, ro) = self.exchange_v_layout(src.len(), send_counts, dst.len(), recv_counts)?;
        self.exchange_blocks(
            src,
            |j| so[j]..so[j] + send_counts[j],
            dst,
            |i| ro[i]..ro[i] + recv_counts[i],
            false,
        )
    }

    /// The all-to-all itself: `send(j)` is the range of `src` that goes to member `j`,
    /// `recv(i)` the range of `dst` that comes from member `i` (checked, consecutive and
    /// in member order). `uniform`: every member passes equal counts (an
    /// [`Team::exchange`]), which MPI's all-to-all needs. Equal counts on this member
    /// alone do not say that, and members must all choose MPI or all not.
    pub(super) fn exchange_blocks<T: Pod>(
        &self,
        src: &[T],
        send: impl Fn(usize) -> std::ops::Range<usize>,
        dst: &mut [T],
        recv: impl Fn(usize) -> std::ops::Range<usize>,
        uniform: bool,
    ) -> Result<()> {
        let (n, me) = (self.size(), self.me);
        // Counts differ between members of an `exchange_v`, so its choice must not
        // depend on them: every member must choose alike.
        let bytes = if uniform {
            std::mem::size_of_val(src) / n
        } else {
            0
        };
        let block = uniform.then(|| src.len() / n);
        // MPI's all-to-all needs equal blocks on every member.
        let native = uniform.then_some(NativeOp::Exchange);
        let small = |alg, src: &[T], dst: &mut [T]| {
            let small = uniform && small::fits(bytes);
            small.then(|| self.to_all_small(Collective::Exchange, alg, cast(src), cast_mut(dst)))?
        };
        self.blocking(
            Collective::Exchange,
            bytes,
            block.map(CallShape::of),
            native,
            src,
            dst,
            None,
            small,
            |b, alg| {
                let call = Call::new(alg, n, me, 0).blocks(&send, &recv, block);
                algorithms::rounds(Collective::Exchange, b, call)
            },
        )
    }
}
