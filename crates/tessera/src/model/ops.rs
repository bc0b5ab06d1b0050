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

/// `acc[i] = f(acc[i], other[i])`, generic in `f` so that each operation compiles to its
/// own (vectorisable) loop instead of an indirect call per element; from [`WIDE_FROM`]
/// bytes on a processor with AVX2, in its 32-byte vectors (the release build's baseline
/// has 16-byte ones).
#[inline(always)]
fn combine_with<T: Copy>(acc: &mut [T], other: &[T], f: impl Fn(T, T) -> T) {
    #[cfg(target_arch = "x86_64")]
    if std::mem::size_of_val(acc) >= WIDE_FROM && std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the processor has AVX2, which is all `combine_avx2` needs.
        unsafe { combine_avx2(acc, other, f) };
        return;
    }
    combine_each(acc, other, f);
}

/// Bytes of `acc` from which [`combine_with`] uses the wide form: below, the check would
/// cost a visible part of a short call.
const WIDE_FROM: usize = 1024;

/// The loop of [`combine_with`].
#[inline(always)]
fn combine_each<T: Copy>(acc: &mut [T], other: &[T], f: impl Fn(T, T) -> T) {
    acc.iter_mut().zip(other).for_each(|(a, &b)| *a = f(*a, b));
}

/// [`combine_each`] compiled for AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn combine_avx2<T: Copy>(acc: &mut [T], other: &[T], f: impl Fn(T, T) -> T) {
    combine_each(acc, other, f);
}

macro_rules! integer {
    ($($t:ty: $native:expr),*) => {$(
        impl Reducible for $t {
            const NATIVE: Option<NativeType> = Some($native);
            fn reduce(op: Op, acc: &mut [Self], other: &[Self]) -> Result<()> {
                match op {
                    Op::Sum => combine_with(acc, other, |a: $t, b| a.wrapping_add(b)),
                    Op::Prod => combine_with(acc, other, |a: $t, b| a.wrapping_mul(b)),
                    Op::Min => combine_with(acc, other, |a: $t, b| a.min(b)),
                    Op::Max => combine_with(acc, other, |a: $t, b| a.max(b)),
                    Op::BitAnd => combine_with(acc, other, |a: $t, b| a & b),
                    Op::BitOr => combine_with(acc, other, |a: $t, b| a | b),
                    Op::BitXor => combine_with(acc, other, |a: $t, b| a ^ b),
                    Op::LogicalAnd => {
                        combine_with(acc, other, |a: $t, b| (a != 0 && b != 0) as $t)
                    }
                    Op::LogicalOr => combine_with(acc, other, |a: $t, b| (a != 0 || b != 0) as $t),
                    Op::MinLoc | Op::MaxLoc => return Err(unsupported::<$t>(op)),
                }
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

macro_rules! float {
    ($($t:ty: $native:expr),*) => {$(
        impl Reducible for $t {
            const NATIVE: Option<NativeType> = Some($native);
            fn reduce(op: Op, acc: &mut [Self], other: &[Self]) -> Result<()> {
                match op {
                    Op::Sum => combine_with(acc, other, |a: $t, b| a + b),
                    Op::Prod => combine_with(acc, other, |a: $t, b| a * b),
                    Op::Min => combine_with(acc, other, |a: $t, b| a.min(b)),
                    Op::Max => combine_with(acc, other, |a: $t, b| a.max(b)),
                    _ => return Err(unsupported::<$t>(op)),
                }
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

    /// Every length around the wide form's threshold and its vectors' tails, element by
    /// element against the operation applied to each pair.
    #[test]
    fn short_and_wide_combinations_agree_with_each_element() {
        fn check<T: Reducible + PartialEq + std::fmt::Debug>(
            op: Op,
            value: impl Fn(usize) -> T,
            each: impl Fn(T, T) -> T,
        ) {
            let per = std::mem::size_of::<T>();
            for len in [0, 1, 7, 31, 33, WIDE_FROM / per - 1, WIDE_FROM / per, 4099] {
                let mut acc: Vec<T> = (0..len).map(&value).collect();
                let other: Vec<T> = (0..len).map(|i| value(i * 7 + 3)).collect();
                let want: Vec<T> = acc.iter().zip(&other).map(|(&a, &b)| each(a, b)).collect();
                T::reduce(op, &mut acc, &other).unwrap();
                assert_eq!(acc, want, "{op:?} over {len} elements of {per} bytes");
            }
        }
        check(
            Op::Sum,
            |i| i as u64 * 0x9E37_79B9,
            |a: u64, b| a.wrapping_add(b),
        );
        check(
            Op::Max,
            |i| (i * 37 % 101) as i32 - 50,
            |a: i32, b| a.max(b),
        );
        check(Op::BitXor, |i| (i * 13) as u8, |a: u8, b| a ^ b);
        check(Op::Sum, |i| i as f64 * 0.25 - 3.0, |a: f64, b| a + b);
        check(Op::Min, |i| (i % 17) as f32 - 8.5, |a: f32, b| a.min(b));
    }
}
