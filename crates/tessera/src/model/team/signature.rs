//! Call signatures: one 64-bit word that says which collective call a team message belongs
//! to, carried in the header of every message the team channel moves (no extra message, no
//! extra cache line: it sits next to the length) and compared on arrival.
//!
//! A signature packs the operation, the form of the call (blocking, nonblocking schedule,
//! single-address synchronisation, checked-mode agreement), the algorithm and its radix,
//! the reduction, the element size, the root and the element count:
//!
//! ```text
//! bits  0..4   operation (Collective index)        4..6   form
//!       6..12  algorithm (its registry code)      12..18  radix (k-nomial, Bruck)
//!      18..22  reduction (0 none, 15 user)        22..30  element size (255 = 255 or more)
//!      30..40  root + 1 (0 none; mod 1023)        40..64  element count (mod 2^24)
//! ```
//!
//! The algorithm's code is its family's, named by its registry row (`Algorithm::code`),
//! so a new algorithm does not change this module. The count and root are kept modulo their field sizes: a
//! mismatch that differs only by a multiple of 2²⁴ elements goes unnoticed here (checked
//! mode compares them in full).
//!
//! This module must never allocate or branch much on the hot path: [`Signature::new`] is a
//! handful of shifts, called once per collective.

use std::fmt;

use super::registry::{Algorithm, Collective};
use crate::model::ops::Op;

/// Every built-in reduction, for naming them in checked-mode reports.
pub(super) const ALL_OPS: [Op; 11] = [
    Op::Sum,
    Op::Prod,
    Op::Min,
    Op::Max,
    Op::BitAnd,
    Op::BitOr,
    Op::BitXor,
    Op::LogicalAnd,
    Op::LogicalOr,
    Op::MinLoc,
    Op::MaxLoc,
];

/// How a collective was called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Form {
    /// A blocking mailbox collective.
    Blocking = 0,
    /// A nonblocking mailbox collective (a schedule).
    Nonblocking = 1,
    /// The "entered"/"landed" messages of the single-address forms.
    SingleAddress = 2,
    /// Checked mode's agreement messages.
    Agreement = 3,
}

/// One call's signature (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Signature(pub(crate) u64);

/// An operation's 4-bit code (its place in [`ALL_OPS`] plus one).
const fn op_code(op: Op) -> u64 {
    match op {
        Op::Sum => 1,
        Op::Prod => 2,
        Op::Min => 3,
        Op::Max => 4,
        Op::BitAnd => 5,
        Op::BitOr => 6,
        Op::BitXor => 7,
        Op::LogicalAnd => 8,
        Op::LogicalOr => 9,
        Op::MinLoc => 10,
        Op::MaxLoc => 11,
    }
}

impl Signature {
    /// The signature of single-address synchronisation messages (all alike).
    pub(crate) const SINGLE_ADDRESS: Signature = Signature((Form::SingleAddress as u64) << 4);
    /// The signature of checked-mode agreement messages (all alike: the agreement itself
    /// compares the calls).
    pub(crate) const AGREEMENT: Signature = Signature((Form::Agreement as u64) << 4);

    /// The signature of a call (no algorithm yet: [`Signature::with_algorithm`]).
    #[inline]
    pub(crate) fn new(
        op: Collective,
        form: Form,
        root: Option<usize>,
        count: usize,
        elem: usize,
        reduction: Option<Reduction>,
    ) -> Signature {
        let reduction = match reduction {
            None => 0,
            Some(Reduction::User) => 15,
            Some(Reduction::Builtin(op)) => op_code(op),
        };
        // Roots below 1023 as they are, larger ones folded (no division on the common path).
        let root = root.map_or(0, |r| {
            if r < 1023 {
                r as u64 + 1
            } else {
                (r % 1023) as u64 + 1
            }
        });
        Signature(
            op.index() as u64
                | (form as u64) << 4
                | reduction << 18
                | (elem.min(255) as u64) << 22
                | root << 30
                | (count as u64 & ((1 << 24) - 1)) << 40,
        )
    }

    /// The same call with its algorithm recorded.
    #[inline]
    pub(crate) fn with_algorithm(self, alg: Algorithm) -> Signature {
        let (code, radix) = alg.code();
        Signature((self.0 & !(0xfff << 6)) | code << 6 | radix << 12)
    }
}

/// A reduction as a signature sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reduction {
    /// A built-in operation.
    Builtin(Op),
    /// A user operation (`*_with`).
    User,
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        let form = (s >> 4) & 3;
        if s == Signature::SINGLE_ADDRESS.0 {
            return f.write_str("the synchronisation of a single-address collective");
        }
        if form == Form::Agreement as u64 {
            return f.write_str("checked mode's agreement on a call");
        }
        let op = Collective::ALL.get((s & 15) as usize);
        let name = match (op, form == Form::SingleAddress as u64) {
            (None, _) => "an unknown collective",
            // The single-address forms without an operation of their own.
            (Some(Collective::Broadcast), true) => "broadcast_from",
            (Some(Collective::Gather), true) => "gather_from",
            (Some(Collective::Allgather), true) => "allgather_to",
            (Some(Collective::Exchange), true) => "exchange_to",
            (Some(c), _) => c.name(),
        };
        if form == Form::Nonblocking as u64 {
            f.write_str("nonblocking ")?;
        }
        write!(f, "{name}")?;
        let mut parts = Vec::new();
        let root = (s >> 30) & 0x3ff;
        if root != 0 {
            parts.push(format!("root {}", root - 1));
        }
        match (s >> 18) & 15 {
            0 => {}
            15 => parts.push("a user operation".into()),
            r => parts.push(
                ALL_OPS
                    .get(r as usize - 1)
                    .map_or("an unknown operation".into(), |o| format!("{o:?}")),
            ),
        }
        let elem = (s >> 22) & 255;
        if elem > 0 {
            parts.push(format!("{} elements of {elem} bytes", s >> 40));
        }
        let code = (s >> 6) & 63;
        if code != 0 {
            let alg = Algorithm::from_code(code, (s >> 12) & 63)
                .map_or("an unknown algorithm".into(), |a| a.to_string());
            parts.push(format!("algorithm {alg}"));
        }
        write!(f, "({})", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_follow_the_tables_used_to_read_them_back() {
        let mut every: Vec<Algorithm> = Collective::ALL
            .iter()
            .flat_map(|op| op.candidates())
            .collect();
        every.extend([
            Algorithm::NATIVE,
            Algorithm::knomial(63),
            Algorithm::bruck(2),
        ]);
        for alg in every {
            let (code, radix) = alg.code();
            assert!((1..64).contains(&code), "{alg}: code {code}");
            assert_eq!(Algorithm::from_code(code, radix), Some(alg), "{alg}");
        }
        assert_eq!(Algorithm::from_code(0, 0), None);
        assert_eq!(Algorithm::from_code(63, 0), None);
        for (i, &op) in ALL_OPS.iter().enumerate() {
            assert_eq!(op_code(op), i as u64 + 1, "{op:?}");
        }
    }

    #[test]
    fn every_field_of_a_call_changes_the_signature_and_reads_back() {
        let allreduce = |form, count, elem, red| {
            Signature::new(Collective::Allreduce, form, None, count, elem, Some(red))
                .with_algorithm(Algorithm::knomial(4))
        };
        let sum = Reduction::Builtin(Op::Sum);
        let base = allreduce(Form::Blocking, 8, 8, sum);
        assert_eq!(
            base.to_string(),
            "allreduce(Sum, 8 elements of 8 bytes, algorithm knomial4)"
        );
        let variants = [
            allreduce(Form::Blocking, 8, 8, Reduction::Builtin(Op::Max)),
            allreduce(Form::Blocking, 16, 8, sum),
            allreduce(Form::Blocking, 8, 4, sum),
            allreduce(Form::Nonblocking, 8, 8, sum),
            allreduce(Form::Blocking, 8, 8, Reduction::User),
            base.with_algorithm(Algorithm::knomial(8)),
            base.with_algorithm(Algorithm::RING),
            Signature::new(Collective::Reduce, Form::Blocking, Some(0), 8, 8, Some(sum)),
            Signature::SINGLE_ADDRESS,
            Signature::AGREEMENT,
        ];
        for v in variants {
            assert_ne!(v, base, "{v}");
        }
        let to = Signature::new(
            Collective::BroadcastTo,
            Form::SingleAddress,
            Some(1),
            4,
            8,
            None,
        );
        assert_ne!(to, Signature::SINGLE_ADDRESS);
        assert_eq!(
            to.to_string(),
            "broadcast_to(root 1, 4 elements of 8 bytes)"
        );
        let a = Signature::new(Collective::Broadcast, Form::Blocking, Some(0), 4, 4, None);
        let b = Signature::new(Collective::Broadcast, Form::Blocking, Some(2), 4, 4, None);
        assert_ne!(a, b);
        assert_eq!(b.to_string(), "broadcast(root 2, 4 elements of 4 bytes)");
    }
}
