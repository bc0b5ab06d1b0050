//! Reduction operations and the element types they apply to.

use bytemuck::{Pod, Zeroable};

use crate::error::CoreError;
use crate::reduction::NativeType;
pub use crate::reduction::Op;
use crate::Result;

/// A user reduction: `combine(acc, other)` sets `acc[i] = acc[i] ⊕ other[i]`. It must be
/// associative and commutative.
///
/// ```
/// let max_abs: &tessera::Combine<'_, f64> = &|acc, other| {
///     for (a, b) in acc.iter_mut().zip(other) {
///         *a = a.abs().max(b.abs());
///     }
///     Ok(())
/// };
/// let mut acc = [-3.0, 1.0];
/// max_abs(&mut acc, &[2.0, -4.0]).unwrap();
/// assert_eq!(acc, [3.0, 4.0]);
/// ```
pub type Combine<'f, T> = dyn Fn(&mut [T], &[T]) -> Result<()> + 'f;

/// Element types that built-in operations reduce.
pub trait Reducible: Pod {
    /// `acc[i] = acc[i] op other[i]`; an error if `op` does not apply to this type.
    fn reduce(op: Op, acc: &mut [Self], other: &[Self]) -> Result<()>;

    /// `out[i] = a[i] op b[i]` (all three as long), in one pass where the type has its
    /// own; the default copies `a` into `out`, then reduces `b` into it. An allreduce's
    /// first combination writes its output this way, from its input and what arrived:
    /// one pass instead of two saves a third of a long output's memory traffic.
    ///
    /// ```
    /// use tessera::{Op, Reducible};
    /// let mut out = [0u32; 3];
    /// u32::reduce_into(Op::Max, &mut out, &[1, 5, 3], &[4, 2, 3]).unwrap();
    /// assert_eq!(out, [4, 5, 3]);
    /// ```
    fn reduce_into(op: Op, out: &mut [Self], a: &[Self], b: &[Self]) -> Result<()> {
        same_lengths(out, a, b)?;
        out.copy_from_slice(a);
        Self::reduce(op, out, b)
    }

    /// The type as a conduit's own collectives know it (MPI's `MPI_DOUBLE`, ...), so that
    /// built-in reductions can use the `native` algorithm; `None` (the default): they
    /// cannot, and use the model's algorithms.
    const NATIVE: Option<NativeType> = None;
}

fn unsupported<T>(op: Op) -> crate::Error {
    CoreError::BadArgument {
        call: "a reduction",
        argument: "op",
        why: format!(
            "reduction {op:?} does not apply to {}",
            std::any::type_name::<T>()
        ),
    }
    .into()
}

/// Every built-in reduction (checked mode names them by their place here).
pub(crate) const ALL_OPS: [Op; 11] = [
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

/// An error unless the output and the two operands of [`Reducible::reduce_into`] are
/// equally long.
fn same_lengths<T>(out: &[T], a: &[T], b: &[T]) -> Result<()> {
    if out.len() == a.len() && a.len() == b.len() {
        return Ok(());
    }
    Err(CoreError::BadArgument {
        call: "reduce_into",
        argument: "out",
        why: format!(
            "the output has {} elements and the operands {} and {}; pass three slices of one length",
            out.len(),
            a.len(),
            b.len()
        ),
    }
    .into())
}

/// `acc[i] = f(acc[i], other[i])`, generic in `f` so that each operation compiles to its
/// own (vectorisable) loop instead of an indirect call per element.
#[inline(always)]
fn combine_with<T: Copy>(acc: &mut [T], other: &[T], f: impl Fn(T, T) -> T) {
    acc.iter_mut().zip(other).for_each(|(a, &b)| *a = f(*a, b));
}

/// `out[i] = f(a[i], b[i])`, as [`combine_with`].
#[inline(always)]
fn combine_into<T: Copy>(out: &mut [T], a: &[T], b: &[T], f: impl Fn(T, T) -> T) {
    out.iter_mut()
        .zip(a.iter().zip(b))
        .for_each(|(o, (&x, &y))| *o = f(x, y));
}

/// The built-in operations on integer type `$t`, each as `$pass(args..., f)`.
macro_rules! integer_ops {
    ($t:ty, $op:expr, $pass:ident($($arg:expr),*)) => {
        match $op {
            Op::Sum => $pass($($arg,)* |a: $t, b| a.wrapping_add(b)),
            Op::Prod => $pass($($arg,)* |a: $t, b| a.wrapping_mul(b)),
            Op::Min => $pass($($arg,)* |a: $t, b| a.min(b)),
            Op::Max => $pass($($arg,)* |a: $t, b| a.max(b)),
            Op::BitAnd => $pass($($arg,)* |a: $t, b| a & b),
            Op::BitOr => $pass($($arg,)* |a: $t, b| a | b),
            Op::BitXor => $pass($($arg,)* |a: $t, b| a ^ b),
            Op::LogicalAnd => $pass($($arg,)* |a: $t, b| (a != 0 && b != 0) as $t),
            Op::LogicalOr => $pass($($arg,)* |a: $t, b| (a != 0 || b != 0) as $t),
            Op::MinLoc | Op::MaxLoc => return Err(unsupported::<$t>($op)),
        }
    };
}

macro_rules! integer {
    ($($t:ty: $native:expr),*) => {$(
        impl Reducible for $t {
            const NATIVE: Option<NativeType> = Some($native);
            fn reduce(op: Op, acc: &mut [Self], other: &[Self]) -> Result<()> {
                integer_ops!($t, op, combine_with(acc, other));
                Ok(())
            }
            fn reduce_into(op: Op, out: &mut [Self], a: &[Self], b: &[Self]) -> Result<()> {
                same_lengths(out, a, b)?;
                integer_ops!($t, op, combine_into(out, a, b));
                Ok(())
            }
        }
    )*};
}
/// `usize` and `isize` as the fixed-width type of the same size.
const fn pointer_sized(signed: bool) -> NativeType {
    match (std::mem::size_of::<usize>() == 8, signed) {
        (true, false) => NativeType::U64,
        (true, true) => NativeType::I64,
        (false, false) => NativeType::U32,
        (false, true) => NativeType::I32,
    }
}

integer!(
    i8: NativeType::I8,
    i16: NativeType::I16,
    i32: NativeType::I32,
    i64: NativeType::I64,
    u8: NativeType::U8,
    u16: NativeType::U16,
    u32: NativeType::U32,
    u64: NativeType::U64,
    usize: pointer_sized(false),
    isize: pointer_sized(true)
);

/// The built-in operations on floating-point type `$t`, as [`integer_ops`].
macro_rules! float_ops {
    ($t:ty, $op:expr, $pass:ident($($arg:expr),*)) => {
        match $op {
            Op::Sum => $pass($($arg,)* |a: $t, b| a + b),
            Op::Prod => $pass($($arg,)* |a: $t, b| a * b),
            Op::Min => $pass($($arg,)* |a: $t, b| a.min(b)),
            Op::Max => $pass($($arg,)* |a: $t, b| a.max(b)),
            _ => return Err(unsupported::<$t>($op)),
        }
    };
}

macro_rules! float {
    ($($t:ty: $native:expr),*) => {$(
        impl Reducible for $t {
            const NATIVE: Option<NativeType> = Some($native);
            fn reduce(op: Op, acc: &mut [Self], other: &[Self]) -> Result<()> {
                float_ops!($t, op, combine_with(acc, other));
                Ok(())
            }
            fn reduce_into(op: Op, out: &mut [Self], a: &[Self], b: &[Self]) -> Result<()> {
                same_lengths(out, a, b)?;
                float_ops!($t, op, combine_into(out, a, b));
                Ok(())
            }
        }
    )*};
}
float!(f32: NativeType::F32, f64: NativeType::F64);

/// A value with the index where it occurs, for [`Op::MinLoc`] and [`Op::MaxLoc`]
/// (the index is usually a rank or a global position).
///
/// ```
/// use tessera::{Loc, Op, Reducible};
/// let mut best = [Loc::new(2.5, 7)];
/// Loc::reduce(Op::MaxLoc, &mut best, &[Loc::new(9.0, 3)]).unwrap();
/// assert_eq!(best[0], Loc::new(9.0, 3));
/// ```
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct Loc {
    /// The value.
    pub value: f64,
    /// Where it occurs.
    pub index: u64,
}

impl Loc {
    /// A value at an index.
    pub fn new(value: f64, index: u64) -> Loc {
        Loc { value, index }
    }
}

impl Reducible for Loc {
    fn reduce(op: Op, acc: &mut [Self], other: &[Self]) -> Result<()> {
        let better: fn(&Loc, &Loc) -> bool = match op {
            Op::MinLoc => |b, a| b.value < a.value || (b.value == a.value && b.index < a.index),
            Op::MaxLoc => |b, a| b.value > a.value || (b.value == a.value && b.index < a.index),
            _ => return Err(unsupported::<Loc>(op)),
        };
        for (a, b) in acc.iter_mut().zip(other) {
            if better(b, a) {
                *a = *b;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The operations on integers: all but those with an index.
    fn integer_ops() -> impl Iterator<Item = Op> {
        ALL_OPS
            .into_iter()
            .filter(|op| !matches!(op, Op::MinLoc | Op::MaxLoc))
    }

    /// `a op b` element by element, written out once more for the test.
    fn expected_i64(op: Op, a: i64, b: i64) -> i64 {
        match op {
            Op::Sum => a.wrapping_add(b),
            Op::Prod => a.wrapping_mul(b),
            Op::Min => a.min(b),
            Op::Max => a.max(b),
            Op::BitAnd => a & b,
            Op::BitOr => a | b,
            Op::BitXor => a ^ b,
            Op::LogicalAnd => i64::from(a != 0 && b != 0),
            Op::LogicalOr => i64::from(a != 0 || b != 0),
            _ => unreachable!(),
        }
    }

    proptest! {
        /// The one-pass form writes what the element-wise definition gives, and what a
        /// copy followed by `reduce` gives, for every integer operation.
        #[test]
        fn reduce_into_matches_the_definition(
            pairs in prop::collection::vec((-4i64..4, any::<i64>()), 0..200),
        ) {
            let a: Vec<i64> = pairs.iter().map(|p| p.0).collect();
            let b: Vec<i64> = pairs.iter().map(|p| p.1 % 5).collect();
            for op in integer_ops() {
                let mut out = vec![7i64; a.len()];
                i64::reduce_into(op, &mut out, &a, &b).unwrap();
                let want: Vec<i64> = a.iter().zip(&b).map(|(&x, &y)| expected_i64(op, x, y)).collect();
                prop_assert_eq!(&out, &want, "{:?}", op);
                let mut two_pass = a.clone();
                i64::reduce(op, &mut two_pass, &b).unwrap();
                prop_assert_eq!(&out, &two_pass, "{:?}", op);
            }
        }

        /// The same for the floating-point operations, bit for bit.
        #[test]
        fn float_reduce_into_matches_reduce(
            pairs in prop::collection::vec((-1e6f64..1e6, -1e6f64..1e6), 0..200),
        ) {
            let a: Vec<f64> = pairs.iter().map(|p| p.0).collect();
            let b: Vec<f64> = pairs.iter().map(|p| p.1).collect();
            for op in [Op::Sum, Op::Prod, Op::Min, Op::Max] {
                let mut out = vec![0f64; a.len()];
                f64::reduce_into(op, &mut out, &a, &b).unwrap();
                let mut two_pass = a.clone();
                f64::reduce(op, &mut two_pass, &b).unwrap();
                let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                prop_assert_eq!(bits(&out), bits(&two_pass), "{:?}", op);
            }
        }
    }

    #[test]
    fn reduce_into_names_unequal_lengths_and_unsupported_ops() {
        let mut out = [0u32; 2];
        let err = u32::reduce_into(Op::Sum, &mut out, &[1, 2, 3], &[1, 2]).unwrap_err();
        assert!(err.to_string().contains("one length"), "{err}");
        let err = f32::reduce_into(Op::BitAnd, &mut [0.0], &[1.0], &[2.0]).unwrap_err();
        assert!(err.to_string().contains("does not apply"), "{err}");
        // A type with only the provided form: a copy, then `reduce`.
        let mut best = [Loc::new(0.0, 0); 2];
        let a = [Loc::new(1.0, 4), Loc::new(5.0, 1)];
        let b = [Loc::new(3.0, 2), Loc::new(5.0, 0)];
        Loc::reduce_into(Op::MaxLoc, &mut best, &a, &b).unwrap();
        assert_eq!(best, [Loc::new(3.0, 2), Loc::new(5.0, 0)]);
    }
}
