//! The scan's algorithms, each an inclusive (or, with the call's `exclusive`, exclusive)
//! prefix reduction of `Src[0..len]` into `Dst[0..len]` (member 0's exclusive result is
//! zeros): linear (the prefix passes from rank to rank) and recursive doubling.

use super::*;
use crate::model::team::cost::{messages, terms, Work};

pub(super) const ROWS: &[Row] = &[
    row(
        Collective::Scan,
        Algorithm::LINEAR,
        "linear",
        "partial results passed rank to rank",
        linear,
        linear_work,
    ),
    row(
        Collective::Scan,
        Algorithm::RECURSIVE_DOUBLING,
        "recursive_doubling",
        "log2 n rounds at doubling distances",
        recursive_doubling,
        recursive_doubling_work,
    ),
];

/// The prefix passes from rank to rank.
fn linear<'r>(mut b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, len, exclusive) = (c.n, c.me, c.len, c.exclusive);
    let all = |buf: Buf| place(buf, 0..len);
    let src = || all(Buf::Src);
    let dst = || all(Buf::Dst);
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
    b
}

/// Recursive doubling (Hillis–Steele): after round k the inclusive prefix covers
/// 2^(k+1) members ending here.
fn recursive_doubling<'r>(mut b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, len, exclusive) = (c.n, c.me, c.len, c.exclusive);
    let all = |buf: Buf| place(buf, 0..len);
    let src = || all(Buf::Src);
    let dst = || all(Buf::Dst);
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

/// A middle member receives, combines and forwards; the last only receives.
fn linear_work(s: Shape) -> Work {
    let t = terms(s);
    if s.members > 2 {
        Work {
            pipeline: t.others,
            all_members: t.others,
            ..messages(&t, 1.5, 3.0 * t.m)
        }
    } else {
        messages(&t, 1.0, 2.0 * t.m)
    }
}

fn recursive_doubling_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        rounds: t.log2,
        bytes: 4.0 * t.log2 * t.m,
        all_members: t.n,
        ..Work::default()
    }
}
