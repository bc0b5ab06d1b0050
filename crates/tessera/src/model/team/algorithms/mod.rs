//! Every algorithm of every collective operation, one file per operation: each file holds
//! its operation's registry rows (`ROWS`), and beside them what each row names, its
//! schedule (the rounds of the `schedule` module, a function of a [`Builder`] and the
//! call's [`Call`]) and its cost formula (see `cost`). The registry is the rows of these
//! files; the engine finds a call's row by operation and algorithm and runs its rounds, so
//! **a new algorithm is a row, with its rounds and formula, in its operation's file**. A new
//! family also names a code for the call's signature in its row (`Algorithm::family`),
//! which the registry's test checks is unique.
//!
//! A blocking call runs these rounds over the caller's buffers, a nonblocking one over its
//! own, so the two forms always run the same algorithm. Each schedule adds one member's
//! rounds to a [`Builder`] whose `Src` holds the member's input and whose `Dst` is the
//! output, laid out as the blocking call lays them out. `n` is the team size and `me` this
//! member's index; a rooted operation works in ranks relative to the root (`rel`, the root
//! at 0). The single-address forms (`*_to`) all run one engine of puts along a k-nomial
//! tree (`addressed`); their rows give the tree's radix.
//!
//! This module must never send or wait: it only writes down who sends what to whom.

use std::ops::Range;

use super::cost::{Shape, Work};
use super::registry::{radix_of, Algorithm, Collective, Row};
use super::schedule::{Buf, Builder, Local, Place};
use super::topology::Knomial;

mod allgather;
mod allreduce;
mod barrier;
mod broadcast;
mod exchange;
mod gather;
pub(super) mod reduce;
mod scan;
mod scatter;
mod single_address;

pub(super) use barrier::dissemination;

type B<'r> = Builder<'r>;

/// The rounds of one member's part of a call.
pub(crate) type Rounds = for<'r> fn(Builder<'r>, &Call<'_>) -> Builder<'r>;

/// How a row's algorithm runs.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Run {
    /// As rounds of the schedule engine.
    Rounds(Rounds),
    /// As puts along the k-nomial tree of its radix (flat: radix n), the single-address
    /// engine (`addressed`).
    Tree,
}

/// What one member's rounds depend on.
#[derive(Clone, Copy)]
pub(crate) struct Call<'a> {
    /// The algorithm (its radix, for a family with one).
    pub(crate) algorithm: Algorithm,
    /// Members, and this member's index.
    pub(crate) n: usize,
    pub(crate) me: usize,
    /// The root of a rooted operation (0 otherwise).
    pub(crate) root: usize,
    /// Elements: of the vector (broadcast, reductions, scans), of one member's block
    /// (gather, allgather, scatter) or of an all-to-all's equal blocks.
    pub(crate) len: usize,
    /// An exclusive scan.
    pub(crate) exclusive: bool,
    /// An all-to-all's blocks: `send(j)`, the range of `Src` for member j, and `recv(i)`,
    /// the range of `Dst` from member i.
    pub(crate) blocks: Option<Blocks<'a>>,
}

/// An all-to-all's layout (see [`Call::blocks`]).
#[derive(Clone, Copy)]
pub(crate) struct Blocks<'a> {
    pub(crate) send: &'a dyn Fn(usize) -> Range<usize>,
    pub(crate) recv: &'a dyn Fn(usize) -> Range<usize>,
    /// The blocks' one length, where they are equal.
    pub(crate) uniform: Option<usize>,
}

impl<'a> Call<'a> {
    /// Member `me` of `n` running `algorithm` over `len` elements.
    pub(crate) fn new(algorithm: Algorithm, n: usize, me: usize, len: usize) -> Call<'a> {
        Call {
            algorithm,
            n,
            me,
            root: 0,
            len,
            exclusive: false,
            blocks: None,
        }
    }

    /// Rooted at `root`.
    pub(crate) fn rooted(self, root: usize) -> Self {
        Call { root, ..self }
    }

    /// An exclusive scan if `exclusive`.
    pub(crate) fn exclusive(self, exclusive: bool) -> Self {
        Call { exclusive, ..self }
    }

    /// An all-to-all of these blocks.
    pub(crate) fn blocks(
        self,
        send: &'a dyn Fn(usize) -> Range<usize>,
        recv: &'a dyn Fn(usize) -> Range<usize>,
        uniform: Option<usize>,
    ) -> Self {
        Call {
            blocks: Some(Blocks {
                send,
                recv,
                uniform,
            }),
            ..self
        }
    }

    /// The same call with another algorithm (a composite runs others' rounds).
    fn with(&self, algorithm: Algorithm, root: usize, len: usize) -> Call<'a> {
        Call {
            algorithm,
            root,
            len,
            blocks: None,
            ..*self
        }
    }

    /// The tree radix of its algorithm (flat: n).
    fn radix(&self) -> usize {
        radix_of(self.algorithm, self.n)
    }

    /// This member's rank relative to the root.
    fn rel(&self) -> usize {
        (self.me + self.n - self.root) % self.n
    }
}

/// Add `call`'s rounds for `op` to `b`: those of the registry row of `op` and the call's
/// algorithm (which the team checked is registered before choosing it).
pub(super) fn rounds<'r>(op: Collective, b: B<'r>, call: Call<'_>) -> B<'r> {
    let row = super::registry()
        .iter()
        .find(|row| row.op == op && row.algorithm.same_family(call.algorithm));
    match row.map(|row| row.run) {
        Some(Run::Rounds(rounds)) => rounds(b, &call),
        _ => unreachable!(
            "{} of {} has no rounds: a team runs only registered algorithms",
            call.algorithm,
            op.name()
        ),
    }
}

/// Every operation's rows, in the order of [`Collective::ALL`].
pub(super) fn rows() -> Vec<Row> {
    [
        barrier::ROWS,
        broadcast::ROWS,
        reduce::ROWS,
        allreduce::ROWS,
        gather::ROWS,
        allgather::ROWS,
        scatter::ROWS,
        exchange::ROWS,
        scan::ROWS,
        single_address::ROWS,
    ]
    .concat()
}

/// The most a k-nomial radix may be.
const MAX_RADIX: u32 = 64;

/// A row without a radix.
const fn row(
    op: Collective,
    algorithm: Algorithm,
    name: &'static str,
    summary: &'static str,
    rounds: Rounds,
    work: fn(Shape) -> Work,
) -> Row {
    Row {
        op,
        algorithm,
        name,
        radix: None,
        tuned_radices: &[],
        summary,
        work,
        run: Run::Rounds(rounds),
    }
}

/// The k-nomial row of `op` (default radix 4).
const fn knomial(op: Collective, rounds: Rounds, work: fn(Shape) -> Work) -> Row {
    Row {
        op,
        algorithm: Algorithm::knomial(4),
        name: "knomial",
        radix: Some((2, MAX_RADIX)),
        tuned_radices: &[3, 4, 8],
        summary: "k-nomial tree: each parent talks to up to k - 1 children per round",
        work,
        run: Run::Rounds(rounds),
    }
}

fn place(buf: Buf, range: Range<usize>) -> Place {
    (buf, range)
}

/// Block `j` of `len` elements.
fn block(j: usize, len: usize) -> Range<usize> {
    j * len..(j + 1) * len
}

fn copy(from: Place, to: Place) -> Local {
    Local::Copy { from, to }
}

/// Steps that put block `j` of `from` at block `(j + shift) % n` of `to` (two copies).
fn rotate(from: Buf, to: Buf, n: usize, shift: usize, len: usize) -> [Local; 2] {
    let head = n - shift; // blocks 0..head land at shift..n
    [
        copy(place(from, 0..head * len), place(to, shift * len..n * len)),
        copy(place(from, head * len..n * len), place(to, 0..shift * len)),
    ]
}

/// Steps that put block `(j + shift) % n` of `from` at block `j` of `to` (two copies):
/// the inverse of [`rotate`].
fn rotate_back(from: Buf, to: Buf, n: usize, shift: usize, len: usize) -> [Local; 2] {
    let head = n - shift; // blocks shift..n land at 0..head
    [
        copy(place(from, shift * len..n * len), place(to, 0..head * len)),
        copy(place(from, 0..shift * len), place(to, head * len..n * len)),
    ]
}

/// Every member but `me`, from the next one on (`me + 1`, `me + 2`, … around the team): the
/// order of a flat round's sends, so that members start on different peers rather than all
/// on member 0 (whose memory or mailbox would then serve every other member first).
fn next_ones(n: usize, me: usize) -> impl Iterator<Item = usize> + Clone {
    (1..n).map(move |s| (me + s) % n)
}

/// Every member but `me`, from the previous one back (`me − 1`, `me − 2`, …): the order of
/// a flat round's receives, each from the member whose send in [`next_ones`]' order was
/// to this member at the same step.
fn previous_ones(n: usize, me: usize) -> impl Iterator<Item = usize> + Clone {
    (1..n).map(move |s| (me + n - s) % n)
}

/// `(member, block i of buf)` for every member but `root`: a flat rooted operation's
/// messages.
fn all_but(root: usize, n: usize, buf: Buf, len: usize) -> impl Iterator<Item = (usize, Place)> {
    (0..n)
        .filter(move |&i| i != root)
        .map(move |i| (i, place(buf, block(i, len))))
}

/// A member's place in the binomial tree of a rooted gather or scatter: its rank relative
/// to the root, its tree, and how many members its subtree spans (their blocks, in
/// relative order, are what it holds).
struct Subtree {
    rel: usize,
    tree: Knomial,
    span: usize,
}

impl Subtree {
    fn new(n: usize, me: usize, root: usize) -> Subtree {
        let rel = (me + n - root) % n;
        let tree = Knomial::new(2, n, rel);
        let span = tree.subtree_end - rel;
        Subtree { rel, tree, span }
    }

    /// `(child, the child's subtree's blocks in buf)` for every child.
    fn children<'t>(
        &'t self,
        n: usize,
        root: usize,
        buf: Buf,
        len: usize,
    ) -> impl Iterator<Item = (usize, Place)> + 't {
        self.tree.children.iter().map(move |&c| {
            let end = Knomial::new(2, n, c).subtree_end;
            let range = (c - self.rel) * len..(end - self.rel) * len;
            ((c + root) % n, place(buf, range))
        })
    }
}

/// Segments of a vector of `len` elements, one channel chunk each (at least one, empty
/// when `len` is 0).
fn segments(b: &B<'_>, len: usize) -> impl Iterator<Item = Range<usize>> {
    let seg = (b.chunk() / b.element().max(1)).max(1);
    (0..len.div_ceil(seg).max(1)).map(move |k| k * seg..((k + 1) * seg).min(len))
}
