//! The allgather's algorithms, each gathering every member's `Src[0..len]` into every
//! member's `Dst[0..n·len]`: a ring (n − 1 neighbour steps), Bruck's dissemination
//! (`ceil(log2 n)` rounds into scratch, where block j holds member `(me + j) % n`'s, then
//! one rotation), a binomial gather to member 0 and a binomial broadcast of the whole, and
//! every member broadcasting its block to all at once.

use super::*;
use crate::model::team::cost::{terms, tree_spread, Work};

pub(super) const ROWS: &[Row] = &[
    row(
        Collective::Allgather,
        Algorithm::RING,
        "ring",
        "n - 1 neighbour steps",
        ring,
        ring_work,
    ),
    row(
        Collective::Allgather,
        Algorithm::bruck(2),
        "bruck",
        "Bruck's dissemination: ceil(log2 n) rounds",
        bruck,
        bruck_work,
    ),
    row(
        Collective::Allgather,
        Algorithm::GATHER_BROADCAST,
        "gather_broadcast",
        "gather to rank 0, then broadcast",
        gather_broadcast,
        gather_broadcast_work,
    ),
    row(
        Collective::Allgather,
        Algorithm::ALL_BROADCAST,
        "all_broadcast",
        "every member broadcasts its block to all at once",
        all_broadcast,
        super::exchange::one_round_of_all_pairs,
    ),
];

/// A binomial gather to member 0, then a binomial broadcast of all `n·len` elements.
fn gather_broadcast<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    let b = super::gather::binomial(b, &c.with(Algorithm::BINOMIAL, 0, c.len));
    super::broadcast::tree(b, &c.with(Algorithm::BINOMIAL, 0, c.n * c.len))
}

/// Every member sends its block to every other and receives theirs in one round.
fn all_broadcast<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, len) = (c.n, c.me, c.len);
    b.local([copy(
        place(Buf::Src, 0..len),
        place(Buf::Dst, block(me, len)),
    )])
    .round(
        next_ones(n, me).map(|j| (j, place(Buf::Src, 0..len))),
        previous_ones(n, me).map(|i| (i, place(Buf::Dst, block(i, len)))),
        [],
    )
}

/// Bruck's dissemination (see the module docs).
fn bruck<'r>(mut b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, len) = (c.n, c.me, c.len);
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

/// The ring: in step s each member passes the block it received the step before to its
/// right neighbour.
pub(in crate::model::team) fn ring<'r>(mut b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, len) = (c.n, c.me, c.len);
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

/// n − 1 steps, each forwarding a block received the step before.
fn ring_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        rounds: t.others,
        bytes: 3.0 * t.others * t.m + t.m,
        all_members: t.n,
        ..Work::default()
    }
}

fn bruck_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        rounds: t.log2,
        block_copies: t.n,
        bytes: 2.0 * t.others * t.m + t.n * t.m,
        all_members: t.n,
        ..Work::default()
    }
}

/// A binomial gather, then a binomial broadcast of the whole: each level of either waits
/// for the one before it.
fn gather_broadcast_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        rounds: 2.0 * t.log2,
        messages: 2.0 * t.log2,
        block_copies: t.others,
        bytes: 2.0 * t.others * t.m + t.log2 * t.n * t.m,
        all_members: tree_spread(&t, 4.0 * t.others, 2.0 * t.log2),
        ..Work::default()
    }
}
