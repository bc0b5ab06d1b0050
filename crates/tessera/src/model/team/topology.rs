//! Shapes the algorithms share: k-nomial trees over relative ranks, and the split of a
//! vector into nearly equal blocks.
//!
//! This module must never communicate: it only computes who talks to whom.

/// A k-nomial tree over relative ranks 0..n rooted at 0.
pub(super) struct Knomial {
    pub(super) parent: Option<usize>,
    /// Children.
    pub(super) children: Vec<usize>,
    /// One past the last relative rank of this node's subtree.
    pub(super) subtree_end: usize,
}

impl Knomial {
    pub(super) fn new(radix: usize, n: usize, rel: usize) -> Knomial {
        // p: the largest power of `radix` dividing `rel` (for the root, the power that
        // covers all n); rel's subtree is [rel, rel + p), its parent clears the digit
        // at p, its children are rel + d·q for every lower power q and digit d.
        let mut p = 1;
        if rel == 0 {
            while p < n {
                p *= radix;
            }
        } else {
            while rel.is_multiple_of(p * radix) {
                p *= radix;
            }
        }
        let parent = (rel != 0).then(|| rel - (rel / p % radix) * p);
        let mut children = Vec::new();
        let mut q = 1;
        while q < p {
            for d in 1..radix {
                if rel + d * q < n {
                    children.push(rel + d * q);
                }
            }
            q *= radix;
        }
        Knomial {
            parent,
            children,
            subtree_end: (rel + p).min(n),
        }
    }
}

pub(super) fn split_range(len: usize, parts: usize, i: usize) -> std::ops::Range<usize> {
    let base = len / parts;
    let extra = len % parts;
    let start = i * base + i.min(extra);
    start..start + base + usize::from(i < extra)
}
