//! The broadcast's algorithms: k-nomial trees (flat: radix n; binomial: 2) and the
//! pipelined chain. Each broadcasts `Dst[0..len]`, filled on the root.

use super::*;
use crate::model::team::cost::{ceil_log, messages, root_children, terms, tree_spread, Work};

pub(super) const ROWS: &[Row] = &[
    row(
        Collective::Broadcast,
        Algorithm::FLAT,
        "flat",
        "the root sends to every member",
        tree,
        flat_work,
    ),
    row(
        Collective::Broadcast,
        Algorithm::BINOMIAL,
        "binomial",
        "binomial tree from the root",
        tree,
        binomial_work,
    ),
    knomial(Collective::Broadcast, tree, knomial_work),
    row(
        Collective::Broadcast,
        Algorithm::CHAIN,
        "chain",
        "pipelined chain: each member forwards chunks as they arrive",
        chain,
        chain_work,
    ),
];

/// The k-nomial tree of the call's radix rooted at the root: a member receives from its
/// parent, then sends to all its children at once.
pub(super) fn tree<'r>(mut b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, root) = (c.n, c.root);
    if n == 1 {
        return b;
    }
    let data = || place(Buf::Dst, 0..c.len);
    let tree = Knomial::new(c.radix(), n, c.rel());
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

/// A pipelined chain from the root: each member forwards segment k − 1 while it receives
/// segment k.
fn chain<'r>(mut b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, rel) = (c.n, c.me, c.rel());
    if n == 1 {
        return b;
    }
    let (prev, next) = ((me + n - 1) % n, (me + 1) % n);
    let segs: Vec<Range<usize>> = segments(&b, c.len).collect();
    let (first, last) = (rel == 0, rel == n - 1);
    for k in 0..=segs.len() {
        let send = (!last && k > 0).then(|| (next, place(Buf::Dst, segs[k - 1].clone())));
        let recv = (!first && k < segs.len()).then(|| (prev, place(Buf::Dst, segs[k].clone())));
        if send.is_some() || recv.is_some() {
            b = b.round(send, recv, []);
        }
    }
    b
}

/// The root sends to every member, each of which reads it.
fn flat_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        readers: t.others,
        all_members: 2.0,
        ..messages(&t, t.others, t.others * t.m)
    }
}

/// The root sends to its ⌈log₂ n⌉ children, and a long message passes ⌈log₂ n⌉ levels.
pub(super) fn binomial_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        readers: t.log2,
        levels: t.log2,
        all_members: tree_spread(&t, 2.0 * t.others, t.log2),
        ..messages(&t, t.log2, t.log2 * t.m)
    }
}

fn knomial_work(s: Shape) -> Work {
    let t = terms(s);
    let children = root_children(s.members, s.radix) as f64;
    Work {
        readers: children,
        levels: ceil_log(s.members, s.radix) as f64,
        all_members: tree_spread(&t, 2.0 * t.others, children),
        ..messages(&t, children, children * t.m)
    }
}

/// A middle member receives (half a send's cost) and forwards every chunk; each chunk
/// after the first waits for the neighbour to take the one before (a round), which is
/// what a long chain costs where ranks share cores and must be scheduled to take it.
fn chain_work(s: Shape) -> Work {
    let t = terms(s);
    if s.members > 2 {
        Work {
            rounds: t.chunks - 1.0,
            pipeline: t.others,
            all_members: t.others,
            ..messages(&t, 1.5, 2.0 * t.m)
        }
    } else {
        messages(&t, 1.0, t.m)
    }
}
