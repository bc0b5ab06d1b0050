//! The NPB pseudo-random number generator, in its exact integer form.
//!
//! `x ← a·x mod 2⁴⁶`, returning `x·2⁻⁴⁶` in (0, 1). The product of two 46-bit numbers fits
//! in 128 bits, so one wide multiply and a mask give exactly the values of the reference
//! implementations (the integer `randi8` and the double-precision `randdp` agree bit for
//! bit). Jump-ahead (`aⁿ mod 2⁴⁶`) is repeated squaring, so every rank can start at its
//! own offset of the sequence.

/// The default multiplier, 5¹³.
pub const A: u64 = 1_220_703_125;
/// The modulus 2⁴⁶ minus one, as a mask.
const MASK: u64 = (1 << 46) - 1;
/// 2⁻⁴⁶.
const R46: f64 = 1.0 / (1u64 << 46) as f64;

/// `a·x mod 2⁴⁶`.
///
/// ```
/// use tessera_npb::rng::{mul_mod, A};
/// assert_eq!(mul_mod(A, 1), A);
/// assert_eq!(mul_mod(1 << 45, 4), 0); // 2⁴⁷ mod 2⁴⁶
/// ```
#[inline(always)]
pub fn mul_mod(a: u64, x: u64) -> u64 {
    ((a as u128 * x as u128) as u64) & MASK
}

/// NPB `randlc`: advance `x` once and return the new value scaled into (0, 1).
#[inline(always)]
pub fn randlc(x: &mut u64, a: u64) -> f64 {
    *x = mul_mod(a, *x);
    *x as f64 * R46
}

/// NPB `vranlc`: fill `out` with the next `out.len()` values of the sequence.
pub fn vranlc(x: &mut u64, a: u64, out: &mut [f64]) {
    let mut v = *x;
    for y in out.iter_mut() {
        v = mul_mod(a, v);
        *y = v as f64 * R46;
    }
    *x = v;
}

/// `aⁿ mod 2⁴⁶` by repeated squaring: the multiplier that jumps `n` steps ahead.
///
/// ```
/// use tessera_npb::rng::{pow_mod, mul_mod, A};
/// let mut x = 7;
/// for _ in 0..5 { x = mul_mod(A, x); }
/// assert_eq!(mul_mod(pow_mod(A, 5), 7), x);
/// ```
pub fn pow_mod(a: u64, mut n: u64) -> u64 {
    let mut result = 1u64;
    let mut base = a & MASK;
    while n > 0 {
        if n & 1 == 1 {
            result = mul_mod(base, result);
        }
        base = mul_mod(base, base);
        n >>= 1;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The integer form against a double-precision emulation of randdp (the 23-bit split
    /// the reference uses), which must agree bit for bit.
    fn randlc_double(x: &mut f64, a: f64) -> f64 {
        let (r23, t23) = (0.5f64.powi(23), 2f64.powi(23));
        let (r46, t46) = (r23 * r23, t23 * t23);
        let t1 = r23 * a;
        let a1 = t1.trunc();
        let a2 = a - t23 * a1;
        let t1 = r23 * *x;
        let x1 = t1.trunc();
        let x2 = *x - t23 * x1;
        let t1 = a1 * x2 + a2 * x1;
        let t2 = (r23 * t1).trunc();
        let z = t1 - t23 * t2;
        let t3 = t23 * z + a2 * x2;
        let t4 = (r46 * t3).trunc();
        *x = t3 - t46 * t4;
        r46 * *x
    }

    #[test]
    fn integer_form_matches_the_double_precision_form() {
        let mut xi = 314_159_265u64;
        let mut xd = 314_159_265f64;
        for _ in 0..100_000 {
            let ri = randlc(&mut xi, A);
            let rd = randlc_double(&mut xd, A as f64);
            assert_eq!(ri.to_bits(), rd.to_bits());
            assert_eq!(xi, xd as u64);
        }
    }

    #[test]
    fn jump_ahead_equals_stepping() {
        let mut x = 271_828_183u64;
        let start = x;
        let mut buf = vec![0.0; 1000];
        vranlc(&mut x, A, &mut buf);
        assert_eq!(mul_mod(pow_mod(A, 1000), start), x);
    }
}
