//! The specification's type tables, from which every typed family is generated.

/// An RMA type: C type, TYPENAME, the Rust type of its elements.
pub(crate) struct Ty(
    pub(crate) &'static str,
    pub(crate) &'static str,
    pub(crate) &'static str,
);

/// Standard RMA types (spec §9.5, Table "Standard RMA Types and Names").
pub(crate) const RMA: &[Ty] = &[
    Ty("float", "float", "f32"),
    Ty("double", "double", "f64"),
    Ty("long double", "longdouble", "crate::LongDouble"),
    Ty("char", "char", "libc::c_char"),
    Ty("signed char", "schar", "i8"),
    Ty("short", "short", "i16"),
    Ty("int", "int", "i32"),
    Ty("long", "long", "libc::c_long"),
    Ty("long long", "longlong", "i64"),
    Ty("unsigned char", "uchar", "u8"),
    Ty("unsigned short", "ushort", "u16"),
    Ty("unsigned int", "uint", "u32"),
    Ty("unsigned long", "ulong", "libc::c_ulong"),
    Ty("unsigned long long", "ulonglong", "u64"),
    Ty("int8_t", "int8", "i8"),
    Ty("int16_t", "int16", "i16"),
    Ty("int32_t", "int32", "i32"),
    Ty("int64_t", "int64", "i64"),
    Ty("uint8_t", "uint8", "u8"),
    Ty("uint16_t", "uint16", "u16"),
    Ty("uint32_t", "uint32", "u32"),
    Ty("uint64_t", "uint64", "u64"),
    Ty("size_t", "size", "usize"),
    Ty("ptrdiff_t", "ptrdiff", "isize"),
];

/// An AMO or point-to-point type: C type, TYPENAME, Rust type, and the 16/32/64-bit
/// integer the runtime's atomics and waits work on (same size).
pub(crate) struct Word(
    pub(crate) &'static str,
    pub(crate) &'static str,
    pub(crate) &'static str,
    pub(crate) &'static str,
);

/// Standard AMO types (spec §9.7, Table "Standard AMO Types and Names").
pub(crate) const AMO: &[Word] = &[
    Word("int", "int", "i32", "i32"),
    Word("long", "long", "libc::c_long", "i64"),
    Word("long long", "longlong", "i64", "i64"),
    Word("unsigned int", "uint", "u32", "u32"),
    Word("unsigned long", "ulong", "libc::c_ulong", "u64"),
    Word("unsigned long long", "ulonglong", "u64", "u64"),
    Word("int32_t", "int32", "i32", "i32"),
    Word("int64_t", "int64", "i64", "i64"),
    Word("uint32_t", "uint32", "u32", "u32"),
    Word("uint64_t", "uint64", "u64", "u64"),
    Word("size_t", "size", "usize", "u64"),
    Word("ptrdiff_t", "ptrdiff", "isize", "i64"),
];

/// Extended AMO types: the standard ones and float, double (fetch, set, swap only).
pub(crate) const AMO_FLOAT: &[Word] = &[
    Word("float", "float", "f32", "u32"),
    Word("double", "double", "f64", "u64"),
];

/// Bitwise AMO types (spec: "Bitwise AMO Types and Names").
pub(crate) const AMO_BITWISE: &[&str] = &[
    "uint",
    "ulong",
    "ulonglong",
    "int32",
    "int64",
    "uint32",
    "uint64",
];

/// Point-to-point synchronisation types (spec §9.10).
pub(crate) const P2P: &[Word] = &[
    Word("short", "short", "i16", "i16"),
    Word("int", "int", "i32", "i32"),
    Word("long", "long", "libc::c_long", "i64"),
    Word("long long", "longlong", "i64", "i64"),
    Word("unsigned short", "ushort", "u16", "u16"),
    Word("unsigned int", "uint", "u32", "u32"),
    Word("unsigned long", "ulong", "libc::c_ulong", "u64"),
    Word("unsigned long long", "ulonglong", "u64", "u64"),
    Word("int32_t", "int32", "i32", "i32"),
    Word("int64_t", "int64", "i64", "i64"),
    Word("uint32_t", "uint32", "u32", "u32"),
    Word("uint64_t", "uint64", "u64", "u64"),
    Word("size_t", "size", "usize", "u64"),
    Word("ptrdiff_t", "ptrdiff", "isize", "i64"),
];

/// Reduction types of the active-set (`_to_all`) routines: C type, TYPENAME, Rust type,
/// and the operations (a = and/or/xor, m = max/min, s = sum/prod).
pub(crate) const REDUCE: &[(&str, &str, &str, &str)] = &[
    ("short", "short", "i16", "ams"),
    ("int", "int", "i32", "ams"),
    ("long", "long", "libc::c_long", "ams"),
    ("long long", "longlong", "i64", "ams"),
    ("float", "float", "f32", "ms"),
    ("double", "double", "f64", "ms"),
    ("long double", "longdouble", "crate::LongDouble", "ms"),
    ("tessera_complexf", "complexf", "crate::ComplexF", "s"),
    ("tessera_complexd", "complexd", "crate::ComplexD", "s"),
];

/// Sized RMA: bits and the Rust element type.
pub(crate) const SIZED: &[(u32, &str)] = &[
    (8, "u8"),
    (16, "u16"),
    (32, "u32"),
    (64, "u64"),
    (128, "u128"),
];

/// Team reduction types (spec §9.9, Table "Reduction Types, Names and Supporting
/// Operations"): C type, TYPENAME, Rust type, and the operations (a = and/or/xor,
/// m = max/min, s = sum/prod).
pub(crate) const REDUCE_TEAM: &[(&str, &str, &str, &str)] = &[
    ("char", "char", "libc::c_char", "ms"),
    ("signed char", "schar", "i8", "ms"),
    ("short", "short", "i16", "ms"),
    ("int", "int", "i32", "ms"),
    ("long", "long", "libc::c_long", "ms"),
    ("long long", "longlong", "i64", "ms"),
    ("ptrdiff_t", "ptrdiff", "isize", "ms"),
    ("unsigned char", "uchar", "u8", "ams"),
    ("unsigned short", "ushort", "u16", "ams"),
    ("unsigned int", "uint", "u32", "ams"),
    ("unsigned long", "ulong", "libc::c_ulong", "ams"),
    ("unsigned long long", "ulonglong", "u64", "ams"),
    ("int8_t", "int8", "i8", "ams"),
    ("int16_t", "int16", "i16", "ams"),
    ("int32_t", "int32", "i32", "ams"),
    ("int64_t", "int64", "i64", "ams"),
    ("uint8_t", "uint8", "u8", "ams"),
    ("uint16_t", "uint16", "u16", "ams"),
    ("uint32_t", "uint32", "u32", "ams"),
    ("uint64_t", "uint64", "u64", "ams"),
    ("size_t", "size", "usize", "ams"),
    ("float", "float", "f32", "ms"),
    ("double", "double", "f64", "ms"),
    ("long double", "longdouble", "crate::LongDouble", "ms"),
    ("tessera_complexd", "complexd", "crate::ComplexD", "s"),
    ("tessera_complexf", "complexf", "crate::ComplexF", "s"),
];

/// The operations a reduction table's letters stand for, with the runtime's name of each.
pub(crate) fn reduce_ops(letters: &str) -> Vec<(&'static str, &'static str)> {
    let mut ops = Vec::new();
    if letters.contains('a') {
        ops.extend([("and", "And"), ("or", "Or"), ("xor", "Xor")]);
    }
    if letters.contains('m') {
        ops.extend([("max", "Max"), ("min", "Min")]);
    }
    if letters.contains('s') {
        ops.extend([("sum", "Sum"), ("prod", "Prod")]);
    }
    ops
}
