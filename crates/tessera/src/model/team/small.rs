//! Small blocking collectives straight on the channel: blocks of up to [`SMALL_UP_TO`]
//! bytes per member, by the algorithms whose rounds are a few messages each way (the
//! broadcast's trees and chain, the flat and binomial gather and scatter, the
//! allgather's `all_broadcast`, `ring` and `bruck`, the all-to-all's `flat`, `pairwise`
//! and `bruck` at every radix, the reduction's k-nomial trees, recursive doubling for
//! the allreduce of a power-of-two team and its `all_broadcast`, the linear scan; the
//! barrier's dissemination is in `movement`). Each runs the same messages in the same order as its schedule
//! (`algorithms`), and combines in the same order, so its results are the schedule's bit
//! for bit; without the plan, its sequence numbers and the steps' bookkeeping, whose
//! fixed work is most of an 8-byte call's time (docs/PERFORMANCE.md, "Collectives"). The
//! other algorithms, and larger calls, run as schedules.
//!
//! This module must never touch another rank's memory except through the channel.

use std::mem::size_of;

use super::registry::radix_of;
use super::*;
use crate::core::copy::copy_short;

/// Largest block (bytes per member) these calls move straight on the channel.
pub(super) const SMALL_UP_TO: usize = 256;

/// Whether a call with `bytes` per member is small enough for this module.
pub(super) fn fits(bytes: usize) -> bool {
    bytes > 0 && bytes <= SMALL_UP_TO
}

/// `data` as bytes.
pub(super) fn cast<T: Pod>(data: &[T]) -> &[u8] {
    bytemuck::cast_slice(data)
}

/// `data` as bytes.
pub(super) fn cast_mut<T: Pod>(data: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(data)
}

/// The receives of a gather into `dst`, blocks of `own.len()` bytes in member order:
/// every member's but `me`'s, whose block is `own`, copied.
fn others_into<'d>(dst: &'d mut [u8], me: usize, own: &[u8]) -> impl Iterator<Item = Incoming<'d>> {
    let b = own.len();
    copy_short(&mut dst[me * b..(me + 1) * b], own);
    dst.chunks_exact_mut(b)
        .enumerate()
        .filter(move |&(i, _)| i != me)
        .map(|(i, block)| Incoming::new(i, block))
}

/// The receives of a flat round (the all-broadcast allgather's, the flat all-to-all's)
/// into `dst`, which holds a block of `own.len()` bytes per member in member order: every
/// member's but `me`'s, whose block is `own`, copied; from the previous member back
/// (`me − 1`, `me − 2`, …), as the schedules' flat rounds list them.
fn others_into_from_previous<'d>(
    dst: &'d mut [u8],
    me: usize,
    own: &[u8],
) -> impl Iterator<Item = Incoming<'d>> {
    let b = own.len();
    let (before, rest) = dst.split_at_mut(me * b);
    let (mine, after) = rest.split_at_mut(b);
    copy_short(mine, own);
    let down_from_me = before.chunks_exact_mut(b).enumerate().rev();
    let down_from_last = after.chunks_exact_mut(b).enumerate().rev();
    down_from_me
        .map(|(i, block)| Incoming::new(i, block))
        .chain(down_from_last.map(move |(i, block)| Incoming::new(me + 1 + i, block)))
}

/// Every member but `me` of `n`, from the next one on (`me + 1`, …, around the team), as
/// the schedule's flat rounds send.
fn from_next(n: usize, me: usize) -> impl Iterator<Item = usize> {
    (me + 1..n).chain(0..me)
}

/// Block `out` of `data` to read and block `inb` to write: two different ranges of the same
/// length.
fn read_and_write(
    data: &mut [u8],
    out: std::ops::Range<usize>,
    inb: std::ops::Range<usize>,
) -> (&[u8], &mut [u8]) {
    debug_assert!(out.len() == inb.len() && (out.end <= inb.start || inb.end <= out.start));
    if out.start < inb.start {
        let (low, high) = data.split_at_mut(inb.start);
        (&low[out], &mut high[..inb.len()])
    } else {
        let (low, high) = data.split_at_mut(out.start);
        (&high[..out.len()], &mut low[inb])
    }
}

/// Blocks in [`Slots`].
const SLOTS_ON_STACK: usize = 4;

/// Blocks in [`ManySlots`]: a 16-member call's blocks of up to [`SMALL_UP_TO`] bytes (a
/// binomial root's rotated blocks, a flat reduction root's other fourteen children's
/// partial results).
const MANY_SLOTS_ON_STACK: usize = 16;

/// A small block: cache-line aligned, so any element type can be cast onto it.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Block([u8; SMALL_UP_TO]);

/// [`SLOTS_ON_STACK`] blocks of scratch, one after another.
#[repr(C, align(64))]
struct Slots([u8; SLOTS_ON_STACK * SMALL_UP_TO]);

impl Slots {
    const ZERO: Slots = Slots([0; SLOTS_ON_STACK * SMALL_UP_TO]);
}

/// [`MANY_SLOTS_ON_STACK`] blocks of scratch, one after another.
#[repr(C, align(64))]
struct ManySlots([u8; MANY_SLOTS_ON_STACK * SMALL_UP_TO]);

impl ManySlots {
    const ZERO: ManySlots = ManySlots([0; MANY_SLOTS_ON_STACK * SMALL_UP_TO]);
}

impl Block {
    const ZERO: Block = Block([0; SMALL_UP_TO]);

    /// The first `len` elements of type `T` (`len · size_of::<T>() <= SMALL_UP_TO`).
    fn as_mut<T: Pod>(&mut self, len: usize) -> &mut [T] {
        bytemuck::cast_slice_mut(&mut self.0[..len * size_of::<T>()])
    }
}

/// Runs `f` on `len` zeroed elements of scratch: none for 0, else the smallest stack area
/// that holds them (a block of [`SMALL_UP_TO`] bytes, [`Slots`], [`ManySlots`]; each is
/// zeroed whole, so the least zeroing that fits), a vector only beyond, so that a call of
/// up to 16 members' small blocks allocates nothing.
#[inline(always)]
fn with_scratch<T: Pod, R>(len: usize, f: impl FnOnce(&mut [T]) -> R) -> R {
    let bytes = len * size_of::<T>();
    if bytes == 0 {
        f(&mut [])
    } else if bytes <= SMALL_UP_TO {
        let mut block = Block::ZERO;
        f(bytemuck::cast_slice_mut(&mut block.0[..bytes]))
    } else if bytes <= size_of::<Slots>() {
        let mut slots = Slots::ZERO;
        f(bytemuck::cast_slice_mut(&mut slots.0[..bytes]))
    } else if bytes <= size_of::<ManySlots>() {
        let mut slots = ManySlots::ZERO;
        f(bytemuck::cast_slice_mut(&mut slots.0[..bytes]))
    } else {
        f(&mut vec![T::zeroed(); len])
    }
}

/// `from` rotated into `to` (the same length) by `by` bytes: byte i of `from` lands at
/// `(i + by) % len`. Block j to block `(j + s) % n` is a rotation by `s` blocks, and its
/// inverse (block `(j + s) % n` to block j) one by `n − s` blocks, as `algorithms::rotate`
/// and `rotate_back` do for the schedules.
fn rotate(from: &[u8], to: &mut [u8], by: usize) {
    let keep = from.len() - by;
    let (wrapped, rest) = to.split_at_mut(by);
    copy_short(rest, &from[..keep]);
    copy_short(wrapped, &from[keep..]);
}

/// A member's place in the binomial tree of a small gather or scatter, as
/// `algorithms::Subtree` has it for the schedules: its rank relative to the root, and the
/// width `p` of its subtree in a complete tree (the lowest set bit of `rel`; the power of
/// two that covers the team for the root). It holds the blocks of relative ranks
/// `rel..rel + span`, its parent is `rel − p`, and its children are `rel + q` for
/// q = 1, 2, 4, … below `p`, each holding `min(q, n − rel − q)` blocks.
struct Binomial {
    n: usize,
    rel: usize,
    p: usize,
}

impl Binomial {
    fn new(n: usize, me: usize, root: usize) -> Binomial {
        let rel = (me + n - root) % n;
        let p = if rel == 0 {
            n.next_power_of_two()
        } else {
            1 << rel.trailing_zeros()
        };
        Binomial { n, rel, p }
    }

    /// Blocks this member's subtree holds.
    fn span(&self) -> usize {
        self.p.min(self.n - self.rel)
    }

    /// The parent's relative rank, none for the root.
    fn parent(&self) -> Option<usize> {
        (self.rel != 0).then(|| self.rel - self.p)
    }

    /// `(q, blocks)` for every child `rel + q`, the smallest subtree first.
    fn children(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        std::iter::successors(Some(1), |q| Some(q * 2))
            .take_while(|&q| q < self.p && self.rel + q < self.n)
            .map(|q| (q, q.min(self.n - self.rel - q)))
    }
}

impl<'a> Team<'a> {
    /// A small broadcast of `data` from `root` by `alg`'s tree (or the chain) on the
    /// channel, as its schedule's rounds run it: receive from the parent, then send to
    /// every child at once (the chain, a single segment: from the previous member, to the
    /// next).
    pub(super) fn broadcast_small(
        &self,
        alg: Algorithm,
        root: usize,
        data: &mut [u8],
    ) -> Result<()> {
        let (n, me) = (self.size(), self.me);
        if alg == Algorithm::CHAIN {
            let rel = (me + n - root) % n;
            if rel != 0 {
                let from = (me + n - 1) % n;
                self.channel
                    .transfer(self.ctx, &mut [], &mut [Incoming::new(from, data)])?;
            }
            if rel != n - 1 {
                let to = (me + 1) % n;
                self.channel
                    .transfer(self.ctx, &mut [Outgoing::new(to, data)], &mut [])?;
            }
            return Ok(());
        }
        let tree = self.last_tree.get(alg, n, me, root);
        if let Some(p) = tree.parent {
            self.channel
                .transfer(self.ctx, &mut [], &mut [Incoming::new(p, data)])?;
        }
        let data: &[u8] = data;
        let children = tree.children.iter().map(|&(c, _)| Outgoing::new(c, data));
        self.channel.transfer_each(self.ctx, children, [])
    }

    /// A small flat gather on the channel: every member sends `src` to the root, which
    /// copies its own into its block of `dst` and receives the others' into theirs at once.
    pub(super) fn gather_small(&self, root: usize, src: &[u8], dst: &mut [u8]) -> Result<()> {
        if self.me != root {
            return self
                .channel
                .transfer(self.ctx, &mut [Outgoing::new(root, src)], &mut []);
        }
        self.channel
            .transfer_each(self.ctx, [], others_into(dst, root, src))
    }

    /// A small flat scatter on the channel: the root sends block `i` of `src` to member `i`
    /// (all at once) and copies its own; the others receive theirs into `dst`.
    pub(super) fn scatter_small(&self, root: usize, src: &[u8], dst: &mut [u8]) -> Result<()> {
        if self.me != root {
            return self
                .channel
                .transfer(self.ctx, &mut [], &mut [Incoming::new(root, dst)]);
        }
        let b = dst.len();
        let blocks = src
            .chunks_exact(b)
            .enumerate()
            .filter(|&(i, _)| i != root)
            .map(|(i, block)| Outgoing::new(i, block));
        self.channel.transfer_each(self.ctx, blocks, [])?;
        copy_short(dst, &src[root * b..(root + 1) * b]);
        Ok(())
    }

    /// A small all-to-all of equal blocks by Bruck's dissemination at `radix`, as its
    /// schedule runs it (`algorithms::exchange::bruck_over`): work block j first holds
    /// this member's block for member `(me + j) % n`; in the phase at power `p` (1, r,
    /// r², …), for every digit d in 1..r whose group is not empty, the work blocks whose
    /// digit at `p` is d go packed to member `me + d·p` while as many arrive from
    /// `me − d·p`, all at once, and are unpacked into the same positions; at the end work
    /// block j holds member `(me − j) % n`'s block, which one pass puts in place. The work
    /// blocks and a send and a receive area per digit live in one scratch.
    #[inline(never)]
    fn bruck_exchange_small(&self, radix: usize, src: &[u8], dst: &mut [u8]) -> Result<()> {
        let (n, me) = (self.size(), self.me);
        let b = src.len() / n;
        // The positions whose digit at power p is d, ascending, without a division: runs
        // of p from d·p on, one every r·p.
        let group = move |p: usize, d: usize| {
            (0..n)
                .step_by(p * radix)
                .flat_map(move |base| base + d * p..(base + (d + 1) * p).min(n))
        };
        let powers = || std::iter::successors(Some(1), |p| Some(p * radix)).take_while(|&p| p < n);
        // The largest group of any phase and digit: each digit's areas hold that many.
        let most = powers()
            .flat_map(|p| (1..radix).map(move |d| group(p, d).count()))
            .max()
            .unwrap_or(0);
        let area = most * b;
        with_scratch(n * b + 2 * (radix - 1) * area, |tmp| {
            let (work, areas) = tmp.split_at_mut(n * b);
            let (send_areas, recv_areas) = areas.split_at_mut((radix - 1) * area);
            let at = |j: usize| j * b..(j + 1) * b;
            rotate(src, work, (n - me) * b);
            for p in powers() {
                let digits = || (1..radix).filter(move |&d| group(p, d).next().is_some());
                for (d, area) in (1..radix).zip(send_areas.chunks_exact_mut(area)) {
                    for (i, j) in group(p, d).enumerate() {
                        copy_short(&mut area[at(i)], &work[at(j)]);
                    }
                }
                let sends = digits().map(|d| {
                    let bytes = group(p, d).count() * b;
                    let area = &send_areas[(d - 1) * area..][..bytes];
                    Outgoing::new((me + d * p) % n, area)
                });
                let recvs = (1..radix)
                    .zip(recv_areas.chunks_exact_mut(area))
                    .filter(|&(d, _)| group(p, d).next().is_some())
                    .map(|(d, area)| {
                        let bytes = group(p, d).count() * b;
                        Incoming::new((me + n - d * p % n) % n, &mut area[..bytes])
                    });
                self.channel.transfer_each(self.ctx, sends, recvs)?;
                for (d, area) in (1..radix).zip(recv_areas.chunks_exact(area)) {
                    for (i, j) in group(p, d).enumerate() {
                        copy_short(&mut work[at(j)], &area[at(i)]);
                    }
                }
            }
            for (i, block) in dst.chunks_exact_mut(b).enumerate() {
                copy_short(block, &work[at((me + n - i) % n)]);
            }
            Ok(())
        })
    }

    /// A small binomial gather on the channel, as its schedule runs it
    /// (`algorithms::gather::binomial`): each member copies its block first into what its
    /// subtree collects (the root's `dst` when the root is member 0, scratch otherwise),
    /// receives its children's subtrees after it at once, and sends the whole to its
    /// parent; a root other than member 0 rotates its scratch into `dst`.
    #[inline(never)]
    pub(super) fn binomial_gather_small(
        &self,
        root: usize,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<()> {
        let (n, b) = (self.size(), src.len());
        let tree = Binomial::new(n, self.me, root);
        let collect = |into: &mut [u8]| -> Result<()> {
            copy_short(&mut into[..b], src);
            let (_, after_own) = into.split_at_mut(b);
            let mut rest = after_own;
            let recvs = tree.children().map(|(q, blocks)| {
                let (theirs, after) = std::mem::take(&mut rest).split_at_mut(blocks * b);
                rest = after;
                Incoming::new((tree.rel + q + root) % n, theirs)
            });
            self.channel.transfer_each(self.ctx, [], recvs)
        };
        if tree.rel == 0 && root == 0 {
            return collect(dst);
        }
        with_scratch(tree.span() * b, |tmp| {
            collect(tmp)?;
            match tree.parent() {
                Some(p) => {
                    let mut send = [Outgoing::new((p + root) % n, &*tmp)];
                    self.channel.transfer(self.ctx, &mut send, &mut [])
                }
                // Block j of scratch is member (root + j) % n's.
                None => {
                    rotate(tmp, dst, root * b);
                    Ok(())
                }
            }
        })
    }

    /// A small binomial scatter on the channel, as its schedule runs it
    /// (`algorithms::scatter::binomial`): each member receives its subtree's blocks from
    /// its parent (the root has them in `src`, rotated into scratch when the root is not
    /// member 0), sends its children theirs at once, and copies its own into `dst`.
    #[inline(never)]
    pub(super) fn binomial_scatter_small(
        &self,
        root: usize,
        src: &[u8],
        dst: &mut [u8],
    ) -> Result<()> {
        let (n, b) = (self.size(), dst.len());
        let tree = Binomial::new(n, self.me, root);
        let hand_on = |from: &[u8], dst: &mut [u8]| -> Result<()> {
            let sends = tree.children().map(|(q, blocks)| {
                let theirs = &from[q * b..(q + blocks) * b];
                Outgoing::new((tree.rel + q + root) % n, theirs)
            });
            self.channel.transfer_each(self.ctx, sends, [])?;
            copy_short(dst, &from[..b]);
            Ok(())
        };
        if tree.rel == 0 && root == 0 {
            return hand_on(src, dst);
        }
        with_scratch(tree.span() * b, |tmp| {
            match tree.parent() {
                Some(p) => {
                    let mut recv = [Incoming::new((p + root) % n, &mut *tmp)];
                    self.channel.transfer(self.ctx, &mut [], &mut recv)?;
                }
                // Block j of scratch is member (root + j) % n's.
                None => {
                    rotate(src, tmp, (n - root) * b);
                }
            }
            hand_on(tmp, dst)
        })
    }

    /// Recursive doubling on a power-of-two team straight on the channel: at distances 1,
    /// 2, 4, … each member swaps its partial result with `me ^ distance` and combines the
    /// partner's into its own, as the schedule's rounds do (the same partners, the same
    /// order of operands, so the same result).
    pub(super) fn allreduce_small<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let mut theirs = Block::ZERO;
        let theirs = theirs.as_mut(src.len());
        copy_short(cast_mut(dst), cast(src));
        let mut distance = 1;
        while distance < self.size() {
            let partner = self.me ^ distance;
            self.sendrecv(partner, dst, partner, theirs)?;
            combine(dst, theirs)?;
            distance *= 2;
        }
        Ok(())
    }

    /// Every member's vector to every other at once, and all n combined in member order,
    /// as the schedule's `all_broadcast` allreduce does (the same operands in the same
    /// order, so the same result).
    pub(super) fn allreduce_all_small<T: Pod>(
        &self,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let (n, me, len) = (self.size(), self.me, src.len());
        with_scratch::<T, _>(n * len, |all| {
            let sends = from_next(n, me).map(|j| Outgoing::new(j, cast(src)));
            let recvs = others_into_from_previous(cast_mut(all), me, cast(src));
            self.channel.transfer_each(self.ctx, sends, recvs)?;
            copy_short(cast_mut(dst), cast(&all[..len]));
            all.chunks_exact(len.max(1))
                .skip(1)
                .try_for_each(|theirs| combine(dst, theirs))
        })
    }

    /// A small allgather (`op` is [`Collective::Allgather`], `src` this member's block) or
    /// all-to-all of equal blocks ([`Collective::Exchange`], `src` a block per member) by
    /// `alg` on the channel; `None` where `alg` has no form here (then its schedule runs).
    #[inline]
    pub(super) fn to_all_small(
        &self,
        op: Collective,
        alg: Algorithm,
        src: &[u8],
        dst: &mut [u8],
    ) -> Option<Result<()>> {
        let (n, me) = (self.size(), self.me);
        // An allgather's block is its input (no division in its fast path).
        let b = match op {
            Collective::Allgather => src.len(),
            _ => src.len() / n,
        };
        let block = |j: usize| j * b..(j + 1) * b;
        let two = matches!(
            (op, alg),
            (
                Collective::Allgather,
                Algorithm::ALL_BROADCAST | Algorithm::RING
            ) | (Collective::Exchange, Algorithm::FLAT | Algorithm::PAIRWISE)
        );
        if two && n == 2 {
            // Two members: each of these rows is one message each way, this member's block
            // for the other (the whole `src` of an allgather) out and the other's in.
            let other = 1 - me;
            let (mine, theirs) = match op {
                Collective::Allgather => (src, src),
                _ => (&src[block(me)], &src[block(other)]),
            };
            copy_short(&mut dst[block(me)], mine);
            let into = &mut dst[block(other)];
            return Some(self.channel.sendrecv(self.ctx, other, theirs, other, into));
        }
        let done = match (op, alg) {
            // Every member sends its block to every other and receives theirs, at once.
            (Collective::Allgather, Algorithm::ALL_BROADCAST) => {
                let sends = from_next(n, me).map(|j| Outgoing::new(j, src));
                let recvs = others_into_from_previous(dst, me, src);
                self.channel.transfer_each(self.ctx, sends, recvs)
            }
            // n − 1 steps: the block received the step before goes on to the right, sent
            // from its place in `dst` while the next one lands in another.
            (Collective::Allgather, Algorithm::RING) => {
                copy_short(&mut dst[block(me)], src);
                let (right, left) = ((me + 1) % n, (me + n - 1) % n);
                (0..n - 1).try_for_each(|s| {
                    let (out, inb) = ((me + n - s) % n, (me + 2 * n - s - 1) % n);
                    let (sending, into) = read_and_write(dst, block(out), block(inb));
                    self.channel.sendrecv(self.ctx, right, sending, left, into)
                })
            }
            // Out of line, so that the code of the rows above, the usual small choices,
            // stays short.
            (Collective::Allgather, a) if a == Algorithm::bruck(2) => {
                self.bruck_allgather_small(src, dst)
            }
            // Out of line, as the allgather's.
            (Collective::Exchange, a) if a.same_family(Algorithm::bruck(2)) => {
                self.bruck_exchange_small(radix_of(a, n), src, dst)
            }
            // Every block at once.
            (Collective::Exchange, Algorithm::FLAT) => {
                let sends = from_next(n, me).map(|j| Outgoing::new(j, &src[block(j)]));
                let recvs = others_into_from_previous(dst, me, &src[block(me)]);
                self.channel.transfer_each(self.ctx, sends, recvs)
            }
            // Step s: to the member s ahead, from the member s behind.
            (Collective::Exchange, Algorithm::PAIRWISE) => {
                copy_short(&mut dst[block(me)], &src[block(me)]);
                (1..n).try_for_each(|s| {
                    let (to, from) = ((me + s) % n, (me + n - s) % n);
                    let into = &mut dst[block(from)];
                    self.channel
                        .sendrecv(self.ctx, to, &src[block(to)], from, into)
                })
            }
            _ => return None,
        };
        Some(done)
    }

    /// A small allgather by Bruck's dissemination, as its schedule runs it
    /// (`algorithms::allgather::bruck`): into scratch, where block j holds member
    /// `(me + j) % n`'s, at distances d = 1, 2, 4, … the first `min(d, n − d)` blocks go
    /// to `me − d` while as many land after them from `me + d`; then one rotation into
    /// `dst`.
    #[inline(never)]
    fn bruck_allgather_small(&self, src: &[u8], dst: &mut [u8]) -> Result<()> {
        let (n, me, b) = (self.size(), self.me, src.len());
        with_scratch(n * b, |tmp| {
            copy_short(&mut tmp[..b], src);
            let mut d = 1;
            while d < n {
                let bytes = d.min(n - d) * b;
                let (have, into) = tmp.split_at_mut(d * b);
                let (to, from) = ((me + n - d) % n, (me + d) % n);
                self.channel
                    .sendrecv(self.ctx, to, &have[..bytes], from, &mut into[..bytes])?;
                d *= 2;
            }
            rotate(tmp, dst, me * b);
            Ok(())
        })
    }

    /// A small reduction to `root` along `alg`'s k-nomial tree (flat: radix n) on the
    /// channel, as its schedule runs it (`algorithms::reduce::tree`, one segment): receive
    /// every child's partial result at once (the first straight into the accumulator),
    /// combine this member's input and then the other children's into it, pass it up.
    /// The accumulator is `dst` on the root, a stack block elsewhere; a leaf sends its
    /// input as it is.
    pub(super) fn reduce_small<T: Pod>(
        &self,
        alg: Algorithm,
        root: usize,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let (n, me, len) = (self.size(), self.me, src.len());
        let tree = self.last_tree.get(alg, n, me, root);
        let Some((&(first, _), others)) = tree.children.split_first() else {
            let Some(parent) = tree.parent else {
                // A team of one.
                copy_short(cast_mut(dst), cast(src));
                return Ok(());
            };
            let mut send = [Outgoing::new(parent, cast(src))];
            return self.channel.transfer(self.ctx, &mut send, &mut []);
        };
        // Stack blocks are made (and zeroed) only where used: not an accumulator on the
        // root (its `dst`), no slots for a single child (any tree's root at 2 ranks).
        let mut own;
        let acc: &mut [T] = match tree.parent {
            None => dst,
            Some(_) => {
                own = Block::ZERO;
                own.as_mut(len)
            }
        };
        // The other children's partial results, one after another (none for a single
        // child).
        with_scratch(others.len() * len, |slots: &mut [T]| -> Result<()> {
            let recvs = std::iter::once(Incoming::new(first, cast_mut(acc))).chain(
                others
                    .iter()
                    .zip(slots.chunks_exact_mut(len))
                    .map(|(&(c, _), slot)| Incoming::new(c, cast_mut(slot))),
            );
            self.channel.transfer_each(self.ctx, [], recvs)?;
            combine(acc, src)?;
            for slot in slots.chunks_exact(len) {
                combine(acc, slot)?;
            }
            Ok(())
        })?;
        match tree.parent {
            Some(parent) => {
                let mut send = [Outgoing::new(parent, cast(acc))];
                self.channel.transfer(self.ctx, &mut send, &mut [])
            }
            None => Ok(()),
        }
    }

    /// A small linear scan on the channel, as its schedule runs it
    /// (`algorithms::scan::linear`): the prefix up to the left neighbour arrives, this
    /// member's input joins it, and it goes on to the right (member 0 sends its input).
    pub(super) fn scan_small<T: Pod>(
        &self,
        exclusive: bool,
        src: &[T],
        dst: &mut [T],
        combine: &Combine<'_, T>,
    ) -> Result<()> {
        let (n, me) = (self.size(), self.me);
        let right = (me + 1 < n).then_some(me + 1);
        let send = |data: &[T]| match right {
            Some(to) => {
                let mut send = [Outgoing::new(to, cast(data))];
                self.channel.transfer(self.ctx, &mut send, &mut [])
            }
            None => Ok(()),
        };
        let receive = |into: &mut [T]| {
            let mut recv = [Incoming::new(me - 1, cast_mut(into))];
            self.channel.transfer(self.ctx, &mut [], &mut recv)
        };
        if me == 0 {
            if exclusive {
                dst.fill(T::zeroed());
            } else {
                copy_short(cast_mut(dst), cast(src));
            }
            return send(src);
        }
        if exclusive {
            let mut prefix = Block::ZERO;
            let prefix = prefix.as_mut(src.len());
            receive(prefix)?;
            copy_short(cast_mut(dst), cast(prefix));
            combine(prefix, src)?;
            return send(prefix);
        }
        receive(dst)?;
        combine(dst, src)?;
        send(dst)
    }
}
