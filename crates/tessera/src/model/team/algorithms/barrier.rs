//! The barrier's algorithms: dissemination and flat.

use super::*;
use crate::model::team::cost::{terms, Work};

pub(super) const ROWS: &[Row] = &[
    row(
        Collective::Barrier,
        Algorithm::DISSEMINATION,
        "dissemination",
        "ceil(log2 n) rounds of signals to rank + 2^i",
        dissemination_rounds,
        dissemination_work,
    ),
    row(
        Collective::Barrier,
        Algorithm::FLAT,
        "flat",
        "every member signals rank 0, which releases all",
        flat,
        flat_work,
    ),
];

fn signal() -> Place {
    place(Buf::Dst, 0..0)
}

/// Every member signals member 0, which releases all.
fn flat<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    let n = c.n;
    if c.me == 0 {
        b.round([], (1..n).map(|i| (i, signal())), [])
            .round((1..n).map(|i| (i, signal())), [], [])
    } else {
        b.round([(0, signal())], [], [])
            .round([], [(0, signal())], [])
    }
}

fn dissemination_rounds<'r>(mut b: B<'r>, c: &Call<'_>) -> B<'r> {
    for (to, from) in dissemination(c.n, c.me) {
        b = b.round([(to, signal())], [(from, signal())], []);
    }
    b
}

/// The dissemination barrier's rounds for member `me` of `n`: in the round of distance
/// `d` (1, 2, 4, …, below `n`) it signals member `me + d` and hears from `me − d`, modulo
/// `n`, as (to, from). The blocking barrier runs them on the channel directly.
pub(in crate::model::team) fn dissemination(
    n: usize,
    me: usize,
) -> impl Iterator<Item = (usize, usize)> {
    std::iter::successors(Some(1usize), |d| d.checked_mul(2))
        .take_while(move |&d| d < n)
        .map(move |d| ((me + d) % n, (me + n - d) % n))
}

fn dissemination_work(s: Shape) -> Work {
    Work {
        rounds: terms(s).log2,
        all_members: s.members as f64,
        ..Work::default()
    }
}

fn flat_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        rounds: 2.0,
        messages: 2.0 * t.others,
        all_members: 2.0,
        ..Work::default()
    }
}
