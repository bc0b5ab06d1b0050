//! The gather's algorithms, each gathering every member's `Src[0..len]` into the root's
//! `Dst[0..n·len]` in rank order: flat (the root receives every block at once) and a
//! binomial tree (member `rel` collects the blocks of relative ranks `rel..subtree_end` and
//! passes them up; the root collects straight into `Dst` when it is member 0, into
//! scratch otherwise).

use super::*;
use crate::model::team::cost::{messages, terms, tree_spread, Work};

pub(super) const ROWS: &[Row] = &[
    row(
        Collective::Gather,
        Algorithm::FLAT,
        "flat",
        "every member sends to the root",
        flat,
        flat_work,
    ),
    row(
        Collective::Gather,
        Algorithm::BINOMIAL,
        "binomial",
        "binomial tree towards the root, blocks merged",
        binomial,
        binomial_work,
    ),
];

/// Every member sends its block to the root, which receives them at once.
fn flat<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, root, len) = (c.n, c.me, c.root, c.len);
    if me != root {
        return b.round([(root, place(Buf::Src, 0..len))], [], []);
    }
    let own = copy(place(Buf::Src, 0..len), place(Buf::Dst, block(me, len)));
    b.local([own])
        .round([], all_but(root, n, Buf::Dst, len), [])
}

/// The binomial tree (see the module docs).
pub(super) fn binomial<'r>(mut b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, root, len) = (c.n, c.me, c.root, c.len);
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

fn flat_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        tree_rounds: 1.0,
        all_members: 2.0,
        ..messages(&t, t.others, t.others * t.m)
    }
}

/// Blocks travel up the tree merged, each copied once more per level.
fn binomial_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        tree_rounds: t.log2,
        block_copies: t.others,
        all_members: tree_spread(&t, 2.0 * t.others, t.log2),
        ..messages(&t, t.log2, 2.0 * t.others * t.m)
    }
}
