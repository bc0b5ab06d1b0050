//! Every algorithm of the registry, written once as the rounds of a schedule (see the
//! `schedule` module): the blocking call runs these rounds over the caller's buffers,
//! the nonblocking one over its own, so the two forms always run the same algorithm.
//!
//! Each function adds one member's rounds for one operation to a [`Builder`] whose `Src`
//! holds the member's input and whose `Dst` is the output, laid out as the blocking call
//! lays them out. `n` is the team size and `me` this member's index; a rooted operation
//! works in ranks relative to the root (`rel`, the root at 0).
//!
//! This module must never send or wait: it only writes down who sends what to whom.

use std::ops::Range;

use bytemuck::Pod;

use super::registry::radix_of;
use super::schedule::{Buf, Builder, Local, Place};
use super::topology::{split_range, Knomial};
use super::Algorithm;

type B<'r, 'b, T> = Builder<'r, 'b, T>;

fn place(buf: Buf, range: Range<usize>) -> Place {
    (buf, range)
}

/// Block `j` of `len` elements.
fn block(j: usize, len: usize) -> Range<usize> {
    j * len..(j + 1) * len
}

fn copy(from: Place, to: Place) -> Local {
    Local::Copy { from, to }
}

/// Steps that put block `j` of `from` at block `(j + shift) % n` of `to` (two copies).
fn rotate(from: Buf, to: Buf, n: usize, shift: usize, len: usize) -> [Local; 2] {
    let head = n - shift; // blocks 0..head land at shift..n
    [
        copy(place(from, 0..head * len), place(to, shift * len..n * len)),
        copy(place(from, head * len..n * len), place(to, 0..shift * len)),
    ]
}

/// Steps that put block `(j + shift) % n` of `from` at block `j` of `to` (two copies):
/// the inverse of [`rotate`].
fn rotate_back(from: Buf, to: Buf, n: usize, shift: usize, len: usize) -> [Local; 2] {
    let head = n - shift; // blocks shift..n land at 0..head
    [
        copy(place(from, shift * len..n * len), place(to, 0..head * len)),
        copy(place(from, 0..shift * len), place(to, head * len..n * len)),
    ]
}

/// `(member, block i of buf)` for every member but `root`: a flat rooted operation's
/// messages.
fn all_but(root: usize, n: usize, buf: Buf, len: usize) -> impl Iterator<Item = (usize, Place)> {
    (0..n)
        .filter(move |&i| i != root)
        .map(move |i| (i, place(buf, block(i, len))))
}

/// A member's place in the binomial tree of a rooted gather or scatter: its rank relative
/// to the root, its tree, and how many members its subtree spans (their blocks, in
/// relative order, are what it holds).
struct Subtree {
    rel: usize,
    tree: Knomial,
    span: usize,
}

impl Subtree {
    fn new(n: usize, me: usize, root: usize) -> Subtree {
        let rel = (me + n - root) % n;
        let tree = Knomial::new(2, n, rel);
        let span = tree.subtree_end - rel;
        Subtree { rel, tree, span }
    }

    /// `(child, the child's subtree's blocks in buf)` for every child.
    fn children<'t>(
        &'t self,
        n: usize,
        root: usize,
        buf: Buf,
        len: usize,
    ) -> impl Iterator<Item = (usize, Place)> + 't {
        self.tree.children.iter().map(move |&c| {
            let end = Knomial::new(2, n, c).subtree_end;
            let range = (c - self.rel) * len..(end - self.rel) * len;
            ((c + root) % n, place(buf, range))
        })
    }
}

/// Segments of a vector of `len` elements, one channel chunk each (at least one, empty
/// when `len` is 0).
fn segments<T: Pod>(b: &B<'_, '_, T>, len: usize) -> impl Iterator<Item = Range<usize>> {
    let seg = (b.chunk() / std::mem::size_of::<T>().max(1)).max(1);
    (0..len.div_ceil(seg).max(1)).map(move |k| k * seg..((k + 1) * seg).min(len))
}

/// Barrier: dissemination (`ceil(log2 n)` rounds of signals) or flat (every member
/// signals member 0, which releases all).
pub(super) fn barrier<'r, 'b, T: Pod>(
    mut b: B<'r, 'b, T>,
    alg: Algorithm,
    n: usize,
    me: usize,
) -> B<'r, 'b, T> {
    let signal = || place(Buf::Dst, 0..0);
    match alg {
        Algorithm::Flat if me == 0 => b.round([], (1..n).map(|i| (i, signal())), []).round(
            (1..n).map(|i| (i, signal())),
            [],
            [],
        ),
        Algorithm::Flat => b
            .round([(0, signal())], [], [])
            .round([], [(0, signal())], []),
        _ => {
            for (to, from) in dissemination(n, me) {
                b = b.round([(to, signal())], [(from, signal())], []);
            }
            b
        }
    }
}

/// The dissemination barrier's rounds for member `me` of `n`: in the round of distance
/// `d` (1, 2, 4, …, below `n`) it signals member `me + d` and hears from `me − d`, modulo
/// `n`, as (to, from). The blocking barrier runs them on the channel directly.
pub(super) fn dissemination(n: usize, me: usize) -> impl Iterator<Item = (usize, usize)> {
    std::iter::successors(Some(1usize), |d| d.checked_mul(2))
        .take_while(move |&d| d < n)
        .map(move |d| ((me + d) % n, (me + n - d) % n))
}

/// Broadcast of `Dst[0..len]` (filled on the root): a k-nomial tree (flat: radix n,
/// binomial: 2) or a pipelined chain (each member forwards segment k − 1 while it
/// receives segment k).
pub(super) fn broadcast<'r, 'b, T: Pod>(
    mut b: B<'r, 'b, T>,
    alg: Algorithm,
    n: usize,
    me: usize,
    root: usize,
    len: usize,
) -> B<'r, 'b, T> {
    if n == 1 {
        return b;
    }
    let rel = (me + n - root) % n;
    let data = || place(Buf::Dst, 0..len);
    if alg == Algorithm::Chain {
        let (prev, next) = ((me + n - 1) % n, (me + 1) % n);
        let segs: Vec<Range<usize>> = segments(&b, len).collect();
        let (first, last) = (rel == 0, rel == n - 1);
        for k in 0..=segs.len() {
            let send = (!last && k > 0).then(|| (next, place(Buf::Dst, segs[k - 1].clone())));
            let recv = (!first && k < segs.len()).then(|| (prev, place(Buf::Dst, segs[k].clone())));
            if send.is_some() || recv.is_some() {
                b = b.round(send, recv, []);
            }
        }
        return b;
    }
    let tree = Knomial::new(radix_of(alg, n), n, rel);
    if let Some(p) = tree.parent {
        b = b.round([], [((p + root) % n, data())], []);
    }
    if tree.children.is_empty() {
        return b;
    }
    b.round(
        tree.children.iter().map(|&c| ((c + root) % n, data())),
        [],
        [],
    )
}

/// Reduction of `Src[0..len]` into `Dst[0..len]` on the root: a k-nomial tree (flat:
/// radix n), pipelined in segments of one chunk: a member receives segment k of its first
/// child straight into its accumulator and of every other child into a slot of scratch,
/// combines its own input and the slots into the accumulator while they are in cache and
/// passes it up, so no member holds more than a segment per child beyond its accumulator.
/// The accumulator is `Dst` on the root, `Src` itself on a leaf, scratch elsewhere; it
/// never starts as a copy of the input (at 2 ranks and 32 KiB that copy was a quarter of
/// the call). The combination order (first child, own, other children) needs the
/// operation commutative, as every reduction is.
pub(super) fn reduce<'r, 'b, T: Pod>(
    mut b: B<'r, 'b, T>,
    alg: Algorithm,
    n: usize,
    me: usize,
    root: usize,
    len: usize,
) -> B<'r, 'b, T> {
    let rel = (me + n - root) % n;
    let tree = Knomial::new(radix_of(alg, n), n, rel);
    let kids = tree.children.len();
    let acc = match (tree.parent, kids) {
        (None, _) => Buf::Dst,
        (Some(_), 0) => Buf::Src,
        _ => Buf::Tmp,
    };
    let segs: Vec<Range<usize>> = segments(&b, len).collect();
    let width = segs[0].len();
    let base = if acc == Buf::Tmp { len } else { 0 };
    b = b.scratch(base + kids.saturating_sub(1) * width);
    if acc != Buf::Src && kids == 0 {
        b = b.local([copy(place(Buf::Src, 0..len), place(acc, 0..len))]);
    }
    for range in segs {
        // Child i > 0's segment: a slot of scratch.
        let slot = |i: usize| {
            let at = base + (i - 1) * width;
            place(Buf::Tmp, at..at + range.len())
        };
        if kids > 0 {
            let into = |i: usize| {
                if i == 0 {
                    place(acc, range.clone())
                } else {
                    slot(i)
                }
            };
            let own = Local::Combine {
                from: place(Buf::Src, range.clone()),
                into: place(acc, range.clone()),
            };
            let others = (1..kids).map(|i| Local::Combine {
                from: slot(i),
                into: place(acc, range.clone()),
            });
            b = b.round(
                [],
                tree.children
                    .iter()
                    .enumerate()
                    .map(|(i, &c)| ((c + root) % n, into(i))),
                std::iter::once(own).chain(others),
            );
        }
        if let Some(p) = tree.parent {
            b = b.round([((p + root) % n, place(acc, range))], [], []);
        }
    }
    b
}

/// Allreduce of `Src[0..len]` into `Dst[0..len]`: reduce to member 0 then broadcast
/// (binomial both), recursive doubling, a ring (reduce-scatter then allgather; with
/// fewer elements than members, recursive doubling) or Rabenseifner's (the same two
/// halves in logarithmically many rounds).
pub(super) fn allreduce<'r, 'b, T: Pod>(
    b: B<'r, 'b, T>,
    alg: Algorithm,
    n: usize,
    me: usize,
    len: usize,
) -> B<'r, 'b, T> {
    match alg {
        Algorithm::ReduceBroadcast => {
            let b = reduce(b, Algorithm::Binomial, n, me, 0, len);
            broadcast(b, Algorithm::Binomial, n, me, 0, len)
        }
        Algorithm::Ring if len >= n => allreduce_ring(b, n, me, len),
        Algorithm::Rabenseifner => allreduce_rabenseifner(b, n, me, len),
        _ => allreduce_recursive_doubling(b, n, me, len),
    }
}

/// The largest power of two ≤ n (n ≥ 1).
fn largest_power_of_two(n: usize) -> usize {
    1 << n.ilog2()
}

/// The members of an allreduce over `n` as a power of two `pow` (the largest ≤ n): the
/// first `2·(n − pow)` members fold pairwise (the even one sends its data to the odd one,
/// which combines it and takes part as virtual rank `me / 2`; the even one waits for the
/// result, [`PowerOfTwo::unfold`]); the rest are virtual rank `me − (n − pow)`.
struct PowerOfTwo {
    pow: usize,
    rem: usize,
    /// This member's virtual rank, if it takes part.
    vrank: Option<usize>,
}

impl PowerOfTwo {
    /// Fold `Dst[0..len]` (this member's data) in, combining through `Tmp[0..len]`.
    fn fold<'r, 'b, T: Pod>(
        b: B<'r, 'b, T>,
        n: usize,
        me: usize,
        len: usize,
    ) -> (B<'r, 'b, T>, PowerOfTwo) {
        let pow = largest_power_of_two(n);
        let rem = n - pow;
        let all = |buf: Buf| place(buf, 0..len);
        let (b, vrank) = if me >= 2 * rem {
            (b, Some(me - rem))
        } else if me.is_multiple_of(2) {
            (b.round([(me + 1, all(Buf::Dst))], [], []), None)
        } else {
            let combine = Local::Combine {
                from: all(Buf::Tmp),
                into: all(Buf::Dst),
            };
            (
                b.round([], [(me - 1, all(Buf::Tmp))], [combine]),
                Some(me / 2),
            )
        };
        (b, PowerOfTwo { pow, rem, vrank })
    }

    /// Whether a power-of-two allreduce over `n` members copies its input to the output
    /// before anything else: where members are folded in (the fold sends and combines
    /// the output), or alone. Otherwise its first combination writes the output from the
    /// input and what arrived in one pass ([`Local::CopyCombine`]; 2 ranks, 1 MiB:
    /// recursive doubling 185-199 -> 164 µs, Rabenseifner 164 -> 134), and what it never
    /// combines arrives whole.
    fn copies_input_first(n: usize) -> bool {
        n < 2 || !n.is_power_of_two()
    }

    /// The member behind virtual rank `v`.
    fn real(&self, v: usize) -> usize {
        if v < self.rem {
            2 * v + 1
        } else {
            v + self.rem
        }
    }

    /// Where this member's first exchange after the fold sends `range` from: its input, as
    /// long as `Dst` still holds only the copy of it (it combined nothing in the fold). A
    /// send of the input may be read directly by the partner (`schedule`), where one of
    /// the output, just written, goes through the channel: at 2 ranks and 256 KiB the
    /// recursive doubling took 57 µs that way, against 15 for an exchange of the input.
    fn first_send(&self, me: usize, range: Range<usize>) -> Place {
        if me >= 2 * self.rem {
            place(Buf::Src, range)
        } else {
            place(Buf::Dst, range)
        }
    }

    /// Hand the result in `Dst[0..len]` back to the members folded in.
    fn unfold<'r, 'b, T: Pod>(&self, b: B<'r, 'b, T>, me: usize, len: usize) -> B<'r, 'b, T> {
        let all = place(Buf::Dst, 0..len);
        match me {
            _ if me >= 2 * self.rem => b,
            _ if me.is_multiple_of(2) => b.round([], [(me + 1, all)], []),
            _ => b.round([(me - 1, all)], [], []),
        }
    }
}

/// Recursive doubling over the largest power of two ≤ n (the others folded in).
fn allreduce_recursive_doubling<'r, 'b, T: Pod>(
    mut b: B<'r, 'b, T>,
    n: usize,
    me: usize,
    len: usize,
) -> B<'r, 'b, T> {
    let all = |buf: Buf| place(buf, 0..len);
    let copy_first = PowerOfTwo::copies_input_first(n);
    b = b.scratch(len);
    if copy_first {
        b = b.local([copy(all(Buf::Src), all(Buf::Dst))]);
    }
    let (mut b, fold) = PowerOfTwo::fold(b, n, me, len);
    if let Some(v) = fold.vrank {
        let mut mask = 1;
        while mask < fold.pow {
            let partner = fold.real(v ^ mask);
            let send = if mask == 1 {
                fold.first_send(me, 0..len)
            } else {
                all(Buf::Dst)
            };
            let combine = Local::combine(all(Buf::Tmp), all(Buf::Dst), mask == 1 && !copy_first);
            b = b.round([(partner, send)], [(partner, all(Buf::Tmp))], [combine]);
            mask *= 2;
        }
    }
    fold.unfold(b, me, len)
}

/// Rabenseifner's allreduce over the largest power of two `pow` ≤ n (the others folded
/// in): the data split into `pow` parts; a reduce-scatter by recursive halving (at
/// distance pow/2, pow/4, ..., 1 a member keeps the half of its parts on its side of the
/// partner and sends the other half, so afterwards part v is complete on virtual rank v),
/// then an allgather by recursive doubling (distances 1, 2, ..., pow/2, the parts held
/// doubling each time). With fewer elements than `pow`, recursive doubling.
fn allreduce_rabenseifner<'r, 'b, T: Pod>(
    mut b: B<'r, 'b, T>,
    n: usize,
    me: usize,
    len: usize,
) -> B<'r, 'b, T> {
    let pow = largest_power_of_two(n);
    if len < pow {
        return allreduce_recursive_doubling(b, n, me, len);
    }
    // Elements of parts lo..hi.
    let parts =
        |lo: usize, hi: usize| split_range(len, pow, lo).start..split_range(len, pow, hi - 1).end;
    let copy_first = PowerOfTwo::copies_input_first(n);
    b = b.scratch(len);
    if copy_first {
        b = b.local([copy(place(Buf::Src, 0..len), place(Buf::Dst, 0..len))]);
    }
    let (mut b, fold) = PowerOfTwo::fold(b, n, me, len);
    if let Some(v) = fold.vrank {
        let (mut lo, mut hi) = (0, pow);
        let mut mask = pow / 2;
        while mask >= 1 {
            let partner = fold.real(v ^ mask);
            let mid = (lo + hi) / 2;
            let (keep, give) = if v & mask == 0 {
                ((lo, mid), (mid, hi))
            } else {
                ((mid, hi), (lo, mid))
            };
            let kept = parts(keep.0, keep.1);
            let incoming = place(Buf::Tmp, 0..kept.len());
            let given = parts(give.0, give.1);
            let send = if mask == pow / 2 {
                fold.first_send(me, given)
            } else {
                place(Buf::Dst, given)
            };
            // Without a copy of the input first, the first combination starts from it.
            let combine = Local::combine(
                incoming.clone(),
                place(Buf::Dst, kept),
                mask == pow / 2 && !copy_first,
            );
            b = b.round([(partner, send)], [(partner, incoming)], [combine]);
            (lo, hi) = keep;
            mask /= 2;
        }
        mask = 1;
        while mask < pow {
            let partner = fold.real(v ^ mask);
            let theirs = if v & mask == 0 {
                (hi, hi + mask)
            } else {
                (lo - mask, lo)
            };
            b = b.round(
                [(partner, place(Buf::Dst, parts(lo, hi)))],
                [(partner, place(Buf::Dst, parts(theirs.0, theirs.1)))],
                [],
            );
            (lo, hi) = (lo.min(theirs.0), hi.max(theirs.1));
            mask *= 2;
        }
    }
    fold.unfold(b, me, len)
}

/// Ring: n − 1 reduce-scatter steps (after them block `(me + 1) % n` is complete here),
/// then n − 1 allgather steps of the completed blocks.
fn allreduce_ring<'r, 'b, T: Pod>(
    mut b: B<'r, 'b, T>,
    n: usize,
    me: usize,
    len: usize,
) -> B<'r, 'b, T> {
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let part = |k: usize| split_range(len, n, k % n);
    b = b.scratch(len.div_ceil(n));
    // No copy of the input first (but alone, the copy is the result): each block this
    // member combines is its input's block combined with the incoming one in one pass,
    // and its own block (sent from the input, which the partner may read directly, see
    // `PowerOfTwo::first_send`) arrives complete in the allgather (2 ranks, 1 MiB: 167 ->
    // 135 µs).
    if n == 1 {
        b = b.local([copy(place(Buf::Src, 0..len), place(Buf::Dst, 0..len))]);
    }
    for s in 0..n - 1 {
        let (out, inb) = (part(me + n - s), part(me + 2 * n - s - 1));
        let incoming = place(Buf::Tmp, 0..inb.len());
        let from = if s == 0 { Buf::Src } else { Buf::Dst };
        b = b.round(
            [(right, place(from, out))],
            [(left, incoming.clone())],
            [Local::CopyCombine {
                from: incoming,
                into: place(Buf::Dst, inb),
            }],
        );
    }
    for s in 0..n - 1 {
        let (out, inb) = (part(me + 1 + n - s), part(me + n - s));
        b = b.round(
            [(right, place(Buf::Dst, out))],
            [(left, place(Buf::Dst, inb))],
            [],
        );
    }
    b
}

/// Gather of every member's `Src[0..len]` into `Dst[0..n·len]` on the root, in rank
/// order: flat (the root receives every block at once) or a binomial tree (member `rel`
/// collects the blocks of relative ranks `rel..subtree_end` and passes them up; the root
/// collects straight into `Dst` when it is member 0, into scratch otherwise).
pub(super) fn gather<'r, 'b, T: Pod>(
    mut b: B<'r, 'b, T>,
    alg: Algorithm,
    n: usize,
    me: usize,
    root: usize,
    len: usize,
) -> B<'r, 'b, T> {
    if alg == Algorithm::Flat {
        if me != root {
            return b.round([(root, place(Buf::Src, 0..len))], [], []);
        }
        let own = copy(place(Buf::Src, 0..len), place(Buf::Dst, block(me, len)));
        return b
            .local([own])
            .round([], all_but(root, n, Buf::Dst, len), []);
    }
    let sub = Subtree::new(n, me, root);
    let into = if sub.rel == 0 && root == 0 {
        Buf::Dst
    } else {
        Buf::Tmp
    };
    if into == Buf::Tmp {
        b = b.scratch(sub.span * len);
    }
    b = b.local([copy(place(Buf::Src, 0..len), place(into, 0..len))]);
    if !sub.tree.children.is_empty() {
        b = b.round([], sub.children(n, root, into, len), []);
    }
    match sub.tree.parent {
        Some(p) => b.round([((p + root) % n, place(into, 0..sub.span * len))], [], []),
        None if into == Buf::Tmp => b.round([], [], rotate(Buf::Tmp, Buf::Dst, n, root, len)),
        None => b,
    }
}

/// Allgather of every member's `Src[0..len]` into `Dst[0..n·len]`: a ring (n − 1
/// neighbour steps), Bruck's dissemination (`ceil(log2 n)` rounds into scratch, where
/// block j holds member `(me + j) % n`'s, then one rotation), a binomial gather to
/// member 0 and a binomial broadcast of the whole, or every member broadcasting its
/// block to all at once.
pub(super) fn allgather<'r, 'b, T: Pod>(
    mut b: B<'r, 'b, T>,
    alg: Algorithm,
    n: usize,
    me: usize,
    len: usize,
) -> B<'r, 'b, T> {
    match alg {
        Algorithm::GatherBroadcast => {
            let b = gather(b, Algorithm::Binomial, n, me, 0, len);
            broadcast(b, Algorithm::Binomial, n, me, 0, n * len)
        }
        Algorithm::AllBroadcast => {
            let others = (0..n).filter(|&j| j != me);
            b.local([copy(
                place(Buf::Src, 0..len),
                place(Buf::Dst, block(me, len)),
            )])
            .round(
                others.clone().map(|j| (j, place(Buf::Src, 0..len))),
                others.map(|i| (i, place(Buf::Dst, block(i, len)))),
                [],
            )
        }
        Algorithm::Bruck(_) => {
            b = b
                .scratch(n * len)
                .local([copy(place(Buf::Src, 0..len), place(Buf::Tmp, 0..len))]);
            let mut dist = 1;
            while dist < n {
                let count = dist.min(n - dist);
                b = b.round(
                    [((me + n - dist) % n, place(Buf::Tmp, 0..count * len))],
                    [(
                        (me + dist) % n,
                        place(Buf::Tmp, dist * len..(dist + count) * len),
                    )],
                    [],
                );
                dist *= 2;
            }
            b.round([], [], rotate(Buf::Tmp, Buf::Dst, n, me, len))
        }
        _ => {
            let at = move |k: usize| place(Buf::Dst, block(k % n, len));
            b = b.local([copy(place(Buf::Src, 0..len), at(me))]);
            for s in 0..n.saturating_sub(1) {
                b = b.round(
                    [((me + 1) % n, at(me + n - s))],
                    [((me + n - 1) % n, at(me + 2 * n - s - 1))],
                    [],
                );
            }
            b
        }
    }
}

/// Scatter of the root's `Src[0..n·count]` (block i to member i) into every member's
/// `Dst[0..count]`: flat (the root sends every block at once) or a binomial tree (each
/// member receives its subtree's blocks and passes its children theirs).
pub(super) fn scatter<'r, 'b, T: Pod>(
    mut b: B<'r, 'b, T>,
    alg: Algorithm,
    n: usize,
    me: usize,
    root: usize,
    count: usize,
) -> B<'r, 'b, T> {
    let mine = place(Buf::Dst, 0..count);
    if alg == Algorithm::Flat {
        if me != root {
            return b.round([], [(root, mine)], []);
        }
        // The root's own block is copied once the others' are on their way (offered, for
        // long ones), so the copy overlaps their reads.
        return b.round(
            all_but(root, n, Buf::Src, count),
            [],
            [copy(place(Buf::Src, block(me, count)), mine)],
        );
    }
    let sub = Subtree::new(n, me, root);
    // The blocks of this member's subtree, in relative order: the root's own input when
    // it is member 0, scratch otherwise.
    let from = if sub.rel == 0 && root == 0 {
        Buf::Src
    } else {
        Buf::Tmp
    };
    if from == Buf::Tmp {
        b = b.scratch(sub.span * count);
    }
    match sub.tree.parent {
        Some(p) => {
            let all = place(Buf::Tmp, 0..sub.span * count);
            b = b.round([], [((p + root) % n, all)], []);
        }
        // Block j of scratch is member (j + root) % n's.
        None if from == Buf::Tmp => b = b.local(rotate_back(Buf::Src, Buf::Tmp, n, root, count)),
        None => {}
    }
    if !sub.tree.children.is_empty() {
        b = b.round(sub.children(n, root, from, count), [], []);
    }
    b.round([], [], [copy(place(from, 0..count), mine)])
}

/// All-to-all: `send(j)` is the range of `Src` for member j, `recv(i)` the range of
/// `Dst` from member i; this member's own block is copied first. Pairwise (n − 1 steps,
/// each with one partner), flat (every block at once) or Bruck's dissemination at radix r
/// ([`exchange_bruck`]), which needs equal blocks (`uniform`: their length); with blocks of
/// varying length it runs pairwise.
pub(super) fn exchange<'r, 'b, T: Pod>(
    mut b: B<'r, 'b, T>,
    alg: Algorithm,
    n: usize,
    me: usize,
    send: &dyn Fn(usize) -> Range<usize>,
    recv: &dyn Fn(usize) -> Range<usize>,
    uniform: Option<usize>,
) -> B<'r, 'b, T> {
    if let (Algorithm::Bruck(radix), Some(len)) = (alg, uniform) {
        return exchange_bruck(b, radix as usize, n, me, len);
    }
    b = b.local([copy(place(Buf::Src, send(me)), place(Buf::Dst, recv(me)))]);
    if alg == Algorithm::Flat {
        let others = (0..n).filter(|&j| j != me);
        return b.round(
            others.clone().map(|j| (j, place(Buf::Src, send(j)))),
            others.map(|i| (i, place(Buf::Dst, recv(i)))),
            [],
        );
    }
    for s in 1..n {
        let (to, from) = ((me + s) % n, (me + n - s) % n);
        b = b.round(
            [(to, place(Buf::Src, send(to)))],
            [(from, place(Buf::Dst, recv(from)))],
            [],
        );
    }
    b
}

/// Inclusive (or exclusive) prefix reduction of `Src[0..len]` into `Dst[0..len]`
/// (member 0's exclusive result is zeros): linear (the prefix passes from rank to rank)
/// or recursive doubling (Hillis–Steele: after round k the inclusive prefix covers
/// 2^(k+1) members ending here).
pub(super) fn scan<'r, 'b, T: Pod>(
    mut b: B<'r, 'b, T>,
    alg: Algorithm,
    n: usize,
    me: usize,
    len: usize,
    exclusive: bool,
) -> B<'r, 'b, T> {
    let all = |buf: Buf| place(buf, 0..len);
    let src = || all(Buf::Src);
    let dst = || all(Buf::Dst);
    if alg == Algorithm::Linear {
        // The prefix up to the left neighbour arrives (in scratch, or in the output for an
        // inclusive scan); prefix op src goes right (member 0's prefix is its input, sent
        // as it is). Only the exclusive scan needs scratch.
        if exclusive {
            b = b.scratch(len);
        }
        if me == 0 {
            b = b.local([if exclusive {
                Local::Zero(dst())
            } else {
                copy(src(), dst())
            }]);
        } else if exclusive {
            // The prefix so far is this member's output; with its input, the next one's.
            let after = [
                copy(all(Buf::Tmp), dst()),
                Local::Combine {
                    from: src(),
                    into: all(Buf::Tmp),
                },
            ];
            b = b.round([], [(me - 1, all(Buf::Tmp))], after);
        } else {
            // Inclusive: the prefix arrives straight in the output, with no copy out of
            // scratch (2 ranks, `bench coll`: 256 KiB 23.6 -> 17.9 µs, 1 MiB 181 -> 158-175).
            let after = [Local::Combine {
                from: src(),
                into: dst(),
            }];
            b = b.round([], [(me - 1, dst())], after);
        }
        if me + 1 < n {
            let prefix = match (me, exclusive) {
                (0, _) => src(),
                (_, true) => all(Buf::Tmp),
                (_, false) => dst(),
            };
            b = b.round([(me + 1, prefix)], [], []);
        }
        return b;
    }
    // Inclusive prefix in `Dst` (inclusive) or `Tmp[0..len]` (exclusive, whose result
    // gathers in `Dst`); what arrives lands after it in scratch.
    let inclusive = if exclusive { all(Buf::Tmp) } else { dst() };
    let base = if exclusive { len } else { 0 };
    let incoming = place(Buf::Tmp, base..base + len);
    b = b
        .scratch(base + len)
        .local([copy(src(), inclusive.clone())]);
    if exclusive {
        b = b.local([Local::Zero(dst())]);
    }
    let mut first = true;
    let mut dist = 1;
    while dist < n {
        let to = (me + dist < n).then_some(me + dist);
        let from = (me >= dist).then(|| me - dist);
        let mut after = Vec::with_capacity(2);
        if from.is_some() {
            if exclusive {
                after.push(if first {
                    copy(incoming.clone(), dst())
                } else {
                    Local::Combine {
                        from: incoming.clone(),
                        into: dst(),
                    }
                });
                first = false;
            }
            after.push(Local::Combine {
                from: incoming.clone(),
                into: inclusive.clone(),
            });
        }
        b = b.round(
            to.map(|t| (t, inclusive.clone())),
            from.map(|f| (f, incoming.clone())),
            after,
        );
        dist *= 2;
    }
    b
}

/// Bruck's dissemination all-to-all with radix `r` (seed 004 §3.4) over equal blocks of
/// `len`: scratch block j first holds this member's block for member `(me + j) % n`; in
/// phase k, for every digit d in 1..r, the blocks whose k-th base-r digit is d go
/// (packed) to member `me + d·r^k` while the same positions arrive from `me − d·r^k`; a
/// block at position j travels j members in all, so at the end position j holds the block
/// from member `me − j`, which one unpacking puts in place. `⌈log_r n⌉` phases of r − 1
/// messages each, every block moving up to `⌈log_r n⌉` times: fewer, larger messages
/// than pairwise, for small blocks.
pub(super) fn exchange_bruck<'r, 'b, T: Pod>(
    mut b: B<'r, 'b, T>,
    radix: usize,
    n: usize,
    me: usize,
    len: usize,
) -> B<'r, 'b, T> {
    let digit = |j: usize, power: usize| j / power % radix;
    let mut phases = Vec::new(); // (power, [(d, positions)])
    let mut power = 1;
    while power < n {
        let groups: Vec<(usize, Vec<usize>)> = (1..radix)
            .map(|d| (d, (0..n).filter(|&j| digit(j, power) == d).collect()))
            .filter(|(_, positions): &(usize, Vec<usize>)| !positions.is_empty())
            .collect();
        phases.push((power, groups));
        power *= radix;
    }
    // Scratch: the n working blocks, then for each digit a send area and a receive area
    // of the largest group.
    let most = phases
        .iter()
        .flat_map(|(_, g)| g.iter().map(|(_, p)| p.len()))
        .max()
        .unwrap_or(0);
    let area = most * len;
    let send_at = |d: usize| n * len + (d - 1) * 2 * area;
    let recv_at = |d: usize| send_at(d) + area;
    b = b.scratch(n * len + (radix - 1) * 2 * area);
    let work = |j: usize| place(Buf::Tmp, block(j, len));
    // Block j of the work area is this member's block for member (me + j) % n.
    b = b.local(rotate_back(Buf::Src, Buf::Tmp, n, me, len));
    // The copies between the work blocks of `groups` and their packed slots in the area
    // at `at(d)`: into the area (packing for a send) or out of it (unpacking).
    let packed = |groups: &[(usize, Vec<usize>)], at: &dyn Fn(usize) -> usize, out: bool| {
        let mut copies = Vec::new();
        for (d, positions) in groups {
            for (i, &j) in positions.iter().enumerate() {
                let slot = place(Buf::Tmp, at(*d) + i * len..at(*d) + (i + 1) * len);
                copies.push(if out {
                    copy(slot, work(j))
                } else {
                    copy(work(j), slot)
                });
            }
        }
        copies
    };
    if let Some((_, groups)) = phases.first() {
        b = b.local(packed(groups, &send_at, false));
    }
    for (k, (power, groups)) in phases.iter().enumerate() {
        let mut after = packed(groups, &recv_at, true);
        if let Some((_, next)) = phases.get(k + 1) {
            after.extend(packed(next, &send_at, false));
        }
        b = b.round(
            groups.iter().map(|(d, p)| {
                (
                    (me + d * power) % n,
                    place(Buf::Tmp, send_at(*d)..send_at(*d) + p.len() * len),
                )
            }),
            groups.iter().map(|(d, p)| {
                (
                    (me + n - d * power % n) % n,
                    place(Buf::Tmp, recv_at(*d)..recv_at(*d) + p.len() * len),
                )
            }),
            after,
        );
    }
    // Position j holds the block from member (me − j) % n: Dst block i = work (me − i).
    let steps: Vec<Local> = (0..n)
        .map(|i| copy(work((me + n - i) % n), place(Buf::Dst, block(i, len))))
        .collect();
    b.round([], [], steps)
}
