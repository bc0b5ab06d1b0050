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

    /// Whether relative rank `rel` has children ([`Knomial::new`]'s, without building
    /// them): the root where there are others; another rank when `radix` divides it and
    /// the next rank exists.
    pub(super) fn has_children(radix: usize, n: usize, rel: usize) -> bool {
        rel + 1 < n && (rel == 0 || rel.is_multiple_of(radix))
    }
}

pub(super) fn split_range(len: usize, parts: usize, i: usize) -> std::ops::Range<usize> {
    let base = len / parts;
    let extra = len % parts;
    let start = i * base + i.min(extra);
    start..start + base + usize::from(i < extra)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn has_children_agrees_with_the_built_tree() {
        for n in 1..40 {
            for radix in [2, 3, 4, 8, n.max(2)] {
                for rel in 0..n {
                    assert_eq!(
                        Knomial::has_children(radix, n, rel),
                        !Knomial::new(radix, n, rel).children.is_empty(),
                        "radix {radix}, {n} members, relative rank {rel}"
                    );
                }
            }
        }
    }
}
