//! The all-to-all's algorithms. `send(j)` is the range of `Src` for member j and
//! `recv(i)` the range of `Dst` from member i (the call's blocks); this member's own block
//! is copied first. Pairwise (n − 1 steps, each with one partner), flat (every block at
//! once) and Bruck's dissemination at radix r, which needs equal blocks; with blocks of
//! varying length it runs pairwise.

use super::*;
use crate::model::team::cost::{ceil_log, terms, Work};

pub(super) const ROWS: &[Row] = &[
    row(
        Collective::Exchange,
        Algorithm::PAIRWISE,
        "pairwise",
        "n - 1 steps, each with one partner",
        pairwise,
        pairwise_work,
    ),
    row(
        Collective::Exchange,
        Algorithm::FLAT,
        "flat",
        "every block sent at once",
        flat,
        one_round_of_all_pairs,
    ),
    Row {
        op: Collective::Exchange,
        algorithm: Algorithm::bruck(2),
        name: "bruck",
        radix: Some((2, 8)),
        tuned_radices: &[2, 4, 8],
        summary: "dissemination: ceil(log_r n) phases of r - 1 packed messages",
        work: bruck_work,
        run: Run::Rounds(bruck),
    },
];

/// The call's blocks.
fn blocks<'c>(c: &'c Call<'_>) -> &'c Blocks<'c> {
    c.blocks
        .as_ref()
        .expect("an all-to-all's call carries its blocks")
}

/// This member's own block, copied.
fn own<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    let l = blocks(c);
    b.local([copy(
        place(Buf::Src, (l.send)(c.me)),
        place(Buf::Dst, (l.recv)(c.me)),
    )])
}

fn flat<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, l) = (c.n, c.me, blocks(c));
    own(b, c).round(
        next_ones(n, me).map(|j| (j, place(Buf::Src, (l.send)(j)))),
        previous_ones(n, me).map(|i| (i, place(Buf::Dst, (l.recv)(i)))),
        [],
    )
}

fn pairwise<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, me, l) = (c.n, c.me, blocks(c));
    let mut b = own(b, c);
    for s in 1..n {
        let (to, from) = ((me + s) % n, (me + n - s) % n);
        b = b.round(
            [(to, place(Buf::Src, (l.send)(to)))],
            [(from, place(Buf::Dst, (l.recv)(from)))],
            [],
        );
    }
    b
}

/// Bruck's dissemination at the algorithm's radix over equal blocks; pairwise over
/// blocks of varying length.
fn bruck<'r>(b: B<'r>, c: &Call<'_>) -> B<'r> {
    match blocks(c).uniform {
        Some(len) => bruck_over(b, c.radix(), c.n, c.me, len),
        None => pairwise(b, c),
    }
}

/// Bruck's dissemination all-to-all with radix `r` (seed 004 §3.4) over equal blocks of
/// `len`: scratch block j first holds this member's block for member `(me + j) % n`; in
/// phase k, for every digit d in 1..r, the blocks whose k-th base-r digit is d go
/// (packed) to member `me + d·r^k` while the same positions arrive from `me − d·r^k`; a
/// block at position j travels j members in all, so at the end position j holds the block
/// from member `me − j`, which one unpacking puts in place. `⌈log_r n⌉` phases of r − 1
/// messages each, every block moving up to `⌈log_r n⌉` times: fewer, larger messages
/// than pairwise, for small blocks.
fn bruck_over<'r>(mut b: B<'r>, radix: usize, n: usize, me: usize, len: usize) -> B<'r> {
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

/// Every member sends its block to every other and receives theirs in one round (the
/// all-broadcast allgather and the flat all-to-all).
pub(super) fn one_round_of_all_pairs(s: Shape) -> Work {
    let t = terms(s);
    Work {
        rounds: 1.0,
        messages: 2.0 * (t.others - 1.0).max(0.0),
        bytes: 2.0 * t.others * t.m,
        all_members: t.n,
        ..Work::default()
    }
}

fn pairwise_work(s: Shape) -> Work {
    let t = terms(s);
    Work {
        rounds: t.others,
        bytes: 2.0 * t.others * t.m,
        all_members: t.n,
        ..Work::default()
    }
}

/// ⌈log_k n⌉ phases of k − 1 packed messages of ⌈n/k⌉ blocks, and the rotations before
/// and after.
fn bruck_work(s: Shape) -> Work {
    let t = terms(s);
    let k = s.radix as f64;
    let phases = ceil_log(s.members, s.radix) as f64;
    let per_message = s.members.div_ceil(s.radix) as f64;
    let blocks = 2.0 * phases * (k - 1.0) * per_message;
    Work {
        rounds: phases,
        messages: 2.0 * phases * (k - 2.0),
        block_copies: blocks + 2.0 * t.n,
        bytes: (blocks + 2.0 * t.n) * t.m,
        all_members: t.n,
        ..Work::default()
    }
}
