//! The single-address forms' algorithms (`Broadcast`, `Scatter` and `Gather`
//! `.to_symmetric`): puts straight into destinations in the global address space, with
//! entry and landing signalled along a k-nomial tree of the row's radix (flat: radix n),
//! all run by one engine (`addressed`).

use super::*;
use crate::model::team::cost::{ceil_log, root_children, terms, tree_spread, Work};

pub(super) const ROWS: &[Row] = &[
    flat_tree_row(
        Collective::BroadcastTo,
        "the root puts into every destination",
        put_flat_work,
    ),
    knomial_tree_row(
        Collective::BroadcastTo,
        "k-nomial tree of puts: each member forwards from its destination to its children's",
        broadcast_knomial_work,
    ),
    flat_tree_row(
        Collective::ScatterTo,
        "the root puts every block and signals every member",
        put_flat_work,
    ),
    knomial_tree_row(
        Collective::ScatterTo,
        "the root puts every block; entry and landing signalled along a k-nomial tree",
        scatter_knomial_work,
    ),
    flat_tree_row(
        Collective::GatherTo,
        "every member puts its block; the root hears from each",
        gather_flat_work,
    ),
    knomial_tree_row(
        Collective::GatherTo,
        "every member puts its block; entry and landing signalled along a k-nomial tree",
        gather_knomial_work,
    ),
];

/// The flat row of a single-address form (the tree of radix n).
const fn flat_tree_row(op: Collective, summary: &'static str, work: fn(Shape) -> Work) -> Row {
    Row {
        op,
        algorithm: Algorithm::FLAT,
        name: "flat",
        radix: None,
        tuned_radices: &[],
        summary,
        work,
        run: Run::Tree,
    }
}

/// The k-nomial row of a single-address form (default radix 4).
const fn knomial_tree_row(op: Collective, summary: &'static str, work: fn(Shape) -> Work) -> Row {
    Row {
        op,
        algorithm: Algorithm::knomial(4),
        name: "knomial",
        radix: Some((2, MAX_RADIX)),
        tuned_radices: &[2, 4, 8],
        summary,
        work,
        run: Run::Tree,
    }
}

/// The root puts into every destination.
fn put_flat_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        messages: t.others,
        bytes_put: t.others * t.m,
        all_members: 2.0,
        ..Work::default()
    }
}

/// Each member forwards from its destination to its children's.
fn broadcast_knomial_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        rounds: ceil_log(s.members, s.radix) as f64,
        bytes_put: root_children(s.members, s.radix) as f64 * t.m,
        all_members: tree_spread(&t, t.others, root_children(s.members, s.radix) as f64),
        ..Work::default()
    }
}

/// The root puts every block; the signals travel along the tree.
fn scatter_knomial_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        rounds: ceil_log(s.members, s.radix) as f64,
        bytes_put: t.others * t.m,
        all_members: 1.0,
        ..Work::default()
    }
}

/// Every member puts its own block; the root hears from each.
fn gather_flat_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        messages: t.others,
        bytes_put: t.m,
        all_members: 2.0,
        ..Work::default()
    }
}

/// Every member puts its own block; the signals gather along the tree.
fn gather_knomial_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        rounds: ceil_log(s.members, s.radix) as f64,
        bytes_put: t.m,
        all_members: t.n,
        ..Work::default()
    }
}
