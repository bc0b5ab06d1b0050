//! The reduction's algorithms: k-nomial trees (flat: radix n; binomial: 2), each
//! reducing every member's `Src[0..len]` into the root's `Dst[0..len]`.

use super::*;
use crate::model::team::channel::DIRECT_FROM;
use crate::model::team::cost::{ceil_log, messages, root_children, terms, tree_spread, Work};

pub(super) const ROWS: &[Row] = &[
    row(
        Collective::Reduce,
        Algorithm::FLAT,
        "flat",
        "the root combines every member's data",
        tree,
        flat_work,
    ),
    row(
        Collective::Reduce,
        Algorithm::BINOMIAL,
        "binomial",
        "binomial tree towards the root",
        tree,
        binomial_work,
    ),
    knomial(Collective::Reduce, tree, knomial_work),
];

/// A k-nomial tree of the call's radix towards the root (flat: radix n), pipelined in
/// segments of one chunk: a member receives segment k of its first child straight into its accumulator and of every other child into a slot of scratch,
/// combines its own input and the slots into the accumulator while they are in cache and
/// passes it up, so no member holds more than a segment per child beyond its accumulator.
/// The accumulator is `Dst` on the root, `Src` itself on a leaf, scratch elsewhere; it
/// never starts as a copy of the input (at 2 ranks and 32 KiB that copy was a quarter of
/// the call). The combination order (first child, own, other children) needs the
/// operation commutative, as every reduction is.
///
/// At 2 ranks, where the pair reads directly and the input is long enough to be read so,
/// the leaf's input goes whole, read straight into the root's output (the sender writing
/// part of it, `protocol::split`), and the root then adds its own: one copy, where the
/// chunks' two copies through the root's ring run at the rate its lines cross between the
/// cores. On a 2-core AMD host, 1 MiB of `u64`s: 106-154 µs against 131-186 chunked with
/// the virtual CPUs 50 ns apart, 106-127 against 494-534 at 208-227 ns; at 22-26 ns the
/// chunks win (89 against 110-156), and where the root's output lies 8 bytes past the
/// leaf's input modulo 4 KiB the kernel's copy slows (407-688 µs), as for every direct
/// read (docs/PERFORMANCE.md, "Beside the OSU micro-benchmarks"). Only from
/// [`WHOLE_FROM`] bytes: below, the chunks' pipeline wins.
///
/// Where ranks share processors, every member's input goes whole at any team size
/// ([`whole_tree`]): each step of the chunks' pipeline waits for a member that may not be
/// running. On a 2-core AMD EPYC (Zen 4, AVX-512) at 4 ranks, 1 MiB of `u64`s
/// (`compare-coll.py`, four runs each, the virtual CPUs 50 ns apart): flat 296 → 197 µs,
/// binomial 314 → 249; 256 KiB flat 74 → 57, binomial 76 → 70. Where they were 200 ns
/// apart it went either way (one series 305 → 350, other runs 661-989 → 415-423).
pub(super) fn tree<'r>(mut b: B<'r>, c: &Call<'_>) -> B<'r> {
    let (n, root, len) = (c.n, c.root, c.len);
    let tree = Knomial::new(c.radix(), n, c.rel());
    // Every member reckons this alike: the pair's (or the team's) direct reads are
    // agreed, the length and the regime the same.
    let other = tree.parent.or(tree.children.first().copied());
    let long = len * b.element() >= WHOLE_FROM;
    let pair_whole = n == 2 && long && other.is_some_and(|o| b.reads_directly((o + root) % n));
    if pair_whole || (long && b.crowded_and_reads_directly_everywhere()) {
        whole_tree(b, c, &tree)
    } else {
        chunked_tree(b, c, &tree)
    }
}

/// Where a member's partial result accumulates: `Dst` on the root, `Src` itself on a
/// leaf, scratch elsewhere (its first `len` elements; the slots for other children's
/// data follow).
fn accumulator(tree: &Knomial) -> Buf {
    match (tree.parent, tree.children.len()) {
        (None, _) => Buf::Dst,
        (Some(_), 0) => Buf::Src,
        _ => Buf::Tmp,
    }
}

/// [`tree`] in segments of one chunk, pipelined.
fn chunked_tree<'r>(mut b: B<'r>, c: &Call<'_>, tree: &Knomial) -> B<'r> {
    let (n, root, len) = (c.n, c.root, c.len);
    let kids = tree.children.len();
    let acc = accumulator(tree);
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
            b = b.sends_to_combine([((p + root) % n, place(acc, range))]);
        }
    }
    b
}

/// [`tree`] with every message whole: the first child's straight into the accumulator,
/// then the member's own input combined in; each further child's, one after another,
/// into one slot of scratch and combined (so scratch holds one input beyond the
/// accumulator whatever the radix); then the accumulator whole to the parent. A leaf's
/// message is its input, read directly; a middle member's is scratch it has written,
/// which travels in the channel's chunks (a blocking schedule never offers scratch).
fn whole_tree<'r>(mut b: B<'r>, c: &Call<'_>, tree: &Knomial) -> B<'r> {
    let (n, root, len) = (c.n, c.root, c.len);
    let kids = tree.children.len();
    let acc = accumulator(tree);
    let base = if acc == Buf::Tmp { len } else { 0 };
    let slot = place(Buf::Tmp, base..base + len);
    b = b.scratch(base + if kids > 1 { len } else { 0 });
    if acc != Buf::Src && kids == 0 {
        // A team of one: its root's own input is the result.
        b = b.local([copy(place(Buf::Src, 0..len), place(acc, 0..len))]);
    }
    for (i, &child) in tree.children.iter().enumerate() {
        let (into, combine) = if i == 0 {
            (place(acc, 0..len), place(Buf::Src, 0..len))
        } else {
            (slot.clone(), slot.clone())
        };
        let step = Local::Combine {
            from: combine,
            into: place(acc, 0..len),
        };
        // Combined once it is all here: both cores may copy it.
        b = b
            .round([], [((child + root) % n, into)], [step])
            .shares_early();
    }
    if let Some(p) = tree.parent {
        b = b.round([((p + root) % n, place(acc, 0..len))], [], []);
    }
    b
}

/// Bytes from which a 2-rank reduction's input goes whole and is read directly
/// ([`tree`]). `compare-coll.py` against the build that sent chunks at every size (2 ranks,
/// the 2-core AMD host, 4 runs of each at a 45-52 ns crossing): 32 KiB 3.97 -> 4.99 µs
/// read whole, 256 KiB 30.7 -> 26.1, 1 MiB 126.0 -> 101.1; 256 KiB is the smallest size
/// measured where it wins. At least [`DIRECT_FROM`], so the message is offered.
pub(crate) const WHOLE_FROM: usize = 256 * 1024;
const _: () = assert!(WHOLE_FROM >= DIRECT_FROM);

/// A reduction tree's root receives from each child and combines (a copy and a pass).
fn tree_work(s: Shape, depth: usize, children: usize) -> Work {
    let t = terms(s);
    Work {
        tree_rounds: depth as f64,
        all_members: tree_spread(&t, 2.0 * t.others, children as f64),
        ..messages(&t, children as f64, 2.0 * children as f64 * t.m)
    }
}

fn flat_work(s: Shape) -> Work {
    tree_work(s, 1, s.members.saturating_sub(1))
}

pub(super) fn binomial_work(s: Shape) -> Work {
    let depth = ceil_log(s.members, 2);
    tree_work(s, depth, depth)
}

fn knomial_work(s: Shape) -> Work {
    tree_work(
        s,
        ceil_log(s.members, s.radix),
        root_children(s.members, s.radix),
    )
}
