//! The allreduce's algorithms, each combining every member's `Src[0..len]` into every
//! member's `Dst[0..len]`: a reduce then a broadcast (binomial both), recursive doubling,
//! a ring (reduce-scatter then allgather; with fewer elements than members, recursive
//! doubling), Rabenseifner's (the same two halves in logarithmically many rounds), and
//! every member sending its vector to all at once, each combining all of them.

use super::*;
use crate::model::team::cost::{terms, tree_spread, Work};
use crate::model::team::topology::split_range;

pub(super) const ROWS: &[Row] = &[
    row(
        Collective::Allreduce,
        Algorithm::REDUCE_BROADCAST,
        "reduce_broadcast",
        "binomial reduce, then binomial broadcast",
        reduce_broadcast,
        reduce_broadcast_work,
    ),
    row(
        Collective::Allreduce,
        Algorithm::RECURSIVE_DOUBLING,
        "recursive_doubling",
        "log2 n pairwise swaps (others folded in)",
        recursive_doubling,
        recursive_doubling_work,
    ),
    row(
        Collective::Allreduce,
        Algorithm::RING,
        "ring",
        "ring reduce-scatter, then ring allgather",
        ring,
        ring_work,
    ),
    row(
        Collective::Allreduce,
        Algorithm::RABENSEIFNER,
        "rabenseifner",
        "recursive-halving reduce-scatter, then recursive-doubling allgather",
        rabenseifner,
        rabenseifner_work,
    ),
    row(
        Collective::Allreduce,
        Algorithm::ALL_BROADCAST,
        "all_broadcast",
        "every member sends its vector to all at once; each combines them in member order",
        all_broadcast,
        all_broadcast_work,
    ),
];

/// A binomial reduce to member 0, then a binomial broadcast from it.
fn reduce_broadcast<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    let binomial = c.with(Algorithm::BINOMIAL, 0, c.len);
    let b = super::reduce::tree(b, &binomial);
    super::broadcast::tree(b, &binomial)
}

/// Recursive doubling (see [`recursive_doubling_over`]).
pub(in crate::model::team) fn recursive_doubling<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    recursive_doubling_over(b, c.n, c.me, c.len)
}

/// The ring, with fewer elements than members recursive doubling.
fn ring<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    if c.len >= c.n {
        ring_over(b, c.n, c.me, c.len)
    } else {
        recursive_doubling_over(b, c.n, c.me, c.len)
    }
}

fn rabenseifner<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    rabenseifner_over(b, c.n, c.me, c.len)
}

/// Every member sends its vector to every other at once, and each combines all n of
/// them, its own included, in member order: every member computes the same bits.
fn all_broadcast<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, len) = (c.n, c.me, c.len);
    let all = |i: usize| place(Buf::Tmp, block(i, len));
    let result = place(Buf::Dst, 0..len);
    let combine_in_order = (1..n).map(move |i| Local::Combine {
        from: all(i),
        into: result.clone(),
    });
    b.scratch(n * len)
        .local([copy(place(Buf::Src, 0..len), all(me))])
        .round(
            next_ones(n, me).map(|j| (j, place(Buf::Src, 0..len))),
            previous_ones(n, me).map(|i| (i, all(i))),
            std::iter::once(copy(all(0), place(Buf::Dst, 0..len))).chain(combine_in_order),
        )
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
    fn fold<'r>(b: B<'r>, n: usize, me: usize, len: usize) -> (B<'r>, PowerOfTwo) {
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
    /// the output), or alone. Otherwise its first exchange lands what arrives straight in
    /// the output, and the input is combined into it ([`first_combination`]), and what it
    /// never combines arrives whole.
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
    fn unfold<'r>(&self, b: B<'r>, me: usize, len: usize) -> B<'r> {
        let all = place(Buf::Dst, 0..len);
        match me {
            _ if me >= 2 * self.rem => b,
            _ if me.is_multiple_of(2) => b.round([], [(me + 1, all)], []),
            _ => b.round([(me - 1, all)], [], []),
        }
    }
}

/// A round in which this member combines a range of its input for the first time, where
/// its output does not hold a copy of it: send `send` to `to`, receive `range` from `from`
/// straight into the output, and combine the input's `range` into it. The output's lines
/// are then in cache from the receive when the combination reads and writes them, and no
/// scratch is touched. 2 ranks, 1 MiB of `u64`, on a 2-core AMD Zen 2: recursive doubling
/// 183 -> 132 µs against receiving into scratch, copying the input into the output 16 KiB
/// at a time and adding scratch to it, and 216-230 -> 179-205 µs against writing `input op
/// scratch` in one pass (docs/PERFORMANCE.md); copying the whole input into the output
/// first had been slower still (185-199 against 164 µs for the piecewise copy).
fn first_combination<'r>(
    b: B<'r>,
    (to, send): (usize, Place),
    from: usize,
    range: Range<usize>,
) -> B<'r> {
    b.round(
        [(to, send)],
        [(from, place(Buf::Dst, range.clone()))],
        [Local::Combine {
            from: place(Buf::Src, range.clone()),
            into: place(Buf::Dst, range),
        }],
    )
}

/// Recursive doubling over the largest power of two ≤ n (the others folded in).
fn recursive_doubling_over<'r>(mut b: B<'r>, n: usize, me: usize, len: usize) -> B<'r> {
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
            b = if mask == 1 && !copy_first {
                first_combination(b, (partner, fold.first_send(me, 0..len)), partner, 0..len)
            } else {
                let send = if mask == 1 {
                    fold.first_send(me, 0..len)
                } else {
                    all(Buf::Dst)
                };
                let combine = Local::Combine {
                    from: all(Buf::Tmp),
                    into: all(Buf::Dst),
                };
                b.round([(partner, send)], [(partner, all(Buf::Tmp))], [combine])
            };
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
fn rabenseifner_over<'r>(mut b: B<'r>, n: usize, me: usize, len: usize) -> B<'r> {
    let pow = largest_power_of_two(n);
    if len < pow {
        return recursive_doubling_over(b, n, me, len);
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
            let given = parts(give.0, give.1);
            b = if mask == pow / 2 && !copy_first {
                first_combination(b, (partner, fold.first_send(me, given)), partner, kept)
            } else {
                let send = if mask == pow / 2 {
                    fold.first_send(me, given)
                } else {
                    place(Buf::Dst, given)
                };
                let incoming = place(Buf::Tmp, 0..kept.len());
                let combine = Local::Combine {
                    from: incoming.clone(),
                    into: place(Buf::Dst, kept),
                };
                b.round([(partner, send)], [(partner, incoming)], [combine])
            };
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
fn ring_over<'r>(mut b: B<'r>, n: usize, me: usize, len: usize) -> B<'r> {
    let (right, left) = ((me + 1) % n, (me + n - 1) % n);
    let part = |k: usize| split_range(len, n, k % n);
    // No copy of the input first (but alone, the copy is the result) and no scratch: each
    // incoming block lands in the output and this member's input block is combined into
    // it ([`first_combination`]), and its own block (sent from the input, which the
    // partner may read directly, see `PowerOfTwo::first_send`) arrives complete in the
    // allgather (2 ranks, 1 MiB: 167 -> 135 µs).
    if n == 1 {
        b = b.local([copy(place(Buf::Src, 0..len), place(Buf::Dst, 0..len))]);
    }
    for s in 0..n - 1 {
        let (out, inb) = (part(me + n - s), part(me + 2 * n - s - 1));
        let from = if s == 0 { Buf::Src } else { Buf::Dst };
        b = first_combination(b, (right, place(from, out)), left, inb);
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

/// Each round swaps with a partner and combines.
fn recursive_doubling_work(s: Shape) -> Work {
    let t = terms(s);
    let rounds = t.log2 + t.fold;
    Work {
        rounds,
        bytes: 2.0 * rounds * t.m,
        all_members: t.n,
        ..Work::default()
    }
}

fn reduce_broadcast_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        rounds: 2.0 * t.log2,
        bytes: 3.0 * t.log2 * t.m,
        all_members: tree_spread(&t, 5.0 * t.others, 3.0 * t.log2),
        ..Work::default()
    }
}

/// One all-at-once round, then n − 1 combinations of the whole vector.
fn all_broadcast_work(s: Shape) -> Work {
    let t = terms(s);
    let round = super::exchange::one_round_of_all_pairs(s);
    Work {
        bytes: round.bytes + t.others * t.m,
        ..round
    }
}

/// With fewer elements than members the ring and Rabenseifner's halving cannot split the
/// vector and run as recursive doubling (the model knows bytes, not the element type: it
/// counts 8-byte elements, the common case of reductions).
fn too_short_to_split(s: Shape) -> bool {
    s.bytes / 8 < s.members
}

fn ring_work(s: Shape) -> Work {
    if too_short_to_split(s) {
        return recursive_doubling_work(s);
    }
    let t = terms(s);
    Work {
        rounds: 2.0 * t.others,
        bytes: 5.0 * t.others * t.m / t.n,
        all_members: t.n,
        ..Work::default()
    }
}

fn rabenseifner_work(s: Shape) -> Work {
    if too_short_to_split(s) {
        return recursive_doubling_work(s);
    }
    let t = terms(s);
    Work {
        rounds: 2.0 * t.log2 + t.fold,
        bytes: 5.0 * t.m * t.others / t.n + 3.0 * t.fold * t.m,
        all_members: t.n,
        ..Work::default()
    }
}
