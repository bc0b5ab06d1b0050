//! EP: the embarrassingly parallel kernel.
//!
//! Generate `2^(m+1)` uniform numbers with the NPB generator, pair them, keep the pairs
//! inside the unit circle, turn them into Gaussian deviates by the Marsaglia polar method,
//! and count them by annulus (`max(|X|, |Y|)`), summing X and Y. The work is `2^(m−16)`
//! batches of 2¹⁶ pairs. Each batch starts at its own offset of the sequence
//! (`s·a^(2·2¹⁶·k)`), so any rank can compute any batch. Ranks take contiguous ranges of
//! batches, and one allreduce combines the sums and counts.
//!
//! Timed region (as NPB): the batches and the reduction; reported time is the slowest
//! rank's.

use crate::NpbError;
use std::collections::BTreeMap;
use std::time::Instant;
use tessera::coll::{Allreduce, Barrier};
use tessera::Blocking;

use tessera::{Context, Op, Team};

use crate::report::Outcome;
use crate::rng::{mul_mod, pow_mod, vranlc, A};
use crate::Class;

/// log₂ of the pairs per batch.
const MK: u32 = 16;
/// Pairs per batch.
const NK: usize = 1 << MK;
/// Annuli counted.
const NQ: usize = 10;
/// The EP seed.
const SEED: u64 = 271_828_183;
/// Verification tolerance (relative).
const EPSILON: f64 = 1e-8;

/// One class: log₂ of the pairs, and the official sums of X and Y.
#[derive(Clone, Copy, Debug)]
pub struct ClassData {
    /// The class.
    pub class: Class,
    /// log₂ of the pairs generated (`2^(m+1)` numbers).
    pub m: u32,
    /// The official (Σ X, Σ Y); `None` for a class whose values this crate does not carry.
    pub sums: Option<(f64, f64)>,
}

/// Class parameters and official verification values (NPB 3.4).
pub const CLASSES: [ClassData; 6] = [
    ClassData {
        class: Class::S,
        m: 24,
        sums: Some((-3247.83465203474, -6958.407078382297)),
    },
    ClassData {
        class: Class::W,
        m: 25,
        sums: Some((-2863.319731645753, -6320.053679109499)),
    },
    ClassData {
        class: Class::A,
        m: 28,
        sums: Some((-4295.875165629892, -15807.32573678431)),
    },
    ClassData {
        class: Class::B,
        m: 30,
        sums: Some((40338.15542441498, -26606.69192809235)),
    },
    ClassData {
        class: Class::C,
        m: 32,
        sums: Some((47643.67927995374, -80840.72988043731)),
    },
    ClassData {
        class: Class::D,
        m: 36,
        sums: None,
    },
];

/// Sums and annulus counts of a range of batches.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    /// Σ X.
    pub sx: f64,
    /// Σ Y.
    pub sy: f64,
    /// Pairs per annulus.
    pub q: [f64; NQ],
}

/// Scratch for [`tally`]: one batch's numbers, split into the first and second of each
/// pair, and the annulus of each pair.
pub struct Scratch {
    first: Vec<u64>,
    second: Vec<u64>,
    annulus: Vec<u32>,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch {
            first: vec![0; NK],
            second: vec![0; NK],
            annulus: vec![0; NK],
        }
    }
}

/// Independent chains of the generator: number `j + CHAINS` follows number `j` by the
/// multiplier `a^CHAINS`, so the chains advance side by side instead of one multiply
/// waiting for the last.
const CHAINS: usize = 8;

/// Fill `first[i]`, `second[i]` with numbers `2i + 1` and `2i + 2` after `seed` (the
/// integer states, in `[0, 2⁴⁶)`), exactly as `vranlc` would.
fn generate_pairs(seed: u64, first: &mut [u64], second: &mut [u64]) {
    let step = pow_mod(A, CHAINS as u64);
    let mut v = [0u64; CHAINS];
    let mut x = seed;
    for slot in v.iter_mut() {
        x = mul_mod(A, x);
        *slot = x;
    }
    const PAIRS: usize = CHAINS / 2;
    for (f, s) in first
        .chunks_exact_mut(PAIRS)
        .zip(second.chunks_exact_mut(PAIRS))
    {
        for j in 0..PAIRS {
            f[j] = v[2 * j];
            s[j] = v[2 * j + 1];
        }
        for slot in v.iter_mut() {
            *slot = mul_mod(step, *slot);
        }
    }
}

/// Floating-point operations per candidate pair in the vectorised Gaussian pairs (adds, multiplies,
/// two divides and a square root, each counted once): 8 to scale the two uniforms, 3 for
/// `t`, 34 for the logarithm, 3 for the factor, 4 for the deviates and their sums, and 3
/// for the annulus.
pub const FLOPS_PER_PAIR: f64 = 55.0;

/// `x · 2⁻⁴⁶` for a generator state `x < 2⁴⁶`, without an integer-to-float instruction
/// (AVX2 has none for 64-bit lanes): `x` goes into the mantissa of 2⁵², which is then
/// subtracted. Exact, and equal to `x as f64 * 2⁻⁴⁶`.
#[inline(always)]
fn unit(x: u64) -> f64 {
    const TWO52: f64 = 4_503_599_627_370_496.0;
    (f64::from_bits(TWO52.to_bits() | x) - TWO52) * (1.0 / (1u64 << 46) as f64)
}

/// Natural logarithm of a positive, normal `x`, in operations that vectorise at every
/// level: `x = 2ᵉ·m` with `m` in `[√½, √2)`, and `ln m = 2·atanh(s)`, `s = (m − 1)/(m + 1)`,
/// by its series to the `s²³` term (`|s| ≤ 0.172`, so the next term is below 10⁻¹⁹ of the
/// result). Within a few ulps of `f64::ln`.
#[inline(always)]
fn ln(x: f64) -> f64 {
    const TWO52: f64 = 4_503_599_627_370_496.0;
    let bits = x.to_bits();
    let biased = f64::from_bits(TWO52.to_bits() | (bits >> 52)) - TWO52;
    let m = f64::from_bits((bits & ((1 << 52) - 1)) | 1.0f64.to_bits());
    let big = m > std::f64::consts::SQRT_2;
    let m = if big { 0.5 * m } else { m };
    let e = biased - 1023.0 + if big { 1.0 } else { 0.0 };
    let s = (m - 1.0) / (m + 1.0);
    let z = s * s;
    // 1 + z/3 + z²/5 + … + z¹¹/23, by Horner's rule.
    let mut p = 1.0 / 23.0;
    for k in (0..11).rev() {
        p = p * z + 1.0 / (2 * k + 1) as f64;
    }
    e * std::f64::consts::LN_2 + 2.0 * s * p
}

crate::multilevel! {
    /// The Gaussian pairs of one batch: adds Σ X and Σ Y into eight lanes each of `sums`
    /// (X in `sums[..8]`, Y in `sums[8..]`) and writes each pair's annulus, or [`NQ`] for a
    /// pair outside the unit circle, to `annulus`. Branch-free, so it vectorises: every
    /// pair is computed, and the rejected ones (a fifth) are masked out.
    fn gaussian_pairs(first: &[u64], second: &[u64], sums: &mut [f64; 16], annulus: &mut [u32]) {
        const LANES: usize = 8;
        const TWO52: f64 = 4_503_599_627_370_496.0;
        let (mut sx, mut sy) = ([0.0f64; LANES], [0.0f64; LANES]);
        for ((f, s), a) in first
            .chunks_exact(LANES)
            .zip(second.chunks_exact(LANES))
            .zip(annulus.chunks_exact_mut(LANES))
        {
            for k in 0..LANES {
                let x1 = 2.0 * unit(f[k]) - 1.0;
                let x2 = 2.0 * unit(s[k]) - 1.0;
                let t = x1 * x1 + x2 * x2;
                let inside = t <= 1.0;
                let factor = (-2.0 * ln(t) / t).sqrt();
                let (gx, gy) = (x1 * factor, x2 * factor);
                // Masks as bits, so the sums stay in registers: a rejected pair's values
                // may be NaN, and adding zero leaves the lane as it was.
                let keep = if inside { u64::MAX } else { 0 };
                sx[k] += f64::from_bits(gx.to_bits() & keep);
                sy[k] += f64::from_bits(gy.to_bits() & keep);
                // ⌊max(|X|, |Y|)⌋ through the mantissa of 2⁵² (no float-to-integer
                // conversion, which AVX2 lacks for these lanes).
                let ring = (gx.abs().max(gy.abs()).floor() + TWO52).to_bits() as u32;
                a[k] = if inside { ring } else { NQ as u32 };
            }
        }
        for k in 0..LANES {
            sums[k] += sx[k];
            sums[LANES + k] += sy[k];
        }
    }
}

/// Tally batches `first..last` (0-based). At the `scalar` level (no AVX2) the branchy
/// form through `f64::ln` is faster than computing every pair, so that runs instead.
pub fn tally(first: u64, last: u64, scratch: &mut Scratch) -> Tally {
    if crate::simd::level() == crate::simd::Level::Scalar {
        return tally_reference(first, last);
    }
    let an = pow_mod(A, 2 * NK as u64);
    let mut sums = [0.0f64; 16];
    let mut counts = [[0u64; NQ + 1]; 4];
    for k in first..last {
        let seed = mul_mod(pow_mod(an, k), SEED);
        generate_pairs(seed, &mut scratch.first, &mut scratch.second);
        gaussian_pairs(
            &scratch.first,
            &scratch.second,
            &mut sums,
            &mut scratch.annulus,
        );
        // Four histograms, so consecutive pairs in one annulus do not wait on each other.
        for quad in scratch.annulus.chunks_exact(4) {
            for (c, &ring) in counts.iter_mut().zip(quad) {
                c[ring as usize] += 1;
            }
        }
    }
    let mut t = Tally::default();
    for c in &counts {
        for (q, &n) in t.q.iter_mut().zip(c) {
            *q += n as f64;
        }
    }
    t.sx = sums[..8].iter().sum();
    t.sy = sums[8..].iter().sum();
    t
}

/// [`tally`] as the specification writes it, one pair at a time through `vranlc` and
/// `f64::ln`: the reference the vector form is tested against.
pub fn tally_reference(first: u64, last: u64) -> Tally {
    let an = pow_mod(A, 2 * NK as u64);
    let mut x = vec![0.0; 2 * NK];
    let mut t = Tally::default();
    for k in first..last {
        let mut seed = mul_mod(pow_mod(an, k), SEED);
        vranlc(&mut seed, A, &mut x);
        for pair in x.chunks_exact(2) {
            let x1 = 2.0 * pair[0] - 1.0;
            let x2 = 2.0 * pair[1] - 1.0;
            let r = x1 * x1 + x2 * x2;
            if r <= 1.0 {
                let f = (-2.0 * r.ln() / r).sqrt();
                let (gx, gy) = (x1 * f, x2 * f);
                let l = gx.abs().max(gy.abs()) as usize;
                t.q[l] += 1.0;
                t.sx += gx;
                t.sy += gy;
            }
        }
    }
    t
}

/// What a rank of EP holds: one batch of numbers and annuli.
pub fn footprint(_class: Class, _ranks: usize) -> crate::Footprint {
    crate::Footprint {
        segment: 0,
        private: NK * (2 * size_of::<u64>() + size_of::<u32>()),
    }
}

variants! {
    /// EP has one way to run.
    pub enum Variant {
        /// Contiguous ranges of batches per rank, one allreduce.
        Default => "default",
    }
}

/// EP in the kernel registry.
pub struct Ep;

impl crate::Benchmark for Ep {
    fn name(&self) -> &'static str {
        "ep"
    }
    fn variants(&self) -> &'static [&'static str] {
        Variant::NAMES
    }
    fn check_ranks(&self, ranks: usize) -> Result<(), NpbError> {
        if ranks >= 1 {
            Ok(())
        } else {
            Err(NpbError::ranks(
                "ep",
                ranks,
                "ep runs on any number of ranks ≥ 1".into(),
            ))
        }
    }
    fn footprint(&self, class: Class, ranks: usize) -> crate::Footprint {
        footprint(class, ranks)
    }
    fn run(&self, ctx: &Context, class: Class, variant: &str) -> tessera::Result<Option<Outcome>> {
        run(ctx, class, crate::parse_variant("ep", variant)?)
    }
    /// EP is bound by arithmetic: [`FLOPS_PER_PAIR`] operations for each of the class's
    /// 2^M candidate pairs.
    fn demand(&self, class: Class, _outcome: &Outcome) -> crate::hardware::Demand {
        let pairs = 2f64.powi(crate::class_data(&CLASSES, |c| c.class, class).m as i32);
        crate::hardware::Demand {
            resource: crate::hardware::Resource::Flops,
            amount: FLOPS_PER_PAIR * pairs,
            basis: format!("{FLOPS_PER_PAIR} floating-point operations per candidate pair"),
        }
    }
}

/// Run EP at `class` on every rank of `ctx`'s job; rank 0 gets the outcome.
pub fn run(ctx: &Context, class: Class, variant: Variant) -> tessera::Result<Option<Outcome>> {
    let data = crate::class_data(&CLASSES, |c| c.class, class);
    let m = data.m;
    let world = Team::world(ctx)?;
    let batches = 1u64 << (m - MK);
    let (p, r) = (world.size() as u64, world.rank() as u64);
    let (first, last) = (batches * r / p, batches * (r + 1) / p);
    let mut scratch = Scratch::default();
    world.run(Barrier, Blocking)?;
    let start = Instant::now();
    let mine = tally(first, last, &mut scratch);
    let mut packed = [0.0; 2 + NQ];
    packed[0] = mine.sx;
    packed[1] = mine.sy;
    packed[2..].copy_from_slice(&mine.q);
    let mut total = [0.0; 2 + NQ];
    world.run(Allreduce::new(&packed, Op::Sum).to(&mut total), Blocking)?;
    let elapsed = world.run(
        Allreduce::value(start.elapsed().as_secs_f64(), Op::Max),
        Blocking,
    )?;
    crate::note_resident_share(); // every array is still held here
    if world.rank() != 0 {
        return Ok(None);
    }
    let (sx, sy) = (total[0], total[1]);
    let verified = data.sums.map(|(sx_ref, sy_ref)| {
        ((sx - sx_ref) / sx_ref).abs() <= EPSILON && ((sy - sy_ref) / sy_ref).abs() <= EPSILON
    });
    let mut values = BTreeMap::from([("sx".to_string(), sx), ("sy".to_string(), sy)]);
    values.insert("gaussian_pairs".into(), total[2..].iter().sum());
    let reference = data
        .sums
        .map(|(sx_ref, sy_ref)| {
            BTreeMap::from([("sx".to_string(), sx_ref), ("sy".to_string(), sy_ref)])
        })
        .unwrap_or_default();
    let numbers = 2f64.powi(m as i32 + 1);
    Ok(Some(Outcome {
        kernel: "EP".into(),
        class: class.to_string(),
        ranks: world.size(),
        variant: variant.to_string(),
        time_s: elapsed,
        mops: numbers / elapsed / 1e6,
        verified,
        values,
        reference,
        size: format!("{}", 1u64 << (m + 1)),
        iterations: 0,
        operation: "Random numbers generated".into(),
        profile: BTreeMap::new(),
        ..Outcome::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logarithm_is_within_a_few_ulps() {
        let mut worst = 0.0f64;
        let mut x = 1e-30;
        while x <= 1.0 {
            for m in [1.0, 1.1, 1.3, 1.41, 1.42, 1.7, 1.99] {
                let v = x * m;
                let got = ln(v);
                let want = v.ln();
                worst = worst.max(((got - want) / want.abs().max(1e-300)).abs());
            }
            x *= 1.37;
        }
        assert!(worst < 1e-15, "worst relative error {worst:e}");
        assert_eq!(ln(1.0), 0.0);
    }

    #[test]
    fn pairs_come_from_the_sequence_in_order() {
        let mut s = Scratch::default();
        generate_pairs(SEED, &mut s.first, &mut s.second);
        let mut x = SEED;
        for i in 0..NK {
            assert_eq!(s.first[i], {
                x = mul_mod(A, x);
                x
            });
            assert_eq!(s.second[i], {
                x = mul_mod(A, x);
                x
            });
        }
        assert_eq!(unit(s.first[0]), s.first[0] as f64 / (1u64 << 46) as f64);
    }

    #[test]
    fn the_vector_tally_matches_the_reference_form() {
        // Batches at the start and deep into class C's range (batch numbers near 2¹⁶).
        for (first, last) in [(0, 3), (65_530, 65_533)] {
            let want = tally_reference(first, last);
            let got = tally(first, last, &mut Scratch::default());
            assert_eq!(got.q, want.q, "annulus counts, batches {first}..{last}");
            for (g, w) in [(got.sx, want.sx), (got.sy, want.sy)] {
                assert!(((g - w) / w).abs() < 1e-12, "{g} against {w}");
            }
        }
    }
}
