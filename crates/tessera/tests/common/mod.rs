//! Inputs and errors the collective tests share.

/// Element `i` of world rank `r`'s input in test `seed`.
pub(crate) fn input_u64(r: usize, i: usize, seed: u64) -> u64 {
    let mut x = (r as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (i as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9)
        ^ seed;
    x ^= x >> 31;
    x.wrapping_mul(0x94D0_49BB_1331_11EB) >> 8
}

/// A test's failure, as a rank's error.
pub(crate) fn fail(what: String) -> Box<dyn std::error::Error + Send + Sync> {
    what.into()
}
