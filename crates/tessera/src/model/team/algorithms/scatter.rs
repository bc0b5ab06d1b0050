//! The scatter's algorithms, each sending block i of the root's `Src[0..n·count]` to
//! member i's `Dst[0..count]` (`count` is the call's `len`): flat (the root sends every
//! block at once) and a binomial tree (each member receives its subtree's blocks and
//! passes its children theirs).

use super::*;
use crate::model::team::cost::{messages, terms, tree_spread, Work};

pub(super) const ROWS: &[Row] = &[
    row(
        Collective::Scatter,
        Algorithm::FLAT,
        "flat",
        "the root sends every member its block",
        flat,
        flat_work,
    ),
    row(
        Collective::Scatter,
        Algorithm::BINOMIAL,
        "binomial",
        "binomial tree from the root, blocks split",
        binomial,
        binomial_work,
    ),
];

/// The root sends every member its block at once.
fn flat<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, root, count) = (c.n, c.me, c.root, c.len);
    let mine = place(Buf::Dst, 0..count);
    if me != root {
        return b.round([], [(root, mine)], []);
    }
    // The root's own block is copied once the others' are on their way (offered, for
    // long ones), so the copy overlaps their reads.
    b.round(
        all_but(root, n, Buf::Src, count),
        [],
        [copy(place(Buf::Src, block(me, count)), mine)],
    )
}

/// The binomial tree (see the module docs).
fn binomial<'r>(mut b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, root, count) = (c.n, c.me, c.root, c.len);
    let mine = place(Buf::Dst, 0..count);
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

fn flat_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        all_members: 2.0,
        ..messages(&t, t.others, t.others * t.m)
    }
}

/// Blocks travel down the tree merged, each copied once more per level.
fn binomial_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        block_copies: t.others,
        all_members: tree_spread(&t, 2.0 * t.others, t.log2),
        ..messages(&t, t.log2, 2.0 * t.others * t.m)
    }
}
