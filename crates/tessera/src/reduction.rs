//! The reduction vocabulary: the built-in operations ([`Op`]), the element types a
//! conduit's own reductions understand ([`NativeType`]) and the pair of them
//! ([`Reduction`]).
//!
//! It sits beneath both the conduit layer (whose own collectives reduce in these terms)
//! and the model layer (whose collectives name the same operations), so neither imports
//! the other for it. This module must never depend on any other module of the crate.

/// Element types a conduit's own reductions understand (see [`NativeCollectives`](crate::conduit::NativeCollectives)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NativeType {
    /// `i8`.
    I8,
    /// `i16`.
    I16,
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `u32`.
    U32,
    /// `u64`.
    U64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
}

/// A built-in reduction operation (of the model's collectives, and of a conduit's own
/// where it has one: the `mpi` conduit maps all but `MinLoc`/`MaxLoc` to MPI's).
///
/// ```
/// use tessera::{Op, Reducible};
/// let mut acc = [3u32, 8];
/// u32::reduce(Op::Max, &mut acc, &[5, 1]).unwrap();
/// assert_eq!(acc, [5, 8]);
/// assert!(f64::reduce(Op::BitXor, &mut [1.0], &[2.0]).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// Sum (wrapping for integers).
    Sum,
    /// Product (wrapping for integers).
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise and (integers).
    BitAnd,
    /// Bitwise or (integers).
    BitOr,
    /// Bitwise xor (integers).
    BitXor,
    /// Logical and: non-zero is true, the result is 0 or 1 (integers).
    LogicalAnd,
    /// Logical or (integers).
    LogicalOr,
    /// Minimum value with the index where it occurs (on [`Loc`](crate::Loc)); ties take the smaller index.
    MinLoc,
    /// Maximum value with its index (on [`Loc`](crate::Loc)); ties take the smaller index.
    MaxLoc,
}

/// What a native reduction combines: elements of one type with one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reduction {
    /// The element type the byte buffers hold.
    pub elem: NativeType,
    /// The operation.
    pub op: Op,
}
